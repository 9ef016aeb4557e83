//! The host between the jobs and the block layer: the page cache and read-ahead that buffered
//! reads (`direct=0`) go through, as Linux's mm/filemap.c reads (`filemap_read`,
//! `filemap_get_pages`), and the writeback of buffered writes (mm/page-writeback.c,
//! fs/fs-writeback.c); and the indirect blocks of block-mapped files (fs/ext3/inode.c).

pub mod blockmap;
pub mod pagecache;
pub mod readahead;
pub mod writeback;

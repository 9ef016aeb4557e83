//! The host between the jobs and the block layer: the page cache and read-ahead that buffered
//! reads (`direct=0`) go through, as Linux's mm/filemap.c reads (`filemap_read`,
//! `filemap_get_pages`).

pub mod pagecache;
pub mod readahead;

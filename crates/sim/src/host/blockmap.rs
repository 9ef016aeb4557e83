//! Block-mapped files (ext2, ext3, ext4 without extents): the indirect blocks a read or write
//! of a file must have in memory before its data can be found.
//!
//! An inode of these file systems holds 15 block numbers (fs/ext3/inode.c,
//! `ext3_block_to_path`): 12 direct ones, then one indirect block of 1024 numbers (4 KiB
//! blocks), one double-indirect and one triple-indirect. Logical block `b` of a file is found
//! through the chain of blocks from the inode down to it:
//!
//! ```text
//! b < 12                      direct: nothing to read
//! b < 12 + 1024               IND
//! b < 12 + 1024 + 1024^2      DIND, then DIND's child (b - 1036) / 1024
//! beyond                      TIND, its child, its grandchild
//! ```
//!
//! `ext3_get_branch` reads every block of the chain that is not in the buffer cache with
//! `sb_bread`, one after the other, waiting for each: a synchronous 4 KiB read in the context of
//! the task that asked (the reader's own queue in the I/O scheduler), before the data request
//! is even built. A 2 GB file has 512 indirect blocks, each mapping 4 MiB, so random reads over
//! it read one more block for every read whose 4 MiB has not been read yet: few once the file
//! is warm, nearly all when many files share the cache's first minutes (seed 003's random
//! readers, each on a 2 GB file of its own).
//!
//! Where a mapping block lies: ext3 allocates a file's indirect blocks in the same run as the
//! data they map (`ext3_alloc_branch`), just before it; here a block at depth `k` above the data
//! lies `k` blocks before the first data block it maps (the data is not shifted to make room).
//! The buffer cache keeps the mapping blocks read until the caches are dropped.

/// The file system's block, bytes.
pub const BLOCK: u64 = 4096;
/// Block numbers in the inode before the indirect ones.
const DIRECT: u64 = 12;
/// Block numbers in one mapping block (4-byte numbers in a 4 KiB block).
const PER_BLOCK: u64 = BLOCK / 4;

/// One mapping block of a file: the file (its first device byte), and which block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MapBlock {
    /// Device offset of the file's logical block 0.
    pub file_start: u64,
    /// Depth above the data (1: an indirect block whose numbers are data blocks).
    pub depth: u8,
    /// Which of the blocks at that place in the tree: the first logical data block it maps.
    pub first_mapped: u64,
}

impl MapBlock {
    /// Device offset of the block.
    pub fn offset(&self) -> u64 {
        let before = u64::from(self.depth).min(self.first_mapped);
        self.file_start + (self.first_mapped - before) * BLOCK
    }
}

/// The mapping blocks logical block `block` of the file at `file_start` needs, from the
/// inode's down to the data's (`ext3_block_to_path`); none for a direct block, or past the
/// largest file the tree maps.
pub fn path(file_start: u64, block: u64) -> impl Iterator<Item = MapBlock> {
    let at = |depth: u8, first_mapped: u64| MapBlock {
        file_start,
        depth,
        first_mapped,
    };
    let single = DIRECT;
    let double = single + PER_BLOCK;
    let triple = double + PER_BLOCK * PER_BLOCK;
    let end = triple + PER_BLOCK * PER_BLOCK * PER_BLOCK;
    let mut chain = [None; 3];
    if (single..double).contains(&block) {
        chain[0] = Some(at(1, single));
    } else if (double..triple).contains(&block) {
        let child = double + (block - double) / PER_BLOCK * PER_BLOCK;
        chain[0] = Some(at(2, double));
        chain[1] = Some(at(1, child));
    } else if (triple..end).contains(&block) {
        let span = PER_BLOCK * PER_BLOCK;
        let child = triple + (block - triple) / span * span;
        let grandchild = triple + (block - triple) / PER_BLOCK * PER_BLOCK;
        chain[0] = Some(at(3, triple));
        chain[1] = Some(at(2, child));
        chain[2] = Some(at(1, grandchild));
    }
    chain.into_iter().flatten()
}

/// The first mapping block that bytes `[offset, offset + len)` of the file at `file_start`
/// (device offsets) need and `cached` says are not in memory, in the order the kernel reads
/// them: block by block, each chain from the inode down.
pub fn first_missing(
    file_start: u64,
    offset: u64,
    len: u64,
    cached: impl Fn(&MapBlock) -> bool,
) -> Option<MapBlock> {
    if len == 0 || offset < file_start {
        return None;
    }
    let first = (offset - file_start) / BLOCK;
    let last = (offset + len - 1 - file_start) / BLOCK;
    let mut block = first;
    while block <= last {
        if let Some(missing) = path(file_start, block).find(|m| !cached(m)) {
            return Some(missing);
        }
        // Blocks up to the end of this indirect block's reach share its chain.
        block = match path(file_start, block).last() {
            Some(leaf) => leaf.first_mapped + PER_BLOCK,
            None => block + 1,
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The chains ext3_block_to_path gives at each boundary of the tree.
    #[test]
    fn chains_follow_ext3_block_to_path() {
        let depths = |b: u64| path(0, b).map(|m| m.depth).collect::<Vec<_>>();
        assert!(depths(0).is_empty());
        assert!(depths(11).is_empty());
        assert_eq!(depths(12), vec![1]);
        assert_eq!(depths(1035), vec![1]);
        assert_eq!(depths(1036), vec![2, 1]);
        assert_eq!(depths(1036 + 1024 * 1024 - 1), vec![2, 1]);
        assert_eq!(depths(1036 + 1024 * 1024), vec![3, 2, 1]);
        // Blocks 1036..2060 share one indirect block; 2060 starts the next.
        let leaf = |b: u64| path(0, b).last().unwrap();
        assert_eq!(leaf(1036), leaf(2059));
        assert_ne!(leaf(2059), leaf(2060));
        assert_eq!(leaf(2060).first_mapped, 2060);
        // The double-indirect block is shared by all of them.
        assert_eq!(path(0, 1036).next(), path(0, 500_000).next());
    }

    /// A 2 GB file has 512 indirect blocks below its double-indirect one, plus the first.
    #[test]
    fn a_2gb_file_has_one_indirect_block_per_4mib() {
        let blocks = (2u64 << 30) / BLOCK;
        let all: BTreeSet<MapBlock> = (0..blocks).flat_map(|b| path(1 << 20, b)).collect();
        assert_eq!(all.len(), 1 + 1 + 511);
        assert!(all.iter().all(|m| m.offset() >= 1 << 20));
    }

    /// The first missing block is the outermost of the first chain not all cached, and a
    /// range crossing into the next indirect block's reach needs that one too.
    #[test]
    fn first_missing_goes_down_each_chain_in_order() {
        let start = 1 << 20;
        let at = |b: u64| start + b * BLOCK;
        let mut cached = BTreeSet::new();
        assert_eq!(
            first_missing(start, at(5), BLOCK, |m| cached.contains(m)),
            None
        );
        let missing = first_missing(start, at(5000), BLOCK, |m| cached.contains(m)).unwrap();
        assert_eq!(missing.depth, 2);
        cached.insert(missing);
        let missing = first_missing(start, at(5000), BLOCK, |m| cached.contains(m)).unwrap();
        assert_eq!((missing.depth, missing.first_mapped), (1, 4108));
        cached.insert(missing);
        assert_eq!(
            first_missing(start, at(5000), BLOCK, |m| cached.contains(m)),
            None
        );
        // 8 KiB ending in the next indirect block's first data block.
        let missing = first_missing(start, at(5131), 2 * BLOCK, |m| cached.contains(m)).unwrap();
        assert_eq!(missing.first_mapped, 5132);
    }
}

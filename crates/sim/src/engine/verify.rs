//! fio's `verify` in the simulator: what each block of the device holds, and the checks a
//! verifying job makes when it reads.
//!
//! The simulator moves no data, so a block's content is what identifies it: the offset and
//! length it was written with and, for a write of a verifying job, the seed its pattern was
//! drawn from (as the real engine's header carries them, `iosched_uring::verify`). Content
//! changes when a write *completes* (when the device or the page cache has it), in completion
//! order; a verifying job expects the last write it *issued* to each block. The two differ
//! exactly when the stack reorders overlapping writes in flight together (a scheduler or the
//! drive's queue serving a later write to a block before an earlier one), which is what
//! fio's verify finds on real hardware (and why fio has `serialize_overlap`).
//!
//! A read by a verifying job checks, in the real engine's order: that one block written with
//! a header starts at the read's offset (else "never written with a verify header", "written
//! for another block" or "overwritten by a write without a header"), that it has the read's
//! length, and, in the read-back of the job's own writes, its seed (else stale data). The
//! verify method (crc32c, md5, ...) changes nothing here: every method detects these.

use std::collections::BTreeMap;

/// What one written extent of the device holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    len: u64,
    /// The pattern's seed, for a write of a verifying job; `None` for any other write.
    seed: Option<u64>,
}

/// The device's content, as far as writes made it known: extents by start offset, never
/// overlapping. Only kept when a job verifies; its size is bounded by the blocks written.
#[derive(Debug, Default)]
pub(super) struct Contents {
    extents: BTreeMap<u64, Block>,
}

impl Contents {
    /// A write of `len` bytes at `offset` completed, with a verify header of `seed` or none.
    pub(super) fn write(&mut self, offset: u64, len: u64, seed: Option<u64>) {
        if len == 0 {
            return;
        }
        let end = offset + len;
        // Extents that overlap [offset, end): cut what lies outside it back in as headerless
        // pieces (their header is at their start, which is gone unless it is before offset).
        let overlapping: Vec<(u64, Block)> = self
            .extents
            .range(..end)
            .rev()
            .take_while(|(start, block)| **start + block.len > offset)
            .map(|(start, block)| (*start, *block))
            .collect();
        for (start, block) in overlapping {
            self.extents.remove(&start);
            if start < offset {
                // Its head survives with its header; it is shorter than it was written.
                self.extents.insert(
                    start,
                    Block {
                        len: offset - start,
                        seed: block.seed,
                    },
                );
            }
            let block_end = start + block.len;
            if block_end > end {
                self.extents.insert(
                    end,
                    Block {
                        len: block_end - end,
                        seed: None,
                    },
                );
            }
        }
        self.extents.insert(offset, Block { len, seed });
    }

    /// Checks a read of `len` bytes at `offset`: `expected` is the seed of the job's own last
    /// write there (its read-back), or `None` (any block written with a header for this
    /// offset). Returns what is wrong.
    pub(super) fn check(&self, offset: u64, len: u64, expected: Option<u64>) -> Result<(), String> {
        let Some((&start, block)) = self.extents.range(..=offset).next_back() else {
            return Err("never written with a verify header".into());
        };
        if start + block.len <= offset {
            return Err("never written with a verify header".into());
        }
        if start != offset {
            return Err(format!(
                "the data at this offset belongs to a block written at offset {start}"
            ));
        }
        let Some(seed) = block.seed else {
            return Err("overwritten by a write without a verify header".into());
        };
        if block.len < len {
            return Err(format!(
                "the block holds {} bytes, the read {len}: a later write cut it short",
                block.len
            ));
        }
        if block.len != len {
            return Err(format!(
                "written as a {}-byte block, read as {len} bytes",
                block.len
            ));
        }
        match expected {
            Some(wanted) if wanted != seed => Err(format!(
                "stale data: the block holds the write of seed {seed:#x}, the job's last write \
                 there had seed {wanted:#x} (an earlier write completed after it)"
            )),
            _ => Ok(()),
        }
    }
}

/// A verifying job's books: what it wrote, and how far its read-back has got.
#[derive(Debug)]
pub(super) struct JobVerify {
    /// Read back what was written when the writes are done (`do_verify`).
    pub read_back: bool,
    /// The method as written, for the notes.
    pub method: String,
    /// Every block written, latest write per offset: offset -> (length, seed).
    pub written: BTreeMap<u64, (u64, u64)>,
    /// Seeds of the writes in flight, by (offset, issue time): the content they complete with.
    pub in_flight: BTreeMap<(u64, u64), u64>,
    /// Seed of the job's patterns.
    pub seed: u64,
    /// Writes issued with a header.
    pub writes: u64,
    /// The read-back queue, in offset order, and the next entry to issue.
    pub queue: Vec<(u64, (u64, u64))>,
    pub next: usize,
    pub started: bool,
    /// Reads checked, and those that failed.
    pub checked: u64,
    pub failures: u64,
}

impl JobVerify {
    /// The books of a job verifying with `method`, its patterns drawn from `seed`.
    pub(super) fn new(method: &str, read_back: bool, seed: u64) -> JobVerify {
        JobVerify {
            read_back,
            method: method.to_string(),
            written: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            seed,
            writes: 0,
            queue: Vec::new(),
            next: 0,
            started: false,
            checked: 0,
            failures: 0,
        }
    }

    /// What the run's notes say of it.
    pub(super) fn outcome(&self, writes: bool) -> String {
        let outcome = match (self.started, self.failures) {
            (true, 0) => format!("all {} read back and verified", self.queue.len()),
            (true, n) => format!("{n} of {} read back did not verify", self.queue.len()),
            (false, 0) if !writes => format!("all {} blocks read verified", self.checked),
            (false, n) if !writes => format!("{n} of {} blocks read did not verify", self.checked),
            (false, _) => {
                "not read back (do_verify=0, the job failed, or exitall or steady state ended it)"
                    .into()
            }
        };
        if writes {
            format!(
                "verify={}: {} blocks written with a verify header; {outcome}",
                self.method, self.writes
            )
        } else {
            format!("verify={}: {outcome}", self.method)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the content model: a block reads back with its own seed; a later write of the
    // same block replaces it; a write over part of it cuts it; unwritten space and plain
    // writes have no header.
    #[test]
    fn contents_follow_completed_writes() {
        let mut contents = Contents::default();
        assert!(contents.check(0, 4096, None).is_err());
        contents.write(0, 4096, Some(1));
        contents.write(4096, 4096, Some(2));
        assert_eq!(contents.check(0, 4096, Some(1)), Ok(()));
        assert_eq!(contents.check(4096, 4096, None), Ok(()));
        contents.write(0, 4096, Some(3));
        assert!(contents
            .check(0, 4096, Some(1))
            .unwrap_err()
            .contains("stale"));
        // A plain write over the second half of block 2 cuts it short.
        contents.write(6144, 2048, None);
        assert!(contents
            .check(4096, 4096, Some(2))
            .unwrap_err()
            .contains("cut it short"));
        assert!(contents
            .check(6144, 2048, None)
            .unwrap_err()
            .contains("without"));
        // A big write over both: reading the old block offsets finds another block.
        contents.write(0, 16384, Some(4));
        assert!(contents
            .check(4096, 4096, None)
            .unwrap_err()
            .contains("written at offset 0"));
        assert_eq!(contents.check(0, 16384, Some(4)), Ok(()));
        assert_eq!(contents.extents.len(), 1);
    }
}

//! fio's `verify=crc32c`: blocks that carry a header and a checksum, checked when read back.
//!
//! Every block a verifying job writes starts with a 32-byte header, followed by a pattern drawn
//! from the header's seed:
//!
//! | bytes  | field                                             |
//! |--------|---------------------------------------------------|
//! | 0..4   | magic `iosv`                                      |
//! | 4..6   | format version (1), little endian                 |
//! | 6..8   | method (1: crc32c)                                |
//! | 8..12  | block length in bytes                             |
//! | 12..16 | crc32c of the whole block, these four bytes left out |
//! | 16..24 | the block's offset in its file                    |
//! | 24..32 | the seed of the pattern                           |
//!
//! A block read back is checked in that order: magic, length, offset (a block written for
//! another offset, or never written), checksum, and, when the job itself wrote it in this run,
//! the seed (stale data from an earlier write). Since the pattern can be regenerated from the
//! seed, a checksum failure names the first wrong byte. The layout is iosched's own, not fio's
//! (fio's header has more fields); a file written by one is not verified by the other.

use crate::buffer::fill_pattern;
use std::fmt;

/// Bytes of header at the start of every verified block.
pub const HEADER_LEN: usize = 32;

const MAGIC: [u8; 4] = *b"iosv";
const VERSION: u16 = 1;
const METHOD_CRC32C: u16 = 1;
const CRC_FIELD: std::ops::Range<usize> = 12..16;

/// Whether the real engine checks `method` (fio's `crc32c-intel` is crc32c computed with the
/// same instruction this implementation uses when the processor has it).
pub fn supported(method: &str) -> bool {
    matches!(method, "crc32c" | "crc32c-intel")
}

fn checksum(block: &[u8]) -> u32 {
    let head = crc32c::crc32c(&block[..CRC_FIELD.start]);
    crc32c::crc32c_append(head, &block[CRC_FIELD.end..])
}

/// Fills `block`, to be written at `offset`, with a header and the pattern of `seed`.
pub fn fill(block: &mut [u8], offset: u64, seed: u64) {
    assert!(
        block.len() >= HEADER_LEN,
        "a verified block holds its header"
    );
    fill_pattern(&mut block[HEADER_LEN..], seed);
    block[0..4].copy_from_slice(&MAGIC);
    block[4..6].copy_from_slice(&VERSION.to_le_bytes());
    block[6..8].copy_from_slice(&METHOD_CRC32C.to_le_bytes());
    let len = block.len() as u32;
    block[8..12].copy_from_slice(&len.to_le_bytes());
    block[16..24].copy_from_slice(&offset.to_le_bytes());
    block[24..32].copy_from_slice(&seed.to_le_bytes());
    let crc = checksum(block);
    block[CRC_FIELD].copy_from_slice(&crc.to_le_bytes());
}

/// A block that did not verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// File offset of the first wrong byte found.
    pub at: u64,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (first wrong byte at offset {})", self.what, self.at)
    }
}

fn u16_at(block: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(block[at..at + 2].try_into().expect("two bytes"))
}

fn u32_at(block: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(block[at..at + 4].try_into().expect("four bytes"))
}

fn u64_at(block: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(block[at..at + 8].try_into().expect("eight bytes"))
}

/// Checks `block`, read at `offset`. `seed` is the seed this run wrote it with, when known.
pub fn check(block: &[u8], offset: u64, seed: Option<u64>) -> Result<(), Mismatch> {
    let mismatch = |index: usize, what: String| Mismatch {
        at: offset + index as u64,
        what,
    };
    if block.len() < HEADER_LEN {
        return Err(mismatch(0, "block too small for a verify header".into()));
    }
    if block[0..4] != MAGIC || u16_at(block, 4) != VERSION || u16_at(block, 6) != METHOD_CRC32C {
        let index = (0..8)
            .find(|&i| {
                let mut expected = [0u8; 8];
                expected[..4].copy_from_slice(&MAGIC);
                expected[4..6].copy_from_slice(&VERSION.to_le_bytes());
                expected[6..8].copy_from_slice(&METHOD_CRC32C.to_le_bytes());
                block[i] != expected[i]
            })
            .unwrap_or(0);
        return Err(mismatch(
            index,
            "no verify header: the block was never written with verify=crc32c, or its header \
             is corrupt"
                .into(),
        ));
    }
    let recorded_len = u32_at(block, 8) as usize;
    if recorded_len != block.len() {
        return Err(mismatch(
            8,
            format!(
                "the header records a block of {recorded_len} bytes but {} were read (verify \
                 with the block size the data was written with)",
                block.len()
            ),
        ));
    }
    let recorded_offset = u64_at(block, 16);
    if recorded_offset != offset {
        return Err(mismatch(
            16,
            format!(
                "the header records offset {recorded_offset}: this block holds data written \
                 for another place"
            ),
        ));
    }
    let stored = u32_at(block, CRC_FIELD.start);
    let computed = checksum(block);
    if stored != computed {
        let mut expected = vec![0u8; block.len()];
        fill(&mut expected, recorded_offset, u64_at(block, 24));
        let index = block
            .iter()
            .zip(&expected)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(mismatch(
            index,
            format!(
                "the data does not match its crc32c (stored {stored:#010x}, computed \
                 {computed:#010x})"
            ),
        ));
    }
    if let Some(seed) = seed {
        let recorded_seed = u64_at(block, 24);
        if recorded_seed != seed {
            return Err(mismatch(
                24,
                format!(
                    "stale data: the block verifies but was written by an earlier write (seed \
                     {recorded_seed:#x}, this run wrote {seed:#x})"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(offset: u64, seed: u64) -> Vec<u8> {
        let mut block = vec![0u8; 4096];
        fill(&mut block, offset, seed);
        block
    }

    #[test]
    fn a_written_block_verifies() {
        let written = block(8192, 77);
        assert_eq!(check(&written, 8192, Some(77)), Ok(()));
        assert_eq!(check(&written, 8192, None), Ok(()));
    }

    // Proves each kind of damage is found and the first wrong byte named.
    #[test]
    fn damage_is_located() {
        let written = block(8192, 77);
        let mut flipped = written.clone();
        flipped[1000] ^= 0x40;
        let error = check(&flipped, 8192, None).unwrap_err();
        assert_eq!(error.at, 8192 + 1000);
        assert!(error.what.contains("crc32c"), "{error}");

        let mut crc = written.clone();
        crc[13] ^= 1;
        assert_eq!(check(&crc, 8192, None).unwrap_err().at, 8192 + 13);

        let zeros = vec![0u8; 4096];
        let error = check(&zeros, 4096, None).unwrap_err();
        assert_eq!(error.at, 4096);
        assert!(error.what.contains("no verify header"));

        let error = check(&written, 4096, None).unwrap_err();
        assert!(error.what.contains("records offset 8192"), "{error}");

        let error = check(&written, 8192, Some(78)).unwrap_err();
        assert!(error.what.contains("stale"), "{error}");

        let error = check(&written[..2048], 8192, None).unwrap_err();
        assert!(error.what.contains("4096 bytes"), "{error}");
        assert!(supported("crc32c") && supported("crc32c-intel") && !supported("md5"));
    }
}

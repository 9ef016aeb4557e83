//! Maps keyed by request id, on the hot path of every I/O.
//!
//! Request ids are handed out in sequence, so they need no protection against crafted keys:
//! a multiplicative hash (Fibonacci hashing) spreads them as well as std's SipHash at a
//! fraction of the cost, which matters at a few hundred thousand lookups per second.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for `u64` ids: one multiplication.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only ids are hashed; any other key still hashes correctly, byte by byte.
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map from request id to `V`.
pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    // Proves sequential ids land in distinct buckets of a small table (the top bits, which
    // hashbrown uses, differ) and the map behaves as a map.
    #[test]
    fn sequential_ids_spread() {
        let build = BuildHasherDefault::<IdHasher>::default();
        let buckets: std::collections::HashSet<u64> =
            (0..64u64).map(|id| build.hash_one(id) >> 58).collect();
        assert!(buckets.len() > 32, "{}", buckets.len());
        let mut map: IdMap<u64> = IdMap::default();
        for id in 0..1000 {
            map.insert(id, id * 2);
        }
        assert_eq!(map.remove(&500), Some(1000));
        assert_eq!(map.len(), 999);
    }
}

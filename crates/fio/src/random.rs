//! Seeded randomness: every random choice of a run derives from its one seed.
//!
//! Streams for each job and for the device are derived from the run seed with SplitMix64, so
//! adding a job does not change the numbers another job draws.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// SplitMix64's finaliser: a bijective mix of 64 bits.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The seed of stream `stream` of a run seeded with `seed`.
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    mix64(seed ^ mix64(stream.wrapping_add(0x5851_f42d_4c95_7f2d)))
}

/// A fast, seeded generator (PCG 64-bit MCG).
#[derive(Clone, Debug)]
pub struct Rng(Pcg64Mcg);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(Pcg64Mcg::seed_from_u64(seed))
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..bound` (Lemire's multiply-shift with rejection; exact). `bound > 0`.
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "empty range");
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(bound);
            if (product as u64) >= threshold {
                return (product >> 64) as u64;
            }
        }
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal deviate (Box-Muller; one of the pair is discarded for simplicity).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// A pseudo-random permutation of `0..len`: a keyed Feistel network on the smallest even power
/// of two covering `len`, walked until the value falls in range. It lets a random job touch
/// every block exactly once per pass (fio's random map) in O(1) memory, whatever the span.
#[derive(Clone, Debug)]
pub struct Permutation {
    len: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    /// A permutation of `0..len` chosen by `rng`.
    pub fn new(len: u64, rng: &mut Rng) -> Self {
        assert!(len > 0);
        let bits = 64 - (len - 1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let keys = [
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
        ];
        Permutation {
            len,
            half_bits,
            keys,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: permutations are never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The element at position `index` (`index < len`).
    pub fn get(&self, index: u64) -> u64 {
        assert!(index < self.len);
        let mut value = index;
        // Cycle-walking stays in range because the network is a bijection on 0..2^(2*half_bits),
        // which holds at most 4 * len elements: on average under 4 rounds of walking.
        loop {
            value = self.encrypt(value);
            if value < self.len {
                return value;
            }
        }
    }

    fn encrypt(&self, value: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let mut left = value >> self.half_bits;
        let mut right = value & mask;
        for key in self.keys {
            let round = mix64(right ^ key) & mask;
            (left, right) = (right, left ^ round);
        }
        (left << self.half_bits) | right
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the permutation visits every element exactly once, for sizes around powers of two.
    #[test]
    fn permutation_is_a_bijection() {
        let mut rng = Rng::new(7);
        for len in [1u64, 2, 3, 4, 5, 63, 64, 65, 1000, 4097] {
            let permutation = Permutation::new(len, &mut rng);
            let mut seen = vec![false; len as usize];
            for index in 0..len {
                let value = permutation.get(index) as usize;
                assert!(!seen[value], "{value} twice for len {len}");
                seen[value] = true;
            }
        }
    }

    #[test]
    fn below_is_in_range_and_seeded() {
        let mut a = Rng::new(1);
        let mut b = Rng::new(1);
        for bound in 1..200 {
            let x = a.below(bound);
            assert!(x < bound);
            assert_eq!(x, b.below(bound));
        }
        assert_ne!(derive_seed(1, 0), derive_seed(1, 1));
        assert_ne!(derive_seed(1, 0), derive_seed(2, 0));
    }
}

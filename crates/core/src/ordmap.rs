//! [`OrdMap`]: an ordered map that is a sorted vector while it is small and a B-tree when it
//! grows.
//!
//! The policies keep many ordered maps that hold a handful of entries most of the time and
//! sometimes hundreds: a queue's requests by sector (one for a synchronous reader, hundreds for
//! a writer), deadline's requests (up to `nr_requests`), a service tree's busy queues (4 with 4
//! jobs, 1024 with 1024). A `BTreeMap` search, insertion or removal cost 100 to 200
//! instructions even on one node; a binary search and a short shift in a vector cost a few
//! dozen. Up to [`OrdMap::SMALL_MAX`] entries the map is a sorted vector; beyond, a
//! `BTreeMap`, so every operation stays O(log n); it turns back into a vector at
//! [`OrdMap::SMALL_AGAIN`] entries, the gap keeping a map that hovers at the bound from
//! converting at every step.
//!
//! The bound is what a shift costs: 16 KiB of entries ([`SMALL_BYTES`]), at most 128
//! ([`SMALL_ENTRIES`]). A vector's insertion or removal moves the entries after it (all of
//! them when a queue served in order takes its first), a B-tree's a node's worth; at 16 KiB
//! the shift costs about what the B-tree's search does. Measured on this bench's machine:
//!
//! - deadline's sorted requests at 1024 jobs (about 30 queued) went 1.13x faster as a vector
//!   than as a B-tree, and below 16 the vector was the faster in instructions for every policy;
//! - anticipatory's (about 100 sorted requests of 96 bytes behind its 128 `nr_requests`) 1.11x
//!   faster at 1024 jobs with a bound of 128 than with 64;
//! - a FIFO of 24-byte entries served from the front, with 512 requests per queue, 12% slower
//!   as a vector of up to 682 entries (16 KiB) than as a B-tree past 64; within 1% at 128.
//!
//! It offers what the policies use of `BTreeMap`, in the same order with the same answers.

use std::collections::{btree_map, BTreeMap};
use std::ops::{Bound, RangeBounds};

/// Most bytes of entries kept as a sorted vector (see [`OrdMap::SMALL_MAX`]).
pub const SMALL_BYTES: usize = 16 * 1024;

/// Most entries kept as a sorted vector, however small they are.
pub const SMALL_ENTRIES: usize = 128;

/// Fewest entries a map keeps as a sorted vector, however large they are.
pub const SMALL_MIN: usize = 16;

impl<K, V> OrdMap<K, V> {
    /// Most entries kept as a sorted vector: as many as fit in [`SMALL_BYTES`], at least
    /// [`SMALL_MIN`] and at most [`SMALL_ENTRIES`].
    pub const SMALL_MAX: usize = {
        let fit = match SMALL_BYTES.checked_div(std::mem::size_of::<(K, V)>()) {
            Some(fit) => fit,
            None => SMALL_ENTRIES,
        };
        if fit < SMALL_MIN {
            SMALL_MIN
        } else if fit > SMALL_ENTRIES {
            SMALL_ENTRIES
        } else {
            fit
        }
    };

    /// A B-tree that falls to this many entries becomes a vector again.
    pub const SMALL_AGAIN: usize = Self::SMALL_MAX / 2;
}

/// An ordered map by `K` (see the [module documentation](self)).
#[derive(Clone, Debug)]
pub enum OrdMap<K, V> {
    /// Sorted by key, at most [`OrdMap::SMALL_MAX`] entries.
    Small(Vec<(K, V)>),
    /// More than [`OrdMap::SMALL_AGAIN`] entries.
    Large(BTreeMap<K, V>),
}

impl<K, V> Default for OrdMap<K, V> {
    fn default() -> Self {
        OrdMap::Small(Vec::new())
    }
}

impl<K: Ord + Copy, V> OrdMap<K, V> {
    /// An empty map.
    pub const fn new() -> Self {
        OrdMap::Small(Vec::new())
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        match self {
            OrdMap::Small(entries) => entries.len(),
            OrdMap::Large(map) => map.len(),
        }
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts `value` at `key`, returning the value it replaced.
    #[inline(always)]
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self {
            OrdMap::Small(entries) => match entries.binary_search_by(|(k, _)| k.cmp(&key)) {
                Ok(at) => Some(std::mem::replace(&mut entries[at].1, value)),
                Err(at) if entries.len() < Self::SMALL_MAX => {
                    entries.insert(at, (key, value));
                    None
                }
                Err(_) => {
                    let mut map: BTreeMap<K, V> = entries.drain(..).collect();
                    map.insert(key, value);
                    *self = OrdMap::Large(map);
                    None
                }
            },
            OrdMap::Large(map) => map.insert(key, value),
        }
    }

    /// Removes `key`'s entry, returning its value.
    #[inline(always)]
    pub fn remove(&mut self, key: &K) -> Option<V> {
        match self {
            OrdMap::Small(entries) => {
                let at = entries.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
                Some(entries.remove(at).1)
            }
            OrdMap::Large(map) => {
                let value = map.remove(key);
                if map.len() <= Self::SMALL_AGAIN {
                    *self = OrdMap::Small(std::mem::take(map).into_iter().collect());
                }
                value
            }
        }
    }

    /// The value at `key`.
    pub fn get(&self, key: &K) -> Option<&V> {
        match self {
            OrdMap::Small(entries) => entries
                .binary_search_by(|(k, _)| k.cmp(key))
                .ok()
                .map(|at| &entries[at].1),
            OrdMap::Large(map) => map.get(key),
        }
    }

    /// The value at `key`, to change.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        match self {
            OrdMap::Small(entries) => entries
                .binary_search_by(|(k, _)| k.cmp(key))
                .ok()
                .map(|at| &mut entries[at].1),
            OrdMap::Large(map) => map.get_mut(key),
        }
    }

    /// The entry of the least key.
    pub fn first(&self) -> Option<(&K, &V)> {
        match self {
            OrdMap::Small(entries) => entries.first().map(|(k, v)| (k, v)),
            OrdMap::Large(map) => map.first_key_value(),
        }
    }

    /// The entry of the greatest key.
    pub fn last(&self) -> Option<(&K, &V)> {
        match self {
            OrdMap::Small(entries) => entries.last().map(|(k, v)| (k, v)),
            OrdMap::Large(map) => map.last_key_value(),
        }
    }

    /// The entries in key order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        self.range(..)
    }

    /// The keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }

    /// The values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// The entries with keys in `range`, in key order; none when the range is empty or
    /// reversed (where `BTreeMap::range` panics on a reversed one).
    pub fn range<R: RangeBounds<K>>(&self, range: R) -> Iter<'_, K, V> {
        match self {
            OrdMap::Small(entries) => {
                let start = match range.start_bound() {
                    Bound::Included(key) => entries.partition_point(|(k, _)| k < key),
                    Bound::Excluded(key) => entries.partition_point(|(k, _)| k <= key),
                    Bound::Unbounded => 0,
                };
                let end = match range.end_bound() {
                    Bound::Included(key) => entries.partition_point(|(k, _)| k <= key),
                    Bound::Excluded(key) => entries.partition_point(|(k, _)| k < key),
                    Bound::Unbounded => entries.len(),
                };
                Iter::Small(entries[start..end.max(start)].iter())
            }
            OrdMap::Large(map) => {
                if reversed(range.start_bound(), range.end_bound()) {
                    Iter::Small([].iter())
                } else {
                    Iter::Large(map.range(range))
                }
            }
        }
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        match self {
            OrdMap::Small(entries) => entries.clear(),
            OrdMap::Large(_) => *self = OrdMap::Small(Vec::new()),
        }
    }

    /// The values in key order, emptying the map.
    pub fn into_values(self) -> std::vec::IntoIter<V> {
        let values: Vec<V> = match self {
            OrdMap::Small(entries) => entries.into_iter().map(|(_, v)| v).collect(),
            OrdMap::Large(map) => map.into_values().collect(),
        };
        values.into_iter()
    }
}

impl<K: Ord + Copy, V> std::ops::Index<&K> for OrdMap<K, V> {
    type Output = V;

    fn index(&self, key: &K) -> &V {
        self.get(key).expect("no entry for the key")
    }
}

/// Whether a range from `start` to `end` is reversed (`BTreeMap::range` panics on it).
fn reversed<K: Ord>(start: Bound<&K>, end: Bound<&K>) -> bool {
    match (start, end) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    }
}

/// Entries of an [`OrdMap`] in key order, from either end.
pub enum Iter<'a, K, V> {
    /// Over the vector.
    Small(std::slice::Iter<'a, (K, V)>),
    /// Over the B-tree.
    Large(btree_map::Range<'a, K, V>),
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(entries) => entries.next().map(|(k, v)| (k, v)),
            Iter::Large(range) => range.next(),
        }
    }
}

impl<K, V> DoubleEndedIterator for Iter<'_, K, V> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(entries) => entries.next_back().map(|(k, v)| (k, v)),
            Iter::Large(range) => range.next_back(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Step {
        Insert(u8, u32),
        Remove(u8),
        Range(Bound<u8>, Bound<u8>),
    }

    /// Keys from 0 to KEYS - 1: more than `SMALL_MAX` (128 of these small entries), so the
    /// map can become a B-tree.
    const KEYS: u8 = 200;

    fn bound() -> impl Strategy<Value = Bound<u8>> {
        prop_oneof![
            (0..KEYS).prop_map(Bound::Included),
            (0..KEYS).prop_map(Bound::Excluded),
            Just(Bound::Unbounded),
        ]
    }

    /// A step of a growing phase (`grow`: mostly inserts) or a shrinking one.
    fn step(grow: bool) -> impl Strategy<Value = Step> {
        let (inserts, removals) = if grow { (4, 1) } else { (1, 4) };
        prop_oneof![
            inserts => (0..KEYS, any::<u32>()).prop_map(|(k, v)| Step::Insert(k, v)),
            removals => (0..KEYS).prop_map(Step::Remove),
            1 => (bound(), bound()).prop_map(|(a, b)| Step::Range(a, b)),
        ]
    }

    /// A growing phase then a shrinking one: the map crosses SMALL_MAX up and SMALL_AGAIN
    /// down in most cases.
    fn steps() -> impl Strategy<Value = Vec<Step>> {
        (
            proptest::collection::vec(step(true), 0..500),
            proptest::collection::vec(step(false), 0..500),
        )
            .prop_map(|(mut grow, shrink)| {
                grow.extend(shrink);
                grow
            })
    }

    proptest! {
        // Proves the map answers as a BTreeMap through inserts, removals and ranges read from
        // both ends, across its changes between a vector and a B-tree (a growing phase then a
        // shrinking one over 200 keys). Fails if a conversion loses or reorders an entry, or a
        // bound is off by one.
        #[test]
        fn answers_as_a_btreemap(steps in steps()) {
            let mut map = OrdMap::new();
            let mut model = BTreeMap::new();
            for step in steps {
                match step {
                    Step::Insert(k, v) => prop_assert_eq!(map.insert(k, v), model.insert(k, v)),
                    Step::Remove(k) => prop_assert_eq!(map.remove(&k), model.remove(&k)),
                    Step::Range(a, b) => {
                        let got: Vec<_> = map.range((a, b)).collect();
                        let back: Vec<_> = map.range((a, b)).rev().collect();
                        let want: Vec<_> = if reversed(a.as_ref(), b.as_ref()) {
                            Vec::new()
                        } else {
                            model.range((a, b)).collect()
                        };
                        let want_back: Vec<_> = want.iter().rev().copied().collect();
                        prop_assert_eq!(got, want);
                        prop_assert_eq!(back, want_back);
                    }
                }
                prop_assert_eq!(map.len(), model.len());
                prop_assert!(
                    map.len() <= OrdMap::<u8, u32>::SMALL_MAX || matches!(map, OrdMap::Large(_))
                );
                prop_assert_eq!(map.first(), model.first_key_value());
                prop_assert_eq!(map.last(), model.last_key_value());
                for k in [0u8, 7, 23, 47, 64, 119] {
                    prop_assert_eq!(map.get(&k), model.get(&k));
                }
                prop_assert!(map.iter().eq(model.iter()));
            }
        }
    }

    // Proves the bounds follow the entries' size: 16 KiB of them, from 16 to 128 entries.
    #[test]
    fn its_bounds_follow_the_entry_size() {
        assert_eq!(OrdMap::<u32, u32>::SMALL_MAX, SMALL_ENTRIES);
        assert_eq!(OrdMap::<u64, [u8; 248]>::SMALL_MAX, 64);
        assert_eq!(OrdMap::<u64, [u8; 4088]>::SMALL_MAX, SMALL_MIN);
        assert_eq!(OrdMap::<u64, [u8; 248]>::SMALL_AGAIN, 32);
        assert_eq!(OrdMap::<(), ()>::SMALL_MAX, SMALL_ENTRIES);
    }

    // Proves the map becomes a B-tree past SMALL_MAX entries and a vector again at
    // SMALL_AGAIN, keeping its entries.
    #[test]
    fn changes_form_at_its_bounds() {
        const SMALL_MAX: usize = OrdMap::<u32, u32>::SMALL_MAX;
        const SMALL_AGAIN: usize = OrdMap::<u32, u32>::SMALL_AGAIN;
        let mut map = OrdMap::new();
        for k in 0..=SMALL_MAX as u32 {
            map.insert(k, k * 10);
        }
        assert!(matches!(map, OrdMap::Large(_)));
        for k in (SMALL_AGAIN as u32..=SMALL_MAX as u32).rev() {
            assert!(matches!(map, OrdMap::Large(_)));
            assert_eq!(map.remove(&k), Some(k * 10));
        }
        assert!(matches!(map, OrdMap::Small(_)));
        assert_eq!(map.len(), SMALL_AGAIN);
        assert!(map
            .values()
            .copied()
            .eq((0..SMALL_AGAIN as u32).map(|k| k * 10)));
    }
}

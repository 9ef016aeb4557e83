//! cfq's queues and histories by [`QueueKey`], in a slab found through tables rather than by
//! hashing: cfq looks a queue up about twenty times per request, and a hash map hashes the
//! key and probes each time, where a table lookup is two loads.

use super::{QueueKey, IDLE, LOWEST_LEVEL};
use crate::request::FlowId;
use rustc_hash::FxHashMap;

/// Flow ids below this are found through a table indexed by id (the engines hand out a job's
/// index, 0, 1, 2...); others through a hash map. The table grows to the largest id seen
/// below it: at most 256 KiB.
const DENSE_FLOWS: u32 = 1 << 16;

/// Async keys with a class and level within these are found through a fixed table.
const ASYNC_CLASSES: usize = IDLE + 1;
const ASYNC_LEVELS: usize = LOWEST_LEVEL as usize + 1;

/// No entry.
const NONE: u32 = u32::MAX;

/// Values by [`QueueKey`]: a slab of `(key, value)`, a table from flow id to slot for sync
/// keys, one from class and level to slot for async keys, and a hash map for the rest. The
/// order of iteration is the slab's, which a removal changes (the last entry takes the
/// removed one's place); cfq never depends on it.
#[derive(Clone, Debug)]
pub(super) struct KeyedSlab<V> {
    entries: Vec<(QueueKey, V)>,
    by_flow: Vec<u32>,
    by_async: [u32; ASYNC_CLASSES * ASYNC_LEVELS],
    other: FxHashMap<QueueKey, u32>,
}

impl<V> Default for KeyedSlab<V> {
    fn default() -> Self {
        KeyedSlab {
            entries: Vec::new(),
            by_flow: Vec::new(),
            by_async: [NONE; ASYNC_CLASSES * ASYNC_LEVELS],
            other: FxHashMap::default(),
        }
    }
}

/// Where a key's slot is kept.
enum Place {
    Flow(usize),
    Async(usize),
    Other,
}

fn place(key: &QueueKey) -> Place {
    match *key {
        QueueKey::Sync(FlowId(flow)) if flow < DENSE_FLOWS => Place::Flow(flow as usize),
        QueueKey::Async(class, level)
            if class < ASYNC_CLASSES && usize::from(level) < ASYNC_LEVELS =>
        {
            Place::Async(class * ASYNC_LEVELS + usize::from(level))
        }
        _ => Place::Other,
    }
}

impl<V> KeyedSlab<V> {
    #[inline]
    fn slot(&self, key: &QueueKey) -> Option<usize> {
        let slot = match place(key) {
            Place::Flow(flow) => *self.by_flow.get(flow)?,
            Place::Async(index) => self.by_async[index],
            Place::Other => *self.other.get(key)?,
        };
        (slot != NONE).then_some(slot as usize)
    }

    fn set_slot(&mut self, key: QueueKey, slot: u32) {
        match place(&key) {
            Place::Flow(flow) => {
                if flow >= self.by_flow.len() {
                    self.by_flow.resize(flow + 1, NONE);
                }
                self.by_flow[flow] = slot;
            }
            Place::Async(index) => self.by_async[index] = slot,
            Place::Other if slot == NONE => {
                self.other.remove(&key);
            }
            Place::Other => {
                self.other.insert(key, slot);
            }
        }
    }

    #[inline]
    pub(super) fn get(&self, key: &QueueKey) -> Option<&V> {
        let slot = self.slot(key)?;
        Some(&self.entries[slot].1)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, key: &QueueKey) -> Option<&mut V> {
        let slot = self.slot(key)?;
        Some(&mut self.entries[slot].1)
    }

    pub(super) fn contains_key(&self, key: &QueueKey) -> bool {
        self.slot(key).is_some()
    }

    /// The value of `key`, made by `make` if there is none.
    pub(super) fn get_or_insert_with(&mut self, key: QueueKey, make: impl FnOnce() -> V) -> &mut V {
        let slot = match self.slot(&key) {
            Some(slot) => slot,
            None => {
                let slot = self.entries.len();
                self.set_slot(key, u32::try_from(slot).expect("fewer than 2^32 queues"));
                self.entries.push((key, make()));
                slot
            }
        };
        &mut self.entries[slot].1
    }

    pub(super) fn remove(&mut self, key: &QueueKey) -> Option<V> {
        let slot = self.slot(key)?;
        Some(self.remove_slot(slot))
    }

    fn remove_slot(&mut self, slot: usize) -> V {
        let (key, value) = self.entries.swap_remove(slot);
        self.set_slot(key, NONE);
        if let Some(&(moved, _)) = self.entries.get(slot) {
            self.set_slot(moved, slot as u32);
        }
        value
    }

    /// Keeps the entries for which `keep` is true.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&QueueKey, &mut V) -> bool) {
        let mut slot = 0;
        while slot < self.entries.len() {
            let (key, value) = &mut self.entries[slot];
            if keep(key, value) {
                slot += 1;
            } else {
                // The last entry moves here: look at it next.
                self.remove_slot(slot);
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, value)| value)
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, value)| value)
    }
}

impl<V> std::ops::Index<&QueueKey> for KeyedSlab<V> {
    type Output = V;

    fn index(&self, key: &QueueKey) -> &V {
        self.get(key).expect("no entry for the key")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn key(choice: (bool, u32, usize, u8)) -> QueueKey {
        let (sync, flow, class, level) = choice;
        if sync {
            QueueKey::Sync(FlowId(flow))
        } else {
            QueueKey::Async(class, level)
        }
    }

    fn keys() -> impl Strategy<Value = QueueKey> {
        (
            any::<bool>(),
            prop_oneof![0u32..40, DENSE_FLOWS - 2..DENSE_FLOWS + 2, Just(u32::MAX)],
            prop_oneof![0usize..ASYNC_CLASSES, Just(usize::MAX)],
            prop_oneof![0u8..8, Just(u8::MAX)],
        )
            .prop_map(key)
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(QueueKey, u32),
        Remove(QueueKey),
        Bump(QueueKey),
        RetainOdd,
    }

    fn ops() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (keys(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            3 => keys().prop_map(Op::Remove),
            2 => keys().prop_map(Op::Bump),
            1 => Just(Op::RetainOdd),
        ]
    }

    proptest! {
        // Proves the slab and its tables hold what a map would, through insertions, removals
        // (the last entry moving into the freed slot), updates and retains, for sync keys on
        // both sides of the flow table's end and async keys in and out of their table.
        #[test]
        fn the_slab_holds_what_a_map_holds(ops in proptest::collection::vec(ops(), 1..200)) {
            let mut slab = KeyedSlab::default();
            let mut model = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let got = *slab.get_or_insert_with(k, || v);
                        prop_assert_eq!(got, *model.entry(k).or_insert(v));
                    }
                    Op::Remove(k) => prop_assert_eq!(slab.remove(&k), model.remove(&k)),
                    Op::Bump(k) => {
                        if let Some(v) = slab.get_mut(&k) {
                            *v = v.wrapping_add(1);
                        }
                        if let Some(v) = model.get_mut(&k) {
                            *v = v.wrapping_add(1);
                        }
                    }
                    Op::RetainOdd => {
                        slab.retain(|_, v| *v % 2 == 1);
                        model.retain(|_, v| *v % 2 == 1);
                    }
                }
                prop_assert_eq!(slab.len(), model.len());
                for (k, v) in &model {
                    prop_assert_eq!(slab.get(k), Some(v));
                    prop_assert!(slab.contains_key(k));
                }
                let mut values: Vec<u32> = slab.values().copied().collect();
                values.sort_unstable();
                let mut expected: Vec<u32> = model.values().copied().collect();
                expected.sort_unstable();
                prop_assert_eq!(values, expected);
            }
        }
    }
}

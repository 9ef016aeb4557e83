//! An indexed binary min-heap of keys that carry their entity's slot.
//!
//! A key is `(tag << SLOT_BITS) | slot`: a virtual time (below 2^104) with the slot of the
//! entity it belongs to in the low 24 bits. One `u128` comparison therefore orders by time and
//! breaks ties by slot, which makes every order total and deterministic, and an entry is 16
//! bytes: at 10 000 entries the array is 160 KiB and stays in the L2 cache.
//!
//! Each slot is in at most one heap at a time; the heap writes where every slot sits into a
//! position table shared by all heaps of one scheduler, so that an entity can be removed or
//! have its key changed in O(log n) without a search.

/// Low bits of a key that hold the slot.
pub(crate) const SLOT_BITS: u32 = 24;
pub(crate) const SLOT_MASK: u128 = (1 << SLOT_BITS) - 1;

/// The key of `slot` at virtual time `tag` (`tag` below 2^104).
#[inline(always)]
pub(crate) fn key(tag: u128, slot: u32) -> u128 {
    (tag << SLOT_BITS) | slot as u128
}

/// The slot a key belongs to.
#[inline(always)]
pub(crate) fn slot_of(key: u128) -> u32 {
    (key & SLOT_MASK) as u32
}

/// The virtual time of a key.
#[inline(always)]
pub(crate) fn tag_of(key: u128) -> u128 {
    key >> SLOT_BITS
}

/// Min-heap of keys.
#[derive(Clone, Debug, Default)]
pub(crate) struct Heap {
    items: Vec<u128>,
}

impl Heap {
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of keys.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Takes every key out, in no particular order (the positions of their slots are left to
    /// the caller).
    pub fn drain(&mut self) -> std::vec::Drain<'_, u128> {
        self.items.drain(..)
    }

    /// The smallest key.
    #[inline(always)]
    pub fn peek(&self) -> Option<u128> {
        self.items.first().copied()
    }

    /// The key at heap position `at`.
    #[cfg(test)]
    pub fn get(&self, at: u32) -> u128 {
        self.items[at as usize]
    }

    /// Every key, in heap order (for tests).
    #[cfg(test)]
    pub fn keys(&self) -> &[u128] {
        &self.items
    }

    /// Adds `key`; records its position in `pos[slot_of(key)]`.
    #[inline]
    pub fn push(&mut self, key: u128, pos: &mut [u32]) {
        let at = self.items.len();
        self.items.push(key);
        self.sift_up(at, key, pos);
    }

    /// Removes the smallest key.
    #[inline]
    pub fn pop(&mut self, pos: &mut [u32]) {
        self.remove(0, pos);
    }

    /// Removes the key at heap position `at`.
    #[inline]
    pub fn remove(&mut self, at: u32, pos: &mut [u32]) {
        let at = at as usize;
        let last = self.items.pop().expect("remove from an empty heap");
        if at == self.items.len() {
            return;
        }
        if at == 0 {
            // The last key is among the largest: sink the hole to the bottom along the
            // smaller children (one comparison per level, not two), then sift the last key
            // up from there (Floyd's trick; usually it stays at the bottom).
            let bottom = self.sink_hole(pos);
            self.sift_up(bottom, last, pos);
        } else if last < self.items[(at - 1) / 2] {
            self.sift_up(at, last, pos);
        } else {
            self.sift_down(at, last, pos);
        }
    }

    /// Replaces the smallest key by `key` (the root has no parent: sifting down suffices).
    #[inline]
    pub fn replace_top(&mut self, key: u128, pos: &mut [u32]) {
        self.sift_down(0, key, pos);
    }

    /// Replaces the key at heap position `at` and restores the heap order.
    #[inline]
    pub fn set_key(&mut self, at: u32, key: u128, pos: &mut [u32]) {
        let at = at as usize;
        if key < self.items[at] {
            self.sift_up(at, key, pos);
        } else {
            self.sift_down(at, key, pos);
        }
    }

    /// Puts `key` at `at` or above, moving larger parents down.
    #[inline]
    fn sift_up(&mut self, mut at: usize, key: u128, pos: &mut [u32]) {
        let items = &mut self.items[..];
        while at > 0 {
            let parent = (at - 1) / 2;
            let above = items[parent];
            if key >= above {
                break;
            }
            items[at] = above;
            pos[slot_of(above) as usize] = at as u32;
            at = parent;
        }
        items[at] = key;
        pos[slot_of(key) as usize] = at as u32;
    }

    /// The smaller child of a node whose left child is `left` (which exists); branch-free, as
    /// which child is smaller is a coin toss a branch would mispredict.
    #[inline(always)]
    fn smaller_child(items: &[u128], left: usize) -> usize {
        let right = left + 1;
        if right < items.len() {
            left + (items[right] < items[left]) as usize
        } else {
            left
        }
    }

    /// Puts `key` at `at` or below, moving smaller children up.
    #[inline]
    fn sift_down(&mut self, mut at: usize, key: u128, pos: &mut [u32]) {
        let items = &mut self.items[..];
        let len = items.len();
        loop {
            let left = 2 * at + 1;
            if left >= len {
                break;
            }
            let child = Self::smaller_child(items, left);
            let below = items[child];
            if below >= key {
                break;
            }
            items[at] = below;
            pos[slot_of(below) as usize] = at as u32;
            at = child;
        }
        items[at] = key;
        pos[slot_of(key) as usize] = at as u32;
    }

    /// Moves the smaller child up into the hole at the root, level by level, and returns
    /// where the hole ends, at the bottom.
    #[inline]
    fn sink_hole(&mut self, pos: &mut [u32]) -> usize {
        let items = &mut self.items[..];
        let len = items.len();
        let mut at = 0;
        loop {
            let left = 2 * at + 1;
            if left >= len {
                return at;
            }
            let child = Self::smaller_child(items, left);
            let below = items[child];
            items[at] = below;
            pos[slot_of(below) as usize] = at as u32;
            at = child;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(heap: &Heap, pos: &[u32]) {
        for (at, &k) in heap.keys().iter().enumerate() {
            assert_eq!(pos[slot_of(k) as usize] as usize, at);
            if at > 0 {
                assert!(k >= heap.keys()[(at - 1) / 2]);
            }
        }
    }

    // Proves pops come out in (time, slot) order and positions stay right through removals and
    // key changes in the middle of the heap.
    #[test]
    fn orders_by_time_then_slot_and_tracks_positions() {
        let mut pos = vec![0u32; 64];
        let mut heap = Heap::default();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for slot in 0..64u32 {
            heap.push(key((next() % 8) as u128, slot), &mut pos);
            check(&heap, &pos);
        }
        for slot in (0..64u32).step_by(3) {
            let at = pos[slot as usize];
            heap.set_key(at, key((next() % 8) as u128, slot), &mut pos);
            check(&heap, &pos);
        }
        for slot in (1..64u32).step_by(5) {
            let at = pos[slot as usize];
            assert_eq!(slot_of(heap.get(at)), slot);
            heap.remove(at, &mut pos);
            check(&heap, &pos);
        }
        let mut last: Option<u128> = None;
        while let Some(top) = heap.peek() {
            if let Some(previous) = last {
                assert!(tag_of(previous) < tag_of(top) || slot_of(previous) < slot_of(top));
            }
            last = Some(top);
            heap.pop(&mut pos);
            check(&heap, &pos);
        }
    }
}

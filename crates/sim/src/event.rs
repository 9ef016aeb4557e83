//! The event queue: events ordered by (time, sequence number).
//!
//! Events at the same time leave in the order they were scheduled, so a run never depends on how
//! a heap breaks ties; with one seed, a run is the same byte for byte.

use iosched_core::Nanos;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    time: Nanos,
    sequence: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.sequence) == (other.time, other.sequence)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: invert so the earliest (time, sequence) is on top.
        (other.time, other.sequence).cmp(&(self.time, self.sequence))
    }
}

/// A priority queue of events keyed by time, FIFO among equal times.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_sequence: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_sequence: 0,
        }
    }

    /// Schedules `event` at `time`.
    pub fn push(&mut self, time: Nanos, event: E) {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.heap.push(Entry {
            time,
            sequence,
            event,
        });
    }

    /// Removes the earliest event.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|entry| (entry.time, entry.event))
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|entry| entry.time)
    }

    /// Number of scheduled events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // Model-based: the heap must pop exactly what a naive scan of a list would, in the same
        // order, for any interleaving of pushes and pops.
        #[test]
        fn matches_a_scan_based_queue(operations in proptest::collection::vec((any::<bool>(), 0u64..20), 0..300)) {
            let mut queue = EventQueue::new();
            let mut model: Vec<(u64, u64, usize)> = Vec::new();
            let mut sequence = 0u64;
            for (index, (push, time)) in operations.into_iter().enumerate() {
                if push {
                    queue.push(time, index);
                    model.push((time, sequence, index));
                    sequence += 1;
                } else {
                    let expected = model
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, (t, s, _))| (*t, *s))
                        .map(|(position, _)| position)
                        .map(|position| model.remove(position))
                        .map(|(t, _, e)| (t, e));
                    prop_assert_eq!(queue.pop(), expected);
                }
                prop_assert_eq!(queue.len(), model.len());
            }
        }
    }
}

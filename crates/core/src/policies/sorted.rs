//! Queued requests by sector and by FIFO expiry, for each direction: the sort list and FIFO
//! list that mq-deadline keeps per priority level (`dd_per_prio`'s `sort_list[]` and
//! `fifo_list[]`) and the anticipatory scheduler per queue (`as_data`'s).
//!
//! The requests stay in one place (a slab) and the sort lists hold their keys there: a sort
//! list is an [`OrdMap`], a sorted vector up to 128 entries, whose insertions and removals
//! shift the entries after them, 24 bytes each this way where a request with its key is 96.

use crate::ordmap::OrdMap;
use crate::request::{Request, RequestId};
use crate::time::Nanos;
use slab::Slab;
use std::ops::RangeBounds;

/// A request's place in its direction's sort list: its first byte, then its id.
pub(crate) type SortKey = (u64, RequestId);

/// A queued request and when its FIFO expiry comes (the kernel's `rq->fifo_time`).
#[derive(Debug)]
pub(crate) struct Sorted {
    pub(crate) request: Request,
    pub(crate) fifo_time: Nanos,
}

/// The queued requests of both directions (index 0 and 1, as the policy numbers them).
#[derive(Debug, Default)]
pub(crate) struct SortedRequests {
    sort: [OrdMap<SortKey, u32>; 2],
    /// By expiry, then id: each request's first byte (its sort key with the id).
    fifo: [OrdMap<(Nanos, RequestId), u64>; 2],
    entries: Slab<Sorted>,
}

impl SortedRequests {
    /// Requests queued in both directions.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether `dir` has no request queued.
    #[inline]
    pub(crate) fn is_empty(&self, dir: usize) -> bool {
        self.sort[dir].is_empty()
    }

    /// Queues `entry` in `dir`.
    #[inline]
    pub(crate) fn add(&mut self, dir: usize, entry: Sorted) {
        let key = (entry.request.offset, entry.request.id);
        self.fifo[dir].insert((entry.fifo_time, key.1), key.0);
        let at = u32::try_from(self.entries.insert(entry)).expect("fewer than 2^32 requests");
        let previous = self.sort[dir].insert(key, at);
        assert!(previous.is_none(), "request ids are unique");
    }

    /// Takes the request at `key` out of both lists.
    #[inline]
    pub(crate) fn remove(&mut self, dir: usize, key: SortKey) -> Sorted {
        let at = self.sort[dir].remove(&key).expect("on the sort list");
        let entry = self.entries.remove(at as usize);
        let removed = self.fifo[dir].remove(&(entry.fifo_time, key.1));
        assert!(removed.is_some(), "on the FIFO");
        entry
    }

    /// The queued request at `key`.
    #[inline]
    pub(crate) fn get(&self, dir: usize, key: &SortKey) -> &Sorted {
        &self.entries[self.sort[dir][key] as usize]
    }

    /// The queued request at `key`, to merge into (its sort key and expiry must not change:
    /// a front merge takes it out and queues it again).
    #[inline]
    pub(crate) fn get_mut(&mut self, dir: usize, key: &SortKey) -> &mut Sorted {
        &mut self.entries[self.sort[dir][key] as usize]
    }

    /// The requests of `dir` with sort keys in `range`, in order.
    #[inline]
    pub(crate) fn range(
        &self,
        dir: usize,
        range: impl RangeBounds<SortKey>,
    ) -> impl DoubleEndedIterator<Item = (SortKey, &Sorted)> {
        self.sort[dir]
            .range(range)
            .map(|(&key, &at)| (key, &self.entries[at as usize]))
    }

    /// The sort key of the request of `dir` with the lowest offset.
    #[inline]
    pub(crate) fn first(&self, dir: usize) -> Option<SortKey> {
        self.sort[dir].first().map(|(&key, _)| key)
    }

    /// The sort key of the request at the head of `dir`'s FIFO.
    #[inline]
    pub(crate) fn fifo_head(&self, dir: usize) -> Option<SortKey> {
        self.fifo[dir]
            .first()
            .map(|(&(_, id), &offset)| (offset, id))
    }

    /// The FIFO expiry of the request at the head of `dir`'s FIFO.
    #[inline]
    pub(crate) fn fifo_head_time(&self, dir: usize) -> Option<Nanos> {
        self.fifo[dir].first().map(|(&(fifo_time, _), _)| fifo_time)
    }

    /// The queued request of `dir` just below `below` in the sort list, if it ends at
    /// `below`'s offset and `fits` takes it: a back merge's partner, with `below` the new
    /// request's `(offset, RequestId(0))` or a queued request's own key (the elevator's
    /// `elv_rqhash_find` finds it by its end: the same answer while no queued requests
    /// overlap).
    #[inline]
    pub(crate) fn ending_at(
        &self,
        dir: usize,
        below: SortKey,
        fits: impl Fn(&Request) -> bool,
    ) -> Option<SortKey> {
        self.range(dir, ..below)
            .next_back()
            .filter(|(_, queued)| queued.request.end() == below.0 && fits(&queued.request))
            .map(|(key, _)| key)
    }

    /// The first queued request of `dir` that starts at `end`, if `fits` takes it: a front
    /// merge's partner (`elv_rb_find` on the sort list).
    #[inline]
    pub(crate) fn starting_at(
        &self,
        dir: usize,
        end: u64,
        fits: impl Fn(&Request) -> bool,
    ) -> Option<SortKey> {
        self.range(dir, (end, RequestId(0))..)
            .next()
            .filter(|(key, queued)| key.0 == end && fits(&queued.request))
            .map(|(key, _)| key)
    }

    /// Every queued request, in no particular order, emptying both lists.
    #[inline]
    pub(crate) fn take_all(&mut self, out: &mut Vec<Sorted>) {
        for dir in 0..2 {
            self.fifo[dir].clear();
            self.sort[dir].clear();
        }
        out.extend(self.entries.drain());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Op;
    use crate::testing::request as make;
    use proptest::prelude::*;

    fn request(id: u64, offset: u64, len: u64) -> Request {
        make(id, Op::Read, offset, len)
    }

    proptest! {
        // Model-based: through additions and removals in both directions the lists keep
        // every request once, the sort list by (offset, id) and the FIFO by (expiry, id),
        // and the merge partners found are a scan's. Offsets and lengths come from small sets
        // so that requests touch and overlap.
        #[test]
        fn the_lists_keep_each_request_in_both_orders(
            ops in proptest::collection::vec((any::<bool>(), 0usize..2, 0u64..40, 1u64..4, 0u64..30), 0..300),
        ) {
            let mut lists = SortedRequests::default();
            let mut model: [Vec<(SortKey, Nanos, u64)>; 2] = [Vec::new(), Vec::new()];
            let mut next_id = 0;
            for (add, dir, offset, len, time) in ops {
                if add || model[dir].is_empty() {
                    next_id += 1;
                    let request = request(next_id, offset * 512, len * 512);
                    lists.add(dir, Sorted { request, fifo_time: time });
                    model[dir].push(((offset * 512, RequestId(next_id)), time, len * 512));
                } else {
                    let at = (offset as usize) % model[dir].len();
                    let (key, time, _) = model[dir].remove(at);
                    let removed = lists.remove(dir, key);
                    prop_assert_eq!(removed.request.id, key.1);
                    prop_assert_eq!(removed.fifo_time, time);
                }
                for (dir, model) in model.iter().enumerate() {
                    let mut by_sector: Vec<SortKey> = model.iter().map(|e| e.0).collect();
                    by_sector.sort();
                    let listed: Vec<SortKey> = lists.range(dir, ..).map(|(key, _)| key).collect();
                    prop_assert_eq!(&listed, &by_sector);
                    prop_assert_eq!(lists.first(dir), by_sector.first().copied());
                    let head = model.iter().min_by_key(|e| (e.1, e.0 .1));
                    prop_assert_eq!(lists.fifo_head(dir), head.map(|e| e.0));
                    prop_assert_eq!(lists.fifo_head_time(dir), head.map(|e| e.1));
                    prop_assert_eq!(lists.is_empty(dir), model.is_empty());
                    for probe in [0u64, 512, 2048, 5120, 10240] {
                        let below = by_sector
                            .iter()
                            .rev()
                            .find(|key| **key < (probe, RequestId(0)))
                            .filter(|key| {
                                let len = model.iter().find(|e| e.0 == **key).unwrap().2;
                                key.0 + len == probe
                            })
                            .copied();
                        prop_assert_eq!(lists.ending_at(dir, (probe, RequestId(0)), |_| true), below);
                        let above = by_sector.iter().find(|key| key.0 >= probe).filter(|key| key.0 == probe).copied();
                        prop_assert_eq!(lists.starting_at(dir, probe, |_| true), above);
                    }
                }
                prop_assert_eq!(lists.len(), model[0].len() + model[1].len());
            }
            let mut all = Vec::new();
            lists.take_all(&mut all);
            prop_assert_eq!(all.len(), model[0].len() + model[1].len());
            prop_assert_eq!(lists.len(), 0);
            prop_assert!(lists.is_empty(0) && lists.is_empty(1));
        }
    }
}

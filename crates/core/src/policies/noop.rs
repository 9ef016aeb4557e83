//! `noop`: first in, first out, with merging (Linux's `noop`, today `none`).
//!
//! Requests leave in the order they arrived. A new request that continues a queued one (back
//! merge) or ends where one starts (front merge) is folded into it, within the size limit; when
//! that makes two queued requests adjacent, the later-queued one is folded into the earlier, so
//! the order of what leaves is still the order in which the survivors arrived.

use super::PolicyInfo;
use crate::policy::{Dispatch, Policy};
use crate::request::{merge_back, merge_front, mergeable, MergeLimits, Request};
use crate::time::Nanos;
use crate::tunable::TunableSpec;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::collections::VecDeque;

/// noop has no tunables of its own; the queue's `nr_requests`, `max_sectors_kb` and `nomerges`
/// apply.
pub const TUNABLES: &[TunableSpec] = &[];

/// This module's entries in the policy catalog (`iosched policies`).
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "noop",
        aliases: &["none"],
        summary: "FIFO with front and back merging (Linux's none/noop)",
        tunables: TUNABLES,
        build: || Box::new(Noop::new()),
    },
];

/// The positions of the queued requests that start (or end) at one byte: nearly always one.
#[derive(Debug)]
enum Positions {
    One(u64),
    Many(Vec<u64>),
}

/// Queued requests by first byte or by end, hashed (the kernel's elevator hash `elv_rqhash`
/// finds back merges so): a merge partner is looked up, not searched for.
#[derive(Debug, Default)]
struct Index(FxHashMap<u64, Positions>);

impl Index {
    fn insert(&mut self, at: u64, position: u64) {
        // One hash lookup per insertion or removal (the entry), not two.
        match self.0.entry(at) {
            Entry::Vacant(vacant) => {
                vacant.insert(Positions::One(position));
            }
            Entry::Occupied(mut occupied) => {
                let slot = occupied.get_mut();
                match slot {
                    Positions::One(first) => *slot = Positions::Many(vec![*first, position]),
                    Positions::Many(all) => all.push(position),
                }
            }
        }
    }

    fn remove(&mut self, at: u64, position: u64) {
        let Entry::Occupied(mut occupied) = self.0.entry(at) else {
            panic!("an indexed request");
        };
        match occupied.get_mut() {
            Positions::One(only) => {
                debug_assert_eq!(*only, position);
                occupied.remove();
            }
            Positions::Many(all) => {
                let index = all
                    .iter()
                    .position(|&p| p == position)
                    .expect("an indexed request");
                all.swap_remove(index);
                if let [only] = all[..] {
                    *occupied.get_mut() = Positions::One(only);
                }
            }
        }
    }

    /// The positions of the requests indexed at `at`, in no particular order.
    fn at(&self, at: u64) -> &[u64] {
        match self.0.get(&at) {
            None => &[],
            Some(Positions::One(position)) => std::slice::from_ref(position),
            Some(Positions::Many(all)) => all,
        }
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// A FIFO of requests whose merge partners are looked up, not searched for, once it is long:
/// noop's queue, and each of the latency policy's ranks.
///
/// The queue is kept in arrival order, each request with its position (a requeued request
/// takes one before everything). From [`INDEX_FROM`] queued requests until fewer than
/// [`INDEX_BELOW`], every queued request is also indexed by its first byte and by its end
/// (`Index`), so that a merge partner is found by looking up the new request's ends rather
/// than by a pass over the queue: with 4096 jobs and `nr_requests=8192`, the pass made the
/// simulation 2.5x slower. A short queue is searched: the indexes' upkeep, four hash
/// updates per request, cost more than a pass over a few requests (the latency policy with
/// four readers ran 9% slower with them).
#[derive(Debug)]
pub(super) struct MergeFifo {
    fifo: VecDeque<(u64, Request)>,
    starts: Index,
    ends: Index,
    /// Whether `starts` and `ends` index every queued request.
    indexed: bool,
    /// The lengths at which the indexes are built and dropped ([`INDEX_FROM`],
    /// [`INDEX_BELOW`]; smaller in tests, so that both ways are exercised).
    index_from: usize,
    index_below: usize,
    /// The position the next inserted request takes, and the one a requeued request takes.
    back: u64,
    front: u64,
}

/// Queued requests from which a [`MergeFifo`] keeps its indexes.
const INDEX_FROM: usize = 32;
/// Queued requests below which it drops them.
const INDEX_BELOW: usize = 16;

impl Default for MergeFifo {
    fn default() -> Self {
        MergeFifo::with_thresholds(INDEX_FROM, INDEX_BELOW)
    }
}

impl MergeFifo {
    fn with_thresholds(index_from: usize, index_below: usize) -> Self {
        MergeFifo {
            fifo: VecDeque::new(),
            starts: Index::default(),
            ends: Index::default(),
            indexed: false,
            index_from,
            index_below,
            back: u64::MAX / 2,
            front: u64::MAX / 2 - 1,
        }
    }

    #[inline]
    fn index(&mut self, position: u64, request: &Request) {
        if self.indexed {
            self.starts.insert(request.offset, position);
            self.ends.insert(request.end(), position);
        } else if self.fifo.len() + 1 >= self.index_from {
            // The request is about to join: index the others, then it.
            self.indexed = true;
            for (at, queued) in &self.fifo {
                self.starts.insert(queued.offset, *at);
                self.ends.insert(queued.end(), *at);
            }
            self.starts.insert(request.offset, position);
            self.ends.insert(request.end(), position);
        }
    }

    #[inline]
    fn unindex(&mut self, position: u64, request: &Request) {
        if self.indexed {
            self.starts.remove(request.offset, position);
            self.ends.remove(request.end(), position);
        }
    }

    /// Drops the indexes of a queue that became short.
    #[inline]
    fn maybe_unindex(&mut self) {
        if self.indexed && self.fifo.len() < self.index_below {
            self.indexed = false;
            self.starts.clear();
            self.ends.clear();
        }
    }

    /// The positions of the queued requests that start at `start` or end at `end`, except
    /// `except`, that `fits` accepts: the least with `least`, else the greatest.
    fn partner(
        &self,
        start: u64,
        end: u64,
        except: u64,
        least: bool,
        fits: impl Fn(&Request) -> bool,
    ) -> Option<u64> {
        let touches = |position: u64, request: &Request| {
            position != except && (request.offset == start || request.end() == end) && fits(request)
        };
        if !self.indexed {
            let mut all = self.fifo.iter();
            let found = if least {
                all.find(|(p, r)| touches(*p, r))
            } else {
                all.rfind(|(p, r)| touches(*p, r))
            };
            return found.map(|&(p, _)| p);
        }
        let candidates = self
            .starts
            .at(start)
            .iter()
            .chain(self.ends.at(end))
            .copied()
            .filter(|&p| p != except && fits(self.at_position(p)));
        if least {
            candidates.min()
        } else {
            candidates.max()
        }
    }

    /// Where the request at `position` is in the queue (positions rise along it).
    fn slot(&self, position: u64) -> usize {
        self.fifo
            .binary_search_by_key(&position, |&(p, _)| p)
            .expect("an indexed request is queued")
    }

    fn at_position(&self, position: u64) -> &Request {
        &self.fifo[self.slot(position)].1
    }

    /// Merges `other` into the request at `position`: behind it if it continues it, else in
    /// front, keeping the indexes true.
    fn absorb(&mut self, position: u64, other: Request) {
        let slot = self.slot(position);
        let (start, end) = (self.fifo[slot].1.offset, self.fifo[slot].1.end());
        if self.indexed {
            self.starts.remove(start, position);
            self.ends.remove(end, position);
        }
        let queued = &mut self.fifo[slot].1;
        if queued.end() == other.offset {
            merge_back(queued, other);
        } else {
            merge_front(queued, other);
        }
        if self.indexed {
            let (start, end) = (queued.offset, queued.end());
            self.starts.insert(start, position);
            self.ends.insert(end, position);
        }
    }

    /// After the request at `position` grew, folds the earliest-queued neighbour that now
    /// touches it; the survivor is whichever was queued first, so dispatch order stays
    /// arrival order.
    fn merge_neighbours(&mut self, position: u64, limits: MergeLimits) {
        let grown = self.at_position(position);
        let (start, end) = (grown.offset, grown.end());
        let neighbour = self.partner(end, start, position, true, |other| {
            mergeable(grown, other, limits)
        });
        let Some(other) = neighbour else { return };
        let (keep, fold) = (position.min(other), position.max(other));
        let (_, folded) = self
            .fifo
            .remove(self.slot(fold))
            .expect("a queued position");
        self.unindex(fold, &folded);
        self.absorb(keep, folded);
    }

    /// Merges `request` into the newest queued request it continues or precedes (a
    /// streaming writer's next request continues the one it just queued); with `fold`, a
    /// neighbour that then touches the grown request is folded into it as well (noop's
    /// gap filling). Hands `request` back when nothing takes it.
    pub(super) fn merge(
        &mut self,
        request: Request,
        limits: MergeLimits,
        fold: bool,
    ) -> Result<(), Request> {
        let target = self.partner(request.end(), request.offset, u64::MAX, false, |queued| {
            mergeable(queued, &request, limits)
        });
        let Some(position) = target else {
            return Err(request);
        };
        self.absorb(position, request);
        if fold {
            self.merge_neighbours(position, limits);
        }
        Ok(())
    }

    /// Queues `request` last.
    #[inline]
    pub(super) fn push_back(&mut self, request: Request) {
        let position = self.back;
        self.back += 1;
        self.index(position, &request);
        self.fifo.push_back((position, request));
    }

    /// Queues `request` first (a requeue).
    pub(super) fn push_front(&mut self, request: Request) {
        let position = self.front;
        self.front -= 1;
        self.index(position, &request);
        self.fifo.push_front((position, request));
    }

    /// Takes the first request.
    #[inline]
    pub(super) fn pop_front(&mut self) -> Option<Request> {
        let (position, request) = self.fifo.pop_front()?;
        self.unindex(position, &request);
        self.maybe_unindex();
        Some(request)
    }

    /// The first request.
    pub(super) fn front(&self) -> Option<&Request> {
        self.fifo.front().map(|(_, request)| request)
    }

    pub(super) fn len(&self) -> usize {
        self.fifo.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    /// Moves every request to `out`, in queue order.
    pub(super) fn drain_into(&mut self, out: &mut Vec<Request>) {
        self.starts.clear();
        self.ends.clear();
        self.indexed = false;
        out.extend(self.fifo.drain(..).map(|(_, request)| request));
    }
}

/// The noop policy: one `MergeFifo`.
#[derive(Debug, Default)]
pub struct Noop {
    queue: MergeFifo,
}

impl Noop {
    /// An empty queue.
    pub fn new() -> Self {
        Noop::default()
    }
}

impl Policy for Noop {
    fn name(&self) -> &'static str {
        "noop"
    }

    fn try_merge(
        &mut self,
        request: Request,
        limits: MergeLimits,
        _now: Nanos,
    ) -> Result<(), Request> {
        self.queue.merge(request, limits, true)
    }

    fn insert(&mut self, request: Request, _now: Nanos) {
        self.queue.push_back(request);
    }

    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        match self.queue.pop_front() {
            Some(request) => Dispatch::Request(request),
            None => Dispatch::Empty,
        }
    }

    fn requeue(&mut self, request: Request, _now: Nanos) {
        self.queue.push_front(request);
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn drain(&mut self, out: &mut Vec<Request>) {
        self.queue.drain_into(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::request;
    use crate::Op;

    const LIMITS: MergeLimits = MergeLimits {
        max_request_bytes: 16 * 1024,
    };

    fn take(policy: &mut Noop) -> Request {
        match policy.dispatch(0) {
            Dispatch::Request(request) => request,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    // Proves requests leave in arrival order when nothing merges.
    #[test]
    fn fifo_order() {
        let mut policy = Noop::new();
        for (id, offset) in [(1, 40_960), (2, 0), (3, 81_920)] {
            policy.insert(request(id, Op::Read, offset, 4096), 0);
        }
        assert_eq!(take(&mut policy).id.0, 1);
        assert_eq!(take(&mut policy).id.0, 2);
        assert_eq!(take(&mut policy).id.0, 3);
        assert_eq!(policy.dispatch(0), Dispatch::Empty);
    }

    /// The queue as it was first written, a list searched from end to end: the model the
    /// indexed queue must agree with.
    #[derive(Default)]
    struct Model {
        fifo: std::collections::VecDeque<Request>,
    }

    impl Model {
        fn merge(
            &mut self,
            request: Request,
            limits: MergeLimits,
            fold: bool,
        ) -> Result<(), Request> {
            let target = self.fifo.iter().rposition(|queued| {
                (queued.end() == request.offset || request.end() == queued.offset)
                    && mergeable(queued, &request, limits)
            });
            let Some(index) = target else {
                return Err(request);
            };
            let queued = &mut self.fifo[index];
            if queued.end() == request.offset {
                merge_back(queued, request);
            } else {
                merge_front(queued, request);
            }
            if !fold {
                return Ok(());
            }
            let grown = &self.fifo[index];
            let (start, end) = (grown.offset, grown.end());
            let neighbour = self.fifo.iter().enumerate().position(|(other, candidate)| {
                other != index
                    && (candidate.offset == end || candidate.end() == start)
                    && mergeable(grown, candidate, limits)
            });
            if let Some(other) = neighbour {
                let (keep, fold) = (index.min(other), index.max(other));
                let folded = self.fifo.remove(fold).unwrap();
                let survivor = &mut self.fifo[keep];
                if survivor.end() == folded.offset {
                    merge_back(survivor, folded);
                } else {
                    merge_front(survivor, folded);
                }
            }
            Ok(())
        }
    }

    proptest::proptest! {
        // Proves the queue behaves as the list it replaced: the same merges (which request
        // absorbs which, with what companions) and the same order out, over random merges,
        // pops and requeues of reads and writes in a small space where requests often touch;
        // with noop's folding of the neighbour a merge makes touch, and without it (each of the
        // latency policy's ranks); indexed from 4 queued requests (down below 2), so that both
        // ways and the changes between them are held to the list, or from the usual 32.
        // Fails if the index picks another partner than the newest.
        #[test]
        fn agrees_with_a_list_searched_end_to_end(
            ops in proptest::collection::vec((0u8..6, 0u64..24, 1u64..4, proptest::bool::ANY), 1..200),
            small in proptest::bool::ANY,
            fold in proptest::bool::ANY,
        ) {
            let mut queue = if small { MergeFifo::with_thresholds(4, 2) } else { MergeFifo::default() };
            let mut model = Model::default();
            let mut taken: Vec<Request> = Vec::new();
            for (id, (op, block, blocks, write)) in (1u64..).zip(ops) {
                let dir = if write { Op::Write } else { Op::Read };
                let fresh = request(id, dir, block * 4096, blocks * 4096);
                match op {
                    0..=2 => {
                        let ours = queue.merge(fresh.clone(), LIMITS, fold);
                        let theirs = model.merge(fresh, LIMITS, fold);
                        proptest::prop_assert_eq!(ours.is_ok(), theirs.is_ok());
                        if let (Err(ours), Err(_)) = (ours, theirs) {
                            queue.push_back(ours.clone());
                            model.fifo.push_back(ours);
                        }
                    }
                    3 | 4 => {
                        let ours = queue.pop_front();
                        proptest::prop_assert_eq!(&ours, &model.fifo.pop_front());
                        taken.extend(ours);
                    }
                    _ => {
                        if let Some(back) = taken.pop() {
                            queue.push_front(back.clone());
                            model.fifo.push_front(back);
                        }
                    }
                }
                proptest::prop_assert_eq!(queue.len(), model.fifo.len());
                proptest::prop_assert_eq!(queue.front(), model.fifo.front());
            }
            let mut rest = Vec::new();
            queue.drain_into(&mut rest);
            proptest::prop_assert_eq!(rest, Vec::from(model.fifo));
            proptest::prop_assert!(queue.starts.is_empty() && queue.ends.is_empty());
        }
    }

    // Proves back, front and gap-filling merges respect the size limit and keep the oldest survivor.
    #[test]
    fn merges_within_limit() {
        let mut policy = Noop::new();
        policy.insert(request(1, Op::Write, 0, 4096), 0);
        policy.insert(request(2, Op::Write, 8192, 4096), 0);
        // Fills the gap: back-merges into #1, then #2 folds into #1.
        assert!(policy
            .try_merge(request(3, Op::Write, 4096, 4096), LIMITS, 0)
            .is_ok());
        assert_eq!(policy.queued(), 1);
        // Front merge at 0 is impossible (nothing before 0), a read never merges with writes.
        assert!(policy
            .try_merge(request(4, Op::Read, 12_288, 4096), LIMITS, 0)
            .is_err());
        // Reaching 16 KiB is allowed, beyond it is not.
        assert!(policy
            .try_merge(request(5, Op::Write, 12_288, 4096), LIMITS, 0)
            .is_ok());
        assert!(policy
            .try_merge(request(6, Op::Write, 16_384, 4096), LIMITS, 0)
            .is_err());
        let merged = take(&mut policy);
        assert_eq!((merged.id.0, merged.offset, merged.len), (1, 0, 16_384));
        let mut companions: Vec<u64> = merged.merged.iter().map(|id| id.0).collect();
        companions.sort();
        assert_eq!(companions, vec![2, 3, 5]);
    }
}

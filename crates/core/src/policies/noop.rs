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

/// The noop policy.
#[derive(Debug, Default)]
pub struct Noop {
    fifo: VecDeque<Request>,
}

impl Noop {
    /// An empty queue.
    pub fn new() -> Self {
        Noop {
            fifo: VecDeque::new(),
        }
    }

    /// After the request at `index` grew, folds a queued neighbour that now touches it.
    fn merge_neighbours(&mut self, index: usize, limits: MergeLimits) {
        let grown = &self.fifo[index];
        let (start, end) = (grown.offset, grown.end());
        let neighbour = self.fifo.iter().enumerate().find(|(other, candidate)| {
            *other != index
                && (candidate.offset == end || candidate.end() == start)
                && mergeable(grown, candidate, limits)
        });
        let Some((other, _)) = neighbour else { return };
        // The survivor is whichever was queued first, so dispatch order stays arrival order.
        let (keep, fold) = if index < other {
            (index, other)
        } else {
            (other, index)
        };
        let folded = self.fifo.remove(fold).expect("index in range");
        let survivor = &mut self.fifo[keep];
        if survivor.end() == folded.offset {
            merge_back(survivor, folded);
        } else {
            merge_front(survivor, folded);
        }
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
        // Newest first: a streaming writer's next request continues the one it just queued.
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
        self.merge_neighbours(index, limits);
        Ok(())
    }

    fn insert(&mut self, request: Request, _now: Nanos) {
        self.fifo.push_back(request);
    }

    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        match self.fifo.pop_front() {
            Some(request) => Dispatch::Request(request),
            None => Dispatch::Empty,
        }
    }

    fn requeue(&mut self, request: Request, _now: Nanos) {
        self.fifo.push_front(request);
    }

    fn queued(&self) -> usize {
        self.fifo.len()
    }

    fn drain(&mut self, out: &mut Vec<Request>) {
        out.extend(self.fifo.drain(..));
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

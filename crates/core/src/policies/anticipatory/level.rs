//! One priority level's requests: sorted by sector and by FIFO per direction, and the next request
//! after the head (`as_find_next_rq`, `as_choose_req`, with MAXBACK and the backward-seek penalty).

use super::*;

/// One priority level's queues.
#[derive(Debug, Default)]
pub(super) struct Level {
    /// Its requests by sector and by FIFO expiry, per direction.
    pub(super) requests: SortedRequests,
    /// Tokens left this round.
    pub(super) tokens: u64,
    /// When the level was last served, or began waiting; `None` while it is empty.
    pub(super) waiting_since: Option<Nanos>,
    /// Last FIFO check per direction (`last_check_fifo`).
    pub(super) last_check_fifo: [Nanos; 2],
    /// Direction of the last request this level dispatched: the direction of its last batch
    /// that served anything.
    pub(super) last_dir: usize,
}

impl Level {
    pub(super) fn queued(&self) -> usize {
        self.requests.len()
    }

    /// `as_find_next_arq` + `as_choose_req`: the preferred request of `dir` for a head at
    /// `last`: the closest in front, or one a short way behind at twice the cost; if everything
    /// lies far behind, the lowest offset (the elevator wraps).
    pub(super) fn next_request(&self, dir: usize, last: u64) -> Option<SortKey> {
        let requests = &self.requests;
        let ahead = requests
            .range(dir, (last, RequestId(0))..)
            .next()
            .map(|(k, _)| k);
        let behind = requests
            .range(dir, ..(last, RequestId(0)))
            .next_back()
            .map(|(k, _)| k);
        let wrap = || requests.first(dir);
        match (ahead, behind) {
            (None, None) => None,
            (Some(a), None) => Some(a),
            (None, Some(b)) => {
                if b.0 + MAXBACK >= last {
                    Some(b)
                } else {
                    wrap()
                }
            }
            (Some(a), Some(b)) => {
                if b.0 + MAXBACK < last {
                    return Some(a);
                }
                let forward = a.0 - last;
                let backward = (last - b.0) * BACK_PENALTY;
                // Ties go to the request further on, as as_choose_req does.
                if backward < forward {
                    Some(b)
                } else {
                    Some(a)
                }
            }
        }
    }
}

impl Anticipatory {
    /// Merges a bio-sized request into a queued one of its own level, front or back
    /// (`as_merge`, within the same level only).
    pub(super) fn merge_request(
        &mut self,
        request: Request,
        limits: MergeLimits,
        _now: Nanos,
    ) -> Result<(), Request> {
        let level = self.level_of(&request);
        let dir = dir_of(&request);
        let current = &mut self.levels[level];
        let requests = &mut current.requests;
        let below = requests.ending_at(dir, (request.offset, RequestId(0)), |queued| {
            mergeable(queued, &request, limits)
        });
        let flow = if let Some(key) = below {
            let entry = requests.get_mut(dir, &key);
            merge_back(&mut entry.request, request);
            entry.request.flow
        } else {
            let above = requests.starting_at(dir, request.end(), |queued| {
                mergeable(queued, &request, limits)
            });
            let Some(key) = above else {
                return Err(request);
            };
            // The start moves, so the request moves in the sort list.
            let mut entry = requests.remove(dir, key);
            merge_front(&mut entry.request, request);
            let flow = entry.request.flow;
            requests.add(dir, entry);
            flow
        };
        // The merged request now leaves with the survivor: count it with the survivor's flow.
        if let Some(stats) = self.flows.get_mut(&flow) {
            stats.nr_queued += 1;
        }
        Ok(())
    }

    /// Hands back every queued request (the elevator is switching).
    pub(super) fn drain_all(&mut self, out: &mut Vec<Request>) {
        out.extend(self.requeued.drain(..));
        let mut entries: Vec<Sorted> = Vec::with_capacity(self.queued);
        for level in &mut self.levels {
            level.requests.take_all(&mut entries);
            level.waiting_since = None;
        }
        entries.sort_by_key(|e| (e.request.arrival, e.request.id));
        out.extend(entries.into_iter().map(|e| e.request));
        for stats in self.flows.values_mut() {
            stats.nr_queued = 0;
        }
        self.queued = 0;
        self.antic = Antic::Off;
    }
}

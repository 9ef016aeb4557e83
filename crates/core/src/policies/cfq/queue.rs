//! The `cfq_queue`: a flow's requests sorted by offset and by FIFO expiry, the next request to
//! serve (`cfq_choose_req`, `cfq_find_next_rq`), and what CFQ remembers of a queue between busy
//! periods (think time, seeks).

use super::*;

pub(super) type SortKey = (u64, RequestId);

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) request: Request,
    pub(super) fifo_time: Nanos,
}

/// A `cfq_queue` while it has requests queued or in flight, or holds the slice.
#[derive(Debug)]
pub(super) struct Queue {
    pub(super) class: usize,
    pub(super) level: u8,
    pub(super) sync: bool,
    /// Queued requests by offset (`sort_list`).
    pub(super) sort: OrdMap<SortKey, Entry>,
    /// Queued requests by FIFO expiry time, mapping to their offset.
    pub(super) fifo: OrdMap<(Nanos, RequestId), u64>,
    /// The request to serve next unless the FIFO says otherwise (`next_rq`); `Some` exactly when
    /// `sort` is not empty.
    pub(super) next: Option<SortKey>,
    /// Requests dispatched and not yet completed.
    pub(super) dispatched: u32,
    /// Position in its service tree while busy (`on_rr`): `(rb_key, insertion number)`.
    pub(super) tree_key: Option<(i64, u64)>,
    /// Which service tree ([`tree_index`]) it is on while `tree_key` is set.
    pub(super) tree: usize,
    /// Forgotten ([`Cfq::maybe_drop`]): as if it did not exist, until its flow's next request
    /// makes it anew ([`Queue::renew`]). Kept rather than removed, with its lists' memory,
    /// while few queues exist: a flow with one request at a time made and dropped its queue
    /// at every request.
    pub(super) forgotten: bool,
    /// Its entry in [`Cfq::close_index`]: (RT, level, where its next request starts).
    pub(super) close_entry: Option<(bool, u8, u64)>,
}

impl Queue {
    pub(super) fn new(class: usize, level: u8, sync: bool) -> Self {
        Queue {
            class,
            level,
            sync,
            sort: OrdMap::new(),
            fifo: OrdMap::new(),
            next: None,
            dispatched: 0,
            tree_key: None,
            tree: 0,
            forgotten: false,
            close_entry: None,
        }
    }

    /// A forgotten queue made as [`Queue::new`] makes one.
    pub(super) fn renew(&mut self, class: usize, level: u8, sync: bool) {
        debug_assert!(self.forgotten && self.sort.is_empty() && self.fifo.is_empty());
        debug_assert!(self.dispatched == 0 && self.tree_key.is_none());
        debug_assert!(self.close_entry.is_none());
        self.class = class;
        self.level = level;
        self.sync = sync;
        self.next = None;
        self.tree = 0;
        self.forgotten = false;
    }

    pub(super) fn remove(&mut self, key: SortKey) -> Entry {
        let entry = self.sort.remove(&key).expect("request is on the sort list");
        let removed = self.fifo.remove(&(entry.fifo_time, key.1));
        assert!(removed.is_some(), "request is on the FIFO");
        entry
    }

    pub(super) fn add(&mut self, entry: Entry) -> SortKey {
        let key = (entry.request.offset, entry.request.id);
        self.fifo.insert((entry.fifo_time, key.1), key.0);
        let previous = self.sort.insert(key, entry);
        assert!(previous.is_none(), "request ids are unique");
        key
    }
}

/// What CFQ remembers about a queue between its busy periods: the kernel keeps these in the
/// `cfq_queue` and `cfq_io_context`, which live as long as the process.
#[derive(Debug)]
pub(super) struct History {
    /// Last use, for least-recently-used eviction.
    pub(super) stamp: u64,
    /// When the flow's last sync request completed (`last_end_request`).
    pub(super) last_end_request: Nanos,
    pub(super) ttime_samples: u64,
    pub(super) ttime_total: u64,
    pub(super) ttime_mean: Nanos,
    /// One bit per recent request, set when it was a seek (`seek_history`).
    pub(super) seek_history: u32,
    /// End of the flow's last request (`last_request_pos`); 0 before the first.
    pub(super) last_request_pos: u64,
    /// Idling allowed (`idle_window`).
    pub(super) idle_window: bool,
    /// The flow queued 4 or more requests at once since idling last failed (`deep`).
    pub(super) deep: bool,
    /// Slice time owed (positive) or overrun (negative) from the last slice (`slice_resid`).
    pub(super) slice_resid: i64,
}

impl History {
    pub(super) fn new(key: QueueKey, now: Nanos) -> Self {
        History {
            stamp: 0,
            last_end_request: now,
            ttime_samples: 0,
            ttime_total: 0,
            ttime_mean: 0,
            seek_history: 0,
            last_request_pos: 0,
            idle_window: matches!(key, QueueKey::Sync(_)),
            deep: false,
            slice_resid: 0,
        }
    }

    pub(super) fn seeky(&self) -> bool {
        self.seek_history.count_ones() > SEEKY_SEEKS
    }

    pub(super) fn ttime_valid(&self) -> bool {
        self.ttime_samples > SAMPLES_VALID
    }
}

impl Cfq {
    /// The queue a request of this flow goes to now: for a sync request, the queue its flow
    /// was merged into (`cic_to_cfqq`), else its own.
    pub(super) fn queue_of(&self, request: &Request) -> QueueKey {
        if !request.sync {
            return queue_key(request);
        }
        self.flow_queue
            .get(&request.flow)
            .copied()
            .unwrap_or_else(|| queue_key(request))
    }

    /// The queue a dispatched request was served from (`RQ_CFQQ`).
    pub(super) fn dispatched_queue(&mut self, request: &Request) -> QueueKey {
        self.request_queue
            .remove(&request.id)
            .unwrap_or_else(|| queue_key(request))
    }

    /// `cfq_set_request` for a sync request of `flow`, before it is queued: a merged queue to
    /// be split gives the flow its own queue back (`split_cfqq`; the last flow keeps it, no
    /// longer merged), and a merge set up for the flow's queue moves the flow to the other
    /// queue (`cfq_merge_cfqqs`). Returns the queue the request goes to.
    pub(super) fn set_request_queue(&mut self, request: &Request) -> QueueKey {
        let mut key = self.queue_of(request);
        if !request.sync {
            return key;
        }
        let flow = request.flow;
        if let Some(coop) = self.coop.get_mut(&key).filter(|c| c.split) {
            if coop.flows <= 1 {
                self.coop.remove(&key);
            } else if self.flow_queue.remove(&flow).is_some() {
                coop.flows -= 1;
                key = queue_key(request);
            }
        }
        if let Some(&target) = self.merge_pending.get(&key) {
            let users = self.coop.get(&key).map_or(1, |c| c.flows);
            if users <= 1 {
                self.merge_pending.remove(&key);
                self.coop.remove(&key);
            } else if let Some(coop) = self.coop.get_mut(&key) {
                coop.flows -= 1;
            }
            let coop = self.coop.entry(target).or_insert(Coop {
                flows: 1,
                split: false,
            });
            coop.flows += 1;
            if target == queue_key(request) {
                self.flow_queue.remove(&flow);
            } else {
                self.flow_queue.insert(flow, target);
            }
            key = target;
        }
        key
    }

    /// `cfq_setup_merge`: the flows of queue `current` are to join `cooperator`, or the other
    /// way round when `current` has more of them (the direction of the lesser work); not when
    /// either already waits to merge into the other, through any chain.
    pub(super) fn setup_merge(&mut self, current: QueueKey, cooperator: QueueKey) {
        let mut target = cooperator;
        let mut hops = 0;
        while let Some(&next) = self.merge_pending.get(&target) {
            if next == current || hops > MERGES_MAX {
                return;
            }
            target = next;
            hops += 1;
        }
        let refs = |key: &QueueKey| self.coop.get(key).map_or(1, |c| c.flows);
        let (source, target) = if refs(&target) >= refs(&current) {
            (current, target)
        } else {
            (target, current)
        };
        if self.merge_pending.len() >= MERGES_MAX {
            self.merge_pending.pop_first();
        }
        self.merge_pending.insert(source, target);
    }

    pub(super) fn queue(&self, key: QueueKey) -> &Queue {
        self.queues.get(&key).expect("queue is live")
    }

    pub(super) fn queue_mut(&mut self, key: QueueKey) -> &mut Queue {
        self.queues.get_mut(&key).expect("queue is live")
    }

    /// Brings `key`'s entry in [`Cfq::close_index`] up to date, after its next request or its
    /// place on a service tree changed: a busy sync RT or BE queue with a next request is
    /// indexed where that request starts (`cfq_prio_tree_add`), any other is not. Builds the
    /// index, or drops it, as the busy queues reach [`CLOSE_INDEX_FROM`] or fall below
    /// [`CLOSE_INDEX_BELOW`].
    pub(super) fn index_close(&mut self, key: QueueKey) {
        let busy = self.busy_queues();
        if !self.close_indexed {
            if busy < CLOSE_INDEX_FROM {
                return;
            }
            self.close_indexed = true;
            let keys: Vec<QueueKey> = self.trees.iter().flat_map(|t| t.values().copied()).collect();
            for other in keys {
                self.index_close_entry(other);
            }
            return;
        }
        if busy < CLOSE_INDEX_BELOW {
            self.close_indexed = false;
            for entry in std::mem::take(&mut self.close_index) {
                let other = entry.queue();
                self.queues.get_mut(&other).expect("indexed queue is live").close_entry = None;
            }
            return;
        }
        self.index_close_entry(key);
    }

    /// Brings `key`'s entry in the kept [`Cfq::close_index`] up to date.
    fn index_close_entry(&mut self, key: QueueKey) {
        let Some(queue) = self.queues.get_mut(&key) else {
            return;
        };
        let entry = queue
            .next
            .filter(|_| queue.tree_key.is_some() && queue.sync && queue.class != IDLE)
            .map(|next| (queue.class == RT, queue.level, next.0));
        if queue.close_entry == entry {
            return;
        }
        let QueueKey::Sync(flow) = key else {
            unreachable!("only sync queues are indexed");
        };
        if let Some((rt, level, at)) = queue.close_entry {
            self.close_index.remove(&CloseKey::new(rt, level, at, flow));
        }
        if let Some((rt, level, at)) = entry {
            self.close_index.insert(CloseKey::new(rt, level, at, flow));
        }
        queue.close_entry = entry;
    }

    /// The history of `key`, created if new, marked as just used. A new one that finds
    /// [`HISTORY_CAP`] histories kept first forgets the least recently used eighth of them.
    pub(super) fn history_mut(&mut self, key: QueueKey, now: Nanos) -> &mut History {
        self.history_stamp += 1;
        let stamp = self.history_stamp;
        if self.history.len() >= HISTORY_CAP && !self.history.contains_key(&key) {
            self.forget_old_histories();
        }
        let entry = self
            .history
            .get_or_insert_with(key, || History::new(key, now));
        entry.stamp = stamp;
        entry
    }

    /// Forgets the least recently used eighth of the histories in one pass. The pass costs
    /// one step per history and comes once per eighth of [`HISTORY_CAP`] new queues, so a
    /// constant per queue; keeping exact LRU order instead cost a tree update on every use
    /// (10% of `bench --policy grouped-cfq`).
    fn forget_old_histories(&mut self) {
        let keep = HISTORY_CAP - HISTORY_CAP / 8;
        let Some(drop) = self.history.len().checked_sub(keep).filter(|&n| n > 0) else {
            return;
        };
        let mut stamps: Vec<u64> = self.history.values().map(|h| h.stamp).collect();
        let (_, &mut newest_dropped, _) = stamps.select_nth_unstable(drop - 1);
        // Stamps are unique: exactly `drop` histories go.
        self.history.retain(|_, h| h.stamp > newest_dropped);
    }

    /// `cfq_choose_req`: which of two queued requests of `queue` to serve after position `last`.
    pub(super) fn choose_req(
        &self,
        queue: &Queue,
        first: Option<SortKey>,
        second: Option<SortKey>,
        last: u64,
    ) -> Option<SortKey> {
        let (one, two) = match (first, second) {
            (None, other) | (other, None) => return other,
            (Some(one), Some(two)) if one == two => return Some(two),
            (Some(one), Some(two)) => (one, two),
        };
        let sync_one = queue.sort[&one].request.sync;
        let sync_two = queue.sort[&two].request.sync;
        if sync_one != sync_two {
            return Some(if sync_one { one } else { two });
        }
        // Distance from the head, or None when it lies too far behind (wraps).
        let distance = |position: u64| {
            if position >= last {
                Some(position - last)
            } else if position + self.back_seek_max_bytes >= last {
                Some((last - position).saturating_mul(self.back_seek_penalty))
            } else {
                None
            }
        };
        let (s1, s2) = (one.0, two.0);
        Some(match (distance(s1), distance(s2)) {
            (Some(d1), Some(d2)) => {
                if d1 < d2 || (d1 == d2 && s1 >= s2) {
                    one
                } else {
                    two
                }
            }
            (Some(_), None) => one,
            (None, Some(_)) => two,
            // Both behind: start with the one further back, so only one backward seek is made.
            (None, None) => {
                if s1 <= s2 {
                    one
                } else {
                    two
                }
            }
        })
    }

    /// `cfq_find_next_rq`: the request to serve after `last` leaves the queue.
    pub(super) fn find_next(&self, queue: &Queue, last: SortKey) -> Option<SortKey> {
        let next = queue
            .sort
            .range((Bound::Excluded(last), Bound::Unbounded))
            .next()
            .or_else(|| queue.sort.iter().next().filter(|(k, _)| **k != last))
            .map(|(k, _)| *k);
        let prev = queue.sort.range(..last).next_back().map(|(k, _)| *k);
        self.choose_req(queue, next, prev, last.0)
    }

    /// After `grown` grew, folds an adjacent request of the same queue into the lower of the two
    /// (`attempt_back_merge` / `attempt_front_merge` and `cfq_merged_requests`).
    pub(super) fn merge_neighbour(&mut self, key: QueueKey, grown: SortKey, limits: MergeLimits) {
        let queue = self.queue_mut(key);
        let request = &queue.sort[&grown].request;
        let (start, end) = (request.offset, request.end());
        let after = queue
            .sort
            .range((end, RequestId(0))..)
            .next()
            .filter(|(k, e)| k.0 == end && mergeable(request, &e.request, limits))
            .map(|(k, _)| *k);
        let before = queue
            .sort
            .range(..grown)
            .next_back()
            .filter(|(_, e)| e.request.end() == start && mergeable(&e.request, request, limits))
            .map(|(k, _)| *k);
        let (survivor_key, folded_key) = match (after, before) {
            (Some(after), _) => (grown, after),
            (None, Some(before)) => (before, grown),
            (None, None) => return,
        };
        let folded = queue.remove(folded_key);
        let mut survivor = queue.remove(survivor_key);
        // The survivor keeps the earlier FIFO time.
        survivor.fifo_time = survivor.fifo_time.min(folded.fifo_time);
        merge_back(&mut survivor.request, folded.request);
        queue.add(survivor);
        if queue.next == Some(folded_key) {
            queue.next = Some(survivor_key);
        }
        self.queued -= 1;
        self.index_close(key);
    }
}

impl Cfq {
    /// Merges a request into a queued one of its flow's queue (`cfq_merge`,
    /// `cfq_allow_merge`).
    pub(super) fn merge_request(
        &mut self,
        request: Request,
        limits: MergeLimits,
        _now: Nanos,
    ) -> Result<(), Request> {
        // Only into the queue this request would join (`cfq_allow_merge`).
        let key = self.queue_of(&request);
        let Some(queue) = self.queues.get_mut(&key) else {
            return Err(request);
        };
        // Back merge: a queued request ends where this one starts.
        let below = queue
            .sort
            .range(..(request.offset, RequestId(0)))
            .next_back()
            .filter(|(_, e)| {
                e.request.end() == request.offset && mergeable(&e.request, &request, limits)
            })
            .map(|(k, _)| *k);
        if let Some(sort_key) = below {
            let entry = queue.sort.get_mut(&sort_key).expect("found above");
            merge_back(&mut entry.request, request);
            self.merge_neighbour(key, sort_key, limits);
            return Ok(());
        }
        // Front merge: a queued request starts where this one ends (`cfq_merge`).
        let above = queue
            .sort
            .range((request.end(), RequestId(0))..)
            .next()
            .filter(|(k, e)| k.0 == request.end() && mergeable(&e.request, &request, limits))
            .map(|(k, _)| *k);
        let Some(sort_key) = above else {
            return Err(request);
        };
        // The start moves, so the request moves in the sort list (`cfq_reposition_rq_rb`).
        let mut entry = queue.remove(sort_key);
        merge_front(&mut entry.request, request);
        let new_key = queue.add(entry);
        if queue.next == Some(sort_key) {
            queue.next = Some(new_key);
        }
        let queue = self.queue(key);
        let next = self.choose_req(queue, queue.next, Some(new_key), self.last_position);
        self.queue_mut(key).next = next;
        self.index_close(key);
        self.merge_neighbour(key, new_key, limits);
        Ok(())
    }

    /// Hands back every queued request (the elevator is switching).
    pub(super) fn drain_all(&mut self, out: &mut Vec<Request>) {
        let mut requests: Vec<Request> = Vec::with_capacity(self.queued);
        for request in std::mem::take(&mut self.requeued) {
            // It leaves without completing here: undo its dispatch accounting.
            let key = self.dispatched_queue(&request);
            let queue = self.queues.get_mut(&key).expect("queue is live");
            queue.dispatched -= 1;
            self.in_flight[usize::from(queue.sync)] -= 1;
            if queue.class != IDLE {
                self.rt_be_in_flight -= 1;
            }
            requests.push(request);
        }
        self.close_index.clear();
        self.close_indexed = false;
        for queue in self.queues.values_mut() {
            queue.fifo.clear();
            queue.next = None;
            queue.tree_key = None;
            queue.close_entry = None;
            requests.extend(
                std::mem::take(&mut queue.sort)
                    .into_values()
                    .map(|e| e.request),
            );
        }
        for tree in &mut self.trees {
            tree.clear();
        }
        self.busy_sync_queues = 0;
        self.workload_expires = None;
        self.active = None;
        self.queues.retain(|_, q| q.dispatched > 0);
        self.queued = 0;
        requests.sort_by_key(|r| (r.arrival, r.id));
        out.extend(requests);
    }
}

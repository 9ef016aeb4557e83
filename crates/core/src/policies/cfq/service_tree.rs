//! The per-class service trees (`cfq_service_tree_add`, `cfq_del_cfqq_rr`) and the choice of the
//! next queue (`cfq_select_queue`), with preemption (`cfq_should_preempt`).

use super::*;

/// What `select_queue` decided.
pub(super) enum Select {
    /// Dispatch from this queue, if `may_dispatch` allows.
    Queue(QueueKey),
    /// Idle on purpose until this time.
    Wait(Nanos),
    /// Nothing to do until a request arrives or completes.
    Nothing,
}

impl Cfq {
    /// Queues on the service trees (`busy_queues`).
    pub(super) fn busy_queues(&self) -> usize {
        self.trees.iter().map(OrdMap::len).sum()
    }

    /// The workload type of a queue (`cfqq_type`): async, sync without idling, or sync.
    pub(super) fn workload_type(&self, key: QueueKey) -> usize {
        let queue = self.queue(key);
        if !queue.sync {
            ASYNC_WL
        } else if self.idle_window(key) {
            SYNC_WL
        } else {
            SYNC_NOIDLE_WL
        }
    }

    /// The service tree a queue belongs on now: its class's tree of its workload type, or
    /// the one tree of its class without workload trees.
    pub(super) fn tree_of(&self, key: QueueKey) -> usize {
        let class = self.queue(key).class;
        if self.workload_trees {
            tree_index(class, self.workload_type(key))
        } else {
            tree_index(class, SYNC_WL)
        }
    }

    /// Busy queues of `class` (`cfq_group_busy_queues_wl`).
    pub(super) fn class_busy(&self, class: usize) -> usize {
        if class == IDLE {
            self.trees[tree_index(IDLE, 0)].len()
        } else {
            (0..3).map(|wl| self.trees[tree_index(class, wl)].len()).sum()
        }
    }

    /// `cfq_service_tree_add`: (re)places a busy queue in its service tree.
    pub(super) fn service_tree_add(&mut self, key: QueueKey, add_front: bool, now: Nanos) {
        let target = self.tree_of(key);
        let (class, sync, level, current, current_tree) = {
            let queue = self.queue(key);
            (queue.class, queue.sync, queue.level, queue.tree_key, queue.tree)
        };
        let now_key = now as i64;
        let rb_key = if class == IDLE {
            let last = self.trees[target]
                .iter()
                .next_back()
                .filter(|(_, k)| **k != key)
                .map_or(now_key, |(tree_key, _)| tree_key.0);
            last + IDLE_DELAY as i64
        } else if !add_front {
            // `cfq_slice_offset`: (nr_cfqq - 1) slices' difference from the best priority.
            let others = self.busy_queues() - usize::from(current.is_some());
            let offset = others as i64
                * (self.prio_slice(true, 0) as i64 - self.prio_slice(sync, level) as i64);
            let history = self.history_mut(key, now);
            let resid = std::mem::take(&mut history.slice_resid);
            now_key + offset - resid
        } else {
            let first = self.trees[target]
                .keys()
                .next()
                .map_or(now_key, |tree_key| tree_key.0);
            first - SECOND as i64
        };
        if let Some(current) = current {
            if current.0 == rb_key && current_tree == target {
                return;
            }
            self.trees[current_tree].remove(&current);
        } else if sync {
            self.busy_sync_queues += 1;
        }
        self.tree_inserts += 1;
        let tree_key = (rb_key, self.tree_inserts);
        self.trees[target].insert(tree_key, key);
        let queue = self.queue_mut(key);
        queue.tree_key = Some(tree_key);
        queue.tree = target;
        self.index_close(key);
    }

    /// `cfq_del_cfqq_rr`: takes an empty queue off its tree. When no queue is left busy, the
    /// group's saved workload is forgotten (`cfq_group_notify_queue_del`).
    pub(super) fn del_from_tree(&mut self, key: QueueKey) {
        let queue = self.queues.get_mut(&key).expect("queue is live");
        if let Some(tree_key) = queue.tree_key.take() {
            self.trees[queue.tree].remove(&tree_key);
            if queue.sync {
                self.busy_sync_queues -= 1;
            }
            self.index_close(key);
            if self.busy_queues() == 0 {
                self.workload_expires = None;
            }
        }
    }

    /// `cfq_choose_wl_type`: among the async, sync-noidle and sync trees of `class`, the one
    /// whose first queue has waited longest (lowest `rb_key`); sync-noidle when all are empty.
    fn choose_wl_type(&self, class: usize) -> usize {
        (ASYNC_WL..=SYNC_WL)
            .filter_map(|wl| {
                self.trees[tree_index(class, wl)]
                    .keys()
                    .next()
                    .map(|tree_key| (tree_key.0, wl))
            })
            .min()
            .map_or(SYNC_NOIDLE_WL, |(_, wl)| wl)
    }

    /// `choose_wl_class_and_type`: the class to serve (RT, else BE, else IDLE), and within
    /// it the workload: the current one while its tree has queues and its slice lasts, else
    /// a new one with a slice that is the class's share of `target_latency` for its queues
    /// (async scaled down by `slice_async / slice_sync`), at least `2 * slice_idle` for sync
    /// and [`MIN_TT`].
    pub(super) fn choose_workload(&mut self, now: Nanos) {
        let original = self.serving_class;
        let class = if self.class_busy(RT) > 0 {
            RT
        } else if self.class_busy(BE) > 0 {
            BE
        } else {
            self.serving_class = IDLE;
            self.workload_expires = Some(now + 1);
            return;
        };
        self.serving_class = class;
        if original == class {
            let count = self.trees[tree_index(class, self.serving_type)].len();
            if count > 0 && self.workload_expires.is_some_and(|end| now <= end) {
                return;
            }
        }
        let wl = self.choose_wl_type(class);
        self.serving_type = wl;
        let count = self.trees[tree_index(class, wl)].len() as u64;
        let average = self.busy_queues_avg[usize::from(class == RT)];
        let busy = self.class_busy(class) as u64;
        let group_slice = self.target_latency;
        let mut slice = group_slice * count / average.max(busy).max(1);
        if wl == ASYNC_WL {
            let async_busy = (self.trees[tree_index(RT, ASYNC_WL)].len()
                + self.trees[tree_index(BE, ASYNC_WL)].len()) as u64;
            let share = self.target_latency * async_busy / (self.busy_queues() as u64).max(1);
            slice = slice.min(share) * self.slice[0] / self.slice[1].max(1);
        } else {
            slice = slice.max(2 * self.slice_idle);
        }
        self.workload_expires = Some(now + slice.max(MIN_TT));
    }
    /// Forgets a queue with nothing queued, nothing in flight and no slice: it is removed, or
    /// while at most [`QUEUES_KEPT`] queues exist, kept as forgotten ([`Queue::forgotten`]).
    pub(super) fn maybe_drop(&mut self, key: QueueKey) {
        if self.active.as_ref().is_some_and(|a| a.key == key) {
            return;
        }
        let many = self.queues.len() > QUEUES_KEPT;
        let Some(queue) = self.queues.get_mut(&key) else {
            return;
        };
        if queue.sort.is_empty() && queue.dispatched == 0 && queue.tree_key.is_none() {
            if many {
                self.queues.remove(&key);
            } else {
                queue.forgotten = true;
            }
        }
    }

    /// `cfq_should_preempt`: whether a request just queued on `key` ends the active slice.
    pub(super) fn should_preempt(&self, key: QueueKey, request: &Request, now: Nanos) -> bool {
        let Some(active) = self.active.as_ref() else {
            return false;
        };
        let new = self.queue(key);
        let current = self.queue(active.key);
        if new.class == IDLE {
            return false;
        }
        if current.class == IDLE {
            return true;
        }
        if current.class == RT && new.class != RT {
            return false;
        }
        if request.sync && !current.sync {
            return true;
        }
        if self.slice_used(now) {
            return true;
        }
        if self.workload_trees {
            // A second sync-noidle queue while the only one being served has nothing queued:
            // serve it now rather than idle at the end of the tree.
            if self.serving_type == SYNC_NOIDLE_WL
                && self.workload_type(key) == SYNC_NOIDLE_WL
                && new.tree_key.is_some()
                && self.trees[new.tree].len() == 2
                && current.sort.is_empty()
            {
                return true;
            }
        }
        if new.class == RT && current.class != RT {
            return true;
        }
        if self.workload_trees && current.sort.is_empty() && !self.should_idle(active.key) {
            return true;
        }
        if active.idle_until.is_none() {
            return false;
        }
        // As good as what the idling queue would send next.
        request.offset.abs_diff(self.last_position) <= CLOSE_THRESHOLD
    }

    /// `cfq_preempt_queue`: `key` takes over; it goes to the front of its tree, and a change
    /// of workload type drops the saved workload slice.
    pub(super) fn preempt(&mut self, key: QueueKey, now: Nanos) {
        let old_type = self.active.as_ref().map(|a| self.workload_type(a.key));
        self.expire(now, true);
        if self.workload_trees && old_type != Some(self.workload_type(key)) {
            self.workload_expires = None;
        }
        self.service_tree_add(key, true, now);
    }

    /// `cfq_rq_enqueued`: updates the flow's statistics and checks for preemption.
    pub(super) fn enqueued(&mut self, key: QueueKey, request: &Request, now: Nanos) {
        let (class, sync, depth, tree) = {
            let queue = self.queue(key);
            (queue.class, queue.sync, queue.sort.len(), queue.tree)
        };
        let slice_idle = self.slice_idle;
        if sync {
            // `cfq_update_io_thinktime` for the queue's service tree (`st->ttime`), fixed
            // point with 256 as one sample; the queue's own below.
            let tree_time = &mut self.tree_ttime[tree];
            let elapsed = now.saturating_sub(tree_time.last_end_request);
            let ttime = elapsed.min(slice_idle.saturating_mul(2));
            tree_time.samples = (7 * tree_time.samples + 256) / 8;
            tree_time.total = (7 * tree_time.total + 256 * ttime) / 8;
            tree_time.mean = (tree_time.total + 128) / tree_time.samples;
        }
        let history = self.history_mut(key, now);
        if sync {
            let elapsed = now.saturating_sub(history.last_end_request);
            let ttime = elapsed.min(slice_idle.saturating_mul(2));
            history.ttime_samples = (7 * history.ttime_samples + 256) / 8;
            history.ttime_total = (7 * history.ttime_total + 256 * ttime) / 8;
            history.ttime_mean = (history.ttime_total + 128) / history.ttime_samples;
        }
        // `cfq_update_io_seektime`.
        let distance = if history.last_request_pos != 0 {
            request.offset.abs_diff(history.last_request_pos)
        } else {
            0
        };
        history.seek_history = (history.seek_history << 1) | u32::from(distance > SEEK_THRESHOLD);
        // `cfq_update_idle_window`.
        if sync && class != IDLE {
            if depth >= 4 {
                history.deep = true;
            }
            if slice_idle == 0 || (!history.deep && history.seeky()) {
                history.idle_window = false;
            } else if history.ttime_valid() {
                history.idle_window = history.ttime_mean <= slice_idle;
            }
        }
        history.last_request_pos = request.end();
        match self.active.as_mut() {
            Some(active) if active.key == key => {
                // The flow we idle for came back: serve it at once.
                active.idle_until = None;
            }
            _ => {
                if self.should_preempt(key, request, now) {
                    self.preempt(key, now);
                }
            }
        }
    }

    /// `cfq_select_queue`: keeps the active queue, idles, or expires it and picks the next.
    pub(super) fn select_queue(&mut self, now: Nanos) -> Select {
        if let Some(active) = self.active.as_ref() {
            let key = active.key;
            let queue = self.queue(key);
            let keep = if self.slice_used(now) {
                // The only busy queue, still waiting for what it sent: keep idling for it.
                self.workload_trees
                    && self.busy_queues() == 1
                    && queue.sort.is_empty()
                    && queue.dispatched > 0
                    && self.should_idle(key)
            } else if !queue.sort.is_empty() {
                return Select::Queue(key);
            } else if let Some(cooperator) = self.close_cooperator(key) {
                // A close cooperator: serve it now instead of idling, and merge the two
                // queues (`cfq_select_queue`, `cfq_setup_merge`).
                if !self.merge_pending.contains_key(&key) {
                    self.setup_merge(key, cooperator);
                }
                self.expire(now, false);
                self.activate(cooperator);
                return Select::Queue(cooperator);
            } else if let Some(until) = active.idle_until {
                return Select::Wait(until);
            } else {
                if self.workload_trees {
                    self.drop_seeky_idle_window(key, now);
                }
                // Let what is in flight complete: it may bring the next request with it.
                self.queue(key).dispatched > 0 && self.should_idle(key)
            };
            if keep {
                return Select::Nothing;
            }
            self.expire(now, false);
        }
        let next = if self.workload_trees {
            self.choose_workload(now);
            if self.serving_class == IDLE {
                self.idle_class_next(now)
            } else {
                match self.trees[tree_index(self.serving_class, self.serving_type)]
                    .values()
                    .next()
                {
                    Some(&key) => Ok(key),
                    None => Err(Select::Nothing),
                }
            }
        } else if let Some(&key) = self.trees[tree_index(RT, SYNC_WL)].values().next() {
            Ok(key)
        } else if let Some(&key) = self.trees[tree_index(BE, SYNC_WL)].values().next() {
            Ok(key)
        } else {
            self.idle_class_next(now)
        };
        let next = match next {
            Ok(key) => key,
            Err(select) => return select,
        };
        self.activate(next);
        Select::Queue(next)
    }

    /// `__cfq_set_active_queue`: `key` holds the next slice.
    fn activate(&mut self, key: QueueKey) {
        self.active = Some(Active {
            key,
            slice_new: true,
            slice_start: 0,
            slice_end: 0,
            slice_dispatch: 0,
            fifo_checked: false,
            idle_until: None,
        });
    }

    /// `cfq_close_cooperator` (2.6.30+): when the sync queue `key`, not seeky, runs empty, a
    /// busy sync queue of the same priority level and RT-ness, not seeky either, whose next
    /// request lies within `CFQQ_CLOSE_THR` (4 MiB) of where the disk head is
    /// (`last_position`) is served next, the nearest first (`cfqq_close` on the per-level
    /// tree of next requests), instead of idling: processes reading one file in interleaved
    /// pieces cooperate. The two queues are then merged ([`Cfq::setup_merge`]).
    pub(super) fn close_cooperator(&self, key: QueueKey) -> Option<QueueKey> {
        let current = self.queue(key);
        if current.class == IDLE || !current.sync || self.busy_queues() <= 1 {
            return None;
        }
        if self.history.get(&key).is_some_and(|h| h.seeky()) {
            return None;
        }
        if !self.close_indexed {
            return self.close_cooperator_by_scan(key);
        }
        let (rt, level, position) = (current.class == RT, current.level, self.last_position);
        let eligible = |other: QueueKey| {
            other != key && !self.history.get(&other).is_some_and(|h| h.seeky())
        };
        // Outward from the head on each side, nearest first, until past the nearest found (at
        // an equal distance, the least key, as on one side the keys come in reverse).
        let (first, last) = (FlowId(0), FlowId(u32::MAX));
        let mut best: Option<(u64, QueueKey)> = None;
        let mut consider = |distance: u64, other: QueueKey| {
            if best.is_some_and(|(nearest, _)| distance > nearest) {
                return false;
            }
            if eligible(other) {
                best = Some(best.map_or((distance, other), |b| b.min((distance, other))));
            }
            true
        };
        let below = CloseKey::new(rt, level, position.saturating_sub(CLOSE_COOPERATOR), first)
            ..=CloseKey::new(rt, level, position, last);
        for entry in self.close_index.range(below).rev() {
            if !consider(position - entry.at(), entry.queue()) {
                break;
            }
        }
        if let Some(above) = position.checked_add(1) {
            let above = CloseKey::new(rt, level, above, first)
                ..=CloseKey::new(rt, level, position.saturating_add(CLOSE_COOPERATOR), last);
            for entry in self.close_index.range(above) {
                if !consider(entry.at() - position, entry.queue()) {
                    break;
                }
            }
        }
        let found = best.map(|(_, other)| other);
        #[cfg(debug_assertions)]
        assert_eq!(found, self.close_cooperator_by_scan(key), "the close index is stale");
        found
    }

    /// [`Cfq::close_cooperator`] by looking at every busy queue (the caller checked `key`'s
    /// own conditions): while few queues are busy, and what the index must agree with
    /// (checked in debug builds).
    fn close_cooperator_by_scan(&self, key: QueueKey) -> Option<QueueKey> {
        let current = self.queue(key);
        self.trees
            .iter()
            .flat_map(|tree| tree.values())
            .map(|other| (other, self.queue(*other)))
            .filter(|(other, queue)| {
                **other != key
                    && queue.tree_key.is_some()
                    && queue.sync
                    && queue.class != IDLE
                    && queue.level == current.level
                    && (queue.class == RT) == (current.class == RT)
                    && !self.history.get(other).is_some_and(|h| h.seeky())
            })
            .filter_map(|(other, queue)| {
                let next = queue.next?;
                let distance = next.0.abs_diff(self.last_position);
                (distance <= CLOSE_COOPERATOR).then_some((distance, *other))
            })
            .min()
            .map(|(_, other)| other)
    }

    /// The first idle-class queue, once no RT or BE request is in flight and the grace
    /// period after the last one has passed.
    fn idle_class_next(&self, now: Nanos) -> Result<QueueKey, Select> {
        let Some(&key) = self.trees[tree_index(IDLE, 0)].values().next() else {
            return Err(Select::Nothing);
        };
        if self.rt_be_in_flight > 0 {
            return Err(Select::Nothing);
        }
        if let Some(last) = self.last_rt_be_end {
            let grace_end = last.saturating_add(IDLE_DELAY);
            if now < grace_end {
                return Err(Select::Wait(grace_end));
            }
        }
        Ok(key)
    }

    /// A seeky queue that still has its idle window gives it up when it has used less than
    /// half of its slice (`cfq_select_queue`, 2.6.37+): idling for it is not worth it.
    fn drop_seeky_idle_window(&mut self, key: QueueKey, now: Nanos) {
        let active = self.active.as_ref().expect("a queue is active");
        let (slice_new, start, end) = (active.slice_new, active.slice_start, active.slice_end);
        let Some(history) = self.history.get_mut(&key) else {
            return;
        };
        if history.seeky()
            && history.idle_window
            && (slice_new || end.saturating_sub(now) > now.saturating_sub(start))
        {
            history.deep = false;
            history.idle_window = false;
        }
    }
}

impl Cfq {
    /// Queues a request on its flow's queue, adding the queue to its service tree, and
    /// preempts or ends idling as `cfq_rq_enqueued` does.
    pub(super) fn insert_request(&mut self, request: Request, now: Nanos) {
        self.run_idle_timer(now);
        let key = self.set_request_queue(&request);
        let sync = request.sync;
        let fifo_time = now.saturating_add(self.fifo_expire[usize::from(sync)]);
        let (class, level) = (class_of(request.prio), level_of(request.prio));
        let queue = self
            .queues
            .get_or_insert_with(key, || Queue::new(class, level, sync));
        if queue.forgotten {
            queue.renew(class, level, sync);
        }
        let info = Request {
            merged: Vec::new(),
            ..request.clone()
        };
        let sort_key = queue.add(Entry { request, fifo_time });
        let on_tree = queue.tree_key.is_some();
        self.queued += 1;
        if !on_tree {
            self.service_tree_add(key, false, now);
        }
        let queue = self.queue(key);
        let next = self.choose_req(queue, queue.next, Some(sort_key), self.last_position);
        self.queue_mut(key).next = next;
        self.index_close(key);
        self.enqueued(key, &info, now);
    }

    /// The next request: the requeued first, then the active queue's, choosing a new queue
    /// or idling as `cfq_dispatch_requests` does.
    pub(super) fn dispatch_next(&mut self, now: Nanos) -> Dispatch {
        self.run_idle_timer(now);
        if let Some(request) = self.requeued.pop_front() {
            self.queued -= 1;
            self.last_position = request.end();
            return Dispatch::Request(request);
        }
        if self.queued == 0 {
            return Dispatch::Empty;
        }
        let key = match self.select_queue(now) {
            Select::Queue(key) => key,
            Select::Wait(until) => return Dispatch::WaitUntil(until),
            Select::Nothing => return Dispatch::Empty,
        };
        if !self.may_dispatch(key, now) {
            return Dispatch::Empty;
        }
        let request = self.dispatch_from(key, now);
        let slice_dispatch = {
            let active = self.active.as_mut().expect("a queue is active");
            active.slice_dispatch += 1;
            active.slice_dispatch
        };
        // An async queue's slice ends after its share of requests, an idle-class one after each
        // request, when someone else is waiting.
        let queue = self.queue(key);
        let used_up = (!queue.sync && slice_dispatch >= self.prio_to_maxrq(queue.level))
            || queue.class == IDLE;
        if used_up && self.busy_queues() > 1 {
            self.expire(now, false);
        }
        Dispatch::Request(request)
    }
}

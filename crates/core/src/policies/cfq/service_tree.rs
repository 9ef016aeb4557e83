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
        self.trees.iter().map(BTreeMap::len).sum()
    }

    /// `cfq_service_tree_add`: (re)places a busy queue in its class's tree.
    pub(super) fn service_tree_add(&mut self, key: QueueKey, add_front: bool, now: Nanos) {
        let (class, sync, level, current) = {
            let queue = self.queue(key);
            (queue.class, queue.sync, queue.level, queue.tree_key)
        };
        let now_key = now as i64;
        let rb_key = if class == IDLE {
            let last = self.trees[IDLE]
                .iter()
                .next_back()
                .filter(|(_, k)| **k != key)
                .map_or(now_key, |(tree_key, _)| tree_key.0);
            last + IDLE_DELAY as i64
        } else if !add_front {
            let others = self.busy_queues() - usize::from(current.is_some());
            let offset = others as i64
                * (self.prio_slice(true, 0) as i64 - self.prio_slice(sync, level) as i64);
            let history = self.history_mut(key, now);
            let resid = std::mem::take(&mut history.slice_resid);
            now_key + offset - resid
        } else {
            let first = self.trees[class]
                .keys()
                .next()
                .map_or(now_key, |tree_key| tree_key.0);
            first - SECOND as i64
        };
        if let Some(current) = current {
            if current.0 == rb_key {
                return;
            }
            self.trees[class].remove(&current);
        }
        self.tree_inserts += 1;
        let tree_key = (rb_key, self.tree_inserts);
        self.trees[class].insert(tree_key, key);
        self.queue_mut(key).tree_key = Some(tree_key);
    }

    /// `cfq_del_cfqq_rr`: takes an empty queue off its tree.
    pub(super) fn del_from_tree(&mut self, key: QueueKey) {
        let queue = self.queues.get_mut(&key).expect("queue is live");
        if let Some(tree_key) = queue.tree_key.take() {
            self.trees[queue.class].remove(&tree_key);
        }
    }

    /// Forgets a queue with nothing queued, nothing in flight and no slice.
    pub(super) fn maybe_drop(&mut self, key: QueueKey) {
        let idle = self
            .queues
            .get(&key)
            .is_some_and(|q| q.sort.is_empty() && q.dispatched == 0 && q.tree_key.is_none());
        if idle && self.active.as_ref().is_none_or(|a| a.key != key) {
            self.queues.remove(&key);
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
        if new.class == RT && current.class != RT {
            return true;
        }
        if active.idle_until.is_none() {
            return false;
        }
        // As good as what the idling queue would send next.
        request.offset.abs_diff(self.last_position) <= CLOSE_THRESHOLD
    }

    /// `cfq_preempt_queue`: `key` takes over; it goes to the front of its tree.
    pub(super) fn preempt(&mut self, key: QueueKey, now: Nanos) {
        self.expire(now, true);
        self.service_tree_add(key, true, now);
    }

    /// `cfq_rq_enqueued`: updates the flow's statistics and checks for preemption.
    pub(super) fn enqueued(&mut self, key: QueueKey, request: &Request, now: Nanos) {
        let (class, sync, depth) = {
            let queue = self.queue(key);
            (queue.class, queue.sync, queue.sort.len())
        };
        let slice_idle = self.slice_idle;
        let history = self.history_mut(key, now);
        if sync {
            // `cfq_update_io_thinktime`, fixed point with 256 as one sample.
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
                false
            } else if !queue.sort.is_empty() {
                return Select::Queue(key);
            } else if let Some(until) = active.idle_until {
                return Select::Wait(until);
            } else {
                // Let what is in flight complete: it may bring the next request with it.
                queue.dispatched > 0 && self.should_idle(key)
            };
            if keep {
                return Select::Nothing;
            }
            self.expire(now, false);
        }
        let next = if let Some(&key) = self.trees[RT].values().next() {
            key
        } else if let Some(&key) = self.trees[BE].values().next() {
            key
        } else if let Some(&key) = self.trees[IDLE].values().next() {
            if self.rt_be_in_flight > 0 {
                return Select::Nothing;
            }
            if let Some(last) = self.last_rt_be_end {
                let grace_end = last.saturating_add(IDLE_DELAY);
                if now < grace_end {
                    return Select::Wait(grace_end);
                }
            }
            key
        } else {
            return Select::Nothing;
        };
        self.active = Some(Active {
            key: next,
            slice_new: true,
            slice_end: 0,
            slice_dispatch: 0,
            fifo_checked: false,
            idle_until: None,
        });
        Select::Queue(next)
    }
}

impl Cfq {
    /// Queues a request on its flow's queue, adding the queue to its service tree, and
    /// preempts or ends idling as `cfq_rq_enqueued` does.
    pub(super) fn insert_request(&mut self, request: Request, now: Nanos) {
        self.run_idle_timer(now);
        let key = queue_key(&request);
        let sync = request.sync;
        let fifo_time = now.saturating_add(self.fifo_expire[usize::from(sync)]);
        let (class, level) = (class_of(request.prio), level_of(request.prio));
        let queue = self
            .queues
            .entry(key)
            .or_insert_with(|| Queue::new(class, level, sync));
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

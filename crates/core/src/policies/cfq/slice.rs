//! Slices and idling: slice length by priority and low_latency (`cfq_prio_to_slice`,
//! `cfq_scaled_cfqq_slice`), the idle window (`cfq_update_idle_window`, `cfq_should_idle`), the
//! idle timer (`cfq_arm_slice_timer`), slice expiry (`__cfq_slice_expired`) and the dispatch quota
//! (`cfq_may_dispatch`).

use super::*;

/// The slice of the active queue.
#[derive(Debug)]
pub(super) struct Active {
    pub(super) key: QueueKey,
    /// No request of this slice has completed yet, so `slice_end` is not set (`slice_new`).
    pub(super) slice_new: bool,
    /// When the slice's clock started (`slice_start`).
    pub(super) slice_start: Nanos,
    pub(super) slice_end: Nanos,
    /// Requests dispatched in this slice (`slice_dispatch`).
    pub(super) slice_dispatch: u64,
    /// The FIFO was checked in this slice (`fifo_expire` flag).
    pub(super) fifo_checked: bool,
    /// Idling for the flow's next request until this time (`wait_request` and the timer).
    pub(super) idle_until: Option<Nanos>,
}

impl Cfq {
    /// `cfq_prio_slice`: the slice of a sync or async queue at `level`.
    pub(super) fn prio_slice(&self, sync: bool, level: u8) -> Nanos {
        let base = self.slice[usize::from(sync)];
        let step = base / SLICE_SCALE;
        let levels_above = 4 - i64::from(level);
        // At most three steps below the base, and base - 3 * base / 5 > 0.
        (base as i64 + step as i64 * levels_above) as Nanos
    }

    /// `cfq_prio_to_maxrq`: async dispatches allowed in one slice.
    pub(super) fn prio_to_maxrq(&self, level: u8) -> u64 {
        let base = self.slice_async_rq;
        2 * (base + base * u64::from(LOWEST_LEVEL - level))
    }

    /// Whether the queue's idle window is open (a forgotten queue starts with the default).
    pub(super) fn idle_window(&self, key: QueueKey) -> bool {
        self.history
            .get(&key)
            .map_or(matches!(key, QueueKey::Sync(_)), |h| h.idle_window)
    }

    /// `cfq_should_idle`: not for the idle class or with `slice_idle` 0; for a sync queue
    /// whose idle window is open; and with workload trees also for the last queue of its
    /// tree (the sync-noidle tree's idle at its end, which lets a workload of seeky readers
    /// keep the disk from the others), unless the tree's think time is too long.
    pub(super) fn should_idle(&self, key: QueueKey) -> bool {
        let queue = self.queue(key);
        if self.slice_idle == 0 || queue.class == IDLE {
            return false;
        }
        if queue.sync && self.idle_window(key) {
            return true;
        }
        if !self.workload_trees || !queue.sync || queue.tree_key.is_none() {
            return false;
        }
        let ttime = &self.tree_ttime[queue.tree];
        self.trees[queue.tree].len() == 1 && !(ttime.samples > SAMPLES_VALID && ttime.mean > self.slice_idle)
    }

    /// `cfq_slice_used` for the active queue.
    pub(super) fn slice_used(&self, now: Nanos) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| !a.slice_new && now >= a.slice_end)
    }

    /// `cfq_slice_used_soon`: whether what the active queue has in flight may outlast its slice.
    pub(super) fn slice_used_soon(&self, dispatched: u32, now: Nanos) -> bool {
        let active = self.active.as_ref().expect("a queue is active");
        active.slice_new
            || now.saturating_add(self.slice_idle.saturating_mul(u64::from(dispatched)))
                > active.slice_end
    }

    /// `__cfq_slice_expired`: ends the active slice. With `timed_out`, the unused part of the
    /// slice (or its overrun) is remembered for the queue's next place in the tree.
    pub(super) fn expire(&mut self, now: Nanos, timed_out: bool) {
        let Some(active) = self.active.take() else {
            return;
        };
        let key = active.key;
        if timed_out && !active.slice_new {
            let resid = active.slice_end as i64 - now as i64;
            self.history_mut(key, now).slice_resid = resid;
        }
        // `__cfq_slice_expired`: a merged queue that has become seeky is to be split.
        if self.history.get(&key).is_some_and(|h| h.seeky()) {
            if let Some(coop) = self.coop.get_mut(&key) {
                coop.split = true;
            }
        }
        if self.queue(key).sort.is_empty() {
            self.del_from_tree(key);
        } else {
            self.service_tree_add(key, false, now);
        }
        self.maybe_drop(key);
    }

    /// The idle timer (`cfq_idle_slice_timer`), run when its time has come.
    pub(super) fn run_idle_timer(&mut self, now: Nanos) {
        let Some(active) = self.active.as_mut() else {
            return;
        };
        if active.idle_until.is_none_or(|until| now < until) {
            return;
        }
        active.idle_until = None;
        let key = active.key;
        if self.slice_used(now) {
            self.expire(now, false);
        } else if self.queue(key).sort.is_empty() {
            // Idling failed: forget that the flow queued deeply.
            self.history_mut(key, now).deep = false;
            self.expire(now, false);
        }
    }

    /// `cfq_set_prio_slice`: starts the active slice's clock, scaled for `low_latency`.
    pub(super) fn set_prio_slice(&mut self, now: Nanos) {
        let key = self.active.as_ref().expect("a queue is active").key;
        let (class, sync, level) = {
            let queue = self.queue(key);
            (queue.class, queue.sync, queue.level)
        };
        let mut slice = self.prio_slice(sync, level);
        if self.low_latency {
            // `cfq_group_get_avg_queues`: follows increases quickly, decreases slowly.
            let rt = class == RT;
            let busy = self.class_busy(if rt { RT } else { BE }) as u64;
            let average = &mut self.busy_queues_avg[usize::from(rt)];
            let (low, high) = ((*average).min(busy), (*average).max(busy));
            *average = ((HIST_DIVISOR - 1) * high + low + HIST_DIVISOR / 2) / HIST_DIVISOR;
            let expected = u128::from(self.slice[1]) * u128::from(*average);
            let target = u128::from(self.target_latency);
            if expected > target {
                let wide = u128::from(slice);
                let low_slice =
                    wide.min(2 * u128::from(self.slice_idle) * wide / u128::from(self.slice[1]));
                slice = (wide * target / expected).max(low_slice) as Nanos;
            }
        }
        let active = self.active.as_mut().expect("a queue is active");
        active.slice_start = now;
        active.slice_end = now.saturating_add(slice);
    }

    /// `cfq_arm_slice_timer`: starts idling for the active flow's next request, if it should.
    pub(super) fn arm_slice_timer(&mut self, now: Nanos) {
        let key = self.active.as_ref().expect("a queue is active").key;
        if self.slice_idle == 0 || !self.should_idle(key) || self.queue(key).dispatched > 0 {
            return;
        }
        let slice_end = self.active.as_ref().expect("a queue is active").slice_end;
        if let Some(history) = self.history.get(&key) {
            // Do not idle past the slice for a flow that thinks longer than what is left.
            if history.ttime_valid() && slice_end.saturating_sub(now) < history.ttime_mean {
                return;
            }
        }
        let active = self.active.as_mut().expect("a queue is active");
        active.idle_until = Some(now.saturating_add(self.slice_idle));
    }

    /// `cfq_may_dispatch`: whether the active queue may send another request now.
    pub(super) fn may_dispatch(&self, key: QueueKey, now: Nanos) -> bool {
        let queue = self.queue(key);
        // Drain async requests before sync I/O that idles; hold async while sync is in flight.
        if self.should_idle(key) && self.in_flight[0] > 0 {
            return false;
        }
        if self.in_flight[1] > 0 && !queue.sync {
            return false;
        }
        let mut max_dispatch = if queue.class == IDLE {
            1
        } else {
            (self.quantum / 2).max(1)
        };
        let dispatched = u64::from(queue.dispatched);
        if dispatched >= max_dispatch {
            if queue.class == IDLE {
                return false;
            }
            let busy = self.busy_queues();
            // The only busy sync queue goes as deep as it likes (3.3+'s promote_sync).
            let promote_sync = self.workload_trees && queue.sync && self.busy_sync_queues == 1;
            if busy > 1 && self.slice_used_soon(queue.dispatched, now) && !promote_sync {
                return false;
            }
            max_dispatch = if busy == 1 || promote_sync {
                u64::MAX
            } else {
                self.quantum
            };
        }
        if !queue.sync && self.low_latency {
            let since_delay = match self.last_delayed_sync {
                Some(at) => now.saturating_sub(at),
                None => now.saturating_add(SECOND),
            };
            let mut depth = since_delay / self.slice[1];
            if depth == 0 && dispatched == 0 {
                depth = 1;
            }
            max_dispatch = max_dispatch.min(depth);
        }
        dispatched < max_dispatch
    }

    /// `cfq_dispatch_request` and `cfq_dispatch_insert`: sends the active queue's next request.
    pub(super) fn dispatch_from(&mut self, key: QueueKey, now: Nanos) -> Request {
        let check_fifo = {
            let active = self.active.as_mut().expect("a queue is active");
            !std::mem::replace(&mut active.fifo_checked, true)
        };
        let queue = self.queue(key);
        let expired = check_fifo
            .then(|| queue.fifo.iter().next())
            .flatten()
            .filter(|(&(fifo_time, _), _)| fifo_time <= now)
            .map(|(&(_, id), &offset)| (offset, id));
        let chosen =
            expired.unwrap_or_else(|| queue.next.expect("a busy queue has a next request"));
        let next = self.find_next(queue, chosen);
        let queue = self.queue_mut(key);
        queue.next = next;
        let entry = queue.remove(chosen);
        self.index_close(key);
        if entry.request.sync && key != queue_key(&entry.request) {
            self.request_queue.insert(entry.request.id, key);
        }
        let queue = self.queue_mut(key);
        queue.dispatched += 1;
        let (sync, class) = (queue.sync, queue.class);
        self.in_flight[usize::from(sync)] += 1;
        if class != IDLE {
            self.rt_be_in_flight += 1;
        }
        self.queued -= 1;
        self.last_position = entry.request.end();
        entry.request
    }
}

impl Cfq {
    /// A request completed: in-flight counts, the slice's end once its first request
    /// completes, and idling for the flow's next request (`cfq_completed_request`).
    pub(super) fn request_completed(&mut self, request: &Request, now: Nanos) {
        self.run_idle_timer(now);
        let key = self.dispatched_queue(request);
        let queue = self
            .queues
            .get_mut(&key)
            .expect("completion of a request this policy did not dispatch");
        assert!(
            queue.dispatched > 0,
            "completion of a request this policy did not dispatch"
        );
        queue.dispatched -= 1;
        let (sync_queue, class, empty) = (queue.sync, queue.class, queue.sort.is_empty());
        self.in_flight[usize::from(sync_queue)] -= 1;
        if class != IDLE {
            self.rt_be_in_flight -= 1;
            self.last_rt_be_end = Some(now);
        }
        if request.sync {
            // The tree it is on while busy, else the one it would join (`cfqq->service_tree`).
            let queue = self.queue(key);
            let tree = if queue.tree_key.is_some() {
                queue.tree
            } else {
                self.tree_of(key)
            };
            self.tree_ttime[tree].last_end_request = now;
            self.history_mut(key, now).last_end_request = now;
            if request.arrival.saturating_add(self.fifo_expire[1]) <= now {
                self.last_delayed_sync = Some(now);
            }
        }
        if self.active.as_ref().is_some_and(|a| a.key == key) {
            let slice_new = self.active.as_ref().is_some_and(|a| a.slice_new);
            if slice_new {
                self.set_prio_slice(now);
                self.active.as_mut().expect("a queue is active").slice_new = false;
            }
            if self.slice_used(now) || class == IDLE {
                self.expire(now, true);
            } else if request.sync && empty && self.close_cooperator(key).is_none() {
                self.arm_slice_timer(now);
            }
        }
        self.maybe_drop(key);
    }
}

//! Batches and seed 000's priority levels: which level runs (tokens within a class, aging), batch
//! expiry and direction changes (`as_batch_expired`, `as_fifo_expired`, `as_update_wbatch`), and
//! the move of a request to dispatch (`as_move_to_dispatch`).

use super::*;

impl Anticipatory {
    pub(super) fn refill_all(&mut self) {
        for level in 0..LEVELS {
            self.levels[level].tokens = self.level_tokens * weight_of(level);
        }
    }

    /// The level a request belongs to.
    pub(super) fn level_of(&self, request: &Request) -> usize {
        if !self.priorities {
            return FLAT_LEVEL;
        }
        let level = usize::from(request.prio.effective_level());
        match request.prio.effective_class() {
            IoPrioClass::Rt => level,
            IoPrioClass::Be | IoPrioClass::None => 8 + level,
            IoPrioClass::Idle => 16,
        }
    }

    pub(super) fn busy(&self, level: usize) -> bool {
        self.levels[level].queued() > 0
    }

    /// Whether a request at `level` outranks a batch at `current`: a higher class, or the same
    /// class with tokens left.
    pub(super) fn outranks(&self, level: usize, current: usize) -> bool {
        level < current && (class_of(level) < class_of(current) || self.levels[level].tokens > 0)
    }

    /// The highest level whose wait has lasted `prio_aging_expire`, while something of higher
    /// priority is also waiting (otherwise it is simply next).
    pub(super) fn aged_level(&self, now: Nanos) -> Option<usize> {
        if !self.priorities {
            return None;
        }
        let top = (0..LEVELS).find(|&l| self.busy(l))?;
        (top + 1..LEVELS).find(|&l| {
            self.busy(l)
                && self.levels[l]
                    .waiting_since
                    .is_some_and(|since| now.saturating_sub(since) >= self.prio_aging_expire)
        })
    }

    /// The level a new batch serves, and whether it is an aged batch.
    pub(super) fn choose_level(&mut self, now: Nanos) -> Option<(usize, bool)> {
        if let Some(level) = self.aged_level(now) {
            self.levels[level].tokens = self.level_tokens * weight_of(level);
            return Some((level, true));
        }
        let top = (0..LEVELS).find(|&l| self.busy(l))?;
        let class = class_of(top);
        let in_class = (top..LEVELS).filter(|&l| class_of(l) == class);
        if let Some(level) = in_class
            .clone()
            .find(|&l| self.busy(l) && self.levels[l].tokens > 0)
        {
            return Some((level, false));
        }
        // Every waiting level of the class spent its tokens: a new round.
        for level in in_class {
            self.levels[level].tokens = self.level_tokens * weight_of(level);
        }
        Some((top, false))
    }

    /// Whether the batch in progress must give way now (before its own end conditions).
    pub(super) fn batch_interrupted(&mut self, now: Nanos) -> bool {
        let current = self.batch_level;
        if self.batch_aged {
            return self.levels[current].tokens == 0;
        }
        if self.aged_level(now).is_some_and(|l| l != current) {
            return true;
        }
        if (0..current).any(|l| self.busy(l) && self.outranks(l, current)) {
            return true;
        }
        if self.levels[current].tokens == 0 {
            let class = class_of(current);
            if (0..LEVELS).any(|l| l != current && class_of(l) == class && self.busy(l)) {
                return true;
            }
            // No other level of the class waits: tokens limit nothing (classes are strict).
            self.levels[current].tokens = self.level_tokens * weight_of(current);
        }
        false
    }

    /// `as_batch_expired`.
    pub(super) fn batch_expired(&self, now: Nanos) -> bool {
        if self.changed_batch || self.new_batch {
            return false;
        }
        if self.batch_dir == SYNC {
            return now > self.current_batch_expires;
        }
        now > self.current_batch_expires || self.current_write_count == 0
    }

    /// `as_fifo_expired`, for one level: at most one check per expiry interval.
    pub(super) fn fifo_expired(&mut self, level: usize, dir: usize, now: Nanos) -> bool {
        let expire = self.fifo_expire[dir];
        let current = &mut self.levels[level];
        if now.saturating_sub(current.last_check_fifo[dir]) < expire {
            return false;
        }
        current.last_check_fifo[dir] = now;
        current
            .requests
            .fifo_head_time(dir)
            .is_some_and(|fifo_time| now > fifo_time)
    }

    /// `update_write_batch`: grow or shrink the write count toward `write_batch_expire`.
    pub(super) fn update_write_batch(&mut self, now: Nanos) {
        let batch = self.batch_expire[ASYNC];
        let write_time = (now + batch).saturating_sub(self.current_batch_expires);
        if write_time > batch && !self.write_batch_idled {
            if write_time > batch * 3 {
                self.write_batch_count /= 2;
            } else {
                self.write_batch_count = self.write_batch_count.saturating_sub(1);
            }
        } else if write_time < batch && self.current_write_count == 0 {
            if batch > write_time * 3 {
                self.write_batch_count *= 2;
            } else {
                self.write_batch_count += 1;
            }
        }
        self.write_batch_count = self.write_batch_count.clamp(1, 1 << 20);
    }

    /// Takes `key` of (`level`, `dir`) off the queues and accounts for it going to the device
    /// (`as_move_to_dispatch`).
    pub(super) fn move_to_dispatch(
        &mut self,
        level: usize,
        dir: usize,
        key: SortKey,
        now: Nanos,
    ) -> Request {
        self.antic_stop();
        self.antic = Antic::Off;
        let entry = self.levels[level].requests.remove(dir, key);
        let request = entry.request;
        self.queued -= 1;
        self.nr_dispatched += 1;
        self.last_pos[dir] = request.end();
        if dir == SYNC {
            self.antic_flow = Some((request.flow, level));
        } else {
            self.antic_flow = None;
            self.current_write_count = self.current_write_count.saturating_sub(1);
        }
        self.ioc_finished = false;
        if let Some(stats) = self.flows.get_mut(&request.flow) {
            stats.nr_queued = stats
                .nr_queued
                .saturating_sub(request.request_count() as u32);
        }
        let current = &mut self.levels[level];
        // A batch counts for the level's alternation once it has dispatched: a write batch
        // that a higher level interrupted while it waited for the reads in flight to drain
        // served no write, and taking it as served kept the level's aged batches on reads,
        // a buffered writer's write waiting 9.4 s (found by the starvation guard).
        current.last_dir = dir;
        current.tokens = current.tokens.saturating_sub(1);
        current.waiting_since = if current.queued() > 0 {
            Some(now)
        } else {
            None
        };
        request
    }

    /// Starts a new batch: picks the level, then the direction within it
    /// (the tail of `as_dispatch_request`).
    pub(super) fn start_batch(&mut self, now: Nanos) -> Option<(usize, usize, SortKey)> {
        let (level, aged) = self.choose_level(now)?;
        let current = &self.levels[level];
        let reads = !current.requests.is_empty(SYNC);
        let writes = !current.requests.is_empty(ASYNC);
        let same_level = level == self.batch_level;
        let previous_dir = if same_level {
            self.batch_dir
        } else {
            current.last_dir
        };
        let (dir, key) = if reads && !(writes && previous_dir == SYNC) {
            // A sync batch starts at the oldest request.
            let key = current.requests.fifo_head(SYNC).expect("reads are queued");
            if self.batch_dir == ASYNC {
                self.changed_batch = true;
            }
            self.levels[level].last_check_fifo[SYNC] = now;
            (SYNC, key)
        } else {
            if self.batch_dir == SYNC {
                self.changed_batch = true;
                self.new_batch = false;
            }
            self.current_write_count = self.write_batch_count;
            self.write_batch_idled = false;
            let key = current
                .next_request(ASYNC, self.last_pos[ASYNC])
                .expect("writes are queued");
            (ASYNC, key)
        };
        if !self.changed_batch && (level != self.batch_level || dir != self.batch_dir) {
            // A new level in the same direction: its batch clock starts now.
            self.current_batch_expires = now + self.batch_expire[dir];
        }
        self.batch_level = level;
        self.batch_dir = dir;
        self.batch_aged = aged;
        Some((level, dir, key))
    }
}

impl Anticipatory {
    /// Queues a request at its level, sorted and on its FIFO, and decides whether it breaks
    /// the anticipation under way (`as_add_request`).
    /// Its FIFO expiry counts from `since`: now, or its arrival when adopted.
    pub(super) fn insert_request(&mut self, request: Request, now: Nanos, since: Nanos) {
        let level = self.level_of(&request);
        let dir = dir_of(&request);
        if self.flows.len() >= MAX_FLOWS && !self.flows.contains_key(&request.flow) {
            let anticipated = self.antic_flow.map(|(flow, _)| flow);
            self.flows
                .retain(|flow, stats| stats.nr_queued > 0 || Some(*flow) == anticipated);
        }
        self.flows.entry(request.flow).or_default();
        if request.sync {
            self.update_history(request.flow, &request, now);
        }
        let stats = self.flows.get_mut(&request.flow).expect("just added");
        stats.nr_queued += request.request_count() as u32;
        let breaks = matches!(self.antic, Antic::WaitReq | Antic::WaitNext)
            && self.can_break_anticipation(Some(&request), now);
        let fifo_time = since.saturating_add(self.fifo_expire[dir]);
        let current = &mut self.levels[level];
        current.waiting_since.get_or_insert(now);
        current.requests.add(dir, Sorted { request, fifo_time });
        self.queued += 1;
        if breaks {
            self.antic_stop();
        }
    }

    /// Picks the next request: the batch's next, a higher level's, or none while
    /// anticipating (`as_dispatch_request`).
    pub(super) fn dispatch_next(&mut self, now: Nanos) -> Dispatch {
        if let Some(request) = self.requeued.pop_front() {
            // Counted as queued until it leaves again (found by fuzzing, as in deadline).
            self.queued -= 1;
            self.nr_dispatched += 1;
            return Dispatch::Request(request);
        }
        let level = self.batch_level;
        let current = &self.levels[level];
        let reads = !current.requests.is_empty(SYNC);
        let writes = !current.requests.is_empty(ASYNC);
        if self.batch_dir == ASYNC && !reads && (self.current_write_count == 0 || !writes) {
            // The write batch was uncontended: do not time it.
            self.write_batch_idled = true;
        }
        if self.queued == 0 {
            return Dispatch::Empty;
        }
        if self.antic == Antic::WaitNext && self.antic_expired(now) {
            // as_antic_timeout.
            self.antic = Antic::Finished;
        }
        // A level kept waiting too long, or a higher level that arrived, ends anticipation.
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) {
            let interrupted = self.aged_level(now).is_some()
                || (0..level).any(|l| self.busy(l) && self.outranks(l, level));
            if !interrupted {
                return self.wait_decision();
            }
            self.antic_stop();
        }
        if self.changed_batch {
            if self.nr_dispatched > 0 {
                return Dispatch::Empty;
            }
            if self.batch_dir == ASYNC {
                self.current_batch_expires = now + self.batch_expire[ASYNC];
            } else {
                self.new_batch = true;
            }
            self.changed_batch = false;
        }

        let batch_over =
            self.batch_interrupted(now) || (reads && writes && self.batch_expired(now));
        if !batch_over {
            // The batch continues.
            let dir = self.batch_dir;
            let mut next = self.levels[level].next_request(dir, self.last_pos[dir]);
            if dir == SYNC && self.antic_expire > 0 {
                if self.fifo_expired(level, SYNC, now) {
                    next = self.levels[level].requests.fifo_head(SYNC);
                } else {
                    let candidate =
                        next.map(|key| self.levels[level].requests.get(SYNC, &key).request.clone());
                    if self.can_anticipate(candidate.as_ref(), now) {
                        self.antic_waitreq();
                        return self.wait_decision();
                    }
                }
            } else if next.is_some() && self.fifo_expired(level, dir, now) {
                next = self.levels[level].requests.fifo_head(dir);
            }
            if let Some(key) = next {
                if reads && !writes && dir == SYNC {
                    self.current_batch_expires = now + self.batch_expire[SYNC];
                }
                return Dispatch::Request(self.move_to_dispatch(level, dir, key, now));
            }
        }
        let Some((level, dir, mut key)) = self.start_batch(now) else {
            return Dispatch::Empty;
        };
        if self.fifo_expired(level, dir, now) {
            key = self.levels[level]
                .requests
                .fifo_head(dir)
                .expect("the level has requests");
        }
        if self.changed_batch {
            if self.nr_dispatched > 0 {
                return Dispatch::Empty;
            }
            if dir == ASYNC {
                self.current_batch_expires = now + self.batch_expire[ASYNC];
            } else {
                self.new_batch = true;
            }
            self.changed_batch = false;
        }
        Dispatch::Request(self.move_to_dispatch(level, dir, key, now))
    }
}

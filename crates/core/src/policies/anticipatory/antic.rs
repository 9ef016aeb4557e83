//! Anticipation (`as_antic_*`): per-process think time and seek distance (`as_update_iohist`,
//! `as_update_seekdist`), whether a request is close (`as_close_req`), and when to stop waiting
//! (`as_can_break_anticipation`, `as_can_anticipate`, `as_antic_expired`).

use super::*;

/// What the scheduler knows of one flow (`struct as_io_context`): fixed-point decaying
/// averages where 1.0 is 256, as in the kernel.
#[derive(Clone, Debug, Default)]
pub(super) struct FlowStats {
    pub(super) nr_queued: u32,
    pub(super) io_started: bool,
    pub(super) io_running: bool,
    pub(super) last_end_request: Nanos,
    pub(super) last_request_pos: u64,
    pub(super) ttime_samples: u64,
    pub(super) ttime_total: u64,
    pub(super) ttime_mean: Nanos,
    pub(super) seek_samples: u64,
    pub(super) seek_total: u64,
    pub(super) seek_mean: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Antic {
    /// Not anticipating.
    Off,
    /// The anticipated request has not completed yet.
    WaitReq,
    /// The anticipated request completed; waiting for the process's next one.
    WaitNext,
    /// Anticipation ended (a request came, or time ran out): run the next request.
    Finished,
}

impl Anticipatory {
    pub(super) fn antic_expired(&self, now: Nanos) -> bool {
        now.saturating_sub(self.antic_start) >= self.antic_expire
    }

    /// `as_close_req`: whether `request` lies near the head, or nearer than the anticipated
    /// flow usually seeks.
    pub(super) fn close_request(&self, stats: &FlowStats, request: &Request, now: Nanos) -> bool {
        let delay_ms = if self.antic == Antic::Off || !self.ioc_finished {
            0
        } else {
            now.saturating_sub(self.antic_start) / MILLISECOND
        };
        let delta = if delay_ms == 0 {
            8192 * SECTOR
        } else if delay_ms <= 20 && delay_ms * MILLISECOND <= self.antic_expire {
            (8192 * SECTOR) << delay_ms
        } else {
            return true;
        };
        let last = self.last_pos[self.batch_dir];
        let next = request.offset;
        if last <= next + delta / 2 && next <= last + delta {
            return true;
        }
        let distance = last.abs_diff(next);
        let mean = if stats.seek_samples == 0 {
            self.new_seek_mean
        } else {
            stats.seek_mean
        };
        mean > distance
    }

    /// `as_can_break_anticipation`: whether `request` (or, with none, the anticipated flow's
    /// own state) makes waiting pointless.
    pub(super) fn can_break_anticipation(&mut self, request: Option<&Request>, now: Nanos) -> bool {
        let Some((flow, level)) = self.antic_flow else {
            return true;
        };
        if let Some(request) = request {
            if request.flow == flow {
                return true;
            }
            if self.priorities && self.outranks(self.level_of(request), level) {
                // Seed 000: a higher-priority request breaks any anticipation.
                return true;
            }
        }
        if self.ioc_finished && self.antic_expired(now) {
            return true;
        }
        let Some(stats) = self.flows.get(&flow) else {
            return true;
        };
        if stats.nr_queued > 0 {
            return true;
        }
        if let Some(request) = request {
            // Seed 000: requests of lower levels wait however close they are.
            let same_level = !self.priorities || self.level_of(request) == level;
            if request.sync && same_level && self.close_request(stats, request, now) {
                // A cooperating process working nearby: its request counts as ours.
                self.update_history(flow, request, now);
                return true;
            }
        }
        let stats = &self.flows[&flow];
        if stats.ttime_samples == 0 {
            self.new_ttime_mean > self.antic_expire
        } else {
            stats.ttime_mean > self.antic_expire
        }
    }

    /// `as_can_anticipate`: whether to keep the disk idle rather than dispatch `request`.
    pub(super) fn can_anticipate(&mut self, request: Option<&Request>, now: Nanos) -> bool {
        if self.antic_flow.is_none() || self.antic == Antic::Finished {
            return false;
        }
        !self.can_break_anticipation(request, now)
    }

    /// `as_update_iohist` for a sync request of `flow`: think time and seek distance.
    pub(super) fn update_history(&mut self, flow: FlowId, request: &Request, now: Nanos) {
        let Some(stats) = self.flows.get_mut(&flow) else {
            return;
        };
        if stats.io_running || stats.io_started {
            let thinktime = if stats.io_running && stats.nr_queued == 0 {
                now.saturating_sub(stats.last_end_request)
                    .min(MAX_THINKTIME - 1)
            } else {
                0
            };
            if stats.ttime_samples == 0 {
                self.new_ttime_total = (7 * self.new_ttime_total + 256 * thinktime) / 8;
                self.new_ttime_mean = self.new_ttime_total / 256;
            }
            stats.ttime_samples = (7 * stats.ttime_samples + 256) / 8;
            stats.ttime_total = (7 * stats.ttime_total + 256 * thinktime) / 8;
            stats.ttime_mean = (stats.ttime_total + 128) / stats.ttime_samples;

            let mut distance = request.offset.abs_diff(stats.last_request_pos);
            if stats.seek_samples == 0 {
                self.new_seek_total = (7 * self.new_seek_total + 256 * distance) / 8;
                self.new_seek_mean = self.new_seek_total / 256;
            }
            // The odd far fragment should not dominate the mean.
            let slack = if stats.seek_samples <= 60 {
                2 * 1024 * 1024 * SECTOR
            } else {
                2 * 1024 * 64 * SECTOR
            };
            distance = distance.min(stats.seek_mean.saturating_mul(4).saturating_add(slack));
            stats.seek_samples = (7 * stats.seek_samples + 256) / 8;
            stats.seek_total = (7 * stats.seek_total + 256 * distance) / 8;
            stats.seek_mean = (stats.seek_total + stats.seek_samples / 2) / stats.seek_samples;
        }
        stats.last_request_pos = request.end();
        stats.io_started = true;
    }

    /// Stops anticipating (`as_antic_stop`).
    pub(super) fn antic_stop(&mut self) {
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) {
            self.antic = Antic::Finished;
        }
    }

    /// `as_antic_waitreq`: start anticipating; the clock starts when the request completes.
    pub(super) fn antic_waitreq(&mut self) {
        if self.antic == Antic::Off {
            self.antic = if self.ioc_finished {
                Antic::WaitNext
            } else {
                Antic::WaitReq
            };
        }
    }

    pub(super) fn wait_decision(&self) -> Dispatch {
        match self.antic {
            Antic::WaitNext => Dispatch::WaitUntil(self.antic_start + self.antic_expire),
            _ => Dispatch::Empty,
        }
    }
}

impl Anticipatory {
    /// A request completed: the flow's think time and seek history, the end of a write batch's
    /// first request, and the start of anticipation after a sync read (`as_completed_request`).
    pub(super) fn request_completed(&mut self, request: &Request, now: Nanos) {
        assert!(
            self.nr_dispatched > 0,
            "completion of a request this policy did not dispatch"
        );
        let dir = dir_of(request);
        if self.changed_batch && self.nr_dispatched == 1 {
            // The old batch has drained: the new one's clock starts (as later 2.6 kernels
            // do; without it a write batch would count as expired before its first write).
            self.current_batch_expires = now + self.batch_expire[self.batch_dir];
            self.changed_batch = false;
            if self.batch_dir == SYNC {
                self.new_batch = true;
            }
        }
        self.nr_dispatched -= 1;
        // A batch's clock starts when its first request is served, which helps devices
        // that queue and cache writes.
        if self.new_batch && self.batch_dir == dir {
            self.update_write_batch(now);
            self.current_batch_expires = now + self.batch_expire[SYNC];
            self.new_batch = false;
        }
        if self
            .antic_flow
            .is_some_and(|(flow, _)| flow == request.flow)
        {
            self.antic_start = now;
            self.ioc_finished = true;
            if self.antic == Antic::WaitReq {
                self.antic = Antic::WaitNext;
            }
        }
        if request.sync {
            if let Some(stats) = self.flows.get_mut(&request.flow) {
                stats.io_running = true;
                stats.last_end_request = now;
            }
        }
    }
}

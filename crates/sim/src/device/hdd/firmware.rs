//! The drive's firmware: the command queue and what to do next (`decide`: a queued command by NCQ's
//! aged shortest positioning time first, a destage of the write cache, read-ahead), read-ahead and
//! its segments, the write cache and flushes, and serving reads from the buffer.

use super::*;
use config::{CdlPolicy, NcqOrder};

/// The NCQ priority a request's command gets: high when NCQ priority is on and the request's
/// class is one of `ncq_prio_classes` (libata: RT only, in `ata_build_rw_tf`).
pub(super) fn command_priority(config: &HddConfig, request: &Request) -> CommandPriority {
    if !config.ncq_prio_enable {
        return CommandPriority::Normal;
    }
    let bit = match request.prio.effective_class() {
        iosched_core::IoPrioClass::Rt => config::PRIO_CLASS_RT,
        iosched_core::IoPrioClass::Idle => config::PRIO_CLASS_IDLE,
        _ => config::PRIO_CLASS_BE,
    };
    if config.ncq_prio_classes & bit != 0 {
        CommandPriority::High
    } else {
        CommandPriority::Normal
    }
}

impl Hdd {
    /// The duration limits `request` carries when accepted at `now`: with `cdl_enable`, the
    /// descriptor its priority hint names (1-7) in its direction, if that descriptor is set
    /// (the kernel's `sd_cdl_dld`; reads use the T2A page, writes T2B).
    pub(super) fn limits_of(&self, request: &Request, now: Nanos) -> Option<Limits> {
        if !self.config.cdl_enable {
            return None;
        }
        let direction = match request.op {
            Op::Read => 0,
            Op::Write => 1,
            Op::Flush | Op::Discard => return None,
        };
        let index = usize::from(request.prio.duration_limit()?) - 1;
        let (inactive, active, policy) = self.cdl[direction][index]?;
        Some(Limits {
            start_by: inactive.map(|limit| now.saturating_add(limit)),
            active,
            policy,
            missed: false,
        })
    }

    /// When a queued command must start by, if it has a live inactive limit.
    pub(super) fn start_by(&self, slot: u32) -> Option<Nanos> {
        self.command(slot).limits.and_then(|limits| limits.start_by)
    }

    /// Applies the policy of every waiting command whose inactive limit has passed by `now`:
    /// abort (it completes now with ETIME), demote (it loses its limits), or best effort (it
    /// stays first in line, counted once as missed).
    pub(super) fn expire_limits(&mut self, now: Nanos) {
        let due: Vec<u32> = self
            .queued
            .iter()
            .map(|queued| queued.slot)
            .chain(self.waiting_for_room.iter().copied())
            .filter(|&slot| self.start_by(slot).is_some_and(|by| by <= now))
            .collect();
        for slot in due {
            if self.expire(slot, now) {
                self.queued.remove_slot(slot);
                self.waiting_for_room.retain(|&waiting| waiting != slot);
            }
        }
    }

    /// The inactive limit of the command in `slot` at `now`; returns whether it was aborted.
    fn expire(&mut self, slot: u32, now: Nanos) -> bool {
        let command = self.slots[slot as usize].as_mut().expect("slot in use");
        let Some(limits) = command.limits.as_mut() else {
            return false;
        };
        if limits.start_by.is_none_or(|by| by > now) || limits.missed {
            return false;
        }
        match limits.policy {
            CdlPolicy::Abort => {
                command.aborted = true;
                self.counters.cdl_aborted += 1;
                self.complete_at(slot, now);
                true
            }
            CdlPolicy::Demote => {
                command.limits = None;
                self.counters.cdl_demoted += 1;
                self.counters.cdl_missed += 1;
                false
            }
            CdlPolicy::BestEffort => {
                limits.missed = true;
                self.counters.cdl_missed += 1;
                false
            }
        }
    }

    /// The next time a waiting command's limit changes what the firmware does: it comes
    /// within the guard (it goes first), or it passes (its policy applies).
    pub(super) fn next_limit_event(&self, now: Nanos) -> Option<Nanos> {
        let guard = self.selection.cdl_guard;
        self.queued
            .iter()
            .map(|queued| queued.slot)
            .chain(self.waiting_for_room.iter().copied())
            .filter_map(|slot| {
                let limits = self.command(slot).limits?;
                let by = limits.start_by?;
                let urgent_at = by.saturating_sub(guard);
                if urgent_at > now {
                    Some(urgent_at)
                } else if by > now && !limits.missed {
                    Some(by)
                } else {
                    None
                }
            })
            .min()
    }

    pub(super) fn complete_at(&mut self, slot: u32, time: Nanos) {
        debug_assert!(time >= self.now);
        if let Some(command) = self.slots[slot as usize].as_mut() {
            command.state = State::Completing;
        }
        self.completion_sequence += 1;
        self.completions
            .push(Reverse((time, self.completion_sequence, slot)));
    }

    pub(super) fn command(&self, slot: u32) -> &Command {
        self.slots[slot as usize].as_ref().expect("slot in use")
    }

    /// Starts read-ahead into `segment` at `now` if the segment has room; returns whether it
    /// started.
    pub(super) fn start_read_ahead(&mut self, now: Nanos, segment: usize) -> bool {
        let capacity = self.geometry.sectors();
        let first = self.read_cache.segment(segment).end;
        let limit = self.read_cache.read_ahead_limit(segment).min(capacity);
        if first >= limit || limit - first < self.read_ahead_resume_sectors.min(capacity - first) {
            return false;
        }
        let location = self.geometry.locate(first);
        let moving = self.move_ns(self.head, &location);
        let begin = now as f64 + moving;
        let begin = begin + self.rotational_wait(begin, location.angle);
        let stream = Stream {
            lba: first,
            time: begin,
        };
        let stop_at = self.stream_done(stream, limit).ceil() as Nanos;
        self.activity = Activity::ReadAhead(ReadAhead {
            segment,
            stream,
            origin: first,
            started: now,
            limit,
            stop_at,
            committed_until: now,
        });
        self.counters.read_ahead_runs += 1;
        true
    }

    /// After a miss at `now` that continued a sequential stream in `segment` (ending at `end`),
    /// starts read-ahead that no command may interrupt until `stream_read_ahead_kib` past `end`
    /// are in: firmware stream detection. Without it, interleaved sequential streams would each
    /// interrupt the other's read-ahead at once and every read would miss.
    pub(super) fn start_stream_read_ahead(&mut self, now: Nanos, segment: usize, end: u64) {
        if self.stream_read_ahead_sectors == 0 || !self.start_read_ahead(now, segment) {
            return;
        }
        let Activity::ReadAhead(mut read_ahead) = self.activity else {
            unreachable!("read-ahead just started");
        };
        let target = (end + self.stream_read_ahead_sectors).min(read_ahead.limit);
        read_ahead.committed_until = self.stream_done(read_ahead.stream, target).ceil() as Nanos;
        self.activity = Activity::ReadAhead(read_ahead);
    }

    /// Stops the read-ahead at `now` (at most its stop time): the segment keeps what was read.
    pub(super) fn stop_read_ahead(&mut self, now: Nanos) {
        let Activity::ReadAhead(read_ahead) = self.activity else {
            return;
        };
        let at = now.min(read_ahead.stop_at);
        let reached = if at >= read_ahead.stop_at {
            read_ahead.limit
        } else {
            self.stream_at(read_ahead.stream, at as f64, read_ahead.limit)
                .lba
        };
        self.read_cache.filled(read_ahead.segment, reached);
        self.counters.read_ahead_sectors += reached - read_ahead.origin;
        self.counters.read_ahead_ns += at - read_ahead.started;
        self.head = self.position_of(reached);
        self.head_lba = reached;
        self.activity = Activity::Idle;
        self.idle_since = at;
        self.serve_queued_from_buffer(at);
    }

    /// Moves the running read-ahead's limit up to its segment's window after the host consumed
    /// data from it at `now`.
    pub(super) fn extend_read_ahead(&mut self, now: Nanos) {
        let Activity::ReadAhead(mut read_ahead) = self.activity else {
            return;
        };
        let limit = self
            .read_cache
            .read_ahead_limit(read_ahead.segment)
            .min(self.geometry.sectors());
        if limit <= read_ahead.limit {
            return;
        }
        read_ahead.stream = self.stream_at(read_ahead.stream, now as f64, read_ahead.limit);
        read_ahead.limit = limit;
        read_ahead.stop_at = self.stream_done(read_ahead.stream, limit).ceil() as Nanos;
        self.activity = Activity::ReadAhead(read_ahead);
    }

    /// Whether a destage must go before host commands.
    pub(super) fn destage_urgent(&self) -> bool {
        (!self.waiting_for_room.is_empty() || !self.flushes.is_empty())
            && !self.write_buffer.is_empty()
    }

    /// The dirty extent to destage next from where the heads are at `now`: the best by aged
    /// positioning time (`positioning - age_weight * age`, as NCQ picks commands) among a few on
    /// each side of the head and the oldest. Returns its first sector and positioning time.
    ///
    /// There is no hard deadline here, unlike for host commands: dirty data has already been
    /// acknowledged, so nobody waits on it unless a write needs room or a flush needs it, and
    /// then `serve_next` ages the destage like the oldest waiter. A deadline on the data's own
    /// age would turn destaging into FIFO order once the buffer holds more than two seconds of
    /// writes (2048 random 4 KiB writes drain in about ten), and the write cache would stop
    /// helping random writes at all.
    pub(super) fn best_destage(&self, now: Nanos) -> Option<(u64, f64)> {
        let (oldest_first, oldest) = self.write_buffer.oldest()?;
        let time = now as f64;
        let positioning =
            |first: u64| self.positioning_ns(time, self.head, &self.geometry.locate(first), true);
        let weight = self.selection.age_weight;
        let aged = |positioning: f64, extent: Extent| {
            positioning - weight * now.saturating_sub(extent.written_at) as f64
        };
        let oldest_positioning = positioning(oldest_first);
        let mut best = (
            oldest_first,
            oldest_positioning,
            aged(oldest_positioning, oldest),
        );
        self.write_buffer.around(
            self.head_lba,
            self.config.destage_candidates as usize,
            |first, extent| {
                let candidate = positioning(first);
                let effective = aged(candidate, extent);
                if effective < best.2 || (effective == best.2 && first < best.0) {
                    best = (first, candidate, effective);
                }
            },
        );
        Some((best.0, best.1))
    }

    /// Decides what the mechanism does from `now`, when it is idle or reading ahead.
    pub(super) fn decide(&mut self, now: Nanos) {
        debug_assert!(!matches!(self.activity, Activity::Busy { .. }));
        if let Activity::ReadAhead(_) = self.activity {
            // Ready reads that the read-ahead has reached, or soon will, ride on it.
            self.ride_queued_reads(now);
        }
        let any_ready = self.queued.iter().any(|queued| queued.ready_at <= now);
        let urgent = self.destage_urgent();
        if let Activity::ReadAhead(read_ahead) = self.activity {
            // A command that has waited the hard deadline (a queued one, or a write or flush
            // waiting on destages) stops even the read-ahead a stream was promised: a stream
            // whose reads keep hitting must not hold the mechanism past the deadline.
            let overdue = self.is_due(now);
            // A high-priority command (NCQ priority) stops even the read-ahead a stream was
            // promised; others wait for it.
            let guard = self.selection.cdl_guard;
            let high_ready = any_ready
                && self.queued.iter().any(|queued| {
                    queued.ready_at <= now
                        && (queued.priority == CommandPriority::High
                            || self
                                .start_by(queued.slot)
                                .is_some_and(|by| now.saturating_add(guard) >= by))
                });
            if !(any_ready || urgent)
                || (now < read_ahead.committed_until && !high_ready && !overdue)
            {
                return;
            }
            self.stop_read_ahead(now);
            // Stopping may have served queued reads from the segment: look again.
            self.decide(now);
            return;
        }
        let high_water = self.write_buffer.dirty_sectors() > self.destage_high_water_sectors
            && !self.write_buffer.is_empty();
        if any_ready || urgent || high_water {
            self.serve_next(now);
            return;
        }
        if let Some(segment) = self.read_ahead_segment {
            if self.start_read_ahead(now, segment) {
                return;
            }
        }
        if !self.write_buffer.is_empty() && now >= self.idle_since + self.destage_idle {
            if let Some((first, _)) = self.best_destage(now) {
                self.start_destage(now, first);
            }
        }
    }

    /// Picks among the ready commands (and a destage above the high-water mark) by
    /// [`Selection`] and starts it.
    pub(super) fn serve_next(&mut self, now: Nanos) {
        self.write_through_if_due(now);
        let due = self.is_due(now);
        let under = self.angle_at(now as f64);
        // Only with CDL on may a command have limits ([`Hdd::limits_of`]).
        let limits = self.config.cdl_enable;
        let candidate = |queued: &Queued, positioning_ns| Candidate {
            positioning_ns,
            accepted: queued.accepted,
            priority: queued.priority,
            start_by: if limits {
                self.start_by(queued.slot)
            } else {
                None
            },
        };
        let ready = self.queued.iter().filter(|queued| queued.ready_at <= now);
        let mut chooser = self.selection.chooser(now, due);
        // Each command's positioning is computed and weighed in one pass: in the plain case
        // (nothing due or overdue, no limits, no high priority) by a lean pass whose best
        // alone then competes with a destage, as it would among them all.
        let plain = if due || limits {
            None
        } else {
            let walked = match self.queued.by_cylinder() {
                Some(by_cylinder) => self.plain_walk(by_cylinder, now, under),
                None => None,
            };
            walked.or_else(|| {
                self.selection.plain_best(
                    now,
                    ready
                        .clone()
                        .map(|queued| (queued, queued.accepted, queued.priority)),
                    |queued| self.ordering_ns(under, queued),
                )
            })
        };
        match plain {
            Some(best) => {
                if let Some((queued, positioning)) = best {
                    chooser.offer(Choice::Command(queued.slot), candidate(queued, positioning));
                }
            }
            None => {
                for queued in ready {
                    let positioning = self.ordering_ns(under, queued);
                    chooser.offer(Choice::Command(queued.slot), candidate(queued, positioning));
                }
            }
        }
        let urgent = self.destage_urgent();
        if urgent || self.write_buffer.dirty_sectors() > self.destage_high_water_sectors {
            if let Some((first, positioning_ns)) = self.best_destage(now) {
                // A destage that a waiting write or flush needs is as old as the oldest of
                // them, so aging and the deadline treat it like a host command; one above the
                // high-water mark has no host waiting on it and competes on position alone.
                let accepted = if urgent {
                    self.oldest_waiter_accepted().unwrap_or(now)
                } else {
                    now
                };
                chooser.offer(
                    Choice::Destage(first),
                    Candidate {
                        positioning_ns,
                        accepted,
                        priority: CommandPriority::Normal,
                        start_by: None,
                    },
                );
            }
        }
        if let Some((choice, chosen)) = chooser.chosen() {
            if due || now.saturating_sub(chosen.accepted) >= self.selection.deadline {
                self.counters.deadline_picks += 1;
            }
            if chosen.priority == CommandPriority::High {
                self.counters.high_picks += 1;
            }
            if chosen.start_by.is_some_and(|by| {
                now.saturating_add(self.selection.cdl_guard) >= by
                    && !due
                    && now.saturating_sub(chosen.accepted) < self.selection.deadline
            }) {
                self.counters.cdl_urgent_picks += 1;
            }
            match choice {
                Choice::Command(slot) => self.start_command(now, slot),
                Choice::Destage(first) => self.start_destage(now, first),
            }
        }
    }

    /// [`Selection::plain_best`]'s choice among the ready commands, found by walking `list`
    /// (the queued commands by cylinder: [`QueuedCommands::by_cylinder`]) out from the head,
    /// nearer side first: a side ends at the first command whose seek alone, less the largest
    /// aging credit, is above the best aged positioning so far. Every command beyond it is
    /// further, so its seek is no shorter (the seek curve rises: [`SeekCurve::rises`]), and
    /// its positioning is that seek plus a write's settle and a rotational wait, so it cannot
    /// win or tie. Ties go as `plain_best`'s: the earliest accepted, then the first queued.
    /// `None` where `plain_best` would decline (a command of high priority or overdue) or the
    /// curve does not rise.
    pub(super) fn plain_walk(
        &self,
        list: &[ByCylinder],
        now: Nanos,
        under: f64,
    ) -> Option<Option<(&Queued, f64)>> {
        let selection = &self.selection;
        if self.queued.high > 0 || !self.seek_rises {
            return None;
        }
        let Some(oldest) = self.queued.oldest_accepted() else {
            return Some(None);
        };
        let max_age = now.saturating_sub(oldest);
        if max_age >= selection.deadline {
            return None;
        }
        let credit = selection.age_weight * nanos_f64(max_age);
        let cylinder = self.head.cylinder;
        let (mut below, mut above) = {
            let at = list.partition_point(|entry| entry.cylinder < cylinder);
            (at, at)
        };
        // The best so far: the command, its positioning, its aged positioning.
        let mut best: Option<(&Queued, f64, f64)> = None;
        loop {
            let down = below.checked_sub(1).map(|index| &list[index]);
            let up = list.get(above);
            let (entry, upward) = match (down, up) {
                (None, None) => break,
                (Some(down), None) => (down, false),
                (None, Some(up)) => (up, true),
                (Some(down), Some(up)) => {
                    if cylinder - down.cylinder <= up.cylinder - cylinder {
                        (down, false)
                    } else {
                        (up, true)
                    }
                }
            };
            // The seek bounds the walk, and is part of the command's positioning.
            let seek = self.seek.time_ns(entry.cylinder.abs_diff(cylinder));
            if best.is_some_and(|(_, _, effective)| seek - credit > effective) {
                // This side is done.
                if upward {
                    above = list.len();
                } else {
                    below = 0;
                }
                continue;
            }
            if upward {
                above += 1;
            } else {
                below -= 1;
            }
            let queued = self.queued.get(entry.slot);
            if queued.ready_at > now {
                continue;
            }
            let positioning = self.ordering_after_seek(under, queued, seek);
            // As [`Selection::plain_best`] and [`Chooser::offer`] compute it.
            let age = now.saturating_sub(queued.accepted);
            let effective = selection.aged_ns(positioning, age);
            let better = best.is_none_or(|(other, _, best_effective)| {
                effective < best_effective
                    || (effective == best_effective
                        && (queued.accepted, queued.seq) < (other.accepted, other.seq))
            });
            if better {
                best = Some((queued, positioning, effective));
            }
        }
        Some(best.map(|(queued, positioning, _)| (queued, positioning)))
    }

    /// What the firmware orders `queued` by (`ncq_order`) with `under` under the heads now, ns.
    #[inline(always)]
    pub(super) fn ordering_ns(&self, under: f64, queued: &Queued) -> f64 {
        let seek = self
            .seek
            .time_ns(self.head.cylinder.abs_diff(queued.target.cylinder));
        self.ordering_after_seek(under, queued, seek)
    }

    /// [`Hdd::ordering_ns`] with `seek`, the seek curve's time from the head to `queued`,
    /// computed already.
    #[inline(always)]
    pub(super) fn ordering_after_seek(&self, under: f64, queued: &Queued, seek: f64) -> f64 {
        let (head, target, write) = (self.head, &queued.target, queued.write);
        match self.config.ncq_order {
            NcqOrder::Sptf => self.positioning_after_seek(under, head, target, write, seek),
            // The seek alone (and a write's settle): where the sector is on the track is left
            // to chance.
            NcqOrder::Sstf => self.settled(self.move_after_seek(head, target, seek), write),
        }
    }

    /// A write that has waited for room until the firmware must serve oldest first, and is the
    /// oldest waiting command, goes to the media itself, as a write with the cache off does; the
    /// dirty data it overwrites is dropped from the buffer. Waiting on for room could take a
    /// destage per dirty extent its size needs freed (a 1 MiB write behind a buffer of random
    /// 4 KiB writes needs 256), past the hard deadline; written through it takes one access.
    /// The writes behind it then take the room it leaves, in order.
    fn write_through_if_due(&mut self, now: Nanos) {
        let Some(&slot) = self.waiting_for_room.front() else {
            return;
        };
        let accepted = self.command(slot).accepted;
        if self
            .queued
            .iter()
            .any(|queued| queued.accepted < accepted)
            || !self.is_due(now)
        {
            return;
        }
        self.waiting_for_room.pop_front();
        let command = self.command(slot);
        let (first, end, bytes) = (command.first, command.end, command.request.len);
        self.write_buffer.discard(first, end);
        self.counters.writes_through_for_deadline += 1;
        let bus_done = self.bus_transfer(now, bytes);
        self.enqueue_media(slot, bus_done);
        self.admit_waiting_writes(now);
    }

    pub(super) fn start_command(&mut self, now: Nanos, slot: u32) {
        let position = self.queued.position(slot).expect("command is queued");
        let target = self.queued.remove(position).target;
        let command = self.command(slot);
        let (first, end) = (command.first, command.end);
        let write = command.request.op == Op::Write;
        let active = command.limits.and_then(|limits| limits.active.map(|a| (a, limits)));
        let (done, to) = self.access(now as f64, self.head, first, end, write);
        let mut until = done.ceil() as Nanos;
        if let Some((active, limits)) = active {
            if until - now > active {
                // The access would exceed its active limit. Abort: the drive gives up at the
                // limit (the head is left where the access would have ended: we do not model
                // a partial transfer); otherwise it completes, the limit missed.
                if limits.policy == CdlPolicy::Abort {
                    until = now + active;
                    let command = self.slots[slot as usize].as_mut().expect("slot in use");
                    command.aborted = true;
                    self.counters.cdl_aborted += 1;
                } else if !limits.missed {
                    self.counters.cdl_missed += 1;
                }
            }
        }
        self.account_access(now, to, &target, until);
        self.head_lba = end;
        if write {
            self.counters.media_writes += 1;
        } else {
            self.counters.read_misses += 1;
            let (segment, sequential) = self.read_cache.allocate(first, end);
            self.slots[slot as usize]
                .as_mut()
                .expect("slot in use")
                .state = State::Media {
                segment: Some(segment),
                sequential,
            };
        }
        self.activity = Activity::Busy {
            until,
            work: Work::Command(slot),
        };
    }

    pub(super) fn start_destage(&mut self, now: Nanos, first: u64) {
        let end = self
            .write_buffer
            .begin_destage(first, self.destage_max_sectors);
        let target = self.geometry.locate(first);
        let (done, to) = self.access(now as f64, self.head, first, end, true);
        let until = done.ceil() as Nanos;
        self.account_access(now, to, &target, until);
        self.head_lba = end;
        self.counters.destages += 1;
        self.counters.destaged_sectors += end - first;
        self.activity = Activity::Busy {
            until,
            work: Work::Destage,
        };
    }

    /// The media access in progress ends at `now`.
    pub(super) fn finish_work(&mut self, now: Nanos, work: Work) {
        self.activity = Activity::Idle;
        self.idle_since = now;
        match work {
            Work::Command(slot) => {
                let command = self.command(slot);
                let state = command.state;
                let end = command.end;
                let aborted = command.aborted;
                self.complete_at(slot, now);
                if aborted {
                    return;
                }
                if let State::Media {
                    segment: Some(segment),
                    sequential,
                } = state
                {
                    self.read_cache.filled(segment, end);
                    self.read_ahead_segment = Some(segment);
                    if sequential {
                        self.start_stream_read_ahead(now, segment, end);
                    }
                }
            }
            Work::Destage => {
                self.write_buffer.end_destage();
                self.admit_waiting_writes(now);
                self.complete_flushes(now);
            }
        }
    }

    /// Writes waiting for room enter the buffer, in order, while they fit.
    pub(super) fn admit_waiting_writes(&mut self, now: Nanos) {
        while let Some(&slot) = self.waiting_for_room.front() {
            let command = self.command(slot);
            let (first, end, ready_at, bytes) = (
                command.first,
                command.end,
                command.ready_at,
                command.request.len,
            );
            if !self.write_buffer.has_room(end - first) {
                break;
            }
            self.waiting_for_room.pop_front();
            self.absorb_write(slot, first, end, now.max(ready_at), bytes, now);
        }
    }

    pub(super) fn absorb_write(
        &mut self,
        slot: u32,
        first: u64,
        end: u64,
        ready: Nanos,
        bytes: u64,
        now: Nanos,
    ) {
        self.write_sequence += 1;
        self.write_buffer
            .insert(first, end, self.write_sequence, now);
        self.counters.writes_absorbed += 1;
        let done = self.bus_transfer(ready, bytes);
        self.complete_at(slot, done);
    }

    /// Flushes whose writes are all on the media complete.
    pub(super) fn complete_flushes(&mut self, now: Nanos) {
        let mut index = 0;
        while index < self.flushes.len() {
            let slot = self.flushes[index];
            let State::Flush { sequence } = self.command(slot).state else {
                unreachable!("a flush waits in flushes");
            };
            if self.write_buffer.clean_up_to(sequence) {
                self.flushes.swap_remove(index);
                let ready = self.command(slot).ready_at.max(now);
                self.complete_at(slot, ready);
            } else {
                index += 1;
            }
        }
    }

    /// Handles the mechanism's wake-up at `now`.
    pub(super) fn wake(&mut self, now: Nanos) {
        if self.config.cdl_enable {
            self.expire_limits(now);
        }
        match self.activity {
            Activity::Busy { until, work } => {
                if until <= now {
                    self.finish_work(until, work);
                    self.decide(until);
                }
            }
            Activity::ReadAhead(read_ahead) if read_ahead.stop_at <= now => {
                self.stop_read_ahead(read_ahead.stop_at);
                self.decide(read_ahead.stop_at);
            }
            _ => self.decide(now),
        }
    }

    /// When the mechanism next needs attention; never before the device's current time.
    pub(super) fn compute_wakeup(&self) -> Option<Nanos> {
        let mechanism = self.mechanism_wakeup();
        let limit = if self.config.cdl_enable {
            self.next_limit_event(self.now)
        } else {
            None
        };
        let at = match (mechanism, limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        at.map(|at| at.max(self.now))
    }

    pub(super) fn mechanism_wakeup(&self) -> Option<Nanos> {
        // Only an idle or reading-ahead mechanism looks at the queue (with many commands
        // queued it is busy nearly always, and this runs at every step of the device).
        let earliest_ready = || self.queued.iter().map(|queued| queued.ready_at).min();
        match self.activity {
            Activity::Busy { until, .. } => Some(until),
            Activity::ReadAhead(read_ahead) => {
                let interrupt = if self.destage_urgent() {
                    Some(read_ahead.committed_until)
                } else {
                    earliest_ready().map(|ready| ready.max(read_ahead.committed_until))
                };
                // Whatever was promised, read-ahead stops when a waiting command reaches the
                // hard deadline.
                let overdue = self.due_at().filter(|&at| at > self.now);
                [interrupt, overdue, Some(read_ahead.stop_at)]
                    .into_iter()
                    .flatten()
                    .min()
            }
            Activity::Idle => {
                let destage = (!self.write_buffer.is_empty())
                    .then(|| (self.idle_since + self.destage_idle).max(self.now));
                match (earliest_ready(), destage) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
        }
    }

    /// Classifies a read at `now`: hit, read-ahead path, or miss.
    pub(super) fn submit_read(&mut self, slot: u32, now: Nanos) {
        let hit_ready = now + self.read_hit_overhead;
        // A FUA read is served from the media, whatever the cache holds.
        if self.command(slot).request.fua {
            self.enqueue_media(slot, now + self.read_miss_overhead);
            return;
        }
        if self.ride_read_ahead(slot, now, hit_ready) || self.serve_from_buffer(slot, hit_ready) {
            return;
        }
        self.enqueue_media(slot, now + self.read_miss_overhead);
    }

    /// Serves the read in `slot` from the running read-ahead if its data is there or on the way:
    /// it starts within the segment's data or at most one segment beyond what has been read.
    /// Its bus transfer starts no earlier than `ready`. Returns whether it was served.
    pub(super) fn ride_read_ahead(&mut self, slot: u32, now: Nanos, ready: Nanos) -> bool {
        let Activity::ReadAhead(read_ahead) = self.activity else {
            return false;
        };
        let command = self.command(slot);
        let (first, end, bytes) = (command.first, command.end, command.request.len);
        let segment = read_ahead.segment;
        let reached = self
            .stream_at(read_ahead.stream, now as f64, read_ahead.limit)
            .lba;
        let valid_start = self.read_cache.valid_start(segment, reached);
        if first < valid_start || first > reached + self.read_cache.segment_sectors() {
            return false;
        }
        self.read_cache.touch(segment, end);
        self.extend_read_ahead(now);
        let Activity::ReadAhead(mut read_ahead) = self.activity else {
            unreachable!("still reading ahead");
        };
        let sent = self.bus_transfer(ready, bytes);
        if end <= reached {
            self.counters.read_hits += 1;
            self.complete_at(slot, sent);
        } else {
            self.counters.read_ahead_waits += 1;
            let data_at = self.stream_done(read_ahead.stream, end).ceil() as Nanos;
            read_ahead.committed_until = read_ahead.committed_until.max(data_at);
            self.activity = Activity::ReadAhead(read_ahead);
            self.complete_at(slot, sent.max(data_at));
        }
        true
    }

    /// Serves the read in `slot` from a read segment (other than the one being read ahead
    /// into) or from the write buffer, its bus transfer starting no earlier than `ready`.
    /// Returns whether it was served.
    pub(super) fn serve_from_buffer(&mut self, slot: u32, ready: Nanos) -> bool {
        let command = self.command(slot);
        let (first, end, bytes) = (command.first, command.end, command.request.len);
        let skip = match self.activity {
            Activity::ReadAhead(read_ahead) => Some(read_ahead.segment),
            _ => None,
        };
        if let Some(segment) = self.read_cache.find(first, end, skip) {
            self.read_cache.touch(segment, end);
        } else if !self.write_buffer.contains(first, end) {
            return false;
        }
        self.counters.read_hits += 1;
        let sent = self.bus_transfer(ready, bytes);
        self.complete_at(slot, sent);
        true
    }

    /// Queued reads whose data is now in the buffer (read-ahead got there first) complete
    /// from it instead of going to the media.
    pub(super) fn serve_queued_from_buffer(&mut self, now: Nanos) {
        let mut index = 0;
        while index < self.queued.len() {
            let slot = self.queued.slot_at(index);
            let command = self.command(slot);
            let ready = command.ready_at.max(now);
            if command.request.op == Op::Read
                && !command.request.fua
                && self.serve_from_buffer(slot, ready)
            {
                self.queued.remove(index);
            } else {
                index += 1;
            }
        }
    }

    /// Ready queued reads that the running read-ahead has reached or will reach ride on it.
    pub(super) fn ride_queued_reads(&mut self, now: Nanos) {
        let mut index = 0;
        while index < self.queued.len() {
            let slot = self.queued.slot_at(index);
            let command = self.command(slot);
            if command.request.op == Op::Read
                && !command.request.fua
                && command.ready_at <= now
                && self.ride_read_ahead(slot, now, now)
            {
                self.queued.remove(index);
            } else {
                index += 1;
            }
        }
    }

    /// An upper bound of the mechanism's time for `sectors`: the worst positioning plus the
    /// transfer in the slowest zone, ns.
    pub(super) fn service_bound(&self, sectors: u64) -> Nanos {
        (self.access_bound_ns + sectors as f64 * self.slowest_sector_ns).ceil() as Nanos
    }

    /// From when the firmware serves the waiting commands oldest first so that none waits
    /// past the hard deadline plus one access: the earliest over the waiting commands, oldest
    /// first, of `accepted + deadline - (bounds of it and every older one)`. A command that
    /// has reached it would be late if each older one took its longest time first. Waiting
    /// commands are the queued ones and the writes and flushes waiting on destages (each
    /// counted as one destage, a write as its own access if longer).
    pub(super) fn due_at(&self) -> Option<Nanos> {
        let destage = self.service_bound(self.destage_max_sectors);
        let mut waiting = std::mem::take(&mut *self.scratch_due.borrow_mut());
        waiting.clear();
        waiting.extend(
            self.queued
                .iter()
                .map(|queued| (queued.accepted, queued.bound)),
        );
        waiting.extend(
            self.waiting_for_room
                .iter()
                .chain(self.flushes.iter())
                .map(|&slot| self.waiter_bound(slot, destage)),
        );
        waiting.sort_unstable();
        let mut ahead: Nanos = 0;
        let mut due: Option<Nanos> = None;
        for &(accepted, bound) in &waiting {
            ahead = ahead.saturating_add(bound);
            let at = accepted
                .saturating_add(self.selection.deadline)
                .saturating_sub(ahead);
            due = Some(due.map_or(at, |due| due.min(at)));
        }
        *self.scratch_due.borrow_mut() = waiting;
        due
    }

    /// Whether [`Hdd::due_at`] has come by `now`. It is decided first from a bound that needs
    /// no sorting: no command can be due before the oldest one's deadline minus the bounds of
    /// all of them, which under ordinary load is seconds away; only past it is the exact time
    /// worked out. This runs at every decision of the mechanism.
    pub(super) fn is_due(&self, now: Nanos) -> bool {
        let destage = self.service_bound(self.destage_max_sectors);
        let mut oldest = self.queued.oldest_accepted().unwrap_or(Nanos::MAX);
        let mut all = self.queued.bounds();
        for &slot in self.waiting_for_room.iter().chain(self.flushes.iter()) {
            let (accepted, bound) = self.waiter_bound(slot, destage);
            oldest = oldest.min(accepted);
            all = all.saturating_add(bound);
        }
        if oldest == Nanos::MAX
            || oldest
                .saturating_add(self.selection.deadline)
                .saturating_sub(all)
                > now
        {
            return false;
        }
        self.due_at().is_some_and(|at| at <= now)
    }

    /// A write waiting for room or a flush waiting for destages, as (accepted, bound): one
    /// `destage`, or for a write its own access if longer, as it may be written through
    /// ([`Hdd::write_through_if_due`]).
    fn waiter_bound(&self, slot: u32, destage: Nanos) -> (Nanos, Nanos) {
        let command = self.command(slot);
        let bound = match command.request.op {
            Op::Write => command.bound.max(destage),
            _ => destage,
        };
        (command.accepted, bound)
    }

    /// The acceptance time of the oldest write waiting for room or flush waiting for destages.
    pub(super) fn oldest_waiter_accepted(&self) -> Option<Nanos> {
        self.waiting_for_room
            .iter()
            .chain(self.flushes.iter())
            .map(|&slot| self.command(slot).accepted)
            .min()
    }

    pub(super) fn submit_write(&mut self, slot: u32, now: Nanos) {
        let command = self.command(slot);
        let (first, end, bytes) = (command.first, command.end, command.request.len);
        let sectors = end - first;
        let ready = now + self.write_overhead;
        // A FUA write (WRITE FPDMA QUEUED with the FUA bit) goes through to the media even
        // with the write cache on.
        let fua = command.request.fua;
        if fua {
            self.counters.fua_writes += 1;
        }
        if self.config.write_cache && !fua && sectors <= self.write_buffer.capacity_sectors() {
            if self.waiting_for_room.is_empty() && self.write_buffer.has_room(sectors) {
                self.absorb_write(slot, first, end, ready, bytes, now);
            } else {
                self.counters.writes_waited_for_room += 1;
                self.slots[slot as usize]
                    .as_mut()
                    .expect("slot in use")
                    .state = State::BufferWait;
                self.waiting_for_room.push_back(slot);
            }
            return;
        }
        // Write-through: the data crosses the bus, then the command waits for the media.
        let bus_done = self.bus_transfer(ready, bytes);
        self.enqueue_media(slot, bus_done);
    }

    pub(super) fn enqueue_media(&mut self, slot: u32, ready_at: Nanos) {
        let command = self.slots[slot as usize].as_mut().expect("slot in use");
        command.ready_at = ready_at;
        command.state = State::Media {
            segment: None,
            sequential: false,
        };
        let queued = Queued {
            slot,
            write: command.request.op == Op::Write,
            priority: command_priority(&self.config, &command.request),
            ready_at,
            accepted: command.accepted,
            bound: command.bound,
            target: self.geometry.locate(command.first),
            seq: 0,
        };
        self.queued.push(queued);
        self.counters.max_queued = self.counters.max_queued.max(self.queued.len() as u64);
    }
}

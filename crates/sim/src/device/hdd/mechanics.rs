//! The mechanics: where the head is, seek and settle (`move_ns`), rotational waits, media transfer
//! along tracks and across zones, and the bus.

use super::*;

/// Fractional part of a non-negative `value` below 2^63 (a truncating signed cast, which is
/// one instruction each way: no libm call).
#[inline]
pub(super) fn fraction(value: f64) -> f64 {
    debug_assert!(value >= 0.0);
    value - (value as i64) as f64
}

pub(super) fn ms_to_ns(ms: f64) -> f64 {
    ms * 1e6
}

pub(super) fn ms_to_nanos(ms: f64) -> Nanos {
    (ms * 1e6).round() as Nanos
}

impl Hdd {
    /// One revolution, ns.
    pub fn revolution_ns(&self) -> f64 {
        self.revolution_ns
    }

    /// Angle under the heads at `time` (ns).
    #[inline]
    pub(super) fn angle_at(&self, time: f64) -> f64 {
        fraction((time + self.phase_ns) * self.revolutions_per_ns)
    }

    /// Wait from `time` until `angle` comes under the heads, ns.
    #[inline]
    pub(super) fn rotational_wait(&self, time: f64, angle: f64) -> f64 {
        self.wait_for(self.angle_at(time), angle)
    }

    /// Wait, with `under` under the heads now, until `angle` comes round, ns.
    #[inline]
    pub(super) fn wait_for(&self, under: f64, angle: f64) -> f64 {
        // Both angles are in [0, 1), so their difference is in (-1, 1): one side to wrap,
        // added as 0 or 1 rather than branched on (with random targets a branch here went
        // either way, and selection evaluates every queued command).
        let difference = angle - under;
        let wait = difference + f64::from(u8::from(difference < 0.0));
        if wait > 1.0 - ROTATION_TOLERANCE {
            0.0
        } else {
            wait * self.revolution_ns
        }
    }

    /// Time to move the heads from `from` onto the track of `to`, ns.
    #[inline]
    pub(super) fn move_ns(&self, from: HeadPosition, to: &Location) -> f64 {
        let seek = self.seek.time_ns(from.cylinder.abs_diff(to.cylinder));
        self.move_after_seek(from, to, seek)
    }

    /// [`Hdd::move_ns`] with `seek`, the seek curve's time over the distance from `from` to
    /// `to`, computed already (selection bounds its walk by it before it weighs a command).
    #[inline]
    pub(super) fn move_after_seek(&self, from: HeadPosition, to: &Location, seek: f64) -> f64 {
        let switch = if from.head == to.head {
            0.0
        } else {
            self.head_switch_ns
        };
        if from.cylinder == to.cylinder {
            return switch;
        }
        // Neither is NaN, so a comparison gives `max` without its NaN handling (six more
        // instructions, in the loop over every queued command).
        if seek >= switch {
            seek
        } else {
            switch
        }
    }

    /// `moving` (ns) with a write's settle, if the heads move.
    #[inline]
    pub(super) fn settled(&self, moving: f64, write: bool) -> f64 {
        if write && moving > 0.0 {
            moving + self.write_settle_ns
        } else {
            moving
        }
    }

    /// Positioning time (move, write settle, rotational wait) from `from` at `time`, ns.
    #[inline]
    pub(super) fn positioning_ns(
        &self,
        time: f64,
        from: HeadPosition,
        to: &Location,
        write: bool,
    ) -> f64 {
        self.positioning_from_angle(self.angle_at(time), from, to, write)
    }

    /// Positioning time from `from` with `under` under the heads now, ns. Selection evaluates
    /// every queued command from the same instant, so it computes `under` once.
    #[inline]
    pub(super) fn positioning_from_angle(
        &self,
        under: f64,
        from: HeadPosition,
        to: &Location,
        write: bool,
    ) -> f64 {
        let seek = self.seek.time_ns(from.cylinder.abs_diff(to.cylinder));
        self.positioning_after_seek(under, from, to, write, seek)
    }

    /// [`Hdd::positioning_from_angle`] with `seek` computed already, as for
    /// [`Hdd::move_after_seek`].
    #[inline]
    pub(super) fn positioning_after_seek(
        &self,
        under: f64,
        from: HeadPosition,
        to: &Location,
        write: bool,
        seek: f64,
    ) -> f64 {
        let moving = self.settled(self.move_after_seek(from, to, seek), write);
        let arrival_angle = fraction(under + moving * self.revolutions_per_ns);
        moving + self.wait_for(arrival_angle, to.angle)
    }

    /// Positions for and transfers `[first, end)` starting at `start` from `from`; returns the
    /// time the last sector has passed and where the heads are then.
    pub(super) fn access(
        &self,
        start: f64,
        from: HeadPosition,
        first: u64,
        end: u64,
        write: bool,
    ) -> (f64, HeadPosition) {
        let mut time = start;
        let mut position = from;
        let mut lba = first;
        let mut initial = true;
        while lba < end {
            let location = self.geometry.locate(lba);
            let mut moving = self.move_ns(position, &location);
            if initial && write && moving > 0.0 {
                moving += self.write_settle_ns;
            }
            time += moving;
            time += self.rotational_wait(time, location.angle);
            let piece_end = self.geometry.track_end(lba, &location).min(end);
            time += (piece_end - lba) as f64 * self.zone_sector_ns[location.zone as usize];
            position = HeadPosition {
                cylinder: location.cylinder,
                head: location.head,
            };
            lba = piece_end;
            initial = false;
        }
        (time, position)
    }

    /// When a stream has read every sector before `target` (`target >= stream.lba`).
    pub(super) fn stream_done(&self, stream: Stream, target: u64) -> f64 {
        let mut lba = stream.lba;
        let mut time = stream.time;
        if target <= lba {
            return time;
        }
        let mut location = self.geometry.locate(lba);
        loop {
            let track_end = self.geometry.track_end(lba, &location);
            let sector_ns = self.zone_sector_ns[location.zone as usize];
            if target <= track_end {
                return time + (target - lba) as f64 * sector_ns;
            }
            time += (track_end - lba) as f64 * sector_ns;
            lba = track_end;
            let next = self.geometry.locate(lba);
            time = self.cross_to(time, &location, &next);
            location = next;
        }
    }

    /// When the head, having read to the end of the track at `from` at `time`, starts reading
    /// `next`: the head or cylinder switch, then the wait for `next`'s first sector.
    pub(super) fn cross_to(&self, time: f64, from: &Location, next: &Location) -> f64 {
        let position = HeadPosition {
            cylinder: from.cylinder,
            head: from.head,
        };
        let time = time + self.move_ns(position, next);
        time + self.rotational_wait(time, next.angle)
    }

    /// Where a stream stopping at `limit` has got to at `time`: the first sector not yet read
    /// and when the head starts reading it.
    pub(super) fn stream_at(&self, stream: Stream, time: f64, limit: u64) -> Stream {
        let mut lba = stream.lba;
        let mut start = stream.time;
        if lba >= limit {
            return stream;
        }
        let mut location = self.geometry.locate(lba);
        loop {
            if time <= start {
                return Stream { lba, time: start };
            }
            let track_end = self.geometry.track_end(lba, &location);
            let piece_end = track_end.min(limit);
            let sector_ns = self.zone_sector_ns[location.zone as usize];
            let piece_done = start + (piece_end - lba) as f64 * sector_ns;
            if time < piece_done {
                let sectors = ((time - start) / sector_ns).floor() as u64;
                return Stream {
                    lba: lba + sectors,
                    time: start + sectors as f64 * sector_ns,
                };
            }
            lba = piece_end;
            start = piece_done;
            if lba >= limit || lba >= self.geometry.sectors() {
                return Stream { lba, time: start };
            }
            let next = self.geometry.locate(lba);
            start = self.cross_to(start, &location, &next);
            location = next;
        }
    }

    /// Head position while streaming at `lba`.
    pub(super) fn position_of(&self, lba: u64) -> HeadPosition {
        let location = self.geometry.locate(lba.min(self.geometry.sectors() - 1));
        HeadPosition {
            cylinder: location.cylinder,
            head: location.head,
        }
    }

    /// Moves `bytes` over the host interface no earlier than `ready`; returns when it is done.
    pub(super) fn bus_transfer(&mut self, ready: Nanos, bytes: u64) -> Nanos {
        let start = ready.max(self.bus_free_at);
        let done = start + (bytes as f64 * self.bus_ns_per_byte).ceil() as Nanos;
        self.bus_free_at = done;
        done
    }

    /// Records a media access from the current head position to `to` lasting until `end`.
    pub(super) fn account_access(
        &mut self,
        now: Nanos,
        to: HeadPosition,
        target: &Location,
        end: Nanos,
    ) {
        self.counters.media_accesses += 1;
        let distance = self.head.cylinder.abs_diff(target.cylinder);
        if distance > 0 {
            self.counters.seeks += 1;
            self.counters.seek_cylinders += u64::from(distance);
        } else if self.head.head != target.head {
            self.counters.head_switches += 1;
        }
        self.counters.media_busy_ns += end - now;
        self.head = to;
    }
}

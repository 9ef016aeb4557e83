//! `hdd`: a 7200 rpm SATA disk of 2006-2010 with zones, a seek curve, rotation tracked in time,
//! a segmented read-ahead cache, a write-back buffer and NCQ reordering.
//!
//! # How a command is served
//!
//! On [`Device::submit`] the controller classifies the command at once:
//!
//! - **Read hit**: all its sectors are in a read segment or dirty in the write buffer. It
//!   completes after the hit overhead and its bus transfer; the mechanism is not involved.
//! - **Read in the read-ahead path**: read-ahead is running in a segment and the command starts
//!   within the data already read or at most one segment beyond it. The command waits for the
//!   read-ahead to reach its end (and keeps it going at least that far), then completes.
//! - **Read miss**: it joins the NCQ queue once the miss overhead has passed.
//! - **Write, write cache on**: if the buffer has room (and no earlier write is waiting for
//!   room) the data is absorbed and the command completes after overhead and bus transfer;
//!   otherwise it waits for destages to free room. With the cache off, or a write larger than the
//!   whole buffer, it joins the NCQ queue and completes when it is on the media.
//! - **Flush**: completes once every write accepted before it is on the media.
//! - **Discard**: completes after the hit overhead (nothing is modelled for it).
//!
//! # The mechanism
//!
//! One arm serves one thing at a time. It is either idle, busy with a media access that cannot
//! be interrupted (a queued command or a destage: seek, write settle, rotational wait, transfer
//! track by track with head/cylinder switches), or reading ahead, which stops as soon as a queued
//! command is ready or a destage becomes urgent (but not before the reads waiting for it have
//! their data). When free it picks, in order:
//!
//! 1. among the ready queued commands, plus a destage when one is urgent (a write waits for
//!    room, or a flush waits) or the buffer is above its high-water mark, the one
//!    [`ncq::Selection`] picks: deadline first, else aged SPTF. An urgent destage is as old as
//!    the oldest write or flush waiting on it, so it neither starves reads nor is starved;
//! 2. with nothing ready: read-ahead into the segment of the last miss while the segment has room;
//! 3. once idle for `destage_idle_ms`: a background destage.
//!
//! Ready reads that the running read-ahead has reached or is about to reach ride on it instead
//! of interrupting it, and queued reads whose data read-ahead brought in complete from the
//! buffer. A miss that continues a segment's data (a sequential stream) starts read-ahead that
//! no command may interrupt for `stream_read_ahead_kib`, as firmware stream detection does:
//! without it two interleaved sequential readers would interrupt each other's read-ahead at once
//! and seek on every block.
//!
//! # Time
//!
//! The platter turns at `rpm` from a seeded phase: the angle under the heads at time `t` is
//! `((t + phase) mod T) / T`. Event times are whole nanoseconds; the geometry is computed in
//! `f64` nanoseconds and rounded up at the end of each access, so a continuing transfer may find
//! its next sector up to a nanosecond late, which [`ROTATION_TOLERANCE`] forgives.
//!
//! Same seed, same settings, same submissions: same completions, to the nanosecond. Nothing
//! iterates a hash map and nothing reads a clock.

pub mod cache;
pub mod config;
pub mod geometry;
pub mod ncq;
pub mod seek;

use super::{parameter, Device, DeviceError};
use cache::{Extent, ReadCache, WriteBuffer};
use config::{HddConfig, SETTINGS};
use geometry::{Format, Geometry, Location};
use iosched_core::{Nanos, Op, Request};
use iosched_fio::Parameter;
use ncq::{Candidate, CommandPriority, Selection};
use seek::SeekCurve;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Sector size in bytes.
pub const SECTOR_BYTES: u64 = 512;

/// A rotational wait within this fraction of a full revolution counts as no wait: it can only
/// come from rounding event times to whole nanoseconds (1e-6 revolution is about 8 ns).
pub const ROTATION_TOLERANCE: f64 = 1e-6;

/// Placeholder target of commands that never go to the media (set for those that do).
const UNPLACED: Location = Location {
    zone: 0,
    cylinder: 0,
    head: 0,
    sector: 0,
    angle: 0.0,
};

/// Where the heads are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HeadPosition {
    cylinder: u32,
    head: u32,
}

/// The head reads sectors from `lba` on, starting to read `lba` at `time` (ns): it is on that
/// sector's track, and every sector before `lba` in the stream has been read.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stream {
    lba: u64,
    time: f64,
}

/// A read-ahead in progress.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ReadAhead {
    segment: usize,
    /// Progress, re-anchored whenever the limit moves.
    stream: Stream,
    /// Where this read-ahead started (for the counters).
    origin: u64,
    /// When it started.
    started: Nanos,
    /// It stops on its own once it reaches this sector (exclusive).
    limit: u64,
    /// When it reaches `limit`.
    stop_at: Nanos,
    /// It may not be interrupted before reads waiting for it have their data.
    committed_until: Nanos,
}

/// What the mechanism does.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Activity {
    Idle,
    Busy { until: Nanos, work: Work },
    ReadAhead(ReadAhead),
}

/// An uninterruptible media access.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Work {
    /// The queued command in this slot.
    Command(u32),
    /// The write buffer's extent being destaged.
    Destage,
}

/// What a command is waiting for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// In the NCQ queue or on the media. `segment` is the read segment a read fills;
    /// `sequential` says the read continues a stream that segment held.
    Media {
        segment: Option<usize>,
        sequential: bool,
    },
    /// A write waiting for room in the buffer.
    BufferWait,
    /// A flush waiting for writes up to this sequence number.
    Flush { sequence: u64 },
    /// Its completion is scheduled.
    Completing,
}

/// An accepted command.
#[derive(Clone, Debug)]
struct Command {
    request: Request,
    /// First sector.
    first: u64,
    /// One past the last sector.
    end: u64,
    accepted: Nanos,
    /// When its overhead is done and it may use the mechanism (or the bus).
    ready_at: Nanos,
    /// Where its first sector lies (media commands).
    target: Location,
    state: State,
}

/// Counters reported by [`Device::counters`].
#[derive(Clone, Debug, Default, PartialEq)]
struct Counters {
    reads: u64,
    writes: u64,
    flushes: u64,
    discards: u64,
    read_hits: u64,
    read_ahead_waits: u64,
    read_misses: u64,
    read_ahead_runs: u64,
    read_ahead_sectors: u64,
    read_ahead_ns: u64,
    writes_absorbed: u64,
    writes_waited_for_room: u64,
    media_writes: u64,
    destages: u64,
    destaged_sectors: u64,
    media_accesses: u64,
    seeks: u64,
    seek_cylinders: u64,
    head_switches: u64,
    media_busy_ns: u64,
    deadline_picks: u64,
    max_queued: u64,
    completed: u64,
}

/// What one choice of the mechanism would serve.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Choice {
    Command(u32),
    Destage(u64),
}

/// The disk model.
pub struct Hdd {
    config: HddConfig,
    geometry: Geometry,
    seek: SeekCurve,
    selection: Selection,
    revolution_ns: f64,
    /// `1 / revolution_ns`.
    revolutions_per_ns: f64,
    phase_ns: f64,
    /// Sector time of each zone, ns.
    zone_sector_ns: Vec<f64>,
    head_switch_ns: f64,
    write_settle_ns: f64,
    read_hit_overhead: Nanos,
    read_miss_overhead: Nanos,
    write_overhead: Nanos,
    destage_idle: Nanos,
    bus_ns_per_byte: f64,
    destage_high_water_sectors: u64,
    destage_max_sectors: u64,
    read_ahead_resume_sectors: u64,
    stream_read_ahead_sectors: u64,

    slots: Vec<Option<Command>>,
    free_slots: Vec<u32>,
    in_flight: u32,
    /// Slots of commands waiting for the mechanism, in acceptance order.
    queued: Vec<u32>,
    waiting_for_room: VecDeque<u32>,
    flushes: Vec<u32>,
    /// (completion time, sequence, slot), earliest first.
    completions: BinaryHeap<Reverse<(Nanos, u64, u32)>>,
    completion_sequence: u64,

    activity: Activity,
    head: HeadPosition,
    /// The sector after the last one the head transferred.
    head_lba: u64,
    idle_since: Nanos,
    /// Segment of the last read miss: where idle read-ahead goes.
    read_ahead_segment: Option<usize>,
    read_cache: ReadCache,
    write_buffer: WriteBuffer,
    write_sequence: u64,
    bus_free_at: Nanos,
    /// When the mechanism next needs attention.
    wakeup: Option<Nanos>,
    now: Nanos,
    scratch_candidates: Vec<Candidate>,
    scratch_choices: Vec<Choice>,
    counters: Counters,
}

/// Fractional part of a non-negative `value` below 2^63 (a truncating signed cast, which is
/// one instruction each way: no libm call).
#[inline]
fn fraction(value: f64) -> f64 {
    debug_assert!(value >= 0.0);
    value - (value as i64) as f64
}

fn ms_to_ns(ms: f64) -> f64 {
    ms * 1e6
}

fn ms_to_nanos(ms: f64) -> Nanos {
    (ms * 1e6).round() as Nanos
}

/// SplitMix64: turns the seed into the platter's initial phase.
fn splitmix64(mut state: u64) -> u64 {
    state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Hdd {
    /// Builds the model from `settings` (name, value) over the defaults.
    pub fn from_settings(settings: &[(String, String)], seed: u64) -> Result<Hdd, DeviceError> {
        let mut config = HddConfig::default();
        for (name, value) in settings {
            config.set(name, value)?;
        }
        Hdd::new(config, seed)
    }

    /// Builds the model from `config`, seeded.
    pub fn new(config: HddConfig, seed: u64) -> Result<Hdd, DeviceError> {
        let invalid = |name: &str, reason: String| DeviceError::BadValue {
            name: name.to_string(),
            value: config.get(name),
            reason,
        };
        let revolution_ns = 60e9 / config.rpm;
        let head_switch_ns = ms_to_ns(config.head_switch_ms);
        // Moving to the next cylinder: a one-cylinder seek while the head switches back to
        // head 0, whichever is longer.
        let cylinder_switch_ns = ms_to_ns(config.track_to_track_ms).max(head_switch_ns);
        let geometry = Geometry::new(&Format {
            sectors: config.capacity_sectors,
            heads: config.heads,
            zones: config.zones,
            outer_sectors_per_track: config.outer_sectors_per_track,
            inner_sectors_per_track: config.inner_sectors_per_track,
            head_switch_ns,
            cylinder_switch_ns,
            revolution_ns,
        })
        .map_err(|error| invalid("inner_sectors_per_track", error.0))?;
        let seek = SeekCurve::fit(
            config.track_to_track_ms,
            config.average_seek_ms,
            config.full_stroke_ms,
            geometry.cylinders(),
        )
        .map_err(|error| invalid("average_seek_ms", error.0))?;
        let zone_sector_ns = geometry
            .zones()
            .iter()
            .map(|zone| revolution_ns / f64::from(zone.sectors_per_track))
            .collect();
        let sectors_per_kib = 1024 / SECTOR_BYTES;
        let segment_sectors = config.segment_kib * sectors_per_kib;
        let write_buffer_sectors = config.write_buffer_kib * sectors_per_kib;
        let phase_ns = (splitmix64(seed) >> 11) as f64 / (1u64 << 53) as f64 * revolution_ns;
        let queue_depth = config.queue_depth as usize;
        Ok(Hdd {
            selection: Selection {
                age_weight: config.ncq_age_weight,
                deadline: ms_to_nanos(config.ncq_deadline_ms),
            },
            revolution_ns,
            revolutions_per_ns: 1.0 / revolution_ns,
            phase_ns,
            zone_sector_ns,
            head_switch_ns,
            write_settle_ns: ms_to_ns(config.write_settle_ms),
            read_hit_overhead: ms_to_nanos(config.read_hit_overhead_ms),
            read_miss_overhead: ms_to_nanos(config.read_miss_overhead_ms),
            write_overhead: ms_to_nanos(config.write_overhead_ms),
            destage_idle: ms_to_nanos(config.destage_idle_ms),
            bus_ns_per_byte: 1e9 / (config.bus_mb_per_s * 1e6),
            destage_high_water_sectors: (write_buffer_sectors as f64
                * config.destage_high_water_pct
                / 100.0) as u64,
            destage_max_sectors: config.destage_max_kib * sectors_per_kib,
            read_ahead_resume_sectors: ((segment_sectors as f64 * config.read_ahead_resume_pct
                / 100.0) as u64)
                .max(1),
            stream_read_ahead_sectors: (config.stream_read_ahead_kib * sectors_per_kib)
                .min(segment_sectors),
            slots: (0..queue_depth).map(|_| None).collect(),
            free_slots: (0..queue_depth as u32).rev().collect(),
            in_flight: 0,
            queued: Vec::with_capacity(queue_depth),
            waiting_for_room: VecDeque::with_capacity(queue_depth),
            flushes: Vec::with_capacity(queue_depth),
            completions: BinaryHeap::with_capacity(queue_depth),
            completion_sequence: 0,
            activity: Activity::Idle,
            head: HeadPosition {
                cylinder: 0,
                head: 0,
            },
            head_lba: 0,
            idle_since: 0,
            read_ahead_segment: None,
            read_cache: ReadCache::new(config.cache_segments as usize, segment_sectors),
            write_buffer: WriteBuffer::new(write_buffer_sectors),
            write_sequence: 0,
            bus_free_at: 0,
            wakeup: None,
            now: 0,
            scratch_candidates: Vec::with_capacity(queue_depth + 1),
            scratch_choices: Vec::with_capacity(queue_depth + 1),
            counters: Counters::default(),
            geometry,
            seek,
            config,
        })
    }

    /// The parameters in force.
    pub fn config(&self) -> &HddConfig {
        &self.config
    }

    /// The format.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The seek curve.
    pub fn seek_curve(&self) -> &SeekCurve {
        &self.seek
    }

    /// One revolution, ns.
    pub fn revolution_ns(&self) -> f64 {
        self.revolution_ns
    }

    // ----- Mechanics -------------------------------------------------------------------------

    /// Angle under the heads at `time` (ns).
    #[inline]
    fn angle_at(&self, time: f64) -> f64 {
        fraction((time + self.phase_ns) * self.revolutions_per_ns)
    }

    /// Wait from `time` until `angle` comes under the heads, ns.
    #[inline]
    fn rotational_wait(&self, time: f64, angle: f64) -> f64 {
        self.wait_for(self.angle_at(time), angle)
    }

    /// Wait, with `under` under the heads now, until `angle` comes round, ns.
    #[inline]
    fn wait_for(&self, under: f64, angle: f64) -> f64 {
        let wait = geometry::wrap_unit(angle - under);
        if wait > 1.0 - ROTATION_TOLERANCE {
            0.0
        } else {
            wait * self.revolution_ns
        }
    }

    /// Time to move the heads from `from` onto the track of `to`, ns.
    #[inline]
    fn move_ns(&self, from: HeadPosition, to: &Location) -> f64 {
        let distance = from.cylinder.abs_diff(to.cylinder);
        let switch = if from.head == to.head {
            0.0
        } else {
            self.head_switch_ns
        };
        if distance == 0 {
            switch
        } else {
            self.seek.time_ns(distance).max(switch)
        }
    }

    /// Positioning time (move, write settle, rotational wait) from `from` at `time`, ns.
    #[inline]
    fn positioning_ns(&self, time: f64, from: HeadPosition, to: &Location, write: bool) -> f64 {
        self.positioning_from_angle(self.angle_at(time), from, to, write)
    }

    /// Positioning time from `from` with `under` under the heads now, ns. Selection evaluates
    /// every queued command from the same instant, so it computes `under` once.
    #[inline]
    fn positioning_from_angle(
        &self,
        under: f64,
        from: HeadPosition,
        to: &Location,
        write: bool,
    ) -> f64 {
        let mut moving = self.move_ns(from, to);
        if write && moving > 0.0 {
            moving += self.write_settle_ns;
        }
        let arrival_angle = fraction(under + moving * self.revolutions_per_ns);
        moving + self.wait_for(arrival_angle, to.angle)
    }

    /// Positions for and transfers `[first, end)` starting at `start` from `from`; returns the
    /// time the last sector has passed and where the heads are then.
    fn access(
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
    fn stream_done(&self, stream: Stream, target: u64) -> f64 {
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
    fn cross_to(&self, time: f64, from: &Location, next: &Location) -> f64 {
        let position = HeadPosition {
            cylinder: from.cylinder,
            head: from.head,
        };
        let time = time + self.move_ns(position, next);
        time + self.rotational_wait(time, next.angle)
    }

    /// Where a stream stopping at `limit` has got to at `time`: the first sector not yet read
    /// and when the head starts reading it.
    fn stream_at(&self, stream: Stream, time: f64, limit: u64) -> Stream {
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
    fn position_of(&self, lba: u64) -> HeadPosition {
        let location = self.geometry.locate(lba.min(self.geometry.sectors() - 1));
        HeadPosition {
            cylinder: location.cylinder,
            head: location.head,
        }
    }

    // ----- Completions and bus ---------------------------------------------------------------

    fn complete_at(&mut self, slot: u32, time: Nanos) {
        debug_assert!(time >= self.now);
        if let Some(command) = self.slots[slot as usize].as_mut() {
            command.state = State::Completing;
        }
        self.completion_sequence += 1;
        self.completions
            .push(Reverse((time, self.completion_sequence, slot)));
    }

    /// Moves `bytes` over the host interface no earlier than `ready`; returns when it is done.
    fn bus_transfer(&mut self, ready: Nanos, bytes: u64) -> Nanos {
        let start = ready.max(self.bus_free_at);
        let done = start + (bytes as f64 * self.bus_ns_per_byte).ceil() as Nanos;
        self.bus_free_at = done;
        done
    }

    fn command(&self, slot: u32) -> &Command {
        self.slots[slot as usize].as_ref().expect("slot in use")
    }

    // ----- Read-ahead ------------------------------------------------------------------------

    /// Starts read-ahead into `segment` at `now` if the segment has room; returns whether it
    /// started.
    fn start_read_ahead(&mut self, now: Nanos, segment: usize) -> bool {
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
    fn start_stream_read_ahead(&mut self, now: Nanos, segment: usize, end: u64) {
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
    fn stop_read_ahead(&mut self, now: Nanos) {
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
    fn extend_read_ahead(&mut self, now: Nanos) {
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

    // ----- Choosing work ---------------------------------------------------------------------

    /// Whether a destage must go before host commands.
    fn destage_urgent(&self) -> bool {
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
    fn best_destage(&self, now: Nanos) -> Option<(u64, f64)> {
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
    fn decide(&mut self, now: Nanos) {
        debug_assert!(!matches!(self.activity, Activity::Busy { .. }));
        if let Activity::ReadAhead(_) = self.activity {
            // Ready reads that the read-ahead has reached, or soon will, ride on it.
            self.ride_queued_reads(now);
        }
        let any_ready = self
            .queued
            .iter()
            .any(|&slot| self.command(slot).ready_at <= now);
        let urgent = self.destage_urgent();
        if let Activity::ReadAhead(read_ahead) = self.activity {
            if !(any_ready || urgent) || now < read_ahead.committed_until {
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
    fn serve_next(&mut self, now: Nanos) {
        let mut candidates = std::mem::take(&mut self.scratch_candidates);
        let mut choices = std::mem::take(&mut self.scratch_choices);
        candidates.clear();
        choices.clear();
        let under = self.angle_at(now as f64);
        for &slot in &self.queued {
            let command = self.command(slot);
            if command.ready_at > now {
                continue;
            }
            let write = command.request.op == Op::Write;
            candidates.push(Candidate {
                positioning_ns: self.positioning_from_angle(
                    under,
                    self.head,
                    &command.target,
                    write,
                ),
                accepted: command.accepted,
                priority: command_priority(&command.request),
            });
            choices.push(Choice::Command(slot));
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
                candidates.push(Candidate {
                    positioning_ns,
                    accepted,
                    priority: CommandPriority::Normal,
                });
                choices.push(Choice::Destage(first));
            }
        }
        let chosen = self.selection.choose(&candidates, now);
        if let Some(index) = chosen {
            if now.saturating_sub(candidates[index].accepted) >= self.selection.deadline {
                self.counters.deadline_picks += 1;
            }
            match choices[index] {
                Choice::Command(slot) => self.start_command(now, slot),
                Choice::Destage(first) => self.start_destage(now, first),
            }
        }
        self.scratch_candidates = candidates;
        self.scratch_choices = choices;
    }

    /// Records a media access from the current head position to `to` lasting until `end`.
    fn account_access(&mut self, now: Nanos, to: HeadPosition, target: &Location, end: Nanos) {
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

    fn start_command(&mut self, now: Nanos, slot: u32) {
        let position = self
            .queued
            .iter()
            .position(|&queued| queued == slot)
            .expect("command is queued");
        self.queued.remove(position);
        let command = self.command(slot);
        let (first, end, target) = (command.first, command.end, command.target);
        let write = command.request.op == Op::Write;
        let (done, to) = self.access(now as f64, self.head, first, end, write);
        let until = done.ceil() as Nanos;
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

    fn start_destage(&mut self, now: Nanos, first: u64) {
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
    fn finish_work(&mut self, now: Nanos, work: Work) {
        self.activity = Activity::Idle;
        self.idle_since = now;
        match work {
            Work::Command(slot) => {
                let command = self.command(slot);
                let state = command.state;
                let end = command.end;
                self.complete_at(slot, now);
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
    fn admit_waiting_writes(&mut self, now: Nanos) {
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

    fn absorb_write(
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
    fn complete_flushes(&mut self, now: Nanos) {
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
    fn wake(&mut self, now: Nanos) {
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
    fn compute_wakeup(&self) -> Option<Nanos> {
        self.mechanism_wakeup().map(|at| at.max(self.now))
    }

    fn mechanism_wakeup(&self) -> Option<Nanos> {
        let earliest_ready = self
            .queued
            .iter()
            .map(|&slot| self.command(slot).ready_at)
            .min();
        match self.activity {
            Activity::Busy { until, .. } => Some(until),
            Activity::ReadAhead(read_ahead) => {
                let interrupt = if self.destage_urgent() {
                    Some(read_ahead.committed_until)
                } else {
                    earliest_ready.map(|ready| ready.max(read_ahead.committed_until))
                };
                Some(interrupt.map_or(read_ahead.stop_at, |at| at.min(read_ahead.stop_at)))
            }
            Activity::Idle => {
                let destage = (!self.write_buffer.is_empty())
                    .then(|| (self.idle_since + self.destage_idle).max(self.now));
                match (earliest_ready, destage) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
        }
    }

    // ----- Submission ------------------------------------------------------------------------

    /// Classifies a read at `now`: hit, read-ahead path, or miss.
    fn submit_read(&mut self, slot: u32, now: Nanos) {
        let hit_ready = now + self.read_hit_overhead;
        if self.ride_read_ahead(slot, now, hit_ready) || self.serve_from_buffer(slot, hit_ready) {
            return;
        }
        self.enqueue_media(slot, now + self.read_miss_overhead);
    }

    /// Serves the read in `slot` from the running read-ahead if its data is there or on the way:
    /// it starts within the segment's data or at most one segment beyond what has been read.
    /// Its bus transfer starts no earlier than `ready`. Returns whether it was served.
    fn ride_read_ahead(&mut self, slot: u32, now: Nanos, ready: Nanos) -> bool {
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
    fn serve_from_buffer(&mut self, slot: u32, ready: Nanos) -> bool {
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
    fn serve_queued_from_buffer(&mut self, now: Nanos) {
        let mut index = 0;
        while index < self.queued.len() {
            let slot = self.queued[index];
            let command = self.command(slot);
            let ready = command.ready_at.max(now);
            if command.request.op == Op::Read && self.serve_from_buffer(slot, ready) {
                self.queued.remove(index);
            } else {
                index += 1;
            }
        }
    }

    /// Ready queued reads that the running read-ahead has reached or will reach ride on it.
    fn ride_queued_reads(&mut self, now: Nanos) {
        let mut index = 0;
        while index < self.queued.len() {
            let slot = self.queued[index];
            let command = self.command(slot);
            if command.request.op == Op::Read
                && command.ready_at <= now
                && self.ride_read_ahead(slot, now, now)
            {
                self.queued.remove(index);
            } else {
                index += 1;
            }
        }
    }

    /// The acceptance time of the oldest write waiting for room or flush waiting for destages.
    fn oldest_waiter_accepted(&self) -> Option<Nanos> {
        self.waiting_for_room
            .iter()
            .chain(self.flushes.iter())
            .map(|&slot| self.command(slot).accepted)
            .min()
    }

    fn submit_write(&mut self, slot: u32, now: Nanos) {
        let command = self.command(slot);
        let (first, end, bytes) = (command.first, command.end, command.request.len);
        let sectors = end - first;
        let ready = now + self.write_overhead;
        if self.config.write_cache && sectors <= self.write_buffer.capacity_sectors() {
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

    fn enqueue_media(&mut self, slot: u32, ready_at: Nanos) {
        let command = self.slots[slot as usize].as_mut().expect("slot in use");
        command.ready_at = ready_at;
        command.target = self.geometry.locate(command.first);
        command.state = State::Media {
            segment: None,
            sequential: false,
        };
        self.queued.push(slot);
        self.counters.max_queued = self.counters.max_queued.max(self.queued.len() as u64);
    }
}

/// The NCQ priority a request's command gets. Hook for NCQ priority (a later change will map
/// RT-class requests to [`CommandPriority::High`]); today every command is normal.
fn command_priority(_request: &Request) -> CommandPriority {
    CommandPriority::Normal
}

impl Device for Hdd {
    fn model(&self) -> &'static str {
        "hdd"
    }

    fn capacity(&self) -> u64 {
        self.geometry.sectors() * SECTOR_BYTES
    }

    fn queue_depth(&self) -> u32 {
        self.config.queue_depth
    }

    fn in_flight(&self) -> u32 {
        self.in_flight
    }

    fn submit(&mut self, request: Request, now: Nanos) {
        assert!(
            self.in_flight < self.config.queue_depth,
            "device queue is full"
        );
        assert!(now >= self.now, "time went backwards");
        self.now = now;
        let capacity = self.geometry.sectors();
        let first = (request.offset / SECTOR_BYTES).min(capacity);
        let end = request.end().div_ceil(SECTOR_BYTES).clamp(first, capacity);
        debug_assert!(
            request.op == Op::Flush || request.end() <= capacity * SECTOR_BYTES,
            "request beyond the end of the disk"
        );
        let op = request.op;
        let slot = self
            .free_slots
            .pop()
            .expect("a free slot below queue depth");
        self.slots[slot as usize] = Some(Command {
            request,
            first,
            end,
            accepted: now,
            ready_at: now,
            target: UNPLACED,
            state: State::Completing,
        });
        self.in_flight += 1;
        match op {
            Op::Read => {
                self.counters.reads += 1;
                if first == end {
                    self.counters.read_hits += 1;
                    self.complete_at(slot, now + self.read_hit_overhead);
                } else {
                    self.submit_read(slot, now);
                }
            }
            Op::Write => {
                self.counters.writes += 1;
                if first == end {
                    self.complete_at(slot, now + self.write_overhead);
                } else {
                    self.submit_write(slot, now);
                }
            }
            Op::Flush => {
                self.counters.flushes += 1;
                let ready = now + self.read_hit_overhead;
                let command = self.slots[slot as usize].as_mut().expect("slot in use");
                command.ready_at = ready;
                if self.write_buffer.clean_up_to(self.write_sequence) {
                    self.complete_at(slot, ready);
                } else {
                    command.state = State::Flush {
                        sequence: self.write_sequence,
                    };
                    self.flushes.push(slot);
                }
            }
            Op::Discard => {
                self.counters.discards += 1;
                self.complete_at(slot, now + self.read_hit_overhead);
            }
        }
        if !matches!(self.activity, Activity::Busy { .. }) {
            self.decide(now);
        }
        self.wakeup = self.compute_wakeup();
    }

    fn next_event(&self) -> Option<Nanos> {
        let completion = self.completions.peek().map(|Reverse((at, _, _))| *at);
        match (completion, self.wakeup) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, now: Nanos, done: &mut Vec<(Nanos, Request)>) {
        assert!(now >= self.now, "time went backwards");
        loop {
            let completion = self.completions.peek().map(|Reverse((at, _, _))| *at);
            let wakeup = self.wakeup;
            let next = match (completion, wakeup) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => break,
            };
            if next > now {
                break;
            }
            self.now = self.now.max(next);
            if completion == Some(next) {
                let Reverse((at, _, slot)) = self.completions.pop().expect("peeked");
                let command = self.slots[slot as usize].take().expect("slot in use");
                self.free_slots.push(slot);
                self.in_flight -= 1;
                self.counters.completed += 1;
                done.push((at, command.request));
            } else {
                self.wake(next);
                self.wakeup = self.compute_wakeup();
            }
        }
        self.now = now;
    }

    fn parameters(&self) -> Vec<Parameter> {
        let mut parameters: Vec<Parameter> = SETTINGS
            .iter()
            .map(|setting| {
                parameter(
                    setting.name,
                    self.config.get(setting.name),
                    setting.unit,
                    setting.note,
                )
            })
            .collect();
        parameters.extend(derived_parameters(self));
        parameters
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let c = &self.counters;
        let sector = SECTOR_BYTES as f64;
        let mean_seek = if c.seeks == 0 {
            0.0
        } else {
            c.seek_cylinders as f64 / c.seeks as f64
        };
        let mut read_ahead_ns = c.read_ahead_ns;
        let mut read_ahead_sectors = c.read_ahead_sectors;
        if let Activity::ReadAhead(read_ahead) = self.activity {
            // Count the run in progress up to the last time the device saw.
            let at = self.now.min(read_ahead.stop_at);
            read_ahead_ns += at.saturating_sub(read_ahead.started);
            let reached = self
                .stream_at(read_ahead.stream, at as f64, read_ahead.limit)
                .lba;
            read_ahead_sectors += reached.saturating_sub(read_ahead.origin);
        }
        [
            ("reads", c.reads as f64),
            ("writes", c.writes as f64),
            ("flushes", c.flushes as f64),
            ("discards", c.discards as f64),
            ("completed", c.completed as f64),
            ("read_hits", c.read_hits as f64),
            ("read_ahead_waits", c.read_ahead_waits as f64),
            ("read_misses", c.read_misses as f64),
            ("read_ahead_runs", c.read_ahead_runs as f64),
            ("read_ahead_bytes", read_ahead_sectors as f64 * sector),
            ("read_ahead_ms", read_ahead_ns as f64 / 1e6),
            ("writes_absorbed", c.writes_absorbed as f64),
            ("writes_waited_for_room", c.writes_waited_for_room as f64),
            ("media_writes", c.media_writes as f64),
            ("destages", c.destages as f64),
            ("destaged_bytes", c.destaged_sectors as f64 * sector),
            (
                "dirty_bytes",
                self.write_buffer.dirty_sectors() as f64 * sector,
            ),
            ("media_accesses", c.media_accesses as f64),
            ("seeks", c.seeks as f64),
            ("mean_seek_cylinders", mean_seek),
            ("head_switches", c.head_switches as f64),
            ("media_busy_ms", c.media_busy_ns as f64 / 1e6),
            ("ncq_deadline_picks", c.deadline_picks as f64),
            ("ncq_max_queued", c.max_queued as f64),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
    }
}

const SEEK_CURVE: &[&str] = &[
    "track_to_track_ms",
    "average_seek_ms",
    "full_stroke_ms",
    "capacity_gb",
];
const FORMAT: &[&str] = &[
    "capacity_gb",
    "heads",
    "zones",
    "outer_sectors_per_track",
    "inner_sectors_per_track",
];

/// Each derived parameter of [`derived_parameters`] and the settings it follows from.
pub const DERIVED_FROM: &[(&str, &[&str])] = &[
    ("revolution_ms", &["rpm"]),
    ("capacity_sectors", &["capacity_gb"]),
    ("cylinders", FORMAT),
    ("seek_sqrt_coefficient_ms", SEEK_CURVE),
    ("seek_linear_coefficient_ms", SEEK_CURVE),
    ("mean_seek_cylinder_pairs_ms", SEEK_CURVE),
    ("mean_seek_lba_pairs_ms", SEEK_CURVE),
    (
        "expected_qd1_random_4k_iops",
        &[
            "read_miss_overhead_ms",
            "average_seek_ms",
            "rpm",
            "capacity_gb",
        ],
    ),
    ("outer_media_rate", &["outer_sectors_per_track", "rpm"]),
    ("inner_media_rate", &["inner_sectors_per_track", "rpm"]),
    (
        "outer_sustained_rate",
        &["outer_sectors_per_track", "rpm", "head_switch_ms", "heads"],
    ),
    (
        "inner_sustained_rate",
        &["inner_sectors_per_track", "rpm", "head_switch_ms", "heads"],
    ),
    ("zone_N", FORMAT),
];

/// Values that follow from the settings: the format, the seek curve's fit, expected rates.
fn derived_parameters(hdd: &Hdd) -> Vec<Parameter> {
    let geometry = &hdd.geometry;
    let revolution = hdd.revolution_ns;
    let zones = geometry.zones();
    let last = zones.len() - 1;
    let mb = |bytes_per_s: f64| format!("{:.1}", bytes_per_s / 1e6);
    let mean_cylinder_pairs_ms = hdd.seek.mean_over_cylinder_pairs_ns() / 1e6;
    let mean_lba_pairs_ms = mean_seek_over_lba_pairs_ns(hdd) / 1e6;
    let transfer_4k_ms = 8.0 * hdd.zone_sector_ns[zones.len() / 2] / 1e6;
    let expected_qd1_ms =
        hdd.config.read_miss_overhead_ms + mean_lba_pairs_ms + revolution / 2e6 + transfer_4k_ms;
    let mut parameters = vec![
        parameter(
            "revolution_ms",
            format!("{:.3}", revolution / 1e6),
            "ms",
            "derived: 60 / rpm; mean rotational latency is half of it",
        ),
        parameter(
            "capacity_sectors",
            geometry.sectors(),
            "sectors",
            "derived: addressable 512-byte sectors",
        ),
        parameter(
            "cylinders",
            geometry.cylinders(),
            "cylinders",
            "derived: equal cylinders per zone, enough for the capacity",
        ),
        parameter(
            "seek_sqrt_coefficient_ms",
            format!("{:.5}", hdd.seek.sqrt_coefficient_ms()),
            "ms",
            "derived: a = (-10 t1 + 15 A - 5 F) / (3 sqrt N) (DiskSim 3-point curve)",
        ),
        parameter(
            "seek_linear_coefficient_ms",
            format!("{:.3e}", hdd.seek.linear_coefficient_ms()),
            "ms/cylinder",
            "derived: b = (7 t1 - 15 A + 8 F) / (3 N)",
        ),
        parameter(
            "mean_seek_cylinder_pairs_ms",
            format!("{mean_cylinder_pairs_ms:.3}"),
            "ms",
            "derived: seek averaged over all cylinder pairs, summed numerically (should be A)",
        ),
        parameter(
            "mean_seek_lba_pairs_ms",
            format!("{mean_lba_pairs_ms:.3}"),
            "ms",
            "derived: seek averaged over uniformly random LBA pairs (outer zones hold more LBAs, \
             so shorter than A)",
        ),
        parameter(
            "expected_qd1_random_4k_iops",
            format!("{:.1}", 1e3 / expected_qd1_ms),
            "IOPS",
            "derived: 1 / (miss overhead + mean LBA seek + half a revolution + 4 KiB transfer)",
        ),
        parameter(
            "outer_media_rate",
            mb(geometry.media_rate(0, revolution)),
            "MB/s",
            "derived: zone 0 instantaneous (sectors per track x 512 x rev/s)",
        ),
        parameter(
            "inner_media_rate",
            mb(geometry.media_rate(last, revolution)),
            "MB/s",
            "derived: innermost zone instantaneous",
        ),
        parameter(
            "outer_sustained_rate",
            mb(geometry.sustained_rate(0, revolution)),
            "MB/s",
            "derived: zone 0 counting head and cylinder switch skews (7K500 spec: 64.8)",
        ),
        parameter(
            "inner_sustained_rate",
            mb(geometry.sustained_rate(last, revolution)),
            "MB/s",
            "derived: innermost zone counting skews (7K500 spec: 31.0)",
        ),
    ];
    for (index, zone) in zones.iter().enumerate() {
        parameters.push(parameter(
            &format!("zone_{index}"),
            zone.sectors_per_track,
            "sectors/track",
            &format!(
                "derived: cylinders {}..{}, LBAs {}..{}, {} MB/s, track skew {} and cylinder \
                 skew {} sectors",
                zone.first_cylinder,
                zone.first_cylinder + zone.cylinders,
                zone.first_lba,
                zone.first_lba + zone.sectors,
                mb(geometry.media_rate(index, revolution)),
                zone.track_skew,
                zone.cylinder_skew
            ),
        ));
    }
    parameters
}

/// Mean seek time between two uniformly random LBAs, ns, by numerical integration over the LBA
/// space: the capacity is cut into equal slices whose middles stand for them, and every pair of
/// slices is weighed equally.
pub fn mean_seek_over_lba_pairs_ns(hdd: &Hdd) -> f64 {
    const SLICES: u64 = 400;
    let sectors = hdd.geometry.sectors();
    let cylinders: Vec<u32> = (0..SLICES)
        .map(|slice| {
            let lba = ((2 * slice + 1) * sectors / (2 * SLICES)).min(sectors - 1);
            hdd.geometry.locate(lba).cylinder
        })
        .collect();
    let mut total = 0.0;
    for &a in &cylinders {
        for &b in &cylinders {
            total += hdd.seek.time_ns(a.abs_diff(b));
        }
    }
    total / (SLICES * SLICES) as f64
}

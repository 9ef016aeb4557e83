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
//! - **Write with FUA** (force unit access): as with the cache off, it joins the NCQ queue
//!   once its data crossed the bus, and completes when it is on the media.
//! - **Write, write cache on**: if the buffer has room (and no earlier write is waiting for
//!   room) the data is absorbed and the command completes after overhead and bus transfer;
//!   otherwise it waits for destages to free room, until the hard deadline makes it due:
//!   then it is written through (`Hdd::write_through_if_due`). With the cache off, or a write
//!   larger than the whole buffer, it joins the NCQ queue and completes when it is on the media.
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
//!    [`ncq::Selection`] picks: deadline first (oldest first as soon as some command would
//!    otherwise wait past `ncq_deadline_ms` plus one access, `Hdd::due_at`), else aged SPTF. An urgent destage is as old as
//!    the oldest write or flush waiting on it, so it neither starves reads nor is starved;
//! 2. with nothing ready: read-ahead into the segment of the last miss while the segment has room;
//! 3. once idle for `destage_idle_ms`: a background destage.
//!
//! Ready reads that the running read-ahead has reached or is about to reach ride on it instead
//! of interrupting it, and queued reads whose data read-ahead brought in complete from the
//! buffer. A miss that continues a segment's data (a sequential stream) starts read-ahead that
//! no command may interrupt for `stream_read_ahead_kib` (none but one that has waited
//! `ncq_deadline_ms`: a stream whose reads keep riding the read-ahead would otherwise hold the
//! mechanism for ever), as firmware stream detection does:
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
mod derived;
mod firmware;
pub mod geometry;
mod mechanics;
pub mod ncq;
pub mod seek;

pub use derived::{mean_seek_over_lba_pairs_ns, DERIVED_FROM};

/// A preset of this model: `model`, with `values` (name, value) set over the defaults.
pub fn preset(model: &'static str, values: &[(&str, &str)]) -> Result<HddConfig, DeviceError> {
    let mut config = HddConfig {
        model,
        ..HddConfig::default()
    };
    for (name, value) in values {
        config.set(name, value)?;
    }
    Ok(config)
}

/// Builds a preset's drive (`config`) with `settings` set over it, seeded.
pub fn build_preset(
    config: Result<HddConfig, DeviceError>,
    settings: &[(String, String)],
    seed: u64,
) -> Result<Box<dyn Device>, DeviceError> {
    let mut config = config?;
    for (name, value) in settings {
        config.set(name, value)?;
    }
    Ok(Box::new(Hdd::new(config, seed)?))
}

use super::{parameter, Device, DeviceError};
use cache::{Extent, ReadCache, WriteBuffer};
use config::{CdlDescriptor, CdlPolicy, HddConfig, SETTINGS};
use derived::derived_parameters;
use geometry::{Format, Geometry, Location};
use iosched_core::{Nanos, Op, Request};
use iosched_fio::Parameter;
use mechanics::{ms_to_nanos, ms_to_ns};
use ncq::{nanos_f64, Candidate, CommandPriority, Selection};
use seek::SeekCurve;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Sector size in bytes.
pub const SECTOR_BYTES: u64 = 512;

/// A rotational wait within this fraction of a full revolution counts as no wait: it can only
/// come from rounding event times to whole nanoseconds (1e-6 revolution is about 8 ns).
pub const ROTATION_TOLERANCE: f64 = 1e-6;

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

/// The command duration limits a command carries (its descriptor, made absolute).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Limits {
    /// It must start by then (inactive limit), if limited.
    start_by: Option<Nanos>,
    /// Its media access may take at most this long (active limit), if limited.
    active: Option<Nanos>,
    policy: CdlPolicy,
    /// A limit was exceeded (counted once).
    missed: bool,
}

/// A descriptor in nanoseconds: (inactive, active, policy).
type DescriptorNs = (Option<Nanos>, Option<Nanos>, CdlPolicy);

/// The errno a command aborted by its duration limit completes with: Linux maps
/// `BLK_STS_DURATION_LIMIT` to ETIME.
pub const ETIME: i32 = 62;

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
    state: State,
    /// Its duration limits (CDL), while it has them.
    limits: Option<Limits>,
    /// Aborted by a duration limit: it completes with ETIME.
    aborted: bool,
    /// The longest its own media access may take ([`Hdd::service_bound`]), ns.
    bound: Nanos,
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
    /// Writes that waited for room until due and went to the media themselves.
    writes_through_for_deadline: u64,
    media_writes: u64,
    destages: u64,
    destaged_sectors: u64,
    media_accesses: u64,
    seeks: u64,
    seek_cylinders: u64,
    head_switches: u64,
    media_busy_ns: u64,
    deadline_picks: u64,
    /// Commands served as high priority (NCQ priority).
    high_picks: u64,
    /// Writes with FUA, written through to the media.
    fua_writes: u64,
    /// Commands that carried a duration limit descriptor (CDL).
    cdl_commands: u64,
    /// Commands served first because their inactive limit was near.
    cdl_urgent_picks: u64,
    /// Limits exceeded by commands that went on (best effort or demoted).
    cdl_missed: u64,
    /// Commands aborted by a limit.
    cdl_aborted: u64,
    /// Commands whose limits were dropped when exceeded.
    cdl_demoted: u64,
    max_queued: u64,
    completed: u64,
}

/// A command waiting for the mechanism, with what selection reads of it at every decision:
/// kept apart from the [`Command`], so that a decision over a full queue reads one small array.
#[derive(Clone, Copy, Debug)]
struct Queued {
    slot: u32,
    write: bool,
    priority: CommandPriority,
    /// As the command's.
    ready_at: Nanos,
    accepted: Nanos,
    bound: Nanos,
    target: Location,
    /// Its place in queueing order (set by [`QueuedCommands::push`]): the list's order, which
    /// breaks ties in selection.
    seq: u64,
}

/// Queued commands from which they are also kept by cylinder, for [`Hdd::plain_walk`]: with
/// fewer, [`Selection::plain_best`] weighs them all for less than the walk and the order cost.
/// They stop being kept by cylinder below half of it, so a queue around it does not rebuild
/// the order at every command.
const BY_CYLINDER_FROM: usize = 8;

/// A queued command's place in the cylinder order: its cylinder, and its place in queueing
/// order, which breaks ties (16 bytes, so that keeping the order moves a few hundred bytes).
#[derive(Clone, Copy, Debug)]
struct ByCylinder {
    cylinder: u32,
    slot: u32,
    seq: u64,
}

impl ByCylinder {
    fn key(&self) -> (u32, u64) {
        (self.cylinder, self.seq)
    }
}

/// The commands waiting for the mechanism, in queueing order and, from
/// [`BY_CYLINDER_FROM`] of them, by cylinder; with the sum of their bounds and the count of
/// high-priority ones: [`Hdd::is_due`] reads the sum at every decision, so it is kept as
/// commands come and go rather than summed each time, and the plain choice
/// ([`Hdd::plain_walk`]) walks the cylinders out from the head.
///
/// Each command's [`Queued`] stays in one place, by slot, and the two orders hold slots: a
/// command leaving a queue of 31 moved half of two arrays of 64-byte entries (with the
/// removal around it, 8% of the simulator's time with 1024 jobs behind the drive), where it
/// now moves 4- and 16-byte ones.
#[derive(Debug, Default)]
struct QueuedCommands {
    /// By slot; the entries of slots not queued are stale.
    by_slot: Vec<Queued>,
    /// The queued commands' slots in queueing order.
    order: Vec<u32>,
    /// The same commands ordered by cylinder, then queueing order, while `sorted`.
    by_cylinder: Vec<ByCylinder>,
    sorted: bool,
    /// Exact (no bound is above 2^64 and no queue holds 2^64 commands), so that a removal
    /// takes away what its addition put in; [`QueuedCommands::bounds`] saturates it.
    bounds: u128,
    /// Commands of [`CommandPriority::High`].
    high: usize,
    /// Commands pushed so far: the next one's `seq`.
    pushed: u64,
    /// The earliest accept time among them ([`Nanos::MAX`] when there are none), kept as
    /// they come and go: every decision reads it ([`Hdd::is_due`]), and it is found again
    /// only when the oldest command leaves.
    oldest: Nanos,
}

impl QueuedCommands {
    /// A queue for the slots `0..slots` (others grow it as they come).
    fn with_capacity(slots: usize) -> Self {
        QueuedCommands {
            by_slot: Vec::with_capacity(slots),
            order: Vec::with_capacity(slots),
            by_cylinder: Vec::with_capacity(slots),
            oldest: Nanos::MAX,
            ..Default::default()
        }
    }

    #[inline]
    fn push(&mut self, mut queued: Queued) {
        queued.seq = self.pushed;
        self.pushed += 1;
        self.bounds += u128::from(queued.bound);
        self.high += usize::from(queued.priority == CommandPriority::High);
        self.oldest = self.oldest.min(queued.accepted);
        let slot = queued.slot as usize;
        if slot >= self.by_slot.len() {
            self.by_slot.resize(slot + 1, queued);
        }
        self.by_slot[slot] = queued;
        self.order.push(queued.slot);
        if self.sorted {
            let at = self
                .by_cylinder
                .partition_point(|other| other.cylinder <= queued.target.cylinder);
            self.by_cylinder.insert(at, Self::cylinder_entry(&queued));
        } else if self.order.len() >= BY_CYLINDER_FROM {
            let entries = self
                .order
                .iter()
                .map(|&slot| Self::cylinder_entry(&self.by_slot[slot as usize]));
            self.by_cylinder.extend(entries);
            self.by_cylinder.sort_unstable_by_key(ByCylinder::key);
            self.sorted = true;
        }
    }

    fn cylinder_entry(queued: &Queued) -> ByCylinder {
        ByCylinder {
            cylinder: queued.target.cylinder,
            slot: queued.slot,
            seq: queued.seq,
        }
    }

    /// Takes out the command at `index` in queueing order.
    #[inline]
    fn remove(&mut self, index: usize) -> Queued {
        let slot = self.order.remove(index);
        let queued = self.by_slot[slot as usize];
        self.bounds -= u128::from(queued.bound);
        self.high -= usize::from(queued.priority == CommandPriority::High);
        if queued.accepted == self.oldest {
            self.oldest = self.iter().map(|other| other.accepted).min().unwrap_or(Nanos::MAX);
        }
        if self.sorted {
            self.remove_by_cylinder(&queued);
        }
        queued
    }

    /// Takes `queued`, just removed from the list, out of the cylinder order, or stops keeping
    /// the order below half of [`BY_CYLINDER_FROM`].
    fn remove_by_cylinder(&mut self, queued: &Queued) {
        if self.order.len() < BY_CYLINDER_FROM / 2 {
            self.by_cylinder.clear();
            self.sorted = false;
            return;
        }
        let key = Self::cylinder_entry(queued).key();
        let at = self.by_cylinder.partition_point(|other| other.key() < key);
        debug_assert_eq!(self.by_cylinder[at].slot, queued.slot);
        self.by_cylinder.remove(at);
    }

    /// The queued commands by cylinder, then queueing order, if they are kept so.
    fn by_cylinder(&self) -> Option<&[ByCylinder]> {
        self.sorted.then_some(&self.by_cylinder[..])
    }

    /// The queued command in `slot` (it must be queued).
    #[inline(always)]
    fn get(&self, slot: u32) -> &Queued {
        &self.by_slot[slot as usize]
    }

    /// The queued commands in queueing order.
    #[inline]
    fn iter(&self) -> QueuedIter<'_> {
        QueuedIter {
            order: self.order.iter(),
            by_slot: &self.by_slot,
        }
    }

    /// The slot of the command at `index` in queueing order.
    fn slot_at(&self, index: usize) -> u32 {
        self.order[index]
    }

    /// How many commands are queued.
    fn len(&self) -> usize {
        self.order.len()
    }

    /// The earliest accept time among the queued commands, if any.
    fn oldest_accepted(&self) -> Option<Nanos> {
        (self.oldest != Nanos::MAX).then_some(self.oldest)
    }

    /// The sum of the queued commands' bounds, saturated.
    fn bounds(&self) -> Nanos {
        Nanos::try_from(self.bounds).unwrap_or(Nanos::MAX)
    }

    /// The place in queueing order of the command in `slot`, if it is queued.
    fn position(&self, slot: u32) -> Option<usize> {
        self.order.iter().position(|&queued| queued == slot)
    }

    /// Takes the command in `slot` out, if it is queued.
    fn remove_slot(&mut self, slot: u32) {
        if let Some(index) = self.position(slot) {
            self.remove(index);
        }
    }
}

/// [`QueuedCommands::iter`] (a type of its own rather than an `impl Iterator`, which the
/// borrow checker must assume to hold its borrow until dropped).
#[derive(Clone)]
struct QueuedIter<'a> {
    order: std::slice::Iter<'a, u32>,
    by_slot: &'a [Queued],
}

impl<'a> Iterator for QueuedIter<'a> {
    type Item = &'a Queued;

    #[inline]
    fn next(&mut self) -> Option<&'a Queued> {
        self.order.next().map(|&slot| &self.by_slot[slot as usize])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.order.size_hint()
    }
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
    /// FLUSH CACHE commands accepted and not completed (non-queued: see `accepts`).
    flushes_in_flight: u32,
    /// Read (0) and write (1) duration limit descriptors 1-7, in ns; `None`: not set.
    cdl: [[Option<DescriptorNs>; 7]; 2],
    /// Commands that completed with an error since the last `advance`: (id, errno).
    failed: Vec<(iosched_core::RequestId, i32)>,
    geometry: Geometry,
    seek: SeekCurve,
    /// [`SeekCurve::rises`]: the plain choice may walk the cylinders ([`Hdd::plain_walk`]).
    seek_rises: bool,
    selection: Selection,
    revolution_ns: f64,
    /// `1 / revolution_ns`.
    revolutions_per_ns: f64,
    phase_ns: f64,
    /// Sector time of each zone, ns.
    zone_sector_ns: Vec<f64>,
    head_switch_ns: f64,
    write_settle_ns: f64,
    /// An upper bound of one access before its transfer: full-stroke seek, write settle and a
    /// whole revolution, plus the miss overhead, ns.
    access_bound_ns: f64,
    /// Transfer time of one sector in the slowest zone, with a switch per track, ns.
    slowest_sector_ns: f64,
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
    /// Commands waiting for the mechanism, in the order they were queued.
    queued: QueuedCommands,
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
    /// (accepted, service bound) of the waiting commands, for `due_at`.
    scratch_due: std::cell::RefCell<Vec<(Nanos, Nanos)>>,
    counters: Counters,
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
            config.seek_settle_ms,
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
        if config.cdl_enable && config.ncq_prio_enable {
            return Err(invalid(
                "cdl_enable",
                "cdl_enable and ncq_prio_enable cannot both be on (libata: NCQ priority must \
                 be disabled to enable CDL, and the reverse)"
                    .into(),
            ));
        }
        let descriptor_ns = |descriptor: &CdlDescriptor| -> Option<DescriptorNs> {
            let limit = |ms: f64| (ms > 0.0).then(|| ms_to_nanos(ms));
            descriptor.is_set().then(|| {
                (
                    limit(descriptor.inactive_ms),
                    limit(descriptor.active_ms),
                    descriptor.policy,
                )
            })
        };
        let cdl = [
            std::array::from_fn(|i| descriptor_ns(&config.cdl_read[i])),
            std::array::from_fn(|i| descriptor_ns(&config.cdl_write[i])),
        ];
        Ok(Hdd {
            flushes_in_flight: 0,
            cdl,
            failed: Vec::with_capacity(queue_depth),
            selection: Selection {
                age_weight: config.ncq_age_weight,
                deadline: ms_to_nanos(config.ncq_deadline_ms),
                priority_credit_ns: if config.ncq_prio_credit_rev >= 1000.0 {
                    f64::INFINITY
                } else {
                    config.ncq_prio_credit_rev * revolution_ns
                },
                cdl_guard: ms_to_nanos(config.cdl_guard_ms),
            },
            revolution_ns,
            revolutions_per_ns: 1.0 / revolution_ns,
            phase_ns,
            zone_sector_ns,
            head_switch_ns,
            write_settle_ns: ms_to_ns(config.write_settle_ms),
            access_bound_ns: ms_to_ns(config.full_stroke_ms)
                + ms_to_ns(config.write_settle_ms)
                + revolution_ns
                + ms_to_ns(config.read_miss_overhead_ms.max(config.write_overhead_ms)),
            slowest_sector_ns: (revolution_ns + cylinder_switch_ns)
                / f64::from(config.inner_sectors_per_track),
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
            queued: QueuedCommands::with_capacity(queue_depth),
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
            scratch_due: std::cell::RefCell::new(Vec::with_capacity(queue_depth + 1)),
            counters: Counters::default(),
            geometry,
            seek_rises: seek.rises(),
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
}

impl Device for Hdd {
    fn model(&self) -> &'static str {
        self.config.model
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

    /// FLUSH CACHE is not an NCQ command: libata sends it only when no queued command is
    /// active, and defers queued commands while it runs (`ata_std_qc_defer`). With a queue
    /// depth of 1 every command is alone anyway.
    fn accepts(&self, request: &Request) -> bool {
        if request.op == Op::Flush {
            self.in_flight == 0
        } else {
            self.in_flight < self.config.queue_depth && self.flushes_in_flight == 0
        }
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
        let limits = self.limits_of(&request, now);
        if limits.is_some() {
            self.counters.cdl_commands += 1;
        }
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
            state: State::Completing,
            limits,
            aborted: false,
            bound: self.service_bound(end - first),
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
                self.flushes_in_flight += 1;
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
        self.failed.clear();
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
                if command.request.op == Op::Flush {
                    self.flushes_in_flight -= 1;
                }
                if command.aborted {
                    self.failed.push((command.request.id, ETIME));
                }
                self.counters.completed += 1;
                done.push((at, command.request));
            } else {
                self.wake(next);
                self.wakeup = self.compute_wakeup();
            }
        }
        self.now = now;
    }

    fn completion_error(&mut self, request: &Request) -> Option<i32> {
        let index = self.failed.iter().position(|(id, _)| *id == request.id)?;
        Some(self.failed.swap_remove(index).1)
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
            ("fua_writes", c.fua_writes as f64),
            ("writes_waited_for_room", c.writes_waited_for_room as f64),
            (
                "writes_through_for_deadline",
                c.writes_through_for_deadline as f64,
            ),
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
            ("ncq_high_picks", c.high_picks as f64),
            ("cdl_commands", c.cdl_commands as f64),
            ("cdl_urgent_picks", c.cdl_urgent_picks as f64),
            ("cdl_missed", c.cdl_missed as f64),
            ("cdl_aborted", c.cdl_aborted as f64),
            ("cdl_demoted", c.cdl_demoted as f64),
            ("ncq_max_queued", c.max_queued as f64),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
    }
}

/// This model's entry in the device catalog (`iosched devices`).
pub const MODEL: super::ModelInfo = super::ModelInfo {
        name: "hdd",
        summary: "7200 rpm SATA disk (Deskstar 7K500 class): zones, seek curve, rotation, \
                  read-ahead and write-back cache, NCQ aged SPTF",
        build: |settings, seed| Ok(Box::new(Hdd::from_settings(settings, seed)?)),
        derived_from: DERIVED_FROM,
};

#[cfg(test)]
mod walk_tests {
    use super::*;

    fn queued(slot: u32, cylinder: u32, high: bool, bound: Nanos) -> Queued {
        Queued {
            slot,
            write: false,
            priority: if high {
                CommandPriority::High
            } else {
                CommandPriority::Normal
            },
            ready_at: 0,
            accepted: 0,
            bound,
            target: Location {
                zone: 0,
                cylinder,
                head: 0,
                sector: 0,
                angle: 0.0,
            },
            seq: 0,
        }
    }

    proptest::proptest! {
        /// Model-based: through any pushes and removals the queue keeps its order, the
        /// cylinder order (the list sorted by cylinder, then queueing order) from
        /// `BY_CYLINDER_FROM` commands until fewer than half of that are left, the sum of
        /// the bounds, the count of high-priority commands and the oldest accept time.
        #[test]
        fn the_queue_keeps_its_orders_and_sums(
            ops in proptest::collection::vec((proptest::bool::weighted(0.55), 0u32..5, proptest::bool::weighted(0.2), 0usize..64), 0..200),
        ) {
            let mut queue = QueuedCommands::with_capacity(4);
            let mut model: Vec<Queued> = Vec::new();
            let mut slot = 0;
            let mut was_sorted = false;
            for (push, cylinder, high, pick) in ops {
                if push || model.is_empty() {
                    slot += 1;
                    let mut command = queued(slot, cylinder, high, u64::from(slot) * 1000);
                    command.accepted = u64::from((pick as u32 + cylinder) % 7);
                    queue.push(command);
                    command.seq = u64::from(slot) - 1;
                    model.push(command);
                } else {
                    let index = pick % model.len();
                    let removed = queue.remove(index);
                    proptest::prop_assert_eq!(removed.slot, model.remove(index).slot);
                }
                let slots = |list: &[Queued]| list.iter().map(|q| q.slot).collect::<Vec<_>>();
                proptest::prop_assert_eq!(
                    queue.iter().map(|q| q.slot).collect::<Vec<_>>(),
                    slots(&model)
                );
                let sorted = model.len() >= BY_CYLINDER_FROM
                    || (was_sorted && model.len() >= BY_CYLINDER_FROM / 2);
                proptest::prop_assert_eq!(queue.by_cylinder().is_some(), sorted);
                if let Some(by_cylinder) = queue.by_cylinder() {
                    let mut expected = model.clone();
                    expected.sort_by_key(|q| (q.target.cylinder, q.seq));
                    proptest::prop_assert_eq!(
                        by_cylinder.iter().map(|entry| entry.slot).collect::<Vec<_>>(),
                        slots(&expected)
                    );
                    for entry in by_cylinder {
                        let queued = queue.get(entry.slot);
                        proptest::prop_assert_eq!(
                            (entry.cylinder, entry.seq),
                            (queued.target.cylinder, queued.seq)
                        );
                    }
                }
                was_sorted = sorted;
                proptest::prop_assert_eq!(
                    queue.high,
                    model.iter().filter(|q| q.priority == CommandPriority::High).count()
                );
                proptest::prop_assert_eq!(
                    queue.bounds(),
                    model.iter().map(|q| q.bound).sum::<Nanos>()
                );
                proptest::prop_assert_eq!(
                    queue.oldest_accepted(),
                    model.iter().map(|q| q.accepted).min()
                );
            }
        }

        /// The walk out from the head chooses what the plain pass over every ready command
        /// chooses, with the same positioning, whenever it chooses. Cylinders, angles and
        /// accept times come from small sets, so that ties are frequent; some commands are
        /// not ready yet, some are writes, some on another head.
        #[test]
        fn the_walk_chooses_as_the_plain_pass(
            commands in proptest::collection::vec(
                (0u32..6, 0u32..3, 0u8..4, proptest::bool::ANY, 0u64..6, proptest::bool::weighted(0.15)),
                0..40,
            ),
            head_cylinder in 0u32..6,
            spread in proptest::sample::select(vec![1u32, 7, 1000, 20_000]),
            now_ms in 30u64..60,
            age_weight in proptest::sample::select(vec![0.0, 0.001, 0.05]),
            deadline_ms in proptest::sample::select(vec![40u64, 1000]),
        ) {
            let mut hdd = Hdd::new(HddConfig::default(), 1).unwrap();
            hdd.selection.age_weight = age_weight;
            hdd.selection.deadline = deadline_ms * 1_000_000;
            let now = now_ms * 1_000_000;
            hdd.head = HeadPosition { cylinder: head_cylinder * spread, head: 0 };
            for (slot, &(cylinder, head, angle, write, accepted, late)) in commands.iter().enumerate() {
                hdd.queued.push(Queued {
                    slot: slot as u32,
                    write,
                    priority: CommandPriority::Normal,
                    ready_at: if late { now + 1 } else { now },
                    accepted: accepted * 5_000_000,
                    bound: 0,
                    target: Location {
                        zone: 0,
                        cylinder: cylinder * spread,
                        head,
                        sector: 0,
                        angle: f64::from(angle) / 4.0,
                    },
                    seq: 0,
                });
            }
            let under = hdd.angle_at(now as f64);
            let walked = match hdd.queued.by_cylinder() {
                Some(by_cylinder) => hdd.plain_walk(by_cylinder, now, under),
                None => None,
            };
            let plain = hdd.selection.plain_best(
                now,
                hdd.queued
                    .iter()
                    .filter(|queued| queued.ready_at <= now)
                    .map(|queued| (queued, queued.accepted, queued.priority)),
                |queued| hdd.ordering_ns(under, queued),
            );
            let slots = |choice: Option<Option<(&Queued, f64)>>| {
                choice.map(|best| best.map(|(queued, positioning)| (queued.slot, positioning)))
            };
            // The walk declines where the plain pass does, and otherwise only with too few
            // commands to keep by cylinder or an overdue one, ready or not.
            let overdue = hdd
                .queued
                .iter()
                .any(|queued| now - queued.accepted >= hdd.selection.deadline);
            if plain.is_none() {
                proptest::prop_assert!(walked.is_none());
            }
            if walked.is_none() {
                proptest::prop_assert!(commands.len() < BY_CYLINDER_FROM || overdue);
            }
            if walked.is_some() {
                proptest::prop_assert_eq!(slots(walked), slots(plain));
            }
        }
    }
}

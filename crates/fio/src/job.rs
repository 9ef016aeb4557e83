//! The resolved job: what one fio job (one clone of it, when `numjobs` > 1) asks for, in typed
//! form. The parser ([`crate::parse`]) produces these from job files; the simulator and the real
//! engine consume them. Field names follow fio's option names.

use iosched_core::{IoPrio, Nanos};
use std::fmt;

/// Where something was written: file and 1-based line.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    /// The job file (or included file) as named on the command line or in `include`.
    pub file: String,
    /// 1-based line number.
    pub line: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// An option fio documents that iosched accepts without acting on it, with the reason; the run
/// prints these so that nothing is silently ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Where the option was set.
    pub location: Location,
    /// The option's name.
    pub option: String,
    /// Why it has no effect here.
    pub message: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: note: {}: {}",
            self.location, self.option, self.message
        )
    }
}

/// fio's `rw=` (alias `readwrite=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwMode {
    /// `read`: sequential reads.
    Read,
    /// `write`: sequential writes.
    Write,
    /// `trim`: sequential trims.
    Trim,
    /// `randread`: random reads.
    RandRead,
    /// `randwrite`: random writes.
    RandWrite,
    /// `randtrim`: random trims.
    RandTrim,
    /// `rw` / `readwrite`: sequential mixed reads and writes (`rwmixread`).
    ReadWrite,
    /// `randrw`: random mixed reads and writes (`rwmixread`).
    RandReadWrite,
    /// `trimwrite`: sequential trim then write of the same block.
    TrimWrite,
    /// `randtrimwrite`: random trim then write of the same block.
    RandTrimWrite,
}

impl RwMode {
    /// Whether offsets are random.
    pub fn is_random(self) -> bool {
        matches!(
            self,
            RwMode::RandRead
                | RwMode::RandWrite
                | RwMode::RandTrim
                | RwMode::RandReadWrite
                | RwMode::RandTrimWrite
        )
    }

    /// fio's name for the mode.
    pub fn name(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
            RwMode::Trim => "trim",
            RwMode::RandRead => "randread",
            RwMode::RandWrite => "randwrite",
            RwMode::RandTrim => "randtrim",
            RwMode::ReadWrite => "rw",
            RwMode::RandReadWrite => "randrw",
            RwMode::TrimWrite => "trimwrite",
            RwMode::RandTrimWrite => "randtrimwrite",
        }
    }
}

/// fio's three data directions, used to index per-direction settings and results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DataDir {
    /// Reads.
    Read = 0,
    /// Writes.
    Write = 1,
    /// Trims (discards).
    Trim = 2,
}

impl DataDir {
    /// All three, in fio's order.
    pub const ALL: [DataDir; 3] = [DataDir::Read, DataDir::Write, DataDir::Trim];

    /// fio's JSON key for the direction.
    pub fn name(self) -> &'static str {
        match self {
            DataDir::Read => "read",
            DataDir::Write => "write",
            DataDir::Trim => "trim",
        }
    }
}

/// Block size choice for one direction (`bs`, `bsrange`, `bssplit`).
#[derive(Clone, Debug, PartialEq)]
pub enum BlockSize {
    /// Every I/O has this size in bytes.
    Fixed(u64),
    /// Uniformly chosen multiples of `min` between `min` and `max` inclusive (`bsrange`).
    Range {
        /// Smallest size in bytes.
        min: u64,
        /// Largest size in bytes.
        max: u64,
    },
    /// Weighted choice (`bssplit`): (size in bytes, percent). Percentages sum to 100.
    Split(Vec<(u64, u32)>),
}

impl BlockSize {
    /// The smallest size this choice can produce.
    pub fn min(&self) -> u64 {
        match self {
            BlockSize::Fixed(size) => *size,
            BlockSize::Range { min, .. } => *min,
            BlockSize::Split(parts) => parts.iter().map(|p| p.0).min().unwrap_or(0),
        }
    }

    /// The largest size this choice can produce.
    pub fn max(&self) -> u64 {
        match self {
            BlockSize::Fixed(size) => *size,
            BlockSize::Range { max, .. } => *max,
            BlockSize::Split(parts) => parts.iter().map(|p| p.0).max().unwrap_or(0),
        }
    }
}

/// A size that may be absolute or a share of the file or device (`size=20%`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    /// Bytes.
    Bytes(u64),
    /// Percent (0 < p <= 100) of the file or device size.
    Percent(f64),
}

/// The kind of an I/O error, as fio's `td_error_type` sorts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A read failed.
    Read = 0,
    /// A write, trim or flush failed.
    Write = 1,
    /// A verify failed (or any I/O with EILSEQ).
    Verify = 2,
}

/// errno of an illegal byte sequence: fio counts it as a verify error.
const EILSEQ: i32 = 84;
/// errno of an I/O error.
const EIO: i32 = 5;

impl ErrorKind {
    /// The kind of an error `errno` in direction `dir` (fio's `td_error_type`).
    pub fn of(dir: DataDir, errno: i32) -> ErrorKind {
        if errno == EILSEQ {
            ErrorKind::Verify
        } else if dir == DataDir::Read {
            ErrorKind::Read
        } else {
            ErrorKind::Write
        }
    }
}

/// fio's `continue_on_error` and `ignore_error`: an error is non-fatal (the job counts it and
/// goes on) when its kind is in `continue_on` and its errno in that kind's list, by default
/// EIO and EILSEQ (`td_non_fatal_error`); any other error ends the job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorHandling {
    /// Kinds the job goes on after, by [`ErrorKind`] bit (`continue_on_error`: none 0, read
    /// 1, write 2, io 3, verify 4, all 7).
    pub continue_on: u8,
    /// Per kind, the errnos that are non-fatal (`ignore_error`); `None`: EIO and EILSEQ.
    pub ignore: [Option<Vec<i32>>; 3],
}

impl ErrorHandling {
    /// Whether `continue_on_error` is set at all (fio then reports error counts).
    pub fn reports_counts(&self) -> bool {
        self.continue_on != 0
    }

    /// Whether the job goes on after error `errno` of `kind`.
    pub fn non_fatal(&self, kind: ErrorKind, errno: i32) -> bool {
        if self.continue_on & (1 << kind as u8) == 0 {
            return false;
        }
        match &self.ignore[kind as usize] {
            Some(list) => list.contains(&errno),
            None => errno == EIO || errno == EILSEQ,
        }
    }
}

/// Which of a direction's I/Os go with another priority (fio's engines/cmdprio.c): shares of
/// all of them (`cmdprio_percentage`), or shares of those of each block size
/// (`cmdprio_bssplit`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmdPrio {
    /// The shares. In percentage mode one, for every block size; in bssplit mode sorted by
    /// block size, each size's shares adding up to at most 100.
    pub shares: Vec<CmdPrioShare>,
}

/// A share of the I/Os issued with a priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmdPrioShare {
    /// The block size it applies to (`cmdprio_bssplit`); `None`: every I/O.
    pub block_size: Option<u64>,
    /// Percent of those I/Os, 1 to 100.
    pub percentage: u8,
    /// Their priority (`cmdprio_class`, default RT; `cmdprio`, default 0; `cmdprio_hint`,
    /// default 0), or the entry's own in bssplit's `bs/perc/class/level[/hint]` form.
    pub prio: IoPrio,
}

impl CmdPrio {
    /// One share of every I/O (percentage mode).
    pub fn percentage(percentage: u8, prio: IoPrio) -> CmdPrio {
        CmdPrio {
            shares: vec![CmdPrioShare {
                block_size: None,
                percentage,
                prio,
            }],
        }
    }

    /// The priority of an I/O of `bytes` given `draw` in 0..100, as `fio_cmdprio_set_ioprio`
    /// picks it: the shares that apply to its size, in order, until their running total
    /// passes the draw; `None` when the draw is past them all (the job's own priority).
    pub fn pick(&self, bytes: u64, draw: u64) -> Option<IoPrio> {
        let mut total = 0u64;
        for share in &self.shares {
            if share.block_size.is_some_and(|size| size != bytes) {
                continue;
            }
            total += u64::from(share.percentage);
            if draw < total {
                return Some(share.prio);
            }
        }
        None
    }

    /// Whether an I/O of `bytes` may draw a priority (fio draws only then).
    pub fn applies_to(&self, bytes: u64) -> bool {
        self.shares
            .iter()
            .any(|share| share.block_size.is_none_or(|size| size == bytes))
    }
}

/// fio's `ioengine=`, reduced to what decides how I/O is issued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    /// One I/O at a time, the next after the previous completes (`sync`, `psync`, `vsync`,
    /// `pvsync`, `pvsync2`). `iodepth` has no effect, as in fio.
    Sync {
        /// The engine name as written.
        name: String,
    },
    /// Up to `iodepth` I/Os in flight (`libaio`, `io_uring`, `posixaio`).
    Async {
        /// The engine name as written.
        name: String,
    },
    /// fio's `null` engine: every I/O completes as soon as it is queued, without touching a
    /// file or the device (engines/null.c); up to `iodepth` in flight.
    Null,
}

impl Engine {
    /// The engine name as written in the job file.
    pub fn name(&self) -> &str {
        match self {
            Engine::Sync { name } | Engine::Async { name } => name,
            Engine::Null => "null",
        }
    }

    /// Whether several I/Os may be in flight at once.
    pub fn is_async(&self) -> bool {
        matches!(self, Engine::Async { .. } | Engine::Null)
    }

    /// Whether it is fio's `null` engine: no file and no device is touched.
    pub fn is_null(&self) -> bool {
        matches!(self, Engine::Null)
    }
}

/// fio's `random_distribution=`.
#[derive(Clone, Debug, PartialEq)]
pub enum RandomDistribution {
    /// Every block equally likely (the default).
    Random,
    /// Zipf with exponent theta (`zipf:1.2`).
    Zipf(f64),
    /// Pareto with power h (`pareto:0.9`).
    Pareto(f64),
    /// Gaussian with the deviation given in percent of the range (`normal:5`).
    Normal(f64),
    /// Access percentages over range percentages (`zoned:60/10:30/20:10/70`).
    Zoned(Vec<(f64, f64)>),
}

/// fio's `sync_file_range=FLAGS:N` (`str_sfr_cb`): sync_file_range(2) with `flags` (Linux's
/// SYNC_FILE_RANGE_* bits) over the byte range the job wrote in its file since the last sync,
/// after every `every` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncFileRange {
    /// SYNC_FILE_RANGE_WAIT_BEFORE | _WRITE | _WAIT_AFTER, as given.
    pub flags: u32,
    /// Writes between two calls (fio's `sync_file_range_nr`, 1 without a `:N`).
    pub every: u32,
}

impl SyncFileRange {
    /// Wait for writeback already under way in the range before writing (`wait_before`).
    pub const WAIT_BEFORE: u32 = 1;
    /// Start writeback of the range's dirty pages (`write`).
    pub const WRITE: u32 = 2;
    /// Wait for the range's writeback after starting it (`wait_after`).
    pub const WAIT_AFTER: u32 = 4;
}

/// fio's `verify=` (any method but `0`) with `do_verify`: the job checks the data it reads.
/// The parser accepts every method fio knows; each engine says which it can check (the real
/// engine checks `crc32c`; the simulator, which moves no data, checks every method by the
/// identity of the blocks, see `iosched_sim`'s verify).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verify {
    /// The method as written: `crc32c`, `md5`, `sha256`, ...
    pub method: String,
    /// For a job that writes: read every block written back when the writes are done, and
    /// check it (`do_verify`, default 1). A job that only reads checks every block it reads.
    pub do_verify: bool,
    /// Where `verify=` was set.
    pub location: Location,
}

/// `posix_fadvise` advice fio gives a job's files (`fadvise_hint`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fadvise {
    /// `POSIX_FADV_SEQUENTIAL`.
    Sequential,
    /// `POSIX_FADV_RANDOM`.
    Random,
    /// `POSIX_FADV_NOREUSE` (no effect on Linux's page cache since 2.6.18, nor here).
    Noreuse,
}

/// Which jobs `exitall` ends when a job finishes (fio's `exit_what`, `fio_terminate_threads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitWhat {
    /// The jobs of the finished job's reporting group (`group`, the default).
    Group,
    /// Every job running at that moment; the next stonewalled group still starts
    /// (`stonewall`).
    Stonewall,
    /// Every job, also those not started yet (`all`).
    All,
}

/// fio's `latency_target` search (io_u.c, `lat_target_*`): the job looks for the deepest
/// queue whose completions meet `target` at `percentile` over each `window`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyTarget {
    /// Latency an I/O must not exceed (`latency_target`), ns.
    pub target: Nanos,
    /// Time spent at each queue depth before judging it (`latency_window`), ns.
    pub window: Nanos,
    /// Share of a window's I/Os that must meet the target, percent (`latency_percentile`).
    pub percentile: f64,
    /// Keep adjusting the depth for the whole run instead of ending once the depth is found
    /// (`latency_run`).
    pub run: bool,
}

/// fio's `flow`: weighted flow control between the jobs that share a `flow_id` (flow.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The job's weight in its flow (`flow`, 1 to 1000).
    pub weight: u32,
    /// Which flow (`flow_id`, default 0).
    pub id: u32,
    /// Time a job ahead of its share sleeps, after its I/O in flight completes
    /// (`flow_sleep`, microseconds in fio), ns; 0 waits until the others catch up.
    pub sleep: Nanos,
}

/// fio's `zonemode=strided` (io_u.c `__fill_io_u_zone`): I/O stays in a zone of `range`
/// bytes until `size` bytes were transferred there, then moves `range + skip` bytes on,
/// wrapping to the region's start past its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StridedZones {
    /// Bytes transferred in a zone before the next (`zonesize`).
    pub size: u64,
    /// Bytes of a zone (`zonerange`, default `zonesize`): random offsets lie in it, and a
    /// sequential job at its end starts it again.
    pub range: u64,
    /// Bytes skipped after a zone (`zoneskip`).
    pub skip: u64,
}

/// One job clone, fully resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// The job's section name.
    pub name: String,
    /// Where the job's `[section]` header is.
    pub location: Location,
    /// Which clone of the job this is (0-based), `numjobs` being the count.
    pub clone: u32,
    /// The job's `numjobs`.
    pub numjobs: u32,
    /// Reporting group (fio's `groupid`), advanced by `stonewall` and `new_group`.
    pub group_id: u32,
    /// Wait for every earlier job to finish before starting (`stonewall`, `wait_for_previous`).
    pub stonewall: bool,
    /// Report all jobs of this group together (`group_reporting`).
    pub group_reporting: bool,
    /// Free text (`description`).
    pub description: Option<String>,

    /// Access pattern (`rw`).
    pub rw: RwMode,
    /// For random modes, how many I/Os go sequentially before a new random offset (`rw=randread:8`,
    /// fio's `ddir_seq_nr`). Always 1 for sequential modes. Default 1.
    pub rw_sequencer_nr: u32,
    /// For sequential modes, bytes added to the offset after each I/O: holes when positive
    /// (`rw=write:4k`), backwards I/O when negative (`rw=read:-8k`, which with `bs=4k` reads
    /// block after block from the end down); fio's `ddir_seq_add`. Always 0 for random
    /// modes. Default 0.
    pub rw_skip_bytes: i64,
    /// Percentage of mixed I/O that reads (`rwmixread`; `rwmixwrite` sets 100 minus it).
    pub rwmixread: u32,
    /// Block size choice for read, write and trim (`bs`, `bsrange`, `bssplit`).
    pub bs: [BlockSize; 3],
    /// Offsets are aligned to this many bytes (`blockalign`); defaults to the minimum block size.
    pub blockalign: [u64; 3],

    /// Target files (`filename`, split on ':'). fio's default is `jobname.clone.0`. A name under
    /// `/dev/` is the raw device.
    pub filenames: Vec<String>,
    /// Bytes of the file(s) this job touches (`size`), `None` for the whole device.
    pub size: Option<Amount>,
    /// Bytes of I/O before the job ends (`io_size`, `io_limit`), if not `size`.
    pub io_size: Option<u64>,
    /// I/Os (times `loops`) after which the job ends, if it has not ended before
    /// (`number_ios`; fio's `exceeds_number_ios`).
    pub number_ios: Option<u64>,
    /// Start of the job's region within the file (`offset`).
    pub offset: Amount,
    /// Added to `offset` for each clone (`offset_increment`).
    pub offset_increment: u64,
    /// Number of passes over the region (`loops`).
    pub loops: u32,

    /// How I/O is issued (`ioengine`).
    pub engine: Engine,
    /// I/Os kept in flight by an async engine (`iodepth`).
    pub iodepth: u32,
    /// `O_DIRECT` (`direct`, or `buffered=0`).
    pub direct: bool,
    /// `O_SYNC` writes (`sync=1`).
    pub sync_writes: bool,
    /// Issue a flush after every this many writes (`fsync`, `fdatasync`); 0 never.
    pub fsync_every: u32,
    /// Flush when the job ends (`end_fsync`).
    pub end_fsync: bool,
    /// `sync_file_range=FLAGS:N`: sync_file_range(2) over the range written since the last
    /// sync, after every N writes.
    pub sync_file_range: Option<SyncFileRange>,
    /// Data verification (`verify`, `do_verify`), if asked for.
    pub verify: Option<Verify>,

    /// Stall after each thinktime block (`thinktime`).
    pub thinktime: Nanos,
    /// Part of the stall spent busy (`thinktime_spin`); it delays the same, but burns CPU in fio.
    pub thinktime_spin: Nanos,
    /// I/Os between stalls (`thinktime_blocks`).
    pub thinktime_blocks: u32,
    /// Bandwidth cap per direction in bytes/s (`rate`); 0 is unlimited.
    pub rate: [u64; 3],
    /// IOPS cap per direction (`rate_iops`); 0 is unlimited.
    pub rate_iops: [u64; 3],
    /// Issue at the rate's mean with exponential gaps, a Poisson process
    /// (`rate_process=poisson`), instead of evenly (`linear`, the default).
    pub rate_poisson: bool,
    /// Least bandwidth per direction in bytes/s (`rate_min`); a job below it over a
    /// `rate_cycle` ends with an error, as fio's `check_min_rate`. 0: none.
    pub rate_min: [u64; 3],
    /// Least IOPS per direction (`rate_iops_min`), checked as `rate_min`. 0: none.
    pub rate_iops_min: [u64; 3],
    /// The window `rate_min` and `rate_iops_min` are averaged over (`rate_cycle`, ms).
    pub rate_cycle: Nanos,
    /// The queue depth search for a latency target (`latency_target`), if set.
    pub latency_target: Option<LatencyTarget>,
    /// Weighted flow control with other jobs (`flow`), if set.
    pub flow: Option<Flow>,
    /// When this job finishes, end others (`exitall`, with `exit_what`).
    pub exitall: Option<ExitWhat>,
    /// When this job fails, end every other job (`exitall_on_error`).
    pub exitall_on_error: bool,
    /// `zonemode=strided`, if set.
    pub strided_zones: Option<StridedZones>,
    /// `zonemode=zbd`, if set.
    pub zbd: Option<crate::zbd::ZbdOptions>,
    /// Write until the device, or the file system holding the file, is full
    /// (`fill_device`; it excludes `size`).
    pub fill_device: bool,
    /// Stop when steady state is reached (`steadystate` with `ss_dur`), if set.
    pub steadystate: Option<crate::steady::SteadyState>,
    /// Start only once every job of this name has finished (`wait_for`).
    pub wait_for: Option<String>,

    /// Stop after this long (`runtime`).
    pub runtime: Option<Nanos>,
    /// Keep going until `runtime`, looping over the region (`time_based`).
    pub time_based: bool,
    /// Run this long before statistics count (`ramp_time`).
    pub ramp_time: Nanos,
    /// Delay before the job starts: fixed, or uniformly drawn from a range (`startdelay=1-5`).
    pub startdelay: (Nanos, Nanos),

    /// I/O priority (`prioclass`, `prio`).
    pub prio: IoPrio,
    /// Per-I/O priorities of reads and writes (`cmdprio_percentage` or `cmdprio_bssplit`,
    /// with `cmdprio_class`, `cmdprio` and `cmdprio_hint`): those shares of the direction's
    /// I/Os go with those priorities instead of the job's.
    pub cmdprio: [Option<CmdPrio>; 2],
    /// What errors the job goes on after (`continue_on_error` and `ignore_error`).
    pub errors: ErrorHandling,
    /// cgroup path (`cgroup`), normalised to start with '/'; "/" when not set.
    pub cgroup: String,
    /// cgroup weight for the job's group (`cgroup_weight`), if set.
    pub cgroup_weight: Option<u32>,
    /// What the job tells the kernel of its access pattern (`fadvise_hint`): `None` for 0,
    /// else the advice given to each file when it is opened (1: sequential or random after
    /// `rw`).
    pub fadvise: Option<Fadvise>,
    /// Drop the job's files from the page cache before it starts (`invalidate`, default 1).
    pub invalidate: bool,
    /// Read the job's files into the page cache before it starts (`pre_read`).
    pub pre_read: bool,
    /// POSIX_FADV_DONTNEED on the job's files after every this many bytes of its I/O
    /// (iosched's `dontneed_every`).
    pub dontneed_every: Option<u64>,
    /// `exec_prerun` dropping the host's caches (`echo N > /proc/sys/vm/drop_caches`): N.
    pub drop_caches: Option<u8>,
    /// The job's own QoS, for the policies that take it (iosched's `qos_rate`, `qos_burst`,
    /// `qos_delay`, `qos_reservation`, `qos_weight`, `qos_limit`; not fio's).
    pub qos: iosched_core::Qos,

    /// Choose random offsets with replacement instead of covering every block once per pass
    /// (`norandommap`).
    pub norandommap: bool,
    /// Same random sequence on every run (`randrepeat`, default true).
    pub randrepeat: bool,
    /// Explicit random seed (`randseed`).
    pub randseed: Option<u64>,
    /// Offset distribution for random I/O (`random_distribution`).
    pub random_distribution: RandomDistribution,

    /// Completion-latency percentiles to report (`percentile_list`), in percent.
    pub percentile_list: Vec<f64>,
    /// Whether to report percentiles at all (`clat_percentiles`/`lat_percentiles`).
    pub clat_percentiles: bool,
    /// Latency log prefix (`write_lat_log`), if logging.
    pub write_lat_log: Option<String>,
    /// Bandwidth log prefix (`write_bw_log`), if logging.
    pub write_bw_log: Option<String>,
    /// IOPS log prefix (`write_iops_log`), if logging.
    pub write_iops_log: Option<String>,
    /// Averaging window for logs in ms (`log_avg_msec`); 0 logs every I/O's latency and
    /// bandwidth/IOPS every 500 ms, as fio does.
    pub log_avg_msec: u32,
    /// Add each I/O's offset to log lines (`log_offset`).
    pub log_offset: bool,
    /// Log the raw ioprio value instead of a high-priority flag (`log_prio`).
    pub log_prio: bool,
    /// The trace the job replays instead of drawing its I/O (`read_iolog` and the `replay_*`
    /// options; [`crate::trace::replay`]).
    pub replay: Option<crate::trace::ReplaySpec>,
    /// Where to write fio's version 3 log of the I/O the job issues (`write_iolog`).
    pub write_iolog: Option<String>,

    /// The elevator fio would select on the job's device (`ioscheduler`), if set. The policy
    /// the run uses is the runner's choice; it should honour this or say that it does not.
    pub ioscheduler: Option<String>,

    /// The options set in the job's own section (and files it includes), in the order fio
    /// applies them, under fio's canonical names, with `${VAR}` expanded; a bare option has an
    /// empty value. This is fio's "job options" JSON section: options inherited from `[global]`
    /// are in [`JobFile::global_options`] instead, as fio lists them.
    pub options: Vec<(String, String)>,
}

/// fio's default `percentile_list`.
pub const DEFAULT_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// A parsed job file: its jobs (clones expanded) and the notes on options without effect.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct JobFile {
    /// Jobs in file order, clones of a job adjacent.
    pub jobs: Vec<JobSpec>,
    /// Options accepted without effect, with their reason.
    pub notes: Vec<Note>,
    /// The options of every `[global]` section, as for [`JobSpec::options`]: fio's
    /// "global options" JSON section.
    pub global_options: Vec<(String, String)>,
}

impl JobSpec {
    /// Whether the job writes (any mode but read, randread, trim and randtrim).
    pub fn writes(&self) -> bool {
        !matches!(
            self.rw,
            RwMode::Read | RwMode::RandRead | RwMode::Trim | RwMode::RandTrim
        )
    }

    /// A job named `name` with every option at fio's default: `rw=read`, `bs=4k`,
    /// `ioengine=psync`, `iodepth=1`, `direct=0`, `rwmixread=50`, file `name.0.0`, no size.
    pub fn new(name: &str) -> Self {
        JobSpec {
            name: name.to_string(),
            location: Location {
                file: String::new(),
                line: 0,
            },
            clone: 0,
            numjobs: 1,
            group_id: 0,
            stonewall: false,
            group_reporting: false,
            description: None,
            rw: RwMode::Read,
            rw_sequencer_nr: 1,
            rw_skip_bytes: 0,
            rwmixread: 50,
            bs: [
                BlockSize::Fixed(4096),
                BlockSize::Fixed(4096),
                BlockSize::Fixed(4096),
            ],
            blockalign: [4096; 3],
            filenames: vec![format!("{name}.0.0")],
            size: None,
            io_size: None,
            number_ios: None,
            offset: Amount::Bytes(0),
            offset_increment: 0,
            loops: 1,
            engine: Engine::Sync {
                name: "psync".into(),
            },
            iodepth: 1,
            direct: false,
            sync_writes: false,
            fsync_every: 0,
            end_fsync: false,
            sync_file_range: None,
            verify: None,
            thinktime: 0,
            thinktime_spin: 0,
            thinktime_blocks: 1,
            rate: [0; 3],
            rate_iops: [0; 3],
            rate_poisson: false,
            rate_min: [0; 3],
            rate_iops_min: [0; 3],
            rate_cycle: 1_000_000_000,
            latency_target: None,
            flow: None,
            exitall: None,
            wait_for: None,
            strided_zones: None,
            zbd: None,
            fill_device: false,
            steadystate: None,
            exitall_on_error: false,
            runtime: None,
            time_based: false,
            ramp_time: 0,
            startdelay: (0, 0),
            prio: IoPrio::NONE,
            errors: ErrorHandling::default(),
            cmdprio: [None, None],
            cgroup: "/".into(),
            cgroup_weight: None,
            qos: iosched_core::Qos::default(),
            fadvise: Some(Fadvise::Sequential),
            invalidate: true,
            pre_read: false,
            dontneed_every: None,
            drop_caches: None,
            norandommap: false,
            randrepeat: true,
            randseed: None,
            random_distribution: RandomDistribution::Random,
            percentile_list: DEFAULT_PERCENTILES.to_vec(),
            clat_percentiles: true,
            write_lat_log: None,
            write_bw_log: None,
            write_iops_log: None,
            log_avg_msec: 0,
            log_offset: false,
            log_prio: false,
            replay: None,
            write_iolog: None,
            ioscheduler: None,
            options: Vec::new(),
        }
    }
}

//! The event loop: jobs issue requests, the elevator schedules them, the device serves them.
//!
//! # How a run proceeds
//!
//! Every state change happens at an event popped from the [`EventQueue`] in (time, sequence)
//! order: a job starting (after `startdelay`, or when a stonewall opens), a job waking (after
//! think time or a rate delay), a job's runtime ending, the device's next internal event, or the
//! policy's requested wake-up. After each event the loop *settles*: it moves the device to the
//! current time and handles its completions (which let jobs issue their next I/O), admits
//! submitters that waited for a free scheduler request, and dispatches to the device while it
//! has room and the policy offers requests. Then it schedules the device's and the policy's
//! next wake-ups. Wake-ups carry a generation number so that a superseded one is ignored.
//!
//! When every job has finished, the loop keeps going until the device and the elevator are
//! empty, so every request issued completes exactly once.

use crate::device::{self, Device};
use crate::event::EventQueue;
use crate::horizon;
use crate::host::blockmap::{self, MapBlock};
use crate::host::pagecache::PageCache;
use crate::host::readahead::{Advice, RaState, Window, PAGE};
use crate::host::writeback::{self, Throttle, Wb};
use crate::layout::{self, Layout};
use crate::random::{derive_seed, Rng};
use crate::workload::{Generator, NextIo, Region};
use crate::SimError;
use iosched_core::tunable::{TunableSpec, Unit};
use iosched_core::{
    limits, policies, time::SECOND, Admitted, Dispatch, Elevator, FlowId, GroupId, Groups, IoPrio,
    Nanos, Op, Request, RequestId, Waiters,
};
use iosched_fio::driver::{self, Issued, JobState, Phase, SyncKind, Timer};
use iosched_fio::job::Fadvise;
use iosched_fio::report::{scheduler_counters, tunable_parameters};
use iosched_fio::trace;
use iosched_fio::zbd::{ZbdFile, ZbdRegistry};
use iosched_fio::{
    BlockSize, DataDir, DiskAccounting, JobFile, JobSpec, Parameter, RunReport, RwMode,
};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod dirty;
mod verify;

/// What to simulate: the seed, the policy and the device.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The one seed every random choice derives from.
    pub seed: u64,
    /// Policy name (see `iosched policies`).
    pub policy: String,
    /// Queue and policy tunables to set, by name, as text; `POLICY.NAME` sets a tunable only
    /// when that policy runs.
    pub policy_settings: Vec<(String, String)>,
    /// Device model name (see `iosched devices`).
    pub device: String,
    /// Device parameters to set, by name, as text.
    pub device_settings: Vec<(String, String)>,
    /// Simulated time after which the run is abandoned as runaway; at most
    /// [`limits::SIMULATED_TIME_MAX`], and a run set to go past it is refused before it starts.
    pub time_limit: Nanos,
    /// cgroup io controller settings: (group path, file, value), applied in order.
    pub group_settings: Vec<GroupSetting>,
    /// Whether to write the log files jobs ask for (`write_lat_log` and friends) as they run,
    /// relative to the current directory as fio does; the caller commits them
    /// ([`iosched_fio::output::logs::commit`]) when the run succeeds. Off for studies, whose
    /// runs would write the same files at once.
    pub write_logs: bool,
    /// Whether each job keeps its time-series charts (bytes, I/Os and latency per window),
    /// which the HTML report and the Python bindings draw; fio's text and JSON do not, and
    /// `iosched run` turns them off ([`iosched_fio::JobResult::drop_charts`]).
    pub charts: bool,
    /// Where to store the simulated time reached (ns) as the run goes, every few thousand
    /// events, for a progress display on another thread. Reading it changes nothing.
    pub progress: Option<Arc<AtomicU64>>,
    /// Where to store, as often, the share of the jobs' work done in parts per million (the
    /// mean of [`JobState::done_fraction`] over the jobs), for an ETA when the jobs' time is
    /// not known beforehand (jobs that end by size).
    pub progress_done: Option<Arc<AtomicU64>>,
}

pub use iosched_core::group::GroupSetting;

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            policy: "deadline".into(),
            policy_settings: Vec::new(),
            device: "hdd".into(),
            device_settings: Vec::new(),
            time_limit: limits::SIMULATED_TIME_MAX,
            group_settings: Vec::new(),
            write_logs: false,
            charts: true,
            progress: None,
            progress_done: None,
        }
    }
}

/// Jobs beyond which a completing job's state is asked of the CPU ahead
/// (`JobState::prefetch`). Below, the lines of the jobs' states that each I/O reads (some
/// twenty per job) stay in the CPU's caches (1 MiB of L2 a core and 32 MiB of L3 on the
/// machine measured), and the hints only cost instructions: in requests per second with them,
/// against without, 0.93-1.01x at 4 jobs, 0.94x at 16, 0.98x at 64, 1.0x at 256 and 512
/// (medians of 5 interleaved pairs pinned to one core). At 1024 jobs they gain the more, the
/// slower memory is at the time: 1.09x to 1.14x (noop, deadline, cfq, anticipatory) while
/// other work on the machine made it slow, 1.01x while it was quiet.
const PREFETCH_FROM_JOBS: usize = 512;

/// Events between stores of the simulated time into [`SimConfig::progress`] (and of the work
/// done into [`SimConfig::progress_done`]).
const PROGRESS_EVERY: u64 = 4096;

/// The host's own tunables, set with `--set` like the queue's.
pub const HOST_TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "wakeup_latency",
        unit: Unit::Microseconds,
        default: 20,
        min: 0,
        max: 1_000_000,
        doc: "from a completion on the device to its issuer seeing it (interrupt, wake-up, \
              system call return): a synchronous job's next request comes at least this long \
              after the last one completed, and fio's clat includes it (seed 000's 2 GHz \
              hosts: ~20 us)",
    },
    TunableSpec {
        name: "mem",
        unit: Unit::Count,
        default: 4096,
        min: 1,
        max: 16 << 20,
        doc: "the host's memory in MiB, all of it page cache for buffered reads (direct=0)",
    },
    TunableSpec {
        name: "read_ahead_kb",
        unit: Unit::Kibibytes,
        default: 128,
        min: 0,
        max: 1 << 20,
        doc: "the device's read-ahead for buffered reads (/sys/block/X/queue/read_ahead_kb): \
              Linux's on-demand windows grow up to it (twice it after fadvise SEQUENTIAL)",
    },
    TunableSpec {
        name: "writeback",
        unit: Unit::Flag,
        default: 1,
        min: 0,
        max: 1,
        doc: "buffered writes (direct=0) dirty the page cache and flushers write them back; 0: \
              each goes to the scheduler as the job's own asynchronous write, as if written \
              back at once by the job",
    },
    TunableSpec {
        name: "dirty_background_ratio",
        unit: Unit::Count,
        default: 10,
        min: 1,
        max: 100,
        doc: "percent of memory dirty at which flushers start background writeback \
              (/proc/sys/vm/dirty_background_ratio)",
    },
    TunableSpec {
        name: "dirty_ratio",
        unit: Unit::Count,
        default: 20,
        min: 1,
        max: 100,
        doc: "percent of memory dirty or under writeback at which writers are throttled \
              (/proc/sys/vm/dirty_ratio)",
    },
    TunableSpec {
        name: "dirty_expire_centisecs",
        unit: Unit::Count,
        default: 3000,
        min: 0,
        max: 360_000,
        doc: "age (1/100 s) at which periodic writeback takes a dirty inode",
    },
    TunableSpec {
        name: "dirty_writeback_centisecs",
        unit: Unit::Count,
        default: 500,
        min: 0,
        max: 360_000,
        doc: "interval (1/100 s) of periodic writeback; 0 turns it off",
    },
    TunableSpec {
        name: "cgroup_writeback",
        unit: Unit::Flag,
        default: 1,
        min: 0,
        max: 1,
        doc: "a flusher per cgroup, its writes charged to the cgroup that dirtied the pages \
              (Linux 4.2+); 0: one flusher per device in the root cgroup (2.6 kernels)",
    },
    TunableSpec {
        name: "sync_write_flag",
        unit: Unit::Flag,
        default: 1,
        min: 0,
        max: 1,
        doc: "fsync's and O_SYNC's writeback (WB_SYNC_ALL) is synchronous to the scheduler \
              (REQ_SYNC, Linux 2.6.29+); 0: plain writes, asynchronous like the flusher's, \
              as 2.6.19-2.6.28 submitted them",
    },
    TunableSpec {
        name: "direct_write_sync",
        unit: Unit::Flag,
        default: 1,
        min: 0,
        max: 1,
        doc: "O_DIRECT writes are synchronous to the scheduler (2.6.18's PF_SYNCWRITE, \
              WRITE_SYNC from 2.6.19, today REQ_SYNC|REQ_IDLE); 0: plain asynchronous writes",
    },
    TunableSpec {
        name: "page_ioprio",
        unit: Unit::Flag,
        default: 0,
        min: 0,
        max: 1,
        doc: "a flusher's write carries the I/O priority of the job that dirtied its pages, \
              as seed 000's prototype kept it in the page; 0: the flusher's own (none, \
              best effort at level 4), as Linux",
    },
    TunableSpec {
        name: "indirect_blocks",
        unit: Unit::Flag,
        default: 0,
        min: 0,
        max: 1,
        doc: "files are block-mapped as ext2/ext3 map them: a direct read or write, or a read \
              into the page cache, first reads each indirect block on its way not yet in the \
              buffer cache (one per 4 MiB of file), synchronously in the job's own context \
              (ext3_get_branch); 0: extent-mapped files (ext4, xfs) whose maps are in memory. \
              Buffered writes' allocation is not modelled",
    },
    TunableSpec {
        name: "dirty_throttle_legacy",
        unit: Unit::Flag,
        default: 0,
        min: 0,
        max: 1,
        doc: "balance_dirty_pages as 2.6.x: a writer over the limit writes out pages of any \
              inode itself, in its own context; 0: the proportional pause of Linux 3.2+",
    },
];

/// Index of a host tunable in [`HOST_TUNABLES`].
fn host_tunable(name: &str) -> usize {
    HOST_TUNABLES
        .iter()
        .position(|spec| spec.name == name)
        .expect("a host tunable")
}

/// A page cache hit: the system call, and the copy at memory speed (ns, and bytes per ns).
/// This machine's psync 4 KiB buffered random reads of a cached file take 2.8 us each under
/// the real engine, fio's own work included.
const CACHE_HIT_NS: Nanos = 1_500;
const COPY_BYTES_PER_NS: u64 = 4;

/// The seed stream of a verifying job's patterns, apart from its I/O stream.
const VERIFY_STREAM: u64 = 0x7665_7269_6679;

/// errno of an illegal byte sequence: fio's verify failure.
const EILSEQ: i32 = 84;

/// One I/O of fio's `null` engine, which completes it as soon as it is queued: fio 3.33 on
/// this machine, `ioengine=null bs=4k rw=randread`, 2.7 M IOPS, so 370 ns of fio's own loop
/// per I/O. fio's clat shows only the queue-to-completion part of it (40-90 ns); here the
/// I/O takes the whole 370 ns, so that the IOPS are fio's (they were 10 M with 100 ns).
const NULL_IO_NS: Nanos = 370;

/// I/O to `/dev/null` or `/dev/zero`: a system call and no device. fio 3.33 on this machine
/// (psync, 2 s each): 1.27 M IOPS writing 4 KiB to /dev/null and 0.75 M at 128 KiB; 0.97 M
/// reading 4 KiB from /dev/zero and 0.18 M at 128 KiB (the kernel clears the buffer). So
/// 0.8 us per I/O plus a byte cost: 250 bytes per ns written, 28 read.
const DEV_NULL_IO_NS: Nanos = 800;

fn dev_null_cost(dir: DataDir, len: u64) -> Nanos {
    DEV_NULL_IO_NS
        + match dir {
            DataDir::Read => len / 28,
            _ => len / 250,
        }
}

/// The logical block size of the simulated devices: direct I/O must use whole blocks.
const LOGICAL_BLOCK: u64 = 512;

/// Seed stream reserved for the device; jobs use their index.
const DEVICE_STREAM: u64 = u64::MAX;

#[derive(Clone, Copy, Debug)]
enum Event {
    /// The issuer of the device request with this id learns that it completed.
    Notify(u64),
    /// A buffered read (by its `cache_reads` id) has copied its pages.
    CacheDone(u64),
    JobStart(u32),
    JobWake(u32),
    JobDeadline(u32),
    Device(u64),
    PolicyWake(u64),
    /// Periodic writeback (`dirty_writeback_centisecs`).
    Kupdate,
    /// A throttled writer's `congestion_wait` times out (job, generation).
    Congestion(u32, u64),
}

/// An I/O a job issued, from creation to completion: what the driver counts, and when the
/// request carrying it reached the device.
#[derive(Clone, Copy, Debug)]
struct Io {
    issued: Issued,
    /// When the request carrying it reached the device.
    dispatched: Nanos,
    /// Position of that dispatch among all dispatches of the run.
    dispatch_order: u64,
    /// For a read of the page cache's (read-ahead, or a buffered read's missing pages): its
    /// first page and page count; the job's own I/O waits in `cache_reads`.
    fill: Option<(u64, u64)>,
    /// For a write of dirty pages (writeback, fsync, O_SYNC): which.
    writeback: Option<WbIo>,
    /// Whether the elevator has taken it (a writer waits until then to submit its next).
    admitted: bool,
    /// Whether its request is synchronous to the scheduler (REQ_SYNC).
    sync: bool,
    /// For a read of a file's indirect block (`indirect_blocks`): which.
    map: Option<MapBlock>,
}

impl Io {
    /// A job's I/O `issued` on its way to the elevator, synchronous to it or not.
    fn new(issued: Issued, sync: bool) -> Io {
        Io {
            issued,
            dispatched: 0,
            dispatch_order: 0,
            fill: None,
            writeback: None,
            admitted: false,
            sync,
            map: None,
        }
    }
}

/// A write of pages `[first, first + pages)` from the page cache.
#[derive(Clone, Copy, Debug)]
struct WbIo {
    first: u64,
    pages: u64,
    /// The writeback context it counts for.
    wb: u32,
    /// The job that dirtied its first page: its device time is that job's.
    owner: usize,
}

/// A buffered read waiting for pages being read into the page cache.
#[derive(Clone, Copy, Debug)]
struct CacheRead {
    issued: Issued,
    /// Pages not yet up to date.
    missing: u64,
    /// The first error a read of its pages answered.
    error: Option<i32>,
}

/// The I/Os in flight, by request id: the records in a slab whose freed slots are reused last
/// freed first, so that a new record is written where one just left, still in the cache, and
/// a map from id to slot. A map of the 176-byte records themselves wrote each new one into a
/// bucket of its own, cold with 1024 jobs: three cache misses per I/O.
#[derive(Debug, Default)]
struct IoTable {
    /// The records; a freed slot keeps its stale record until it is reused.
    slots: Vec<Io>,
    /// Freed slots, the last freed on top.
    free: Vec<u32>,
    /// The slot of each id in flight.
    index: FxHashMap<u64, u32>,
}

impl IoTable {
    /// Tracks `io` under `id` (replacing any record of that id).
    fn insert(&mut self, id: u64, io: Io) {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = io;
                slot
            }
            None => {
                self.slots.push(io);
                (self.slots.len() - 1) as u32
            }
        };
        if let Some(replaced) = self.index.insert(id, slot) {
            self.free.push(replaced);
        }
    }

    fn get(&self, id: &u64) -> Option<&Io> {
        let slot = *self.index.get(id)?;
        Some(&self.slots[slot as usize])
    }

    fn get_mut(&mut self, id: &u64) -> Option<&mut Io> {
        let slot = *self.index.get(id)?;
        Some(&mut self.slots[slot as usize])
    }

    /// Stops tracking `id`, returning its record.
    fn remove(&mut self, id: &u64) -> Option<Io> {
        let slot = self.index.remove(id)?;
        self.free.push(slot);
        Some(self.slots[slot as usize])
    }

    fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

impl std::ops::Index<&u64> for IoTable {
    type Output = Io;

    fn index(&self, id: &u64) -> &Io {
        &self.slots[self.index[id] as usize]
    }
}

/// What the simulator keeps of a job besides its life ([`JobState`]).
///
/// The options each I/O's path reads are copied here from the job's spec (`null_engine`,
/// `direct`, `sync_writes`, `dontneed_every`, and whether any file is a null device): with
/// 1024 jobs a job's state has left the cache by its next I/O, and each of those fields read
/// in the spec, over its many cache lines, was a miss of its own.
struct SimJob {
    flow: FlowId,
    group: GroupId,
    /// `ioengine=null`: no I/O reaches the device.
    null_engine: bool,
    /// `direct`: I/O bypasses the page cache.
    direct: bool,
    /// `sync` (O_SYNC writes).
    sync_writes: bool,
    /// Some file is `/dev/null` or `/dev/zero` ([`SimJob::null_files`]).
    any_null_file: bool,
    /// `fadvise_hint` advice every so many bytes (`dontneed_every`).
    dontneed_every: Option<u64>,
    /// Its files' places on the device.
    regions: Vec<Region>,
    /// Bytes issued since its last `dontneed_every` advice.
    since_dontneed: u64,
    /// Bytes of one loop over its files, and bytes issued in the current loop: fio closes
    /// and reopens a job's files between loops (`clear_io_state`).
    loop_bytes: u64,
    since_open: u64,
    /// The file (index in `regions`) it wrote last, and per file the device pages its writes
    /// covered since that file's last sync_file_range (fio's `first_write`, `last_write`;
    /// counted at issue, where fio counts at completion: the same with a synchronous
    /// engine).
    last_write_file: usize,
    written: Vec<Option<(u64, u64)>>,
    /// fio's `verify`, when the job asked for it (boxed: most jobs do not, and the state
    /// every I/O reads stays in two cache lines).
    verify: Option<Box<verify::JobVerify>>,
    /// Per file: whether it is `/dev/null` or `/dev/zero`, whose I/O is a system call that
    /// touches no device (fio's steadystate.fio writes to one and reads the other).
    null_files: Vec<bool>,
}

impl SimJob {
    /// Its write of `len` bytes at device offset `offset` was issued.
    fn wrote(&mut self, offset: u64, len: u64) {
        let Some(file) = self
            .regions
            .iter()
            .position(|r| (r.start..r.start + r.len).contains(&offset))
        else {
            return;
        };
        self.last_write_file = file;
        let (first, last) = (offset / PAGE, (offset + len - 1) / PAGE);
        let range = &mut self.written[file];
        *range = Some(range.map_or((first, last), |(a, b)| (a.min(first), b.max(last))));
    }
}

/// A simulation in progress.
pub struct Simulation {
    now: Nanos,
    events: EventQueue<Event>,
    elevator: Elevator,
    device: Box<dyn Device>,
    jobs: Vec<JobState>,
    own: Vec<SimJob>,
    ios: IoTable,
    /// Submitters waiting for a free scheduler request (`nr_requests`, or the policy's
    /// `limit_depth`).
    blocked: Waiters,
    next_request_id: u64,
    device_wake: Option<Nanos>,
    device_generation: u64,
    policy_wake: Option<Nanos>,
    policy_generation: u64,
    done: Vec<(Nanos, Request)>,
    disk: DiskAccounting,
    seed: u64,
    time_limit: Nanos,
    progress: Option<Arc<AtomicU64>>,
    progress_done: Option<Arc<AtomicU64>>,
    /// What the device's blocks hold, when a job verifies (`verify`).
    contents: Option<verify::Contents>,
    /// Block-mapped files (`indirect_blocks`): the files' extents by start, the mapping
    /// blocks in the buffer cache, and the requests waiting for one being read.
    block_map: bool,
    files: Vec<Region>,
    map_cached: FxHashSet<MapBlock>,
    map_waiters: FxHashMap<MapBlock, Vec<Request>>,
    /// Events handled, for the progress stores.
    events_handled: u64,
    groups: Groups,
    notes: Vec<String>,
    /// Total original requests issued and completed, for the exactly-once invariant.
    issued_total: u64,
    completed_total: u64,
    dispatches: u64,
    trace: Option<Vec<TraceEntry>>,
    /// Completion to issuer delay (`wakeup_latency`).
    wakeup_latency: Nanos,
    /// Whether a completing job's state is asked of the CPU ahead ([`PREFETCH_FROM_JOBS`]).
    prefetch_jobs: bool,
    /// Completed device requests whose issuers have not yet been told, by carrier id: the
    /// operation, the requests merged into the carrier, and the error.
    notifications: FxHashMap<u64, (Op, Vec<RequestId>, Option<i32>)>,
    /// The host's page cache, read-ahead state per (job, file), and the buffered reads
    /// waiting for pages (by an id of their own), with who waits for each page.
    cache: PageCache,
    read_ahead: FxHashMap<(usize, usize), RaState>,
    read_ahead_pages: u64,
    io_pages: u64,
    cache_reads: FxHashMap<u64, CacheRead>,
    page_waiters: FxHashMap<u64, Vec<u64>>,
    next_cache_read: u64,
    cache_hits: u64,
    cache_waits: u64,
    cache_misses: u64,
    read_ahead_bytes: u64,
    /// Writeback: the host's settings, whether buffered writes use the cache, whether each
    /// cgroup has its own context, the contexts (by cgroup index, or 0), and where each dirty
    /// page is dirty (context, inode).
    wb_settings: writeback::Settings,
    writeback_on: bool,
    cgroup_writeback: bool,
    page_ioprio: bool,
    /// Whether fsync's and O_SYNC's writeback is REQ_SYNC (`sync_write_flag`).
    sync_write_flag: bool,
    /// Whether O_DIRECT writes are REQ_SYNC (`direct_write_sync`).
    direct_write_sync: bool,
    wbs: BTreeMap<u32, Wb>,
    dirty_at: FxHashMap<u64, Dirt>,
    /// Pages under writeback, in order (fsync waits for those of its files).
    under_writeback: BTreeSet<u64>,
    /// Flushers and throttled tasks writing pages back.
    writers: Vec<Writer>,
    /// fsyncs and O_SYNC writes waiting for pages, and who waits for each page.
    syncs: FxHashMap<u64, SyncWait>,
    /// Per job: its sync_file_range calls (sync ids) that return once the task has submitted
    /// their writes (SYNC_FILE_RANGE_WRITE without WAIT_AFTER).
    range_submits: FxHashMap<usize, Vec<u64>>,
    sync_waiters: FxHashMap<u64, Vec<(u64, bool)>>,
    next_sync: u64,
    /// Per job: balance_dirty_pages state.
    throttles: Vec<JobThrottle>,
    /// Per context: buffered writers in it (the proportional throttle shares its rate).
    dirtiers: BTreeMap<u32, u64>,
    /// 2.6.x `bdi->dirty_exceeded`, and pages all tasks dirtied lately (halved with each
    /// task's every dirty limit's worth: the period of `vm_dirties`).
    dirty_exceeded: bool,
    recent_dirtied: u64,
    kupdate_pending: bool,
    /// Per context: periodic writeback's cutoff while it runs.
    kupdate: BTreeMap<u32, Nanos>,
    /// For the "no dirty page lost" property: per page written, (latest version, version on
    /// the device), and the version each page under writeback carries.
    versions: Option<FxHashMap<u64, (u64, u64)>>,
    carried: FxHashMap<u64, u64>,
    wb_counters: WbCounters,
}

/// Where a dirty page is dirty: its context, its inode, and the job that dirtied it.
#[derive(Clone, Copy, Debug)]
struct Dirt {
    wb: u32,
    inode: u64,
    job: usize,
}

/// A context writing dirty pages back: a flusher, or a task throttled by 2.6.x
/// balance_dirty_pages writing out a chunk itself.
#[derive(Clone, Debug)]
struct Writer {
    /// The context it takes pages from.
    wb: u32,
    flow: FlowId,
    group: GroupId,
    prio: IoPrio,
    /// The job it writes for; None for a flusher.
    job: Option<usize>,
    /// What it is: a flusher, a throttled task writing out, or a task writing given pages
    /// (fsync, O_SYNC, fadvise DONTNEED).
    kind: WriterKind,
    /// Pages it may still take (a throttled task's `nr_to_write`; a flusher's is unbounded).
    budget: u64,
    /// Pages taken but not yet issued, in order, with the job that dirtied each and whether
    /// the write is synchronous.
    pending: VecDeque<(u64, usize, bool)>,
    /// Its last request, until the elevator takes it: a writer blocks in request allocation.
    waiting: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriterKind {
    Flusher,
    Throttle,
    Task,
}

/// An fsync or O_SYNC write waiting for pages to reach the device, then its flush.
#[derive(Clone, Copy, Debug)]
struct SyncWait {
    /// What the job counts when the flush completes (the fsync, or the O_SYNC write).
    issued: Issued,
    /// Pages not yet on the device.
    pending: u64,
    job: usize,
    /// Whether a cache flush follows its pages (fsync, O_SYNC), or it completes with them
    /// (sync_file_range).
    flush: bool,
}

/// A job's state in balance_dirty_pages.
#[derive(Clone, Copy, Debug, Default)]
struct JobThrottle {
    /// Pages it dirtied since it last entered balance_dirty_pages (or paused).
    dirtied: u64,
    /// Pages it dirtied lately (halved every period), for 2.6.x `task_dirty_limit`.
    recent: u64,
    /// The write held until the throttle lets it go (its `cache_reads` id).
    held: Option<u64>,
    /// 2.6.x: pages it wrote out in this balance, whether it is writing now, and its
    /// congestion_wait's generation (the wait ends at a completion or a timeout).
    written: u64,
    writing: bool,
    congestion: Option<u64>,
    /// The I/O it issues once its fadvise's writes are submitted.
    deferred: Option<(NextIo, IoPrio)>,
}

#[derive(Clone, Copy, Debug, Default)]
struct WbCounters {
    pages_dirtied: u64,
    pages_written_back: u64,
    flusher_pages: u64,
    task_writeout_pages: u64,
    sync_pages: u64,
    throttle_pauses: u64,
    congestion_waits: u64,
    throttle_ns: u64,
}

/// One request's life, recorded when tracing (for tests of the exactly-once and ordering
/// properties).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// The original request.
    pub id: RequestId,
    /// Its direction.
    pub op: Op,
    /// When it entered the scheduler.
    pub admitted: Nanos,
    /// When the request that carried it was dispatched.
    pub dispatched: Nanos,
    /// Position of that dispatch among all dispatches of the run (0, 1, 2, ...).
    pub dispatch_order: u64,
    /// When it completed.
    pub completed: Nanos,
    /// The id of the request that carried it to the device (itself unless merged).
    pub carrier: RequestId,
    /// The job that issued it: its index in the job file (clones counted), so that a test can
    /// judge each request by its job's priority, group and direction.
    pub job: u32,
    /// Whether it was synchronous to the scheduler (REQ_SYNC): reads, O_DIRECT writes
    /// (`direct_write_sync`), fsync's and O_SYNC's writeback (`sync_write_flag`).
    pub sync: bool,
}

impl Simulation {
    /// Prepares a run of `file`'s jobs under `config`.
    pub fn new(config: &SimConfig, file: &JobFile) -> Result<Self, SimError> {
        if file.jobs.is_empty() {
            return Err(SimError::new("the job file defines no jobs"));
        }
        // A job that replays a trace takes its files, directions and sizes from it; the trace
        // is read once here, so a malformed one is refused before anything runs.
        let prepared;
        let file = if file.jobs.iter().any(|spec| spec.replay.is_some()) {
            let mut copy = file.clone();
            for spec in &mut copy.jobs {
                trace::replay::prepare(spec, false).map_err(|error| SimError::job(spec, &error))?;
            }
            prepared = copy;
            &prepared
        } else {
            file
        };
        // `partitions` is the disk's partition table, not a model's parameter: any device
        // takes it, and the layout places jobs by it.
        let (table, model_settings): (Vec<_>, Vec<_>) = config
            .device_settings
            .iter()
            .cloned()
            .partition(|(name, _)| name == "partitions");
        let device = device::build(
            &config.device,
            &model_settings,
            derive_seed(config.seed, DEVICE_STREAM),
        )
        .map_err(|e| SimError::new(e.to_string()))?;
        let partitions = match table.last() {
            Some((_, value)) => layout::parse_partitions(value, device.capacity())?,
            None => Vec::new(),
        };
        let stack =
            policies::Stack::parse(&config.policy).map_err(|e| SimError::new(e.to_string()))?;
        let nr_requests = iosched_core::elevator::default_nr_requests(device.queue_depth());
        let mut elevator = stack.elevator(nr_requests);
        // The host's own tunables (wakeup_latency) are the simulator's; the rest go to the
        // queue, the stage and the policy (`POLICY.NAME` and `STAGE.NAME` scoped to them).
        let mut host: Vec<u64> = HOST_TUNABLES.iter().map(|spec| spec.default).collect();
        let mut settings = Vec::with_capacity(config.policy_settings.len());
        for (name, value) in &config.policy_settings {
            if let Ok(spec) = iosched_core::tunable::find(HOST_TUNABLES, name) {
                let value = spec
                    .parse(value)
                    .map_err(|e| SimError::new(e.to_string()))?;
                host[host_tunable(spec.name)] = value;
            } else {
                settings.push((name.clone(), value.clone()));
            }
        }
        let wakeup_latency = host[host_tunable("wakeup_latency")] * 1_000;
        let mem_mib = host[host_tunable("mem")];
        // The device's driver may set its own (md RAID-0 does); a --set wins over both.
        let read_ahead_kb = match device.read_ahead_kb() {
            Some(kb)
                if !config
                    .policy_settings
                    .iter()
                    .any(|(n, _)| n == "read_ahead_kb") =>
            {
                kb
            }
            _ => host[host_tunable("read_ahead_kb")],
        };
        let (background_ratio, ratio) = (
            host[host_tunable("dirty_background_ratio")],
            host[host_tunable("dirty_ratio")],
        );
        if background_ratio >= ratio {
            return Err(SimError::new(format!(
                "dirty_background_ratio={background_ratio} must be below dirty_ratio={ratio}: \
                 background writeback starts before writers are throttled"
            )));
        }
        let cache_pages = mem_mib.saturating_mul(1 << 20) / PAGE;
        let wb_settings = writeback::Settings {
            dirtyable: cache_pages,
            background_ratio,
            ratio,
            expire: host[host_tunable("dirty_expire_centisecs")] * 10_000_000,
            interval: host[host_tunable("dirty_writeback_centisecs")] * 10_000_000,
            throttle: if host[host_tunable("dirty_throttle_legacy")] == 1 {
                Throttle::Legacy
            } else {
                Throttle::Proportional
            },
        };
        policies::apply_settings(&mut elevator, &settings)
            .map_err(|e| SimError::new(e.to_string()))?;
        // bdi->io_pages: the largest request, max_sectors_kb.
        let max_sectors_pages = (elevator.get("max_sectors_kb").unwrap_or(1280) / 4).max(1);
        let layout: Layout = layout::plan(&file.jobs, device.capacity(), &partitions)?;
        let mut groups = Groups::new();
        let mut zoned = ZbdRegistry::new();
        let mut jobs = Vec::with_capacity(file.jobs.len());
        let mut own = Vec::with_capacity(file.jobs.len());
        for (index, spec) in file.jobs.iter().enumerate() {
            let (mut job, sim) =
                Self::job_run(config.seed, index, spec, &layout, &mut groups, &mut zoned)?;
            if !config.charts {
                job.result.drop_charts();
            }
            jobs.push(job);
            own.push(sim);
        }
        groups
            .apply(&config.group_settings)
            .map_err(SimError::new)?;
        elevator.set_groups(&groups);
        let mut notes: Vec<String> = file.notes.iter().map(|n| n.to_string()).collect();
        notes.extend(iosched_fio::driver::apply_qos(
            &mut elevator,
            &file.jobs,
            &groups,
        ));
        for spec in &file.jobs {
            let Some(verify) = &spec.verify else {
                continue;
            };
            if matches!(spec.rw, RwMode::TrimWrite | RwMode::RandTrimWrite) {
                return Err(SimError::new(format!(
                    "{}: verify={}: refused: verifying a job that trims (rw={}) is not \
                     supported: trimmed blocks read back as zeroes or stale data, which fio's \
                     trim_verify_zero covers and iosched does not",
                    verify.location,
                    verify.method,
                    spec.rw.name()
                )));
            }
        }
        let contents = file
            .jobs
            .iter()
            .any(|spec| spec.verify.is_some())
            .then(verify::Contents::default);
        let writeback_on = host[host_tunable("writeback")] == 1;
        let cgroup_writeback = host[host_tunable("cgroup_writeback")] == 1;
        let mut dirtiers = BTreeMap::new();
        for (run, sim) in jobs.iter().zip(&own) {
            if run.spec.writes() && !run.spec.direct {
                let wb = if cgroup_writeback { sim.group.0 } else { 0 };
                *dirtiers.entry(wb).or_insert(0) += 1;
            }
        }
        let throttles = vec![JobThrottle::default(); jobs.len()];
        let time_limit = config.time_limit.min(limits::SIMULATED_TIME_MAX);
        let planned: Vec<(&JobSpec, Option<u64>)> = jobs
            .iter()
            .map(|run| (&run.spec, run.bytes_limit()))
            .collect();
        horizon::check(&planned, time_limit)?;
        // Logs open last, once nothing else can refuse the run: a refused run leaves none.
        if config.write_logs {
            trace::write::check_iolog_names(jobs.iter().map(|run| &run.spec))
                .map_err(SimError::new)?;
            for (index, run) in jobs.iter_mut().enumerate() {
                run.result
                    .open_logs(&run.spec)
                    .map_err(|error| SimError::job(&run.spec, &error))?;
                if let Some(path) = &run.spec.write_iolog {
                    let files = run
                        .spec
                        .filenames
                        .iter()
                        .cloned()
                        .zip(layout.job_extents[index].iter().map(|extent| extent.start))
                        .collect();
                    run.result.iolog = Some(
                        trace::IologStream::open(path, files)
                            .map_err(|error| SimError::job(&run.spec, &error))?,
                    );
                }
            }
        }
        Ok(Simulation {
            now: 0,
            events: EventQueue::new(),
            elevator,
            device,
            jobs,
            own,
            ios: IoTable::default(),
            blocked: Waiters::new(),
            next_request_id: 0,
            device_wake: None,
            device_generation: 0,
            policy_wake: None,
            policy_generation: 0,
            done: Vec::new(),
            disk: DiskAccounting::new(),
            seed: config.seed,
            time_limit,
            progress: config.progress.clone(),
            progress_done: config.progress_done.clone(),
            contents,
            block_map: host[host_tunable("indirect_blocks")] == 1,
            files: {
                let mut files: Vec<Region> = layout.files.iter().map(|(_, r)| *r).collect();
                files.sort_by_key(|r| r.start);
                files
            },
            map_cached: FxHashSet::default(),
            map_waiters: FxHashMap::default(),
            events_handled: 0,
            groups,
            notes,
            issued_total: 0,
            completed_total: 0,
            dispatches: 0,
            trace: None,
            wakeup_latency,
            prefetch_jobs: file.jobs.len() > PREFETCH_FROM_JOBS,
            notifications: FxHashMap::default(),
            cache: PageCache::new(cache_pages),
            read_ahead: FxHashMap::default(),
            read_ahead_pages: read_ahead_kb / 4,
            io_pages: max_sectors_pages,
            cache_reads: FxHashMap::default(),
            page_waiters: FxHashMap::default(),
            next_cache_read: 0,
            cache_hits: 0,
            cache_waits: 0,
            cache_misses: 0,
            read_ahead_bytes: 0,
            wb_settings,
            writeback_on,
            cgroup_writeback,
            page_ioprio: host[host_tunable("page_ioprio")] == 1,
            sync_write_flag: host[host_tunable("sync_write_flag")] == 1,
            direct_write_sync: host[host_tunable("direct_write_sync")] == 1,
            wbs: BTreeMap::new(),
            dirty_at: FxHashMap::default(),
            under_writeback: BTreeSet::new(),
            writers: Vec::new(),
            syncs: FxHashMap::default(),
            range_submits: FxHashMap::default(),
            sync_waiters: FxHashMap::default(),
            next_sync: 0,
            throttles,
            dirtiers,
            dirty_exceeded: false,
            recent_dirtied: 0,
            kupdate_pending: false,
            kupdate: BTreeMap::new(),
            versions: None,
            carried: FxHashMap::default(),
            wb_counters: WbCounters::default(),
        })
    }

    fn job_run(
        seed: u64,
        index: usize,
        spec: &JobSpec,
        layout: &Layout,
        groups: &mut Groups,
        zoned: &mut ZbdRegistry,
    ) -> Result<(JobState, SimJob), SimError> {
        let mut regions = layout.job_regions[index].clone();
        // zonemode=zbd: zones emulated over each file, shared by the jobs naming it; a
        // writer's regions are rounded to whole zones.
        let zone_files: Vec<ZbdFile<'_>> = spec
            .filenames
            .iter()
            .zip(&layout.job_extents[index])
            .map(|(name, extent)| ZbdFile {
                name,
                base: extent.start,
                size: extent.len,
            })
            .collect();
        let zbd = zoned
            .attach(index, spec, &zone_files, &mut regions)
            .map_err(|message| SimError::job(spec, &message))?;
        let regions = &regions[..];
        if spec.time_based && spec.runtime.is_none() {
            return Err(SimError::job(spec, "time_based needs a runtime"));
        }
        if spec.direct {
            // O_DIRECT needs whole logical blocks: Linux refuses anything else with EINVAL.
            let sizes = spec.bs.iter().flat_map(|bs| match bs {
                BlockSize::Split(parts) => parts.iter().map(|p| p.0).collect::<Vec<_>>(),
                other => vec![other.min(), other.max()],
            });
            if let Some(size) = sizes
                .chain(spec.blockalign)
                .find(|size| size % LOGICAL_BLOCK != 0)
            {
                return Err(SimError::job(
                    spec,
                    &format!(
                        "direct=1 needs block sizes and alignment in whole {LOGICAL_BLOCK}-byte \
                         logical blocks, but {size} bytes is not (Linux answers EINVAL)"
                    ),
                ));
            }
        }
        let group = groups
            .intern(&spec.cgroup)
            .map_err(|e| SimError::job(spec, &e.to_string()))?;
        let stream_seed = match spec.randseed {
            Some(randseed) => derive_seed(randseed, u64::from(spec.clone)),
            None => derive_seed(seed, index as u64),
        };
        let region_bytes: u64 = regions.iter().map(|r| r.len).sum();
        let generator = Generator::new(spec, regions, Rng::new(stream_seed));
        let mut state = JobState::new(spec.clone(), index, seed, generator, region_bytes);
        state.zbd = zbd.map(Box::new);
        if let Some(replay) = &spec.replay {
            let files = spec
                .filenames
                .iter()
                .zip(&layout.job_extents[index])
                .map(|(name, extent)| (name.clone(), extent.start, extent.len))
                .collect();
            state.replay = Some(Box::new(
                trace::Replay::open(replay, files)
                    .map_err(|error| SimError::job(spec, &format!("read_iolog: {error}")))?,
            ));
        }
        let null_files: Vec<bool> = spec
            .filenames
            .iter()
            .map(|name| matches!(name.as_str(), "/dev/null" | "/dev/zero"))
            .collect();
        Ok((
            state,
            SimJob {
                flow: FlowId(index as u32),
                group,
                null_engine: spec.engine.is_null(),
                direct: spec.direct,
                sync_writes: spec.sync_writes,
                any_null_file: null_files.contains(&true),
                dontneed_every: spec.dontneed_every,
                regions: regions.to_vec(),
                since_dontneed: 0,
                loop_bytes: region_bytes,
                since_open: 0,
                last_write_file: 0,
                written: vec![None; regions.len()],
                null_files,
                verify: spec.verify.as_ref().map(|verify| {
                    Box::new(verify::JobVerify::new(
                        &verify.method,
                        verify.do_verify && spec.writes(),
                        derive_seed(stream_seed, VERIFY_STREAM),
                    ))
                }),
            },
        ))
    }

    /// Records every request's life for inspection with [`Simulation::trace`].
    pub fn enable_trace(&mut self) {
        self.trace = Some(Vec::new());
    }

    /// The recorded trace (empty unless enabled).
    pub fn trace(&self) -> &[TraceEntry] {
        self.trace.as_deref().unwrap_or(&[])
    }

    /// The group table built from the jobs' `cgroup` options.
    pub fn groups(&self) -> &Groups {
        &self.groups
    }

    /// Original requests issued and completed so far.
    pub fn request_totals(&self) -> (u64, u64) {
        (self.issued_total, self.completed_total)
    }

    /// Runs to the end and reports.
    pub fn run(&mut self) -> Result<RunReport, SimError> {
        driver::start_all(self, 0);
        while let Some((time, event)) = self.events.pop() {
            debug_assert!(time >= self.now, "time went backwards");
            if time > self.time_limit {
                return Err(self.runaway());
            }
            self.now = time;
            self.events_handled += 1;
            if self.events_handled.is_multiple_of(PROGRESS_EVERY) {
                if let Some(progress) = &self.progress {
                    progress.store(time, Ordering::Relaxed);
                }
                if let Some(done) = &self.progress_done {
                    let jobs = self.jobs.len().max(1) as f64;
                    let sum: f64 = self.jobs.iter().map(|job| job.done_fraction(time)).sum();
                    done.store((sum / jobs * 1e6) as u64, Ordering::Relaxed);
                }
            }
            match event {
                Event::Notify(carrier) => {
                    let (op, merged, error) = self
                        .notifications
                        .remove(&carrier)
                        .expect("each completion is notified once");
                    let carrier = RequestId(carrier);
                    for id in std::iter::once(carrier).chain(merged) {
                        self.finish_io(id, carrier, op, time, error);
                    }
                }
                Event::CacheDone(id) => self.cache_done(id, time),
                Event::JobStart(job) => {
                    self.open_files(job as usize);
                    driver::start(self, job as usize, time)
                }
                Event::JobWake(job) => driver::wake(self, job as usize, time),
                Event::JobDeadline(job) => driver::deadline(self, job as usize, time),
                Event::Device(generation) => {
                    if generation != self.device_generation {
                        continue;
                    }
                    self.device_wake = None;
                }
                Event::PolicyWake(generation) => {
                    if generation != self.policy_generation {
                        continue;
                    }
                    self.policy_wake = None;
                }
                Event::Kupdate => self.kupdate_tick(),
                Event::Congestion(job, generation) => {
                    self.congestion_timeout(job as usize, generation)
                }
            }
            self.settle();
        }
        if let Some(run) = self.jobs.iter().find(|run| run.phase != Phase::Done) {
            // Nothing left to happen and a job not done: a bug, reported rather than a
            // report that silently lacks the job's end.
            return Err(SimError::new(format!(
                "{}: job {:?} never finished: nothing was left to happen with it in phase {:?} \
                 and {} I/O(s) in flight (a simulator bug; please report it with the job file)",
                run.spec.location, run.spec.name, run.phase, run.in_flight
            )));
        }
        assert_eq!(self.elevator.queued(), 0, "requests left in the scheduler");
        assert_eq!(self.device.in_flight(), 0, "commands left in the device");
        assert!(self.blocked.is_empty(), "submitters left waiting");
        assert_eq!(
            self.issued_total, self.completed_total,
            "a request was lost or duplicated"
        );
        assert!(self.ios.is_empty());
        Ok(self.report())
    }

    /// The error of a run that reached the time limit: what each unfinished job has done and
    /// what it is waiting for, so the user can tell which option to change.
    fn runaway(&self) -> SimError {
        let mut lines = Vec::new();
        for run in self.jobs.iter().filter(|run| run.phase != Phase::Done) {
            let progress = match run.bytes_limit() {
                Some(limit) => format!("{} of {limit} bytes issued", run.bytes_issued()),
                None => format!("{} bytes issued", run.bytes_issued()),
            };
            let waiting = match run.phase {
                Phase::Pending => "waiting to start (stonewall or startdelay)".to_string(),
                Phase::Draining => format!("waiting for {} I/O(s) in flight", run.in_flight),
                _ if run.thinking_until.is_some() => {
                    format!(
                        "in a thinktime={} stall",
                        horizon::seconds(run.spec.thinktime)
                    )
                }
                _ if run.wake_at.is_some() => "held back by its rate= or rate_iops= cap".into(),
                _ => format!("{} I/O(s) in flight", run.in_flight),
            };
            let (least, why) = horizon::least_duration(&run.spec, run.bytes_limit());
            let need = if why.is_empty() {
                String::new()
            } else {
                format!("; it needs at least {} ({why})", horizon::seconds(least))
            };
            lines.push(format!(
                "{}: job {:?}: {progress}, {waiting}{need}",
                run.spec.location, run.spec.name
            ));
        }
        SimError::new(format!(
            "the run reached the simulator's limit of {} ({} s) of simulated time without \
             finishing; the device served {} of {} requests. Unfinished:\n  {}\nSet a \
             runtime= below the limit, or a smaller size= or io_size=",
            horizon::seconds(self.time_limit),
            self.time_limit / SECOND,
            self.completed_total,
            self.issued_total,
            lines.join("\n  ")
        ))
    }

    fn new_request(
        &mut self,
        index: usize,
        op: Op,
        offset: u64,
        len: u64,
        sync: bool,
        prio: IoPrio,
    ) -> Request {
        let id = RequestId(self.next_request_id);
        self.next_request_id += 1;
        let own = &self.own[index];
        // io.prio.class of the job's group may change the priority (blk-ioprio).
        let prio = self.groups.settings(own.group).prio_class.apply(prio);
        Request::new(
            id, op, offset, len, sync, prio, own.flow, own.group, self.now,
        )
    }

    /// Completes an I/O or sync of a `null`-engine job [`NULL_IO_NS`] from now, touching
    /// neither the page cache nor the device (fio's engines/null.c); it goes the way of a
    /// page cache hit without being counted as one.
    fn complete_null(&mut self, issued: Issued, cost: Nanos) {
        let id = self.copy_record(issued);
        self.events.push(self.now + cost, Event::CacheDone(id));
    }

    /// An I/O completed without error: a write changes what its blocks hold, and a read of a
    /// verifying job checks them ([`verify`]). A failed check is the job's error (EILSEQ, as
    /// fio's), after which it goes on checking, as fio with `verify_fatal=0`.
    fn verify_completed(&mut self, issued: &Issued) {
        let Some(contents) = &mut self.contents else {
            return;
        };
        if issued.flush {
            return;
        }
        let job = issued.job;
        match issued.dir {
            DataDir::Write => {
                let seed = self.own[job]
                    .verify
                    .as_mut()
                    .and_then(|state| state.in_flight.remove(&(issued.offset, issued.created)));
                contents.write(issued.offset, issued.bytes, seed);
            }
            DataDir::Trim => contents.write(issued.offset, issued.bytes, None),
            DataDir::Read => {
                let mixed = matches!(
                    self.jobs[job].spec.rw,
                    RwMode::ReadWrite | RwMode::RandReadWrite
                );
                let Some(state) = &mut self.own[job].verify else {
                    return;
                };
                if mixed && !state.started {
                    // A mixed job's own reads are not checked: fio verifies what it reads back
                    // of its logged writes, not the workload's reads (of blocks perhaps never
                    // written).
                    return;
                }
                let expected = if state.started {
                    state.written.get(&issued.offset).map(|&(_, seed)| seed)
                } else {
                    None
                };
                state.checked += 1;
                let Err(what) = contents.check(issued.offset, issued.bytes, expected) else {
                    return;
                };
                state.failures += 1;
                let method = state.method.clone();
                let run = &mut self.jobs[job];
                if run.result.error == 0 {
                    run.result.error = EILSEQ;
                    run.result.error_message = Some(format!(
                        "{}: verify={method} failed for the {}-byte block at device offset {}: \
                         {what}",
                        run.spec.name, issued.bytes, issued.offset
                    ));
                }
            }
        }
    }

    /// Issues the read-back of what job `index` wrote (`do_verify`), and ends the job when
    /// every block is checked.
    fn pump_verify(&mut self, index: usize) {
        loop {
            let (run, own) = (&mut self.jobs[index], &mut self.own[index]);
            let Some(state) = own.verify.as_mut() else {
                return;
            };
            match driver::read_back_step(run, state.next < state.queue.len()) {
                driver::ReadBack::Wait => return,
                driver::ReadBack::Finished => return driver::finish(self, index, self.now),
                driver::ReadBack::Issue => {}
            }
            let (offset, (len, _)) = state.queue[state.next];
            state.next += 1;
            let file = own
                .regions
                .iter()
                .position(|r| (r.start..r.end()).contains(&offset))
                .unwrap_or(0);
            let prio = self.job_prio(index);
            let io = NextIo {
                dir: DataDir::Read,
                offset,
                len,
                file,
            };
            self.submit_io(index, io, prio);
        }
    }

    /// Submits `io` of job `index` with `prio` (the driver has counted it).
    fn submit_io(&mut self, index: usize, io: NextIo, prio: IoPrio) {
        if io.dir == DataDir::Write {
            if let Some(state) = &mut self.own[index].verify {
                state.writes += 1;
                let seed = iosched_fio::random::mix64(state.seed ^ state.writes);
                state.written.insert(io.offset, (io.len, seed));
                state.in_flight.insert((io.offset, self.now), seed);
            }
        }
        let own = &self.own[index];
        if own.null_engine {
            self.complete_null(Issued::io(index, &io, prio, self.now), NULL_IO_NS);
            return;
        }
        if own.any_null_file && own.null_files.get(io.file) == Some(&true) {
            let cost = dev_null_cost(io.dir, io.len);
            self.complete_null(Issued::io(index, &io, prio, self.now), cost);
            return;
        }
        let own = &mut self.own[index];
        if own.loop_bytes > 0 && own.since_open >= own.loop_bytes {
            own.since_open = 0;
            self.reopen_files(index);
        }
        self.own[index].since_open += io.len;
        if io.dir == DataDir::Write && io.len > 0 {
            self.own[index].wrote(io.offset, io.len);
        }
        if let Some(every) = self.own[index].dontneed_every {
            let own = &mut self.own[index];
            own.since_dontneed += io.len;
            if own.since_dontneed >= every {
                own.since_dontneed = 0;
                if self.fadvise_dontneed(index) {
                    // The task submits the writes before its I/O (fadvise returns first).
                    self.throttles[index].deferred = Some((io, prio));
                    return;
                }
            }
        }
        self.submit_io_now(index, io, prio);
    }

    /// Submits `io` of job `index` (its `dontneed_every` advice, if due, is given).
    fn submit_io_now(&mut self, index: usize, io: NextIo, prio: IoPrio) {
        let own = &self.own[index];
        let (direct, sync_writes) = (own.direct, own.sync_writes);
        if io.dir == DataDir::Read && !direct {
            self.buffered_read(index, io, prio);
            return;
        }
        if io.dir == DataDir::Write && io.len > 0 && self.writes_buffered(index) {
            self.buffered_write(index, io, prio);
            return;
        }
        if io.dir != DataDir::Read && io.len > 0 && !self.cache.is_empty() {
            // A direct write or trim makes the cached copy stale (kiocb_invalidate_pages);
            // so do buffered writes when they bypass the cache (writeback=0).
            self.direct_write_over(io.offset / PAGE, (io.offset + io.len - 1) / PAGE);
        }
        let fua = io.dir == DataDir::Write && sync_writes;
        let (op, sync) = match io.dir {
            DataDir::Read => (Op::Read, true),
            // O_DIRECT writes are synchronous (fs/direct-io.c: PF_SYNCWRITE in 2.6.18,
            // WRITE_SYNC from 2.6.19, REQ_SYNC|REQ_IDLE today); an O_SYNC write issued
            // directly (writeback=0) is as fsync's writeback; buffered writeback is not.
            DataDir::Write => (
                Op::Write,
                if direct {
                    self.direct_write_sync
                } else {
                    sync_writes && self.sync_write_flag
                },
            ),
            DataDir::Trim => (Op::Discard, true),
        };
        let mut request = self.new_request(index, op, io.offset, io.len, sync, prio);
        // O_SYNC writes go to the device with FUA, as direct O_DSYNC writes to a block device
        // do (block/fops.c, `dio_bio_write_op`). Buffered ones are written back and flushed
        // (`dirty::buffered_write`), or with writeback=0 issued directly, so FUA too.
        request.fua = fua;
        let record = Io::new(Issued::io(index, &io, request.prio, self.now), request.sync);
        self.ios.insert(request.id.0, record);
        self.issued_total += 1;
        self.submit_mapped(request);
    }

    /// Submits `request` once the indirect blocks its data needs are in the buffer cache
    /// (`indirect_blocks`, fs/ext3/inode.c `ext3_get_branch`): the first one missing is read
    /// now, as a synchronous 4 KiB read of the request's own job, and the request waits for
    /// it; when it comes, the request is offered again (the next block of the chain, or the
    /// elevator).
    fn submit_mapped(&mut self, request: Request) {
        let missing = if self.block_map && matches!(request.op, Op::Read | Op::Write) {
            self.missing_map_block(request.offset, request.len)
        } else {
            None
        };
        let Some(block) = missing else {
            self.submit(request);
            return;
        };
        let job = self.ios[&request.id.0].issued.job;
        let waiting = self.map_waiters.contains_key(&block);
        self.map_waiters.entry(block).or_default().push(request);
        if waiting {
            return;
        }
        let prio = self.ios[&self.map_waiters[&block][0].id.0].issued.prio;
        let read = self.new_request(job, Op::Read, block.offset(), blockmap::BLOCK, true, prio);
        let issued = Issued {
            job,
            dir: DataDir::Read,
            flush: false,
            bytes: blockmap::BLOCK,
            offset: block.offset(),
            file: 0,
            prio: read.prio,
            created: self.now,
            admitted: self.now,
        };
        self.ios.insert(
            read.id.0,
            Io {
                map: Some(block),
                ..Io::new(issued, true)
            },
        );
        self.issued_total += 1;
        self.submit(read);
    }

    /// The first indirect block bytes `[offset, offset + len)` of the device need that is
    /// not in the buffer cache, if they lie in a file.
    fn missing_map_block(&self, offset: u64, len: u64) -> Option<MapBlock> {
        let at = self.files.partition_point(|r| r.start <= offset);
        let file = self.files[..at].last().filter(|r| offset < r.end())?;
        let cached = &self.map_cached;
        blockmap::first_missing(file.start, offset, len, |m| cached.contains(m))
    }

    /// The read of indirect block `block` finished at `at` (with `error`): it is in the
    /// buffer cache, and the requests waiting for it go on; if it failed, they fail with its
    /// error, as `ext3_get_block` returns it.
    fn map_block_read(&mut self, block: MapBlock, at: Nanos, error: Option<i32>) {
        if error.is_none() {
            self.map_cached.insert(block);
        }
        for request in self.map_waiters.remove(&block).unwrap_or_default() {
            match error {
                None => self.submit_mapped(request),
                Some(_) => self.finish_io(request.id, request.id, request.op, at, error),
            }
        }
    }

    /// A buffered read (`filemap_read`): the pages it misses are read into the page cache,
    /// with read-ahead, and it completes when all of its pages are up to date, at memory
    /// speed after that.
    fn buffered_read(&mut self, index: usize, io: NextIo, prio: IoPrio) {
        let first = io.offset / PAGE;
        let last = (io.offset + io.len.max(1) - 1) / PAGE;
        let region = self.own[index].regions[io.file];
        let file_first = region.start / PAGE;
        let file_last = (region.start + region.len.max(1) - 1) / PAGE;
        let (read_ahead_pages, io_pages) = (self.read_ahead_pages, self.io_pages);
        let advice = match self.jobs[index].spec.fadvise {
            Some(Fadvise::Sequential) => Advice::Sequential,
            Some(Fadvise::Random) => Advice::Random,
            _ => Advice::Normal,
        };
        let key = (index, io.file);
        let mut ra = self
            .read_ahead
            .remove(&key)
            .unwrap_or_else(|| RaState::new(read_ahead_pages, io_pages, advice));
        // filemap_get_pages, page by page, in the file's own page numbers (read-ahead starts
        // at the file's start).
        let mut missed = false;
        for page in first..=last {
            let wanted = last - page + 1;
            if !self.cache.contains(page) {
                missed = true;
                let cache = &self.cache;
                let window = ra.sync(page - file_first, wanted, file_last - file_first, |p| {
                    cache.contains(p + file_first)
                });
                if let Some(window) = window {
                    self.fill(index, window, file_first, prio, true);
                }
                if !self.cache.contains(page) {
                    // filemap_create_folio: the one page, read at once.
                    let one = Window {
                        start: page - file_first,
                        pages: 1,
                        mark: None,
                    };
                    self.fill(index, one, file_first, prio, true);
                }
            }
            if self.cache.get(page).is_some_and(|state| state.mark) {
                self.cache.clear_mark(page);
                let cache = &self.cache;
                let window = ra.on_mark(page - file_first, wanted, file_last - file_first, |p| {
                    cache.contains(p + file_first)
                });
                if let Some(window) = window {
                    self.fill(index, window, file_first, prio, false);
                }
            }
        }
        ra.read_done(io.offset + io.len - region.start);
        self.read_ahead.insert(key, ra);
        let id = self.next_cache_read;
        self.next_cache_read += 1;
        let mut missing = 0;
        for page in first..=last {
            self.cache.access(page);
            if !self.cache.get(page).is_some_and(|state| state.uptodate) {
                missing += 1;
                self.page_waiters.entry(page).or_default().push(id);
            }
        }
        if missed {
            self.cache_misses += 1;
        } else if missing > 0 {
            self.cache_waits += 1;
        } else {
            self.cache_hits += 1;
        }
        let issued = Issued::io(index, &io, prio, self.now);
        self.cache_reads.insert(
            id,
            CacheRead {
                issued,
                missing,
                error: None,
            },
        );
        if missing == 0 {
            let at = self.now + CACHE_HIT_NS + io.len / COPY_BYTES_PER_NS;
            self.events.push(at, Event::CacheDone(id));
        }
    }

    /// Reads `window` (in pages of the file starting at device page `file_first`) into the
    /// page cache for job `index`: each run of pages not cached becomes requests of at most
    /// `io_pages`, synchronous (the reader waits) or not (read-ahead past the reader).
    fn fill(&mut self, index: usize, window: Window, file_first: u64, prio: IoPrio, sync: bool) {
        let start = window.start + file_first;
        let end = start + window.pages;
        let mark = window.mark.map(|m| m + file_first);
        let mut page = start;
        while page < end {
            if self.cache.contains(page) {
                page += 1;
                continue;
            }
            let run_start = page;
            while page < end && page - run_start < self.io_pages && !self.cache.contains(page) {
                self.cache.add_locked(page, Some(page) == mark);
                page += 1;
            }
            let pages = page - run_start;
            // Every read is synchronous to the block layer (op_is_sync); read-ahead past the
            // reader is marked as such (REQ_RAHEAD).
            let mut request =
                self.new_request(index, Op::Read, run_start * PAGE, pages * PAGE, true, prio);
            request.readahead = !sync;
            let issued = Issued {
                job: index,
                dir: DataDir::Read,
                flush: false,
                bytes: pages * PAGE,
                offset: run_start * PAGE,
                file: 0,
                prio: request.prio,
                created: self.now,
                admitted: self.now,
            };
            self.ios.insert(
                request.id.0,
                Io {
                    fill: Some((run_start, pages)),
                    ..Io::new(issued, request.sync)
                },
            );
            if !sync {
                self.read_ahead_bytes += pages * PAGE;
            }
            self.issued_total += 1;
            self.submit_mapped(request);
        }
    }

    /// A read of pages `[first, first + pages)` into the cache finished at `at` (with
    /// `error`): they are up to date (or dropped), and the reads waiting for them go on.
    fn filled(&mut self, first: u64, pages: u64, at: Nanos, error: Option<i32>) {
        for page in first..first + pages {
            match error {
                None => self.cache.unlock(page),
                Some(_) => self.cache.discard(page),
            }
            for id in self.page_waiters.remove(&page).unwrap_or_default() {
                let read = self.cache_reads.get_mut(&id).expect("a waiting read");
                read.missing -= 1;
                read.error = read.error.or(error);
                if read.missing == 0 {
                    let copy = read.issued.bytes / COPY_BYTES_PER_NS;
                    self.events.push(at + copy, Event::CacheDone(id));
                }
            }
        }
    }

    /// Job `index` opens its files: fio's `pre_read` reads them into the page cache (here
    /// at once, before the job's clock starts, and only as much as the cache holds: the
    /// file's end), else `invalidate` drops their cached pages.
    fn open_files(&mut self, index: usize) {
        let spec = &self.jobs[index].spec;
        let (pre_read, invalidate) = (spec.pre_read, spec.invalidate);
        if spec.drop_caches.is_some_and(|n| n & 1 == 1) {
            // echo 1 > /proc/sys/vm/drop_caches: every clean, unlocked page goes, the
            // buffer cache's indirect blocks with them.
            self.cache.invalidate(0, u64::MAX);
            self.map_cached.clear();
        }
        for (first, last) in self.file_pages(index) {
            if pre_read {
                let from = last.saturating_sub(self.cache.capacity() - 1).max(first);
                for page in from..=last {
                    if self.cache.add_locked(page, false) {
                        self.cache.unlock(page);
                    }
                }
            } else if invalidate {
                self.cache.invalidate(first, last);
            }
        }
    }

    /// A new loop of job `index`: fio closes its files (`clear_io_state`) and opens them
    /// again (`td_io_open_file`), which drops their clean cached pages with `invalidate=1`
    /// (the default) and starts read-ahead afresh (a new open file).
    fn reopen_files(&mut self, index: usize) {
        if self.jobs[index].spec.invalidate {
            for (first, last) in self.file_pages(index) {
                self.cache.invalidate(first, last);
            }
        }
        self.read_ahead.retain(|&(job, _), _| job != index);
    }

    /// A buffered read has its pages: the job counts it.
    fn cache_done(&mut self, id: u64, at: Nanos) {
        let read = self
            .cache_reads
            .remove(&id)
            .expect("a cached read completes once");
        let job = &mut self.jobs[read.issued.job];
        match read.error {
            Some(errno) => {
                job.io_failed(read.issued.dir, errno);
            }
            None => {
                self.verify_completed(&read.issued);
                self.jobs[read.issued.job].record(&read.issued, at);
            }
        }
        driver::completed(self, &read.issued, at);
    }

    /// The pages `[first, last]` of each of job `index`'s files that are not empty; a file's
    /// first page is also its inode here.
    fn file_pages(&self, index: usize) -> Vec<(u64, u64)> {
        self.own[index]
            .regions
            .iter()
            .filter(|r| r.len > 0)
            .map(|r| (r.start / PAGE, (r.start + r.len - 1) / PAGE))
            .collect()
    }

    /// Job `index`'s own priority, as its cgroup's io.prio.class makes it (blk-ioprio).
    fn job_prio(&self, index: usize) -> IoPrio {
        let prio = self.jobs[index].spec.prio;
        self.groups
            .settings(self.own[index].group)
            .prio_class
            .apply(prio)
    }

    /// Submits a flush of job `index`.
    fn submit_flush(&mut self, index: usize) {
        let issued = Issued::flush(index, self.job_prio(index), self.now);
        self.submit_flush_for(index, issued);
    }

    /// Submits a flush of job `index` that completes `issued` (a flush, an fsync after its
    /// writeback, or an O_SYNC write).
    fn submit_flush_for(&mut self, index: usize, issued: Issued) {
        let request = self.new_request(index, Op::Flush, 0, 0, true, issued.prio);
        self.ios.insert(request.id.0, Io::new(issued, true));
        self.issued_total += 1;
        self.submit(request);
    }

    /// Offers a request to the elevator, behind the submitters already waiting
    /// ([`Waiters`]: each in order, none passing another when the queue is full).
    fn submit(&mut self, request: Request) {
        let (ios, disk) = (&mut self.ios, &mut self.disk);
        let now = self.now;
        self.blocked
            .submit(request, &mut self.elevator, now, |id, direction, how| {
                admitted(ios, disk, now, id, direction, how)
            });
    }

    /// Admits the waiting submitters the elevator takes now.
    fn admit_blocked(&mut self) {
        if self.blocked.is_empty() {
            return;
        }
        let (ios, disk) = (&mut self.ios, &mut self.disk);
        let now = self.now;
        self.blocked
            .admit(&mut self.elevator, now, |id, direction, how| {
                admitted(ios, disk, now, id, direction, how)
            });
    }

    /// Moves the device to now, handles completions, admits waiting submitters and dispatches
    /// until nothing changes; then schedules the next device and policy wake-ups.
    fn settle(&mut self) {
        loop {
            let mut done = std::mem::take(&mut self.done);
            self.device.advance(self.now, &mut done);
            let completed_any = !done.is_empty();
            for (at, request) in done.drain(..) {
                debug_assert!(at <= self.now);
                let error = self.device.completion_error(&request);
                self.complete(request, at, error);
            }
            self.done = done;
            self.admit_blocked();
            if self.writers.iter().any(|w| w.waiting.is_some()) {
                self.pump_writers();
            }
            let dispatched_any = self.dispatch();
            if !completed_any && !dispatched_any {
                break;
            }
        }
        let next = self.device.next_event();
        if next != self.device_wake {
            self.device_wake = next;
            self.device_generation += 1;
            if let Some(at) = next {
                assert!(
                    at > self.now,
                    "device event at {at} is not after now {}",
                    self.now
                );
                self.events.push(at, Event::Device(self.device_generation));
            }
        }
    }

    fn dispatch(&mut self) -> bool {
        let mut dispatched_any = false;
        while self.device.in_flight() < self.device.queue_depth() {
            match self.elevator.dispatch(self.now) {
                Dispatch::Request(request) if !self.device.accepts(&request) => {
                    // The device defers it (a queued command while a flush runs, or a flush
                    // before the queue is empty): back to the scheduler until a completion,
                    // as the block layer requeues on BLK_STS_DEV_RESOURCE.
                    self.elevator.requeue(request, self.now);
                    break;
                }
                Dispatch::Request(request) => {
                    self.disk.dispatched(self.now);
                    for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
                        let io = self.ios.get_mut(&id.0).expect("dispatched I/O is tracked");
                        io.dispatched = self.now;
                        io.dispatch_order = self.dispatches;
                    }
                    self.dispatches += 1;
                    self.device.submit(request, self.now);
                    dispatched_any = true;
                }
                Dispatch::WaitUntil(at) => {
                    let at = at.max(self.now + 1);
                    if self.policy_wake != Some(at) {
                        self.policy_wake = Some(at);
                        self.policy_generation += 1;
                        self.events
                            .push(at, Event::PolicyWake(self.policy_generation));
                    }
                    break;
                }
                Dispatch::Empty => break,
            }
        }
        dispatched_any
    }

    /// `request` completed at `at`, or failed with errno `error`.
    fn complete(&mut self, request: Request, at: Nanos, error: Option<i32>) {
        let dispatched = self.ios[&request.id.0].dispatched;
        self.disk
            .completed(self.now, request.direction(), at - dispatched);
        self.elevator.completed(&request, at);
        // The device time, shared by bytes among the original requests it carried.
        let service = at - dispatched;
        for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
            let io = &self.ios[&id.0];
            // Writeback's time is the job's whose pages it wrote.
            let job = io.writeback.map_or(io.issued.job, |w| w.owner);
            let Some(run) = self.jobs.get_mut(job) else {
                continue;
            };
            // Its completion is recorded, and the job's next I/O drawn, when it is delivered:
            // with many jobs the job's state has left the CPU's caches, and asking for it
            // now overlaps the misses.
            if self.prefetch_jobs {
                run.prefetch(&io.issued, at);
            }
            if at >= run.result.measure_start {
                let share = (u128::from(service) * u128::from(io.issued.bytes.max(1))
                    / u128::from(request.len.max(1))) as Nanos;
                run.result.device_time += share;
            }
        }
        let carrier_id = request.id;
        if self.wakeup_latency == 0 {
            for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
                self.finish_io(id, carrier_id, request.op, at, error);
            }
            return;
        }
        let told = (at + self.wakeup_latency).max(self.now);
        // The carrier's merged companions as they are (no allocation when there are none).
        self.notifications
            .insert(carrier_id.0, (request.op, request.merged, error));
        self.events.push(told, Event::Notify(carrier_id.0));
    }

    fn finish_io(
        &mut self,
        id: RequestId,
        carrier: RequestId,
        op: Op,
        at: Nanos,
        error: Option<i32>,
    ) {
        let io = self.ios.remove(&id.0).expect("completed I/O is tracked");
        self.completed_total += 1;

        if let Some(trace) = &mut self.trace {
            trace.push(TraceEntry {
                id,
                op,
                admitted: io.issued.admitted,
                dispatched: io.dispatched,
                dispatch_order: io.dispatch_order,
                completed: at,
                carrier,
                job: u32::try_from(io.issued.job).unwrap_or(u32::MAX),
                sync: io.sync,
            });
        }
        if let Some(block) = io.map {
            self.map_block_read(block, at, error);
            return;
        }
        if let Some((first, pages)) = io.fill {
            self.filled(first, pages, at, error);
            return;
        }
        if let Some(written) = io.writeback {
            self.written_back(written, at, error);
            return;
        }
        if op == Op::Write && error.is_none() && self.versions.is_some() {
            let last = (io.issued.offset + io.issued.bytes.max(1) - 1) / PAGE;
            self.direct_written(io.issued.offset / PAGE, last);
        }
        let job = &mut self.jobs[io.issued.job];
        match error {
            // A failed I/O is not measured; the job counts it and goes on, or stops.
            Some(errno) => {
                job.io_failed(io.issued.dir, errno);
            }
            None => {
                self.verify_completed(&io.issued);
                self.jobs[io.issued.job].record(&io.issued, at);
            }
        }
        driver::completed(self, &io.issued, at);
    }

    fn report(&mut self) -> RunReport {
        let duration = self.now;
        let disk_util = self.disk.util(self.device.model(), duration);
        let mut tunables = tunable_parameters(&self.elevator);
        let host = HOST_TUNABLES[0];
        tunables.push(Parameter {
            name: host.name.to_string(),
            value: (self.wakeup_latency / 1_000).to_string(),
            unit: host.unit.symbol().to_string(),
            note: host.doc.to_string(),
        });
        let notes = self
            .notes
            .iter()
            .cloned()
            .chain(self.jobs.iter().zip(&self.own).filter_map(|(run, own)| {
                let state = own.verify.as_ref()?;
                Some(format!(
                    "{}: job {:?}: {}",
                    run.spec.location,
                    run.spec.name,
                    state.outcome(run.spec.writes())
                ))
            }))
            .collect();
        // The run is over: each job's result moves into the report rather than being copied
        // (with 1024 jobs, copying their histograms and charts was a sixth of a short run).
        let jobs = std::mem::take(&mut self.jobs)
            .into_iter()
            .map(|run| {
                let mut result = run.result;
                result.finish(result.runtime);
                result
            })
            .collect();
        let mut counters = scheduler_counters(&self.elevator);
        if self.cache_hits + self.cache_waits + self.cache_misses > 0 {
            counters.extend([
                ("page_cache_hits".to_string(), self.cache_hits as f64),
                ("page_cache_waits".to_string(), self.cache_waits as f64),
                ("page_cache_misses".to_string(), self.cache_misses as f64),
                ("read_ahead_bytes".to_string(), self.read_ahead_bytes as f64),
                ("page_cache_evicted".to_string(), self.cache.evicted as f64),
            ]);
        }
        counters.extend(self.writeback_counters());
        counters.extend(self.device.counters());
        RunReport {
            engine: "sim".into(),
            seed: Some(self.seed),
            policy: match self.elevator.stage() {
                Some(stage) => format!("{}+{}", stage.name(), self.elevator.policy().name()),
                None => self.elevator.policy().name().to_string(),
            },
            tunables,
            device: self.device.model().to_string(),
            device_parameters: self.device.parameters(),
            jobs,
            disk: disk_util,
            device_counters: counters,
            notes,
            duration,
            started_ms: None,
            global_options: Vec::new(),
        }
    }
}

impl driver::Engine for Simulation {
    fn jobs(&mut self) -> &mut [JobState] {
        &mut self.jobs
    }

    fn seed(&self) -> u64 {
        self.seed
    }

    fn issue(&mut self, index: usize, io: NextIo, prio: IoPrio, _now: Nanos) {
        self.submit_io(index, io, prio);
    }

    fn flush(&mut self, index: usize, _now: Nanos, kind: SyncKind) -> u32 {
        if self.own[index].null_engine {
            let issued = Issued::flush(index, self.job_prio(index), self.now);
            self.complete_null(issued, NULL_IO_NS);
            return 1;
        }
        match kind {
            SyncKind::Range(flags) => return u32::from(self.sync_file_range(index, flags)),
            _ if self.writes_buffered(index) => self.buffered_fsync(index),
            _ => self.submit_flush(index),
        }
        1
    }

    /// The verify read-back (`do_verify`), once the writes are done.
    fn finishing(&mut self, index: usize, _now: Nanos) -> bool {
        let Some(state) = &mut self.own[index].verify else {
            return false;
        };
        if !state.read_back || state.started || self.jobs[index].result.error != 0 {
            return false;
        }
        state.started = true;
        state.queue = std::mem::take(&mut state.written).into_iter().collect();
        // The expected seeds stay at hand for the checks.
        state.written = state.queue.iter().copied().collect();
        self.jobs[index].phase = Phase::Verifying;
        self.pump_verify(index);
        true
    }

    fn pump_own(&mut self, index: usize, _now: Nanos) {
        self.pump_verify(index);
    }

    fn timer(&mut self, at: Nanos, timer: Timer) {
        let event = match timer {
            Timer::Start(index) => Event::JobStart(index as u32),
            Timer::Deadline(index) => Event::JobDeadline(index as u32),
            Timer::Wake(index) => Event::JobWake(index as u32),
        };
        self.events.push(at, event);
    }
}

/// Simulates `file` under `config` and reports.
pub fn run(config: &SimConfig, file: &JobFile) -> Result<RunReport, SimError> {
    Simulation::new(config, file)?.run()
}

/// The books of a request the elevator took in at `now`: merges count in the disk's
/// statistics, and the I/O's submission latency ends.
fn admitted(
    ios: &mut IoTable,
    disk: &mut DiskAccounting,
    now: Nanos,
    id: RequestId,
    direction: iosched_core::Direction,
    how: Admitted,
) {
    if how == Admitted::Merged {
        disk.merged(direction);
    }
    let io = ios.get_mut(&id.0).expect("issued I/O is tracked");
    io.issued.admitted = now;
    io.admitted = true;
}

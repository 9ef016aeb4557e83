//! `cfq`: Linux's Completely Fair Queueing scheduler (block/cfq-iosched.c), without cgroups.
//!
//! The rules are those of Linux 4.10's cfq-iosched.c (the last generation, 2.6.33 to 4.20, whose
//! workload trees seed 004 ran): slices, idling, think time, seek history, dispatch limits,
//! preemption, FIFO expiry, request choice, and within each class the async, sync-noidle and
//! sync service trees served as workloads. iosched's own tunable `workload_trees=0` gives the
//! single tree per class of 2.6.32 and before, for the seeds that ran those kernels (see
//! "Workloads" below).
//!
//! # Queues
//!
//! Each flow's synchronous requests (reads, O_DIRECT and O_SYNC writes) go to a queue of their
//! own, the kernel's `cic->cfqq[SYNC]`. Asynchronous requests (buffered writeback) go to a queue
//! shared by every flow with the same priority, `async_cfqq[class][level]`; the idle class has a
//! single one. A queue keeps its requests sorted by offset and in a FIFO ordered by expiry time
//! (`fifo_expire_sync` or `fifo_expire_async` after insertion).
//!
//! # Choosing a queue
//!
//! A queue with requests is *busy* and sits in a service tree: one per workload type of the RT
//! and BE classes ("none" counting as BE level 4), one for IDLE. Its place in the tree is its
//! `rb_key`, set when it becomes busy and again when its slice ends (`cfq_service_tree_add`):
//! the current time, plus an offset that grows with the number of other busy queues and with
//! how far its priority is below sync level 0 (`cfq_slice_offset`), minus any slice time it
//! was owed (`slice_resid`). Queues of a tree are therefore served round robin, lower priorities
//! placed further back. The idle class is only served once no RT or BE request has been in
//! flight or completed for `CFQ_IDLE_DELAY` (200 ms). This is the grace period of older kernels
//! (2.6.2x armed an `idle_class_timer` for `CFQ_IDLE_GRACE`, 100 ms, after the last RT or BE
//! completion); later ones only queue idle-class queues `CFQ_IDLE_DELAY` apart in their tree,
//! which is modelled too.
//!
//! # Workloads
//!
//! A queue's workload type is async, sync with an open idle window ("sync"), or sync without
//! one ("sync-noidle": seeky readers, readers that think long) (`cfqq_type`). When a slice ends,
//! `choose_wl_class_and_type` serves RT if any RT queue is busy, else BE, else IDLE; within the
//! class it keeps the current workload while its tree has queues and its slice lasts, else
//! takes the tree whose first queue has waited longest (`cfq_choose_wl_type`) with a slice of
//! `target_latency` times its share of the class's busy queues (async scaled by `slice_async /
//! slice_sync` and capped by its share of all busy queues; sync at least `2 * slice_idle`;
//! anything at least `CFQ_MIN_TT`, 2 ms). The next queue is the first of that tree.
//!
//! The sync-noidle workload is what keeps seeky readers from being swamped: its queues are not
//! idled on one by one, but CFQ idles after the *last* queue of the tree (`cfq_should_idle`:
//! `st->count == 1` unless the tree's think time exceeds `slice_idle`), so the workload keeps
//! the disk for its slice. A second sync-noidle queue's request, or any request when the active
//! queue is empty and does not idle, preempts. A seeky queue that still has an idle window (it
//! queued deeply once) loses it when its queue empties while most of its slice is left (2.6.37+).
//! The only busy sync queue may exceed `quantum` in flight (`promote_sync`, 3.3+).
//!
//! With `workload_trees=0` every queue of a class shares one tree, no workload is chosen, and
//! none of the rules of this section applies: a seeky reader is never idled on.
//!
//! # Slices
//!
//! The active queue owns the disk for a time slice, `cfq_prio_slice`: the base (`slice_sync` or
//! `slice_async`) plus `base / 5 * (4 - level)`, so 180 ms for sync level 0, 100 ms at level 4
//! and 40 ms at level 7. As in the kernel the slice clock starts at the first *completion* of the
//! slice, so the queue is not charged for the seek that brought the head to it. With
//! `low_latency` on, a slice is shrunk when the class's (decaying) number of busy queues times
//! `slice_sync` exceeds `target_latency`, never below `2 * slice_idle` scaled by priority.
//!
//! The queue expires when its slice is used, when it runs empty and does not idle, when it is
//! preempted, and for an async queue after `2 * slice_async_rq * (8 - level)` dispatches
//! (`cfq_prio_to_maxrq`) if another queue is waiting. An idle-class queue expires after each
//! dispatch in that case.
//!
//! # Dispatching from the active queue
//!
//! At the start of each slice the oldest request is checked once: if its FIFO time has passed it
//! goes first (`cfq_check_fifo`). Otherwise the queue serves its `next_rq`, chosen as the kernel
//! does (`cfq_choose_req`): forward of the head is preferred; a backward seek within
//! `back_seek_max` costs `back_seek_penalty` times its distance; beyond that it is taken only
//! when nothing else is left; sync before async; the nearer wins.
//!
//! `cfq_may_dispatch` limits how much a queue has in flight: `quantum / 2` at first, up to
//! `quantum` while the slice has room for what is already in flight, without limit when it is
//! the only busy queue; idle class one at a time. Async requests wait while sync ones are in
//! flight, and a queue that idles waits for async requests in flight to drain. With
//! `low_latency`, async dispatch depth ramps up with the time since a sync request last waited
//! longer than `fifo_expire_sync`.
//!
//! # Idling
//!
//! When a request of the active sync queue completes and leaves the queue empty, CFQ waits up to
//! `slice_idle` for the same flow's next request instead of switching queues
//! (`cfq_arm_slice_timer`): [`Dispatch::WaitUntil`]. A request from that flow ends the wait at
//! once; at the deadline the queue expires. CFQ does not idle when `slice_idle` is 0, for async
//! or idle-class queues, while the queue still has requests in flight, when the flow's mean
//! think time exceeds what is left of the slice, or when the queue's idle window is closed (but
//! see "Workloads" for the last queue of the sync-noidle tree). The
//! window closes when the flow is seeky (more than 4 of its last 32 requests started more than
//! 800 sectors from where the previous one ended, `CFQQ_SEEKY`) unless it queues deeply (4 or
//! more requests at once, `deep`), or when its mean think time exceeds `slice_idle`. Think time
//! is the time from the flow's last sync completion to its next sync request, capped at
//! `2 * slice_idle` and averaged with weight 7/8 on history, as `cfq_update_io_thinktime`; it
//! counts only after about three samples (`sample_valid`).
//!
//! # Close cooperators
//!
//! When the active sync queue runs empty and another busy sync queue of its level, neither
//! seeky, has its next request within 4 MiB of the head (`cfq_close_cooperator`), that queue is
//! served at once instead of idling, and the two are set to merge (`cfq_setup_merge`, towards
//! the queue with more flows): the next sync request of the merging queue's flow goes to the
//! other queue (`cfq_merge_cfqqs`), so processes reading one file in interleaved pieces are
//! served as one sequential queue. A merged queue found seeky when its slice ends is split
//! (`split_coop`): each flow's next request goes to its own queue again (`split_cfqq`), the
//! last one keeping the merged queue as its own. Queue identity is the flow's key here, so a
//! merged flow's own queue comes back empty when it splits, as the kernel allocates a new one.
//!
//! # Preemption
//!
//! A request for a queue other than the active one ends the active slice at once
//! (`cfq_should_preempt`) when: the active queue is idle class (and the new one is not); or,
//! unless the active queue is RT and the new one is not, when the request is sync and the active
//! queue async, when the active slice is used up, (with workload trees) when a second
//! sync-noidle queue arrives while that workload's only queue has nothing queued, when the new
//! queue is RT and the active one is not, (with workload trees) when the active queue has
//! nothing queued and should not idle, or when the active queue is idling and the request lies
//! within 8192 sectors of the head.
//! Idle-class requests never preempt. The preempting queue goes to the front of its tree and the
//! preempted one keeps the unused part of its slice as credit for its next position.
//!
//! # Simplifications
//!
//! - No cgroup groups (`cfq_group`, `group_idle`, `wait_busy`, group vdisktime): one root
//!   group. `grouped-cfq` puts cfq under iosched's hierarchical fair-queuing layer instead.
//! - No `REQ_PRIO` metadata boost, no `hw_tag` queue-depth detection and no non-rotational
//!   special cases: every device is treated as rotational and as queueing.
//! - A request from the active flow ends the idle wait at once, as the kernel does for requests
//!   larger than a page or when other queues are busy; the `must_dispatch` delay for small ones
//!   is not modelled.
//! - A requeued request goes back on the dispatch list and out before anything else, as the
//!   block layer does with `ELEVATOR_INSERT_REQUEUE`; it stays accounted to its queue.
//! - A sync queue takes its priority from its first request and keeps it while it has requests
//!   queued or in flight.
//! - Per-flow history (think time, seek history, idle window, slice credit) lives in a table of
//!   at most 4096 queues, the least recently used evicted first; queues themselves exist only
//!   while they have requests queued or in flight or hold the active slice.

mod keyed;
mod queue;
mod service_tree;
mod slice;
#[cfg(test)]
mod tests;

use super::PolicyInfo;
use crate::ioprio::{IoPrio, IoPrioClass};
use crate::ordmap::OrdMap;
use crate::policy::{Dispatch, Policy};
use crate::request::{merge_back, merge_front, mergeable, FlowId, MergeLimits, Request, RequestId};
use crate::time::{from_millis, Nanos, MILLISECOND, SECOND};
use crate::tunable::{TunableError, TunableSpec, Unit};
use keyed::KeyedSlab;
use queue::{Entry, History, Queue};
use slice::Active;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;

/// CFQ's tunables, named as in `/sys/block/X/queue/iosched/` and defaulted as in Linux.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "quantum",
        unit: Unit::Requests,
        default: 8,
        min: 1,
        max: 1_000_000,
        doc: "requests the active queue may have in flight (half of it early in a slice); \
              unlimited when it is the only busy queue",
    },
    TunableSpec {
        name: "fifo_expire_sync",
        unit: Unit::Milliseconds,
        default: 125,
        min: 1,
        max: 3_600_000,
        doc: "a sync request older than this is served first when its queue's slice starts (HZ/8)",
    },
    TunableSpec {
        name: "fifo_expire_async",
        unit: Unit::Milliseconds,
        default: 250,
        min: 1,
        max: 3_600_000,
        doc:
            "an async request older than this is served first when its queue's slice starts (HZ/4)",
    },
    TunableSpec {
        name: "back_seek_max",
        unit: Unit::Kibibytes,
        default: 16_384,
        min: 0,
        max: 1 << 30,
        doc: "farthest backward seek a queue may choose over forward work",
    },
    TunableSpec {
        name: "back_seek_penalty",
        unit: Unit::Count,
        default: 2,
        min: 1,
        max: 1_000_000,
        doc: "a backward seek counts as this many times the same forward distance",
    },
    TunableSpec {
        name: "slice_sync",
        unit: Unit::Milliseconds,
        default: 100,
        min: 1,
        max: 3_600_000,
        doc: "base time slice of a sync queue at level 4; each level above adds a fifth, below \
              removes one (HZ/10)",
    },
    TunableSpec {
        name: "slice_async",
        unit: Unit::Milliseconds,
        default: 40,
        min: 1,
        max: 3_600_000,
        doc: "base time slice of an async queue at level 4, scaled like slice_sync (HZ/25)",
    },
    TunableSpec {
        name: "slice_async_rq",
        unit: Unit::Requests,
        default: 2,
        min: 1,
        max: 1_000_000,
        doc: "an async queue's slice ends after 2 x this x (8 - level) dispatches if others wait",
    },
    TunableSpec {
        name: "slice_idle",
        unit: Unit::Milliseconds,
        default: 8,
        min: 0,
        max: 3_600_000,
        doc: "how long an emptied sync queue waits for its flow's next request; 0 disables \
              idling (HZ/125)",
    },
    TunableSpec {
        name: "low_latency",
        unit: Unit::Flag,
        default: 1,
        min: 0,
        max: 1,
        doc: "shrink slices so that a round of busy queues fits target_latency, and ramp up \
              async depth only while sync requests are not delayed",
    },
    TunableSpec {
        name: "workload_trees",
        unit: Unit::Flag,
        default: 1,
        min: 0,
        max: 1,
        doc: "iosched's switch between CFQ generations: 1 (Linux 2.6.33 to 4.20) splits each \
              class into async, sync-noidle and sync service trees served as workloads, idles at \
              the end of the sync-noidle tree, lets a queue leave its idle window early when \
              seeky; 0 is the single tree per class of 2.6.32 and before",
    },
    TunableSpec {
        name: "target_latency",
        unit: Unit::Milliseconds,
        default: 300,
        min: 1,
        max: 3_600_000,
        doc: "with low_latency, the time one round of a class's busy queues should take (a \
              constant in 2.6.35, a sysfs file in later kernels)",
    },
];

/// This module's entries in the policy catalog (`iosched policies`).
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "cfq",
        aliases: &[],
        summary: "per-flow time slices with idling, RT/BE/IDLE classes and priority-scaled slices (Linux's historic CFQ, without cgroups)",
        tunables: TUNABLES,
        build: || Box::new(Cfq::new()),
    },
];

/// `CFQ_SLICE_SCALE`: each priority level moves a slice by a fifth of its base.
const SLICE_SCALE: u64 = 5;

/// `CFQ_IDLE_DELAY`: how long RT and BE must have been quiet before the idle class is served.
pub const IDLE_DELAY: Nanos = 200 * MILLISECOND;

/// `CFQQ_SEEK_THR`: a request starting more than 800 sectors from where the flow's previous one
/// ended is a seek.
const SEEK_THRESHOLD: u64 = 800 * 512;

/// `CFQQ_SEEKY`: a queue is seeky when more than 32 / 8 of its last 32 requests were seeks.
const SEEKY_SEEKS: u32 = 32 / 8;

/// `CFQQ_CLOSE_THR`: a request this close to the head may preempt an idling queue.
const CLOSE_THRESHOLD: u64 = 8 * 1024 * 512;

/// The same threshold for close cooperators (`cfq_rq_close`), 8192 sectors.
const CLOSE_COOPERATOR: u64 = CLOSE_THRESHOLD;

/// Busy queues at which [`Cfq::close_index`] is built, and below which it is dropped: with a
/// handful of busy queues a look at each costs less than keeping the index at every request
/// (two B-tree updates); both find the same cooperator.
const CLOSE_INDEX_FROM: usize = 32;
const CLOSE_INDEX_BELOW: usize = 16;

/// `sample_valid`: the think-time average counts once its sample weight exceeds this.
const SAMPLES_VALID: u64 = 80;

/// `cfq_hist_divisor`: weight of history in the busy-queue average used by `low_latency`.
const HIST_DIVISOR: u64 = 4;

/// Most queues whose history (think time, seeks, idle window, slice credit) is remembered.
pub const HISTORY_CAP: usize = 4096;

/// Queues kept, forgotten, for their flows' next requests, at most ([`Queue::forgotten`]).
const QUEUES_KEPT: usize = 4096;

/// Lowest priority level (`IOPRIO_BE_NR - 1`); the idle class runs at it.
const LOWEST_LEVEL: u8 = 7;

const RT: usize = 0;

const BE: usize = 1;

const IDLE: usize = 2;

/// Workload types within RT and BE (`enum wl_type_t`): async queues, sync queues that do not
/// idle (seeky, or thinking too long), sync queues that idle.
const ASYNC_WL: usize = 0;
const SYNC_NOIDLE_WL: usize = 1;
const SYNC_WL: usize = 2;

/// Service trees: three workloads each for RT and BE, one for IDLE (`service_trees[class][type]`
/// and `service_tree_idle`). Without workload trees only the sync one of RT and BE is used,
/// as the single per-class tree of 2.6.32 and before.
const TREES: usize = 7;

/// The tree of a queue of `class` with workload type `wl`.
fn tree_index(class: usize, wl: usize) -> usize {
    if class == IDLE {
        TREES - 1
    } else {
        class * 3 + wl
    }
}

/// `CFQ_MIN_TT`: the shortest workload slice (2 jiffies at HZ=1000).
const MIN_TT: Nanos = 2 * MILLISECOND;

/// Index of a priority class: RT 0, BE 1 ("none" included), IDLE 2.
fn class_of(prio: IoPrio) -> usize {
    match prio.effective_class() {
        IoPrioClass::Rt => RT,
        IoPrioClass::Be | IoPrioClass::None => BE,
        IoPrioClass::Idle => IDLE,
    }
}

/// The level CFQ uses: the idle class always runs at the lowest level, as `cfq_init_prio_data`.
fn level_of(prio: IoPrio) -> u8 {
    match prio.effective_class() {
        IoPrioClass::Idle => LOWEST_LEVEL,
        _ => prio.effective_level(),
    }
}

/// Which queue a request belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum QueueKey {
    /// A flow's own queue for its synchronous requests (`cic->cfqq[SYNC]`).
    Sync(FlowId),
    /// The queue every flow shares for asynchronous requests of one class and level
    /// (`async_cfqq[class][level]`, `async_idle_cfqq`).
    Async(usize, u8),
}

/// An entry of [`Cfq::close_index`]: (RT, level, where the queue's next request starts, its
/// flow), packed in that order into one number, so that the index compares one `u128` where
/// it compared four fields (at 1024 busy queues its updates were 8% of cfq's cost). Only sync
/// queues are indexed, and a sync queue is its flow's: the flow names the queue, and the
/// order is the tuple's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct CloseKey(u128);

impl CloseKey {
    fn new(rt: bool, level: u8, at: u64, flow: FlowId) -> Self {
        CloseKey(
            (u128::from(rt) << 104)
                | (u128::from(level) << 96)
                | (u128::from(at) << 32)
                | u128::from(flow.0),
        )
    }

    /// Where the queue's next request starts.
    fn at(self) -> u64 {
        (self.0 >> 32) as u64
    }

    fn queue(self) -> QueueKey {
        QueueKey::Sync(FlowId(self.0 as u32))
    }
}

fn queue_key(request: &Request) -> QueueKey {
    if request.sync {
        QueueKey::Sync(request.flow)
    } else {
        QueueKey::Async(class_of(request.prio), level_of(request.prio))
    }
}

/// A queue that close cooperators' flows share (`cfq_cfqq_coop`).
#[derive(Clone, Copy, Debug)]
struct Coop {
    /// Flows whose sync requests go to it (`cfqq_process_refs`), its own flow included.
    flows: u32,
    /// It was seeky at the end of a slice: each flow leaves it at its next request
    /// (`cfq_cfqq_split_coop`).
    split: bool,
}

/// Most merges remembered (set up and not yet done), as the history table's size.
const MERGES_MAX: usize = 4096;

/// The CFQ policy.
#[derive(Debug)]
pub struct Cfq {
    queues: KeyedSlab<Queue>,
    /// Busy queues of each service tree ([`tree_index`]) by `(rb_key, insertion number)`.
    trees: [OrdMap<(i64, u64), QueueKey>; TREES],
    /// The busy sync RT and BE queues with a next request by (RT, level, where the next
    /// request starts): the kernel's `prio_trees`, where [`Cfq::close_cooperator`] finds the
    /// queue nearest the head without looking at every busy one.
    close_index: BTreeSet<CloseKey>,
    /// Whether `close_index` is kept (from [`CLOSE_INDEX_FROM`] busy queues until fewer than
    /// [`CLOSE_INDEX_BELOW`]); without it [`Cfq::close_cooperator`] looks at each busy queue.
    close_indexed: bool,
    /// Each service tree's think time (`st->ttime`), for idling on the last sync-noidle queue.
    tree_ttime: [TreeTtime; TREES],
    /// The workload being served (`serving_wl_class`, `serving_wl_type`) and when its slice
    /// ends (`workload_expires`); `None`: choose anew.
    serving_class: usize,
    serving_type: usize,
    workload_expires: Option<Nanos>,
    /// Busy sync queues (`busy_sync_queues`).
    busy_sync_queues: usize,
    tree_inserts: u64,
    history: KeyedSlab<History>,
    /// `History::stamp` to key, oldest first.
    history_stamp: u64,
    /// Queue merging of close cooperators (2.6.33+, `cfq_setup_merge`): the flows whose sync
    /// requests go to another flow's queue (`cic_set_cfqq`), the merges set up and not yet
    /// done (`cfqq->new_cfqq`, source to target), the merged queues with the number of flows
    /// using them (`cfqq_process_refs`) and whether they are to be split (`split_coop`), and
    /// the queue of each request in flight that is not its flow's own.
    flow_queue: BTreeMap<FlowId, QueueKey>,
    merge_pending: BTreeMap<QueueKey, QueueKey>,
    coop: BTreeMap<QueueKey, Coop>,
    request_queue: BTreeMap<RequestId, QueueKey>,
    active: Option<Active>,
    /// Requests the device handed back, served before anything else.
    requeued: VecDeque<Request>,
    queued: usize,
    /// Requests in flight from async and sync queues (`rq_in_flight`).
    in_flight: [u32; 2],
    /// Requests of RT and BE queues in flight.
    rt_be_in_flight: u32,
    /// Where the last dispatched request ended (`last_position`).
    last_position: u64,
    /// When an RT or BE request last completed.
    last_rt_be_end: Option<Nanos>,
    /// When a sync request last completed after waiting `fifo_expire_sync` or more
    /// (`last_delayed_sync`); `None` counts as a second before time 0, as the kernel starts.
    last_delayed_sync: Option<Nanos>,
    /// Decaying number of busy queues, BE and RT (`busy_queues_avg`).
    busy_queues_avg: [u64; 2],
    quantum: u64,
    /// `fifo_expire_async`, `fifo_expire_sync`.
    fifo_expire: [Nanos; 2],
    back_seek_max_bytes: u64,
    back_seek_penalty: u64,
    /// `slice_async`, `slice_sync`.
    slice: [Nanos; 2],
    slice_async_rq: u64,
    slice_idle: Nanos,
    low_latency: bool,
    /// The 2.6.33+ workload trees (iosched's `workload_trees`).
    workload_trees: bool,
    target_latency: Nanos,
}

/// A service tree's think time (`struct cfq_ttime`): the gap between a sync request's
/// completion and the tree's next sync request.
#[derive(Clone, Copy, Debug, Default)]
struct TreeTtime {
    last_end_request: Nanos,
    samples: u64,
    total: u64,
    mean: Nanos,
}

impl Default for Cfq {
    fn default() -> Self {
        Self::new()
    }
}

impl Cfq {
    /// A CFQ policy with Linux's defaults.
    pub fn new() -> Self {
        Cfq {
            queues: KeyedSlab::default(),
            trees: Default::default(),
            close_index: BTreeSet::new(),
            close_indexed: false,
            tree_ttime: Default::default(),
            serving_class: BE,
            serving_type: ASYNC_WL,
            workload_expires: None,
            busy_sync_queues: 0,
            tree_inserts: 0,
            history: KeyedSlab::default(),
            history_stamp: 0,
            flow_queue: BTreeMap::new(),
            merge_pending: BTreeMap::new(),
            coop: BTreeMap::new(),
            request_queue: BTreeMap::new(),
            active: None,
            requeued: VecDeque::new(),
            queued: 0,
            in_flight: [0; 2],
            rt_be_in_flight: 0,
            last_position: 0,
            last_rt_be_end: None,
            last_delayed_sync: None,
            busy_queues_avg: [0; 2],
            quantum: TUNABLES[0].default,
            fifo_expire: [
                from_millis(TUNABLES[2].default),
                from_millis(TUNABLES[1].default),
            ],
            back_seek_max_bytes: TUNABLES[3].default * 1024,
            back_seek_penalty: TUNABLES[4].default,
            slice: [
                from_millis(TUNABLES[6].default),
                from_millis(TUNABLES[5].default),
            ],
            slice_async_rq: TUNABLES[7].default,
            slice_idle: from_millis(TUNABLES[8].default),
            low_latency: TUNABLES[9].default == 1,
            workload_trees: TUNABLES[10].default == 1,
            target_latency: from_millis(TUNABLES[11].default),
        }
    }
}

impl Policy for Cfq {
    /// A single-queue scheduler: BLKDEV_MAX_RQ requests (block/blk-core.c, 2.6 to 4.x).
    fn default_nr_requests(&self) -> Option<u32> {
        Some(crate::elevator::LEGACY_NR_REQUESTS)
    }

    fn name(&self) -> &'static str {
        "cfq"
    }

    fn try_merge(
        &mut self,
        request: Request,
        limits: MergeLimits,
        now: Nanos,
    ) -> Result<(), Request> {
        self.merge_request(request, limits, now)
    }

    fn insert(&mut self, request: Request, now: Nanos) {
        self.insert_request(request, now)
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.dispatch_next(now)
    }

    fn completed(&mut self, request: &Request, now: Nanos) {
        self.request_completed(request, now)
    }

    fn requeue(&mut self, request: Request, _now: Nanos) {
        // Back on the dispatch list, in front: still accounted to its queue as dispatched.
        self.queued += 1;
        self.requeued.push_front(request);
    }

    fn queued(&self) -> usize {
        debug_assert_eq!(
            self.queued,
            self.requeued.len() + self.queues.values().map(|q| q.sort.len()).sum::<usize>()
        );
        self.queued
    }

    fn drain(&mut self, out: &mut Vec<Request>) {
        self.drain_all(out)
    }

    fn tunables(&self) -> &'static [TunableSpec] {
        TUNABLES
    }

    fn tunable(&self, name: &str) -> Result<u64, TunableError> {
        self.tunable_value(name)
    }

    fn set_tunable(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        self.set_tunable_value(name, value)
    }
}

impl Cfq {
    /// A tunable's value, in its sysfs unit.
    pub(super) fn tunable_value(&self, name: &str) -> Result<u64, TunableError> {
        Ok(match name {
            "quantum" => self.quantum,
            "fifo_expire_sync" => self.fifo_expire[1] / MILLISECOND,
            "fifo_expire_async" => self.fifo_expire[0] / MILLISECOND,
            "back_seek_max" => self.back_seek_max_bytes / 1024,
            "back_seek_penalty" => self.back_seek_penalty,
            "slice_sync" => self.slice[1] / MILLISECOND,
            "slice_async" => self.slice[0] / MILLISECOND,
            "slice_async_rq" => self.slice_async_rq,
            "slice_idle" => self.slice_idle / MILLISECOND,
            "low_latency" => u64::from(self.low_latency),
            "workload_trees" => u64::from(self.workload_trees),
            "target_latency" => self.target_latency / MILLISECOND,
            _ => return Err(crate::tunable::unknown(name, TUNABLES)),
        })
    }

    /// Sets a tunable, in its sysfs unit.
    pub(super) fn set_tunable_value(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        let value = crate::tunable::find(TUNABLES, name)?.check(value)?;
        match name {
            "quantum" => self.quantum = value,
            "fifo_expire_sync" => self.fifo_expire[1] = from_millis(value),
            "fifo_expire_async" => self.fifo_expire[0] = from_millis(value),
            "back_seek_max" => self.back_seek_max_bytes = value * 1024,
            "back_seek_penalty" => self.back_seek_penalty = value,
            "slice_sync" => self.slice[1] = from_millis(value),
            "slice_async" => self.slice[0] = from_millis(value),
            "slice_async_rq" => self.slice_async_rq = value,
            "slice_idle" => self.slice_idle = from_millis(value),
            "low_latency" => self.low_latency = value == 1,
            "workload_trees" => self.workload_trees = value == 1,
            "target_latency" => self.target_latency = from_millis(value),
            _ => unreachable!("find() accepted only known names"),
        }
        Ok(())
    }
}

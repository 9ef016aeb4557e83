//! `bfq`: Budget Fair Queueing (Linux's block/bfq-iosched.c, the rules of 5.x/6.x) over the
//! common fair-queuing layer, with interactive and soft real-time weight raising
//! (`low_latency`, on by default as in the kernel), large-burst detection and I/O injection.
//!
//! - **Queues.** Each flow's synchronous requests have a queue of their own; asynchronous
//!   requests share one queue per cgroup, class and level. A queue is a leaf of the common
//!   layer ([`crate::fq`]) inside its cgroup's group, with the weight of its priority,
//!   `(8 - level) x 10` (BE 4, the default, is 40), in the service tree of its class: RT before
//!   BE before IDLE, IDLE served at least every 200 ms (`BFQ_CL_IDLE_TIMEOUT`), one request
//!   per turn while other queues are busy (`bfq_dispatch_rq_from_bfqq`), and never idled for.
//!   A sync queue whose turn ends with its requests all in the drive stays busy when idling
//!   matters, so its class keeps lower ones out; the kernel's `__bfq_bfqq_expire` takes an
//!   emptied queue out whatever it has in the drive, unless it was preempted while idling is
//!   needed for guarantees. Its back-shifting of a queue that comes back in time
//!   (`bfq_bfqq_non_blocking_wait_rq`, which also makes such a queue preempt) is not
//!   modelled: a queue that left the race comes back at `max(V, F)`. Groups weigh by
//!   `io.weight`.
//! - **Budgets.** The layer serves the queue with the smallest virtual finish among the
//!   eligible (B-WF2Q+). The queue in service dispatches, in the elevator order CFQ also uses
//!   (forward first; backward within `back_seek_max` at `back_seek_penalty` times the cost),
//!   until its budget is spent, its turn times out, or it runs out of requests. A turn times
//!   out `timeout_sync` after it began, 30 times that for an interactive raised queue (its
//!   weight over its own, `bfq_set_budget_timeout`), not while the disk idles for it
//!   (`bfq_may_expire_for_budg_timeout`). A
//!   request costs its bytes, or three times them for an async queue that is not raised while
//!   the scenario is symmetric (`bfq_serv_to_charge`, `bfq_async_charge_factor`), so an async
//!   queue's turns are shorter. Its FIFO is checked once per turn (`fifo_expire_sync`,
//!   `fifo_expire_async`).
//! - **Budget feedback** (`__bfq_bfqq_recalc_budget`): a new queue starts at two thirds of
//!   `max_budget` (`bfq_init_bfqq`). A sync queue that spent its budget gets four times more
//!   next time, one that timed out twice more, one that went idle four minimum budgets less,
//!   one that ran out of requests what it used, never beyond `max_budget` nor below a 32nd of
//!   it. (The kernel doubles the budget of a queue whose idle wait ends with requests in the
//!   drive; its timer, armed at the last completion as here, does that only when it races a
//!   dispatch, which a simulation does not.) A weight-raised queue keeps
//!   two minimum budgets (cut to that when its raising starts,
//!   `bfq_update_bfqq_wr_on_rq_arrival`), an async queue always has `max_budget`.
//!   `max_budget` 0 means automatic: the peak rate measured on the device times
//!   `timeout_sync` (`bfq_calc_max_budget`).
//! - **Charging.** A queue is charged what its requests cost (above), except when it is
//!   slow, or timed out with a third of its budget or more left: then it is charged at least
//!   the share of `max_budget` its time used (`bfq_bfqq_charge_time`), so a seeky or slow
//!   queue pays for the disk time it took. Slow is `bfq_bfqq_is_slow`'s: over a turn longer
//!   than 20 ms (to when the idle wait began, for a turn the wait ends), served less than half
//!   of `max_budget`; over a shorter one, seeky. The peak rate is measured over the same time,
//!   as BFQ's `bfq_update_peak_rate` did at expiry before its estimator moved to each
//!   dispatch. As
//!   `bfq_bfqq_expire`, a queue that used two thirds of its budget before its timeout is
//!   charged what its requests cost (a
//!   sequential reader unlucky in a slow zone keeps its share of the bandwidth), and a
//!   weight-raised queue is never charged by time.
//! - **Idling** (`bfq_better_to_idle`). When a synchronous queue in service runs out of
//!   requests and idling is better, it stays in service while its requests are in the drive
//!   (`bfq_select_queue`'s `keep_queue`), and the disk waits for its next one from its last
//!   completion (`bfq_completed_request` arms the idle timer, `bfq_arm_slice_timer`):
//!   `slice_idle`, at most `BFQ_MIN_TT` (2 ms) for a seeky queue that is not raised while the
//!   scenario is symmetric, at least 20 ms for a raised one. When the wait ends, the turn ends
//!   too idle, or timed out (`bfq_idle_slice_timer_body`). When idling is not better, the
//!   turn ends when the queue runs out of requests. Idling is better for throughput
//!   (`idling_boosts_thr_without_issues`: the drive does not queue commands, or the queue is
//!   sequential, I/O-bound and of a short think time; and no raised queue is busy), or for
//!   service guarantees (`idling_needed_for_service_guarantees`): the queue is raised while
//!   another busy queue is not, it is the only busy queue, or the scenario is asymmetric
//!   (`bfq_asymmetric_scenario`): the busy queues are of several classes, or several groups
//!   have work, or the queues weigh differently and this one is not of the smallest weight.
//!   Think time is `bfq_update_io_thinktime`'s (short unless its
//!   mean over more than 80 samples exceeds half of `slice_idle`); a queue stops being
//!   I/O-bound when a turn ends too idle having used a fifth of its budget or less, and is
//!   again after 120 busy periods begun within 3 x `slice_idle` of its last completion.
//! - **Preemption** (`bfq_bfqq_handle_idle_busy_switch`). A queue that becomes busy ends the
//!   turn of the queue in service if it is of a higher class (RT over BE over IDLE) or weighs
//!   more (`bfq_bfqq_higher_class_or_weight`: weights of two queues of one group compare
//!   directly, of queues in different groups their groups'), or if the queue in service does
//!   not need idling any more; and only if the root would serve something else next
//!   (`next_queue_may_preempt`, [`FairQueue::next_in_service_differs`]).
//! - **Depth limits** (`bfq_limit_depth`, [`Policy::may_allocate`]): reads may take every one
//!   of the `nr_requests` scheduler requests, sync writes three quarters, async I/O half; and a
//!   queue (or a cgroup above it) holding its weight's share of that limit already takes no
//!   more (`bfqq_request_over_limit`, each class weighing 8 times the one below), so an IDLE
//!   backup beside busy best-effort readers holds a request or two, not the device's queue.
//!   Linux gives such a queue a shallow tag depth of 1; we let it hold its share, at least 1.
//!   While a weight-raised queue is busy, sync writes get 6/16 and async I/O 3/16
//!   (`async_depths[1]`).
//! - **Weight raising** (`low_latency`), for sync queues of the default weight (40: the kernel
//!   assumes any other was set on purpose) and not of the IDLE class:
//!   - a queue that becomes busy with nothing in the drive after 2 s of silence since its last
//!     turn's budget timeout (or since it was left with nothing to do), or new, is interactive
//!     (`bfq_bfqq_handle_idle_busy_switch`, `bfq_bfqq_idle_for_long_time`): it weighs 30 times
//!     its weight (`bfq_wr_coeff`) for `bfq_wr_duration`, 7 s times 109 MB/s over the peak rate,
//!     within 3 and 25 s (`wr_max_time` overrides it);
//!   - a queue that becomes busy again no sooner than its `soft_rt_next_start`, with nothing
//!     in flight and not totally seeky, is soft real-time: 3000 times its weight
//!     (`BFQ_SOFTRT_WEIGHT_FACTOR`; our layer caps weights at 10,000) for 300 ms
//!     (`bfq_wr_rt_max_time`), recharged at each such return. `soft_rt_next_start` is set
//!     when a turn ends with nothing queued (or at the last completion, if requests were in
//!     flight): no sooner than the service since it became busy allows at
//!     `wr_max_softrt_rate` (7000 sectors/s), nor than `slice_idle` + 4 ms from then
//!     (`bfq_bfqq_softrt_next_start`);
//!   - a raising ends when its time is up, checked when the queue becomes busy and at each of
//!     its dispatches (`bfq_update_wr_data`); a soft real-time raising that interrupted an
//!     interactive one goes back to it if that one's time is not up
//!     (`switch_back_to_interactive_wr`).
//!
//!   Queues created in a large burst (`bfq_handle_burst`: 8 or more sync queues of a group,
//!   each created within 180 ms of the previous) are not raised, and the first seven, raised
//!   before the burst was known to be large, lose their raising at their next dispatch
//!   (`bfq_update_wr_data`), until they have been idle for long and 10 s past their last turn.
//! - **Injection** (Linux 5.2+, `bfq_choose_bfqq_for_injection`): while the disk waits for
//!   the queue in service, the next request of another busy queue goes to the drive: of the
//!   queues whose next request fits what their budget has left, the first on `active_list`,
//!   the one that entered the race or was requeued last (`bfq_active_insert`); unless idling
//!   pays for throughput by itself
//!   (`idling_boosts_thr_without_issues`: a drive without command queueing, `hw_tag` detected
//!   from the requests it holds as `bfq_update_hw_tag`, or a sequential queue with a short
//!   think time), or the waiting queue is weight-raised with a short think time while no
//!   other raised queue is busy, or the drive already holds `inject_limit` requests. The limit
//!   adapts per queue (`bfq_update_inject_limit`): a request of the queue in service that
//!   arrives with the drive empty is timed from arrival to completion as the base; with
//!   injected requests around, a time 1.5x the base or more lowers the limit, a shorter one
//!   raises it; it restarts at 0 (1 for a long think time) every second
//!   (`bfq_reset_inject_limit`). (The kernel means to allow one request at a limit of 0 once
//!   the disk has idled `slice_idle`, but compares `slice_idle` in nanoseconds with jiffies,
//!   so that never happens; nor here.) Think time is `bfq_update_io_thinktime`'s, short unless its
//!   mean exceeds half of `slice_idle`. The kernel also injects a waker queue's and the same
//!   process's async I/O first (waker detection); not modelled. Injected service is accounted
//!   as the kernel does (`bfq_bfqq_served` for a queue not in service): the virtual times
//!   advance at once, and the service counts against the queue's budget, but it moves the
//!   queue's and its cgroups' timestamps only if they leave the race before their next turn
//!   (`__bfq_deactivate_entity`, which also gives the budget back); their next turn forgets
//!   it (`bfq_get_next_queue`). A queue served only by injection pays when it empties; one
//!   that stays busy, and a cgroup with other busy queues, do not ([`FairQueue::serve_aside`]).

use super::PolicyInfo;
use crate::fq::{CgroupTree, FairQueue, FqGroupId, LeafId};
use crate::group::{GroupId, Groups};
use crate::ioprio::IoPrioClass;
use crate::ordmap::OrdMap;
use crate::policy::{Dispatch, HeldBy, Policy};
use crate::request::{
    merge_back, merge_front, mergeable, FlowId, MergeLimits, Op, Request, RequestId,
};
use crate::time::{from_millis, Nanos, MILLISECOND, SECOND};
use crate::tunable::{TunableError, TunableSpec, Unit};
use rustc_hash::FxHashMap as HashMap;
use rustc_hash::FxHashSet as HashSet;
use std::collections::{BTreeMap, VecDeque};

/// BFQ's tunables, with Linux's names and defaults.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "slice_idle",
        unit: Unit::Milliseconds,
        default: 8,
        min: 0,
        max: 1_000,
        doc: "how long the disk waits for the next request of a sync queue that ran out",
    },
    TunableSpec {
        name: "timeout_sync",
        unit: Unit::Milliseconds,
        default: 125,
        min: 1,
        max: 10_000,
        doc: "longest turn of a queue in service (its budget timeout)",
    },
    TunableSpec {
        name: "max_budget",
        unit: Unit::Kibibytes,
        default: 0,
        min: 0,
        max: 1 << 20,
        doc: "largest budget; 0 computes it from the peak rate times timeout_sync",
    },
    TunableSpec {
        name: "fifo_expire_sync",
        unit: Unit::Milliseconds,
        default: 125,
        min: 0,
        max: 3_600_000,
        doc: "a sync request older than this is served first at its queue's next turn",
    },
    TunableSpec {
        name: "fifo_expire_async",
        unit: Unit::Milliseconds,
        default: 250,
        min: 0,
        max: 3_600_000,
        doc: "an async request older than this is served first at its queue's next turn",
    },
    TunableSpec {
        name: "back_seek_max",
        unit: Unit::Kibibytes,
        default: 16_384,
        min: 0,
        max: 1 << 30,
        doc: "farthest backward seek considered",
    },
    TunableSpec {
        name: "back_seek_penalty",
        unit: Unit::Count,
        default: 2,
        min: 1,
        max: 1_000,
        doc: "how many times a backward seek counts its distance",
    },
    TunableSpec {
        name: "low_latency",
        unit: Unit::Flag,
        default: 1,
        min: 0,
        max: 1,
        doc: "weight-raise a sync queue that starts after 2 s of silence (interactive), 30 times \
              its weight for a time the peak rate sets",
    },
    TunableSpec {
        name: "wr_max_time",
        unit: Unit::Milliseconds,
        default: 0,
        min: 0,
        max: 3_600_000,
        doc: "how long an interactive queue stays weight-raised; 0 computes it from the peak \
              rate, 3 to 25 s (bfq_wr_duration)",
    },
    TunableSpec {
        name: "wr_max_softrt_rate",
        unit: Unit::Count,
        default: 7000,
        min: 0,
        max: 1 << 30,
        doc: "sectors per second below which a queue that comes back on time is soft \
              real-time and raised 3000 times for 300 ms at a time (bfq_wr_max_softrt_rate); 0 \
              turns soft real-time raising off",
    },
];

/// `bfq_wr_coeff`: the factor of an interactive queue's weight while raised.
const WR_COEFF: u32 = 30;
/// `BFQ_SOFTRT_WEIGHT_FACTOR`: a soft real-time queue weighs this many times more again.
const SOFTRT_WEIGHT_FACTOR: u32 = 100;
/// `bfq_wr_rt_max_time`: a soft real-time raising lasts this long, recharged each time the
/// queue comes back on time.
const WR_RT_MAX_TIME: Nanos = 300 * MILLISECOND;
/// The weight of the default priority (BE 4, `(8 - 4) x 10`): only queues of this weight are
/// raised, the kernel assuming any other was set on purpose (`entity.new_weight == 40`).
const DEFAULT_WEIGHT: u32 = 40;
/// The kernel's four jiffies of margin in `bfq_bfqq_softrt_next_start` (HZ=1000).
const SOFTRT_MARGIN: Nanos = 4 * MILLISECOND;
/// `bfq_burst_interval` and `bfq_large_burst_thresh`: queues created within 180 ms of each
/// other form a burst, large from 8 queues.
const BURST_INTERVAL: Nanos = 180 * MILLISECOND;
const LARGE_BURST_THRESH: usize = 8;
/// `bfq_requests_within_timer`: busy periods begun on time that make a queue I/O-bound again.
const REQUESTS_WITHIN_TIMER: u32 = 120;
/// Think-time samples before the mean counts (`bfq_sample_valid`: more than 80).
const TTIME_SAMPLES_VALID: u64 = 80;
/// `BFQ_HW_QUEUE_THRESHOLD` and `BFQ_HW_QUEUE_SAMPLES`: the device queues commands if more
/// than 3 were in it at once, judged over 32 samples with enough requests around.
const HW_QUEUE_THRESHOLD: usize = 3;
const HW_QUEUE_SAMPLES: u32 = 32;
/// `bfq_wr_min_idle_time`: silence after which a queue that starts again is interactive.
const WR_MIN_IDLE_TIME: Nanos = 2 * SECOND;
/// `ref_rate[0] * ref_wr_duration[0]` for rotational devices: a device of 14000 << 16
/// sectors per microsecond (109 MB/s) raises for 7 s, slower ones longer (bfq_wr_duration).
const REF_RATE: u64 = 109_375_000;
const REF_WR_DURATION: Nanos = 7 * SECOND;
/// `BFQ_MIN_TT`: the idle wait of a seeky queue that is not raised, in a symmetric scenario
/// (`bfq_arm_slice_timer`).
const MIN_TT: Nanos = 2 * MILLISECOND;
/// A raised queue's idle wait is at least this long (`bfq_arm_slice_timer`).
const WR_MIN_IDLE_WAIT: Nanos = 20 * MILLISECOND;

/// This module's entries in the policy catalog (`iosched policies`).
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "bfq",
        aliases: &[],
        summary: "budget fair queueing over the common layer: per-flow budgets by ioprio weight, cgroups by io.weight, budget feedback, slice_idle, interactive and soft real-time weight raising, large-burst detection, I/O injection (Linux's BFQ)",
        tunables: TUNABLES,
        build: || Box::new(Bfq::new()),
    },
];

/// Default largest budget before the peak rate is known: 16384 sectors (`bfq_default_max_budget`).
const DEFAULT_MAX_BUDGET: u64 = 16_384 * 512;
/// A seek farther than this counts as random (`BFQ_SEEK_THR`, 800 sectors on disks).
const SEEK_THRESHOLD: u64 = 800 * 512;
/// Asynchronous service counts this many times (`bfq_async_charge_factor`).
const ASYNC_CHARGE_FACTOR: u64 = 3;
/// Priority levels per class: in `bfqq_request_over_limit` each class weighs this many
/// times the one below it (`IOPRIO_BE_NR`).
const IOPRIO_BE_NR: u64 = 8;
/// Per-flow history kept at most.
const MAX_FLOWS: usize = 4096;

/// BFQ's weight for an I/O priority level: `(8 - level) x 10`.
pub fn ioprio_weight(level: u8) -> u32 {
    (8 - u32::from(level.min(7))) * 10
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum QueueKey {
    Sync(FlowId),
    Async(GroupId, u8, u8),
}

/// A queue's handle: its slot in [`Queues`] and the slot's generation, so that a handle kept
/// past its queue's removal (in the burst list) finds nothing rather than the slot's next queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Qid {
    slot: u32,
    generation: u32,
}

/// The smallest sum of weights `s` at which a queue holding `held` requests (at least one) is
/// over its share of `limit_weight` (its depth limit times its weight) as
/// [`Bfq::over_limit`] rounds it, `(limit_weight + s / 2) / s <= held`, and stays over at
/// every larger sum: `held + 1` times `s`, less `s / 2`, grows with `s`, so the test holds from
/// some `s` on and is found by bisection.
fn smallest_sum_held(limit_weight: u64, held: u64) -> u64 {
    debug_assert!(held >= 1);
    let over = |s: u64| {
        u128::from(limit_weight) + u128::from(s / 2) < u128::from(held + 1) * u128::from(s)
    };
    // Over at `limit_weight + 1`: the share is then at most 1.
    let (mut below, mut at) = (0u64, limit_weight.saturating_add(1));
    while at - below > 1 {
        let middle = below + (at - below) / 2;
        if over(middle) {
            at = middle;
        } else {
            below = middle;
        }
    }
    at
}

impl Qid {
    /// The own key of a waiter of this queue ([`HeldBy::own`]), reported when the queue
    /// frees a request or leaves the race: its slot and its generation's low 29 bits, so
    /// that the top three bits stay clear, apart from every hold's key ([`queue_hold`],
    /// [`group_hold`]). A queue 2^29 generations apart in the same slot shares it, which can
    /// only give back a lane early, to be asked again.
    fn own(self) -> u64 {
        u64::from(self.generation & 0x1fff_ffff) << 32 | u64::from(self.slot)
    }
}

/// The key of the hold queue `key` puts on its waiters of kind `depth` ([`Over::Queue`]):
/// its own key with the kind in bits 61-62 (1 to 3). The waiters a hold holds are turned away
/// alike: one queue's of one kind, which share every step of `bfqq_request_over_limit`.
fn queue_hold(key: Qid, depth: Depth) -> u64 {
    key.own() | (depth as u64 + 1) << 61
}

/// Where [`Bfq::over_limit_at`] finds a queue over its share of the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Over {
    /// A cgroup on its path holds its share.
    Group(GroupId),
    /// The queue holds its share.
    Queue,
}

/// The key of the hold a cgroup puts on the waiters of kind `depth` of its queues
/// ([`Over::Group`]): the top bit, the kind in bits 61-62, the cgroup. Its waiters are turned
/// away alike while their queues race: the walk from the top cgroup down is theirs alike to
/// this cgroup, with one kind's depth; a queue out of the race, which no share binds, reports
/// its own key ([`Qid::own`]).
fn group_hold(group: GroupId, depth: Depth) -> u64 {
    1 << 63 | (depth as u64 + 1) << 61 | u64::from(group.0)
}

/// The kinds of I/O `bfq_limit_depth` gives a depth each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Depth {
    Read,
    SyncWrite,
    Async,
}

impl Depth {
    const ALL: [Depth; 3] = [Depth::Read, Depth::SyncWrite, Depth::Async];

    fn of(request: &Request) -> Depth {
        if request.op == Op::Read {
            Depth::Read
        } else if request.sync {
            Depth::SyncWrite
        } else {
            Depth::Async
        }
    }
}

/// The waiters bfq holds back by their queue's share ([`Policy::allocation_hold`]), in
/// what [`Policy::loosened`] needs to report every change that could let one in.
#[derive(Debug)]
struct Holds {
    /// Whether a waiter was held since every hold last loosened.
    any: bool,
    /// Every hold may have loosened (a queue forgotten, the groups or a tunable changed).
    all: bool,
    /// Queues marked since the last report ([`Queue::loosened`]).
    loosened: Vec<Qid>,
    /// Cgroups marked since the last report: one of their queues freed a request or left the
    /// race.
    groups: Vec<GroupId>,
    groups_marked: HashSet<GroupId>,
    /// The trees on the path of a cgroup's queue whose waiter was held since, above the level
    /// that held it: a share there grows only if a tree's weight sum fell
    /// ([`FairQueue::wsum_drops`]), which reports the holds that tree's falls loosen.
    drops: HashMap<FqGroupId, TreeHolds>,
    /// The trees whose sums fell, for [`Bfq::take_loosened`] (kept for its memory).
    fallen: Vec<FqGroupId>,
    /// Per class (RT, BE, IDLE), the sum of the root's weights a queue of that class divides
    /// its share by ([`Bfq::root_sums`]) below which a waiter held since could be let in
    /// ([`smallest_sum_held`]): the largest of those of the waiters held.
    sum: [u64; 3],
    /// The smallest depth of each kind ([`Depth`]) a waiter was held at since.
    limit: [usize; 3],
}

impl Default for Holds {
    fn default() -> Self {
        Holds {
            any: false,
            all: false,
            loosened: Vec::new(),
            groups: Vec::new(),
            groups_marked: HashSet::default(),
            drops: HashMap::default(),
            fallen: Vec::new(),
            sum: [0; 3],
            limit: [usize::MAX; 3],
        }
    }
}

/// The holds below one tree ([`Holds::drops`]).
#[derive(Debug, Default)]
struct TreeHolds {
    /// The tree's weight-sum drops per class when the first of them was held.
    drops: [u64; 3],
    /// Their keys ([`HeldBy::hold`]), at most [`TREE_HOLDS_MAX`]; past that, a fall there
    /// loosens every hold (`full`), so that a tree whose sum never falls does not keep the
    /// key of every queue ever held below it.
    keys: HashSet<u64>,
    full: bool,
}

/// Most hold keys a tree keeps ([`TreeHolds`]).
const TREE_HOLDS_MAX: usize = 4096;

impl Holds {
    /// Every hold loosened: none is left (the marks' memory is kept).
    fn clear(&mut self) {
        self.loosened.clear();
        self.groups.clear();
        self.groups_marked.clear();
        self.drops.clear();
        *self = Holds {
            loosened: std::mem::take(&mut self.loosened),
            groups: std::mem::take(&mut self.groups),
            groups_marked: std::mem::take(&mut self.groups_marked),
            drops: std::mem::take(&mut self.drops),
            fallen: std::mem::take(&mut self.fallen),
            ..Holds::default()
        };
    }
}

/// The queues in a slab: a request finds its queue by key once (`find`), and everything after
/// (the queue in service, the leaf's queue, the burst list) holds the handle, which indexes
/// the slab without hashing.
#[derive(Default)]
struct Queues {
    slots: Vec<(u32, Option<Queue>)>,
    free: Vec<u32>,
    index: HashMap<QueueKey, Qid>,
}

impl Queues {
    fn find(&self, key: &QueueKey) -> Option<Qid> {
        self.index.get(key).copied()
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn insert(&mut self, queue: Queue) -> Qid {
        let key = queue.key;
        let id = match self.free.pop() {
            Some(slot) => {
                let entry = &mut self.slots[slot as usize];
                entry.1 = Some(queue);
                Qid {
                    slot,
                    generation: entry.0,
                }
            }
            None => {
                let slot = u32::try_from(self.slots.len()).expect("bounded by MAX_FLOWS");
                self.slots.push((0, Some(queue)));
                Qid {
                    slot,
                    generation: 0,
                }
            }
        };
        self.index.insert(key, id);
        id
    }

    fn remove(&mut self, id: Qid) -> Option<Queue> {
        let entry = self.slots.get_mut(id.slot as usize)?;
        if entry.0 != id.generation {
            return None;
        }
        let queue = entry.1.take()?;
        entry.0 = entry.0.wrapping_add(1);
        self.free.push(id.slot);
        self.index.remove(&queue.key);
        Some(queue)
    }

    fn get(&self, id: &Qid) -> Option<&Queue> {
        match self.slots.get(id.slot as usize) {
            Some((generation, queue)) if *generation == id.generation => queue.as_ref(),
            _ => None,
        }
    }

    fn get_mut(&mut self, id: &Qid) -> Option<&mut Queue> {
        match self.slots.get_mut(id.slot as usize) {
            Some((generation, queue)) if *generation == id.generation => queue.as_mut(),
            _ => None,
        }
    }

    /// The live queues with their handles, in slot order.
    fn iter(&self) -> impl Iterator<Item = (Qid, &Queue)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(slot, (generation, queue))| {
                queue.as_ref().map(|queue| {
                    (
                        Qid {
                            slot: slot as u32,
                            generation: *generation,
                        },
                        queue,
                    )
                })
            })
    }

    fn values(&self) -> impl Iterator<Item = &Queue> {
        self.slots.iter().filter_map(|(_, queue)| queue.as_ref())
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Queue> {
        self.slots.iter_mut().filter_map(|(_, queue)| queue.as_mut())
    }
}

impl std::ops::Index<&Qid> for Queues {
    type Output = Queue;

    fn index(&self, id: &Qid) -> &Queue {
        self.get(id).expect("live queue")
    }
}

#[cfg(test)]
impl std::ops::Index<&QueueKey> for Queues {
    type Output = Queue;

    fn index(&self, key: &QueueKey) -> &Queue {
        &self[&self.find(key).expect("queue of that key")]
    }
}

#[derive(Debug)]
struct Entry {
    request: Request,
    expires: Nanos,
}

struct Queue {
    /// What requests find it by.
    key: QueueKey,
    leaf: LeafId,
    sort: OrdMap<(u64, RequestId), Entry>,
    fifo: OrdMap<(Nanos, RequestId), u64>,
    in_flight: usize,
    budget: u64,
    sync: bool,
    /// The end of the last request dispatched, for the elevator and the seek history.
    last_end: u64,
    /// One bit per recent request: whether it started far from where the previous ended.
    seek_history: u32,
    group: GroupId,
    /// When its last request completed.
    last_completion: Nanos,
    /// Its weight from its priority, before any raising.
    weight: u32,
    /// 1, or [`WR_COEFF`] while weight-raised (`wr_coeff`).
    wr_coeff: u32,
    /// Whether it is counted in [`Bfq::wr_busy_queues`]: weight-raised and active in the
    /// fair queue.
    wr_busy: bool,
    /// When its raising started (`last_wr_start_finish`) and how long it lasts
    /// (`wr_cur_max_time`): [`WR_RT_MAX_TIME`] while soft real-time.
    wr_start: Nanos,
    wr_duration: Nanos,
    /// Soft real-time detection: the earliest time the queue may become busy again and count
    /// as soft real-time (`soft_rt_next_start`), when it last became busy
    /// (`last_idle_bklogged`), the bytes served since (`service_from_backlogged`), whether
    /// `soft_rt_next_start` waits for its requests in flight to complete
    /// (`softrt_update`), and when an interactive raising that turned soft real-time started
    /// (`wr_start_at_switch_to_srt`; `None`: long ago).
    soft_rt_next_start: Nanos,
    last_idle_bklogged: Nanos,
    service_from_backlogged: u64,
    softrt_update: bool,
    wr_start_at_switch_to_srt: Option<Nanos>,
    /// When its last turn would have timed out, or when a turn left it with nothing to do
    /// (`budget_timeout`, overloaded as the kernel does); 0 for a new queue.
    budget_timeout: Nanos,
    /// Think time (`bfq_update_io_thinktime`): samples, total and mean of the gaps from its
    /// last completion to its next request while it had nothing queued or in flight, each
    /// capped at twice `slice_idle`; and whether it is short (`has_short_ttime`: not known to
    /// exceed half of `slice_idle`).
    ttime_samples: u64,
    ttime_total: u64,
    ttime_mean: Nanos,
    short_ttime: bool,
    /// I/O-bound (`bfq_bfqq_IO_bound`, new queues are): it keeps its device busy, so idling
    /// for it pays. Lost when a turn ends too idle having used a fifth of its budget or less;
    /// regained after 120 busy periods each begun within 3 x `slice_idle` of its last
    /// completion (`requests_within_timer`).
    io_bound: bool,
    requests_within_timer: u32,
    /// I/O injection while it is in service and the disk waits for it: at most this many
    /// requests in the drive (`inject_limit`), adapted from its requests' total service time
    /// without injection (`last_serv_time_ns`) since its last decrease (`decrease_time_jif`).
    inject_limit: usize,
    last_serv_time: Nanos,
    decrease_time: Nanos,
    /// Service it received as injected I/O since its last turn began or it last left the
    /// race, against its budget (`entity->service` of a queue not in service, which
    /// `__bfq_deactivate_entity` resets).
    injected: u64,
    /// Its neighbours on [`Bfq::active_list`] (toward the head, toward the tail) while it is
    /// on it (`bfqq_list`).
    active_prev: Option<Qid>,
    active_next: Option<Qid>,
    on_active_list: bool,
    /// Created in a large burst of queues (`in_large_burst`): not weight-raised.
    in_large_burst: bool,
    /// Marked in [`Holds::loosened`] since the last report.
    loosened: bool,
    /// The kinds ([`Depth`], a bit each) of its waiters it has held itself since its last
    /// report ([`queue_hold`]), and whether a cgroup held one of them ([`group_hold`]): what
    /// [`Bfq::take_loosened`] reports when it is marked.
    held_kinds: u8,
    held_by_cgroup: bool,
}

/// `BFQQ_SEEKY` (block/bfq-iosched.h, Linux 4.16 on): more than 19 of the last 32 requests
/// started farther than `BFQ_SEEK_THR` from where the previous one ended.
fn seeky_history(history: u32) -> bool {
    history.count_ones() > 19
}

impl Queue {
    fn seeky(&self) -> bool {
        seeky_history(self.seek_history)
    }

    fn queued(&self) -> usize {
        self.sort.len()
    }
}

/// Why a turn ends (`enum bfqq_expiration`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expiration {
    TooIdle,
    BudgetTimeout,
    BudgetExhausted,
    NoMoreRequests,
    Preempted,
}

/// What a queue with requests queued or in the drive counts for in the idling decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Member {
    raised: bool,
    weight: u32,
    class: u8,
    group: GroupId,
}

/// The queues with requests queued or in the drive, counted by what `bfq_better_to_idle` and
/// `bfq_asymmetric_scenario` ask: how many, how many weight-raised, and which weights,
/// classes and groups they have. Kept as requests come and go, as the kernel keeps
/// `busy_queues`, `wr_busy_queues`, the queue weights tree and
/// `num_groups_with_pending_reqs`, so that the decision walks no list of queues.
#[derive(Debug, Default, PartialEq)]
struct Census {
    queues: usize,
    raised: usize,
    weights: BTreeMap<u32, usize>,
    classes: [usize; 4],
    groups: HashMap<GroupId, usize>,
}

impl Census {
    fn add(&mut self, member: Member) {
        self.queues += 1;
        self.raised += usize::from(member.raised);
        *self.weights.entry(member.weight).or_insert(0) += 1;
        self.classes[usize::from(member.class).min(3)] += 1;
        *self.groups.entry(member.group).or_insert(0) += 1;
    }

    fn remove(&mut self, member: Member) {
        fn release(count: Option<&mut usize>) -> bool {
            match count {
                Some(count) => {
                    *count -= 1;
                    *count == 0
                }
                None => false,
            }
        }
        self.queues -= 1;
        self.raised -= usize::from(member.raised);
        if release(self.weights.get_mut(&member.weight)) {
            self.weights.remove(&member.weight);
        }
        self.classes[usize::from(member.class).min(3)] -= 1;
        if release(self.groups.get_mut(&member.group)) {
            self.groups.remove(&member.group);
        }
    }

    /// Whether the queues counted, and `extra` if given, have more than one weight, class or
    /// group (`bfq_asymmetric_scenario`), as a queue of weight `own` sees it: the weights
    /// differing does not count for a queue of the smallest (`smallest_weight`: its share
    /// needs no idling to keep, the others' idling gives it).
    fn asymmetric(&self, extra: Option<Member>, own: u32) -> bool {
        let smallest = self
            .weights
            .keys()
            .next()
            .copied()
            .into_iter()
            .chain(extra.map(|m| m.weight))
            .min();
        let weights = if smallest == Some(own) {
            1
        } else {
            self.weights.len()
                + extra.map_or(0, |m| usize::from(!self.weights.contains_key(&m.weight)))
        };
        let classes = self.classes.iter().filter(|&&n| n > 0).count()
            + extra.map_or(0, |m| usize::from(self.classes[usize::from(m.class).min(3)] == 0));
        let groups = self.groups.len()
            + extra.map_or(0, |m| usize::from(!self.groups.contains_key(&m.group)));
        weights > 1 || classes > 1 || groups > 1
    }
}

/// The cgroups from `group` up to the one below the root (none for the root), as
/// `for_each_entity` walks a queue's groups; at most [`crate::limits::GROUP_DEPTH_MAX`] + 1.
fn cgroup_chain(cgroups: &CgroupTree, group: GroupId) -> impl Iterator<Item = GroupId> + '_ {
    std::iter::successors(Some(group), move |&group| Some(cgroups.parent(group)))
        .take_while(|&group| group != GroupId::ROOT)
        .take(crate::limits::GROUP_DEPTH_MAX + 1)
}

/// The BFQ policy.
pub struct Bfq {
    fq: FairQueue,
    cgroups: CgroupTree,
    queues: Queues,
    /// The queue of each leaf, by the leaf's index.
    by_leaf: Vec<Option<Qid>>,
    requeued: VecDeque<Request>,
    queued: usize,
    active: Option<Qid>,
    /// When the queue in service was put in service (`last_budget_start`).
    turn_start: Nanos,
    /// Bytes the queue in service dispatched this turn (the peak rate is measured on them).
    served: u64,
    /// The service those bytes cost it (`entity->service`, in [`Bfq::serv_to_charge`]'s
    /// units, as its budget is).
    service: u64,
    fifo_checked: bool,
    /// When the wait for the queue in service's next request ends ([`Bfq::idle_wait`] after
    /// it began, at `idle_since`).
    idle_until: Option<Nanos>,
    idle_since: Nanos,
    /// Device peak rate estimate, bytes per second.
    peak_rate: u64,
    /// Last head position, for the elevator.
    head: u64,
    // Tunables.
    slice_idle: Nanos,
    timeout_sync: Nanos,
    max_budget_setting: u64,
    fifo_expire: [Nanos; 2],
    back_seek_max: u64,
    back_seek_penalty: u64,
    low_latency: bool,
    wr_max_time: Nanos,
    /// Sectors per second (`wr_max_softrt_rate`).
    wr_max_softrt_rate: u64,
    /// Queues weight-raised now.
    raised: usize,
    /// Queues weight-raised and active in the fair queue (`wr_busy_queues`), kept as either
    /// changes ([`Bfq::recount_wr_busy`]): `limit_depth` reads it at every allocation, and
    /// with many queues a walk over them there was most of a deep job's cost.
    wr_busy_queues: usize,
    /// The queues with requests queued or in the drive, counted as the idling decision asks.
    census: Census,
    /// Requests in the drive (`tot_rq_in_driver`) and the most seen lately
    /// (`max_rq_in_driver`); whether the drive queues commands (`hw_tag`, from samples as
    /// `bfq_update_hw_tag`: `None` until known, taken as queueing).
    in_driver: usize,
    max_in_driver: usize,
    hw_tag: Option<bool>,
    hw_tag_samples: u32,
    /// Injection's measurement of the queue in service (`bfq_update_inject_limit`): requests
    /// were injected since it became busy (`rqs_injected`), the next of its requests to be
    /// dispatched is to be timed (`wait_dispatch`), the one being timed (`waited_rq`), and
    /// when the measurement began (`last_empty_occupied_ns`).
    rqs_injected: bool,
    /// The queues active in the fair queue, the one that entered the race or was requeued in
    /// it last first (the kernel's `active_list`, `bfq_active_insert`): injection takes the
    /// first with a request that fits, as the kernel walks it.
    active_list: Option<Qid>,
    wait_dispatch: bool,
    waited_rq: Option<RequestId>,
    last_empty_occupied: Nanos,
    /// Burst detection (`bfq_handle_burst`): the queues of the current burst while it is
    /// not yet large, whether it is, when its last queue was created, and its group.
    burst_list: Vec<Qid>,
    large_burst: bool,
    last_ins_in_burst: Nanos,
    burst_group: Option<GroupId>,
    /// The requests each cgroup's queues hold, queued or in the drive, its descendants'
    /// included (the kernel's `entity->allocated` of a group, `bfqq_request_allocated`), kept
    /// as queues take and free them; `bfqq_request_over_limit` reads them at every
    /// allocation. Cgroups holding none are absent.
    held_by_group: HashMap<GroupId, u64>,
    /// The waiters held back by their queue's share, as [`Policy::loosened`] needs them.
    holds: Holds,
}

impl Default for Bfq {
    fn default() -> Self {
        Self::new()
    }
}

impl Bfq {
    /// BFQ with Linux's defaults.
    pub fn new() -> Self {
        Bfq {
            fq: FairQueue::new(),
            cgroups: CgroupTree::new(),
            queues: Queues::default(),
            by_leaf: Vec::new(),
            requeued: VecDeque::new(),
            queued: 0,
            active: None,
            turn_start: 0,
            served: 0,
            service: 0,
            fifo_checked: false,
            idle_until: None,
            idle_since: 0,
            peak_rate: 0,
            head: 0,
            slice_idle: from_millis(TUNABLES[0].default),
            timeout_sync: from_millis(TUNABLES[1].default),
            max_budget_setting: TUNABLES[2].default * 1024,
            fifo_expire: [
                from_millis(TUNABLES[3].default),
                from_millis(TUNABLES[4].default),
            ],
            back_seek_max: TUNABLES[5].default * 1024,
            back_seek_penalty: TUNABLES[6].default,
            low_latency: TUNABLES[7].default == 1,
            wr_max_time: from_millis(TUNABLES[8].default),
            wr_max_softrt_rate: TUNABLES[9].default,
            raised: 0,
            wr_busy_queues: 0,
            held_by_group: HashMap::default(),
            census: Census::default(),
            in_driver: 0,
            max_in_driver: 0,
            hw_tag: None,
            hw_tag_samples: 0,
            rqs_injected: false,
            active_list: None,
            wait_dispatch: false,
            waited_rq: None,
            last_empty_occupied: 0,
            burst_list: Vec::with_capacity(LARGE_BURST_THRESH),
            large_burst: false,
            last_ins_in_burst: 0,
            burst_group: None,
            holds: Holds::default(),
        }
    }

    /// `bfq_wr_duration`: how long an interactive queue is raised, inversely proportional
    /// to the device's peak rate (7 s at 109 MB/s), between 3 and 25 s; `wr_max_time` if set.
    fn wr_duration(&self) -> Nanos {
        if self.wr_max_time > 0 {
            return self.wr_max_time;
        }
        let rate = if self.peak_rate == 0 {
            REF_RATE
        } else {
            self.peak_rate
        };
        let duration = u128::from(REF_RATE) * u128::from(REF_WR_DURATION) / u128::from(rate);
        (duration as Nanos).clamp(3 * SECOND, 25 * SECOND)
    }

    /// What queue `key` counts for in the census, whether busy or not.
    fn member_of(&self, key: Qid) -> Option<Member> {
        let queue = self.queues.get(&key)?;
        Some(Member {
            raised: queue.wr_coeff > 1,
            weight: self.fq.weight(queue.leaf).unwrap_or(0),
            class: self.fq.class(queue.leaf).map_or(0, |c| c as u8),
            group: queue.group,
        })
    }

    /// What queue `key` counts for in the census: nothing unless it has requests queued or
    /// in the drive.
    fn member(&self, key: Qid) -> Option<Member> {
        let queue = self.queues.get(&key)?;
        if queue.queued() == 0 && queue.in_flight == 0 {
            return None;
        }
        self.member_of(key)
    }

    /// What queue `key`, in service, adds to the census when it counts in it as busy, which
    /// the kernel's in-service queue is (`idling_needed_for_service_guarantees`): nothing if
    /// it is counted already.
    fn in_service_extra(&self, key: Qid) -> Option<Member> {
        match self.member(key) {
            Some(_) => None,
            None => self.member_of(key),
        }
    }

    /// Brings the census up to date with queue `key`, which counted as `before` ahead of the
    /// change just made to it.
    fn recount(&mut self, key: Qid, before: Option<Member>) {
        let after = self.member(key);
        if before != after {
            if let Some(before) = before {
                self.census.remove(before);
            }
            if let Some(after) = after {
                self.census.add(after);
            }
        }
        debug_assert_eq!(self.census, self.census_from_scratch(), "census after {key:?}");
    }

    /// The census counted queue by queue (to rebuild it, and to check it in debug builds).
    fn census_from_scratch(&self) -> Census {
        let mut census = Census::default();
        for (key, _) in self.queues.iter() {
            if let Some(member) = self.member(key) {
                census.add(member);
            }
        }
        census
    }

    /// Whether a weight-raised queue is busy (`wr_busy_queues > 0`).
    fn wr_busy(&self) -> bool {
        debug_assert_eq!(
            self.wr_busy_queues,
            self.queues
                .values()
                .filter(|q| q.wr_coeff > 1 && self.fq.is_active(q.leaf).unwrap_or(false))
                .count(),
            "wr_busy_queues kept in step"
        );
        self.wr_busy_queues > 0
    }

    /// Counts queue `key` in `wr_busy_queues` or not, after its raising or its activity in
    /// the fair queue may have changed. Out of line: inlined into the hot paths that call it
    /// (insertion, dispatch, expiry), it made bfq with 4 readers 4% slower.
    #[inline(never)]
    fn recount_wr_busy(&mut self, key: Qid) {
        if self.raised == 0 && self.wr_busy_queues == 0 {
            // No queue is raised, so none is counted (ending a raising recounts its queue).
            return;
        }
        let queue = self.queues.get_mut(&key).expect("live queue");
        let busy = queue.wr_coeff > 1 && self.fq.is_active(queue.leaf).expect("live leaf");
        if busy != queue.wr_busy {
            queue.wr_busy = busy;
            if busy {
                self.wr_busy_queues += 1;
            } else {
                self.wr_busy_queues -= 1;
            }
        }
    }

    /// A request taken (`up`) or freed by a queue of cgroup `group`: counted in it and its
    /// ancestors below the root (`bfqq_request_allocated`, `bfqq_request_freed`).
    /// Out of line: inlined into insertion and completion, its check for the root alone made
    /// bfq with 4 readers 4% slower (how the hot functions were laid out, not instructions).
    #[inline(never)]
    fn hold(&mut self, group: GroupId, up: bool) {
        for group in cgroup_chain(&self.cgroups, group) {
            let held = self.held_by_group.entry(group).or_insert(0);
            if up {
                *held += 1;
            } else {
                // Every request freed was taken (a debug build checks): a count that wrapped
                // would turn the group's queues away for good.
                debug_assert!(*held > 0, "a request freed that its cgroup did not hold");
                *held = held.saturating_sub(1);
                if *held == 0 {
                    self.held_by_group.remove(&group);
                }
            }
        }
    }

    /// One of queue `key`'s requests left the drive (completed, or handed back to be sent
    /// again): one fewer in flight, and one fewer held by its cgroups.
    fn leave_drive(&mut self, key: Qid) {
        let queue = self.queues.get_mut(&key).expect("live queue");
        if queue.in_flight > 0 {
            queue.in_flight -= 1;
            let group = queue.group;
            self.hold(group, false);
            self.loosen(key);
        }
    }

    /// [`Bfq::held_by_group`] counted from the queues.
    fn held_from_scratch(&self) -> HashMap<GroupId, u64> {
        let mut held = HashMap::<GroupId, u64>::default();
        for queue in self.queues.values() {
            let count = (queue.queued() + queue.in_flight) as u64;
            if count > 0 {
                for group in cgroup_chain(&self.cgroups, queue.group) {
                    *held.entry(group).or_insert(0) += count;
                }
            }
        }
        held
    }

    /// Sets queue `key`'s weight raising to `coeff` (its leaf weighs its weight times it, at
    /// most the layer's largest weight), starting now for the interactive duration.
    fn set_wr_coeff(&mut self, key: Qid, coeff: u32, now: Nanos) {
        let duration = self.wr_duration();
        self.set_wr(key, coeff, now, duration);
    }

    /// Sets queue `key`'s weight raising to `coeff` for `duration` from `now` (when raised).
    fn set_wr(&mut self, key: Qid, coeff: u32, now: Nanos, duration: Nanos) {
        let before = self.member(key);
        let queue = self.queues.get_mut(&key).expect("live queue");
        if coeff > 1 {
            queue.wr_start = now;
            queue.wr_duration = duration;
        }
        if queue.wr_coeff == coeff {
            return;
        }
        if coeff > 1 && queue.wr_coeff == 1 {
            self.raised += 1;
        } else if coeff == 1 {
            self.raised -= 1;
        }
        queue.wr_coeff = coeff;
        let weight = u64::from(queue.weight) * u64::from(coeff);
        let (leaf, weight) = (queue.leaf, weight.min(10_000) as u32);
        self.fq.set_weight(leaf, weight).expect("weights are within range");
        // A heavier queue's share grows (a lighter one's weight sum falls, which
        // `take_loosened` sees).
        self.loosen(key);
        self.recount_wr_busy(key);
        self.recount(key, before);
    }

    /// `bfq_update_wr_data`'s end of a raising: at once for a queue of a large burst (the
    /// kernel ends it at the queue's next dispatch, so that queues raised before their burst
    /// was known to be large do not keep it while they stay busy); else when its time is up at
    /// `now`, a soft real-time raising that interrupted an interactive one still within its
    /// own time going back to it (`switch_back_to_interactive_wr`), any other ending
    /// (`bfq_bfqq_end_wr`).
    fn end_wr_if_due(&mut self, key: Qid, now: Nanos) {
        let queue = &self.queues[&key];
        if queue.wr_coeff > 1 && queue.in_large_burst {
            self.set_wr(key, 1, now, 0);
            return;
        }
        if queue.wr_coeff == 1 || now.saturating_sub(queue.wr_start) < queue.wr_duration {
            return;
        }
        let duration = self.wr_duration();
        let queue = &self.queues[&key];
        match queue.wr_start_at_switch_to_srt {
            Some(start)
                if queue.wr_duration == WR_RT_MAX_TIME
                    && now.saturating_sub(start) < duration =>
            {
                self.set_wr(key, WR_COEFF, start, duration);
            }
            _ => self.set_wr(key, 1, now, 0),
        }
    }

    /// `bfq_bfqq_softrt_next_start`: the earliest time queue `key` may become busy again and be
    /// soft real-time: no sooner than the bandwidth it took since it last became busy allows
    /// at `wr_max_softrt_rate`, and than `slice_idle` and four jiffies from `now`.
    fn softrt_next_start(&self, key: Qid, now: Nanos) -> Nanos {
        let queue = &self.queues[&key];
        let rate = self.wr_max_softrt_rate.max(1);
        let sectors = queue.service_from_backlogged / 512;
        let by_rate = queue.last_idle_bklogged.saturating_add(
            (u128::from(sectors) * u128::from(SECOND) / u128::from(rate)).min(u128::from(u64::MAX))
                as Nanos,
        );
        queue
            .soft_rt_next_start
            .max(by_rate)
            .max(now + self.slice_idle + SOFTRT_MARGIN)
    }

    /// `bfq_update_io_thinktime` and `bfq_update_has_short_ttime`, as a sync request of queue
    /// `key` arrives at `now`: a gap counts only when the queue had nothing queued or in
    /// flight; the think time is short unless its mean, over enough samples, exceeds half of
    /// `slice_idle`. A change resets the injection limit, as the kernel does when no base
    /// service time is known; and every second the limit starts afresh
    /// (`bfq_reset_inject_limit`), so that it drops if the workload changed.
    fn update_think_time(&mut self, key: Qid, now: Nanos) {
        let slice_idle = self.slice_idle;
        let queue = self.queues.get_mut(&key).expect("live queue");
        if queue.in_flight == 0 && queue.sort.is_empty() && queue.last_completion > 0 {
            let elapsed = now.saturating_sub(queue.last_completion).min(2 * slice_idle);
            queue.ttime_samples = (7 * queue.ttime_samples + 256) / 8;
            queue.ttime_total = (7 * queue.ttime_total + 256 * elapsed) / 8;
            queue.ttime_mean = (queue.ttime_total + 128) / queue.ttime_samples;
        }
        let short = !(queue.ttime_samples > TTIME_SAMPLES_VALID
            && queue.ttime_mean > slice_idle / 2);
        let changed = short != queue.short_ttime;
        queue.short_ttime = short;
        let stale = now >= queue.decrease_time.saturating_add(SECOND);
        let quick = now >= queue.decrease_time.saturating_add(100 * MILLISECOND);
        if stale || (changed && queue.last_serv_time == 0 && (quick || !short)) {
            self.reset_inject_limit(key, now);
        }
    }

    /// `bfq_reset_inject_limit`: no base service time, and a limit of 0 for a queue with a
    /// short think time (an injected request could delay its next one), 1 otherwise.
    fn reset_inject_limit(&mut self, key: Qid, now: Nanos) {
        let queue = self.queues.get_mut(&key).expect("live queue");
        queue.last_serv_time = 0;
        queue.inject_limit = usize::from(!queue.short_ttime);
        queue.decrease_time = now;
        self.waited_rq = None;
    }

    /// `bfq_add_request`'s start of a measurement: a request of the queue in service that
    /// arrives with nothing in the drive (or with injected requests there, once a base time is
    /// known), and not within 10 ms of a decrease, will have its total service time taken from
    /// now to its completion.
    fn start_inject_measure(&mut self, key: Qid, now: Nanos) {
        let queue = &self.queues[&key];
        let ready = self.in_driver == 0
            || (queue.last_serv_time > 0 && self.rqs_injected && self.in_driver > 0);
        if ready && now >= queue.decrease_time.saturating_add(10 * MILLISECOND) {
            self.last_empty_occupied = now;
            self.wait_dispatch = true;
            if self.in_driver == 0 {
                self.rqs_injected = false;
            }
        }
    }

    /// `bfq_update_inject_limit`, when the timed request of queue `key` completes at `now`
    /// (before it leaves the drive's count): with injected requests around, a total time of
    /// 1.5 times the base or more lowers the limit, a shorter one raises it up to one more
    /// than the drive has held; with nothing else in the drive the time becomes the base (or
    /// a shorter one lowers it).
    fn update_inject_limit(&mut self, key: Qid, now: Nanos) {
        let total = now.saturating_sub(self.last_empty_occupied);
        let (in_driver, max_in_driver, injected) =
            (self.in_driver, self.max_in_driver, self.rqs_injected);
        let queue = self.queues.get_mut(&key).expect("live queue");
        let old = queue.inject_limit;
        if queue.last_serv_time > 0 && injected {
            let threshold = queue.last_serv_time * 3 / 2;
            if total >= threshold && old > 0 {
                queue.inject_limit -= 1;
                queue.decrease_time = now;
            } else if total < threshold && old <= max_in_driver {
                queue.inject_limit += 1;
            }
        }
        if (queue.last_serv_time == 0 && in_driver == 1) || total < queue.last_serv_time {
            if queue.last_serv_time == 0 {
                queue.inject_limit = old.max(1);
            }
            queue.last_serv_time = total;
        } else if !injected && in_driver == 1 {
            queue.last_serv_time = total;
        }
        self.waited_rq = None;
        self.rqs_injected = false;
    }

    /// `bfq_update_hw_tag`, at each completion: whether the drive queues commands, from the
    /// most it held over 32 samples taken while enough requests were around.
    fn update_hw_tag(&mut self) {
        self.max_in_driver = self.max_in_driver.max(self.in_driver);
        if self.hw_tag == Some(true) || self.in_driver + self.queued <= HW_QUEUE_THRESHOLD {
            return;
        }
        if let Some(queue) = self.active.and_then(|key| self.queues.get(&key)) {
            if queue.short_ttime
                && queue.in_flight + queue.queued() < HW_QUEUE_THRESHOLD
                && self.in_driver < HW_QUEUE_THRESHOLD
            {
                return;
            }
        }
        self.hw_tag_samples += 1;
        if self.hw_tag_samples < HW_QUEUE_SAMPLES {
            return;
        }
        self.hw_tag = Some(self.max_in_driver > HW_QUEUE_THRESHOLD);
        self.max_in_driver = 0;
        self.hw_tag_samples = 0;
    }

    /// `idling_boosts_thr_without_issues`: idling for queue `key` is worth it for throughput
    /// alone: on a drive that does not queue commands, or for a sequential, I/O-bound queue
    /// with a short think time; and no weight-raised queue is busy.
    fn idling_boosts_throughput(&self, key: Qid) -> bool {
        let queue = &self.queues[&key];
        let rotational_without_queueing = self.hw_tag == Some(false);
        let sequential = !queue.seeky() && queue.io_bound && queue.short_ttime;
        (rotational_without_queueing || sequential) && !self.wr_busy()
    }

    /// I/O injection (`bfq_select_queue` with `bfq_choose_bfqq_for_injection`, Linux 5.2+):
    /// while the disk waits for queue `key` in service, a request of another busy queue goes
    /// to the drive, unless idling already pays for throughput, the waiting queue is
    /// weight-raised with a short think time while no other raised queue is busy, or the
    /// drive holds `inject_limit` requests already. Only raised queues may inject into a
    /// raised queue with a short think time. The candidate's next request fits in what its
    /// budget has left; the candidate that entered the race or was requeued last goes (the
    /// first on the kernel's `active_list`). As in Linux, the service advances the virtual
    /// times at once (`bfq_bfqq_served`) but goes on the injected queue's tags, and on its
    /// cgroups', only if it leaves the race before its next turn, which forgets it
    /// ([`FairQueue::serve_aside`]); it leaves the busy ones when it has nothing more queued.
    fn inject(&mut self, key: Qid) -> Option<Request> {
        if self.idling_boosts_throughput(key) {
            return None;
        }
        let waiting = &self.queues[&key];
        let raised_elsewhere = self.raised > 1;
        if !(waiting.wr_coeff == 1 || raised_elsewhere || !waiting.short_ttime) {
            return None;
        }
        if self.in_driver >= waiting.inject_limit {
            return None;
        }
        let always = waiting.wr_coeff == 1 || !waiting.short_ttime;
        // The busy queues with requests queued, from the one that entered the race or was
        // requeued last, as the kernel walks `active_list`: the first whose next request fits
        // goes.
        let (other, pick, charge) = std::iter::successors(self.active_list, |k| {
            self.queues[k].active_next
        })
        .filter(|&k| k != key)
        .find_map(|k| {
            let q = &self.queues[&k];
            if q.sort.is_empty() || !(always || q.wr_coeff > 1) {
                return None;
            }
            debug_assert!(self.fq.is_active(q.leaf).unwrap_or(false), "listed while active");
            let pick = self.next_in(q)?;
            // bfq_choose_bfqq_for_injection: its next request's charge within what is left
            // of its budget.
            let charge = self.serv_to_charge(k, q.sort[&pick].request.len);
            (q.injected + charge <= q.budget.max(charge)).then_some((k, pick, charge))
        })?;
        self.rqs_injected = true;
        let request = self.remove_for_dispatch(other, pick);
        let queue = self.queues.get_mut(&other).expect("live queue");
        queue.injected += charge;
        let (leaf, empty) = (queue.leaf, queue.sort.is_empty());
        if empty {
            queue.injected = 0;
        }
        // Service out of turn: the virtual times advance, the queue's and its cgroups' tags
        // wait for their next turn (which forgets it) or for leaving the race (which charges
        // it), as `bfq_bfqq_served` and `entity->service` do for a queue not in service.
        self.fq.serve_aside(leaf, charge.max(1)).expect("live leaf");
        if empty {
            self.fq.deactivate(leaf).expect("live leaf");
            self.leave_active_list(other);
            self.loosen(other);
            self.recount_wr_busy(other);
        }
        Some(request)
    }

    /// `bfq_serv_to_charge`: the service a request of `len` bytes costs queue `key`, in its
    /// budget's units: its bytes for a sync or weight-raised queue, or while the scenario is
    /// asymmetric (`bfq_asymmetric_scenario`); three times them for an async queue otherwise
    /// (`bfq_async_charge_factor`), so that its turns are shorter and cost it more.
    fn serv_to_charge(&self, key: Qid, len: u64) -> u64 {
        let queue = &self.queues[&key];
        if queue.sync || queue.wr_coeff > 1 {
            return len;
        }
        if self.asymmetric_for(key) {
            len
        } else {
            len.saturating_mul(ASYNC_CHARGE_FACTOR)
        }
    }

    /// Queue `key` enters the race or is requeued in it: the latest on `active_list`.
    fn entered(&mut self, key: Qid) {
        self.leave_active_list(key);
        let head = self.active_list.replace(key);
        if let Some(head) = head {
            self.queues.get_mut(&head).expect("listed").active_prev = Some(key);
        }
        let queue = self.queues.get_mut(&key).expect("live queue");
        (queue.active_prev, queue.active_next, queue.on_active_list) = (None, head, true);
    }

    /// Queue `key` leaves the race: off `active_list` (`bfq_active_extract`), if on it.
    fn leave_active_list(&mut self, key: Qid) {
        let queue = self.queues.get_mut(&key).expect("live queue");
        if !std::mem::take(&mut queue.on_active_list) {
            return;
        }
        let (prev, next) = (queue.active_prev.take(), queue.active_next.take());
        match prev {
            Some(prev) => self.queues.get_mut(&prev).expect("listed").active_next = next,
            None => self.active_list = next,
        }
        if let Some(next) = next {
            self.queues.get_mut(&next).expect("listed").active_prev = prev;
        }
    }

    /// `bfq_bfqq_handle_idle_busy_switch` with `bfq_update_bfqq_wr_on_rq_arrival` and
    /// `bfq_update_wr_data`, for a queue that just became busy at `now`: raising that has
    /// lasted its time ends (or goes back to interactive); a sync queue of the default weight
    /// silent for `bfq_wr_min_idle_time` (or new) is interactive, raised 30 times for
    /// `bfq_wr_duration`; one that comes back no sooner than its `soft_rt_next_start` with
    /// nothing in flight and is not totally seeky is soft real-time, raised 3000 times for
    /// 300 ms, recharged at each such return. Then its backlog starts afresh.
    fn update_weight_raising(&mut self, key: Qid, now: Nanos) {
        // bfq_bfqq_handle_idle_busy_switch: back within 3 x slice_idle of its last completion,
        // 120 times in a row, it is I/O-bound again.
        let window = 3 * self.slice_idle;
        let queue = self.queues.get_mut(&key).expect("live queue");
        if !queue.io_bound {
            if now <= queue.last_completion.saturating_add(window) {
                queue.requests_within_timer += 1;
                if queue.requests_within_timer >= REQUESTS_WITHIN_TIMER {
                    queue.io_bound = true;
                }
            } else {
                queue.requests_within_timer = 0;
            }
        }
        self.end_wr_if_due(key, now);
        let queue = self.queues.get_mut(&key).expect("live queue");
        // bfq_bfqq_idle_for_long_time: nothing in the drive, and 2 s since its last turn's
        // timeout or since it was left with nothing to do (a new queue always).
        let idle_for_long = queue.in_flight == 0
            && (now > queue.budget_timeout.saturating_add(WR_MIN_IDLE_TIME)
                || queue.budget_timeout == 0);
        // Idle for long, and 10 s past its last turn: no longer counted in its burst.
        if queue.budget_timeout > 0
            && idle_for_long
            && now > queue.budget_timeout.saturating_add(10 * SECOND)
        {
            queue.in_large_burst = false;
        }
        let queue = &self.queues[&key];
        let in_burst = queue.in_large_burst;
        let default_weight = queue.weight == DEFAULT_WEIGHT
            && self.fq.class(queue.leaf).expect("live leaf") != IoPrioClass::Idle;
        let soft_rt = self.wr_max_softrt_rate > 0
            && !in_burst
            && queue.seek_history != u32::MAX
            && now > queue.soft_rt_next_start
            && queue.in_flight == 0
            && default_weight;
        let interactive = !in_burst && idle_for_long && default_weight;
        let deserves = self.low_latency
            && (queue.wr_coeff > 1 || (queue.sync && (interactive || soft_rt)));
        if deserves {
            let (coeff, duration) = (queue.wr_coeff, queue.wr_duration);
            if coeff == 1 {
                if interactive {
                    self.set_wr_coeff(key, WR_COEFF, now);
                } else {
                    self.queues.get_mut(&key).expect("live").wr_start_at_switch_to_srt = None;
                    self.set_wr(key, WR_COEFF * SOFTRT_WEIGHT_FACTOR, now, WR_RT_MAX_TIME);
                }
                // bfq_update_bfqq_wr_on_rq_arrival: a budget close to its backlog, for
                // latency, and not too small, for fewer expirations.
                let cut = 2 * self.min_budget();
                let queue = self.queues.get_mut(&key).expect("live");
                queue.budget = queue.budget.min(cut);
            } else if interactive {
                self.set_wr_coeff(key, WR_COEFF, now);
            } else if in_burst {
                self.set_wr(key, 1, now, 0);
            } else if soft_rt {
                if duration != WR_RT_MAX_TIME {
                    let queue = self.queues.get_mut(&key).expect("live");
                    queue.wr_start_at_switch_to_srt = Some(queue.wr_start);
                }
                self.set_wr(key, WR_COEFF * SOFTRT_WEIGHT_FACTOR, now, WR_RT_MAX_TIME);
            }
        }
        let queue = self.queues.get_mut(&key).expect("live");
        queue.last_idle_bklogged = now;
        queue.service_from_backlogged = 0;
        queue.softrt_update = false;
    }

    fn max_budget(&self) -> u64 {
        if self.max_budget_setting > 0 {
            return self.max_budget_setting;
        }
        if self.peak_rate == 0 {
            return DEFAULT_MAX_BUDGET;
        }
        ((u128::from(self.peak_rate) * u128::from(self.timeout_sync) / u128::from(SECOND)) as u64)
            .max(64 * 1024)
    }

    /// `bfq_min_budget`: a 32nd of `max_budget`, at least 4 KiB (our floor) but never above
    /// `max_budget` itself, which the tunable may set as low as 1 KiB.
    fn min_budget(&self) -> u64 {
        let max_budget = self.max_budget();
        (max_budget / 32).max(4096).min(max_budget)
    }

    /// The key of the queue in service.
    #[cfg(test)]
    fn active_key(&self) -> Option<QueueKey> {
        self.active.map(|id| self.queues[&id].key)
    }

    fn key_of(request: &Request) -> QueueKey {
        if request.sync {
            QueueKey::Sync(request.flow)
        } else {
            QueueKey::Async(
                request.group,
                request.prio.effective_class() as u8,
                request.prio.effective_level(),
            )
        }
    }

    fn queue_for(&mut self, request: &Request) -> Qid {
        let key = Self::key_of(request);
        if let Some(id) = self.queues.find(&key) {
            return id;
        }
        if self.queues.len() >= MAX_FLOWS {
            self.forget_idle_queues();
        }
        let parent = self.cgroups.fq_group(&mut self.fq, request.group);
        let class = request.prio.effective_class();
        let weight = match class {
            IoPrioClass::Idle => ioprio_weight(7),
            _ => ioprio_weight(request.prio.effective_level()),
        };
        let leaf = self
            .fq
            .add_leaf(parent, weight, class)
            .expect("bounded by nr_requests and MAX_FLOWS");
        // bfq_init_bfqq: "tentative initial value to trade off between thr and lat".
        let budget = self.min_budget().max(2 * self.max_budget() / 3);
        let id = self.queues.insert(Queue {
            key,
            leaf,
            sort: OrdMap::new(),
            fifo: OrdMap::new(),
            in_flight: 0,
            budget,
            sync: request.sync,
            last_end: request.offset,
            seek_history: 0,
            group: request.group,
            last_completion: 0,
            weight,
            wr_coeff: 1,
            wr_busy: false,
            wr_start: 0,
            wr_duration: 0,
            soft_rt_next_start: request.arrival,
            last_idle_bklogged: request.arrival,
            service_from_backlogged: 0,
            softrt_update: false,
            wr_start_at_switch_to_srt: None,
            budget_timeout: 0,
            ttime_samples: 0,
            ttime_total: 0,
            ttime_mean: 0,
            short_ttime: true,
            io_bound: true,
            requests_within_timer: 0,
            inject_limit: 0,
            last_serv_time: 0,
            decrease_time: request.arrival,
            injected: 0,
            active_prev: None,
            active_next: None,
            on_active_list: false,
            in_large_burst: false,
            loosened: false,
            held_kinds: 0,
            held_by_cgroup: false,
        });
        let index = leaf.index() as usize;
        if self.by_leaf.len() <= index {
            self.by_leaf.resize(index + 1, None);
        }
        self.by_leaf[index] = Some(id);
        if request.sync {
            self.handle_burst(id, request.arrival);
        }
        id
    }

    /// `bfq_handle_burst`, for a sync queue just created at `now`: queues created less than
    /// `bfq_burst_interval` (180 ms) after the previous one, in the same group, form a burst;
    /// once it counts `bfq_large_burst_thresh` (8) queues it is large, and they and every
    /// queue joining it are marked (`in_large_burst`): the processes of a burst (a build, a
    /// server's workers) are not interactive and are not weight-raised.
    fn handle_burst(&mut self, key: Qid, now: Nanos) {
        let group = self.queues[&key].group;
        let continues = self.burst_group == Some(group)
            && now <= self.last_ins_in_burst.saturating_add(BURST_INTERVAL);
        if !continues {
            self.large_burst = false;
            self.burst_list.clear();
            self.burst_list.push(key);
            self.burst_group = Some(group);
        } else if self.large_burst {
            self.queues.get_mut(&key).expect("live").in_large_burst = true;
        } else {
            self.burst_list.push(key);
            if self.burst_list.len() >= LARGE_BURST_THRESH {
                self.large_burst = true;
                for member in std::mem::take(&mut self.burst_list) {
                    if let Some(queue) = self.queues.get_mut(&member) {
                        queue.in_large_burst = true;
                    }
                }
            }
        }
        self.last_ins_in_burst = now;
    }

    /// Drops queues with nothing queued or in flight (their history goes with them).
    fn forget_idle_queues(&mut self) {
        let idle: Vec<Qid> = self
            .queues
            .iter()
            .filter(|(k, q)| q.queued() == 0 && q.in_flight == 0 && Some(*k) != self.active)
            .map(|(k, _)| k)
            .collect();
        for key in idle {
            self.leave_active_list(key);
            let queue = self.queues.remove(key).expect("listed");
            if queue.wr_coeff > 1 {
                self.raised -= 1;
            }
            if queue.wr_busy {
                self.wr_busy_queues -= 1;
            }
            self.by_leaf[queue.leaf.index() as usize] = None;
            self.fq.remove_leaf(queue.leaf).expect("live leaf");
            self.loosen_all();
        }
    }

    /// `bfq_choose_req`-style pick in `queue`, from the head position.
    fn next_in(&self, queue: &Queue) -> Option<(u64, RequestId)> {
        let last = self.head;
        let ahead = queue
            .sort
            .range((last, RequestId(0))..)
            .next()
            .map(|(k, _)| *k);
        let behind = queue
            .sort
            .range(..(last, RequestId(0)))
            .next_back()
            .map(|(k, _)| *k);
        match (ahead, behind) {
            (Some(a), Some(b)) if last - b.0 <= self.back_seek_max => {
                if (last - b.0) * self.back_seek_penalty < a.0 - last {
                    Some(b)
                } else {
                    Some(a)
                }
            }
            (Some(a), _) => Some(a),
            (None, Some(_)) => queue.sort.keys().next().copied(),
            (None, None) => None,
        }
    }

    /// `bfq_better_to_idle`: whether idling for the queue in service is worth it, never for
    /// async or IDLE-class queues: for throughput alone ([`Bfq::idling_boosts_throughput`]),
    /// or for service guarantees (`idling_needed_for_service_guarantees`): the queue is
    /// weight-raised while some busy queue is not (or the drive holds 4 more requests than
    /// the queue has there), it is the only busy queue, or the scenario is asymmetric
    /// (`bfq_asymmetric_scenario`): the queues with work do not all weigh the same, or are of
    /// more than one class, or several groups have work.
    fn better_to_idle(&self, key: Qid) -> bool {
        let queue = &self.queues[&key];
        // Idling is never needed for the IDLE class (bfq_better_to_idle).
        let idle_class = self.fq.class(queue.leaf).ok() == Some(IoPrioClass::Idle);
        if !queue.sync || self.slice_idle == 0 || idle_class {
            return false;
        }
        if self.idling_boosts_throughput(key) {
            return true;
        }
        let extra = self.in_service_extra(key);
        let busy_queues = self.census.queues + usize::from(extra.is_some());
        let raised_busy = self.census.raised + usize::from(extra.is_some_and(|m| m.raised));
        if busy_queues == 1
            || (queue.wr_coeff > 1
                && (raised_busy < busy_queues || self.in_driver >= queue.in_flight + 4))
        {
            return true;
        }
        // Queues of two classes with work (RT and BE, say) are asymmetric too: without idling
        // the lower class's requests would reach the device between the higher's
        // (`multiple_classes_busy` in bfq_asymmetric_scenario).
        self.asymmetric_for(key)
    }

    /// `bfq_asymmetric_scenario` for queue `key`, which counts as busy ([`Census::asymmetric`]).
    fn asymmetric_for(&self, key: Qid) -> bool {
        let own = self.member_of(key).map_or(0, |m| m.weight);
        self.census.asymmetric(self.in_service_extra(key), own)
    }

    /// How long the disk waits for the next request of `key`, in service (`bfq_arm_slice_timer`):
    /// `slice_idle`, at most `BFQ_MIN_TT` (2 ms) for a seeky queue that is not raised in a
    /// symmetric scenario (idling there buys no guarantee, only the chance of a close request),
    /// and at least 20 ms for a raised queue.
    fn idle_wait(&self, key: Qid) -> Nanos {
        let queue = &self.queues[&key];
        if queue.wr_coeff > 1 {
            self.slice_idle.max(WR_MIN_IDLE_WAIT)
        } else if queue.seeky() && !self.asymmetric_for(key) {
            self.slice_idle.min(MIN_TT)
        } else {
            self.slice_idle
        }
    }

    /// How long the turn of `key`, put in service, may last (`bfq_set_budget_timeout`):
    /// `timeout_sync`, times the raising factor for an interactive raising (the queue's weight
    /// over its original weight), not for a soft real-time one.
    fn turn_timeout(&self, key: Qid) -> Nanos {
        let queue = &self.queues[&key];
        if queue.wr_coeff > 1 && queue.wr_duration != WR_RT_MAX_TIME {
            self.timeout_sync.saturating_mul(u64::from(queue.wr_coeff))
        } else {
            self.timeout_sync
        }
    }

    /// `bfq_arm_slice_timer`: the disk waits from `now` for the next request of `key`, in
    /// service, for [`Bfq::idle_wait`].
    fn arm_idle_timer(&mut self, key: Qid, now: Nanos) {
        self.idle_since = now;
        self.idle_until = Some(now.saturating_add(self.idle_wait(key)));
    }

    /// Whether `request` may take one of the `nr_requests` scheduler requests with `in_use`
    /// taken (`bfq_limit_depth`): reads may take all of them, sync writes three quarters
    /// (`async_depths[0][1]`), async I/O half (`async_depths[0][0]`, `bfq_depth_updated`),
    /// and while a weight-raised queue is busy 6/16 and 3/16 (`async_depths[1]`); and a queue that, or whose cgroup, holds
    /// its weight's share of that limit already takes no more (`bfqq_request_over_limit`).
    ///
    /// Where Linux gives an over-limit queue a shallow depth of 1 (it gets a request only
    /// when one of the lowest tags is free), we let it hold its share, at least one request:
    /// the same intent, without modelling the tag bitmap.
    fn limit_depth(&self, request: &Request, in_use: usize, nr_requests: u32) -> bool {
        let limit = self.depth_limit(Depth::of(request), nr_requests);
        in_use < limit
            && !self
                .queues
                .find(&Self::key_of(request))
                .is_some_and(|key| self.over_limit(key, limit as u64))
    }

    /// The requests of `nr_requests` that I/O of kind `depth` may take (`bfq_limit_depth`):
    /// while a queue is weight-raised, more is kept for sync reads: async I/O 3/16, sync
    /// writes 6/16 (`async_depths[1]`).
    fn depth_limit(&self, depth: Depth, nr_requests: u32) -> usize {
        let nr_requests = nr_requests as usize;
        let raised = self.wr_busy();
        match depth {
            Depth::Read => nr_requests,
            Depth::SyncWrite if raised => (nr_requests * 6 / 16).max(1),
            Depth::SyncWrite => (nr_requests * 3 / 4).max(1),
            Depth::Async if raised => (nr_requests * 3 / 16).max(1),
            Depth::Async => (nr_requests / 2).max(1),
        }
    }

    /// [`Policy::allocation_hold`]: a waiter its queue's share turns away
    /// ([`Bfq::over_limit`]) while its kind's depth has room is held by that queue, which
    /// [`Bfq::loosen`] reports when the share could let it in; a queue of a cgroup, by the
    /// queue or the cgroup whose share it reached ([`Bfq::hold_in_cgroup`]).
    fn hold_waiter(
        &mut self,
        request: &Request,
        in_use: usize,
        nr_requests: u32,
    ) -> Option<HeldBy> {
        let depth = Depth::of(request);
        let limit = self.depth_limit(depth, nr_requests);
        if in_use >= limit {
            // Its kind's depth, which any completion frees.
            return None;
        }
        let key = self.queues.find(&Self::key_of(request))?;
        let group = self.queues[&key].group;
        if group != GroupId::ROOT {
            return self.hold_in_cgroup(key, group, depth, limit);
        }
        debug_assert!(self.over_limit(key, limit as u64), "only a waiter turned away is held");
        let queue = &self.queues[&key];
        let allocated = (queue.queued() + queue.in_flight) as u64;
        let weight = u64::from(self.fq.weight(queue.leaf).unwrap_or(0));
        let class = match self.fq.class(queue.leaf).unwrap_or(IoPrioClass::Be) {
            IoPrioClass::Rt => 0,
            IoPrioClass::Be | IoPrioClass::None => 1,
            IoPrioClass::Idle => 2,
        };
        let floor = smallest_sum_held(limit as u64 * weight, allocated);
        let held = &mut self.holds.sum[class];
        *held = (*held).max(floor);
        let held = &mut self.holds.limit[depth as usize];
        *held = (*held).min(limit);
        self.holds.any = true;
        self.queues.get_mut(&key).expect("found").held_kinds |= 1 << depth as u8;
        Some(HeldBy {
            hold: queue_hold(key, depth),
            own: None,
        })
    }

    /// [`Bfq::hold_waiter`] for queue `key` of cgroup `group` (not the root), over its share
    /// of `limit` requests of kind `depth`: held by the cgroup on its path whose share is
    /// reached, or by the queue. The cgroup's hold loosens when any of its queues frees a
    /// request or leaves the race, and when a weight sum falls in a tree above it on the
    /// path (the queue's, in a tree on its path).
    fn hold_in_cgroup(
        &mut self,
        key: Qid,
        group: GroupId,
        depth: Depth,
        limit: usize,
    ) -> Option<HeldBy> {
        let over = self.over_limit_at(key, limit as u64);
        let hold = match over {
            Some(Over::Group(cgroup)) => group_hold(cgroup, depth),
            Some(Over::Queue) => queue_hold(key, depth),
            None => {
                debug_assert!(false, "only a waiter turned away is held");
                return None;
            }
        };
        let classes = [IoPrioClass::Rt, IoPrioClass::Be, IoPrioClass::Idle];
        let mut trees = [GroupId::ROOT; crate::limits::GROUP_DEPTH_MAX + 2];
        let mut len = 1;
        for cgroup in cgroup_chain(&self.cgroups, group) {
            trees[len] = cgroup;
            len += 1;
        }
        // The trees whose sums the shares down to the holding level divide by: the root's and
        // those of the cgroups above the one that holds it (`trees` runs from the queue's
        // cgroup up, after the root), or every one on the path for the queue's own share.
        let below = match over {
            Some(Over::Group(cgroup)) => trees[1..len]
                .iter()
                .position(|&tree| tree == cgroup)
                .map_or(1, |at| at + 2),
            _ => 1,
        };
        let trees_above = std::iter::once(trees[0]).chain(trees[below..len].iter().copied());
        for cgroup in trees_above {
            let Some(tree) = self.cgroups.existing(cgroup) else {
                // Not in the layer: over_limit_at found no share there.
                continue;
            };
            let fq = &self.fq;
            let entry = self.holds.drops.entry(tree).or_insert_with(|| TreeHolds {
                drops: classes.map(|class| fq.wsum_drops(tree, class).unwrap_or(0)),
                keys: HashSet::default(),
                full: false,
            });
            if entry.keys.len() < TREE_HOLDS_MAX {
                entry.keys.insert(hold);
            } else if !entry.keys.contains(&hold) {
                entry.full = true;
            }
        }
        let held = &mut self.holds.limit[depth as usize];
        *held = (*held).min(limit);
        self.holds.any = true;
        let queue = self.queues.get_mut(&key).expect("found");
        let own = match over {
            Some(Over::Group(_)) => {
                queue.held_by_cgroup = true;
                Some(key.own())
            }
            _ => {
                queue.held_kinds |= 1 << depth as u8;
                None
            }
        };
        Some(HeldBy { hold, own })
    }

    /// What a root queue of each class (RT, BE, IDLE) divides its share by
    /// ([`Bfq::over_limit`]): the weight sums of the root's trees of its class and those
    /// above, each higher one weighing `IOPRIO_BE_NR` times more.
    fn root_sums(&self) -> [u64; 3] {
        let Some(tree) = self.cgroups.existing(GroupId::ROOT) else {
            return [0; 3];
        };
        [IoPrioClass::Rt, IoPrioClass::Be, IoPrioClass::Idle].map(|class| self.class_sum(tree, class))
    }

    /// What a queue of `class` in `tree` divides its share by ([`Bfq::over_limit`]): the
    /// weight sums of the tree's classes from RT down to its own, each higher one weighing
    /// `IOPRIO_BE_NR` times more.
    fn class_sum(&self, tree: FqGroupId, class: IoPrioClass) -> u64 {
        let classes: &[IoPrioClass] = match class {
            IoPrioClass::Rt => &[IoPrioClass::Rt],
            IoPrioClass::Idle => &[IoPrioClass::Rt, IoPrioClass::Be, IoPrioClass::Idle],
            IoPrioClass::Be | IoPrioClass::None => &[IoPrioClass::Rt, IoPrioClass::Be],
        };
        classes.iter().fold(0, |sum, &class| {
            sum * IOPRIO_BE_NR + self.fq.wsum(tree, class).unwrap_or(0)
        })
    }

    /// Queue `key`'s share may let in a waiter it holds: its requests fewer, its turn over,
    /// its weight changed.
    fn loosen(&mut self, key: Qid) {
        if !self.holds.any {
            return;
        }
        let Some(queue) = self.queues.get_mut(&key) else {
            return;
        };
        if !queue.loosened {
            queue.loosened = true;
            self.holds.loosened.push(key);
        }
        let group = queue.group;
        if group != GroupId::ROOT {
            // A cgroup holding a waiter of this queue lets it in once the queue has left
            // the race, and one of its requests freed is one fewer held by each cgroup above.
            for cgroup in cgroup_chain(&self.cgroups, group) {
                if self.holds.groups_marked.insert(cgroup) {
                    self.holds.groups.push(cgroup);
                }
            }
        }
    }

    /// Every hold may have loosened.
    fn loosen_all(&mut self) {
        self.holds.all |= self.holds.any;
    }

    /// [`Policy::loosened`]: the queues [`Bfq::loosen`] marked; every hold when what a class
    /// divides its share by fell below where a waiter held could be let in (a share grows as
    /// it falls) or a depth rose above the smallest one was held at (a share is of it).
    fn take_loosened(&mut self, nr_requests: u32, keys: &mut Vec<u64>) -> bool {
        let mut all = std::mem::take(&mut self.holds.all);
        if self.holds.any && !all {
            let sums = self.root_sums();
            let classes = [IoPrioClass::Rt, IoPrioClass::Be, IoPrioClass::Idle];
            all = sums.iter().zip(&self.holds.sum).any(|(now, held)| now < held)
                || [Depth::Read, Depth::SyncWrite, Depth::Async]
                    .into_iter()
                    .any(|depth| self.depth_limit(depth, nr_requests) > self.holds.limit[depth as usize]);
            if !all && !self.holds.drops.is_empty() {
                // A tree whose weight sum fell loosens the holds below it.
                let mut fallen = std::mem::take(&mut self.holds.fallen);
                fallen.extend(self.holds.drops.iter().filter_map(|(&tree, holds)| {
                    classes
                        .iter()
                        .zip(&holds.drops)
                        .any(|(&class, &held)| self.fq.wsum_drops(tree, class) != Ok(held))
                        .then_some(tree)
                }));
                for tree in fallen.drain(..) {
                    let holds = self.holds.drops.remove(&tree).expect("listed");
                    all |= holds.full;
                    keys.extend(holds.keys);
                }
                self.holds.fallen = fallen;
            }
        }
        let mut loosened = std::mem::take(&mut self.holds.loosened);
        for key in loosened.drain(..) {
            let Some(queue) = self.queues.get_mut(&key) else {
                continue;
            };
            queue.loosened = false;
            let kinds = std::mem::take(&mut queue.held_kinds);
            let by_cgroup = std::mem::take(&mut queue.held_by_cgroup);
            if !all {
                // The queue's own holds, and the waiters cgroups hold that its leaving the
                // race would let in.
                for depth in Depth::ALL {
                    if kinds & 1 << depth as u8 != 0 {
                        keys.push(queue_hold(key, depth));
                    }
                }
                if by_cgroup {
                    keys.push(key.own());
                }
            }
        }
        self.holds.loosened = loosened;
        if !all {
            for &group in &self.holds.groups {
                keys.extend(Depth::ALL.map(|depth| group_hold(group, depth)));
            }
        }
        self.holds.groups.clear();
        self.holds.groups_marked.clear();
        if all {
            self.holds.clear();
        }
        all
    }

    /// `bfqq_request_over_limit`: walking from the top cgroup down to the queue, each entity
    /// gets its weight's share of `limit` among the weights of the service tree it sits in
    /// (`st->wsum`: the active entities and the idle ones still remembered; for the queue
    /// itself, the trees of its class and the classes above, each higher one weighing
    /// `IOPRIO_BE_NR` times more); it is over when the requests it holds (a cgroup: all of its
    /// queues', the kernel's `entity->allocated`) reach that share. The weight sums are the
    /// layer's own, so the walk costs one step per level and no pass over the queues but, with
    /// cgroups, the count of a cgroup's requests.
    fn over_limit(&self, key: Qid, limit: u64) -> bool {
        self.over_limit_at(key, limit).is_some()
    }

    /// [`Bfq::over_limit`], with the level whose share is reached: a cgroup's, or the
    /// queue's own.
    fn over_limit_at(&self, key: Qid, limit: u64) -> Option<Over> {
        let Some(queue) = self.queues.get(&key) else {
            // No queue yet: nothing allocated (the kernel's fast path).
            return None;
        };
        if self.active != Some(key) && !self.fq.is_active(queue.leaf).unwrap_or(false) {
            return None;
        }
        // Whether cgroup `group` is `ancestor` or below it.
        // The cgroups from the one below the root down to the queue's (none for a queue of
        // the root, asked without building anything: a collect of nothing was a tenth of this
        // check, which bfq's waiters ask 27 times per request with 1024 deep jobs).
        let mut chain = [GroupId::ROOT; crate::limits::GROUP_DEPTH_MAX + 1];
        let mut len = 0;
        if queue.group != GroupId::ROOT {
            for cgroup in cgroup_chain(&self.cgroups, queue.group) {
                chain[len] = cgroup;
                len += 1;
            }
            chain[..len].reverse();
        }
        // On the stack: with cgroups, this check runs for every waiter asked, and a vector
        // here was an allocation each time.
        let path = &chain[..len];
        let allocated = |queue: &Queue| (queue.queued() + queue.in_flight) as u64;
        let class = self.fq.class(queue.leaf).unwrap_or(IoPrioClass::Be);
        let mut limit = limit;
        let mut parent = GroupId::ROOT;
        for level in 0..=path.len() {
            let tree = self.cgroups.existing(parent)?;
            let wsum = |class| self.fq.wsum(tree, class).unwrap_or(0);
            let (weight, held, sum) = match path.get(level) {
                Some(&cgroup) => {
                    let held = self.held_by_group.get(&cgroup).copied().unwrap_or(0);
                    debug_assert_eq!(
                        held,
                        self.queues
                            .values()
                            .filter(|q| cgroup_chain(&self.cgroups, q.group).any(|g| g == cgroup))
                            .map(allocated)
                            .sum::<u64>(),
                        "held_by_group kept in step"
                    );
                    let weight = u64::from(self.cgroups.weight(cgroup));
                    (weight, held, wsum(IoPrioClass::Be))
                }
                None => {
                    let weight = u64::from(self.fq.weight(queue.leaf).unwrap_or(0));
                    (weight, allocated(queue), self.class_sum(tree, class))
                }
            };
            if let Some(&cgroup) = path.get(level) {
                parent = cgroup;
            }
            if sum == 0 {
                continue;
            }
            limit = (limit * weight + sum / 2) / sum;
            if held >= limit.max(1) {
                return Some(match path.get(level) {
                    Some(&cgroup) => Over::Group(cgroup),
                    None => Over::Queue,
                });
            }
        }
        None
    }

    /// Ends the turn of the queue in service (`bfq_bfqq_expire`).
    fn expire(&mut self, now: Nanos, reason: Expiration) {
        self.expire_with(now, reason, false);
    }

    /// The idle timer expires the queue in service (`bfq_idle_slice_timer_body`): its turn is
    /// timed to when the idling began.
    fn expire_idle(&mut self, now: Nanos, reason: Expiration) {
        self.expire_with(now, reason, true);
    }

    /// `bfq_bfqq_expire`, with `compensate` for an expiry by the idle timer.
    fn expire_with(&mut self, now: Nanos, reason: Expiration, compensate: bool) {
        let Some(key) = self.active.take() else {
            return;
        };

        // A turn that ends idle is timed to when the idling began (bfq_bfqq_is_slow with
        // `compensate`, as the idle timer expires a queue): the wait is not service.
        let idling_since = match self.idle_until.take() {
            Some(_) if compensate => self.idle_since,
            _ => now,
        };
        let busy = idling_since.saturating_sub(self.turn_start);
        // Peak rate: a queue that was served sequentially for long enough shows the device
        // (over the same time as the slowness, as BFQ measured it at expiry before its
        // estimator moved to each dispatch: the idle wait is not the device's time).
        let queue = self.queues.get(&key).expect("queue in service exists");
        if !queue.seeky() && busy >= 20 * MILLISECOND && self.served > 0 {
            let rate = (u128::from(self.served) * u128::from(SECOND) / u128::from(busy)) as u64;
            self.peak_rate = if rate > self.peak_rate {
                rate
            } else {
                (7 * self.peak_rate + rate) / 8
            };
        }
        // The budgets of the rate just measured, as BFQ charges time with the max budget its
        // peak-rate update has just set: charging the first timed-out turn with the default
        // (8 MiB, 0.7 s of a device doing 11 MiB/s) put its queue's group so far behind that
        // its siblings had the disk to themselves for 1.5 s (found by the starvation guard).
        let max_budget = self.max_budget();
        let min_budget = self.min_budget();
        let queue = self.queues.get_mut(&key).expect("queue in service exists");
        // What its turn cost it, in its budget's units (`entity->service`).
        let service = self.service;
        let mut charge = service;
        // bfq_bfqq_is_slow: over a long enough turn (20 ms) the service says, over a short one
        // the seekiness.
        let slow = queue.sync
            && if busy > 20 * MILLISECOND {
                service < max_budget / 2
            } else {
                queue.seeky()
            };
        let timed_out_early = reason == Expiration::BudgetTimeout
            && queue.budget.saturating_sub(service) >= queue.budget / 3;
        if queue.sync
            && queue.wr_coeff == 1
            && (slow || timed_out_early)
            && self.timeout_sync > 0
        {
            // Charged for the disk time it took, at most a timeout's (bfq_bfqq_charge_time),
            // as bfq_bfqq_expire decides: not a raised queue, nor one that used two thirds of
            // its budget.
            let by_time = (u128::from(max_budget) * u128::from(busy.min(self.timeout_sync))
                / u128::from(self.timeout_sync)) as u64;
            charge = charge.max(by_time);
        }
        // bfq_bfqq_expire: a queue that went idle having used a fifth of its budget or less
        // is not I/O-bound.
        if reason == Expiration::TooIdle && service <= 2 * queue.budget / 10 {
            queue.io_bound = false;
        }
        // __bfq_bfqq_recalc_budget: a sync queue's budget follows how its turn ended; a
        // weight-raised one keeps a low constant budget, for latency; an async one always has
        // the largest (its charge factor limits it).
        queue.budget = if !queue.sync {
            max_budget
        } else if queue.wr_coeff > 1 {
            2 * min_budget
        } else {
            match reason {
                Expiration::BudgetExhausted => queue.budget.saturating_mul(4).min(max_budget),
                Expiration::BudgetTimeout => queue.budget.saturating_mul(2).min(max_budget),
                // The kernel doubles the budget of a queue whose idle timer fires with
                // requests in the drive; armed at the last completion, as here, the timer
                // does that only when it races a dispatch, which a simulation does not.
                Expiration::TooIdle => {
                    queue.budget.saturating_sub(4 * min_budget).max(min_budget)
                }
                Expiration::NoMoreRequests => service.clamp(min_budget, max_budget),
                Expiration::Preempted => queue.budget,
            }
        };
        let (leaf, queued, budget) = (queue.leaf, queue.queued(), queue.budget);
        // bfq_bfqq_expire: a queue left with nothing queued may be isochronous; when it may
        // next count as soft real-time is known now if nothing is in flight, else at its last
        // completion (not while interactive raising runs: a long load would push it far off).
        if self.low_latency && self.wr_max_softrt_rate > 0 && queued == 0 {
            let queue = &self.queues[&key];
            if queue.in_flight == 0 && queue.wr_coeff != WR_COEFF {
                let next = self.softrt_next_start(key, now);
                self.queues.get_mut(&key).expect("live").soft_rt_next_start = next;
            } else if queue.in_flight > 0 {
                self.queues.get_mut(&key).expect("live").softrt_update = true;
            }
        }
        let queue = &self.queues[&key];
        // A sync queue with requests still in the drive stays busy, in the active tree, when
        // idling matters for service guarantees: its class keeps the lower classes out, and
        // the IDLE class gets the disk only after BFQ_CL_IDLE_TIMEOUT. This differs from the
        // kernel, whose `__bfq_bfqq_expire` takes an emptied queue out whatever it has in the
        // drive (`bfq_del_bfqq_busy`; later versions keep one that was preempted while idling
        // is needed for guarantees); the kernel rather does not expire a queue whose requests
        // are in the drive while idling is better (`bfq_select_queue`'s keep_queue).
        let in_the_drive = queue.sync && queue.in_flight > 0 && self.better_to_idle(key);
        // Charged, then requeued with its next budget or out of the race (the fair queue's
        // expiry; `better_to_idle` above reads only the leaf's class, which a charge leaves).
        let next_budget = (queued > 0 || in_the_drive).then(|| {
            let next = self.queues[&key]
                .sort
                .values()
                .map(|e| e.request.len)
                .max()
                .unwrap_or(0);
            budget.max(self.serv_to_charge(key, next))
        });
        self.fq
            .expire(leaf, charge.max(1), next_budget)
            .expect("live leaf");
        if next_budget.is_some() {
            self.entered(key);
        } else {
            self.leave_active_list(key);
        }
        if next_budget.is_none() && self.queues[&key].in_flight == 0 {
            // __bfq_bfqq_expire: when a queue is left with nothing to do, for the silence that
            // makes it interactive again (`budget_timeout`, overloaded as the kernel does).
            self.queues.get_mut(&key).expect("live").budget_timeout = now;
        }
        // Out of service, and out of the race if it left it: its share no longer binds.
        self.loosen(key);
        self.recount_wr_busy(key);
    }

    fn take(&mut self, key: Qid, sort_key: (u64, RequestId), now: Nanos) -> Request {
        // bfq_dispatch_rq_from_bfqq's bfq_update_wr_data: a raising whose time is up ends at
        // once, not at the queue's next activation.
        self.end_wr_if_due(key, now);
        // bfq_dispatch_rq_from_bfqq: the charge is known before the request leaves.
        let charge = self.serv_to_charge(key, self.queues[&key].sort[&sort_key].request.len);
        let request = self.remove_for_dispatch(key, sort_key);
        if self.wait_dispatch {
            // The request whose total service time the injection limit is measured on.
            self.wait_dispatch = false;
            self.waited_rq = Some(request.id);
        }
        self.served += request.len;
        self.service += charge;
        request
    }

    /// Takes request `sort_key` off queue `key` for the drive, in the turn of that queue or
    /// injected into another's: its seek history, the drive's count and the head move.
    fn remove_for_dispatch(&mut self, key: Qid, sort_key: (u64, RequestId)) -> Request {
        let queue = self.queues.get_mut(&key).expect("queue exists");
        let entry = queue.sort.remove(&sort_key).expect("on the sort list");
        queue.fifo.remove(&(entry.expires, sort_key.1));
        let request = entry.request;
        let far = request.offset.abs_diff(queue.last_end) > SEEK_THRESHOLD;
        queue.seek_history = (queue.seek_history << 1) | u32::from(far);
        queue.last_end = request.end();
        queue.in_flight += 1;
        // bfq_bfqq_served: the service since it last became busy.
        queue.service_from_backlogged += request.len;
        self.in_driver += 1;
        self.head = request.end();
        self.queued -= 1;
        request
    }
}

impl Policy for Bfq {
    fn name(&self) -> &'static str {
        "bfq"
    }

    fn set_groups(&mut self, groups: &Groups) {
        self.cgroups.set_groups(groups, &mut self.fq);
        self.held_by_group = self.held_from_scratch();
        self.loosen_all();
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
        if let Some(key) = self.queues.find(&Self::key_of(&request)) {
            let before = self.member(key);
            self.leave_drive(key);
            self.recount(key, before);
        }
        self.in_driver = self.in_driver.saturating_sub(1);
        self.queued += 1;
        self.requeued.push_back(request);
    }

    fn may_allocate(&self, request: &Request, in_use: usize, nr_requests: u32) -> bool {
        self.limit_depth(request, in_use, nr_requests)
    }

    fn allocation_hold(
        &mut self,
        request: &Request,
        in_use: usize,
        nr_requests: u32,
    ) -> Option<HeldBy> {
        self.hold_waiter(request, in_use, nr_requests)
    }

    fn loosened(&mut self, nr_requests: u32, keys: &mut Vec<u64>) -> bool {
        self.take_loosened(nr_requests, keys)
    }

    fn queued(&self) -> usize {
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

impl Bfq {
    /// Merges a request into a queued one it adjoins, within this policy's rules, or hands it
    /// back.
    pub(super) fn merge_request(
        &mut self,
        request: Request,
        limits: MergeLimits,
        _now: Nanos,
    ) -> Result<(), Request> {
        let Some(key) = self.queues.find(&Self::key_of(&request)) else {
            return Err(request);
        };
        let queue = self.queues.get_mut(&key).expect("found");
        let below = queue
            .sort
            .range(..(request.offset, RequestId(0)))
            .next_back()
            .filter(|(_, e)| {
                e.request.end() == request.offset && mergeable(&e.request, &request, limits)
            })
            .map(|(k, _)| *k);
        if let Some(k) = below {
            let entry = queue.sort.get_mut(&k).expect("found");
            merge_back(&mut entry.request, request);
            return Ok(());
        }
        let above = queue
            .sort
            .range((request.end(), RequestId(0))..)
            .next()
            .filter(|(k, e)| k.0 == request.end() && mergeable(&e.request, &request, limits))
            .map(|(k, _)| *k);
        let Some(k) = above else {
            return Err(request);
        };
        let mut entry = queue.sort.remove(&k).expect("found");
        queue.fifo.remove(&(entry.expires, k.1));
        merge_front(&mut entry.request, request);
        let new_key = (entry.request.offset, entry.request.id);
        queue.fifo.insert((entry.expires, new_key.1), new_key.0);
        queue.sort.insert(new_key, entry);
        Ok(())
    }

    /// Queues a request.
    pub(super) fn insert_request(&mut self, request: Request, now: Nanos) {
        let key = self.queue_for(&request);
        if request.sync {
            self.update_think_time(key, now);
        }
        let dir = usize::from(!request.sync);
        let expires = now.saturating_add(self.fifo_expire[dir]);
        let queue = self.queues.get_mut(&key).expect("just made");
        let sort_key = (request.offset, request.id);
        queue.fifo.insert((expires, request.id), request.offset);
        let len = request.len;
        let before = (queue.in_flight > 0 || !queue.sort.is_empty()).then_some(());
        queue.sort.insert(sort_key, Entry { request, expires });
        let (leaf, group) = (queue.leaf, queue.group);
        self.hold(group, true);
        self.queued += 1;
        if before.is_none() {
            self.recount(key, None);
        }
        let became_busy = !self.fq.is_active(leaf).expect("live leaf");
        if became_busy {
            self.entered(key);
            self.update_weight_raising(key, now);
            // Large enough for its request (bfq_bfqq_update_budg_for_activation), after a
            // raising's cut.
            let budget = self.queues[&key].budget;
            let charge = self.serv_to_charge(key, len);
            self.fq.activate(leaf, budget.max(charge)).expect("live leaf");
            self.recount_wr_busy(key);
        }
        if self.active == Some(key) {
            self.idle_until = None;
            self.start_inject_measure(key, now);
        } else if let Some(active) = self.active {
            // bfq_bfqq_handle_idle_busy_switch: a queue that becomes busy with a higher class
            // or weight than the one in service, or while that one no longer needs idling,
            // ends its turn if the root would serve something else next
            // (next_queue_may_preempt).
            if became_busy
                && (self.higher_class_or_weight(key, active) || !self.better_to_idle(active))
                && self
                    .fq
                    .next_in_service_differs(now, self.queues[&active].leaf, leaf)
                    .expect("live leaves")
            {
                self.expire(now, Expiration::Preempted);
            }
        }
    }

    /// `bfq_bfqq_higher_class_or_weight`: whether queue `new` is of a higher class than
    /// `active` (RT over BE over IDLE), or weighs more: the queues' own weights when they share
    /// a group, else their groups' weights (a queue of the root group its own).
    fn higher_class_or_weight(&self, new: Qid, active: Qid) -> bool {
        let (new, active) = (self.queues[&new].leaf, self.queues[&active].leaf);
        let rank = |class: IoPrioClass| match class {
            IoPrioClass::Rt => 0,
            IoPrioClass::Be | IoPrioClass::None => 1,
            IoPrioClass::Idle => 2,
        };
        let class = |leaf| self.fq.class(leaf).expect("live leaf");
        if rank(class(new)) < rank(class(active)) {
            return true;
        }
        let parent = |leaf| self.fq.parent(leaf).expect("live leaf");
        let weight = |leaf: LeafId| -> u32 {
            match parent(leaf) {
                Some(group) if self.fq.parent(group).expect("live group").is_some() => {
                    self.fq.weight(group).expect("live group")
                }
                _ => self.fq.weight(leaf).expect("live leaf"),
            }
        };
        if parent(new) == parent(active) {
            self.fq.weight(new).expect("live leaf") > self.fq.weight(active).expect("live leaf")
        } else {
            weight(new) > weight(active)
        }
    }

    /// The next request for the device, a time to wait until, or nothing.
    pub(super) fn dispatch_next(&mut self, now: Nanos) -> Dispatch {
        if let Some(request) = self.requeued.pop_front() {
            self.queued -= 1;
            if let Some(key) = self.queues.find(&Self::key_of(&request)) {
                let before = self.member(key);
                let queue = self.queues.get_mut(&key).expect("found");
                queue.in_flight += 1;
                let group = queue.group;
                self.hold(group, true);
                self.recount(key, before);
            }
            self.in_driver += 1;
            return Dispatch::Request(request);
        }
        for _ in 0..=self.queues.len() + 1 {
            let key = match self.active {
                Some(key) => key,
                None => {
                    let Some(leaf) = self.fq.select_next(now) else {
                        return Dispatch::Empty;
                    };
                    let key = self.by_leaf[leaf.index() as usize].expect("a queue's leaf");
                    // What it and its cgroups received as injected I/O is forgotten.
                    self.fq.begin_turn(leaf).expect("live leaf");
                    self.active = Some(key);
                    self.turn_start = now;
                    let timeout = self.turn_timeout(key);
                    let queue = self.queues.get_mut(&key).expect("a live queue");
                    queue.budget_timeout = now.saturating_add(timeout);
                    queue.injected = 0;
                    self.served = 0;
                    self.service = 0;
                    self.fifo_checked = false;
                    self.idle_until = None;
                    key
                }
            };
            let queue = &self.queues[&key];
            let timed_out = now >= queue.budget_timeout;
            // bfq_may_expire_for_budg_timeout: not while the idle timer runs, nor while the
            // queue must idle (bfq_bfqq_must_idle: nothing queued, and idling is better; not
            // asked while the timer runs, which decides then).
            let timer = self.idle_until.is_some();
            let must_idle = !timer && queue.queued() == 0 && self.better_to_idle(key);
            if timed_out && !timer && !must_idle {
                self.expire(now, Expiration::BudgetTimeout);
                continue;
            }
            let queue = &self.queues[&key];
            if queue.queued() == 0 {
                // bfq_select_queue with nothing queued: the idle timer runs, or the queue
                // waits for its requests in the drive (keep_queue; the timer starts at the
                // last completion, `Bfq::request_completed`), injecting meanwhile.
                if let Some(until) = self.idle_until {
                    if now < until {
                        if let Some(request) = self.inject(key) {
                            return Dispatch::Request(request);
                        }
                        return Dispatch::WaitUntil(until);
                    }
                    // bfq_idle_slice_timer_body.
                    let reason = if timed_out {
                        Expiration::BudgetTimeout
                    } else {
                        Expiration::TooIdle
                    };
                    self.expire_idle(now, reason);
                } else if must_idle && queue.in_flight > 0 {
                    if let Some(request) = self.inject(key) {
                        return Dispatch::Request(request);
                    }
                    // Woken by the completion; the time only bounds the wait.
                    return Dispatch::WaitUntil(now.saturating_add(self.timeout_sync));
                } else {
                    self.expire(now, Expiration::NoMoreRequests);
                }
                if self.queued == 0 {
                    return Dispatch::Empty;
                }
                continue;
            }
            // The FIFO is checked once per turn.
            let mut pick = None;
            if !self.fifo_checked {
                self.fifo_checked = true;
                if let Some((&(expires, id), &offset)) = queue.fifo.iter().next() {
                    if expires <= now {
                        pick = Some((offset, id));
                    }
                }
            }
            let pick = pick
                .or_else(|| self.next_in(queue))
                .expect("queue has requests");
            let len = queue.sort[&pick].request.len;
            let budget = queue.budget;
            // bfq_select_queue: the next request's charge beyond what is left of the budget.
            if self.service > 0 && self.service + self.serv_to_charge(key, len) > budget {
                self.expire(now, Expiration::BudgetExhausted);
                continue;
            }
            let request = self.take(key, pick, now);
            // An IDLE-class queue dispatches one request per turn while other queues are
            // busy (bfq_dispatch_rq_from_bfqq: expired as if its budget were exhausted).
            let idle_class = self.fq.class(self.queues[&key].leaf).ok() == Some(IoPrioClass::Idle);
            let others_busy = self.census.queues > usize::from(self.member(key).is_some());
            if idle_class && others_busy {
                self.expire(now, Expiration::BudgetExhausted);
            }
            return Dispatch::Request(request);
        }
        Dispatch::Empty
    }

    /// A dispatched request completed.
    pub(super) fn request_completed(&mut self, request: &Request, now: Nanos) {
        let key = self.queues.find(&Self::key_of(request));
        self.update_hw_tag();
        if let Some(key) = key.filter(|_| self.waited_rq == Some(request.id)) {
            self.update_inject_limit(key, now);
        }
        self.in_driver = self.in_driver.saturating_sub(1);
        let Some(key) = key else {
            return;
        };
        let before = self.member(key);
        let Some(queue) = self.queues.get_mut(&key) else {
            return;
        };
        queue.last_completion = now;
        self.leave_drive(key);
        self.recount(key, before);
        if self.active == Some(key) {
            self.in_service_completed(key, now);
        }
        let queue = self.queues.get_mut(&key).expect("just counted");
        // bfq_completed_request: the soft real-time start postponed at the expiry, now that
        // nothing is in flight (unless interactive raising runs).
        if queue.softrt_update
            && queue.in_flight == 0
            && queue.sort.is_empty()
            && queue.wr_coeff != WR_COEFF
        {
            queue.softrt_update = false;
            let next = self.softrt_next_start(key, now);
            self.queues.get_mut(&key).expect("live").soft_rt_next_start = next;
        }
        if self.active == Some(key) {
            self.in_service_completed(key, now);
        }
    }

    /// `bfq_completed_request` for `key`, the queue in service: while it must idle (nothing
    /// queued, and idling is better) it stays in service, and its last request in the drive
    /// arms the idle timer; otherwise its turn ends if it timed out, or if it has nothing
    /// queued and nothing to wait for.
    fn in_service_completed(&mut self, key: Qid, now: Nanos) {
        let queue = &self.queues[&key];
        let (queued, in_flight) = (queue.queued(), queue.in_flight);
        let must_idle = queued == 0 && self.better_to_idle(key);
        if must_idle {
            if in_flight == 0 && self.idle_until.is_none() {
                self.arm_idle_timer(key, now);
            }
            return;
        }
        let timed_out = now >= self.queues[&key].budget_timeout;
        if timed_out && self.idle_until.is_none() {
            self.expire(now, Expiration::BudgetTimeout);
        } else if queued == 0 {
            self.expire(now, Expiration::NoMoreRequests);
        }
    }

    /// Hands back every queued request (the elevator is switching).
    pub(super) fn drain_all(&mut self, out: &mut Vec<Request>) {
        let start = out.len();
        out.extend(self.requeued.drain(..));
        for queue in self.queues.values_mut() {
            queue.fifo.clear();
            out.extend(
                std::mem::take(&mut queue.sort)
                    .into_values()
                    .map(|e| e.request),
            );
            if self.fq.is_active(queue.leaf).unwrap_or(false) {
                self.fq.deactivate(queue.leaf).expect("live leaf");
            }
            queue.wr_busy = false;
            queue.injected = 0;
        }
        while let Some(key) = self.active_list {
            self.leave_active_list(key);
        }
        self.wr_busy_queues = 0;
        out[start..].sort_by_key(|r| (r.arrival, r.id));
        self.queued = 0;
        self.active = None;
        self.idle_until = None;
        self.census = self.census_from_scratch();
        self.held_by_group = self.held_from_scratch();
        self.loosen_all();
    }

    /// A tunable's value, in its sysfs unit.
    pub(super) fn tunable_value(&self, name: &str) -> Result<u64, TunableError> {
        Ok(match name {
            "slice_idle" => self.slice_idle / MILLISECOND,
            "timeout_sync" => self.timeout_sync / MILLISECOND,
            "max_budget" => self.max_budget_setting / 1024,
            "fifo_expire_sync" => self.fifo_expire[0] / MILLISECOND,
            "fifo_expire_async" => self.fifo_expire[1] / MILLISECOND,
            "back_seek_max" => self.back_seek_max / 1024,
            "back_seek_penalty" => self.back_seek_penalty,
            "low_latency" => u64::from(self.low_latency),
            "wr_max_time" => self.wr_max_time / MILLISECOND,
            "wr_max_softrt_rate" => self.wr_max_softrt_rate,
            _ => return Err(crate::tunable::unknown(name, TUNABLES)),
        })
    }

    /// Sets a tunable, in its sysfs unit.
    pub(super) fn set_tunable_value(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        let value = crate::tunable::find(TUNABLES, name)?.check(value)?;
        self.loosen_all();
        match name {
            "slice_idle" => self.slice_idle = from_millis(value),
            "timeout_sync" => self.timeout_sync = from_millis(value),
            "max_budget" => self.max_budget_setting = value * 1024,
            "fifo_expire_sync" => self.fifo_expire[0] = from_millis(value),
            "fifo_expire_async" => self.fifo_expire[1] = from_millis(value),
            "back_seek_max" => self.back_seek_max = value * 1024,
            "back_seek_penalty" => self.back_seek_penalty = value,
            "low_latency" => self.low_latency = value == 1,
            "wr_max_time" => self.wr_max_time = from_millis(value),
            "wr_max_softrt_rate" => self.wr_max_softrt_rate = value,
            _ => unreachable!("find() accepted only known names"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the seeky test is the kernel's hweight32(seek_history) > 19: a queue with a few
    // far requests among its last 32 (a sequential reader crossing files) is not seeky.
    #[test]
    fn seeky_means_more_than_19_far_requests_of_32() {
        assert!(!seeky_history(0b11111));
        assert!(!seeky_history((1 << 19) - 1));
        assert!(seeky_history((1 << 20) - 1));
        assert!(seeky_history(u32::MAX));
    }
    use crate::ioprio::IoPrio;
    use crate::testing::request;
    use crate::time::MICROSECOND;
    use crate::Op;
    use crate::Admitted;

    /// Sync sequential readers (one request in flight each, the next issued 20 us after a
    /// completion) under `policy`, each described by (flow, group, prio); the device serves one
    /// request at a time, each in `service`. Returns bytes served per reader by `end`.
    fn readers(
        policy: &mut Bfq,
        who: &[(u32, GroupId, IoPrio)],
        service: Nanos,
        end: Nanos,
    ) -> Vec<u64> {
        readers_from(policy, who, service, 0, end)
    }

    /// [`readers`] from time `start` (a policy that already ran until then). Events go in
    /// time order: a reader's next request arrives 20 us after its last completes, also while
    /// the device serves another's (one the policy injected while it waited for this one).
    fn readers_from(
        policy: &mut Bfq,
        who: &[(u32, GroupId, IoPrio)],
        service: Nanos,
        start: Nanos,
        end: Nanos,
    ) -> Vec<u64> {
        let mut pending: Vec<(Nanos, usize)> = (0..who.len()).map(|i| (start, i)).collect();
        let mut offsets: Vec<u64> = (0..who.len() as u64).map(|i| i << 32).collect();
        let mut got = vec![0; who.len()];
        let (mut now, mut next_id) = (start, start);
        // The request the device serves, and when it completes.
        let mut busy: Option<(Nanos, Request)> = None;
        while now < end {
            pending.sort();
            while pending.first().is_some_and(|p| p.0 <= now) {
                let (_, index) = pending.remove(0);
                next_id += 1;
                let mut r = request(next_id, Op::Read, offsets[index], 65536);
                offsets[index] += 65536;
                (r.flow, r.group, r.prio) = (FlowId(who[index].0), who[index].1, who[index].2);
                policy.insert(r, now);
            }
            if let Some((done, r)) = busy.take_if(|(done, _)| *done <= now) {
                let index = who.iter().position(|w| FlowId(w.0) == r.flow).unwrap();
                got[index] += r.len;
                policy.completed(&r, done);
                pending.push((done + 20 * MICROSECOND, index));
                continue;
            }
            let arrival = pending.iter().map(|p| p.0).min();
            let wake = match &busy {
                Some((done, _)) => Some(*done),
                None => match policy.dispatch(now) {
                    Dispatch::Request(r) => {
                        busy = Some((now + service, r));
                        continue;
                    }
                    Dispatch::WaitUntil(t) => Some(t),
                    Dispatch::Empty => None,
                },
            };
            now = [arrival, wake].into_iter().flatten().min().unwrap().max(now + 1);
        }
        got
    }

    /// What one turn that ends at `timeout_sync` (a budget timeout) after serving
    /// `served_percent` of a 4 MiB budget, with `max_budget` 4 MiB, charges the queue, in
    /// bytes; `raised`: the queue is weight-raised.
    fn timed_out_charge(served_percent: u64, raised: bool) -> u64 {
        let mut policy = unraised();
        policy.set_tunable("max_budget", 4096).unwrap();
        let r = first_read(&mut policy, 65536);
        policy.completed(&r, MILLISECOND);
        let key = policy.active.expect("the reader's turn");
        let queue = policy.queues.get_mut(&key).unwrap();
        let leaf = queue.leaf;
        queue.budget = 4 << 20;
        if raised {
            queue.wr_coeff = WR_COEFF;
            policy.raised += 1;
            policy.recount_wr_busy(key);
        }
        policy.served = (4 << 20) * served_percent / 100;
        policy.service = policy.served;
        let before = policy.fq.tags(leaf).unwrap().start;
        let weight = u128::from(policy.fq.weight(leaf).unwrap());
        policy.expire(policy.timeout_sync, Expiration::BudgetTimeout);
        // The queue ran empty: its remembered finish is its start moved by the charge.
        let after = policy.fq.tags(leaf).unwrap().finish;
        (((after - before) * weight) >> crate::fq::SERVICE_SHIFT) as u64
    }

    // Proves bfq_bfqq_expire's charging: a queue that timed out with a third of its budget
    // or more left (here also slow: less than half of max_budget in a long turn) is charged
    // its time, max_budget for a whole timeout; one that used two thirds of its budget is
    // charged its bytes, as is a weight-raised queue.
    #[test]
    fn a_timeout_charges_time_only_with_a_third_of_the_budget_left() {
        let mib = 1u64 << 20;
        let near = |charge: u64, want: u64| charge.abs_diff(want) <= 1;
        assert!(near(timed_out_charge(40, false), 4 * mib));
        assert!(near(timed_out_charge(80, false), 4 * mib * 80 / 100));
        assert!(near(timed_out_charge(40, true), 4 * mib * 40 / 100));
    }

    /// Bytes the async writer of flow 1 (`writes` queued writes of 64 KiB, sequential)
    /// dispatches in each of its first `turns` turns, each request completed at once; with
    /// `rival`, an idle-class reader is busy too (two classes: an asymmetric scenario), never
    /// served (the idle class waits 200 ms while the writer has requests).
    fn async_turns(writes: u64, turns: usize, rival: bool) -> Vec<u64> {
        let mut policy = unraised();
        if rival {
            let mut read = request(writes + 1, Op::Read, 1 << 30, 4096);
            read.flow = FlowId(2);
            read.prio = IoPrio::new(IoPrioClass::Idle, 7).unwrap();
            policy.insert(read, 0);
        }
        for i in 0..writes {
            let mut w = request(i + 1, Op::Write, i * 65536, 65536);
            w.flow = FlowId(1);
            policy.insert(w, 0);
        }
        let mut now = 0;
        let mut got: Vec<u64> = Vec::new();
        loop {
            let Dispatch::Request(r) = policy.dispatch(now) else {
                panic!("the writer has requests");
            };
            assert_eq!(r.flow, FlowId(1), "only the writer is served");
            if policy.served == r.len {
                if got.len() == turns {
                    return got;
                }
                got.push(0);
            }
            *got.last_mut().unwrap() += r.len;
            now += MICROSECOND;
            policy.completed(&r, now);
        }
    }

    // Proves bfq_serv_to_charge and __bfq_bfqq_recalc_budget for async queues: alone (a
    // symmetric scenario) each 64 KiB write costs three times its bytes, so the first turn,
    // on a new queue's two thirds of the default 8 MiB max_budget, takes 28 writes (not 85);
    // the next turns have the whole max_budget, 42 writes. Beside a busy queue of another
    // class (asymmetric) a write costs its bytes: 85 writes, then 128.
    #[test]
    fn async_writes_cost_three_times_their_bytes_while_symmetric() {
        let k = 65536;
        assert_eq!(async_turns(500, 3, false), [28 * k, 42 * k, 42 * k]);
        assert_eq!(async_turns(500, 2, true), [85 * k, 128 * k]);
        // A turn that ends with no more requests gives an async queue max_budget too, where
        // a sync queue's budget becomes what it used.
        let mut policy = unraised();
        for i in 0..10 {
            let mut w = request(i + 1, Op::Write, i * k, k);
            w.flow = FlowId(1);
            policy.insert(w, 0);
        }
        let write = request(1, Op::Write, 0, k);
        let key = policy.queues.find(&Bfq::key_of(&write));
        let mut now = 0;
        while let Dispatch::Request(r) = policy.dispatch(now) {
            now += MICROSECOND;
            policy.completed(&r, now);
        }
        assert!(policy.active.is_none());
        assert_eq!(policy.queues[&key.unwrap()].budget, policy.max_budget());
    }

    // Proves a weight-raised queue's budget as __bfq_bfqq_recalc_budget and
    // bfq_update_bfqq_wr_on_rq_arrival keep it: cut to two minimum budgets when its raising
    // starts, and two minimum budgets again after a turn that spent it (where an unraised
    // queue's budget grows fourfold).
    #[test]
    fn raised_queues_keep_two_minimum_budgets() {
        let mut policy = Bfq::new();
        let min = policy.min_budget();
        for i in 0..400u64 {
            let mut r = request(i + 1, Op::Read, i * 65536, 65536);
            r.flow = FlowId(1);
            policy.insert(r, 0);
        }
        let key = policy.queues.find(&QueueKey::Sync(FlowId(1))).unwrap();
        assert!(policy.queues[&key].wr_coeff > 1, "a new queue is interactive");
        assert_eq!(policy.queues[&key].budget, 2 * min);
        let mut now = 0;
        let mut dispatched = 0;
        while policy.active.is_some() || dispatched == 0 {
            let Dispatch::Request(r) = policy.dispatch(now) else {
                panic!("the reader has requests");
            };
            dispatched += r.len;
            now += MICROSECOND;
            policy.completed(&r, now);
            if policy.served == r.len && dispatched > r.len {
                break;
            }
        }
        assert_eq!(policy.queues[&key].budget, 2 * min, "spent, and still raised");
    }

    // Proves bfq_select_queue's keep_queue and bfq_completed_request's bfq_arm_slice_timer: a
    // sync queue that ran out of requests while one is in the drive stays in service, however
    // long the drive takes, and the wait for its next request starts at that completion; when
    // it ends, the turn ends too idle (__bfq_bfqq_recalc_budget's BFQQE_TOO_IDLE with nothing
    // in the drive: four minimum budgets less).
    #[test]
    fn the_idle_timer_starts_at_the_last_completion() {
        let mut policy = unraised();
        // A fixed max_budget: one read in 50 ms is no peak rate to size budgets by.
        policy.set_tunable("max_budget", 8192).unwrap();
        let r = first_read(&mut policy, 4096);
        let key = policy.active.expect("the reader's turn");
        let (before, min) = (policy.queues[&key].budget, policy.min_budget());
        // Its read takes 50 ms in the drive, six idle waits: the queue keeps its turn.
        let mut now = 0;
        while now < 50 * MILLISECOND {
            let Dispatch::WaitUntil(until) = policy.dispatch(now) else {
                panic!("the disk waits for the reader's read in the drive");
            };
            assert!(until > now);
            assert_eq!(policy.active, Some(key), "still in service at {now}");
            now = until.min(now + 5 * MILLISECOND);
        }
        policy.completed(&r, 50 * MILLISECOND);
        assert_eq!(
            policy.dispatch(50 * MILLISECOND),
            Dispatch::WaitUntil(50 * MILLISECOND + policy.slice_idle),
            "the wait starts at the completion"
        );
        assert_eq!(policy.active, Some(key));
        assert_eq!(policy.dispatch(50 * MILLISECOND + policy.slice_idle), Dispatch::Empty);
        assert!(policy.active.is_none(), "the turn ended too idle");
        assert_eq!(
            policy.queues[&key].budget,
            before.saturating_sub(4 * min).max(min)
        );
    }

    // Proves bfq_arm_slice_timer's length: slice_idle; at most BFQ_MIN_TT (2 ms) for a seeky
    // queue that is not raised while the scenario is symmetric; slice_idle again when it is
    // not (a lighter queue is busy); at least 20 ms for a raised queue. And
    // bfq_asymmetric_scenario's smallest_weight: beside a heavier queue, the seeky queue of
    // the smallest weight is not idled for at all (its turn ends with its last completion).
    #[test]
    fn the_idle_wait_follows_seekiness_raising_and_symmetry() {
        let wait = |policy: &mut Bfq, seeky: bool, rival: Option<u8>| -> Option<Nanos> {
            let r = first_read(policy, 4096);
            let key = policy.active.expect("the reader's turn");
            if seeky {
                policy.queues.get_mut(&key).unwrap().seek_history = u32::MAX;
            }
            if let Some(level) = rival {
                let mut other = request(2, Op::Read, 1 << 30, 4096);
                (other.flow, other.prio) = (FlowId(2), be(level));
                // Busy beside the reader, without the preemption a heavier one's arrival would
                // bring.
                policy.active = None;
                policy.insert(other, 0);
                policy.active = Some(key);
            }
            policy.completed(&r, MILLISECOND);
            let until = policy.idle_until?;
            assert_eq!(policy.active, Some(key), "idling for the reader");
            Some(until - MILLISECOND)
        };
        let slice_idle = Bfq::new().slice_idle;
        assert_eq!(wait(&mut unraised(), false, None), Some(slice_idle));
        assert_eq!(wait(&mut unraised(), true, None), Some(2 * MILLISECOND));
        // BE 7 weighs 10 against the reader's 40; BE 0, 80.
        assert_eq!(wait(&mut unraised(), true, Some(7)), Some(slice_idle));
        assert_eq!(wait(&mut unraised(), true, Some(0)), None);
        // A new queue is raised (interactive).
        assert_eq!(wait(&mut Bfq::new(), true, None), Some(20 * MILLISECOND));
    }

    // Proves bfq_set_budget_timeout: a turn times out timeout_sync after it began, 30 times
    // that for an interactive raised queue. A reader with 300 reads queued, each 10 ms in the
    // drive: unraised, its first turn times out after 13 (125 ms); raised, it runs until its
    // budget of two minimum budgets (512 KiB with max_budget 8 MiB) is spent, 128 reads.
    #[test]
    fn raised_turns_time_out_thirty_times_later() {
        for (raised, reads) in [(false, 13), (true, 128)] {
            let mut policy = if raised { Bfq::new() } else { unraised() };
            policy.set_tunable("max_budget", 8192).unwrap();
            for id in 0..300u64 {
                let mut r = request(id, Op::Read, id * 4096, 4096);
                r.flow = FlowId(1);
                policy.insert(r, 0);
            }
            let (mut now, mut served) = (0, 0);
            loop {
                let Dispatch::Request(r) = policy.dispatch(now) else {
                    panic!("the reader has reads queued");
                };
                if policy.turn_start != 0 {
                    // This read began the reader's next turn.
                    break;
                }
                served += 1;
                now += 10 * MILLISECOND;
                policy.completed(&r, now);
            }
            assert_eq!(served, reads, "raised: {raised}");
        }
    }

    // Proves __bfq_bfqq_expire's budget_timeout of an emptied queue: its silence counts from
    // when its turn ended with nothing to do, not from when that turn would have timed out (for
    // a raised queue 3.75 s after it began), so a queue back 2.5 s later is interactive again.
    #[test]
    fn silence_counts_from_when_a_queue_is_left_with_nothing_to_do() {
        let mut policy = Bfq::new();
        policy.set_tunable("wr_max_softrt_rate", 0).unwrap();
        let key = QueueKey::Sync(FlowId(1));
        let read = |policy: &mut Bfq, id: u64, at: Nanos| {
            let mut r = request(id, Op::Read, id << 30, 4096);
            r.flow = FlowId(1);
            policy.insert(r, at);
            let Dispatch::Request(r) = policy.dispatch(at) else {
                panic!("the read goes out");
            };
            policy.completed(&r, at + MILLISECOND);
            let mut now = at + MILLISECOND;
            while let Dispatch::WaitUntil(until) = policy.dispatch(now) {
                now = until;
            }
        };
        read(&mut policy, 1, 0);
        assert_eq!(policy.queues[&key].wr_start, 0, "raised as new");
        read(&mut policy, 2, 2500 * MILLISECOND);
        assert_eq!(
            policy.queues[&key].wr_start,
            2500 * MILLISECOND,
            "raised anew after 2 s of silence"
        );
    }

    // Proves bfq_bfqq_idle_for_long_time's `dispatched == 0`: a queue that becomes busy while
    // a request of its own is still in the drive is not interactive, however long it was
    // silent. With slice_idle=0 the reader's turn ends when it runs out of requests; its next
    // request comes 8 s later (its raising, 7 s, is over), the first still in the drive.
    #[test]
    fn a_queue_with_a_request_in_the_drive_is_not_interactive() {
        for in_drive in [true, false] {
            let mut policy = Bfq::new();
            policy.set_tunable("slice_idle", 0).unwrap();
            policy.set_tunable("wr_max_softrt_rate", 0).unwrap();
            let r = first_read(&mut policy, 4096);
            let key = policy.active.expect("the reader's turn");
            assert_eq!(policy.queues[&key].wr_coeff, WR_COEFF, "new: raised");
            if !in_drive {
                policy.completed(&r, MILLISECOND);
            }
            assert_eq!(policy.dispatch(MILLISECOND), Dispatch::Empty);
            let mut next = request(2, Op::Read, 1 << 30, 4096);
            next.flow = FlowId(1);
            policy.insert(next, 8 * SECOND);
            let want = if in_drive { 1 } else { WR_COEFF };
            assert_eq!(policy.queues[&key].wr_coeff, want, "in the drive: {in_drive}");
        }
    }

    // Proves a max_budget below the 4 KiB floor of the minimum budget is taken, not a panic
    // (found by fuzzing: `--set max_budget=1` made the budget of a queue that ran out of
    // requests clamp between 4096 and 1024 bytes).
    #[test]
    fn a_tiny_max_budget_bounds_the_minimum_budget() {
        let mut policy = unraised();
        policy.set_tunable("max_budget", 1).unwrap();
        policy.set_tunable("slice_idle", 0).unwrap();
        assert_eq!((policy.min_budget(), policy.max_budget()), (1024, 1024));
        let r = first_read(&mut policy, 4096);
        policy.completed(&r, MICROSECOND);
        // It ran out of requests, with nothing to idle for: its turn ends.
        assert!(matches!(policy.dispatch(MICROSECOND), Dispatch::Empty));
        assert!(policy.active.is_none());
    }

    /// Queues one read of `len` bytes from flow 1 at time 0 and dispatches it: the reader's
    /// first request, in the drive.
    fn first_read(policy: &mut Bfq, len: u64) -> Request {
        let mut r = request(1, Op::Read, 0, len);
        r.flow = FlowId(1);
        policy.insert(r, 0);
        let Dispatch::Request(r) = policy.dispatch(0) else {
            panic!("the reader's request goes out");
        };
        r
    }

    /// BFQ with `low_latency=0`: no weight raising.
    fn unraised() -> Bfq {
        let mut policy = Bfq::new();
        policy.set_tunable("low_latency", 0).unwrap();
        policy
    }

    fn be(level: u8) -> IoPrio {
        IoPrio::new(IoPrioClass::Be, level).unwrap()
    }

    // Proves the IDLE class waits its turn: beside a busy BE reader, an IDLE flow with 50
    // requests queued gets one dispatched per BFQ_CL_IDLE_TIMEOUT (200 ms), not a budget's
    // worth, and still progresses.
    #[test]
    fn the_idle_class_gets_one_request_per_idle_timeout() {
        let mut policy = Bfq::new();
        let idle = IoPrio::new(IoPrioClass::Idle, 0).unwrap();
        for id in 0..50u64 {
            let mut r = request(1000 + id, Op::Read, (1 << 40) + id * 65536, 65536);
            (r.flow, r.prio) = (FlowId(2), idle);
            policy.insert(r, 0);
        }
        let (mut now, mut next_id, mut offset, mut idle_served) = (0, 0, 0, 0);
        let mut be_pending = Some(0);
        while now < SECOND {
            if be_pending.is_some_and(|at| at <= now) {
                be_pending = None;
                next_id += 1;
                let mut r = request(next_id, Op::Read, offset, 65536);
                offset += 65536;
                (r.flow, r.prio) = (FlowId(1), be(4));
                policy.insert(r, now);
            }
            match policy.dispatch(now) {
                Dispatch::Request(r) => {
                    now += MILLISECOND;
                    policy.completed(&r, now);
                    if r.flow == FlowId(2) {
                        idle_served += 1;
                    } else {
                        be_pending = Some(now + 20 * MICROSECOND);
                    }
                }
                Dispatch::WaitUntil(t) => now = t.min(be_pending.unwrap_or(t)).max(now + 1),
                Dispatch::Empty => now = be_pending.unwrap_or(now + MILLISECOND).max(now),
            }
        }
        assert!(
            (1..=6).contains(&idle_served),
            "idle class served {idle_served} requests in 1 s"
        );
    }

    // Proves ioprio levels weigh (8 - level) x 10: BE 0 against BE 4 gets 80:40 = 2x the
    // bytes, within 10% (without weight raising, which only the default weight gets).
    #[test]
    fn priorities_weigh_by_level() {
        let mut bfq = unraised();
        let got = readers(
            &mut bfq,
            &[(1, GroupId::ROOT, be(0)), (2, GroupId::ROOT, be(4))],
            500 * MICROSECOND,
            30 * SECOND,
        );
        let ratio = got[0] as f64 / got[1] as f64;
        assert!((ratio / 2.0 - 1.0).abs() < 0.1, "{got:?}: {ratio}");
    }

    // Proves cgroups weigh by io.weight above the queues: a 1000 group's one reader gets twice
    // the bytes of a 500 group's two readers together, within 10%.
    #[test]
    fn groups_weigh_by_io_weight() {
        let mut groups = Groups::new();
        let (g1, g2) = (groups.intern("/g1").unwrap(), groups.intern("/g2").unwrap());
        groups.set(g1, "io.weight", "500").unwrap();
        groups.set(g2, "io.weight", "1000").unwrap();
        let mut bfq = Bfq::new();
        bfq.set_groups(&groups);
        let got = readers(
            &mut bfq,
            &[(1, g1, be(4)), (2, g1, be(4)), (3, g2, be(4))],
            500 * MICROSECOND,
            30 * SECOND,
        );
        let ratio = got[2] as f64 / (got[0] + got[1]) as f64;
        assert!((ratio / 2.0 - 1.0).abs() < 0.1, "{got:?}: {ratio}");
    }

    // Proves budget feedback: a queue that keeps spending its budget grows it up to max_budget
    // (without weight raising: while raised queues are busy, idling does not pay for
    // throughput alone, so two raised twins are not idled for and never spend a budget).
    #[test]
    fn budgets_grow_when_spent() {
        let mut bfq = unraised();
        bfq.set_tunable("max_budget", 4096).unwrap();
        let _ = readers(
            &mut bfq,
            &[(1, GroupId::ROOT, be(4)), (2, GroupId::ROOT, be(4))],
            100 * MICROSECOND,
            5 * SECOND,
        );
        let budgets: Vec<u64> = bfq.queues.values().map(|q| q.budget).collect();
        assert!(budgets.iter().all(|&b| b == 4096 * 1024), "{budgets:?}");
    }

    // Proves queues of two classes make an asymmetric scenario (bfq_asymmetric_scenario's
    // multiple_classes_busy): after a seeky RT reader's request completes, bfq idles for its
    // next one, keeping it in service, instead of giving the BE reader of the same weight its
    // turn; when both are BE, the seeky reader needs no idling, and the other's arrival ends
    // its turn.
    #[test]
    fn two_classes_busy_idle_for_a_seeky_queue() {
        let rt = IoPrio::new(IoPrioClass::Rt, 0).unwrap();
        for (first, idles) in [(rt, true), (be(0), false)] {
            let mut bfq = Bfq::new();
            let (mut now, mut id) = (0, 0);
            let mut next = |flow: u32, prio: IoPrio, offset: u64| {
                id += 1;
                let mut r = request(id, Op::Read, offset, 4096);
                (r.flow, r.prio) = (FlowId(flow), prio);
                r
            };
            // The first reader seeks far on every request: it is seeky after 20.
            for round in 0..24u64 {
                bfq.insert(next(1, first, (round * 7919 % 13) << 30), now);
                let Dispatch::Request(r) = bfq.dispatch(now) else {
                    panic!("the reader's request is served")
                };
                now += MILLISECOND;
                bfq.completed(&r, now);
                now += 20 * MICROSECOND;
            }
            assert!(bfq.queues.values().any(|q| q.seeky()));
            bfq.insert(next(1, first, 1 << 30), now);
            bfq.insert(next(2, be(0), 5 << 30), now);
            let Dispatch::Request(r) = bfq.dispatch(now) else {
                panic!("one of them is served")
            };
            if !idles {
                // Both BE: the first reader needs no idling, so the twin's arrival ended its
                // turn (bfq_bfqq_handle_idle_busy_switch).
                assert_eq!(r.flow, FlowId(2), "the BE twin preempts");
                continue;
            }
            assert_eq!(r.flow, FlowId(1), "the first reader's turn goes on");
            now += MILLISECOND;
            bfq.completed(&r, now);
            // Idling keeps the first reader in service; the BE reader's request may still go
            // to the drive meanwhile, injected (the next test), but its turn does not begin.
            let in_service = |bfq: &Bfq| bfq.active_key() == Some(QueueKey::Sync(FlowId(1)));
            match bfq.dispatch(now) {
                Dispatch::WaitUntil(_) => assert!(idles, "{first:?}: idled for a BE twin"),
                Dispatch::Request(r) => {
                    assert_eq!(r.flow, FlowId(2));
                    assert_eq!(
                        in_service(&bfq),
                        idles,
                        "{first:?}: the first reader's turn ended: {}",
                        !in_service(&bfq)
                    );
                }
                Dispatch::Empty => panic!("the BE reader has a request"),
            }
        }
    }


    /// Offers request `id` (`op` at `id` MiB, sync or not, of `flow` at `prio`) to `elevator`.
    fn offer(
        elevator: &mut crate::Elevator,
        id: u64,
        op: Op,
        sync: bool,
        flow: u32,
        prio: IoPrio,
    ) -> bool {
        let mut r = request(id, op, id << 20, 4096);
        (r.sync, r.flow, r.prio) = (sync, FlowId(flow), prio);
        elevator.submit(r, 0).is_ok()
    }

    // Proves bfq_limit_depth's depths: async I/O takes at most half of nr_requests, sync
    // writes three quarters, and reads every one.
    #[test]
    fn limit_depth_keeps_requests_for_sync_reads() {
        let mut elevator = crate::Elevator::new(Box::new(unraised()), 8);
        let admitted = (1..=8)
            .filter(|&id| offer(&mut elevator, id, Op::Write, false, id as u32, be(4)))
            .count();
        assert_eq!(admitted, 4, "async writes take half of the 8 requests");
        assert!(offer(&mut elevator, 20, Op::Write, true, 20, be(4)));
        assert!(offer(&mut elevator, 21, Op::Write, true, 20, be(4)));
        assert!(
            !offer(&mut elevator, 22, Op::Write, true, 20, be(4)),
            "sync writes stop at three quarters (6 of 8)"
        );
        assert!(offer(&mut elevator, 30, Op::Read, true, 30, be(4)));
        assert!(offer(&mut elevator, 31, Op::Read, true, 30, be(4)));
        assert!(!offer(&mut elevator, 32, Op::Read, true, 30, be(4)), "all 8 taken");
        assert!(elevator.stats().limited >= 5);
    }

    // Proves smallest_sum_held: below the sum it gives, over_limit's share of a queue with
    // that many requests would let it take one more; at it and at every larger sum, not.
    #[test]
    fn the_smallest_sum_holding_a_waiter_is_where_its_share_stops_growing() {
        for limit_weight in [0u64, 1, 7, 64, 100, 6400, 64 * 10_000] {
            for held in 1u64..6 {
                let share = |s: u64| (limit_weight + s / 2) / s;
                let floor = smallest_sum_held(limit_weight, held);
                assert!(floor >= 1);
                assert!(
                    floor == 1 || share(floor - 1) > held,
                    "{limit_weight} {held}: over below {floor}"
                );
                for s in floor..floor + 2000 {
                    assert!(share(s) <= held, "{limit_weight} {held}: not over at {s}");
                }
            }
        }
    }

    /// What happened to the requests of a run of [`held_run`], in order.
    #[derive(Debug, PartialEq, Eq)]
    enum Event {
        In(u64, Admitted),
        Out(u64),
        Done(u64),
        Wait(Nanos),
    }

    /// The workload of a [`held_run`].
    #[derive(Clone, Copy, Debug)]
    struct HeldWorkload {
        flows: u32,
        depth: u32,
        per_flow: u32,
        nr_requests: u32,
        device_depth: usize,
        with_groups: bool,
        /// `nr_group_requests` (0: none).
        group_requests: u32,
        seed: u64,
    }

    /// `flows` jobs, each `depth` requests deep until it has issued `per_flow`, through a
    /// queue of `nr_requests` and a device that holds `device_depth` and completes them in an
    /// order `seed` draws; each job's I/O kind (read, sync or async write), priority (classes
    /// and levels) and, `with_groups`, cgroup are drawn too. The events, in order.
    /// With `holds` off, every waiter is asked at every pass ([`crate::Waiters::asking_all`]).
    fn held_run(policy: Box<dyn Policy>, workload: HeldWorkload, holds: bool) -> Vec<Event> {
        let HeldWorkload {
            flows,
            depth,
            per_flow,
            nr_requests,
            device_depth,
            with_groups,
            group_requests,
            seed,
        } = workload;
        let mut rng = crate::testing::XorShift::new(seed);
        let mut draw = move |n: u64| rng.below(n);
        // Flows of the root and of three cgroups, one inside another.
        let mut groups = Groups::new();
        let cgroups = [
            GroupId::ROOT,
            groups.intern("/a").unwrap(),
            groups.intern("/b").unwrap(),
            groups.intern("/b/c").unwrap(),
        ];
        for (cgroup, weight) in cgroups[1..].iter().zip(["100", "300", "200"]) {
            groups.set(*cgroup, "io.weight", weight).unwrap();
        }
        let kinds: Vec<(Op, bool, IoPrio, GroupId)> = (0..flows)
            .map(|_| {
                let (op, sync) = match draw(4) {
                    0 | 1 => (Op::Read, true),
                    2 => (Op::Write, true),
                    _ => (Op::Write, false),
                };
                let prio = match draw(8) {
                    0 => IoPrio::new(IoPrioClass::Rt, draw(8) as u8).unwrap(),
                    1 => IoPrio::new(IoPrioClass::Idle, 0).unwrap(),
                    _ => be(draw(8) as u8),
                };
                let cgroup = if with_groups {
                    cgroups[draw(4) as usize]
                } else {
                    GroupId::ROOT
                };
                (op, sync, prio, cgroup)
            })
            .collect();
        let mut elevator = crate::Elevator::new(policy, nr_requests);
        if with_groups {
            elevator.set_groups(&groups);
        }
        elevator
            .set("nr_group_requests", &group_requests.to_string())
            .unwrap();
        let mut waiters = if holds {
            crate::Waiters::new()
        } else {
            crate::Waiters::asking_all()
        };
        let mut events = Vec::new();
        let mut issued = vec![0u32; flows as usize];
        let mut next_id = 1u64;
        let mut now: Nanos = 0;
        let mut issue = |flow: u32, waiters: &mut crate::Waiters, elevator: &mut crate::Elevator,
                         events: &mut Vec<Event>, now: Nanos, draw: &mut dyn FnMut(u64) -> u64| {
            if issued[flow as usize] == per_flow {
                return;
            }
            issued[flow as usize] += 1;
            let (op, sync, prio, cgroup) = kinds[flow as usize];
            let mut r = request(next_id, op, draw(1 << 20) * 8 * 512, 4096);
            (r.sync, r.flow, r.prio, r.group) = (sync, FlowId(flow), prio, cgroup);
            next_id += 1;
            waiters.submit(r, elevator, now, |id, _, how| events.push(Event::In(id.0, how)));
        };
        for _ in 0..depth {
            for flow in 0..flows {
                issue(flow, &mut waiters, &mut elevator, &mut events, now, &mut draw);
            }
        }
        let mut device: Vec<Request> = Vec::new();
        let mut wake: Option<Nanos> = None;
        for _ in 0..100_000 {
            while device.len() < device_depth {
                match elevator.dispatch(now) {
                    Dispatch::Request(r) => {
                        events.push(Event::Out(r.id.0));
                        device.push(r);
                        waiters.admit(&mut elevator, now, |id, _, how| {
                            events.push(Event::In(id.0, how))
                        });
                    }
                    Dispatch::WaitUntil(at) => {
                        wake = Some(at);
                        break;
                    }
                    Dispatch::Empty => break,
                }
            }
            if device.is_empty() {
                match wake.take() {
                    Some(at) => {
                        events.push(Event::Wait(at));
                        now = now.max(at);
                        continue;
                    }
                    None => break,
                }
            }
            now += 1 + draw(2 * MILLISECOND);
            if wake.is_some_and(|at| at <= now) {
                // The policy's timer first: the device's completion comes after it.
                now = wake.take().unwrap();
                continue;
            }
            let done = device.swap_remove(draw(device.len() as u64) as usize);
            elevator.completed(&done, now);
            events.push(Event::Done(done.id.0));
            waiters.admit(&mut elevator, now, |id, _, how| events.push(Event::In(id.0, how)));
            issue(done.flow.0, &mut waiters, &mut elevator, &mut events, now, &mut draw);
        }
        events
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        // Proves that setting waiters aside (under bfq's holds, or for their cgroup's
        // nr_group_requests) changes nothing but how often they are asked: the same requests
        // go in, out and complete at the same times as when every waiter is asked at every
        // pass, with reads, sync and async writes of every class, flows of the root and of
        // nested cgroups, weight raising, idling and completions in any order, under bfq and
        // under deadline. (A debug build also checks, at every pass, that each waiter set
        // aside is one that would be turned away.)
        #[test]
        fn held_waiters_go_in_as_asked_ones(
            flows in 2u32..40,
            depth in 1u32..8,
            nr_requests in 2u32..40,
            device_depth in 1usize..8,
            with_groups in proptest::prelude::any::<bool>(),
            group_requests in proptest::prop_oneof![proptest::strategy::Just(0u32), 1u32..8],
            deadline in proptest::prelude::any::<bool>(),
            seed in proptest::prelude::any::<u64>(),
        ) {
            let workload = HeldWorkload {
                flows,
                depth,
                per_flow: 24,
                nr_requests,
                device_depth,
                with_groups,
                group_requests,
                seed,
            };
            let policy = || -> Box<dyn Policy> {
                if deadline {
                    Box::<crate::policies::deadline::Deadline>::default()
                } else {
                    Box::<Bfq>::default()
                }
            };
            let held = held_run(policy(), workload, true);
            let asked = held_run(policy(), workload, false);
            proptest::prop_assert!(held.iter().filter(|e| matches!(e, Event::Done(_))).count() > 0);
            proptest::prop_assert_eq!(held, asked);
    }
    }

    // Proves bfqq_request_over_limit: an IDLE-class queue beside a busy best-effort one holds
    // its weight's share of the requests, the classes weighing IOPRIO_BE_NR apart
    // (64 x 10 / (40 x 8 + 10) rounds to 2), while the best-effort queue is not limited.
    #[test]
    fn an_idle_queue_holds_its_share_of_the_requests() {
        // Without weight raising, which would multiply the reader's weight by 30.
        let mut elevator = crate::Elevator::new(Box::new(unraised()), 64);
        let idle = IoPrio::new(IoPrioClass::Idle, 0).unwrap();
        for id in 1..=8 {
            assert!(offer(&mut elevator, id, Op::Read, true, 1, be(4)));
        }
        let idle_admitted = (100..108)
            .filter(|&id| offer(&mut elevator, id, Op::Read, true, 2, idle))
            .count();
        assert_eq!(idle_admitted, 2);
        for id in 9..=40 {
            assert!(offer(&mut elevator, id, Op::Read, true, 1, be(4)));
        }
    }

    // Proves a read is not held behind an async write waiting for its depth: the waiters
    // pass each other when the queue has room, and the write goes in once a request frees.
    #[test]
    fn a_read_passes_a_write_waiting_for_its_depth() {
        // Without weight raising, whose raised reader would shrink the async depth to 3/16.
        let mut elevator = crate::Elevator::new(Box::new(unraised()), 4);
        let mut waiters = crate::Waiters::new();
        for id in 1..=3 {
            let mut r = request(id, Op::Write, id << 20, 4096);
            (r.sync, r.flow) = (false, FlowId(id as u32));
            waiters.push(r);
        }
        let mut read = request(9, Op::Read, 9 << 20, 4096);
        read.flow = FlowId(9);
        waiters.push(read);
        let mut admitted = Vec::new();
        waiters.admit(&mut elevator, 0, |id, _, _| admitted.push(id.0));
        assert_eq!(admitted, [1, 2, 9], "two writes (half of 4), then the read");
        assert_eq!(waiters.len(), 1);
        let Dispatch::Request(done) = elevator.dispatch(0) else {
            panic!("work queued")
        };
        elevator.completed(&done, MICROSECOND);
        // Three in use again: still at the async limit of 2.
        waiters.admit(&mut elevator, MICROSECOND, |id, _, _| admitted.push(id.0));
        assert_eq!(waiters.len(), 1);
        for _ in 0..2 {
            let Dispatch::Request(done) = elevator.dispatch(MICROSECOND) else {
                panic!("work queued")
            };
            elevator.completed(&done, 2 * MICROSECOND);
        }
        waiters.admit(&mut elevator, 2 * MICROSECOND, |id, _, _| admitted.push(id.0));
        assert_eq!(admitted, [1, 2, 9, 3]);
        assert!(waiters.is_empty());
    }

    // Proves a waiter turned away by bfq_limit_depth waits without merging, as a sleeper in
    // blk_mq_get_tag does (it merges only once it holds a request, at insertion), and merges
    // then: an async write adjoining a queued one, behind two that hold the async half of 4.
    #[test]
    fn a_waiter_over_its_depth_merges_only_once_it_may_allocate() {
        let mut elevator = crate::Elevator::new(Box::new(unraised()), 4);
        let mut waiters = crate::Waiters::new();
        for (id, offset) in [(1, 1 << 20), (2, 2 << 20), (3, (2 << 20) + 4096)] {
            let mut w = request(id, Op::Write, offset, 4096);
            (w.sync, w.flow) = (false, FlowId(1));
            waiters.push(w);
        }
        let mut admitted = Vec::new();
        waiters.admit(&mut elevator, 0, |id, _, how| admitted.push((id.0, how)));
        assert_eq!(
            admitted,
            [(1, Admitted::Queued), (2, Admitted::Queued)],
            "the third waits for a request, though it adjoins the second"
        );
        assert_eq!(waiters.len(), 1);
        assert_eq!(elevator.stats().limited, 1);
        let Dispatch::Request(first) = elevator.dispatch(0) else {
            panic!("work queued")
        };
        assert_eq!(first.id.0, 1);
        elevator.completed(&first, MICROSECOND);
        waiters.admit(&mut elevator, MICROSECOND, |id, _, how| {
            admitted.push((id.0, how))
        });
        assert_eq!(admitted[2], (3, Admitted::Merged), "in, it merges");
        assert!(waiters.is_empty());
        assert_eq!(elevator.policy().queued(), 1);
    }

    // Proves bfq_bfqq_handle_idle_busy_switch's preemption: a queue that becomes busy weighing
    // more than the one in service (BE level 0, weight 80, against BE level 7, weight 10) ends
    // its turn at once; a lighter one does not, nor a twin while the sequential queue in
    // service is worth idling for; a higher class does whatever the weights (BE level 7 over
    // IDLE); and any newcomer does when the queue in service needs no idling (two raised
    // twins: bfq_better_to_idle).
    #[test]
    fn a_heavier_or_higher_class_newcomer_preempts() {
        let idle = IoPrio::new(IoPrioClass::Idle, 0).unwrap();
        for (serving, newcomer, raised, preempts) in [
            (be(7), be(0), false, true),
            (be(0), be(7), false, false),
            (be(4), be(4), false, false),
            (idle, be(7), false, true),
            (be(4), be(4), true, true),
        ] {
            let mut policy = if raised { Bfq::new() } else { unraised() };
            // The serving flow has two requests, so its turn goes on after the first.
            for (id, offset) in [(1, 0), (2, 65536)] {
                let mut r = request(id, Op::Read, offset, 65536);
                (r.flow, r.prio) = (FlowId(1), serving);
                policy.insert(r, 0);
            }
            let first = match policy.dispatch(0) {
                Dispatch::Request(r) => r,
                other => panic!("{other:?}"),
            };
            assert_eq!(first.flow, FlowId(1));
            let mut r = request(3, Op::Read, 1 << 40, 65536);
            (r.flow, r.prio) = (FlowId(2), newcomer);
            policy.insert(r, MICROSECOND);
            let next = match policy.dispatch(MICROSECOND) {
                Dispatch::Request(r) => r.flow,
                other => panic!("{other:?}"),
            };
            assert_eq!(
                next == FlowId(2),
                preempts,
                "serving {serving:?}, newcomer {newcomer:?}"
            );
        }
    }

    // Proves next_queue_may_preempt: an RT newcomer in a light cgroup preempts a BE queue of a
    // heavy cgroup when that queue is the cgroup's only busy one (BFQ took the cgroup out of
    // the root's tree when it put the queue in service), not when a sibling keeps the heavy
    // cgroup in the race and the root would serve it next again.
    #[test]
    fn a_newcomer_preempts_only_if_the_root_would_serve_elsewhere() {
        for sibling in [false, true] {
            let mut groups = Groups::new();
            let (heavy, light) = (groups.intern("/heavy").unwrap(), groups.intern("/light").unwrap());
            groups.set(heavy, "io.weight", "1000").unwrap();
            groups.set(light, "io.weight", "100").unwrap();
            let mut policy = unraised();
            policy.set_groups(&groups);
            let read = |id: u64, flow: u32, group: GroupId, prio: IoPrio| {
                let mut r = request(id, Op::Read, (id << 30) + u64::from(flow), 65536);
                (r.flow, r.group, r.prio) = (FlowId(flow), group, prio);
                r
            };
            // The served flow has two requests, so its turn goes on after the first.
            policy.insert(read(1, 1, heavy, be(4)), 0);
            policy.insert(read(2, 1, heavy, be(4)), 0);
            let Dispatch::Request(first) = policy.dispatch(0) else {
                panic!("work queued");
            };
            assert_eq!(first.flow, FlowId(1));
            if sibling {
                policy.insert(read(3, 2, heavy, be(4)), MICROSECOND);
                assert_eq!(policy.active_key(), Some(QueueKey::Sync(FlowId(1))));
            }
            let rt = IoPrio::new(IoPrioClass::Rt, 0).unwrap();
            policy.insert(read(4, 3, light, rt), 2 * MICROSECOND);
            let Dispatch::Request(next) = policy.dispatch(2 * MICROSECOND) else {
                panic!("work queued");
            };
            assert_eq!(next.flow == FlowId(3), !sibling, "sibling: {sibling}");
        }
    }

    // Proves interactive weight raising (bfq_update_bfqq_wr_on_rq_arrival, bfq_update_wr_data,
    // bfq_wr_duration): a new sync queue weighs 30 times its weight for the time the peak rate
    // gives (7 s before any is measured); the raising ends when that time is up; a queue that
    // starts again within 2 s of its last turn is not raised, one silent longer is; async and
    // IDLE-class queues never are; with low_latency=0 nothing is.
    #[test]
    fn interactive_queues_are_weight_raised() {
        let mut policy = Bfq::new();
        // Soft real-time raising apart (the next test): a queue back every 1.5 s is one.
        policy.set_tunable("wr_max_softrt_rate", 0).unwrap();
        let read = |policy: &mut Bfq, id: u64, flow: u32, at: Nanos| {
            let mut r = request(id, Op::Read, id << 20, 4096);
            r.flow = FlowId(flow);
            policy.insert(r, at);
            let Dispatch::Request(r) = policy.dispatch(at) else {
                panic!("work queued")
            };
            policy.completed(&r, at + MILLISECOND);
            // Nothing more: the queue idles for slice_idle, then its turn ends.
            let mut now = at + MILLISECOND;
            while let Dispatch::WaitUntil(until) = policy.dispatch(now) {
                now = until;
            }
        };
        let key = QueueKey::Sync(FlowId(1));
        read(&mut policy, 1, 1, 0);
        let queue = &policy.queues[&key];
        assert_eq!((queue.wr_coeff, queue.wr_duration), (30, 7 * SECOND));
        assert_eq!(policy.fq.weight(queue.leaf).unwrap(), 40 * 30);
        // Back within 2 s of its turn: still raised, not raised anew.
        read(&mut policy, 2, 1, SECOND);
        assert_eq!(policy.queues[&key].wr_start, 0);
        // The raising time is up at its next arrival; silent 2 s since, it is raised again.
        read(&mut policy, 3, 1, 8 * SECOND);
        assert_eq!(policy.queues[&key].wr_start, 8 * SECOND);
        // Every 1.5 s, never 2 s silent: when the 7 s are up it is not raised anew.
        for (id, at) in (4..).zip((1..=5).map(|i| 8 * SECOND + i * 1500 * MILLISECOND)) {
            read(&mut policy, id, 1, at);
        }
        assert_eq!(policy.queues[&key].wr_coeff, 1);
        assert_eq!(policy.fq.weight(policy.queues[&key].leaf).unwrap(), 40);
        // An IDLE-class queue is not raised; nor is anything with low_latency=0.
        let mut r = request(9, Op::Read, 0, 4096);
        (r.flow, r.prio) = (FlowId(9), IoPrio::new(IoPrioClass::Idle, 0).unwrap());
        policy.insert(r, 30 * SECOND);
        assert_eq!(policy.queues[&QueueKey::Sync(FlowId(9))].wr_coeff, 1);
        let mut plain = unraised();
        read(&mut plain, 1, 1, 0);
        assert_eq!(plain.queues[&key].wr_coeff, 1);
        // Nor is a queue whose weight is not the default's (BE 2 weighs 60).
        let mut r = request(10, Op::Read, 0, 4096);
        (r.flow, r.prio) = (FlowId(10), be(2));
        policy.insert(r, 40 * SECOND);
        assert_eq!(policy.queues[&QueueKey::Sync(FlowId(10))].wr_coeff, 1);
    }

    // Proves soft real-time raising (bfq_bfqq_softrt_next_start, bfq_bfqq_expire,
    // bfq_update_bfqq_wr_on_rq_arrival, switch_back_to_interactive_wr): a queue that comes
    // back no sooner than slice_idle + 4 ms after its turn ended, having taken little
    // bandwidth, weighs 3000 times more for 300 ms, recharged at each such return; one back
    // too soon, or after taking more than wr_max_softrt_rate allows, is not; when a soft
    // real-time raising that interrupted an interactive one ends within the interactive
    // time, the interactive raising resumes.
    #[test]
    fn isochronous_queues_are_soft_real_time() {
        let read = |policy: &mut Bfq, id: u64, len: u64, at: Nanos| -> Nanos {
            let mut r = request(id, Op::Read, id << 20, len);
            r.flow = FlowId(1);
            policy.insert(r, at);
            let Dispatch::Request(r) = policy.dispatch(at) else {
                panic!("work queued")
            };
            policy.completed(&r, at + MILLISECOND);
            let mut now = at + MILLISECOND;
            while let Dispatch::WaitUntil(until) = policy.dispatch(now) {
                now = until;
            }
            now
        };
        let key = QueueKey::Sync(FlowId(1));
        let mut policy = Bfq::new();
        policy.set_tunable("wr_max_time", 500).unwrap();
        read(&mut policy, 1, 4096, 0);
        assert_eq!(policy.queues[&key].wr_coeff, 30, "new: interactive");
        // After the interactive 500 ms: back every 100 ms with 4 KiB, soft real-time.
        let mut expired = 0;
        for (id, at) in (2..).zip((6..10).map(|i| i * 100 * MILLISECOND)) {
            expired = read(&mut policy, id, 4096, at);
            let queue = &policy.queues[&key];
            assert_eq!((queue.wr_coeff, queue.wr_duration), (3000, WR_RT_MAX_TIME));
            assert_eq!(queue.wr_start, at, "recharged at each return");
            assert_eq!(policy.fq.weight(queue.leaf).unwrap(), 10_000, "at the layer's cap");
        }
        let queue = &policy.queues[&key];
        assert_eq!(queue.soft_rt_next_start, expired + 8 * MILLISECOND + SOFTRT_MARGIN);
        // Back 5 ms after its turn ended: too soon, not recharged.
        read(&mut policy, 10, 4096, expired + 5 * MILLISECOND);
        assert_eq!(policy.queues[&key].wr_start, 900 * MILLISECOND);
        // 16 MiB served since it became busy: 32768 sectors at 7000 a second, 4.7 s.
        let started = 2 * SECOND;
        read(&mut policy, 11, 16 << 20, started);
        let next = policy.queues[&key].soft_rt_next_start;
        assert!(next >= started + 4681 * MILLISECOND, "{next}");
        read(&mut policy, 12, 4096, 4 * SECOND);
        assert_eq!(policy.queues[&key].wr_coeff, 1, "its raising ended, none anew");

        // An interactive queue turned soft real-time goes back to interactive when the 300 ms
        // end within its interactive time, with that time's start.
        let mut policy = Bfq::new();
        policy.set_tunable("wr_max_time", 2000).unwrap();
        read(&mut policy, 1, 4096, 0);
        read(&mut policy, 2, 4096, 100 * MILLISECOND);
        assert_eq!(policy.queues[&key].wr_coeff, 3000);
        assert_eq!(policy.queues[&key].wr_start_at_switch_to_srt, Some(0));
        for id in 3..40 {
            let mut r = request(id, Op::Read, (1 << 30) + id * 4096, 4096);
            r.flow = FlowId(1);
            policy.insert(r, 150 * MILLISECOND);
        }
        let mut now = 150 * MILLISECOND;
        while now < 500 * MILLISECOND {
            if let Dispatch::Request(r) = policy.dispatch(now) {
                policy.completed(&r, now + 10 * MILLISECOND);
            }
            now += 10 * MILLISECOND;
        }
        let queue = &policy.queues[&key];
        assert_eq!((queue.wr_coeff, queue.wr_start), (30, 0), "back to interactive");
        assert_eq!(queue.wr_duration, 2 * SECOND);
    }

    // Proves bfq_wr_duration: inversely proportional to the peak rate, 7 s at 109 MB/s,
    // within 3 and 25 s; wr_max_time overrides it.
    #[test]
    fn the_raising_time_follows_the_peak_rate() {
        let mut policy = Bfq::new();
        for (rate, seconds) in [(0, 7), (REF_RATE / 2, 14), (REF_RATE * 10, 3), (REF_RATE / 10, 25)] {
            policy.peak_rate = rate;
            assert_eq!(policy.wr_duration(), seconds * SECOND, "rate {rate}");
        }
        policy.set_tunable("wr_max_time", 1500).unwrap();
        assert_eq!(policy.wr_duration(), 1500 * MILLISECOND);
    }

    // Proves what raising is for: a reader that starts beside two busy sequential readers
    // (all BE level 4) gets most of the disk while raised, about a third without it.
    #[test]
    fn a_raised_newcomer_gets_the_disk() {
        let who = [(1, GroupId::ROOT, be(4)), (2, GroupId::ROOT, be(4)), (3, GroupId::ROOT, be(4))];
        let share = |low_latency: u64| {
            let mut policy = Bfq::new();
            policy.set_tunable("low_latency", low_latency).unwrap();
            // Readers 1 and 2 have run for 10 s (their raising over) before reader 3 starts.
            let _ = readers(&mut policy, &who[..2], 200 * MICROSECOND, 10 * SECOND);
            let got = readers_from(&mut policy, &who, 200 * MICROSECOND, 10 * SECOND, 11 * SECOND);
            got[2] as f64 / got.iter().sum::<u64>() as f64
        };
        let (raised, plain) = (share(1), share(0));
        assert!(raised > 0.6, "raised newcomer's share {raised:.2}");
        assert!((plain - 1.0 / 3.0).abs() < 0.1, "plain share {plain:.2}");
    }

    /// A BE 0 reader (flow 1: one 4 KiB random read at a time, next one 100 us after each
    /// completion) beside BE 4 flows, on a device that serves `parallel` requests at once in
    /// 4 ms each, for one second: `others` are (flow, random reads queued at 0, whether the
    /// next comes as the last completes). `hook` sees the policy before each dispatch (with
    /// `None`) and each request dispatched (with whether the reader's queue is in service);
    /// it returns true to stop the run there. Returns the reader's reads completed.
    fn drive_injection(
        policy: &mut Bfq,
        parallel: usize,
        others: &[(u32, u64, bool)],
        mut hook: impl FnMut(&Bfq, Option<(&Request, bool)>) -> bool,
    ) -> usize {
        let mut next_id = 0;
        let other = |flow: u32, id: u64| {
            let mut r = request(id, Op::Read, (id * 7919 % 500) << 30, 4096);
            (r.flow, r.prio) = (FlowId(flow), be(4));
            r
        };
        for &(flow, queued, _) in others {
            for _ in 0..queued {
                next_id += 1;
                policy.insert(other(flow, next_id), 0);
            }
        }
        let reader = |id: u64| {
            let mut r = request(id, Op::Read, (id * 104_729 % 997) << 29, 4096);
            (r.flow, r.prio) = (FlowId(1), be(0));
            r
        };
        next_id = next_id.max(1000);
        policy.insert(reader(next_id), 0);
        let mut in_device: Vec<(Nanos, Request)> = Vec::new();
        let (mut now, mut next_read, mut reads) = (0, None, 0);
        while now < SECOND {
            // Completions due, then the reader's next request.
            in_device.sort_by_key(|(at, r)| (*at, r.id));
            while in_device.first().is_some_and(|(at, _)| *at <= now) {
                let (_, r) = in_device.remove(0);
                policy.completed(&r, now);
                if r.flow == FlowId(1) {
                    reads += 1;
                    next_read = Some(now + 100 * MICROSECOND);
                } else if others.iter().any(|&(f, _, refill)| refill && FlowId(f) == r.flow) {
                    next_id += 1;
                    policy.insert(other(r.flow.0, next_id), now);
                }
            }
            if next_read.is_some_and(|at| at <= now) {
                next_id += 1;
                policy.insert(reader(next_id), now);
                next_read = None;
            }
            let mut wake = now + 100 * MICROSECOND;
            while in_device.len() < parallel {
                if hook(policy, None) {
                    return reads;
                }
                match policy.dispatch(now) {
                    Dispatch::Request(r) => {
                        let reader_in_service =
                            policy.active_key() == Some(QueueKey::Sync(FlowId(1)));
                        if hook(policy, Some((&r, reader_in_service))) {
                            return reads;
                        }
                        in_device.push((now + 4 * MILLISECOND, r));
                    }
                    Dispatch::WaitUntil(until) => {
                        wake = wake.min(until);
                        break;
                    }
                    Dispatch::Empty => break,
                }
            }
            now = wake;
        }
        reads
    }

    /// [`drive_injection`] with flow 2's 500 reads queued: flow 2's requests dispatched while
    /// flow 1 was in service, and flow 1's reads completed.
    fn injection_run(parallel: usize) -> (usize, usize) {
        let mut injected = 0;
        let reads = drive_injection(&mut unraised(), parallel, &[(2, 500, false)], |_, sent| {
            if let Some((r, true)) = sent {
                injected += usize::from(r.flow == FlowId(2));
            }
            false
        });
        (injected, reads)
    }

    /// [`drive_injection`] on a drive that serves 8 at once, until the first request of
    /// another flow goes while the reader's queue is in service and idled for. Returns it and
    /// the tags of `watched`'s leaf just before it went.
    fn first_injection(
        policy: &mut Bfq,
        others: &[(u32, u64, bool)],
        watched: u32,
    ) -> (crate::fq::Tags, Request) {
        let (mut before, mut found) = (None, None);
        drive_injection(policy, 8, others, |policy, sent| match sent {
            None => {
                before = Some(policy.fq.tags(queue_of(policy, watched).leaf).unwrap());
                false
            }
            Some((r, true)) if r.flow != FlowId(1) => {
                found = Some((before.expect("looked at before"), r.clone()));
                true
            }
            Some(_) => false,
        });
        found.expect("an injection within a second")
    }

    // Proves injected service is accounted as Linux accounts it (bfq_bfqq_served,
    // __bfq_deactivate_entity, bfq_get_next_queue): a queue that stays busy keeps its
    // timestamps while its service waits aside and counts against its budget, and its next
    // turn forgets it; a queue emptied by injection is charged as it leaves the race, and
    // has its budget back. Flow 2 (BE 4) has 500 random reads queued, or one at a time.
    #[test]
    fn injected_service_waits_aside_until_a_turn_or_a_deactivation() {
        for one_at_a_time in [false, true] {
            let mut policy = unraised();
            let queued = if one_at_a_time { 1 } else { 500 };
            let (before, r) = first_injection(&mut policy, &[(2, queued, one_at_a_time)], 2);
            assert_eq!(r.flow, FlowId(2));
            let leaf = queue_of(&policy, 2).leaf;
            let after = policy.fq.tags(leaf).unwrap();
            if one_at_a_time {
                // Emptied: out of the race, charged, its budget whole again.
                let delta = (u128::from(r.len) << crate::fq::SERVICE_SHIFT)
                    / u128::from(policy.fq.weight(leaf).unwrap());
                assert_ne!(after.state, crate::fq::State::Active);
                assert_eq!(after.finish, before.start + delta);
                assert_eq!(after.aside, 0);
                assert_eq!(queue_of(&policy, 2).injected, 0);
            } else {
                // Still busy: the same timestamps, the service aside and against its budget.
                assert_eq!((after.start, after.finish), (before.start, before.finish));
                assert_eq!(after.aside, before.aside + r.len);
                assert!(queue_of(&policy, 2).injected >= r.len);
                // Its turn forgets it.
                policy.fq.begin_turn(leaf).unwrap();
                assert_eq!(policy.fq.tags(leaf).unwrap().aside, 0);
            }
        }
    }

    // Proves injection takes the queue that entered the race last (the head of the kernel's
    // active_list, bfq_active_insert), not the one with the oldest request: flows 2 and 3
    // (BE 4) queue 500 reads each at 0, flow 2's first, and neither has had a turn when the
    // reader (BE 0, the heavier) idles; flow 3 goes.
    #[test]
    fn injection_takes_the_queue_that_entered_last() {
        let mut policy = unraised();
        let (_, r) = first_injection(&mut policy, &[(2, 500, false), (3, 500, false)], 2);
        assert_eq!(r.flow, FlowId(3));
    }

    /// Flow `flow`'s sync queue in `policy`.
    fn queue_of(policy: &Bfq, flow: u32) -> &Queue {
        policy
            .queues
            .values()
            .find(|q| q.key == QueueKey::Sync(FlowId(flow)))
            .expect("the flow's queue")
    }

    // Proves I/O injection (bfq_select_queue, bfq_choose_bfqq_for_injection,
    // bfq_update_inject_limit): while BFQ idles for a seeky BE 0 reader (idling it owes the
    // heavier queue's guarantees), requests of the BE 4 flow go to a drive that serves
    // several at once, the limit rising as the reader's own requests take no longer; on a
    // drive that serves one at a time, where injected requests would make the reader wait,
    // the limit stays low and few go.
    #[test]
    fn requests_are_injected_while_idling_when_the_drive_has_room() {
        let (injected, reads) = injection_run(8);
        assert!(injected > 100, "{injected} injected, {reads} reads");
        assert!(reads > 150, "the reader keeps its pace: {reads}");
        let (serial, serial_reads) = injection_run(1);
        assert!(serial * 4 < injected, "{serial} injected on a serial drive");
        assert!(serial_reads > 100, "{serial_reads}");
    }

    // Proves bfq_better_to_idle's rules: a sequential, I/O-bound queue with a short think time
    // is idled for; not with a long think time (over 80 samples, a mean above slice_idle / 2)
    // nor once it lost I/O-boundness, unless guarantees ask for it: it is the only busy
    // queue, or it is raised while another busy queue is not; and with a raised queue busy,
    // idling for throughput alone stops.
    #[test]
    fn idling_follows_think_time_io_boundness_and_raising() {
        let mut bfq = unraised();
        for flow in [1u32, 2] {
            let mut r = request(u64::from(flow), Op::Read, u64::from(flow) << 30, 4096);
            (r.flow, r.prio) = (FlowId(flow), be(4));
            bfq.insert(r, 0);
        }
        let one = bfq.queues.find(&QueueKey::Sync(FlowId(1))).unwrap();
        assert!(bfq.better_to_idle(one), "sequential, I/O-bound, short think time");
        let queue = bfq.queues.get_mut(&one).unwrap();
        (queue.ttime_samples, queue.ttime_mean, queue.short_ttime) = (100, 6 * MILLISECOND, false);
        assert!(!bfq.better_to_idle(one), "long think time, a twin busy");
        let queue = bfq.queues.get_mut(&one).unwrap();
        queue.short_ttime = true;
        queue.io_bound = false;
        assert!(!bfq.better_to_idle(one), "not I/O-bound");
        // The only busy queue: idled for anyway.
        let two = bfq.queues.find(&QueueKey::Sync(FlowId(2))).unwrap();
        let taken: Vec<(u64, RequestId)> = bfq.queues[&two].sort.keys().copied().collect();
        for key in taken {
            bfq.queues.get_mut(&two).unwrap().sort.remove(&key);
        }
        // Taken behind the scheduler's back: the census is counted again.
        bfq.census = bfq.census_from_scratch();
        assert!(bfq.better_to_idle(one), "the only busy queue");
        // Raised while the other busy queue is not: idled for; a raised queue busy stops
        // idling for throughput alone.
        let mut r = request(3, Op::Read, 5 << 30, 4096);
        (r.flow, r.prio) = (FlowId(2), be(4));
        bfq.insert(r, 0);
        bfq.set_wr_coeff(one, WR_COEFF, 0);
        assert!(bfq.better_to_idle(one), "raised among unraised");
        bfq.set_wr_coeff(one, 1, 0);
        bfq.set_wr_coeff(two, WR_COEFF, 0);
        bfq.queues.get_mut(&one).unwrap().io_bound = true;
        assert!(!bfq.idling_boosts_throughput(one), "a raised queue is busy");
    }

    // Proves large-burst detection (bfq_handle_burst): sync queues created within 180 ms of
    // each other form a burst; at 8 it is large, its queues and those joining it are not
    // raised (the first seven lose their raising at their next dispatch); a queue created
    // after a 180 ms pause starts a new burst and is raised as interactive.
    #[test]
    fn a_large_burst_of_new_queues_is_not_raised() {
        let mut bfq = Bfq::new();
        let key = |flow: u32| QueueKey::Sync(FlowId(flow));
        let arrive = |bfq: &mut Bfq, flow: u32, at: Nanos| {
            let mut r = request(u64::from(flow) * 100 + at / MILLISECOND, Op::Read, u64::from(flow) << 30, 4096);
            (r.flow, r.prio, r.arrival) = (FlowId(flow), be(4), at);
            bfq.insert(r, at);
        };
        for flow in 1..=10u32 {
            arrive(&mut bfq, flow, u64::from(flow) * 50 * MILLISECOND);
        }
        for flow in 1..=7 {
            assert_eq!(bfq.queues[&key(flow)].wr_coeff, 30, "flow {flow}: raised before");
        }
        for flow in 1..=10 {
            assert!(bfq.queues[&key(flow)].in_large_burst, "flow {flow}");
        }
        for flow in 8..=10 {
            assert_eq!(bfq.queues[&key(flow)].wr_coeff, 1, "flow {flow}: in the burst");
        }
        // The first seven stay busy, never starting a new busy period: each loses its raising
        // at its next dispatch (bfq_update_wr_data), as soon as it is served.
        let mut now = 600 * MILLISECOND;
        while bfq.queued() > 0 {
            if let Dispatch::Request(request) = bfq.dispatch(now) {
                let flow = request.flow.0;
                assert_eq!(bfq.queues[&key(flow)].wr_coeff, 1, "flow {flow}: served raised");
                bfq.completed(&request, now + MILLISECOND);
            }
            now += 10 * MILLISECOND;
        }
        assert!((1..=7).all(|flow| bfq.queues[&key(flow)].wr_coeff == 1));
        // A new queue after a pause starts its own burst.
        arrive(&mut bfq, 11, 2 * SECOND);
        assert!(!bfq.queues[&key(11)].in_large_burst);
        assert_eq!(bfq.queues[&key(11)].wr_coeff, 30);
    }
}

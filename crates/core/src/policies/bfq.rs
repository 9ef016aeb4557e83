//! `bfq`: Budget Fair Queueing (Linux's block/bfq-iosched.c) over the common fair-queuing
//! layer, without the low-latency heuristics (weight raising).
//!
//! - **Queues.** Each flow's synchronous requests have a queue of their own; asynchronous
//!   requests share one queue per cgroup, class and level. A queue is a leaf of the common
//!   layer ([`crate::fq`]) inside its cgroup's group, with the weight of its priority,
//!   `(8 - level) x 10` (BE 4, the default, is 40), in the service tree of its class: RT before
//!   BE before IDLE, IDLE served at least every 200 ms (`BFQ_CL_IDLE_TIMEOUT`), one request
//!   per turn while other queues are busy (`bfq_dispatch_rq_from_bfqq`), and never idled for.
//!   A sync queue whose requests are all in the drive stays busy when idling matters
//!   (`__bfq_bfqq_expire` requeues it), so its class keeps lower ones out. Groups weigh by
//!   `io.weight`.
//! - **Budgets.** The layer serves the queue with the smallest virtual finish among the
//!   eligible (B-WF2Q+). The queue in service dispatches, in the elevator order CFQ also uses
//!   (forward first; backward within `back_seek_max` at `back_seek_penalty` times the cost),
//!   until its budget (bytes) is spent, `timeout_sync` has passed, or it runs out of requests.
//!   Its FIFO is checked once per turn (`fifo_expire_sync`, `fifo_expire_async`).
//! - **Budget feedback** (`bfq_recalc_budget`): a queue that spent its budget gets four times
//!   more next time, one that timed out twice more, one that went idle four minimum budgets
//!   less, never beyond `max_budget` nor below a 32nd of it. `max_budget` 0 means automatic:
//!   the peak rate measured on the device times `timeout_sync` (`bfq_calc_max_budget`).
//! - **Charging.** A queue is charged the bytes it was served, except when it timed out or is
//!   seeky: then it is charged at least the share of `max_budget` its time used
//!   (`bfq_bfqq_charge_time`), so a seeky or slow queue pays for the disk time it took.
//!   Asynchronous queues are charged three times their bytes (`bfq_async_charge_factor`).
//! - **Idling.** When a synchronous queue in service runs out of requests, the disk waits up
//!   to `slice_idle` for its next one if the queue is sequential (throughput) or the queues and
//!   groups with work do not all weigh the same (service guarantees:
//!   `idling_needed_for_service_guarantees`).
//! - **Injection** (`bfq_choose_bfqq_for_injection`, `bfq_update_inject_limit`): while the
//!   queue in service is empty and idled for, its process's own async requests go at once,
//!   and, when idling brings no throughput (a seeky queue, or a drive that does not queue
//!   commands, `hw_tag`), requests of the most recently busy queue with budget left go while
//!   fewer than the queue's `inject_limit` are in the drive. The limit follows the total
//!   service time of the queue's first requests (from arrival into an empty queue to
//!   completion): measured with the drive empty it is the baseline, and the limit starts at
//!   1; measured after injection, 1.5 times the baseline or more takes the limit down, less
//!   takes it up (to one above the most requests seen in the drive). It starts over every
//!   second, at 0 for a queue with a short think time (`has_short_ttime`: under half of
//!   `slice_idle`), else at 1. Injected service counts against the queue's next budget and
//!   is charged at the end of its turn; a queue that injection empties leaves the race and
//!   the service is forgotten, as in `bfq_remove_request`. So a queue that always has
//!   requests in the drive when its next arrives (depth above 1 with a short think time)
//!   never gets a baseline and is never injected into, as in Linux. Not modelled: waker
//!   queues, and Linux's raising of a 0 limit to 1 after `slice_idle` without a baseline
//!   (which compares jiffies with nanoseconds and so never fires).
//! - **Preemption.** A request of the RT class ends a non-RT queue's turn.
//! - **Depth limits** (`bfq_limit_depth`, [`Policy::may_allocate`]): reads may take every one
//!   of the `nr_requests` scheduler requests, sync writes three quarters, async I/O half; and a
//!   queue (or a cgroup above it) holding its weight's share of that limit already takes no
//!   more (`bfqq_request_over_limit`, each class weighing 8 times the one below), so an IDLE
//!   backup beside busy best-effort readers holds a request or two, not the device's queue.
//!   Linux gives such a queue a shallow tag depth of 1; we let it hold its share, at least 1.
//!   Without weight raising, the weight-raised depths (`async_depths[1]`) are never used.

use super::PolicyInfo;
use crate::fq::{CgroupTree, FairQueue, LeafId};
use crate::group::{GroupId, Groups};
use crate::ioprio::IoPrioClass;
use crate::policy::{Dispatch, Policy};
use crate::request::{
    merge_back, merge_front, mergeable, FlowId, MergeLimits, Op, Request, RequestId,
};
use crate::time::{from_millis, Nanos, MILLISECOND, SECOND};
use crate::tunable::{TunableError, TunableSpec, Unit};
use std::collections::{BTreeMap, HashMap, VecDeque};

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
];

/// This module's entries in the policy catalog (`iosched policies`).
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "bfq",
        aliases: &[],
        summary: "budget fair queueing over the common layer: per-flow budgets by ioprio weight, cgroups by io.weight, budget feedback, slice_idle, I/O injection (Linux's BFQ without weight raising)",
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

#[derive(Debug)]
struct Entry {
    request: Request,
    expires: Nanos,
}

struct Queue {
    leaf: LeafId,
    sort: BTreeMap<(u64, RequestId), Entry>,
    fifo: BTreeMap<(Nanos, RequestId), u64>,
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
    /// Service taken by injection while another queue was in service, charged at its own
    /// turn's end (`entity->service`); forgotten if injection empties it first.
    service: u64,
    /// Order in which it last became busy: injection looks at the most recent first (BFQ
    /// adds a queue at the head of `active_list`).
    activated: u64,
    /// Think time, as `struct bfq_ttime`: decayed samples, total and mean (ns).
    ttime_samples: u64,
    ttime_total: u64,
    ttime_mean: u64,
    /// `has_short_ttime`: its next request comes within half of `slice_idle`.
    short_ttime: bool,
    /// Most requests in the drive while it is in service and empty (`inject_limit`).
    inject_limit: usize,
    /// Baseline total service time of its first requests, without injection
    /// (`last_serv_time_ns`); 0 while unknown.
    last_serv_time: Nanos,
    /// When its inject limit was last decreased or reset (`decrease_time_jif`).
    decrease_time: Nanos,
}

impl Queue {
    fn seeky(&self) -> bool {
        self.seek_history.count_ones() > 4
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

/// The BFQ policy.
pub struct Bfq {
    fq: FairQueue,
    cgroups: CgroupTree,
    queues: HashMap<QueueKey, Queue>,
    by_leaf: HashMap<LeafId, QueueKey>,
    requeued: VecDeque<Request>,
    queued: usize,
    active: Option<QueueKey>,
    turn_start: Nanos,
    turn_first_dispatch: Option<Nanos>,
    served: u64,
    fifo_checked: bool,
    idle_until: Option<Nanos>,
    /// Device peak rate estimate, bytes per second.
    peak_rate: u64,
    /// Last head position, for the elevator.
    head: u64,
    /// Service the queue in service took by injection before its turn.
    carried: u64,
    /// Requests dispatched and not completed (`rq_in_driver`).
    rq_in_driver: usize,
    /// Most requests seen in the drive (`max_rq_in_driver`).
    max_rq_in_driver: usize,
    /// Whether the drive queues commands (`hw_tag`): unknown until 32 samples with enough
    /// requests about.
    hw_tag: Option<bool>,
    hw_tag_samples: u32,
    /// Injection state (`rqs_injected`, `wait_dispatch`, `waited_rq`,
    /// `last_empty_occupied_ns`): a first request of the queue in service is being timed.
    rqs_injected: bool,
    wait_dispatch: bool,
    waited_rq: Option<RequestId>,
    last_empty_occupied: Nanos,
    /// Queues that became busy so far, for `Queue::activated`.
    activations: u64,
    /// Requests dispatched from a queue not in service.
    injected: u64,
    // Tunables.
    slice_idle: Nanos,
    timeout_sync: Nanos,
    max_budget_setting: u64,
    fifo_expire: [Nanos; 2],
    back_seek_max: u64,
    back_seek_penalty: u64,
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
            queues: HashMap::new(),
            by_leaf: HashMap::new(),
            requeued: VecDeque::new(),
            queued: 0,
            active: None,
            turn_start: 0,
            turn_first_dispatch: None,
            served: 0,
            fifo_checked: false,
            idle_until: None,
            peak_rate: 0,
            head: 0,
            carried: 0,
            rq_in_driver: 0,
            max_rq_in_driver: 0,
            hw_tag: None,
            hw_tag_samples: 0,
            rqs_injected: false,
            wait_dispatch: false,
            waited_rq: None,
            last_empty_occupied: 0,
            activations: 0,
            injected: 0,
            slice_idle: from_millis(TUNABLES[0].default),
            timeout_sync: from_millis(TUNABLES[1].default),
            max_budget_setting: TUNABLES[2].default * 1024,
            fifo_expire: [
                from_millis(TUNABLES[3].default),
                from_millis(TUNABLES[4].default),
            ],
            back_seek_max: TUNABLES[5].default * 1024,
            back_seek_penalty: TUNABLES[6].default,
        }
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

    fn min_budget(&self) -> u64 {
        (self.max_budget() / 32).max(4096)
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

    fn queue_for(&mut self, request: &Request, now: Nanos) -> QueueKey {
        let key = Self::key_of(request);
        if !self.queues.contains_key(&key) {
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
            let budget = self.min_budget().max(self.max_budget() / 4);
            self.by_leaf.insert(leaf, key);
            self.queues.insert(
                key,
                Queue {
                    leaf,
                    sort: BTreeMap::new(),
                    fifo: BTreeMap::new(),
                    in_flight: 0,
                    budget,
                    sync: request.sync,
                    last_end: request.offset,
                    seek_history: 0,
                    group: request.group,
                    last_completion: 0,
                    service: 0,
                    activated: 0,
                    ttime_samples: 0,
                    ttime_total: 0,
                    ttime_mean: 0,
                    // bfq_init_bfqq: a sync queue not of the idle class starts with a short
                    // think time, and so with no injection until a baseline is measured.
                    short_ttime: request.sync && class != IoPrioClass::Idle,
                    inject_limit: 0,
                    last_serv_time: 0,
                    decrease_time: now,
                },
            );
        }
        key
    }

    /// Drops queues with nothing queued or in flight (their history goes with them).
    fn forget_idle_queues(&mut self) {
        let idle: Vec<QueueKey> = self
            .queues
            .iter()
            .filter(|(k, q)| q.queued() == 0 && q.in_flight == 0 && Some(**k) != self.active)
            .map(|(k, _)| *k)
            .collect();
        for key in idle {
            let queue = self.queues.remove(&key).expect("listed");
            self.by_leaf.remove(&queue.leaf);
            self.fq.remove_leaf(queue.leaf).expect("live leaf");
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

    /// Whether idling for the queue in service is worth it: it is sequential, or the scenario
    /// is asymmetric (`bfq_asymmetric_scenario` in block/bfq-iosched.c): the queues with work
    /// do not all weigh the same, or are of more than one class, or several groups have work.
    fn better_to_idle(&self, key: QueueKey) -> bool {
        let queue = &self.queues[&key];
        // Idling is never needed for the IDLE class (bfq_better_to_idle).
        let idle_class = self.fq.class(queue.leaf).ok() == Some(IoPrioClass::Idle);
        if !queue.sync || self.slice_idle == 0 || idle_class {
            return false;
        }
        if !queue.seeky() {
            return true;
        }
        // The queue in service counts as busy, as in idling_needed_for_service_guarantees.
        let busy = |(k, q): &(&QueueKey, &Queue)| **k == key || q.queued() > 0 || q.in_flight > 0;
        let mut weights = self
            .queues
            .iter()
            .filter(busy)
            .map(|(_, q)| self.fq.weight(q.leaf).unwrap_or(0));
        let first = weights.next();
        let varied_weights = weights.any(|w| Some(w) != first);
        // Queues of two classes with work (RT and BE, say) are asymmetric too: without idling
        // the lower class's requests would reach the device between the higher's
        // (`multiple_classes_busy` in bfq_asymmetric_scenario).
        let classes: std::collections::BTreeSet<u8> = self
            .queues
            .iter()
            .filter(busy)
            .filter_map(|(_, q)| self.fq.class(q.leaf).ok())
            .map(|class| class as u8)
            .collect();
        let groups: std::collections::BTreeSet<GroupId> = self
            .queues
            .iter()
            .filter(busy)
            .map(|(_, q)| q.group)
            .collect();
        varied_weights || classes.len() > 1 || groups.len() > 1
    }

    /// Whether `request` may take one of the `nr_requests` scheduler requests with `in_use`
    /// taken (`bfq_limit_depth`, without weight raising, so `wr_busy_queues` is 0): reads may
    /// take all of them, sync writes three quarters (`async_depths[0][1]`), async I/O half
    /// (`async_depths[0][0]`, `bfq_depth_updated`); and a queue that, or whose cgroup, holds
    /// its weight's share of that limit already takes no more (`bfqq_request_over_limit`).
    ///
    /// Where Linux gives an over-limit queue a shallow depth of 1 (it gets a request only
    /// when one of the lowest tags is free), we let it hold its share, at least one request:
    /// the same intent, without modelling the tag bitmap.
    fn limit_depth(&self, request: &Request, in_use: usize, nr_requests: u32) -> bool {
        let nr_requests = nr_requests as usize;
        let limit = if request.op == Op::Read {
            nr_requests
        } else if request.sync {
            (nr_requests * 3 / 4).max(1)
        } else {
            (nr_requests / 2).max(1)
        };
        in_use < limit && !self.over_limit(Self::key_of(request), limit as u64)
    }

    /// `bfqq_request_over_limit`: walking from the top cgroup down to the queue, each entity
    /// gets its weight's share of `limit` among the entities with work on its parent's
    /// service tree (for the queue itself, the trees of its class and the classes above,
    /// each higher one weighing `IOPRIO_BE_NR` times more); it is over when the requests it
    /// holds (a cgroup: all of its queues') reach that share.
    fn over_limit(&self, key: QueueKey, limit: u64) -> bool {
        let Some(queue) = self.queues.get(&key) else {
            // No queue yet: nothing allocated (the kernel's fast path).
            return false;
        };
        let on_tree = |key: &QueueKey, queue: &Queue| {
            self.active == Some(*key) || self.fq.is_active(queue.leaf).unwrap_or(false)
        };
        if !on_tree(&key, queue) {
            return false;
        }
        // Whether cgroup `group` is `ancestor` or below it.
        let within = |ancestor: GroupId, mut group: GroupId| loop {
            if group == ancestor {
                return true;
            }
            if group == GroupId::ROOT {
                return false;
            }
            group = self.cgroups.parent(group);
        };
        // The cgroups from the one below the root down to the queue's.
        let mut path = Vec::new();
        let mut group = queue.group;
        while group != GroupId::ROOT && path.len() < crate::limits::GROUP_DEPTH_MAX + 1 {
            path.push(group);
            group = self.cgroups.parent(group);
        }
        path.reverse();
        let allocated = |queue: &Queue| (queue.queued() + queue.in_flight) as u64;
        let class = self.fq.class(queue.leaf).unwrap_or(IoPrioClass::Be);
        let class_index = |class: IoPrioClass| match class {
            IoPrioClass::Rt => 0,
            IoPrioClass::Idle => 2,
            IoPrioClass::Be | IoPrioClass::None => 1,
        };
        let mut limit = limit;
        let mut parent = GroupId::ROOT;
        for level in 0..=path.len() {
            // The weights with work on `parent`'s service trees, by class: its queues, and
            // its child cgroups that hold a queue with work (cgroups are best effort).
            let mut wsum = [0u64; 3];
            let mut children: Vec<GroupId> = Vec::new();
            for (k, q) in &self.queues {
                if !on_tree(k, q) {
                    continue;
                }
                if q.group == parent {
                    let weight = self.fq.weight(q.leaf).unwrap_or(0);
                    let class = self.fq.class(q.leaf).unwrap_or(IoPrioClass::Be);
                    wsum[class_index(class)] += u64::from(weight);
                } else if within(parent, q.group) {
                    let mut child = q.group;
                    while self.cgroups.parent(child) != parent {
                        child = self.cgroups.parent(child);
                    }
                    if !children.contains(&child) {
                        children.push(child);
                        wsum[1] += u64::from(self.cgroups.weight(child));
                    }
                }
            }
            let (weight, held, sum) = match path.get(level) {
                Some(&cgroup) => {
                    let held = self
                        .queues
                        .values()
                        .filter(|q| within(cgroup, q.group))
                        .map(allocated)
                        .sum();
                    (u64::from(self.cgroups.weight(cgroup)), held, wsum[1])
                }
                None => {
                    let weight = u64::from(self.fq.weight(queue.leaf).unwrap_or(0));
                    let sum = wsum[..=class_index(class)]
                        .iter()
                        .fold(0, |sum, &w| sum * IOPRIO_BE_NR + w);
                    (weight, allocated(queue), sum)
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
                return true;
            }
        }
        false
    }

    /// Ends the turn of the queue in service (`bfq_bfqq_expire`).
    fn expire(&mut self, now: Nanos, reason: Expiration) {
        let Some(key) = self.active.take() else {
            return;
        };
        // The timed first request, if any, no longer measures this queue's service.
        self.rqs_injected = false;
        self.wait_dispatch = false;
        self.waited_rq = None;

        self.idle_until = None;
        let elapsed = self
            .turn_first_dispatch
            .map_or(0, |first| now.saturating_sub(first));
        // Peak rate: a queue that was served sequentially for long enough shows the device.
        let queue = self.queues.get(&key).expect("queue in service exists");
        if !queue.seeky() && elapsed >= 20 * MILLISECOND && self.served > 0 {
            let rate = (u128::from(self.served) * u128::from(SECOND) / u128::from(elapsed)) as u64;
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
        let served = self.served;
        let mut charge = if queue.sync {
            served
        } else {
            served * ASYNC_CHARGE_FACTOR
        } + std::mem::take(&mut self.carried);
        if queue.sync
            && (reason == Expiration::BudgetTimeout || queue.seeky())
            && self.timeout_sync > 0
        {
            // Charged for the disk time it took (bfq_bfqq_charge_time).
            let by_time = (u128::from(max_budget) * u128::from(elapsed)
                / u128::from(self.timeout_sync)) as u64;
            charge = charge.max(by_time);
        }
        queue.budget = match reason {
            Expiration::BudgetExhausted => queue.budget.saturating_mul(4).min(max_budget),
            Expiration::BudgetTimeout => queue.budget.saturating_mul(2).min(max_budget),
            Expiration::TooIdle => queue.budget.saturating_sub(4 * min_budget).max(min_budget),
            Expiration::NoMoreRequests => served.clamp(min_budget, max_budget),
            Expiration::Preempted => queue.budget,
        };
        let (leaf, queued, budget) = (queue.leaf, queue.queued(), queue.budget);
        self.fq.charge(leaf, charge.max(1)).expect("live leaf");
        // A sync queue whose process is likely to issue again at once (a request in flight,
        // or one completed within slice_idle) stays in the race, as BFQ's back-shifting of a
        // queue that was waiting for its next request gives it back its place
        // (bfq_bfqq_non_blocking_wait_rq): otherwise it would lose its turn to any sibling
        // at every expiry.
        let queue = &self.queues[&key];
        let expected = reason != Expiration::TooIdle
            && reason != Expiration::NoMoreRequests
            && self.better_to_idle(key)
            && (queue.in_flight > 0 || now.saturating_sub(queue.last_completion) < self.slice_idle);
        // A sync queue with requests still in the drive stays busy, in the active tree, when
        // idling matters for service guarantees (`__bfq_bfqq_expire` requeues a queue with
        // `dispatched > 0` instead of `bfq_del_bfqq_busy`): its class keeps the lower classes
        // out, and the IDLE class gets the disk only after BFQ_CL_IDLE_TIMEOUT.
        let in_the_drive = queue.sync && queue.in_flight > 0 && self.better_to_idle(key);
        if queued > 0 || expected || in_the_drive {
            let next = self.queues[&key]
                .sort
                .values()
                .map(|e| e.request.len)
                .max()
                .unwrap_or(0);
            self.fq
                .set_budget(leaf, budget.max(next))
                .expect("live leaf");
        } else {
            self.fq.deactivate(leaf).expect("live leaf");
        }
    }

    /// A request is about to join queue `key` at `now`: its think time and the injection
    /// state machine see it (`bfq_update_io_thinktime`, `bfq_update_has_short_ttime`, and the
    /// empty-to-busy branch of `bfq_add_request`).
    fn arriving(&mut self, key: QueueKey, now: Nanos) {
        let slice_idle = self.slice_idle;
        let active = self.active == Some(key);
        let rq_in_driver = self.rq_in_driver;
        let (rqs_injected, idle_class) = (
            self.rqs_injected,
            self.fq.class(self.queues[&key].leaf).ok() == Some(IoPrioClass::Idle),
        );
        let queue = self.queues.get_mut(&key).expect("queue exists");
        if !queue.sync {
            return;
        }
        // Think time counts only from a queue with nothing queued or in the drive.
        if queue.in_flight == 0 && queue.queued() == 0 {
            let elapsed = if queue.last_completion == 0 {
                0
            } else {
                now.saturating_sub(queue.last_completion).min(2 * slice_idle)
            };
            queue.ttime_samples = (7 * queue.ttime_samples + 256) / 8;
            queue.ttime_total = (7 * queue.ttime_total + 256 * elapsed) / 8;
            queue.ttime_mean = (queue.ttime_total + 128) / queue.ttime_samples;
        }
        let mut reset = false;
        if !idle_class && slice_idle > 0 {
            // bfq_sample_valid: more than 80 decayed samples.
            let short = !(queue.ttime_samples > 80 && queue.ttime_mean > slice_idle / 2);
            let changed = short != queue.short_ttime;
            queue.short_ttime = short;
            reset = changed
                && queue.last_serv_time == 0
                && (now >= queue.decrease_time.saturating_add(100 * MILLISECOND) || !short);
        }
        if queue.queued() > 0 {
            if reset {
                self.reset_inject_limit(key, now);
            }
            return;
        }
        // The queue goes from empty to busy. Every second its limit starts over, so that it
        // drops if the workload changed (step 3 in bfq_update_inject_limit's comment).
        if reset || now >= queue.decrease_time.saturating_add(SECOND) {
            self.reset_inject_limit(key, now);
        }
        let queue = &self.queues[&key];
        // A first request of the queue in service is timed from now to its completion: with
        // no request in the drive for the baseline, or after injection to judge the limit.
        if active
            && (rq_in_driver == 0 || (queue.last_serv_time > 0 && rqs_injected))
            && now >= queue.decrease_time.saturating_add(10 * MILLISECOND)
        {
            self.last_empty_occupied = now;
            self.wait_dispatch = true;
            if rq_in_driver == 0 {
                self.rqs_injected = false;
            }
        }
    }

    /// `bfq_reset_inject_limit`: the baseline is measured again; the limit starts at 0 for a
    /// queue with a short think time (one injected request could delay its next), else at 1.
    fn reset_inject_limit(&mut self, key: QueueKey, now: Nanos) {
        self.waited_rq = None;
        let queue = self.queues.get_mut(&key).expect("queue exists");
        queue.last_serv_time = 0;
        queue.inject_limit = usize::from(!queue.short_ttime);
        queue.decrease_time = now;
    }

    /// `bfq_update_inject_limit`, when the timed first request of queue `key` completes at
    /// `now` (`rq_in_driver` still counts it): its total service time against the baseline
    /// moves the limit down (1.5 times the baseline or more) or up; a time measured with no
    /// other request in the drive, or lower, is the new baseline.
    fn update_inject_limit(&mut self, key: QueueKey, now: Nanos) {
        let total = now.saturating_sub(self.last_empty_occupied);
        let (rqs_injected, rq_in_driver, max_rq_in_driver) =
            (self.rqs_injected, self.rq_in_driver, self.max_rq_in_driver);
        if let Some(queue) = self.queues.get_mut(&key) {
            let old_limit = queue.inject_limit;
            if queue.last_serv_time > 0 && rqs_injected {
                let threshold = queue.last_serv_time * 3 / 2;
                if total >= threshold && old_limit > 0 {
                    queue.inject_limit -= 1;
                    queue.decrease_time = now;
                } else if total < threshold && old_limit <= max_rq_in_driver {
                    queue.inject_limit += 1;
                }
            }
            if (queue.last_serv_time == 0 && rq_in_driver == 1) || total < queue.last_serv_time {
                if queue.last_serv_time == 0 {
                    queue.inject_limit = old_limit.max(1);
                }
                queue.last_serv_time = total;
            } else if !rqs_injected && rq_in_driver == 1 {
                queue.last_serv_time = total;
            }
        }
        self.waited_rq = None;
        self.rqs_injected = false;
    }

    /// `idling_boosts_thr_without_issues`, on a rotational device (every device is one to
    /// us) and without weight raising: idling helps throughput when the drive does not queue
    /// commands, or the queue is sequential with a short think time. (BFQ also asks that the
    /// queue be I/O bound; we take every queue to be.)
    fn idling_boosts_throughput(&self, key: QueueKey) -> bool {
        let queue = &self.queues[&key];
        self.hw_tag == Some(false) || (!queue.seeky() && queue.short_ttime)
    }

    /// What `bfq_charge` would be for `request` of `queue`: its bytes, three times for async.
    fn service_of(queue: &Queue, request: &Request) -> u64 {
        if queue.sync {
            request.len
        } else {
            request.len * ASYNC_CHARGE_FACTOR
        }
    }

    /// The queue to take a request from while the queue in service, `active`, is empty and
    /// idled for (`bfq_select_queue`'s injection branch): its process's own async I/O first,
    /// unconditionally; else, when idling brings no throughput, the most recently busy queue
    /// with budget left for its next request, while fewer than the in-service queue's inject
    /// limit are in the drive (`bfq_choose_bfqq_for_injection`). Returns the queue, its
    /// request, and whether this counts as injection for the limit. (BFQ's waker queues are
    /// not modelled.)
    fn injection(&self, active: QueueKey) -> Option<(QueueKey, (u64, RequestId), bool)> {
        let has_room = |queue: &Queue, pick: (u64, RequestId)| {
            Self::service_of(queue, &queue.sort[&pick].request)
                <= queue.budget.saturating_sub(queue.service)
        };
        if let QueueKey::Sync(flow) = active {
            let own_async = self
                .queues
                .iter()
                .filter(|(key, queue)| matches!(key, QueueKey::Async(..)) && queue.queued() > 0)
                .filter_map(|(key, queue)| Some((*key, queue, self.next_in(queue)?)))
                .filter(|(_, queue, pick)| {
                    queue.sort[pick].request.flow == flow && has_room(queue, *pick)
                })
                .min_by_key(|(key, _, _)| *key);
            if let Some((key, _, pick)) = own_async {
                return Some((key, pick, false));
            }
        }
        if self.idling_boosts_throughput(active) {
            return None;
        }
        // BFQ raises a limit of 0 to 1 once idling has lasted slice_idle with no baseline,
        // but compares jiffies with slice_idle in nanoseconds, so that never happens; nor
        // here.
        let limit = self.queues[&active].inject_limit;
        if self.rq_in_driver >= limit {
            return None;
        }
        self.queues
            .iter()
            .filter(|(key, queue)| **key != active && queue.queued() > 0)
            .filter_map(|(key, queue)| Some((*key, queue, self.next_in(queue)?)))
            .filter(|(_, queue, pick)| has_room(queue, *pick))
            .max_by_key(|(_, queue, _)| queue.activated)
            .map(|(key, _, pick)| (key, pick, true))
    }

    /// Dispatches `pick` of queue `key`, which is not in service (injection): it is charged
    /// to the queue's next turn, and a queue it empties leaves the race with its service
    /// forgotten (`bfq_remove_request`).
    fn take_injected(&mut self, key: QueueKey, pick: (u64, RequestId), counts: bool) -> Request {
        let request = self.unqueue(key, pick);
        let queue = self.queues.get_mut(&key).expect("queue exists");
        queue.service += Self::service_of(queue, &request);
        let leaf = queue.leaf;
        if queue.queued() == 0 {
            queue.service = 0;
            self.fq.deactivate(leaf).expect("live leaf");
        }
        self.injected += 1;
        if counts {
            self.rqs_injected = true;
        }
        request
    }

    /// `bfq_update_hw_tag`, at a completion: whether the drive queues commands, from the most
    /// requests seen in it over 32 samples with more than 3 requests about.
    fn update_hw_tag(&mut self) {
        self.max_rq_in_driver = self.max_rq_in_driver.max(self.rq_in_driver);
        if self.hw_tag == Some(true) || self.rq_in_driver + self.queued <= 3 {
            return;
        }
        if let Some(active) = self.active {
            let queue = &self.queues[&active];
            if queue.short_ttime && queue.in_flight + queue.queued() < 3 && self.rq_in_driver < 3
            {
                return;
            }
        }
        self.hw_tag_samples += 1;
        if self.hw_tag_samples <= 32 {
            return;
        }
        self.hw_tag = Some(self.max_rq_in_driver > 3);
        self.max_rq_in_driver = 0;
        self.hw_tag_samples = 0;
    }

    /// Takes `pick` off queue `key` for the drive: its seek history, the head and the counts
    /// of requests queued and in the drive follow.
    fn unqueue(&mut self, key: QueueKey, pick: (u64, RequestId)) -> Request {
        let queue = self.queues.get_mut(&key).expect("queue exists");
        let entry = queue.sort.remove(&pick).expect("on the sort list");
        queue.fifo.remove(&(entry.expires, pick.1));
        let request = entry.request;
        let far = request.offset.abs_diff(queue.last_end) > SEEK_THRESHOLD;
        queue.seek_history = (queue.seek_history << 1) | u32::from(far);
        queue.last_end = request.end();
        queue.in_flight += 1;
        self.head = request.end();
        self.queued -= 1;
        self.rq_in_driver += 1;
        request
    }

    /// Dispatches `sort_key` of the queue in service, `key`.
    fn take(&mut self, key: QueueKey, sort_key: (u64, RequestId), now: Nanos) -> Request {
        let request = self.unqueue(key, sort_key);
        self.served += request.len;
        if self.wait_dispatch {
            self.wait_dispatch = false;
            self.waited_rq = Some(request.id);
        }
        self.turn_first_dispatch.get_or_insert(now);
        request
    }
}

impl Policy for Bfq {
    fn name(&self) -> &'static str {
        "bfq"
    }

    fn set_groups(&mut self, groups: &Groups) {
        self.cgroups.set_groups(groups, &mut self.fq);
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
        if let Some(queue) = self.queues.get_mut(&Self::key_of(&request)) {
            queue.in_flight = queue.in_flight.saturating_sub(1);
        }
        self.rq_in_driver = self.rq_in_driver.saturating_sub(1);
        self.queued += 1;
        self.requeued.push_back(request);
    }

    fn may_allocate(&self, request: &Request, in_use: usize, nr_requests: u32) -> bool {
        self.limit_depth(request, in_use, nr_requests)
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("bfq_injected", self.injected as f64),
            (
                "bfq_hw_tag",
                match self.hw_tag {
                    Some(true) => 1.0,
                    Some(false) => 0.0,
                    None => -1.0,
                },
            ),
        ]
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
        let key = Self::key_of(&request);
        let Some(queue) = self.queues.get_mut(&key) else {
            return Err(request);
        };
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
        let key = self.queue_for(&request, now);
        let dir = usize::from(!request.sync);
        let expires = now.saturating_add(self.fifo_expire[dir]);
        let rt = request.prio.effective_class() == IoPrioClass::Rt;
        self.arriving(key, now);
        let queue = self.queues.get_mut(&key).expect("just made");
        let sort_key = (request.offset, request.id);
        queue.fifo.insert((expires, request.id), request.offset);
        let len = request.len;
        queue.sort.insert(sort_key, Entry { request, expires });
        let (leaf, budget) = (queue.leaf, queue.budget);
        self.queued += 1;
        if !self.fq.is_active(leaf).expect("live leaf") {
            self.fq.activate(leaf, budget.max(len)).expect("live leaf");
            self.activations += 1;
            self.queues.get_mut(&key).expect("just made").activated = self.activations;
        }
        if self.active == Some(key) {
            self.idle_until = None;
        } else if let Some(active) = self.active {
            let active_rt = self.fq.class(self.queues[&active].leaf).ok() == Some(IoPrioClass::Rt);
            if rt && !active_rt {
                self.expire(now, Expiration::Preempted);
            }
        }
    }

    /// The next request for the device, a time to wait until, or nothing.
    pub(super) fn dispatch_next(&mut self, now: Nanos) -> Dispatch {
        if let Some(request) = self.requeued.pop_front() {
            self.queued -= 1;
            if let Some(queue) = self.queues.get_mut(&Self::key_of(&request)) {
                queue.in_flight += 1;
            }
            self.rq_in_driver += 1;
            return Dispatch::Request(request);
        }
        for _ in 0..=self.queues.len() + 1 {
            let key = match self.active {
                Some(key) => key,
                None => {
                    let Some(leaf) = self.fq.select_next(now) else {
                        return Dispatch::Empty;
                    };
                    let key = self.by_leaf[&leaf];
                    self.active = Some(key);
                    self.carried =
                        std::mem::take(&mut self.queues.get_mut(&key).expect("leaf's queue").service);
                    self.turn_start = now;
                    self.turn_first_dispatch = None;
                    self.served = 0;
                    self.fifo_checked = false;
                    self.idle_until = None;
                    key
                }
            };
            let timeout = self.timeout_sync;
            if self
                .turn_first_dispatch
                .is_some_and(|first| now.saturating_sub(first) >= timeout)
            {
                self.expire(now, Expiration::BudgetTimeout);
                continue;
            }
            let queue = &self.queues[&key];
            if queue.queued() == 0 {
                let recent = now.saturating_sub(queue.last_completion) < self.slice_idle;
                if self.better_to_idle(key)
                    && (queue.in_flight > 0
                        || self.idle_until.is_some()
                        || self.served > 0
                        || recent)
                {
                    let until = *self.idle_until.get_or_insert(now + self.slice_idle);
                    if now < until {
                        if let Some((from, pick, counts)) = self.injection(key) {
                            return Dispatch::Request(self.take_injected(from, pick, counts));
                        }
                        let deadline = self.turn_first_dispatch.map_or(until, |f| f + timeout);
                        return Dispatch::WaitUntil(until.min(deadline.max(now + 1)));
                    }
                    self.expire(now, Expiration::TooIdle);
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
            let spent = self.served + self.carried;
            if spent > 0 && spent + len > budget {
                self.expire(now, Expiration::BudgetExhausted);
                continue;
            }
            let request = self.take(key, pick, now);
            // An IDLE-class queue dispatches one request per turn while other queues are
            // busy (bfq_dispatch_rq_from_bfqq: expired as if its budget were exhausted).
            let idle_class = self.fq.class(self.queues[&key].leaf).ok() == Some(IoPrioClass::Idle);
            if idle_class
                && self
                    .queues
                    .iter()
                    .any(|(k, q)| *k != key && (q.queued() > 0 || q.in_flight > 0))
            {
                self.expire(now, Expiration::BudgetExhausted);
            }
            return Dispatch::Request(request);
        }
        Dispatch::Empty
    }

    /// A dispatched request completed.
    pub(super) fn request_completed(&mut self, request: &Request, now: Nanos) {
        let key = Self::key_of(request);
        if self.waited_rq == Some(request.id) {
            self.update_inject_limit(key, now);
        }
        self.update_hw_tag();
        self.rq_in_driver = self.rq_in_driver.saturating_sub(1);
        if let Some(queue) = self.queues.get_mut(&key) {
            queue.in_flight = queue.in_flight.saturating_sub(1);
            queue.last_completion = now;
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
        }
        out[start..].sort_by_key(|r| (r.arrival, r.id));
        self.queued = 0;
        self.active = None;
        self.idle_until = None;
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
            _ => return Err(crate::tunable::unknown(name, TUNABLES)),
        })
    }

    /// Sets a tunable, in its sysfs unit.
    pub(super) fn set_tunable_value(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        let value = crate::tunable::find(TUNABLES, name)?.check(value)?;
        match name {
            "slice_idle" => self.slice_idle = from_millis(value),
            "timeout_sync" => self.timeout_sync = from_millis(value),
            "max_budget" => self.max_budget_setting = value * 1024,
            "fifo_expire_sync" => self.fifo_expire[0] = from_millis(value),
            "fifo_expire_async" => self.fifo_expire[1] = from_millis(value),
            "back_seek_max" => self.back_seek_max = value * 1024,
            "back_seek_penalty" => self.back_seek_penalty = value,
            _ => unreachable!("find() accepted only known names"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ioprio::IoPrio;
    use crate::testing::request;
    use crate::time::MICROSECOND;
    use crate::Op;

    /// Sync sequential readers (one request in flight each, the next issued 20 us after a
    /// completion) under `policy`, each described by (flow, group, prio); the device serves a
    /// request in `service`. Returns bytes served per reader by `end`.
    fn readers(
        policy: &mut Bfq,
        who: &[(u32, GroupId, IoPrio)],
        service: Nanos,
        end: Nanos,
    ) -> Vec<u64> {
        let mut pending: Vec<(Nanos, usize)> = (0..who.len()).map(|i| (0, i)).collect();
        let mut offsets: Vec<u64> = (0..who.len() as u64).map(|i| i << 32).collect();
        let mut got = vec![0; who.len()];
        let (mut now, mut next_id) = (0, 0);
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
            match policy.dispatch(now) {
                Dispatch::Request(r) => {
                    let index = who.iter().position(|w| FlowId(w.0) == r.flow).unwrap();
                    now += service;
                    got[index] += r.len;
                    policy.completed(&r, now);
                    pending.push((now + 20 * MICROSECOND, index));
                }
                Dispatch::WaitUntil(t) => {
                    let next = pending.iter().map(|p| p.0).min().unwrap_or(t);
                    now = t.min(next).max(now + 1);
                }
                Dispatch::Empty => now = pending.iter().map(|p| p.0).min().unwrap().max(now),
            }
        }
        got
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
    // bytes, within 10%.
    #[test]
    fn priorities_weigh_by_level() {
        let mut bfq = Bfq::new();
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

    // Proves budget feedback: a queue that keeps spending its budget grows it up to max_budget.
    #[test]
    fn budgets_grow_when_spent() {
        let mut bfq = Bfq::new();
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
    // next one instead of serving a BE reader of the same weight, which it does serve when
    // both are BE.
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
            // The first reader seeks far on every request: it is seeky after a few.
            for round in 0..8u64 {
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
            assert_eq!(r.flow, FlowId(1), "the first reader's turn goes on");
            now += MILLISECOND;
            bfq.completed(&r, now);
            match bfq.dispatch(now) {
                Dispatch::WaitUntil(_) => assert!(idles, "{first:?}: idled for a BE twin"),
                Dispatch::Request(r) => {
                    assert!(!idles, "{first:?}: served flow {:?} instead of idling", r.flow)
                }
                Dispatch::Empty => panic!("the BE reader has a request"),
            }
        }
    }


    /// A seeky BE 0 reader at depth 1 that thinks 1 ms between requests, beside a BE 7
    /// reader keeping 8 requests queued, for 3 s; each request takes 4 ms, all at once on a
    /// `parallel` device, else one after another. Returns (requests injected, the BE 0
    /// reader's mean total service time, its requests served, the BE 7 reader's).
    fn think_beside_a_queue(parallel: bool) -> (u64, Nanos, u64, u64) {
        let mut bfq = Bfq::new();
        let access = 4 * MILLISECOND;
        let (mut now, mut id, mut free_at) = (0, 0u64, 0);
        let mut next_hi: Option<Nanos> = Some(0);
        let mut lo_pending = 8;
        let mut in_flight: Vec<(Nanos, Request)> = Vec::new();
        let (mut hi_served, mut lo_served, mut hi_time) = (0u64, 0u64, 0);
        let mut arrived: BTreeMap<RequestId, Nanos> = BTreeMap::new();
        let offset = |id: u64| (id * 7919 % 1000) << 30;
        while now < 3 * SECOND {
            if next_hi.is_some_and(|at| at <= now) {
                next_hi = None;
                id += 1;
                let mut r = request(id, Op::Read, offset(id), 4096);
                (r.flow, r.prio) = (FlowId(1), be(0));
                arrived.insert(r.id, now);
                bfq.insert(r, now);
            }
            while lo_pending > 0 {
                lo_pending -= 1;
                id += 1;
                let mut r = request(id, Op::Read, offset(id), 4096);
                (r.flow, r.prio) = (FlowId(2), be(7));
                bfq.insert(r, now);
            }
            let wait_until = loop {
                match bfq.dispatch(now) {
                    Dispatch::Request(r) => {
                        let done = if parallel {
                            now + access
                        } else {
                            free_at = free_at.max(now) + access;
                            free_at
                        };
                        in_flight.push((done, r));
                    }
                    Dispatch::WaitUntil(t) => break Some(t),
                    Dispatch::Empty => break None,
                }
            };
            let next = in_flight
                .iter()
                .map(|(at, _)| *at)
                .chain(next_hi)
                .chain(wait_until)
                .min()
                .expect("something is pending");
            now = next.max(now + 1);
            in_flight.sort_by_key(|(at, r)| (*at, r.id));
            while in_flight.first().is_some_and(|(at, _)| *at <= now) {
                let (at, r) = in_flight.remove(0);
                bfq.completed(&r, at);
                if r.flow == FlowId(1) {
                    hi_served += 1;
                    hi_time += at - arrived.remove(&r.id).expect("arrived");
                    next_hi = Some(at + MILLISECOND);
                } else {
                    lo_served += 1;
                    lo_pending += 1;
                }
            }
        }
        (bfq.injected, hi_time / hi_served.max(1), hi_served, lo_served)
    }

    // Proves I/O injection (bfq_choose_bfqq_for_injection, bfq_update_inject_limit): while
    // a seeky queue of the larger weight is idled for, the other queue's requests fill the
    // drive when they do not slow the idled-for queue's requests (a drive serving them side
    // by side), and hardly at all when they would (one at a time): there the limit falls
    // back whenever the measured total service time reaches 1.5 times the baseline, and the
    // idled-for queue keeps its latency.
    #[test]
    fn injection_fills_idle_time_only_while_it_costs_nothing() {
        let (side_by_side, parallel_time, hi_parallel, lo_parallel) = think_beside_a_queue(true);
        let (one_by_one, serial_time, hi_serial, _) = think_beside_a_queue(false);
        assert!(
            side_by_side > 100 && lo_parallel > hi_parallel,
            "injected {side_by_side}: served {hi_parallel} and {lo_parallel}"
        );
        assert!(
            one_by_one * 4 < side_by_side,
            "injected {one_by_one} one at a time, {side_by_side} side by side"
        );
        // Alone its request takes 4 ms; side by side injection costs it nothing.
        assert!(
            parallel_time <= 5 * MILLISECOND,
            "{parallel_time} ns side by side"
        );
        // One at a time, an injected request ahead of it can cost one access, rarely more.
        assert!(
            serial_time < 8 * MILLISECOND && hi_serial > 200,
            "{serial_time} ns one at a time, {hi_serial} served"
        );
    }

    // Proves a process's own async I/O is injected unconditionally while bfq idles for its
    // sync queue (the first case of bfq_select_queue's injection branch), and another
    // process's is not while the limit is 0.
    #[test]
    fn a_process_own_async_writes_go_while_its_reads_are_idled_for() {
        for (writer, injected) in [(1, true), (2, false)] {
            let mut bfq = Bfq::new();
            let mut r = request(1, Op::Read, 0, 65536);
            r.flow = FlowId(1);
            bfq.insert(r, 0);
            let Dispatch::Request(r) = bfq.dispatch(0) else {
                panic!("the read is served")
            };
            bfq.completed(&r, MILLISECOND);
            let mut w = request(2, Op::Write, 1 << 30, 4096);
            (w.flow, w.sync) = (FlowId(writer), false);
            bfq.insert(w, MILLISECOND);
            match bfq.dispatch(MILLISECOND) {
                Dispatch::Request(w) => {
                    assert!(injected, "flow {writer}'s write went during the idle");
                    assert_eq!(w.id, RequestId(2));
                }
                Dispatch::WaitUntil(_) => assert!(!injected, "flow {writer}'s write waited"),
                Dispatch::Empty => panic!("a write is queued"),
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
        let mut elevator = crate::Elevator::new(Box::new(Bfq::new()), 8);
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

    // Proves bfqq_request_over_limit: an IDLE-class queue beside a busy best-effort one holds
    // its weight's share of the requests, the classes weighing IOPRIO_BE_NR apart
    // (64 x 10 / (40 x 8 + 10) rounds to 2), while the best-effort queue is not limited.
    #[test]
    fn an_idle_queue_holds_its_share_of_the_requests() {
        let mut elevator = crate::Elevator::new(Box::new(Bfq::new()), 64);
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
        let mut elevator = crate::Elevator::new(Box::new(Bfq::new()), 4);
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
}

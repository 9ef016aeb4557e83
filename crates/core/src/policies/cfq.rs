//! `cfq`: Linux's Completely Fair Queueing scheduler (block/cfq-iosched.c), without cgroups.
//!
//! The per-queue machinery follows the Linux 2.6.35 source: slices, idling, think time, seek
//! history, dispatch limits, preemption, FIFO expiry and request choice. The service trees are
//! the simpler pre-2.6.33 arrangement, one per class, because the brief leaves out groups and
//! workload types (see "Simplifications" below).
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
//! A queue with requests is *busy* and sits in its class's service tree: RT, BE or IDLE, with
//! "none" counted as BE level 4. Its place in the tree is its `rb_key`, set when it becomes busy
//! and again when its slice ends (`cfq_service_tree_add`): the current time, plus an offset that
//! grows with the number of other busy queues and with how far its priority is below sync
//! level 0 (`cfq_slice_offset`), minus any slice time it was owed (`slice_resid`). Queues of a
//! class are therefore served round robin, lower priorities placed further back. When the active
//! queue expires, the next one is the first of the RT tree, else of the BE tree, else of the IDLE
//! tree. The idle class is only served once no RT or BE request has been in flight or completed
//! for `CFQ_IDLE_DELAY` (200 ms). This is the grace period of older kernels (2.6.2x armed an
//! `idle_class_timer` for `CFQ_IDLE_GRACE`, 100 ms, after the last RT or BE completion); 2.6.35
//! dropped the timer and only queues idle-class queues `CFQ_IDLE_DELAY` apart in their tree,
//! which is modelled too.
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
//! think time exceeds what is left of the slice, or when the queue's idle window is closed. The
//! window closes when the flow is seeky (more than 4 of its last 32 requests started more than
//! 800 sectors from where the previous one ended, `CFQQ_SEEKY`) unless it queues deeply (4 or
//! more requests at once, `deep`), or when its mean think time exceeds `slice_idle`. Think time
//! is the time from the flow's last sync completion to its next sync request, capped at
//! `2 * slice_idle` and averaged with weight 7/8 on history, as `cfq_update_io_thinktime`; it
//! counts only after about three samples (`sample_valid`).
//!
//! # Preemption
//!
//! A request for a queue other than the active one ends the active slice at once
//! (`cfq_should_preempt`) when: the active queue is idle class (and the new one is not); or,
//! unless the active queue is RT and the new one is not, when the request is sync and the active
//! queue async, when the active slice is used up, when the new queue is RT and the active one is
//! not, or when the active queue is idling and the request lies within 8192 sectors of the head.
//! Idle-class requests never preempt. The preempting queue goes to the front of its tree and the
//! preempted one keeps the unused part of its slice as credit for its next position.
//!
//! # Simplifications
//!
//! - No cgroup groups (`cfq_group`, `group_isolation`, group idling, `wait_busy`): one root group.
//! - No workload types: 2.6.33+ split each class into sync, sync-noidle and async trees with
//!   their own workload slices; here a class has one tree, as before 2.6.33. A queue idles when
//!   its idle window is open; the "idle at the end of the sync-noidle tree" rule is not modelled.
//! - No cooperating-queue detection or queue merging (`cfq_close_cooperator`), no metadata
//!   priority, no priority boost for file-system locks, no `hw_tag` queue-depth detection and no
//!   non-rotational special cases: every device is treated as rotational.
//! - A request from the active flow ends the idle wait at once, as the kernel does for requests
//!   larger than a page or when other queues are busy; the `must_dispatch` delay for small ones
//!   is not modelled.
//! - Think time is sampled for sync queues only, as later 3.x kernels do.
//! - A requeued request goes back on the dispatch list and out before anything else, as the
//!   block layer does with `ELEVATOR_INSERT_REQUEUE`; it stays accounted to its queue.
//! - A sync queue takes its priority from its first request and keeps it while it has requests
//!   queued or in flight.
//! - Per-flow history (think time, seek history, idle window, slice credit) lives in a table of
//!   at most 4096 queues, the least recently used evicted first; queues themselves exist only
//!   while they have requests queued or in flight or hold the active slice.

use crate::ioprio::{IoPrio, IoPrioClass};
use crate::policy::{Dispatch, Policy};
use crate::request::{merge_back, merge_front, mergeable, FlowId, MergeLimits, Request, RequestId};
use crate::time::{from_millis, Nanos, MILLISECOND, SECOND};
use crate::tunable::{TunableError, TunableSpec, Unit};
use std::collections::{BTreeMap, VecDeque};
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
        name: "target_latency",
        unit: Unit::Milliseconds,
        default: 300,
        min: 1,
        max: 3_600_000,
        doc: "with low_latency, the time one round of a class's busy queues should take (a \
              constant in 2.6.35, a sysfs file in later kernels)",
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

/// `sample_valid`: the think-time average counts once its sample weight exceeds this.
const SAMPLES_VALID: u64 = 80;

/// `cfq_hist_divisor`: weight of history in the busy-queue average used by `low_latency`.
const HIST_DIVISOR: u64 = 4;

/// Most queues whose history (think time, seeks, idle window, slice credit) is remembered.
pub const HISTORY_CAP: usize = 4096;

/// Lowest priority level (`IOPRIO_BE_NR - 1`); the idle class runs at it.
const LOWEST_LEVEL: u8 = 7;

const RT: usize = 0;
const BE: usize = 1;
const IDLE: usize = 2;
const CLASSES: usize = 3;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum QueueKey {
    /// A flow's own queue for its synchronous requests (`cic->cfqq[SYNC]`).
    Sync(FlowId),
    /// The queue every flow shares for asynchronous requests of one class and level
    /// (`async_cfqq[class][level]`, `async_idle_cfqq`).
    Async(usize, u8),
}

fn queue_key(request: &Request) -> QueueKey {
    if request.sync {
        QueueKey::Sync(request.flow)
    } else {
        QueueKey::Async(class_of(request.prio), level_of(request.prio))
    }
}

type SortKey = (u64, RequestId);

#[derive(Debug)]
struct Entry {
    request: Request,
    fifo_time: Nanos,
}

/// A `cfq_queue` while it has requests queued or in flight, or holds the slice.
#[derive(Debug)]
struct Queue {
    class: usize,
    level: u8,
    sync: bool,
    /// Queued requests by offset (`sort_list`).
    sort: BTreeMap<SortKey, Entry>,
    /// Queued requests by FIFO expiry time, mapping to their offset.
    fifo: BTreeMap<(Nanos, RequestId), u64>,
    /// The request to serve next unless the FIFO says otherwise (`next_rq`); `Some` exactly when
    /// `sort` is not empty.
    next: Option<SortKey>,
    /// Requests dispatched and not yet completed.
    dispatched: u32,
    /// Position in the class's service tree while busy (`on_rr`): `(rb_key, insertion number)`.
    tree_key: Option<(i64, u64)>,
}

impl Queue {
    fn new(class: usize, level: u8, sync: bool) -> Self {
        Queue {
            class,
            level,
            sync,
            sort: BTreeMap::new(),
            fifo: BTreeMap::new(),
            next: None,
            dispatched: 0,
            tree_key: None,
        }
    }

    fn remove(&mut self, key: SortKey) -> Entry {
        let entry = self.sort.remove(&key).expect("request is on the sort list");
        let removed = self.fifo.remove(&(entry.fifo_time, key.1));
        assert!(removed.is_some(), "request is on the FIFO");
        entry
    }

    fn add(&mut self, entry: Entry) -> SortKey {
        let key = (entry.request.offset, entry.request.id);
        self.fifo.insert((entry.fifo_time, key.1), key.0);
        let previous = self.sort.insert(key, entry);
        assert!(previous.is_none(), "request ids are unique");
        key
    }
}

/// What CFQ remembers about a queue between its busy periods: the kernel keeps these in the
/// `cfq_queue` and `cfq_io_context`, which live as long as the process.
#[derive(Debug)]
struct History {
    /// Last use, for least-recently-used eviction.
    stamp: u64,
    /// When the flow's last sync request completed (`last_end_request`).
    last_end_request: Nanos,
    ttime_samples: u64,
    ttime_total: u64,
    ttime_mean: Nanos,
    /// One bit per recent request, set when it was a seek (`seek_history`).
    seek_history: u32,
    /// End of the flow's last request (`last_request_pos`); 0 before the first.
    last_request_pos: u64,
    /// Idling allowed (`idle_window`).
    idle_window: bool,
    /// The flow queued 4 or more requests at once since idling last failed (`deep`).
    deep: bool,
    /// Slice time owed (positive) or overrun (negative) from the last slice (`slice_resid`).
    slice_resid: i64,
}

impl History {
    fn new(key: QueueKey, now: Nanos) -> Self {
        History {
            stamp: 0,
            last_end_request: now,
            ttime_samples: 0,
            ttime_total: 0,
            ttime_mean: 0,
            seek_history: 0,
            last_request_pos: 0,
            idle_window: matches!(key, QueueKey::Sync(_)),
            deep: false,
            slice_resid: 0,
        }
    }

    fn seeky(&self) -> bool {
        self.seek_history.count_ones() > SEEKY_SEEKS
    }

    fn ttime_valid(&self) -> bool {
        self.ttime_samples > SAMPLES_VALID
    }
}

/// The slice of the active queue.
#[derive(Debug)]
struct Active {
    key: QueueKey,
    /// No request of this slice has completed yet, so `slice_end` is not set (`slice_new`).
    slice_new: bool,
    slice_end: Nanos,
    /// Requests dispatched in this slice (`slice_dispatch`).
    slice_dispatch: u64,
    /// The FIFO was checked in this slice (`fifo_expire` flag).
    fifo_checked: bool,
    /// Idling for the flow's next request until this time (`wait_request` and the timer).
    idle_until: Option<Nanos>,
}

/// What `select_queue` decided.
enum Select {
    /// Dispatch from this queue, if `may_dispatch` allows.
    Queue(QueueKey),
    /// Idle on purpose until this time.
    Wait(Nanos),
    /// Nothing to do until a request arrives or completes.
    Nothing,
}

/// The CFQ policy.
#[derive(Debug)]
pub struct Cfq {
    queues: BTreeMap<QueueKey, Queue>,
    /// Busy queues of each class by `(rb_key, insertion number)`.
    trees: [BTreeMap<(i64, u64), QueueKey>; CLASSES],
    tree_inserts: u64,
    history: BTreeMap<QueueKey, History>,
    /// `History::stamp` to key, oldest first.
    history_lru: BTreeMap<u64, QueueKey>,
    history_stamp: u64,
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
    target_latency: Nanos,
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
            queues: BTreeMap::new(),
            trees: Default::default(),
            tree_inserts: 0,
            history: BTreeMap::new(),
            history_lru: BTreeMap::new(),
            history_stamp: 0,
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
            target_latency: from_millis(TUNABLES[10].default),
        }
    }

    /// `cfq_prio_slice`: the slice of a sync or async queue at `level`.
    fn prio_slice(&self, sync: bool, level: u8) -> Nanos {
        let base = self.slice[usize::from(sync)];
        let step = base / SLICE_SCALE;
        let levels_above = 4 - i64::from(level);
        // At most three steps below the base, and base - 3 * base / 5 > 0.
        (base as i64 + step as i64 * levels_above) as Nanos
    }

    /// `cfq_prio_to_maxrq`: async dispatches allowed in one slice.
    fn prio_to_maxrq(&self, level: u8) -> u64 {
        let base = self.slice_async_rq;
        2 * (base + base * u64::from(LOWEST_LEVEL - level))
    }

    /// Queues on the service trees (`busy_queues`).
    fn busy_queues(&self) -> usize {
        self.trees.iter().map(BTreeMap::len).sum()
    }

    fn queue(&self, key: QueueKey) -> &Queue {
        self.queues.get(&key).expect("queue is live")
    }

    fn queue_mut(&mut self, key: QueueKey) -> &mut Queue {
        self.queues.get_mut(&key).expect("queue is live")
    }

    /// The history of `key`, created if new, marked as just used; evicts the least recently used
    /// history beyond [`HISTORY_CAP`].
    fn history_mut(&mut self, key: QueueKey, now: Nanos) -> &mut History {
        self.history_stamp += 1;
        let stamp = self.history_stamp;
        let entry = self
            .history
            .entry(key)
            .or_insert_with(|| History::new(key, now));
        let previous = std::mem::replace(&mut entry.stamp, stamp);
        self.history_lru.remove(&previous);
        self.history_lru.insert(stamp, key);
        if self.history.len() > HISTORY_CAP {
            let (_, oldest) = self.history_lru.pop_first().expect("table is not empty");
            self.history.remove(&oldest);
        }
        self.history.get_mut(&key).expect("just inserted")
    }

    /// Whether the queue's idle window is open (a forgotten queue starts with the default).
    fn idle_window(&self, key: QueueKey) -> bool {
        self.history
            .get(&key)
            .map_or(matches!(key, QueueKey::Sync(_)), |h| h.idle_window)
    }

    /// `cfq_should_idle`, without workload types: sync queues of RT and BE whose window is open.
    fn should_idle(&self, key: QueueKey) -> bool {
        let queue = self.queue(key);
        queue.class != IDLE && queue.sync && self.idle_window(key)
    }

    /// `cfq_slice_used` for the active queue.
    fn slice_used(&self, now: Nanos) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| !a.slice_new && now >= a.slice_end)
    }

    /// `cfq_slice_used_soon`: whether what the active queue has in flight may outlast its slice.
    fn slice_used_soon(&self, dispatched: u32, now: Nanos) -> bool {
        let active = self.active.as_ref().expect("a queue is active");
        active.slice_new
            || now.saturating_add(self.slice_idle.saturating_mul(u64::from(dispatched)))
                > active.slice_end
    }

    /// `cfq_choose_req`: which of two queued requests of `queue` to serve after position `last`.
    fn choose_req(
        &self,
        queue: &Queue,
        first: Option<SortKey>,
        second: Option<SortKey>,
        last: u64,
    ) -> Option<SortKey> {
        let (one, two) = match (first, second) {
            (None, other) | (other, None) => return other,
            (Some(one), Some(two)) if one == two => return Some(two),
            (Some(one), Some(two)) => (one, two),
        };
        let sync_one = queue.sort[&one].request.sync;
        let sync_two = queue.sort[&two].request.sync;
        if sync_one != sync_two {
            return Some(if sync_one { one } else { two });
        }
        // Distance from the head, or None when it lies too far behind (wraps).
        let distance = |position: u64| {
            if position >= last {
                Some(position - last)
            } else if position + self.back_seek_max_bytes >= last {
                Some((last - position).saturating_mul(self.back_seek_penalty))
            } else {
                None
            }
        };
        let (s1, s2) = (one.0, two.0);
        Some(match (distance(s1), distance(s2)) {
            (Some(d1), Some(d2)) => {
                if d1 < d2 || (d1 == d2 && s1 >= s2) {
                    one
                } else {
                    two
                }
            }
            (Some(_), None) => one,
            (None, Some(_)) => two,
            // Both behind: start with the one further back, so only one backward seek is made.
            (None, None) => {
                if s1 <= s2 {
                    one
                } else {
                    two
                }
            }
        })
    }

    /// `cfq_find_next_rq`: the request to serve after `last` leaves the queue.
    fn find_next(&self, queue: &Queue, last: SortKey) -> Option<SortKey> {
        let next = queue
            .sort
            .range((Bound::Excluded(last), Bound::Unbounded))
            .next()
            .or_else(|| queue.sort.iter().next().filter(|(k, _)| **k != last))
            .map(|(k, _)| *k);
        let prev = queue.sort.range(..last).next_back().map(|(k, _)| *k);
        self.choose_req(queue, next, prev, last.0)
    }

    /// `cfq_service_tree_add`: (re)places a busy queue in its class's tree.
    fn service_tree_add(&mut self, key: QueueKey, add_front: bool, now: Nanos) {
        let (class, sync, level, current) = {
            let queue = self.queue(key);
            (queue.class, queue.sync, queue.level, queue.tree_key)
        };
        let now_key = now as i64;
        let rb_key = if class == IDLE {
            let last = self.trees[IDLE]
                .iter()
                .next_back()
                .filter(|(_, k)| **k != key)
                .map_or(now_key, |(tree_key, _)| tree_key.0);
            last + IDLE_DELAY as i64
        } else if !add_front {
            let others = self.busy_queues() - usize::from(current.is_some());
            let offset = others as i64
                * (self.prio_slice(true, 0) as i64 - self.prio_slice(sync, level) as i64);
            let history = self.history_mut(key, now);
            let resid = std::mem::take(&mut history.slice_resid);
            now_key + offset - resid
        } else {
            let first = self.trees[class]
                .keys()
                .next()
                .map_or(now_key, |tree_key| tree_key.0);
            first - SECOND as i64
        };
        if let Some(current) = current {
            if current.0 == rb_key {
                return;
            }
            self.trees[class].remove(&current);
        }
        self.tree_inserts += 1;
        let tree_key = (rb_key, self.tree_inserts);
        self.trees[class].insert(tree_key, key);
        self.queue_mut(key).tree_key = Some(tree_key);
    }

    /// `cfq_del_cfqq_rr`: takes an empty queue off its tree.
    fn del_from_tree(&mut self, key: QueueKey) {
        let queue = self.queues.get_mut(&key).expect("queue is live");
        if let Some(tree_key) = queue.tree_key.take() {
            self.trees[queue.class].remove(&tree_key);
        }
    }

    /// Forgets a queue with nothing queued, nothing in flight and no slice.
    fn maybe_drop(&mut self, key: QueueKey) {
        let idle = self
            .queues
            .get(&key)
            .is_some_and(|q| q.sort.is_empty() && q.dispatched == 0 && q.tree_key.is_none());
        if idle && self.active.as_ref().is_none_or(|a| a.key != key) {
            self.queues.remove(&key);
        }
    }

    /// `__cfq_slice_expired`: ends the active slice. With `timed_out`, the unused part of the
    /// slice (or its overrun) is remembered for the queue's next place in the tree.
    fn expire(&mut self, now: Nanos, timed_out: bool) {
        let Some(active) = self.active.take() else {
            return;
        };
        let key = active.key;
        if timed_out && !active.slice_new {
            let resid = active.slice_end as i64 - now as i64;
            self.history_mut(key, now).slice_resid = resid;
        }
        if self.queue(key).sort.is_empty() {
            self.del_from_tree(key);
        } else {
            self.service_tree_add(key, false, now);
        }
        self.maybe_drop(key);
    }

    /// The idle timer (`cfq_idle_slice_timer`), run when its time has come.
    fn run_idle_timer(&mut self, now: Nanos) {
        let Some(active) = self.active.as_mut() else {
            return;
        };
        if active.idle_until.is_none_or(|until| now < until) {
            return;
        }
        active.idle_until = None;
        let key = active.key;
        if self.slice_used(now) {
            self.expire(now, false);
        } else if self.queue(key).sort.is_empty() {
            // Idling failed: forget that the flow queued deeply.
            self.history_mut(key, now).deep = false;
            self.expire(now, false);
        }
    }

    /// `cfq_set_prio_slice`: starts the active slice's clock, scaled for `low_latency`.
    fn set_prio_slice(&mut self, now: Nanos) {
        let key = self.active.as_ref().expect("a queue is active").key;
        let (class, sync, level) = {
            let queue = self.queue(key);
            (queue.class, queue.sync, queue.level)
        };
        let mut slice = self.prio_slice(sync, level);
        if self.low_latency {
            // `cfq_group_get_avg_queues`: follows increases quickly, decreases slowly.
            let rt = class == RT;
            let busy = self.trees[if rt { RT } else { BE }].len() as u64;
            let average = &mut self.busy_queues_avg[usize::from(rt)];
            let (low, high) = ((*average).min(busy), (*average).max(busy));
            *average = ((HIST_DIVISOR - 1) * high + low + HIST_DIVISOR / 2) / HIST_DIVISOR;
            let expected = u128::from(self.slice[1]) * u128::from(*average);
            let target = u128::from(self.target_latency);
            if expected > target {
                let wide = u128::from(slice);
                let low_slice =
                    wide.min(2 * u128::from(self.slice_idle) * wide / u128::from(self.slice[1]));
                slice = (wide * target / expected).max(low_slice) as Nanos;
            }
        }
        let active = self.active.as_mut().expect("a queue is active");
        active.slice_end = now.saturating_add(slice);
    }

    /// `cfq_arm_slice_timer`: starts idling for the active flow's next request, if it should.
    fn arm_slice_timer(&mut self, now: Nanos) {
        let key = self.active.as_ref().expect("a queue is active").key;
        if self.slice_idle == 0 || !self.should_idle(key) || self.queue(key).dispatched > 0 {
            return;
        }
        let slice_end = self.active.as_ref().expect("a queue is active").slice_end;
        if let Some(history) = self.history.get(&key) {
            // Do not idle past the slice for a flow that thinks longer than what is left.
            if history.ttime_valid() && slice_end.saturating_sub(now) < history.ttime_mean {
                return;
            }
        }
        let active = self.active.as_mut().expect("a queue is active");
        active.idle_until = Some(now.saturating_add(self.slice_idle));
    }

    /// `cfq_should_preempt`: whether a request just queued on `key` ends the active slice.
    fn should_preempt(&self, key: QueueKey, request: &Request, now: Nanos) -> bool {
        let Some(active) = self.active.as_ref() else {
            return false;
        };
        let new = self.queue(key);
        let current = self.queue(active.key);
        if new.class == IDLE {
            return false;
        }
        if current.class == IDLE {
            return true;
        }
        if current.class == RT && new.class != RT {
            return false;
        }
        if request.sync && !current.sync {
            return true;
        }
        if self.slice_used(now) {
            return true;
        }
        if new.class == RT && current.class != RT {
            return true;
        }
        if active.idle_until.is_none() {
            return false;
        }
        // As good as what the idling queue would send next.
        request.offset.abs_diff(self.last_position) <= CLOSE_THRESHOLD
    }

    /// `cfq_preempt_queue`: `key` takes over; it goes to the front of its tree.
    fn preempt(&mut self, key: QueueKey, now: Nanos) {
        self.expire(now, true);
        self.service_tree_add(key, true, now);
    }

    /// `cfq_rq_enqueued`: updates the flow's statistics and checks for preemption.
    fn enqueued(&mut self, key: QueueKey, request: &Request, now: Nanos) {
        let (class, sync, depth) = {
            let queue = self.queue(key);
            (queue.class, queue.sync, queue.sort.len())
        };
        let slice_idle = self.slice_idle;
        let history = self.history_mut(key, now);
        if sync {
            // `cfq_update_io_thinktime`, fixed point with 256 as one sample.
            let elapsed = now.saturating_sub(history.last_end_request);
            let ttime = elapsed.min(slice_idle.saturating_mul(2));
            history.ttime_samples = (7 * history.ttime_samples + 256) / 8;
            history.ttime_total = (7 * history.ttime_total + 256 * ttime) / 8;
            history.ttime_mean = (history.ttime_total + 128) / history.ttime_samples;
        }
        // `cfq_update_io_seektime`.
        let distance = if history.last_request_pos != 0 {
            request.offset.abs_diff(history.last_request_pos)
        } else {
            0
        };
        history.seek_history = (history.seek_history << 1) | u32::from(distance > SEEK_THRESHOLD);
        // `cfq_update_idle_window`.
        if sync && class != IDLE {
            if depth >= 4 {
                history.deep = true;
            }
            if slice_idle == 0 || (!history.deep && history.seeky()) {
                history.idle_window = false;
            } else if history.ttime_valid() {
                history.idle_window = history.ttime_mean <= slice_idle;
            }
        }
        history.last_request_pos = request.end();
        match self.active.as_mut() {
            Some(active) if active.key == key => {
                // The flow we idle for came back: serve it at once.
                active.idle_until = None;
            }
            _ => {
                if self.should_preempt(key, request, now) {
                    self.preempt(key, now);
                }
            }
        }
    }

    /// `cfq_select_queue`: keeps the active queue, idles, or expires it and picks the next.
    fn select_queue(&mut self, now: Nanos) -> Select {
        if let Some(active) = self.active.as_ref() {
            let key = active.key;
            let queue = self.queue(key);
            let keep = if self.slice_used(now) {
                false
            } else if !queue.sort.is_empty() {
                return Select::Queue(key);
            } else if let Some(until) = active.idle_until {
                return Select::Wait(until);
            } else {
                // Let what is in flight complete: it may bring the next request with it.
                queue.dispatched > 0 && self.should_idle(key)
            };
            if keep {
                return Select::Nothing;
            }
            self.expire(now, false);
        }
        let next = if let Some(&key) = self.trees[RT].values().next() {
            key
        } else if let Some(&key) = self.trees[BE].values().next() {
            key
        } else if let Some(&key) = self.trees[IDLE].values().next() {
            if self.rt_be_in_flight > 0 {
                return Select::Nothing;
            }
            if let Some(last) = self.last_rt_be_end {
                let grace_end = last.saturating_add(IDLE_DELAY);
                if now < grace_end {
                    return Select::Wait(grace_end);
                }
            }
            key
        } else {
            return Select::Nothing;
        };
        self.active = Some(Active {
            key: next,
            slice_new: true,
            slice_end: 0,
            slice_dispatch: 0,
            fifo_checked: false,
            idle_until: None,
        });
        Select::Queue(next)
    }

    /// `cfq_may_dispatch`: whether the active queue may send another request now.
    fn may_dispatch(&self, key: QueueKey, now: Nanos) -> bool {
        let queue = self.queue(key);
        // Drain async requests before sync I/O that idles; hold async while sync is in flight.
        if self.should_idle(key) && self.in_flight[0] > 0 {
            return false;
        }
        if self.in_flight[1] > 0 && !queue.sync {
            return false;
        }
        let mut max_dispatch = if queue.class == IDLE {
            1
        } else {
            (self.quantum / 2).max(1)
        };
        let dispatched = u64::from(queue.dispatched);
        if dispatched >= max_dispatch {
            if queue.class == IDLE {
                return false;
            }
            let busy = self.busy_queues();
            if busy > 1 && self.slice_used_soon(queue.dispatched, now) {
                return false;
            }
            max_dispatch = if busy == 1 { u64::MAX } else { self.quantum };
        }
        if !queue.sync && self.low_latency {
            let since_delay = match self.last_delayed_sync {
                Some(at) => now.saturating_sub(at),
                None => now.saturating_add(SECOND),
            };
            let mut depth = since_delay / self.slice[1];
            if depth == 0 && dispatched == 0 {
                depth = 1;
            }
            max_dispatch = max_dispatch.min(depth);
        }
        dispatched < max_dispatch
    }

    /// `cfq_dispatch_request` and `cfq_dispatch_insert`: sends the active queue's next request.
    fn dispatch_from(&mut self, key: QueueKey, now: Nanos) -> Request {
        let check_fifo = {
            let active = self.active.as_mut().expect("a queue is active");
            !std::mem::replace(&mut active.fifo_checked, true)
        };
        let queue = self.queue(key);
        let expired = check_fifo
            .then(|| queue.fifo.iter().next())
            .flatten()
            .filter(|(&(fifo_time, _), _)| fifo_time <= now)
            .map(|(&(_, id), &offset)| (offset, id));
        let chosen =
            expired.unwrap_or_else(|| queue.next.expect("a busy queue has a next request"));
        let next = self.find_next(queue, chosen);
        let queue = self.queue_mut(key);
        queue.next = next;
        let entry = queue.remove(chosen);
        queue.dispatched += 1;
        let (sync, class) = (queue.sync, queue.class);
        self.in_flight[usize::from(sync)] += 1;
        if class != IDLE {
            self.rt_be_in_flight += 1;
        }
        self.queued -= 1;
        self.last_position = entry.request.end();
        entry.request
    }

    /// After `grown` grew, folds an adjacent request of the same queue into the lower of the two
    /// (`attempt_back_merge` / `attempt_front_merge` and `cfq_merged_requests`).
    fn merge_neighbour(&mut self, key: QueueKey, grown: SortKey, limits: MergeLimits) {
        let queue = self.queue_mut(key);
        let request = &queue.sort[&grown].request;
        let (start, end) = (request.offset, request.end());
        let after = queue
            .sort
            .range((end, RequestId(0))..)
            .next()
            .filter(|(k, e)| k.0 == end && mergeable(request, &e.request, limits))
            .map(|(k, _)| *k);
        let before = queue
            .sort
            .range(..grown)
            .next_back()
            .filter(|(_, e)| e.request.end() == start && mergeable(&e.request, request, limits))
            .map(|(k, _)| *k);
        let (survivor_key, folded_key) = match (after, before) {
            (Some(after), _) => (grown, after),
            (None, Some(before)) => (before, grown),
            (None, None) => return,
        };
        let folded = queue.remove(folded_key);
        let mut survivor = queue.remove(survivor_key);
        // The survivor keeps the earlier FIFO time.
        survivor.fifo_time = survivor.fifo_time.min(folded.fifo_time);
        merge_back(&mut survivor.request, folded.request);
        queue.add(survivor);
        if queue.next == Some(folded_key) {
            queue.next = Some(survivor_key);
        }
        self.queued -= 1;
    }
}

impl Policy for Cfq {
    fn name(&self) -> &'static str {
        "cfq"
    }

    fn try_merge(
        &mut self,
        request: Request,
        limits: MergeLimits,
        _now: Nanos,
    ) -> Result<(), Request> {
        // Only into the queue this request would join (`cfq_allow_merge`).
        let key = queue_key(&request);
        let Some(queue) = self.queues.get_mut(&key) else {
            return Err(request);
        };
        // Back merge: a queued request ends where this one starts.
        let below = queue
            .sort
            .range(..(request.offset, RequestId(0)))
            .next_back()
            .filter(|(_, e)| {
                e.request.end() == request.offset && mergeable(&e.request, &request, limits)
            })
            .map(|(k, _)| *k);
        if let Some(sort_key) = below {
            let entry = queue.sort.get_mut(&sort_key).expect("found above");
            merge_back(&mut entry.request, request);
            self.merge_neighbour(key, sort_key, limits);
            return Ok(());
        }
        // Front merge: a queued request starts where this one ends (`cfq_merge`).
        let above = queue
            .sort
            .range((request.end(), RequestId(0))..)
            .next()
            .filter(|(k, e)| k.0 == request.end() && mergeable(&e.request, &request, limits))
            .map(|(k, _)| *k);
        let Some(sort_key) = above else {
            return Err(request);
        };
        // The start moves, so the request moves in the sort list (`cfq_reposition_rq_rb`).
        let mut entry = queue.remove(sort_key);
        merge_front(&mut entry.request, request);
        let new_key = queue.add(entry);
        if queue.next == Some(sort_key) {
            queue.next = Some(new_key);
        }
        let queue = self.queue(key);
        let next = self.choose_req(queue, queue.next, Some(new_key), self.last_position);
        self.queue_mut(key).next = next;
        self.merge_neighbour(key, new_key, limits);
        Ok(())
    }

    fn insert(&mut self, request: Request, now: Nanos) {
        self.run_idle_timer(now);
        let key = queue_key(&request);
        let sync = request.sync;
        let fifo_time = now.saturating_add(self.fifo_expire[usize::from(sync)]);
        let (class, level) = (class_of(request.prio), level_of(request.prio));
        let queue = self
            .queues
            .entry(key)
            .or_insert_with(|| Queue::new(class, level, sync));
        let info = Request {
            merged: Vec::new(),
            ..request.clone()
        };
        let sort_key = queue.add(Entry { request, fifo_time });
        let on_tree = queue.tree_key.is_some();
        self.queued += 1;
        if !on_tree {
            self.service_tree_add(key, false, now);
        }
        let queue = self.queue(key);
        let next = self.choose_req(queue, queue.next, Some(sort_key), self.last_position);
        self.queue_mut(key).next = next;
        self.enqueued(key, &info, now);
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.run_idle_timer(now);
        if let Some(request) = self.requeued.pop_front() {
            self.queued -= 1;
            self.last_position = request.end();
            return Dispatch::Request(request);
        }
        if self.queued == 0 {
            return Dispatch::Empty;
        }
        let key = match self.select_queue(now) {
            Select::Queue(key) => key,
            Select::Wait(until) => return Dispatch::WaitUntil(until),
            Select::Nothing => return Dispatch::Empty,
        };
        if !self.may_dispatch(key, now) {
            return Dispatch::Empty;
        }
        let request = self.dispatch_from(key, now);
        let slice_dispatch = {
            let active = self.active.as_mut().expect("a queue is active");
            active.slice_dispatch += 1;
            active.slice_dispatch
        };
        // An async queue's slice ends after its share of requests, an idle-class one after each
        // request, when someone else is waiting.
        let queue = self.queue(key);
        let used_up = (!queue.sync && slice_dispatch >= self.prio_to_maxrq(queue.level))
            || queue.class == IDLE;
        if used_up && self.busy_queues() > 1 {
            self.expire(now, false);
        }
        Dispatch::Request(request)
    }

    fn completed(&mut self, request: &Request, now: Nanos) {
        self.run_idle_timer(now);
        let key = queue_key(request);
        let queue = self
            .queues
            .get_mut(&key)
            .expect("completion of a request this policy did not dispatch");
        assert!(
            queue.dispatched > 0,
            "completion of a request this policy did not dispatch"
        );
        queue.dispatched -= 1;
        let (sync_queue, class, empty) = (queue.sync, queue.class, queue.sort.is_empty());
        self.in_flight[usize::from(sync_queue)] -= 1;
        if class != IDLE {
            self.rt_be_in_flight -= 1;
            self.last_rt_be_end = Some(now);
        }
        if request.sync {
            self.history_mut(key, now).last_end_request = now;
            if request.arrival.saturating_add(self.fifo_expire[1]) <= now {
                self.last_delayed_sync = Some(now);
            }
        }
        if self.active.as_ref().is_some_and(|a| a.key == key) {
            let slice_new = self.active.as_ref().is_some_and(|a| a.slice_new);
            if slice_new {
                self.set_prio_slice(now);
                self.active.as_mut().expect("a queue is active").slice_new = false;
            }
            if self.slice_used(now) || class == IDLE {
                self.expire(now, true);
            } else if request.sync && empty {
                self.arm_slice_timer(now);
            }
        }
        self.maybe_drop(key);
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
        let mut requests: Vec<Request> = Vec::with_capacity(self.queued);
        for request in std::mem::take(&mut self.requeued) {
            // It leaves without completing here: undo its dispatch accounting.
            let queue = self
                .queues
                .get_mut(&queue_key(&request))
                .expect("queue is live");
            queue.dispatched -= 1;
            self.in_flight[usize::from(queue.sync)] -= 1;
            if queue.class != IDLE {
                self.rt_be_in_flight -= 1;
            }
            requests.push(request);
        }
        for queue in self.queues.values_mut() {
            queue.fifo.clear();
            queue.next = None;
            queue.tree_key = None;
            requests.extend(
                std::mem::take(&mut queue.sort)
                    .into_values()
                    .map(|e| e.request),
            );
        }
        for tree in &mut self.trees {
            tree.clear();
        }
        self.active = None;
        self.queues.retain(|_, q| q.dispatched > 0);
        self.queued = 0;
        requests.sort_by_key(|r| (r.arrival, r.id));
        out.extend(requests);
    }

    fn tunables(&self) -> &'static [TunableSpec] {
        TUNABLES
    }

    fn tunable(&self, name: &str) -> Result<u64, TunableError> {
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
            "target_latency" => self.target_latency / MILLISECOND,
            _ => return Err(crate::tunable::unknown(name, TUNABLES)),
        })
    }

    fn set_tunable(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
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
            "target_latency" => self.target_latency = from_millis(value),
            _ => unreachable!("find() accepted only known names"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::request;
    use crate::Op;
    use std::collections::BTreeSet;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    const MS: Nanos = MILLISECOND;

    fn prio(class: IoPrioClass, level: u8) -> IoPrio {
        IoPrio::new(class, level).unwrap()
    }

    /// A 4 KiB sync read of `flow` at `offset`, arriving at `arrival`.
    fn read(id: u64, flow: u32, offset: u64, arrival: Nanos) -> Request {
        let mut request = request(id, Op::Read, offset, 4096);
        request.flow = FlowId(flow);
        request.arrival = arrival;
        request
    }

    fn with_prio(mut request: Request, prio: IoPrio) -> Request {
        request.prio = prio;
        request
    }

    fn take(policy: &mut Cfq, now: Nanos) -> Request {
        match policy.dispatch(now) {
            Dispatch::Request(request) => request,
            other => panic!("expected a request at {now}, got {other:?}"),
        }
    }

    /// A small deterministic generator (xorshift64).
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }

        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }
    }

    /// A closed-loop flow: one sync read outstanding, the next issued the moment the last
    /// completes; sequential from `start`, or at random 4 KiB blocks of the first GiB after it.
    struct Flow {
        flow: u32,
        prio: IoPrio,
        next_offset: u64,
        random: Option<XorShift>,
    }

    impl Flow {
        fn sequential(flow: u32, prio: IoPrio, start: u64) -> Self {
            Flow {
                flow,
                prio,
                next_offset: start,
                random: None,
            }
        }
    }

    /// A device serving one request at a time, each in `service`, driven the way the engine
    /// drives a policy. Each flow issues its next request `THINK` after the last completes.
    struct Bench {
        policy: Cfq,
        now: Nanos,
        service: Nanos,
        flows: Vec<Flow>,
        in_flight: Option<(Nanos, Request)>,
        /// Requests flows will issue: (time, flow index).
        thinking: Vec<(Nanos, usize)>,
        next_id: u64,
        /// Dispatch time and flow of every request sent.
        log: Vec<(Nanos, u32)>,
    }

    impl Bench {
        fn new(policy: Cfq, service: Nanos, flows: Vec<Flow>) -> Self {
            let mut bench = Bench {
                policy,
                now: 0,
                service,
                flows,
                in_flight: None,
                thinking: Vec::new(),
                next_id: 0,
                log: Vec::new(),
            };
            for index in 0..bench.flows.len() {
                bench.issue(index);
            }
            bench
        }

        fn issue(&mut self, index: usize) {
            let flow = &mut self.flows[index];
            let offset = flow.next_offset;
            flow.next_offset = match &mut flow.random {
                Some(rng) => {
                    flow.next_offset - flow.next_offset % GIB + rng.below(GIB / 4096) * 4096
                }
                None => offset + 4096,
            };
            self.next_id += 1;
            let request = with_prio(read(self.next_id, flow.flow, offset, self.now), flow.prio);
            self.policy.insert(request, self.now);
        }

        fn run_until(&mut self, end: Nanos) {
            loop {
                let mut wake = None;
                if self.in_flight.is_none() {
                    match self.policy.dispatch(self.now) {
                        Dispatch::Request(request) => {
                            self.log.push((self.now, request.flow.0));
                            self.in_flight = Some((self.now + self.service, request));
                        }
                        Dispatch::WaitUntil(at) => {
                            assert!(at > self.now);
                            wake = Some(at);
                        }
                        Dispatch::Empty => {}
                    }
                }
                let next = [
                    self.in_flight.as_ref().map(|(done, _)| *done),
                    wake,
                    self.thinking.iter().map(|(at, _)| *at).min(),
                ]
                .into_iter()
                .flatten()
                .min()
                .expect("something to wait for");
                if next > end {
                    return;
                }
                self.now = next;
                if let Some((_, request)) = self.in_flight.take_if(|(done, _)| *done == next) {
                    self.policy.completed(&request, self.now);
                    let index = self
                        .flows
                        .iter()
                        .position(|f| f.flow == request.flow.0)
                        .expect("known flow");
                    self.thinking.push((self.now + THINK, index));
                }
                while let Some(position) = self.thinking.iter().position(|(at, _)| *at == next) {
                    let (_, index) = self.thinking.swap_remove(position);
                    self.issue(index);
                }
            }
        }

        /// Runs of consecutive dispatches from one flow: (flow, first dispatch, last completion).
        fn runs(&self) -> Vec<(u32, Nanos, Nanos)> {
            let mut runs: Vec<(u32, Nanos, Nanos)> = Vec::new();
            for &(at, flow) in &self.log {
                match runs.last_mut() {
                    Some(run) if run.0 == flow => run.2 = at + self.service,
                    _ => runs.push((flow, at, at + self.service)),
                }
            }
            runs
        }
    }

    /// Think time of bench flows: well within `slice_idle`, so CFQ idles for them.
    const THINK: Nanos = MS / 2;

    /// The lengths of the runs that the end of the bench did not cut short.
    fn complete_runs(bench: &Bench) -> Vec<(u32, Nanos)> {
        let runs = bench.runs();
        runs[..runs.len() - 1]
            .iter()
            .map(|&(flow, start, end)| (flow, end - start))
            .collect()
    }

    // Proves the central CFQ behaviour: two sequential sync readers take turns, each holding the
    // disk for a whole slice (100 ms from its first completion) thanks to idling, instead of
    // alternating request by request.
    #[test]
    fn sync_flows_alternate_in_slices() {
        let flows = vec![
            Flow::sequential(0, IoPrio::NONE, 0),
            Flow::sequential(1, IoPrio::NONE, GIB),
        ];
        let mut bench = Bench::new(Cfq::new(), MS, flows);
        bench.run_until(1000 * MS);
        let runs = complete_runs(&bench);
        assert!(runs.len() >= 8, "{runs:?}");
        for pair in runs.windows(2) {
            assert_ne!(pair[0].0, pair[1].0, "flows alternate: {runs:?}");
        }
        for &(flow, length) in &runs {
            // One service time before the slice clock starts, then 100 ms, overrun by at most
            // one think time and one service time.
            assert!(
                (100 * MS..=103 * MS).contains(&length),
                "flow {flow} held the disk {length} ns"
            );
        }
    }

    // Proves cfq_prio_slice: a BE level 0 flow gets 100 + 4 * 20 = 180 ms slices, a BE level 7
    // flow 100 - 3 * 20 = 40 ms.
    #[test]
    fn slice_length_follows_priority() {
        let flows = vec![
            Flow::sequential(0, prio(IoPrioClass::Be, 0), 0),
            Flow::sequential(1, prio(IoPrioClass::Be, 7), GIB),
        ];
        let mut bench = Bench::new(Cfq::new(), MS, flows);
        bench.run_until(2000 * MS);
        let runs = complete_runs(&bench);
        assert!(runs.len() >= 6, "{runs:?}");
        for &(flow, length) in &runs {
            let slice = if flow == 0 { 180 * MS } else { 40 * MS };
            assert!(
                (slice..=slice + 3 * MS).contains(&length),
                "flow {flow} held the disk {length} ns, slice {slice}"
            );
        }
    }

    // Proves low_latency: with four busy queues a round of 100 ms slices would take 400 ms, so
    // slices shrink to fit target_latency (300 ms / 4 = 75 ms) once the busy-queue average has
    // caught up; without low_latency they stay at 100 ms.
    #[test]
    fn low_latency_fits_a_round_into_target_latency() {
        for (low_latency, slice) in [(1, 75 * MS), (0, 100 * MS)] {
            let mut policy = Cfq::new();
            policy.set_tunable("low_latency", low_latency).unwrap();
            let flows = (0..4)
                .map(|f| Flow::sequential(f, IoPrio::NONE, u64::from(f) * GIB))
                .collect();
            let mut bench = Bench::new(policy, MS, flows);
            bench.run_until(2000 * MS);
            let runs = complete_runs(&bench);
            assert!(runs.len() >= 10, "{runs:?}");
            for &(flow, length) in &runs[2..] {
                assert!(
                    (slice..=slice + 3 * MS).contains(&length),
                    "low_latency={low_latency}: flow {flow} held the disk {length} ns"
                );
            }
        }
    }

    // Proves idling: when the active flow's queue runs empty CFQ waits slice_idle for it although
    // another flow has work, serves its next request at once, and moves on when the wait ends.
    #[test]
    fn idles_for_the_active_flow() {
        let mut policy = Cfq::new();
        policy.insert(read(1, 0, 0, 0), 0);
        policy.insert(read(2, 1, GIB, 0), 0);
        let first = take(&mut policy, 0);
        assert_eq!(first.id.0, 1);
        policy.completed(&first, MS);
        assert_eq!(policy.dispatch(MS), Dispatch::WaitUntil(9 * MS));
        // Flow 0 comes back within the window: served before flow 1.
        policy.insert(read(3, 0, 4096, 2 * MS), 2 * MS);
        let second = take(&mut policy, 2 * MS);
        assert_eq!(second.id.0, 3);
        policy.completed(&second, 3 * MS);
        assert_eq!(policy.dispatch(3 * MS), Dispatch::WaitUntil(11 * MS));
        assert_eq!(policy.dispatch(10 * MS), Dispatch::WaitUntil(11 * MS));
        // The window closes: flow 1's turn.
        assert_eq!(take(&mut policy, 11 * MS).id.0, 2);
    }

    // Proves slice_idle = 0 makes CFQ work-conserving: the other flow is served at once.
    #[test]
    fn slice_idle_zero_disables_idling() {
        let mut policy = Cfq::new();
        policy.set_tunable("slice_idle", 0).unwrap();
        policy.insert(read(1, 0, 0, 0), 0);
        policy.insert(read(2, 1, GIB, 0), 0);
        let first = take(&mut policy, 0);
        policy.completed(&first, MS);
        assert_eq!(take(&mut policy, MS).id.0, 2);
    }

    // Proves the seek rule: once more than 4 of a flow's last 32 requests were seeks, CFQ stops
    // idling for it and serves the other flow as soon as the seeky flow's queue empties.
    #[test]
    fn seeky_flow_is_not_idled_on() {
        let mut policy = Cfq::new();
        let offsets = [0, 500, 100, 700, 300, 900, 200, 800].map(|m| m * MIB);
        policy.insert(read(100, 0, offsets[0], 0), 0);
        policy.insert(read(200, 1, 5 * GIB, 0), 0);
        let mut now = 0;
        let mut served = Vec::new();
        for (index, &offset) in offsets.iter().enumerate() {
            if index > 0 {
                policy.insert(read(100 + index as u64, 0, offset, now), now);
            }
            let request = take(&mut policy, now);
            if request.flow == FlowId(1) {
                break;
            }
            served.push(request.id.0);
            now += MS;
            policy.completed(&request, now);
            match policy.dispatch(now) {
                // Still idling for flow 0: its next request comes within the window.
                Dispatch::WaitUntil(at) => assert_eq!(at, now + 8 * MS),
                Dispatch::Request(request) => {
                    assert_eq!(request.flow, FlowId(1));
                    break;
                }
                Dispatch::Empty => panic!("flow 1 has work"),
            }
        }
        // The first request is not a seek; the sixth makes five seeks out of six.
        assert_eq!(served, vec![100, 101, 102, 103, 104, 105]);
    }

    // Proves cfq_check_fifo: a request past fifo_expire_sync goes first when its queue's slice
    // starts, ahead of a nearer one; before expiry the nearer one goes first.
    #[test]
    fn expired_request_starts_the_slice() {
        for (arrival, start, first) in [(50 * MS, 100 * MS, 2), (130 * MS, 130 * MS, 1)] {
            let mut policy = Cfq::new();
            policy.insert(read(1, 0, 10 * MIB, 0), 0);
            policy.insert(read(2, 0, 0, arrival), arrival);
            let order = [take(&mut policy, start).id.0, take(&mut policy, start).id.0];
            let second = 3 - first;
            assert_eq!(order, [first, second], "dispatch at {start}");
        }
    }

    // Proves the FIFO is checked once per slice: a second expired request waits its turn in
    // offset order.
    #[test]
    fn fifo_is_checked_once_per_slice() {
        let mut policy = Cfq::new();
        policy.insert(read(1, 0, 30 * MIB, 0), 0);
        policy.insert(read(2, 0, 20 * MIB, MS), MS);
        policy.insert(read(3, 0, 30 * MIB + 4096 * 2, 200 * MS), 200 * MS);
        let order: Vec<u64> = (0..3).map(|_| take(&mut policy, 200 * MS).id.0).collect();
        // #1 expired and starts the slice; then the head continues forward to #3, although #2
        // expired too.
        assert_eq!(order, vec![1, 3, 2]);
    }

    // Proves cfq_choose_req: forward seeks are preferred, a short backward seek is taken when
    // it costs less than twice its distance forward, and a long one only when nothing else is
    // left.
    #[test]
    fn next_request_prefers_forward_seeks() {
        let mut policy = Cfq::new();
        policy.set_tunable("slice_idle", 0).unwrap();
        policy.insert(read(1, 0, 100 * MIB, 0), 0);
        assert_eq!(take(&mut policy, 0).id.0, 1);
        // The head is now at 100 MiB + 4 KiB.
        let head = 100 * MIB + 4096;
        policy.insert(read(2, 0, head + 3 * MIB, MS), MS);
        policy.insert(read(3, 0, head - MIB, MS), MS);
        policy.insert(read(4, 0, head - 50 * MIB, MS), MS);
        policy.insert(read(5, 0, head + 10 * MIB, MS), MS);
        let order: Vec<u64> = (0..4).map(|_| take(&mut policy, MS).id.0).collect();
        // #3 is 1 MiB back (costs 2 MiB) and beats #2 at 3 MiB forward; from #3 the sweep goes
        // forward; #4 is beyond back_seek_max and waits until nothing else is left.
        assert_eq!(order, vec![3, 2, 5, 4]);
    }

    // Proves preemption by class: an RT request ends a BE flow's slice at once.
    #[test]
    fn realtime_request_preempts_best_effort_slice() {
        let mut policy = Cfq::new();
        for id in 0..4 {
            policy.insert(read(id, 0, id * 4096, 0), 0);
        }
        let first = take(&mut policy, 0);
        assert_eq!(first.flow, FlowId(0));
        let rt = with_prio(read(10, 1, GIB, MS), prio(IoPrioClass::Rt, 4));
        policy.insert(rt, MS);
        assert_eq!(take(&mut policy, MS).id.0, 10);
        // A BE request does not preempt an RT slice.
        policy.insert(read(11, 2, 2 * GIB, 2 * MS), 2 * MS);
        assert!(policy
            .active
            .as_ref()
            .is_some_and(|a| a.key == QueueKey::Sync(FlowId(1))));
    }

    // Proves a sync request preempts an async queue, and the async requests in flight drain
    // before the sync queue (which idles) dispatches.
    #[test]
    fn sync_request_preempts_async_queue() {
        let mut policy = Cfq::new();
        for id in 0..4 {
            policy.insert(request(id, Op::Write, id * 4096, 4096), 0);
        }
        let write = take(&mut policy, 0);
        assert!(!write.sync);
        policy.insert(read(10, 1, GIB, MS), MS);
        assert_eq!(policy.dispatch(MS), Dispatch::Empty);
        policy.completed(&write, 2 * MS);
        assert_eq!(take(&mut policy, 2 * MS).id.0, 10);
    }

    // Proves the idle class is served only after RT and BE have been quiet for CFQ_IDLE_DELAY,
    // and that a BE request then preempts it.
    #[test]
    fn idle_class_waits_for_the_grace_period() {
        let mut policy = Cfq::new();
        let idle = with_prio(read(2, 1, GIB, 0), prio(IoPrioClass::Idle, 0));
        policy.insert(read(1, 0, 0, 0), 0);
        policy.insert(idle, 0);
        let first = take(&mut policy, 0);
        assert_eq!(first.id.0, 1);
        policy.completed(&first, 10 * MS);
        // The BE flow idles first...
        assert_eq!(policy.dispatch(10 * MS), Dispatch::WaitUntil(18 * MS));
        // ...then the idle class waits until 200 ms after the last BE completion.
        assert_eq!(policy.dispatch(18 * MS), Dispatch::WaitUntil(210 * MS));
        assert_eq!(policy.dispatch(100 * MS), Dispatch::WaitUntil(210 * MS));
        assert_eq!(take(&mut policy, 210 * MS).id.0, 2);
        policy.insert(read(3, 0, 4096, 211 * MS), 211 * MS);
        assert_eq!(take(&mut policy, 211 * MS).id.0, 3);
    }

    // Proves cfq_prio_to_maxrq: with another queue waiting, an async BE level 4 queue ends its
    // slice after 2 * (2 + 2 * 3) = 16 dispatches.
    #[test]
    fn async_slice_ends_after_its_request_quota() {
        let mut policy = Cfq::new();
        for id in 0..40 {
            policy.insert(request(id, Op::Write, id * 8192, 4096), 0);
        }
        // The other queue has a higher priority, so the first one's next place in the tree
        // (140 ms back, as async level 4 sits 140 ms below sync level 0) is behind it.
        let other = with_prio(request(100, Op::Write, GIB, 4096), prio(IoPrioClass::Be, 0));
        policy.insert(other, 0);
        let mut flows = Vec::new();
        let mut now = 0;
        for _ in 0..20 {
            let request = take(&mut policy, now);
            flows.push(request.id.0 < 100);
            now += MS;
            policy.completed(&request, now);
        }
        assert_eq!(flows.iter().take_while(|&&first| first).count(), 16);
        assert!(!flows[16]);
    }

    // Proves merges never cross queues: another flow's adjacent request, or the same flow's
    // async request, stays separate; the same flow's sync request merges (back, front, and
    // folding the gap); async requests of one priority share a queue and merge across flows.
    #[test]
    fn merges_stay_within_the_flow_queue() {
        let limits = MergeLimits {
            max_request_bytes: MIB,
        };
        let mut policy = Cfq::new();
        policy.insert(read(1, 0, 0, 0), 0);
        assert!(policy.try_merge(read(2, 1, 4096, 0), limits, 0).is_err());
        policy.insert(read(2, 1, 4096, 0), 0);
        assert!(policy.try_merge(read(3, 0, 4096, 0), limits, 0).is_ok());
        policy.insert(read(4, 0, 12_288, 0), 0);
        assert!(policy.try_merge(read(5, 0, 8192, 0), limits, 0).is_ok());
        assert_eq!(policy.queued(), 2);
        // Flow 2's request adjacent to flow 0's stays apart; flow 1 front-merges into its own.
        assert!(policy.try_merge(read(6, 2, 16_384, 0), limits, 0).is_err());
        policy.insert(read(6, 2, 16_384, 0), 0);
        assert!(policy.try_merge(read(7, 1, 0, 0), limits, 0).is_ok());
        // A sync write and an adjacent async write of the same flow stay apart.
        let mut sync_write = request(8, Op::Write, GIB, 4096);
        sync_write.sync = true;
        policy.insert(sync_write, 0);
        let async_write = request(9, Op::Write, GIB + 4096, 4096);
        assert!(policy.try_merge(async_write.clone(), limits, 0).is_err());
        policy.insert(async_write, 0);
        // Async writes of two flows with one priority share a queue, so they merge.
        let mut other_flow = request(10, Op::Write, GIB + 8192, 4096);
        other_flow.flow = FlowId(1);
        assert!(policy.try_merge(other_flow, limits, 0).is_ok());
        assert_eq!(policy.queued(), 5);
        let mut out = Vec::new();
        policy.drain(&mut out);
        let shapes: BTreeSet<(u64, u64, usize)> = out
            .iter()
            .map(|r| (r.offset, r.len, r.request_count()))
            .collect();
        let expected: BTreeSet<(u64, u64, usize)> = [
            (0, 16_384, 4),
            (0, 8192, 2),
            (16_384, 4096, 1),
            (GIB, 4096, 1),
            (GIB + 4096, 8192, 2),
        ]
        .into_iter()
        .collect();
        assert_eq!(shapes, expected);
    }

    // Proves a requeued request goes out again first, and drain hands back every queued request
    // oldest first and leaves the policy usable.
    #[test]
    fn requeue_and_drain() {
        let mut policy = Cfq::new();
        policy.insert(read(1, 0, 0, 0), 0);
        policy.insert(read(2, 1, GIB, MS), MS);
        policy.insert(read(3, 0, 8192, 2 * MS), 2 * MS);
        let first = take(&mut policy, 3 * MS);
        assert_eq!(first.id.0, 1);
        policy.requeue(first, 4 * MS);
        assert_eq!(policy.queued(), 3);
        let again = take(&mut policy, 4 * MS);
        assert_eq!(again.id.0, 1);
        policy.requeue(again, 5 * MS);
        let mut out = Vec::new();
        policy.drain(&mut out);
        let ids: Vec<u64> = out.iter().map(|r| r.id.0).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        assert_eq!(policy.queued(), 0);
        assert!(policy.queues.is_empty());
        assert_eq!(policy.in_flight, [0, 0]);
        policy.insert(read(4, 2, 0, 6 * MS), 6 * MS);
        assert_eq!(take(&mut policy, 6 * MS).id.0, 4);
    }

    // Proves per-flow state stays bounded: queues go away when idle and at most HISTORY_CAP
    // histories are kept, however many flows come and go.
    #[test]
    fn per_flow_state_is_bounded() {
        let mut policy = Cfq::new();
        let mut now = 0;
        for id in 0..(HISTORY_CAP as u64 + 1000) {
            policy.insert(read(id, id as u32, id * 4096, now), now);
            let request = take(&mut policy, now);
            now += MS;
            policy.completed(&request, now);
            assert!(policy.queues.len() <= 2);
        }
        assert_eq!(policy.history.len(), HISTORY_CAP);
        assert_eq!(policy.history_lru.len(), HISTORY_CAP);
    }

    // Proves, over randomized workloads (flows, classes, sync and async, merges, requeues,
    // drains, tunables, device depths), that every request inserted is dispatched and completed
    // exactly once, and that CFQ never stalls with work queued and nothing in flight.
    #[test]
    fn every_request_completes_exactly_once() {
        for seed in 1..=60u64 {
            let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut policy = Cfq::new();
            if rng.below(3) == 0 {
                policy.set_tunable("slice_idle", 0).unwrap();
            }
            if rng.below(3) == 0 {
                policy.set_tunable("quantum", 1 + rng.below(8)).unwrap();
            }
            if rng.below(2) == 0 {
                policy.set_tunable("low_latency", 0).unwrap();
            }
            if rng.below(3) == 0 {
                policy.set_tunable("slice_sync", 1 + rng.below(20)).unwrap();
                policy
                    .set_tunable("slice_async", 1 + rng.below(20))
                    .unwrap();
            }
            let limits = MergeLimits {
                max_request_bytes: 32 * 1024,
            };
            let depth = 1 + rng.below(4) as usize;
            let mut now: Nanos = 0;
            let mut next_id = 0;
            let mut submitted = BTreeSet::new();
            let mut completed = BTreeSet::new();
            let mut in_flight: Vec<Request> = Vec::new();
            let fill = |policy: &mut Cfq, in_flight: &mut Vec<Request>, now: Nanos| {
                let mut wake = None;
                while in_flight.len() < depth {
                    match policy.dispatch(now) {
                        Dispatch::Request(request) => in_flight.push(request),
                        Dispatch::WaitUntil(at) => {
                            assert!(at > now, "seed {seed}: wait until {at} at {now}");
                            assert!(policy.queued() > 0);
                            wake = Some(at);
                            break;
                        }
                        Dispatch::Empty => {
                            assert!(
                                policy.queued() == 0 || !in_flight.is_empty(),
                                "seed {seed}: stalled with work queued at {now}"
                            );
                            break;
                        }
                    }
                }
                wake
            };
            let complete =
                |policy: &mut Cfq, completed: &mut BTreeSet<u64>, request: Request, now: Nanos| {
                    for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
                        assert!(completed.insert(id.0), "seed {seed}: #{} twice", id.0);
                    }
                    policy.completed(&request, now);
                };
            for _ in 0..3000 {
                now += rng.below(2 * MS);
                match rng.below(20) {
                    0..=7 => {
                        if policy.queued() + in_flight.len() >= 48 {
                            continue;
                        }
                        next_id += 1;
                        let flow = rng.below(6) as u32;
                        let sync = rng.below(3) != 0;
                        let op = if sync && rng.below(2) == 0 {
                            Op::Read
                        } else {
                            Op::Write
                        };
                        let mut request = request(next_id, op, rng.below(64) * 4096, 4096);
                        request.sync = sync;
                        request.flow = FlowId(flow);
                        request.arrival = now;
                        request.prio = match rng.below(6) {
                            0 => prio(IoPrioClass::Rt, rng.below(8) as u8),
                            1 => prio(IoPrioClass::Idle, 0),
                            2 | 3 => prio(IoPrioClass::Be, rng.below(8) as u8),
                            _ => IoPrio::NONE,
                        };
                        submitted.insert(next_id);
                        if let Err(request) = policy.try_merge(request, limits, now) {
                            policy.insert(request, now);
                        }
                    }
                    8..=12 => {
                        fill(&mut policy, &mut in_flight, now);
                    }
                    13..=17 => {
                        if !in_flight.is_empty() {
                            let index = rng.below(in_flight.len() as u64) as usize;
                            let request = in_flight.swap_remove(index);
                            complete(&mut policy, &mut completed, request, now);
                        }
                    }
                    18 => {
                        if !in_flight.is_empty() && rng.below(4) == 0 {
                            let index = rng.below(in_flight.len() as u64) as usize;
                            policy.requeue(in_flight.swap_remove(index), now);
                        }
                    }
                    _ => {
                        if rng.below(20) == 0 {
                            let mut out = Vec::new();
                            policy.drain(&mut out);
                            assert_eq!(policy.queued(), 0);
                            assert!(out
                                .windows(2)
                                .all(|w| (w[0].arrival, w[0].id) <= (w[1].arrival, w[1].id)));
                            for request in out {
                                policy.insert(request, now);
                            }
                        }
                    }
                }
            }
            let mut rounds = 0;
            loop {
                rounds += 1;
                assert!(rounds < 1_000_000, "seed {seed}: does not finish");
                let wake = fill(&mut policy, &mut in_flight, now);
                if let Some(request) = in_flight.pop() {
                    now += MS / 2;
                    complete(&mut policy, &mut completed, request, now);
                } else if let Some(at) = wake {
                    now = at;
                } else {
                    assert_eq!(policy.queued(), 0, "seed {seed}: stalled");
                    break;
                }
            }
            assert_eq!(submitted, completed, "seed {seed}");
            assert_eq!(policy.in_flight, [0, 0]);
            assert_eq!(policy.rt_be_in_flight, 0);
            assert!(policy.queues.len() <= 1, "seed {seed}: queues left behind");
        }
    }

    // Proves every tunable reads back its Linux default and what was set, in its unit.
    #[test]
    fn tunables_round_trip() {
        let mut policy = Cfq::new();
        for spec in TUNABLES {
            assert_eq!(
                policy.tunable(spec.name).unwrap(),
                spec.default,
                "{}",
                spec.name
            );
            policy.set_tunable(spec.name, spec.min).unwrap();
            assert_eq!(
                policy.tunable(spec.name).unwrap(),
                spec.min,
                "{}",
                spec.name
            );
        }
        assert!(policy.set_tunable("quantum", 0).is_err());
        assert!(policy.set_tunable("group_isolation", 1).is_err());
        assert_eq!(Cfq::new().prio_slice(true, 0), 180 * MS);
        assert_eq!(Cfq::new().prio_slice(false, 4), 40 * MS);
        assert_eq!(Cfq::new().prio_to_maxrq(0), 32);
    }
}

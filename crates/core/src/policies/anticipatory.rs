//! `anticipatory`: Linux's anticipatory scheduler (the historic `block/as-iosched.c`, as of
//! 2.6.18-2.6.33) with the I/O priorities of seed 000.
//!
//! # The vanilla scheduler
//!
//! Requests are kept per data direction, where the direction is *sync* (reads, and writes the
//! issuer waits for) or *async* (writeback), in a list sorted by offset and a FIFO ordered by
//! expiry (`read_expire` 125 ms, `write_expire` 250 ms).
//!
//! - **One-way elevator with short backward seeks.** The next request is the closest one at or
//!   after the head. A request behind the head may be chosen instead when it is within 512 MiB
//!   (`MAXBACK`, 1024 x 1024 sectors) and its distance, counted twice (`BACK_PENALTY`), is
//!   still shorter: a backward seek is taken when it is less than half the forward one.
//! - **Batches.** Sync and async requests go in alternating batches. A sync batch lasts
//!   `read_batch_expire` (500 ms, counted from its first completion); an async batch lasts
//!   `write_batch_expire` (125 ms) or a number of writes that is tuned from how long the last
//!   write batches took. Before a batch of the other direction starts, every request of the
//!   previous batch must complete.
//! - **FIFO expiry.** Within a batch, an expired request is served first. The check is rate
//!   limited to once per expiry interval, so a backlog of expired requests does not turn the
//!   elevator into a seek storm.
//! - **Anticipation.** After dispatching a sync request, the scheduler may keep the disk idle
//!   for up to `antic_expire` (6 ms: HZ/150 at HZ=1000) after that request completes, in the
//!   hope that the same process issues a nearby request. It stops waiting as soon as the
//!   process submits, as soon as another process submits a request closer to the head than the
//!   anticipated process's mean seek distance, or at once if the process's mean think time
//!   (a decaying average of the gaps between a completion and its next request, capped at
//!   20 ms) exceeds `antic_expire`. An expired sync FIFO also ends it.
//!
//! The exit-probability heuristics of the original (guessing whether a process that exited
//! will be replaced by a cooperating one) are left out: flows here never exit mid-run.
//!
//! # Priorities (seed 000)
//!
//! With `priorities` = 1 (the default) requests are kept per *priority level*: RT 0-7, BE 0-7
//! and IDLE, seventeen levels in all, each with its own sort lists and FIFOs per direction.
//!
//! - **Levels are served in batches.** A batch serves one level in one direction. Classes are
//!   strict: RT before BE before IDLE. Within a class, levels share the disk by *tokens*: each
//!   round a level receives `level_tokens x (8 - level)` tokens (IDLE: `level_tokens`), spends
//!   one per request, and a batch ends when its level runs out of tokens while another level
//!   waits. When every waiting level of the class is out of tokens, a new round begins.
//! - **Anticipation keeps lower levels waiting.** After a request of level L completes, a
//!   request of a lower level cannot break the anticipation, however close it is: it waits
//!   for the anticipated process's next request, so a high-priority synchronous reader is not
//!   stuck behind a low-priority request dispatched in its think time.
//! - **Higher priority preempts.** A request arriving at a higher level (of a higher class, or
//!   of the same class with tokens left) breaks any anticipation and interrupts the batch in
//!   progress: the next dispatch serves it.
//! - **Expiry is per level.** FIFOs are checked only for the level being served, so expired
//!   low-priority requests never interrupt high-priority work.
//! - **No level starves forever** (an addition to the seed, which has no such bound): a level
//!   that has had requests waiting for `prio_aging_expire` (10 s, mq-deadline's value) without
//!   being served gets one batch, limited by its tokens, that higher levels cannot interrupt.
//!   Its clock then restarts, so a starved level receives at least `level_tokens` requests per
//!   `prio_aging_expire` however heavy the high-priority load.
//! - **Merges only within one level** (merged requests must have the same priority).
//!
//! With `priorities` = 0 every request shares one level: the vanilla scheduler.

use crate::ioprio::IoPrioClass;
use crate::policy::{Dispatch, Policy};
use crate::request::{merge_back, merge_front, mergeable, FlowId, MergeLimits, Request, RequestId};
use crate::time::{from_millis, Nanos, MILLISECOND};
use crate::tunable::{TunableError, TunableSpec, Unit};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// The anticipatory scheduler's tunables: Linux's five (defaults at HZ=1000) and the three of
/// seed 000's priority scheme.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "read_expire",
        unit: Unit::Milliseconds,
        default: 125,
        min: 0,
        max: 3_600_000,
        doc: "a sync request older than this is served first when its level's batch runs (HZ/8)",
    },
    TunableSpec {
        name: "write_expire",
        unit: Unit::Milliseconds,
        default: 250,
        min: 0,
        max: 3_600_000,
        doc: "an async request older than this is served first when its level's batch runs (HZ/4)",
    },
    TunableSpec {
        name: "read_batch_expire",
        unit: Unit::Milliseconds,
        default: 500,
        min: 0,
        max: 3_600_000,
        doc: "how long a sync batch may run while async requests wait (HZ/2)",
    },
    TunableSpec {
        name: "write_batch_expire",
        unit: Unit::Milliseconds,
        default: 125,
        min: 0,
        max: 3_600_000,
        doc: "target length of an async batch; the write count per batch is tuned to it (HZ/8)",
    },
    TunableSpec {
        name: "antic_expire",
        unit: Unit::Milliseconds,
        default: 6,
        min: 0,
        max: 1_000,
        doc: "longest wait for the anticipated process's next request; 0 disables anticipation (HZ/150)",
    },
    TunableSpec {
        name: "priorities",
        unit: Unit::Flag,
        default: 1,
        min: 0,
        max: 1,
        doc: "1: seed 000's per-level queues, tokens and priority anticipation; 0: vanilla AS",
    },
    TunableSpec {
        name: "level_tokens",
        unit: Unit::Requests,
        default: 4,
        min: 1,
        max: 1_000_000,
        doc: "per round, a level of an RT or BE class gets this x (8 - level) requests; IDLE gets this",
    },
    TunableSpec {
        name: "prio_aging_expire",
        unit: Unit::Milliseconds,
        default: 10_000,
        min: 1,
        max: 3_600_000,
        doc: "a level left unserved this long gets one uninterruptible batch (the starvation bound)",
    },
];

/// Priority levels: RT 0-7, BE 0-7, IDLE.
const LEVELS: usize = 17;
/// The level every request takes when priorities are off: BE 4, the default priority.
const FLAT_LEVEL: usize = 8 + 4;

/// Direction index: sync (reads and waited-for writes) and async (writeback), as AS's
/// `REQ_SYNC`/`REQ_ASYNC`.
const SYNC: usize = 0;
const ASYNC: usize = 1;

/// Largest backward seek considered, in bytes: 1024 x 1024 sectors.
const MAXBACK: u64 = 1024 * 1024 * 512;
/// A backward seek counts this many times its distance.
const BACK_PENALTY: u64 = 2;
/// Think times are tracked up to 20 ms.
const MAX_THINKTIME: Nanos = 20 * MILLISECOND;
/// Per-flow statistics kept at most; idle flows beyond it are forgotten.
const MAX_FLOWS: usize = 4096;
/// Bytes per sector, for the seek heuristics written in sectors.
const SECTOR: u64 = 512;

fn class_of(level: usize) -> usize {
    level / 8
}

fn weight_of(level: usize) -> u64 {
    if level >= 16 {
        1
    } else {
        8 - (level % 8) as u64
    }
}

fn dir_of(request: &Request) -> usize {
    if request.sync {
        SYNC
    } else {
        ASYNC
    }
}

type SortKey = (u64, RequestId);

#[derive(Debug)]
struct Entry {
    request: Request,
    expires: Nanos,
}

/// One priority level's queues.
#[derive(Debug, Default)]
struct Level {
    sort: [BTreeMap<SortKey, Entry>; 2],
    fifo: [BTreeMap<(Nanos, RequestId), u64>; 2],
    /// Tokens left this round.
    tokens: u64,
    /// When the level was last served, or began waiting; `None` while it is empty.
    waiting_since: Option<Nanos>,
    /// Last FIFO check per direction (`last_check_fifo`).
    last_check_fifo: [Nanos; 2],
    /// Direction of this level's last batch.
    last_dir: usize,
}

impl Level {
    fn queued(&self) -> usize {
        self.sort[0].len() + self.sort[1].len()
    }

    fn add(&mut self, dir: usize, entry: Entry) {
        let key = (entry.request.offset, entry.request.id);
        self.fifo[dir].insert((entry.expires, key.1), key.0);
        let previous = self.sort[dir].insert(key, entry);
        assert!(previous.is_none(), "request ids are unique");
    }

    fn remove(&mut self, dir: usize, key: SortKey) -> Entry {
        let entry = self.sort[dir].remove(&key).expect("on the sort list");
        let removed = self.fifo[dir].remove(&(entry.expires, key.1));
        assert!(removed.is_some(), "on the FIFO");
        entry
    }

    fn fifo_head(&self, dir: usize) -> Option<SortKey> {
        self.fifo[dir]
            .iter()
            .next()
            .map(|(&(_, id), &offset)| (offset, id))
    }

    /// `as_find_next_arq` + `as_choose_req`: the preferred request of `dir` for a head at
    /// `last`: the closest in front, or one a short way behind at twice the cost; if everything
    /// lies far behind, the lowest offset (the elevator wraps).
    fn next_request(&self, dir: usize, last: u64) -> Option<SortKey> {
        let sort = &self.sort[dir];
        let ahead = sort.range((last, RequestId(0))..).next().map(|(k, _)| *k);
        let behind = sort
            .range(..(last, RequestId(0)))
            .next_back()
            .map(|(k, _)| *k);
        let wrap = || sort.keys().next().copied();
        match (ahead, behind) {
            (None, None) => None,
            (Some(a), None) => Some(a),
            (None, Some(b)) => {
                if b.0 + MAXBACK >= last {
                    Some(b)
                } else {
                    wrap()
                }
            }
            (Some(a), Some(b)) => {
                if b.0 + MAXBACK < last {
                    return Some(a);
                }
                let forward = a.0 - last;
                let backward = (last - b.0) * BACK_PENALTY;
                // Ties go to the request further on, as as_choose_req does.
                if backward < forward {
                    Some(b)
                } else {
                    Some(a)
                }
            }
        }
    }
}

/// What the scheduler knows of one flow (`struct as_io_context`): fixed-point decaying
/// averages where 1.0 is 256, as in the kernel.
#[derive(Clone, Debug, Default)]
struct FlowStats {
    nr_queued: u32,
    io_started: bool,
    io_running: bool,
    last_end_request: Nanos,
    last_request_pos: u64,
    ttime_samples: u64,
    ttime_total: u64,
    ttime_mean: Nanos,
    seek_samples: u64,
    seek_total: u64,
    seek_mean: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Antic {
    /// Not anticipating.
    Off,
    /// The anticipated request has not completed yet.
    WaitReq,
    /// The anticipated request completed; waiting for the process's next one.
    WaitNext,
    /// Anticipation ended (a request came, or time ran out): run the next request.
    Finished,
}

/// The anticipatory scheduler, with or without seed 000's priorities.
#[derive(Debug)]
pub struct Anticipatory {
    levels: Vec<Level>,
    requeued: VecDeque<Request>,
    queued: usize,
    flows: HashMap<FlowId, FlowStats>,
    /// Mean think time and seek distance of flows on their first request.
    new_ttime_total: u64,
    new_ttime_mean: Nanos,
    new_seek_total: u64,
    new_seek_mean: u64,
    /// Head position per direction (`last_sector`), in bytes.
    last_pos: [u64; 2],
    batch_level: usize,
    batch_dir: usize,
    /// The batch was started by aging and may not be interrupted.
    batch_aged: bool,
    current_batch_expires: Nanos,
    /// Waiting for the previous batch's requests to complete before the new one.
    changed_batch: bool,
    /// Waiting for the first completion of a new sync batch to start its clock.
    new_batch: bool,
    write_batch_count: u64,
    current_write_count: u64,
    write_batch_idled: bool,
    /// Requests dispatched by this policy and not completed.
    nr_dispatched: u32,
    antic: Antic,
    antic_start: Nanos,
    /// The flow (and its level) anticipated on: the issuer of the last sync dispatch.
    antic_flow: Option<(FlowId, usize)>,
    ioc_finished: bool,
    // Tunables.
    fifo_expire: [Nanos; 2],
    batch_expire: [Nanos; 2],
    antic_expire: Nanos,
    priorities: bool,
    level_tokens: u64,
    prio_aging_expire: Nanos,
}

impl Default for Anticipatory {
    fn default() -> Self {
        Self::new()
    }
}

impl Anticipatory {
    /// The scheduler with Linux's defaults and priorities on.
    pub fn new() -> Self {
        let batch_expire = [
            from_millis(TUNABLES[2].default),
            from_millis(TUNABLES[3].default),
        ];
        let mut policy = Anticipatory {
            levels: (0..LEVELS).map(|_| Level::default()).collect(),
            requeued: VecDeque::new(),
            queued: 0,
            flows: HashMap::new(),
            new_ttime_total: 0,
            new_ttime_mean: 0,
            new_seek_total: 0,
            new_seek_mean: 0,
            last_pos: [0; 2],
            batch_level: FLAT_LEVEL,
            batch_dir: SYNC,
            batch_aged: false,
            current_batch_expires: batch_expire[SYNC],
            changed_batch: false,
            new_batch: false,
            // as_init_queue: write_batch_expire in jiffies / 10, at least 2.
            write_batch_count: (TUNABLES[3].default / 10).max(2),
            current_write_count: 0,
            write_batch_idled: false,
            nr_dispatched: 0,
            antic: Antic::Off,
            antic_start: 0,
            antic_flow: None,
            ioc_finished: false,
            fifo_expire: [
                from_millis(TUNABLES[0].default),
                from_millis(TUNABLES[1].default),
            ],
            batch_expire,
            antic_expire: from_millis(TUNABLES[4].default),
            priorities: TUNABLES[5].default == 1,
            level_tokens: TUNABLES[6].default,
            prio_aging_expire: from_millis(TUNABLES[7].default),
        };
        policy.refill_all();
        policy
    }

    fn refill_all(&mut self) {
        for level in 0..LEVELS {
            self.levels[level].tokens = self.level_tokens * weight_of(level);
        }
    }

    /// The level a request belongs to.
    fn level_of(&self, request: &Request) -> usize {
        if !self.priorities {
            return FLAT_LEVEL;
        }
        let level = usize::from(request.prio.effective_level());
        match request.prio.effective_class() {
            IoPrioClass::Rt => level,
            IoPrioClass::Be | IoPrioClass::None => 8 + level,
            IoPrioClass::Idle => 16,
        }
    }

    fn busy(&self, level: usize) -> bool {
        self.levels[level].queued() > 0
    }

    /// Whether a request at `level` outranks a batch at `current`: a higher class, or the same
    /// class with tokens left.
    fn outranks(&self, level: usize, current: usize) -> bool {
        level < current && (class_of(level) < class_of(current) || self.levels[level].tokens > 0)
    }

    /// The highest level whose wait has lasted `prio_aging_expire`, while something of higher
    /// priority is also waiting (otherwise it is simply next).
    fn aged_level(&self, now: Nanos) -> Option<usize> {
        if !self.priorities {
            return None;
        }
        let top = (0..LEVELS).find(|&l| self.busy(l))?;
        (top + 1..LEVELS).find(|&l| {
            self.busy(l)
                && self.levels[l]
                    .waiting_since
                    .is_some_and(|since| now.saturating_sub(since) >= self.prio_aging_expire)
        })
    }

    /// The level a new batch serves, and whether it is an aged batch.
    fn choose_level(&mut self, now: Nanos) -> Option<(usize, bool)> {
        if let Some(level) = self.aged_level(now) {
            self.levels[level].tokens = self.level_tokens * weight_of(level);
            return Some((level, true));
        }
        let top = (0..LEVELS).find(|&l| self.busy(l))?;
        let class = class_of(top);
        let in_class = (top..LEVELS).filter(|&l| class_of(l) == class);
        if let Some(level) = in_class
            .clone()
            .find(|&l| self.busy(l) && self.levels[l].tokens > 0)
        {
            return Some((level, false));
        }
        // Every waiting level of the class spent its tokens: a new round.
        for level in in_class {
            self.levels[level].tokens = self.level_tokens * weight_of(level);
        }
        Some((top, false))
    }

    /// Whether the batch in progress must give way now (before its own end conditions).
    fn batch_interrupted(&mut self, now: Nanos) -> bool {
        let current = self.batch_level;
        if self.batch_aged {
            return self.levels[current].tokens == 0;
        }
        if self.aged_level(now).is_some_and(|l| l != current) {
            return true;
        }
        if (0..current).any(|l| self.busy(l) && self.outranks(l, current)) {
            return true;
        }
        if self.levels[current].tokens == 0 {
            let class = class_of(current);
            if (0..LEVELS).any(|l| l != current && class_of(l) == class && self.busy(l)) {
                return true;
            }
            // No other level of the class waits: tokens limit nothing (classes are strict).
            self.levels[current].tokens = self.level_tokens * weight_of(current);
        }
        false
    }

    /// `as_batch_expired`.
    fn batch_expired(&self, now: Nanos) -> bool {
        if self.changed_batch || self.new_batch {
            return false;
        }
        if self.batch_dir == SYNC {
            return now > self.current_batch_expires;
        }
        now > self.current_batch_expires || self.current_write_count == 0
    }

    /// `as_fifo_expired`, for one level: at most one check per expiry interval.
    fn fifo_expired(&mut self, level: usize, dir: usize, now: Nanos) -> bool {
        let expire = self.fifo_expire[dir];
        let current = &mut self.levels[level];
        if now.saturating_sub(current.last_check_fifo[dir]) < expire {
            return false;
        }
        current.last_check_fifo[dir] = now;
        current.fifo[dir]
            .keys()
            .next()
            .is_some_and(|&(expires, _)| now > expires)
    }

    fn antic_expired(&self, now: Nanos) -> bool {
        now.saturating_sub(self.antic_start) >= self.antic_expire
    }

    /// `as_close_req`: whether `request` lies near the head, or nearer than the anticipated
    /// flow usually seeks.
    fn close_request(&self, stats: &FlowStats, request: &Request, now: Nanos) -> bool {
        let delay_ms = if self.antic == Antic::Off || !self.ioc_finished {
            0
        } else {
            now.saturating_sub(self.antic_start) / MILLISECOND
        };
        let delta = if delay_ms == 0 {
            8192 * SECTOR
        } else if delay_ms <= 20 && delay_ms * MILLISECOND <= self.antic_expire {
            (8192 * SECTOR) << delay_ms
        } else {
            return true;
        };
        let last = self.last_pos[self.batch_dir];
        let next = request.offset;
        if last <= next + delta / 2 && next <= last + delta {
            return true;
        }
        let distance = last.abs_diff(next);
        let mean = if stats.seek_samples == 0 {
            self.new_seek_mean
        } else {
            stats.seek_mean
        };
        mean > distance
    }

    /// `as_can_break_anticipation`: whether `request` (or, with none, the anticipated flow's
    /// own state) makes waiting pointless.
    fn can_break_anticipation(&mut self, request: Option<&Request>, now: Nanos) -> bool {
        let Some((flow, level)) = self.antic_flow else {
            return true;
        };
        if let Some(request) = request {
            if request.flow == flow {
                return true;
            }
            if self.priorities && self.outranks(self.level_of(request), level) {
                // Seed 000: a higher-priority request breaks any anticipation.
                return true;
            }
        }
        if self.ioc_finished && self.antic_expired(now) {
            return true;
        }
        let Some(stats) = self.flows.get(&flow) else {
            return true;
        };
        if stats.nr_queued > 0 {
            return true;
        }
        if let Some(request) = request {
            // Seed 000: requests of lower levels wait however close they are.
            let same_level = !self.priorities || self.level_of(request) == level;
            if request.sync && same_level && self.close_request(stats, request, now) {
                // A cooperating process working nearby: its request counts as ours.
                self.update_history(flow, request, now);
                return true;
            }
        }
        let stats = &self.flows[&flow];
        if stats.ttime_samples == 0 {
            self.new_ttime_mean > self.antic_expire
        } else {
            stats.ttime_mean > self.antic_expire
        }
    }

    /// `as_can_anticipate`: whether to keep the disk idle rather than dispatch `request`.
    fn can_anticipate(&mut self, request: Option<&Request>, now: Nanos) -> bool {
        if self.antic_flow.is_none() || self.antic == Antic::Finished {
            return false;
        }
        !self.can_break_anticipation(request, now)
    }

    /// `as_update_iohist` for a sync request of `flow`: think time and seek distance.
    fn update_history(&mut self, flow: FlowId, request: &Request, now: Nanos) {
        let Some(stats) = self.flows.get_mut(&flow) else {
            return;
        };
        if stats.io_running || stats.io_started {
            let thinktime = if stats.io_running && stats.nr_queued == 0 {
                now.saturating_sub(stats.last_end_request)
                    .min(MAX_THINKTIME - 1)
            } else {
                0
            };
            if stats.ttime_samples == 0 {
                self.new_ttime_total = (7 * self.new_ttime_total + 256 * thinktime) / 8;
                self.new_ttime_mean = self.new_ttime_total / 256;
            }
            stats.ttime_samples = (7 * stats.ttime_samples + 256) / 8;
            stats.ttime_total = (7 * stats.ttime_total + 256 * thinktime) / 8;
            stats.ttime_mean = (stats.ttime_total + 128) / stats.ttime_samples;

            let mut distance = request.offset.abs_diff(stats.last_request_pos);
            if stats.seek_samples == 0 {
                self.new_seek_total = (7 * self.new_seek_total + 256 * distance) / 8;
                self.new_seek_mean = self.new_seek_total / 256;
            }
            // The odd far fragment should not dominate the mean.
            let slack = if stats.seek_samples <= 60 {
                2 * 1024 * 1024 * SECTOR
            } else {
                2 * 1024 * 64 * SECTOR
            };
            distance = distance.min(stats.seek_mean.saturating_mul(4).saturating_add(slack));
            stats.seek_samples = (7 * stats.seek_samples + 256) / 8;
            stats.seek_total = (7 * stats.seek_total + 256 * distance) / 8;
            stats.seek_mean = (stats.seek_total + stats.seek_samples / 2) / stats.seek_samples;
        }
        stats.last_request_pos = request.end();
        stats.io_started = true;
    }

    /// Stops anticipating (`as_antic_stop`).
    fn antic_stop(&mut self) {
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) {
            self.antic = Antic::Finished;
        }
    }

    /// `as_antic_waitreq`: start anticipating; the clock starts when the request completes.
    fn antic_waitreq(&mut self) {
        if self.antic == Antic::Off {
            self.antic = if self.ioc_finished {
                Antic::WaitNext
            } else {
                Antic::WaitReq
            };
        }
    }

    fn wait_decision(&self) -> Dispatch {
        match self.antic {
            Antic::WaitNext => Dispatch::WaitUntil(self.antic_start + self.antic_expire),
            _ => Dispatch::Empty,
        }
    }

    /// `update_write_batch`: grow or shrink the write count toward `write_batch_expire`.
    fn update_write_batch(&mut self, now: Nanos) {
        let batch = self.batch_expire[ASYNC];
        let write_time = (now + batch).saturating_sub(self.current_batch_expires);
        if write_time > batch && !self.write_batch_idled {
            if write_time > batch * 3 {
                self.write_batch_count /= 2;
            } else {
                self.write_batch_count = self.write_batch_count.saturating_sub(1);
            }
        } else if write_time < batch && self.current_write_count == 0 {
            if batch > write_time * 3 {
                self.write_batch_count *= 2;
            } else {
                self.write_batch_count += 1;
            }
        }
        self.write_batch_count = self.write_batch_count.clamp(1, 1 << 20);
    }

    /// Takes `key` of (`level`, `dir`) off the queues and accounts for it going to the device
    /// (`as_move_to_dispatch`).
    fn move_to_dispatch(&mut self, level: usize, dir: usize, key: SortKey, now: Nanos) -> Request {
        self.antic_stop();
        self.antic = Antic::Off;
        let entry = self.levels[level].remove(dir, key);
        let request = entry.request;
        self.queued -= 1;
        self.nr_dispatched += 1;
        self.last_pos[dir] = request.end();
        if dir == SYNC {
            self.antic_flow = Some((request.flow, level));
        } else {
            self.antic_flow = None;
            self.current_write_count = self.current_write_count.saturating_sub(1);
        }
        self.ioc_finished = false;
        if let Some(stats) = self.flows.get_mut(&request.flow) {
            stats.nr_queued = stats
                .nr_queued
                .saturating_sub(request.request_count() as u32);
        }
        let current = &mut self.levels[level];
        current.tokens = current.tokens.saturating_sub(1);
        current.waiting_since = if current.queued() > 0 {
            Some(now)
        } else {
            None
        };
        request
    }

    /// Starts a new batch: picks the level, then the direction within it
    /// (the tail of `as_dispatch_request`).
    fn start_batch(&mut self, now: Nanos) -> Option<(usize, usize, SortKey)> {
        let (level, aged) = self.choose_level(now)?;
        let current = &self.levels[level];
        let reads = !current.sort[SYNC].is_empty();
        let writes = !current.sort[ASYNC].is_empty();
        let same_level = level == self.batch_level;
        let previous_dir = if same_level {
            self.batch_dir
        } else {
            current.last_dir
        };
        let (dir, key) = if reads && !(writes && previous_dir == SYNC) {
            // A sync batch starts at the oldest request.
            let key = current.fifo_head(SYNC).expect("reads are queued");
            if self.batch_dir == ASYNC {
                self.changed_batch = true;
            }
            self.levels[level].last_check_fifo[SYNC] = now;
            (SYNC, key)
        } else {
            if self.batch_dir == SYNC {
                self.changed_batch = true;
                self.new_batch = false;
            }
            self.current_write_count = self.write_batch_count;
            self.write_batch_idled = false;
            let key = current
                .next_request(ASYNC, self.last_pos[ASYNC])
                .expect("writes are queued");
            (ASYNC, key)
        };
        if !self.changed_batch && (level != self.batch_level || dir != self.batch_dir) {
            // A new level in the same direction: its batch clock starts now.
            self.current_batch_expires = now + self.batch_expire[dir];
        }
        self.batch_level = level;
        self.batch_dir = dir;
        self.batch_aged = aged;
        self.levels[level].last_dir = dir;
        Some((level, dir, key))
    }
}

impl Policy for Anticipatory {
    fn name(&self) -> &'static str {
        "anticipatory"
    }

    fn try_merge(
        &mut self,
        request: Request,
        limits: MergeLimits,
        _now: Nanos,
    ) -> Result<(), Request> {
        let level = self.level_of(&request);
        let dir = dir_of(&request);
        let current = &mut self.levels[level];
        let below = current.sort[dir]
            .range(..(request.offset, RequestId(0)))
            .next_back()
            .filter(|(_, e)| {
                e.request.end() == request.offset && mergeable(&e.request, &request, limits)
            })
            .map(|(k, _)| *k);
        let flow = if let Some(key) = below {
            let entry = current.sort[dir].get_mut(&key).expect("found above");
            merge_back(&mut entry.request, request);
            entry.request.flow
        } else {
            let above = current.sort[dir]
                .range((request.end(), RequestId(0))..)
                .next()
                .filter(|(k, e)| k.0 == request.end() && mergeable(&e.request, &request, limits))
                .map(|(k, _)| *k);
            let Some(key) = above else {
                return Err(request);
            };
            // The start moves, so the request moves in the sort list.
            let mut entry = current.remove(dir, key);
            merge_front(&mut entry.request, request);
            let flow = entry.request.flow;
            current.add(dir, entry);
            flow
        };
        // The merged request now leaves with the survivor: count it with the survivor's flow.
        if let Some(stats) = self.flows.get_mut(&flow) {
            stats.nr_queued += 1;
        }
        Ok(())
    }

    fn insert(&mut self, request: Request, now: Nanos) {
        let level = self.level_of(&request);
        let dir = dir_of(&request);
        if self.flows.len() >= MAX_FLOWS && !self.flows.contains_key(&request.flow) {
            let anticipated = self.antic_flow.map(|(flow, _)| flow);
            self.flows
                .retain(|flow, stats| stats.nr_queued > 0 || Some(*flow) == anticipated);
        }
        self.flows.entry(request.flow).or_default();
        if request.sync {
            self.update_history(request.flow, &request, now);
        }
        let stats = self.flows.get_mut(&request.flow).expect("just added");
        stats.nr_queued += request.request_count() as u32;
        let breaks = matches!(self.antic, Antic::WaitReq | Antic::WaitNext)
            && self.can_break_anticipation(Some(&request), now);
        let expires = now.saturating_add(self.fifo_expire[dir]);
        let current = &mut self.levels[level];
        current.waiting_since.get_or_insert(now);
        current.add(dir, Entry { request, expires });
        self.queued += 1;
        if breaks {
            self.antic_stop();
        }
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        if let Some(request) = self.requeued.pop_front() {
            // Counted as queued until it leaves again (found by fuzzing, as in deadline).
            self.queued -= 1;
            self.nr_dispatched += 1;
            return Dispatch::Request(request);
        }
        let level = self.batch_level;
        let current = &self.levels[level];
        let reads = !current.sort[SYNC].is_empty();
        let writes = !current.sort[ASYNC].is_empty();
        if self.batch_dir == ASYNC && !reads && (self.current_write_count == 0 || !writes) {
            // The write batch was uncontended: do not time it.
            self.write_batch_idled = true;
        }
        if self.queued == 0 {
            return Dispatch::Empty;
        }
        if self.antic == Antic::WaitNext && self.antic_expired(now) {
            // as_antic_timeout.
            self.antic = Antic::Finished;
        }
        // A level kept waiting too long, or a higher level that arrived, ends anticipation.
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) {
            let interrupted = self.aged_level(now).is_some()
                || (0..level).any(|l| self.busy(l) && self.outranks(l, level));
            if !interrupted {
                return self.wait_decision();
            }
            self.antic_stop();
        }
        if self.changed_batch {
            if self.nr_dispatched > 0 {
                return Dispatch::Empty;
            }
            if self.batch_dir == ASYNC {
                self.current_batch_expires = now + self.batch_expire[ASYNC];
            } else {
                self.new_batch = true;
            }
            self.changed_batch = false;
        }

        let batch_over =
            self.batch_interrupted(now) || (reads && writes && self.batch_expired(now));
        if !batch_over {
            // The batch continues.
            let dir = self.batch_dir;
            let mut next = self.levels[level].next_request(dir, self.last_pos[dir]);
            if dir == SYNC && self.antic_expire > 0 {
                if self.fifo_expired(level, SYNC, now) {
                    next = self.levels[level].fifo_head(SYNC);
                } else {
                    let candidate =
                        next.map(|key| self.levels[level].sort[SYNC][&key].request.clone());
                    if self.can_anticipate(candidate.as_ref(), now) {
                        self.antic_waitreq();
                        return self.wait_decision();
                    }
                }
            } else if next.is_some() && self.fifo_expired(level, dir, now) {
                next = self.levels[level].fifo_head(dir);
            }
            if let Some(key) = next {
                if reads && !writes && dir == SYNC {
                    self.current_batch_expires = now + self.batch_expire[SYNC];
                }
                return Dispatch::Request(self.move_to_dispatch(level, dir, key, now));
            }
        }
        let Some((level, dir, mut key)) = self.start_batch(now) else {
            return Dispatch::Empty;
        };
        if self.fifo_expired(level, dir, now) {
            key = self.levels[level]
                .fifo_head(dir)
                .expect("the level has requests");
        }
        if self.changed_batch {
            if self.nr_dispatched > 0 {
                return Dispatch::Empty;
            }
            if dir == ASYNC {
                self.current_batch_expires = now + self.batch_expire[ASYNC];
            } else {
                self.new_batch = true;
            }
            self.changed_batch = false;
        }
        Dispatch::Request(self.move_to_dispatch(level, dir, key, now))
    }

    fn completed(&mut self, request: &Request, now: Nanos) {
        assert!(
            self.nr_dispatched > 0,
            "completion of a request this policy did not dispatch"
        );
        let dir = dir_of(request);
        if self.changed_batch && self.nr_dispatched == 1 {
            // The old batch has drained: the new one's clock starts (as later 2.6 kernels
            // do; without it a write batch would count as expired before its first write).
            self.current_batch_expires = now + self.batch_expire[self.batch_dir];
            self.changed_batch = false;
            if self.batch_dir == SYNC {
                self.new_batch = true;
            }
        }
        self.nr_dispatched -= 1;
        // A batch's clock starts when its first request is served, which helps devices
        // that queue and cache writes.
        if self.new_batch && self.batch_dir == dir {
            self.update_write_batch(now);
            self.current_batch_expires = now + self.batch_expire[SYNC];
            self.new_batch = false;
        }
        if self
            .antic_flow
            .is_some_and(|(flow, _)| flow == request.flow)
        {
            self.antic_start = now;
            self.ioc_finished = true;
            if self.antic == Antic::WaitReq {
                self.antic = Antic::WaitNext;
            }
        }
        if request.sync {
            if let Some(stats) = self.flows.get_mut(&request.flow) {
                stats.io_running = true;
                stats.last_end_request = now;
            }
        }
    }

    fn requeue(&mut self, request: Request, _now: Nanos) {
        self.nr_dispatched = self.nr_dispatched.saturating_sub(1);
        self.queued += 1;
        self.requeued.push_back(request);
    }

    fn queued(&self) -> usize {
        debug_assert_eq!(
            self.queued,
            self.requeued.len() + self.levels.iter().map(Level::queued).sum::<usize>()
        );
        self.queued
    }

    fn drain(&mut self, out: &mut Vec<Request>) {
        out.extend(self.requeued.drain(..));
        let mut entries: Vec<Entry> = Vec::with_capacity(self.queued);
        for level in &mut self.levels {
            for dir in 0..2 {
                level.fifo[dir].clear();
                entries.extend(std::mem::take(&mut level.sort[dir]).into_values());
            }
            level.waiting_since = None;
        }
        entries.sort_by_key(|e| (e.request.arrival, e.request.id));
        out.extend(entries.into_iter().map(|e| e.request));
        for stats in self.flows.values_mut() {
            stats.nr_queued = 0;
        }
        self.queued = 0;
        self.antic = Antic::Off;
    }

    fn tunables(&self) -> &'static [TunableSpec] {
        TUNABLES
    }

    fn tunable(&self, name: &str) -> Result<u64, TunableError> {
        Ok(match name {
            "read_expire" => self.fifo_expire[SYNC] / MILLISECOND,
            "write_expire" => self.fifo_expire[ASYNC] / MILLISECOND,
            "read_batch_expire" => self.batch_expire[SYNC] / MILLISECOND,
            "write_batch_expire" => self.batch_expire[ASYNC] / MILLISECOND,
            "antic_expire" => self.antic_expire / MILLISECOND,
            "priorities" => u64::from(self.priorities),
            "level_tokens" => self.level_tokens,
            "prio_aging_expire" => self.prio_aging_expire / MILLISECOND,
            _ => return Err(crate::tunable::unknown(name, TUNABLES)),
        })
    }

    fn set_tunable(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        let spec = crate::tunable::find(TUNABLES, name)?;
        let value = spec.check(value)?;
        match name {
            "read_expire" => self.fifo_expire[SYNC] = from_millis(value),
            "write_expire" => self.fifo_expire[ASYNC] = from_millis(value),
            "read_batch_expire" => self.batch_expire[SYNC] = from_millis(value),
            "write_batch_expire" => self.batch_expire[ASYNC] = from_millis(value),
            "antic_expire" => self.antic_expire = from_millis(value),
            "priorities" => {
                if self.queued > 0 || self.nr_dispatched > 0 {
                    return Err(TunableError::BadValue {
                        name: spec.name,
                        value: value.to_string(),
                        reason: "requests are queued or in flight; set it before the run".into(),
                    });
                }
                self.priorities = value == 1;
            }
            "level_tokens" => {
                self.level_tokens = value;
                self.refill_all();
            }
            "prio_aging_expire" => self.prio_aging_expire = from_millis(value),
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
    use crate::Op;

    const MS: Nanos = MILLISECOND;

    fn read(id: u64, flow: u32, offset: u64, prio: IoPrio) -> Request {
        let mut r = request(id, Op::Read, offset, 4096);
        r.flow = FlowId(flow);
        r.prio = prio;
        r
    }

    fn be(level: u8) -> IoPrio {
        IoPrio::new(IoPrioClass::Be, level).unwrap()
    }

    fn idle() -> IoPrio {
        IoPrio::new(IoPrioClass::Idle, 0).unwrap()
    }

    fn take(policy: &mut Anticipatory, now: Nanos) -> Request {
        match policy.dispatch(now) {
            Dispatch::Request(request) => request,
            other => panic!("expected a request at {now}, got {other:?}"),
        }
    }

    /// Serves `request` as a device would: dispatched at `now`, done 5 ms later.
    fn serve(policy: &mut Anticipatory, request: &Request, now: Nanos) -> Nanos {
        policy.completed(request, now + 5 * MS);
        now + 5 * MS
    }

    // Proves the one-way elevator with BACK_PENALTY: a request behind the head is taken only
    // when it is less than half as far as the one in front.
    #[test]
    fn backward_seeks_cost_double() {
        let mut level = Level::default();
        let head = 1 << 30;
        for (id, offset) in [(1, head + 100_000), (2, head - 40_000)] {
            level.add(
                SYNC,
                Entry {
                    request: request(id, Op::Read, offset, 4096),
                    expires: 0,
                },
            );
        }
        assert_eq!(level.next_request(SYNC, head).unwrap().1, RequestId(2));
        level.remove(SYNC, (head - 40_000, RequestId(2)));
        level.add(
            SYNC,
            Entry {
                request: request(3, Op::Read, head - 60_000, 4096),
                expires: 0,
            },
        );
        assert_eq!(level.next_request(SYNC, head).unwrap().1, RequestId(1));
        // Everything behind and beyond MAXBACK: the elevator wraps to the lowest offset.
        let mut far = Level::default();
        for (id, offset) in [(4, 10 << 20), (5, 5 << 20)] {
            far.add(
                SYNC,
                Entry {
                    request: request(id, Op::Read, offset, 4096),
                    expires: 0,
                },
            );
        }
        assert_eq!(far.next_request(SYNC, 4 << 30).unwrap().1, RequestId(5));
    }

    // Proves deceptive idleness is avoided: after flow 1's read completes, the disk waits up
    // to antic_expire for flow 1's next read instead of seeking to flow 2's.
    #[test]
    fn anticipates_the_next_read_of_the_same_process() {
        let mut policy = Anticipatory::new();
        policy.set_tunable("priorities", 0).unwrap();
        policy.insert(read(1, 1, 0, be(4)), 0);
        let first = take(&mut policy, 0);
        let done = serve(&mut policy, &first, 0);
        policy.insert(read(2, 2, 100 << 30, be(4)), done);
        assert_eq!(policy.dispatch(done), Dispatch::WaitUntil(done + 6 * MS));
        policy.insert(read(3, 1, 4096, be(4)), done + MS);
        assert_eq!(take(&mut policy, done + MS).id, RequestId(3));

        // Without anticipation the other process's read goes at once.
        let mut policy = Anticipatory::new();
        policy.set_tunable("antic_expire", 0).unwrap();
        policy.insert(read(1, 1, 0, be(4)), 0);
        let first = take(&mut policy, 0);
        let done = serve(&mut policy, &first, 0);
        policy.insert(read(2, 2, 100 << 30, be(4)), done);
        assert_eq!(take(&mut policy, done).id, RequestId(2));
    }

    // Proves anticipation ends after antic_expire, and that a process whose think time
    // exceeds antic_expire is not waited for at all.
    #[test]
    fn anticipation_times_out_and_respects_think_time() {
        let mut policy = Anticipatory::new();
        policy.insert(read(1, 1, 0, be(4)), 0);
        let first = take(&mut policy, 0);
        let done = serve(&mut policy, &first, 0);
        policy.insert(read(2, 2, 100 << 30, be(4)), done);
        assert_eq!(policy.dispatch(done), Dispatch::WaitUntil(done + 6 * MS));
        assert_eq!(take(&mut policy, done + 6 * MS).id, RequestId(2));

        // Flow 1 thinks 15 ms between reads: after a few samples it is no longer waited for.
        let mut policy = Anticipatory::new();
        let mut now = 0;
        for id in 1..=8 {
            policy.insert(read(id, 1, id * 4096, be(4)), now);
            let r = take(&mut policy, now);
            now = serve(&mut policy, &r, now) + 15 * MS;
        }
        let done = now - 15 * MS;
        policy.insert(read(100, 2, 100 << 30, be(4)), done);
        assert_eq!(take(&mut policy, done).id, RequestId(100));
    }

    // Proves seed 000's rule: a lower-priority request waits during anticipation on a
    // higher-priority process, however close it is to the head; at equal priority the same
    // close request breaks the anticipation.
    #[test]
    fn lower_priority_waits_for_the_anticipated_process() {
        for (bg, waits) in [(idle(), true), (be(4), false)] {
            let mut policy = Anticipatory::new();
            policy.insert(read(1, 1, 1 << 30, be(4)), 0);
            let first = take(&mut policy, 0);
            let done = serve(&mut policy, &first, 0);
            // Right next to where the head stopped.
            policy.insert(read(2, 2, (1 << 30) + 4096, bg), done);
            match policy.dispatch(done) {
                Dispatch::WaitUntil(t) => {
                    assert!(waits, "equal priority close request must not wait");
                    assert_eq!(t, done + 6 * MS);
                }
                Dispatch::Request(r) => {
                    assert!(!waits, "idle-class request went during anticipation");
                    assert_eq!(r.id, RequestId(2));
                }
                Dispatch::Empty => panic!("unexpected Empty"),
            }
        }
    }

    // Proves a higher-priority arrival interrupts a lower-priority batch at the next dispatch.
    #[test]
    fn higher_priority_interrupts_a_batch() {
        let mut policy = Anticipatory::new();
        policy.set_tunable("antic_expire", 0).unwrap();
        for id in 1..=10 {
            policy.insert(read(id, id as u32, id * (1 << 20), idle()), 0);
        }
        let mut now = 0;
        let r = take(&mut policy, now);
        assert_eq!(policy.level_of(&r), 16);
        now = serve(&mut policy, &r, now);
        policy.insert(read(50, 50, 900 << 30, be(0)), now);
        assert_eq!(take(&mut policy, now).id, RequestId(50));
    }

    // Proves tokens share a class by level: two backlogged BE levels get
    // level_tokens x (8 - level) requests per round, 32 : 4 with the defaults.
    #[test]
    fn tokens_share_a_class_by_level() {
        let mut policy = Anticipatory::new();
        policy.set_tunable("antic_expire", 0).unwrap();
        let mut next_id = 0;
        let mut counts = [0u32; 2];
        let mut now = 0;
        for (index, prio) in [be(0), be(7)].into_iter().enumerate() {
            for _ in 0..40 {
                next_id += 1;
                let mut w = request(next_id, Op::Write, next_id * (1 << 20), 4096);
                w.flow = FlowId(index as u32);
                w.prio = prio;
                policy.insert(w, now);
            }
        }
        for _ in 0..360 {
            let r = take(&mut policy, now);
            let index = r.flow.0 as usize;
            counts[index] += 1;
            now = serve(&mut policy, &r, now);
            // Keep both levels backlogged.
            next_id += 1;
            let mut w = request(next_id, Op::Write, next_id * (1 << 20), 4096);
            w.flow = r.flow;
            w.prio = r.prio;
            policy.insert(w, now);
        }
        assert_eq!(counts, [320, 40], "8:1 by tokens");
    }

    // Proves the starvation bound: under a BE load that never pauses, an IDLE request is
    // served once its level has waited prio_aging_expire.
    #[test]
    fn aging_bounds_starvation() {
        let mut policy = Anticipatory::new();
        policy.set_tunable("prio_aging_expire", 1000).unwrap();
        policy.insert(read(1, 99, 0, idle()), 0);
        let mut now = 0;
        let mut id = 1;
        let served_at = loop {
            id += 1;
            policy.insert(read(id, 1, id * (1 << 20), be(0)), now);
            let r = take(&mut policy, now);
            now = serve(&mut policy, &r, now);
            if r.flow == FlowId(99) {
                break now;
            }
            assert!(now < 2000 * MS, "idle request starved past the bound");
        };
        assert!(
            served_at >= 1000 * MS,
            "served before its level aged: {served_at}"
        );
    }

    // Proves merges stay within one priority level.
    #[test]
    fn merges_only_within_a_level() {
        let mut policy = Anticipatory::new();
        let limits = MergeLimits {
            max_request_bytes: 1 << 20,
        };
        policy.insert(read(1, 1, 0, be(0)), 0);
        assert!(policy
            .try_merge(read(2, 1, 4096, idle()), limits, 0)
            .is_err());
        assert!(policy.try_merge(read(3, 1, 4096, be(0)), limits, 0).is_ok());
        let r = take(&mut policy, 0);
        assert_eq!(r.len, 8192);
        assert_eq!(r.merged, vec![RequestId(3)]);
    }

    // Proves reads and writes alternate in batches and a write batch waits for the reads of
    // the previous batch to complete.
    #[test]
    fn direction_change_waits_for_the_batch_to_drain() {
        let mut policy = Anticipatory::new();
        policy.set_tunable("antic_expire", 0).unwrap();
        let mut w = request(1, Op::Write, 50 << 20, 4096);
        w.sync = false;
        policy.insert(w, 0);
        policy.insert(read(2, 2, 0, be(4)), 0);
        policy.insert(read(3, 2, 1 << 20, be(4)), 0);
        let first = take(&mut policy, 0);
        assert_eq!(first.id, RequestId(2), "reads first");
        // Past read_batch_expire (500 ms) with writes waiting, the write batch starts, but
        // only once the read in flight completes.
        let late = 600 * MS;
        assert_eq!(policy.dispatch(late), Dispatch::Empty);
        policy.completed(&first, late + MS);
        assert_eq!(take(&mut policy, late + MS).id, RequestId(1));
    }
}

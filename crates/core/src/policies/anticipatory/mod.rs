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

mod antic;
mod batch;
mod level;
#[cfg(test)]
mod tests;

use super::PolicyInfo;
use crate::ioprio::IoPrioClass;
use crate::policy::{Dispatch, Policy};
use crate::request::{merge_back, merge_front, mergeable, FlowId, MergeLimits, Request, RequestId};
use crate::time::{from_millis, Nanos, MILLISECOND};
use crate::tunable::{TunableError, TunableSpec, Unit};
use antic::{Antic, FlowStats};
use super::sorted::{SortKey, Sorted, SortedRequests};
use level::Level;
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;

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

/// This module's entries in the policy catalog (`iosched policies`).
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "anticipatory",
        aliases: &["as"],
        summary: "one-way elevator, read/write batches and anticipation after sync reads, with seed 000's per-level priorities (Linux's historic AS)",
        tunables: TUNABLES,
        build: || Box::new(Anticipatory::new()),
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
            flows: HashMap::default(),
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
}

impl Policy for Anticipatory {
    /// A single-queue scheduler: BLKDEV_MAX_RQ requests (block/blk-core.c, 2.6 to 4.x).
    fn default_nr_requests(&self) -> Option<u32> {
        Some(crate::elevator::LEGACY_NR_REQUESTS)
    }

    fn name(&self) -> &'static str {
        "anticipatory"
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
        self.insert_request(request, now, now)
    }

    fn adopt(&mut self, request: Request, now: Nanos) {
        let since = request.arrival.min(now);
        self.insert_request(request, now, since)
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.dispatch_next(now)
    }

    fn completed(&mut self, request: &Request, now: Nanos) {
        self.request_completed(request, now)
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

impl Anticipatory {
    /// A tunable's value, in its sysfs unit.
    pub(super) fn tunable_value(&self, name: &str) -> Result<u64, TunableError> {
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

    /// Sets a tunable, in its sysfs unit.
    pub(super) fn set_tunable_value(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
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

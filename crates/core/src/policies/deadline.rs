//! `deadline`: Linux's mq-deadline (block/mq-deadline.c), priority levels included.
//!
//! Each priority level (RT, BE, IDLE; "none" counts as BE) keeps, per data direction, a list
//! sorted by offset and a FIFO ordered by expiry time. Dispatch:
//!
//! 1. Requests the device handed back go out first.
//! 2. Aging: when two or more levels have requests pending, a BE or IDLE request that entered
//!    more than `prio_aging_expire` ago is served before anything else of higher level.
//! 3. Otherwise levels are strict: a level is served only if every higher level has nothing
//!    pending, *in flight included*, as `dd_queued` counts inserted minus completed.
//! 4. Within a level, requests go in batches of one direction, up to `fifo_batch`, each continuing
//!    upwards in offset from the last one dispatched. A new batch prefers reads, unless writes
//!    have been passed over `writes_starved` times. It starts at the FIFO head if that request
//!    has expired (`read_expire`, `write_expire`) or nothing lies above the last position, and
//!    otherwise continues in offset order.
//!
//! With `priorities` = 0 every request shares the BE level: the plain deadline scheduler of
//! Linux before 5.14, kept so the two can be compared.
//!
//! Expiry is soft, as in Linux: it is checked only when a batch starts. The bound this gives a
//! read is `read_expire` plus the batch in progress (and one write batch if writes were starved).

use super::PolicyInfo;
use crate::ioprio::IoPrioClass;
use super::sorted::{SortKey, Sorted, SortedRequests};
use crate::policy::{Dispatch, Policy};
use crate::request::{
    merge_back, merge_front, mergeable, Direction, MergeLimits, Request, RequestId,
};
use crate::time::{from_millis, Nanos, MILLISECOND};
use crate::tunable::{TunableError, TunableSpec, Unit};
use std::collections::VecDeque;

/// mq-deadline's tunables, named and defaulted as in Linux.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "read_expire",
        unit: Unit::Milliseconds,
        default: 500,
        min: 0,
        max: 3_600_000,
        doc: "a read older than this starts the next batch (HZ/2)",
    },
    TunableSpec {
        name: "write_expire",
        unit: Unit::Milliseconds,
        default: 5000,
        min: 0,
        max: 3_600_000,
        doc: "a write older than this starts the next write batch (5*HZ)",
    },
    TunableSpec {
        name: "writes_starved",
        unit: Unit::Count,
        default: 2,
        min: 0,
        max: 1_000_000,
        doc: "read batches that may pass over pending writes before a write batch is forced",
    },
    TunableSpec {
        name: "front_merges",
        unit: Unit::Flag,
        default: 1,
        min: 0,
        max: 1,
        doc: "whether a request ending where a queued one starts is merged in front of it",
    },
    TunableSpec {
        name: "fifo_batch",
        unit: Unit::Requests,
        default: 16,
        min: 1,
        max: 1_000_000,
        doc: "requests dispatched in one sorted batch before FIFO expiry is checked again",
    },
    TunableSpec {
        name: "prio_aging_expire",
        unit: Unit::Milliseconds,
        default: 10_000,
        min: 0,
        max: 3_600_000,
        doc: "a BE or IDLE request waiting longer than this is served ahead of higher levels",
    },
    TunableSpec {
        name: "priorities",
        unit: Unit::Flag,
        default: 1,
        min: 0,
        max: 1,
        doc:
            "1: RT/BE/IDLE levels served strictly (Linux since 5.14); 0: one level, plain deadline",
    },
    TunableSpec {
        name: "async_depth",
        unit: Unit::Requests,
        default: 0,
        min: 0,
        max: 65_536,
        doc: "most scheduler requests writes and async reads may hold (dd_limit_depth); 0: \
              nr_requests, mainline's default (dd_depth_updated), so no limit",
    },
];

/// This module's entries in the policy catalog (`iosched policies`).
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "deadline",
        aliases: &["mq-deadline"],
        summary: "sector-sorted batches with read/write FIFO expiry and RT/BE/IDLE levels (Linux's mq-deadline)",
        tunables: TUNABLES,
        build: || Box::new(Deadline::new()),
    },
];

const LEVELS: usize = 3;

fn level_of(request: &Request, priorities: bool) -> usize {
    if !priorities {
        return 1;
    }
    match request.prio.effective_class() {
        IoPrioClass::Rt => 0,
        IoPrioClass::Be | IoPrioClass::None => 1,
        IoPrioClass::Idle => 2,
    }
}

/// One priority level's queues (`struct dd_per_prio`).
#[derive(Debug, Default)]
struct Level {
    requests: SortedRequests,
    latest_pos: [u64; 2],
    /// Requests of this level inserted and not yet completed (queued or in flight).
    pending: u32,
}

impl Level {
    fn queued(&self) -> usize {
        self.requests.len()
    }

    /// The queued request with the lowest offset at or above `latest_pos` (`deadline_from_pos`).
    fn next_request(&self, dir: usize) -> Option<SortKey> {
        let position = self.latest_pos[dir];
        self.requests
            .range(dir, (position, RequestId(0))..)
            .next()
            .map(|(key, _)| key)
    }

    fn fifo_expired(&self, dir: usize, now: Nanos) -> bool {
        self.requests
            .fifo_head_time(dir)
            .is_some_and(|fifo_time| fifo_time <= now)
    }
}

/// The mq-deadline policy.
#[derive(Debug)]
pub struct Deadline {
    levels: [Level; LEVELS],
    /// Requests handed back by the device, served before anything else.
    requeued: VecDeque<Request>,
    batching: u64,
    starved: u64,
    last_dir: usize,
    queued: usize,
    /// `read_expire` and `write_expire`, indexed by direction.
    fifo_expire: [Nanos; 2],
    writes_starved: u64,
    front_merges: bool,
    fifo_batch: u64,
    prio_aging_expire: Nanos,
    priorities: bool,
    /// `async_depth`; 0 stands for nr_requests.
    async_depth: u64,
}

impl Default for Deadline {
    fn default() -> Self {
        Self::new()
    }
}

impl Deadline {
    /// A deadline policy with Linux's defaults.
    pub fn new() -> Self {
        Deadline {
            levels: Default::default(),
            requeued: VecDeque::new(),
            batching: 0,
            starved: 0,
            last_dir: Direction::Write as usize,
            queued: 0,
            fifo_expire: [
                from_millis(TUNABLES[0].default),
                from_millis(TUNABLES[1].default),
            ],
            writes_starved: TUNABLES[2].default,
            front_merges: TUNABLES[3].default == 1,
            fifo_batch: TUNABLES[4].default,
            prio_aging_expire: from_millis(TUNABLES[5].default),
            priorities: TUNABLES[6].default == 1,
            async_depth: TUNABLES[7].default,
        }
    }

    /// `__dd_dispatch_request`: the next request of `level` that entered no later than
    /// `latest_start`, following batching, direction choice and FIFO expiry.
    fn dispatch_level(&mut self, level: usize, now: Nanos, latest_start: Nanos) -> Option<Request> {
        let (dir, key) = 'choose: {
            let current = &self.levels[level];
            if let Some(key) = current.next_request(self.last_dir) {
                if self.batching < self.fifo_batch {
                    break 'choose (self.last_dir, key);
                }
            }
            let reads = !current.requests.is_empty(0);
            let writes = !current.requests.is_empty(1);
            let dir = if reads {
                let starve_writes = writes && {
                    let starved = self.starved;
                    self.starved += 1;
                    starved >= self.writes_starved
                };
                if starve_writes {
                    self.starved = 0;
                    1
                } else {
                    0
                }
            } else if writes {
                self.starved = 0;
                1
            } else {
                return None;
            };
            let next = current.next_request(dir);
            let key = match next {
                Some(key) if !current.fifo_expired(dir, now) => key,
                _ => current
                    .requests
                    .fifo_head(dir)
                    .expect("direction has queued requests"),
            };
            self.last_dir = dir;
            self.batching = 0;
            (dir, key)
        };
        let current = &mut self.levels[level];
        let fifo_time = current.requests.get(dir, &key).fifo_time;
        let started = fifo_time.saturating_sub(self.fifo_expire[dir]);
        if started > latest_start {
            return None;
        }
        self.batching += 1;
        let entry = current.requests.remove(dir, key);
        current.latest_pos[dir] = entry.request.offset;
        self.queued -= 1;
        Some(entry.request)
    }

    /// `dd_dispatch_prio_aged_requests`: lower levels that waited past `prio_aging_expire`.
    fn dispatch_aged(&mut self, now: Nanos) -> Option<Request> {
        let busy_levels = self.levels.iter().filter(|l| l.pending > 0).count();
        if busy_levels < 2 || now < self.prio_aging_expire {
            return None;
        }
        let latest_start = now - self.prio_aging_expire;
        (1..LEVELS).find_map(|level| self.dispatch_level(level, now, latest_start))
    }

    /// After `key` grew, folds an adjacent request of the same level and direction into it
    /// (`attempt_back_merge` / `attempt_front_merge`), the survivor taking the earlier expiry.
    fn merge_neighbour(&mut self, level: usize, dir: usize, key: SortKey, limits: MergeLimits) {
        let current = &mut self.levels[level];
        let requests = &current.requests;
        let grown = &requests.get(dir, &key).request;
        let after = requests.starting_at(dir, grown.end(), |next| mergeable(grown, next, limits));
        let before = requests.ending_at(dir, key, |previous| mergeable(previous, grown, limits));
        let (survivor_key, folded_key) = match (after, before) {
            (Some(after), _) => (key, after),
            (None, Some(before)) => (before, key),
            (None, None) => return,
        };
        let folded = current.requests.remove(dir, folded_key);
        let mut survivor = current.requests.remove(dir, survivor_key);
        survivor.fifo_time = survivor.fifo_time.min(folded.fifo_time);
        merge_back(&mut survivor.request, folded.request);
        current.requests.add(dir, survivor);
        current.pending -= 1;
        self.queued -= 1;
    }
}

impl Policy for Deadline {
    fn name(&self) -> &'static str {
        "deadline"
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

    fn adopt(&mut self, request: Request, now: Nanos) {
        let since = request.arrival.min(now);
        self.insert_request(request, since)
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.dispatch_next(now)
    }

    fn completed(&mut self, request: &Request, now: Nanos) {
        self.request_completed(request, now)
    }

    fn requeue(&mut self, request: Request, _now: Nanos) {
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

    /// `dd_limit_depth` (block/mq-deadline.c): synchronous reads are never throttled; writes
    /// and asynchronous reads may take at most `async_depth` of the scheduler's requests, so
    /// they cannot block the allocation of synchronous ones.
    fn may_allocate(&self, request: &Request, in_use: usize, nr_requests: u32) -> bool {
        if request.sync && request.direction() == Direction::Read {
            return true;
        }
        let depth = match self.async_depth {
            0 => u64::from(nr_requests),
            depth => depth.min(u64::from(nr_requests)),
        };
        (in_use as u64) < depth.max(1)
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

impl Deadline {
    /// Merges a request into a queued one it adjoins, within this policy's rules, or hands it
    /// back.
    pub(super) fn merge_request(
        &mut self,
        request: Request,
        limits: MergeLimits,
        _now: Nanos,
    ) -> Result<(), Request> {
        let level = level_of(&request, self.priorities);
        let dir = request.direction() as usize;
        let current = &mut self.levels[level];
        // Back merge: the queued request just below ends where this one starts.
        let below = current
            .requests
            .ending_at(dir, (request.offset, RequestId(0)), |queued| {
                mergeable(queued, &request, limits)
            });
        if let Some(key) = below {
            merge_back(&mut current.requests.get_mut(dir, &key).request, request);
            self.merge_neighbour(level, dir, key, limits);
            return Ok(());
        }
        if !self.front_merges {
            return Err(request);
        }
        // Front merge: a queued request starts where this one ends.
        let above = current
            .requests
            .starting_at(dir, request.end(), |queued| mergeable(queued, &request, limits));
        let Some(key) = above else {
            return Err(request);
        };
        // The start offset changes, so the request moves in the sort list (`dd_request_merged`).
        let mut entry = current.requests.remove(dir, key);
        merge_front(&mut entry.request, request);
        let new_key = (entry.request.offset, entry.request.id);
        current.requests.add(dir, entry);
        self.merge_neighbour(level, dir, new_key, limits);
        Ok(())
    }

    /// Queues a request, its FIFO deadline counted from `since` (now, or its arrival when
    /// adopted from another policy).
    pub(super) fn insert_request(&mut self, request: Request, since: Nanos) {
        let level = level_of(&request, self.priorities);
        let dir = request.direction() as usize;
        let fifo_time = since.saturating_add(self.fifo_expire[dir]);
        let current = &mut self.levels[level];
        current.requests.add(dir, Sorted { request, fifo_time });
        current.pending += 1;
        self.queued += 1;
    }

    /// The next request for the device, a time to wait until, or nothing.
    pub(super) fn dispatch_next(&mut self, now: Nanos) -> Dispatch {
        if let Some(request) = self.requeued.pop_front() {
            // A requeued request counts as queued until it leaves again (found by fuzzing: the
            // count stayed one high, so the queue never looked empty).
            self.queued -= 1;
            let level = level_of(&request, self.priorities);
            self.levels[level].latest_pos[request.direction() as usize] = request.offset;
            return Dispatch::Request(request);
        }
        if let Some(request) = self.dispatch_aged(now) {
            return Dispatch::Request(request);
        }
        for level in 0..LEVELS {
            if let Some(request) = self.dispatch_level(level, now, now) {
                return Dispatch::Request(request);
            }
            if self.levels[level].pending > 0 {
                break;
            }
        }
        Dispatch::Empty
    }

    /// A dispatched request completed.
    pub(super) fn request_completed(&mut self, request: &Request, _now: Nanos) {
        let level = &mut self.levels[level_of(request, self.priorities)];
        assert!(
            level.pending > 0,
            "completion of a request this policy did not insert"
        );
        level.pending -= 1;
    }

    /// Hands back every queued request (the elevator is switching).
    pub(super) fn drain_all(&mut self, out: &mut Vec<Request>) {
        out.extend(self.requeued.drain(..));
        for level in &mut self.levels {
            let mut entries: Vec<Sorted> = Vec::with_capacity(level.queued());
            level.requests.take_all(&mut entries);
            entries.sort_by_key(|e| (e.request.arrival, e.request.id));
            level.pending -= entries.len() as u32;
            out.extend(entries.into_iter().map(|e| e.request));
        }
        self.queued = 0;
    }

    /// A tunable's value, in its sysfs unit.
    pub(super) fn tunable_value(&self, name: &str) -> Result<u64, TunableError> {
        Ok(match name {
            "read_expire" => self.fifo_expire[0] / MILLISECOND,
            "write_expire" => self.fifo_expire[1] / MILLISECOND,
            "writes_starved" => self.writes_starved,
            "front_merges" => u64::from(self.front_merges),
            "fifo_batch" => self.fifo_batch,
            "prio_aging_expire" => self.prio_aging_expire / MILLISECOND,
            "priorities" => u64::from(self.priorities),
            "async_depth" => self.async_depth,
            _ => return Err(crate::tunable::unknown(name, TUNABLES)),
        })
    }

    /// Sets a tunable, in its sysfs unit.
    pub(super) fn set_tunable_value(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        let spec = crate::tunable::find(TUNABLES, name)?;
        let value = spec.check(value)?;
        match name {
            "read_expire" => self.fifo_expire[0] = from_millis(value),
            "write_expire" => self.fifo_expire[1] = from_millis(value),
            "writes_starved" => self.writes_starved = value,
            "front_merges" => self.front_merges = value == 1,
            "fifo_batch" => self.fifo_batch = value,
            "prio_aging_expire" => self.prio_aging_expire = from_millis(value),
            "async_depth" => self.async_depth = value,
            "priorities" => {
                let pending: u32 = self.levels.iter().map(|l| l.pending).sum();
                if pending > 0 || !self.requeued.is_empty() {
                    return Err(TunableError::BadValue {
                        name: spec.name,
                        value: value.to_string(),
                        reason: "requests are queued or in flight; set it before the run".into(),
                    });
                }
                self.priorities = value == 1;
            }
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

    // Proves dd_limit_depth: with async_depth set, writes take at most that many of the
    // scheduler's requests and a synchronous read still gets one; at the default (0, which is
    // nr_requests) writes may take them all.
    #[test]
    fn async_depth_keeps_requests_for_sync_reads() {
        for (async_depth, writes_in) in [(0, 8), (2, 2)] {
            let mut elevator = crate::Elevator::new(Box::new(Deadline::new()), 8);
            elevator
                .set("async_depth", &async_depth.to_string())
                .unwrap();
            let mut admitted = 0;
            for id in 0..8 {
                let mut write = request(id, Op::Write, id * (1 << 20), 4096);
                write.sync = false;
                if elevator.submit(write, 0).is_ok() {
                    admitted += 1;
                }
            }
            assert_eq!(admitted, writes_in, "async_depth={async_depth}");
            let read = request(100, Op::Read, 1 << 40, 4096);
            let expected = async_depth != 0;
            assert_eq!(elevator.submit(read, 0).is_ok(), expected, "async_depth={async_depth}");
        }
    }

    fn take(policy: &mut Deadline, now: Nanos) -> Request {
        match policy.dispatch(now) {
            Dispatch::Request(request) => request,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    // Proves a batch climbs in offset order from the first request and reads go before writes.
    #[test]
    fn sorted_batches_prefer_reads() {
        let mut policy = Deadline::new();
        policy.insert(request(1, Op::Write, 0, 4096), 0);
        for (id, offset) in [(2, 300_000), (3, 100_000), (4, 200_000)] {
            policy.insert(request(id, Op::Read, offset, 4096), 0);
        }
        let order: Vec<u64> = (0..4).map(|_| take(&mut policy, 1).id.0).collect();
        // mq-deadline starts with last_dir = WRITE and an empty batch, so the first dispatch
        // continues that "batch" with the write at 0. Then reads win the new batch, which climbs
        // from the lowest offset.
        assert_eq!(order, vec![1, 3, 4, 2]);
    }

    // Proves an expired read restarts at the FIFO head instead of continuing the sweep.
    #[test]
    fn expired_fifo_head_starts_the_batch() {
        let mut policy = Deadline::new();
        policy.set_tunable("fifo_batch", 1).unwrap();
        policy.insert(request(1, Op::Read, 900_000, 4096), 0);
        for (id, offset) in [(2, 100_000), (3, 200_000)] {
            policy.insert(request(id, Op::Read, offset, 4096), 10 * MILLISECOND);
        }
        // At t=20ms nothing has expired: the sweep from 0 picks 100000 first.
        assert_eq!(take(&mut policy, 20 * MILLISECOND).id.0, 2);
        // At t=600ms #1 (queued at 0) has expired: it goes next although #3 is nearer.
        assert_eq!(take(&mut policy, 600 * MILLISECOND).id.0, 1);
        assert_eq!(take(&mut policy, 600 * MILLISECOND).id.0, 3);
    }

    // Proves writes get a batch after `writes_starved` read batches passed them over.
    #[test]
    fn writes_are_not_starved_forever() {
        let mut policy = Deadline::new();
        policy.set_tunable("fifo_batch", 1).unwrap();
        policy.insert(request(100, Op::Write, 0, 4096), 0);
        policy.insert(request(101, Op::Write, 1 << 30, 4096), 0);
        for id in 0..10 {
            policy.insert(request(id, Op::Read, 1_000_000 + id * 100_000, 4096), 0);
        }
        // The first dispatch continues mq-deadline's initial write batch; then reads pass the
        // remaining write over twice (writes_starved = 2) before it gets its batch.
        let dirs: Vec<Op> = (0..5).map(|_| take(&mut policy, 1).op).collect();
        assert_eq!(
            dirs,
            vec![Op::Write, Op::Read, Op::Read, Op::Write, Op::Read]
        );
    }

    // Proves strict levels: BE waits while an RT request is queued or in flight, unless aged.
    #[test]
    fn realtime_first_and_aging() {
        let mut policy = Deadline::new();
        let mut rt = request(1, Op::Read, 0, 4096);
        rt.prio = IoPrio::new(IoPrioClass::Rt, 0).unwrap();
        let mut rt2 = request(3, Op::Read, 8192, 4096);
        rt2.prio = rt.prio;
        policy.insert(request(2, Op::Read, 4096, 4096), 0);
        policy.insert(rt, 0);
        policy.insert(rt2, 0);
        let first = take(&mut policy, 1);
        assert_eq!(first.id.0, 1);
        assert_eq!(take(&mut policy, 1).id.0, 3);
        // Both RT requests are in flight: BE must wait for them.
        assert_eq!(policy.dispatch(2), Dispatch::Empty);
        // ... unless it has waited past prio_aging_expire.
        assert_eq!(take(&mut policy, 10_001 * MILLISECOND).id.0, 2);
        policy.completed(&first, 10_002 * MILLISECOND);
    }

    // Proves back, front and gap-filling merges within one direction and level.
    #[test]
    fn merges() {
        let limits = MergeLimits {
            max_request_bytes: 1 << 20,
        };
        let mut policy = Deadline::new();
        policy.insert(request(1, Op::Read, 0, 4096), 0);
        policy.insert(request(2, Op::Read, 8192, 4096), 5);
        assert!(policy
            .try_merge(request(3, Op::Read, 4096, 4096), limits, 6)
            .is_ok());
        assert_eq!(policy.queued(), 1);
        assert!(policy
            .try_merge(request(4, Op::Write, 12_288, 4096), limits, 6)
            .is_err());
        policy.set_tunable("front_merges", 0).unwrap();
        policy.insert(request(5, Op::Read, 20_480, 4096), 7);
        assert!(policy
            .try_merge(request(6, Op::Read, 16_384, 4096), limits, 8)
            .is_err());
        let merged = take(&mut policy, 9);
        assert_eq!(
            (merged.offset, merged.len, merged.request_count()),
            (0, 12_288, 3)
        );
        assert_eq!(policy.levels[1].pending, 2);
    }
}

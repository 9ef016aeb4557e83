//! `kyber`: Linux's Kyber (block/kyber-iosched.c), which keeps latency down by limiting how
//! many requests of each kind the device holds, and tunes those limits from latency histograms.
//!
//! Requests are sorted into scheduling domains by operation (`kyber_sched_domain`): reads,
//! writes, discards, and everything else (flushes). Each domain has a number of tokens, its
//! depth (`kyber_depth`: 256, 128, 64, 16); a request leaves only with a token of its domain,
//! and gives it back when it completes (`kyber_finish_request`). Dispatch serves the domains in
//! turn, up to `kyber_batch_size` (16, 8, 1, 1) from one before moving on
//! (`kyber_dispatch_request`).
//!
//! Every completion of a read, write or discard adds two samples to its domain's histograms
//! (`add_latency_sample`): the total latency (from the request's allocation, our arrival) and
//! the I/O latency (from dispatch). Buckets are a quarter of the domain's target wide; the
//! first four are "good", the last four "bad", the last open-ended. A completion arms a timer
//! for 100 ms (`timer_reduce(..., jiffies + HZ / 10)`). When it fires (`kyber_timer_fn`):
//!
//! 1. If any domain's p90 I/O latency is in a bad bucket, the device is congested.
//! 2. Each domain's p99 total latency (remembered from an earlier window if this one had too
//!    few samples) scales its depth by `(p99 bucket + 1) / 4`: a domain over its target grows,
//!    and under congestion a domain within its target shrinks. Depths stay within
//!    `1..=kyber_depth`.
//!
//! A percentile is taken once a domain has 500 samples or a second has passed since its first
//! (`calculate_percentile`), and taking it empties that histogram.
//!
//! Differences from the kernel, on purpose: one software queue (the kernel keeps one per CPU
//! and flushes them into the hardware queue's list in CPU order), so the order within a domain
//! is arrival order; and the asynchronous requests' limit on scheduler requests
//! (`kyber_limit_depth`: a shallow depth of 75% of each sbitmap word) is 75% of `nr_requests`.
//! The timer is evaluated at the first call at or after its expiry, with its expiry as the
//! time, which is exact: only dispatch reads the depths it sets.

use super::PolicyInfo;
use crate::policy::{Dispatch, Policy};
use crate::request::{merge_back, merge_front, mergeable, MergeLimits, Op, Request, RequestId};
use crate::time::Nanos;
use crate::tunable::{TunableError, TunableSpec, Unit};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// Kyber's sysfs files.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "read_lat_nsec",
        unit: Unit::Nanoseconds,
        default: 2_000_000,
        min: 1,
        max: 3_600_000_000_000,
        doc: "read latency target: its histogram's buckets are a quarter of it (2 ms)",
    },
    TunableSpec {
        name: "write_lat_nsec",
        unit: Unit::Nanoseconds,
        default: 10_000_000,
        min: 1,
        max: 3_600_000_000_000,
        doc: "write latency target: its histogram's buckets are a quarter of it (10 ms)",
    },
];

/// This module's entries in the policy catalog (`iosched policies`).
pub const POLICIES: &[PolicyInfo] = &[PolicyInfo {
    name: "kyber",
    aliases: &[],
    summary: "Linux's Kyber: per-domain (read, write, discard, other) token depths scaled \
              from latency histograms",
    tunables: TUNABLES,
    build: || Box::new(Kyber::new()),
}];

const READ: usize = 0;
const WRITE: usize = 1;
const DISCARD: usize = 2;
const OTHER: usize = 3;
const NUM_DOMAINS: usize = 4;
/// Domains with latency targets and histograms: every one but `OTHER`.
const TIMED: usize = OTHER;

/// `kyber_depth`: each domain's initial and largest number of tokens.
const KYBER_DEPTH: [u32; NUM_DOMAINS] = [256, 128, 64, 16];
/// `kyber_batch_size`: requests one domain may send before the next gets its turn.
const KYBER_BATCH_SIZE: [u32; NUM_DOMAINS] = [16, 8, 1, 1];
/// `kyber_latency_targets` for discards (reads and writes have tunables).
const DISCARD_TARGET: Nanos = 5_000_000_000;
/// `KYBER_ASYNC_PERCENT`: asynchronous requests may hold this share of the scheduler's.
const KYBER_ASYNC_PERCENT: u64 = 75;

/// `KYBER_LATENCY_SHIFT`: a bucket is `target >> 2` wide.
const LATENCY_SHIFT: u32 = 2;
/// `KYBER_GOOD_BUCKETS`: buckets at or under the target.
const GOOD_BUCKETS: usize = 1 << LATENCY_SHIFT;
/// `KYBER_LATENCY_BUCKETS`.
const LATENCY_BUCKETS: usize = 2 << LATENCY_SHIFT;
const TOTAL_LATENCY: usize = 0;
const IO_LATENCY: usize = 1;
/// `HZ / 10`: the timer's delay after a completion.
const TIMER_DELAY: Nanos = 100_000_000;
/// `HZ`: a percentile is taken at the latest this long after its window's first sample.
const PERCENTILE_TIMEOUT: Nanos = 1_000_000_000;
/// A percentile is taken as soon as its window has this many samples.
const PERCENTILE_SAMPLES: u32 = 500;
/// `blk_bio_list_merge`: how many of the newest queued requests a new one tries to merge with.
const MERGE_CHECKED: usize = 8;

/// One scheduling domain: its requests and its tokens.
#[derive(Debug, Default)]
struct Domain {
    /// The software queue (`kcq->rq_list`): requests here can still be merged with.
    pending: VecDeque<Request>,
    /// The hardware queue's list (`khd->rqs`): taken from the software queue in one go when
    /// a token is at hand.
    flushed: VecDeque<Request>,
    /// Tokens (`domain_tokens[].sb.depth`).
    depth: u32,
    /// Tokens held by dispatched requests; may exceed `depth` after it shrank.
    in_flight: u32,
    /// Dispatches refused for want of a token (`trace_kyber_throttled`).
    throttled: u64,
}

/// The kyber policy.
#[derive(Debug)]
pub struct Kyber {
    domains: [Domain; NUM_DOMAINS],
    /// `khd->cur_domain` and `khd->batching`.
    cur_domain: usize,
    batching: u32,
    /// `kqd->latency_targets`.
    latency_targets: [Nanos; TIMED],
    /// `kqd->latency_buckets`: per timed domain, total and I/O latency histograms.
    buckets: [[[u32; LATENCY_BUCKETS]; 2]; TIMED],
    /// `kqd->latency_timeout`: when a domain's window must be taken, whatever its size.
    latency_timeout: [Option<Nanos>; TIMED],
    /// `kqd->domain_p99`: the last p99 bucket seen, kept for the next congested window.
    domain_p99: [Option<usize>; TIMED],
    /// `kqd->timer`'s expiry, if armed.
    timer: Option<Nanos>,
    /// Dispatched requests' dispatch times (`io_start_time_ns`): each holds a token.
    dispatched: FxHashMap<RequestId, Nanos>,
    queued: usize,
    timer_runs: u64,
    congested_windows: u64,
}

impl Default for Kyber {
    fn default() -> Self {
        Self::new()
    }
}

/// `kyber_sched_domain`: the domain of an operation.
fn domain_of(op: Op) -> usize {
    match op {
        Op::Read => READ,
        Op::Write => WRITE,
        Op::Discard => DISCARD,
        Op::Flush => OTHER,
    }
}

impl Kyber {
    /// Kyber with the kernel's defaults.
    pub fn new() -> Self {
        let mut domains: [Domain; NUM_DOMAINS] = Default::default();
        for (domain, depth) in domains.iter_mut().zip(KYBER_DEPTH) {
            domain.depth = depth;
        }
        Kyber {
            domains,
            cur_domain: READ,
            batching: 0,
            latency_targets: [2_000_000, 10_000_000, DISCARD_TARGET],
            buckets: [[[0; LATENCY_BUCKETS]; 2]; TIMED],
            latency_timeout: [None; TIMED],
            domain_p99: [None; TIMED],
            timer: None,
            dispatched: FxHashMap::default(),
            queued: 0,
            timer_runs: 0,
            congested_windows: 0,
        }
    }

    /// A domain's current number of tokens.
    pub fn depth(&self, domain: Op) -> u32 {
        self.domains[domain_of(domain)].depth
    }

    /// Runs the timer if it expired at or before `now`, at its expiry.
    fn run_timer(&mut self, now: Nanos) {
        if let Some(expiry) = self.timer.filter(|&expiry| expiry <= now) {
            self.timer = None;
            self.timer_fn(expiry);
        }
    }

    /// `kyber_timer_fn`.
    fn timer_fn(&mut self, now: Nanos) {
        self.timer_runs += 1;
        // Congestion: some domain's p90 I/O latency is over its target. The p90 is not too
        // sensitive to outliers.
        let mut bad = false;
        for domain in 0..TIMED {
            if let Some(p90) = self.percentile(domain, IO_LATENCY, 90, now) {
                if p90 >= GOOD_BUCKETS {
                    bad = true;
                }
            }
        }
        if bad {
            self.congested_windows += 1;
        }
        for domain in 0..TIMED {
            let mut p99 = self.percentile(domain, TOTAL_LATENCY, 99, now);
            // Domains do not all have enough samples in the same window: a p99 is kept for
            // the next congested window, and used only once.
            if bad {
                if p99.is_none() {
                    p99 = self.domain_p99[domain];
                }
                self.domain_p99[domain] = None;
            } else if p99.is_some() {
                self.domain_p99[domain] = p99;
            }
            let Some(p99) = p99 else { continue };
            // A domain over its target throttles less; under congestion, one within it
            // throttles more. The depth scales with p99 against the target.
            if bad || p99 >= GOOD_BUCKETS {
                let orig = u64::from(self.domains[domain].depth);
                let depth = (orig * (p99 as u64 + 1)) >> LATENCY_SHIFT;
                self.resize(domain, depth);
            }
        }
    }

    /// `kyber_resize_domain`.
    fn resize(&mut self, domain: usize, depth: u64) {
        let depth = depth.clamp(1, u64::from(KYBER_DEPTH[domain])) as u32;
        self.domains[domain].depth = depth;
    }

    /// `calculate_percentile`: the bucket holding the `percentile`th sample of a domain's
    /// histogram, once it has 500 samples or a second has passed since its first; it then
    /// empties the histogram.
    fn percentile(
        &mut self,
        domain: usize,
        kind: usize,
        percentile: u32,
        now: Nanos,
    ) -> Option<usize> {
        let buckets = &mut self.buckets[domain][kind];
        let samples: u32 = buckets.iter().sum();
        if samples == 0 {
            return None;
        }
        let timeout = *self.latency_timeout[domain].get_or_insert(now + PERCENTILE_TIMEOUT);
        if samples < PERCENTILE_SAMPLES && now < timeout {
            return None;
        }
        self.latency_timeout[domain] = None;
        let mut wanted = (u64::from(samples) * u64::from(percentile)).div_ceil(100);
        let mut bucket = 0;
        while bucket < LATENCY_BUCKETS - 1 {
            let count = u64::from(buckets[bucket]);
            if count >= wanted {
                break;
            }
            wanted -= count;
            bucket += 1;
        }
        *buckets = [0; LATENCY_BUCKETS];
        Some(bucket)
    }

    /// `add_latency_sample`.
    fn add_sample(&mut self, domain: usize, kind: usize, latency: Nanos) {
        let target = self.latency_targets[domain];
        let bucket = if latency > 0 {
            let divisor = (target >> LATENCY_SHIFT).max(1);
            ((latency - 1) / divisor).min(LATENCY_BUCKETS as u64 - 1) as usize
        } else {
            0
        };
        self.buckets[domain][kind][bucket] += 1;
    }

    /// `kyber_dispatch_cur_domain`: the current domain's next request, if it has one and a
    /// token is free.
    fn dispatch_cur_domain(&mut self, now: Nanos) -> Option<Request> {
        let domain = &mut self.domains[self.cur_domain];
        if domain.flushed.is_empty() && domain.pending.is_empty() {
            return None;
        }
        if domain.in_flight >= domain.depth {
            domain.throttled += 1;
            return None;
        }
        if domain.flushed.is_empty() {
            // `kyber_flush_busy_kcqs`: only with a token in hand, so that queued requests
            // stay mergeable while the domain is throttled.
            let pending = std::mem::take(&mut domain.pending);
            domain.flushed = pending;
        }
        let request = domain.flushed.pop_front()?;
        domain.in_flight += 1;
        self.batching += 1;
        self.queued -= 1;
        self.dispatched.insert(request.id, now);
        Some(request)
    }

    /// Gives back the token a dispatched request holds (`rq_clear_domain_token`); returns
    /// when it was dispatched, or `None` if it holds none.
    fn release(&mut self, request: &Request) -> Option<Nanos> {
        let dispatched_at = self.dispatched.remove(&request.id)?;
        let domain = &mut self.domains[domain_of(request.op)];
        domain.in_flight = domain.in_flight.saturating_sub(1);
        Some(dispatched_at)
    }
}

impl Policy for Kyber {
    fn name(&self) -> &'static str {
        "kyber"
    }

    /// `kyber_bio_merge` -> `blk_bio_list_merge`: the newest eight requests of the domain's
    /// software queue, back or front.
    fn try_merge(
        &mut self,
        request: Request,
        limits: MergeLimits,
        _now: Nanos,
    ) -> Result<(), Request> {
        let pending = &mut self.domains[domain_of(request.op)].pending;
        let found = pending
            .iter()
            .enumerate()
            .rev()
            .take(MERGE_CHECKED)
            .find(|(_, queued)| {
                (queued.end() == request.offset || request.end() == queued.offset)
                    && mergeable(queued, &request, limits)
            })
            .map(|(index, _)| index);
        let Some(index) = found else {
            return Err(request);
        };
        let queued = &mut pending[index];
        if queued.end() == request.offset {
            merge_back(queued, request);
        } else {
            merge_front(queued, request);
        }
        Ok(())
    }

    fn insert(&mut self, request: Request, now: Nanos) {
        self.run_timer(now);
        self.queued += 1;
        self.domains[domain_of(request.op)]
            .pending
            .push_back(request);
    }

    /// `kyber_dispatch_request`.
    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.run_timer(now);
        if self.batching < KYBER_BATCH_SIZE[self.cur_domain] {
            if let Some(request) = self.dispatch_cur_domain(now) {
                return Dispatch::Request(request);
            }
        }
        // The batch is spent, or its domain has no requests or no tokens: start another,
        // wrapping back to this domain if no other can send.
        self.batching = 0;
        for _ in 0..NUM_DOMAINS {
            self.cur_domain = (self.cur_domain + 1) % NUM_DOMAINS;
            if let Some(request) = self.dispatch_cur_domain(now) {
                return Dispatch::Request(request);
            }
        }
        Dispatch::Empty
    }

    /// `kyber_completed_request`, then `kyber_finish_request`.
    fn completed(&mut self, request: &Request, now: Nanos) {
        self.run_timer(now);
        let Some(io_start) = self.release(request) else {
            return;
        };
        let domain = domain_of(request.op);
        if domain == OTHER {
            return;
        }
        self.add_sample(domain, TOTAL_LATENCY, now.saturating_sub(request.arrival));
        self.add_sample(domain, IO_LATENCY, now.saturating_sub(io_start));
        // `timer_reduce`: armed, or brought forward, to 100 ms from now.
        let expiry = now + TIMER_DELAY;
        self.timer = Some(self.timer.map_or(expiry, |armed| armed.min(expiry)));
    }

    /// The requeue hook is `kyber_finish_request`: the token goes back, and the request is
    /// inserted at the head of its domain.
    fn requeue(&mut self, request: Request, now: Nanos) {
        self.run_timer(now);
        self.release(&request);
        self.queued += 1;
        self.domains[domain_of(request.op)]
            .flushed
            .push_front(request);
    }

    /// `kyber_limit_depth`: asynchronous requests may take 75% of the scheduler's requests,
    /// so that synchronous ones always find some.
    fn may_allocate(&self, request: &Request, in_use: usize, nr_requests: u32) -> bool {
        if request.sync {
            return true;
        }
        let depth = (u64::from(nr_requests) * KYBER_ASYNC_PERCENT / 100).max(1);
        (in_use as u64) < depth
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn drain(&mut self, out: &mut Vec<Request>) {
        let start = out.len();
        for domain in &mut self.domains {
            out.extend(domain.flushed.drain(..));
            out.extend(domain.pending.drain(..));
        }
        out[start..].sort_by_key(|request| (request.arrival, request.id));
        self.queued = 0;
    }

    fn tunables(&self) -> &'static [TunableSpec] {
        TUNABLES
    }

    fn tunable(&self, name: &str) -> Result<u64, TunableError> {
        match crate::tunable::find(TUNABLES, name)?.name {
            "read_lat_nsec" => Ok(self.latency_targets[READ]),
            _ => Ok(self.latency_targets[WRITE]),
        }
    }

    fn set_tunable(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        let spec = crate::tunable::find(TUNABLES, name)?;
        let value = spec.check(value)?;
        let domain = if spec.name == "read_lat_nsec" {
            READ
        } else {
            WRITE
        };
        self.latency_targets[domain] = value;
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        const DEPTH: [&str; NUM_DOMAINS] =
            ["read_depth", "write_depth", "discard_depth", "other_depth"];
        const THROTTLED: [&str; NUM_DOMAINS] = [
            "read_throttled",
            "write_throttled",
            "discard_throttled",
            "other_throttled",
        ];
        let mut counters = Vec::with_capacity(2 * NUM_DOMAINS + 2);
        for (index, domain) in self.domains.iter().enumerate() {
            counters.push((DEPTH[index], f64::from(domain.depth)));
            counters.push((THROTTLED[index], domain.throttled as f64));
        }
        counters.push(("timer_runs", self.timer_runs as f64));
        counters.push(("congested_windows", self.congested_windows as f64));
        counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::GroupId;
    use crate::ioprio::IoPrio;
    use crate::request::FlowId;

    const MS: Nanos = 1_000_000;

    fn request(id: u64, op: Op, offset: u64, sync: bool, arrival: Nanos) -> Request {
        Request::new(
            RequestId(id),
            op,
            offset,
            4096,
            sync,
            IoPrio::default(),
            FlowId(0),
            GroupId::ROOT,
            arrival,
        )
    }

    fn take(kyber: &mut Kyber, now: Nanos) -> Option<Request> {
        match kyber.dispatch(now) {
            Dispatch::Request(request) => Some(request),
            _ => None,
        }
    }

    // Proves a domain sends no more requests than it has tokens, and a completion gives one
    // back (kyber_get_domain_token, rq_clear_domain_token).
    #[test]
    fn tokens_bound_each_domain() {
        let mut kyber = Kyber::new();
        kyber.domains[READ].depth = 2;
        for id in 0..4 {
            kyber.insert(request(id, Op::Read, id << 20, true, 0), 0);
        }
        let first = take(&mut kyber, 0).unwrap();
        assert!(take(&mut kyber, 0).is_some());
        assert!(take(&mut kyber, 0).is_none(), "the third read has no token");
        kyber.completed(&first, MS);
        assert!(take(&mut kyber, MS).is_some());
        assert!(kyber.domains[READ].throttled > 0);
    }

    // Proves domains take turns in batches of kyber_batch_size: 16 reads, then 8 writes.
    #[test]
    fn domains_take_turns_in_batches() {
        let mut kyber = Kyber::new();
        for id in 0..40 {
            kyber.insert(request(id, Op::Read, id << 20, true, 0), 0);
            kyber.insert(request(100 + id, Op::Write, (100 + id) << 20, true, 0), 0);
        }
        let ops: Vec<Op> = (0..30).map(|_| take(&mut kyber, 0).unwrap().op).collect();
        assert!(ops[..16].iter().all(|&op| op == Op::Read), "{ops:?}");
        assert!(ops[16..24].iter().all(|&op| op == Op::Write), "{ops:?}");
        assert!(ops[24..].iter().all(|&op| op == Op::Read), "{ops:?}");
    }

    fn complete_reads(kyber: &mut Kyber, n: u64, queued_for: Nanos, served_in: Nanos, at: Nanos) {
        for id in 0..n {
            let id = 10_000 + id + at;
            kyber.insert(request(id, Op::Read, id << 20, true, at), at);
            let sent = loop {
                match kyber.dispatch(at + queued_for) {
                    Dispatch::Request(r) if r.id == RequestId(id) => break r,
                    Dispatch::Request(other) => kyber.completed(&other, at + queued_for),
                    _ => panic!("the read is not sent"),
                }
            };
            kyber.completed(&sent, at + queued_for + served_in);
        }
    }

    // Proves congestion (reads' p90 I/O latency over target) makes a write domain within its
    // target shrink by (p99 bucket + 1) / 4, and the reads' own depth grow (kyber_timer_fn).
    #[test]
    fn congestion_scales_depths_from_the_p99() {
        let mut kyber = Kyber::new();
        kyber.domains[READ].depth = 64;
        // Writes within a quarter of their 10 ms target: bucket 0.
        for id in 0..600 {
            let write = request(id, Op::Write, id << 20, true, 0);
            kyber.insert(write, 0);
            let sent = take(&mut kyber, 0).unwrap();
            kyber.completed(&sent, MS);
        }
        // Reads served in 5 ms against a 2 ms target: the last bucket, bad.
        complete_reads(&mut kyber, 600, 0, 5 * MS, 0);
        kyber.run_timer(kyber.timer.unwrap());
        assert_eq!(kyber.congested_windows, 1);
        assert_eq!(kyber.depth(Op::Write), 128 / 4, "writes throttled to a quarter");
        assert_eq!(kyber.depth(Op::Read), 128, "reads doubled (bucket 7: 8/4)");
    }

    // Proves a domain over its target grows even without congestion, and one within it is
    // left alone when nothing is congested.
    #[test]
    fn without_congestion_only_late_domains_change() {
        let mut kyber = Kyber::new();
        kyber.domains[READ].depth = 10;
        // Total latency 2.5 ms (queued 2 ms, served 0.5 ms): p99 bucket 4, p90 I/O bucket 0.
        complete_reads(&mut kyber, 600, 2 * MS, MS / 2, 0);
        kyber.run_timer(kyber.timer.unwrap());
        assert_eq!(kyber.congested_windows, 0);
        assert_eq!(kyber.depth(Op::Read), 10 * 5 / 4);
        assert_eq!(kyber.depth(Op::Write), 128);
    }

    // Proves a window with under 500 samples is judged only a second after it began
    // (calculate_percentile), and a domain's p99 from an earlier window is used in the next
    // congested one (domain_p99).
    #[test]
    fn small_windows_wait_a_second_and_p99s_are_remembered() {
        let mut kyber = Kyber::new();
        // 600 writes within their target (their p99 is taken at once), 50 late reads.
        for id in 0..600 {
            kyber.insert(request(id, Op::Write, id << 20, true, 0), 0);
            let sent = take(&mut kyber, 0).unwrap();
            kyber.completed(&sent, MS);
        }
        complete_reads(&mut kyber, 50, 0, 5 * MS, 0);
        let first = kyber.timer.unwrap();
        kyber.run_timer(first);
        assert_eq!(kyber.congested_windows, 0, "50 samples after 100 ms: not judged");
        assert_eq!(kyber.depth(Op::Write), 128);
        complete_reads(&mut kyber, 50, 0, 5 * MS, first + 1_000 * MS);
        kyber.run_timer(kyber.timer.unwrap());
        assert_eq!(kyber.congested_windows, 1, "a second later the reads are judged");
        assert_eq!(kyber.depth(Op::Write), 32, "with the writes' remembered p99");
    }

    // Proves asynchronous requests may hold at most 75% of the scheduler's requests
    // (kyber_limit_depth) while synchronous ones may take any.
    #[test]
    fn async_requests_keep_a_quarter_free() {
        let kyber = Kyber::new();
        let async_write = request(1, Op::Write, 0, false, 0);
        let sync_read = request(2, Op::Read, 0, true, 0);
        assert!(kyber.may_allocate(&async_write, 47, 64));
        assert!(!kyber.may_allocate(&async_write, 48, 64));
        assert!(kyber.may_allocate(&sync_read, 63, 64));
    }

    // Proves a request merges with one of the newest eight in its domain's software queue,
    // and not with one already taken into the dispatch list.
    #[test]
    fn merges_only_in_the_software_queue() {
        let limits = MergeLimits {
            max_request_bytes: 1 << 20,
        };
        let mut kyber = Kyber::new();
        kyber.insert(request(1, Op::Read, 0, true, 0), 0);
        assert!(kyber
            .try_merge(request(2, Op::Read, 4096, true, 0), limits, 0)
            .is_ok());
        for id in 3..12 {
            kyber.insert(request(id, Op::Read, id << 20, true, 0), 0);
        }
        assert!(
            kyber
                .try_merge(request(20, Op::Read, 8192, true, 0), limits, 0)
                .is_err(),
            "the first request is older than the newest eight"
        );
        let sent = take(&mut kyber, 0).unwrap();
        assert_eq!(sent.len, 8192);
        assert!(kyber
            .try_merge(request(21, Op::Read, (11 << 20) + 4096, true, 0), limits, 0)
            .is_err());
        assert_eq!(kyber.queued(), 9);
    }
}

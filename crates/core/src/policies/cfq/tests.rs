use super::*;
use crate::testing::{request, XorShift};
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
            Some(rng) => flow.next_offset - flow.next_offset % GIB + rng.below(GIB / 4096) * 4096,
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
    assert_eq!(after_the_first_of_two_readers(&mut policy), Some(2));
}

/// Flows 0 and 1 each queue a read (ids 1 and 2); the first is served and completes at 1 ms.
/// Returns the id dispatched then, if any.
fn after_the_first_of_two_readers(policy: &mut Cfq) -> Option<u64> {
    policy.insert(read(1, 0, 0, 0), 0);
    policy.insert(read(2, 1, GIB, 0), 0);
    let first = take(policy, 0);
    policy.completed(&first, MS);
    match policy.dispatch(MS) {
        Dispatch::Request(request) => Some(request.id.0),
        _ => None,
    }
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

/// Queues not forgotten ([`Queue::forgotten`]).
fn live_queues(policy: &Cfq) -> usize {
    policy.queues.values().filter(|queue| !queue.forgotten).count()
}

// Proves per-flow state stays bounded: queues are forgotten when idle (and kept, forgotten,
// only up to QUEUES_KEPT) and at most HISTORY_CAP histories are kept, however many flows come
// and go; those forgotten are the least recently used.
#[test]
fn per_flow_state_is_bounded() {
    let mut policy = Cfq::new();
    let mut now = 0;
    for id in 0..(HISTORY_CAP as u64 + 1000) {
        policy.insert(read(id, id as u32, id * 4096, now), now);
        let request = take(&mut policy, now);
        now += MS;
        policy.completed(&request, now);
        assert!(live_queues(&policy) <= 2);
        assert!(policy.queues.len() <= QUEUES_KEPT + 2);
    }
    let kept = policy.history.len();
    assert!((HISTORY_CAP - HISTORY_CAP / 8..=HISTORY_CAP).contains(&kept), "{kept}");
    let last = HISTORY_CAP as u32 + 1000;
    for flow in 0..last {
        let key = QueueKey::Sync(FlowId(flow));
        let recent = flow >= last - kept as u32;
        assert_eq!(policy.history.contains_key(&key), recent, "flow {flow}");
    }
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
        assert!(live_queues(&policy) <= 1, "seed {seed}: queues left behind");
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

/// Marks flow `flow`'s history seeky, its idle window closed (as 32 far requests would).
fn make_seeky(policy: &mut Cfq, flow: u32) {
    let history = policy.history_mut(QueueKey::Sync(FlowId(flow)), 0);
    history.seek_history = u32::MAX;
    history.idle_window = false;
}

// Proves the sync-noidle tree's idle at its end (cfq_should_idle's st->count == 1 rule): a
// seeky reader alone in its tree is idled on, so a sequential writer's async queue waits;
// with a second seeky reader in the tree there is no idling; without workload trees (2.6.32
// and before) the lone seeky reader is not idled on either.
#[test]
fn the_last_sync_noidle_queue_is_idled_on() {
    for workload_trees in [1, 0] {
        let mut policy = Cfq::new();
        policy.set_tunable("workload_trees", workload_trees).unwrap();
        make_seeky(&mut policy, 0);
        policy.insert(read(1, 0, 0, 0), 0);
        let first = take(&mut policy, 0);
        policy.completed(&first, MS);
        let mut write = request(2, Op::Write, 2 * GIB, 4096);
        write.flow = FlowId(1);
        write.sync = false;
        policy.insert(write, MS);
        let next = policy.dispatch(MS);
        if workload_trees == 1 {
            assert_eq!(next, Dispatch::WaitUntil(9 * MS));
        } else {
            assert!(matches!(&next, Dispatch::Request(r) if r.id.0 == 2), "{next:?}");
        }
    }
    // Two seeky readers share the tree: the second is served at once.
    let mut policy = Cfq::new();
    make_seeky(&mut policy, 0);
    make_seeky(&mut policy, 1);
    assert_eq!(after_the_first_of_two_readers(&mut policy), Some(2));
}

// Proves cfq_choose_wl_type and the workload slice: the workload whose first queue waited
// longest (lowest rb_key) is served; a sync workload's slice is its queues' share of
// target_latency (300 ms x 2 of 3 busy queues), an async one's that share scaled by
// slice_async / slice_sync (300 x 1/2 x 40/100), never below 2 x slice_idle for sync.
#[test]
fn workloads_are_chosen_by_rb_key_with_a_slice_per_queue() {
    let mut policy = Cfq::new();
    make_seeky(&mut policy, 1);
    make_seeky(&mut policy, 2);
    policy.insert(read(1, 1, 0, 0), 0);
    policy.insert(read(2, 2, GIB, 0), 0);
    policy.insert(read(3, 0, 2 * GIB, MS), MS);
    policy.choose_workload(2 * MS);
    assert_eq!((policy.serving_class, policy.serving_type), (BE, SYNC_NOIDLE_WL));
    assert_eq!(policy.workload_expires, Some(2 * MS + 200 * MS));

    let mut policy = Cfq::new();
    let mut write = request(1, Op::Write, 0, 4096);
    write.flow = FlowId(1);
    write.sync = false;
    policy.insert(write, 0);
    policy.insert(read(2, 0, GIB, MS), MS);
    policy.choose_workload(2 * MS);
    assert_eq!(policy.serving_type, ASYNC_WL);
    assert_eq!(policy.workload_expires, Some(2 * MS + 60 * MS));
    // A lone sync queue among 8 async ones gets 1/9 of target_latency, and never less
    // than 2 x slice_idle (16 ms above 100 ms / 9).
    let mut policy = Cfq::new();
    policy.set_tunable("target_latency", 100).unwrap();
    make_seeky(&mut policy, 0);
    policy.insert(read(1, 0, 0, 0), 0);
    for flow in 1..=8u8 {
        let mut write = request(u64::from(flow) + 1, Op::Write, GIB, 4096);
        write.flow = FlowId(u32::from(flow));
        write.sync = false;
        write.prio = prio(IoPrioClass::Be, flow - 1);
        policy.insert(write, MS);
    }
    policy.choose_workload(2 * MS);
    assert_eq!(policy.serving_type, SYNC_NOIDLE_WL);
    assert_eq!(policy.workload_expires, Some(2 * MS + 16 * MS));
}

// Proves "an idle queue should not be idle now" (cfq_should_preempt, 2.6.33+): a seeky
// reader with its request in flight and nothing queued, which does not idle (a second
// sync-noidle queue is busy), is preempted by a sequential reader's request, far from the
// head; without workload trees the sequential reader waits its turn.
#[test]
fn an_empty_queue_that_does_not_idle_is_preempted() {
    for workload_trees in [1, 0] {
        let mut policy = Cfq::new();
        policy.set_tunable("workload_trees", workload_trees).unwrap();
        make_seeky(&mut policy, 1);
        make_seeky(&mut policy, 2);
        policy.insert(read(1, 1, 0, 0), 0);
        policy.insert(read(2, 2, GIB, 0), 0);
        let first = take(&mut policy, 0);
        assert_eq!(first.flow, FlowId(1));
        policy.insert(read(3, 0, 3 * GIB, MS / 2), MS / 2);
        policy.completed(&first, MS);
        let next = take(&mut policy, MS);
        let expected = if workload_trees == 1 { 0 } else { 2 };
        assert_eq!(next.flow, FlowId(expected), "workload_trees={workload_trees}");
    }
}

// Proves the 3.3+ promote_sync rule: the only busy sync queue may go past quantum in flight
// while an async queue is busy too; without workload trees (2.6.3x) it stops at quantum.
#[test]
fn the_only_sync_queue_goes_deep() {
    for (workload_trees, depth) in [(1, 20), (0, 8)] {
        let mut policy = Cfq::new();
        policy.set_tunable("workload_trees", workload_trees).unwrap();
        // A deep sequential reader (idle window open), and a writer's async queue.
        for i in 0..20 {
            policy.insert(read(i, 0, i * 4096, 0), 0);
        }
        let mut write = request(100, Op::Write, 2 * GIB, 4096);
        write.flow = FlowId(1);
        write.sync = false;
        policy.insert(write, 0);
        // The slice clock starts with the first completion.
        let first = take(&mut policy, 0);
        policy.completed(&first, MS);
        let mut sent = 0;
        while let Dispatch::Request(request) = policy.dispatch(MS) {
            assert_eq!(request.flow, FlowId(0));
            sent += 1;
        }
        assert_eq!(sent, depth - usize::from(workload_trees == 1), "workload_trees={workload_trees}");
    }
}

// Proves the 2.6.37+ rule that a seeky queue with an open idle window (it queued deeply once)
// loses the window when its queue empties early in its slice: it is no longer idled on
// beyond the end-of-tree idle.
#[test]
fn a_seeky_queue_loses_its_idle_window_early() {
    let key = QueueKey::Sync(FlowId(0));
    // Flow 0 seeky but deep (its window open); flows 0 and 1 each queue a read; flow 0's is
    // sent. Returns the policy and what it does next.
    let start = |workload_trees: u64| {
        let mut policy = Cfq::new();
        policy.set_tunable("workload_trees", workload_trees).unwrap();
        let history = policy.history_mut(key, 0);
        history.seek_history = u32::MAX;
        history.deep = true;
        history.idle_window = true;
        policy.insert(read(1, 0, 0, 0), 0);
        policy.insert(read(2, 1, GIB, 0), 0);
        assert_eq!(take(&mut policy, 0).id.0, 1);
        let next = policy.dispatch(0);
        (policy, next)
    };
    // Flow 0's queue is empty with its request in flight: the window closes, and flow 1,
    // in the same tree, is served instead of waiting for flow 0's next request.
    let (policy, next) = start(1);
    assert!(matches!(next, Dispatch::Request(r) if r.id.0 == 2));
    assert!(!policy.idle_window(key));
    assert!(!policy.history[&key].deep);
    // Without workload trees (before 2.6.37) the window stays open and CFQ waits.
    let (policy, next) = start(0);
    assert_eq!(next, Dispatch::Empty);
    assert!(policy.idle_window(key));
}

// Proves the 2.6.33+ preemption rules: while the only sync-noidle queue idles with nothing
// queued, a second sync-noidle queue's request preempts it at once.
#[test]
fn a_second_sync_noidle_queue_preempts() {
    let mut policy = Cfq::new();
    make_seeky(&mut policy, 0);
    make_seeky(&mut policy, 1);
    policy.insert(read(1, 0, 0, 0), 0);
    let first = take(&mut policy, 0);
    policy.completed(&first, MS);
    // The lone sync-noidle queue idles at the end of its tree.
    assert_eq!(policy.active.as_ref().and_then(|a| a.idle_until), Some(9 * MS));
    // Far from the head (no close-request preemption), yet served at once.
    policy.insert(read(2, 1, 5 * GIB, 2 * MS), 2 * MS);
    assert_eq!(take(&mut policy, 2 * MS).id.0, 2);
}


// Proves cfq_close_cooperator: when a sequential reader's queue runs empty and another
// reader's next request lies right after the head (two processes reading one file in
// interleaved pieces), that one is served at once instead of idling; a far one (1 GiB away)
// is not a cooperator and CFQ idles, as it does for a cooperator of another priority level.
#[test]
fn a_close_cooperator_is_served_instead_of_idling() {
    for (offset, level, served) in [(4096, 4, true), (GIB, 4, false), (4096, 0, false)] {
        let mut policy = Cfq::new();
        policy.insert(read(1, 0, 0, 0), 0);
        policy.insert(with_prio(read(2, 1, offset, 0), prio(IoPrioClass::Be, level)), 0);
        let first = take(&mut policy, 0);
        assert_eq!(first.id.0, 1);
        policy.completed(&first, MS);
        let next = policy.dispatch(MS);
        if served {
            assert!(matches!(next, Dispatch::Request(ref r) if r.id.0 == 2), "{next:?}");
        } else {
            assert_eq!(next, Dispatch::WaitUntil(9 * MS), "offset {offset}, level {level}");
        }
    }
}

// Proves the queue merge of close cooperators (cfq_setup_merge, cfq_merge_cfqqs, split_cfqq):
// once flow 0's queue ran empty with flow 1's next request next to the head, flow 0's next
// request goes to flow 1's queue, and so the two readers of interleaved pieces are served
// as one sequential queue, in offset order, without idling between them; when the merged
// queue turns seeky, its slice's end marks it to be split, and flow 0's next request goes
// to its own queue again.
#[test]
fn close_cooperators_share_one_queue_until_it_turns_seeky() {
    let mut policy = Cfq::new();
    policy.insert(read(1, 0, 0, 0), 0);
    policy.insert(read(2, 1, 4096, 0), 0);
    let first = take(&mut policy, 0);
    policy.completed(&first, MS);
    let second = take(&mut policy, MS);
    assert_eq!(second.id.0, 2, "the cooperator, at once");
    assert_eq!(
        policy.merge_pending.get(&QueueKey::Sync(FlowId(0))),
        Some(&QueueKey::Sync(FlowId(1)))
    );
    // Flow 0's next request joins flow 1's queue.
    policy.insert(read(3, 0, 8192, 2 * MS), 2 * MS);
    assert_eq!(policy.flow_queue.get(&FlowId(0)), Some(&QueueKey::Sync(FlowId(1))));
    assert_eq!(policy.coop[&QueueKey::Sync(FlowId(1))].flows, 2);
    policy.insert(read(4, 1, 12288, 2 * MS), 2 * MS);
    let queue = &policy.queues[&QueueKey::Sync(FlowId(1))];
    assert_eq!(queue.sort.len(), 2, "both flows' requests in one queue");
    assert!(policy
        .queues
        .get(&QueueKey::Sync(FlowId(0)))
        .is_none_or(|queue| queue.forgotten));
    policy.completed(&second, 2 * MS);
    let (a, b) = (take(&mut policy, 2 * MS), take(&mut policy, 2 * MS));
    assert_eq!((a.id.0, b.id.0), (3, 4), "one queue, in offset order");
    // Its completion finds the queue it was served from.
    policy.completed(&a, 3 * MS);
    policy.completed(&b, 3 * MS);
    // Seeky from now on: 32 far requests, then the slice ends.
    let mut now = 4 * MS;
    for i in 0..32u64 {
        let flow = (i % 2) as u32;
        policy.insert(read(10 + i, flow, (i + 1) * GIB, now), now);
        let r = take(&mut policy, now);
        now += MS;
        policy.completed(&r, now);
    }
    while policy.queued() > 0 || policy.active.is_some() {
        match policy.dispatch(now) {
            Dispatch::Request(r) => policy.completed(&r, now + MS),
            Dispatch::WaitUntil(until) => now = until,
            Dispatch::Empty => now += 10 * MS,
        }
        now += MS;
        if now > SECOND {
            break;
        }
    }
    assert!(policy.coop[&QueueKey::Sync(FlowId(1))].split, "seeky at the slice's end");
    policy.insert(read(100, 0, 50 * GIB, now), now);
    assert_eq!(policy.flow_queue.get(&FlowId(0)), None, "split: its own queue again");
    assert!(policy.queues.contains_key(&QueueKey::Sync(FlowId(0))));
}

// Proves the close cooperator is the same whether the index of busy queues' next requests is
// kept (from CLOSE_INDEX_FROM busy queues) or each busy queue is looked at (below
// CLOSE_INDEX_BELOW): 48 readers, each reading its own stretch of one region near the others,
// one request at a time, come and go as their requests are served; the index is built when
// they are all busy and dropped as they finish. Every cooperator found with the index is
// checked against the scan (in debug builds, as `cargo test` runs), and the dispatch order
// is compared with a policy that never keeps the index.
#[test]
fn close_cooperators_are_the_same_with_and_without_the_index() {
    let run = |index: bool| {
        let mut policy = Cfq::new();
        let mut rng = XorShift(0x5eed_c105e);
        let flows = 48u32;
        let mut left = vec![6u32; flows as usize];
        let mut id = 0;
        let mut now = 0;
        let mut order = Vec::new();
        let mut was_indexed = false;
        for flow in 0..flows {
            id += 1;
            let offset = u64::from(flow) * 64 * 1024 + (rng.draw() % 16) * 4096;
            policy.insert(read(id, flow, offset, now), now);
        }
        while policy.queued() > 0 || policy.active.is_some() {
            if !index {
                policy.close_indexed = false;
                policy.close_index.clear();
                for queue in policy.queues.values_mut() {
                    queue.close_entry = None;
                }
            }
            was_indexed |= policy.close_indexed;
            match policy.dispatch(now) {
                Dispatch::Request(r) => {
                    order.push(r.id.0);
                    now += MS / 2;
                    policy.completed(&r, now);
                    let flow = r.flow.0;
                    if left[flow as usize] > 0 {
                        left[flow as usize] -= 1;
                        id += 1;
                        let offset = r.offset + 4096 * (1 + rng.draw() % 4);
                        policy.insert(read(id, flow, offset, now), now);
                    }
                }
                Dispatch::WaitUntil(until) => now = until.max(now + 1),
                Dispatch::Empty => now += MS,
            }
            assert!(now < 100 * SECOND, "the readers finish");
        }
        (order, was_indexed, policy.close_indexed)
    };
    let (with, built, kept) = run(true);
    let (without, _, _) = run(false);
    assert!(built, "48 busy queues build the index");
    assert!(!kept, "idle again, it is dropped");
    assert_eq!(with.len(), 48 * 7);
    assert_eq!(with, without);
}

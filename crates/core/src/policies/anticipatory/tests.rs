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
        level.requests.add(
            SYNC,
            Sorted {
                request: request(id, Op::Read, offset, 4096),
                fifo_time: 0,
            },
        );
    }
    assert_eq!(level.next_request(SYNC, head).unwrap().1, RequestId(2));
    level.requests.remove(SYNC, (head - 40_000, RequestId(2)));
    level.requests.add(
        SYNC,
        Sorted {
            request: request(3, Op::Read, head - 60_000, 4096),
            fifo_time: 0,
        },
    );
    assert_eq!(level.next_request(SYNC, head).unwrap().1, RequestId(1));
    // Everything behind and beyond MAXBACK: the elevator wraps to the lowest offset.
    let mut far = Level::default();
    for (id, offset) in [(4, 10 << 20), (5, 5 << 20)] {
        far.requests.add(
            SYNC,
            Sorted {
                request: request(id, Op::Read, offset, 4096),
                fifo_time: 0,
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

//! A policy's `WaitUntil` is honoured on the real engine: nothing is dispatched before the
//! time it names, and the engine sleeps until then instead of polling the policy.

mod common;

use iosched_core::{Dispatch, Nanos, Policy, Request};
use iosched_fio::parse::parse_str;
use iosched_fio::DataDir;
use iosched_uring::{run_with_policy, UringConfig};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// FIFO that holds every request for `hold` after its arrival.
struct Hold {
    hold: Nanos,
    queue: VecDeque<Request>,
    dispatch_calls: Arc<AtomicU64>,
    early: Arc<AtomicU64>,
}

impl Policy for Hold {
    fn name(&self) -> &'static str {
        "hold"
    }

    fn insert(&mut self, request: Request, _now: Nanos) {
        self.queue.push_back(request);
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.dispatch_calls.fetch_add(1, Ordering::Relaxed);
        match self.queue.front() {
            None => Dispatch::Empty,
            Some(front) if now >= front.arrival + self.hold => {
                Dispatch::Request(self.queue.pop_front().expect("front exists"))
            }
            Some(front) => Dispatch::WaitUntil(front.arrival + self.hold),
        }
    }

    fn completed(&mut self, request: &Request, now: Nanos) {
        if now < request.arrival + self.hold {
            self.early.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn drain(&mut self, out: &mut Vec<Request>) {
        out.extend(self.queue.drain(..));
    }
}

#[test]
fn wait_until_is_honoured_with_a_timer() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let text = format!(
        "[held]\nfilename={}\nsize=1m\nrw=randread\ndirect=1\nio_size=40k\n",
        path.display()
    );
    let file = parse_str(&text, "t.fio", Path::new("."), &|_| None).unwrap();
    let hold: Nanos = 20_000_000;
    let calls = Arc::new(AtomicU64::new(0));
    let early = Arc::new(AtomicU64::new(0));
    let policy = Box::new(Hold {
        hold,
        queue: VecDeque::new(),
        dispatch_calls: calls.clone(),
        early: early.clone(),
    });
    let outcome = run_with_policy(&UringConfig::default(), &file, policy).unwrap();
    assert!(outcome.ok());
    assert_eq!(outcome.completed, 10);
    let job = &outcome.report.jobs[0];
    let reads = job.dir(DataDir::Read);
    assert_eq!(reads.total_ios, 10);
    // Every read waited its 20 ms in the scheduler: none was dispatched early.
    assert!(reads.clat.min() >= hold, "min clat {}", reads.clat.min());
    assert_eq!(early.load(Ordering::Relaxed), 0);
    assert!(job.runtime >= 10 * hold, "runtime {}", job.runtime);
    // The engine slept until each wake-up: a few policy calls per request, not a busy loop.
    let calls = calls.load(Ordering::Relaxed);
    assert!(calls <= 10 * 6, "{calls} dispatch calls for 10 requests");
    // And the wait was not much longer than asked (timer slack and scheduling aside).
    assert!(
        reads.clat.mean() < (hold + 15_000_000) as f64,
        "mean clat {}",
        reads.clat.mean()
    );
}

//! mClock at scale: cost per request with 10 to 10 000 clients, beside Ceph's dmclock.
//!
//! One request is what the policy sees of its life: its insertion (dmclock's `add_request`),
//! its dispatch (`pull_request`) and its completion. The clients mix what mClock offers: every
//! other one has a reservation (together half the device), every one a weight from 1 to 4, and
//! every fourth a limit (twice its even share, so that some are over it at times). Requests
//! are 4 to 32 KiB; the device completes one every 10 us. Two workloads:
//!
//! - `backlogged`: every client always has two requests queued, so a dispatch moves the
//!   client's next request to the front (its heaps' keys change).
//! - `churn`: every client has one request at a time and sends the next when it completes (a
//!   synchronous reader): a dispatch takes the client out of its heaps and the next request
//!   puts it back.
//!
//! The reference is dmclock's `PullPriorityQueue`, measured on this machine at 163, 369, 635
//! and 1461 ns per add+pull with 10, 100, 1000 and 10 000 clients; the target is a third.
//! Those figures are from another day; `scripts/dmclock-bench/run.sh DMCLOCK_CHECKOUT` measures
//! dmclock on this bench's workloads now, and `DMCLOCK_FIGURES=FILE` (what it printed) makes
//! the summary judge each workload by dmclock's figure for it, a ratio measured in one session
//! (pin both to one core: `taskset -c 1`).
//!
//! `cargo bench -p iosched-core --bench mclock` prints the summary table (a plain timing loop,
//! best of several runs), then runs the same workloads under Criterion.

use criterion::{BenchmarkId, Criterion};
use iosched_core::policies::mclock::Mclock;
use iosched_core::qos::{Qos, Rate};
use iosched_core::{Dispatch, FlowId, GroupId, IoPrio, Op, Policy, Request, RequestId};
use std::hint::black_box;
use std::time::Duration;

mod common;

use common::SIZES;
/// The device: one completion every 10 us (100 000 IOPS).
const SERVICE_NS: u64 = 10_000;
const DEVICE_IOPS: u64 = 1_000_000_000 / SERVICE_NS;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Workload {
    Backlogged,
    Churn,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Backlogged => "backlogged",
            Workload::Churn => "churn",
        }
    }
}

struct Bench {
    policy: Mclock,
    rng: u64,
    now: u64,
    next_id: u64,
}

impl Bench {
    fn new(n: usize, workload: Workload) -> Self {
        let mut bench = Bench {
            policy: Mclock::new(),
            rng: 0x9e37_79b9_7f4a_7c15,
            now: 0,
            next_id: 0,
        };
        let share = (DEVICE_IOPS / n as u64).max(1);
        for i in 0..n {
            let mut qos = Qos {
                weight: Some(1 + i as u32 % 4),
                ..Qos::default()
            };
            if i % 2 == 0 {
                qos.reservation = Some(Rate::Iops(share / 2 + 1));
            }
            if i % 4 == 1 {
                qos.limit = Some(Rate::Iops(2 * share));
            }
            bench.policy.set_flow_qos(FlowId(i as u32), qos);
        }
        let depth = match workload {
            Workload::Backlogged => 2,
            Workload::Churn => 1,
        };
        for i in 0..n {
            for _ in 0..depth {
                bench.add(i as u32);
            }
        }
        // Warm up: every client served a few times, the heaps at their working size.
        for _ in 0..4 * n {
            bench.request();
        }
        bench
    }

    /// A request size from 4 KiB to 32 KiB.
    #[inline(always)]
    fn size(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        4096 << (self.rng & 3)
    }

    fn add(&mut self, flow: u32) {
        self.next_id += 1;
        let len = self.size();
        let request = Request::new(
            RequestId(self.next_id),
            Op::Read,
            self.next_id * 4096,
            len,
            true,
            IoPrio::NONE,
            FlowId(flow),
            GroupId::ROOT,
            self.now,
        );
        self.policy.insert(request, self.now);
    }

    /// One request's dispatch, completion and its successor's insertion.
    #[inline(always)]
    fn request(&mut self) {
        let request = loop {
            match self.policy.dispatch(self.now) {
                Dispatch::Request(request) => break request,
                Dispatch::WaitUntil(until) => self.now = until,
                Dispatch::Empty => unreachable!("every client has work"),
            }
        };
        self.now += SERVICE_NS;
        self.policy.completed(&request, self.now);
        self.add(request.flow.0);
    }
}

fn summary() {
    // Read first, so that a file that does not hold the figures stops the bench at once.
    let dmclock = common::dmclock();
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    for &n in &SIZES {
        let (mut wall_row, mut cpu_row) = (Vec::new(), Vec::new());
        for workload in [Workload::Backlogged, Workload::Churn] {
            let mut bench = Bench::new(n, workload);
            let (w, c) = common::measure(|| bench.request(), 1_000_000, 5);
            black_box(&bench.policy);
            wall_row.push(w);
            cpu_row.push(c);
        }
        wall.push(wall_row);
        cpu.push(cpu_row);
    }
    let table = |title: &str, rows: &[Vec<f64>]| {
        println!("{title}");
        println!(
            "{:>8}  {:>12} {:>12}  {:>15} {:>15}",
            "clients", "backlogged", "churn", "target b / c", "dmclock b / c"
        );
        for (i, row) in rows.iter().enumerate() {
            let (backlogged, churn) = (dmclock.backlogged[i], dmclock.churn[i]);
            let cell = |ns: f64, dmclock: f64| {
                format!("{ns:.1}{}", if ns <= dmclock / 3.0 { " " } else { "!" })
            };
            println!(
                "{:>8}  {:>12} {:>12}  {:>15} {:>15}",
                SIZES[i],
                cell(row[0], backlogged),
                cell(row[1], churn),
                format!("{:.0} / {:.0}", backlogged / 3.0, churn / 3.0),
                format!("{backlogged:.0} / {churn:.0}")
            );
        }
        println!();
    };
    println!("mclock: ns per request (insert + dispatch + completion), best of 5 runs;");
    println!("target = a third of dmclock's add+pull for the workload (b: backlogged, c: churn),");
    println!("from {}; '!' marks a miss", dmclock.source);
    println!();
    table("wall clock:", &wall);
    if cpu.iter().flatten().all(Option::is_some) {
        let cpu: Vec<Vec<f64>> = cpu
            .iter()
            .map(|row| row.iter().map(|c| c.unwrap()).collect())
            .collect();
        table(
            "on-CPU time (schedstat; leaves out waits for a core on a shared machine):",
            &cpu,
        );
    }
}

fn criterion_benches(c: &mut Criterion) {
    for workload in [Workload::Backlogged, Workload::Churn] {
        let mut group = c.benchmark_group(format!("mclock/{}", workload.name()));
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        for &n in &SIZES {
            let mut bench = Bench::new(n, workload);
            group.bench_function(BenchmarkId::from_parameter(n), |b| {
                b.iter(|| bench.request())
            });
        }
        group.finish();
    }
}

fn main() {
    // The summary only under `cargo bench` (Criterion's test mode runs each bench once).
    if std::env::args().any(|arg| arg == "--bench") {
        summary();
    }
    let mut criterion = Criterion::default().configure_from_args();
    criterion_benches(&mut criterion);
    criterion.final_summary();
}

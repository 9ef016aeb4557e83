//! The fair-queuing layer at scale: cost per request with 10 to 10 000 backlogged leaves.
//!
//! One request is modelled as what the layer sees of its life: its insertion (the leaf becomes
//! active if it was not), its dispatch (`select_next`) and its completion (`charge`, or
//! `expire` when it ends the leaf's turn). Two workloads:
//!
//! - `backlogged`: every leaf always has requests queued, so an insertion finds its leaf
//!   active and costs the layer nothing: select + charge.
//! - `churn`: every leaf has one request at a time and issues the next as soon as the last
//!   completes (a synchronous reader at queue depth 1): select + expire with no next budget
//!   (charged, the leaf runs empty and goes to the idle tree, as BFQ expires an emptied queue)
//!   + activate (its next request arrives).
//!
//! Each in two layouts: `flat`, every leaf under the root; `2-level`, the leaves spread over
//! ceil(sqrt(n)) groups under the root. Request sizes vary from 4 to 32 KiB (charged in bytes).
//!
//! The reference is Ceph's dmclock mClock queue, measured on this machine at 163, 369, 635 and
//! 1461 ns per add+pull with 10, 100, 1000 and 10 000 clients; the target is a third of that.
//! Those figures are from another day; `scripts/dmclock-bench/run.sh DMCLOCK_CHECKOUT` measures
//! dmclock on this bench's workloads now, and `DMCLOCK_FIGURES=FILE` (what it printed) makes
//! the summary judge each workload by dmclock's figure for it, a ratio measured in one session
//! (pin both to one core: `taskset -c 1`).
//!
//! `cargo bench -p iosched-core --bench fq` first prints a summary table (a plain timing loop,
//! best of several runs), then runs the same workloads under Criterion.

use criterion::{BenchmarkId, Criterion};
use iosched_core::fq::{FairQueue, FqGroupId, LeafId};
use iosched_core::IoPrioClass;
use std::hint::black_box;
use std::time::Duration;

mod common;

use common::SIZES;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Flat,
    TwoLevel,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Flat => "flat",
            Layout::TwoLevel => "2-level",
        }
    }
}

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
    fq: FairQueue,
    rng: u64,
    now: u64,
    workload: Workload,
}

impl Bench {
    fn new(n: usize, layout: Layout, workload: Workload) -> Self {
        let mut fq = FairQueue::new();
        let parents: Vec<FqGroupId> = match layout {
            Layout::Flat => vec![FqGroupId::ROOT],
            Layout::TwoLevel => {
                let groups = (n as f64).sqrt().ceil() as usize;
                (0..groups)
                    .map(|_| fq.add_group(FqGroupId::ROOT, 100, IoPrioClass::Be).unwrap())
                    .collect()
            }
        };
        let mut bench = Bench {
            fq,
            rng: 0x9e37_79b9_7f4a_7c15,
            now: 0,
            workload,
        };
        let leaves: Vec<LeafId> = (0..n)
            .map(|i| {
                let weight = 100 + (i as u32 % 4) * 100;
                let parent = parents[i % parents.len()];
                bench.fq.add_leaf(parent, weight, IoPrioClass::Be).unwrap()
            })
            .collect();
        for leaf in leaves {
            let size = bench.size();
            bench.fq.activate(leaf, size).unwrap();
        }
        // Warm up: every leaf served a few times, the heaps at their working size.
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

    /// One request's insertion, dispatch and completion.
    #[inline(always)]
    fn request(&mut self) {
        self.now += 10_000;
        let leaf = self.fq.select_next(self.now).unwrap();
        let size = self.size();
        if self.workload == Workload::Churn {
            // Its turn ends with nothing queued (BFQ's expiry of an emptied queue), then its
            // next request arrives.
            self.fq.expire(leaf, size, None).unwrap();
            let next = self.size();
            self.fq.activate(leaf, next).unwrap();
        } else {
            self.fq.charge(leaf, size).unwrap();
        }
    }
}

/// Best-of-`runs` ns per request over `count` requests: (wall clock, on-CPU time).
fn measure(bench: &mut Bench, count: usize, runs: usize) -> (f64, Option<f64>) {
    let result = common::measure(|| bench.request(), count, runs);
    black_box(&bench.fq);
    result
}

fn summary() {
    // Read first, so that a file that does not hold the figures stops the bench at once.
    let dmclock = common::dmclock();
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    for &n in &SIZES {
        let (mut wall_row, mut cpu_row) = (Vec::new(), Vec::new());
        for workload in [Workload::Backlogged, Workload::Churn] {
            for layout in [Layout::Flat, Layout::TwoLevel] {
                let mut bench = Bench::new(n, layout, workload);
                // schedstat advances at scheduler ticks (a few ms): 2 million requests per run
                // keep that within a couple of ns per request.
                let count = 2_000_000usize;
                let (w, c) = measure(&mut bench, count, 5);
                wall_row.push(w);
                cpu_row.push(c);
            }
        }
        wall.push(wall_row);
        cpu.push(cpu_row);
    }
    let table = |title: &str, rows: &[Vec<f64>]| {
        println!("{title}");
        println!(
            "{:>8}  {:>16} {:>16} {:>12} {:>12}  {:>15} {:>15}",
            "leaves",
            "flat backlogged",
            "2-lvl backlogged",
            "flat churn",
            "2-lvl churn",
            "target b / c",
            "dmclock b / c"
        );
        for (i, row) in rows.iter().enumerate() {
            let (backlogged, churn) = (dmclock.backlogged[i], dmclock.churn[i]);
            let cell = |ns: f64, dmclock: f64| {
                format!("{ns:.1}{}", if ns <= dmclock / 3.0 { " " } else { "!" })
            };
            println!(
                "{:>8}  {:>16} {:>16} {:>12} {:>12}  {:>15} {:>15}",
                SIZES[i],
                cell(row[0], backlogged),
                cell(row[1], backlogged),
                cell(row[2], churn),
                cell(row[3], churn),
                format!("{:.0} / {:.0}", backlogged / 3.0, churn / 3.0),
                format!("{backlogged:.0} / {churn:.0}")
            );
        }
        println!();
    };
    println!("fair-queuing layer: ns per request (insert + select + charge), best of 5 runs;");
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
        for layout in [Layout::Flat, Layout::TwoLevel] {
            let mut group = c.benchmark_group(format!("fq/{}/{}", layout.name(), workload.name()));
            group.warm_up_time(Duration::from_millis(500));
            group.measurement_time(Duration::from_secs(2));
            for &n in &SIZES {
                let mut bench = Bench::new(n, layout, workload);
                group.bench_function(BenchmarkId::from_parameter(n), |b| {
                    b.iter(|| bench.request())
                });
            }
            group.finish();
        }
    }
}

/// `FQ_BENCH_ONLY=flat/backlogged/10` runs that one case for `FQ_BENCH_COUNT` requests (20
/// million by default) and prints its cost, nothing else: for profiling (`perf`, cachegrind).
fn only(spec: &str) {
    let parts: Vec<&str> = spec.split('/').collect();
    let layout = if parts[0] == "flat" {
        Layout::Flat
    } else {
        Layout::TwoLevel
    };
    let workload = if parts[1] == "churn" {
        Workload::Churn
    } else {
        Workload::Backlogged
    };
    let n: usize = parts[2]
        .parse()
        .expect("FQ_BENCH_ONLY=layout/workload/leaves");
    let mut bench = Bench::new(n, layout, workload);
    let count = std::env::var("FQ_BENCH_COUNT")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(20_000_000);
    let (ns, cpu) = measure(&mut bench, count, 1);
    match cpu {
        Some(cpu) => println!("{spec}: {ns:.1} ns per request ({cpu:.1} ns on a CPU)"),
        None => println!("{spec}: {ns:.1} ns per request"),
    }
}

fn main() {
    if let Ok(spec) = std::env::var("FQ_BENCH_ONLY") {
        only(&spec);
        return;
    }
    // The summary only under `cargo bench` (Criterion's test mode runs each bench once).
    if std::env::args().any(|arg| arg == "--bench") {
        summary();
    }
    let mut criterion = Criterion::default().configure_from_args();
    criterion_benches(&mut criterion);
    criterion.final_summary();
}

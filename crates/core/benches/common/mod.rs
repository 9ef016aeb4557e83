//! Timing shared by the benches: best of several runs, by the wall clock and on a CPU.

use std::time::Instant;

/// Nanoseconds this thread has spent on a CPU (Linux's schedstat), if available. On a shared
/// machine this leaves out the time the thread waited for a core. It is updated at scheduler
/// ticks and switches, so it needs long runs.
pub fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Best-of-`runs` ns per call of `step` over `count` calls: (wall clock, on-CPU time).
pub fn measure(mut step: impl FnMut(), count: usize, runs: usize) -> (f64, Option<f64>) {
    let mut best = f64::INFINITY;
    let mut best_cpu: Option<f64> = None;
    for _ in 0..runs {
        let cpu_start = cpu_ns();
        let start = Instant::now();
        for _ in 0..count {
            step();
        }
        let elapsed = start.elapsed().as_nanos() as f64 / count as f64;
        best = best.min(elapsed);
        if let (Some(a), Some(b)) = (cpu_start, cpu_ns()) {
            let cpu = b.saturating_sub(a) as f64 / count as f64;
            best_cpu = Some(best_cpu.map_or(cpu, |c: f64| c.min(cpu)));
        }
    }
    (best, best_cpu)
}

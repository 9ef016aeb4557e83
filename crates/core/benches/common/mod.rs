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

/// The numbers of clients (leaves) the benches measure at.
pub const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];

/// dmclock's cost per add+pull at each of [`SIZES`], in ns, as REFERENCE.md gives it: another
/// day's figures, one per size for both workloads.
const REFERENCE_NS: [f64; 4] = [163.0, 369.0, 635.0, 1461.0];

/// What the benches hold themselves to: dmclock's cost per request (add + pull) at each of
/// [`SIZES`], in ns, for each workload, and where those figures come from.
pub struct Dmclock {
    pub backlogged: [f64; 4],
    pub churn: [f64; 4],
    pub source: String,
}

/// REFERENCE.md's figures, unless `DMCLOCK_FIGURES` names a file holding what
/// `scripts/dmclock-bench/run.sh` printed: dmclock measured on this machine, in this session,
/// on the benches' own workloads, so that the comparison is a ratio measured in one sitting. A
/// file that does not hold them ends the bench with a message that says why.
pub fn dmclock() -> Dmclock {
    let Some(path) = std::env::var_os("DMCLOCK_FIGURES") else {
        return Dmclock {
            backlogged: REFERENCE_NS,
            churn: REFERENCE_NS,
            source: "REFERENCE.md's figures, from another day (DMCLOCK_FIGURES=FILE takes \
                     scripts/dmclock-bench/run.sh's output, measured now)"
                .to_string(),
        };
    };
    let path = std::path::PathBuf::from(path);
    let parsed = std::fs::read_to_string(&path)
        .map_err(|error| error.to_string())
        .and_then(|text| dmclock_figures(&text));
    match parsed {
        Ok((backlogged, churn)) => Dmclock {
            backlogged,
            churn,
            source: format!(
                "dmclock measured by scripts/dmclock-bench/run.sh ({})",
                path.display()
            ),
        },
        Err(error) => {
            eprintln!("DMCLOCK_FIGURES={}: {error}", path.display());
            std::process::exit(2);
        }
    }
}

/// The backlogged and churn figures of `scripts/dmclock-bench/run.sh`'s table: a row
/// `CLIENTS BACKLOGGED CHURN` for each of [`SIZES`]; other lines are passed over.
pub fn dmclock_figures(text: &str) -> Result<([f64; 4], [f64; 4]), String> {
    let mut backlogged = [None; 4];
    let mut churn = [None; 4];
    for (number, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [clients, back, turn] = fields[..] else {
            continue;
        };
        let Ok(clients) = clients.parse::<usize>() else {
            continue;
        };
        let at = SIZES
            .iter()
            .position(|&size| size == clients)
            .ok_or_else(|| {
                format!(
                    "line {}: {clients} clients: the benches measure at 10, 100, 1000 and 10000",
                    number + 1
                )
            })?;
        let figure = |text: &str| match text.parse::<f64>() {
            Ok(ns) if ns.is_finite() && ns > 0.0 => Ok(ns),
            _ => Err(format!(
                "line {}: {text:?} is not a cost in ns (a positive number)",
                number + 1
            )),
        };
        backlogged[at] = Some(figure(back)?);
        churn[at] = Some(figure(turn)?);
    }
    let whole = |figures: [Option<f64>; 4]| -> Result<[f64; 4], String> {
        let mut out = [0.0; 4];
        for (at, figure) in figures.iter().enumerate() {
            out[at] = figure.ok_or_else(|| {
                format!(
                    "no row for {} clients (run.sh prints `CLIENTS BACKLOGGED CHURN` rows)",
                    SIZES[at]
                )
            })?;
        }
        Ok(out)
    };
    Ok((whole(backlogged)?, whole(churn)?))
}

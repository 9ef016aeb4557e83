//! Side-by-side text tables of a study.

use crate::figures::{all_figures, duration, rate};
use crate::study::Study;
use std::fmt::Write;

/// For each job and direction: a row per run (policy, and sweep point) with IOPS, bandwidth,
/// mean / p99 / p99.99 / max completion latency, and a mark where the run starved it (see
/// [`starvation`](crate::figures::starvation)); then totals per run.
pub fn side_by_side(study: &Study) -> String {
    let mut out = String::new();
    let keys = crate::figures::study_keys(study);
    let label = |policy: &str, point: Option<&str>| match (point, &study.sweep) {
        (Some(point), Some(sweep)) => format!("{policy} {}={point}", sweep.name),
        _ => policy.to_string(),
    };
    let width = study
        .runs
        .iter()
        .map(|r| label(&r.policy, r.point.as_deref()).len())
        .max()
        .unwrap_or(8)
        .max(8);
    let header = format!(
        "  {:<width$} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "", "IOPS", "bandwidth", "mean", "p99", "p99.99", "max"
    );
    for (job, dir) in &keys {
        writeln!(out, "{job} ({})", dir.name()).unwrap();
        writeln!(out, "{header}").unwrap();
        for run in &study.runs {
            let Some(f) = crate::figures::job_figures(&run.report, job, Some(*dir)) else {
                continue;
            };
            let clat = &f.stats.clat;
            // No samples: no latency to show, rather than 0.
            let latency = |nanos: f64| {
                if clat.count() == 0 {
                    "-".to_string()
                } else {
                    duration(nanos)
                }
            };
            write!(
                out,
                "  {:<width$} {:>10.1} {:>12} {:>10} {:>10} {:>10} {:>10}",
                label(&run.policy, run.point.as_deref()),
                f.iops(),
                rate(f.bandwidth()),
                latency(clat.mean()),
                latency(clat.percentile(99.0) as f64),
                latency(clat.percentile(99.99) as f64),
                latency(clat.max() as f64),
            )
            .unwrap();
            if let Some(mark) = crate::figures::starvation(&f.stats) {
                write!(out, "  {mark}").unwrap();
            }
            out.push('\n');
        }
        out.push('\n');
    }
    writeln!(out, "totals").unwrap();
    writeln!(
        out,
        "  {:<width$} {:>10} {:>12} {:>10} {:>12} {:>8}",
        "", "read IOPS", "read bw", "write IOPS", "write bw", "util"
    )
    .unwrap();
    for run in &study.runs {
        let figures = all_figures(&run.report);
        let total = |dir: iosched_fio::DataDir| {
            figures
                .iter()
                .filter(|f| f.dir == dir)
                .fold((0.0, 0.0), |(iops, bw), f| {
                    (iops + f.iops(), bw + f.bandwidth())
                })
        };
        let (read_iops, read_bw) = total(iosched_fio::DataDir::Read);
        let (write_iops, write_bw) = total(iosched_fio::DataDir::Write);
        writeln!(
            out,
            "  {:<width$} {:>10.1} {:>12} {:>10.1} {:>12} {:>7.1}%",
            label(&run.policy, run.point.as_deref()),
            read_iops,
            rate(read_bw),
            write_iops,
            rate(write_bw),
            run.report.disk.util
        )
        .unwrap();
    }
    out
}

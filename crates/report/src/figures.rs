//! The figures a study compares: per job and direction, from a run's report.
//!
//! Jobs are matched by name. Several jobs of one name (clones from `numjobs`) are pooled: their
//! I/Os and bytes add up and their latency distributions merge, so "writer" means all writers.

use iosched_fio::{DataDir, DirStats, RunReport};

/// One job's (or one name's pooled jobs') figures in one direction.
#[derive(Clone, Debug)]
pub struct JobFigures {
    /// Job name.
    pub job: String,
    /// Direction.
    pub dir: DataDir,
    /// How many job clones were pooled.
    pub clones: usize,
    /// Pooled statistics.
    pub stats: DirStats,
    /// Longest runtime among the pooled jobs, ns.
    pub runtime: u64,
    /// Device time of the pooled jobs (every direction), ns.
    pub device_time: u64,
    /// I/Os of the pooled jobs that failed and were counted (fio's `total_err`, every
    /// direction).
    pub errors: u64,
}

impl JobFigures {
    /// I/Os per second.
    pub fn iops(&self) -> f64 {
        per_second(self.stats.total_ios as f64, self.runtime)
    }

    /// Bytes per second.
    pub fn bandwidth(&self) -> f64 {
        per_second(self.stats.io_bytes as f64, self.runtime)
    }

    /// The highest rate over any second of the run: the mean of each run of consecutive
    /// complete sample windows (fio's 500 ms `iops_avg_time`) that spans a second, `bytes`
    /// choosing bytes per second or I/Os per second. 0 for a run shorter than a second.
    pub fn peak(&self, bytes: bool) -> f64 {
        let series = &self.stats.series;
        let samples = if bytes {
            series.bandwidth_samples(self.runtime)
        } else {
            series.iops_samples(self.runtime)
        };
        let span = (1_000_000_000 / series.window()).max(1) as usize;
        samples
            .windows(span)
            .map(|w| w.iter().sum::<f64>() / span as f64)
            .fold(0.0, f64::max)
    }

    /// A named metric, in base units (ns, bytes/s, I/Os per second, counts):
    /// `iops`, `bw`, `iops_peak` and `bw_peak` (the highest over any second, [`Self::peak`]),
    /// `ios`, `bytes`, `disk_time` (the device's time on them, ns), `errors`
    /// (failed I/Os counted under `continue_on_error`), `clat_mean`, `clat_max`, `clat_min`,
    /// `clat_stddev`,
    /// `clat_pNN` (for example `clat_p99.99`), `clat_over_T` (the I/Os that took longer than
    /// T, for example `clat_over_400ms`), and the same for `lat_` and `slat_`.
    pub fn metric(&self, name: &str) -> Option<f64> {
        match name {
            "iops" => return Some(self.iops()),
            "bw" => return Some(self.bandwidth()),
            "iops_peak" => return Some(self.peak(false)),
            "bw_peak" => return Some(self.peak(true)),
            "ios" => return Some(self.stats.total_ios as f64),
            "bytes" => return Some(self.stats.io_bytes as f64),
            "disk_time" => return Some(self.device_time as f64),
            "errors" => return Some(self.errors as f64),
            _ => {}
        }
        let (kind, what) = name.split_once('_')?;
        let latency = match kind {
            "clat" => &self.stats.clat,
            "lat" => self.stats.lat(),
            "slat" => &self.stats.slat,
            _ => return None,
        };
        match what {
            "mean" => Some(latency.mean()),
            "max" => Some(latency.max() as f64),
            "min" => Some(latency.min() as f64),
            "stddev" => Some(latency.stddev()),
            over if over.starts_with("over_") => {
                // The I/Os that took longer than the bound (to the histogram's 0.1%).
                let bound = duration_nanos(&over["over_".len()..])?;
                Some(
                    latency
                        .count()
                        .saturating_sub(latency.count_below(bound + 1)) as f64,
                )
            }
            percentile => {
                let percent: f64 = percentile.strip_prefix('p')?.parse().ok()?;
                (0.0..=100.0)
                    .contains(&percent)
                    .then(|| latency.percentile(percent) as f64)
            }
        }
    }
}

/// `400ms`, `4s`, `250us`, `10ns` in nanoseconds.
fn duration_nanos(text: &str) -> Option<u64> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = match &text[digits.len()..] {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

fn per_second(amount: f64, runtime: u64) -> f64 {
    if runtime == 0 {
        0.0
    } else {
        amount * 1e9 / runtime as f64
    }
}

/// Names of the metrics [`JobFigures::metric`] knows, for error messages.
pub const METRIC_NAMES: &str =
    "iops, bw, iops_peak, bw_peak (the highest over any second), ios, bytes, disk_time, errors, clat_mean, clat_max, clat_min, clat_stddev, \
                                clat_pNN (e.g. clat_p99.99), clat_over_T (I/Os over T, e.g. clat_over_400ms), and lat_* / slat_* likewise";

/// The figures of the jobs named `job` in direction `dir` (or the direction with the most I/O);
/// `*` pools every job of the run (the device's total).
pub fn job_figures(report: &RunReport, job: &str, dir: Option<DataDir>) -> Option<JobFigures> {
    let matched: Vec<_> = report
        .jobs
        .iter()
        .filter(|j| job == "*" || j.name == job)
        .collect();
    let first = matched.first()?;
    let dir = dir.unwrap_or_else(|| {
        DataDir::ALL
            .into_iter()
            .max_by_key(|&d| {
                (
                    matched.iter().map(|j| j.dir(d).total_ios).sum::<u64>(),
                    std::cmp::Reverse(d),
                )
            })
            .expect("three directions")
    });
    let mut stats = first.dir(dir).clone();
    for other in &matched[1..] {
        stats.merge(other.dir(dir));
    }
    Some(JobFigures {
        job: job.to_string(),
        dir,
        clones: matched.len(),
        stats,
        runtime: matched.iter().map(|j| j.runtime).max().unwrap_or(0),
        device_time: matched.iter().map(|j| j.device_time).sum(),
        errors: matched.iter().map(|j| j.total_err).sum(),
    })
}

/// Every (job name, direction) with I/O in `report`, in job order, names pooled.
pub fn all_figures(report: &RunReport) -> Vec<JobFigures> {
    let mut names: Vec<&str> = Vec::new();
    for job in &report.jobs {
        if !names.contains(&job.name.as_str()) {
            names.push(&job.name);
        }
    }
    let mut out = Vec::new();
    for name in names {
        for dir in DataDir::ALL {
            if let Some(figures) = job_figures(report, name, Some(dir)) {
                if figures.stats.total_ios > 0 || figures.stats.queued_at_end > 0 {
                    out.push(figures);
                }
            }
        }
    }
    out
}

/// The mark of a starved direction, or `None`: `starved: no I/O completed within the runtime
/// (16 queued at its end, the oldest for 29.87s)`, or `starved: no I/O completed` when nothing
/// completed even after it. A run's figures then come only from I/Os that completed after the
/// runtime (fio waits for them), which must not pass for a slow but served job.
pub fn starvation(stats: &DirStats) -> Option<String> {
    if stats.total_ios == 0 {
        return Some("starved: no I/O completed".into());
    }
    stats.starved().then(|| {
        format!(
            "starved: no I/O completed within the runtime ({} queued at its end, the oldest \
             for {})",
            stats.queued_at_end,
            duration(stats.oldest_queued_at_end as f64)
        )
    })
}

/// Every (job name, direction) with I/O in any run of `study`, in order of first appearance:
/// the rows a comparison shows for every run, so that a run that starved one keeps its row.
pub fn study_keys(study: &crate::study::Study) -> Vec<(String, DataDir)> {
    let mut keys: Vec<(String, DataDir)> = Vec::new();
    for run in &study.runs {
        for figures in all_figures(&run.report) {
            let key = (figures.job, figures.dir);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// A duration in ns as a short human figure (us, ms or s).
pub fn duration(nanos: f64) -> String {
    if nanos < 1e6 {
        format!("{:.1}us", nanos / 1e3)
    } else if nanos < 1e9 {
        format!("{:.1}ms", nanos / 1e6)
    } else {
        format!("{:.2}s", nanos / 1e9)
    }
}

/// A rate in bytes/s as a short human figure (KiB/s or MiB/s).
pub fn rate(bytes_per_second: f64) -> String {
    if bytes_per_second < 1024.0 * 1024.0 {
        format!("{:.1}KiB/s", bytes_per_second / 1024.0)
    } else {
        format!("{:.1}MiB/s", bytes_per_second / (1024.0 * 1024.0))
    }
}

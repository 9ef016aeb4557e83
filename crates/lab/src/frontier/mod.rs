//! The frontier study (`iosched frontier`): a latency-sensitive foreground beside a throughput-hungry background on
//! a real device, under the kernel's schedulers (through fio) and iosched's policies (through
//! the real engine), each placed against the device's own latency/throughput curve.
//!
//! # What it runs
//!
//! Everything is 4 KiB random reads with `direct=1` through io_uring (some depths of fio's
//! curve aside, see 2), each run `--runtime` seconds, one after the other on one device (by
//! default a loop device over a file, created with `losetup --direct-io=on` and removed at the
//! end):
//!
//! 1. **alone**: the foreground only (QD1, RT class), with fio and with iosched `noop`. fio's
//!    mean latency is the *alone latency* the targets are multiples of;
//! 2. **the curve**: one job at each of `--depths` (default 1..32), with fio and with iosched
//!    `noop`, the device scheduler `none`: IOPS and mean latency at each depth. fio before 3.39
//!    drives an io_uring depth that is not a power of two as the next one
//!    ([`fio_rounds_uring_depth`]), so with such a fio its curve runs those depths through
//!    libaio, with a note;
//! 3. **the mix**: the foreground (QD1, RT) against two background jobs (QD32, IDLE), with fio
//!    under each kernel scheduler (`none`, `mq-deadline`, `kyber`, `bfq`), and with iosched
//!    under each of its policies (scheduler `none`), the `latency` policy once per target
//!    (`--targets`, multiples of the alone latency), in `--slices` slices, each followed by
//!    fio at the two depths whose latencies bracket its foreground's, to have the curve
//!    *beside* it (see below); and iosched's
//!    io.latency and io.cost (`--controllers`) at each target, the foreground in cgroup /fg
//!    (io.weight 1000) and the background in /bg (100): io.latency's target on /fg, io.cost's
//!    read latency target at the median with a cost model from the curve's deepest IOPS; and
//!    the kernel's own io.latency and io.cost (`--kernel-controllers`) with the same files,
//!    fio's jobs in cgroups of the v2 hierarchy (see [`kernel`]);
//! 4. **overhead and drift**: fio and iosched noop at the deepest depth again, in pairs back to
//!    back, and fio alone again: the engine's overhead ratio (iosched IOPS / fio IOPS, the
//!    median over these pairs and the curves'), and how much the device moved during the run.
//!
//! With `--rounds N`, steps 1-3 run N times in turn and every figure is the median of its
//! rounds.
//!
//! Each mix is placed on the curve: the curve allows, at a mean latency `L`, the most IOPS the
//! device reaches one job at some depth with a mean latency no higher than `L` (linear between
//! measured depths); a scheduler's *fraction* is its total IOPS over what the curve allows at
//! its foreground's mean latency. The latency targets are held to the curve beside them: the
//! run's curve is minutes older, and a loaded machine moves the device by more than the margins
//! in question.
//!
//! Beside means over the same seconds. On this project's loop device the foreground's alone
//! latency moved between 63 and 146 us within seconds; near the alone latency the curve is
//! steep (QD1 to QD4 is three times the IOPS for 15% more latency), so a mix run in a slow
//! spell and a curve measured after it gave 53-76% where the same policy gave 91-117% in the
//! runs around it. So a claimed mix runs as `--slices` runs of `runtime / slices`, each
//! followed by fio at the two bracketing depths (those where the first slice landed on the
//! run's curve), and the mix and each depth are pooled over their slices (IOPS averaged,
//! latency weighted by I/Os, the highest 99th percentile): an A/B comparison interleaved, as
//! one interleaves benchmarks on a noisy machine. Every slice but the first starts with a ramp
//! of one slice that is left out of its figures (fio's `ramp_time`): the policy starts afresh
//! in each run, and its search for the depth is counted once, as in one run of `runtime`.
//!
//! The pure parts (the curve, fio's JSON, the table) are tested here; the run itself needs
//! root (losetup, the scheduler files in sysfs, the RT class, cgroups) and minutes, so only a
//! brief version of it runs in the test suite (`crates/cli/tests/frontier.rs`).

mod device;
pub mod kernel;
mod runs;
#[cfg(test)]
mod tests;

pub use runs::run;

use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use iosched_fio::{DataDir, RunReport};
use iosched_report::figures::{duration, job_figures};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The overhead claim: iosched noop reaches this fraction of fio's IOPS, one job at QD32.
pub const OVERHEAD_CLAIM: f64 = 0.90;

/// The frontier claim: the latency policy reaches this fraction of the curve's IOPS at its
/// foreground's latency.
pub const FRONTIER_CLAIM: f64 = 0.85;

/// What the study runs, as `iosched frontier`'s options give it (their defaults are the
/// command's).
#[derive(Clone, Debug)]
pub struct Options {
    /// Run on this block device instead of a loop device over --file. Only reads are issued;
    /// its scheduler is switched for the kernel runs and restored at the end.
    pub device: Option<PathBuf>,
    /// The loop device's backing file: created and filled with random data if it is missing or
    /// not fully allocated, removed at the end if this run created it (unless --keep-file).
    pub file: PathBuf,
    /// Size of the backing file, in MiB.
    pub size_mib: u64,
    /// Keep a backing file this run created.
    pub keep_file: bool,
    /// Seconds per run.
    pub runtime: u64,
    /// Queue depths of the device's curve.
    pub depths: Vec<u32>,
    /// Kernel schedulers to run the mix under with fio (each is skipped, with a note, if the
    /// device does not offer it even after modprobe).
    pub kernel: Vec<String>,
    /// iosched policies to run the mix under (the device's scheduler set to none); the latency
    /// policy is run once per --targets.
    pub policies: Vec<String>,
    /// Targets of the latency policy, as multiples of the foreground's alone latency.
    pub targets: Vec<f64>,
    /// Targets to run the latency policy at again with forward_prio=1 (each request reaches
    /// the device with its own priority), to show what the layers below do with it. Each list
    /// option given without a value is empty: `--forwarded-targets` runs none.
    pub forwarded_targets: Vec<f64>,
    /// Linux's cgroup controllers to run at each of --targets as iosched runs them
    /// (`io.latency`, `io.cost`), with the foreground in /fg and the background in /bg.
    pub controllers: Vec<String>,
    /// Linux's own cgroup controllers (`io.latency`, `io.cost`) to run the mix under with fio
    /// at each of --targets, with the same files as iosched's (each is skipped, with a note,
    /// where the kernel or the cgroup v2 hierarchy lacks it).
    pub kernel_controllers: Vec<String>,
    /// Rounds: everything but the overhead pairs and the drift runs this many times, in turn,
    /// and every figure is the median of its rounds (each mix also shows its fraction of the
    /// curve in each round). One round takes about eight minutes.
    pub rounds: u32,
    /// Extra pairs of single-job runs at the deepest depth, fio then iosched noop, for the
    /// overhead ratio (the median over these and the curves' pairs).
    pub overhead_pairs: u32,
    /// Slices of each claimed mix (the latency policy at each of --targets): the mix runs as
    /// this many runs of `runtime / slices`, each followed by fio at the two depths that
    /// bracket its foreground's latency, so that the mix and the curve beside it sample the
    /// device over the same seconds. Every slice's mix but the first starts with a ramp of
    /// one slice, left out of its figures, so that the policy's search for the depth counts
    /// once, as in one run. 1: one run, then the curve beside it.
    pub slices: u32,
    /// iosched's device depth (most requests in flight; --device-depth of `iosched run`).
    /// Default: the device's own queue depth (its nr_requests under none), so that iosched
    /// keeps as many requests in flight and in its scheduler (twice that) as the kernel does.
    pub device_depth: Option<u32>,
    /// The fio to compare with.
    pub fio: PathBuf,
    /// Set (by a signal handler, say) to stop between runs; the loop device and the file are
    /// cleaned up all the same.
    pub stop: Arc<AtomicBool>,
}

/// IOPS and latency of one job, or of the jobs of one name pooled.
///
/// Latency is fio's `lat`, from the moment the I/O is issued to its completion: fio's `clat`
/// starts only after the submitting system call returns, which on a loop device takes a good
/// part of a QD1 read, while iosched's `clat` starts when the request enters the scheduler.
/// `lat` is the same span in both.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Measure {
    /// I/Os per second.
    pub iops: f64,
    /// Mean latency, ns.
    pub mean_ns: f64,
    /// 99th percentile of latency, ns.
    pub p99_ns: f64,
}

impl Measure {
    /// Runs of equal length pooled: their IOPS averaged, their mean latency weighted by
    /// their I/Os, and the highest of their 99th percentiles (a bound on the pooled one, as
    /// at most 1% of each run's I/Os are above it). `None` for no runs.
    pub fn pool(runs: &[Measure]) -> Option<Measure> {
        if runs.is_empty() {
            return None;
        }
        let ios: f64 = runs.iter().map(|m| m.iops).sum();
        let mean_ns = if ios > 0.0 {
            runs.iter().map(|m| m.iops * m.mean_ns).sum::<f64>() / ios
        } else {
            runs.iter().map(|m| m.mean_ns).sum::<f64>() / runs.len() as f64
        };
        Some(Measure {
            iops: ios / runs.len() as f64,
            mean_ns,
            p99_ns: runs.iter().map(|m| m.p99_ns).fold(0.0, f64::max),
        })
    }
}

/// One point of the device's curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurvePoint {
    /// Queue depth of the single job.
    pub depth: u32,
    /// IOPS at that depth.
    pub iops: f64,
    /// Mean completion latency at that depth, ns.
    pub mean_ns: f64,
}

/// The device's throughput against its latency, one job at several depths.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Curve {
    /// Points in the order measured (increasing depth).
    pub points: Vec<CurvePoint>,
}

impl Curve {
    /// The most IOPS the curve reaches at a mean latency of at most `latency_ns`: the best
    /// measured point under it, or a point on the line between two consecutive depths whose
    /// latencies lie on either side of it. A latency below every measured one is held to the
    /// lowest (no scheduler beats the device alone); `None` for an empty curve.
    pub fn allowed_iops(&self, latency_ns: f64) -> Option<f64> {
        let lowest = self
            .points
            .iter()
            .min_by(|a, b| a.mean_ns.total_cmp(&b.mean_ns))?;
        let latency = latency_ns.max(lowest.mean_ns);
        let mut best = lowest.iops;
        for point in &self.points {
            if point.mean_ns <= latency {
                best = best.max(point.iops);
            }
        }
        for pair in self.points.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let (low, high) = if a.mean_ns <= b.mean_ns {
                (a, b)
            } else {
                (b, a)
            };
            if low.mean_ns < latency && latency < high.mean_ns {
                let along = (latency - low.mean_ns) / (high.mean_ns - low.mean_ns);
                best = best.max(low.iops + along * (high.iops - low.iops));
            }
        }
        Some(best)
    }

    /// The depths whose points bracket `latency_ns`: the first two consecutive depths whose
    /// latencies lie on either side of it, or the two shallowest (below every latency), or the
    /// two deepest (above every latency); one depth for a curve of one point.
    pub fn bracket(&self, latency_ns: f64) -> Vec<u32> {
        let points = &self.points;
        match points.len() {
            0 => return Vec::new(),
            1 => return vec![points[0].depth],
            _ => {}
        }
        let pair = points
            .windows(2)
            .find(|pair| {
                let low = pair[0].mean_ns.min(pair[1].mean_ns);
                let high = pair[0].mean_ns.max(pair[1].mean_ns);
                low <= latency_ns && latency_ns <= high
            })
            .map(|pair| (pair[0].depth, pair[1].depth));
        let (a, b) = pair.unwrap_or_else(|| {
            if points.iter().all(|p| latency_ns < p.mean_ns) {
                (points[0].depth, points[1].depth)
            } else {
                let n = points.len();
                (points[n - 2].depth, points[n - 1].depth)
            }
        });
        vec![a, b]
    }

    /// The deepest point.
    pub fn deepest(&self) -> Option<CurvePoint> {
        self.points.iter().copied().max_by_key(|p| p.depth)
    }
}

/// Whether `fio --version`'s answer (`fio-3.33`) names a release whose io_uring engine drives a
/// non-power-of-two `iodepth` as the next power of two: before 3.39 its `fio_ioring_init` set
/// `td->o.iodepth = roundup_pow2(td->o.iodepth)` for the ring's sake, so that `iodepth=3` kept
/// 4 reads in flight (here: 44.7K IOPS at a mean of 89.3 us, 4.0 in flight by Little's law).
/// fio 3.39 sizes only the ring so (commit af0ad0fa, "engines/io_uring: don't mess with non
/// power-of-2 queue depth"). A version it cannot read is taken to honour the depth.
pub fn fio_rounds_uring_depth(version: &str) -> bool {
    let Some(number) = version.trim().strip_prefix("fio-") else {
        return false;
    };
    let mut parts = number.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (major, minor) {
        (Some(major), Some(minor)) => (major, minor) < (3, 39),
        _ => false,
    }
}

/// One job of fio's JSON output (reads only).
#[derive(Clone, Debug, PartialEq)]
pub struct FioJob {
    /// `jobname`.
    pub name: String,
    /// Reads completed.
    pub ios: u64,
    /// Read IOPS.
    pub iops: f64,
    /// Mean read latency (`lat`: submission and completion), ns.
    pub mean_ns: f64,
    /// 99th percentile of read latency, ns (needs `lat_percentiles=1`).
    pub p99_ns: f64,
    /// fio's error for the job.
    pub error: i64,
}

/// The jobs of fio's `--output-format=json` output. Text fio prints before the JSON (notes,
/// warnings) is skipped.
pub fn parse_fio_json(text: &str) -> Result<Vec<FioJob>> {
    let start = text
        .find('{')
        .context("fio printed no JSON (is --output-format=json supported?)")?;
    let value: Value = serde_json::from_str(&text[start..]).context("fio's JSON")?;
    let jobs = value["jobs"]
        .as_array()
        .context("fio's JSON has no \"jobs\" array")?;
    jobs.iter()
        .map(|job| {
            let read = &job["read"];
            let lat = &read["lat_ns"];
            Ok(FioJob {
                name: job["jobname"]
                    .as_str()
                    .context("a fio job without a jobname")?
                    .to_string(),
                ios: read["total_ios"].as_u64().unwrap_or(0),
                iops: read["iops"]
                    .as_f64()
                    .context("a fio job without read iops")?,
                mean_ns: lat["mean"].as_f64().unwrap_or(0.0),
                p99_ns: lat["percentile"]["99.000000"].as_f64().unwrap_or(0.0),
                error: job["error"].as_i64().unwrap_or(0),
            })
        })
        .collect()
}

/// fio's jobs named `name`, pooled: IOPS add up, the mean is weighted by I/Os, the p99 is the
/// worst clone's (exact for one job). `None` when no job has that name.
pub fn pool_fio(jobs: &[FioJob], name: &str) -> Option<Measure> {
    let matched: Vec<&FioJob> = jobs.iter().filter(|j| j.name == name).collect();
    if matched.is_empty() {
        return None;
    }
    let ios: u64 = matched.iter().map(|j| j.ios).sum();
    let mean_ns = if ios == 0 {
        0.0
    } else {
        matched
            .iter()
            .map(|j| j.mean_ns * j.ios as f64)
            .sum::<f64>()
            / ios as f64
    };
    Some(Measure {
        iops: matched.iter().map(|j| j.iops).sum(),
        mean_ns,
        p99_ns: matched.iter().map(|j| j.p99_ns).fold(0.0, f64::max),
    })
}

/// iosched's jobs named `name`, pooled (reads).
pub fn pool_report(report: &RunReport, name: &str) -> Option<Measure> {
    let figures = job_figures(report, name, Some(DataDir::Read))?;
    Some(Measure {
        iops: figures.iops(),
        mean_ns: figures.stats.lat().mean(),
        p99_ns: figures.stats.lat().percentile(99.0) as f64,
    })
}

/// The job files, identical for fio and iosched.
pub mod jobs {
    /// How long a job file's jobs run: `runtime`, after a `ramp_time` whose figures are left
    /// out (fio's). A whole number of seconds converts into one with no ramp.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Timing {
        /// Measured run time, ms.
        pub runtime_ms: u64,
        /// Run time before it, not measured, ms.
        pub ramp_ms: u64,
    }

    impl From<u64> for Timing {
        fn from(seconds: u64) -> Self {
            Timing {
                runtime_ms: seconds.saturating_mul(1000),
                ramp_ms: 0,
            }
        }
    }

    /// `ms` as a fio time: whole seconds as a plain number, as before there were slices.
    fn time(ms: u64) -> String {
        if ms.is_multiple_of(1000) {
            (ms / 1000).to_string()
        } else {
            format!("{ms}ms")
        }
    }

    /// What every job shares: 4 KiB random reads, direct, io_uring, time based, percentiles
    /// of the whole latency.
    fn global(filename: &str, timing: impl Into<Timing>) -> String {
        let timing = timing.into();
        let mut text = format!(
            "[global]\nfilename={filename}\nrw=randread\nbs=4k\ndirect=1\nioengine=io_uring\n\
             runtime={}\ntime_based=1\nlat_percentiles=1\n",
            time(timing.runtime_ms)
        );
        if timing.ramp_ms > 0 {
            text += &format!("ramp_time={}\n", time(timing.ramp_ms));
        }
        text
    }

    /// The foreground: QD1, real-time class, level 0.
    const FOREGROUND: &str = "\n[fg]\niodepth=1\nprioclass=1\nprio=0\n";

    /// The foreground alone.
    pub fn alone(filename: &str, runtime: impl Into<Timing>) -> String {
        global(filename, runtime) + FOREGROUND
    }

    /// One job at queue depth `depth`, no priority.
    pub fn curve(filename: &str, runtime: impl Into<Timing>, depth: u32) -> String {
        global(filename, runtime) + &format!("\n[curve]\niodepth={depth}\n")
    }

    /// [`curve`] for a fio that drives an io_uring depth that is not a power of two as the
    /// next one when `rounds` ([`fio_rounds_uring_depth`]): such a depth then goes through
    /// libaio, which keeps it (on a loop device here, 2.99 reads in flight at `iodepth=3`
    /// against io_uring's 3.99, and within 5% of io_uring's IOPS at QD2 and QD4).
    pub fn curve_fio(
        filename: &str,
        runtime: impl Into<Timing>,
        depth: u32,
        rounds: bool,
    ) -> String {
        let text = curve(filename, runtime, depth);
        if rounds && !depth.is_power_of_two() {
            text + "ioengine=libaio\n"
        } else {
            text
        }
    }

    /// The foreground against two background jobs (QD32, idle class).
    pub fn mix(filename: &str, runtime: impl Into<Timing>) -> String {
        global(filename, runtime)
            + FOREGROUND
            + "\n[bg]\niodepth=32\nprioclass=3\nprio=0\nnumjobs=2\n"
    }

    /// The mix with the foreground in cgroup `fg` and the background in `bg`, each line of
    /// `extra` added to both.
    fn mix_in(
        filename: &str,
        runtime: impl Into<Timing>,
        fg: &str,
        bg: &str,
        extra: &str,
    ) -> String {
        global(filename, runtime)
            + FOREGROUND
            + &format!("cgroup={fg}\n{extra}")
            + &format!("\n[bg]\niodepth=32\nprioclass=3\nprio=0\nnumjobs=2\ncgroup={bg}\n{extra}")
    }

    /// The mix with the foreground in cgroup /fg and the background in /bg, for iosched's
    /// cgroup controllers (its own groups: only iosched runs it).
    pub fn mix_grouped(filename: &str, runtime: impl Into<Timing>) -> String {
        mix_in(filename, runtime, "/fg", "/bg", "")
    }

    /// The mix for fio in the kernel's cgroups `fg` and `bg` (names under the v2 root), which
    /// the study made and removes itself.
    pub fn mix_kernel(filename: &str, runtime: impl Into<Timing>, fg: &str, bg: &str) -> String {
        mix_in(filename, runtime, fg, bg, "cgroup_nodelete=1\n")
    }
}

/// One scheduler's mix.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MixRow {
    /// `fio none`, `iosched latency 1.3x`, ...
    pub label: String,
    /// The foreground.
    pub fg: Measure,
    /// The background, pooled.
    pub bg: Measure,
    /// Whether the row is held to the frontier claim (>= 85% of the curve): the latency
    /// policy at each of --targets.
    pub claim: bool,
    /// The latency policy's target in each round, us (it follows each round's alone latency).
    pub targets_us: Vec<u64>,
    /// The latency policy's mean background depth in each round.
    pub depths: Vec<f64>,
    /// With several rounds: the fraction of the curve in each round, against that round's own
    /// curve.
    pub round_fractions: Vec<f64>,
    /// For the claimed rows, in each round: the fraction of the curve re-measured beside the
    /// mix (the two depths that bracket its foreground's latency, run with fio after each of
    /// its slices), which leaves out how far the device drifted since the curve was measured.
    pub beside_fractions: Vec<f64>,
}

impl MixRow {
    /// Foreground and background IOPS.
    pub fn total_iops(&self) -> f64 {
        self.fg.iops + self.bg.iops
    }

    /// The median fraction of the curve re-measured beside the mix, if it was.
    pub fn beside(&self) -> Option<f64> {
        (!self.beside_fractions.is_empty()).then(|| median(&self.beside_fractions))
    }

    /// The remark the table shows: the target, the mean depth, and each round's fraction.
    pub fn note(&self) -> String {
        let mut parts = Vec::new();
        if let Some(targets) = span(
            &self
                .targets_us
                .iter()
                .map(|&t| t as f64)
                .collect::<Vec<_>>(),
            0,
        ) {
            parts.push(format!("target {targets}us"));
        }
        if let Some(depths) = span(&self.depths, 1) {
            parts.push(format!("mean bg depth {depths}"));
        }
        if self.round_fractions.len() > 1 {
            let fractions: Vec<String> = self.round_fractions.iter().map(|&f| percent(f)).collect();
            parts.push(format!("rounds {}", fractions.join(" ")));
        }
        parts.join(", ")
    }
}

/// `values` as one figure or a range, with `decimals`; `None` when empty.
fn span(values: &[f64], decimals: usize) -> Option<String> {
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.is_empty() {
        None
    } else if format!("{low:.decimals$}") == format!("{high:.decimals$}") {
        Some(format!("{low:.decimals$}"))
    } else {
        Some(format!("{low:.decimals$}-{high:.decimals$}"))
    }
}

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn median_measure(measures: &[Measure]) -> Measure {
    let pick = |f: fn(&Measure) -> f64| median(&measures.iter().map(f).collect::<Vec<_>>());
    Measure {
        iops: pick(|m| m.iops),
        mean_ns: pick(|m| m.mean_ns),
        p99_ns: pick(|m| m.p99_ns),
    }
}

fn median_curve(curves: &[&Curve]) -> Curve {
    let Some(first) = curves.first() else {
        return Curve::default();
    };
    let points = first
        .points
        .iter()
        .map(|point| {
            let same: Vec<&CurvePoint> = curves
                .iter()
                .filter_map(|c| c.points.iter().find(|p| p.depth == point.depth))
                .collect();
            CurvePoint {
                depth: point.depth,
                iops: median(&same.iter().map(|p| p.iops).collect::<Vec<_>>()),
                mean_ns: median(&same.iter().map(|p| p.mean_ns).collect::<Vec<_>>()),
            }
        })
        .collect();
    Curve { points }
}

/// Everything a frontier run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frontier {
    /// What ran where.
    pub setup: String,
    /// Seconds per run.
    pub runtime: u64,
    /// Slices of each claimed mix (`--slices`).
    pub slices: u32,
    /// The foreground alone under fio (its mean is the alone latency).
    pub alone_fio: Measure,
    /// The foreground alone under iosched noop.
    pub alone_iosched: Option<Measure>,
    /// The device's curve, through fio.
    pub curve_fio: Curve,
    /// The device's curve, through iosched noop.
    pub curve_iosched: Curve,
    /// Every mix, kernel schedulers first.
    pub mixes: Vec<MixRow>,
    /// The foreground alone again at the end (fio).
    pub drift_alone: Option<Measure>,
    /// The deepest curve point again at the end (fio).
    pub drift_deepest: Option<CurvePoint>,
    /// Single-job IOPS at the deepest depth, (fio, iosched noop), the curves' pairs first.
    pub overhead_pairs: Vec<(f64, f64)>,
    /// Rounds the figures are medians of.
    pub rounds: usize,
    /// Notes (schedulers skipped, ...).
    pub notes: Vec<String>,
}

/// `123456.0` as `123.5K`.
pub fn kilo(iops: f64) -> String {
    if iops >= 1000.0 {
        format!("{:.1}K", iops / 1000.0)
    } else {
        format!("{iops:.0}")
    }
}

fn percent(fraction: f64) -> String {
    if fraction.is_finite() {
        format!("{:.1}%", fraction * 100.0)
    } else {
        "-".into()
    }
}

impl Frontier {
    /// iosched noop's IOPS at the deepest depth over fio's: the median over the pairs.
    pub fn overhead_ratio(&self) -> Option<f64> {
        let ratios: Vec<f64> = self.overhead_pairs.iter().map(|(f, i)| i / f).collect();
        (!ratios.is_empty()).then(|| median(&ratios))
    }

    /// Rounds of one run in one: every figure the median of its rounds, mixes matched by
    /// label, the curves point by point; each mix keeps its fraction of the curve in each round
    /// (against that round's own curve), its targets and depths. The curves' pairs at the
    /// deepest depth become overhead pairs.
    pub fn combine(rounds: &[Frontier]) -> Frontier {
        let Some(first) = rounds.first() else {
            return Frontier::default();
        };
        let alone_iosched: Vec<Measure> = rounds.iter().filter_map(|r| r.alone_iosched).collect();
        let mut combined = Frontier {
            setup: first.setup.clone(),
            runtime: first.runtime,
            alone_fio: median_measure(&rounds.iter().map(|r| r.alone_fio).collect::<Vec<_>>()),
            alone_iosched: (!alone_iosched.is_empty()).then(|| median_measure(&alone_iosched)),
            curve_fio: median_curve(&rounds.iter().map(|r| &r.curve_fio).collect::<Vec<_>>()),
            curve_iosched: median_curve(
                &rounds.iter().map(|r| &r.curve_iosched).collect::<Vec<_>>(),
            ),
            notes: first.notes.clone(),
            rounds: rounds.len(),
            ..Frontier::default()
        };
        for row in &first.mixes {
            let same: Vec<(&Frontier, &MixRow)> = rounds
                .iter()
                .filter_map(|r| {
                    r.mixes
                        .iter()
                        .find(|m| m.label == row.label)
                        .map(|m| (r, m))
                })
                .collect();
            combined.mixes.push(MixRow {
                label: row.label.clone(),
                fg: median_measure(&same.iter().map(|(_, m)| m.fg).collect::<Vec<_>>()),
                bg: median_measure(&same.iter().map(|(_, m)| m.bg).collect::<Vec<_>>()),
                claim: row.claim,
                targets_us: same
                    .iter()
                    .flat_map(|(_, m)| m.targets_us.clone())
                    .collect(),
                depths: same.iter().flat_map(|(_, m)| m.depths.clone()).collect(),
                round_fractions: same
                    .iter()
                    .filter_map(|(r, m)| Self::fraction(&r.curve_fio, m))
                    .collect(),
                beside_fractions: same
                    .iter()
                    .flat_map(|(_, m)| m.beside_fractions.clone())
                    .collect(),
            });
        }
        for round in rounds {
            let Some(fio) = round.curve_fio.deepest() else {
                continue;
            };
            if let Some(iosched) = round
                .curve_iosched
                .points
                .iter()
                .find(|p| p.depth == fio.depth)
            {
                combined.overhead_pairs.push((fio.iops, iosched.iops));
            }
        }
        combined
    }

    /// The claims and whether they hold: the overhead (iosched noop >= 90% of fio's IOPS) and
    /// the frontier (each claimed latency row >= 85% of the curve at its foreground latency).
    pub fn verdicts(&self) -> Vec<(bool, String)> {
        let mut out = Vec::new();
        if let (Some(ratio), Some(deepest)) = (self.overhead_ratio(), self.curve_fio.deepest()) {
            out.push((
                ratio >= OVERHEAD_CLAIM,
                format!(
                    "overhead: iosched noop reaches >= {} of fio's IOPS at QD{} (median {})",
                    percent(OVERHEAD_CLAIM),
                    deepest.depth,
                    percent(ratio)
                ),
            ));
        }
        for row in self.mixes.iter().filter(|r| r.claim) {
            let fraction = Self::fraction(&self.curve_fio, row).unwrap_or(f64::NAN);
            let alone = row.fg.mean_ns / self.alone_fio.mean_ns;
            let claim = match row.beside() {
                // The curve beside the mix decides: the run's curve was measured minutes
                // earlier, and the device moves.
                Some(beside) => (
                    beside >= FRONTIER_CLAIM,
                    format!(
                        "frontier: {} reaches >= {} of the curve at its foreground latency, \
                         re-measured beside it ({}; {} of the run's curve; fg at {alone:.2}x alone)",
                        row.label,
                        percent(FRONTIER_CLAIM),
                        percent(beside),
                        percent(fraction),
                    ),
                ),
                None => (
                    fraction >= FRONTIER_CLAIM,
                    format!(
                        "frontier: {} reaches >= {} of the curve at its foreground latency ({}, \
                         fg at {alone:.2}x alone)",
                        row.label,
                        percent(FRONTIER_CLAIM),
                        percent(fraction),
                    ),
                ),
            };
            out.push(claim);
        }
        out
    }

    /// The fraction of the curve (fio's, or iosched noop's) a mix reaches.
    pub fn fraction(curve: &Curve, row: &MixRow) -> Option<f64> {
        curve
            .allowed_iops(row.fg.mean_ns)
            .map(|allowed| row.total_iops() / allowed)
    }

    /// The table, as printed and written to the results file.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let w = &mut out;
        writeln!(w, "iosched frontier: {}", self.setup).unwrap();
        writeln!(
            w,
            "4 KiB random reads, direct=1, io_uring, {} s per run; fg: QD1 RT 0; bg: 2 jobs QD32 IDLE",
            self.runtime
        )
        .unwrap();
        if self.slices > 1 {
            writeln!(
                w,
                "each latency target's mix in {} slices, each followed by the curve beside it",
                self.slices
            )
            .unwrap();
        }
        if self.rounds > 1 {
            writeln!(
                w,
                "every figure is the median of {} rounds run in turn",
                self.rounds
            )
            .unwrap();
        }
        writeln!(w).unwrap();
        let measure = |m: &Measure| {
            format!(
                "{} IOPS, mean {}, p99 {}",
                kilo(m.iops),
                duration(m.mean_ns),
                duration(m.p99_ns)
            )
        };
        writeln!(w, "alone (fg only):  fio {}", measure(&self.alone_fio)).unwrap();
        if let Some(alone) = &self.alone_iosched {
            writeln!(w, "                  iosched noop {}", measure(alone)).unwrap();
        }
        writeln!(w).unwrap();
        writeln!(w, "device curve (one job, scheduler none)").unwrap();
        writeln!(
            w,
            "  {:>4} {:>10} {:>10} {:>14} {:>10}",
            "QD", "fio IOPS", "fio mean", "iosched IOPS", "mean"
        )
        .unwrap();
        for point in &self.curve_fio.points {
            let iosched = self
                .curve_iosched
                .points
                .iter()
                .find(|p| p.depth == point.depth);
            writeln!(
                w,
                "  {:>4} {:>10} {:>10} {:>14} {:>10}",
                point.depth,
                kilo(point.iops),
                duration(point.mean_ns),
                iosched.map_or("-".into(), |p| kilo(p.iops)),
                iosched.map_or("-".into(), |p| duration(p.mean_ns)),
            )
            .unwrap();
        }
        if let (Some(ratio), Some(fio)) = (self.overhead_ratio(), self.curve_fio.deepest()) {
            let pairs: Vec<String> = self
                .overhead_pairs
                .iter()
                .map(|(f, i)| format!("{} vs {} ({})", kilo(*i), kilo(*f), percent(i / f)))
                .collect();
            writeln!(
                w,
                "overhead: iosched noop / fio IOPS at QD{}, one job, in pairs run back to back: {}; \
                 median {}",
                fio.depth,
                pairs.join(", "),
                percent(ratio)
            )
            .unwrap();
        }
        writeln!(w).unwrap();
        let width = self
            .mixes
            .iter()
            .map(|r| r.label.len())
            .max()
            .unwrap_or(9)
            .max(9);
        writeln!(
            w,
            "  {:<width$} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8}  note",
            "scheduler",
            "total",
            "fg IOPS",
            "fg mean",
            "fg p99",
            "bg IOPS",
            "fg/alone",
            "curve@fg",
            "of curve",
            "beside",
            "of ios.",
        )
        .unwrap();
        for row in &self.mixes {
            let allowed = self.curve_fio.allowed_iops(row.fg.mean_ns);
            writeln!(
                w,
                "  {:<width$} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8}  {}",
                row.label,
                kilo(row.total_iops()),
                kilo(row.fg.iops),
                duration(row.fg.mean_ns),
                duration(row.fg.p99_ns),
                kilo(row.bg.iops),
                format!("{:.2}x", row.fg.mean_ns / self.alone_fio.mean_ns),
                allowed.map_or("-".into(), kilo),
                percent(Self::fraction(&self.curve_fio, row).unwrap_or(f64::NAN)),
                percent(row.beside().unwrap_or(f64::NAN)),
                percent(Self::fraction(&self.curve_iosched, row).unwrap_or(f64::NAN)),
                row.note()
            )
            .unwrap();
        }
        writeln!(
            w,
            "curve@fg: the most IOPS the device gives one fio job at a mean latency no higher than \
             the foreground's (linear between depths);\nof curve: total / curve@fg; beside: the \
             same against the two depths that bracket the foreground's latency, run again with \
             fio after each of the mix's slices (median over rounds);\nof ios.: against iosched noop's \
             curve; fwd: the latency policy with forward_prio=1."
        )
        .unwrap();
        if self.drift_alone.is_some() || self.drift_deepest.is_some() {
            let mut parts = Vec::new();
            if let Some(alone) = &self.drift_alone {
                parts.push(format!(
                    "fio alone mean {} (start {})",
                    duration(alone.mean_ns),
                    duration(self.alone_fio.mean_ns)
                ));
            }
            if let (Some(end), Some(start)) = (self.drift_deepest, self.curve_fio.deepest()) {
                parts.push(format!(
                    "fio QD{} {} IOPS (start {})",
                    end.depth,
                    kilo(end.iops),
                    kilo(start.iops)
                ));
            }
            writeln!(w, "drift: at the end, {}", parts.join(", ")).unwrap();
        }
        for note in &self.notes {
            writeln!(w, "note: {note}").unwrap();
        }
        let verdicts = self.verdicts();
        if !verdicts.is_empty() {
            writeln!(w).unwrap();
            for (holds, claim) in verdicts {
                writeln!(w, "{} {claim}", if holds { "PASS" } else { "FAIL" }).unwrap();
            }
        }
        out
    }

    /// Every figure, for the JSON results file.
    pub fn json(&self) -> Value {
        let measure =
            |m: &Measure| json!({"iops": m.iops, "mean_ns": m.mean_ns, "p99_ns": m.p99_ns});
        let curve = |c: &Curve| {
            Value::Array(
                c.points
                    .iter()
                    .map(|p| json!({"depth": p.depth, "iops": p.iops, "mean_ns": p.mean_ns}))
                    .collect(),
            )
        };
        json!({
            "setup": self.setup,
            "runtime_s": self.runtime,
            "slices": self.slices,
            "rounds": self.rounds,
            "alone_fio": measure(&self.alone_fio),
            "alone_iosched": self.alone_iosched.as_ref().map(measure),
            "curve_fio": curve(&self.curve_fio),
            "curve_iosched": curve(&self.curve_iosched),
            "overhead_ratio": self.overhead_ratio(),
            "overhead_pairs": self.overhead_pairs.iter().map(|(f, i)| json!({"fio_iops": f, "iosched_iops": i})).collect::<Vec<_>>(),
            "verdicts": self.verdicts().into_iter().map(|(holds, claim)| json!({"pass": holds, "claim": claim})).collect::<Vec<_>>(),
            "mixes": self.mixes.iter().map(|row| json!({
                "label": row.label,
                "total_iops": row.total_iops(),
                "fg": measure(&row.fg),
                "bg": measure(&row.bg),
                "curve_allows": self.curve_fio.allowed_iops(row.fg.mean_ns),
                "fraction_of_curve": Self::fraction(&self.curve_fio, row),
                "fraction_of_iosched_curve": Self::fraction(&self.curve_iosched, row),
                "targets_us": row.targets_us,
                "mean_bg_depths": row.depths,
                "round_fractions": row.round_fractions,
                "beside_fractions": row.beside_fractions,
            })).collect::<Vec<_>>(),
            "drift_alone": self.drift_alone.as_ref().map(measure),
            "drift_deepest": self.drift_deepest.map(|p| json!({"depth": p.depth, "iops": p.iops, "mean_ns": p.mean_ns})),
            "notes": self.notes,
        })
    }
}

//! The frontier study (`iosched frontier`): a latency-sensitive foreground beside a throughput-hungry background on
//! a real device, under the kernel's schedulers (through fio) and iosched's policies (through
//! the real engine), each placed against the device's own latency/throughput curve.
//!
//! # What it runs
//!
//! Everything is 4 KiB random reads with `direct=1` through io_uring, each run `--runtime`
//! seconds, one after the other on one device (by default a loop device over a file, created
//! with `losetup --direct-io=on` and removed at the end):
//!
//! 1. **alone**: the foreground only (QD1, RT class), with fio and with iosched `noop`. fio's
//!    mean latency is the *alone latency* the targets are multiples of;
//! 2. **the curve**: one job at each of `--depths` (default 1..32), with fio and with iosched
//!    `noop`, the device scheduler `none`: IOPS and mean latency at each depth;
//! 3. **the mix**: the foreground (QD1, RT) against two background jobs (QD32, IDLE), with fio
//!    under each kernel scheduler (`none`, `mq-deadline`, `kyber`, `bfq`), and with iosched
//!    under each of its policies (scheduler `none`), the `latency` policy once per target
//!    (`--targets`, multiples of the alone latency), each followed by fio at the two depths
//!    whose latencies bracket its foreground's, to have the curve *beside* it;
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
//! The pure parts (the curve, fio's JSON, the table) are tested here; the run itself needs
//! root (losetup, the scheduler files in sysfs, the RT class) and minutes, so no test runs it.

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
    /// Rounds: everything but the overhead pairs and the drift runs this many times, in turn,
    /// and every figure is the median of its rounds (each mix also shows its fraction of the
    /// curve in each round). One round takes about seven minutes.
    pub rounds: u32,
    /// Extra pairs of single-job runs at the deepest depth, fio then iosched noop, for the
    /// overhead ratio (the median over these and the curves' pairs).
    pub overhead_pairs: u32,
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
        mean_ns: figures.stats.lat.mean(),
        p99_ns: figures.stats.lat.percentile(99.0) as f64,
    })
}

/// The job files, identical for fio and iosched.
pub mod jobs {
    /// What every job shares: 4 KiB random reads, direct, io_uring, time based, percentiles
    /// of the whole latency.
    fn global(filename: &str, runtime: u64) -> String {
        format!(
            "[global]\nfilename={filename}\nrw=randread\nbs=4k\ndirect=1\nioengine=io_uring\n\
             runtime={runtime}\ntime_based=1\nlat_percentiles=1\n"
        )
    }

    /// The foreground: QD1, real-time class, level 0.
    const FOREGROUND: &str = "\n[fg]\niodepth=1\nprioclass=1\nprio=0\n";

    /// The foreground alone.
    pub fn alone(filename: &str, runtime: u64) -> String {
        global(filename, runtime) + FOREGROUND
    }

    /// One job at queue depth `depth`, no priority.
    pub fn curve(filename: &str, runtime: u64, depth: u32) -> String {
        global(filename, runtime) + &format!("\n[curve]\niodepth={depth}\n")
    }

    /// The foreground against two background jobs (QD32, idle class).
    pub fn mix(filename: &str, runtime: u64) -> String {
        global(filename, runtime)
            + FOREGROUND
            + "\n[bg]\niodepth=32\nprioclass=3\nprio=0\nnumjobs=2\n"
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
    /// mix (the two depths that bracket its foreground's latency, run with fio right after it),
    /// which leaves out how far the device drifted since the curve was measured.
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
             fio right after the mix (median over rounds);\nof ios.: against iosched noop's \
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

// ----------------------------------------------------------------------------------------
// Running it.

fn check_interrupted(stop: &AtomicBool) -> Result<()> {
    if stop.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}

/// Whether the process runs as root (effective uid 0).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

fn command_output(program: &str, args: &[&str]) -> Result<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !output.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// The device, its scheduler file, and what to undo at the end.
struct Setup {
    device: PathBuf,
    scheduler_file: PathBuf,
    original_scheduler: Option<String>,
    loop_device: bool,
    remove_file: Option<PathBuf>,
    description: String,
}

impl Setup {
    fn new(args: &Options, progress: &dyn Progress) -> Result<Setup> {
        let (device, loop_device, remove_file, description) = match &args.device {
            Some(device) => {
                use std::os::unix::fs::FileTypeExt;
                let meta = std::fs::metadata(device)
                    .with_context(|| format!("cannot open {}", device.display()))?;
                if !meta.file_type().is_block_device() {
                    bail!("{} is not a block device", device.display());
                }
                (
                    device.clone(),
                    false,
                    None,
                    format!("{} (only read)", device.display()),
                )
            }
            None => {
                let created = prepare_file(&args.file, args.size_mib, progress)?;
                let remove = (created && !args.keep_file).then(|| args.file.clone());
                let path = args.file.to_str().context("the file's path is not UTF-8")?;
                let device =
                    match command_output("losetup", &["-f", "--show", "--direct-io=on", path]) {
                        Ok(device) => device,
                        Err(error) => {
                            if let Some(file) = &remove {
                                let _ = std::fs::remove_file(file);
                            }
                            return Err(error.context("cannot set up the loop device"));
                        }
                    };
                progress.note(&format!(
                    "{device} over {} (if interrupted hard: losetup -d {device})",
                    args.file.display()
                ));
                (
                    PathBuf::from(&device),
                    true,
                    remove,
                    format!(
                        "{device}, a loop device (direct-io) over {} ({} MiB)",
                        args.file.display(),
                        args.size_mib
                    ),
                )
            }
        };
        // Built first, so that the loop device and the file are undone if what follows fails.
        let mut setup = Setup {
            scheduler_file: PathBuf::new(),
            device,
            original_scheduler: None,
            loop_device,
            remove_file,
            description,
        };
        setup.scheduler_file = scheduler_file(&setup.device)?;
        setup.original_scheduler = setup.current_scheduler().ok();
        Ok(setup)
    }

    fn schedulers(&self) -> Result<String> {
        std::fs::read_to_string(&self.scheduler_file)
            .with_context(|| format!("cannot read {}", self.scheduler_file.display()))
    }

    fn current_scheduler(&self) -> Result<String> {
        let text = self.schedulers()?;
        text.split_whitespace()
            .find(|s| s.starts_with('['))
            .map(|s| s.trim_matches(['[', ']']).to_string())
            .context("no scheduler is selected")
    }

    /// Whether the device offers `name`, loading its module if needed.
    fn offers(&self, name: &str) -> Result<bool> {
        let listed = |text: String| {
            text.split_whitespace()
                .any(|s| s.trim_matches(['[', ']']) == name)
        };
        if listed(self.schedulers()?) {
            return Ok(true);
        }
        let module = match name {
            "kyber" => "kyber-iosched",
            other => other,
        };
        let _ = Command::new("modprobe").arg(module).output();
        Ok(listed(self.schedulers()?))
    }

    /// The device's queue depth: `nr_requests` while the scheduler is none.
    fn queue_depth(&self) -> Result<u32> {
        let file = self.scheduler_file.with_file_name("nr_requests");
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        text.trim()
            .parse()
            .with_context(|| format!("{} holds {text:?}", file.display()))
    }

    fn select(&self, name: &str) -> Result<()> {
        std::fs::write(&self.scheduler_file, name).with_context(|| {
            format!(
                "cannot select scheduler {name} in {}",
                self.scheduler_file.display()
            )
        })?;
        let now = self.current_scheduler()?;
        if now != name {
            bail!(
                "{} selects {now}, not {name}",
                self.scheduler_file.display()
            );
        }
        Ok(())
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(original) = &self.original_scheduler {
            let _ = std::fs::write(&self.scheduler_file, original);
        }
        if self.loop_device {
            if let Err(error) = command_output("losetup", &["-d", &self.device.to_string_lossy()]) {
                eprintln!("iosched frontier: {error}");
            }
        }
        if let Some(file) = &self.remove_file {
            if let Err(error) = std::fs::remove_file(file) {
                eprintln!(
                    "iosched frontier: cannot remove {}: {error}",
                    file.display()
                );
            }
        }
    }
}

/// `/sys/class/block/NAME/queue/scheduler`, or the parent disk's for a partition.
fn scheduler_file(device: &Path) -> Result<PathBuf> {
    let real = std::fs::canonicalize(device)
        .with_context(|| format!("cannot resolve {}", device.display()))?;
    let name = real
        .file_name()
        .context("a device path without a name")?
        .to_string_lossy()
        .to_string();
    let class = Path::new("/sys/class/block").join(&name);
    for candidate in [
        class.join("queue/scheduler"),
        class.join("../queue/scheduler"),
    ] {
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    bail!("{} has no queue/scheduler in sysfs", device.display())
}

/// Creates `path` of `size_mib` MiB filled with random data, unless it is already there and
/// fully allocated (reads of holes never reach the device). Returns whether it was created.
fn prepare_file(path: &Path, size_mib: u64, progress: &dyn Progress) -> Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let bytes = size_mib << 20;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.len() == bytes && meta.blocks() * 512 >= bytes {
            return Ok(false);
        }
    }
    progress.note(&format!(
        "writing {} MiB of random data to {}",
        size_mib,
        path.display()
    ));
    let mut file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut chunk = vec![0u8; 1 << 20];
    for index in 0..size_mib {
        iosched_uring::buffer::fill_pattern(&mut chunk, index.wrapping_mul(0x9e37_79b9) + 1);
        file.write_all(&chunk)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    file.sync_all()
        .with_context(|| format!("cannot sync {}", path.display()))?;
    Ok(true)
}

/// Runs the jobs in `text` with fio and returns its jobs.
fn run_fio(fio: &Path, stop: &AtomicBool, text: &str, scratch: &Path) -> Result<Vec<FioJob>> {
    let job = scratch.join("job.fio");
    std::fs::write(&job, text).with_context(|| format!("cannot write {}", job.display()))?;
    let output = Command::new(fio)
        .arg("--output-format=json")
        .arg(&job)
        .output()
        .with_context(|| format!("cannot run {}", fio.display()))?;
    check_interrupted(stop)?;
    if !output.status.success() {
        bail!(
            "{} failed: {}",
            fio.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let jobs = parse_fio_json(&String::from_utf8_lossy(&output.stdout))?;
    if let Some(job) = jobs.iter().find(|j| j.error != 0) {
        bail!("fio job {} failed with error {}", job.name, job.error);
    }
    Ok(jobs)
}

/// Runs the jobs in `text` with iosched's real engine under `policy` and its settings.
fn run_iosched(
    stop: &AtomicBool,
    text: &str,
    policy: &str,
    settings: &[(String, String)],
    device_depth: u32,
) -> Result<RunReport> {
    let file = iosched_fio::parse::parse_str(text, "frontier.fio", Path::new("."), &|_| None)
        .map_err(anyhow::Error::msg)?;
    let config = iosched_uring::UringConfig {
        policy: policy.to_string(),
        policy_settings: settings.to_vec(),
        device_depth,
        ..iosched_uring::UringConfig::default()
    };
    let outcome = iosched_uring::run(&config, &file).map_err(anyhow::Error::msg)?;
    check_interrupted(stop)?;
    if let Some(error) = outcome.errors.first() {
        bail!("iosched {policy}: {error}");
    }
    Ok(outcome.report)
}

/// The study's steps, told to a [`Progress`]: `round 2/3: fio QD4`.
struct Steps<'a> {
    progress: &'a dyn Progress,
    /// `round 2/3: ` while rounds are running.
    prefix: String,
    current: String,
}

impl Steps<'_> {
    fn start(&mut self, what: &str) {
        self.current = format!("{}{what}", self.prefix);
        self.progress.started(&self.current);
    }

    fn finish(&self, what: String) {
        self.progress.finished(&self.current, &what);
    }
}

fn counter(report: &RunReport, name: &str) -> Option<f64> {
    report
        .device_counters
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
}

/// Runs the study on the device of `args`, telling `progress` as each run starts and ends.
/// Needs root and fio; whatever it set up (a loop device, its file, the scheduler) is undone
/// before it returns, also on failure.
pub fn run(args: &Options, progress: &dyn Progress) -> Result<Frontier> {
    if args.depths.is_empty() || args.depths.contains(&0) {
        bail!("--depths needs queue depths of at least 1");
    }
    if args.runtime == 0 {
        bail!("--runtime needs at least 1 second");
    }
    if args
        .targets
        .iter()
        .chain(&args.forwarded_targets)
        .any(|t| !(t.is_finite() && *t > 0.0))
    {
        bail!("--targets are positive multiples of the alone latency");
    }
    if !is_root() {
        bail!(
            "iosched frontier needs root: it sets up a loop device (losetup), switches the \
             device's scheduler in /sys/block, and runs the foreground in the real-time I/O class"
        );
    }
    let fio_version =
        command_output(&args.fio.to_string_lossy(), &["--version"]).with_context(|| {
            format!(
                "{} is needed to run the kernel schedulers",
                args.fio.display()
            )
        })?;
    let setup = Setup::new(args, progress)?;
    let scratch = std::env::temp_dir().join(format!("iosched-frontier-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    let result = measure(args, &setup, &scratch, &fio_version, progress);
    let _ = std::fs::remove_dir_all(&scratch);
    drop(setup);
    progress.end();
    result
}

/// What one round needs to know.
struct Round<'a> {
    args: &'a Options,
    setup: &'a Setup,
    scratch: &'a Path,
    device: String,
    device_depth: u32,
    kernel: Vec<String>,
}

fn fio_measure(jobs: &[FioJob], name: &str) -> Result<Measure> {
    pool_fio(jobs, name).with_context(|| format!("fio reported no job {name}"))
}

fn iosched_measure(report: &RunReport, name: &str) -> Result<Measure> {
    pool_report(report, name).with_context(|| format!("iosched reported no job {name}"))
}

fn show(m: &Measure) -> String {
    format!("{} IOPS, mean {}", kilo(m.iops), duration(m.mean_ns))
}

impl Round<'_> {
    /// Runs in one round: alone twice, the curve twice, every mix.
    fn runs(&self) -> usize {
        let args = self.args;
        let beside = if args.depths.len() > 1 { 2 } else { 1 };
        2 + 2 * args.depths.len()
            + self.kernel.len()
            + args.policies.len()
            + args.targets.len() * (1 + beside)
            + args.forwarded_targets.len()
    }

    /// Alone, the curve and every mix, once.
    fn measure(&self, progress: &mut Steps) -> Result<Frontier> {
        let (args, device, runtime) = (self.args, &self.device, self.args.runtime);
        let mut frontier = Frontier::default();
        progress.start("fio alone (fg only)");
        let jobs = run_fio(
            &args.fio,
            &args.stop,
            &jobs::alone(device, runtime),
            self.scratch,
        )?;
        frontier.alone_fio = fio_measure(&jobs, "fg")?;
        progress.finish(show(&frontier.alone_fio));

        progress.start("iosched noop alone (fg only)");
        let report = run_iosched(
            &args.stop,
            &jobs::alone(device, runtime),
            "noop",
            &[],
            self.device_depth,
        )?;
        let alone = iosched_measure(&report, "fg")?;
        progress.finish(show(&alone));
        frontier.alone_iosched = Some(alone);

        for &depth in &args.depths {
            let text = jobs::curve(device, runtime, depth);
            progress.start(&format!("fio QD{depth}"));
            let m = fio_measure(
                &run_fio(&args.fio, &args.stop, &text, self.scratch)?,
                "curve",
            )?;
            progress.finish(show(&m));
            frontier.curve_fio.points.push(CurvePoint {
                depth,
                iops: m.iops,
                mean_ns: m.mean_ns,
            });
            progress.start(&format!("iosched noop QD{depth}"));
            let report = run_iosched(&args.stop, &text, "noop", &[], self.device_depth.max(depth))?;
            let m = iosched_measure(&report, "curve")?;
            progress.finish(show(&m));
            frontier.curve_iosched.points.push(CurvePoint {
                depth,
                iops: m.iops,
                mean_ns: m.mean_ns,
            });
        }

        let mix = jobs::mix(device, runtime);
        let row_done = |row: &MixRow| {
            format!(
                "total {} IOPS, fg {} IOPS mean {}, bg {} IOPS",
                kilo(row.total_iops()),
                kilo(row.fg.iops),
                duration(row.fg.mean_ns),
                kilo(row.bg.iops)
            )
        };
        for name in &self.kernel {
            self.setup.select(name)?;
            progress.start(&format!("fio mix, kernel {name}"));
            let jobs = run_fio(&args.fio, &args.stop, &mix, self.scratch)?;
            let row = MixRow {
                label: format!("fio {name}"),
                fg: fio_measure(&jobs, "fg")?,
                bg: fio_measure(&jobs, "bg")?,
                ..MixRow::default()
            };
            progress.finish(row_done(&row));
            frontier.mixes.push(row);
        }
        self.setup.select("none")?;

        let alone_us = frontier.alone_fio.mean_ns / 1000.0;
        // The row to fill, the policy, its settings.
        type PolicyRun = (MixRow, String, Vec<(String, String)>);
        let mut runs: Vec<PolicyRun> = args
            .policies
            .iter()
            .map(|p| {
                let row = MixRow {
                    label: format!("iosched {p}"),
                    ..MixRow::default()
                };
                (row, p.clone(), Vec::new())
            })
            .collect();
        let latency_runs = args
            .targets
            .iter()
            .map(|&f| (f, false))
            .chain(args.forwarded_targets.iter().map(|&f| (f, true)));
        for (factor, forwarded) in latency_runs {
            let target = (factor * alone_us).round().max(1.0) as u64;
            let mut settings = vec![("latency.target_latency_us".into(), target.to_string())];
            let mut label = format!("iosched latency {factor}x");
            if forwarded {
                settings.push(("latency.forward_prio".into(), "1".into()));
                label.push_str(" fwd");
            }
            let row = MixRow {
                label,
                claim: !forwarded,
                targets_us: vec![target],
                ..MixRow::default()
            };
            runs.push((row, "latency".into(), settings));
        }
        for (mut row, policy, settings) in runs {
            progress.start(&format!("{} mix", row.label));
            let report = run_iosched(&args.stop, &mix, &policy, &settings, self.device_depth)?;
            row.fg = iosched_measure(&report, "fg")?;
            row.bg = iosched_measure(&report, "bg")?;
            row.depths = counter(&report, "latency_depth_mean").into_iter().collect();
            progress.finish(row_done(&row));
            if row.claim {
                // The curve where this mix landed, measured again now.
                let mut beside = Curve::default();
                for depth in frontier.curve_fio.bracket(row.fg.mean_ns) {
                    let text = jobs::curve(device, runtime, depth);
                    progress.start(&format!("fio QD{depth} beside it"));
                    let m = fio_measure(
                        &run_fio(&args.fio, &args.stop, &text, self.scratch)?,
                        "curve",
                    )?;
                    progress.finish(show(&m));
                    beside.points.push(CurvePoint {
                        depth,
                        iops: m.iops,
                        mean_ns: m.mean_ns,
                    });
                }
                row.beside_fractions = Frontier::fraction(&beside, &row).into_iter().collect();
            }
            frontier.mixes.push(row);
        }
        Ok(frontier)
    }
}

fn measure(
    args: &Options,
    setup: &Setup,
    scratch: &Path,
    fio_version: &str,
    progress: &dyn Progress,
) -> Result<Frontier> {
    let device = setup.device.to_string_lossy().to_string();
    let mut kernel = Vec::new();
    let mut notes = Vec::new();
    for name in &args.kernel {
        if setup.offers(name)? {
            kernel.push(name.clone());
        } else {
            notes.push(format!(
                "kernel scheduler {name} skipped: {} does not offer it, even after modprobe",
                device
            ));
        }
    }
    if !setup.offers("none")? {
        bail!("{device} does not offer the scheduler none, which the curve and iosched need");
    }
    setup.select("none")?;
    let device_depth = match args.device_depth {
        Some(depth) => depth,
        None => setup.queue_depth()?,
    }
    .max(1);
    let round = Round {
        args,
        setup,
        scratch,
        device: device.clone(),
        device_depth,
        kernel,
    };
    let rounds = args.rounds.max(1) as usize;
    progress.begin(
        rounds * round.runs() + 2 * args.overhead_pairs.max(1) as usize + 1
            - usize::from(args.overhead_pairs == 0),
    );
    let mut progress = Steps {
        progress,
        prefix: String::new(),
        current: String::new(),
    };
    let mut measured = Vec::with_capacity(rounds);
    for index in 0..rounds {
        if rounds > 1 {
            progress.prefix = format!("round {}/{rounds}: ", index + 1);
        }
        measured.push(round.measure(&mut progress)?);
    }
    progress.prefix.clear();
    let mut frontier = Frontier::combine(&measured);
    frontier.setup = format!(
        "{} ({fio_version}); iosched device depth {device_depth}, nr_requests {}",
        setup.description,
        iosched_core::elevator::default_nr_requests(device_depth)
    );
    frontier.runtime = args.runtime;
    frontier.notes = notes;

    // The overhead: pairs at the deepest depth, back to back (each round's curve gave one
    // already); the first fio run of them, or a run of its own, is also the drift's.
    let deepest = frontier.curve_fio.deepest().expect("depths are not empty");
    let text = jobs::curve(&device, args.runtime, deepest.depth);
    for pair in 0..args.overhead_pairs.max(1) {
        progress.start(&format!("fio QD{} again (overhead, drift)", deepest.depth));
        let fio = fio_measure(&run_fio(&args.fio, &args.stop, &text, scratch)?, "curve")?;
        progress.finish(show(&fio));
        if pair == 0 {
            frontier.drift_deepest = Some(CurvePoint {
                depth: deepest.depth,
                iops: fio.iops,
                mean_ns: fio.mean_ns,
            });
        }
        if args.overhead_pairs == 0 {
            break;
        }
        progress.start(&format!(
            "iosched noop QD{} again (overhead)",
            deepest.depth
        ));
        let report = run_iosched(
            &args.stop,
            &text,
            "noop",
            &[],
            device_depth.max(deepest.depth),
        )?;
        let iosched = iosched_measure(&report, "curve")?;
        progress.finish(show(&iosched));
        frontier.overhead_pairs.push((fio.iops, iosched.iops));
    }
    progress.start("fio alone again (drift)");
    let alone = fio_measure(
        &run_fio(
            &args.fio,
            &args.stop,
            &jobs::alone(&device, args.runtime),
            scratch,
        )?,
        "fg",
    )?;
    progress.finish(show(&alone));
    frontier.drift_alone = Some(alone);
    Ok(frontier)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(points: &[(u32, f64, f64)]) -> Curve {
        Curve {
            points: points
                .iter()
                .map(|&(depth, iops, mean_us)| CurvePoint {
                    depth,
                    iops,
                    mean_ns: mean_us * 1000.0,
                })
                .collect(),
        }
    }

    /// The issue's curve: QD1 25.7K at 33 us ... QD16 113K at 137 us.
    fn issue_curve() -> Curve {
        curve(&[
            (1, 25_700.0, 33.0),
            (2, 50_000.0, 36.0),
            (4, 75_000.0, 50.0),
            (8, 102_000.0, 74.0),
            (16, 113_000.0, 137.0),
        ])
    }

    // Proves the curve interpolates between depths, holds latencies below the lowest to it,
    // caps at the best point, and survives a non-monotonic measurement.
    #[test]
    fn curve_interpolation() {
        let c = issue_curve();
        let at = |us: f64| c.allowed_iops(us * 1000.0).unwrap();
        assert_eq!(at(33.0), 25_700.0);
        assert_eq!(at(36.0), 50_000.0);
        assert!((at(43.0) - 62_500.0).abs() < 1e-6, "{}", at(43.0));
        assert!((at(62.0) - 88_500.0).abs() < 1e-6, "{}", at(62.0));
        assert_eq!(at(10.0), 25_700.0);
        assert_eq!(at(1000.0), 113_000.0);
        // Noise: QD3 slower than QD4 and with fewer IOPS than QD2. Lines that fall are never
        // better than the point they start from, so 44 us allows QD2's 50K.
        let noisy = curve(&[
            (1, 25_000.0, 33.0),
            (2, 50_000.0, 36.0),
            (3, 48_000.0, 52.0),
            (4, 75_000.0, 50.0),
        ]);
        let allowed = noisy.allowed_iops(51_000.0).unwrap();
        assert_eq!(allowed, 75_000.0);
        assert_eq!(noisy.allowed_iops(44_000.0).unwrap(), 50_000.0);
        assert_eq!(Curve::default().allowed_iops(1.0), None);
    }

    const FIO_JSON: &str = r#"note: both iodepth >= 1 and synchronous I/O engine are selected
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {"jobname" : "fg", "error" : 0,
     "read" : {"total_ios" : 270000, "iops" : 27000.5,
               "lat_ns" : {"mean" : 32000.0, "percentile" : {"99.000000" : 45056}}}},
    {"jobname" : "bg", "error" : 0,
     "read" : {"total_ios" : 100000, "iops" : 10000.0,
               "lat_ns" : {"mean" : 3000000.0, "percentile" : {"99.000000" : 5000000}}}},
    {"jobname" : "bg", "error" : 0,
     "read" : {"total_ios" : 300000, "iops" : 30000.0,
               "lat_ns" : {"mean" : 1000000.0, "percentile" : {"99.000000" : 2000000}}}}
  ]
}
"#;

    // Proves fio's JSON is read past leading notes and clones pool: IOPS add, the mean is
    // weighted by I/Os, the p99 is the worst.
    #[test]
    fn fio_json() {
        let jobs = parse_fio_json(FIO_JSON).unwrap();
        assert_eq!(jobs.len(), 3);
        let fg = pool_fio(&jobs, "fg").unwrap();
        assert_eq!(fg.iops, 27000.5);
        assert_eq!(fg.p99_ns, 45056.0);
        let bg = pool_fio(&jobs, "bg").unwrap();
        assert_eq!(bg.iops, 40_000.0);
        assert_eq!(bg.mean_ns, 1_500_000.0);
        assert_eq!(bg.p99_ns, 5_000_000.0);
        assert!(pool_fio(&jobs, "nosuch").is_none());
        assert!(parse_fio_json("fio: no JSON here").is_err());
    }

    // Proves the job files parse as fio files for iosched, with the priorities, depths and
    // clones the comparison relies on.
    #[test]
    fn job_files() {
        let parse = |text: &str| {
            iosched_fio::parse::parse_str(text, "t.fio", Path::new("."), &|_| None).unwrap()
        };
        let mix = parse(&jobs::mix("/dev/loop9", 10));
        let names: Vec<&str> = mix.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, vec!["fg", "bg", "bg"]);
        let fg = &mix.jobs[0];
        assert_eq!(fg.iodepth, 1);
        assert_eq!(fg.prio.class(), iosched_core::IoPrioClass::Rt);
        assert_eq!(mix.jobs[1].iodepth, 32);
        assert_eq!(mix.jobs[1].prio.class(), iosched_core::IoPrioClass::Idle);
        assert!(fg.direct && fg.time_based);
        assert_eq!(fg.runtime, Some(10_000_000_000));
        let curve = parse(&jobs::curve("/dev/loop9", 3, 8));
        assert_eq!(curve.jobs[0].iodepth, 8);
        assert_eq!(curve.jobs[0].prio, iosched_core::IoPrio::NONE);
        assert_eq!(parse(&jobs::alone("/dev/loop9", 3)).jobs.len(), 1);
    }

    fn sample() -> Frontier {
        let measure = |iops: f64, mean_us: f64, p99_us: f64| Measure {
            iops,
            mean_ns: mean_us * 1000.0,
            p99_ns: p99_us * 1000.0,
        };
        let mut iosched = issue_curve();
        for point in &mut iosched.points {
            point.iops *= 0.95;
        }
        Frontier {
            setup: "/dev/loop9".into(),
            runtime: 10,
            alone_fio: measure(27_300.0, 32.0, 45.0),
            alone_iosched: Some(measure(26_000.0, 34.0, 50.0)),
            curve_fio: issue_curve(),
            curve_iosched: iosched,
            mixes: vec![
                MixRow {
                    label: "fio none".into(),
                    fg: measure(5000.0, 204.0, 400.0),
                    bg: measure(115_000.0, 500.0, 900.0),
                    ..MixRow::default()
                },
                MixRow {
                    label: "iosched latency 1.5x".into(),
                    fg: measure(20_000.0, 48.0, 90.0),
                    bg: measure(50_000.0, 900.0, 2000.0),
                    claim: true,
                    targets_us: vec![48],
                    ..MixRow::default()
                },
            ],
            drift_alone: Some(measure(27_000.0, 33.0, 46.0)),
            drift_deepest: Some(CurvePoint {
                depth: 16,
                iops: 110_000.0,
                mean_ns: 140_000.0,
            }),
            notes: vec!["kernel scheduler kyber skipped".into()],
            overhead_pairs: vec![
                (113_000.0, 107_350.0),
                (100_000.0, 88_000.0),
                (100_000.0, 99_000.0),
            ],
            rounds: 1,
        }
    }

    // Proves the table shows the curve, the overhead, and each mix with its place on the
    // curve: fio none at 204 us has the whole curve (113K) and reaches 120/113; the latency
    // policy at 48 us has 71.4K allowed and reaches 70/71.4.
    #[test]
    fn table() {
        let frontier = sample();
        assert!((frontier.overhead_ratio().unwrap() - 0.95).abs() < 1e-9);
        let text = frontier.table();
        assert!(
            text.contains(
                "at QD16, one job, in pairs run back to back: 107.3K vs 113.0K (95.0%), \
                 88.0K vs 100.0K (88.0%), 99.0K vs 100.0K (99.0%); median 95.0%"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "PASS overhead: iosched noop reaches >= 90.0% of fio's IOPS at QD16 (median 95.0%)"
            ),
            "{text}"
        );
        assert!(text.contains("PASS frontier: iosched latency 1.5x reaches >= 85.0% of the curve at its foreground latency (98.0%, fg at 1.50x alone)"), "{text}");
        assert!(!text.contains("fio none reaches"));
        let mut failing = frontier.clone();
        failing.mixes[1].bg.iops = 30_000.0;
        let verdicts = failing.verdicts();
        assert!(verdicts[0].0 && !verdicts[1].0, "{verdicts:?}");
        let none = text.lines().find(|l| l.contains("fio none")).unwrap();
        assert!(none.contains("120.0K") && none.contains("113.0K"), "{none}");
        assert!(none.contains("106.2%") && none.contains("6.38x"), "{none}");
        let latency = text.lines().find(|l| l.contains("latency 1.5x")).unwrap();
        assert!(
            latency.contains("71.4K") && latency.contains("98.0%"),
            "{latency}"
        );
        assert!(latency.ends_with("target 48us"), "{latency}");
        assert!(text.contains("drift: at the end, fio alone mean 33.0us (start 32.0us)"));
        assert!(text.contains("note: kernel scheduler kyber skipped"));
        let json = frontier.json();
        assert_eq!(json["mixes"][1]["label"], "iosched latency 1.5x");
        let fraction = json["mixes"][1]["fraction_of_curve"].as_f64().unwrap();
        assert!((fraction - 70_000.0 / 71_428.571_428_571_43).abs() < 1e-9);
    }

    // Proves the bracket picks the depths around a latency, the two shallowest below every
    // latency and the two deepest above.
    #[test]
    fn brackets() {
        let c = issue_curve();
        assert_eq!(c.bracket(43_000.0), vec![2, 4]);
        assert_eq!(c.bracket(36_000.0), vec![1, 2]);
        assert_eq!(c.bracket(10_000.0), vec![1, 2]);
        assert_eq!(c.bracket(500_000.0), vec![8, 16]);
        assert_eq!(curve(&[(4, 1.0, 1.0)]).bracket(5.0), vec![4]);
        assert!(Curve::default().bracket(5.0).is_empty());
    }

    // Proves a claimed row is judged on the curve beside it when it has one, and says both.
    #[test]
    fn verdict_beside() {
        let mut frontier = sample();
        frontier.mixes[1].beside_fractions = vec![0.80, 0.90, 0.86];
        let verdicts = frontier.verdicts();
        assert!(verdicts[1].0, "{verdicts:?}");
        assert!(
            verdicts[1]
                .1
                .contains("re-measured beside it (86.0%; 98.0% of the run's curve"),
            "{verdicts:?}"
        );
        frontier.mixes[1].beside_fractions = vec![0.80];
        assert!(!frontier.verdicts()[1].0);
        let line = frontier
            .table()
            .lines()
            .find(|l| l.contains("latency 1.5x"))
            .unwrap()
            .to_string();
        assert!(line.contains("98.0%    80.0%"), "{line}");
    }

    // Proves rounds combine into medians: the curve point by point, each mix by label with
    // its fraction in each round against that round's own curve, and the curves' deepest
    // pairs as overhead pairs.
    #[test]
    fn rounds_combine_into_medians() {
        let one = sample();
        let mut two = sample();
        let mut three = sample();
        two.alone_fio.mean_ns = 40_000.0;
        three.alone_fio.mean_ns = 36_000.0;
        for point in &mut two.curve_fio.points {
            point.iops *= 2.0;
        }
        two.mixes[1].bg.iops = 10_000.0;
        three.mixes[1].bg.iops = 60_000.0;
        two.mixes[1].targets_us = vec![60];
        three.mixes[1].depths = vec![2.5];
        let combined = Frontier::combine(&[one.clone(), two, three]);
        assert_eq!(combined.rounds, 3);
        assert_eq!(combined.alone_fio.mean_ns, 36_000.0);
        assert_eq!(combined.curve_fio, one.curve_fio);
        let latency = &combined.mixes[1];
        assert_eq!(latency.bg.iops, 50_000.0);
        assert_eq!(latency.targets_us, vec![48, 60, 48]);
        assert_eq!(latency.round_fractions.len(), 3);
        // Round two's mix has 30K against a curve twice as high: 30/142.9.
        assert!((latency.round_fractions[1] - 30_000.0 / 142_857.142_857_142_87).abs() < 1e-9);
        assert_eq!(
            latency.note(),
            "target 48-60us, mean bg depth 2.5, rounds 98.0% 21.0% 112.0%"
        );
        assert_eq!(combined.overhead_pairs.len(), 3);
        assert!(combined.table().contains("median of 3 rounds"));
        assert_eq!(Frontier::combine(&[]), Frontier::default());
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
    }

    // Proves the size suffixes of the table.
    #[test]
    fn kilo_figures() {
        assert_eq!(kilo(999.4), "999");
        assert_eq!(kilo(27_349.0), "27.3K");
        assert_eq!(percent(0.8567), "85.7%");
        assert_eq!(percent(f64::NAN), "-");
    }
}

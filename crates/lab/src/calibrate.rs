//! Calibration: runs the device models through the workloads their calibration targets
//! are stated for, and prints each figure next to its target with PASS or FAIL.
//!
//! Targets come from the seeds and REFERENCE.md: a 7200 rpm SATA disk of 2006-2010 gives
//! 70-110 random 4 KiB reads per second at queue depth 1; its read-ahead serves a synchronous
//! sequential 4 KiB reader at 25 MB/s or more (seed 003 measured about 35 MB/s); 1 MiB
//! sequential reads run close to the outer zone's media rate; NCQ raises random IOPS by at
//! least 1.8x at depth 32 while the 99.99th percentile grows at least 5x (seed 004); the write
//! cache makes random writes clearly faster. An NVMe SSD reads 4 KiB in 70-130 us at depth 1
//! and scales with depth up to its parallelism.
//!
//! It also runs the seeds' own tables with the setup each names, one setting for every row:
//! seed 003's sequential and random readers and sequential writers at 1, 4 and 16 jobs (2.6.31
//! cfq, a drive with 31 tags) and seed 000's no-load 64 KiB random read, each within 25%. A
//! row the models do not reproduce yet is reported as a GAP with the reason, not hidden.

use crate::progress::Progress;
use crate::setup::Setup;
use anyhow::Result;
use iosched_fio::{parse, DataDir, RunReport};
use iosched_sim::SimConfig;
use std::collections::BTreeMap;
use std::path::Path;

/// What to calibrate.
#[derive(Clone, Debug)]
pub struct Options {
    /// Shorter runs (for the test suite); the same targets.
    pub quick: bool,
    /// Only this device model (hdd or ssd).
    pub only: Option<String>,
    /// Seed for every run.
    pub seed: u64,
    /// Policy to run the calibration workloads under.
    pub policy: String,
}

struct Scenario {
    name: &'static str,
    device: &'static str,
    device_settings: &'static [(&'static str, &'static str)],
    job: String,
    /// The policy and its settings when the row reproduces a seed's table (else the
    /// `--policy` given).
    policy: Option<(&'static str, &'static [(&'static str, &'static str)])>,
}

/// Seed 003's "Vanilla CFQ" tables (Tests 1-3): aggregate KiB/s of 1, 4 and 16 jobs, each
/// with a 2 GB file of its own, 4 KiB direct I/O for 30 s, on a 7200 rpm SATA drive with a
/// queue depth of 31 under Linux 2.6.31's cfq.
pub const SEED003_TABLE: &[(&str, u32, f64)] = &[
    ("read", 1, 35499.0),
    ("read", 4, 29411.0),
    ("read", 16, 28921.0),
    ("write", 1, 22669.0),
    ("write", 4, 23174.0),
    ("write", 16, 20601.0),
    ("randread", 1, 484.0),
    ("randread", 4, 405.0),
    ("randread", 16, 328.0),
];

/// Seed 000's Table 3 no-load figure: 64 KiB random reads of a 10 GB file, nothing cached,
/// one at a time, mean latency 8.91 ms (Linux 2.6.18, anticipatory, a SATA disk taking one
/// command at a time).
pub const SEED000_NO_LOAD_MS: f64 = 8.91;

/// Seed 003's setup, the same for every row of its table: a drive with 31 tags (libata) that
/// orders them by seek (`ncq_order=sstf`: the seed's random readers show no gain from more
/// commands in the drive, the slowest reader getting a fifth of the fastest's share and
/// waiting up to 4 s, as seek ordering starves the edges of the busy span), and ext3 files
/// (`indirect_blocks=1`: each random read whose 4 MiB of file has not been read yet first
/// reads its indirect block; with 16 files of 2 GB nearly every read does).
const SEED003_DEVICE: &[(&str, &str)] = &[("queue_depth", "31"), ("ncq_order", "sstf")];
const SEED003_POLICY: &[(&str, &str)] = &[
    ("workload_trees", "0"),
    ("nr_requests", "128"),
    ("indirect_blocks", "1"),
];

fn job(rw: &str, bs: &str, engine: &str, iodepth: u32, runtime_s: u64) -> String {
    format!(
        "[calibration]\nfilename=/dev/sda\nrw={rw}\nbs={bs}\ndirect=1\nioengine={engine}\niodepth={iodepth}\nruntime={runtime_s}\ntime_based=1\n"
    )
}

fn scenarios(quick: bool) -> Vec<Scenario> {
    let long = if quick { 40 } else { 300 };
    let short = if quick { 4 } else { 20 };
    let ssd = if quick { 1 } else { 5 };
    let mut list = vec![
        Scenario {
            name: "hdd randread 4k qd1",
            device: "hdd",
            device_settings: &[],
            job: job("randread", "4k", "psync", 1, long),
            policy: None,
        },
        Scenario {
            name: "hdd randread 4k qd32",
            device: "hdd",
            device_settings: &[],
            job: job("randread", "4k", "libaio", 32, long),
            policy: None,
        },
        Scenario {
            name: "hdd read 4k sync",
            device: "hdd",
            device_settings: &[],
            job: job("read", "4k", "psync", 1, short),
            policy: None,
        },
        Scenario {
            name: "hdd read 1m",
            device: "hdd",
            device_settings: &[],
            job: job("read", "1m", "psync", 1, short),
            policy: None,
        },
        Scenario {
            name: "hdd randwrite 4k cache on",
            device: "hdd",
            device_settings: &[("write_cache", "on")],
            job: job("randwrite", "4k", "psync", 1, short * 3),
            policy: None,
        },
        Scenario {
            name: "hdd randwrite 4k cache off",
            device: "hdd",
            device_settings: &[("write_cache", "off")],
            job: job("randwrite", "4k", "psync", 1, short * 3),
            policy: None,
        },
    ];
    for depth in [1u32, 4, 16, 64, 128] {
        list.push(Scenario {
            name: Box::leak(format!("ssd randread 4k qd{depth}").into_boxed_str()),
            device: "ssd",
            device_settings: &[],
            job: job(
                "randread",
                "4k",
                if depth == 1 { "psync" } else { "libaio" },
                depth,
                ssd,
            ),
            policy: None,
        });
    }
    let seed_runtime = if quick { 10 } else { 30 };
    for &(rw, jobs, _) in SEED003_TABLE {
        list.push(Scenario {
            name: Box::leak(format!("seed003 {rw} 4k x{jobs}").into_boxed_str()),
            device: "hdd",
            device_settings: SEED003_DEVICE,
            job: format!(
                "[seed003]\nrw={rw}\nbs=4k\nsize=2g\ndirect=1\nnumjobs={jobs}\n\
                 runtime={seed_runtime}\ntime_based=1\n"
            ),
            policy: Some(("cfq", SEED003_POLICY)),
        });
    }
    list.push(Scenario {
        name: "seed000 randread 64k",
        device: "hdd",
        device_settings: &[("queue_depth", "1")],
        job: format!(
            "[seed000]\nfilename=index\nrw=randread\nbs=64k\nsize=10g\nioengine=psync\n\
             runtime={}\ntime_based=1\n",
            if quick { 20 } else { 60 }
        ),
        policy: Some(("anticipatory", &[("nr_requests", "128")])),
    });
    list
}

/// What one calibration workload measured.
pub struct Figures {
    /// The workload (`hdd randread 4k qd1`).
    pub name: &'static str,
    /// I/Os per second.
    pub iops: f64,
    /// Bytes per second.
    pub bandwidth: f64,
    /// Mean completion latency, ns.
    pub clat_mean: f64,
    /// 99.99th percentile of completion latency, ns.
    pub clat_p9999: f64,
    /// The whole run.
    pub report: RunReport,
}

/// One target and how the models meet it.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// What is checked.
    pub name: String,
    /// The figure measured.
    pub figure: String,
    /// The target, in words.
    pub target: String,
    /// Whether the figure meets the target.
    pub pass: bool,
    /// Why a missed target is a known gap rather than a failure, if it is one.
    pub gap: Option<String>,
}

fn figures(name: &'static str, report: RunReport) -> Figures {
    let job = &report.jobs[0];
    let (dir, stats) = DataDir::ALL
        .iter()
        .map(|&d| (d, job.dir(d)))
        .max_by_key(|(_, s)| s.total_ios)
        .expect("three directions");
    let seconds = job.runtime as f64 / 1e9;
    // Several jobs (a seed's table row): their sum, over the longest runtime.
    let (ios, bytes, seconds) = if report.jobs.len() > 1 {
        let longest = report.jobs.iter().map(|j| j.runtime).max().unwrap_or(1) as f64 / 1e9;
        report
            .jobs
            .iter()
            .fold((0u64, 0u64, longest), |(i, b, s), j| {
                let d = j.dir(dir);
                (i + d.total_ios, b + d.io_bytes, s)
            })
    } else {
        (stats.total_ios, stats.io_bytes, seconds)
    };
    Figures {
        name,
        iops: ios as f64 / seconds,
        bandwidth: bytes as f64 / seconds,
        clat_mean: stats.clat.mean(),
        clat_p9999: stats.clat.percentile(99.99) as f64,
        report,
    }
}

fn parameter(report: &RunReport, name: &str) -> Option<f64> {
    report
        .device_parameters
        .iter()
        .find(|p| p.name == name)
        .and_then(|p| p.value.parse().ok())
}

/// Runs every calibration workload of `options`, telling `progress` as each runs.
pub fn measure(options: &Options, progress: &dyn Progress) -> Result<Vec<Figures>> {
    let base = Setup {
        seed: options.seed,
        ..Setup::default()
    };
    let scenarios: Vec<Scenario> = scenarios(options.quick)
        .into_iter()
        .filter(|s| options.only.as_deref().is_none_or(|only| only == s.device))
        .collect();
    progress.begin(scenarios.len());
    let mut measured = Vec::with_capacity(scenarios.len());
    let result = (|| {
        for scenario in scenarios {
            progress.started(scenario.name);
            let file =
                parse::parse_str(&scenario.job, "calibration.fio", Path::new("."), &|_| None)
                    .map_err(anyhow::Error::msg)?;
            let (policy, settings) = scenario.policy.unwrap_or((&options.policy, &[]));
            let mut config = SimConfig {
                device: scenario.device.into(),
                device_settings: scenario
                    .device_settings
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.to_string()))
                    .collect(),
                ..base.config(policy)?
            };
            config
                .policy_settings
                .extend(settings.iter().map(|(n, v)| (n.to_string(), v.to_string())));
            let report = iosched_sim::run(&config, &file).map_err(anyhow::Error::msg)?;
            let f = figures(scenario.name, report);
            progress.finished(scenario.name, &format!("{:.1} IOPS", f.iops));
            measured.push(f);
        }
        Ok(())
    })();
    progress.end();
    result.map(|()| measured)
}

/// Each target against the figures `measured` (targets whose workloads did not run are left
/// out).
pub fn check(measured: &[Figures]) -> Vec<Check> {
    let results: BTreeMap<&str, &Figures> = measured.iter().map(|f| (f.name, f)).collect();
    let mut checks = Vec::new();
    let mut check = |name: &str, figure: String, target: &str, pass: bool| {
        checks.push(Check {
            name: name.to_string(),
            figure,
            target: target.to_string(),
            pass,
            gap: None,
        });
    };
    if let (Some(qd1), Some(qd32)) = (
        results.get("hdd randread 4k qd1"),
        results.get("hdd randread 4k qd32"),
    ) {
        check(
            "hdd: 4k random read, full span, QD1",
            format!("{:.1} IOPS", qd1.iops),
            "70-110 IOPS",
            (70.0..=110.0).contains(&qd1.iops),
        );
        let ratio = qd32.iops / qd1.iops;
        check(
            "hdd: QD32 / QD1 random read IOPS",
            format!("{ratio:.2}x"),
            ">= 1.8x",
            ratio >= 1.8,
        );
        let tail = qd32.clat_p9999 / qd1.clat_p9999;
        check(
            "hdd: QD32 / QD1 p99.99 latency",
            format!(
                "{:.0} / {:.0} ms = {tail:.1}x",
                qd32.clat_p9999 / 1e6,
                qd1.clat_p9999 / 1e6
            ),
            ">= 5x",
            tail >= 5.0,
        );
    }
    if let Some(seq) = results.get("hdd read 4k sync") {
        check(
            "hdd: sequential 4k direct sync read (read-ahead)",
            format!("{:.1} MB/s", seq.bandwidth / 1e6),
            ">= 25 MB/s",
            seq.bandwidth >= 25e6,
        );
    }
    if let Some(big) = results.get("hdd read 1m") {
        let sustained = parameter(&big.report, "outer_sustained_rate").unwrap_or(f64::NAN);
        let instantaneous = parameter(&big.report, "outer_media_rate").unwrap_or(f64::NAN);
        let share = big.bandwidth / 1e6 / sustained;
        check(
            "hdd: 1 MiB sequential read vs outer-zone media rate",
            format!(
                "{:.1} MB/s = {:.0}% of {sustained:.1} ({instantaneous:.1} on one track)",
                big.bandwidth / 1e6,
                share * 100.0
            ),
            ">= 90% of sustained",
            share >= 0.90,
        );
    }
    if let (Some(on), Some(off)) = (
        results.get("hdd randwrite 4k cache on"),
        results.get("hdd randwrite 4k cache off"),
    ) {
        let ratio = on.iops / off.iops;
        check(
            "hdd: 4k random write, write cache on / off",
            format!("{:.0} / {:.0} IOPS = {ratio:.1}x", on.iops, off.iops),
            ">= 2x",
            ratio >= 2.0,
        );
    }
    let ssd: Vec<(u32, &&Figures)> = [1u32, 4, 16, 64, 128]
        .iter()
        .filter_map(|d| {
            results
                .get(format!("ssd randread 4k qd{d}").as_str())
                .map(|f| (*d, f))
        })
        .collect();
    if let Some((_, qd1)) = ssd.first() {
        let mean_us = qd1.clat_mean / 1e3;
        check(
            "ssd: 4k random read QD1 mean latency",
            format!("{mean_us:.1} us"),
            "70-130 us",
            (70.0..=130.0).contains(&mean_us),
        );
        let parallelism = parameter(&qd1.report, "dies").unwrap_or(32.0);
        let rising = ssd.windows(2).all(|w| w[1].1.iops >= w[0].1.iops * 0.98);
        let scaled = ssd
            .iter()
            .find(|(d, _)| f64::from(*d) >= parallelism / 2.0)
            .map(|(_, f)| f.iops / qd1.iops)
            .unwrap_or(0.0);
        let flat = ssd.last().map(|(_, f)| f.iops).unwrap_or(0.0)
            / ssd.iter().rev().nth(1).map(|(_, f)| f.iops).unwrap_or(1.0);
        let curve: Vec<String> = ssd
            .iter()
            .map(|(d, f)| format!("{d}:{:.0}k", f.iops / 1e3))
            .collect();
        check(
            "ssd: IOPS grow with QD up to parallelism, then flatten",
            curve.join(" "),
            &format!(
                "rising; >= {:.0}x by QD {:.0}; last doubling < 1.25x",
                parallelism / 4.0,
                parallelism / 2.0
            ),
            rising && scaled >= parallelism / 4.0 && flat < 1.25,
        );
    }
    for &(rw, jobs, target) in SEED003_TABLE {
        let Some(row) = results.get(format!("seed003 {rw} 4k x{jobs}").as_str()) else {
            continue;
        };
        let kib = row.bandwidth / 1024.0;
        let ratio = kib / target;
        let pass = (0.75..=1.25).contains(&ratio);
        checks.push(Check {
            name: format!("seed 003 table: {rw} 4 KiB direct, {jobs} job(s), aggregate"),
            figure: format!("{kib:.0} KiB/s = {ratio:.2}x"),
            target: format!("{target:.0} KiB/s +-25%"),
            pass,
            gap: None,
        });
    }
    if let Some(row) = results.get("seed000 randread 64k") {
        let ms = row.clat_mean / 1e6;
        let ratio = ms / SEED000_NO_LOAD_MS;
        checks.push(Check {
            name: "seed 000 Table 3: no-load 64 KiB random read, mean latency".into(),
            figure: format!("{ms:.2} ms = {ratio:.2}x"),
            target: format!("{SEED000_NO_LOAD_MS} ms +-25%"),
            pass: (0.75..=1.25).contains(&ratio),
            gap: None,
        });
    }
    checks
}

/// What `iosched calibrate --iocost` measures, as the kernel's `iocost_coef_gen.py`
/// (tools/cgroup/iocost_coef_gen.py) does on a real disk: with no scheduler and no merging,
/// sequential reads (writes) of 128 MiB blocks one at a time give `rbps` (`wbps`), 4 KiB
/// sequential ones 64 at a time `rseqiops` (`wseqiops`), and 4 KiB random ones 64 at a time
/// `rrandiops` (`wrandiops`). The line it gives is `io.cost.model`'s.
#[derive(Clone, Debug)]
pub struct IocostOptions {
    /// Device model.
    pub device: String,
    /// Device parameters.
    pub device_settings: Vec<(String, String)>,
    /// Seconds per run (iocost_coef_gen.py: 120).
    pub runtime_s: u64,
    /// Seed for every run.
    pub seed: u64,
    /// Measure this existing file or block device through the real engine (io_uring)
    /// instead of the simulated device. Its size bounds the runs; the write runs overwrite its
    /// data, so they run only with `allow_overwrite`.
    pub file: Option<std::path::PathBuf>,
    /// Whether the write runs may overwrite `file`'s data.
    pub allow_overwrite: bool,
}

/// The six runs of [`IocostOptions`] and the model they give.
pub struct IocostModel {
    /// `rbps`, `rseqiops`, `rrandiops`, `wbps`, `wseqiops`, `wrandiops`.
    pub coefficients: [u64; 6],
    /// Each run: what it is and its bytes per second.
    pub runs: Vec<(String, f64)>,
}

impl IocostModel {
    /// The `io.cost.model` line (`ctrl=user model=linear rbps=...`).
    pub fn line(&self) -> String {
        iosched_core::iocost::CostModel {
            user: true,
            i_lcoefs: self.coefficients,
        }
        .text()
    }
}

/// The size of the existing file or block device `path`, refusing anything else: the tool
/// never creates what it measures.
fn target_size(path: &Path) -> Result<u64> {
    use std::os::unix::fs::FileTypeExt;
    let shown = iosched_core::limits::quote(&path.display().to_string());
    let meta = std::fs::metadata(path)
        .map_err(|e| anyhow::anyhow!("--file {shown}: {e} (calibrate measures an existing file or block device; it creates none)"))?;
    let kind = meta.file_type();
    let size = if kind.is_block_device() {
        let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("--file {shown}: {e}"))?;
        use std::io::Seek;
        let mut file = file;
        file.seek(std::io::SeekFrom::End(0))
            .map_err(|e| anyhow::anyhow!("--file {shown}: {e}"))?
    } else if kind.is_file() {
        meta.len()
    } else {
        anyhow::bail!("--file {shown}: not a regular file or a block device");
    };
    if size < 256 << 20 {
        anyhow::bail!(
            "--file {shown}: {} MiB; the 128 MiB runs need at least 256 MiB",
            size >> 20
        );
    }
    Ok(size)
}

/// Runs `iocost_coef_gen.py`'s six measurements on the simulated device, or on
/// `options.file` through the real engine.
pub fn iocost_model(options: &IocostOptions, progress: &dyn Progress) -> Result<IocostModel> {
    const RUNS: [(&str, &str, &str, u32); 6] = [
        ("rbps", "read", "128m", 1),
        ("rseqiops", "read", "4k", 64),
        ("rrandiops", "randread", "4k", 64),
        ("wbps", "write", "128m", 1),
        ("wseqiops", "write", "4k", 64),
        ("wrandiops", "randwrite", "4k", 64),
    ];
    let real = match &options.file {
        Some(path) => {
            let size = target_size(path)?;
            if !options.allow_overwrite {
                anyhow::bail!(
                    "--file {}: the write runs (wbps, wseqiops, wrandiops) overwrite its data, as \
                     iocost_coef_gen.py's do; pass --allow-overwrite to measure them",
                    iosched_core::limits::quote(&path.display().to_string())
                );
            }
            Some((path.clone(), size))
        }
        None => None,
    };
    let base = Setup {
        seed: options.seed,
        device: options.device.clone(),
        device_settings: options.device_settings.clone(),
        settings: vec![("nomerges".into(), "1".into())],
        ..Setup::default()
    };
    progress.begin(RUNS.len());
    let mut coefficients = [0u64; 6];
    let mut runs = Vec::new();
    let result = (|| {
        for (index, (name, rw, bs, depth)) in RUNS.iter().enumerate() {
            progress.started(name);
            let engine = if real.is_some() { "io_uring" } else { "libaio" };
            let mut text = job(rw, bs, engine, *depth, options.runtime_s);
            if let Some((path, size)) = &real {
                text = text.replace(
                    "filename=/dev/sda\n",
                    &format!("filename={}\nsize={size}\n", path.display()),
                );
            }
            let file = parse::parse_str(&text, "iocost_coef_gen.fio", Path::new("."), &|_| None)
                .map_err(anyhow::Error::msg)?;
            let report = match &real {
                None => {
                    let config = base.config("none")?;
                    iosched_sim::run(&config, &file).map_err(anyhow::Error::msg)?
                }
                Some(_) => {
                    let config = iosched_uring::UringConfig {
                        policy: "none".into(),
                        policy_settings: vec![("nomerges".into(), "1".into())],
                        seed: options.seed,
                        ..iosched_uring::UringConfig::default()
                    };
                    let outcome = iosched_uring::run(&config, &file).map_err(anyhow::Error::msg)?;
                    if let Some(error) = outcome.errors.first() {
                        anyhow::bail!("{name}: {error}");
                    }
                    outcome.report
                }
            };
            let f = figures("iocost", report);
            let value = if bs == &"4k" {
                (f.bandwidth / 4096.0).round()
            } else {
                f.bandwidth.round()
            };
            coefficients[index] = value as u64;
            progress.finished(name, &format!("{value:.0}"));
            runs.push((format!("{name}: {rw} bs={bs} iodepth={depth}"), f.bandwidth));
        }
        Ok(())
    })();
    progress.end();
    result.map(|()| IocostModel { coefficients, runs })
}

#[cfg(test)]
mod iocost_tests {
    use super::*;

    // Proves calibrate --iocost measures the six figures iocost_coef_gen.py does and gives a
    // line io.cost.model takes back: on the disk, random 4 KiB reads are far fewer than
    // sequential ones, and 128 MiB reads run near the media rate.
    #[test]
    fn the_disk_gives_a_model_io_cost_takes() {
        let options = IocostOptions {
            device: "hdd".into(),
            device_settings: Vec::new(),
            runtime_s: 2,
            seed: 1,
            file: None,
            allow_overwrite: false,
        };
        let model = iocost_model(&options, &crate::progress::Quiet).unwrap();
        let [rbps, rseqiops, rrandiops, wbps, _, wrandiops] = model.coefficients;
        assert!(
            rbps > 30_000_000 && wbps > 20_000_000,
            "{:?}",
            model.coefficients
        );
        assert!(rrandiops * 20 < rseqiops, "{:?}", model.coefficients);
        assert!((50..1000).contains(&rrandiops) && wrandiops > 0);
        let mut parsed = iosched_core::iocost::CostModel::default();
        parsed.set(&model.line()).unwrap();
        assert_eq!(parsed.i_lcoefs, model.coefficients);
    }
}

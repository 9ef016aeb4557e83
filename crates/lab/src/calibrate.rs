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
}

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
        },
        Scenario {
            name: "hdd randread 4k qd32",
            device: "hdd",
            device_settings: &[],
            job: job("randread", "4k", "libaio", 32, long),
        },
        Scenario {
            name: "hdd read 4k sync",
            device: "hdd",
            device_settings: &[],
            job: job("read", "4k", "psync", 1, short),
        },
        Scenario {
            name: "hdd read 1m",
            device: "hdd",
            device_settings: &[],
            job: job("read", "1m", "psync", 1, short),
        },
        Scenario {
            name: "hdd randwrite 4k cache on",
            device: "hdd",
            device_settings: &[("write_cache", "on")],
            job: job("randwrite", "4k", "psync", 1, short * 3),
        },
        Scenario {
            name: "hdd randwrite 4k cache off",
            device: "hdd",
            device_settings: &[("write_cache", "off")],
            job: job("randwrite", "4k", "psync", 1, short * 3),
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
        });
    }
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
}

fn figures(name: &'static str, report: RunReport) -> Figures {
    let job = &report.jobs[0];
    let (dir, stats) = DataDir::ALL
        .iter()
        .map(|&d| (d, job.dir(d)))
        .max_by_key(|(_, s)| s.total_ios)
        .expect("three directions");
    let _ = dir;
    let seconds = job.runtime as f64 / 1e9;
    Figures {
        name,
        iops: stats.total_ios as f64 / seconds,
        bandwidth: stats.io_bytes as f64 / seconds,
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
            let config = SimConfig {
                device: scenario.device.into(),
                device_settings: scenario
                    .device_settings
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.to_string()))
                    .collect(),
                ..base.config(&options.policy)?
            };
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
    checks
}

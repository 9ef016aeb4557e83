//! `iosched calibrate`: prints each device model's calibration figures against their targets
//! (the workloads and targets are `iosched_lab::calibrate`).

use crate::progress::Bar;
use anyhow::Result;
use clap::Args;
use iosched_lab::calibrate::{check, iocost_model, measure, IocostOptions, Options};
use std::process::ExitCode;

/// Arguments of `iosched calibrate`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Shorter runs (for the test suite); the same targets.
    #[arg(long)]
    pub quick: bool,
    /// Only this device model (hdd or ssd).
    #[arg(long)]
    pub only: Option<String>,
    /// Seed for every run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Policy to run the calibration workloads under.
    #[arg(long, default_value = "deadline")]
    pub policy: String,
    /// No progress bar on standard error.
    #[arg(long, short)]
    pub quiet: bool,
    /// Derive the device's `io.cost.model` line (blk-iocost's linear model) as the kernel's
    /// iocost_coef_gen.py does, instead of checking the models: sequential 128 MiB and
    /// 4 KiB, and random 4 KiB, reads and writes with no scheduler and no merging.
    #[arg(long)]
    pub iocost: bool,
    /// With --iocost: the device model to measure.
    #[arg(long, default_value = "hdd")]
    pub device: String,
    /// With --iocost: a device parameter (NAME=VALUE), as `iosched run --device-set`.
    #[arg(long = "device-set", value_name = "NAME=VALUE")]
    pub device_set: Vec<String>,
    /// With --iocost: measure this existing file or block device through the real engine
    /// (io_uring, no scheduler) instead of the simulated --device.
    #[arg(long, value_name = "PATH")]
    pub file: Option<std::path::PathBuf>,
    /// With --iocost --file: let the write runs overwrite the file's data.
    #[arg(long)]
    pub allow_overwrite: bool,
    /// With --iocost: seconds per run (iocost_coef_gen.py runs 120).
    #[arg(long, value_name = "S", default_value_t = 30)]
    pub runtime: u64,
}

/// Runs `iosched calibrate`.
pub fn calibrate(args: CalibrateArgs) -> Result<ExitCode> {
    if args.iocost {
        return iocost(args);
    }
    println!(
        "iosched calibrate: seed {}, policy {}{}",
        args.seed,
        args.policy,
        if args.quick { ", quick" } else { "" }
    );
    let options = Options {
        quick: args.quick,
        only: args.only,
        seed: args.seed,
        policy: args.policy,
    };
    let measured = measure(&options, &Bar::new(args.quiet))?;
    for f in &measured {
        println!(
            "  {:<28} IOPS {:>9.1}  BW {:>8.2} MB/s  clat mean {:>10.1} us  p99.99 {:>10.1} ms",
            f.name,
            f.iops,
            f.bandwidth / 1e6,
            f.clat_mean / 1e3,
            f.clat_p9999 / 1e6
        );
    }
    println!();
    let checks = check(&measured);
    for c in &checks {
        let status = match (c.pass, &c.gap) {
            (true, _) => "PASS",
            (false, Some(_)) => "GAP ",
            (false, None) => "FAIL",
        };
        println!(
            "  {status} {:<50} {:>26}   target {}",
            c.name, c.figure, c.target
        );
        if let (false, Some(gap)) = (c.pass, &c.gap) {
            println!("       known gap: {gap}");
        }
    }
    println!();
    let failures = checks.iter().filter(|c| !c.pass && c.gap.is_none()).count();
    let gaps = checks.iter().filter(|c| !c.pass && c.gap.is_some()).count();
    if failures == 0 {
        if gaps > 0 {
            println!("calibration: every target met but {gaps} known gap(s)");
        } else {
            println!("calibration: all targets met");
        }
        Ok(ExitCode::SUCCESS)
    } else {
        println!("calibration: {failures} target(s) missed");
        Ok(ExitCode::FAILURE)
    }
}

/// `iosched calibrate --iocost`: the simulated device's `io.cost.model`.
fn iocost(args: CalibrateArgs) -> Result<ExitCode> {
    let mut device_settings = Vec::new();
    for item in &args.device_set {
        let Some((name, value)) = item.split_once('=') else {
            anyhow::bail!(
                "--device-set {}: expected NAME=VALUE",
                iosched_core::limits::quote(item)
            );
        };
        device_settings.push((name.trim().to_string(), value.trim().to_string()));
    }
    if args.runtime == 0 {
        anyhow::bail!("--runtime 0: a run needs at least one second");
    }
    let target = match &args.file {
        Some(path) => format!("{} (real engine)", path.display()),
        None => format!("device {}", args.device),
    };
    println!(
        "iosched calibrate --iocost: seed {}, {target}, {} s per run (iocost_coef_gen.py)",
        args.seed, args.runtime
    );
    let options = IocostOptions {
        device: args.device,
        device_settings,
        runtime_s: args.runtime,
        seed: args.seed,
        file: args.file,
        allow_overwrite: args.allow_overwrite,
    };
    let model = iocost_model(&options, &Bar::new(args.quiet))?;
    for (run, bandwidth) in &model.runs {
        println!("  {run:<40} {:>10.2} MB/s", bandwidth / 1e6);
    }
    println!();
    println!("io.cost.model: {}", model.line());
    println!("use it as: --group \"/:io.cost.model={}\"", model.line());
    Ok(ExitCode::SUCCESS)
}

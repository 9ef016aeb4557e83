//! `iosched calibrate`: prints each device model's calibration figures against their targets
//! (the workloads and targets are `iosched_lab::calibrate`).

use crate::progress::Bar;
use anyhow::Result;
use clap::Args;
use iosched_lab::calibrate::{check, measure, Options};
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
}

/// Runs `iosched calibrate`.
pub fn calibrate(args: CalibrateArgs) -> Result<ExitCode> {
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

//! `iosched bench`: how many simulated requests the simulator completes per wall-clock second.

use crate::run::SetupArgs;
use anyhow::Result;
use clap::Args;
use iosched_fio::parse;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `iosched bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Requests each of the jobs issues.
    #[arg(long, default_value_t = 500_000)]
    pub requests_per_job: u64,
    /// Number of jobs (synchronous 4 KiB random readers over the whole device).
    #[arg(long, default_value_t = 4)]
    pub jobs: u32,
    /// Timed repetitions; the best is reported, as the others measure the machine's noise.
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Scheduling policy (see `iosched policies`) [default: deadline].
    #[arg(long)]
    pub policy: Option<String>,
    #[command(flatten)]
    pub setup: SetupArgs,
}

/// The benchmark's job file: `jobs` synchronous random readers, each `requests` 4 KiB reads.
pub fn job_text(jobs: u32, requests: u64) -> String {
    format!(
        "[global]\nfilename=/dev/sda\nrw=randread\nbs=4k\ndirect=1\nioengine=psync\nio_size={}\n\n[reader]\nnumjobs={jobs}\n",
        requests * 4096
    )
}

/// Runs `iosched bench`.
pub fn bench(args: BenchArgs) -> Result<ExitCode> {
    let text = job_text(args.jobs, args.requests_per_job);
    let file = parse::parse_str(&text, "bench.fio", Path::new("."), &|_| None)
        .map_err(anyhow::Error::msg)?;
    let config = args
        .setup
        .config(args.policy.as_deref().unwrap_or(crate::run::DEFAULT_POLICY))?;
    println!(
        "iosched bench: seed {}, policy {}, device {}, {} synchronous 4 KiB random readers x {} requests",
        config.seed, config.policy, config.device, args.jobs, args.requests_per_job
    );
    let mut best: Option<f64> = None;
    for round in 1..=args.repeat.max(1) {
        let started = Instant::now();
        let report = iosched_sim::run(&config, &file).map_err(anyhow::Error::msg)?;
        let wall = started.elapsed().as_secs_f64();
        let requests: u64 = report
            .jobs
            .iter()
            .map(|j| j.dirs.iter().map(|d| d.total_ios).sum::<u64>())
            .sum();
        let rate = requests as f64 / wall;
        println!(
            "round {round}: {requests} requests, {:.3} simulated s, {:.3} wall s: {:.0} simulated requests per wall second",
            report.duration as f64 / 1e9,
            wall,
            rate
        );
        best = Some(best.map_or(rate, |b: f64| b.max(rate)));
    }
    println!(
        "best: {:.0} simulated requests per wall second (one core)",
        best.unwrap_or(0.0)
    );
    Ok(ExitCode::SUCCESS)
}

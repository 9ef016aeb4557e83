//! `iosched bench`: how many simulated requests the simulator completes per wall-clock second,
//! for one setup or a table of policies by job counts.

use crate::run::SetupArgs;
use anyhow::{bail, Result};
use clap::Args;
use iosched_core::limits;
use iosched_fio::parse;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `iosched bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Requests each of the jobs issues (unless --requests is given).
    #[arg(long, default_value_t = 500_000)]
    pub requests_per_job: u64,
    /// Requests of all the jobs together, shared among them: the same work at every job count,
    /// so that a table compares the cost per request.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Numbers of jobs (synchronous 4 KiB random readers over the whole device); a list
    /// (`--jobs 4,64,1024`) makes a table with a column each.
    #[arg(long, value_delimiter = ',', default_value = "4")]
    pub jobs: Vec<u32>,
    /// I/Os in flight of all the jobs together, shared among them: each job reads with
    /// ioengine=libaio at iodepth IN_FLIGHT / jobs (synchronously when that is 1, and never
    /// below 1). The same load at every job count, so that a table compares numbers of jobs
    /// rather than depths of queues: without it, 4 synchronous readers keep 4 I/Os in flight
    /// and 1024 keep 1024.
    #[arg(long)]
    pub in_flight: Option<u32>,
    /// Spreads the jobs over this many cgroups (`/bench0`, `/bench1`, ...; fio's `cgroup=`),
    /// as evenly as they go, each at the default weight unless `--group` sets one
    /// (`--group /bench1:io.weight=200`): a table then compares jobs per cgroup. Every cgroup
    /// needs a job, so no more cgroups than the fewest jobs.
    #[arg(long)]
    pub cgroups: Option<u32>,
    /// Timed repetitions; the best is reported, as the others measure the machine's noise.
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Scheduling policies (see `iosched policies`) [default: deadline]; a list
    /// (`--policy deadline,bfq,grouped-cfq`) makes a table with a row each.
    #[arg(long, value_delimiter = ',')]
    pub policy: Vec<String>,
    #[command(flatten)]
    pub setup: SetupArgs,
}

/// The benchmark's job file: `jobs` random readers, each `requests` 4 KiB reads, synchronous
/// at `iodepth` 1, else asynchronous (libaio) at that depth; in `cgroups` cgroups
/// (`/bench0`...), the first `jobs % cgroups` of them with one job more, or none.
pub fn job_text(jobs: u32, requests: u64, iodepth: u32, cgroups: Option<u32>) -> String {
    let engine = if iodepth > 1 {
        format!("ioengine=libaio\niodepth={iodepth}")
    } else {
        "ioengine=psync".to_string()
    };
    let mut text = format!(
        "[global]\nfilename=/dev/sda\nrw=randread\nbs=4k\ndirect=1\n{engine}\nio_size={}\n",
        requests * 4096
    );
    match cgroups {
        None => text.push_str(&format!("\n[reader]\nnumjobs={jobs}\n")),
        Some(cgroups) => {
            for group in 0..cgroups {
                let numjobs = jobs / cgroups + u32::from(group < jobs % cgroups);
                text.push_str(&format!(
                    "\n[reader{group}]\ncgroup=bench{group}\nnumjobs={numjobs}\n"
                ));
            }
        }
    }
    text
}

/// Each job's iodepth with `jobs` jobs: its share of `--in-flight`, at least 1; 1 without it.
fn iodepth(args: &BenchArgs, jobs: u32) -> u32 {
    args.in_flight.map_or(1, |total| (total / jobs).max(1))
}

/// Requests each of `jobs` jobs issues.
fn requests_per_job(args: &BenchArgs, jobs: u32) -> u64 {
    match args.requests {
        Some(total) => (total / u64::from(jobs)).max(1),
        None => args.requests_per_job,
    }
}

/// Refuses `count` `what` given to `option` past iosched's `limit`, naming the option.
fn within_limit(option: &str, count: u32, what: &str, limit: usize) -> Result<()> {
    if count as usize > limit {
        bail!("{option}: {count} {what} is more than iosched's limit, {limit}");
    }
    Ok(())
}

/// Refuses, before any run, what the benchmark's job file could not hold, naming the option:
/// a job count of 0 or past the limit on jobs, no I/O in flight, a job's share of
/// `--in-flight` past the limit on iodepth, or a job's requests past the limit on sizes (4 KiB
/// each).
fn check(args: &BenchArgs) -> Result<()> {
    if args.in_flight == Some(0) {
        bail!("--in-flight: the I/Os in flight must be 1 or more");
    }
    if let Some(cgroups) = args.cgroups {
        if cgroups == 0 {
            bail!("--cgroups: the number of cgroups must be 1 or more");
        }
        within_limit("--cgroups", cgroups, "cgroups", limits::GROUPS_MAX)?;
        if let Some(&jobs) = args.jobs.iter().find(|&&jobs| jobs < cgroups) {
            bail!("--cgroups: {cgroups} cgroups need a job each, and --jobs has {jobs}");
        }
    }
    for &jobs in &args.jobs {
        if jobs == 0 {
            bail!("--jobs: a number of jobs must be 1 or more");
        }
        within_limit("--jobs", jobs, "jobs", limits::JOBS_MAX)?;
        let depth = iodepth(args, jobs);
        if depth > limits::IODEPTH_MAX {
            bail!(
                "--in-flight: {} I/Os over {jobs} jobs is an iodepth of {depth} per job, more than iosched's limit, {}",
                args.in_flight.unwrap_or(1),
                limits::IODEPTH_MAX
            );
        }
        let per_job = requests_per_job(args, jobs);
        if per_job
            .checked_mul(4096)
            .is_none_or(|bytes| bytes > limits::SIZE_BYTES_MAX)
        {
            let option = if args.requests.is_some() {
                "--requests"
            } else {
                "--requests-per-job"
            };
            bail!(
                "{option}: {per_job} requests of 4 KiB per job is more than iosched's limit for any size, 1 EiB (2^60 bytes)"
            );
        }
    }
    Ok(())
}

/// The best rate of `repeat` runs of `jobs` readers under `policy`, printing each round when
/// `verbose`.
fn measure(args: &BenchArgs, policy: &str, jobs: u32, verbose: bool) -> Result<f64> {
    let per_job = requests_per_job(args, jobs);
    let depth = iodepth(args, jobs);
    let text = job_text(jobs, per_job, depth, args.cgroups);
    let file = parse::parse_str(&text, "bench.fio", Path::new("."), &|_| None)
        .map_err(anyhow::Error::msg)?;
    let mut config = args.setup.config(policy)?;
    // As `iosched run`: the jobs keep no charts, which only reports draw.
    config.charts = false;
    if verbose {
        let readers = if depth > 1 {
            format!("4 KiB random readers at iodepth {depth} (libaio)")
        } else {
            "synchronous 4 KiB random readers".to_string()
        };
        let cgroups = args
            .cgroups
            .map_or(String::new(), |cgroups| format!(" in {cgroups} cgroups"));
        println!(
            "iosched bench: seed {}, policy {}, device {}, {jobs} {readers}{cgroups} x {per_job} requests",
            config.seed, config.policy, config.device
        );
    }
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
        if verbose {
            println!(
                "round {round}: {requests} requests, {:.3} simulated s, {:.3} wall s: {:.0} simulated requests per wall second",
                report.duration as f64 / 1e9,
                wall,
                rate
            );
        }
        best = Some(best.map_or(rate, |b: f64| b.max(rate)));
    }
    Ok(best.unwrap_or(0.0))
}

/// A rate as the table shows it: `1.23M`, `456k`.
fn rate_text(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.2}M", rate / 1e6)
    } else {
        format!("{:.0}k", rate / 1e3)
    }
}

/// Runs `iosched bench`.
pub fn bench(args: BenchArgs) -> Result<ExitCode> {
    check(&args)?;
    let policies: Vec<String> = if args.policy.is_empty() {
        vec![crate::run::DEFAULT_POLICY.to_string()]
    } else {
        args.policy.clone()
    };
    if policies.len() == 1 && args.jobs.len() == 1 {
        let best = measure(&args, &policies[0], args.jobs[0], true)?;
        println!("best: {best:.0} simulated requests per wall second (one core)");
        return Ok(ExitCode::SUCCESS);
    }
    // A table: the best of the repeats per cell, and how much slower a request is at the
    // most jobs than at the fewest.
    let (fewest, most) = (
        args.jobs.iter().copied().min().unwrap_or(1),
        args.jobs.iter().copied().max().unwrap_or(1),
    );
    let readers = match args.in_flight {
        Some(total) => format!(
            "4 KiB random readers, {total} I/Os in flight in all (each job at iodepth {total} / jobs: libaio, or synchronous at 1)"
        ),
        None => "synchronous 4 KiB random readers".to_string(),
    };
    let readers = match args.cgroups {
        Some(cgroups) => format!("{readers}, the jobs spread over {cgroups} cgroups"),
        None => readers,
    };
    println!(
        "iosched bench: simulated requests per wall second (one core, best of {}), {readers}{}",
        args.repeat.max(1),
        match args.requests {
            Some(total) => format!(", {total} requests in all"),
            None => format!(", {} requests per job", args.requests_per_job),
        }
    );
    // The policy column fits the longest name (grouped-anticipatory, iolatency+deadline).
    let width = policies.iter().map(|p| p.len()).max().unwrap_or(0).max(14);
    let mut header = format!("{:<width$}", "policy");
    for jobs in &args.jobs {
        header.push_str(&format!("{:>10}", format!("{jobs} jobs")));
    }
    if fewest != most {
        header.push_str(&format!("{:>18}", format!("{most} vs {fewest}")));
    }
    println!("{header}");
    for policy in &policies {
        let mut line = format!("{policy:<width$}");
        let mut rates = Vec::with_capacity(args.jobs.len());
        for &jobs in &args.jobs {
            let rate = measure(&args, policy, jobs, false)?;
            rates.push((jobs, rate));
            line.push_str(&format!("{:>10}", rate_text(rate)));
        }
        if fewest != most {
            let at = |n: u32| rates.iter().find(|(j, _)| *j == n).map_or(0.0, |r| r.1);
            let slower = at(fewest) / at(most).max(f64::MIN_POSITIVE);
            line.push_str(&format!("{:>18}", format!("{slower:.1}x slower")));
        }
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves --cgroups' job file: the jobs spread over the cgroups as evenly as they go (the
    // first ones one more), each cgroup its own path, every job and request kept.
    #[test]
    fn jobs_spread_over_the_cgroups() {
        let text = job_text(10, 5, 4, Some(4));
        let file = parse::parse_str(&text, "bench.fio", Path::new("."), &|_| None).unwrap();
        let mut per_group = std::collections::BTreeMap::new();
        for job in &file.jobs {
            *per_group.entry(job.cgroup.clone()).or_insert(0) += 1;
            assert_eq!(job.iodepth, 4);
        }
        let expected: std::collections::BTreeMap<String, u32> = [
            ("/bench0", 3),
            ("/bench1", 3),
            ("/bench2", 2),
            ("/bench3", 2),
        ]
        .into_iter()
        .map(|(group, jobs)| (group.to_string(), jobs))
        .collect();
        assert_eq!(per_group, expected);
        let flat = parse::parse_str(
            &job_text(10, 5, 1, None),
            "bench.fio",
            Path::new("."),
            &|_| None,
        )
        .unwrap();
        assert_eq!(flat.jobs.len(), 10);
        assert!(flat.jobs.iter().all(|job| job.cgroup == "/"));
    }
}

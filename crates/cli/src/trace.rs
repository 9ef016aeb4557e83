//! `iosched trace`: what a trace holds (`info`), a trace in another format (`convert`), and a
//! trace's flows as a job file that `iosched run`, `compare` or an experiment replays
//! (`jobs`; the replay itself is `iosched_fio::trace::replay`).

use crate::run::write_output;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use iosched_fio::output::file::OutputFile;
use iosched_fio::trace::jobs::{job_file, FlowMap, JobsOptions};
use iosched_fio::trace::replay::{summarize, ReplayMode, ReplaySpec};
use iosched_fio::trace::{Format, TraceReader, TraceWriter};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `iosched trace`.
#[derive(Args, Debug)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Subcommand, Debug)]
enum TraceCommand {
    /// What a trace holds: its flows, targets, directions, span and recorded response time.
    Info(InfoArgs),
    /// Write a trace in another format (iolog v3, msr, spc, blkparse, blktrace).
    Convert(ConvertArgs),
    /// Print a fio job file that replays each of the trace's flows as its own job (then
    /// `iosched run FILE`, or `iosched trace jobs ... | iosched run -`).
    Jobs(JobsArgs),
}

fn parse_format(text: &str) -> Result<Format, String> {
    Format::parse(text)
}

#[derive(Args, Debug)]
struct InfoArgs {
    /// The trace (a blktrace capture's per-CPU files by their prefix).
    trace: PathBuf,
    /// Its format: iolog, blktrace, msr, spc, blkparse (told from its first bytes if not given).
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
}

#[derive(Args, Debug)]
struct ConvertArgs {
    /// The trace to read.
    input: PathBuf,
    /// Where to write the converted trace (replaced only when complete; `-` is standard
    /// output).
    output: PathBuf,
    /// The input's format (told from its first bytes if not given).
    #[arg(long, value_parser = parse_format)]
    from: Option<Format>,
    /// The output's format.
    #[arg(long, value_parser = parse_format)]
    to: Format,
    /// No progress on standard error.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct JobsArgs {
    /// The trace.
    trace: PathBuf,
    /// Its format (told from its first bytes if not given).
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    /// When each I/O goes: fio (the trace's gaps from the last issue), open (at the trace's
    /// times), closed (one at a time, after the last completion and the trace's think time).
    #[arg(long, default_value = "open", value_parser = ReplayMode::parse)]
    mode: ReplayMode,
    /// Replay at this percentage of the trace's pace (200: twice as fast).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    time_scale: u32,
    /// Each flow's queue depth (open and fio modes): its most I/Os in flight.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=i64::from(iosched_core::limits::IODEPTH_MAX)))]
    iodepth: u32,
    /// Where a target goes: TARGET=FILE (repeatable, e.g. disk:web_0=/dev/sdb); by default
    /// each target is a file of its own name (web_0.dat), never a device you did not name.
    #[arg(long = "target", value_name = "TARGET=FILE")]
    targets: Vec<String>,
    /// A flow's cgroup and priority: KEY=/cgroup, KEY=/cgroup:CLASS/LEVEL or KEY=:CLASS/LEVEL
    /// (e.g. pid:1234=/db:rt/0; repeatable).
    #[arg(long = "flow-map", value_name = "KEY=/CGROUP[:CLASS/LEVEL]", value_parser = FlowMap::parse)]
    flow_map: Vec<FlowMap>,
    /// Write the job file here instead of standard output.
    #[arg(long)]
    output: Option<PathBuf>,
}

/// Runs `iosched trace`.
pub fn trace(args: TraceArgs) -> Result<ExitCode> {
    match args.command {
        TraceCommand::Info(info) => print_info(&info),
        TraceCommand::Convert(convert) => run_convert(&convert),
        TraceCommand::Jobs(jobs) => print_jobs(&jobs),
    }
}

fn ms(nanos: u64) -> String {
    format!("{:.3} ms", nanos as f64 / 1e6)
}

fn print_info(args: &InfoArgs) -> Result<ExitCode> {
    let mut spec = ReplaySpec::new(&args.trace.display().to_string());
    spec.format = args.format;
    let summary = summarize(&spec).map_err(anyhow::Error::msg)?;
    let format = summary.format.map_or("?", Format::name);
    println!("trace     {} ({format})", args.trace.display());
    println!(
        "requests  {} reads, {} writes, {} trims, {} syncs",
        summary.ios[0], summary.ios[1], summary.ios[2], summary.syncs
    );
    println!(
        "bytes     {} read, {} written, {} trimmed",
        summary.bytes[0], summary.bytes[1], summary.bytes[2]
    );
    for (dir, name) in ["read", "write", "trim"].iter().enumerate() {
        if summary.ios[dir] > 0 {
            println!(
                "sizes     {name}: {} to {} bytes",
                summary.min_bs[dir], summary.max_bs[dir]
            );
        }
    }
    println!("span      {}", ms(summary.span()));
    if let Some(mean) = summary.mean_response() {
        println!(
            "response  mean {} over {} recorded",
            ms(mean),
            summary.responses
        );
    }
    if summary.out_of_order > 0 {
        println!(
            "order     {} records earlier than the one before (replayed with no gap, as fio does)",
            summary.out_of_order
        );
    }
    println!("targets   {}", summary.targets.len());
    for (name, end) in &summary.targets {
        println!("  {name:<24} furthest byte {end}");
    }
    println!(
        "flows     {} (iolog_flow= / --flow-map keys)",
        summary.flows.len()
    );
    for (key, ios) in &summary.flows {
        println!("  {key:<24} {ios} I/Os");
    }
    Ok(ExitCode::SUCCESS)
}

fn run_convert(args: &ConvertArgs) -> Result<ExitCode> {
    if args.input == args.output {
        bail!(
            "{}: converting a trace onto itself would destroy it; name another output",
            args.input.display()
        );
    }
    let mut reader = TraceReader::open(&args.input, args.from).map_err(anyhow::Error::msg)?;
    // The output is a file the user named: written beside it and moved into place only when
    // the whole trace converted.
    // (OutputFile buffers its writes itself.)
    let output = OutputFile::create(&args.output).map_err(anyhow::Error::msg)?;
    let mut writer = TraceWriter::new(args.to, output)
        .with_context(|| format!("writing {}", args.output.display()))?;
    let show = !args.quiet && std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last_shown = Instant::now();
    while let Some(record) = reader.next_record().map_err(anyhow::Error::msg)? {
        writer
            .write(&record, reader.names())
            .with_context(|| format!("writing {}", args.output.display()))?;
        if show && last_shown.elapsed().as_millis() >= 500 {
            last_shown = Instant::now();
            let (read, size) = reader.progress();
            if let Some(size) = size.filter(|&s| s > 0) {
                let done = read as f64 / size as f64;
                let elapsed = started.elapsed().as_secs_f64();
                let eta = if done > 0.0 {
                    elapsed / done - elapsed
                } else {
                    0.0
                };
                eprint!("\r{:5.1}%  ETA {:.0} s   ", done * 100.0, eta);
            }
        }
    }
    writer
        .finish(reader.names())
        .with_context(|| format!("writing {}", args.output.display()))?;
    let (written, dropped) = writer.counts();
    let dropped: Vec<(String, u64)> = dropped.to_vec();
    let output = writer.into_inner();
    if show {
        eprint!("\r");
    }
    output.commit().map_err(anyhow::Error::msg)?;
    eprintln!(
        "iosched: {written} records from {} ({}) to {} ({})",
        args.input.display(),
        reader.format(),
        args.output.display(),
        args.to
    );
    for (reason, count) in dropped {
        eprintln!("iosched: {count} records left out: {reason}");
    }
    Ok(ExitCode::SUCCESS)
}

fn print_jobs(args: &JobsArgs) -> Result<ExitCode> {
    let mut filenames = Vec::new();
    for target in &args.targets {
        let Some((name, file)) = target.split_once('=') else {
            bail!("--target {target:?}: TARGET=FILE");
        };
        if name.is_empty() || file.is_empty() {
            bail!("--target {target:?}: TARGET=FILE, both named");
        }
        filenames.push((name.to_string(), file.to_string()));
    }
    let options = JobsOptions {
        path: args.trace.display().to_string(),
        format: args.format,
        mode: args.mode,
        time_scale: args.time_scale,
        iodepth: args.iodepth,
        filenames,
        flow_map: args.flow_map.clone(),
    };
    let text = job_file(&options).map_err(anyhow::Error::msg)?;
    match &args.output {
        Some(path) => write_output(path, &text)?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

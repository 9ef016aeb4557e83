//! `iosched sweep GRID.toml`: every point of a grid of configurations, run in the simulator on
//! all cores, into one tidy table (CSV, a row per point, job and direction) and a summary.

use crate::progress::Bar;
use anyhow::{Context, Result};
use clap::Args;
use iosched_fio::output::file::OutputFile;
use iosched_lab::sweep::{self, Grid};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `iosched sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The grid: a TOML file naming the workloads (fio job files), the fixed settings and the
    /// axes (see `iosched sweep --help` and docs/sweeps.md).
    pub grid: PathBuf,
    /// Write the table (CSV) here instead of standard output (replaced only when complete).
    #[arg(long, value_name = "FILE.csv")]
    pub output: Option<PathBuf>,
    /// Write the summary (Markdown) here; by default it goes to standard output after the
    /// table is written to --output, or to standard error when the table goes to standard
    /// output.
    #[arg(long, value_name = "FILE.md")]
    pub summary: Option<PathBuf>,
    /// Points run at once (each one simulation on one core). Default: every core.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Where the points run: here on every core (local), or as tasks on a Ray cluster through
    /// the Python package (`python3 -m iosched sweep`; `pip install .` first, see the README's
    /// Python section; IOSCHED_PYTHON names another interpreter). The table is the same.
    #[arg(long, value_enum, default_value_t = Engine::Local)]
    pub engine: Engine,
    /// With --engine ray: the cluster to join (`ray://head:10001`); default: start a local one.
    #[arg(long, value_name = "ADDRESS")]
    pub address: Option<String>,
    /// With --engine ray: how often a task that fails (a worker lost) is retried before its
    /// point is reported as failed.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub retries: u32,
    /// Print the points (their index and values) and run nothing.
    #[arg(long)]
    pub list: bool,
    /// No progress bar on standard error.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `sweep --engine`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// In this process, on every core (or --threads).
    Local,
    /// On a Ray cluster, through the Python package.
    Ray,
}

/// Runs the sweep on Ray through the Python package (`python3 -m iosched sweep`), which writes
/// the same table and summary; returns its exit status.
fn on_ray(args: &SweepArgs) -> Result<ExitCode> {
    if args.threads.is_some() {
        anyhow::bail!("--threads is for the local engine; Ray runs as many tasks as it has CPUs");
    }
    let python = std::env::var("IOSCHED_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&python)
        .args(["-c", "import iosched, ray"])
        .output();
    match probe {
        Ok(output) if output.status.success() => {}
        Ok(output) => anyhow::bail!(
            "--engine ray runs the points through the Python package and Ray, which {python} \
             cannot import ({}): pip install . from the checkout and pip install ray (README, \
             Python), or set IOSCHED_PYTHON to an interpreter that has them",
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or("")
                .trim()
        ),
        Err(error) => anyhow::bail!(
            "--engine ray runs the points through the Python package, but {python} cannot be \
             started ({error}); set IOSCHED_PYTHON to a Python interpreter"
        ),
    }
    let mut command = std::process::Command::new(&python);
    command
        .args(["-m", "iosched", "sweep"])
        .arg(&args.grid)
        .args(["--engine", "ray", "--retries", &args.retries.to_string()]);
    if let Some(address) = &args.address {
        command.args(["--address", address]);
    }
    if let Some(output) = &args.output {
        command.arg("--output").arg(output);
    }
    if let Some(summary) = &args.summary {
        command.arg("--summary").arg(summary);
    }
    if args.quiet {
        command.arg("--quiet");
    }
    let status = command
        .status()
        .with_context(|| format!("cannot run {python} -m iosched sweep"))?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Writes `text` into `file` and puts it in place.
fn commit(mut file: OutputFile, text: &str) -> Result<()> {
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {:?}", file.path()))?;
    let path = file.path().to_path_buf();
    file.commit()?;
    eprintln!("iosched: wrote {}", path.display());
    Ok(())
}

/// Runs `iosched sweep`. Fails (exit status 1) when any point failed, after writing the table
/// and the summary, which say which and why.
pub fn sweep(args: SweepArgs) -> Result<ExitCode> {
    let grid = Grid::read(&args.grid)?;
    if args.list {
        let columns: Vec<&str> = grid.axes.iter().map(|a| a.name.as_str()).collect();
        println!("point\t{}", columns.join("\t"));
        for point in grid.points() {
            println!("{}\t{}", point.index, point.values.join("\t"));
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.engine == Engine::Ray {
        // The grid was read above: a bad one is refused here, with its line, before Ray starts.
        return on_ray(&args);
    }
    if args.address.is_some() {
        anyhow::bail!("--address is for --engine ray");
    }
    let threads = match args.threads {
        Some(0) => anyhow::bail!("--threads 0: at least one thread runs the points"),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // Opened first, so that a path that cannot be written is refused before the runs.
    let output = args.output.as_deref().map(OutputFile::create).transpose()?;
    let summary_file = args
        .summary
        .as_deref()
        .map(OutputFile::create)
        .transpose()?;
    let seeds = if grid.axes.iter().any(|a| a.knob == sweep::Knob::Seed) {
        "each point's seed is on its row".to_string()
    } else {
        format!("seed {} at every point", grid.seed())
    };
    eprintln!(
        "iosched: sweep {}: {} points on {} thread(s); {seeds} (replay one with --list and \
         iosched run)",
        args.grid.display(),
        grid.len(),
        threads.min(grid.len()),
    );
    let started = Instant::now();
    let results = sweep::execute(&grid, threads, &Bar::counting(args.quiet, "points"));
    let wall = started.elapsed();
    let table = sweep::csv(&grid, &results);
    let summary = sweep::summary(&grid, &results, wall);
    let table_to_stdout = output.is_none();
    match output {
        Some(file) => commit(file, &table)?,
        None => print!("{table}"),
    }
    match summary_file {
        Some(file) => commit(file, &summary)?,
        None if table_to_stdout => eprint!("{summary}"),
        None => print!("{summary}"),
    }
    let failed = results.iter().filter(|r| r.outcome.is_err()).count();
    if failed > 0 {
        eprintln!(
            "iosched: error: {failed} of {} points failed (the summary lists them, the table's \
             error column says why)",
            results.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

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
    /// Print the points (their index and values) and run nothing.
    #[arg(long)]
    pub list: bool,
    /// No progress bar on standard error.
    #[arg(long, short)]
    pub quiet: bool,
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

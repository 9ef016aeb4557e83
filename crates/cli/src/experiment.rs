//! `iosched experiment`: list the experiments, run them, print their verdicts, and write
//! their results and reports (the experiments themselves are `iosched_lab::experiment`).

use crate::progress::Bar;
use crate::run::write_output;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use iosched_lab::experiment::{discover, load, results_json, run_experiment, Experiment};
use iosched_report::{study::Study, text};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `iosched experiment`.
#[derive(Args, Debug)]
pub struct ExperimentArgs {
    #[command(subcommand)]
    command: ExperimentCommand,
    /// The folder holding the experiments.
    #[arg(long, global = true, default_value = "experiments")]
    dir: PathBuf,
}

#[derive(Subcommand, Debug)]
enum ExperimentCommand {
    /// List the experiments with their claims' sources and matrix sizes.
    List,
    /// Run one experiment (or --all) and check its claims.
    Run(RunExperimentArgs),
}

#[derive(Args, Debug)]
struct RunExperimentArgs {
    /// The experiment's folder name.
    name: Option<String>,
    /// Run every experiment.
    #[arg(long, conflicts_with = "name")]
    all: bool,
    /// The quick variant: the same claim on shorter runs.
    #[arg(long)]
    quick: bool,
    /// Write the HTML report here (with --all: a directory, one report per experiment).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Where to write each experiment's results JSON.
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Override the experiment's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// No progress bar on standard error.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs `iosched experiment`.
pub fn experiment(args: ExperimentArgs) -> Result<ExitCode> {
    match args.command {
        ExperimentCommand::List => {
            for experiment in discover(&args.dir)? {
                println!(
                    "{:<24} {:>3} runs  {}  [{}]",
                    experiment.name,
                    experiment.cells(),
                    experiment.title(),
                    experiment.source()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ExperimentCommand::Run(run) => {
            let experiments = match (&run.name, run.all) {
                (Some(name), false) => vec![load(&args.dir.join(name))?],
                (None, true) => discover(&args.dir)?,
                _ => bail!("name an experiment or pass --all (see `iosched experiment list`)"),
            };
            let mut failed = Vec::new();
            for experiment in &experiments {
                let study = run_one(experiment, &run)?;
                if !study.passed() {
                    failed.push(experiment.name.clone());
                }
            }
            if failed.is_empty() {
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("iosched: claims not met: {}", failed.join(", "));
                Ok(ExitCode::FAILURE)
            }
        }
    }
}

fn run_one(experiment: &Experiment, args: &RunExperimentArgs) -> Result<Study> {
    let seed = args.seed.unwrap_or(experiment.seed());
    println!(
        "== {} ({}{}): seed {seed}, {} runs",
        experiment.name,
        experiment.title(),
        if args.quick { ", quick" } else { "" },
        experiment.cells()
    );
    println!("{}", experiment.claim());
    println!("Source: {}\n", experiment.source());
    let study = run_experiment(experiment, args.quick, &Bar::new(args.quiet), args.seed)?;
    print!("{}", text::side_by_side(&study));
    println!();
    for verdict in &study.verdicts {
        println!("  {} {}: {}", verdict.word(), verdict.claim, verdict.figure);
        if let Some(gap) = &verdict.gap {
            if verdict.pass {
                println!("       (listed as a known gap, but it holds now: the gap can go)");
            } else {
                println!("       known gap: {gap}");
            }
        }
    }
    println!(
        "{}: {}\n",
        experiment.name,
        if study.passed() { "PASS" } else { "FAIL" }
    );
    let suffix = if args.quick { ".quick" } else { "" };
    std::fs::create_dir_all(&args.results)
        .with_context(|| format!("cannot create {}", args.results.display()))?;
    let results = args
        .results
        .join(format!("{}{suffix}.json", experiment.name));
    let json = serde_json::to_string_pretty(&results_json(experiment, &study, args.quick))
        .expect("JSON values serialize");
    write_output(&results, &(json + "\n"))?;
    if let Some(report) = &args.report {
        let path = if args.all {
            std::fs::create_dir_all(report)
                .with_context(|| format!("cannot create {}", report.display()))?;
            report.join(format!("{}{suffix}.html", experiment.name))
        } else {
            report.clone()
        };
        write_output(&path, &iosched_report::html(&study))?;
        println!("report: {}", path.display());
    }
    println!("results: {}", results.display());
    Ok(study)
}

//! `iosched compare`: the same jobs under several policies, side by side.

use crate::progress::Bar;
use crate::run::SetupArgs;
use anyhow::{Context, Result};
use clap::Args;
use iosched_fio::output::file::OutputFile;
use iosched_lab::matrix::{self, parse_sweep, JobSource, Matrix, Variant};
use iosched_report::{study::Study, text};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `iosched compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The fio job file.
    pub jobfile: PathBuf,
    /// A policy to compare (repeat: --policy deadline --policy noop). POLICY:NAME=VALUE,...
    /// sets tunables for that column only: --policy deadline --policy deadline:priorities=0
    #[arg(long = "policy", required = true)]
    pub policies: Vec<String>,
    /// Sweep a variable the job file reads as ${VAR}: --sweep IODEPTH=1,2,4,8
    #[arg(long, value_name = "VAR=V1,V2,...")]
    pub sweep: Option<String>,
    #[command(flatten)]
    pub setup: SetupArgs,
    /// Write the HTML report (one self-contained file) here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// No progress bar on standard error.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `iosched compare`.
pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    let job = JobSource::read(&args.jobfile)?;
    let sweep = args.sweep.as_deref().map(parse_sweep).transpose()?;
    let variants = args
        .policies
        .iter()
        .map(|text| Variant::parse(text))
        .collect::<Result<Vec<_>>>()?;
    let matrix = Matrix {
        job,
        env: BTreeMap::new(),
        policies: variants,
        sweep: sweep.clone(),
        config: args.setup.config("")?,
    };
    eprintln!(
        "iosched: seed {} (replay with --seed {}), policies {}, device {}",
        args.setup.seed,
        args.setup.seed,
        args.policies.join(", "),
        args.setup.device
    );
    // Opened first, so that a report path that cannot be written is refused before the runs.
    let report = args.report.as_deref().map(OutputFile::create).transpose()?;
    let runs = matrix::execute(&matrix, &Bar::new(args.quiet))?;
    let mut settings = args.setup.device_settings.clone();
    settings.extend(args.setup.settings.iter().cloned());
    let study = Study {
        title: format!("{} under {}", args.jobfile.display(), args.policies.join(" vs ")),
        summary: format!(
            "The jobs of {} run under each policy with the same seed ({}) on the same simulated {} device.",
            args.jobfile.display(),
            args.setup.seed,
            args.setup.device
        ),
        seed: args.setup.seed,
        device: args.setup.device.clone(),
        settings,
        policies: args.policies.clone(),
        sweep: sweep.map(|(_, sweep)| sweep),
        runs,
        verdicts: Vec::new(),
    };
    print!("{}", text::side_by_side(&study));
    if let Some(mut report) = report {
        report
            .write_all(iosched_report::html(&study).as_bytes())
            .with_context(|| format!("cannot write {:?}", report.path()))?;
        let path = report.path().to_path_buf();
        report.commit()?;
        eprintln!("iosched: report written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

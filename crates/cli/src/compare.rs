//! `iosched compare`: the same jobs under several policies, side by side, and one line per
//! policy saying whether it protected the foreground job and at what cost to the rest.

use crate::progress::Bar;
use crate::run::SetupArgs;
use anyhow::{Context, Result};
use clap::Args;
use iosched_fio::output::file::OutputFile;
use iosched_lab::isolation::{self, Foreground};
use iosched_lab::matrix::{self, parse_sweep, JobSource, Matrix, Variant};
use iosched_report::{study::Study, text};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The policies compared when none is given: the baseline, and those that can protect a job.
pub const DEFAULT_POLICIES: &[&str] = &["noop", "deadline", "anticipatory", "cfq", "bfq"];

/// The policy the foreground runs alone under, for the verdicts' baseline.
pub const ALONE_POLICY: &str = "noop";

/// Arguments of `iosched compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The fio job file (`-`: read it from standard input).
    pub jobfile: PathBuf,
    /// A policy to compare (repeat: --policy deadline --policy noop). POLICY:NAME=VALUE,...
    /// sets tunables for that column only: --policy deadline --policy deadline:priorities=0.
    /// Default: noop, deadline, anticipatory, cfq and bfq.
    #[arg(long = "policy")]
    pub policies: Vec<String>,
    /// Sweep a variable the job file reads as ${VAR}: --sweep IODEPTH=1,2,4,8
    #[arg(long, value_name = "VAR=V1,V2,...")]
    pub sweep: Option<String>,
    /// The job to protect. Default: the one job with the best I/O priority (prioclass, prio),
    /// else the one job in the heaviest cgroup (io.weight).
    #[arg(long, value_name = "JOB")]
    pub foreground: Option<String>,
    #[command(flatten)]
    pub setup: SetupArgs,
    /// Write the HTML report (one self-contained file) here.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// What to print: the tables and verdicts (text), or for scripts every run's fio JSON with
    /// its key figures and the verdicts (json), or one row per run, job and direction (csv).
    #[arg(long, value_enum, default_value_t = CompareFormat::Text)]
    pub output_format: CompareFormat,
    /// Write the output here instead of standard output (replaced only when complete).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// No progress bar on standard error.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `compare --output-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareFormat {
    /// The side-by-side tables and the verdicts.
    Text,
    /// The study as JSON (`iosched_lab::export::study_json`).
    Json,
    /// One CSV row per run, job and direction (`iosched_lab::export::study_csv`).
    Csv,
}

/// Runs `iosched compare`.
pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    let job = if args.jobfile == std::path::Path::new("-") {
        JobSource {
            text: crate::run::stdin_job_text()?,
            origin: "<stdin>".into(),
            base_dir: PathBuf::new(),
        }
    } else {
        JobSource::read(&args.jobfile)?
    };
    let sweep = args.sweep.as_deref().map(parse_sweep).transpose()?;
    let policies: Vec<String> = if args.policies.is_empty() {
        DEFAULT_POLICIES.iter().map(|p| p.to_string()).collect()
    } else {
        args.policies.clone()
    };
    let variants = policies
        .iter()
        .map(|text| Variant::parse(text))
        .collect::<Result<Vec<_>>>()?;
    let setup = args.setup.setup();
    let matrix = Matrix {
        job,
        env: BTreeMap::new(),
        policies: variants,
        sweep: sweep.clone(),
        config: setup.config("")?,
    };
    // The jobs as the first cell reads them: the foreground is found (or checked) before the
    // runs, so that a wrong --foreground fails at once.
    let file = matrix.first_file()?;
    let foreground = match &args.foreground {
        Some(name) => Some(isolation::named(&file, name)?),
        None => isolation::foreground(&file, &matrix.config.group_settings),
    };
    eprintln!(
        "iosched: seed {} (replay with --seed {}), policies {}, device {}",
        setup.seed,
        setup.seed,
        policies.join(", "),
        setup.device
    );
    // Opened first, so that a path that cannot be written is refused before the runs.
    let report = args.report.as_deref().map(OutputFile::create).transpose()?;
    let output = args.output.as_deref().map(OutputFile::create).transpose()?;
    let runs = matrix::execute(&matrix, &Bar::new(args.quiet))?;
    let mut settings = setup.device_settings.clone();
    settings.extend(setup.settings.iter().cloned());
    let mut study = Study {
        title: format!("{} under {}", args.jobfile.display(), policies.join(" vs ")),
        summary: format!(
            "The jobs of {} run under each policy with the same seed ({}) on the same simulated {} device.",
            args.jobfile.display(),
            setup.seed,
            setup.device
        ),
        seed: setup.seed,
        device: setup.device.clone(),
        settings,
        policies: policies.clone(),
        sweep: sweep.map(|(_, sweep)| sweep),
        runs,
        verdicts: Vec::new(),
        headline: None,
    };
    // The text goes where the output goes; with json or csv, that is the data, and the
    // tables and verdicts are not printed.
    let mut text_out = String::new();
    text_out.push_str(&text::side_by_side(&study));
    text_out.push('\n');
    match &foreground {
        Some(foreground) => {
            text_out.push_str(&verdicts(&mut study, &file, foreground, &setup)?);
        }
        None => text_out.push_str(
            "No job stands out as the one to protect, so no verdicts: give it a better \
             prioclass/prio or a heavier cgroup (io.weight), or name it with --foreground JOB.\n",
        ),
    }
    let data = match args.output_format {
        CompareFormat::Text => text_out,
        CompareFormat::Json => {
            let mut text = serde_json::to_string_pretty(&iosched_lab::export::study_json(&study))
                .context("cannot render the comparison as JSON")?;
            text.push('\n');
            text
        }
        CompareFormat::Csv => iosched_lab::export::study_csv(&study),
    };
    match output {
        Some(mut file) => {
            file.write_all(data.as_bytes())
                .with_context(|| format!("cannot write {:?}", file.path()))?;
            let path = file.path().to_path_buf();
            file.commit()?;
            eprintln!("iosched: wrote {}", path.display());
        }
        None => print!("{data}"),
    }
    let text_mode = args.output_format == CompareFormat::Text && args.output.is_none();
    match report {
        Some(mut report) => {
            report
                .write_all(iosched_report::html(&study).as_bytes())
                .with_context(|| format!("cannot write {:?}", report.path()))?;
            let path = report.path().to_path_buf();
            report.commit()?;
            if text_mode {
                println!("\nreport: {} (open it in a browser)", path.display());
            } else {
                eprintln!("iosched: report: {} (open it in a browser)", path.display());
            }
        }
        None if text_mode => println!("\nThe charts and every figure: add --report FILE.html"),
        None => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the foreground alone, prints one verdict per policy, and adds them to the study.
fn verdicts(
    study: &mut Study,
    file: &iosched_fio::JobFile,
    foreground: &Foreground,
    setup: &iosched_lab::setup::Setup,
) -> Result<String> {
    use std::fmt::Write as _;
    let mut out = String::new();
    let alone = isolation::alone(file, foreground, setup, ALONE_POLICY)?;
    let judged = isolation::judge(study, foreground, &alone)?;
    let alone_mean = iosched_report::figures::job_figures(&alone, &foreground.job, None)
        .map(|f| f.stats.clat.mean())
        .unwrap_or(0.0);
    let at = match &study.sweep {
        Some(sweep) => format!(" (at {}={})", sweep.name, sweep.values[0]),
        None => String::new(),
    };
    writeln!(
        out,
        "Foreground: {}, {}. Alone ({ALONE_POLICY}) its mean latency is {}{at}:",
        foreground.job,
        foreground.reason,
        iosched_report::figures::duration(alone_mean)
    )?;
    let width = judged.iter().map(|v| v.policy.len()).max().unwrap_or(0);
    for verdict in &judged {
        writeln!(
            out,
            "  {:<width$}  {}",
            verdict.policy,
            verdict.line(&foreground.job)
        )?;
    }
    writeln!(
        out,
        "(protects = mean latency within {}x of alone; partly = within {}x)",
        isolation::PROTECTED_SLOWDOWN,
        isolation::PARTLY_PROTECTED_SLOWDOWN
    )?;
    study.summary.push_str(&format!(
        "\n\nForeground: {}, {}; alone under {ALONE_POLICY} its mean latency is {}. A policy \
         protects it when its mean latency stays within {}x of that; the cost is what the \
         other jobs got, against the most any policy gave them.",
        foreground.job,
        foreground.reason,
        iosched_report::figures::duration(alone_mean),
        isolation::PROTECTED_SLOWDOWN
    ));
    study.verdicts = isolation::study_verdicts(foreground, &judged);
    study.headline = Some(isolation::headline(foreground, &judged));
    Ok(out)
}

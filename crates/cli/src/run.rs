//! `iosched run`: one job file, one policy, one device.

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use iosched_core::limits;
use iosched_fio::output::file::OutputFile;
use iosched_fio::{output, parse, JobFile, JobSpec, RunReport};
use iosched_lab::setup::{parse_group_flag, Setup};
use iosched_sim::{GroupSetting, SimConfig};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

/// The simulated setup every simulating command takes: tunables, device and seed.
#[derive(Args, Clone, Debug)]
pub struct SetupArgs {
    /// Set a queue or policy tunable, as in sysfs (repeatable): --set read_expire=250. With
    /// several policies, POLICY.NAME=VALUE sets it for one of them.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_setting)]
    pub settings: Vec<(String, String)>,
    /// Device model (see `iosched devices`) [default: hdd; `iosched run` takes ssd when the
    /// jobs name /dev/nvme* and no --device is given, as /dev/sd* names a disk].
    #[arg(long)]
    pub device: Option<String>,
    /// Set a device parameter (repeatable): --device-set queue_depth=1
    #[arg(long = "device-set", value_name = "NAME=VALUE", value_parser = parse_setting)]
    pub device_settings: Vec<(String, String)>,
    /// Seed that every random choice derives from; the same seed replays the run exactly.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write a cgroup io controller file (repeatable), as `echo VALUE > /sys/fs/cgroup/PATH/FILE`:
    /// --group /vm1:io.weight=500 --group /vm1/db:io.max="rbps=1048576". Jobs join a group
    /// with fio's cgroup=. A path @rt/0..@rt/7, @be/0..@be/7 or @idle sets a priority
    /// level's qos.* files instead: every request of that level is one QoS client.
    #[arg(long = "group", value_name = "PATH:FILE=VALUE", value_parser = parse_group_flag)]
    pub groups: Vec<GroupSetting>,
    /// Read group settings from a file: one `PATH FILE VALUE` per line, `#` comments.
    #[arg(long = "groups", value_name = "FILE")]
    pub groups_file: Option<PathBuf>,
}

impl SetupArgs {
    /// The setup these options describe.
    pub fn setup(&self) -> Setup {
        Setup {
            settings: self.settings.clone(),
            device: self.device.clone().unwrap_or_else(|| DEFAULT_DEVICE.into()),
            device_settings: self.device_settings.clone(),
            seed: self.seed,
            groups: self.groups.clone(),
            groups_file: self.groups_file.clone(),
        }
    }

    /// The simulator configuration for `policy` on this setup.
    pub fn config(&self, policy: &str) -> Result<SimConfig> {
        self.setup().config(policy)
    }
}

/// Options of the commands that simulate under one policy.
#[derive(Args, Clone, Debug)]
pub struct SimArgs {
    /// Scheduling policy (see `iosched policies`). Default: the job file's `ioscheduler=`, or
    /// deadline.
    #[arg(long)]
    pub policy: Option<String>,
    #[command(flatten)]
    pub setup: SetupArgs,
}

impl SimArgs {
    /// The simulator configuration these options describe.
    pub fn config(&self) -> Result<SimConfig> {
        self.setup
            .config(self.policy.as_deref().unwrap_or(DEFAULT_POLICY))
    }
}

/// The device model when `--device` is not given.
pub const DEFAULT_DEVICE: &str = "hdd";

/// The device model for `file` when `--device` is not given: the SSD model when its jobs
/// name an NVMe namespace (`/dev/nvme0n1`, `/dev/nvme0n1p2`) or a Fusion-io flash card
/// (`/dev/fioa`, the node fio's ssd-steadystate.fio names), else [`DEFAULT_DEVICE`].
pub fn device_for(file: &JobFile) -> &'static str {
    let flash = |name: &str| {
        name.starts_with("/dev/nvme")
            || name.strip_prefix("/dev/fio").is_some_and(|rest| {
                !rest.is_empty()
                    && rest
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            })
    };
    let nvme = file
        .jobs
        .iter()
        .flat_map(|job| &job.filenames)
        .any(|name| flash(name));
    if nvme {
        "ssd"
    } else {
        DEFAULT_DEVICE
    }
}

/// The policy when neither `--policy` nor the job file names one.
pub const DEFAULT_POLICY: &str = "deadline";

/// The policy to run: `--policy`, else the jobs' `ioscheduler=` (fio switches the device's
/// scheduler to it), else [`DEFAULT_POLICY`]. One device has one scheduler, so jobs that ask for
/// different ones are refused.
pub fn choose_policy(requested: Option<&str>, file: &JobFile) -> Result<String> {
    let mut asked: Option<(&str, &JobSpec)> = None;
    for job in &file.jobs {
        let Some(name) = job.ioscheduler.as_deref() else {
            continue;
        };
        match asked {
            Some((first, first_job)) if first != name => bail!(
                "{}: job {:?} asks for ioscheduler={name} but {}: job {:?} asked for ioscheduler={first}; \
                 one simulated device runs one scheduler",
                job.location,
                job.name,
                first_job.location,
                first_job.name
            ),
            Some(_) => {}
            None => asked = Some((name, job)),
        }
    }
    match (requested, asked) {
        (Some(policy), Some((name, job))) if policy != name => {
            eprintln!(
                "iosched: --policy {policy} overrides ioscheduler={name} ({})",
                job.location
            );
            Ok(policy.to_string())
        }
        (Some(policy), _) => Ok(policy.to_string()),
        (None, Some((name, _))) => Ok(name.to_string()),
        (None, None) => Ok(DEFAULT_POLICY.to_string()),
    }
}

/// Says so at start when `policy` is `latency` and nothing sets an I/O priority: it protects
/// the best priority present, so with every job at the default it has no foreground.
pub fn note_latency_without_priorities(
    policy: &str,
    file: &JobFile,
    groups: &[iosched_sim::GroupSetting],
) {
    let is_latency = iosched_core::policies::Stack::parse(policy)
        .is_ok_and(|stack| stack.policy.name == "latency");
    let prioritised = file.jobs.iter().any(|job| {
        job.prio.class() != iosched_core::IoPrioClass::None
            || job.cmdprio.iter().any(Option::is_some)
    }) || groups.iter().any(|group| group.file == "io.prio.class");
    if is_latency && !prioritised {
        eprintln!(
            "iosched: note: the latency policy protects the jobs with the best I/O priority, and \
             no job sets one (fio's prioclass and prio, cmdprio_*, or a group's io.prio.class): \
             it has no foreground to protect"
        );
    }
}

/// `NAME=VALUE` into its parts.
pub fn parse_setting(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(format!("expected NAME=VALUE, got {}", limits::quote(text))),
    }
}

/// Where `iosched run` runs the jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    /// The deterministic simulator (--device, --device-set and --seed apply).
    Sim,
    /// Real reads and writes through io_uring on the jobs' files or block devices.
    Real,
}

/// Arguments of `iosched run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The fio job file (`-`: read it from standard input).
    pub jobfile: PathBuf,
    #[command(flatten)]
    pub sim: SimArgs,
    /// The engine: the simulator, or the real one (io_uring on files and block devices).
    #[arg(long, value_enum, default_value = "sim")]
    pub engine: EngineKind,
    /// Real engine: run every job on this file or block device instead of its filename=.
    #[arg(long, value_name = "PATH")]
    pub filename: Option<PathBuf>,
    /// Real engine: most requests in flight on the device at once [default: the block
    /// device's queue depth, as many as the kernel keeps in flight on it under the scheduler
    /// none (its hardware queue's nr_tags: 32 on a SATA disk, 128 on a loop device), or 32 on
    /// regular files]. The scheduler's nr_requests defaults to twice this, as blk-mq's (128 for
    /// the single-queue schedulers: cfq, anticipatory, grouped-*, dass).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(iosched_core::limits::IODEPTH_MAX)))]
    pub device_depth: Option<u32>,
    /// Output format(s), comma-separated as fio takes them: normal, json.
    #[arg(long, default_value = "normal")]
    pub output_format: String,
    /// Write the results to this file instead of standard output. A regular file is replaced
    /// only by complete output (the results, or with json a document naming the error of a run
    /// that failed); a device or FIFO is written in place; a symlink is followed, never
    /// replaced; `-` is standard output.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// No progress bar on standard error (it shows only on a terminal, for runs over two
    /// seconds).
    #[arg(long, short)]
    pub quiet: bool,
}

/// An output format `--output-format` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// fio's normal text.
    Normal,
    /// fio 3.33's JSON.
    Json,
}

/// The formats of `--output-format` (comma-separated, in order).
pub fn parse_formats(text: &str) -> Result<Vec<Format>> {
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim) {
        out.push(match name {
            "normal" => Format::Normal,
            "json" => Format::Json,
            "terse" | "json+" => {
                bail!("--output-format {name} is not supported; use normal or json")
            }
            other => bail!(
                "unknown --output-format {}; use normal, json or normal,json",
                limits::quote(other)
            ),
        });
    }
    Ok(out)
}

/// Renders `report` in each format, in order.
fn render(report: &RunReport, formats: &[Format]) -> String {
    let mut text = String::new();
    for format in formats {
        match format {
            Format::Normal => text.push_str(&output::normal(report)),
            Format::Json => {
                text.push_str(&output::json_string(report));
                text.push('\n');
            }
        }
    }
    text
}

/// Writes `text` to the output `path` the user named: a regular file is replaced only by
/// complete output, a device or FIFO is written in place, a symlink is followed (see
/// [`iosched_fio::output::file`]).
pub fn write_output(path: &Path, text: &str) -> Result<()> {
    iosched_fio::output::file::write_output(path, text.as_bytes()).map_err(anyhow::Error::new)
}

/// Runs `iosched run`. With `--output-format json`, a run that fails (a job file that does not
/// parse, a device that cannot be opened, a limit exceeded) still writes a JSON document, with
/// the error, where the results would have gone; the error goes to stderr as always.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    let formats = parse_formats(&args.output_format)?;
    let mut output = None;
    let result = run_jobs(&args, &formats, &mut output);
    if let Err(error) = &result {
        if formats.contains(&Format::Json) {
            let message = iosched_core::limits::shorten_quoted(&format!("{error:#}"));
            write_error_document(&args, output, &message);
        }
    }
    result
}

/// Writes the JSON error document to the `--output` the user named (opened now if the run
/// failed before opening it), or to standard output. Failing to write it adds nothing to the
/// error already reported.
fn write_error_document(args: &RunArgs, output: Option<OutputFile>, message: &str) {
    let text = output::json::error_string(message);
    let output = match output {
        Some(file) => Some(file),
        None => args
            .output
            .as_deref()
            .and_then(|path| OutputFile::create(path).ok()),
    };
    match output {
        Some(mut file) => {
            if file.write_all(text.as_bytes()).is_ok() {
                let _ = file.commit();
            }
        }
        None => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
        }
    }
}

fn run_jobs(
    args: &RunArgs,
    formats: &[Format],
    output: &mut Option<OutputFile>,
) -> Result<ExitCode> {
    let file = read_job_file(&args.jobfile)?;
    // The output is opened before the run, so that a path that cannot be written is refused
    // before minutes of work, as fio opens its --output first.
    *output = open_output(args)?;
    if args.engine == EngineKind::Real {
        return run_real(args, &file, formats, output);
    }
    if args.filename.is_some() || args.device_depth.is_some() {
        bail!("--filename and --device-depth apply to the real engine only: add --engine real");
    }
    let mut config = args.sim.config()?;
    config.policy = choose_policy(args.sim.policy.as_deref(), &file)?;
    if args.sim.setup.device.is_none() {
        config.device = device_for(&file).into();
    }
    config.write_logs = true;
    // fio's text and JSON draw no chart: the jobs keep none (with 1024 jobs, 21 MB and 7% of
    // the time).
    config.charts = false;
    // The seed comes first, so any run can be replayed; on stderr to keep JSON output clean.
    eprintln!(
        "iosched: seed {} (replay with --seed {}), policy {}, device {}",
        config.seed, config.seed, config.policy, config.device
    );
    for note in &file.notes {
        eprintln!("{note}");
    }
    note_latency_without_priorities(&config.policy, &file, &config.group_settings);
    let started_ms = start_time_ms()?;
    let reached = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let work = Arc::new(std::sync::atomic::AtomicU64::new(0));
    config.progress = Some(reached.clone());
    config.progress_done = Some(work.clone());
    let bar = crate::progress::TimeBar::with_work(
        args.quiet,
        crate::progress::jobs_time(&file),
        move || reached.load(std::sync::atomic::Ordering::Relaxed),
        Some(work),
    );
    let report = iosched_sim::run(&config, &file).map_err(anyhow::Error::msg);
    drop(bar);
    let mut report = report?;
    report.started_ms = Some(started_ms);
    report.global_options = file.global_options.clone();
    write_results(output.take(), &report, formats)?;
    print_job_errors(&report);
    Ok(ExitCode::SUCCESS)
}

/// The job file at `path`, or with `-` the one on standard input (as `fio -` reads it; its
/// includes and relative paths are then the current directory's).
pub fn read_job_file(path: &Path) -> Result<JobFile> {
    if path != Path::new("-") {
        return parse::parse_file(path).map_err(anyhow::Error::msg);
    }
    let text = stdin_job_text()?;
    parse::parse_str(&text, "<stdin>", Path::new(""), &|name| {
        std::env::var(name).ok()
    })
    .map_err(anyhow::Error::msg)
}

/// The job file on standard input, within iosched's input limit.
pub fn stdin_job_text() -> Result<String> {
    use std::io::Read;
    let limit = iosched_core::limits::INPUT_FILE_BYTES_MAX;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .context("reading the job file from standard input")?;
    if bytes.len() > limit {
        bail!("the job file on standard input is larger than {limit} bytes (iosched's limit)");
    }
    String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("the job file on standard input is not UTF-8 text"))
}

/// What ended a job with an error, as fio prints it on stderr (`rate_min` not met, a latency
/// target missed at depth 1).
fn print_job_errors(report: &iosched_fio::RunReport) {
    for job in &report.jobs {
        if let Some(message) = &job.error_message {
            eprintln!("iosched: job failed: {message}");
        }
    }
}

/// When a run starts, in ms since the Unix epoch, for fio's `timestamp` and the jobs' start
/// date: `SOURCE_DATE_EPOCH` (seconds) when set, as reproducible builds use it, so that a
/// simulated run's whole output depends on its seed alone; otherwise the wall clock.
fn start_time_ms() -> Result<u64> {
    if let Ok(text) = std::env::var("SOURCE_DATE_EPOCH") {
        let seconds: u64 = text.trim().parse().with_context(|| {
            format!("SOURCE_DATE_EPOCH={text:?} is not a whole number of seconds")
        })?;
        return seconds
            .checked_mul(1000)
            .with_context(|| format!("SOURCE_DATE_EPOCH={text:?} is too large"));
    }
    Ok(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64))
}

/// `iosched run --engine real`: the jobs on real files through io_uring. Exits with failure
/// when a job met an error (after writing the results, as fio does). SIGINT or SIGTERM stops
/// the run as fio's do: nothing more is issued, what is in flight completes, the partial
/// results are written, and the exit status is 128 + the signal (130, 143); a second signal
/// ends the process at once.
fn run_real(
    args: &RunArgs,
    file: &JobFile,
    formats: &[Format],
    output: &mut Option<OutputFile>,
) -> Result<ExitCode> {
    let stop = Arc::new(AtomicUsize::new(0));
    let mut config = iosched_uring::UringConfig {
        policy: choose_policy(args.sim.policy.as_deref(), file)?,
        policy_settings: args.sim.setup.settings.clone(),
        device_depth: args.device_depth,
        filename: args.filename.clone(),
        seed: args.sim.setup.seed,
        group_settings: args.sim.setup.setup().group_settings()?,
        write_logs: true,
        stop: Some(stop.clone()),
    };
    // Decided once, for the first line and the run alike (it reads the devices' sysfs).
    config.device_depth = Some(iosched_uring::device_depth(&config, file));
    catch_stop_signals(&stop)?;
    eprintln!(
        "iosched: engine io_uring, policy {}, device depth {}, seed {} (draws the jobs' offsets)",
        config.policy,
        config.device_depth.unwrap_or_default(),
        config.seed
    );
    for note in file.notes.iter().filter(|note| note.option != "direct") {
        eprintln!("{note}");
    }
    note_latency_without_priorities(&config.policy, file, &config.group_settings);
    let started_ms = start_time_ms()?;
    let started = std::time::Instant::now();
    let bar =
        crate::progress::TimeBar::new(args.quiet, crate::progress::jobs_time(file), move || {
            started.elapsed().as_nanos() as u64
        });
    let outcome = iosched_uring::run(&config, file).map_err(anyhow::Error::msg);
    drop(bar);
    let mut outcome = outcome?;
    outcome.report.started_ms = Some(started_ms);
    outcome.report.global_options = file.global_options.clone();
    write_results(output.take(), &outcome.report, formats)?;
    print_job_errors(&outcome.report);
    for error in &outcome.errors {
        eprintln!("iosched: error: {error}");
    }
    if let Some(signal) = outcome.stopped_by {
        eprintln!(
            "iosched: stopped by {}: the results are partial",
            iosched_uring::engine::signal_name(signal)
        );
        return Ok(ExitCode::from(128 + signal as u8));
    }
    Ok(if outcome.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Stores SIGINT's or SIGTERM's number in `stop` when one arrives; once one has, the next
/// one of either ends the process with the signal's default action (a stalled device must not
/// hold the user hostage while the run drains).
pub(crate) fn catch_stop_signals(stop: &Arc<AtomicUsize>) -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::flag;
    let caught = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        // The order matters: the default action is armed by the first signal, for the second.
        flag::register_conditional_default(signal, caught.clone())
            .and_then(|_| flag::register_usize(signal, stop.clone(), signal as usize))
            .and_then(|_| flag::register(signal, caught.clone()))
            .with_context(|| format!("cannot catch signal {signal}"))?;
    }
    Ok(())
}

/// The `--output` file, opened (a regular file's replacement is prepared beside it).
fn open_output(args: &RunArgs) -> Result<Option<OutputFile>> {
    args.output
        .as_deref()
        .map(|path| OutputFile::create(path).map_err(anyhow::Error::new))
        .transpose()
}

/// Renders `report` as asked and writes it to `output` (standard output when `None`), after
/// moving the fio logs the jobs wrote into place.
fn write_results(output: Option<OutputFile>, report: &RunReport, formats: &[Format]) -> Result<()> {
    let text = render(report, formats);
    output::logs::commit(report).map_err(anyhow::Error::msg)?;
    match output {
        Some(mut file) => {
            file.write_all(text.as_bytes())
                .with_context(|| format!("cannot write {:?}", file.path()))?;
            file.commit()?;
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .context("cannot write to standard output")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the device chosen from the job's file names: NVMe namespaces and Fusion-io cards
    // run on the SSD model, anything else on the disk.
    #[test]
    fn flash_nodes_choose_the_ssd() {
        let device = |name: &str| {
            let text = format!("[j]\nfilename={name}\nrw=read\nsize=1m\n");
            let file =
                iosched_fio::parse::parse_str(&text, "t.fio", std::path::Path::new("."), &|_| None)
                    .unwrap();
            device_for(&file)
        };
        assert_eq!(device("/dev/nvme0n1"), "ssd");
        assert_eq!(device("/dev/fioa"), "ssd");
        assert_eq!(device("/dev/sdb"), DEFAULT_DEVICE);
        assert_eq!(device("/dev/fio"), DEFAULT_DEVICE);
        assert_eq!(device("data"), DEFAULT_DEVICE);
    }
}

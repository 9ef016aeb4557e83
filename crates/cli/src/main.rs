//! `iosched`: run fio jobs under any scheduling policy on a simulated or real device.

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Subcommand};
use iosched::{
    bench, calibrate, catalog, compare, experiment, frontier, hints, mount, run, sweep, trace,
};
use std::process::ExitCode;

/// I/O scheduling with quality of service: fio jobs in, fio-compatible results out.
#[derive(clap::Parser)]
#[command(name = "iosched", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a fio job file under a policy, simulated or on a real file or device (--engine real).
    #[command(after_help = hints::EXAMPLES_RUN)]
    Run(run::RunArgs),
    /// Run the same jobs under several policies and show them side by side.
    #[command(after_help = hints::EXAMPLES_COMPARE)]
    Compare(compare::CompareArgs),
    /// Run every point of a grid of configurations (policies, tunables, device parameters,
    /// job variables, workloads, seeds) into one tidy table and a summary.
    #[command(after_help = hints::EXAMPLES_SWEEP)]
    Sweep(sweep::SweepArgs),
    /// List or run the reproducible experiments (one folder per claim).
    #[command(after_help = hints::EXAMPLES_EXPERIMENT)]
    Experiment(experiment::ExperimentArgs),
    /// Traces: what one holds, one in another format, one's flows as a job file to replay.
    #[command(after_help = hints::EXAMPLES_TRACE)]
    Trace(trace::TraceArgs),
    /// List the policies, their tunables, defaults and units.
    #[command(after_help = hints::EXAMPLES_POLICIES)]
    Policies,
    /// List the device models and their parameters (given and derived).
    #[command(after_help = hints::EXAMPLES_DEVICES)]
    Devices(catalog::DevicesArgs),
    /// Print the device models' calibration figures against their targets.
    #[command(after_help = hints::EXAMPLES_CALIBRATE)]
    Calibrate(calibrate::CalibrateArgs),
    /// Measure simulated requests per wall-clock second.
    #[command(after_help = hints::EXAMPLES_BENCH)]
    Bench(bench::BenchArgs),
    /// On a real device (needs root and fio): a foreground beside a background under the
    /// kernel's schedulers and iosched's policies, each placed on the device's latency curve.
    #[command(after_help = hints::EXAMPLES_FRONTIER)]
    Frontier(frontier::FrontierArgs),
    /// Transparent mode: mount a directory through FUSE so that unmodified programs' reads,
    /// writes and fsyncs are scheduled by a policy, classified by ioprio, cgroup and process.
    #[command(after_help = hints::EXAMPLES_MOUNT)]
    Mount(mount::MountArgs),
    /// Show the flows of an `iosched mount` (per process and cgroup), refreshed.
    Top(mount::TopArgs),
    /// Print a shell completion script: iosched completions bash > /etc/bash_completion.d/iosched
    Completions(hints::CompletionsArgs),
    /// Print the man page (roff): iosched man | man -l -
    Man(hints::ManArgs),
}

/// Dies quietly of SIGPIPE when the reader of our output goes away (`iosched policies | head`),
/// as C tools do, instead of panicking on the failed write: Rust ignores SIGPIPE by default.
#[cfg(unix)]
fn die_on_broken_pipe() {
    extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    const SIGPIPE: i32 = 13;
    const SIG_DFL: usize = 0;
    // SAFETY: restoring the default disposition of one signal, before any thread starts.
    unsafe {
        signal(SIGPIPE, SIG_DFL);
    }
}

/// The command line's definition, as `--help`, the completions and the man page show it.
fn command() -> clap::Command {
    Cli::command().after_help(hints::AFTER_HELP)
}

fn main() -> ExitCode {
    #[cfg(unix)]
    die_on_broken_pipe();
    // `iosched --help` ends with the limits every input is checked against before work starts.
    let limits = format!(
        "Limits (checked before any work starts; see iosched_core::limits):\n{}",
        iosched_core::limits::text()
    );
    let matches = command().after_long_help(limits).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let Some(subcommand) = cli.command else {
        print!("{}", hints::START);
        return ExitCode::SUCCESS;
    };
    let name = matches.subcommand_name().unwrap_or_default().to_string();
    let outcome: Result<ExitCode> = match subcommand {
        Command::Run(args) => run::run(args),
        Command::Compare(args) => compare::compare(args),
        Command::Sweep(args) => sweep::sweep(args),
        Command::Experiment(args) => experiment::experiment(args),
        Command::Trace(args) => trace::trace(args),
        Command::Policies => catalog::policies(),
        Command::Devices(args) => catalog::devices(args),
        Command::Calibrate(args) => calibrate::calibrate(args),
        Command::Bench(args) => bench::bench(args),
        Command::Frontier(args) => frontier::frontier(args),
        Command::Mount(args) => mount::mount(args),
        Command::Top(args) => mount::top(args),
        Command::Completions(args) => hints::completions(args, &mut command()),
        Command::Man(args) => hints::man(args, command()),
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            // What the user wrote is quoted back at most a few dozen bytes long, whichever
            // layer made the message.
            let message = iosched_core::limits::shorten_quoted(&format!("{error:#}"));
            eprintln!("iosched: error: {message}");
            if let Some(hint) = hints::after_error(&name, &message) {
                eprintln!("iosched: {hint}");
            }
            ExitCode::FAILURE
        }
    }
}

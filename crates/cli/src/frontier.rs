//! `iosched frontier`: the real-device study of `iosched_lab::frontier`, its log on standard
//! error, its table on standard output and in `--output`, every figure beside it as JSON.

use crate::progress::Log;
use crate::run::write_output;
use anyhow::{Context, Result};
use clap::Args;
use iosched_lab::frontier::{self, Options};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Arguments of `iosched frontier`.
#[derive(Args, Debug)]
pub struct FrontierArgs {
    /// Run on this block device instead of a loop device over --file. Only reads are issued;
    /// its scheduler is switched for the kernel runs and restored at the end.
    #[arg(long, value_name = "PATH")]
    pub device: Option<PathBuf>,
    /// The loop device's backing file: created and filled with random data if it is missing or
    /// not fully allocated, removed at the end if this run created it (unless --keep-file).
    #[arg(
        long,
        value_name = "PATH",
        default_value = "/var/tmp/iosched-frontier.img"
    )]
    pub file: PathBuf,
    /// Size of the backing file, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 1024)]
    pub size_mib: u64,
    /// Keep a backing file this run created.
    #[arg(long)]
    pub keep_file: bool,
    /// Seconds per run.
    #[arg(long, value_name = "S", default_value_t = 10)]
    pub runtime: u64,
    /// Queue depths of the device's curve (fio before 3.39 drives an io_uring depth that is not a
    /// power of two as the next one, so fio's curve runs those through libaio, with a note).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,6,8,12,16,24,32")]
    pub depths: Vec<u32>,
    /// Kernel schedulers to run the mix under with fio (each is skipped, with a note, if the
    /// device does not offer it even after modprobe).
    #[arg(
        long,
        value_delimiter = ',',
        num_args = 0..,
        default_value = "none,mq-deadline,kyber,bfq"
    )]
    pub kernel: Vec<String>,
    /// iosched policies to run the mix under (the device's scheduler set to none); the latency
    /// policy is run once per --targets.
    #[arg(
        long,
        value_delimiter = ',',
        num_args = 0..,
        default_value = "noop,deadline,kyber,anticipatory,cfq"
    )]
    pub policies: Vec<String>,
    /// Targets of the latency policy, as multiples of the foreground's alone latency.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "1.3,1.5,2")]
    pub targets: Vec<f64>,
    /// Targets to run the latency policy at again with forward_prio=1 (each request reaches
    /// the device with its own priority), to show what the layers below do with it. Each list
    /// option given without a value is empty: `--forwarded-targets` runs none.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "1.5")]
    pub forwarded_targets: Vec<f64>,
    /// Linux's cgroup controllers to run at each of --targets as iosched runs them: the
    /// foreground in /fg (io.weight 1000), the background in /bg (100); io.latency's target
    /// on /fg, io.cost's read latency target at the median (its model from the curve).
    #[arg(
        long,
        value_delimiter = ',',
        num_args = 0..,
        default_value = "io.latency,io.cost"
    )]
    pub controllers: Vec<String>,
    /// Linux's own cgroup controllers to run the mix under with fio at each of --targets, with
    /// the same files as iosched's (--controllers): fio's jobs in cgroups the study makes on
    /// the cgroup v2 hierarchy and removes. Each is skipped, with a note, where the kernel
    /// lacks it or the io controller is not on cgroup v2.
    #[arg(
        long,
        value_delimiter = ',',
        num_args = 0..,
        default_value = "io.latency,io.cost"
    )]
    pub kernel_controllers: Vec<String>,
    /// Rounds: everything but the overhead pairs and the drift runs this many times, in turn,
    /// and every figure is the median of its rounds (each mix also shows its fraction of the
    /// curve in each round). One round takes about eight minutes.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub rounds: u32,
    /// Extra pairs of single-job runs at the deepest depth, fio then iosched noop, for the
    /// overhead ratio (the median over these and the curves' pairs).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub overhead_pairs: u32,
    /// Slices of each claimed mix (the latency policy at each of --targets): it runs as N runs
    /// of runtime/N, each followed by fio at the two depths that bracket its foreground's
    /// latency, so that the mix and the curve beside it see the device over the same seconds
    /// (a loop device's latency moves by tens of percent within seconds). Every slice but the
    /// first starts with a ramp of one slice, left out, so the policy's search counts once.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub slices: u32,
    /// iosched's device depth (most requests in flight; --device-depth of `iosched run`).
    /// Default: the device's own queue depth (its nr_requests under none), so that iosched
    /// keeps as many requests in flight and in its scheduler (twice that) as the kernel does.
    #[arg(long, value_name = "N")]
    pub device_depth: Option<u32>,
    /// The fio to compare with.
    #[arg(long, value_name = "PATH", default_value = "fio")]
    pub fio: PathBuf,
    /// Where to write the table; every figure also goes to the same name with .json.
    #[arg(long, value_name = "FILE", default_value = "results/frontier.txt")]
    pub output: PathBuf,
}

/// Runs `iosched frontier`.
pub fn frontier(args: FrontierArgs) -> Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    // Ctrl-C stops between runs, so that the loop device and the file are cleaned up (fio, in
    // our process group, stops at once; an iosched run ends its runtime); a second one ends
    // the process.
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_default(signal, stop.clone())
            .and_then(|_| signal_hook::flag::register(signal, stop.clone()))
            .with_context(|| format!("cannot catch signal {signal}"))?;
    }
    let options = Options {
        device: args.device,
        file: args.file,
        size_mib: args.size_mib,
        keep_file: args.keep_file,
        runtime: args.runtime,
        depths: args.depths,
        kernel: args.kernel,
        policies: args.policies,
        targets: args.targets,
        forwarded_targets: args.forwarded_targets,
        controllers: args.controllers,
        kernel_controllers: args.kernel_controllers,
        rounds: args.rounds,
        overhead_pairs: args.overhead_pairs,
        slices: args.slices,
        device_depth: args.device_depth,
        fio: args.fio,
        stop,
    };
    let frontier = frontier::run(&options, &Log::new("iosched frontier"))?;
    let table = frontier.table();
    print!("{table}");
    if let Some(parent) = args.output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    write_output(&args.output, &table)?;
    let json_path = args.output.with_extension("json");
    let json = serde_json::to_string_pretty(&frontier.json()).expect("JSON") + "\n";
    write_output(&json_path, &json)?;
    eprintln!(
        "iosched frontier: wrote {} and {}",
        args.output.display(),
        json_path.display()
    );
    Ok(if frontier.verdicts().iter().all(|(holds, _)| *holds) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

//! The runs: fio and iosched's real engine one after the other on the device, alone, along the
//! curve, in the mixes, and the overhead and drift pairs.

use super::device::{command_output, is_root, Setup};
use super::*;
use iosched_core::group::GroupSetting;

/// The shortest slice of a claimed mix (`--slices`): the engine and fio take a few
/// milliseconds to start, and the latency policy's window is 50 ms.
const MIN_SLICE_MS: u64 = 200;

pub(super) fn check_interrupted(stop: &AtomicBool) -> Result<()> {
    if stop.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}

/// Runs the jobs in `text` with fio and returns its jobs.
pub(super) fn run_fio(
    fio: &Path,
    stop: &AtomicBool,
    text: &str,
    scratch: &Path,
) -> Result<Vec<FioJob>> {
    let job = scratch.join("job.fio");
    std::fs::write(&job, text).with_context(|| format!("cannot write {}", job.display()))?;
    let output = Command::new(fio)
        .arg("--output-format=json")
        .arg(&job)
        .output()
        .with_context(|| format!("cannot run {}", fio.display()))?;
    check_interrupted(stop)?;
    if !output.status.success() {
        bail!(
            "{} failed: {}",
            fio.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let jobs = parse_fio_json(&String::from_utf8_lossy(&output.stdout))?;
    if let Some(job) = jobs.iter().find(|j| j.error != 0) {
        bail!("fio job {} failed with error {}", job.name, job.error);
    }
    Ok(jobs)
}

/// Runs the jobs in `text` with iosched's real engine under `policy` and its settings.
pub(super) fn run_iosched(
    stop: &AtomicBool,
    text: &str,
    policy: &str,
    settings: &[(String, String)],
    groups: &[GroupSetting],
    device_depth: u32,
) -> Result<RunReport> {
    let file = iosched_fio::parse::parse_str(text, "frontier.fio", Path::new("."), &|_| None)
        .map_err(anyhow::Error::msg)?;
    let config = iosched_uring::UringConfig {
        policy: policy.to_string(),
        policy_settings: settings.to_vec(),
        group_settings: groups.to_vec(),
        device_depth: Some(device_depth),
        ..iosched_uring::UringConfig::default()
    };
    let outcome = iosched_uring::run(&config, &file).map_err(anyhow::Error::msg)?;
    check_interrupted(stop)?;
    if let Some(error) = outcome.errors.first() {
        bail!("iosched {policy}: {error}");
    }
    Ok(outcome.report)
}

/// Runs the jobs in `text` with iosched noop (no settings, no groups) at `device_depth`.
pub(super) fn run_noop(stop: &AtomicBool, text: &str, device_depth: u32) -> Result<RunReport> {
    run_iosched(stop, text, "noop", &[], &[], device_depth)
}

/// The study's steps, told to a [`Progress`]: `round 2/3: fio QD4`.
pub(super) struct Steps<'a> {
    pub(super) progress: &'a dyn Progress,
    /// `round 2/3: ` while rounds are running.
    pub(super) prefix: String,
    pub(super) current: String,
}

impl Steps<'_> {
    pub(super) fn start(&mut self, what: &str) {
        self.current = format!("{}{what}", self.prefix);
        self.progress.started(&self.current);
    }

    pub(super) fn finish(&self, what: String) {
        self.progress.finished(&self.current, &what);
    }
}

pub(super) fn counter(report: &RunReport, name: &str) -> Option<f64> {
    report
        .device_counters
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
}

/// Runs the study on the device of `args`, telling `progress` as each run starts and ends.
/// Needs root and fio; whatever it set up (a loop device, its file, the scheduler) is undone
/// before it returns, also on failure.
pub fn run(args: &Options, progress: &dyn Progress) -> Result<Frontier> {
    if args.depths.is_empty() || args.depths.contains(&0) {
        bail!("--depths needs queue depths of at least 1");
    }
    if args.runtime == 0 {
        bail!("--runtime needs at least 1 second");
    }
    if args.slices == 0 {
        bail!("--slices needs at least 1 slice");
    }
    if args.runtime.saturating_mul(1000) / u64::from(args.slices) < MIN_SLICE_MS {
        bail!(
            "--slices {}: a slice of --runtime {} s would last under {MIN_SLICE_MS} ms",
            args.slices,
            args.runtime
        );
    }
    for controller in &args.controllers {
        controller_groups(controller, 1, 1.0)?;
    }
    for controller in &args.kernel_controllers {
        if !super::kernel::KERNEL_CONTROLLERS.contains(&controller.as_str()) {
            bail!("--kernel-controllers: {controller:?} is io.latency or io.cost");
        }
    }
    if args
        .targets
        .iter()
        .chain(&args.forwarded_targets)
        .any(|t| !(t.is_finite() && *t > 0.0))
    {
        bail!("--targets are positive multiples of the alone latency");
    }
    if !is_root() {
        bail!(
            "iosched frontier needs root: it sets up a loop device (losetup), switches the \
             device's scheduler in /sys/block, and runs the foreground in the real-time I/O class"
        );
    }
    let fio_version =
        command_output(&args.fio.to_string_lossy(), &["--version"]).with_context(|| {
            format!(
                "{} is needed to run the kernel schedulers",
                args.fio.display()
            )
        })?;
    let setup = Setup::new(args, progress)?;
    let scratch = std::env::temp_dir().join(format!("iosched-frontier-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    let result = measure(args, &setup, &scratch, &fio_version, progress);
    let _ = std::fs::remove_dir_all(&scratch);
    drop(setup);
    progress.end();
    result
}

/// What one round needs to know.
pub(super) struct Round<'a> {
    pub(super) args: &'a Options,
    pub(super) setup: &'a Setup,
    pub(super) scratch: &'a Path,
    pub(super) device: String,
    pub(super) device_depth: u32,
    /// fio drives an io_uring depth that is not a power of two as the next one
    /// ([`fio_rounds_uring_depth`]): its curve runs those through libaio.
    pub(super) fio_rounds_depth: bool,
    pub(super) kernel: Vec<String>,
    /// The kernel's cgroup controllers that can run here, and their groups.
    pub(super) kernel_groups: Option<super::kernel::KernelGroups>,
}

pub(super) fn fio_measure(jobs: &[FioJob], name: &str) -> Result<Measure> {
    pool_fio(jobs, name).with_context(|| format!("fio reported no job {name}"))
}

pub(super) fn iosched_measure(report: &RunReport, name: &str) -> Result<Measure> {
    pool_report(report, name).with_context(|| format!("iosched reported no job {name}"))
}

pub(super) fn show(m: &Measure) -> String {
    format!("{} IOPS, mean {}", kilo(m.iops), duration(m.mean_ns))
}

impl Round<'_> {
    /// Runs in one round: alone twice, the curve twice, every mix.
    pub(super) fn runs(&self) -> usize {
        let args = self.args;
        let beside = if args.depths.len() > 1 { 2 } else { 1 };
        2 + 2 * args.depths.len()
            + self.kernel.len()
            + args.policies.len()
            + args.targets.len() * args.slices.max(1) as usize * (1 + beside)
            + args.targets.len() * (args.controllers.len() + self.kernel_controllers().len())
            + args.forwarded_targets.len()
    }

    fn kernel_controllers(&self) -> &[String] {
        self.kernel_groups
            .as_ref()
            .map_or(&[], |groups| &groups.available)
    }

    /// Alone, the curve and every mix, once.
    pub(super) fn measure(&self, progress: &mut Steps) -> Result<Frontier> {
        let (args, device, runtime) = (self.args, &self.device, self.args.runtime);
        let mut frontier = Frontier::default();
        progress.start("fio alone (fg only)");
        let jobs = run_fio(
            &args.fio,
            &args.stop,
            &jobs::alone(device, runtime),
            self.scratch,
        )?;
        frontier.alone_fio = fio_measure(&jobs, "fg")?;
        progress.finish(show(&frontier.alone_fio));

        progress.start("iosched noop alone (fg only)");
        let report = run_noop(&args.stop, &jobs::alone(device, runtime), self.device_depth)?;
        let alone = iosched_measure(&report, "fg")?;
        progress.finish(show(&alone));
        frontier.alone_iosched = Some(alone);

        for &depth in &args.depths {
            let text = jobs::curve(device, runtime, depth);
            progress.start(&format!("fio QD{depth}"));
            let fio_text = jobs::curve_fio(device, runtime, depth, self.fio_rounds_depth);
            let m = fio_measure(
                &run_fio(&args.fio, &args.stop, &fio_text, self.scratch)?,
                "curve",
            )?;
            progress.finish(show(&m));
            frontier.curve_fio.points.push(CurvePoint {
                depth,
                iops: m.iops,
                mean_ns: m.mean_ns,
            });
            progress.start(&format!("iosched noop QD{depth}"));
            let report = run_noop(&args.stop, &text, self.device_depth.max(depth))?;
            let m = iosched_measure(&report, "curve")?;
            progress.finish(show(&m));
            frontier.curve_iosched.points.push(CurvePoint {
                depth,
                iops: m.iops,
                mean_ns: m.mean_ns,
            });
        }

        let mix = jobs::mix(device, runtime);
        let row_done = |row: &MixRow| {
            format!(
                "total {} IOPS, fg {} IOPS mean {}, bg {} IOPS",
                kilo(row.total_iops()),
                kilo(row.fg.iops),
                duration(row.fg.mean_ns),
                kilo(row.bg.iops)
            )
        };
        for name in &self.kernel {
            self.setup.select(name)?;
            progress.start(&format!("fio mix, kernel {name}"));
            let jobs = run_fio(&args.fio, &args.stop, &mix, self.scratch)?;
            let row = MixRow {
                label: format!("fio {name}"),
                fg: fio_measure(&jobs, "fg")?,
                bg: fio_measure(&jobs, "bg")?,
                ..MixRow::default()
            };
            progress.finish(row_done(&row));
            frontier.mixes.push(row);
        }
        self.setup.select("none")?;

        let alone_us = frontier.alone_fio.mean_ns / 1000.0;
        // A target, as a multiple of the alone latency, in whole microseconds.
        let target_us = |factor: f64| (factor * alone_us).round().max(1.0) as u64;
        // The row to fill, the policy, its settings, its cgroup files (which also move the
        // mix's jobs into /fg and /bg).
        type PolicyRun = (MixRow, String, Vec<(String, String)>, Vec<GroupSetting>);
        let mut runs: Vec<PolicyRun> = args
            .policies
            .iter()
            .map(|p| {
                let row = MixRow {
                    label: format!("iosched {p}"),
                    ..MixRow::default()
                };
                (row, p.clone(), Vec::new(), Vec::new())
            })
            .collect();
        let latency_runs = args
            .targets
            .iter()
            .map(|&f| (f, false))
            .chain(args.forwarded_targets.iter().map(|&f| (f, true)));
        for (factor, forwarded) in latency_runs {
            let target = target_us(factor);
            let mut settings = vec![("latency.target_latency_us".into(), target.to_string())];
            let mut label = format!("iosched latency {factor}x");
            if forwarded {
                settings.push(("latency.forward_prio".into(), "1".into()));
                label.push_str(" fwd");
            }
            let row = MixRow {
                label,
                claim: !forwarded,
                targets_us: vec![target],
                ..MixRow::default()
            };
            runs.push((row, "latency".into(), settings, Vec::new()));
        }
        // Linux's cgroup controllers as iosched runs them, at the same targets: io.latency on
        // the foreground's group, and io.cost with the read latency target at the median.
        let curve_iops = frontier
            .curve_fio
            .points
            .iter()
            .map(|p| p.iops)
            .fold(0.0, f64::max);
        // The kernel's own, with the same files, fio's jobs in the kernel's cgroups.
        let mut kernel_runs = Vec::new();
        for &factor in &args.targets {
            let target = target_us(factor);
            for controller in &args.controllers {
                let (policy, groups) = controller_groups(controller, target, curve_iops)?;
                let row = MixRow {
                    label: format!("iosched {controller} {factor}x"),
                    targets_us: vec![target],
                    ..MixRow::default()
                };
                runs.push((row, policy, Vec::new(), groups));
            }
            for controller in self.kernel_controllers() {
                let (_, groups) = controller_groups(controller, target, curve_iops)?;
                let row = MixRow {
                    label: format!("fio {controller} {factor}x"),
                    targets_us: vec![target],
                    ..MixRow::default()
                };
                kernel_runs.push((row, groups));
            }
        }
        if let Some(kernel) = &self.kernel_groups {
            let text = jobs::mix_kernel(device, runtime, &kernel.fg, &kernel.bg);
            for (mut row, groups) in kernel_runs {
                progress.start(&format!("{} mix (the kernel's)", row.label));
                kernel.apply(&groups)?;
                let jobs = run_fio(&args.fio, &args.stop, &text, self.scratch);
                kernel.reset(&groups);
                let jobs = jobs?;
                row.fg = fio_measure(&jobs, "fg")?;
                row.bg = fio_measure(&jobs, "bg")?;
                progress.finish(row_done(&row));
                frontier.mixes.push(row);
            }
        }
        for (mut row, policy, settings, groups) in runs {
            // A claimed row runs in slices, each followed by the curve beside it.
            let slices = if row.claim { args.slices.max(1) } else { 1 };
            let slice_ms = runtime.saturating_mul(1000) / u64::from(slices);
            let (mut fg, mut bg, mut depths) = (Vec::new(), Vec::new(), Vec::new());
            let mut beside: Vec<(u32, Vec<Measure>)> = Vec::new();
            for slice in 0..slices {
                let timing = jobs::Timing {
                    runtime_ms: slice_ms,
                    ramp_ms: if slice == 0 { 0 } else { slice_ms },
                };
                let text = if groups.is_empty() {
                    jobs::mix(device, timing)
                } else {
                    jobs::mix_grouped(device, timing)
                };
                if slices > 1 {
                    progress.start(&format!("{} mix, slice {}/{slices}", row.label, slice + 1));
                } else {
                    progress.start(&format!("{} mix", row.label));
                }
                let report = run_iosched(
                    &args.stop,
                    &text,
                    &policy,
                    &settings,
                    &groups,
                    self.device_depth,
                )?;
                let part = MixRow {
                    fg: iosched_measure(&report, "fg")?,
                    bg: iosched_measure(&report, "bg")?,
                    ..MixRow::default()
                };
                depths.extend(counter(&report, "latency_depth_mean"));
                progress.finish(row_done(&part));
                if row.claim {
                    if slice == 0 {
                        // The depths where the first slice landed, on the run's curve.
                        beside = frontier
                            .curve_fio
                            .bracket(part.fg.mean_ns)
                            .into_iter()
                            .map(|depth| (depth, Vec::new()))
                            .collect();
                    }
                    let timing = jobs::Timing {
                        runtime_ms: slice_ms,
                        ramp_ms: 0,
                    };
                    for (depth, measures) in &mut beside {
                        let text = jobs::curve_fio(device, timing, *depth, self.fio_rounds_depth);
                        progress.start(&format!("fio QD{depth} beside it"));
                        let m = fio_measure(
                            &run_fio(&args.fio, &args.stop, &text, self.scratch)?,
                            "curve",
                        )?;
                        progress.finish(show(&m));
                        measures.push(m);
                    }
                }
                fg.push(part.fg);
                bg.push(part.bg);
            }
            row.fg = Measure::pool(&fg).expect("a mix runs at least once");
            row.bg = Measure::pool(&bg).expect("a mix runs at least once");
            if !depths.is_empty() {
                row.depths = vec![depths.iter().sum::<f64>() / depths.len() as f64];
            }
            if row.claim {
                // The curve where this mix landed, measured beside it.
                let curve = Curve {
                    points: beside
                        .iter()
                        .map(|(depth, measures)| {
                            let m = Measure::pool(measures).expect("a slice at least");
                            CurvePoint {
                                depth: *depth,
                                iops: m.iops,
                                mean_ns: m.mean_ns,
                            }
                        })
                        .collect(),
                };
                row.beside_fractions = Frontier::fraction(&curve, &row).into_iter().collect();
            }
            frontier.mixes.push(row);
        }
        Ok(frontier)
    }
}

pub(super) fn measure(
    args: &Options,
    setup: &Setup,
    scratch: &Path,
    fio_version: &str,
    progress: &dyn Progress,
) -> Result<Frontier> {
    let device = setup.device.to_string_lossy().to_string();
    let mut kernel = Vec::new();
    let mut notes = Vec::new();
    for name in &args.kernel {
        if setup.offers(name)? {
            kernel.push(name.clone());
        } else {
            notes.push(format!(
                "kernel scheduler {name} skipped: {} does not offer it, even after modprobe",
                device
            ));
        }
    }
    if !setup.offers("none")? {
        bail!("{device} does not offer the scheduler none, which the curve and iosched need");
    }
    setup.select("none")?;
    let kernel_groups =
        super::kernel::KernelGroups::open(&args.kernel_controllers, &setup.device, &mut notes)?;
    let device_depth = match args.device_depth {
        Some(depth) => depth,
        None => setup.queue_depth()?,
    }
    .max(1);
    let fio_rounds_depth = fio_rounds_uring_depth(fio_version);
    let odd: Vec<String> = args
        .depths
        .iter()
        .filter(|d| !d.is_power_of_two())
        .map(u32::to_string)
        .collect();
    if fio_rounds_depth && !odd.is_empty() {
        notes.push(format!(
            "fio's curve runs QD {} with ioengine=libaio: {}'s io_uring engine drives a depth \
             that is not a power of two as the next one (fio rounds iodepth up for the ring \
             until 3.39, commit af0ad0fa)",
            odd.join(","),
            fio_version.trim()
        ));
    }
    let round = Round {
        args,
        setup,
        scratch,
        device: device.clone(),
        device_depth,
        fio_rounds_depth,
        kernel,
        kernel_groups,
    };
    let rounds = args.rounds.max(1) as usize;
    progress.begin(
        rounds * round.runs() + 2 * args.overhead_pairs.max(1) as usize + 1
            - usize::from(args.overhead_pairs == 0),
    );
    let mut progress = Steps {
        progress,
        prefix: String::new(),
        current: String::new(),
    };
    let mut measured = Vec::with_capacity(rounds);
    for index in 0..rounds {
        if rounds > 1 {
            progress.prefix = format!("round {}/{rounds}: ", index + 1);
        }
        measured.push(round.measure(&mut progress)?);
    }
    progress.prefix.clear();
    let mut frontier = Frontier::combine(&measured);
    frontier.setup = format!(
        "{} ({fio_version}); iosched device depth {device_depth}, nr_requests {}",
        setup.description,
        iosched_core::elevator::default_nr_requests(device_depth)
    );
    frontier.runtime = args.runtime;
    frontier.slices = args.slices;
    frontier.notes = notes;

    // The overhead: pairs at the deepest depth, back to back (each round's curve gave one
    // already); the first fio run of them, or a run of its own, is also the drift's.
    let deepest = frontier.curve_fio.deepest().expect("depths are not empty");
    let text = jobs::curve(&device, args.runtime, deepest.depth);
    for pair in 0..args.overhead_pairs.max(1) {
        progress.start(&format!("fio QD{} again (overhead, drift)", deepest.depth));
        let fio = fio_measure(&run_fio(&args.fio, &args.stop, &text, scratch)?, "curve")?;
        progress.finish(show(&fio));
        if pair == 0 {
            frontier.drift_deepest = Some(CurvePoint {
                depth: deepest.depth,
                iops: fio.iops,
                mean_ns: fio.mean_ns,
            });
        }
        if args.overhead_pairs == 0 {
            break;
        }
        progress.start(&format!(
            "iosched noop QD{} again (overhead)",
            deepest.depth
        ));
        let report = run_noop(&args.stop, &text, device_depth.max(deepest.depth))?;
        let iosched = iosched_measure(&report, "curve")?;
        progress.finish(show(&iosched));
        frontier.overhead_pairs.push((fio.iops, iosched.iops));
    }
    progress.start("fio alone again (drift)");
    let alone = fio_measure(
        &run_fio(
            &args.fio,
            &args.stop,
            &jobs::alone(&device, args.runtime),
            scratch,
        )?,
        "fg",
    )?;
    progress.finish(show(&alone));
    frontier.drift_alone = Some(alone);
    Ok(frontier)
}

/// The stack and cgroup files that run `controller` (`io.latency` or `io.cost`) at a
/// foreground target of `target_us`: io.latency's target on /fg; io.cost's QoS with the read
/// latency target at the 50th percentile and, for the model, the device's 4 KiB random-read
/// IOPS from its curve (`curve_iops`; the mix issues nothing else, so only that cost matters,
/// and rbps is set high enough that the per-page cost is a small part of it). /fg has
/// io.weight 1000 and /bg 100 under both, as a user protecting the foreground would set them.
pub(super) fn controller_groups(
    controller: &str,
    target_us: u64,
    curve_iops: f64,
) -> Result<(String, Vec<GroupSetting>)> {
    let setting = |path: &str, file: &str, value: String| GroupSetting {
        path: path.into(),
        file: file.into(),
        value,
        origin: format!("frontier {controller}"),
    };
    let mut groups = vec![
        setting("/fg", "io.weight", "1000".into()),
        setting("/bg", "io.weight", "100".into()),
    ];
    let policy = match controller {
        "io.latency" => {
            groups.push(setting("/fg", "io.latency", format!("target={target_us}")));
            "iolatency+none"
        }
        "io.cost" => {
            let iops = curve_iops.round().max(1.0) as u64;
            let bps = iops.saturating_mul(4096 * 16);
            groups.push(setting(
                "/",
                "io.cost.model",
                format!(
                    "ctrl=user model=linear rbps={bps} rseqiops={iops} rrandiops={iops} \
                     wbps={bps} wseqiops={iops} wrandiops={iops}"
                ),
            ));
            groups.push(setting(
                "/",
                "io.cost.qos",
                format!("enable=1 ctrl=user rpct=50 rlat={target_us} wpct=50 wlat={target_us}"),
            ));
            "iocost+none"
        }
        other => bail!("--controllers: {other:?} is io.latency or io.cost"),
    };
    Ok((policy.to_string(), groups))
}

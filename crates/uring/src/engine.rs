//! The fio job engine: a parsed job file run against real files or block devices.
//!
//! # How a run proceeds
//!
//! One thread, one ring, every job: fio gives each job its own engine instance, but here one
//! scheduler orders all the jobs' requests, so they share one elevator and one ring.
//!
//! Each turn of the loop:
//!
//! 1. timers: jobs whose start time came start (after `startdelay`, or when a stonewall
//!    opens), jobs whose `runtime` ended stop issuing, rate and think-time waits end;
//! 2. every running job issues what it may, exactly as in the simulator: a sync engine
//!    (`psync`, `sync`, ...) one I/O at a time, an async one (`libaio`, `io_uring`, ...) up to
//!    `iodepth`; offsets and sizes from the same [`Generator`] with the same seeds; `rate`,
//!    `rate_iops` (fio's linear rate process), `thinktime`, `fsync`/`fdatasync`, `end_fsync`;
//! 3. each request enters the [`Elevator`](iosched_core::Elevator), which may merge it;
//! 4. the policy dispatches while fewer than the device depth are in flight; each request
//!    becomes an SQE carrying its I/O priority;
//! 5. the loop sleeps in `io_uring_enter` until a completion, the policy's `WaitUntil` time, or
//!    the next job timer, whichever is first; then it reaps, timestamps and records.
//!
//! Times are nanoseconds since the ring was created (after the files were laid out), from the
//! monotonic clock. Latencies are recorded as the simulator records them: for async engines
//! `slat` is the wait for a free scheduler request and `clat` the time from the scheduler to
//! completion; for sync engines `clat` is the whole.
//!
//! When every job is done, the loop goes on until the scheduler and the device are empty, so
//! every request issued completes exactly once ([`Outcome::issued`] and
//! [`Outcome::completed`] count them).

use crate::buffer::SlotBuffers;
use crate::error::{job_label, job_prefix, JobError};
use crate::files::{self, Files, JobFile};
use crate::ids::IdMap;
use crate::ring::{Core, Failure, Finished, Target};
use crate::verify;
use crate::UringError;
use iosched_core::{
    elevator::default_nr_requests, policies, time::SECOND, Elevator, FlowId, GroupId, Groups,
    IoPrio, Nanos, Op, Policy, Request, RequestId,
};
use iosched_fio::driver::{self, Issued, JobState, Phase, SyncKind, Timer};
use iosched_fio::random::{derive_seed, mix64, Rng};
use iosched_fio::report::{scheduler_counters, tunable_parameters};
use iosched_fio::stats::iodepth_bucket;
use iosched_fio::trace;
use iosched_fio::workload::{Generator, NextIo};
use iosched_fio::zbd::{ZbdFile, ZbdRegistry};
use iosched_fio::{BlockSize, DataDir, JobSpec, Parameter, RunReport, RwMode};
use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What an error does to its job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrorEffect {
    /// The job's error; it issues nothing more (fio's default for I/O errors).
    Stop,
    /// The job's error; it goes on (a verify mismatch: fio checks every block first).
    Fail,
    /// A non-fatal error (`continue_on_error`, `ignore_error`): counted, not the job's error.
    Counted,
}

/// Default most commands in flight on the device at once, where the device's own depth is not
/// known (jobs on regular files).
pub const DEFAULT_DEVICE_DEPTH: u32 = 32;

/// The device depth a run of `file` with `config` uses: [`UringConfig::device_depth`] if set;
/// else, when every job runs on one block device or on devices of one depth, that depth (the
/// most commands the device's hardware queue holds, as many as the kernel keeps in flight on it
/// under the scheduler none: 32 on a SATA disk with NCQ, 128 on a loop device, 1023 on many
/// NVMe drives); else [`DEFAULT_DEVICE_DEPTH`]. At least 1 and at most
/// [`iosched_core::limits::IODEPTH_MAX`].
pub fn device_depth(config: &UringConfig, file: &iosched_fio::JobFile) -> u32 {
    config
        .device_depth
        .or_else(|| files::device_queue_depth(&file.jobs, config.filename.as_deref()))
        .unwrap_or(DEFAULT_DEVICE_DEPTH)
        .clamp(1, iosched_core::limits::IODEPTH_MAX)
}

/// Most errors reported one by one for a job; later ones are counted.
const ERRORS_PER_JOB: u64 = 8;

/// How to run a job file on the real machine.
#[derive(Clone, Debug)]
pub struct UringConfig {
    /// Policy name (see `iosched policies`).
    pub policy: String,
    /// Queue and policy tunables to set, by name, as text; `POLICY.NAME` sets a tunable only
    /// when that policy runs.
    pub policy_settings: Vec<(String, String)>,
    /// Most commands in flight on the device at once (`nr_requests` defaults to twice this,
    /// as Linux sets it); `None`: [`device_depth`]'s choice.
    pub device_depth: Option<u32>,
    /// Use this file or device for every job instead of the jobs' `filename=`.
    pub filename: Option<PathBuf>,
    /// Seed of the jobs' random offsets (the simulator's seed draws the same offsets).
    pub seed: u64,
    /// cgroup io controller settings (`io.weight`, `io.max`, `io.prio.class`) for the groups
    /// the jobs join with `cgroup=`; the scheduler and its stage act on them (no kernel cgroup
    /// is created).
    pub group_settings: Vec<iosched_core::group::GroupSetting>,
    /// Whether to write the log files jobs ask for (`write_lat_log` and friends) as they run,
    /// relative to the current directory as fio does; the caller commits them
    /// ([`iosched_fio::output::logs::commit`]) when the run succeeds.
    pub write_logs: bool,
    /// Stops the run when a signal number is stored here (the CLI stores SIGINT's or
    /// SIGTERM's): as fio does on those signals, jobs issue nothing more, every I/O in flight
    /// completes and is counted, jobs not yet started never start, and the results so far are
    /// returned, with [`Outcome::stopped_by`] set.
    pub stop: Option<Arc<AtomicUsize>>,
}

impl Default for UringConfig {
    fn default() -> Self {
        UringConfig {
            policy: "deadline".into(),
            policy_settings: Vec::new(),
            device_depth: None,
            filename: None,
            seed: 1,
            group_settings: Vec::new(),
            write_logs: false,
            stop: None,
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct Outcome {
    /// fio's results, for [`iosched_fio::output`].
    pub report: RunReport,
    /// Errors jobs met while running (their `error` in the report is set too).
    pub errors: Vec<JobError>,
    /// Original requests issued.
    pub issued: u64,
    /// Original requests completed (each exactly once: a second completion of one request
    /// would not be counted, and would show as `issued != completed`).
    pub completed: u64,
    /// The signal that stopped the run early ([`UringConfig::stop`]): the results are partial.
    pub stopped_by: Option<i32>,
}

impl Outcome {
    /// Whether every job ran without error.
    pub fn ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Runs `file`'s jobs under `config`.
pub fn run(config: &UringConfig, file: &iosched_fio::JobFile) -> Result<Outcome, UringError> {
    let stack =
        policies::Stack::parse(&config.policy).map_err(|e| UringError::new(e.to_string()))?;
    let policy = (stack.policy.build)();
    let stage = stack.stage.and_then(iosched_core::stage::build);
    Engine::prepare(config, file, policy, stage)?.run()
}

/// Runs `file`'s jobs under `policy` (any [`Policy`], not only the catalog's; `config.policy`
/// is not used).
pub fn run_with_policy(
    config: &UringConfig,
    file: &iosched_fio::JobFile,
    policy: Box<dyn Policy>,
) -> Result<Outcome, UringError> {
    Engine::prepare(config, file, policy, None)?.run()
}

/// Refuses what the real engine cannot do, naming the job.
fn check_job(job: &JobSpec) -> Result<(), UringError> {
    if matches!(
        job.rw,
        RwMode::Trim | RwMode::RandTrim | RwMode::TrimWrite | RwMode::RandTrimWrite
    ) {
        return Err(UringError::job(
            job,
            format!(
                "rw={}: the real engine does not issue trims (discards); use read, write, \
                 randread, randwrite, rw or randrw",
                job.rw.name()
            ),
        ));
    }
    if job.engine.is_null() {
        if !matches!(job.size, Some(iosched_fio::Amount::Bytes(_))) {
            return Err(UringError::job(
                job,
                "ioengine=null needs size= in bytes: it has no file to take a size from (fio's \
                 null engine is disk-less)",
            ));
        }
        if job.verify.is_some() {
            return Err(UringError::job(
                job,
                "verify with ioengine=null: the null engine stores nothing to read back",
            ));
        }
    }
    if job.time_based && job.runtime.is_none() {
        return Err(UringError::job(job, "time_based needs a runtime"));
    }
    if job.direct {
        let sizes = job.bs.iter().flat_map(|bs| match bs {
            BlockSize::Split(parts) => parts.iter().map(|p| p.0).collect::<Vec<_>>(),
            other => vec![other.min(), other.max()],
        });
        if let Some(size) = sizes.chain(job.blockalign).find(|size| size % 512 != 0) {
            return Err(UringError::job(
                job,
                format!(
                    "direct=1 needs block sizes and alignment in whole 512-byte logical \
                     blocks, but {size} bytes is not (Linux answers EINVAL)"
                ),
            ));
        }
    }
    if let Some(spec) = &job.verify {
        let refuse = |why: String| {
            UringError::new(format!(
                "{}: {}: verify={}: refused: {why}",
                spec.location,
                job_label(job),
                spec.method
            ))
        };
        if !verify::supported(&spec.method) {
            return Err(refuse(
                "the real engine checks crc32c only; use verify=crc32c".into(),
            ));
        }
        if job.bs.iter().any(|bs| !matches!(bs, BlockSize::Fixed(_))) {
            return Err(refuse(
                "verification needs one fixed block size (bs=), not a range or a split".into(),
            ));
        }
        if let Some(size) = job
            .bs
            .iter()
            .map(BlockSize::min)
            .find(|&size| size < verify::HEADER_LEN as u64)
        {
            return Err(refuse(format!(
                "a {size}-byte block cannot hold the {}-byte verify header",
                verify::HEADER_LEN
            )));
        }
    }
    Ok(())
}

/// An I/O a job issued, from creation to completion: what the driver counts, and where its
/// data is.
#[derive(Clone, Copy, Debug)]
struct Io {
    issued: Issued,
    /// Index in the job's files.
    file: usize,
    /// Index in the job's buffers.
    buffer: Option<usize>,
    /// What to check in the data read.
    check: Check,
    /// A sync_file_range's flags (its range is `issued`'s offset and bytes).
    sync_range: Option<u32>,
}

/// What a completed read is checked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Nothing.
    None,
    /// A verify header and checksum (a reading job with `verify`).
    Header,
    /// Those, and the seed this run wrote the block with (the read-back phase).
    Written(u64),
}

/// A job's verification: what it wrote, and how far the read-back has got.
struct VerifyState {
    /// Read back what was written when the writes are done (`do_verify`).
    read_back: bool,
    /// Every block written, latest write per place: (file, offset) -> (length, seed).
    written: BTreeMap<(usize, u64), (u64, u64)>,
    /// Seed of the job's block patterns.
    seed: u64,
    writes: u64,
    /// The read-back queue, in file and offset order, and the next entry to issue.
    queue: Vec<((usize, u64), (u64, u64))>,
    next: usize,
    started: bool,
    /// Blocks that did not verify.
    failures: u64,
}

/// What the real engine keeps of a job besides its life ([`JobState`]).
struct UringJob {
    flow: FlowId,
    group: GroupId,
    last_write_file: usize,
    /// Per file: the byte range its writes covered since that file's last sync_file_range
    /// (fio's `first_write`, `last_write`; counted at issue, fio at completion).
    written: Vec<Option<(u64, u64)>>,
    /// Bytes issued since its last `dontneed_every` advice.
    since_dontneed: u64,
    /// Bytes of one loop over its files, and bytes issued in the current loop: fio reopens
    /// a job's files between loops, invalidating their cache.
    loop_bytes: u64,
    since_open: u64,
    files: Vec<JobFile>,
    buffers: SlotBuffers,
    /// The index of `buffers` among the ring's registered buffers, once registered.
    fixed_buffer: Option<u16>,
    free: Vec<usize>,
    /// Verification, when the job asked for it.
    verify: Option<VerifyState>,
    /// The job met an error and stopped issuing.
    failed: bool,
    error_count: u64,
}

/// Job `index`'s life and the real engine's part of it.
fn job_run(
    seed: u64,
    index: usize,
    spec: &JobSpec,
    all: &files::Files,
    files: &[JobFile],
    groups: &mut Groups,
    zoned: &mut ZbdRegistry,
) -> Result<(JobState, UringJob), UringError> {
    let group = groups
        .intern(&spec.cgroup)
        .map_err(|e| UringError::job(spec, e))?;
    let stream_seed = match spec.randseed {
        Some(randseed) => derive_seed(randseed, u64::from(spec.clone)),
        None => derive_seed(seed, index as u64),
    };
    let mut regions: Vec<_> = files.iter().map(|f| f.region).collect();
    // zonemode=zbd: zones emulated over each file (fio's init_zone_info), shared by the jobs
    // naming it; a device that is itself zoned would need its zone report, which is refused.
    let zone_files = if spec.zbd.is_some() {
        files
            .iter()
            .map(|f| {
                let Some(open) = all.files.get(f.file) else {
                    return Err(UringError::job(
                        spec,
                        "zonemode=zbd with ioengine=null: the null engine has no file to lay \
                         zones over",
                    ));
                };
                if let Some(model) = files::zoned_model(open) {
                    return Err(UringError::job(
                        spec,
                        format!(
                            "{}: a {model} zoned block device: zonemode=zbd on a zoned device \
                             (zone reports and resets through BLKREPORTZONE/BLKRESETZONE) is \
                             not supported; iosched emulates zones on conventional devices \
                             and files only",
                            open.name
                        ),
                    ));
                }
                Ok(ZbdFile {
                    name: &open.name,
                    base: 0,
                    size: open.size,
                })
            })
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let zbd = zoned
        .attach(index, spec, &zone_files, &mut regions)
        .map_err(|message| UringError::job(spec, message))?;
    let region_bytes: u64 = regions.iter().map(|r| r.len).sum();
    let generator = Generator::new(spec, &regions, Rng::new(stream_seed));
    // io.prio.class of the job's group changes its priority (blk-ioprio).
    let mut own_spec = spec.clone();
    own_spec.prio = groups.settings(group).prio_class.apply(spec.prio);
    let mut state = JobState::new(own_spec, index, seed, generator, region_bytes);
    state.zbd = zbd.map(Box::new);
    if let Some(replay) = &spec.replay {
        // Replayed offsets are the files' own (fio's `io_u->offset`), whatever the job's
        // `offset=`: each file from its first byte to its end.
        let extents = files
            .iter()
            .zip(&spec.filenames)
            .map(|(f, name)| {
                let size = all
                    .files
                    .get(f.file)
                    .map_or(f.region.start + f.region.len, |open| open.size);
                (name.clone(), 0, size)
            })
            .collect();
        state.replay = Some(Box::new(
            trace::Replay::open(replay, extents)
                .map_err(|error| UringError::job(spec, format!("read_iolog: {error}")))?,
        ));
    }
    let buffer_len = spec.bs.iter().map(BlockSize::max).max().unwrap_or(4096) as usize;
    let buffers = files::random_buffers(state.depth as usize, buffer_len, stream_seed);
    let own = UringJob {
        flow: FlowId(index as u32),
        group,
        last_write_file: 0,
        written: vec![None; files.len()],
        since_dontneed: 0,
        loop_bytes: region_bytes,
        since_open: 0,
        files: files.to_vec(),
        buffers,
        fixed_buffer: None,
        free: (0..state.depth as usize).rev().collect(),
        verify: spec.verify.as_ref().map(|verify| VerifyState {
            read_back: verify.do_verify && spec.writes(),
            written: BTreeMap::new(),
            seed: mix64(stream_seed ^ 0x7665_7269_6679),
            writes: 0,
            queue: Vec::new(),
            next: 0,
            started: false,
            failures: 0,
        }),
        failed: false,
        error_count: 0,
    };
    Ok((state, own))
}

struct Engine {
    core: Core,
    jobs: Vec<JobState>,
    own: Vec<UringJob>,
    ios: IdMap<Io>,
    next_id: u64,
    files: Files,
    seed: u64,
    notes: Vec<String>,
    errors: Vec<JobError>,
    issued: u64,
    completed: u64,
    stop: Option<Arc<AtomicUsize>>,
    /// I/Os and syncs of `ioengine=null` jobs, complete as soon as the loop comes round
    /// (fio's engines/null.c: queued and at once done, no system call).
    null_done: Vec<Issued>,
    /// The signal that stopped the run, once one did.
    stopped_by: Option<i32>,
}

impl Engine {
    /// Checks the jobs, lays out and opens their files, and sets up the ring.
    fn prepare(
        config: &UringConfig,
        file: &iosched_fio::JobFile,
        policy: Box<dyn Policy>,
        stage: Option<Box<dyn iosched_core::stage::Stage>>,
    ) -> Result<Engine, UringError> {
        if file.jobs.is_empty() {
            return Err(UringError::new("the job file defines no jobs"));
        }
        // A job that replays a trace takes its directions and block sizes from it (its files
        // only among those the job file names); the trace is read once here, so a malformed
        // one is refused before any file is opened.
        let prepared;
        let file = if file.jobs.iter().any(|spec| spec.replay.is_some()) {
            let mut copy = file.clone();
            for spec in &mut copy.jobs {
                if let (Some(replay), Some(path)) = (&mut spec.replay, &config.filename) {
                    replay.redirect = Some(path.display().to_string());
                }
                let summary = trace::replay::prepare(spec, true)
                    .map_err(|error| UringError::job(spec, error))?;
                if summary.ios[2] > 0 {
                    return Err(UringError::job(
                        spec,
                        format!(
                            "read_iolog: the trace has {} trims and the real engine does not \
                             issue trims (discards); leave them out with replay_skip=trim",
                            summary.ios[2]
                        ),
                    ));
                }
            }
            prepared = copy;
            &prepared
        } else {
            file
        };
        for job in &file.jobs {
            check_job(job)?;
        }
        let depth = device_depth(config, file);
        let mut elevator = Elevator::new(policy, default_nr_requests(depth));
        if let Some(stage) = stage {
            elevator = elevator.with_stage(stage);
        }
        policies::apply_settings(&mut elevator, &config.policy_settings)
            .map_err(|e| UringError::new(e.to_string()))?;
        // The parser's note on buffered I/O is the simulator's (it has no page cache); the real
        // engine honours direct=0.
        let mut notes: Vec<String> = file
            .notes
            .iter()
            .filter(|note| note.option != "direct")
            .map(|note| note.to_string())
            .collect();
        let files = files::prepare(&file.jobs, config.filename.as_deref(), &mut notes)?;
        let mut groups = Groups::new();
        groups
            .apply(&config.group_settings)
            .map_err(UringError::new)?;
        let mut jobs = Vec::with_capacity(file.jobs.len());
        let mut own = Vec::with_capacity(file.jobs.len());
        let mut zoned = ZbdRegistry::new();
        for (index, spec) in file.jobs.iter().enumerate() {
            let (job, uring) = job_run(
                config.seed,
                index,
                spec,
                &files,
                &files.jobs[index],
                &mut groups,
                &mut zoned,
            )?;
            jobs.push(job);
            own.push(uring);
        }
        elevator.set_groups(&groups);
        notes.extend(iosched_fio::driver::apply_qos(
            &mut elevator,
            &file.jobs,
            &groups,
        ));
        let mut core = Core::new(elevator, depth)?;
        register(&mut core, &mut own);
        // Logs open last, once nothing else can refuse the run: a refused run leaves none.
        if config.write_logs {
            trace::write::check_iolog_names(file.jobs.iter()).map_err(UringError::new)?;
            for (index, (run, spec)) in jobs.iter_mut().zip(&file.jobs).enumerate() {
                run.result.open_logs(spec).map_err(|error| {
                    UringError::new(format!("{}: job {:?}: {error}", spec.location, spec.name))
                })?;
                if let Some(path) = &spec.write_iolog {
                    // Offsets are the files' own: the log names each file as the job does.
                    let names = own[index]
                        .files
                        .iter()
                        .zip(&spec.filenames)
                        .map(|(f, name)| {
                            let open = files.files.get(f.file).map_or(name, |o| &o.name);
                            (open.clone(), 0)
                        })
                        .collect();
                    run.result.iolog =
                        Some(trace::IologStream::open(path, names).map_err(|error| {
                            UringError::new(format!(
                                "{}: job {:?}: {error}",
                                spec.location, spec.name
                            ))
                        })?);
                }
            }
        }
        Ok(Engine {
            core,
            jobs,
            own,
            ios: IdMap::default(),
            next_id: 0,
            files,
            seed: config.seed,
            notes,
            errors: Vec::new(),
            issued: 0,
            completed: 0,
            stop: config.stop.clone(),
            null_done: Vec::new(),
            stopped_by: None,
        })
    }

    fn run(mut self) -> Result<Outcome, UringError> {
        driver::start_all(&mut self, 0);
        let mut admitted = Vec::new();
        let mut finished: Vec<Finished> = Vec::new();
        loop {
            let now = self.core.now();
            if self.stopped_by.is_none() {
                let signal = self.stop.as_ref().map_or(0, |s| s.load(Ordering::Relaxed));
                if signal != 0 {
                    self.stop_issuing(signal as i32, now);
                }
            }
            self.timers(now);
            for index in 0..self.jobs.len() {
                driver::pump(&mut self, index, now);
            }
            self.core.admit_blocked(now, &mut admitted);
            for id in admitted.drain(..) {
                if let Some(io) = self.ios.get_mut(&id.0) {
                    io.issued.admitted = now;
                }
            }
            let (ios, own) = (&self.ios, &self.own);
            self.core.dispatch(now, |id| target(ios, own, id))?;
            let all_done = self.jobs.iter().all(|run| run.phase == Phase::Done);
            if all_done && self.core.idle() {
                break;
            }
            let next = self.next_timer();
            if !self.null_done.is_empty() {
                self.complete_null();
                continue;
            }
            if self.core.in_device() == 0 && self.core.idle() && next.is_none() && !all_done {
                return Err(UringError::new(
                    "the run stalled: no job can issue, nothing is in flight and no timer is \
                     set (a bug in iosched; please report the job file)",
                ));
            }
            self.core.wait(next)?;
            self.core.reap(&mut finished)?;
            for done in finished.drain(..) {
                self.complete(done);
            }
        }
        Ok(self.outcome())
    }

    /// Completes what `ioengine=null` jobs queued, now: recorded as done at the clock's
    /// time, which is the engine's own cost for them (fio's null engine measures fio's).
    fn complete_null(&mut self) {
        let done = std::mem::take(&mut self.null_done);
        for issued in done {
            let at = self.core.now();
            self.completed += 1;
            self.jobs[issued.job].record(&issued, at);
            driver::completed(self, &issued, at);
        }
    }

    /// Stops the run on `signal`, as fio does on SIGINT and SIGTERM: no job issues anything
    /// more, what is in flight completes and is counted, jobs not started never start (they
    /// report nothing done), and no `end_fsync` or verify read-back begins.
    fn stop_issuing(&mut self, signal: i32, now: Nanos) {
        self.stopped_by = Some(signal);
        for index in 0..self.jobs.len() {
            let run = &mut self.jobs[index];
            match run.phase {
                Phase::Pending => {
                    run.phase = Phase::Done;
                    run.start_at = None;
                    run.result.runtime = 0;
                }
                Phase::Running | Phase::Verifying => {
                    run.stop_issuing();
                    if run.in_flight == 0 {
                        driver::finish(self, index, now);
                    }
                }
                Phase::Draining | Phase::Done => {}
            }
        }
    }

    /// Calls the driver back for every time that has come: starts, runtimes' ends, wakes.
    fn timers(&mut self, now: Nanos) {
        for index in 0..self.jobs.len() {
            let run = &mut self.jobs[index];
            if run.wake_at.is_some_and(|at| at <= now) {
                // Every job is pumped after the timers: the wake only has to end.
                run.wake_at = None;
            }
            match run.phase {
                Phase::Pending if run.start_at.is_some_and(|at| at <= now) => {
                    driver::start(self, index, now)
                }
                Phase::Running if run.deadline.is_some_and(|at| at <= now) => {
                    driver::deadline(self, index, now)
                }
                _ => {}
            }
        }
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.jobs
            .iter()
            .flat_map(|run| {
                let running = run.phase == Phase::Running;
                [
                    run.start_at.filter(|_| run.phase == Phase::Pending),
                    run.deadline.filter(|_| running),
                    run.wake_at.filter(|_| running),
                    run.thinking_until.filter(|_| running),
                ]
            })
            .flatten()
            .min()
    }

    /// Issues read-backs of what job `index` wrote, and ends the job when all are checked.
    fn pump_verify(&mut self, index: usize, now: Nanos) {
        loop {
            let (run, own) = (&mut self.jobs[index], &mut self.own[index]);
            let Some(state) = own.verify.as_mut() else {
                return;
            };
            match driver::read_back_step(run, state.next < state.queue.len()) {
                driver::ReadBack::Wait => return,
                driver::ReadBack::Finished => return driver::finish(self, index, now),
                driver::ReadBack::Issue => {}
            }
            let ((file, offset), (len, seed)) = state.queue[state.next];
            state.next += 1;
            let io = NextIo {
                dir: DataDir::Read,
                offset,
                len,
                file,
            };
            let prio = self.jobs[index].spec.prio;
            self.issue_checked(index, io, prio, now, Check::Written(seed));
        }
    }

    fn new_id(&mut self) -> RequestId {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        id
    }

    /// Submits `io` of job `index` with `prio` (the driver has counted it).
    fn submit_io(&mut self, index: usize, io: NextIo, prio: IoPrio, now: Nanos) {
        // A mixed job's own reads are not checked (fio verifies the read-back of its logged
        // writes, not the workload's reads, of blocks perhaps never written).
        let mixed = matches!(
            self.jobs[index].spec.rw,
            RwMode::ReadWrite | RwMode::RandReadWrite
        );
        let check = match (&self.own[index].verify, io.dir) {
            (Some(_), DataDir::Read) if !mixed => Check::Header,
            _ => Check::None,
        };
        self.issue_checked(index, io, prio, now, check);
    }

    /// Submits `io` of job `index` with `prio`, to check as `check` when it completes.
    fn issue_checked(&mut self, index: usize, io: NextIo, prio: IoPrio, now: Nanos, check: Check) {
        let id = self.new_id();
        let (run, own) = (&mut self.jobs[index], &mut self.own[index]);
        if own.loop_bytes > 0 && own.since_open >= own.loop_bytes {
            // A new loop: fio reopens the job's files, invalidating their cache.
            own.since_open = 0;
            if run.spec.invalidate {
                for file in own.files.iter().filter(|f| f.buffered) {
                    let (start, len) = (
                        file.region.start as libc::off_t,
                        file.region.len as libc::off_t,
                    );
                    // SAFETY: a plain advisory call on an open descriptor.
                    unsafe { libc::posix_fadvise(file.fd, start, len, libc::POSIX_FADV_DONTNEED) };
                }
            }
        }
        own.since_open += io.len;
        if let Some(every) = run.spec.dontneed_every {
            own.since_dontneed += io.len;
            if own.since_dontneed >= every {
                own.since_dontneed = 0;
                for file in own.files.iter().filter(|f| f.buffered) {
                    // SAFETY: a plain advisory call on an open descriptor; 0, 0 is the whole
                    // file, as seed 000's antagonists dropped their cache.
                    unsafe { libc::posix_fadvise(file.fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
                }
            }
        }
        let (op, sync) = match io.dir {
            DataDir::Read => (Op::Read, true),
            // O_DIRECT and O_SYNC writes are synchronous (REQ_SYNC); buffered writeback is not.
            DataDir::Write => (Op::Write, run.spec.direct || run.spec.sync_writes),
            DataDir::Trim => unreachable!("trims are refused before the run"),
        };
        let buffer = own
            .free
            .pop()
            .expect("a job has a buffer for each I/O it may have in flight");
        if let (Some(state), DataDir::Write) = (&mut own.verify, io.dir) {
            state.writes += 1;
            let seed = mix64(state.seed ^ state.writes);
            verify::fill(
                &mut own.buffers.slot_mut(buffer)[..io.len as usize],
                io.offset,
                seed,
            );
            state.written.insert((io.file, io.offset), (io.len, seed));
        }
        if io.dir == DataDir::Write {
            own.last_write_file = io.file;
            let (start, end) = (io.offset, io.offset + io.len);
            let range = &mut own.written[io.file];
            *range = Some(range.map_or((start, end), |(a, b)| (a.min(start), b.max(end))));
        }
        let address = self.files.files[own.files[io.file].file].base + io.offset;
        let request = Request::new(
            id, op, address, io.len, sync, prio, own.flow, own.group, now,
        );
        if run.phase == Phase::Verifying && now >= run.measure_start {
            // The driver counts the depth of the jobs' own I/O; the read-back's is counted here.
            run.result.iodepth_levels[iodepth_bucket(run.in_flight)] += 1;
        }
        self.ios.insert(
            id.0,
            Io {
                issued: Issued::io(index, &io, prio, now),
                file: io.file,
                buffer: Some(buffer),
                check,
                sync_range: None,
            },
        );
        self.issued += 1;
        self.core.submit(request);
    }

    /// Submits a flush of job `index`'s file `file`: an fsync, or with `range` a
    /// sync_file_range of (offset, length, flags).
    fn issue_flush(
        &mut self,
        index: usize,
        file: usize,
        now: Nanos,
        range: Option<(u64, u64, u32)>,
    ) {
        let id = self.new_id();
        let (run, own) = (&self.jobs[index], &self.own[index]);
        let mut issued = Issued::flush(index, run.spec.prio, now);
        let sync_range = range.map(|(offset, len, flags)| {
            (issued.offset, issued.bytes) = (offset, len);
            flags
        });
        let address = self.files.files[own.files[file].file].base;
        let request = Request::new(
            id,
            Op::Flush,
            address,
            0,
            true,
            run.spec.prio,
            own.flow,
            own.group,
            now,
        );
        self.ios.insert(
            id.0,
            Io {
                issued,
                file,
                buffer: None,
                check: Check::None,
                sync_range,
            },
        );
        self.issued += 1;
        self.core.submit(request);
    }

    fn complete(&mut self, done: Finished) {
        for id in std::iter::once(done.request.id).chain(done.request.merged.iter().copied()) {
            self.finish_io(id, &done);
        }
    }

    fn finish_io(&mut self, id: RequestId, done: &Finished) {
        let Some(io) = self.ios.remove(&id.0) else {
            return;
        };
        self.completed += 1;
        let at = done.at;
        let error = done
            .error
            .and_then(|(failure, offset)| own_failure(&io, failure, offset));
        if let Some((failure, offset)) = error {
            let op = if io.issued.flush {
                Op::Flush
            } else {
                done.request.op
            };
            let message = match offset {
                Some(offset) => format!("{} at byte offset {offset}", failure.describe(op)),
                None => failure.describe(op),
            };
            // A non-fatal error (continue_on_error, ignore_error) is counted and the job
            // goes on; any other ends it.
            let goes_on = self.jobs[io.issued.job].io_failed(io.issued.dir, failure.errno());
            self.job_error(
                io.issued.job,
                io.file,
                offset,
                failure.errno(),
                message,
                if goes_on {
                    ErrorEffect::Counted
                } else {
                    ErrorEffect::Stop
                },
            );
        } else if io.check != Check::None {
            self.check(&io);
        }
        let job = io.issued.job;
        if let Some(buffer) = io.buffer {
            self.own[job].free.push(buffer);
        }
        if error.is_none() && self.jobs[job].record(&io.issued, at) && done.short {
            self.jobs[job].result.dirs[io.issued.dir as usize].short_ios += 1;
        }
        driver::completed(self, &io.issued, at);
    }

    /// Checks the data `io` read against its verify header.
    fn check(&mut self, io: &Io) {
        let run = &mut self.own[io.issued.job];
        let buffer = io.buffer.expect("a checked read has a buffer");
        let expected = match io.check {
            Check::Written(seed) => Some(seed),
            _ => None,
        };
        let data = &run.buffers.slot(buffer)[..io.issued.bytes as usize];
        let Err(mismatch) = verify::check(data, io.issued.offset, expected) else {
            return;
        };
        if let Some(state) = &mut run.verify {
            state.failures += 1;
        }
        let message = format!(
            "verify=crc32c failed at byte offset {} (in the {}-byte block at offset {}): {}",
            mismatch.at, io.issued.bytes, io.issued.offset, mismatch.what
        );
        // fio checks every block before failing the job (verify_fatal=0).
        self.job_error(
            io.issued.job,
            io.file,
            Some(mismatch.at),
            libc::EILSEQ,
            message,
            ErrorEffect::Fail,
        );
    }

    /// Records an error of job `index` on its file `file`, with its `effect` on the job.
    fn job_error(
        &mut self,
        index: usize,
        file: usize,
        offset: Option<u64>,
        errno: i32,
        message: String,
        effect: ErrorEffect,
    ) {
        let stop = effect == ErrorEffect::Stop;
        let name = self.files.files[self.own[index].files[file].file]
            .name
            .clone();
        let (run, own) = (&mut self.jobs[index], &mut self.own[index]);
        if run.result.error == 0 && effect != ErrorEffect::Counted {
            run.result.error = errno;
        }
        own.error_count += 1;
        if stop {
            own.failed = true;
            if matches!(run.phase, Phase::Running | Phase::Verifying) {
                run.drain();
            }
        }
        if own.error_count <= ERRORS_PER_JOB {
            self.errors.push(JobError {
                job: index,
                job_name: job_prefix(&run.spec),
                file: name,
                offset,
                errno,
                message,
            });
        }
    }

    fn outcome(mut self) -> Outcome {
        let duration = self.core.now();
        let mut devices: Vec<String> = Vec::new();
        for file in &self.files.files {
            let name = file.device.clone().unwrap_or_else(|| "unknown".into());
            if !devices.contains(&name) {
                devices.push(name);
            }
        }
        let device = devices.join(",");
        let mut device_parameters = vec![Parameter {
            name: "device_depth".into(),
            value: self.core.depth().to_string(),
            unit: "requests".into(),
            note: "most commands in flight on the device at once (--device-depth)".into(),
        }];
        for file in &self.files.files {
            device_parameters.push(Parameter {
                name: if file.block { "device" } else { "file" }.into(),
                value: file.name.clone(),
                unit: String::new(),
                note: format!(
                    "{} bytes{}",
                    file.size,
                    file.device
                        .as_ref()
                        .map(|d| format!(" on {d}"))
                        .unwrap_or_default()
                ),
            });
        }
        let mut counters = scheduler_counters(&self.core.elevator);
        counters.push(("policy_waits".into(), self.core.policy_waits as f64));
        counters.push((
            "rt_sent_as_be".into(),
            if self.core.rt_refused() { 1.0 } else { 0.0 },
        ));
        let mut notes = std::mem::take(&mut self.notes);
        notes.extend(self.core.warnings.iter().cloned());
        for (run, own) in self.jobs.iter().zip(&self.own) {
            if let Some(state) = &own.verify {
                let outcome = match (state.started, state.failures) {
                    (true, 0) => format!("all {} read back and verified", state.queue.len()),
                    (true, n) => format!("{n} of {} read back did not verify", state.queue.len()),
                    (false, 0) if !run.spec.writes() => "every block read verified".into(),
                    (false, n) if !run.spec.writes() => {
                        format!("{n} blocks read did not verify")
                    }
                    (false, _) => "not read back (do_verify=0, the job failed, or exitall or steady state ended it)".into(),
                };
                notes.push(format!(
                    "{}verify=crc32c: {} blocks written with a verify header; {outcome}",
                    job_prefix(&run.spec),
                    state.writes,
                ));
            }
            if own.error_count > ERRORS_PER_JOB {
                notes.push(format!(
                    "{}{} more errors not listed",
                    job_prefix(&run.spec),
                    own.error_count - ERRORS_PER_JOB
                ));
            }
        }
        notes.extend(self.errors.iter().map(|e| format!("error: {e}")));
        if let Some(signal) = self.stopped_by {
            notes.push(format!(
                "stopped by {} after {:.3} s: the results are partial (every I/O issued was \
                 completed and counted; jobs not started report nothing)",
                signal_name(signal),
                duration as f64 / SECOND as f64
            ));
        }
        let report = RunReport {
            engine: "io_uring".into(),
            seed: Some(self.seed),
            policy: match self.core.elevator.stage() {
                Some(stage) => format!("{}+{}", stage.name(), self.core.elevator.policy().name()),
                None => self.core.elevator.policy().name().to_string(),
            },
            tunables: tunable_parameters(&self.core.elevator),
            device: device.clone(),
            device_parameters,
            jobs: self
                .jobs
                .iter()
                .map(|run| {
                    // The job's time ends with its last completion (set by the driver).
                    let mut result = run.result.clone();
                    result.finish(result.runtime);
                    result
                })
                .collect(),
            disk: self.core.disk.util(&device, duration),
            device_counters: counters,
            notes,
            duration,
            started_ms: None,
            global_options: Vec::new(),
        };
        Outcome {
            report,
            errors: self.errors,
            issued: self.issued,
            completed: self.completed,
            stopped_by: self.stopped_by,
        }
    }
}

impl driver::Engine for Engine {
    fn jobs(&mut self) -> &mut [JobState] {
        &mut self.jobs
    }

    fn seed(&self) -> u64 {
        self.seed
    }

    fn issue(&mut self, index: usize, io: NextIo, prio: IoPrio, now: Nanos) {
        if self.jobs[index].spec.engine.is_null() {
            self.issued += 1;
            self.null_done.push(Issued::io(index, &io, prio, now));
            return;
        }
        self.submit_io(index, io, prio, now);
    }

    fn flush(&mut self, index: usize, now: Nanos, kind: SyncKind) -> u32 {
        if self.jobs[index].spec.engine.is_null() {
            // fio's null engine takes a sync as an I/O that does nothing.
            self.issued += 1;
            let prio = self.jobs[index].spec.prio;
            self.null_done.push(Issued::flush(index, prio, now));
            return 1;
        }
        match kind {
            SyncKind::End => {
                // end_fsync flushes every file of the job.
                let files = self.own[index].files.len();
                for file in 0..files {
                    self.issue_flush(index, file, now, None);
                }
                files as u32
            }
            SyncKind::Every => {
                // fsync= flushes the file last written.
                let file = self.own[index].last_write_file;
                self.issue_flush(index, file, now, None);
                1
            }
            SyncKind::Range(flags) => {
                // sync_file_range= syncs what the job wrote in the file last written since
                // that file's last call; nothing written, no call (fio's
                // do_sync_file_range returns at once).
                let own = &mut self.own[index];
                let file = own.last_write_file;
                let Some((start, end)) = own.written.get_mut(file).and_then(Option::take) else {
                    return 0;
                };
                self.issue_flush(index, file, now, Some((start, end - start, flags)));
                1
            }
        }
    }

    /// The loop polls the jobs' times (`timers`, `next_timer`): nothing to set.
    fn timer(&mut self, _at: Nanos, _timer: Timer) {}

    fn may_go_on(&self, index: usize) -> bool {
        !self.own[index].failed && self.stopped_by.is_none()
    }

    /// The verify read-back (`do_verify`), once the writes are done.
    fn finishing(&mut self, index: usize, now: Nanos) -> bool {
        let Some(state) = &mut self.own[index].verify else {
            return false;
        };
        if !state.read_back || state.started {
            return false;
        }
        state.started = true;
        state.queue = std::mem::take(&mut state.written).into_iter().collect();
        self.jobs[index].phase = Phase::Verifying;
        self.pump_verify(index, now);
        true
    }

    fn pump_own(&mut self, index: usize, now: Nanos) {
        self.pump_verify(index, now);
    }
}

/// The part of a failed command's error that concerns one original I/O in it. A command that
/// carries several (merged) failed from file offset `offset` on: an I/O that ends before it was
/// transferred in full (an earlier short transfer) and is not in error, one that starts after
/// it failed at its own first byte, so each reports its own offset.
fn own_failure(io: &Io, failure: Failure, offset: u64) -> Option<(Failure, Option<u64>)> {
    let io = &io.issued;
    if io.flush {
        return Some((failure, None));
    }
    if offset >= io.offset + io.bytes {
        return None;
    }
    Some((failure, Some(offset.max(io.offset))))
}

/// The name of a stop signal, for the report.
pub fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        other => format!("signal {other}"),
    }
}

/// Registers the jobs' files and buffers with the ring, as fio's `registerfiles` and
/// `fixedbufs` do, so that the kernel neither looks up a descriptor nor pins the pages of each
/// I/O. Whatever the kernel refuses (a region over 1 GiB, RLIMIT_MEMLOCK without
/// CAP_IPC_LOCK, more than 16384 buffers) goes on unregistered: the I/O is the same, only
/// dearer.
fn register(core: &mut Core, own: &mut [UringJob]) {
    let mut fds: Vec<RawFd> = own
        .iter()
        .flat_map(|job| job.files.iter().map(|file| file.fd))
        .filter(|&fd| fd >= 0)
        .collect();
    fds.sort_unstable();
    fds.dedup();
    if fds.len() <= MAX_REGISTERED_FILES && core.register_files(&fds) {
        for file in own.iter_mut().flat_map(|job| job.files.iter_mut()) {
            file.fixed = fds.binary_search(&file.fd).ok().map(|index| index as u32);
        }
    }
    let mut regions = Vec::new();
    let mut owners = Vec::new();
    for (index, job) in own.iter().enumerate() {
        let region = job.buffers.region();
        if region.iov_len <= MAX_FIXED_BUFFER && regions.len() < MAX_FIXED_BUFFERS {
            regions.push(region);
            owners.push(index);
        }
    }
    // SAFETY: each region belongs to a job's `buffers`, which the engine keeps until after
    // the ring (declared before `own`) is dropped, and no I/O outlives the run.
    if unsafe { core.register_buffers(&regions) } {
        for (slot, index) in owners.into_iter().enumerate() {
            own[index].fixed_buffer = Some(slot as u16);
        }
    }
}

/// The most buffers a ring registers (`IORING_MAX_REG_BUFFERS`), the most files we register
/// (the kernel takes up to `IORING_MAX_FIXED_FILES`, 2^20, within RLIMIT_NOFILE), and the
/// largest buffer (`io_buffer_validate`: 1 GiB).
const MAX_FIXED_BUFFERS: usize = 1 << 14;
const MAX_REGISTERED_FILES: usize = 1 << 15;
const MAX_FIXED_BUFFER: usize = 1 << 30;

/// Where request `id`'s data is.
fn target(ios: &IdMap<Io>, jobs: &[UringJob], id: RequestId) -> Target {
    let io = &ios[&id.0];
    let run = &jobs[io.issued.job];
    let file = &run.files[io.file];
    Target {
        fd: file.fd,
        fixed_file: file.fixed,
        buffered: file.buffered,
        buf: io
            .buffer
            .map_or(std::ptr::null_mut(), |b| run.buffers.slot_ptr(b)),
        fixed_buffer: io.buffer.and(run.fixed_buffer),
        offset: io.issued.offset,
        len: io.issued.bytes,
        sync_range: io.sync_range,
        short_ok: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iosched_fio::parse::parse_str;
    use std::os::fd::AsRawFd;
    use std::path::Path;

    // Proves a failing command (a negative CQE result) becomes a job error naming the job, the
    // file and the byte offset, sets fio's error counter, stops the job, and still completes
    // every request once.
    #[test]
    fn device_errors_are_reported_per_job() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let text = format!(
            "[w]\nfilename={}\nrw=write\nsize=1m\nbs=64k\noffset=128k\nioengine=io_uring\n\
             iodepth=4\n",
            path.display()
        );
        let file = parse_str(&text, "t.fio", Path::new("."), &|_| None).unwrap();
        let policy = policies::build("noop").unwrap();
        let mut engine = Engine::prepare(&UringConfig::default(), &file, policy, None).unwrap();
        // Swap the writer's descriptor for a read-only one: every write fails with EBADF.
        let read_only = std::fs::File::open(&path).unwrap();
        swap_fd(&mut engine, read_only.as_raw_fd());
        let outcome = engine.run().unwrap();
        assert_eq!(outcome.issued, outcome.completed);
        assert!(!outcome.ok());
        let error = &outcome.errors[0];
        assert_eq!(error.errno, libc::EBADF);
        assert_eq!(error.offset, Some(128 << 10));
        let text = error.to_string();
        assert!(
            text.starts_with(&format!(
                "t.fio:1: job \"w\": {}: write failed",
                path.display()
            )),
            "{text}"
        );
        assert!(text.ends_with("at byte offset 131072"), "{text}");
        let job = &outcome.report.jobs[0];
        assert_eq!(job.error, libc::EBADF);
        // The job stopped: at most the first depth-full of writes went out.
        assert!(outcome.issued <= 4, "{}", outcome.issued);
        let normal = iosched_fio::output::normal(&outcome.report);
        assert!(normal.contains("error: t.fio:1: job \"w\""), "{normal}");
    }

    /// Gives job 0's first file descriptor `fd` (unregistered) in place of its own.
    fn swap_fd(engine: &mut Engine, fd: RawFd) {
        let file = &mut engine.own[0].files[0];
        (file.fd, file.fixed) = (fd, None);
    }

    // Proves the jobs' files and buffers are registered with the ring (the SQEs are
    // READ_FIXED/WRITE_FIXED on fixed files) and that data goes through them intact: a
    // written and read-back file verifies.
    #[test]
    fn registered_files_and_buffers_carry_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let text = format!(
            "[w]\nfilename={}\nrw=randwrite\nsize=1m\nbs=4k\nioengine=io_uring\ndirect=1\n\
             iodepth=8\nverify=crc32c\n",
            path.display()
        );
        let file = parse_str(&text, "t.fio", Path::new("."), &|_| None).unwrap();
        let policy = policies::build("deadline").unwrap();
        let engine = Engine::prepare(&UringConfig::default(), &file, policy, None).unwrap();
        assert_eq!(engine.own[0].fixed_buffer, Some(0));
        assert_eq!(engine.own[0].files[0].fixed, Some(0));
        let outcome = engine.run().unwrap();
        assert!(outcome.ok(), "{:?}", outcome.errors);
        let job = &outcome.report.jobs[0];
        assert_eq!(job.dir(DataDir::Write).total_ios, 256);
        assert_eq!(
            job.dir(DataDir::Read).total_ios,
            256,
            "every block read back"
        );
        assert_eq!(job.error, 0);
    }

    // Proves fio's null engine runs on the real engine: no file is created or opened (the
    // job's file name is left alone), every I/O and sync completes, counted as fio counts
    // them (a sync every 16 writes but none after the last), and a null job without a size
    // or with verify is refused.
    #[test]
    fn the_null_engine_does_no_io() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("never");
        let text = format!(
            "[n]\nioengine=null\nfilename={}\nsize=64m\nbs=4k\nrw=randread\n\
             [m]\nioengine=null\nfilename={}\nsize=16m\nbs=64k\nrw=write\nfsync=16\n",
            path.display(),
            path.display()
        );
        let outcome = prepare_job(&text, &UringConfig::default()).run().unwrap();
        assert!(outcome.ok());
        assert!(!path.exists(), "the null engine opened no file");
        let jobs = &outcome.report.jobs;
        assert_eq!(jobs[0].dir(DataDir::Read).total_ios, 16384);
        assert_eq!(jobs[1].dir(DataDir::Write).total_ios, 256);
        assert_eq!(jobs[1].sync.count(), 15);
        assert_eq!(outcome.issued, outcome.completed);
        let refused = |text: &str| {
            let file = parse_str(text, "t.fio", Path::new("."), &|_| None).unwrap();
            let policy = policies::build("noop").unwrap();
            Engine::prepare(&UringConfig::default(), &file, policy, None)
                .err()
                .expect("refused")
                .to_string()
        };
        assert!(refused("[n]\nioengine=null\n").contains("needs size="));
        assert!(
            refused("[n]\nioengine=null\nsize=1m\nrw=write\nverify=crc32c\n")
                .contains("stores nothing")
        );
    }

    fn prepare_job(text: &str, config: &UringConfig) -> Engine {
        let file = parse_str(text, "t.fio", Path::new("."), &|_| None).unwrap();
        let policy = policies::build("deadline").unwrap();
        Engine::prepare(config, &file, policy, None).unwrap()
    }

    // Proves that when the kernel merges I/Os into one command and the command fails, each
    // original I/O reports its own offset (they all printed the first one's), and that an
    // I/O transferred in full before a short transfer failed is not reported at all.
    #[test]
    fn each_merged_io_reports_its_own_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let text = format!(
            "[w]\nfilename={}\nrw=write\nsize=1m\nbs=4k\nioengine=io_uring\niodepth=8\n",
            path.display()
        );
        let mut engine = prepare_job(&text, &UringConfig::default());
        let read_only = std::fs::File::open(&path).unwrap();
        swap_fd(&mut engine, read_only.as_raw_fd());
        let outcome = engine.run().unwrap();
        assert_eq!(outcome.issued, outcome.completed);
        assert!(outcome
            .report
            .device_counters
            .iter()
            .any(|(name, value)| name.contains("merge") && *value > 0.0));
        let mut offsets: Vec<u64> = outcome.errors.iter().filter_map(|e| e.offset).collect();
        assert_eq!(offsets.len(), 8, "{:?}", outcome.errors);
        offsets.sort_unstable();
        offsets.dedup();
        assert_eq!(offsets, (0..8).map(|i| i * 4096).collect::<Vec<_>>());

        let io = |offset, len| Io {
            issued: Issued::io(
                0,
                &NextIo {
                    dir: DataDir::Write,
                    offset,
                    len,
                    file: 0,
                },
                iosched_core::IoPrio::default(),
                0,
            ),
            file: 0,
            buffer: None,
            check: Check::None,
            sync_range: None,
        };
        let failure = Failure::Errno(libc::EIO);
        // A command over [0, 12k) whose first 6k went through before the device failed.
        assert_eq!(own_failure(&io(0, 4096), failure, 6144), None);
        assert_eq!(
            own_failure(&io(4096, 4096), failure, 6144),
            Some((failure, Some(6144)))
        );
        assert_eq!(
            own_failure(&io(8192, 4096), failure, 6144),
            Some((failure, Some(8192)))
        );
    }

    // Proves an I/O still in flight when the runtime ends is waited for and counted, with its
    // whole latency, as fio counts it (a stalled device showed a 15 ms maximum when fio showed
    // 25 s): the read below blocks on an empty pipe for 1.5 s, past a 200 ms runtime.
    #[test]
    fn io_completing_after_the_runtime_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let text = format!(
            "[r]\nfilename={}\nrw=read\nsize=64k\nbs=4k\ntime_based\nruntime=200ms\n\
             ioengine=psync\n",
            path.display()
        );
        let mut engine = prepare_job(&text, &UringConfig::default());
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors were just created and are owned here.
        let (reader, writer) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        };
        swap_fd(&mut engine, reader.as_raw_fd());
        let stall = std::time::Duration::from_millis(1500);
        let feeder = std::thread::spawn(move || {
            use std::io::Write;
            std::thread::sleep(stall);
            (&writer).write_all(&[0u8; 4096]).unwrap();
            writer
        });
        let outcome = engine.run().unwrap();
        drop(feeder.join().unwrap());
        assert!(outcome.ok(), "{:?}", outcome.errors);
        assert_eq!(outcome.issued, outcome.completed);
        let job = &outcome.report.jobs[0];
        let read = job.dir(DataDir::Read);
        assert_eq!(read.clat.count(), 1);
        assert!(
            read.clat.max() >= stall.as_nanos() as u64,
            "{}",
            read.clat.max()
        );
        assert!(job.runtime >= stall.as_nanos() as u64, "{}", job.runtime);
    }

    // Proves a stop signal ends a 60 s run at once: nothing more is issued, what was in flight
    // completes and is counted, the job not yet started never starts, and the outcome says
    // which signal stopped it.
    #[test]
    fn a_stop_signal_drains_and_returns_partial_results() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let text = format!(
            "[global]\nfilename={}\nsize=1m\nbs=4k\nioengine=io_uring\niodepth=4\n\
             [r]\nrw=randread\ntime_based\nruntime=60s\n[later]\nstonewall\nrw=write\n",
            path.display()
        );
        let stop = Arc::new(AtomicUsize::new(0));
        let config = UringConfig {
            stop: Some(stop.clone()),
            ..UringConfig::default()
        };
        let engine = prepare_job(&text, &config);
        let signaller = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            stop.store(libc::SIGINT as usize, Ordering::Relaxed);
        });
        let outcome = engine.run().unwrap();
        signaller.join().unwrap();
        assert_eq!(outcome.stopped_by, Some(libc::SIGINT));
        assert_eq!(outcome.issued, outcome.completed);
        let reader = &outcome.report.jobs[0];
        assert!(reader.dir(DataDir::Read).clat.count() > 0);
        assert!(reader.runtime < 10 * SECOND, "{}", reader.runtime);
        let later = &outcome.report.jobs[1];
        assert_eq!(later.dir(DataDir::Write).clat.count(), 0);
        assert!(outcome
            .report
            .notes
            .iter()
            .any(|note| note.starts_with("stopped by SIGINT")));
    }
}

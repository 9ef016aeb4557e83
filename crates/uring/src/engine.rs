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

use crate::buffer::AlignedBuf;
use crate::error::{job_label, job_prefix, JobError};
use crate::files::{self, Files, JobFile};
use crate::ids::IdMap;
use crate::ring::{Core, Failure, Finished, Target};
use crate::verify;
use crate::UringError;
use iosched_core::{
    elevator::default_nr_requests, policies, time::SECOND, Elevator, FlowId, GroupId, Groups,
    Nanos, Op, Policy, Request, RequestId,
};
use iosched_fio::random::{derive_seed, mix64, Rng};
use iosched_fio::report::{scheduler_counters, tunable_parameters};
use iosched_fio::stats::iodepth_bucket;
use iosched_fio::workload::{Generator, NextIo};
use iosched_fio::{BlockSize, DataDir, JobResult, JobSpec, Parameter, RunReport, RwMode};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Default most commands in flight on the device at once.
pub const DEFAULT_DEVICE_DEPTH: u32 = 32;

/// Seed streams for start delays are offset so they never share a job's I/O stream (as in the
/// simulator, so that one seed draws the same start delays in both engines).
const STARTDELAY_STREAM_BASE: u64 = 1 << 32;

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
    /// as Linux sets it).
    pub device_depth: u32,
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
            device_depth: DEFAULT_DEVICE_DEPTH,
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
        if matches!(job.rw, RwMode::ReadWrite | RwMode::RandReadWrite) {
            return Err(refuse(format!(
                "verifying a mixed job (rw={}) is not supported: write with verify in one job, \
                 then read with verify in a later one (stonewall)",
                job.rw.name()
            )));
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for its start time or for a stonewall.
    Pending,
    /// Issuing I/O.
    Running,
    /// Issues nothing more; waits for its I/O in flight.
    Draining,
    /// Reading back and checking what it wrote (`verify` with `do_verify`).
    Verifying,
    /// Finished.
    Done,
}

/// An I/O a job issued, from creation to completion.
#[derive(Clone, Copy, Debug)]
struct Io {
    job: usize,
    dir: DataDir,
    flush: bool,
    /// Index in the job's files.
    file: usize,
    /// Offset in the file.
    offset: u64,
    bytes: u64,
    prio: iosched_core::IoPrio,
    created: Nanos,
    admitted: Nanos,
    /// Index in the job's buffers.
    buffer: Option<usize>,
    /// What to check in the data read.
    check: Check,
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

struct JobRun {
    spec: JobSpec,
    flow: FlowId,
    group: GroupId,
    phase: Phase,
    depth: u32,
    generator: Generator,
    /// The next I/O, drawn but held back by a rate limit.
    staged: Option<NextIo>,
    in_flight: u32,
    start_at: Option<Nanos>,
    started_at: Nanos,
    measure_start: Nanos,
    deadline: Option<Nanos>,
    bytes_limit: Option<u64>,
    bytes_issued: u64,
    ios_issued: u64,
    rate_bytes: [u64; 3],
    rate_ios: [u64; 3],
    wake_at: Option<Nanos>,
    /// Waiting for every I/O in flight to complete before thinking (fio's `io_u_quiesce`).
    quiescing: bool,
    thinking_until: Option<Nanos>,
    writes_since_flush: u32,
    last_write_file: usize,
    end_fsync_issued: bool,
    files: Vec<JobFile>,
    buffers: Vec<AlignedBuf>,
    free: Vec<usize>,
    /// Verification, when the job asked for it.
    verify: Option<VerifyState>,
    /// The job met an error and stopped issuing.
    failed: bool,
    error_count: u64,
    result: JobResult,
}

impl JobRun {
    fn new(
        seed: u64,
        index: usize,
        spec: &JobSpec,
        files: &[JobFile],
        groups: &mut Groups,
    ) -> Result<Self, UringError> {
        let group = groups
            .intern(&spec.cgroup)
            .map_err(|e| UringError::job(spec, e))?;
        let stream_seed = match spec.randseed {
            Some(randseed) => derive_seed(randseed, u64::from(spec.clone)),
            None => derive_seed(seed, index as u64),
        };
        let regions: Vec<_> = files.iter().map(|f| f.region).collect();
        let region_bytes: u64 = regions.iter().map(|r| r.len).sum();
        let bytes_limit = if spec.time_based {
            None
        } else {
            Some(
                spec.io_size
                    .unwrap_or(region_bytes.saturating_mul(u64::from(spec.loops.max(1)))),
            )
        };
        let depth = if spec.engine.is_async() {
            spec.iodepth.max(1)
        } else {
            1
        };
        let buffer_len = spec.bs.iter().map(BlockSize::max).max().unwrap_or(4096) as usize;
        let buffers = (0..depth)
            .map(|slot| files::random_buffer(buffer_len, stream_seed ^ u64::from(slot)))
            .collect();
        Ok(JobRun {
            spec: {
                // io.prio.class of the job's group changes its priority (blk-ioprio).
                let mut spec = spec.clone();
                spec.prio = groups.settings(group).prio_class.apply(spec.prio);
                spec
            },
            flow: FlowId(index as u32),
            group,
            phase: Phase::Pending,
            depth,
            generator: Generator::new(spec, &regions, Rng::new(stream_seed)),
            staged: None,
            in_flight: 0,
            start_at: None,
            started_at: 0,
            measure_start: 0,
            deadline: None,
            bytes_limit,
            bytes_issued: 0,
            ios_issued: 0,
            rate_bytes: [0; 3],
            rate_ios: [0; 3],
            wake_at: None,
            quiescing: false,
            thinking_until: None,
            writes_since_flush: 0,
            last_write_file: 0,
            end_fsync_issued: false,
            files: files.to_vec(),
            buffers,
            free: (0..depth as usize).rev().collect(),
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
            result: JobResult::for_job(spec, index as u32 + 1),
        })
    }

    fn wake_at(&mut self, at: Nanos) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }
}

struct Engine {
    core: Core,
    jobs: Vec<JobRun>,
    ios: IdMap<Io>,
    next_id: u64,
    files: Files,
    seed: u64,
    notes: Vec<String>,
    errors: Vec<JobError>,
    issued: u64,
    completed: u64,
    stop: Option<Arc<AtomicUsize>>,
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
        for job in &file.jobs {
            check_job(job)?;
        }
        let depth = config.device_depth.max(1);
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
        for (index, spec) in file.jobs.iter().enumerate() {
            jobs.push(JobRun::new(
                config.seed,
                index,
                spec,
                &files.jobs[index],
                &mut groups,
            )?);
        }
        elevator.set_groups(&groups);
        let core = Core::new(elevator, depth)?;
        // Logs open last, once nothing else can refuse the run: a refused run leaves none.
        if config.write_logs {
            for (run, spec) in jobs.iter_mut().zip(&file.jobs) {
                run.result.open_logs(spec).map_err(|error| {
                    UringError::new(format!("{}: job {:?}: {error}", spec.location, spec.name))
                })?;
            }
        }
        Ok(Engine {
            core,
            jobs,
            ios: IdMap::default(),
            next_id: 0,
            files,
            seed: config.seed,
            notes,
            errors: Vec::new(),
            issued: 0,
            completed: 0,
            stop: config.stop.clone(),
            stopped_by: None,
        })
    }

    fn run(mut self) -> Result<Outcome, UringError> {
        self.schedule_starts(0);
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
                self.pump(index, now);
            }
            self.core.admit_blocked(now, &mut admitted);
            for id in admitted.drain(..) {
                if let Some(io) = self.ios.get_mut(&id.0) {
                    io.admitted = now;
                }
            }
            let (ios, jobs) = (&self.ios, &self.jobs);
            self.core.dispatch(now, |id| target(ios, jobs, id))?;
            let all_done = self.jobs.iter().all(|run| run.phase == Phase::Done);
            if all_done && self.core.idle() {
                break;
            }
            let next = self.next_timer();
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
                    run.result.finish(0);
                }
                Phase::Running | Phase::Verifying => {
                    run.phase = Phase::Draining;
                    run.staged = None;
                    run.quiescing = false;
                    run.thinking_until = None;
                    if run.in_flight == 0 {
                        self.finish_job(index, now);
                    }
                }
                Phase::Draining | Phase::Done => {}
            }
        }
    }

    fn schedule_starts(&mut self, now: Nanos) {
        for index in 0..self.jobs.len() {
            if self.barrier_open(index) {
                let delay = self.start_delay(index);
                self.jobs[index].start_at = Some(now + delay);
            }
        }
    }

    /// Whether every job before the last stonewall at or before `index` is done.
    fn barrier_open(&self, index: usize) -> bool {
        let wall = (1..=index)
            .rev()
            .find(|&i| self.jobs[i].spec.stonewall)
            .unwrap_or(0);
        self.jobs[..wall].iter().all(|j| j.phase == Phase::Done)
    }

    fn start_delay(&self, index: usize) -> Nanos {
        let (low, high) = self.jobs[index].spec.startdelay;
        if high <= low {
            return low;
        }
        let mut rng = Rng::new(derive_seed(
            self.seed,
            STARTDELAY_STREAM_BASE + index as u64,
        ));
        low + rng.below(high - low + 1)
    }

    fn timers(&mut self, now: Nanos) {
        for index in 0..self.jobs.len() {
            let run = &mut self.jobs[index];
            if run.wake_at.is_some_and(|at| at <= now) {
                run.wake_at = None;
            }
            match run.phase {
                Phase::Pending if run.start_at.is_some_and(|at| at <= now) => {
                    self.start_job(index, now)
                }
                Phase::Running if run.deadline.is_some_and(|at| at <= now) => {
                    run.phase = Phase::Draining;
                    run.staged = None;
                    if run.in_flight == 0 {
                        self.finish_job(index, now);
                        if self.jobs[index].phase == Phase::Verifying {
                            self.pump_verify(index, now);
                        }
                    }
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

    fn start_job(&mut self, index: usize, now: Nanos) {
        let run = &mut self.jobs[index];
        run.phase = Phase::Running;
        run.start_at = None;
        run.started_at = now;
        run.measure_start = now + run.spec.ramp_time;
        run.result.measure_start = run.measure_start;
        run.deadline = run.spec.runtime.map(|runtime| run.measure_start + runtime);
    }

    /// Issues as much I/O as job `index` may issue now.
    fn pump(&mut self, index: usize, now: Nanos) {
        if self.jobs[index].phase == Phase::Verifying {
            self.pump_verify(index, now);
            return;
        }
        loop {
            let run = &mut self.jobs[index];
            if run.phase != Phase::Running {
                return;
            }
            if run.quiescing {
                if run.in_flight > 0 {
                    return;
                }
                run.quiescing = false;
                run.thinking_until = Some(now + run.spec.thinktime);
                return;
            }
            if let Some(until) = run.thinking_until {
                if now < until {
                    return;
                }
                run.thinking_until = None;
            }
            if run.in_flight >= run.depth {
                return;
            }
            if run.spec.fsync_every > 0 && run.writes_since_flush >= run.spec.fsync_every {
                run.writes_since_flush = 0;
                let file = run.last_write_file;
                self.issue_flush(index, file, now);
                continue;
            }
            let limit_reached = run
                .bytes_limit
                .is_some_and(|limit| run.bytes_issued >= limit);
            if limit_reached && run.staged.is_none() {
                run.phase = Phase::Draining;
                if run.in_flight == 0 {
                    self.finish_job(index, now);
                    // A verify job goes straight on to its read-back: nothing else would wake
                    // it before the loop's check for a stall.
                    if self.jobs[index].phase == Phase::Verifying {
                        self.pump_verify(index, now);
                    }
                }
                return;
            }
            let io = *run.staged.get_or_insert_with(|| run.generator.next_io());
            let dir = io.dir as usize;
            let mut allowed = now;
            // fio's linear rate process: the n-th byte (or I/O) may go at start + n / rate.
            if let Some(since) = (u128::from(run.rate_bytes[dir]) * u128::from(SECOND))
                .checked_div(u128::from(run.spec.rate[dir]))
            {
                allowed = allowed.max(run.started_at + since as Nanos);
            }
            if let Some(since) = (run.rate_ios[dir] * SECOND).checked_div(run.spec.rate_iops[dir]) {
                allowed = allowed.max(run.started_at + since);
            }
            if allowed > now {
                run.wake_at(allowed);
                return;
            }
            run.staged = None;
            self.issue(index, io, now);
            let run = &mut self.jobs[index];
            if run.spec.thinktime > 0
                && run.ios_issued % u64::from(run.spec.thinktime_blocks.max(1)) == 0
            {
                run.quiescing = true;
            }
        }
    }

    /// Issues read-backs of what job `index` wrote, and ends the job when all are checked.
    fn pump_verify(&mut self, index: usize, now: Nanos) {
        loop {
            let run = &mut self.jobs[index];
            let state = run.verify.as_mut().expect("a verifying job verifies");
            if state.next == state.queue.len() {
                if run.in_flight == 0 {
                    self.finish_job(index, now);
                }
                return;
            }
            if run.in_flight >= run.depth {
                return;
            }
            let ((file, offset), (len, seed)) = state.queue[state.next];
            state.next += 1;
            let io = NextIo {
                dir: DataDir::Read,
                offset,
                len,
                file,
            };
            self.issue_checked(index, io, now, Check::Written(seed));
        }
    }

    fn new_id(&mut self) -> RequestId {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        id
    }

    fn issue(&mut self, index: usize, io: NextIo, now: Nanos) {
        let check = match (&self.jobs[index].verify, io.dir) {
            (Some(_), DataDir::Read) => Check::Header,
            _ => Check::None,
        };
        self.issue_checked(index, io, now, check);
    }

    fn issue_checked(&mut self, index: usize, io: NextIo, now: Nanos, check: Check) {
        let id = self.new_id();
        let run = &mut self.jobs[index];
        let (op, sync) = match io.dir {
            DataDir::Read => (Op::Read, true),
            // O_DIRECT and O_SYNC writes are synchronous (REQ_SYNC); buffered writeback is not.
            DataDir::Write => (Op::Write, run.spec.direct || run.spec.sync_writes),
            DataDir::Trim => unreachable!("trims are refused before the run"),
        };
        let buffer = run
            .free
            .pop()
            .expect("a job has a buffer for each I/O it may have in flight");
        if let (Some(state), DataDir::Write) = (&mut run.verify, io.dir) {
            state.writes += 1;
            let seed = mix64(state.seed ^ state.writes);
            verify::fill(&mut run.buffers[buffer][..io.len as usize], io.offset, seed);
            state.written.insert((io.file, io.offset), (io.len, seed));
        }
        let address = self.files.files[run.files[io.file].file].base + io.offset;
        let request = Request::new(
            id,
            op,
            address,
            io.len,
            sync,
            run.spec.prio,
            run.flow,
            run.group,
            now,
        );
        run.in_flight += 1;
        run.ios_issued += 1;
        run.bytes_issued += io.len;
        run.rate_bytes[io.dir as usize] += io.len;
        run.rate_ios[io.dir as usize] += 1;
        if io.dir == DataDir::Write {
            run.writes_since_flush += 1;
            run.last_write_file = io.file;
        }
        if now >= run.measure_start {
            run.result.iodepth_levels[iodepth_bucket(run.in_flight)] += 1;
        }
        self.ios.insert(
            id.0,
            Io {
                job: index,
                dir: io.dir,
                flush: false,
                file: io.file,
                offset: io.offset,
                bytes: io.len,
                prio: run.spec.prio,
                created: now,
                admitted: now,
                buffer: Some(buffer),
                check,
            },
        );
        self.issued += 1;
        self.core.submit(request, now);
    }

    fn issue_flush(&mut self, index: usize, file: usize, now: Nanos) {
        let id = self.new_id();
        let run = &mut self.jobs[index];
        let address = self.files.files[run.files[file].file].base;
        let request = Request::new(
            id,
            Op::Flush,
            address,
            0,
            true,
            run.spec.prio,
            run.flow,
            run.group,
            now,
        );
        run.in_flight += 1;
        self.ios.insert(
            id.0,
            Io {
                job: index,
                dir: DataDir::Write,
                flush: true,
                file,
                offset: 0,
                bytes: 0,
                prio: run.spec.prio,
                created: now,
                admitted: now,
                buffer: None,
                check: Check::None,
            },
        );
        self.issued += 1;
        self.core.submit(request, now);
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
            let op = if io.flush { Op::Flush } else { done.request.op };
            let message = match offset {
                Some(offset) => format!("{} at byte offset {offset}", failure.describe(op)),
                None => failure.describe(op),
            };
            self.job_error(io.job, io.file, offset, failure.errno(), message, true);
        } else if io.check != Check::None {
            self.check(&io);
        }
        let run = &mut self.jobs[io.job];
        run.in_flight -= 1;
        if let Some(buffer) = io.buffer {
            run.free.push(buffer);
        }
        // Every I/O issued is counted, also one that completes after the job's runtime ended
        // (fio waits for what is in flight and counts it; a stalled device must show as a
        // long latency, not vanish from the statistics). Only the ramp is left out.
        if error.is_none() && at >= run.measure_start {
            if io.flush {
                run.result.sync.record(at - io.created);
            } else {
                let (slat, clat) = if run.spec.engine.is_async() {
                    (Some(io.admitted - io.created), at - io.admitted)
                } else {
                    (None, at - io.created)
                };
                run.result.record_io(
                    io.dir,
                    io.bytes,
                    io.offset,
                    io.prio,
                    slat,
                    clat,
                    at - run.measure_start,
                );
                if done.short {
                    run.result.dirs[io.dir as usize].short_ios += 1;
                }
            }
        }
        if run.phase == Phase::Draining && run.in_flight == 0 {
            self.finish_job(io.job, at);
        }
    }

    /// Checks the data `io` read against its verify header.
    fn check(&mut self, io: &Io) {
        let run = &mut self.jobs[io.job];
        let buffer = io.buffer.expect("a checked read has a buffer");
        let expected = match io.check {
            Check::Written(seed) => Some(seed),
            _ => None,
        };
        let data = &run.buffers[buffer][..io.bytes as usize];
        let Err(mismatch) = verify::check(data, io.offset, expected) else {
            return;
        };
        if let Some(state) = &mut run.verify {
            state.failures += 1;
        }
        let message = format!(
            "verify=crc32c failed at byte offset {} (in the {}-byte block at offset {}): {}",
            mismatch.at, io.bytes, io.offset, mismatch.what
        );
        // fio checks every block before failing the job (verify_fatal=0).
        self.job_error(
            io.job,
            io.file,
            Some(mismatch.at),
            libc::EILSEQ,
            message,
            false,
        );
    }

    /// Records an error of job `index` on its file `file`; with `stop`, the job issues nothing
    /// more (fio's default for I/O errors, `continue_on_error=none`).
    fn job_error(
        &mut self,
        index: usize,
        file: usize,
        offset: Option<u64>,
        errno: i32,
        message: String,
        stop: bool,
    ) {
        let name = self.files.files[self.jobs[index].files[file].file]
            .name
            .clone();
        let run = &mut self.jobs[index];
        if run.result.error == 0 {
            run.result.error = errno;
        }
        run.error_count += 1;
        if stop {
            run.failed = true;
            if matches!(run.phase, Phase::Running | Phase::Verifying) {
                run.phase = Phase::Draining;
                run.staged = None;
            }
        }
        if run.error_count <= ERRORS_PER_JOB {
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

    fn finish_job(&mut self, index: usize, now: Nanos) {
        let run = &mut self.jobs[index];
        debug_assert_eq!(run.in_flight, 0);
        let stopped = self.stopped_by.is_some();
        if run.spec.end_fsync && !run.end_fsync_issued && !run.failed && !stopped {
            run.end_fsync_issued = true;
            run.phase = Phase::Draining;
            for file in 0..run.files.len() {
                self.issue_flush(index, file, now);
            }
            return;
        }
        if let Some(state) = &mut run.verify {
            if state.read_back && !state.started && !run.failed && !stopped {
                state.started = true;
                state.queue = std::mem::take(&mut state.written).into_iter().collect();
                run.phase = Phase::Verifying;
                return;
            }
        }
        run.phase = Phase::Done;
        // The job's time ends with its last completion, past its runtime when I/O was still
        // in flight then, as fio's does.
        run.result.finish(now.saturating_sub(run.measure_start));
        for later in index + 1..self.jobs.len() {
            if self.jobs[later].phase == Phase::Pending
                && self.jobs[later].start_at.is_none()
                && self.jobs[later].spec.stonewall
                && self.barrier_open(later)
            {
                // Open this wall: it and every job up to the next wall start now.
                let next_wall = (later + 1..self.jobs.len())
                    .find(|&i| self.jobs[i].spec.stonewall)
                    .unwrap_or(self.jobs.len());
                for starting in later..next_wall {
                    let delay = self.start_delay(starting);
                    self.jobs[starting].start_at = Some(now + delay);
                }
                break;
            }
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
        for run in &self.jobs {
            if let Some(state) = &run.verify {
                let outcome = match (state.started, state.failures) {
                    (true, 0) => format!("all {} read back and verified", state.queue.len()),
                    (true, n) => format!("{n} of {} read back did not verify", state.queue.len()),
                    (false, 0) if !run.spec.writes() => "every block read verified".into(),
                    (false, n) if !run.spec.writes() => {
                        format!("{n} blocks read did not verify")
                    }
                    (false, _) => "not read back (do_verify=0, or the job failed)".into(),
                };
                notes.push(format!(
                    "{}verify=crc32c: {} blocks written with a verify header; {outcome}",
                    job_prefix(&run.spec),
                    state.writes,
                ));
            }
            if run.error_count > ERRORS_PER_JOB {
                notes.push(format!(
                    "{}{} more errors not listed",
                    job_prefix(&run.spec),
                    run.error_count - ERRORS_PER_JOB
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
            jobs: self.jobs.iter().map(|run| run.result.clone()).collect(),
            disk: self.core.disk.util(&device, duration),
            device_counters: counters,
            notes,
            duration,
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

/// The part of a failed command's error that concerns one original I/O in it. A command that
/// carries several (merged) failed from file offset `offset` on: an I/O that ends before it was
/// transferred in full (an earlier short transfer) and is not in error, one that starts after
/// it failed at its own first byte, so each reports its own offset.
fn own_failure(io: &Io, failure: Failure, offset: u64) -> Option<(Failure, Option<u64>)> {
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

/// Where request `id`'s data is.
fn target(ios: &IdMap<Io>, jobs: &[JobRun], id: RequestId) -> Target {
    let io = &ios[&id.0];
    let run = &jobs[io.job];
    let file = &run.files[io.file];
    Target {
        fd: file.fd,
        buffered: file.buffered,
        buf: io
            .buffer
            .map_or(std::ptr::null_mut(), |b| run.buffers[b].raw()),
        offset: io.offset,
        len: io.bytes,
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
        engine.jobs[0].files[0].fd = read_only.as_raw_fd();
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
        engine.jobs[0].files[0].fd = read_only.as_raw_fd();
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

        let io = |offset, bytes| Io {
            job: 0,
            dir: DataDir::Write,
            flush: false,
            file: 0,
            offset,
            bytes,
            prio: iosched_core::IoPrio::default(),
            created: 0,
            admitted: 0,
            buffer: None,
            check: Check::None,
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
        engine.jobs[0].files[0].fd = reader.as_raw_fd();
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

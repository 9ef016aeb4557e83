//! fio's job lifecycle, written once for every engine: when a job starts (`startdelay`, the
//! `stonewall` barriers), what it may issue and when (`iodepth`, `rate`, `rate_iops`,
//! `thinktime`, `fsync`, `flow`, the `latency_target` depth search), how it ends
//! (`size`/`io_size`/`loops`, `number_ios`, `runtime`, `rate_min`, `exitall`, `end_fsync`, the
//! last completion), and what it counts (latencies past the ramp, I/O depths).
//!
//! The simulator (virtual time) and the real engine (wall time) implement [`Engine`]: they
//! submit what the driver decides, call it back at the times it asks for, and tell it of each
//! completion. Everything fio decides is here, so the two engines cannot drift apart, and the
//! page cache, writeback and stacked devices to come are built once, above this driver.
//!
//! ```text
//!            start_all ──► Engine::timer(Start)         (each job of the first phase)
//!  timer(Start) ─► start ──► pump ──► Engine::issue / Engine::flush
//!  timer(Wake)  ─► wake  ──► pump        (rate and think time ask for a wake)
//!  timer(Deadline) ─► deadline ──► Draining ──► finish when nothing is in flight
//!  completion ──► completed ──► record, pump, or finish ──► end_fsync, Engine::finishing,
//!                                                          Done, the next phase's starts
//! ```
//!
//! Time is a parameter (`now`), as in the policies: the driver reads no clock.

use crate::job::JobSpec;
use crate::prefetch::prefetch;
use crate::random::{derive_seed, Rng};
use crate::stats::{iodepth_bucket, JobResult};
use crate::steady::SteadyTracker;
use crate::trace::replay::{Pace, ReplayOp};
use crate::trace::{Replay, TraceOp};
use crate::workload::{Generator, NextIo};
use crate::zbd::{JobZbd, ZbdStep};
use crate::DataDir;
use iosched_core::{IoPrio, Nanos};

const SECOND: Nanos = 1_000_000_000;

/// Seed streams for start delays are offset so they never share a job's I/O stream.
pub const STARTDELAY_STREAM_BASE: u64 = 1 << 32;

/// Seed streams for per-I/O priorities (`cmdprio_percentage`), apart from both.
pub const CMDPRIO_STREAM_BASE: u64 = 2 << 32;

/// Seed streams for `rate_process=poisson` gaps, apart from the others.
pub const POISSON_STREAM_BASE: u64 = 3 << 32;

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for its start time or for a stonewall.
    Pending,
    /// Issuing I/O.
    Running,
    /// Issues nothing more; waits for its I/O in flight.
    Draining,
    /// In a last phase of the engine's own (the real engine's verify read-back).
    Verifying,
    /// Finished.
    Done,
}

/// A time at which the engine calls the driver back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// Job `index` starts ([`start`]).
    Start(usize),
    /// Job `index`'s runtime ends ([`deadline`]).
    Deadline(usize),
    /// Job `index` may issue again after a rate limit or think time ([`wake`]).
    Wake(usize),
}

/// One job's state in its life.
///
/// Laid out in declaration order (`repr(C)`), what each I/O's path reads first: with 1024
/// jobs a job's state has left the cache by its next I/O, and the fields read on that path,
/// spread by the compiler's layout over the struct's 5 KiB, were a cache miss each. The
/// counters, limits and times come first, a few cache lines together; the searches, traces
/// and zones that few jobs have are boxed, so that the test for them reads those lines too;
/// the spec and the results, large, come last.
#[repr(C)]
pub struct JobState {
    /// Which of the spec's options each I/O's path must look at.
    uses: Uses,
    /// Where it is.
    pub phase: Phase,
    /// Its start came while a job it waits for (`wait_for`) was still running: it starts
    /// when the last of them finishes.
    pub waiting: bool,
    /// Another job's `exitall`, or steady state, ended it (fio's `td->terminate`): it does
    /// not go on to the verify read-back (fio's `do_verify` loops `while (!td->terminate)`).
    pub terminated: bool,
    /// Waiting for every I/O in flight to complete before thinking (fio's `io_u_quiesce`).
    quiescing: bool,
    /// Held back by `flow` until another job of its flow issues.
    flow_blocked: bool,
    end_fsync_issued: bool,
    /// Most I/Os in flight: `iodepth` for an asynchronous engine, else 1.
    pub depth: u32,
    /// I/Os (and flushes) issued and not completed.
    pub in_flight: u32,
    writes_since_flush: u32,
    writes_since_range: u32,
    /// Its I/O priority (the spec's, which its group sets), for its I/Os without `cmdprio`.
    prio: IoPrio,
    /// When its ramp ends and counting begins.
    pub measure_start: Nanos,
    /// When its runtime ends, if it has one.
    pub deadline: Option<Nanos>,
    /// Bytes to issue, unless time-based.
    bytes_limit: Option<u64>,
    /// I/Os to issue at most (`number_ios` times `loops`).
    ios_limit: Option<u64>,
    bytes_issued: u64,
    ios_issued: u64,
    /// Bytes and I/Os completed per direction (fio's `this_io_bytes`, `this_io_blocks`).
    done_bytes: [u64; 3],
    done_ios: [u64; 3],
    rate_bytes: [u64; 3],
    rate_ios: [u64; 3],
    /// I/Os issued under `flow` (fio's `td->flow_counter`).
    pub flow_issued: u64,
    /// The wake asked for, if any.
    pub wake_at: Option<Nanos>,
    /// Thinking until then.
    pub thinking_until: Option<Nanos>,
    /// How long to pause once quiesced: `thinktime`, `flow_sleep`, or 0 (a depth change).
    pause_after_quiesce: Nanos,
    /// When the job last issued an I/O or sync, and when one last completed.
    last_issue: Nanos,
    last_completion: Nanos,
    /// The next I/O, drawn but held back by a rate limit.
    staged: Option<NextIo>,
    /// The replayed sync drawn and waiting for its time (the job's file index).
    staged_sync: Option<usize>,
    /// When the staged replayed I/O or sync may go.
    replay_not_before: Nanos,
    /// The `latency_target` search, if the job has one.
    latency: Option<Box<LatencySearch>>,
    /// Its zones under `zonemode=zbd` (set by the engine after [`JobState::new`]).
    pub zbd: Option<Box<JobZbd>>,
    /// The trace it replays instead of drawing I/O (`read_iolog`; set by the engine after
    /// [`JobState::new`], once it knows where the job's files lie).
    pub replay: Option<Box<Replay>>,
    /// When it started.
    pub started_at: Nanos,
    /// When it is to start, once known.
    pub start_at: Option<Nanos>,
    /// Draws which I/Os take the `cmdprio` priority (fio's `prio_state`).
    cmdprio_rng: Rng,
    /// `rate_process=poisson`: when each direction's next I/O may go, since the start (fio's
    /// `last_usec`), and the gaps' draws (`poisson_state`).
    poisson_next: [Nanos; 3],
    poisson_rng: Rng,
    /// The last `rate_min` sample per direction: when, bytes and I/Os done then (fio's
    /// `lastrate`, `rate_bytes`, `rate_blocks`).
    min_rate_mark: [Option<(Nanos, u64, u64)>; 3],
    /// Steady-state detection (`steadystate`): the tracker, kept by the first job of the
    /// unit judged (the job, or its group under `group_reporting`), and the I/Os and bytes
    /// this job had completed at the last sample.
    pub steady: Option<SteadyTracker>,
    steady_counted: (u64, u64),
    /// The first job after it with `stonewall`, the next phase's first (set by
    /// [`start_all`]; until then, looked for).
    next_wall: NextWall,
    /// Another job waits for this one's name (`wait_for`), so its end may start that one
    /// (set by [`start_all`]; until then, assumed).
    waited_on: bool,
    /// Draws its I/O.
    pub generator: Generator,
    /// What it measured.
    pub result: JobResult,
    /// The job as the job file describes it (its priority as its group sets it).
    pub spec: JobSpec,
}

/// Which of a job's options the path of each of its I/Os must look at, worked out once from
/// its spec: a few bytes beside the job's counters instead of fields spread over the spec's
/// many cache lines (with 1024 jobs, a job's state has left the cache by its next I/O, and
/// each field read was a miss).
#[derive(Clone, Copy, Debug, Default)]
struct Uses {
    /// `ioengine` is asynchronous (slat is its own).
    async_engine: bool,
    /// `flow`.
    flow: bool,
    /// `thinktime`.
    thinktime: bool,
    /// `rate` or `rate_iops` in some direction.
    rate: bool,
    /// `rate_process=poisson`.
    rate_poisson: bool,
    /// `rate_min` or `rate_iops_min` in some direction.
    rate_min: bool,
    /// `fsync` (every N writes).
    fsync_every: bool,
    /// `sync_file_range`.
    sync_file_range: bool,
    /// `steadystate`.
    steadystate: bool,
    /// `cmdprio_percentage` or `cmdprio_bssplit` in some direction.
    cmdprio: bool,
}

impl Uses {
    fn of(spec: &JobSpec) -> Uses {
        Uses {
            async_engine: spec.engine.is_async(),
            flow: spec.flow.is_some(),
            thinktime: spec.thinktime > 0,
            rate: spec.rate.iter().chain(&spec.rate_iops).any(|&r| r > 0),
            rate_poisson: spec.rate_poisson,
            rate_min: spec
                .rate_min
                .iter()
                .chain(&spec.rate_iops_min)
                .any(|&r| r > 0),
            fsync_every: spec.fsync_every > 0,
            sync_file_range: spec.sync_file_range.is_some(),
            steadystate: spec.steadystate.is_some(),
            cmdprio: spec.cmdprio.iter().any(Option::is_some),
        }
    }
}

impl JobState {
    /// Job `index` of a run seeded `seed`, drawing its I/O from `generator`; `region_bytes` is
    /// the size of its files (what it covers per loop unless `io_size` says otherwise).
    pub fn new(
        spec: JobSpec,
        index: usize,
        seed: u64,
        generator: Generator,
        region_bytes: u64,
    ) -> JobState {
        // A replay ends with its trace (fio adds up the log's lengths as the job's size).
        let bytes_limit = if spec.time_based || spec.replay.is_some() {
            None
        } else {
            Some(
                spec.io_size
                    .unwrap_or(region_bytes.saturating_mul(u64::from(spec.loops.max(1)))),
            )
        };
        let ios_limit = spec
            .number_ios
            .map(|count| count.saturating_mul(u64::from(spec.loops.max(1))));
        let full_depth = if spec.engine.is_async() {
            spec.iodepth.max(1)
        } else {
            1
        };
        let latency = spec
            .latency_target
            .map(|target| Box::new(LatencySearch::new(target, full_depth)));
        // fio's lat_target_init: the search starts at depth 1.
        let depth = if latency.is_some() { 1 } else { full_depth };
        let result = JobResult::for_job(&spec, index as u32 + 1);
        JobState {
            uses: Uses::of(&spec),
            prio: spec.prio,
            spec,
            phase: Phase::Pending,
            depth,
            generator,
            staged: None,
            in_flight: 0,
            start_at: None,
            waiting: false,
            waited_on: true,
            next_wall: NextWall::Unknown,
            terminated: false,
            steady: None,
            steady_counted: (0, 0),
            started_at: 0,
            measure_start: 0,
            deadline: None,
            bytes_limit,
            ios_limit,
            bytes_issued: 0,
            ios_issued: 0,
            done_bytes: [0; 3],
            done_ios: [0; 3],
            min_rate_mark: [None; 3],
            flow_issued: 0,
            flow_blocked: false,
            latency,
            rate_bytes: [0; 3],
            rate_ios: [0; 3],
            wake_at: None,
            quiescing: false,
            pause_after_quiesce: 0,
            thinking_until: None,
            writes_since_flush: 0,
            writes_since_range: 0,
            end_fsync_issued: false,
            cmdprio_rng: Rng::new(derive_seed(seed, CMDPRIO_STREAM_BASE + index as u64)),
            poisson_next: [0; 3],
            poisson_rng: Rng::new(derive_seed(seed, POISSON_STREAM_BASE + index as u64)),
            zbd: None,
            replay: None,
            staged_sync: None,
            replay_not_before: 0,
            last_issue: 0,
            last_completion: 0,
            result,
        }
    }

    /// The priority of the next I/O of `bytes` in `dir`: the job's, or for the shares
    /// `cmdprio_percentage` or `cmdprio_bssplit` give, theirs (cmdprio.c: one
    /// `rand_between(0, 99)` per I/O whose size has shares).
    fn io_prio(&mut self, dir: DataDir, bytes: u64) -> IoPrio {
        if !self.uses.cmdprio {
            return self.prio;
        }
        let cmdprio = match dir {
            DataDir::Read => self.spec.cmdprio[0].as_ref(),
            DataDir::Write => self.spec.cmdprio[1].as_ref(),
            DataDir::Trim => None,
        };
        match cmdprio {
            Some(cmdprio) if cmdprio.applies_to(bytes) => cmdprio
                .pick(bytes, self.cmdprio_rng.below(100))
                .unwrap_or(self.prio),
            _ => self.prio,
        }
    }

    /// Issues nothing more: what is in flight completes (a runtime's end, an error, a signal).
    pub fn stop_issuing(&mut self) {
        self.phase = Phase::Draining;
        self.staged = None;
        self.quiescing = false;
        self.thinking_until = None;
    }

    /// Bytes it is to issue, unless time-based.
    pub fn bytes_limit(&self) -> Option<u64> {
        self.bytes_limit
    }

    /// Bytes it has issued.
    pub fn bytes_issued(&self) -> u64 {
        self.bytes_issued
    }

    /// Issues nothing more, as at the end of its runtime: what is in flight completes.
    pub fn drain(&mut self) {
        self.phase = Phase::Draining;
        self.staged = None;
    }

    /// An I/O of `dir` failed with `errno` (it is not recorded): a non-fatal error
    /// (`continue_on_error`, `ignore_error`) is counted and the job goes on; any other is the
    /// job's error and it issues nothing more, as fio's `io_completed`. Returns whether the
    /// job goes on.
    pub fn io_failed(&mut self, dir: DataDir, errno: i32) -> bool {
        let kind = crate::ErrorKind::of(dir, errno);
        if self.spec.errors.non_fatal(kind, errno) {
            self.result.total_err += 1;
            if self.result.first_error == 0 {
                self.result.first_error = errno;
            }
            return true;
        }
        if self.result.error == 0 {
            self.result.error = errno;
        }
        if matches!(self.phase, Phase::Running | Phase::Verifying) {
            self.drain();
        }
        false
    }

    /// Counts a completion (the caller records its latency with [`JobState::record`]).
    fn completed(&mut self) {
        debug_assert!(self.in_flight > 0, "a completion of nothing in flight");
        self.in_flight -= 1;
    }

    /// Records a completed I/O at `at`, as fio does: every I/O issued is counted, also one
    /// that completes after the runtime ended (fio waits for what is in flight and counts it;
    /// a stalled device must show as a long latency, not vanish from the statistics); only
    /// the ramp is left out. Returns whether it was counted.
    pub fn record(&mut self, io: &Issued, at: Nanos) -> bool {
        if !io.flush {
            self.done_bytes[io.dir as usize] += io.bytes;
            self.done_ios[io.dir as usize] += 1;
            if let Some(search) = &mut self.latency {
                search.completed(at - io.created);
            }
        }
        if at < self.measure_start {
            return false;
        }
        if io.flush {
            self.result.sync.record(at - io.created);
        } else {
            let (slat, clat) = if self.uses.async_engine {
                (Some(io.admitted - io.created), at - io.admitted)
            } else {
                (None, at - io.created)
            };
            // Waiting when the runtime ended: counted apart, so that a starved job shows.
            if let Some(end) = self.deadline.filter(|&end| io.created < end && at > end) {
                self.result.dirs[io.dir as usize].count_queued_at_end(end - io.created);
            }
            self.result.record_io(
                io.dir,
                io.bytes,
                io.offset,
                io.prio,
                slat,
                clat,
                at - self.measure_start,
            );
        }
        true
    }

    /// Asks the CPU for the parts of this job's state that recording `io`'s completion at
    /// `at` ([`JobState::record`]) and issuing the job's next I/O will read: a hint for a
    /// caller that knows of the completion before it records it (see [`crate::prefetch`]).
    /// Changes nothing.
    #[inline]
    pub fn prefetch(&self, io: &Issued, at: Nanos) {
        prefetch(&self.measure_start);
        prefetch(&self.ios_issued);
        prefetch(&self.last_issue);
        prefetch(&self.done_bytes[io.dir as usize]);
        prefetch(&self.rate_bytes[io.dir as usize]);
        prefetch(&self.uses);
        prefetch(&self.thinking_until);
        prefetch(&self.latency);
        prefetch(&self.staged);
        self.generator.prefetch();
        let clat = if self.uses.async_engine {
            at.saturating_sub(io.admitted)
        } else {
            at.saturating_sub(io.created)
        };
        self.result.prefetch(io.dir, clat);
    }

    /// Asks for a wake at `at`; returns whether it is earlier than the one already asked for
    /// (and so must be set).
    fn ask_wake(&mut self, at: Nanos) -> bool {
        if self.wake_at.is_some_and(|t| t <= at) {
            return false;
        }
        self.wake_at = Some(at);
        true
    }

    /// Counts `io` as issued at `now`.
    fn issued(&mut self, io: &NextIo, now: Nanos) {
        self.in_flight += 1;
        self.last_issue = now;
        if let Some(log) = &self.result.iolog {
            let op = match io.dir {
                DataDir::Read => TraceOp::Read,
                DataDir::Write => TraceOp::Write,
                DataDir::Trim => TraceOp::Trim,
            };
            log.issue(now, io.file, op, io.offset, io.len);
        }
        self.ios_issued += 1;
        self.bytes_issued += io.len;
        self.rate_bytes[io.dir as usize] += io.len;
        self.rate_ios[io.dir as usize] += 1;
        if io.dir == DataDir::Write {
            self.writes_since_flush += 1;
            self.writes_since_range += 1;
        }
        if now >= self.measure_start {
            self.result.iodepth_levels[iodepth_bucket(self.in_flight)] += 1;
        }
        if self.uses.flow {
            self.flow_issued += 1;
        }
        if self.uses.thinktime
            && self
                .ios_issued
                .is_multiple_of(u64::from(self.spec.thinktime_blocks.max(1)))
        {
            self.quiesce(self.spec.thinktime);
        }
    }

    /// The gap before direction `dir`'s next I/O under `rate_process=poisson`: exponential
    /// with the mean of one I/O at the rate (`-ln(U) / iops`).
    fn draw_poisson_gap(&mut self, dir: usize) {
        let min_bs = self.spec.bs[dir].min().max(1);
        let iops = if self.spec.rate[dir] > 0 {
            self.spec.rate[dir] as f64 / min_bs as f64
        } else {
            self.spec.rate_iops[dir] as f64
        };
        if iops <= 0.0 {
            return;
        }
        let uniform = 1.0 - self.poisson_rng.unit(); // in (0, 1]
        let gap = -uniform.ln() / iops * SECOND as f64;
        self.poisson_next[dir] = self.poisson_next[dir].saturating_add(gap as Nanos);
    }

    /// Waits for what is in flight to complete (fio's `io_u_quiesce`), then pauses `pause`.
    fn quiesce(&mut self, pause: Nanos) {
        self.quiescing = true;
        self.pause_after_quiesce = pause;
    }

    /// fio's `check_min_rate` at a completion at `now`: after a two-second settling period,
    /// each direction with a `rate_min` or `rate_iops_min` that the job has done I/O in must
    /// have done at least that much over every `rate_cycle`. Returns the message of the first shortfall.
    fn check_min_rate(&mut self, now: Nanos) -> Option<String> {
        if !self.uses.rate_min || now.saturating_sub(self.started_at) < 2 * SECOND {
            return None;
        }
        for dir in 0..3 {
            let (bytes_min, iops_min) = (self.spec.rate_min[dir], self.spec.rate_iops_min[dir]);
            // fio checks only the directions the job has done I/O in (`check_min_rate`).
            if (bytes_min == 0 && iops_min == 0) || self.done_bytes[dir] == 0 {
                continue;
            }
            let (bytes, ios) = (self.done_bytes[dir], self.done_ios[dir]);
            if let Some((since, bytes_then, ios_then)) = self.min_rate_mark[dir] {
                let spent = now - since;
                if spent < self.spec.rate_cycle {
                    continue;
                }
                let per_second = |done: u64| {
                    u64::try_from(u128::from(done) * u128::from(SECOND) / u128::from(spent))
                        .unwrap_or(u64::MAX)
                };
                let name = &self.spec.name;
                if bytes_min > 0 {
                    let rate = per_second(bytes - bytes_then);
                    if rate < bytes_min {
                        return Some(format!(
                            "{name}: rate_min={bytes_min}B/s not met, got {rate}B/s"
                        ));
                    }
                } else {
                    let rate = per_second(ios - ios_then);
                    if rate < iops_min {
                        return Some(format!(
                            "{name}: rate_iops_min={iops_min} not met, got {rate} IOPS"
                        ));
                    }
                }
            }
            self.min_rate_mark[dir] = Some((now, bytes, ios));
        }
        None
    }

    /// How much of its work the job has done at `now`, 0 to 1, as fio's ETA reckons it: all
    /// when done, none before it starts; while it runs, the larger of the time share of its
    /// ramp and runtime and the byte share of what it is to issue.
    pub fn done_fraction(&self, now: Nanos) -> f64 {
        match self.phase {
            Phase::Done => 1.0,
            Phase::Pending => 0.0,
            _ => {
                let by_time = self.spec.runtime.map_or(0.0, |runtime| {
                    let whole = self.spec.ramp_time.saturating_add(runtime).max(1);
                    now.saturating_sub(self.started_at) as f64 / whole as f64
                });
                let by_bytes = self
                    .bytes_limit
                    .map_or(0.0, |limit| self.bytes_issued as f64 / limit.max(1) as f64);
                let by_count = self
                    .ios_limit
                    .map_or(0.0, |limit| self.ios_issued as f64 / limit.max(1) as f64);
                let by_trace = self
                    .replay
                    .as_deref()
                    .and_then(Replay::done_fraction)
                    .unwrap_or(0.0);
                by_time.max(by_bytes).max(by_count).max(by_trace).min(1.0)
            }
        }
    }

    /// The job's queue depth now: `iodepth`, or where the `latency_target` search is.
    pub fn current_depth(&self) -> u32 {
        self.depth
    }

    /// After a completion at `now`: the `latency_target` search judges its window, and the
    /// job takes the depth it chose (quiescing first when it went down, restarting its
    /// statistics when the final window begins).
    fn adjust_depth(&mut self, now: Nanos) {
        let Some(search) = &mut self.latency else {
            return;
        };
        search.check(now);
        let depth = search.qd.max(1);
        let ramped_down = std::mem::take(&mut search.ramped_down);
        if ramped_down {
            search.new_window(now);
        }
        let reset = std::mem::take(&mut search.reset_stats);
        self.depth = depth;
        if ramped_down || reset {
            self.quiesce(0);
        }
        if reset {
            self.measure_start = now;
            self.result.reset_stats(now);
        }
    }

    /// The job has nothing more to issue: it drains what is in flight, or is done.
    fn drain_step(&mut self) -> Step {
        self.phase = Phase::Draining;
        if self.in_flight == 0 {
            Step::Drained
        } else {
            Step::Wait(None)
        }
    }

    /// A replaying job's next record, drawn when nothing is staged: a sync it issues (or waits
    /// for), the end of the trace, an error in it, or `None` with the I/O staged and its time
    /// set for the rate checks that follow.
    fn replay_step(&mut self, now: Nanos) -> Option<Step> {
        if self.staged.is_none() && self.staged_sync.is_none() {
            let replay = self.replay.as_mut()?;
            match replay.next_step() {
                Err(error) => {
                    return Some(Step::Fail(
                        EINVAL,
                        format!("{}: read_iolog: {error}", self.spec.name),
                    ))
                }
                Ok(None) => return Some(self.drain_step()),
                Ok(Some(step)) => {
                    self.replay_not_before = match step.pace {
                        Pace::AfterIssue(gap) => self.last_issue.saturating_add(gap),
                        Pace::AfterStart(at) => self.started_at.saturating_add(at),
                        Pace::AfterCompletion(gap) => self
                            .last_completion
                            .max(self.started_at)
                            .saturating_add(gap),
                    };
                    match step.op {
                        ReplayOp::Io(io) => self.staged = Some(io),
                        ReplayOp::Sync(file) => self.staged_sync = Some(file),
                    }
                }
            }
        }
        let file = self.staged_sync?;
        if self.replay_not_before > now {
            return Some(Step::Wait(Some(self.replay_not_before)));
        }
        self.staged_sync = None;
        self.last_issue = now;
        if let Some(log) = &self.result.iolog {
            log.issue(now, file, TraceOp::Sync, 0, 0);
        }
        Some(Step::Flush(SyncKind::Every))
    }

    /// What the job does next at `now`; `flow_ok` says whether its flow lets it issue
    /// (fio's `flow_threshold_exceeded`).
    fn next(&mut self, now: Nanos, flow_ok: bool) -> Step {
        if self.phase != Phase::Running {
            return Step::Wait(None);
        }
        if self.quiescing {
            if self.in_flight > 0 {
                return Step::Wait(None);
            }
            self.quiescing = false;
            if self.pause_after_quiesce > 0 {
                let until = now + self.pause_after_quiesce;
                self.thinking_until = Some(until);
                return Step::Wait(Some(until));
            }
        }
        if let Some(until) = self.thinking_until {
            if now < until {
                return Step::Wait(None);
            }
            self.thinking_until = None;
        }
        if self.in_flight >= self.depth {
            return Step::Wait(None);
        }
        let limit_reached = self
            .bytes_limit
            .is_some_and(|limit| self.bytes_issued >= limit)
            || self.ios_limit.is_some_and(|limit| self.ios_issued >= limit)
            || self.latency.as_ref().is_some_and(|search| search.done);
        if limit_reached && self.staged.is_none() {
            return self.drain_step();
        }
        // fio decides on a sync as it gets the next I/O (get_io_u): none after the last write
        // of a job that has no more to do (end_fsync is for that).
        if self.uses.fsync_every && self.writes_since_flush >= self.spec.fsync_every {
            self.writes_since_flush = 0;
            return Step::Flush(SyncKind::Every);
        }
        if self.uses.sync_file_range {
            if let Some(range) = self.spec.sync_file_range {
                if self.writes_since_range >= range.every {
                    self.writes_since_range = 0;
                    return Step::Flush(SyncKind::Range(range.flags));
                }
            }
        }
        if !flow_ok {
            let sleep = self.spec.flow.map_or(0, |flow| flow.sleep);
            if sleep > 0 {
                if self.in_flight == 0 {
                    let until = now + sleep;
                    self.thinking_until = Some(until);
                    return Step::Wait(Some(until));
                }
                self.quiesce(sleep);
                return Step::Wait(None);
            }
            self.flow_blocked = true;
            return Step::Wait(None);
        }
        if self.replay.is_some() {
            if let Some(step) = self.replay_step(now) {
                return step;
            }
        }
        if self.staged.is_none() {
            if let Some(zbd) = &self.zbd {
                // fio's setup_zbd_zone_mode: a sequential writer at a zone's capacity goes
                // on at the next zone.
                let file = self.generator.next_file();
                let at = self.generator.sequential_position(file, DataDir::Write);
                if let Some(to) = zbd.skip_capacity_gap(file, at) {
                    self.generator
                        .set_sequential_position(file, DataDir::Write, to);
                }
            }
        }
        let mut io = *self.staged.get_or_insert_with(|| self.generator.next_io());
        let dir = io.dir as usize;
        let mut allowed = now.max(self.replay_not_before);
        // fio's linear rate process: the n-th byte (or I/O) may go at start + n / rate.
        // In u128 and saturating: a count of I/Os times a second passes u64 after 1.8e10
        // I/Os, and a time past u64 is past any limit anyway.
        let since_start = |done: u64, rate: u64| {
            (u128::from(done) * u128::from(SECOND))
                .checked_div(u128::from(rate))
                .map(|since| u64::try_from(since).unwrap_or(u64::MAX))
        };
        if !self.uses.rate {
            // No rate: the I/O may go now.
        } else if self.spec.rate_poisson {
            // fio's usec_for_io: the rate as I/Os of the smallest block size, and each I/O
            // an exponential gap after the previous one's turn.
            let min_bs = self.spec.bs[dir].min().max(1);
            let iops = if self.spec.rate[dir] > 0 {
                self.spec.rate[dir] as f64 / min_bs as f64
            } else {
                self.spec.rate_iops[dir] as f64
            };
            if iops > 0.0 {
                allowed = allowed.max(self.started_at.saturating_add(self.poisson_next[dir]));
            }
        } else {
            if let Some(since) = since_start(self.rate_bytes[dir], self.spec.rate[dir]) {
                allowed = allowed.max(self.started_at.saturating_add(since));
            }
            if let Some(since) = since_start(self.rate_ios[dir], self.spec.rate_iops[dir]) {
                allowed = allowed.max(self.started_at.saturating_add(since));
            }
        }
        if allowed > now {
            return Step::Wait(Some(allowed));
        }
        if let Some(zbd) = &mut self.zbd {
            let step = zbd.adjust(io, self.in_flight);
            self.result.zone_resets = zbd.resets;
            match step {
                ZbdStep::Issue(moved) => {
                    io = moved;
                    if !self.spec.rw.is_random() {
                        self.generator
                            .set_sequential_position(io.file, io.dir, io.offset + io.len);
                    }
                }
                ZbdStep::Quiesce => {
                    self.quiesce(0);
                    return Step::Wait(None);
                }
                ZbdStep::Busy => return Step::Wait(None),
                ZbdStep::Eof => {
                    self.staged = None;
                    return self.drain_step();
                }
                ZbdStep::Fail(errno, message) => {
                    self.staged = None;
                    let name = zbd.file_name(io.file);
                    return Step::Fail(errno, format!("{}: {name}: {message}", self.spec.name));
                }
            }
        }
        self.staged = None;
        if self.uses.rate_poisson {
            self.draw_poisson_gap(dir);
        }
        let prio = self.io_prio(io.dir, io.len);
        Step::Issue(io, prio)
    }
}

/// fio's `latency_target` search (io_u.c: `lat_target_init`, `lat_target_check`,
/// `lat_target_success`, `__lat_target_failed`): from depth 1, double the depth after each
/// window whose I/Os met the target at the percentile, bisect between the last good and the
/// first bad depth after one that did not; when the depth stops changing, run one more window
/// at it with fresh statistics, then end the job (unless `latency_run`). With a 100th
/// percentile, one late I/O fails the depth at once, and one at depth 1 fails the job.
#[derive(Clone, Debug)]
struct LatencySearch {
    target: crate::LatencyTarget,
    /// The job's `iodepth`, the search's ceiling.
    iodepth: u32,
    qd: u32,
    qd_low: u32,
    qd_high: u32,
    /// When the current window began.
    window_start: Nanos,
    /// I/Os completed and late in the current window.
    ios: u64,
    failed: u64,
    /// Running the last window at the depth found (`latency_end_run`).
    end_run: bool,
    /// The search is over: the job ends (fio's `td->done`).
    done: bool,
    /// A late I/O at depth 1 with a 100th percentile: the job fails (`lat_fatal`).
    fatal: Option<Nanos>,
    /// The depth changed and the job must quiesce before going on.
    ramped_down: bool,
    /// The final window began: statistics restart now.
    reset_stats: bool,
}

impl LatencySearch {
    fn new(target: crate::LatencyTarget, iodepth: u32) -> LatencySearch {
        LatencySearch {
            target,
            iodepth,
            qd: 1,
            qd_low: 1,
            qd_high: iodepth,
            window_start: 0,
            ios: 0,
            failed: 0,
            end_run: false,
            done: false,
            fatal: None,
            ramped_down: false,
            reset_stats: false,
        }
    }

    fn new_window(&mut self, now: Nanos) {
        self.window_start = now;
        self.ios = 0;
        self.failed = 0;
    }

    /// An I/O completed after `latency` (fio's `lat_target_failed` when it is late).
    fn completed(&mut self, latency: Nanos) {
        self.ios += 1;
        if latency <= self.target.target {
            return;
        }
        if self.target.percentile >= 100.0 {
            if self.qd == 1 {
                self.fatal = Some(latency);
            } else {
                self.ramp_down();
                self.ios = 0;
                self.failed = 0;
            }
        } else {
            self.failed += 1;
        }
    }

    /// `__lat_target_failed`: the depth was too deep.
    fn ramp_down(&mut self) {
        if self.qd == 1 {
            return;
        }
        self.qd_high = self.qd;
        if self.qd == self.qd_low {
            self.qd_low -= 1;
        }
        self.qd = (self.qd + self.qd_low) / 2;
        self.ramped_down = true;
    }

    /// `lat_target_check` at `now`: judge the window once it is over.
    fn check(&mut self, now: Nanos) {
        if self.done || now.saturating_sub(self.window_start) < self.target.window {
            return;
        }
        let success = if self.ios == 0 {
            0.0
        } else {
            (self.ios - self.failed) as f64 / self.ios as f64 * 100.0
        };
        if success >= self.target.percentile {
            self.success();
        } else {
            self.ramp_down();
        }
        self.new_window(now);
    }

    /// `lat_target_success`: the depth met the target.
    fn success(&mut self) {
        let before = self.qd;
        self.qd_low = self.qd;
        self.qd = if self.qd_high != self.iodepth {
            (self.qd + self.qd_high) / 2
        } else {
            self.qd.saturating_mul(2)
        }
        .min(self.iodepth);
        if self.qd == before {
            if self.end_run {
                self.done = !self.target.run;
            } else {
                self.end_run = true;
                self.reset_stats = true;
            }
        }
    }
}

/// What a job does next.
enum Step {
    /// Submit this I/O with this priority.
    Issue(NextIo, IoPrio),
    /// Submit a sync (`fsync=`, `sync_file_range=`).
    Flush(SyncKind),
    /// Nothing now; at the given time (a rate limit or think time) it may go on.
    Wait(Option<Nanos>),
    /// It issued all it had to and nothing is in flight: it finishes.
    Drained,
    /// It fails with this errno and message.
    Fail(i32, String),
}

/// Which sync the driver asks of an engine (counted as one flush in the job's statistics,
/// fio's `sync` latencies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncKind {
    /// `fsync=N`/`fdatasync=N`: the file last written, then the device's cache.
    Every,
    /// `end_fsync`: every file of the job.
    End,
    /// `sync_file_range=FLAGS:N`: sync_file_range(2) with these flags
    /// ([`crate::SyncFileRange`]'s bits) over the bytes the job wrote in the file last
    /// written since that file's last sync (fio's `first_write`/`last_write`); no cache flush.
    Range(u32),
}

/// What every engine records of an I/O it submitted, for the driver to count it.
#[derive(Clone, Copy, Debug)]
pub struct Issued {
    /// The job's index.
    pub job: usize,
    /// Its direction (a flush counts as a write).
    pub dir: DataDir,
    /// Whether it is a flush.
    pub flush: bool,
    /// Its length.
    pub bytes: u64,
    /// Its offset, as the job addresses it.
    pub offset: u64,
    /// The index of its file among the job's.
    pub file: usize,
    /// Its priority.
    pub prio: IoPrio,
    /// When the job issued it.
    pub created: Nanos,
    /// When the scheduler took it (after waiting for room in the queue).
    pub admitted: Nanos,
}

impl Issued {
    /// A flush of job `index` at `now` with `prio`.
    pub fn flush(job: usize, prio: IoPrio, now: Nanos) -> Issued {
        Issued {
            job,
            dir: DataDir::Write,
            flush: true,
            bytes: 0,
            offset: 0,
            file: 0,
            prio,
            created: now,
            admitted: now,
        }
    }

    /// I/O `io` of job `index` at `now` with `prio`.
    pub fn io(job: usize, io: &NextIo, prio: IoPrio, now: Nanos) -> Issued {
        Issued {
            job,
            dir: io.dir,
            flush: false,
            bytes: io.len,
            offset: io.offset,
            file: io.file,
            prio,
            created: now,
            admitted: now,
        }
    }
}

/// What an engine does for the driver: submit, flush, and call back.
pub trait Engine {
    /// Every job's state, in job file order.
    fn jobs(&mut self) -> &mut [JobState];
    /// The seed start delays derive from.
    fn seed(&self) -> u64;
    /// Submits `io` of job `index` with priority `prio` at `now` (the driver has counted it in
    /// flight).
    fn issue(&mut self, index: usize, io: NextIo, prio: IoPrio, now: Nanos);
    /// Submits the sync(s) of job `index` at `now` of `kind`: after `fsync=` or
    /// `sync_file_range=` writes, or at its end (`end_fsync`); the driver counts each the
    /// engine reports as one in flight.
    fn flush(&mut self, index: usize, now: Nanos, kind: SyncKind) -> u32;
    /// Calls the driver back at `at` (the simulator as an event; the real engine polls the
    /// state's times and may ignore this).
    fn timer(&mut self, at: Nanos, timer: Timer);
    /// Whether job `index` may still begin its end (`end_fsync`, a last phase): not after an
    /// error or a stop signal.
    fn may_go_on(&self, index: usize) -> bool {
        let _ = index;
        true
    }
    /// Before job `index` is done: the engine may begin a last phase of its own (the real
    /// engine's verify read-back), setting [`Phase::Verifying`] and returning true; it calls
    /// [`finish`] again when that phase ends.
    fn finishing(&mut self, index: usize, now: Nanos) -> bool {
        let _ = (index, now);
        false
    }
    /// Issues what job `index` may issue in the engine's own last phase.
    fn pump_own(&mut self, index: usize, now: Nanos) {
        let _ = (index, now);
    }
}

/// What a job in an engine's read-back phase ([`Phase::Verifying`]) does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadBack {
    /// Not reading back, or waiting for room in its depth or for its last reads.
    Wait,
    /// Everything read back and completed: the engine calls [`finish`].
    Finished,
    /// Issue the next read (it is already counted in flight).
    Issue,
}

/// The next step of `job`'s read-back when `left` reads remain to issue: both engines' verify
/// phase pumps with it.
pub fn read_back_step(job: &mut JobState, left: bool) -> ReadBack {
    if job.phase != Phase::Verifying {
        return ReadBack::Wait;
    }
    if !left {
        return if job.in_flight == 0 {
            ReadBack::Finished
        } else {
            ReadBack::Wait
        };
    }
    if job.in_flight >= job.depth {
        return ReadBack::Wait;
    }
    job.in_flight += 1;
    ReadBack::Issue
}

/// Whether every job before the last stonewall at or before `index` is done.
pub fn barrier_open(jobs: &[JobState], index: usize) -> bool {
    let wall = (1..=index)
        .rev()
        .find(|&i| jobs[i].spec.stonewall)
        .unwrap_or(0);
    jobs[..wall].iter().all(|j| j.phase == Phase::Done)
}

/// Job `index`'s start delay: `startdelay`, or a draw in its range from the run's seed.
pub fn start_delay(seed: u64, job: &JobSpec, index: usize) -> Nanos {
    let (low, high) = job.startdelay;
    if high <= low {
        return low;
    }
    let mut rng = Rng::new(derive_seed(seed, STARTDELAY_STREAM_BASE + index as u64));
    low + rng.below(high - low + 1)
}

/// Sets the start of job `index` at `now` plus its delay.
fn schedule_start<E: Engine + ?Sized>(engine: &mut E, index: usize, now: Nanos) {
    let seed = engine.seed();
    let job = &mut engine.jobs()[index];
    let at = now + start_delay(seed, &job.spec, index);
    job.start_at = Some(at);
    engine.timer(at, Timer::Start(index));
}

/// Where the next phase of a job file begins after a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NextWall {
    /// Not worked out: look.
    Unknown,
    /// At the job of this index, which has `stonewall`.
    At(usize),
    /// No later job has `stonewall`.
    None,
}

/// The first job after `index` with `stonewall`.
fn next_wall(jobs: &[JobState], index: usize) -> Option<usize> {
    match jobs[index].next_wall {
        NextWall::At(wall) => Some(wall),
        NextWall::None => None,
        NextWall::Unknown => (index + 1..jobs.len()).find(|&i| jobs[i].spec.stonewall),
    }
}

/// Sets the start of every job of the first phase (before the first stonewall), having
/// worked out once which jobs others wait for and where each phase begins, so that a job's
/// end looks at the jobs it may start rather than at every job (with 1024 jobs, two scans
/// of every job at each job's end were a tenth of a run's cache misses).
pub fn start_all<E: Engine + ?Sized>(engine: &mut E, now: Nanos) {
    let jobs = engine.jobs();
    let waited: std::collections::HashSet<String> = jobs
        .iter()
        .filter_map(|job| job.spec.wait_for.clone())
        .collect();
    let mut wall = NextWall::None;
    for (index, job) in jobs.iter_mut().enumerate().rev() {
        job.waited_on = waited.contains(&job.spec.name);
        job.next_wall = wall;
        if job.spec.stonewall {
            wall = NextWall::At(index);
        }
    }
    // barrier_open for each job in one pass: the jobs before the last wall at or before it
    // (the first job's own stonewall counting for nothing) must all be done.
    let mut done_so_far = true;
    let mut open = true;
    for index in 0..engine.jobs().len() {
        let jobs = engine.jobs();
        if index > 0 && jobs[index].spec.stonewall {
            open = done_so_far;
        }
        done_so_far &= jobs[index].phase == Phase::Done;
        if open {
            schedule_start(engine, index, now);
        }
    }
}

/// Whether a job named `name` has not finished (fio's `waitee_running`: every job of that
/// name, clones included, must have exited).
fn waitee_running(jobs: &[JobState], name: &str) -> bool {
    jobs.iter()
        .any(|job| job.spec.name == name && job.phase != Phase::Done)
}

/// Job `index` starts at `now`: its ramp and runtime begin, and it issues what it may. A job
/// that waits for another (`wait_for`) still running waits on: fio's `run_threads` skips it
/// until `waitee_running` is false, its start delay counting from the run's start.
pub fn start<E: Engine + ?Sized>(engine: &mut E, index: usize, now: Nanos) {
    let jobs = engine.jobs();
    if jobs[index].phase != Phase::Pending {
        return;
    }
    if let Some(waitee) = &jobs[index].spec.wait_for {
        if waitee_running(jobs, waitee) {
            jobs[index].waiting = true;
            return;
        }
    }
    let job = &mut jobs[index];
    job.waiting = false;
    job.phase = Phase::Running;
    job.start_at = None;
    job.started_at = now;
    job.measure_start = now + job.spec.ramp_time;
    job.result.measure_start = job.measure_start;
    job.deadline = job.spec.runtime.map(|runtime| job.measure_start + runtime);
    if let Some(search) = &mut job.latency {
        search.new_window(now);
    }
    if let Some(zbd) = &mut job.zbd {
        zbd.start();
        job.result.zone_resets = zbd.resets;
    }
    if let Some(log) = &job.result.iolog {
        log.start(now);
    }
    if let Some(deadline) = job.deadline {
        engine.timer(deadline, Timer::Deadline(index));
    }
    pump(engine, index, now);
}

/// Job `index`'s runtime ends at `now`: it issues nothing more, and finishes when what is in
/// flight completes.
pub fn deadline<E: Engine + ?Sized>(engine: &mut E, index: usize, now: Nanos) {
    let job = &mut engine.jobs()[index];
    if job.phase != Phase::Running {
        return;
    }
    job.drain();
    if job.in_flight == 0 {
        finish(engine, index, now);
    }
}

/// The wake job `index` asked for at `now` has come: it issues what it may. A wake that a
/// later one replaced is ignored.
pub fn wake<E: Engine + ?Sized>(engine: &mut E, index: usize, now: Nanos) {
    let job = &mut engine.jobs()[index];
    if job.wake_at == Some(now) {
        job.wake_at = None;
        pump(engine, index, now);
    }
}

/// Whether job `index` may issue under its `flow` (fio's `flow_threshold_exceeded`): its
/// share of the I/Os its flow's running jobs have issued may not pass its share of their
/// weights. A job leaves the count when it is done (fio's `flow_exit_job`).
fn flow_allows(jobs: &[JobState], index: usize) -> bool {
    if !jobs[index].uses.flow {
        return true;
    }
    let Some(flow) = jobs[index].spec.flow else {
        return true;
    };
    let (mut issued, mut weight) = (0u64, 0u64);
    for job in jobs {
        let Some(other) = job.spec.flow else { continue };
        if other.id == flow.id && matches!(job.phase, Phase::Running | Phase::Draining) {
            issued += job.flow_issued;
            weight += u64::from(other.weight);
        }
    }
    if issued == 0 || weight == 0 {
        return true;
    }
    // flow_counter / issued <= weight / total, in integers.
    u128::from(jobs[index].flow_issued) * u128::from(weight)
        <= u128::from(flow.weight) * u128::from(issued)
}

/// Issues as much I/O as job `index` may issue at `now`; then, when it has a flow, lets the
/// jobs of its flow that were held back go on as far as the flow now allows.
pub fn pump<E: Engine + ?Sized>(engine: &mut E, index: usize, now: Nanos) {
    pump_one(engine, index, now);
    let job = &engine.jobs()[index];
    if !job.uses.flow {
        return;
    }
    let Some(flow) = job.spec.flow else {
        return;
    };
    loop {
        let jobs = engine.jobs();
        let waiting = (0..jobs.len()).find(|&other| {
            jobs[other].flow_blocked
                && jobs[other].spec.flow.is_some_and(|f| f.id == flow.id)
                && flow_allows(jobs, other)
        });
        let Some(other) = waiting else { return };
        engine.jobs()[other].flow_blocked = false;
        pump_one(engine, other, now);
    }
}

fn pump_one<E: Engine + ?Sized>(engine: &mut E, index: usize, now: Nanos) {
    if engine.jobs()[index].phase == Phase::Verifying {
        engine.pump_own(index, now);
        return;
    }
    loop {
        let flow_ok = flow_allows(engine.jobs(), index);
        let job = &mut engine.jobs()[index];
        job.flow_blocked = false;
        match job.next(now, flow_ok) {
            Step::Issue(io, prio) => {
                job.issued(&io, now);
                engine.issue(index, io, prio, now);
            }
            Step::Flush(kind) => {
                let flushes = engine.flush(index, now, kind);
                engine.jobs()[index].in_flight += flushes;
            }
            Step::Wait(None) => return,
            Step::Wait(Some(at)) => {
                if engine.jobs()[index].ask_wake(at) {
                    engine.timer(at, Timer::Wake(index));
                }
                return;
            }
            Step::Drained => {
                finish(engine, index, now);
                return;
            }
            Step::Fail(errno, message) => {
                fail(engine, index, errno, message, now);
                return;
            }
        }
    }
}

/// An I/O or flush of job `index` completed at `at` (the engine has recorded it, or not, with
/// [`JobState::record`]): the job issues more, or finishes when it was draining.
pub fn completed<E: Engine + ?Sized>(engine: &mut E, io: &Issued, at: Nanos) {
    let index = io.job;
    let job = &mut engine.jobs()[index];
    job.completed();
    job.last_completion = at;
    // zbd_put_io: the zone is free for others once none of the job's I/O is in it (the
    // read-back of a verifying job never held one).
    let mut woken = Vec::new();
    if let Some(zbd) = job.zbd.as_mut().filter(|_| !io.flush) {
        if job.phase != Phase::Verifying {
            woken = zbd.completed(io.dir, io.file, io.offset, io.bytes);
        }
    }
    for other in woken {
        if other != index && engine.jobs()[other].phase == Phase::Running {
            pump_one(engine, other, at);
        }
    }
    let job = &mut engine.jobs()[index];
    if job.uses.steadystate && steady_check(engine, index, at) {
        return;
    }
    let job = &mut engine.jobs()[index];
    if job.phase == Phase::Running {
        if let Some(message) = job.check_min_rate(at) {
            fail(engine, index, libc_eio(), message, at);
            return;
        }
        if let Some(latency) = job.latency.as_mut().and_then(|search| search.fatal.take()) {
            let target = job.spec.latency_target.map_or(0, |t| t.target);
            let message = format!(
                "{}: latency of {latency} nsec exceeds specified max ({target} nsec)",
                job.spec.name
            );
            fail(engine, index, ETIMEDOUT, message, at);
            return;
        }
        job.adjust_depth(at);
    }
    let job = &mut engine.jobs()[index];
    match job.phase {
        Phase::Running | Phase::Verifying => pump(engine, index, at),
        Phase::Draining if job.in_flight == 0 => finish(engine, index, at),
        _ => {}
    }
}

/// Job `index` has nothing in flight and nothing more to issue, at `now`: its `end_fsync`,
/// the engine's last phase, or its end; a job's end may open the next stonewall.
pub fn finish<E: Engine + ?Sized>(engine: &mut E, index: usize, now: Nanos) {
    debug_assert_eq!(engine.jobs()[index].in_flight, 0);
    let go_on = engine.may_go_on(index);
    let job = &mut engine.jobs()[index];
    if job.spec.end_fsync && !job.end_fsync_issued && go_on {
        job.end_fsync_issued = true;
        job.phase = Phase::Draining;
        let flushes = engine.flush(index, now, SyncKind::End);
        engine.jobs()[index].in_flight += flushes;
        return;
    }
    if go_on && !engine.jobs()[index].terminated && engine.finishing(index, now) {
        return;
    }
    if engine.jobs()[index].spec.steadystate.is_some() {
        let unit = steady_unit(engine.jobs(), index);
        let jobs = engine.jobs();
        let tracker = jobs[unit[0]].steady.clone().or_else(|| {
            let spec = jobs[index].spec.steadystate?;
            Some(SteadyTracker::new(spec, jobs[index].started_at))
        });
        jobs[index].result.steadystate = tracker;
    }
    let jobs = engine.jobs();
    let job = &mut jobs[index];
    job.phase = Phase::Done;
    if let Some(log) = &job.result.iolog {
        log.finish(now);
    }
    // The job's time ends with its last completion, past its runtime when I/O was still in
    // flight then, as fio's does.
    job.result.runtime = now.saturating_sub(job.measure_start);
    let exit = if job.result.error != 0 && job.spec.exitall_on_error {
        Some(crate::ExitWhat::All)
    } else {
        job.spec.exitall
    };
    if let Some(what) = exit {
        terminate(engine, index, what, now);
    }
    let jobs = engine.jobs();
    let mut wall = next_wall(jobs, index);
    let mut opened = None;
    while let Some(later) = wall {
        if jobs[later].phase == Phase::Pending
            && jobs[later].start_at.is_none()
            && barrier_open(jobs, later)
        {
            opened = Some(later);
            break;
        }
        wall = next_wall(jobs, later);
    }
    if let Some(later) = opened {
        // Open this wall: it and every job up to the next wall start now.
        let end = next_wall(jobs, later).unwrap_or(jobs.len());
        for starting in later..end {
            schedule_start(engine, starting, now);
        }
    }
    // The jobs that were waiting for this one's name start if none of that name is left.
    if engine.jobs()[index].waited_on {
        start_ready_waiters(engine, now);
    }
}

/// The jobs judged together with job `index` for steady state: its group's under
/// `group_reporting` (fio's `steadystate_check` sums the group), else itself; the first is
/// the one that keeps the tracker.
fn steady_unit(jobs: &[JobState], index: usize) -> Vec<usize> {
    let job = &jobs[index];
    if !job.spec.group_reporting {
        return vec![index];
    }
    (0..jobs.len())
        .filter(|&i| {
            jobs[i].spec.group_id == job.spec.group_id
                && jobs[i].spec.group_reporting
                && jobs[i].spec.steadystate.is_some()
        })
        .collect()
}

/// Takes the steady-state samples due by `at` for job `index`'s unit (fio's
/// `steadystate_check`, here when one of its I/Os completes: the counts then are those of
/// the sampling time, give or take the I/Os completing in between) and, once the criterion
/// holds, ends every job of the unit as its runtime would. Returns whether it did.
fn steady_check<E: Engine + ?Sized>(engine: &mut E, index: usize, at: Nanos) -> bool {
    let unit = steady_unit(engine.jobs(), index);
    let leader = unit[0];
    let jobs = engine.jobs();
    if jobs[leader].phase == Phase::Pending {
        return false;
    }
    let started = jobs[leader].started_at;
    if jobs[leader].steady.is_none() {
        let spec = jobs[leader]
            .spec
            .steadystate
            .expect("checked by the caller");
        jobs[leader].steady = Some(SteadyTracker::new(spec, started));
    }
    let mut attained = false;
    while let Some(time) = jobs[leader].steady.as_mut().and_then(|t| t.due(at)) {
        let (mut ios, mut bytes) = (0, 0);
        for &member in &unit {
            let job = &mut jobs[member];
            let now = (job.done_ios.iter().sum(), job.done_bytes.iter().sum());
            ios += now.0 - job.steady_counted.0;
            bytes += now.1 - job.steady_counted.1;
            job.steady_counted = now;
        }
        let tracker = jobs[leader].steady.as_mut().expect("made above");
        if tracker.sample(time - started, ios, bytes) {
            attained = true;
            break;
        }
    }
    if !attained {
        return false;
    }
    for &member in &unit {
        let job = &mut engine.jobs()[member];
        job.terminated = true;
        if matches!(job.phase, Phase::Running | Phase::Verifying) {
            job.stop_issuing();
        }
        if job.phase == Phase::Draining && job.in_flight == 0 {
            finish(engine, member, at);
        }
    }
    true
}

/// errno of an I/O error, fio's error for a job below its `rate_min`.
const fn libc_eio() -> i32 {
    5
}

/// errno of a timeout, fio's error for a job past its `latency_target` at depth 1.
const ETIMEDOUT: i32 = 110;
/// Linux's `EINVAL`: a replayed trace the job cannot go on with.
const EINVAL: i32 = 22;

/// Job `index` fails at `now` with `errno` for `message` (fio's `td_verror`): it issues
/// nothing more and finishes when what is in flight completes.
fn fail<E: Engine + ?Sized>(engine: &mut E, index: usize, errno: i32, message: String, now: Nanos) {
    let job = &mut engine.jobs()[index];
    if job.result.error == 0 {
        job.result.error = errno;
        job.result.error_message = Some(message);
    }
    job.stop_issuing();
    if job.in_flight == 0 {
        finish(engine, index, now);
    }
}

/// `exitall` (and `exitall_on_error`) after job `index` finished at `now`: fio's
/// `fio_terminate_threads` ends the jobs of its group (`exit_what=group`), every running
/// job (`stonewall`: the next stonewalled group still starts), or every job, started or
/// not (`all`). A job ended this way stops issuing and finishes as at the end of its runtime.
fn terminate<E: Engine + ?Sized>(engine: &mut E, index: usize, what: crate::ExitWhat, now: Nanos) {
    let group = engine.jobs()[index].spec.group_id;
    for other in 0..engine.jobs().len() {
        let job = &mut engine.jobs()[other];
        if other == index || job.phase == Phase::Done {
            continue;
        }
        let chosen = match what {
            crate::ExitWhat::Group => job.spec.group_id == group,
            crate::ExitWhat::Stonewall => job.phase != Phase::Pending,
            crate::ExitWhat::All => true,
        };
        if !chosen {
            continue;
        }
        if job.phase == Phase::Pending {
            // Never started: it ends without I/O (its start, if set, finds it done).
            job.phase = Phase::Done;
            job.start_at = None;
            continue;
        }
        job.terminated = true;
        if matches!(job.phase, Phase::Running | Phase::Verifying) {
            job.stop_issuing();
        }
        if job.in_flight == 0 {
            finish(engine, other, now);
        }
    }
    // A job ended before it started wakes no one through `finish`: its waiters start here.
    start_ready_waiters(engine, now);
}

/// Starts every job waiting (`wait_for`) for a name no running job has any more.
fn start_ready_waiters<E: Engine + ?Sized>(engine: &mut E, now: Nanos) {
    let ready: Vec<usize> = (0..engine.jobs().len())
        .filter(|&i| {
            let jobs = engine.jobs();
            jobs[i].waiting
                && jobs[i].phase == Phase::Pending
                && jobs[i]
                    .spec
                    .wait_for
                    .as_deref()
                    .is_some_and(|waitee| !waitee_running(jobs, waitee))
        })
        .collect();
    for waiter in ready {
        start(engine, waiter, now);
    }
}

/// Hands each job's own QoS (`qos_*`) to the policy, job `index` being flow `index` as the
/// engines number them. Returns a note when QoS is stated (by a job, a cgroup's `qos.*` or a
/// priority level's) and the policy does not read it.
pub fn apply_qos(
    elevator: &mut iosched_core::Elevator,
    jobs: &[JobSpec],
    groups: &iosched_core::group::Groups,
) -> Option<String> {
    let mut stated = Vec::new();
    for (index, spec) in jobs.iter().enumerate() {
        if spec.qos.is_set() {
            elevator.set_flow_qos(iosched_core::FlowId(index as u32), spec.qos);
            if spec.clone == 0 {
                stated.push(format!("{}: job {:?}: qos_*", spec.location, spec.name));
            }
        }
    }
    for id in groups.ids() {
        if groups.settings(id).qos.is_set() {
            stated.push(format!("cgroup {}: qos.*", groups.path(id)));
        }
    }
    for (level, _) in groups.prio_qos() {
        stated.push(format!("priority level {level}: qos.*"));
    }
    if stated.is_empty() || elevator.uses_qos() {
        return None;
    }
    Some(format!(
        "{}: ignored: policy {} does not read QoS settings (pclock, htbs and mclock do)",
        stated.join("; "),
        elevator.policy().name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_str;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::path::Path;

    const LATENCY: Nanos = 1_000_000;
    const MS: Nanos = 1_000_000;

    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    enum Event {
        Timer(usize, u8),
        Complete(usize, bool, u64, Nanos),
    }

    /// An engine whose every I/O takes [`LATENCY`], run by a small event loop: the driver as
    /// both real engines use it, with nothing else in the way.
    struct Fake {
        jobs: Vec<JobState>,
        events: BinaryHeap<Reverse<(Nanos, u64, Event)>>,
        sequence: u64,
        /// (job, time, is a flush, end_fsync) of every submission.
        submitted: Vec<(usize, Nanos, bool, bool)>,
        /// The priority of every I/O submitted.
        prios: Vec<IoPrio>,
        /// The kind of every sync submitted.
        kinds: Vec<SyncKind>,
        /// An I/O takes LATENCY times the job's I/Os in flight when it is issued (a device
        /// that serves one at a time), instead of LATENCY.
        queueing: bool,
        finishing_asked: Vec<usize>,
    }

    impl Fake {
        fn new(text: &str) -> Fake {
            let file = parse_str(text, "t.fio", Path::new("."), &|_| None).unwrap();
            let jobs = file
                .jobs
                .iter()
                .enumerate()
                .map(|(index, spec)| {
                    let len = match spec.size {
                        Some(crate::job::Amount::Bytes(bytes)) => bytes,
                        _ => 64 << 20,
                    };
                    let region = crate::workload::Region { start: 0, len };
                    let generator = Generator::new(spec, &[region], Rng::new(index as u64));
                    JobState::new(spec.clone(), index, 7, generator, len)
                })
                .collect();
            Fake {
                jobs,
                events: BinaryHeap::new(),
                sequence: 0,
                submitted: Vec::new(),
                kinds: Vec::new(),
                prios: Vec::new(),
                queueing: false,
                finishing_asked: Vec::new(),
            }
        }

        fn push(&mut self, at: Nanos, event: Event) {
            self.sequence += 1;
            self.events.push(Reverse((at, self.sequence, event)));
        }

        fn run(&mut self) {
            start_all(self, 0);
            while let Some(Reverse((now, _, event))) = self.events.pop() {
                match event {
                    Event::Timer(index, 0) => start(self, index, now),
                    Event::Timer(index, 1) => deadline(self, index, now),
                    Event::Timer(index, _) => wake(self, index, now),
                    Event::Complete(index, flush, bytes, created) => {
                        let issued = Issued {
                            job: index,
                            dir: DataDir::Write,
                            flush,
                            bytes,
                            offset: 0,
                            file: 0,
                            prio: IoPrio::NONE,
                            created,
                            admitted: created,
                        };
                        self.jobs[index].record(&issued, now);
                        completed(self, &issued, now);
                    }
                }
            }
            assert!(self.jobs.iter().all(|j| j.phase == Phase::Done));
            assert!(self.jobs.iter().all(|j| j.in_flight == 0));
        }

        fn times(&self, job: usize) -> Vec<Nanos> {
            self.submitted
                .iter()
                .filter(|s| s.0 == job && !s.2)
                .map(|s| s.1)
                .collect()
        }
    }

    impl Engine for Fake {
        fn jobs(&mut self) -> &mut [JobState] {
            &mut self.jobs
        }
        fn finishing(&mut self, index: usize, _now: Nanos) -> bool {
            self.finishing_asked.push(index);
            false
        }
        fn seed(&self) -> u64 {
            7
        }
        fn issue(&mut self, index: usize, io: NextIo, prio: IoPrio, now: Nanos) {
            self.prios.push(prio);
            self.submitted.push((index, now, false, false));
            let latency = if self.queueing {
                LATENCY * Nanos::from(self.jobs[index].in_flight)
            } else {
                LATENCY
            };
            self.push(now + latency, Event::Complete(index, false, io.len, now));
        }
        fn flush(&mut self, index: usize, now: Nanos, kind: SyncKind) -> u32 {
            self.kinds.push(kind);
            self.submitted
                .push((index, now, true, kind == SyncKind::End));
            self.push(now + LATENCY, Event::Complete(index, true, 0, now));
            1
        }
        fn timer(&mut self, at: Nanos, timer: Timer) {
            let event = match timer {
                Timer::Start(i) => Event::Timer(i, 0),
                Timer::Deadline(i) => Event::Timer(i, 1),
                Timer::Wake(i) => Event::Timer(i, 2),
            };
            self.push(at, event);
        }
    }

    // Proves rate_iops spaces a job's I/Os at 1/rate from its start and the runtime ends the
    // job (its last I/O completed before).
    #[test]
    fn rate_iops_paces_and_the_runtime_ends_the_job() {
        let mut fake = Fake::new("[w]\nrw=write\nbs=4k\nrate_iops=,100\nruntime=2\ntime_based=1\n");
        fake.run();
        let times = fake.times(0);
        assert_eq!(times.len(), 200, "100 IOPS for 2 s");
        assert!(
            times.windows(2).all(|w| w[1] - w[0] == 10 * MS),
            "{times:?}"
        );
        let job = &fake.jobs[0];
        // The last I/O completed before the runtime's end: the job ends with its runtime.
        assert!(times[199] + LATENCY < 2 * SECOND);
        assert_eq!(job.result.runtime, 2 * SECOND);
        assert_eq!(job.result.dir(DataDir::Write).total_ios, 200);
    }

    // Proves a stonewall holds the next phase until the last job before it is done, and that
    // startdelay and ramp_time shift the start and what is counted.
    #[test]
    fn stonewalls_order_phases_and_the_ramp_is_not_counted() {
        let mut fake = Fake::new(
            "[a]\nrw=write\nbs=4k\nsize=40k\nstartdelay=5ms\n\
             [b]\nrw=write\nbs=4k\nsize=20k\n\
             [c]\nstonewall\nrw=write\nbs=4k\nruntime=10ms\ntime_based=1\nramp_time=4ms\n",
        );
        fake.run();
        let (a, b, c) = (fake.times(0), fake.times(1), fake.times(2));
        assert_eq!((a.len(), b.len()), (10, 5), "size / bs each");
        assert_eq!(a[0], 5 * MS, "startdelay");
        assert_eq!(b[0], 0);
        let first_phase_done = a.last().unwrap().max(b.last().unwrap()) + LATENCY;
        assert_eq!(c[0], first_phase_done, "c starts when a and b are done");
        // c issues for its ramp and runtime, one at a time; what completes from the ramp's
        // end on is counted, as fio resets its statistics then (the I/O issued in the ramp's
        // last millisecond completes at its end).
        assert_eq!(c.len(), 14);
        assert_eq!(fake.jobs[2].result.dir(DataDir::Write).total_ios, 11);
    }

    // Proves steady-state detection ends a job as its runtime would once the criterion holds
    // over a full window after the ramp (samples at 3..7 s for ss_ramp=2 and ss_dur=5 at a
    // constant rate), for every job of a group under group_reporting at once, and reports
    // the window; a job whose rate keeps changing runs to its runtime with attained=no.
    #[test]
    fn steady_state_ends_the_job_or_its_group() {
        let mut fake = Fake::new(
            "[a]\nrw=write\nbs=4k\ntime_based=1\nruntime=100\nss=iops:1%\nss_dur=5\nss_ramp=2\n",
        );
        fake.run();
        let last = *fake.times(0).last().unwrap();
        assert!(
            (7 * SECOND - LATENCY..=7 * SECOND).contains(&last),
            "{last}"
        );
        let steady = fake.jobs[0].result.steadystate.as_ref().unwrap();
        assert!(steady.attained);
        assert_eq!(steady.samples.len(), 5);
        assert_eq!(steady.means().0, SECOND / LATENCY);

        let mut group = Fake::new(
            "[g]\nrw=write\nbs=4k\ntime_based=1\nruntime=100\nnumjobs=2\ngroup_reporting=1\n\
             ss=bw_slope:0.5%\nss_dur=4\n",
        );
        group.run();
        for job in 0..2 {
            let last = *group.times(job).last().unwrap();
            assert!(
                (4 * SECOND - LATENCY..=5 * SECOND).contains(&last),
                "{last}"
            );
            let steady = group.jobs[job].result.steadystate.as_ref().unwrap();
            assert!(steady.attained);
            // The group's IOPS: the other job's count is read when one completes, within
            // an I/O of the sampling time.
            assert!(steady.means().0.abs_diff(2 * SECOND / LATENCY) <= 2);
        }

        let mut never = Fake::new(
            "[n]\nrw=write\nbs=4k\ntime_based=1\nruntime=8\nrate_iops=,1000\nss=iops:0%\nss_dur=5\n",
        );
        never.run();
        let steady = never.jobs[0].result.steadystate.as_ref().unwrap();
        assert!(!steady.attained, "0% is never below");
        assert_eq!(never.jobs[0].result.runtime, 8 * SECOND);
    }

    // Proves a job ended by another's exitall does not go on to its last phase (fio's
    // do_verify loops while !td->terminate): the engine's finishing hook is not asked.
    #[test]
    fn a_terminated_job_skips_its_last_phase() {
        let mut fake = Fake::new(
            "[a]\nrw=write\nbs=4k\nsize=8k\nexitall=1\n\
             [b]\nrw=write\nbs=4k\ntime_based=1\nruntime=10\n",
        );
        fake.run();
        assert!(!fake.jobs[0].terminated);
        assert!(fake.jobs[1].terminated);
        assert_eq!(
            fake.finishing_asked,
            vec![0],
            "only the job that was not ended"
        );
    }

    // Proves wait_for (fio's waitee_running): a job starts only when every job of the name it
    // waits for (clones included) has finished, with no stonewall between them; its start
    // delay counts from the run's start; a chain of waits runs in order; a name no job has is
    // not waited for (a note says so), and waiting for oneself is refused.
    #[test]
    fn wait_for_starts_a_job_when_its_waitees_are_done() {
        let mut fake = Fake::new(
            "[writers]\nrw=write\nbs=4k\nsize=40k\nnumjobs=2\n\
             [readers]\nwait_for=writers\nrw=write\nbs=4k\nsize=20k\nstartdelay=1ms\n\
             [late]\nwait_for=readers\nrw=write\nbs=4k\nsize=4k\nstartdelay=1s\n\
             [free]\nrw=write\nbs=4k\nsize=4k\n",
        );
        fake.run();
        let writers_done = fake
            .times(0)
            .last()
            .unwrap()
            .max(fake.times(1).last().unwrap())
            + LATENCY;
        assert_eq!(fake.times(2)[0], writers_done);
        let readers_done = fake.times(2).last().unwrap() + LATENCY;
        assert!(readers_done < SECOND);
        assert_eq!(
            fake.times(3),
            vec![SECOND],
            "its own delay, past the waitee's end"
        );
        assert_eq!(fake.times(4), vec![0], "no wait_for: starts at once");
        let parse = |text: &str| parse_str(text, "t.fio", Path::new("."), &|_| None);
        let file = parse("[a]\nwait_for=nobody\nrw=read\nsize=4k\n").unwrap();
        assert!(file.notes.iter().any(|n| n.option == "wait_for"));
        let error = parse("[a]\nwait_for=a\nrw=read\nsize=4k\n").unwrap_err();
        assert!(error.to_string().contains("wait for itself"), "{error}");
    }

    // Proves fsync= flushes after every N writes, end_fsync once after the last, and that a
    // flush counts in flight (the job ends after it completes).
    #[test]
    fn fsync_and_end_fsync_flush_in_place() {
        let mut fake = Fake::new("[w]\nrw=write\nbs=4k\nsize=32k\nfsync=3\nend_fsync=1\n");
        fake.run();
        let kinds: Vec<(bool, bool)> = fake.submitted.iter().map(|s| (s.2, s.3)).collect();
        let write = (false, false);
        let fsync = (true, false);
        let end = (true, true);
        assert_eq!(
            kinds,
            vec![write, write, write, fsync, write, write, write, fsync, write, write, end]
        );
        let last = fake.submitted.last().unwrap().1;
        assert_eq!(fake.jobs[0].result.runtime, last + LATENCY);
        assert_eq!(fake.jobs[0].result.sync.count(), 3);
    }

    // Proves sync_file_range=FLAGS:N asks for a range sync with those flags after every N
    // writes, on its own count beside fsync=, and parses fio's forms (default count 1).
    #[test]
    fn sync_file_range_every_n_writes() {
        let mut fake = Fake::new(
            "[w]\nrw=write\nbs=4k\nsize=24k\nfsync=4\nsync_file_range=wait_before,write:3\n",
        );
        fake.run();
        let range =
            SyncKind::Range(crate::SyncFileRange::WAIT_BEFORE | crate::SyncFileRange::WRITE);
        assert_eq!(
            fake.kinds,
            vec![range, SyncKind::Every],
            "a range after write 3, an fsync after 4, and none after the last write (6): fio \
             decides on a sync as it gets the next I/O (fio 3.33 issues 1 fsync for fsync=3 \
             over 6 writes)"
        );
        let one = Fake::new("[w]\nrw=write\nsync_file_range=write\n");
        assert_eq!(
            one.jobs[0].spec.sync_file_range,
            Some(crate::SyncFileRange {
                flags: crate::SyncFileRange::WRITE,
                every: 1
            })
        );
        for (bad, says) in [
            ("write:0", "count of 0"),
            ("write,flush:2", "bad flag"),
            ("write:x", "bad count"),
        ] {
            let text = format!("[w]\nrw=write\nsync_file_range={bad}\n");
            let error = parse_str(&text, "t.fio", Path::new("."), &|_| None).unwrap_err();
            assert!(
                error.to_string().contains(says) && error.to_string().contains("t.fio:3"),
                "{bad}: {error}"
            );
        }
    }

    // Proves think time waits for the I/O in flight, then thinks, every thinktime_blocks.
    #[test]
    fn thinktime_waits_then_thinks() {
        let mut fake = Fake::new(
            "[r]\nrw=read\nbs=4k\nsize=16k\nioengine=libaio\niodepth=4\nthinktime=5ms\n\
             thinktime_blocks=2\n",
        );
        fake.run();
        // Two at once, both complete at 1 ms, think 5 ms, two more at 6 ms.
        assert_eq!(fake.times(0), vec![0, 0, 6 * MS, 6 * MS]);
    }

    // Proves cmdprio_percentage gives that share of a direction's I/Os the cmdprio priority
    // (RT 0 by default) and the rest the job's, drawn from the run's seed.
    #[test]
    fn cmdprio_percentage_picks_a_share_of_ios() {
        let mut fake = Fake::new(
            "[r]\nrw=randread\nbs=4k\nioengine=libaio\nruntime=2\ntime_based=1\n\
             prioclass=2\nprio=5\ncmdprio_percentage=30\n",
        );
        fake.run();
        let rt = IoPrio::new(iosched_core::IoPrioClass::Rt, 0).unwrap();
        let be = IoPrio::new(iosched_core::IoPrioClass::Be, 5).unwrap();
        let high = fake.prios.iter().filter(|p| **p == rt).count() as f64;
        assert!(fake.prios.iter().all(|p| *p == rt || *p == be));
        let share = high / fake.prios.len() as f64;
        assert!(
            (share - 0.30).abs() < 0.03,
            "{share} of {}",
            fake.prios.len()
        );
    }

    // Proves number_ios ends a job after that many I/Os per loop (fio's exceeds_number_ios),
    // before its size would.
    #[test]
    fn number_ios_ends_the_job() {
        let mut fake = Fake::new("[r]\nrw=read\nbs=4k\nsize=1m\nnumber_ios=10\nloops=2\n");
        fake.run();
        assert_eq!(fake.times(0).len(), 20);
    }

    // Proves exitall ends the jobs of the finished job's group (exit_what=group), and every
    // job with exit_what=all, as fio_terminate_threads.
    #[test]
    fn exitall_ends_the_group_or_all() {
        let text = "[global]\nrw=read\nbs=4k\nexitall\nexit_what=WHAT\n\
                    [a]\nsize=8k\n[b]\nruntime=1\ntime_based=1\n\
                    [c]\nnew_group\nruntime=1\ntime_based=1\n";
        let mut group = Fake::new(&text.replace("WHAT", "group"));
        group.run();
        assert_eq!(group.times(0).len(), 2);
        assert!(group.times(1).len() <= 3, "b ends with a");
        assert_eq!(
            group.times(2).len(),
            1000,
            "c, another group, runs its second"
        );
        let mut all = Fake::new(&text.replace("WHAT", "all"));
        all.run();
        assert!(all.times(1).len() <= 3 && all.times(2).len() <= 3);
        assert!(all.jobs[2].result.runtime < 5 * MS);
    }

    // Proves rate_min fails a job that does less over a rate_cycle, after fio's two-second
    // settling, with EIO and a message; a job above it is left alone.
    #[test]
    fn rate_min_fails_a_slow_job() {
        let job = "[r]\nrw=read\nbs=4k\nrate_iops=10\nruntime=10\ntime_based=1\nrate_min=MIN\n";
        let mut slow = Fake::new(&job.replace("MIN", "80k"));
        slow.run();
        let result = &slow.jobs[0].result;
        assert_eq!(result.error, 5);
        let message = result.error_message.as_deref().unwrap();
        assert!(message.contains("rate_min=81920B/s not met"), "{message}");
        assert!(result.runtime > 2 * SECOND && result.runtime < 4 * SECOND);
        let mut fast = Fake::new(&job.replace("MIN", "20k"));
        fast.run();
        assert_eq!(fast.jobs[0].result.error, 0);
        assert_eq!(fast.times(0).len(), 100);
    }

    // Proves flow=1 and flow=3 in one flow_id share the I/O 1:3 (fio's weighted
    // flow_threshold_exceeded), where alone each would issue as fast as the other.
    #[test]
    fn flow_weights_share_the_io() {
        let mut fake = Fake::new(
            "[global]\nrw=read\nbs=4k\nruntime=1\ntime_based=1\n\
             [a]\nflow=1\n[b]\nflow=3\n[c]\nflow=5\nflow_id=2\n",
        );
        fake.run();
        let (a, b, c) = (
            fake.times(0).len(),
            fake.times(1).len(),
            fake.times(2).len(),
        );
        assert_eq!(b, 1000, "the heavier job is never held back");
        assert!((a as f64 / b as f64 - 1.0 / 3.0).abs() < 0.01, "{a} vs {b}");
        assert_eq!(c, 1000, "alone in its flow");
    }

    // Proves the latency_target search: on a device whose latency grows with the depth
    // (1 ms per I/O in flight), a 4.5 ms target met by 90% of each window's I/Os doubles the
    // depth to 8, bisects back to 4, runs one more window there with fresh statistics, and
    // ends the job long before its runtime (latency_run=0). At the 100th percentile one late
    // I/O at depth 1 fails the job (ETIMEDOUT), as fio's lat_fatal.
    #[test]
    fn latency_target_finds_the_depth() {
        let mut fake = Fake::new(
            "[r]\nrw=randread\nbs=4k\nioengine=libaio\niodepth=64\nruntime=100\n\
             time_based=1\nlatency_target=4500\nlatency_window=100000\n\
             latency_percentile=90\n",
        );
        fake.queueing = true;
        fake.run();
        let job = &fake.jobs[0];
        assert_eq!(job.current_depth(), 4);
        assert_eq!(job.result.error, 0);
        let result = job.result.dir(DataDir::Write);
        assert!(result.total_ios > 80, "{}", result.total_ios);
        assert!(
            job.result.runtime < 200 * MS,
            "only the final window is counted"
        );
        assert!(fake.submitted.last().unwrap().1 < SECOND);

        let mut strict = Fake::new(
            "[r]\nrw=randread\nbs=4k\nioengine=libaio\niodepth=8\nruntime=10\n\
             time_based=1\nlatency_target=500\n",
        );
        strict.run();
        assert_eq!(strict.jobs[0].result.error, ETIMEDOUT);
        assert_eq!(strict.times(0).len(), 1);
    }

    // Proves rate_process=poisson keeps the mean rate with exponential gaps: about rate_iops
    // I/Os a second, and unequal gaps where the linear process spaces them evenly.
    #[test]
    fn poisson_rate_keeps_the_mean() {
        let mut fake = Fake::new(
            "[r]\nrw=read\nbs=4k\nioengine=libaio\niodepth=16\nrate_iops=200\n\
             rate_process=poisson\nruntime=50\ntime_based=1\n",
        );
        fake.run();
        let times = fake.times(0);
        assert!(
            (times.len() as f64 / 10_000.0 - 1.0).abs() < 0.03,
            "{}",
            times.len()
        );
        let gaps: Vec<Nanos> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let short = gaps.iter().filter(|g| **g < 5 * MS / 2).count() as f64 / gaps.len() as f64;
        // P(exponential gap < half its mean) = 1 - e^-0.5 = 0.39.
        assert!((short - 0.39).abs() < 0.03, "{short}");
    }
}

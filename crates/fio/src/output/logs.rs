//! fio's log files: `write_lat_log`, `write_bw_log`, `write_iops_log`, written while the job
//! runs.
//!
//! Names follow fio: `PREFIX_lat.N.log`, `PREFIX_clat.N.log`, `PREFIX_slat.N.log`,
//! `PREFIX_bw.N.log`, `PREFIX_iops.N.log`, N being the job's 1-based number, relative to the
//! current directory as fio writes them. Each line is `time (ms), value, direction (0 read,
//! 1 write, 2 trim), block size, [offset,] priority`, as fio 3.33 writes it: latencies in ns,
//! bandwidth in KiB/s, IOPS as a count per second. The offset column appears with
//! `log_offset=1`; the priority column is the raw ioprio value with `log_prio=1`, else 1 for a
//! real-time (high priority) I/O and 0 otherwise.
//!
//! With `log_avg_msec=0` latency logs have one line per I/O, and bandwidth and IOPS logs one
//! line per direction every 500 ms (fio's `bw_avg_time`/`iops_avg_time`); with `log_avg_msec=M`
//! every log has one line per direction per M ms, with the mean latency of the window. As in
//! fio's `__add_samples`, a window writes a rate line only for the directions that moved data in
//! it, with the block size when the direction's is fixed (else 0) and priority 0.
//!
//! # Streaming
//!
//! A [`LogStream`] writes each line as soon as it is known: a latency line at each completion,
//! a window's lines when the first completion after it arrives or the job ends. It holds one
//! window per direction and log, so memory stays constant however long the run: fio keeps its
//! samples in memory until the job ends, which is what a multi-hour per-I/O log cannot afford.
//! The files are [`OutputFile`]s: each regular file is written beside its target and moved into
//! place by [`LogStream::commit`], so a run that fails leaves earlier logs as they were.

use super::file::{OutputError, OutputFile};
use crate::job::DataDir;
use crate::stats::{IoSample, LogRequest};
use iosched_core::{IoPrioClass, Nanos};
use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// fio's default averaging window for bandwidth and IOPS logs, ms.
const BANDWIDTH_WINDOW_MS: u64 = 500;

/// Where a log's lines go.
enum Target {
    /// A file the job named, written while the job runs.
    File(OutputFile),
    /// Memory, for [`LogStream::in_memory`].
    Memory(Vec<u8>),
}

/// One log file and the first error writing it.
struct Log {
    name: String,
    target: Target,
    line: String,
    error: Option<String>,
}

impl Log {
    fn write_line(&mut self) {
        if self.error.is_some() {
            return;
        }
        let result = match &mut self.target {
            Target::File(file) => file.write_all(self.line.as_bytes()),
            Target::Memory(bytes) => {
                bytes.extend_from_slice(self.line.as_bytes());
                Ok(())
            }
        };
        if let Err(error) = result {
            self.error = Some(error.to_string());
        }
    }
}

/// A latency log's current averaging window, per direction.
#[derive(Clone, Copy, Default)]
struct LatencyWindow {
    sum: u128,
    count: u64,
    first: Option<IoSample>,
}

/// Which latency a latency log holds.
#[derive(Clone, Copy)]
enum LatencyKind {
    /// Submission to completion (`_lat`).
    Total,
    /// Completion latency (`_clat`).
    Completion,
    /// Submission latency (`_slat`), for async engines only.
    Submission,
}

impl LatencyKind {
    fn pick(self, sample: &IoSample) -> Option<u64> {
        match self {
            LatencyKind::Total => Some(sample.clat.saturating_add(sample.slat.unwrap_or(0))),
            LatencyKind::Completion => Some(sample.clat),
            LatencyKind::Submission => sample.slat,
        }
    }
}

struct LatencyLog {
    log: Log,
    kind: LatencyKind,
    window: [LatencyWindow; 3],
}

/// Which rate a rate log holds.
#[derive(Clone, Copy)]
enum RateKind {
    /// KiB/s.
    Bandwidth,
    /// I/Os per second.
    Iops,
}

struct RateLog {
    log: Log,
    kind: RateKind,
    bytes: [u64; 3],
    ios: [u64; 3],
}

struct State {
    request: LogRequest,
    /// Each direction's block size when it is fixed, else 0 (the rate logs' block size column).
    fixed_bs: [u64; 3],
    latency: Vec<LatencyLog>,
    rates: Vec<RateLog>,
    /// Index of the averaging window now open (latency logs with `log_avg_msec`, rate logs).
    latency_window: u64,
    rate_window: u64,
    finished: bool,
}

/// The log files one job asked for, written as its I/O completes. Clones share the files (the
/// report's grouping copies job results); only the engine records.
#[derive(Clone)]
pub struct LogStream(Arc<Mutex<State>>);

impl fmt::Debug for LogStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        let names: Vec<&str> = state
            .latency
            .iter()
            .map(|l| l.log.name.as_str())
            .chain(state.rates.iter().map(|r| r.log.name.as_str()))
            .collect();
        f.debug_tuple("LogStream").field(&names).finish()
    }
}

impl PartialEq for LogStream {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The file names of the logs `request` asks for, with the option that names each.
pub fn file_names(request: &LogRequest) -> Vec<(&'static str, String)> {
    let number = request.job_number;
    let mut names = Vec::new();
    if let Some(prefix) = &request.lat {
        for kind in ["lat", "clat", "slat"] {
            names.push(("write_lat_log", format!("{prefix}_{kind}.{number}.log")));
        }
    }
    if let Some(prefix) = &request.bw {
        names.push(("write_bw_log", format!("{prefix}_bw.{number}.log")));
    }
    if let Some(prefix) = &request.iops {
        names.push(("write_iops_log", format!("{prefix}_iops.{number}.log")));
    }
    names
}

impl LogStream {
    /// Opens every log file `request` asks for, relative to the current directory as fio
    /// writes them. `fixed_bs` is each direction's block size when fixed, else 0. An error
    /// names the option and the file; files opened before it are dropped, leaving nothing.
    pub fn open(request: &LogRequest, fixed_bs: [u64; 3]) -> Result<LogStream, String> {
        Self::build(request, fixed_bs, |option, name| {
            OutputFile::create(Path::new(name))
                .map(Target::File)
                .map_err(|error: OutputError| format!("{option}: {error}"))
        })
    }

    /// The same logs, kept in memory: see [`LogStream::contents`].
    pub fn in_memory(request: &LogRequest, fixed_bs: [u64; 3]) -> LogStream {
        Self::build(request, fixed_bs, |_, _| Ok(Target::Memory(Vec::new())))
            .expect("memory targets cannot fail")
    }

    fn build(
        request: &LogRequest,
        fixed_bs: [u64; 3],
        mut open: impl FnMut(&str, &str) -> Result<Target, String>,
    ) -> Result<LogStream, String> {
        let mut latency = Vec::new();
        let mut rates = Vec::new();
        let kinds = [
            LatencyKind::Total,
            LatencyKind::Completion,
            LatencyKind::Submission,
        ];
        let mut latency_kinds = kinds.iter();
        for (option, name) in file_names(request) {
            let log = Log {
                target: open(option, &name)?,
                name,
                line: String::new(),
                error: None,
            };
            match option {
                "write_lat_log" => latency.push(LatencyLog {
                    log,
                    kind: *latency_kinds.next().expect("three latency logs"),
                    window: Default::default(),
                }),
                _ => rates.push(RateLog {
                    log,
                    kind: if option == "write_bw_log" {
                        RateKind::Bandwidth
                    } else {
                        RateKind::Iops
                    },
                    bytes: [0; 3],
                    ios: [0; 3],
                }),
            }
        }
        Ok(LogStream(Arc::new(Mutex::new(State {
            request: request.clone(),
            fixed_bs,
            latency,
            rates,
            latency_window: 0,
            rate_window: 0,
            finished: false,
        }))))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the state half-updated in a way that matters to logs.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records one completed I/O.
    pub fn record(&self, sample: &IoSample) {
        self.lock().record(sample);
    }

    /// Ends the job `runtime` after measurement began: writes the windows still open.
    pub fn finish(&self, runtime: Nanos) {
        self.lock().finish(runtime);
    }

    /// Moves every log file into place (after [`finish`](Self::finish)); the first error, if
    /// any, names the file. Logs in memory have nothing to commit.
    pub fn commit(&self) -> Result<(), String> {
        let mut state = self.lock();
        let logs = std::mem::take(&mut state.latency)
            .into_iter()
            .map(|l| l.log)
            .chain(std::mem::take(&mut state.rates).into_iter().map(|r| r.log));
        let mut first_error = None;
        for log in logs {
            let result = match (log.error, log.target) {
                (Some(error), _) => Err(format!("cannot write {:?}: {error}", log.name)),
                (None, Target::File(file)) => file.commit().map_err(|e| e.to_string()),
                (None, Target::Memory(_)) => Ok(()),
            };
            if let Err(error) = result {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Each in-memory log's name and text, in fio's file order.
    pub fn contents(&self) -> Vec<(String, String)> {
        let state = self.lock();
        state
            .latency
            .iter()
            .map(|l| &l.log)
            .chain(state.rates.iter().map(|r| &r.log))
            .filter_map(|log| match &log.target {
                Target::Memory(bytes) => Some((
                    log.name.clone(),
                    String::from_utf8_lossy(bytes).into_owned(),
                )),
                Target::File(_) => None,
            })
            .collect()
    }
}

/// Moves every log file of `report`'s jobs into place; the first error names the file.
pub fn commit(report: &crate::RunReport) -> Result<(), String> {
    let mut first_error = None;
    for job in &report.jobs {
        if let Some(Err(error)) = job.log.as_ref().map(LogStream::commit) {
            first_error.get_or_insert(error);
        }
        if let Some(Err(error)) = job.iolog.as_ref().map(crate::trace::IologStream::commit) {
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn priority_column(request: &LogRequest, sample: &IoSample) -> u64 {
    if request.prio {
        u64::from(sample.prio.to_raw())
    } else {
        u64::from(sample.prio.class() == IoPrioClass::Rt)
    }
}

/// The columns of one log line.
struct Line {
    time_ms: u64,
    value: u64,
    dir: DataDir,
    bytes: u64,
    offset: u64,
    priority: u64,
}

/// Formats one line into `log.line` and writes it.
fn emit(log: &mut Log, request: &LogRequest, line: Line) {
    use std::fmt::Write as _;
    log.line.clear();
    let _ = write!(
        log.line,
        "{}, {}, {}, {}, ",
        line.time_ms, line.value, line.dir as u8, line.bytes
    );
    if request.offset {
        let _ = write!(log.line, "{}, ", line.offset);
    }
    let _ = writeln!(log.line, "{}", line.priority);
    log.write_line();
}

impl State {
    fn latency_window_ns(&self) -> u64 {
        u64::from(self.request.avg_msec).saturating_mul(1_000_000)
    }

    fn rate_window_ms(&self) -> u64 {
        match self.request.avg_msec {
            0 => BANDWIDTH_WINDOW_MS,
            msec => u64::from(msec),
        }
    }

    fn record(&mut self, sample: &IoSample) {
        if self.finished {
            return;
        }
        let request = &self.request;
        if request.avg_msec == 0 {
            for latency in &mut self.latency {
                if let Some(value) = latency.kind.pick(sample) {
                    let line = Line {
                        time_ms: sample.at / 1_000_000,
                        value,
                        dir: sample.dir,
                        bytes: sample.bytes,
                        offset: sample.offset,
                        priority: priority_column(request, sample),
                    };
                    emit(&mut latency.log, request, line);
                }
            }
        } else if !self.latency.is_empty() {
            // Completions come in time order; one that does not (the real engine reaps in
            // batches) joins the window now open.
            let window = (sample.at / self.latency_window_ns()).max(self.latency_window);
            if window > self.latency_window {
                self.close_latency_window();
                self.latency_window = window;
            }
            for latency in &mut self.latency {
                if let Some(value) = latency.kind.pick(sample) {
                    let slot = &mut latency.window[sample.dir as usize];
                    slot.sum += u128::from(value);
                    slot.count += 1;
                    slot.first.get_or_insert(*sample);
                }
            }
        }
        if !self.rates.is_empty() {
            let window_ns = self.rate_window_ms() * 1_000_000;
            let window = (sample.at / window_ns).max(self.rate_window);
            if window > self.rate_window {
                self.close_rate_window();
                self.rate_window = window;
            }
            for rate in &mut self.rates {
                rate.bytes[sample.dir as usize] += sample.bytes;
                rate.ios[sample.dir as usize] += 1;
            }
        }
    }

    /// Writes the open latency window's means, one line per direction with samples.
    fn close_latency_window(&mut self) {
        let end_ms = (self.latency_window + 1) * u64::from(self.request.avg_msec);
        let request = &self.request;
        for latency in &mut self.latency {
            for dir in DataDir::ALL {
                let slot = std::mem::take(&mut latency.window[dir as usize]);
                let Some(first) = slot.first else {
                    continue;
                };
                let mean = (slot.sum / u128::from(slot.count)) as u64;
                let line = Line {
                    time_ms: end_ms,
                    value: mean,
                    dir,
                    bytes: 0,
                    offset: first.offset,
                    priority: priority_column(request, &first),
                };
                emit(&mut latency.log, request, line);
            }
        }
    }

    /// Writes the open rate window, one line per direction that moved data in it (fio's
    /// "No entries for interval").
    fn close_rate_window(&mut self) {
        let window_ms = self.rate_window_ms();
        let end_ms = (self.rate_window + 1) * window_ms;
        let request = &self.request;
        for rate in &mut self.rates {
            for dir in DataDir::ALL {
                let index = dir as usize;
                let (bytes, ios) = (rate.bytes[index], rate.ios[index]);
                rate.bytes[index] = 0;
                rate.ios[index] = 0;
                if ios == 0 {
                    continue;
                }
                let value = match rate.kind {
                    RateKind::Bandwidth => bytes * 1000 / 1024 / window_ms,
                    RateKind::Iops => ios * 1000 / window_ms,
                };
                let line = Line {
                    time_ms: end_ms,
                    value,
                    dir,
                    bytes: self.fixed_bs[index],
                    offset: 0,
                    priority: 0,
                };
                emit(&mut rate.log, request, line);
            }
        }
    }

    fn finish(&mut self, runtime: Nanos) {
        if self.finished {
            return;
        }
        self.finished = true;
        if self.request.avg_msec > 0 && !self.latency.is_empty() {
            self.close_latency_window();
        }
        // A rate window counts only when the job ran to its end: a part-window would report a
        // rate over time the job did not run.
        let window_ns = self.rate_window_ms() * 1_000_000;
        if !self.rates.is_empty() && (self.rate_window + 1).saturating_mul(window_ns) <= runtime {
            self.close_rate_window();
        }
        for log in self
            .latency
            .iter_mut()
            .map(|l| &mut l.log)
            .chain(self.rates.iter_mut().map(|r| &mut r.log))
        {
            if let (None, Target::File(file)) = (&log.error, &mut log.target) {
                if let Err(error) = file.flush() {
                    log.error = Some(error.to_string());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iosched_core::IoPrio;

    fn request(avg_msec: u32) -> LogRequest {
        LogRequest {
            lat: Some("lat".into()),
            bw: Some("bw".into()),
            iops: Some("io".into()),
            avg_msec,
            offset: true,
            prio: false,
            job_number: 1,
        }
    }

    fn sample(at_ms: u64, dir: DataDir, clat_us: u64) -> IoSample {
        IoSample {
            at: at_ms * 1_000_000,
            dir,
            bytes: 4096,
            offset: at_ms * 4096,
            prio: IoPrio::NONE,
            slat: None,
            clat: clat_us * 1000,
        }
    }

    fn text(stream: &LogStream, name: &str) -> String {
        stream
            .contents()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no log {name}"))
            .1
    }

    // Proves per-I/O latency lines and 500 ms rate windows, skipping a direction without I/O.
    #[test]
    fn per_io_latency_and_windowed_rates() {
        let stream = LogStream::in_memory(&request(0), [4096, 4096, 0]);
        for ms in [100, 200, 700] {
            stream.record(&sample(ms, DataDir::Read, 500));
        }
        stream.record(&sample(800, DataDir::Write, 900));
        stream.finish(1_000_000_000);
        assert_eq!(
            text(&stream, "lat_clat.1.log"),
            "100, 500000, 0, 4096, 409600, 0\n200, 500000, 0, 4096, 819200, 0\n\
             700, 500000, 0, 4096, 2867200, 0\n800, 900000, 1, 4096, 3276800, 0\n"
        );
        assert_eq!(text(&stream, "lat_slat.1.log"), "");
        assert_eq!(
            text(&stream, "io_iops.1.log"),
            "500, 4, 0, 4096, 0, 0\n1000, 2, 0, 4096, 0, 0\n1000, 2, 1, 4096, 0, 0\n"
        );
        assert_eq!(
            text(&stream, "bw_bw.1.log"),
            "500, 16, 0, 4096, 0, 0\n1000, 8, 0, 4096, 0, 0\n1000, 8, 1, 4096, 0, 0\n"
        );
    }

    // Proves log_avg_msec averages latencies per window and direction, and a part-window at the
    // end writes latency means but no rate.
    #[test]
    fn averaged_windows() {
        let stream = LogStream::in_memory(&request(1000), [4096; 3]);
        stream.record(&sample(100, DataDir::Read, 100));
        stream.record(&sample(900, DataDir::Read, 300));
        stream.record(&sample(1500, DataDir::Read, 1000));
        stream.finish(1_600_000_000);
        assert_eq!(
            text(&stream, "lat_clat.1.log"),
            "1000, 200000, 0, 0, 409600, 0\n2000, 1000000, 0, 0, 6144000, 0\n"
        );
        assert_eq!(text(&stream, "io_iops.1.log"), "1000, 2, 0, 4096, 0, 0\n");
    }

    // Proves a long run writes one rate line per window, the windows closing as completions
    // pass them rather than at the end.
    #[test]
    fn long_runs_write_one_line_per_window() {
        let stream = LogStream::in_memory(
            &LogRequest {
                lat: None,
                ..request(10)
            },
            [4096; 3],
        );
        for ms in 0..200_000 {
            stream.record(&sample(ms, DataDir::Read, 100));
        }
        assert_eq!(text(&stream, "io_iops.1.log").lines().count(), 19_999);
        stream.finish(200_000_000_000);
        assert_eq!(text(&stream, "io_iops.1.log").lines().count(), 20_000);
    }

    // Proves a log file is written beside its target and moved into place on commit only.
    #[test]
    fn files_appear_on_commit() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("x").to_string_lossy().into_owned();
        let stream = LogStream::open(
            &LogRequest {
                lat: None,
                bw: None,
                iops: Some(prefix.clone()),
                ..request(0)
            },
            [4096; 3],
        )
        .unwrap();
        stream.record(&sample(100, DataDir::Read, 100));
        stream.finish(500_000_000);
        let target = format!("{prefix}_iops.1.log");
        assert!(!Path::new(&target).exists());
        stream.commit().unwrap();
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "500, 2, 0, 4096, 0, 0\n"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    // Regression (issue 11, item 6): a log in a directory that does not exist is refused up
    // front, naming the option and the log file, not a temporary file.
    #[test]
    fn a_missing_directory_names_the_option_and_the_file() {
        let error = LogStream::open(
            &LogRequest {
                lat: None,
                bw: Some("no/such/dir/bw".into()),
                iops: None,
                ..request(0)
            },
            [4096; 3],
        )
        .unwrap_err();
        assert!(error.starts_with("write_bw_log: "), "{error}");
        assert!(error.contains("no/such/dir/bw_bw.1.log"), "{error}");
        assert!(error.contains("does not exist"), "{error}");
        assert!(!error.contains("tmp"), "{error}");
    }
}

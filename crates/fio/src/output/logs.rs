//! fio's log files: `write_lat_log`, `write_bw_log`, `write_iops_log`.
//!
//! Names follow fio: `PREFIX_lat.N.log`, `PREFIX_clat.N.log`, `PREFIX_slat.N.log`,
//! `PREFIX_bw.N.log`, `PREFIX_iops.N.log`, N being the job's 1-based number. Each line is
//! `time (ms), value, direction (0 read, 1 write, 2 trim), block size, [offset,] priority`, as
//! fio 3.33 writes it: latencies in ns, bandwidth in KiB/s, IOPS as a count per second. The
//! offset column appears with `log_offset=1`; the priority column is the raw ioprio value with
//! `log_prio=1`, else 1 for a real-time (high priority) I/O and 0 otherwise.
//!
//! With `log_avg_msec=0` latency logs have one line per I/O, and bandwidth and IOPS logs one
//! line per direction every 500 ms (fio's `bw_avg_time`/`iops_avg_time`); with `log_avg_msec=M`
//! every log has one line per direction per M ms, with the mean latency of the window.

use crate::job::DataDir;
use crate::report::RunReport;
use crate::stats::{IoSample, JobResult, LogRequest};
use iosched_core::IoPrioClass;
use std::fmt::Write;

/// fio's default averaging window for bandwidth and IOPS logs, ms.
const BANDWIDTH_WINDOW_MS: u64 = 500;

/// Every log file the report's jobs asked for, as (file name, contents), in job order.
pub fn logs(report: &RunReport) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for job in &report.jobs {
        let request = &job.logs;
        let number = request.job_number;
        if let Some(prefix) = &request.lat {
            let latency = |pick: fn(&IoSample) -> Option<u64>| latency_log(job, pick);
            files.push((
                format!("{prefix}_lat.{number}.log"),
                latency(|s| Some(s.clat + s.slat.unwrap_or(0))),
            ));
            files.push((
                format!("{prefix}_clat.{number}.log"),
                latency(|s| Some(s.clat)),
            ));
            files.push((format!("{prefix}_slat.{number}.log"), latency(|s| s.slat)));
        }
        if let Some(prefix) = &request.bw {
            files.push((
                format!("{prefix}_bw.{number}.log"),
                rate_log(job, |bytes, _, ms| bytes * 1000 / 1024 / ms),
            ));
        }
        if let Some(prefix) = &request.iops {
            files.push((
                format!("{prefix}_iops.{number}.log"),
                rate_log(job, |_, ios, ms| ios * 1000 / ms),
            ));
        }
    }
    files
}

fn priority_column(request: &LogRequest, sample: &IoSample) -> u64 {
    if request.prio {
        u64::from(sample.prio.to_raw())
    } else {
        u64::from(sample.prio.class() == IoPrioClass::Rt)
    }
}

fn line(
    out: &mut String,
    request: &LogRequest,
    time_ms: u64,
    value: u64,
    sample: &IoSample,
    bytes: u64,
) {
    write!(out, "{time_ms}, {value}, {}, {bytes}, ", sample.dir as u8).unwrap();
    if request.offset {
        write!(out, "{}, ", sample.offset).unwrap();
    }
    writeln!(out, "{}", priority_column(request, sample)).unwrap();
}

fn latency_log(job: &JobResult, pick: fn(&IoSample) -> Option<u64>) -> String {
    let request = &job.logs;
    let mut out = String::new();
    if request.avg_msec == 0 {
        for sample in &job.samples {
            if let Some(value) = pick(sample) {
                line(
                    &mut out,
                    request,
                    sample.at / 1_000_000,
                    value,
                    sample,
                    sample.bytes,
                );
            }
        }
        return out;
    }
    windows(
        job,
        u64::from(request.avg_msec),
        |out_window, end_ms, dir, samples| {
            let values: Vec<u64> = samples.iter().filter_map(|s| pick(s)).collect();
            if let (Some(first), false) = (samples.first(), values.is_empty()) {
                let mean = values.iter().sum::<u64>() / values.len() as u64;
                let sample = IoSample { dir, ..**first };
                line(out_window, request, end_ms, mean, &sample, 0);
            }
        },
        &mut out,
    );
    out
}

fn rate_log(job: &JobResult, value: fn(u64, u64, u64) -> u64) -> String {
    let window_ms = match job.logs.avg_msec {
        0 => BANDWIDTH_WINDOW_MS,
        msec => u64::from(msec),
    };
    let window_ns = window_ms * 1_000_000;
    let request = &job.logs;
    // Every complete window gets a line for each direction the job used, zero when idle.
    let used: Vec<DataDir> = DataDir::ALL
        .into_iter()
        .filter(|&d| job.samples.iter().any(|s| s.dir == d))
        .collect();
    let count = (job.runtime / window_ns) as usize;
    let mut bytes = vec![[0u64; 3]; count];
    let mut ios = vec![[0u64; 3]; count];
    for sample in &job.samples {
        let window = (sample.at / window_ns) as usize;
        if window < count {
            bytes[window][sample.dir as usize] += sample.bytes;
            ios[window][sample.dir as usize] += 1;
        }
    }
    let mut out = String::new();
    for window in 0..count {
        for &dir in &used {
            let template = IoSample {
                at: 0,
                dir,
                bytes: 0,
                offset: 0,
                prio: job
                    .samples
                    .iter()
                    .find(|s| s.dir == dir)
                    .map(|s| s.prio)
                    .unwrap_or_default(),
                slat: None,
                clat: 0,
            };
            let rate = value(
                bytes[window][dir as usize],
                ios[window][dir as usize],
                window_ms,
            );
            line(
                &mut out,
                request,
                (window as u64 + 1) * window_ms,
                rate,
                &template,
                0,
            );
        }
    }
    out
}

/// Calls `emit` for each window of `window_ms` and each direction with the samples that
/// completed in it, windows in time order and directions in fio's order.
fn windows(
    job: &JobResult,
    window_ms: u64,
    mut emit: impl FnMut(&mut String, u64, DataDir, &[&IoSample]),
    out: &mut String,
) {
    let window_ns = window_ms.max(1) * 1_000_000;
    let mut start = 0;
    while start < job.samples.len() {
        let index = job.samples[start].at / window_ns;
        let end = job.samples[start..]
            .iter()
            .position(|s| s.at / window_ns != index)
            .map_or(job.samples.len(), |offset| start + offset);
        let in_window = &job.samples[start..end];
        for dir in DataDir::ALL {
            let of_dir: Vec<&IoSample> = in_window.iter().filter(|s| s.dir == dir).collect();
            emit(out, (index + 1) * window_ms, dir, &of_dir);
        }
        start = end;
    }
}

//! Hand-built reports for the output tests.

#![allow(dead_code)]

use iosched_core::{IoPrio, IoPrioClass};
use iosched_fio::job::DEFAULT_PERCENTILES;
use iosched_fio::stats::{DirStats, JobResult, Latency, DEFAULT_SAMPLE_INTERVAL, IODEPTH_LEVELS};
use iosched_fio::{DataDir, DiskUtil, Parameter, RunReport};

pub const MS: u64 = 1_000_000;
pub const SECOND: u64 = 1_000_000_000;

/// A job with no I/O yet, fio's default percentiles, and `runtime`.
pub fn job(name: &str, group_id: u32, runtime: u64) -> JobResult {
    JobResult {
        name: name.into(),
        group_id,
        clone: 0,
        numjobs: 1,
        group_reporting: false,
        options: vec![
            ("name".into(), name.into()),
            ("rw".into(), "randrw".into()),
            ("iodepth".into(), "4".into()),
        ],
        percentile_list: DEFAULT_PERCENTILES.to_vec(),
        dirs: [0, 1, 2].map(|_| DirStats::new(DEFAULT_SAMPLE_INTERVAL)),
        sync: Latency::new(),
        runtime,
        measure_start: 0,
        iodepth_levels: [0; IODEPTH_LEVELS],
        error: 0,
        error_message: None,
        counts_errors: false,
        total_err: 0,
        first_error: 0,
        zone_resets: 0,
        steadystate: None,
        logs: Default::default(),
        log: None,
        iolog: None,
        device_time: 0,
        charts: true,
    }
}

/// Records one completed I/O of `bytes` in `dir` at `at` after the start.
pub fn io(job: &mut JobResult, dir: DataDir, bytes: u64, slat: Option<u64>, clat: u64, at: u64) {
    io_prio(job, dir, bytes, slat, clat, IoPrio::NONE, at);
}

/// Like [`io`] with an explicit priority.
pub fn io_prio(
    job: &mut JobResult,
    dir: DataDir,
    bytes: u64,
    slat: Option<u64>,
    clat: u64,
    prio: IoPrio,
    at: u64,
) {
    job.dirs[dir as usize].record(bytes, slat, clat, prio, at);
}

pub fn rt(level: u8) -> IoPrio {
    IoPrio::new(IoPrioClass::Rt, level).unwrap()
}

pub fn be(level: u8) -> IoPrio {
    IoPrio::new(IoPrioClass::Be, level).unwrap()
}

/// A simulated run of `jobs` lasting `duration`, on a device named "sim0".
pub fn report(jobs: Vec<JobResult>, duration: u64) -> RunReport {
    RunReport {
        engine: "sim".into(),
        seed: Some(42),
        policy: "mq-deadline".into(),
        tunables: vec![Parameter {
            name: "read_expire".into(),
            value: "500".into(),
            unit: "ms".into(),
            note: "kernel default".into(),
        }],
        device: "hdd-7200".into(),
        device_parameters: vec![Parameter {
            name: "rpm".into(),
            value: "7200".into(),
            unit: String::new(),
            note: "given".into(),
        }],
        jobs,
        disk: DiskUtil {
            name: "sim0".into(),
            read_ios: 1000,
            write_ios: 10,
            read_merges: 2,
            write_merges: 1,
            read_ticks: 1500,
            write_ticks: 20,
            in_queue: 1520,
            util: 75.5,
        },
        device_counters: vec![("seeks".into(), 990.0)],
        notes: vec!["job.fio:3: note: thread: has no effect in simulation".into()],
        duration,
        started_ms: None,
        global_options: Vec::new(),
    }
}

/// 1000 reads of 4 KiB over 2 s, one every 2 ms, with clat 1..=1000 ns (values the histogram
/// holds exactly) and slat 100 ns; iodepth samples all at depth 1.
pub fn exact_reader() -> JobResult {
    let mut job = job("reader", 0, 2 * SECOND);
    for i in 0..1000u64 {
        io(&mut job, DataDir::Read, 4096, Some(100), i + 1, i * 2 * MS);
        job.iodepth_levels[0] += 1;
    }
    job
}

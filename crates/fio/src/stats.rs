//! Measurements, recorded by the simulator and the real engine alike: latency distributions,
//! per-direction counters and bandwidth/IOPS time series.

use crate::job::{DataDir, JobSpec};
use hdrhistogram::Histogram;
use iosched_core::{IoPrio, Nanos};

/// Highest latency a histogram resolves: one hour. Longer samples are clamped to it (and still
/// counted exactly in min/max/mean).
pub const LATENCY_NS_MAX: u64 = 3_600 * 1_000_000_000;

/// Significant decimal digits kept by latency histograms: 0.1% relative error, finer than fio's
/// own log-linear histogram (about 1.5%).
pub const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

/// Count, min, max, mean and sum of squared deviations of a stream of samples, kept as fio
/// keeps them (Welford's running update), so that mean and deviation need no second pass.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moments {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample (0 without samples).
    pub min: u64,
    /// Largest sample (0 without samples).
    pub max: u64,
    /// Mean of the samples.
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
}

impl Moments {
    /// Adds one sample.
    pub fn record(&mut self, value: u64) {
        if self.count == 0 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.count += 1;
        let delta = value as f64 - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (value as f64 - self.mean);
    }

    /// Pools `other`'s samples with these (Chan's parallel update).
    pub fn merge(&mut self, other: &Moments) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        let total = self.count + other.count;
        let delta = other.mean - self.mean;
        self.m2 +=
            other.m2 + delta * delta * (self.count as f64 * other.count as f64) / total as f64;
        self.mean += delta * other.count as f64 / total as f64;
        self.count = total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Sample standard deviation, as fio reports it (0 with fewer than two samples).
    pub fn stddev(&self) -> f64 {
        if self.count < 2 {
            0.0
        } else {
            (self.m2 / (self.count - 1) as f64).sqrt()
        }
    }
}

/// A latency distribution: exact count, min, max, mean and standard deviation ([`Moments`]),
/// and an HDR histogram for percentiles. The histogram is allocated on the first sample.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    histogram: Option<Box<Histogram<u64>>>,
    moments: Moments,
}

impl Latency {
    /// An empty distribution.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one sample of `nanos`.
    pub fn record(&mut self, nanos: u64) {
        let histogram = self.histogram.get_or_insert_with(|| {
            Box::new(
                Histogram::new_with_bounds(1, LATENCY_NS_MAX, LATENCY_SIGNIFICANT_DIGITS)
                    .expect("static histogram bounds are valid"),
            )
        });
        histogram.saturating_record(nanos.clamp(1, LATENCY_NS_MAX));
        self.moments.record(nanos);
    }

    /// Adds every sample of `other` (for group reporting).
    pub fn merge(&mut self, other: &Latency) {
        if other.moments.count == 0 {
            return;
        }
        if self.moments.count == 0 {
            *self = other.clone();
            return;
        }
        let histogram = self.histogram.as_mut().expect("non-empty has a histogram");
        let theirs = other.histogram.as_ref().expect("non-empty has a histogram");
        histogram.add(theirs.as_ref()).expect("same bounds");
        self.moments.merge(&other.moments);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.moments.count
    }

    /// Smallest sample (0 when empty).
    pub fn min(&self) -> u64 {
        self.moments.min
    }

    /// Largest sample (0 when empty).
    pub fn max(&self) -> u64 {
        self.moments.max
    }

    /// Mean (0 when empty).
    pub fn mean(&self) -> f64 {
        self.moments.mean
    }

    /// Sample standard deviation, as fio reports it (0 with fewer than two samples).
    pub fn stddev(&self) -> f64 {
        self.moments.stddev()
    }

    /// The value at `percent` (0..=100), from the histogram; 0 when empty.
    pub fn percentile(&self, percent: f64) -> u64 {
        match &self.histogram {
            Some(histogram) => histogram
                .value_at_quantile(percent / 100.0)
                .min(self.moments.max),
            None => 0,
        }
    }

    /// Fraction of samples at or below `nanos` (0 when empty).
    pub fn fraction_at_or_below(&self, nanos: u64) -> f64 {
        match &self.histogram {
            Some(histogram) if self.moments.count > 0 => {
                histogram.count_between(0, nanos.min(LATENCY_NS_MAX)) as f64
                    / histogram.len() as f64
            }
            _ => 0.0,
        }
    }

    /// Number of samples below `nanos`, counting only histogram buckets that lie wholly below
    /// it: a sample in the same bucket as `nanos` (at most 0.1% under it) counts as not below,
    /// so a sample of exactly `nanos` never does. All samples for `nanos` past the histogram's
    /// range.
    pub fn count_below(&self, nanos: u64) -> u64 {
        let Some(histogram) = &self.histogram else {
            return 0;
        };
        if nanos > LATENCY_NS_MAX {
            return self.moments.count;
        }
        match histogram.lowest_equivalent(nanos) {
            0 => 0,
            lowest => histogram.count_between(0, lowest - 1),
        }
    }

    /// The distribution as (value, cumulative fraction) steps, one per populated histogram
    /// bucket, for drawing CDFs.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let Some(histogram) = &self.histogram else {
            return Vec::new();
        };
        let total = histogram.len() as f64;
        let mut seen = 0u64;
        histogram
            .iter_recorded()
            .map(|bucket| {
                seen += bucket.count_since_last_iteration();
                (
                    histogram.highest_equivalent(bucket.value_iterated_to()),
                    seen as f64 / total,
                )
            })
            .collect()
    }
}

/// Bytes and I/Os completed per fixed window of time, from the start of measurement.
#[derive(Clone, Debug)]
pub struct TimeSeries {
    /// Window length.
    pub interval: Nanos,
    /// Bytes completed in each window.
    pub bytes: Vec<u64>,
    /// I/Os completed in each window.
    pub ios: Vec<u64>,
}

/// fio's default averaging window for bandwidth and IOPS statistics (`bw_avg_time`,
/// `iops_avg_time`): 500 ms.
pub const DEFAULT_SAMPLE_INTERVAL: Nanos = 500_000_000;

/// Upper bound on windows kept, so a very long run cannot grow a series without limit: at the
/// default 500 ms window this covers 24 hours. Later samples fold into the last window.
pub const TIME_SERIES_WINDOWS_MAX: usize = 172_800;

impl TimeSeries {
    /// An empty series with windows of `interval`.
    pub fn new(interval: Nanos) -> Self {
        assert!(interval > 0);
        TimeSeries {
            interval,
            bytes: Vec::new(),
            ios: Vec::new(),
        }
    }

    /// Counts an I/O of `bytes` completed `since_start` after measurement began.
    pub fn record(&mut self, since_start: Nanos, bytes: u64) {
        let window = ((since_start / self.interval) as usize).min(TIME_SERIES_WINDOWS_MAX - 1);
        if self.bytes.len() <= window {
            self.bytes.resize(window + 1, 0);
            self.ios.resize(window + 1, 0);
        }
        self.bytes[window] += bytes;
        self.ios[window] += 1;
    }

    /// Pads the series with empty windows up to `duration` (so idle periods show as zero).
    pub fn extend_to(&mut self, duration: Nanos) {
        let windows = ((duration / self.interval) as usize).min(TIME_SERIES_WINDOWS_MAX);
        if self.bytes.len() < windows {
            self.bytes.resize(windows, 0);
            self.ios.resize(windows, 0);
        }
    }

    /// Bandwidth per complete window in bytes/s.
    pub fn bandwidth_samples(&self, duration: Nanos) -> Vec<f64> {
        let complete = self.complete_windows(duration);
        let per_second = 1e9 / self.interval as f64;
        self.bytes[..complete]
            .iter()
            .map(|&b| b as f64 * per_second)
            .collect()
    }

    /// IOPS per complete window.
    pub fn iops_samples(&self, duration: Nanos) -> Vec<f64> {
        let complete = self.complete_windows(duration);
        let per_second = 1e9 / self.interval as f64;
        self.ios[..complete]
            .iter()
            .map(|&n| n as f64 * per_second)
            .collect()
    }

    fn complete_windows(&self, duration: Nanos) -> usize {
        ((duration / self.interval) as usize).min(self.bytes.len())
    }
}

/// Everything measured for one data direction of one job.
#[derive(Clone, Debug)]
pub struct DirStats {
    /// Bytes completed.
    pub io_bytes: u64,
    /// I/Os completed.
    pub total_ios: u64,
    /// I/Os that transferred less than asked.
    pub short_ios: u64,
    /// I/Os dropped.
    pub drop_ios: u64,
    /// I/Os still queued or in the device when the runtime ended (counted in `total_ios`
    /// when they completed after it, as fio waits for them).
    pub queued_at_end: u64,
    /// How long the oldest of them had waited when the runtime ended.
    pub oldest_queued_at_end: Nanos,
    /// Submission latency: from the I/O's creation until the scheduler took it. Only async
    /// engines report it, as fio does; for sync engines that wait is part of `clat`.
    pub slat: Latency,
    /// Completion latency: from submission until completion.
    pub clat: Latency,
    /// Total latency: from creation until completion.
    pub lat: Latency,
    /// Completion latency by I/O priority, for fio's `prios` array.
    pub prio_clat: Vec<(IoPrio, Latency)>,
    /// Completions over time.
    pub series: TimeSeries,
}

impl DirStats {
    /// Empty statistics with time-series windows of `interval`.
    pub fn new(interval: Nanos) -> Self {
        DirStats {
            io_bytes: 0,
            total_ios: 0,
            short_ios: 0,
            drop_ios: 0,
            queued_at_end: 0,
            oldest_queued_at_end: 0,
            slat: Latency::new(),
            clat: Latency::new(),
            lat: Latency::new(),
            prio_clat: Vec::new(),
            series: TimeSeries::new(interval),
        }
    }

    /// Records one completed I/O. `slat` is `None` for sync engines.
    pub fn record(
        &mut self,
        bytes: u64,
        slat: Option<Nanos>,
        clat: Nanos,
        prio: IoPrio,
        since_start: Nanos,
    ) {
        self.io_bytes += bytes;
        self.total_ios += 1;
        if let Some(slat) = slat {
            self.slat.record(slat);
        }
        self.clat.record(clat);
        self.lat.record(clat + slat.unwrap_or(0));
        match self.prio_clat.iter_mut().find(|(p, _)| *p == prio) {
            Some((_, latency)) => latency.record(clat),
            None => {
                let mut latency = Latency::new();
                latency.record(clat);
                self.prio_clat.push((prio, latency));
                self.prio_clat.sort_by_key(|(p, _)| *p);
            }
        }
        self.series.record(since_start, bytes);
    }

    /// Counts an I/O that was still waiting when the runtime ended, `waited` after it was
    /// issued.
    pub fn count_queued_at_end(&mut self, waited: Nanos) {
        self.queued_at_end += 1;
        self.oldest_queued_at_end = self.oldest_queued_at_end.max(waited);
    }

    /// I/Os that completed within the runtime.
    pub fn completed_in_runtime(&self) -> u64 {
        self.total_ios.saturating_sub(self.queued_at_end)
    }

    /// Whether the direction was starved: it had I/O waiting when the runtime ended and none
    /// completed within it.
    pub fn starved(&self) -> bool {
        self.queued_at_end > 0 && self.completed_in_runtime() == 0
    }

    /// Adds `other` into this (group reporting).
    pub fn merge(&mut self, other: &DirStats) {
        self.io_bytes += other.io_bytes;
        self.total_ios += other.total_ios;
        self.short_ios += other.short_ios;
        self.drop_ios += other.drop_ios;
        self.queued_at_end += other.queued_at_end;
        self.oldest_queued_at_end = self.oldest_queued_at_end.max(other.oldest_queued_at_end);
        self.slat.merge(&other.slat);
        self.clat.merge(&other.clat);
        self.lat.merge(&other.lat);
        for (prio, latency) in &other.prio_clat {
            match self.prio_clat.iter_mut().find(|(p, _)| p == prio) {
                Some((_, mine)) => mine.merge(latency),
                None => self.prio_clat.push((*prio, latency.clone())),
            }
        }
        self.prio_clat.sort_by_key(|(p, _)| *p);
        if self.series.bytes.len() < other.series.bytes.len() {
            self.series.bytes.resize(other.series.bytes.len(), 0);
            self.series.ios.resize(other.series.ios.len(), 0);
        }
        for (window, (&bytes, &ios)) in other.series.bytes.iter().zip(&other.series.ios).enumerate()
        {
            self.series.bytes[window] += bytes;
            self.series.ios[window] += ios;
        }
    }
}

/// fio's `iodepth_level` buckets: 1, 2, 4, 8, 16, 32, >=64.
pub const IODEPTH_LEVELS: usize = 7;

/// Index of the `iodepth_level` bucket for `depth` I/Os in flight.
pub fn iodepth_bucket(depth: u32) -> usize {
    match depth {
        0..=1 => 0,
        2..=3 => 1,
        4..=7 => 2,
        8..=15 => 3,
        16..=31 => 4,
        32..=63 => 5,
        _ => 6,
    }
}

/// One completed I/O, as fio's log files record it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoSample {
    /// Completion time since measurement started.
    pub at: Nanos,
    /// Direction.
    pub dir: DataDir,
    /// Bytes transferred.
    pub bytes: u64,
    /// Offset within the device.
    pub offset: u64,
    /// The I/O's priority.
    pub prio: IoPrio,
    /// Submission latency (async engines only).
    pub slat: Option<Nanos>,
    /// Completion latency.
    pub clat: Nanos,
}

/// The log files a job asked for (`write_lat_log`, `write_bw_log`, `write_iops_log`) and how.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogRequest {
    /// Prefix for `PREFIX_lat.N.log`, `_clat` and `_slat`.
    pub lat: Option<String>,
    /// Prefix for `PREFIX_bw.N.log`.
    pub bw: Option<String>,
    /// Prefix for `PREFIX_iops.N.log`.
    pub iops: Option<String>,
    /// Averaging window in ms; 0 logs every I/O's latency and bandwidth/IOPS per 500 ms.
    pub avg_msec: u32,
    /// Include offsets (`log_offset`).
    pub offset: bool,
    /// Log raw ioprio values (`log_prio`).
    pub prio: bool,
    /// fio's 1-based job number, in the file names.
    pub job_number: u32,
}

impl LogRequest {
    /// Whether any log is wanted.
    pub fn any(&self) -> bool {
        self.lat.is_some() || self.bw.is_some() || self.iops.is_some()
    }
}

/// Results of one job clone.
#[derive(Clone, Debug)]
pub struct JobResult {
    /// Job name.
    pub name: String,
    /// Reporting group.
    pub group_id: u32,
    /// Clone index.
    pub clone: u32,
    /// The job's `numjobs`.
    pub numjobs: u32,
    /// Whether the group reports its jobs as one.
    pub group_reporting: bool,
    /// Options as written, for "job options".
    pub options: Vec<(String, String)>,
    /// Percentiles to report.
    pub percentile_list: Vec<f64>,
    /// Read, write and trim statistics.
    pub dirs: [DirStats; 3],
    /// Flush (fsync) latency.
    pub sync: Latency,
    /// Measured run time (after `ramp_time`).
    pub runtime: Nanos,
    /// When measurement started, on the engine's clock.
    pub measure_start: Nanos,
    /// Samples of I/Os in flight at each submission, by [`iodepth_bucket`].
    pub iodepth_levels: [u64; IODEPTH_LEVELS],
    /// Non-zero if the job failed (fio's `error`).
    pub error: i32,
    /// Why, when the driver ended the job (fio's message on stderr, e.g. `rate_min` not met).
    pub error_message: Option<String>,
    /// Whether `continue_on_error` is set: fio then reports `total_err` and `first_error`.
    pub counts_errors: bool,
    /// Non-fatal errors the job went on after (fio's `total_err_count`).
    pub total_err: u64,
    /// The first of them, errno (fio's `first_error`).
    pub first_error: i32,
    /// Zones reset under `zonemode=zbd` (fio's `nr_zone_resets`).
    pub zone_resets: u64,
    /// Steady-state detection (`steadystate`), its window and verdict, if the job asked.
    pub steadystate: Option<crate::steady::SteadyTracker>,
    /// Log files asked for.
    pub logs: LogRequest,
    /// The log files being written, when the engine was asked to write them
    /// ([`JobResult::open_logs`]); `None` otherwise.
    pub log: Option<crate::output::logs::LogStream>,
    /// Time the device spent on this job's measured I/O: each request's dispatch to
    /// completion, shared by bytes among the I/Os merged into it. On a device that serves one
    /// command at a time this is the job's disk time, the share seed 003's controllers divide.
    pub device_time: Nanos,
}

impl JobResult {
    /// Empty results for `spec`, which is job number `job_number` (1-based, in file order) in
    /// the names of its log files.
    pub fn for_job(spec: &JobSpec, job_number: u32) -> Self {
        JobResult {
            name: spec.name.clone(),
            group_id: spec.group_id,
            clone: spec.clone,
            numjobs: spec.numjobs,
            group_reporting: spec.group_reporting,
            options: spec.options.clone(),
            percentile_list: spec.percentile_list.clone(),
            dirs: std::array::from_fn(|_| DirStats::new(DEFAULT_SAMPLE_INTERVAL)),
            sync: Latency::new(),
            runtime: 0,
            measure_start: 0,
            iodepth_levels: [0; IODEPTH_LEVELS],
            error: 0,
            error_message: None,
            counts_errors: spec.errors.reports_counts(),
            total_err: 0,
            first_error: 0,
            zone_resets: 0,
            steadystate: None,
            logs: LogRequest {
                lat: spec.write_lat_log.clone(),
                bw: spec.write_bw_log.clone(),
                iops: spec.write_iops_log.clone(),
                avg_msec: spec.log_avg_msec,
                offset: spec.log_offset,
                prio: spec.log_prio,
                job_number,
            },
            log: None,
            device_time: 0,
        }
    }

    /// Forgets what was measured so far and counts from `now` on (fio's `reset_all_stats`,
    /// as the `latency_target` search does before its final run at the depth it found).
    pub fn reset_stats(&mut self, now: Nanos) {
        self.dirs = std::array::from_fn(|_| DirStats::new(DEFAULT_SAMPLE_INTERVAL));
        self.sync = Latency::new();
        self.iodepth_levels = [0; IODEPTH_LEVELS];
        self.measure_start = now;
    }

    /// Opens the log files the job asked for (none when it asked for none), relative to the
    /// current directory as fio writes them, so that they are written as the job runs. `spec`
    /// gives the block sizes for the rate logs' block size column. An error names the option
    /// and the file.
    pub fn open_logs(&mut self, spec: &JobSpec) -> Result<(), String> {
        if !self.logs.any() {
            return Ok(());
        }
        let fixed_bs = std::array::from_fn(|dir| {
            let bs = &spec.bs[dir];
            if bs.min() == bs.max() {
                bs.min()
            } else {
                0
            }
        });
        self.log = Some(crate::output::logs::LogStream::open(&self.logs, fixed_bs)?);
        Ok(())
    }

    /// Records one completed I/O (not a flush) as fio measures it: in its direction's
    /// statistics and, when the job asked for logs, as a sample. `since_start` is the completion
    /// time after measurement began; `slat` is `None` for sync engines.
    #[allow(clippy::too_many_arguments)]
    pub fn record_io(
        &mut self,
        dir: DataDir,
        bytes: u64,
        offset: u64,
        prio: IoPrio,
        slat: Option<Nanos>,
        clat: Nanos,
        since_start: Nanos,
    ) {
        self.dirs[dir as usize].record(bytes, slat, clat, prio, since_start);
        if let Some(log) = &self.log {
            log.record(&IoSample {
                at: since_start,
                dir,
                bytes,
                offset,
                prio,
                slat,
                clat,
            });
        }
    }

    /// Ends measurement at `runtime` after it began: pads the time series so that idle
    /// windows at the end show as zero.
    pub fn finish(&mut self, runtime: Nanos) {
        self.runtime = runtime;
        if let Some(log) = &self.log {
            log.finish(runtime);
        }
        for dir in &mut self.dirs {
            dir.series.extend_to(runtime);
        }
    }

    /// Statistics of direction `dir`.
    pub fn dir(&self, dir: DataDir) -> &DirStats {
        &self.dirs[dir as usize]
    }
}

//! What fio reports on: one entry per job, or one per reporting group when `group_reporting` is
//! set, plus the per-group totals of "Run status group N".
//!
//! fio merges the members of a group in a particular way, and we follow it so that numbers mean
//! the same as fio's:
//! - latency distributions (slat, clat, lat, per priority, sync) are merged sample by sample;
//! - bytes and I/O counts add up; a direction's runtime is the longest member's;
//!   `job_runtime` is the sum of the members' run times;
//! - the bandwidth and IOPS statistics (`bw_min`, `bw_mean`, `iops_max`, ...) are computed per
//!   member from its own time series and then *added* field by field (fio's "pure sum"): the
//!   group's `bw_mean` is the sum of the members' means, i.e. the group's aggregate bandwidth,
//!   and `bw_samples` the total number of windows.
//!
//! Jobs are merged when they are adjacent, belong to the same group and all set
//! `group_reporting`, which is how fio groups jobs whenever `group_reporting` is set
//! consistently (fio's own rule differs only for mixes of jobs with and without it in one group,
//! where fio 3.33 misbehaves).

use crate::job::DataDir;
use crate::output::format::{runtime_ms_ceil, runtime_ms_floor};
use crate::report::RunReport;
use crate::stats::{JobResult, Moments, IODEPTH_LEVELS};

/// Summary of per-window rates, fio's `io_stat` for bandwidth and IOPS: integer samples with
/// min, max, mean and the sum of squared deviations (Welford's M2).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RateStats {
    /// Smallest sample (0 without samples).
    pub min: u64,
    /// Largest sample (0 without samples).
    pub max: u64,
    /// Mean of the samples.
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
    /// Number of samples.
    pub samples: u64,
}

impl RateStats {
    /// Statistics of `rates`, accumulated as fio does (Welford's running mean and M2).
    pub fn from_rates(rates: impl IntoIterator<Item = u64>) -> Self {
        let mut moments = Moments::default();
        for rate in rates {
            moments.record(rate);
        }
        Self::from_moments(moments)
    }

    /// The statistics of samples accumulated in `moments`.
    pub fn from_moments(moments: Moments) -> Self {
        RateStats {
            min: moments.min,
            max: moments.max,
            mean: moments.mean,
            m2: moments.m2,
            samples: moments.count,
        }
    }

    /// Sample standard deviation (0 with fewer than two samples).
    pub fn stddev(&self) -> f64 {
        if self.samples < 2 {
            0.0
        } else {
            (self.m2 / (self.samples - 1) as f64).sqrt()
        }
    }

    /// Adds a group member's statistics field by field, as fio's `sum_stat(.., pure_sum)`
    /// does for group reporting: mins, maxes, means, M2s and sample counts all add.
    pub fn add_member(&mut self, other: &RateStats) {
        if other.samples == 0 {
            return;
        }
        if self.samples == 0 {
            *self = *other;
            return;
        }
        self.min += other.min;
        self.max += other.max;
        self.mean += other.mean;
        self.m2 += other.m2;
        self.samples += other.samples;
    }
}

/// One reported entry: a job, or the merged jobs of a group under `group_reporting`.
#[derive(Clone, Debug)]
pub struct ReportedJob {
    /// The merged results. Name and group are the first member's, options the last member's
    /// (as fio shows them), `error` the first non-zero one.
    pub result: JobResult,
    /// Number of jobs merged (fio's `jobs=N`).
    pub members: u32,
    /// Per-direction runtime in ms: the longest member's; 0 for a direction without I/O.
    pub runtime_ms: [u64; 3],
    /// Sum of the members' run times in ms (fio's `job_runtime`).
    pub job_runtime_ms: u64,
    /// Bandwidth statistics per direction in KiB/s, summed over members.
    pub bandwidth_kib: [RateStats; 3],
    /// IOPS statistics per direction, summed over members.
    pub iops: [RateStats; 3],
    /// Queue depth the job ran at (fio's `latency_depth`): its `iodepth` option, default 1.
    pub latency_depth: u32,
}

impl ReportedJob {
    /// The entry for one job.
    pub fn single(job: &JobResult) -> Self {
        let runtime_ms = DataDir::ALL.map(|dir| {
            if job.dir(dir).total_ios > 0 {
                runtime_ms_ceil(job.runtime)
            } else {
                0
            }
        });
        let rates = DataDir::ALL.map(|dir| job.dir(dir).series.rate_moments(job.runtime));
        ReportedJob {
            result: job.clone(),
            members: 1,
            runtime_ms,
            job_runtime_ms: runtime_ms_floor(job.runtime),
            bandwidth_kib: rates.map(|(bandwidth, _)| RateStats::from_moments(bandwidth)),
            iops: rates.map(|(_, iops)| RateStats::from_moments(iops)),
            latency_depth: iodepth_option(job),
        }
    }

    /// Merges another member of the same group into this entry.
    pub fn add_member(&mut self, job: &JobResult) {
        assert_eq!(job.group_id, self.result.group_id, "members share a group");
        let member = ReportedJob::single(job);
        for dir in DataDir::ALL {
            let index = dir as usize;
            self.result.dirs[index].merge(job.dir(dir));
            self.runtime_ms[index] = self.runtime_ms[index].max(member.runtime_ms[index]);
            self.bandwidth_kib[index].add_member(&member.bandwidth_kib[index]);
            self.iops[index].add_member(&member.iops[index]);
        }
        self.result.sync.merge(&job.sync);
        for (mine, theirs) in self
            .result
            .iodepth_levels
            .iter_mut()
            .zip(&job.iodepth_levels)
        {
            *mine += theirs;
        }
        self.result.runtime = self.result.runtime.max(job.runtime);
        if self.result.error == 0 {
            self.result.error = job.error;
        }
        self.result.counts_errors |= job.counts_errors;
        self.result.total_err += job.total_err;
        self.result.zone_resets += job.zone_resets;
        if self.result.first_error == 0 {
            self.result.first_error = job.first_error;
        }
        self.result.options = job.options.clone();
        self.job_runtime_ms += member.job_runtime_ms;
        self.latency_depth = member.latency_depth;
        self.members += 1;
    }

    /// Total I/Os over read, write and trim (fio's `ddir_rw_sum(total_io_u)`).
    pub fn total_ios(&self) -> u64 {
        self.result.dirs.iter().map(|d| d.total_ios).sum()
    }

    /// Percent of submissions per `iodepth_level` bucket (1, 2, 4, 8, 16, 32, >=64). A
    /// non-empty bucket shows at least 0.1, as in fio. The divisor is the number of depth
    /// samples, so the buckets add up to 100 (fio divides by completed I/Os).
    pub fn iodepth_percentages(&self) -> [f64; IODEPTH_LEVELS] {
        let total: u64 = self.result.iodepth_levels.iter().sum();
        self.result.iodepth_levels.map(|count| {
            if total == 0 {
                return 0.0;
            }
            let percent = count as f64 * 100.0 / total as f64;
            if count > 0 && percent < 0.1 {
                0.1
            } else {
                percent
            }
        })
    }

    /// Percent of I/Os per fio latency bucket, from the completion latency of all three
    /// directions (fio buckets clat, issue to completion), counted exactly as I/Os complete. A
    /// non-empty bucket shows at least 0.01, as in fio.
    pub fn latency_percentages(&self) -> LatencyBuckets {
        let total = self.total_ios();
        let percent = |bucket: usize| {
            let count: u64 = self
                .result
                .dirs
                .iter()
                .map(|d| d.clat_buckets[bucket])
                .sum();
            if total == 0 {
                return 0.0;
            }
            let percent = count as f64 * 100.0 / total as f64;
            if count > 0 && percent < 0.01 {
                0.01
            } else {
                percent
            }
        };
        LatencyBuckets {
            nsec: std::array::from_fn(percent),
            usec: std::array::from_fn(|bucket| percent(10 + bucket)),
            msec: std::array::from_fn(|bucket| percent(20 + bucket)),
        }
    }
}

/// fio's nanosecond latency buckets: label and exclusive upper bound in ns.
pub const LATENCY_BUCKETS_NS: [(&str, u64); 10] = [
    ("2", 2),
    ("4", 4),
    ("10", 10),
    ("20", 20),
    ("50", 50),
    ("100", 100),
    ("250", 250),
    ("500", 500),
    ("750", 750),
    ("1000", 1_000),
];

/// fio's microsecond latency buckets: label (us) and exclusive upper bound in ns.
pub const LATENCY_BUCKETS_US: [(&str, u64); 10] = [
    ("2", 2_000),
    ("4", 4_000),
    ("10", 10_000),
    ("20", 20_000),
    ("50", 50_000),
    ("100", 100_000),
    ("250", 250_000),
    ("500", 500_000),
    ("750", 750_000),
    ("1000", 1_000_000),
];

/// fio's millisecond latency buckets: label (ms) and exclusive upper bound in ns; the last
/// holds everything from 2 s up.
pub const LATENCY_BUCKETS_MS: [(&str, u64); 12] = [
    ("2", 2_000_000),
    ("4", 4_000_000),
    ("10", 10_000_000),
    ("20", 20_000_000),
    ("50", 50_000_000),
    ("100", 100_000_000),
    ("250", 250_000_000),
    ("500", 500_000_000),
    ("750", 750_000_000),
    ("1000", 1_000_000_000),
    ("2000", 2_000_000_000),
    (">=2000", u64::MAX),
];

/// Percent of I/Os in each of fio's latency buckets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyBuckets {
    /// Under 1 us, by [`LATENCY_BUCKETS_NS`].
    pub nsec: [f64; 10],
    /// 1 us to 1 ms, by [`LATENCY_BUCKETS_US`].
    pub usec: [f64; 10],
    /// From 1 ms, by [`LATENCY_BUCKETS_MS`].
    pub msec: [f64; 12],
}

/// The job's `iodepth` option as fio keeps it (fio reports it even for sync engines).
fn iodepth_option(job: &JobResult) -> u32 {
    job.options
        .iter()
        .rev()
        .find(|(name, _)| name == "iodepth")
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(1)
}

/// The entries fio would report for `report`, in job order.
pub fn reported_jobs(report: &RunReport) -> Vec<ReportedJob> {
    let mut entries: Vec<ReportedJob> = Vec::with_capacity(report.jobs.len());
    for job in &report.jobs {
        match entries.last_mut() {
            Some(entry)
                if job.group_reporting
                    && entry.result.group_reporting
                    && entry.result.group_id == job.group_id =>
            {
                entry.add_member(job)
            }
            _ => entries.push(ReportedJob::single(job)),
        }
    }
    entries
}

/// `amount` per second over `runtime_ms`, truncated as fio's integer arithmetic does (in 128
/// bits, so that large byte counts times 1000 cannot overflow); 0 for a zero runtime.
pub fn per_second(amount: u64, runtime_ms: u64) -> u64 {
    if runtime_ms == 0 {
        return 0;
    }
    (amount as u128 * 1000 / runtime_ms as u128).min(u64::MAX as u128) as u64
}

/// The totals of group `group_id` among `groups` (as [`group_runs`] returns them).
///
/// # Panics
/// If the group is not there: every entry's group is.
pub fn group_of(groups: &[GroupRun], group_id: u32) -> &GroupRun {
    let index = groups
        .binary_search_by_key(&group_id, |g| g.group_id)
        .expect("every entry's group has totals");
    &groups[index]
}

fn group_of_mut(groups: &mut [GroupRun], group_id: u32) -> &mut GroupRun {
    let index = groups
        .binary_search_by_key(&group_id, |g| g.group_id)
        .expect("groups are made from the entries");
    &mut groups[index]
}

/// One direction of a reporting group's totals ("Run status group N").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupDir {
    /// Bytes moved by all entries of the group.
    pub io_bytes: u64,
    /// Shortest entry runtime in ms (0 when no entry ran this direction).
    pub runtime_ms_min: u64,
    /// Longest entry runtime in ms (0 when no entry ran this direction).
    pub runtime_ms_max: u64,
    /// Slowest entry's bandwidth in bytes/s.
    pub bandwidth_min: u64,
    /// Fastest entry's bandwidth in bytes/s.
    pub bandwidth_max: u64,
    /// Aggregate bandwidth in bytes/s: all bytes over the longest runtime.
    pub bandwidth_aggregate: u64,
}

/// A reporting group's totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRun {
    /// The group id.
    pub group_id: u32,
    /// Read, write and trim totals.
    pub dirs: [GroupDir; 3],
}

impl GroupRun {
    /// Totals of direction `dir`.
    pub fn dir(&self, dir: DataDir) -> &GroupDir {
        &self.dirs[dir as usize]
    }

    /// An entry's mean bandwidth as a percentage of the group's aggregate (fio's `bw_agg` and
    /// `per=`): the mean is truncated to whole KiB/s first, as fio does, and the result capped
    /// at 100; 100 when the aggregate is at most 1 KiB/s.
    pub fn share_percent(&self, dir: DataDir, mean_kib: f64) -> f64 {
        let aggregate = self.dir(dir).bandwidth_aggregate;
        if aggregate <= 1024 {
            return 100.0;
        }
        let percent = mean_kib.trunc() * 100.0 / (aggregate as f64 / 1024.0);
        percent.min(100.0)
    }
}

/// Totals of every group that has entries, by ascending group id. (fio prints a block for
/// every id from 0 to the highest; ids are consecutive from 0 when they come from job files,
/// so the two agree, and a stray large id cannot make us allocate a block per unused id.)
pub fn group_runs(entries: &[ReportedJob]) -> Vec<GroupRun> {
    let mut ids: Vec<u32> = entries.iter().map(|e| e.result.group_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut groups: Vec<GroupRun> = ids
        .into_iter()
        .map(|group_id| GroupRun {
            group_id,
            dirs: [GroupDir::default(); 3],
        })
        .collect();
    for entry in entries {
        let group = group_of_mut(&mut groups, entry.result.group_id);
        for dir in DataDir::ALL {
            let index = dir as usize;
            let runtime_ms = entry.runtime_ms[index];
            if runtime_ms == 0 {
                continue;
            }
            let io_bytes = entry.result.dirs[index].io_bytes;
            let bandwidth = per_second(io_bytes, runtime_ms);
            let totals = &mut group.dirs[index];
            let first = totals.runtime_ms_max == 0;
            if first {
                totals.runtime_ms_min = runtime_ms;
                totals.bandwidth_min = bandwidth;
                totals.bandwidth_max = bandwidth;
            } else {
                totals.runtime_ms_min = totals.runtime_ms_min.min(runtime_ms);
                totals.bandwidth_min = totals.bandwidth_min.min(bandwidth);
                totals.bandwidth_max = totals.bandwidth_max.max(bandwidth);
            }
            totals.runtime_ms_max = totals.runtime_ms_max.max(runtime_ms);
            totals.io_bytes += io_bytes;
        }
    }
    for group in &mut groups {
        for totals in &mut group.dirs {
            if totals.runtime_ms_max > 0 {
                totals.bandwidth_aggregate = per_second(totals.io_bytes, totals.runtime_ms_max);
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{DirStats, Latency, TimeSeries, DEFAULT_SAMPLE_INTERVAL};

    // Proves the running statistics equal the textbook ones.
    #[test]
    fn rate_stats_mean_and_sample_deviation() {
        let stats = RateStats::from_rates([800, 2400, 1600]);
        assert_eq!((stats.min, stats.max, stats.samples), (800, 2400, 3));
        assert!((stats.mean - 1600.0).abs() < 1e-9);
        assert!((stats.stddev() - 800.0).abs() < 1e-9);
        assert_eq!(RateStats::from_rates([]), RateStats::default());
        assert_eq!(RateStats::from_rates([5]).stddev(), 0.0);
    }

    // Proves group members' statistics add field by field, as fio's pure sum does.
    #[test]
    fn rate_stats_add_members() {
        let mut group = RateStats::default();
        group.add_member(&RateStats::from_rates([100, 300]));
        group.add_member(&RateStats::default());
        group.add_member(&RateStats::from_rates([50]));
        assert_eq!((group.min, group.max, group.samples), (150, 350, 3));
        assert!((group.mean - 250.0).abs() < 1e-9);
    }

    // Proves samples come from whole windows with completions only, in KiB/s and IOPS.
    #[test]
    fn samples_skip_idle_and_partial_windows() {
        let mut series = TimeSeries::new(DEFAULT_SAMPLE_INTERVAL);
        series.record(0, 1024 * 1000, 1000);
        series.record(1_100_000_000, 4096, 1000);
        series.record(1_600_000_000, 4096, 1000); // in a window cut short by the runtime
        let runtime = 1_700_000_000;
        let (bandwidth, iops) = series.rate_moments(runtime);
        assert_eq!(
            RateStats::from_moments(bandwidth),
            RateStats::from_rates([2000, 8])
        );
        assert_eq!(RateStats::from_moments(iops), RateStats::from_rates([2, 2]));
        // The last window counts once the runtime covers it.
        let (bandwidth, _) = series.rate_moments(2_000_000_000);
        assert_eq!(
            RateStats::from_moments(bandwidth),
            RateStats::from_rates([2000, 8, 8])
        );
    }

    fn job(name: &str, group_id: u32, group_reporting: bool) -> JobResult {
        let mut job = JobResult {
            name: name.into(),
            group_id,
            clone: 0,
            numjobs: 1,
            group_reporting,
            options: Vec::new(),
            percentile_list: Vec::new(),
            dirs: [0, 1, 2].map(|_| DirStats::new(DEFAULT_SAMPLE_INTERVAL)),
            sync: Latency::default(),
            runtime: 1_000_000_000,
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
        };
        job.dirs[0].record(4096, None, 1000, Default::default(), 0);
        job
    }

    // Proves the buckets' labelled bounds are the ones samples are counted by.
    #[test]
    fn bucket_labels_match_the_counted_bounds() {
        let labelled: Vec<u64> = LATENCY_BUCKETS_NS
            .iter()
            .chain(&LATENCY_BUCKETS_US)
            .chain(&LATENCY_BUCKETS_MS)
            .map(|&(_, upper)| upper)
            .collect();
        assert_eq!(labelled, crate::stats::LATENCY_BUCKET_BOUNDS);
    }

    // Proves samples exactly on a bucket edge land above it, as fio's exact counters put them,
    // and that the histogram counts below a value only the bins wholly below it.
    #[test]
    fn latency_buckets_put_edge_samples_above() {
        let mut entry = ReportedJob::single(&job("edges", 0, false)); // one read of 1000 ns
        let read = &mut entry.result.dirs[DataDir::Read as usize];
        for nanos in [250_000, 249_000, 2_000_000_000, 3_600_000_000_001] {
            read.record(4096, None, nanos, Default::default(), 0);
        }
        let clat = &read.clat;
        assert_eq!(clat.count_below(250_000), 2); // 1 us and 249 us
        assert_eq!(clat.count_below(249_000), 1); // 249 us's bin reaches 249.855 us
        assert_eq!(clat.count_below(0), 0);
        assert_eq!(clat.count_below(u64::MAX), 5);
        let buckets = entry.latency_percentages();
        assert_eq!(buckets.usec[1..6], [0.0; 5]);
        assert_eq!(buckets.usec[0], 20.0); // 1000 ns: [1 us, 2 us)
        assert_eq!(buckets.usec[6], 20.0); // 249 us: [100 us, 250 us)
        assert_eq!(buckets.usec[7], 20.0); // 250 us: [250 us, 500 us)
        assert_eq!(buckets.msec[10], 0.0);
        assert_eq!(buckets.msec[11], 40.0); // 2 s and beyond the histogram: >=2000 ms
        assert_eq!(buckets.nsec, [0.0; 10]);
    }

    // Proves which adjacent jobs merge: same group, group_reporting on both.
    #[test]
    fn entries_merge_adjacent_reporting_jobs_of_a_group() {
        let jobs = vec![
            job("a", 0, true),
            job("a", 0, true),
            job("b", 0, false),
            job("c", 1, true),
            job("d", 7, true),
            job("d", 7, true),
            job("d", 7, true),
        ];
        let report = RunReport {
            engine: String::new(),
            seed: None,
            policy: String::new(),
            tunables: Vec::new(),
            device: String::new(),
            device_parameters: Vec::new(),
            jobs,
            disk: Default::default(),
            device_counters: Vec::new(),
            notes: Vec::new(),
            duration: 1_000_000_000,
            started_ms: None,
            global_options: Vec::new(),
        };
        let entries = reported_jobs(&report);
        let shape: Vec<(&str, u32)> = entries
            .iter()
            .map(|e| (e.result.name.as_str(), e.members))
            .collect();
        assert_eq!(shape, [("a", 2), ("b", 1), ("c", 1), ("d", 3)]);
        assert_eq!(entries[3].total_ios(), 3);

        let groups = group_runs(&entries);
        let ids: Vec<u32> = groups.iter().map(|g| g.group_id).collect();
        assert_eq!(ids, [0, 1, 7]);
        assert_eq!(group_of(&groups, 7).dir(DataDir::Read).io_bytes, 3 * 4096);
        let read = groups[0].dir(DataDir::Read);
        assert_eq!(read.io_bytes, 3 * 4096);
        assert_eq!((read.bandwidth_min, read.bandwidth_max), (4096, 2 * 4096));
        assert_eq!(read.bandwidth_aggregate, 3 * 4096);
        assert_eq!(groups[0].dir(DataDir::Write), &GroupDir::default());
    }
}

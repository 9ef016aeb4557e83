//! Measurements, recorded by the simulator and the real engine alike: latency distributions,
//! per-direction counters and bandwidth/IOPS time series.

use crate::job::{DataDir, JobSpec};
use crate::prefetch::prefetch;
use iosched_core::{IoPrio, Nanos};

/// Highest latency a histogram resolves: one hour (the histogram's last bin ends at 2^42 ns,
/// 73 minutes). Longer samples count in its last bin (and exactly in min/max/mean).
pub const LATENCY_NS_MAX: u64 = 3_600 * 1_000_000_000;

/// Bits of a sample a histogram bin keeps: fio's `FIO_IO_U_PLAT_BITS`. Each power of two is
/// cut into 64 bins, so a bin is at most 1/64 (1.6%) of its values wide.
pub const PLAT_BITS: u32 = 6;

/// Bins per group (a power of two): fio's `FIO_IO_U_PLAT_VAL`.
pub const PLAT_VAL: usize = 1 << PLAT_BITS;

/// Groups of bins: fio's `FIO_IO_U_PLAT_GROUP_NR` is 29 (to 2^34 ns, 17 s); 37 reach 2^42 ns,
/// past an hour.
pub const PLAT_GROUPS: usize = 37;

/// Bins in all: fio's `FIO_IO_U_PLAT_NR`.
pub const PLAT_NR: usize = PLAT_GROUPS * PLAT_VAL;

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

/// fio's log-linear latency histogram (stat.c `plat_val_to_idx`, `plat_idx_to_val`), the one
/// its percentiles and json+ `bins` come from, grown to an hour. It holds counters only for the
/// groups (powers of two) between the smallest and largest sample's, 512 bytes a group, so a
/// job whose latencies span a few powers of two keeps a few kilobytes, and recording a sample
/// touches one counter.
#[derive(Clone, Debug, Default)]
pub struct PlatHistogram {
    /// The first group with counters.
    first_group: usize,
    /// Counters of the bins from `first_group`'s first on.
    bins: Vec<u64>,
}

impl PlatHistogram {
    /// Asks the CPU for the counter a sample of `nanos` would land in (see
    /// [`crate::prefetch`]).
    #[inline]
    pub(crate) fn prefetch(&self, nanos: u64) {
        let slot = Self::index(nanos).checked_sub(self.first_group << PLAT_BITS);
        match slot.and_then(|slot| self.bins.get(slot)) {
            Some(bin) => prefetch(bin),
            None => prefetch(&self.bins),
        }
    }

    /// The bin of `nanos` (fio's `plat_val_to_idx`); samples past the last bin count in it.
    pub fn index(nanos: u64) -> usize {
        let msb = 63u32.saturating_sub(nanos.leading_zeros());
        let index = if msb <= PLAT_BITS {
            nanos as usize
        } else {
            let error_bits = msb - PLAT_BITS;
            ((error_bits as usize + 1) << PLAT_BITS)
                + ((nanos >> error_bits) as usize & (PLAT_VAL - 1))
        };
        index.min(PLAT_NR - 1)
    }

    /// The value fio reports for bin `index`, the middle of its range (fio's
    /// `plat_idx_to_val`).
    pub fn value(index: usize) -> u64 {
        if index < PLAT_VAL << 1 {
            return index as u64;
        }
        let error_bits = (index >> PLAT_BITS) as u32 - 1;
        let base = 1u64 << (error_bits + PLAT_BITS);
        let k = (index % PLAT_VAL) as u64;
        base + (k << error_bits) + ((1u64 << error_bits) >> 1)
    }

    /// The smallest and largest values that fall in bin `index`.
    pub fn range(index: usize) -> (u64, u64) {
        if index < PLAT_VAL << 1 {
            return (index as u64, index as u64);
        }
        let error_bits = (index >> PLAT_BITS) as u32 - 1;
        let low = (1u64 << (error_bits + PLAT_BITS)) + (((index % PLAT_VAL) as u64) << error_bits);
        (low, low + (1u64 << error_bits) - 1)
    }

    /// Counts one sample.
    pub fn record(&mut self, nanos: u64) {
        self.add(Self::index(nanos), 1);
    }

    fn add(&mut self, index: usize, count: u64) {
        let group = index >> PLAT_BITS;
        if self.bins.is_empty() {
            self.first_group = group;
        }
        if group < self.first_group {
            let grow = (self.first_group - group) * PLAT_VAL;
            self.bins.splice(0..0, std::iter::repeat_n(0, grow));
            self.first_group = group;
        }
        let slot = index - (self.first_group << PLAT_BITS);
        if slot >= self.bins.len() {
            self.bins.resize((slot | (PLAT_VAL - 1)) + 1, 0);
        }
        self.bins[slot] += count;
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &PlatHistogram) {
        for (index, count) in other.bins() {
            self.add(index, count);
        }
    }

    /// The populated bins, ascending, as (bin index, samples).
    pub fn bins(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let first = self.first_group << PLAT_BITS;
        self.bins
            .iter()
            .enumerate()
            .filter(|(_, &count)| count > 0)
            .map(move |(slot, &count)| (first + slot, count))
    }
}

/// A latency distribution: exact count, min, max, mean and standard deviation ([`Moments`]),
/// and fio's histogram ([`PlatHistogram`]) for percentiles.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    histogram: PlatHistogram,
    moments: Moments,
}

impl Latency {
    /// An empty distribution.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one sample of `nanos`.
    pub fn record(&mut self, nanos: u64) {
        self.histogram.record(nanos);
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
        self.histogram.merge(&other.histogram);
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

    /// The value at `percent` (0..=100) as fio finds it (stat.c `calc_clat_percentiles`): the
    /// first bin at which the samples counted so far reach `percent` of all, reported as the
    /// bin's middle, but never past the largest sample. 0 when empty.
    pub fn percentile(&self, percent: f64) -> u64 {
        self.percentiles(&[percent])[0]
    }

    /// The values at each of `percents`, in their order, as [`Latency::percentile`] finds
    /// each, in one pass over the histogram: a report asks for fio's 17 (or a
    /// `percentile_list`) of every job, and a pass per value over a disk's histogram (a
    /// thousand bins) was most of a 1024-job report's cost.
    pub fn percentiles(&self, percents: &[f64]) -> Vec<u64> {
        let total = self.moments.count as f64;
        // A NaN is never reached, as no count is at least NaN: it stays at the largest sample.
        let mut order: Vec<usize> = (0..percents.len())
            .filter(|&at| !percents[at].is_nan())
            .collect();
        order.sort_by(|&a, &b| percents[a].total_cmp(&percents[b]));
        let mut values = vec![self.moments.max; percents.len()];
        let mut pending = order.iter().peekable();
        let mut seen = 0u64;
        for (index, count) in self.histogram.bins() {
            seen += count;
            while let Some(&&at) = pending.peek() {
                if (seen as f64) < percents[at] / 100.0 * total {
                    break;
                }
                values[at] = PlatHistogram::value(index)
                    .min(self.moments.max)
                    .max(self.moments.min);
                pending.next();
            }
            if pending.peek().is_none() {
                break;
            }
        }
        values
    }

    /// Number of samples below `nanos`, counting only histogram bins that lie wholly below
    /// it: a sample in the same bin as `nanos` (at most 1.6% under it) counts as not below, so
    /// a sample of exactly `nanos` never does. All samples for `nanos` past the histogram's
    /// range.
    pub fn count_below(&self, nanos: u64) -> u64 {
        if nanos > LATENCY_NS_MAX {
            return self.moments.count;
        }
        self.histogram
            .bins()
            .take_while(|&(index, _)| PlatHistogram::range(index).1 < nanos)
            .map(|(_, count)| count)
            .sum()
    }

    /// The populated histogram bins, ascending, as (value fio reports for the bin, samples):
    /// fio's json+ `bins`.
    pub fn bins(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.histogram
            .bins()
            .map(|(index, count)| (PlatHistogram::value(index), count))
    }

    /// The distribution as (value, cumulative fraction) steps, one per populated histogram
    /// bin (the bin's largest value, or the largest sample if smaller), for drawing CDFs.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let total = self.moments.count as f64;
        let mut seen = 0u64;
        self.histogram
            .bins()
            .map(|(index, count)| {
                seen += count;
                (
                    PlatHistogram::range(index).1.min(self.moments.max),
                    seen as f64 / total,
                )
            })
            .collect()
    }
}

/// Completions over time, in memory bounded whatever the run's length: fio's bandwidth and
/// IOPS samples (one per `bw_avg_time` window that moved bytes) kept as running statistics, as
/// fio's `add_stat_sample` keeps them, and a chart of bytes and I/Os per window that holds at
/// most [`TIME_SERIES_WINDOWS_MAX`] windows, each twice as long when the run outgrows them.
///
/// Laid out in declaration order (`repr(C)`), what recording an I/O reads first (see
/// [`DirStats`]); with many jobs, nearly every completion of a job closes a window.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct TimeSeries {
    /// fio's averaging window for the rate samples (`bw_avg_time`, `iops_avg_time`).
    pub interval: Nanos,
    /// The sample window still open: its index, bytes and I/Os.
    open: Option<(u64, u64, u64)>,
    /// The chart's window is `interval << shift`.
    shift: u32,
    /// What completed in each chart window that had completions, by window, in order; the
    /// windows without any are not kept (a job among 1024 on a disk completes an I/O every
    /// few windows, and filling the gaps was most of its chart's cost and memory).
    chart: Vec<(u32, Window)>,
    /// Whether the chart is kept ([`TimeSeries::drop_chart`]).
    charted: bool,
    /// Bandwidth samples of closed windows, KiB/s truncated to integers as fio's are.
    bandwidth_kib: Moments,
    /// IOPS samples of closed windows, truncated likewise.
    iops: Moments,
}

/// One window of a [`TimeSeries`] chart.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    bytes: u64,
    ios: u64,
    /// The completion latencies of its I/Os: their sum (ns, saturating) and their maximum.
    clat_sum: u64,
    clat_max: u64,
}

impl Window {
    /// One I/O of `bytes` that took `clat` counted in.
    fn add(&mut self, bytes: u64, clat: Nanos) {
        self.bytes += bytes;
        self.ios += 1;
        self.clat_sum = self.clat_sum.saturating_add(clat);
        self.clat_max = self.clat_max.max(clat);
    }

    /// Two windows (neighbours being paired up, or two jobs' same window) as one.
    fn join(self, other: Window) -> Window {
        Window {
            bytes: self.bytes + other.bytes,
            ios: self.ios + other.ios,
            clat_sum: self.clat_sum.saturating_add(other.clat_sum),
            clat_max: self.clat_max.max(other.clat_max),
        }
    }
}

/// fio's default averaging window for bandwidth and IOPS statistics (`bw_avg_time`,
/// `iops_avg_time`): 500 ms.
pub const DEFAULT_SAMPLE_INTERVAL: Nanos = 500_000_000;

/// Most windows a chart keeps: past them, neighbouring windows pair up into windows twice as
/// long (at 500 ms the first 8.5 minutes keep their 500 ms windows, the first 17 one second).
pub const TIME_SERIES_WINDOWS_MAX: usize = 1024;

impl TimeSeries {
    /// Asks the CPU for what recording a completion reads (see [`crate::prefetch`]).
    #[inline]
    pub(crate) fn prefetch(&self) {
        prefetch(&self.open);
        if let Some(last) = self.chart.last() {
            prefetch(last);
        }
    }

    /// An empty series with windows of `interval`.
    pub fn new(interval: Nanos) -> Self {
        assert!(interval > 0);
        TimeSeries {
            interval,
            open: None,
            bandwidth_kib: Moments::default(),
            iops: Moments::default(),
            shift: 0,
            chart: Vec::new(),
            charted: true,
        }
    }

    /// Keeps no chart from now on, only the rate samples' statistics: for runs whose output
    /// draws none (`iosched run` prints fio's text and JSON, which report the statistics). A
    /// job among 1024 keeps a chart window for nearly every I/O it completes, 20 KiB each at
    /// 400 000 requests in all: 21 MB and the page faults to touch it.
    pub fn drop_chart(&mut self) {
        self.charted = false;
        self.chart = Vec::new();
    }

    /// Counts an I/O of `bytes` that took `clat` and completed `since_start` after measurement
    /// began. Completions come in time order; one that comes late counts in the window still
    /// open.
    pub fn record(&mut self, since_start: Nanos, bytes: u64, clat: Nanos) {
        let window = since_start / self.interval;
        match &mut self.open {
            Some((open, open_bytes, open_ios)) if *open >= window => {
                *open_bytes += bytes;
                *open_ios += 1;
            }
            _ => {
                self.close();
                self.open = Some((window, bytes, 1));
            }
        }
        if !self.charted {
            return;
        }
        // The chart's window is `interval << shift`: its slot is the sample window's, shifted.
        while (window >> self.shift) as usize >= TIME_SERIES_WINDOWS_MAX {
            self.coarsen();
        }
        let slot = (window >> self.shift) as u32;
        match self.chart.last_mut() {
            Some((last, counts)) if *last == slot => counts.add(bytes, clat),
            Some((last, _)) if *last > slot => {
                // Late: into its own window, wherever it is.
                let at = self.chart.partition_point(|&(s, _)| s < slot);
                if self.chart[at].0 != slot {
                    self.chart.insert(at, (slot, Window::default()));
                }
                self.chart[at].1.add(bytes, clat);
            }
            _ => {
                let mut counts = Window::default();
                counts.add(bytes, clat);
                self.chart.push((slot, counts));
            }
        }
    }

    /// The chart's first `whole` windows, idle ones included.
    fn dense_chart(&self, whole: usize) -> Vec<Window> {
        let mut dense = vec![Window::default(); whole];
        for &(slot, counts) in &self.chart {
            match dense.get_mut(slot as usize) {
                Some(window) => *window = counts,
                None => break,
            }
        }
        dense
    }

    /// Takes the open window's rate samples into the statistics.
    fn close(&mut self) {
        if let Some((_, bytes, ios)) = self.open.take() {
            let (bandwidth, iops) = self.rates(bytes, ios);
            self.bandwidth_kib.record(bandwidth);
            self.iops.record(iops);
        }
    }

    /// A window's bandwidth (KiB/s) and IOPS, truncated to integers as fio's samples are.
    fn rates(&self, bytes: u64, ios: u64) -> (u64, u64) {
        let interval = self.interval as u128;
        (
            (bytes as u128 * 1_000_000_000 / interval / 1024) as u64,
            (ios as u128 * 1_000_000_000 / interval) as u64,
        )
    }

    /// Halves the chart's resolution: each pair of windows becomes one.
    fn coarsen(&mut self) {
        let mut kept = 0;
        for index in 0..self.chart.len() {
            let (slot, counts) = self.chart[index];
            let pair = slot >> 1;
            if kept > 0 && self.chart[kept - 1].0 == pair {
                self.chart[kept - 1].1 = self.chart[kept - 1].1.join(counts);
            } else {
                self.chart[kept] = (pair, counts);
                kept += 1;
            }
        }
        self.chart.truncate(kept);
        self.shift += 1;
    }

    /// The chart's window: [`Self::interval`] until the run outgrows
    /// [`TIME_SERIES_WINDOWS_MAX`] of them, a power-of-two multiple of it after.
    pub fn window(&self) -> Nanos {
        self.interval << self.shift
    }

    /// fio's bandwidth (KiB/s) and IOPS samples' statistics over a run of `runtime`: one
    /// sample per whole window inside it that moved bytes.
    pub fn rate_moments(&self, runtime: Nanos) -> (Moments, Moments) {
        let (mut bandwidth, mut iops) = (self.bandwidth_kib, self.iops);
        if let Some((window, bytes, ios)) = self.open {
            if (window + 1).saturating_mul(self.interval) <= runtime {
                let (b, i) = self.rates(bytes, ios);
                bandwidth.record(b);
                iops.record(i);
            }
        }
        (bandwidth, iops)
    }

    /// Bandwidth in bytes/s in each of the chart's whole windows inside `duration`, idle
    /// windows included.
    pub fn bandwidth_samples(&self, duration: Nanos) -> Vec<f64> {
        self.rates_per_second(duration, |w| w.bytes)
    }

    /// IOPS in each of the chart's whole windows inside `duration`.
    pub fn iops_samples(&self, duration: Nanos) -> Vec<f64> {
        self.rates_per_second(duration, |w| w.ios)
    }

    /// The mean and the maximum completion latency (ns) of the I/Os of each of the chart's
    /// whole windows inside `duration`; `None` for a window without I/O.
    pub fn latency_samples(&self, duration: Nanos) -> Vec<Option<(f64, u64)>> {
        let whole = ((duration / self.window()) as usize).min(TIME_SERIES_WINDOWS_MAX);
        self.dense_chart(whole)
            .into_iter()
            .map(|window| match window {
                Window { ios: 0, .. } => None,
                w => Some((w.clat_sum as f64 / w.ios as f64, w.clat_max)),
            })
            .collect()
    }

    fn rates_per_second(&self, duration: Nanos, count: fn(&Window) -> u64) -> Vec<f64> {
        let whole = ((duration / self.window()) as usize).min(TIME_SERIES_WINDOWS_MAX);
        let per_second = 1e9 / self.window() as f64;
        self.dense_chart(whole)
            .iter()
            .map(|window| count(window) as f64 * per_second)
            .collect()
    }

    /// Adds `other`'s completions (group reporting): the charts window by window, at the
    /// coarser of the two resolutions, and the rate samples pooled.
    pub fn merge(&mut self, other: &TimeSeries) {
        let mut other = other.clone();
        while self.shift < other.shift {
            self.coarsen();
        }
        while other.shift < self.shift {
            other.coarsen();
        }
        // The two charts' windows in order, a window both have joined.
        let mine = std::mem::take(&mut self.chart);
        let mut merged = Vec::with_capacity(mine.len() + other.chart.len());
        let (mut a, mut b) = (mine.iter().peekable(), other.chart.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(&&(x, wx)), Some(&&(y, wy))) if x == y => {
                    a.next();
                    b.next();
                    (x, wx.join(wy))
                }
                (Some(&&(x, _)), Some(&&(y, _))) if y < x => *b.next().expect("peeked"),
                (Some(_), _) => *a.next().expect("peeked"),
                (None, Some(_)) => *b.next().expect("peeked"),
                (None, None) => break,
            };
            merged.push(next);
        }
        self.chart = merged;
        match (&mut self.open, other.open) {
            (Some(mine), Some(theirs)) if mine.0 == theirs.0 => {
                mine.1 += theirs.1;
                mine.2 += theirs.2;
            }
            (Some(mine), Some(theirs)) if mine.0 < theirs.0 => {
                self.close();
                self.open = Some(theirs);
            }
            (None, theirs) => self.open = theirs,
            _ => other.close(),
        }
        self.bandwidth_kib.merge(&other.bandwidth_kib);
        self.iops.merge(&other.iops);
    }
}

/// Exclusive upper bounds, in ns, of fio's latency buckets (`io_u_lat_n`, `io_u_lat_u`,
/// `io_u_lat_m`: 2, 4, 10, 20, 50, 100, 250, 500, 750 and 1000 of each unit, then 2000 ms and
/// everything from it).
pub const LATENCY_BUCKET_BOUNDS: [u64; LATENCY_BUCKETS] = {
    let steps = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];
    let mut bounds = [u64::MAX; LATENCY_BUCKETS];
    let mut unit = 0;
    let mut scale = 1;
    while unit < 3 {
        let mut step = 0;
        while step < steps.len() {
            bounds[unit * 10 + step] = steps[step] * scale;
            step += 1;
        }
        unit += 1;
        scale *= 1000;
    }
    bounds[30] = 2_000_000_000;
    bounds
};

/// Number of fio's latency buckets: 10 in ns, 10 in us, 12 in ms.
pub const LATENCY_BUCKETS: usize = 32;

/// fio's latency bucket of a completion latency of `nanos` (`io_u_mark_latency`).
pub fn latency_bucket(nanos: u64) -> usize {
    LATENCY_BUCKET_BOUNDS
        .partition_point(|&upper| upper <= nanos)
        .min(LATENCY_BUCKETS - 1)
}

/// Everything measured for one data direction of one job.
///
/// Laid out in declaration order (`repr(C)`), what recording an I/O reads first: with 1024
/// jobs a job's statistics have left the cache by its next completion, and each cache line
/// the recording touches is a miss.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct DirStats {
    /// Bytes completed.
    pub io_bytes: u64,
    /// I/Os completed.
    pub total_ios: u64,
    /// Whether no I/O had a submission latency (a sync engine's): total latency is then the
    /// completion latency, and `lat` is left empty rather than kept twice.
    lat_is_clat: bool,
    /// The priority of every I/O so far while there was only one, whose completion latency is
    /// then `clat`.
    only_prio: Option<IoPrio>,
    /// Completion latency by I/O priority once two priorities were seen;
    /// [`DirStats::prio_clat`] gives it.
    prio_clat: Vec<(IoPrio, Latency)>,
    /// Completion latency: from submission until completion.
    pub clat: Latency,
    /// Completions over time.
    pub series: TimeSeries,
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
    /// Total latency, from creation until completion, while any I/O had a submission
    /// latency; [`DirStats::lat`] gives it.
    lat: Latency,
    /// I/Os by fio's latency bucket of their completion latency ([`latency_bucket`]), counted
    /// exactly as fio counts them.
    pub clat_buckets: [u64; LATENCY_BUCKETS],
}

impl DirStats {
    /// Asks the CPU for what recording an I/O of completion latency `clat` reads (see
    /// [`crate::prefetch`]).
    #[inline]
    pub(crate) fn prefetch(&self, clat: Nanos) {
        prefetch(&self.io_bytes);
        prefetch(&self.clat.moments);
        self.clat.histogram.prefetch(clat);
        self.series.prefetch();
        prefetch(&self.clat_buckets[latency_bucket(clat)]);
    }

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
            lat_is_clat: true,
            prio_clat: Vec::new(),
            only_prio: None,
            clat_buckets: [0; LATENCY_BUCKETS],
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
            self.separate_lat();
            self.lat.record(clat + slat);
        } else if !self.lat_is_clat {
            self.lat.record(clat);
        }
        match self.only_prio {
            Some(only) if only == prio => {}
            None if self.clat.count() == 0 && self.prio_clat.is_empty() => {
                self.only_prio = Some(prio)
            }
            _ => {
                self.separate_prios();
                match self.prio_clat.iter_mut().find(|(p, _)| *p == prio) {
                    Some((_, latency)) => latency.record(clat),
                    None => {
                        let mut latency = Latency::new();
                        latency.record(clat);
                        self.prio_clat.push((prio, latency));
                        self.prio_clat.sort_by_key(|(p, _)| *p);
                    }
                }
            }
        }
        self.clat.record(clat);
        self.clat_buckets[latency_bucket(clat)] += 1;
        self.series.record(since_start, bytes, clat);
    }

    /// Total latency: from creation until completion (the completion latency itself for a
    /// sync engine's I/O, which has no submission latency).
    pub fn lat(&self) -> &Latency {
        if self.lat_is_clat {
            &self.clat
        } else {
            &self.lat
        }
    }

    /// Completion latency by I/O priority, ascending, for fio's `prios` array.
    pub fn prio_clat(&self) -> Vec<(IoPrio, &Latency)> {
        match self.only_prio {
            Some(prio) => vec![(prio, &self.clat)],
            None => self.prio_clat.iter().map(|(p, l)| (*p, l)).collect(),
        }
    }

    /// Keeps total latency apart from completion latency from now on.
    fn separate_lat(&mut self) {
        if self.lat_is_clat {
            self.lat = self.clat.clone();
            self.lat_is_clat = false;
        }
    }

    /// Keeps completion latency by priority apart from the whole from now on.
    fn separate_prios(&mut self) {
        if let Some(prio) = self.only_prio.take() {
            self.prio_clat = vec![(prio, self.clat.clone())];
        }
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
        if !(self.lat_is_clat && other.lat_is_clat) {
            self.separate_lat();
            self.lat.merge(other.lat());
        }
        let empty = self.clat.count() == 0 && self.prio_clat.is_empty();
        match (self.only_prio, other.only_prio) {
            _ if other.clat.count() == 0 => {}
            (Some(mine), Some(theirs)) if mine == theirs => {}
            _ if empty => {
                self.only_prio = other.only_prio;
                self.prio_clat = other.prio_clat.clone();
            }
            _ => {
                self.separate_prios();
                for (prio, latency) in other.prio_clat() {
                    match self.prio_clat.iter_mut().find(|(p, _)| *p == prio) {
                        Some((_, mine)) => mine.merge(latency),
                        None => self.prio_clat.push((prio, latency.clone())),
                    }
                }
            }
        }
        self.clat.merge(&other.clat);
        self.prio_clat.sort_by_key(|(p, _)| *p);
        for (mine, theirs) in self.clat_buckets.iter_mut().zip(&other.clat_buckets) {
            *mine += theirs;
        }
        self.series.merge(&other.series);
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
///
/// Laid out in declaration order (`repr(C)`), what each I/O's issue and completion read
/// first (see [`DirStats`]).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct JobResult {
    /// The log files being written, when the engine was asked to write them
    /// ([`JobResult::open_logs`]); `None` otherwise.
    pub log: Option<crate::output::logs::LogStream>,
    /// The job's `write_iolog`, when the engine was asked to write logs and the job named one.
    pub iolog: Option<crate::trace::IologStream>,
    /// When measurement started, on the engine's clock.
    pub measure_start: Nanos,
    /// Time the device spent on this job's measured I/O: each request's dispatch to
    /// completion, shared by bytes among the I/Os merged into it. On a device that serves one
    /// command at a time this is the job's disk time, the share seed 003's controllers divide.
    pub device_time: Nanos,
    /// Whether its directions keep time-series charts; [`JobResult::drop_charts`] turns them
    /// off (this flag alone only keeps them off across [`JobResult::reset_stats`]).
    pub charts: bool,
    /// Samples of I/Os in flight at each submission, by [`iodepth_bucket`].
    pub iodepth_levels: [u64; IODEPTH_LEVELS],
    /// Read, write and trim statistics.
    pub dirs: [DirStats; 3],
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
    /// Flush (fsync) latency.
    pub sync: Latency,
    /// Measured run time (after `ramp_time`).
    pub runtime: Nanos,
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
}

impl JobResult {
    /// Asks the CPU for what recording an I/O of direction `dir` and completion latency
    /// `clat` reads (see [`crate::prefetch`]).
    #[inline]
    pub(crate) fn prefetch(&self, dir: DataDir, clat: Nanos) {
        prefetch(&self.log);
        prefetch(&self.measure_start);
        self.dirs[dir as usize].prefetch(clat);
    }

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
            iolog: None,
            device_time: 0,
            charts: true,
        }
    }

    /// Keeps no time-series charts ([`TimeSeries::drop_chart`]), now and after a reset.
    pub fn drop_charts(&mut self) {
        self.charts = false;
        for dir in &mut self.dirs {
            dir.series.drop_chart();
        }
    }

    /// Forgets what was measured so far and counts from `now` on (fio's `reset_all_stats`,
    /// as the `latency_target` search does before its final run at the depth it found).
    pub fn reset_stats(&mut self, now: Nanos) {
        self.dirs = std::array::from_fn(|_| DirStats::new(DEFAULT_SAMPLE_INTERVAL));
        if !self.charts {
            self.drop_charts();
        }
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

    /// Ends measurement at `runtime` after it began.
    pub fn finish(&mut self, runtime: Nanos) {
        self.runtime = runtime;
        if let Some(log) = &self.log {
            log.finish(runtime);
        }
    }

    /// Statistics of direction `dir`.
    pub fn dir(&self, dir: DataDir) -> &DirStats {
        &self.dirs[dir as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the bins are fio's (stat.c plat_val_to_idx / plat_idx_to_val): exact below 128 ns,
    // then 64 bins per power of two whose reported value is the bin's middle.
    #[test]
    fn bins_are_fios() {
        assert_eq!(PlatHistogram::index(0), 0);
        assert_eq!(PlatHistogram::index(127), 127);
        assert_eq!(PlatHistogram::index(128), 128);
        assert_eq!(PlatHistogram::index(129), 128);
        assert_eq!(PlatHistogram::value(128), 129); // [128, 129]: fio's 128 + 0.5 * 2
                                                    // fio 3.33 reports a 1000 ns sample in the bin it prints as 1004.
        assert_eq!(PlatHistogram::value(PlatHistogram::index(1000)), 1004);
        assert_eq!(PlatHistogram::index(1 << 33), 28 << PLAT_BITS); // fio's last group
        for value in [1u64, 100, 1000, 123_456, 7_777_777_777, LATENCY_NS_MAX] {
            let index = PlatHistogram::index(value);
            let (low, high) = PlatHistogram::range(index);
            assert!(
                low <= value && value <= high,
                "{value} outside {low}..={high}"
            );
            assert!((low..=high).contains(&PlatHistogram::value(index)));
            assert!((high - low) as f64 <= value as f64 / PLAT_VAL as f64);
            assert_eq!(PlatHistogram::index(low), index);
            assert_eq!(PlatHistogram::index(high), index);
            assert_eq!(PlatHistogram::index(high + 1), index + 1);
        }
        assert_eq!(PlatHistogram::index(u64::MAX), PLAT_NR - 1);
        assert!(PlatHistogram::range(PLAT_NR - 1).1 >= LATENCY_NS_MAX);
    }

    // Proves percentiles are fio's: the first bin whose cumulative count reaches the percent,
    // reported at its middle, and never past the largest sample.
    #[test]
    fn percentiles_follow_calc_clat_percentiles() {
        let mut latency = Latency::new();
        for nanos in 1..=1000u64 {
            latency.record(nanos * 1000);
        }
        assert_eq!(latency.count(), 1000);
        for (percent, exact) in [(50.0, 500_000u64), (90.0, 900_000), (99.0, 990_000)] {
            let got = latency.percentile(percent);
            let index = PlatHistogram::index(exact);
            assert_eq!(got, PlatHistogram::value(index), "p{percent}");
        }
        assert_eq!(latency.percentile(100.0), 1_000_000);
        assert_eq!(latency.percentile(0.0), 1004); // the first bin's middle
        assert_eq!(Latency::new().percentile(99.0), 0);
    }

    proptest::proptest! {
        // Proves the one-pass percentiles give each value as a scan of its own would (stat.c's
        // `calc_clat_percentiles`), for lists in any order, with repeats, 0 and 100.
        #[test]
        fn percentiles_in_one_pass_are_each_ones_scan(
            samples in proptest::collection::vec(0u64..4_000_000_000, 0..300),
            percents in proptest::collection::vec(
                proptest::prop_oneof![0.0..=100.0f64, proptest::sample::select(vec![0.0, 50.0, 99.99, 100.0])],
                0..20,
            ),
        ) {
            let mut latency = Latency::new();
            for &nanos in &samples {
                latency.record(nanos);
            }
            let scan = |percent: f64| {
                let target = percent / 100.0 * latency.count() as f64;
                let mut seen = 0u64;
                for (value, count) in latency.bins() {
                    seen += count;
                    if seen as f64 >= target {
                        return value.min(latency.max()).max(latency.min());
                    }
                }
                latency.max()
            };
            let expected: Vec<u64> = percents.iter().map(|&p| scan(p)).collect();
            proptest::prop_assert_eq!(latency.percentiles(&percents), expected);
        }
    }

    // Proves merging pools the bins as if every sample had been recorded in one histogram.
    #[test]
    fn merge_pools_the_bins() {
        let (mut a, mut b, mut both) = (Latency::new(), Latency::new(), Latency::new());
        for nanos in [10u64, 5_000, 5_001, 80_000_000, 3_600_000_000_000_000] {
            a.record(nanos);
            both.record(nanos);
        }
        for nanos in [10u64, 7, 1 << 40] {
            b.record(nanos);
            both.record(nanos);
        }
        a.merge(&b);
        assert_eq!(
            a.bins().collect::<Vec<_>>(),
            both.bins().collect::<Vec<_>>()
        );
        assert_eq!(a.count(), 8);
        assert_eq!(a.bins().map(|(_, n)| n).sum::<u64>(), 8);
        assert_eq!(a.cdf().last().unwrap().1, 1.0);
    }

    // Proves fio's latency buckets: each bound belongs to the bucket above it.
    #[test]
    fn latency_buckets_are_fios() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(1), 0);
        assert_eq!(latency_bucket(2), 1);
        assert_eq!(latency_bucket(999), 9);
        assert_eq!(latency_bucket(1_000), 10);
        assert_eq!(latency_bucket(1_999_999_999), 30);
        assert_eq!(latency_bucket(2_000_000_000), 31);
        assert_eq!(latency_bucket(u64::MAX), 31);
    }
}

#[cfg(test)]
mod series_tests {
    use super::*;

    // Proves a series that drops its chart keeps the rate samples' statistics exactly as one
    // that keeps it, and no window; and that a job's charts stay off across a reset (fio's
    // `reset_all_stats`, as the latency_target search does).
    #[test]
    fn a_series_without_its_chart_keeps_the_rate_statistics() {
        let mut full = TimeSeries::new(DEFAULT_SAMPLE_INTERVAL);
        let mut bare = TimeSeries::new(DEFAULT_SAMPLE_INTERVAL);
        bare.drop_chart();
        // 15 s of I/Os, every 3 ms, through 30 windows and past a late completion.
        for i in 0..5000u64 {
            let since = i * 3_000_000 - u64::from(i == 2000) * 600_000_000;
            full.record(since, 4096 << (i % 3), 1000 + i);
            bare.record(since, 4096 << (i % 3), 1000 + i);
        }
        let runtime = 15_000_000_000;
        assert_eq!(full.rate_moments(runtime), bare.rate_moments(runtime));
        assert_eq!(full.bandwidth_samples(runtime).len(), 30);
        assert!(bare.chart.is_empty());
        assert!(bare.bandwidth_samples(runtime).iter().all(|&b| b == 0.0));

        let file = crate::parse::parse_str(
            "[a]\nrw=read\nsize=1m\n",
            "t.fio",
            std::path::Path::new("."),
            &|_| None,
        )
        .unwrap();
        let mut job = JobResult::for_job(&file.jobs[0], 1);
        job.drop_charts();
        job.reset_stats(5);
        job.dirs[0].series.record(0, 4096, 1000);
        assert!(job.dirs.iter().all(|dir| dir.series.chart.is_empty()));
    }

    /// The chart as it was kept before windows without I/O were left out: every window, as a
    /// dense vector, coarsened by pairing neighbours. The model for the sparse chart.
    fn dense_model(records: &[(u64, u64, u64)], interval: Nanos) -> (Vec<Window>, u32) {
        let (mut chart, mut shift) = (Vec::<Window>::new(), 0u32);
        for &(since, bytes, clat) in records {
            let window = since / interval;
            while (window >> shift) as usize >= TIME_SERIES_WINDOWS_MAX {
                let pairs = chart.len().div_ceil(2);
                for pair in 0..pairs {
                    let second = chart.get(2 * pair + 1).copied().unwrap_or_default();
                    chart[pair] = chart[2 * pair].join(second);
                }
                chart.truncate(pairs);
                shift += 1;
            }
            let slot = (window >> shift) as usize;
            if chart.len() <= slot {
                chart.resize(slot + 1, Window::default());
            }
            chart[slot].add(bytes, clat);
        }
        (chart, shift)
    }

    proptest::proptest! {
        // Proves the sparse chart (only windows with I/O kept) reports what a dense chart of
        // every window reports, whatever the gaps, late completions and coarsening, and that
        // merging two jobs' charts (group reporting) joins them window by window.
        #[test]
        fn a_sparse_chart_reports_as_a_dense_one(
            steps in proptest::collection::vec((0u64..40, 0u64..3, 1u64..9000, 1u64..100_000), 1..200),
            other_steps in proptest::collection::vec((0u64..400, 1u64..9000), 0..50),
        ) {
            let interval = 10;
            let mut series = TimeSeries::new(interval);
            let mut records = Vec::new();
            let mut now = 0u64;
            for (gap, late, bytes, clat) in steps {
                // Mostly forward in time by up to 40 windows (a long gap coarsens the chart);
                // now and then a completion a window or two late.
                now += gap * gap * interval;
                let since = now.saturating_sub(late * interval);
                series.record(since, bytes, clat);
                records.push((since, bytes, clat));
            }
            let (dense, shift) = dense_model(&records, interval);
            proptest::prop_assert_eq!(series.window(), interval << shift);
            let shown = (dense.len() + 3).min(TIME_SERIES_WINDOWS_MAX);
            let runtime = (dense.len() as u64 + 3) * series.window();
            let expected: Vec<f64> = (0..shown)
                .map(|w| dense.get(w).map_or(0, |c| c.bytes) as f64 * 1e9 / series.window() as f64)
                .collect();
            proptest::prop_assert_eq!(series.bandwidth_samples(runtime), expected);
            let latency: Vec<Option<(f64, u64)>> = (0..shown)
                .map(|w| match dense.get(w).copied().unwrap_or_default() {
                    Window { ios: 0, .. } => None,
                    c => Some((c.clat_sum as f64 / c.ios as f64, c.clat_max)),
                })
                .collect();
            proptest::prop_assert_eq!(series.latency_samples(runtime), latency);

            let mut other = TimeSeries::new(interval);
            let mut other_records = Vec::new();
            let mut then = 0;
            for (gap, bytes) in other_steps {
                then += gap * interval;
                other.record(then, bytes, 7);
                other_records.push((then, bytes, 7));
            }
            let (other_dense, other_shift) = dense_model(&other_records, interval);
            let mut joined = series.clone();
            joined.merge(&other);
            let shift = shift.max(other_shift);
            proptest::prop_assert_eq!(joined.window(), interval << shift);
            // The model: each dense chart coarsened to the joint shift, added window by window.
            let coarse = |chart: &[Window], from: u32| {
                let mut out: Vec<Window> = Vec::new();
                for (slot, counts) in chart.iter().enumerate() {
                    let at = slot >> (shift - from);
                    if out.len() <= at {
                        out.resize(at + 1, Window::default());
                    }
                    out[at] = out[at].join(*counts);
                }
                out
            };
            let (a, b) = (coarse(&dense, series.shift), coarse(&other_dense, other_shift));
            let len = a.len().max(b.len());
            let runtime = (len as u64 + 1) * joined.window();
            let expected: Vec<f64> = (0..(len + 1).min(TIME_SERIES_WINDOWS_MAX))
                .map(|w| {
                    let ios = a.get(w).map_or(0, |c| c.ios) + b.get(w).map_or(0, |c| c.ios);
                    ios as f64 * 1e9 / joined.window() as f64
                })
                .collect();
            proptest::prop_assert_eq!(joined.iops_samples(runtime), expected);
        }
    }

    // Proves a chart keeps at most TIME_SERIES_WINDOWS_MAX windows, pairing them up as the run
    // grows, and loses no completion doing so; the rate samples stay at 500 ms windows.
    #[test]
    fn a_long_run_coarsens_its_chart_not_its_samples() {
        let mut series = TimeSeries::new(DEFAULT_SAMPLE_INTERVAL);
        let windows = 5 * TIME_SERIES_WINDOWS_MAX as u64; // 42 minutes
        for window in 0..windows {
            series.record(window * DEFAULT_SAMPLE_INTERVAL + 1, 4096, 1000);
            series.record(window * DEFAULT_SAMPLE_INTERVAL + 2, 4096, 3000);
        }
        let runtime = windows * DEFAULT_SAMPLE_INTERVAL;
        assert_eq!(series.window(), 8 * DEFAULT_SAMPLE_INTERVAL);
        let chart = series.iops_samples(runtime);
        assert!(chart.len() <= TIME_SERIES_WINDOWS_MAX);
        assert_eq!(chart.len(), (windows / 8) as usize);
        assert!(chart.iter().all(|&iops| iops == 4.0));
        // Latencies pair up with their windows: each 4 s window holds 1 and 3 us I/Os.
        let latency = series.latency_samples(runtime);
        assert_eq!(latency.len(), chart.len());
        assert!(latency.iter().all(|&l| l == Some((2000.0, 3000))));
        assert_eq!(
            series.latency_samples(runtime + 8 * DEFAULT_SAMPLE_INTERVAL)[chart.len()],
            None
        );
        let (bandwidth, iops) = series.rate_moments(runtime);
        assert_eq!(iops.count, windows);
        assert_eq!((iops.min, iops.max), (4, 4));
        assert_eq!(bandwidth.mean, 16.0);
        // Idle windows show in the chart up to the runtime, never in the samples.
        let longer = runtime + 80 * DEFAULT_SAMPLE_INTERVAL;
        assert_eq!(series.iops_samples(longer).len(), chart.len() + 10);
        assert_eq!(series.rate_moments(longer).1.count, windows);
    }

    // Proves merging series of different resolutions adds them at the coarser one and pools
    // their samples.
    #[test]
    fn merging_aligns_resolutions() {
        let mut long = TimeSeries::new(DEFAULT_SAMPLE_INTERVAL);
        for window in 0..2 * TIME_SERIES_WINDOWS_MAX as u64 {
            long.record(window * DEFAULT_SAMPLE_INTERVAL, 1024, 2000);
        }
        let mut short = TimeSeries::new(DEFAULT_SAMPLE_INTERVAL);
        short.record(0, 1024, 1000);
        short.record(DEFAULT_SAMPLE_INTERVAL, 1024, 9000);
        short.merge(&long);
        assert_eq!(short.window(), long.window());
        let runtime = 2 * TIME_SERIES_WINDOWS_MAX as u64 * DEFAULT_SAMPLE_INTERVAL;
        let ios: f64 = short.iops_samples(runtime).iter().sum::<f64>() * short.window() as f64;
        assert_eq!(
            (ios / 1e9).round() as u64,
            2 * TIME_SERIES_WINDOWS_MAX as u64 + 2
        );
        let (_, iops) = short.rate_moments(runtime);
        assert_eq!(iops.count, 2 * TIME_SERIES_WINDOWS_MAX as u64 + 2);
        // The first coarse window (1 s) holds the short series' two I/Os (1 and 9 us) and the
        // long one's first two (2 us each): mean 3.5 us, max 9 us.
        let latency = short.latency_samples(runtime);
        assert_eq!(latency.len(), TIME_SERIES_WINDOWS_MAX);
        assert_eq!(latency[0], Some((3500.0, 9000)));
        assert_eq!(latency[1], Some((2000.0, 2000)));
    }
}

#[cfg(test)]
mod dir_tests {
    use super::*;
    use iosched_core::IoPrioClass;

    fn prio(class: IoPrioClass, level: u8) -> IoPrio {
        IoPrio::new(class, level).unwrap()
    }

    fn summary(latency: &Latency) -> (u64, u64, u64, Vec<(u64, u64)>) {
        (
            latency.count(),
            latency.min(),
            latency.max(),
            latency.bins().collect(),
        )
    }

    // Proves total latency and per-priority latency read the same whether they are kept apart
    // or derived from the completion latency: sync I/O, then async I/O, then a second priority.
    #[test]
    fn shared_latencies_read_as_if_kept_apart() {
        let be = prio(IoPrioClass::Be, 4);
        let rt = prio(IoPrioClass::Rt, 0);
        let mut stats = DirStats::new(DEFAULT_SAMPLE_INTERVAL);
        let (mut lat, mut clat, mut clat_be, mut clat_rt) = (
            Latency::new(),
            Latency::new(),
            Latency::new(),
            Latency::new(),
        );
        let samples = [
            (None, 1_000, be),
            (None, 2_000, be),
            (Some(300), 5_000, be),
            (None, 7_000, rt),
            (Some(100), 9_000, be),
            (Some(100), 11_000, rt),
        ];
        for (step, &(slat, c, p)) in samples.iter().enumerate() {
            stats.record(4096, slat, c, p, 0);
            lat.record(c + slat.unwrap_or(0));
            clat.record(c);
            if p == be { &mut clat_be } else { &mut clat_rt }.record(c);
            assert_eq!(summary(stats.lat()), summary(&lat), "lat after {step}");
            assert_eq!(summary(&stats.clat), summary(&clat));
            let prios = stats.prio_clat();
            let expected: Vec<_> = [(rt, &clat_rt), (be, &clat_be)]
                .into_iter()
                .filter(|(_, l)| l.count() > 0)
                .map(|(p, l)| (p, summary(l)))
                .collect();
            let got: Vec<_> = prios.iter().map(|(p, l)| (*p, summary(l))).collect();
            assert_eq!(got, expected, "prios after {step}");
        }
    }

    // Proves merging gives the same latencies whichever way each side keeps them.
    #[test]
    fn merging_shared_and_separate_latencies() {
        let be = prio(IoPrioClass::Be, 4);
        let idle = prio(IoPrioClass::Idle, 7);
        let sync_be = |c| {
            let mut s = DirStats::new(DEFAULT_SAMPLE_INTERVAL);
            s.record(4096, None, c, be, 0);
            s
        };
        let mut async_idle = DirStats::new(DEFAULT_SAMPLE_INTERVAL);
        async_idle.record(4096, Some(50), 3_000, idle, 0);

        let mut group = DirStats::new(DEFAULT_SAMPLE_INTERVAL);
        group.merge(&sync_be(1_000));
        group.merge(&DirStats::new(DEFAULT_SAMPLE_INTERVAL));
        group.merge(&sync_be(2_000));
        assert_eq!(group.lat().count(), 2);
        assert_eq!(group.prio_clat().len(), 1);
        group.merge(&async_idle);
        assert_eq!(group.lat().count(), 3);
        assert_eq!(group.lat().max(), 3_050);
        assert_eq!(group.lat().min(), 1_000);
        let prios = group.prio_clat();
        assert_eq!(prios.len(), 2);
        assert_eq!((prios[0].0, prios[0].1.count()), (be, 2));
        assert_eq!((prios[1].0, prios[1].1.count()), (idle, 1));
        assert_eq!(group.clat.count(), 3);
    }
}

//! fio's steady-state detection (`steadystate`, `ss_dur`, `ss_ramp`, `ss_interval`;
//! fio's steadystate.c): every interval the job's (or with `group_reporting` its group's)
//! IOPS and bandwidth over the interval are sampled; once the ramp is over and a window of
//! `ss_dur` worth of samples is full, the criterion is judged on each new sample, and the job
//! (or the group) stops as soon as it holds.
//!
//! - `iops`, `bw`: the largest distance of a sample from the window's mean, absolute or as a
//!   percentage of the mean (`steadystate_deviation`).
//! - `iops_slope`, `bw_slope`: the least-squares slope of the samples against their index,
//!   absolute or as a percentage of the mean, in absolute value (`steadystate_slope`).

use iosched_core::Nanos;
use std::collections::VecDeque;

/// What is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SteadyMetric {
    /// I/Os per second.
    Iops,
    /// Bytes per second.
    Bw,
}

/// A job's steady-state criterion.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SteadyState {
    /// IOPS or bandwidth.
    pub metric: SteadyMetric,
    /// The slope criterion (else the deviation).
    pub slope: bool,
    /// The threshold the criterion must fall below.
    pub limit: f64,
    /// The threshold is a percentage of the window's mean.
    pub percent: bool,
    /// The window (`ss_dur`), ns.
    pub duration: Nanos,
    /// Time from the job's start before samples count (`ss_ramp`), ns; fio begins one
    /// interval after it.
    pub ramp: Nanos,
    /// How often a sample is taken (`ss_interval`, 1 s by default), ns.
    pub interval: Nanos,
}

impl SteadyState {
    /// Samples in the window.
    pub fn intervals(&self) -> usize {
        (self.duration / self.interval.max(1)).max(1) as usize
    }

    /// fio's text for it (`iops_slope:0.010000%`).
    pub fn describe(&self) -> String {
        format!(
            "{}{}:{:.6}{}",
            match self.metric {
                SteadyMetric::Iops => "iops",
                SteadyMetric::Bw => "bw",
            },
            if self.slope { "_slope" } else { "" },
            self.limit,
            if self.percent { "%" } else { "" }
        )
    }
}

/// The detection's state for one job or group, and what the report shows of it.
#[derive(Clone, Debug, PartialEq)]
pub struct SteadyTracker {
    /// The criterion.
    pub spec: SteadyState,
    /// The next sampling time.
    next_check: Nanos,
    /// The window: (IOPS, bytes per second) per interval, oldest first.
    pub samples: VecDeque<(u64, u64)>,
    /// Whether the criterion held (the job stopped for it).
    pub attained: bool,
    /// The last criterion judged, and the deviation and slope it came from.
    pub criterion: f64,
    /// Largest distance of a sample from the mean (deviation criterion).
    pub deviation: f64,
    /// Least-squares slope (slope criterion).
    pub slope: f64,
}

impl SteadyTracker {
    /// Detection for a job (or group) that started at `started`.
    pub fn new(spec: SteadyState, started: Nanos) -> SteadyTracker {
        SteadyTracker {
            spec,
            next_check: started + spec.interval,
            samples: VecDeque::with_capacity(spec.intervals()),
            attained: false,
            criterion: 0.0,
            deviation: 0.0,
            slope: 0.0,
        }
    }

    /// The sampling times due by `now`, in order (each is consumed).
    pub fn due(&mut self, now: Nanos) -> Option<Nanos> {
        (!self.attained && self.next_check <= now).then(|| {
            let at = self.next_check;
            self.next_check += self.spec.interval;
            at
        })
    }

    /// A sample of `ios` I/Os and `bytes` bytes over the last interval, taken at `elapsed`
    /// since the start: counted once the ramp is over, and the criterion judged once the
    /// window is full. Returns whether steady state is attained.
    pub fn sample(&mut self, elapsed: Nanos, ios: u64, bytes: u64) -> bool {
        if self.attained || elapsed < self.spec.ramp + self.spec.interval {
            return self.attained;
        }
        let per_second = |count: u64| {
            (u128::from(count) * 1_000_000_000 / u128::from(self.spec.interval.max(1))) as u64
        };
        let intervals = self.spec.intervals();
        if self.samples.len() == intervals {
            self.samples.pop_front();
        }
        self.samples.push_back((per_second(ios), per_second(bytes)));
        if self.samples.len() < intervals {
            return false;
        }
        let values: Vec<f64> = self
            .samples
            .iter()
            .map(|&(iops, bw)| match self.spec.metric {
                SteadyMetric::Iops => iops as f64,
                SteadyMetric::Bw => bw as f64,
            })
            .collect();
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let measure = if self.spec.slope {
            // Least squares against x = 0..n-1, as fio assumes evenly spaced samples.
            let sum_x = n * (n - 1.0) / 2.0;
            let sum_x2 = (n - 1.0) * n * (2.0 * n - 1.0) / 6.0;
            let sum_xy: f64 = values.iter().enumerate().map(|(i, y)| i as f64 * y).sum();
            let sum_y = mean * n;
            let denominator = sum_x2 - sum_x * sum_x / n;
            self.slope = if denominator == 0.0 {
                0.0
            } else {
                (sum_xy - sum_x * sum_y / n) / denominator
            };
            self.slope
        } else {
            self.deviation = values
                .iter()
                .map(|value| (value - mean).abs())
                .fold(0.0, f64::max);
            self.deviation
        };
        self.criterion = if self.spec.percent {
            if mean == 0.0 {
                f64::INFINITY
            } else {
                100.0 * measure / mean
            }
        } else {
            measure
        };
        self.attained = self.criterion.abs() < self.spec.limit;
        self.attained
    }

    /// Mean IOPS and bandwidth over the window.
    pub fn means(&self) -> (u64, u64) {
        let n = self.samples.len().max(1) as u64;
        let (iops, bw) = self
            .samples
            .iter()
            .fold((0u64, 0u64), |(a, b), &(i, w)| (a + i, b + w));
        (iops / n, bw / n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    fn spec(metric: SteadyMetric, slope: bool, limit: f64, percent: bool) -> SteadyState {
        SteadyState {
            metric,
            slope,
            limit,
            percent,
            duration: 5 * S,
            ramp: 2 * S,
            interval: S,
        }
    }

    // Proves the deviation criterion: nothing counts before the ramp and one interval more,
    // nothing is judged before the window is full, and it holds once every sample in the
    // window is within the limit of the mean.
    #[test]
    fn deviation_needs_a_full_window_within_the_limit() {
        let mut t = SteadyTracker::new(spec(SteadyMetric::Iops, false, 10.0, true), 0);
        assert!(!t.sample(2 * S, 1000, 0), "in the ramp");
        assert!(t.samples.is_empty());
        for (k, iops) in [500, 1000, 1000, 1000].into_iter().enumerate() {
            assert!(!t.sample((3 + k as u64) * S, iops, 0));
        }
        // Window 500, 1000, 1000, 1000, 1000: the 500 is 44% off the mean of 900.
        assert!(!t.sample(7 * S, 1000, 0));
        assert!((t.criterion - 100.0 * 400.0 / 900.0).abs() < 1e-9);
        // Window of 1000s and one 1050: 4% off the mean.
        assert!(t.sample(8 * S, 1050, 0));
        assert!(t.attained);
        assert_eq!(t.means().0, 1010);
    }

    // Proves the slope criterion: a rising bandwidth's slope is its rise per interval, and a
    // flat one attains; an absolute limit compares the slope itself.
    #[test]
    fn slope_is_the_least_squares_rise_per_interval() {
        let mut t = SteadyTracker::new(spec(SteadyMetric::Bw, true, 1.0, true), 0);
        for k in 0..5u64 {
            t.sample((3 + k) * S, 0, 100 + 10 * k);
        }
        assert!((t.slope - 10.0).abs() < 1e-9);
        assert!((t.criterion - 100.0 * 10.0 / 120.0).abs() < 1e-9);
        assert!(!t.attained);
        let mut flat = SteadyTracker::new(spec(SteadyMetric::Bw, true, 0.5, false), 0);
        for k in 0..5u64 {
            flat.sample((3 + k) * S, 0, 100);
        }
        assert!(flat.attained);
    }

    #[test]
    fn sampling_times_are_each_interval_from_the_start() {
        let mut t = SteadyTracker::new(spec(SteadyMetric::Iops, false, 1.0, true), 10);
        assert_eq!(t.due(S), None);
        assert_eq!(t.due(3 * S + 10), Some(S + 10));
        assert_eq!(t.due(3 * S + 10), Some(2 * S + 10));
        assert_eq!(t.due(3 * S + 10), Some(3 * S + 10));
        assert_eq!(t.due(3 * S + 10), None);
        assert_eq!(t.spec.describe(), "iops:1.000000%");
    }
}

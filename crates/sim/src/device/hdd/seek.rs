//! The seek curve: how long the arm takes to move the heads across `d` cylinders.
//!
//! DiskSim's three-point curve, fitted through the figures a datasheet gives: the average `A`
//! and the full stroke `F` over `N` cylinders, from an intercept `s`:
//!
//! ```text
//! seek(0) = 0
//! seek(1) = t1                                        (single-cylinder seek)
//! seek(d) = s + b*(d - 1) + a*sqrt(d - 1)             for d >= 2
//! a = (-10*s + 15*A - 5*F) / (3*sqrt(N))
//! b = (7*s - 15*A + 8*F) / (3*N)
//! ```
//!
//! The square-root term is the arm accelerating and decelerating (short seeks); the linear term
//! is the coast phase of long seeks. The fit assumes the datasheet's average is taken over all
//! pairs of cylinders, whose mean distance is `N/3`: over the triangular density of distances,
//! `E[sqrt(d/N)] = 8/15` and `E[d/N] = 1/3`, which is where the constants come from.
//!
//! The intercept `s` is the settle: every real seek ends with the servo settling the head on
//! the new track, which a datasheet's single-track seek `t1` (Hitachi: 1.0 ms, "one single
//! track seek from every track") mostly is, a micro-jog of one track. DiskSim's own curve
//! takes `s = t1`, and then a seek of a hundred cylinders (a 2 GB file on a 500 GB disk) costs
//! barely more than one: 1.4 ms. Measured curves do not look like that: Ruemmler and Wilkes'
//! HP 97560 needs 3.24 ms + 0.4 ms x sqrt(d) for short seeks, a quarter of its average in the
//! intercept, and DiskSim's HPL seek equation keeps the single-cylinder time apart from the
//! short-seek intercept for that reason. Setting `s = t1` gives DiskSim's curve back.

/// A fitted three-point seek curve. Times in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct SeekCurve {
    /// Track-to-track (one cylinder) seek, ns.
    single_ns: f64,
    /// Intercept of seeks of two cylinders or more (the settle), ns.
    settle_ns: f64,
    /// Coefficient of `sqrt(d - 1)`, ns.
    sqrt_ns: f64,
    /// Coefficient of `d - 1`, ns per cylinder.
    linear_ns: f64,
    /// Cylinders the curve spans.
    cylinders: u32,
}

/// The seek figures were not usable to fit a curve.
#[derive(Clone, Debug, PartialEq)]
pub struct SeekFitError(pub String);

impl SeekCurve {
    /// Fits the curve through `single_ms` (one cylinder), `settle_ms` (the intercept of longer
    /// seeks), `average_ms` (over all pairs) and `full_ms` (full stroke) over `cylinders`
    /// cylinders. Refuses figures that would make the curve fall with distance anywhere (a
    /// negative coefficient, or a settle shorter than the single-cylinder seek).
    pub fn fit(
        single_ms: f64,
        settle_ms: f64,
        average_ms: f64,
        full_ms: f64,
        cylinders: u32,
    ) -> Result<SeekCurve, SeekFitError> {
        if cylinders < 2 {
            return Err(SeekFitError(format!(
                "need at least 2 cylinders, got {cylinders}"
            )));
        }
        if !(single_ms > 0.0 && single_ms <= average_ms && average_ms <= full_ms) {
            return Err(SeekFitError(format!(
                "need 0 < single ({single_ms} ms) <= average ({average_ms} ms) <= full stroke ({full_ms} ms)"
            )));
        }
        if !(settle_ms >= single_ms && settle_ms <= average_ms) {
            return Err(SeekFitError(format!(
                "need single ({single_ms} ms) <= settle ({settle_ms} ms) <= average \
                 ({average_ms} ms)"
            )));
        }
        let n = f64::from(cylinders);
        let sqrt_ms = (-10.0 * settle_ms + 15.0 * average_ms - 5.0 * full_ms) / (3.0 * n.sqrt());
        let linear_ms = (7.0 * settle_ms - 15.0 * average_ms + 8.0 * full_ms) / (3.0 * n);
        if sqrt_ms < 0.0 || linear_ms < 0.0 {
            return Err(SeekFitError(format!(
                "settle {settle_ms} ms, average {average_ms} ms and full stroke {full_ms} ms give \
                 a curve that is not increasing (sqrt term {sqrt_ms:.4}, linear term \
                 {linear_ms:.6}); the average must lie between (2*settle + full)/3 and \
                 (7*settle + 8*full)/15"
            )));
        }
        Ok(SeekCurve {
            single_ns: single_ms * 1e6,
            settle_ns: settle_ms * 1e6,
            sqrt_ns: sqrt_ms * 1e6,
            linear_ns: linear_ms * 1e6,
            cylinders,
        })
    }

    /// Seek time over `distance` cylinders, ns.
    #[inline]
    pub fn time_ns(&self, distance: u32) -> f64 {
        match distance {
            0 => 0.0,
            1 => self.single_ns,
            _ => {
                let beyond_one = f64::from(distance - 1);
                self.settle_ns + self.linear_ns * beyond_one + self.sqrt_ns * beyond_one.sqrt()
            }
        }
    }

    /// Whether the time never falls as the distance grows: no coefficient is negative and a
    /// single-track seek is no longer than a two-track one. The presets' curves rise; one
    /// fitted to odd figures may not.
    pub fn rises(&self) -> bool {
        self.single_ns >= 0.0
            && self.linear_ns >= 0.0
            && self.sqrt_ns >= 0.0
            && self.single_ns <= self.settle_ns + self.linear_ns + self.sqrt_ns
    }

    /// Cylinders the curve spans.
    pub fn cylinders(&self) -> u32 {
        self.cylinders
    }

    /// Coefficient `a` of `sqrt(d - 1)`, ms.
    pub fn sqrt_coefficient_ms(&self) -> f64 {
        self.sqrt_ns / 1e6
    }

    /// Coefficient `b` of `d - 1`, ms per cylinder.
    pub fn linear_coefficient_ms(&self) -> f64 {
        self.linear_ns / 1e6
    }

    /// Mean seek time over all ordered pairs of cylinders (both ends uniform), computed by
    /// summing over every distance with its exact probability: `1/N` for 0 and `2(N-d)/N^2`
    /// for `d >= 1`. O(N).
    pub fn mean_over_cylinder_pairs_ns(&self) -> f64 {
        let n = f64::from(self.cylinders);
        let mut total = 0.0;
        for distance in 1..self.cylinders {
            total += 2.0 * (n - f64::from(distance)) * self.time_ns(distance);
        }
        total / (n * n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The curve passes through its three defining points.
    #[test]
    fn passes_through_its_three_points() {
        let curve = SeekCurve::fit(1.0, 1.0, 8.5, 16.7, 100_000).unwrap();
        assert_eq!(curve.time_ns(0), 0.0);
        assert!((curve.time_ns(1) - 1.0e6).abs() < 1e-6);
        let full = curve.time_ns(99_999);
        assert!((full - 16.7e6).abs() < 0.01e6, "full stroke {full}");
        let mean = curve.mean_over_cylinder_pairs_ns();
        assert!((mean - 8.5e6).abs() < 0.05e6, "mean {mean}");
    }

    /// Seek time never falls as distance grows.
    #[test]
    fn is_monotonic() {
        let curve = SeekCurve::fit(1.0, 2.0, 8.5, 16.7, 10_000).unwrap();
        let mut previous = 0.0;
        for distance in 0..10_000 {
            let time = curve.time_ns(distance);
            assert!(time >= previous);
            previous = time;
        }
    }

    /// Figures that would bend the curve downwards are refused.
    #[test]
    fn refuses_inconsistent_figures() {
        assert!(SeekCurve::fit(1.0, 1.0, 15.0, 16.0, 1000).is_err());
        assert!(SeekCurve::fit(1.0, 1.0, 2.0, 16.0, 1000).is_err());
        assert!(SeekCurve::fit(0.0, 0.0, 8.0, 16.0, 1000).is_err());
        assert!(SeekCurve::fit(1.0, 1.0, 8.0, 16.0, 1).is_err());
        // A settle below the single-cylinder seek would make two cylinders faster than one.
        assert!(SeekCurve::fit(1.0, 0.5, 8.5, 16.7, 1000).is_err());
        assert!(SeekCurve::fit(1.0, 9.0, 8.5, 16.7, 1000).is_err());
    }

    /// With a settle above the single-cylinder seek, the curve keeps its average and full
    /// stroke, and short seeks of a few hundred cylinders cost the settle and more: the rule
    /// that makes a 2 GB span slower than DiskSim's curve says.
    #[test]
    fn the_settle_lifts_short_seeks_and_keeps_the_average() {
        let plain = SeekCurve::fit(1.0, 1.0, 8.5, 16.7, 106_000).unwrap();
        let settled = SeekCurve::fit(1.0, 2.0, 8.5, 16.7, 106_000).unwrap();
        assert_eq!(settled.time_ns(1), 1.0e6);
        assert!(settled.time_ns(2) >= 2.0e6);
        assert!(plain.time_ns(100) < 1.5e6, "{}", plain.time_ns(100));
        assert!(settled.time_ns(100) > 2.2e6, "{}", settled.time_ns(100));
        let mean = settled.mean_over_cylinder_pairs_ns();
        assert!((mean - 8.5e6).abs() < 0.05e6, "mean {mean}");
        assert!((settled.time_ns(105_999) - 16.7e6).abs() < 0.01e6);
    }
}

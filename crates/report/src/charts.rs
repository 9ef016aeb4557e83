//! Which charts the page shows, and when:
//! - latency CDFs (log latency axis), one chart per job and direction, one line per policy, at
//!   the first and the last sweep point (once without a sweep);
//! - the latency tail (the fraction of I/Os slower than x, both axes log) at the last point,
//!   where the differences the table's p99.99 column sums up can be seen;
//! - bandwidth and IOPS as bars, one per policy, grouped by sweep point (every point up to
//!   [`BAR_POINTS_MAX`], else only the last);
//! - with a sweep of two points or more, IOPS and p99.99 latency over the swept value, one
//!   line per policy (a log2 axis when every value is a power of two);
//! - bandwidth per 500 ms window over time, one line per policy, at the last point.
//!
//! Every chart is one job and direction: jobs differ by orders of magnitude (a random reader
//! next to a streaming writer), and one axis for both would flatten the smaller. The axes'
//! ranges are each chart's own, but a quantity has one unit on the whole page
//! ([`PageUnits`]), so that neighbouring panels read alike.

use crate::model::{Cell, Key, Model};
use crate::plot::{policy_color, Axis, Chart, Series, Shape, Ticks};
use crate::units;

/// Sweep points up to which bar charts show every point; past it, only the last.
pub const BAR_POINTS_MAX: usize = 4;
/// Chart size in px: two fit side by side in a 1200 px page.
pub const CHART_WIDTH_PX: u32 = 600;
/// Chart height in px.
pub const CHART_HEIGHT_PX: u32 = 360;

/// One chart with its title.
pub struct Figure {
    /// Title, shown above the chart.
    pub title: String,
    /// The chart.
    pub chart: Chart,
}

/// A group of charts of one kind.
pub struct Section {
    /// Anchor for links.
    pub id: &'static str,
    /// Heading.
    pub title: String,
    /// What the charts show and how to read them.
    pub intro: String,
    /// The charts.
    pub figures: Vec<Figure>,
}

/// The unit of each quantity on the page, from its largest value anywhere in the model.
#[derive(Clone, Copy, Debug)]
pub struct PageUnits {
    /// Completion latencies (CDF and tail charts).
    pub latency: units::TimeUnit,
    /// p99.99 latencies (the sweep charts).
    pub tail: units::TimeUnit,
    /// Bandwidth over each run (the bar charts).
    pub bandwidth: units::RateUnit,
    /// Bandwidth per window (the timelines).
    pub window_bandwidth: units::RateUnit,
}

impl PageUnits {
    /// The units for `model`.
    pub fn of(model: &Model) -> PageUnits {
        let max = |value: &dyn Fn(&crate::model::Cell) -> f64| {
            model.all_cells().map(value).fold(0.0, f64::max)
        };
        PageUnits {
            latency: units::time_unit(max(&|c| c.clat.max() as f64)),
            tail: units::time_unit(max(&|c| c.clat.percentile(99.99) as f64)),
            bandwidth: units::rate_unit(max(&|c| c.bandwidth)),
            window_bandwidth: units::rate_unit(max(&|c| {
                c.bandwidth_windows.iter().copied().fold(0.0, f64::max)
            })),
        }
    }
}

/// Every chart section the model has data for, in page order.
pub fn sections(model: &Model) -> Vec<Section> {
    let mut sections = Vec::new();
    let page = PageUnits::of(model);
    let points = points_with_data(model);
    let (Some(&first), Some(&last)) = (points.first(), points.last()) else {
        return sections;
    };
    let ends: Vec<usize> = if first == last {
        vec![first]
    } else {
        vec![first, last]
    };

    let mut figures = Vec::new();
    for &point in &ends {
        for key in 0..model.keys.len() {
            if let Some(figure) = cdf(model, point, key, &page) {
                figures.push(figure);
            }
        }
    }
    sections.push(Section {
        id: "cdf",
        title: "Latency distribution".into(),
        intro: format!(
            "Completion latency (clat) CDF of each job, one line per policy{}. A line further \
             left is faster; a line that reaches 100% later has a longer tail.",
            if ends.len() > 1 {
                ", at the first and the last sweep point"
            } else {
                ""
            }
        ),
        figures,
    });

    let figures = (0..model.keys.len())
        .filter_map(|key| tail(model, last, key, &page))
        .collect();
    sections.push(Section {
        id: "tail",
        title: "Latency tail".into(),
        intro: format!(
            "The fraction of I/Os slower than a given completion latency, both axes log{}: \
             the 1% line is where p99 is read, 0.01% p99.99.",
            at_point(model, last)
        ),
        figures,
    });

    let bar_points: Vec<usize> = if points.len() <= BAR_POINTS_MAX {
        points.clone()
    } else {
        vec![last]
    };
    let mut figures = Vec::new();
    for key in 0..model.keys.len() {
        figures.extend(bars(model, &bar_points, key, Metric::Bandwidth, &page));
        figures.extend(bars(model, &bar_points, key, Metric::Iops, &page));
    }
    sections.push(Section {
        id: "bars",
        title: "Bandwidth and IOPS".into(),
        intro: format!(
            "Bandwidth and IOPS of each job over its runtime, one bar per policy{}.",
            if model.sweep_name().is_none() {
                String::new()
            } else if bar_points.len() == 1 {
                at_point(model, last)
            } else {
                ", grouped by sweep point".to_string()
            }
        ),
        figures,
    });

    if points.len() >= 2 {
        let mut figures = Vec::new();
        for key in 0..model.keys.len() {
            figures.extend(sweep_line(model, &points, key, Metric::Iops, &page));
            figures.extend(sweep_line(model, &points, key, Metric::TailLatency, &page));
        }
        sections.push(Section {
            id: "sweep",
            title: format!("Over {}", model.sweep_name().unwrap_or("the sweep")),
            intro: "IOPS and p99.99 completion latency (log axis) of each job over the swept \
                    parameter, one line per policy."
                .into(),
            figures,
        });
    }

    let figures = (0..model.keys.len())
        .filter_map(|key| timeline(model, last, key, &page))
        .collect();
    sections.push(Section {
        id: "time",
        title: "Bandwidth over time".into(),
        intro: format!(
            "Bandwidth of each job in every complete 500 ms window (fio's bw_avg_time), one \
             line per policy{}.",
            at_point(model, last)
        ),
        figures,
    });
    sections
}

/// Indices of points where at least one run measured something.
fn points_with_data(model: &Model) -> Vec<usize> {
    (0..model.points.len())
        .filter(|&point| {
            (0..model.policies.len()).any(|policy| {
                (0..model.keys.len()).any(|key| model.cell(point, policy, key).is_some())
            })
        })
        .collect()
}

/// `, at iodepth=16` (empty without a sweep).
fn at_point(model: &Model, point: usize) -> String {
    match model.point_label(point) {
        label if label.is_empty() => String::new(),
        label => format!(", at {label}"),
    }
}

/// ` — iodepth=16` for titles (empty without a sweep).
fn title_point(model: &Model, point: usize) -> String {
    match model.point_label(point) {
        label if label.is_empty() => String::new(),
        label => format!(" \u{2014} {label}"),
    }
}

fn key<'m>(model: &'m Model, key: usize) -> &'m Key {
    &model.keys[key]
}

/// Each policy's CDF steps for `key` at `point`; a run without samples (starved) has none
/// but keeps its place, so that its legend entry stays.
fn latency_cdf(model: &Model, point: usize, key: usize) -> Vec<(usize, Vec<(f64, f64)>)> {
    (0..model.policies.len())
        .filter_map(|policy| {
            let cell = model.cell(point, policy, key)?;
            let steps = cell.clat.cdf();
            Some((
                policy,
                steps.into_iter().map(|(v, f)| (v as f64, f)).collect(),
            ))
        })
        .collect()
}

/// The legend's name for `policy` over `points`: with `(starved)` when a run at any of them
/// starved the job (its line or bar then shows little or nothing).
fn legend(model: &Model, points: &[usize], policy: usize, key: usize) -> String {
    let starved = points.iter().any(|&point| {
        model
            .cell(point, policy, key)
            .is_some_and(|cell| cell.starved.is_some())
    });
    if starved {
        format!("{} (starved)", model.policies[policy])
    } else {
        model.policies[policy].clone()
    }
}

/// The latency axis for `curves` (values in ns), in `unit`.
fn latency_axis(curves: &[(usize, Vec<(f64, f64)>)], unit: units::TimeUnit) -> Option<(Axis, f64)> {
    let low = curves
        .iter()
        .filter_map(|(_, c)| c.first().map(|p| p.0))
        .fold(f64::INFINITY, f64::min);
    let high = curves
        .iter()
        .filter_map(|(_, c)| c.last().map(|p| p.0))
        .fold(0.0, f64::max);
    if !(low.is_finite() && high > 0.0) {
        return None;
    }
    // A little room at both ends, so that a step at the smallest or the largest latency is
    // not drawn on the frame.
    let axis = Axis::log(
        format!("completion latency ({}, log scale)", unit.symbol),
        low.max(1.0) / unit.nanos * 0.95,
        high / unit.nanos * 1.05,
    );
    Some((axis, unit.nanos))
}

/// Steps of a CDF: up at each value from the previous fraction to its own.
fn staircase(steps: &[(f64, f64)], scale: f64, tail: bool) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(steps.len() * 2);
    let mut previous = 0.0;
    for &(value, fraction) in steps {
        let x = value / scale;
        let (before, after) = if tail {
            (1.0 - previous, 1.0 - fraction)
        } else {
            (previous, fraction)
        };
        points.push((x, before));
        points.push((x, after));
        previous = fraction;
    }
    points
}

fn policy_line(name: String, policy: usize, points: Vec<(f64, f64)>, markers: bool) -> Series {
    Series {
        name,
        color: policy_color(policy),
        shape: Shape::Line { points, markers },
    }
}

fn cdf(model: &Model, point: usize, key_index: usize, page: &PageUnits) -> Option<Figure> {
    let curves = latency_cdf(model, point, key_index);
    let (x, scale) = latency_axis(&curves, page.latency)?;
    let series = curves
        .into_iter()
        .map(|(policy, steps)| {
            let name = legend(model, &[point], policy, key_index);
            policy_line(name, policy, staircase(&steps, scale, false), false)
        })
        .collect();
    Some(Figure {
        title: format!(
            "Latency CDF: {}{}",
            key(model, key_index).label(),
            title_point(model, point)
        ),
        chart: Chart {
            width: CHART_WIDTH_PX,
            height: CHART_HEIGHT_PX,
            x,
            // Slightly past 0 and 1, so the lines' ends are not drawn on the frame.
            y: Axis::linear("I/Os completed within x (CDF)", -0.02, 1.02).with_ticks(
                Ticks::Labels(
                    (0..=5)
                        .map(|i| (i as f64 / 5.0, format!("{}%", i * 20)))
                        .collect(),
                ),
            ),
            x_grid: true,
            series,
        },
    })
}

fn tail(model: &Model, point: usize, key_index: usize, page: &PageUnits) -> Option<Figure> {
    let curves = latency_cdf(model, point, key_index);
    let (x, scale) = latency_axis(&curves, page.latency)?;
    let count_max = (0..model.policies.len())
        .filter_map(|policy| model.cell(point, policy, key_index))
        .map(|cell| cell.clat.count())
        .max()?;
    let series = curves
        .into_iter()
        .map(|(policy, steps)| {
            let name = legend(model, &[point], policy, key_index);
            policy_line(name, policy, staircase(&steps, scale, true), false)
        })
        .collect();
    Some(Figure {
        title: format!(
            "Latency tail: {}{}",
            key(model, key_index).label(),
            title_point(model, point)
        ),
        chart: Chart {
            width: CHART_WIDTH_PX,
            height: CHART_HEIGHT_PX,
            x,
            // Down to the power of ten at or below one I/O in all, so the last one shows, and
            // a little over 100% so the line's start is not drawn on the frame.
            y: Axis::log_exact(
                "I/Os slower than x (log scale)",
                10f64.powf((1.0 / count_max as f64).log10().floor()),
                1.25,
            )
            .with_ticks(Ticks::Percent),
            x_grid: true,
            series,
        },
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Metric {
    Bandwidth,
    Iops,
    TailLatency,
}

impl Metric {
    /// This metric of `cell`; none for a tail latency without samples (a starved run).
    fn of(self, cell: &Cell) -> Option<f64> {
        match self {
            Metric::Bandwidth => Some(cell.bandwidth),
            Metric::Iops => Some(cell.iops),
            Metric::TailLatency => Some(cell.clat.percentile(99.99) as f64).filter(|v| *v > 0.0),
        }
    }
}

/// Bars of `metric`, grouped by point, one per policy in each group.
fn bars(
    model: &Model,
    points: &[usize],
    key_index: usize,
    metric: Metric,
    page: &PageUnits,
) -> Option<Figure> {
    let value = |point: usize, policy: usize| metric.of(model.cell(point, policy, key_index)?);
    let max = points
        .iter()
        .flat_map(|&point| (0..model.policies.len()).filter_map(move |p| value(point, p)))
        .fold(0.0, f64::max);
    let policies: Vec<usize> = (0..model.policies.len())
        .filter(|&policy| points.iter().any(|&point| value(point, policy).is_some()))
        .collect();
    if policies.is_empty() {
        return None;
    }
    let (divisor, description) = match metric {
        Metric::Bandwidth => (
            page.bandwidth.bytes,
            format!("bandwidth ({})", page.bandwidth.symbol),
        ),
        _ => (1.0, "IOPS".to_string()),
    };
    // Each group is one unit wide; its bars share 80% of it, at most a quarter each.
    let slot = (0.8 / policies.len() as f64).min(0.25);
    let series = policies
        .iter()
        .enumerate()
        .map(|(slot_index, &policy)| {
            let bars = points
                .iter()
                .enumerate()
                .filter_map(|(group, &point)| {
                    let shown = value(point, policy)? / divisor;
                    let x0 = group as f64 - slot * policies.len() as f64 / 2.0
                        + slot * slot_index as f64;
                    Some((x0, x0 + slot, shown))
                })
                .collect();
            Series {
                name: legend(model, points, policy, key_index),
                color: policy_color(policy),
                shape: Shape::Bars(bars),
            }
        })
        .collect();
    let labels: Vec<(f64, String)> = points
        .iter()
        .enumerate()
        .map(|(group, &point)| match &model.points[point] {
            Some(value) => (group as f64, value.clone()),
            None => (group as f64, key(model, key_index).label()),
        })
        .collect();
    let x_description = model.sweep_name().unwrap_or("job").to_string();
    let what = if metric == Metric::Bandwidth {
        "Bandwidth"
    } else {
        "IOPS"
    };
    let title_at = if points.len() == 1 {
        title_point(model, points[0])
    } else {
        String::new()
    };
    Some(Figure {
        title: format!("{what}: {}{title_at}", key(model, key_index).label()),
        chart: Chart {
            width: CHART_WIDTH_PX,
            height: CHART_HEIGHT_PX,
            x: Axis::linear(x_description, -0.5, points.len() as f64 - 0.5)
                .with_ticks(Ticks::Labels(labels)),
            // Headroom over the tallest bar for its value label.
            y: Axis::from_zero(description, max / divisor * 1.12),
            x_grid: false,
            series,
        },
    })
}

/// Where each point sits on the sweep axis: log2 of the value when every value is a power of
/// two (iodepth 1, 2, 4... 32 spaced evenly as the papers draw them), else its index.
fn sweep_positions(model: &Model, points: &[usize]) -> (Vec<f64>, bool) {
    let values: Option<Vec<u64>> = points
        .iter()
        .map(|&p| model.points[p].as_deref()?.trim().parse::<u64>().ok())
        .collect();
    match values {
        Some(values) if values.iter().all(|v| v.is_power_of_two()) => {
            (values.iter().map(|&v| (v as f64).log2()).collect(), true)
        }
        _ => ((0..points.len()).map(|i| i as f64).collect(), false),
    }
}

fn sweep_line(
    model: &Model,
    points: &[usize],
    key_index: usize,
    metric: Metric,
    page: &PageUnits,
) -> Option<Figure> {
    let (positions, log2) = sweep_positions(model, points);
    let value = |point: usize, policy: usize| metric.of(model.cell(point, policy, key_index)?);
    // Every policy that ran the job keeps its line and legend entry, also one with no value
    // to draw (a starved run has no p99.99).
    let lines: Vec<(usize, Vec<(f64, f64)>)> = (0..model.policies.len())
        .filter(|&policy| {
            points
                .iter()
                .any(|&point| model.cell(point, policy, key_index).is_some())
        })
        .map(|policy| {
            let line = points
                .iter()
                .zip(&positions)
                .filter_map(|(&point, &x)| Some((x, value(point, policy)?)))
                .collect::<Vec<_>>();
            (policy, line)
        })
        .collect();
    if lines.iter().all(|(_, line)| line.is_empty()) {
        return None;
    }
    let all = || lines.iter().flat_map(|(_, l)| l.iter().map(|p| p.1));
    let (y, scale) = match metric {
        Metric::TailLatency => {
            let high = all().fold(0.0, f64::max);
            let low = all().fold(f64::INFINITY, f64::min);
            let unit = page.tail;
            (
                Axis::log(
                    format!("p99.99 completion latency ({}, log)", unit.symbol),
                    low / unit.nanos * 0.9,
                    high / unit.nanos * 1.1,
                ),
                unit.nanos,
            )
        }
        _ => (
            Axis::from_zero("IOPS", all().fold(0.0, f64::max) * 1.05),
            1.0,
        ),
    };
    let series = lines
        .into_iter()
        .map(|(policy, line)| {
            let line = line.into_iter().map(|(x, v)| (x, v / scale)).collect();
            policy_line(legend(model, points, policy, key_index), policy, line, true)
        })
        .collect();
    let labels: Vec<(f64, String)> = points
        .iter()
        .zip(&positions)
        .map(|(&p, &x)| (x, model.points[p].clone().unwrap_or_default()))
        .collect();
    let name = model.sweep_name().unwrap_or("sweep point");
    let x_description = if log2 {
        format!("{name} (log2 scale)")
    } else {
        name.to_string()
    };
    let (first, last) = (positions[0], positions[positions.len() - 1]);
    let pad = ((last - first) * 0.05).max(0.3);
    let what = if metric == Metric::TailLatency {
        "p99.99 latency"
    } else {
        "IOPS"
    };
    Some(Figure {
        title: format!("{what} over {name}: {}", key(model, key_index).label()),
        chart: Chart {
            width: CHART_WIDTH_PX,
            height: CHART_HEIGHT_PX,
            x: Axis::linear(x_description, first - pad, last + pad)
                .with_ticks(Ticks::Labels(labels)),
            y,
            x_grid: true,
            series,
        },
    })
}

fn timeline(model: &Model, point: usize, key_index: usize, page: &PageUnits) -> Option<Figure> {
    // A run with no complete window keeps its legend entry.
    let cells: Vec<(usize, &crate::model::Cell)> = (0..model.policies.len())
        .filter_map(|policy| Some((policy, model.cell(point, policy, key_index)?)))
        .collect();
    if cells
        .iter()
        .all(|(_, cell)| cell.bandwidth_windows.is_empty())
    {
        return None;
    }
    let high = cells
        .iter()
        .flat_map(|(_, c)| c.bandwidth_windows.iter().copied())
        .fold(0.0, f64::max);
    let end = cells
        .iter()
        .map(|(_, c)| c.bandwidth_windows.len() as f64 * c.window as f64 / 1e9)
        .fold(0.0, f64::max);
    let unit = page.window_bandwidth;
    let series = cells
        .iter()
        .map(|&(policy, cell)| {
            let seconds = cell.window as f64 / 1e9;
            let line = cell
                .bandwidth_windows
                .iter()
                .enumerate()
                .map(|(i, &b)| ((i + 1) as f64 * seconds, b / unit.bytes))
                .collect();
            policy_line(
                legend(model, &[point], policy, key_index),
                policy,
                line,
                false,
            )
        })
        .collect();
    let window_ms = cells[0].1.window / 1_000_000;
    Some(Figure {
        title: format!(
            "Bandwidth over time: {}{}",
            key(model, key_index).label(),
            title_point(model, point)
        ),
        chart: Chart {
            width: CHART_WIDTH_PX,
            height: CHART_HEIGHT_PX,
            x: Axis::linear("time (s)", 0.0, end.max(1e-3)),
            y: Axis::from_zero(
                format!("bandwidth ({} per {window_ms} ms window)", unit.symbol),
                high / unit.bytes * 1.05,
            ),
            x_grid: true,
            series,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a CDF's staircase rises at each value and its tail mirrors it.
    #[test]
    fn staircase_steps() {
        let steps = [(1000.0, 0.5), (3000.0, 1.0)];
        assert_eq!(
            staircase(&steps, 1000.0, false),
            [(1.0, 0.0), (1.0, 0.5), (3.0, 0.5), (3.0, 1.0)]
        );
        assert_eq!(
            staircase(&steps, 1000.0, true),
            [(1.0, 1.0), (1.0, 0.5), (3.0, 0.5), (3.0, 0.0)]
        );
    }
}

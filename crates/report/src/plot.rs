//! Charts drawn by plotters into SVG text: axes with ticks we choose, a legend in its own band
//! above the plot (so it never covers data), and one `<g class="series">` per series.
//!
//! How a chart is put together, and why:
//! 1. The frame (background, grid, axes, tick labels, axis descriptions, legend) is drawn into
//!    one SVG string.
//! 2. Each series is drawn into an SVG string of its own, through a chart built with the same
//!    size, margins and ranges, so its coordinates match the frame's exactly. Its elements are
//!    then moved into the frame inside `<g class="series" data-series="NAME">`. plotters cannot
//!    group elements itself; grouping lets the page's self-check (and a reader of the SVG) find
//!    each series' marks and prove they were drawn.
//! 3. Every axis is a plain `f64` axis with explicit tick positions. A log axis maps values to
//!    `log10(value)` before plotting and labels its ticks with the values (1, 10, 100 or 1, 2,
//!    5, 10...), so every chart shares one coordinate type and tick labels are always round.
//!
//! Text is written as SVG `<text>` elements (plotters' SVG backend with its built-in size
//! estimate), so no font files are read and the output is the same on every machine.

use crate::units;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;

/// Colours given to policies in the order the study lists them (Okabe and Ito's palette, which
/// colour-blind readers can tell apart; its yellow is darkened to read on white).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(150, 130, 0),
];

/// The colour of the policy at `index` in the study's list (the palette repeats after eight).
pub fn policy_color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// `#RRGGBB` for HTML.
pub fn hex(color: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", color.0, color.1, color.2)
}

/// Font family of every label.
const FONT: &str = "sans-serif";
/// plotters' text size for tick labels; its SVG backend writes `size / 1.24` px (12.1 px).
const LABEL_SIZE: f64 = 15.0;
/// plotters' text size for axis descriptions and the legend (12.9 px).
const TEXT_SIZE: f64 = 16.0;
/// Width allowed per character of a label, in px: a generous estimate for a 13 px sans-serif
/// font, so that labels laid out from it do not collide when the browser sets them.
const CHAR_WIDTH_PX: f64 = 7.6;
/// Height of one legend row, px.
const LEGEND_ROW_PX: u32 = 22;
/// Space between the chart's edge and its content, px.
const MARGIN_PX: u32 = 10;
/// Height of the band under the plot for tick labels and the x axis description, px.
const X_LABEL_AREA_PX: u32 = 46;
/// Most series one chart draws (more could not be told apart anyway).
pub const SERIES_MAX: usize = 32;

const GRID_BOLD: RGBColor = RGBColor(214, 214, 214);
const GRID_LIGHT: RGBColor = RGBColor(240, 240, 240);
const AXIS: RGBColor = RGBColor(90, 90, 90);
const TEXT: RGBColor = RGBColor(40, 40, 40);

/// How values map onto an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Evenly.
    Linear,
    /// By powers of ten; values must be positive.
    Log10,
}

/// How an axis is labelled.
#[derive(Clone, Debug, PartialEq)]
pub enum Ticks {
    /// Round numbers chosen from the range.
    Auto,
    /// Round numbers shown as percentages (0.01 is `1%`).
    Percent,
    /// These positions (in data units) with these labels, and no light grid lines.
    Labels(Vec<(f64, String)>),
}

/// One axis: what it shows, how, and over which range.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Description under (x) or beside (y) the axis, with the unit.
    pub description: String,
    /// Linear or logarithmic.
    pub scale: Scale,
    /// Smallest value shown.
    pub min: f64,
    /// Largest value shown.
    pub max: f64,
    /// Labels.
    pub ticks: Ticks,
}

impl Axis {
    /// A linear axis from 0 up to a round number at or above `data_max`.
    pub fn from_zero(description: impl Into<String>, data_max: f64) -> Axis {
        let data_max = if data_max.is_finite() && data_max > 0.0 {
            data_max
        } else {
            1.0
        };
        let step = nice_step(data_max / 5.0);
        Axis {
            description: description.into(),
            scale: Scale::Linear,
            min: 0.0,
            max: (data_max / step).ceil() * step,
            ticks: Ticks::Auto,
        }
    }

    /// A linear axis over exactly `min..max` (which must differ).
    pub fn linear(description: impl Into<String>, min: f64, max: f64) -> Axis {
        assert!(min < max, "an axis needs a range: {min}..{max}");
        Axis {
            description: description.into(),
            scale: Scale::Linear,
            min,
            max,
            ticks: Ticks::Auto,
        }
    }

    /// A log axis from the round value (1, 2 or 5 times a power of ten) at or below
    /// `data_min` to the one at or above `data_max`.
    pub fn log(description: impl Into<String>, data_min: f64, data_max: f64) -> Axis {
        assert!(data_min > 0.0, "a log axis starts above zero: {data_min}");
        let (min, max) = (
            round_down_125(data_min),
            round_up_125(data_max.max(data_min)),
        );
        let max = if max <= min {
            round_up_125(min * 1.5)
        } else {
            max
        };
        Axis {
            description: description.into(),
            scale: Scale::Log10,
            min,
            max,
            ticks: Ticks::Auto,
        }
    }

    /// A log axis over exactly `min..max` (both positive, `min < max`).
    pub fn log_exact(description: impl Into<String>, min: f64, max: f64) -> Axis {
        assert!(0.0 < min && min < max, "a log axis needs 0 < {min} < {max}");
        Axis {
            description: description.into(),
            scale: Scale::Log10,
            min,
            max,
            ticks: Ticks::Auto,
        }
    }

    /// This axis with `ticks`.
    pub fn with_ticks(mut self, ticks: Ticks) -> Axis {
        self.ticks = ticks;
        self
    }

    /// `value` in plotting coordinates, `None` if it cannot be shown on this axis.
    fn place(&self, value: f64) -> Option<f64> {
        match self.scale {
            Scale::Linear if value.is_finite() => Some(value),
            Scale::Log10 if value.is_finite() && value > 0.0 => Some(value.log10()),
            _ => None,
        }
    }

    /// The plotting range.
    fn span(&self) -> (f64, f64) {
        let low = self.place(self.min).expect("axis minimum is placeable");
        let high = self.place(self.max).expect("axis maximum is placeable");
        assert!(low < high, "axis {:?} has an empty range", self.description);
        (low, high)
    }

    /// Labelled tick positions (plotting coordinates, label) and light grid positions.
    fn ticks(&self) -> (Vec<(f64, String)>, Vec<f64>) {
        let inside =
            |value: f64| value >= self.min * (1.0 - 1e-9) && value <= self.max * (1.0 + 1e-9);
        match (&self.ticks, self.scale) {
            (Ticks::Labels(labels), _) => (
                labels
                    .iter()
                    .filter_map(|(value, label)| Some((self.place(*value)?, label.clone())))
                    .collect(),
                Vec::new(),
            ),
            (ticks, Scale::Linear) => {
                let step = nice_step((self.max - self.min) / 5.0);
                let first = (self.min / step).ceil() as i64;
                let last = (self.max / step + 1e-9).floor() as i64;
                let bold = (first..=last)
                    .map(|i| {
                        let value = i as f64 * step;
                        (value, linear_label(value, step, ticks))
                    })
                    .collect();
                let light = (first - 1..=last)
                    .map(|i| (i as f64 + 0.5) * step)
                    .filter(|&value| value > self.min && value < self.max)
                    .collect();
                (bold, light)
            }
            (ticks, Scale::Log10) => {
                let low = self.min.log10().floor() as i32;
                let high = self.max.log10().ceil() as i32;
                let candidates: Vec<(u32, f64)> = (low..=high)
                    .flat_map(|exponent| {
                        (1..10u32)
                            .map(move |multiple| (multiple, 10f64.powi(exponent) * multiple as f64))
                    })
                    .filter(|&(_, value)| inside(value))
                    .collect();
                // Over a wide range label powers of ten only, over a narrower one 1, 2 and 5
                // times them, and every multiple when that would leave fewer than three labels.
                let wide = (self.max / self.min).log10() >= 2.5;
                let labelled = |multiple: u32| {
                    if wide {
                        multiple == 1
                    } else {
                        matches!(multiple, 1 | 2 | 5)
                    }
                };
                let every = candidates.iter().filter(|(m, _)| labelled(*m)).count() < 3;
                let mut bold = Vec::new();
                let mut light = Vec::new();
                for (multiple, value) in candidates {
                    if every || labelled(multiple) {
                        bold.push((value.log10(), log_label(value, ticks)));
                    } else {
                        light.push(value.log10());
                    }
                }
                (bold, light)
            }
        }
    }
}

fn linear_label(value: f64, step: f64, ticks: &Ticks) -> String {
    match ticks {
        Ticks::Percent => format!("{}%", units::tick(value * 100.0, step * 100.0)),
        _ => units::tick(value, step),
    }
}

fn log_label(value: f64, ticks: &Ticks) -> String {
    match ticks {
        Ticks::Percent => format!("{}%", units::tick(value * 100.0, value * 100.0)),
        _ => units::tick(value, value),
    }
}

/// 1, 2 or 5 times a power of ten, the smallest at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&step| step >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}

fn round_down_125(value: f64) -> f64 {
    let power = 10f64.powf(value.log10().floor());
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&v| v <= value * (1.0 + 1e-9))
        .unwrap_or(power)
}

fn round_up_125(value: f64) -> f64 {
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&v| v >= value * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}

/// What a series draws, in data units.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// A line through the points, with a dot at each if `markers`.
    Line {
        /// The points, in order.
        points: Vec<(f64, f64)>,
        /// Whether to mark each point.
        markers: bool,
    },
    /// Rectangles from (x0, 0) to (x1, height).
    Bars(Vec<(f64, f64, f64)>),
}

/// One series: a name for the legend, a colour and what to draw.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Name in the legend.
    pub name: String,
    /// Colour.
    pub color: RGBColor,
    /// Marks.
    pub shape: Shape,
}

/// A whole chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Size in px.
    pub width: u32,
    /// Size in px.
    pub height: u32,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// Whether to draw vertical grid lines.
    pub x_grid: bool,
    /// The series, drawn in order.
    pub series: Vec<Series>,
}

/// A linear `f64` range whose ticks (labelled) and light grid lines are given. (plotters'
/// own `with_key_points` wrapper does not keep the label formatting of an `f64` range, so
/// the mesh could not be drawn with it.)
#[derive(Clone, Debug)]
struct TickedRange {
    low: f64,
    high: f64,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl Ranged for TickedRange {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let fraction = (value - self.low) / (self.high - self.low);
        let pixel = limit.0 as f64 + fraction * (limit.1 - limit.0) as f64;
        // Far-off values are pinned a little outside the chart rather than wrapped around.
        pixel.clamp(-1e6, 1e6).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.low..self.high
    }
}

type Coordinates = Cartesian2d<TickedRange, TickedRange>;

/// Pixel layout shared by the frame and every series layer.
struct Layout {
    legend_rows: Vec<Vec<(usize, i32)>>,
    legend_px: u32,
    y_label_px: u32,
}

impl Chart {
    /// The chart as an `<svg>` element, or why it could not be drawn.
    pub fn svg(&self) -> Result<String, String> {
        if self.series.len() > SERIES_MAX {
            return Err(format!(
                "{} series are more than one chart can show ({SERIES_MAX})",
                self.series.len()
            ));
        }
        let layout = self.layout();
        let mut frame = String::new();
        self.draw_frame(&layout, &mut frame)
            .map_err(|e| format!("drawing the axes: {e}"))?;
        let mut layers = String::from("<g class=\"data\">\n");
        for (index, series) in self.series.iter().enumerate() {
            let mut layer = String::new();
            self.draw_series(&layout, index, &mut layer)
                .map_err(|e| format!("drawing {}: {e}", series.name))?;
            layers.push_str(&format!(
                "<g class=\"series\" data-series=\"{}\">\n{}</g>\n",
                crate::units::escape(&series.name),
                svg_body(&layer)?
            ));
        }
        layers.push_str("</g>\n");
        let end = frame
            .rfind("</svg>")
            .ok_or("plotters wrote no closing </svg>")?;
        frame.insert_str(end, &layers);
        Ok(frame)
    }

    fn layout(&self) -> Layout {
        // Legend entries flow left to right from the plot's left edge and wrap.
        let (y_labels, _) = self.y.ticks();
        let widest = y_labels
            .iter()
            .map(|(_, label)| label.chars().count())
            .max()
            .unwrap_or(1);
        let y_label_px = (widest as f64 * CHAR_WIDTH_PX) as u32 + 40;
        let left = (MARGIN_PX + y_label_px) as i32;
        let right = (self.width - MARGIN_PX) as i32;
        let mut rows: Vec<Vec<(usize, i32)>> = vec![Vec::new()];
        let mut x = left;
        for (index, series) in self.series.iter().enumerate() {
            let width = 34 + (series.name.chars().count() as f64 * CHAR_WIDTH_PX) as i32 + 22;
            if x + width > right && x > left {
                rows.push(Vec::new());
                x = left;
            }
            rows.last_mut().expect("one row at least").push((index, x));
            x += width;
        }
        let legend_px = if self.series.is_empty() {
            MARGIN_PX
        } else {
            rows.len() as u32 * LEGEND_ROW_PX + 8
        };
        Layout {
            legend_rows: rows,
            legend_px,
            y_label_px,
        }
    }

    /// The chart's coordinate system on `area`, identical for the frame and every layer.
    fn build<'a, 'b>(
        &self,
        layout: &Layout,
        area: &'b DrawingArea<SVGBackend<'a>, Shift>,
    ) -> Result<ChartContext<'b, SVGBackend<'a>, Coordinates>, String> {
        let (x_low, x_high) = self.x.span();
        let (y_low, y_high) = self.y.span();
        let (x_bold, x_light) = self.x.ticks();
        let (y_bold, y_light) = self.y.ticks();
        let x_spec = TickedRange {
            low: x_low,
            high: x_high,
            bold: x_bold.iter().map(|(at, _)| *at).collect(),
            light: x_light,
        };
        let y_spec = TickedRange {
            low: y_low,
            high: y_high,
            bold: y_bold.iter().map(|(at, _)| *at).collect(),
            light: y_light,
        };
        ChartBuilder::on(area)
            .margin_top(4)
            .margin_left(MARGIN_PX)
            .margin_right(MARGIN_PX + 8)
            .margin_bottom(MARGIN_PX)
            .x_label_area_size(X_LABEL_AREA_PX)
            .y_label_area_size(layout.y_label_px)
            .build_cartesian_2d(x_spec, y_spec)
            .map_err(|e| e.to_string())
    }

    fn draw_frame(&self, layout: &Layout, target: &mut String) -> Result<(), String> {
        let root = SVGBackend::with_string(target, (self.width, self.height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (legend, plot) = root.split_vertically(layout.legend_px);
        let mut chart = self.build(layout, &plot)?;
        let (x_bold, _) = self.x.ticks();
        let (y_bold, _) = self.y.ticks();
        let x_format = |at: &f64| label_at(&x_bold, *at);
        let y_format = |at: &f64| label_at(&y_bold, *at);
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(self.x.description.as_str())
            .y_desc(self.y.description.as_str())
            .x_label_formatter(&x_format)
            .y_label_formatter(&y_format)
            .label_style((FONT, LABEL_SIZE).into_font().color(&TEXT))
            .axis_desc_style((FONT, TEXT_SIZE).into_font().color(&TEXT))
            .bold_line_style(GRID_BOLD)
            .light_line_style(GRID_LIGHT)
            .axis_style(AXIS);
        if !self.x_grid {
            mesh.disable_x_mesh();
        }
        mesh.draw().map_err(|e| e.to_string())?;
        for row_index in 0..layout.legend_rows.len() {
            let center = (row_index as u32 * LEGEND_ROW_PX + LEGEND_ROW_PX / 2 + 4) as i32;
            for &(index, x) in &layout.legend_rows[row_index] {
                let series = &self.series[index];
                match series.shape {
                    Shape::Line { .. } => legend
                        .draw(&PathElement::new(
                            vec![(x, center), (x + 26, center)],
                            series.color.stroke_width(self.stroke_px(index).max(3)),
                        ))
                        .map_err(|e| e.to_string())?,
                    Shape::Bars(_) => legend
                        .draw(&Rectangle::new(
                            [(x + 6, center - 7), (x + 20, center + 7)],
                            series.color.filled(),
                        ))
                        .map_err(|e| e.to_string())?,
                }
                let style = (FONT, TEXT_SIZE)
                    .into_font()
                    .color(&TEXT)
                    .pos(Pos::new(HPos::Left, VPos::Center));
                legend
                    .draw(&Text::new(series.name.clone(), (x + 34, center), style))
                    .map_err(|e| e.to_string())?;
            }
        }
        root.present().map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Line width of series `index`: earlier series are drawn wider, so that where two
    /// policies measured the same the line underneath still shows at its edges.
    fn stroke_px(&self, index: usize) -> u32 {
        let later = self.series.len().saturating_sub(index + 1) as u32;
        2 + later.min(2)
    }

    fn draw_series(
        &self,
        layout: &Layout,
        index: usize,
        target: &mut String,
    ) -> Result<(), String> {
        let series = &self.series[index];
        let root = SVGBackend::with_string(target, (self.width, self.height)).into_drawing_area();
        let (_, plot) = root.split_vertically(layout.legend_px);
        let mut chart = self.build(layout, &plot)?;
        match &series.shape {
            Shape::Line { points, markers } => {
                let placed: Vec<(f64, f64)> = points
                    .iter()
                    .filter_map(|&(x, y)| Some((self.x.place(x)?, self.y.place(y)?)))
                    .collect();
                let placed = thin(&placed, self.x.span(), self.y.span());
                chart
                    .draw_series(LineSeries::new(
                        placed.iter().copied(),
                        series.color.stroke_width(self.stroke_px(index)),
                    ))
                    .map_err(|e| e.to_string())?;
                // A lone point draws no line, so it gets a dot whatever was asked.
                if *markers || placed.len() == 1 {
                    chart
                        .draw_series(
                            placed
                                .iter()
                                .map(|&point| Circle::new(point, 4, series.color.filled())),
                        )
                        .map_err(|e| e.to_string())?;
                }
            }
            Shape::Bars(bars) => {
                assert_eq!(self.y.scale, Scale::Linear, "bars stand on a linear axis");
                chart
                    .draw_series(bars.iter().map(|&(x0, x1, height)| {
                        Rectangle::new([(x0, 0.0), (x1, height)], series.color.filled())
                    }))
                    .map_err(|e| e.to_string())?;
                // Each bar's value above it, where the bar is wide enough to hold it.
                let (x_low, x_high) = self.x.span();
                let plot_px = self.width as f64 - (2 * MARGIN_PX + 8 + layout.y_label_px) as f64;
                let style = (FONT, LABEL_SIZE)
                    .into_font()
                    .color(&TEXT)
                    .pos(Pos::new(HPos::Center, VPos::Bottom));
                let labels = bars.iter().filter_map(|&(x0, x1, height)| {
                    let label = units::value(height);
                    let bar_px = (x1 - x0) / (x_high - x_low) * plot_px;
                    let label_px = label.chars().count() as f64 * CHAR_WIDTH_PX + 4.0;
                    (bar_px >= label_px).then(|| {
                        EmptyElement::at(((x0 + x1) / 2.0, height))
                            + Text::new(label, (0, -3), style.clone())
                    })
                });
                chart.draw_series(labels).map_err(|e| e.to_string())?;
            }
        }
        root.present().map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// Points per axis span below which consecutive points are merged: about half a pixel on a
/// 600 px chart, so a CDF of thousands of histogram buckets draws as a few hundred points
/// that look the same.
const THIN_STEPS: f64 = 1200.0;

/// `points` without those closer than 1/[`THIN_STEPS`] of either span to the last one kept;
/// the first and last are always kept.
fn thin(points: &[(f64, f64)], x_span: (f64, f64), y_span: (f64, f64)) -> Vec<(f64, f64)> {
    let dx = (x_span.1 - x_span.0) / THIN_STEPS;
    let dy = (y_span.1 - y_span.0) / THIN_STEPS;
    let mut kept: Vec<(f64, f64)> = Vec::with_capacity(points.len().min(4 * THIN_STEPS as usize));
    for (index, &point) in points.iter().enumerate() {
        let far = match kept.last() {
            None => true,
            Some(&(x, y)) => (point.0 - x).abs() >= dx || (point.1 - y).abs() >= dy,
        };
        if far || index + 1 == points.len() {
            kept.push(point);
        }
    }
    kept
}

/// The label of the tick at `at`, matched with a tolerance for float rounding.
fn label_at(ticks: &[(f64, String)], at: f64) -> String {
    ticks
        .iter()
        .find(|(position, _)| (position - at).abs() <= 1e-9 * (1.0 + at.abs()))
        .map(|(_, label)| label.clone())
        .unwrap_or_default()
}

/// The elements of an SVG document plotters wrote: everything between the opening `<svg ...>`
/// line and the closing `</svg>`.
fn svg_body(svg: &str) -> Result<&str, String> {
    let start = svg
        .strip_prefix("<svg ")
        .and_then(|_| svg.find('\n'))
        .ok_or("plotters' SVG does not open with <svg>")?;
    let end = svg
        .rfind("</svg>")
        .ok_or("plotters wrote no closing </svg>")?;
    Ok(&svg[start + 1..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves log axes start and end on round values and label decades or 1-2-5 steps.
    #[test]
    fn log_axes_are_round() {
        let axis = Axis::log("latency", 130.0, 42_000.0);
        assert_eq!((axis.min, axis.max), (100.0, 50_000.0));
        let (bold, light) = axis.ticks();
        let labels: Vec<&str> = bold.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["100", "1000", "10k"]);
        assert!(light.len() > 10);
        let narrow = Axis::log("latency", 3.0, 40.0);
        let labels: Vec<String> = narrow.ticks().0.into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["2", "5", "10", "20", "50"]);
        let tail = Axis::log("tail", 1e-4, 1.0).with_ticks(Ticks::Percent);
        let labels: Vec<String> = tail.ticks().0.into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["0.01%", "0.1%", "1%", "10%", "100%"]);
    }

    // Proves linear axes from zero end on a round step above the data.
    #[test]
    fn linear_axes_from_zero() {
        let axis = Axis::from_zero("IOPS", 87.0);
        assert_eq!((axis.min, axis.max), (0.0, 100.0));
        let labels: Vec<String> = axis.ticks().0.into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["0", "20", "40", "60", "80", "100"]);
        assert_eq!(Axis::from_zero("empty", 0.0).max, 1.0);
    }

    // Proves a chart is one SVG with a group per series, and the same chart gives the same text.
    #[test]
    fn chart_groups_series() {
        let chart = Chart {
            width: 400,
            height: 300,
            x: Axis::log("latency (ms)", 0.5, 20.0),
            y: Axis::linear("fraction", 0.0, 1.0),
            x_grid: true,
            series: vec![
                Series {
                    name: "noop <fifo>".into(),
                    color: policy_color(0),
                    shape: Shape::Line {
                        points: vec![(0.5, 0.0), (2.0, 0.5), (20.0, 1.0)],
                        markers: false,
                    },
                },
                Series {
                    name: "deadline".into(),
                    color: policy_color(1),
                    shape: Shape::Line {
                        points: vec![(1.0, 0.0), (3.0, 1.0)],
                        markers: true,
                    },
                },
            ],
        };
        let svg = chart.svg().unwrap();
        assert!(svg.starts_with("<svg "));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<svg").count(), 1);
        assert_eq!(svg.matches("<g class=\"series\"").count(), 2);
        assert!(svg.contains("data-series=\"noop &lt;fifo&gt;\""));
        assert!(
            svg.contains(">\nnoop &lt;fifo&gt;\n</text>"),
            "legend text escaped"
        );
        assert_eq!(svg.matches("<circle").count(), 2);
        assert_eq!(svg, chart.svg().unwrap());
    }
}

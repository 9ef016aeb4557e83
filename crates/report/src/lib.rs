//! # iosched-report
//!
//! Tables, charts and the HTML report of a study, in layers that only look down:
//!
//! - bottom: [`study`] (the data: runs side by side and their verdicts), [`figures`] (a job's
//!   figures from fio's report), [`units`] (units, number formats, HTML escaping);
//! - [`text`]: the side-by-side text table the commands print;
//! - [`model`]: what the page draws, read once from the study;
//! - [`plot`] (drawing with plotters) and, above it, [`charts`] (which charts the model has);
//! - [`table`] (the HTML table of figures and parameters);
//! - top: [`page`], the whole page, and [`html`].
//!
//! The study as one self-contained HTML page: verdicts, a table of figures, and charts drawn
//! side by side as the papers draw them (latency CDFs, bandwidth and IOPS bars, lines over the
//! swept parameter, bandwidth over time), with every parameter the runs used.
//!
//! The page needs nothing but a browser: charts are inline SVG drawn by plotters, styles and
//! the small self-check script are inline, no fonts or network are used. It is a pure function
//! of the [`Study`]: no clock is read and nothing is iterated in hash order, so the same study
//! gives the same bytes.
//!
//! How it is built:
//! 1. [`Model`] reads every run once: for each job name and direction that any run had I/O
//!    in, the figures the page shows, a job's clones pooled as `compare`'s tables pool them
//!    ([`figures::job_figures`]); a run that starved a job keeps its cell, marked.
//! 2. [`charts`] decides which charts to draw from the model; [`plot`] draws them.
//! 3. [`table`] writes the table of figures and the parameters; [`page`] puts it all together.
//!
//! ```
//! use iosched_report::study::Study;
//!
//! let study = Study {
//!     title: "Nothing run yet".into(),
//!     summary: "An empty study still renders.".into(),
//!     seed: 1,
//!     device: "hdd".into(),
//!     settings: vec![],
//!     policies: vec!["noop".into()],
//!     sweep: None,
//!     runs: vec![],
//!     verdicts: vec![],
//!     headline: None,
//! };
//! let html = iosched_report::html(&study);
//! assert!(html.starts_with("<!DOCTYPE html>"));
//! assert!(html.contains("Nothing run yet"));
//! ```

pub mod charts;
pub mod figures;
pub mod model;
pub mod page;
pub mod plot;
pub mod study;
pub mod table;
pub mod text;
pub mod units;

pub use model::{Cell, Key, Model};
use study::Study;

/// The study as one HTML page.
pub fn html(study: &Study) -> String {
    page::render(&Model::new(study))
}

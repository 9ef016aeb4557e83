//! Sweeps: a grid of configurations (any setting, policy, device parameter, job-file variable,
//! workload or seed) expanded into points, each run in the simulator, the results gathered in
//! one tidy table (a row per point, job and direction) and a summary.
//!
//! A grid is a TOML file:
//!
//! ```toml
//! title = "deadline: read_expire x fifo_batch"
//! policy = "deadline"            # at every point, unless an axis varies it
//! device = "hdd"                 # likewise; and seed = 1
//!
//! [workloads]                    # name = fio job file, relative to this file
//! oltp = "oltp.fio"
//! scan = "scan.fio"
//!
//! [set]                          # fixed at every point: tunables (`--set`),
//! slice_idle = 0
//! [device_set]                   # device parameters (`--device-set`),
//! [env]                          # job-file variables (`${VAR}`),
//! [groups]                       # cgroup files (`--group PATH:FILE=VALUE`)
//! "/db:io.weight" = 500
//!
//! [[axis]]                       # the axes, outermost first; each one key
//! "set.read_expire" = [125, 250, 500]
//! [[axis]]
//! "set.fifo_batch" = [1, 16]
//! [[axis]]
//! workload = ["oltp", "scan"]
//! [[axis]]
//! seed = [1, 2, 3, 4, 5]
//! ```
//!
//! An axis key says what it varies: `policy` (a policy, or `POLICY:NAME=VALUE,...`),
//! `device`, `seed`, `workload` (a name from `[workloads]`), `set.NAME` (a tunable),
//! `device.NAME` (a device parameter), `env.VAR` (a job-file variable), or
//! `group.PATH:FILE` (a cgroup file, `"group./db:io.weight"`). Values are strings or numbers,
//! written as sysfs takes them. A grid with several workloads and no `workload` axis runs every
//! workload, as if it were the first axis.
//!
//! The grid is the product of the axes, the first outermost; point `i` is the same
//! configuration whoever runs it, and each point is one deterministic simulation, so the table
//! is the same on one thread, on many, or on a cluster ([`run_point`] is what a remote worker
//! calls). Job-file variables come from the grid only, never from the environment of the
//! process that runs the point, for the same reason.

use crate::matrix::{JobSource, Variant};
use crate::progress::Progress;
use crate::setup::parse_group_flag;
use anyhow::{bail, Context, Result};
use iosched_fio::{parse, JobFile, RunReport};
use iosched_report::figures::{self, JobFigures};
use iosched_sim::SimConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Most points a grid may expand to: a product past this is almost surely a mistake (and would
/// take days); split it into several grids.
pub const POINTS_MAX: usize = 1_000_000;

/// What an axis (or a fixed setting) varies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Knob {
    /// The policy: a name, or `POLICY:NAME=VALUE,...`.
    Policy,
    /// The device model.
    Device,
    /// The seed.
    Seed,
    /// The workload: a name from `[workloads]`.
    Workload,
    /// A queue or policy tunable.
    Set(String),
    /// A device parameter.
    DeviceSet(String),
    /// A job-file variable.
    Env(String),
    /// A cgroup file: path and file name.
    Group(String, String),
}

impl Knob {
    /// Parses an axis key.
    fn parse(key: &str) -> Result<Knob, String> {
        let named = |rest: &str, what: &str| -> Result<String, String> {
            let rest = rest.trim();
            if rest.is_empty() {
                Err(format!("axis {key:?}: name the {what} after the dot"))
            } else {
                Ok(rest.to_string())
            }
        };
        Ok(match key {
            "policy" => Knob::Policy,
            "device" => Knob::Device,
            "seed" => Knob::Seed,
            "workload" => Knob::Workload,
            _ => {
                if let Some(rest) = key.strip_prefix("set.") {
                    Knob::Set(named(rest, "tunable")?)
                } else if let Some(rest) = key.strip_prefix("device.") {
                    Knob::DeviceSet(named(rest, "device parameter")?)
                } else if let Some(rest) = key.strip_prefix("env.") {
                    Knob::Env(named(rest, "variable")?)
                } else if let Some(rest) = key.strip_prefix("group.") {
                    let Some((path, file)) = rest.split_once(':') else {
                        return Err(format!(
                            "axis {key:?}: expected group.PATH:FILE, like \"group./db:io.weight\""
                        ));
                    };
                    Knob::Group(named(path, "group path")?, named(file, "group file")?)
                } else {
                    return Err(format!(
                        "unknown axis {key:?}: expected policy, device, seed, workload, \
                         set.NAME, device.NAME, env.VAR or group.PATH:FILE"
                    ));
                }
            }
        })
    }
}

/// One axis: what it varies, its column name (the key as written) and its values.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Axis {
    /// The key as written in the grid; the table's column.
    pub name: String,
    /// What it varies.
    pub knob: Knob,
    /// Its values, as text.
    pub values: Vec<String>,
}

/// A parsed grid. See the [module documentation](self).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Grid {
    /// Its title (the file name when it gives none).
    pub title: String,
    /// Where it came from, for messages.
    pub origin: String,
    /// The workloads by name, in name order.
    pub workloads: Vec<(String, JobSource)>,
    /// The axes, outermost first.
    pub axes: Vec<Axis>,
    policy: String,
    device: String,
    seed: u64,
    settings: Vec<(String, String)>,
    device_settings: Vec<(String, String)>,
    env: BTreeMap<String, String>,
    groups: Vec<(String, String, String)>,
}

/// One point of a grid: its index and its value on each axis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    /// Its place in the grid's order, from 0.
    pub index: usize,
    /// Its value on each axis, in axis order.
    pub values: Vec<String>,
}

/// A point and what running it gave.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PointResult {
    /// The point.
    pub point: Point,
    /// Its figures, or why it failed.
    pub outcome: Result<Figures, String>,
}

/// What a sweep keeps of a point's run: its rows and its totals, not the whole report (a
/// report's latency histograms are tens of kilobytes; a grid has up to [`POINTS_MAX`] points).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figures {
    /// One row per job name and direction with I/O, each [`FIGURE_COLUMNS`] long.
    pub rows: Vec<(String, String, Vec<Cell>)>,
    /// I/Os per second over every job and direction.
    pub iops: f64,
    /// The worst p99 completion latency among them, ns (`None`: no samples).
    pub worst_p99: Option<u64>,
}

impl Figures {
    /// A report's figures.
    pub fn of(report: &RunReport) -> Figures {
        let all = figures::all_figures(report);
        Figures {
            rows: all
                .iter()
                .map(|f| (f.job.clone(), f.dir.name().to_string(), figure_cells(f)))
                .collect(),
            iops: all.iter().map(JobFigures::iops).sum(),
            worst_p99: all
                .iter()
                .filter(|f| f.stats.clat.count() > 0)
                .map(|f| f.stats.clat.percentile(99.0))
                .max(),
        }
    }
}

/// The line of byte `offset` in `text`, from 1.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// A TOML value as a setting's text.
fn value_text(value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(text) => Ok(text.clone()),
        toml::Value::Integer(number) => Ok(number.to_string()),
        toml::Value::Float(number) => Ok(number.to_string()),
        other => Err(format!(
            "{other} is a {}: write values as strings or numbers, as sysfs and fio take them",
            other.type_str()
        )),
    }
}

/// A table of fixed settings (`[set]`, `[env]`...) as (name, text) pairs, in name order.
fn fixed_table(table: Option<&toml::Value>, what: &str) -> Result<Vec<(String, String)>, String> {
    let Some(table) = table else {
        return Ok(Vec::new());
    };
    let table = table
        .as_table()
        .ok_or_else(|| format!("[{what}] must be a table of NAME = VALUE"))?;
    table
        .iter()
        .map(|(name, value)| {
            value_text(value)
                .map(|text| (name.clone(), text))
                .map_err(|e| format!("[{what}] {name}: {e}"))
        })
        .collect()
}

impl Grid {
    /// Reads the grid file at `path`; workloads are relative to its folder.
    pub fn read(path: &Path) -> Result<Grid> {
        let text = parse::read_text_file(
            path,
            "grid file",
            iosched_core::limits::INPUT_FILE_BYTES_MAX,
        )
        .map_err(anyhow::Error::msg)?;
        let base = path.parent().map(PathBuf::from).unwrap_or_default();
        Grid::parse(&text, &path.display().to_string(), &base)
    }

    /// Parses a grid's text named `origin`, its workloads relative to `base_dir`. Errors name
    /// the file and line.
    pub fn parse(text: &str, origin: &str, base_dir: &Path) -> Result<Grid> {
        let mut document: toml::Table = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|span| line_of(text, span.start)).unwrap_or(1);
            anyhow::anyhow!("{origin}:{line}: {}", e.message().trim_end())
        })?;
        let axis_value = document.remove("axis");
        let table = &document;
        // The line of a top-level key, for messages about it.
        let line_at = |key: &str| -> usize {
            text.lines()
                .position(|line| {
                    let line = line.trim_start();
                    line.starts_with(&format!("[{key}]"))
                        || line.starts_with(&format!("[[{key}]]"))
                        || line
                            .strip_prefix(key)
                            .is_some_and(|rest| rest.trim_start().starts_with('='))
                })
                .map_or(1, |index| index + 1)
        };
        let fail =
            |key: &str, message: String| anyhow::anyhow!("{origin}:{}: {message}", line_at(key));
        const KNOWN: &[&str] = &[
            "title",
            "policy",
            "device",
            "seed",
            "job",
            "workloads",
            "set",
            "device_set",
            "env",
            "groups",
            "axis",
        ];
        for key in table.keys() {
            if !KNOWN.contains(&key.as_str()) {
                return Err(fail(
                    key,
                    format!("unknown key {key:?}; a grid has {}", KNOWN.join(", ")),
                ));
            }
        }
        let text_of = |key: &str, default: &str| -> Result<String> {
            match table.get(key) {
                None => Ok(default.to_string()),
                Some(toml::Value::String(text)) if !text.trim().is_empty() => {
                    Ok(text.trim().to_string())
                }
                Some(_) => Err(fail(key, format!("{key} must be a non-empty string"))),
            }
        };
        let title = text_of(
            "title",
            Path::new(origin)
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("sweep"),
        )?;
        let policy = text_of("policy", "deadline")?;
        let device = text_of("device", "hdd")?;
        let seed = match table.get("seed") {
            None => 1,
            Some(toml::Value::Integer(seed)) if *seed >= 0 => *seed as u64,
            Some(_) => return Err(fail("seed", "seed must be a whole number >= 0".into())),
        };
        let mut workloads: Vec<(String, String)> = Vec::new();
        match (table.get("job"), table.get("workloads")) {
            (Some(_), Some(_)) => {
                return Err(fail(
                    "job",
                    "give either job = \"FILE\" or a [workloads] table, not both".into(),
                ))
            }
            (Some(toml::Value::String(file)), None) => {
                let name = Path::new(file)
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("job")
                    .to_string();
                workloads.push((name, file.clone()));
            }
            (Some(_), None) => return Err(fail("job", "job must be a file name".into())),
            (None, Some(toml::Value::Table(named))) => {
                for (name, file) in named {
                    let Some(file) = file.as_str() else {
                        return Err(fail(
                            "workloads",
                            format!("[workloads] {name}: expected a job file name"),
                        ));
                    };
                    workloads.push((name.clone(), file.to_string()));
                }
            }
            (None, Some(_)) => {
                return Err(fail(
                    "workloads",
                    "workloads must be a table of NAME = \"FILE\"".into(),
                ))
            }
            (None, None) => {}
        }
        if workloads.is_empty() {
            return Err(anyhow::anyhow!(
                "{origin}: no workload: give job = \"FILE.fio\" or a [workloads] table"
            ));
        }
        let mut sources = Vec::with_capacity(workloads.len());
        for (name, file) in workloads {
            let path = base_dir.join(&file);
            let source = JobSource::read(&path)
                .with_context(|| format!("{origin}:{}: workload {name}", line_at("workloads")))?;
            sources.push((name, source));
        }
        let settings = fixed_table(table.get("set"), "set").map_err(|e| fail("set", e))?;
        let device_settings = fixed_table(table.get("device_set"), "device_set")
            .map_err(|e| fail("device_set", e))?;
        let env: BTreeMap<String, String> = fixed_table(table.get("env"), "env")
            .map_err(|e| fail("env", e))?
            .into_iter()
            .collect();
        let mut groups = Vec::new();
        for (key, value) in
            fixed_table(table.get("groups"), "groups").map_err(|e| fail("groups", e))?
        {
            let setting = parse_group_flag(&format!("{key}={value}"))
                .map_err(|e| fail("groups", format!("[groups] {key:?}: {e}")))?;
            groups.push((setting.path, setting.file, setting.value));
        }

        let mut axes: Vec<Axis> = Vec::new();
        let axis_tables: Vec<toml::Table> = match axis_value {
            None => Vec::new(),
            Some(value) => {
                let toml::Value::Array(items) = value else {
                    return Err(fail("axis", "write each axis as an [[axis]] table".into()));
                };
                items
                    .into_iter()
                    .map(|item| match item {
                        toml::Value::Table(table) => Ok(table),
                        _ => Err(fail("axis", "write each axis as an [[axis]] table".into())),
                    })
                    .collect::<Result<_>>()?
            }
        };
        // Spans are not kept through `Value`: the n-th `[[axis]]` line stands for the n-th axis.
        let axis_lines: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, line)| line.trim_start().starts_with("[[axis]]"))
            .map(|(index, _)| index + 1)
            .collect();
        for (number, axis) in axis_tables.iter().enumerate() {
            let line = axis_lines.get(number).copied().unwrap_or(1);
            let at = |message: String| anyhow::anyhow!("{origin}:{line}: {message}");
            if axis.len() != 1 {
                return Err(at(format!(
                    "an [[axis]] has exactly one key (what it varies), this one has {}",
                    axis.len()
                )));
            }
            let (name, values) = axis.iter().next().expect("one key");
            let knob = Knob::parse(name).map_err(at)?;
            let Some(values) = values.as_array() else {
                return Err(at(format!("axis {name:?}: expected a list of values")));
            };
            if values.is_empty() {
                return Err(at(format!("axis {name:?} has no values")));
            }
            let mut texts = Vec::with_capacity(values.len());
            for value in values {
                let text = value_text(value).map_err(|e| at(format!("axis {name:?}: {e}")))?;
                if texts.contains(&text) {
                    return Err(at(format!("axis {name:?}: {text:?} is given twice")));
                }
                texts.push(text);
            }
            if axes.iter().any(|a| a.knob == knob) {
                return Err(at(format!("axis {name:?} is given twice")));
            }
            match &knob {
                Knob::Seed => {
                    for text in &texts {
                        if text.parse::<u64>().is_err() {
                            return Err(at(format!(
                                "axis seed: {text:?} is not a whole number >= 0"
                            )));
                        }
                    }
                }
                Knob::Workload => {
                    for text in &texts {
                        if !sources.iter().any(|(name, _)| name == text) {
                            let names: Vec<&str> =
                                sources.iter().map(|(name, _)| name.as_str()).collect();
                            return Err(at(format!(
                                "axis workload: no workload named {text:?} (the grid has {})",
                                names.join(", ")
                            )));
                        }
                    }
                }
                Knob::Policy => {
                    for text in &texts {
                        Variant::parse(text).map_err(|e| at(format!("axis policy: {e}")))?;
                    }
                }
                _ => {}
            }
            axes.push(Axis {
                name: name.clone(),
                knob,
                values: texts,
            });
        }
        if sources.len() > 1 && !axes.iter().any(|a| a.knob == Knob::Workload) {
            axes.insert(
                0,
                Axis {
                    name: "workload".into(),
                    knob: Knob::Workload,
                    values: sources.iter().map(|(name, _)| name.clone()).collect(),
                },
            );
        }
        let mut total: usize = 1;
        for axis in &axes {
            total = total.saturating_mul(axis.values.len());
        }
        if total > POINTS_MAX {
            bail!(
                "{origin}: the grid has {total} points, more than {POINTS_MAX}: split it into \
                 several grids"
            );
        }
        Ok(Grid {
            title,
            origin: origin.to_string(),
            workloads: sources,
            axes,
            policy,
            device,
            seed,
            settings,
            device_settings,
            env,
            groups,
        })
    }

    /// The seed of every point unless a seed axis varies it.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// Whether the grid has no points (never: an axis has at least one value).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Point `index`: the last axis changes fastest.
    pub fn point(&self, index: usize) -> Option<Point> {
        if index >= self.len() {
            return None;
        }
        let mut rest = index;
        let mut values = vec![String::new(); self.axes.len()];
        for (slot, axis) in self.axes.iter().enumerate().rev() {
            values[slot] = axis.values[rest % axis.values.len()].clone();
            rest /= axis.values.len();
        }
        Some(Point { index, values })
    }

    /// Every point, in order.
    pub fn points(&self) -> impl Iterator<Item = Point> + '_ {
        (0..self.len()).filter_map(|index| self.point(index))
    }

    /// The simulator configuration, job file and workload name of `point`.
    pub fn configure(&self, point: &Point) -> Result<(SimConfig, JobFile)> {
        let mut variant = Variant::policy(&self.policy);
        let mut config = SimConfig {
            seed: self.seed,
            device: self.device.clone(),
            // The table reads the jobs' statistics; nothing draws their charts.
            charts: false,
            ..SimConfig::default()
        };
        let mut workload = &self.workloads[0];
        let mut env = self.env.clone();
        let mut settings = self.settings.clone();
        let mut device_settings = self.device_settings.clone();
        let mut groups = self.groups.clone();
        for (axis, value) in self.axes.iter().zip(&point.values) {
            match &axis.knob {
                Knob::Policy => variant = Variant::parse(value)?,
                Knob::Device => config.device = value.clone(),
                Knob::Seed => config.seed = value.parse().context("seed")?,
                Knob::Workload => {
                    workload = self
                        .workloads
                        .iter()
                        .find(|(name, _)| name == value)
                        .context("a workload the grid names")?
                }
                Knob::Set(name) => settings.push((name.clone(), value.clone())),
                Knob::DeviceSet(name) => device_settings.push((name.clone(), value.clone())),
                Knob::Env(name) => {
                    env.insert(name.clone(), value.clone());
                }
                Knob::Group(path, file) => groups.push((path.clone(), file.clone(), value.clone())),
            }
        }
        config.policy = variant.policy.clone();
        // The variant's own tunables first, so that an axis on the same tunable wins.
        config.policy_settings = variant.settings.clone();
        config.policy_settings.extend(settings);
        config.device_settings = device_settings;
        config.group_settings = groups
            .into_iter()
            .map(|(path, file, value)| iosched_sim::GroupSetting {
                origin: format!("{} (point {})", self.origin, point.index),
                path,
                file,
                value,
            })
            .collect();
        let source = &workload.1;
        let lookup = |name: &str| env.get(name).cloned();
        let file = parse::parse_str(&source.text, &source.origin, &source.base_dir, &lookup)
            .map_err(anyhow::Error::msg)?;
        Ok((config, file))
    }
}

/// Runs point `index` of `grid`: what a worker of any engine calls.
pub fn run_point(grid: &Grid, index: usize) -> Result<PointResult> {
    let point = grid
        .point(index)
        .with_context(|| format!("point {index}: the grid has {} points", grid.len()))?;
    let outcome = grid
        .configure(&point)
        .and_then(|(config, file)| iosched_sim::run(&config, &file).map_err(anyhow::Error::msg))
        .map(|report| Figures::of(&report))
        .map_err(|e| format!("{e:#}"));
    Ok(PointResult { point, outcome })
}

/// Runs every point of `grid` on `threads` threads (at least one), telling `progress`; the
/// results come back in point order whatever the number of threads.
pub fn execute(grid: &Grid, threads: usize, progress: &dyn Progress) -> Vec<PointResult> {
    let total = grid.len();
    progress.begin(total);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<PointResult>>> = Mutex::new((0..total).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, total.max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= total {
                    break;
                }
                let what = format!("point {index}");
                progress.started(&what);
                let result = run_point(grid, index).expect("an index within the grid");
                progress.finished(&what, if result.outcome.is_ok() { "" } else { "failed" });
                results.lock().expect("no thread panics holding the lock")[index] = Some(result);
            });
        }
    });
    progress.end();
    results
        .into_inner()
        .expect("threads are done")
        .into_iter()
        .map(|r| r.expect("every point ran"))
        .collect()
}

/// The figure columns of a row, after `point`, the axes, `job` and `dir`.
pub const FIGURE_COLUMNS: &[&str] = &[
    "clones",
    "ios",
    "bytes",
    "iops",
    "bw_bytes",
    "runtime_ns",
    "clat_mean_ns",
    "clat_p50_ns",
    "clat_p95_ns",
    "clat_p99_ns",
    "clat_p99_9_ns",
    "clat_max_ns",
    "lat_mean_ns",
    "starved",
    "error",
];

/// The table's columns: `point`, one per axis, `job`, `dir`, then [`FIGURE_COLUMNS`].
pub fn columns(grid: &Grid) -> Vec<String> {
    let mut columns = vec!["point".to_string()];
    columns.extend(grid.axes.iter().map(|a| a.name.clone()));
    columns.push("job".into());
    columns.push("dir".into());
    columns.extend(FIGURE_COLUMNS.iter().map(|c| c.to_string()));
    columns
}

/// One cell of the table: a number, text, or nothing (no samples, or a failed point).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Cell {
    /// An integer.
    Int(u64),
    /// A real number.
    Float(f64),
    /// Text.
    Text(String),
    /// A flag.
    Bool(bool),
    /// No value.
    Empty,
}

impl Cell {
    fn csv(&self) -> String {
        match self {
            Cell::Int(n) => n.to_string(),
            Cell::Float(x) => format!("{x:.3}"),
            Cell::Text(text) => crate::export::field(text),
            Cell::Bool(flag) => flag.to_string(),
            Cell::Empty => String::new(),
        }
    }
}

/// The rows of one point's result: one per job name and direction with I/O (clones pooled),
/// or for a failed point one row carrying the error.
pub fn rows(result: &PointResult) -> Vec<Vec<Cell>> {
    let lead = |job: Cell, dir: Cell| {
        let mut row = vec![Cell::Int(result.point.index as u64)];
        row.extend(result.point.values.iter().map(|v| Cell::Text(v.clone())));
        row.push(job);
        row.push(dir);
        row
    };
    match &result.outcome {
        Err(error) => {
            let mut row = lead(Cell::Empty, Cell::Empty);
            row.extend((1..FIGURE_COLUMNS.len()).map(|_| Cell::Empty));
            row.push(Cell::Text(error.clone()));
            vec![row]
        }
        Ok(figures) => figures
            .rows
            .iter()
            .map(|(job, dir, cells)| {
                let mut row = lead(Cell::Text(job.clone()), Cell::Text(dir.clone()));
                row.extend(cells.iter().cloned());
                row
            })
            .collect(),
    }
}

fn figure_cells(f: &JobFigures) -> Vec<Cell> {
    let clat = &f.stats.clat;
    let sampled = clat.count() > 0;
    let latency = |nanos: f64| {
        if sampled {
            Cell::Float(nanos)
        } else {
            Cell::Empty
        }
    };
    let percentile = |p: f64| {
        if sampled {
            Cell::Int(clat.percentile(p))
        } else {
            Cell::Empty
        }
    };
    let lat = f.stats.lat();
    vec![
        Cell::Int(f.clones as u64),
        Cell::Int(f.stats.total_ios),
        Cell::Int(f.stats.io_bytes),
        Cell::Float(f.iops()),
        Cell::Float(f.bandwidth()),
        Cell::Int(f.runtime),
        latency(clat.mean()),
        percentile(50.0),
        percentile(95.0),
        percentile(99.0),
        percentile(99.9),
        if sampled {
            Cell::Int(clat.max())
        } else {
            Cell::Empty
        },
        if lat.count() > 0 {
            Cell::Float(lat.mean())
        } else {
            Cell::Empty
        },
        Cell::Bool(figures::starvation(&f.stats).is_some()),
        Cell::Empty,
    ]
}

/// The whole table as CSV: the header, then every point's rows in point order.
pub fn csv(grid: &Grid, results: &[PointResult]) -> String {
    let mut out = columns(grid)
        .iter()
        .map(|c| crate::export::field(c))
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    for result in results {
        for row in rows(result) {
            out.push_str(&row.iter().map(Cell::csv).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
    }
    out
}

/// The summary: how many points ran and failed, how fast, and for each axis value the mean
/// over its points of the total IOPS and of the worst job's p99 latency; then the best
/// points by each.
pub fn summary(grid: &Grid, results: &[PointResult], wall: Duration) -> String {
    let mut out = String::new();
    let failed: Vec<&PointResult> = results.iter().filter(|r| r.outcome.is_err()).collect();
    let seconds = wall.as_secs_f64();
    let _ = writeln!(out, "# {}", grid.title);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{} points ({} failed) in {:.1} s: {:.1} points per second",
        results.len(),
        failed.len(),
        seconds,
        if seconds > 0.0 {
            results.len() as f64 / seconds
        } else {
            0.0
        }
    );
    let figures: Vec<Option<(f64, Option<u64>)>> = results
        .iter()
        .map(|r| r.outcome.as_ref().ok().map(|f| (f.iops, f.worst_p99)))
        .collect();
    for (slot, axis) in grid.axes.iter().enumerate() {
        if axis.values.len() < 2 {
            continue;
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "## {}", axis.name);
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "| {} | points | total IOPS (mean) | worst p99 clat (mean) |",
            axis.name
        );
        let _ = writeln!(out, "|---|---|---|---|");
        for value in &axis.values {
            let (mut count, mut iops, mut p99, mut p99_count) = (0usize, 0.0, 0.0, 0usize);
            for (result, figure) in results.iter().zip(&figures) {
                if result.point.values[slot] != *value {
                    continue;
                }
                if let Some((point_iops, point_p99)) = figure {
                    count += 1;
                    iops += point_iops;
                    if let Some(p) = point_p99 {
                        p99 += *p as f64;
                        p99_count += 1;
                    }
                }
            }
            let mean_p99 = if p99_count > 0 {
                figures::duration(p99 / p99_count as f64)
            } else {
                "-".into()
            };
            let mean_iops = if count > 0 {
                format!("{:.1}", iops / count as f64)
            } else {
                "-".into()
            };
            let _ = writeln!(out, "| {value} | {count} | {mean_iops} | {mean_p99} |");
        }
    }
    let describe = |point: &Point| -> String {
        grid.axes
            .iter()
            .zip(&point.values)
            .map(|(axis, value)| format!("{}={value}", axis.name))
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Ties go to the earlier point.
    let best_iops = figures
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.map(|(iops, _)| (i, iops)))
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
    let best_p99 = figures
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.and_then(|(_, p99)| p99.map(|p| (i, p))))
        .min_by_key(|&(i, p)| (p, i));
    if best_iops.is_some() || best_p99.is_some() {
        let _ = writeln!(out);
    }
    if let Some((at, iops)) = best_iops {
        let point = &results[at].point;
        let _ = writeln!(
            out,
            "most IOPS: point {} ({}): {iops:.1}",
            point.index,
            describe(point)
        );
    }
    if let Some((at, p99)) = best_p99 {
        let point = &results[at].point;
        let _ = writeln!(
            out,
            "lowest worst-job p99: point {} ({}): {}",
            point.index,
            describe(point),
            figures::duration(p99 as f64)
        );
    }
    if !failed.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "## failed points");
        let _ = writeln!(out);
        for result in failed.iter().take(20) {
            let error = result.outcome.as_ref().err().map_or("", String::as_str);
            let _ = writeln!(
                out,
                "- point {} ({}): {}",
                result.point.index,
                describe(&result.point),
                error.lines().next().unwrap_or("")
            );
        }
        if failed.len() > 20 {
            let _ = writeln!(
                out,
                "- and {} more (see the table's error column)",
                failed.len() - 20
            );
        }
    }
    out
}

#[cfg(test)]
mod tests;

//! `iosched._native`: the Rust side of iosched's Python package.
//!
//! Thin on purpose: each function parses its arguments, calls the same library code the
//! `iosched` command calls (`iosched-sim` for a run, `iosched-lab` for experiments and sweep
//! points), releases the GIL while it works, and hands back JSON text or plain values that
//! `python/iosched/__init__.py` turns into dicts and pandas frames. Every error is an
//! `IoschedError` carrying the message (and file:line) the command would print.

use anyhow::{Context, Result};
use iosched_core::{elevator::QUEUE_TUNABLES, policies, TunableSpec};
use iosched_fio::{parse, DataDir};
use iosched_lab::setup::parse_group_flag;
use iosched_lab::sweep::{self, Cell, PointResult};
use iosched_sim::{device, SimConfig};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

pyo3::create_exception!(
    _native,
    IoschedError,
    PyException,
    "What iosched refused or could not do; the message names the problem and its place."
);

fn fail(error: anyhow::Error) -> PyErr {
    IoschedError::new_err(iosched_core::limits::shorten_quoted(&format!("{error:#}")))
}

fn text(value: &Value) -> String {
    serde_json::to_string(value).expect("JSON values render")
}

/// A run's fio JSON and, per job and direction with I/O, its bandwidth, IOPS and completion
/// latency (mean and maximum) per window.
fn run_json(config: &SimConfig, file: &iosched_fio::JobFile) -> Result<Value> {
    let report = iosched_sim::run(config, file).map_err(anyhow::Error::msg)?;
    let mut series = Vec::new();
    for (index, job) in report.jobs.iter().enumerate() {
        for dir in DataDir::ALL {
            let stats = job.dir(dir);
            if stats.total_ios == 0 {
                continue;
            }
            let latency = stats.series.latency_samples(job.runtime);
            series.push(json!({
                "job": job.name,
                "index": index,
                "dir": dir.name(),
                "window_ns": stats.series.window(),
                "bw_bytes": stats.series.bandwidth_samples(job.runtime),
                "iops": stats.series.iops_samples(job.runtime),
                "clat_mean_ns": latency.iter().map(|l| l.map(|(mean, _)| mean)).collect::<Vec<_>>(),
                "clat_max_ns": latency.iter().map(|l| l.map(|(_, max)| max)).collect::<Vec<_>>(),
            }));
        }
    }
    Ok(json!({
        "seed": config.seed,
        "fio": iosched_fio::output::json(&report),
        "series": series,
    }))
}

/// Runs a job file's text in the simulator; returns JSON: `{"seed", "fio", "series"}`.
#[pyfunction]
#[pyo3(signature = (job_text, origin, base_dir, policy, device, seed, settings, device_settings, groups, env))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    job_text: String,
    origin: String,
    base_dir: String,
    policy: String,
    device: String,
    seed: u64,
    settings: Vec<(String, String)>,
    device_settings: Vec<(String, String)>,
    groups: Vec<String>,
    env: HashMap<String, String>,
) -> PyResult<String> {
    py.allow_threads(|| -> Result<String> {
        // Variables the caller gave, then the process environment, as `iosched run` reads them.
        let lookup = |name: &str| env.get(name).cloned().or_else(|| std::env::var(name).ok());
        let file = parse::parse_str(&job_text, &origin, Path::new(&base_dir), &lookup)
            .map_err(anyhow::Error::msg)?;
        let group_settings = groups
            .iter()
            .map(|text| parse_group_flag(text).map_err(anyhow::Error::msg))
            .collect::<Result<Vec<_>>>()?;
        let config = SimConfig {
            seed,
            policy,
            policy_settings: settings,
            device,
            device_settings,
            group_settings,
            ..SimConfig::default()
        };
        run_json(&config, &file).map(|value| text(&value))
    })
    .map_err(fail)
}

fn tunable(spec: &TunableSpec) -> Value {
    json!({
        "name": spec.name,
        "default": spec.default,
        "unit": spec.unit.symbol(),
        "min": spec.min,
        "max": spec.max,
        "doc": spec.doc,
    })
}

/// The policies, stages and queue tunables, as `iosched policies` lists them (JSON).
#[pyfunction]
fn policy_catalog() -> String {
    let queue: Vec<Value> = QUEUE_TUNABLES
        .iter()
        .chain(iosched_sim::HOST_TUNABLES)
        .map(tunable)
        .collect();
    let stages: Vec<Value> = iosched_core::stage::STAGES
        .iter()
        .map(|(name, summary, tunables)| {
            json!({
                "name": name,
                "summary": summary,
                "tunables": tunables.iter().map(tunable).collect::<Vec<_>>(),
            })
        })
        .collect();
    let catalog: Vec<Value> = policies::catalog()
        .iter()
        .map(|info| {
            json!({
                "name": info.name,
                "aliases": info.aliases,
                "summary": info.summary,
                "tunables": info.tunables.iter().map(tunable).collect::<Vec<_>>(),
            })
        })
        .collect();
    text(&json!({"queue": queue, "stages": stages, "policies": catalog}))
}

/// The device models with their parameters, given and derived (JSON).
#[pyfunction]
fn device_catalog() -> PyResult<String> {
    let mut models = Vec::new();
    for info in device::catalog() {
        let model = (info.build)(&[], 1)
            .map_err(anyhow::Error::msg)
            .map_err(fail)?;
        let parameters: Vec<Value> = model
            .parameters()
            .iter()
            .map(|p| json!({"name": p.name, "value": p.value, "unit": p.unit, "note": p.note}))
            .collect();
        models.push(json!({"name": info.name, "summary": info.summary, "parameters": parameters}));
    }
    Ok(text(&Value::Array(models)))
}

/// The experiments under `root` (JSON): name, title, source, claim, runs.
#[pyfunction]
fn experiment_catalog(root: String) -> PyResult<String> {
    let experiments = iosched_lab::experiment::discover(Path::new(&root)).map_err(fail)?;
    let list: Vec<Value> = experiments
        .iter()
        .map(|e| {
            json!({
                "name": e.name,
                "title": e.title(),
                "source": e.source(),
                "claim": e.claim(),
                "runs": e.cells(),
            })
        })
        .collect();
    Ok(text(&Value::Array(list)))
}

/// Runs the experiment `name` under `root`; returns its results JSON (the study, the verdicts
/// and `pass`), as `iosched experiment run` writes it.
#[pyfunction]
#[pyo3(signature = (root, name, quick, seed=None))]
fn run_experiment(
    py: Python<'_>,
    root: String,
    name: String,
    quick: bool,
    seed: Option<u64>,
) -> PyResult<String> {
    py.allow_threads(|| -> Result<String> {
        let experiment = iosched_lab::experiment::load(&Path::new(&root).join(&name))?;
        let study = iosched_lab::experiment::run_experiment(
            &experiment,
            quick,
            &iosched_lab::progress::Quiet,
            seed,
        )?;
        Ok(text(&iosched_lab::experiment::results_json(
            &experiment,
            &study,
            quick,
        )))
    })
    .map_err(fail)
}

fn cell_object(py: Python<'_>, cell: &Cell) -> PyObject {
    match cell {
        Cell::Int(n) => n.into_pyobject(py).expect("an int").into_any().unbind(),
        Cell::Float(x) => x.into_pyobject(py).expect("a float").into_any().unbind(),
        Cell::Text(text) => text.into_pyobject(py).expect("a str").into_any().unbind(),
        Cell::Bool(flag) => flag
            .into_pyobject(py)
            .expect("a bool")
            .to_owned()
            .into_any()
            .unbind(),
        Cell::Empty => py.None(),
    }
}

fn point_result(json: &str) -> PyResult<PointResult> {
    serde_json::from_str(json)
        .context("not a point result of iosched's sweep")
        .map_err(fail)
}

/// A sweep's grid: its points, and running one (what each worker of any engine does).
#[pyclass(frozen, module = "iosched._native")]
struct Grid {
    grid: sweep::Grid,
}

#[pymethods]
impl Grid {
    /// Reads a grid file; its workloads are read now, relative to its folder.
    #[staticmethod]
    fn read(path: String) -> PyResult<Grid> {
        sweep::Grid::read(Path::new(&path))
            .map(|grid| Grid { grid })
            .map_err(fail)
    }

    /// A grid from its TOML text, named `origin` in messages; its workloads are read now,
    /// relative to `base_dir`.
    #[staticmethod]
    fn parse(text: &str, origin: &str, base_dir: &str) -> PyResult<Grid> {
        sweep::Grid::parse(text, origin, Path::new(base_dir))
            .map(|grid| Grid { grid })
            .map_err(fail)
    }

    /// A grid from its JSON form ([`Grid::to_json`]): the workloads' text travels inside it,
    /// so a worker on another machine needs no files.
    #[staticmethod]
    fn from_json(json: &str) -> PyResult<Grid> {
        serde_json::from_str(json)
            .map(|grid| Grid { grid })
            .context("not a grid of iosched's sweep")
            .map_err(fail)
    }

    /// The grid as JSON, workloads included.
    fn to_json(&self) -> String {
        serde_json::to_string(&self.grid).expect("a grid renders")
    }

    /// Its title.
    #[getter]
    fn title(&self) -> String {
        self.grid.title.clone()
    }

    fn __len__(&self) -> usize {
        self.grid.len()
    }

    /// The axes: (name, values), outermost first.
    fn axes(&self) -> Vec<(String, Vec<String>)> {
        self.grid
            .axes
            .iter()
            .map(|a| (a.name.clone(), a.values.clone()))
            .collect()
    }

    /// The table's columns.
    fn columns(&self) -> Vec<String> {
        sweep::columns(&self.grid)
    }

    /// Point `index`'s value on each axis.
    fn point(&self, index: usize) -> PyResult<Vec<String>> {
        self.grid
            .point(index)
            .map(|p| p.values)
            .with_context(|| format!("point {index}: the grid has {} points", self.grid.len()))
            .map_err(fail)
    }

    /// Runs point `index` (without the GIL); returns its result as JSON, for [`Grid::rows`],
    /// [`Grid::csv`] and [`Grid::summary`]. A point that fails is a result too, with its error.
    fn run_point(&self, py: Python<'_>, index: usize) -> PyResult<String> {
        py.allow_threads(|| sweep::run_point(&self.grid, index))
            .map(|result| serde_json::to_string(&result).expect("a result renders"))
            .map_err(fail)
    }

    /// A point result's rows, as Python values in [`Grid::columns`] order (None: no value).
    fn rows(&self, py: Python<'_>, result: &str) -> PyResult<Vec<Vec<PyObject>>> {
        let result = point_result(result)?;
        Ok(sweep::rows(&result)
            .iter()
            .map(|row| row.iter().map(|cell| cell_object(py, cell)).collect())
            .collect())
    }

    /// The table as CSV, from the point results in any order (sorted by point here).
    fn csv(&self, results: Vec<String>) -> PyResult<String> {
        let results = sorted(results)?;
        Ok(sweep::csv(&self.grid, &results))
    }

    /// The summary (Markdown) of the point results, which took `wall_seconds`.
    fn summary(&self, results: Vec<String>, wall_seconds: f64) -> PyResult<String> {
        let results = sorted(results)?;
        Ok(sweep::summary(
            &self.grid,
            &results,
            std::time::Duration::from_secs_f64(wall_seconds.max(0.0)),
        ))
    }
}

fn sorted(results: Vec<String>) -> PyResult<Vec<PointResult>> {
    let mut parsed = results
        .iter()
        .map(|r| point_result(r))
        .collect::<PyResult<Vec<_>>>()?;
    parsed.sort_by_key(|r| r.point.index);
    Ok(parsed)
}

/// Writes `data` to the output `path` as the command writes its outputs: a regular file is
/// replaced only when complete, a device or FIFO is written in place (`/dev/null` stays a
/// device), a symbolic link is followed, a directory is refused; nothing else is created.
#[pyfunction]
fn write_output(py: Python<'_>, path: String, data: Vec<u8>) -> PyResult<()> {
    py.allow_threads(|| {
        iosched_fio::output::file::write_output(Path::new(&path), &data).map_err(anyhow::Error::new)
    })
    .map_err(fail)
}

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("IoschedError", m.py().get_type::<IoschedError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(policy_catalog, m)?)?;
    m.add_function(wrap_pyfunction!(device_catalog, m)?)?;
    m.add_function(wrap_pyfunction!(experiment_catalog, m)?)?;
    m.add_function(wrap_pyfunction!(run_experiment, m)?)?;
    m.add_function(wrap_pyfunction!(write_output, m)?)?;
    m.add_class::<Grid>()?;
    Ok(())
}

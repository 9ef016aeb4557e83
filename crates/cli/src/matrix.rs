//! Running the same jobs under several policies, optionally over a swept parameter.
//!
//! A sweep sets a variable that the job file reads with fio's `${VAR}` expansion
//! (`iodepth=${IODEPTH}`), so a job file stays a plain fio job file. Every cell of the matrix
//! uses the same seed and device model; cells run on all cores, and the results are the same
//! whatever the number of threads, because each cell is an independent deterministic run.

use crate::study::{StudyRun, Sweep};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use iosched_fio::parse;
use iosched_sim::SimConfig;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What to run.
#[derive(Clone, Debug)]
pub struct Matrix {
    /// The job file's text.
    pub job_text: String,
    /// Its name, for error locations.
    pub job_origin: String,
    /// Directory that `include` paths are relative to.
    pub base_dir: PathBuf,
    /// Variables for `${VAR}` expansion, before the process environment.
    pub env: BTreeMap<String, String>,
    /// Policies, in order.
    pub policies: Vec<String>,
    /// The swept variable, as the job file names it, and the sweep as reported.
    pub sweep: Option<(String, Sweep)>,
    /// Seed, device and settings; `policy` is replaced per cell (settings named `POLICY.NAME`
    /// apply to that policy only).
    pub config: SimConfig,
}

struct Cell {
    policy: String,
    point: Option<String>,
}

/// Runs every cell: for each sweep point (or once), for each policy. `progress` shows a bar on
/// a terminal (and nothing otherwise).
pub fn execute(matrix: &Matrix, progress: bool) -> Result<Vec<StudyRun>> {
    if matrix.policies.is_empty() {
        bail!("no policy to run: give at least one --policy");
    }
    let points: Vec<Option<String>> = match &matrix.sweep {
        Some((_, sweep)) => sweep.values.iter().cloned().map(Some).collect(),
        None => vec![None],
    };
    // Parse each point once, up front, so a bad job file fails before any simulation.
    let mut files = Vec::with_capacity(points.len());
    for point in &points {
        let lookup = |name: &str| -> Option<String> {
            if let (Some((variable, _)), Some(value)) = (&matrix.sweep, point) {
                if variable == name {
                    return Some(value.clone());
                }
            }
            matrix
                .env
                .get(name)
                .cloned()
                .or_else(|| std::env::var(name).ok())
        };
        let file = parse::parse_str(
            &matrix.job_text,
            &matrix.job_origin,
            &matrix.base_dir,
            &lookup,
        )
        .map_err(anyhow::Error::msg)?;
        files.push(file);
    }
    let cells: Vec<Cell> = points
        .iter()
        .flat_map(|point| {
            matrix.policies.iter().map(move |policy| Cell {
                policy: policy.clone(),
                point: point.clone(),
            })
        })
        .collect();
    let bar = if progress {
        ProgressBar::new(cells.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    if progress {
        // Keeps the clock moving while a long cell runs.
        bar.enable_steady_tick(std::time::Duration::from_millis(250));
    }
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs {msg}",
        )
        .expect("static template"),
    );
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<StudyRun>>>> =
        Mutex::new((0..cells.len()).map(|_| None).collect());
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(cells.len())
        .max(1);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(cell) = cells.get(index) else { break };
                let file = &files[index / matrix.policies.len()];
                bar.set_message(format!(
                    "running {}{}",
                    cell.policy,
                    cell.point
                        .as_ref()
                        .map(|p| format!(" @ {p}"))
                        .unwrap_or_default()
                ));
                let config = SimConfig {
                    policy: cell.policy.clone(),
                    ..matrix.config.clone()
                };
                let outcome = iosched_sim::run(&config, file)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| match &cell.point {
                        Some(point) => format!("policy {} at {point}", cell.policy),
                        None => format!("policy {}", cell.policy),
                    })
                    .map(|report| StudyRun {
                        policy: cell.policy.clone(),
                        point: cell.point.clone(),
                        report,
                    });
                bar.inc(1);
                results.lock().expect("no thread panics holding the lock")[index] = Some(outcome);
            });
        }
    });
    bar.finish_and_clear();
    let mut runs = Vec::with_capacity(cells.len());
    for outcome in results.into_inner().expect("threads are done") {
        runs.push(outcome.expect("every cell ran")?);
    }
    Ok(runs)
}

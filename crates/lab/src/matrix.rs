//! Running the same jobs under several policies, optionally over a swept parameter.
//!
//! A sweep sets a variable that the job file reads with fio's `${VAR}` expansion
//! (`iodepth=${IODEPTH}`), so a job file stays a plain fio job file. Every cell of the matrix
//! uses the same seed and device model; cells run on all cores, and the results are the same
//! whatever the number of threads, because each cell is an independent deterministic run.

use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use iosched_fio::{parse, JobFile};
use iosched_report::study::{StudyRun, Sweep};
use iosched_sim::SimConfig;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A job file to run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct JobSource {
    /// The job file's text.
    pub text: String,
    /// Its name, for error locations.
    pub origin: String,
    /// Directory that `include` paths are relative to.
    pub base_dir: PathBuf,
}

impl JobSource {
    /// Reads the job file at `path`.
    pub fn read(path: &Path) -> Result<Self> {
        let text = iosched_fio::parse::read_text_file(
            path,
            "job file",
            iosched_core::limits::INPUT_FILE_BYTES_MAX,
        )
        .map_err(anyhow::Error::msg)?;
        Ok(JobSource {
            text,
            origin: path.display().to_string(),
            base_dir: path.parent().map(PathBuf::from).unwrap_or_default(),
        })
    }
}

/// One column of a comparison: a policy with its own tunables, job variables or job file,
/// under a label. `deadline` and `deadline:priorities=0` are two variants of one policy.
#[derive(Clone, Debug)]
pub struct Variant {
    /// How tables, reports and checks name it.
    pub label: String,
    /// The policy (see `iosched policies`).
    pub policy: String,
    /// Tunables for this variant only, applied after the shared ones.
    pub settings: Vec<(String, String)>,
    /// Job variables for this variant only, over the shared ones.
    pub env: BTreeMap<String, String>,
    /// A job file that replaces the shared one.
    pub job: Option<JobSource>,
    /// cgroup settings for this variant only, written after the shared ones.
    pub group_settings: Vec<iosched_sim::GroupSetting>,
    /// Device parameters for this variant only, set after the shared ones.
    pub device_settings: Vec<(String, String)>,
}

impl Variant {
    /// A policy with its defaults, labelled with its name.
    pub fn policy(name: &str) -> Self {
        Variant {
            label: name.to_string(),
            policy: name.to_string(),
            settings: Vec::new(),
            env: BTreeMap::new(),
            job: None,
            group_settings: Vec::new(),
            device_settings: Vec::new(),
        }
    }

    /// Parses `POLICY` or `POLICY:NAME=VALUE,NAME=VALUE` (tunables of that policy); the text is
    /// the label.
    pub fn parse(text: &str) -> Result<Self> {
        let text = text.trim();
        let (policy, tunables) = match text.split_once(':') {
            Some((policy, tunables)) => (policy.trim(), Some(tunables)),
            None => (text, None),
        };
        if policy.is_empty() {
            bail!("policy {text:?}: expected POLICY or POLICY:NAME=VALUE,...");
        }
        let mut variant = Variant::policy(policy);
        variant.label = text.to_string();
        for pair in tunables.into_iter().flat_map(|t| t.split(',')) {
            let Some((name, value)) = pair.split_once('=') else {
                bail!("policy {text:?}: {pair:?} is not NAME=VALUE");
            };
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty() || value.is_empty() {
                bail!("policy {text:?}: {pair:?} is not NAME=VALUE");
            }
            variant.settings.push((name.to_string(), value.to_string()));
        }
        Ok(variant)
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Matrix {
    /// The job file every variant runs unless it names its own.
    pub job: JobSource,
    /// Variables for `${VAR}` expansion, before the process environment.
    pub env: BTreeMap<String, String>,
    /// The variants compared, in order.
    pub policies: Vec<Variant>,
    /// The swept variable, as the job file names it, and the sweep as reported.
    pub sweep: Option<(String, Sweep)>,
    /// Seed, device and settings; `policy` is replaced per cell (settings named `POLICY.NAME`
    /// apply to that policy only).
    pub config: SimConfig,
}

impl Matrix {
    /// The job file of `variant` at sweep `point`, its variables expanded: the point's, the
    /// variant's, the matrix's, then the process environment.
    pub fn cell_file(&self, variant: &Variant, point: Option<&str>) -> Result<JobFile> {
        let lookup = |name: &str| -> Option<String> {
            if let (Some((variable, _)), Some(value)) = (&self.sweep, point) {
                if variable == name {
                    return Some(value.to_string());
                }
            }
            variant
                .env
                .get(name)
                .or_else(|| self.env.get(name))
                .cloned()
                .or_else(|| std::env::var(name).ok())
        };
        let job = variant.job.as_ref().unwrap_or(&self.job);
        parse::parse_str(&job.text, &job.origin, &job.base_dir, &lookup)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("variant {}", variant.label))
    }

    /// The job file of the first cell (the first variant at the first point).
    pub fn first_file(&self) -> Result<JobFile> {
        let Some(variant) = self.policies.first() else {
            bail!("no policy to run: give at least one --policy");
        };
        let point = self.sweep.as_ref().and_then(|(_, s)| s.values.first());
        self.cell_file(variant, point.map(String::as_str))
    }
}

struct Cell<'a> {
    variant: &'a Variant,
    point: Option<String>,
}

/// Runs every cell: for each sweep point (or once), for each policy, telling `progress` as
/// each starts and finishes.
pub fn execute(matrix: &Matrix, progress: &dyn Progress) -> Result<Vec<StudyRun>> {
    if matrix.policies.is_empty() {
        bail!("no policy to run: give at least one --policy");
    }
    let points: Vec<Option<String>> = match &matrix.sweep {
        Some((_, sweep)) => sweep.values.iter().cloned().map(Some).collect(),
        None => vec![None],
    };
    let cells: Vec<Cell> = points
        .iter()
        .flat_map(|point| {
            matrix.policies.iter().map(move |variant| Cell {
                variant,
                point: point.clone(),
            })
        })
        .collect();
    // Parse each cell's job file up front, so a bad one fails before any simulation.
    let mut files = Vec::with_capacity(cells.len());
    for cell in &cells {
        files.push(matrix.cell_file(cell.variant, cell.point.as_deref())?);
    }
    progress.begin(cells.len());
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
                let file = &files[index];
                let what = match &cell.point {
                    Some(point) => format!("{} @ {point}", cell.variant.label),
                    None => cell.variant.label.clone(),
                };
                progress.started(&what);
                let mut config = SimConfig {
                    policy: cell.variant.policy.clone(),
                    ..matrix.config.clone()
                };
                config
                    .policy_settings
                    .extend(cell.variant.settings.iter().cloned());
                config
                    .group_settings
                    .extend(cell.variant.group_settings.iter().cloned());
                config
                    .device_settings
                    .extend(cell.variant.device_settings.iter().cloned());
                let outcome = iosched_sim::run(&config, file)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| match &cell.point {
                        Some(point) => format!("policy {} at {point}", cell.variant.label),
                        None => format!("policy {}", cell.variant.label),
                    })
                    .map(|report| StudyRun {
                        policy: cell.variant.label.clone(),
                        point: cell.point.clone(),
                        report,
                    });
                progress.finished(&what, if outcome.is_ok() { "" } else { "failed" });
                results.lock().expect("no thread panics holding the lock")[index] = Some(outcome);
            });
        }
    });
    progress.end();
    let mut runs = Vec::with_capacity(cells.len());
    for outcome in results.into_inner().expect("threads are done") {
        runs.push(outcome.expect("every cell ran")?);
    }
    Ok(runs)
}

/// `VAR=V1,V2` (the `--sweep` of `iosched compare`) into the variable and its values.
pub fn parse_sweep(text: &str) -> Result<(String, Sweep)> {
    let Some((variable, values)) = text.split_once('=') else {
        bail!("--sweep expects VAR=V1,V2,..., got {text:?}");
    };
    let values: Vec<String> = values
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if variable.trim().is_empty() || values.is_empty() {
        bail!("--sweep expects VAR=V1,V2,..., got {text:?}");
    }
    let variable = variable.trim().to_string();
    Ok((
        variable.clone(),
        Sweep {
            name: variable.to_lowercase(),
            values,
        },
    ))
}

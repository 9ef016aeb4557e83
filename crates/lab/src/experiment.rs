//! Reproducible experiments, one folder per claim.
//!
//! An experiment is a folder under `experiments/` holding `experiment.toml` and the fio job
//! file(s) it runs. The TOML states the claim in words with its source, the matrix (policies,
//! and a swept variable that the job file reads as `${VAR}`), the device, the seed, a quick
//! variant for the test suite (the same claim on shorter runs), and the checks that decide the
//! claim, each with its tolerance:
//!
//! ```toml
//! [[check]]
//! claim = "IOPS at queue depth 32 are at least 1.8x those at depth 1"
//! metric = "iops"            # see `figures::METRIC_NAMES`
//! job = "reader"             # jobs of this name, clones pooled ("*": every job)
//! point = "32"               # sweep point (and/or policy = "...")
//! against = { point = "1" }  # optional: compare as a ratio to another cell
//! at_least = 1.8             # and/or at_most; latencies may be written "1.2s", "500ms"
//! ```
//!
//! `rising = true` instead checks that the metric does not fall from one sweep point to the
//! next (within `tolerance`, a fraction). `every_point = true` checks the bounds at each sweep
//! point, each against the same point of the `against` cell.

use crate::matrix::{self, JobSource, Matrix, Variant};
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use iosched_fio::DataDir;
use iosched_report::figures::{self, job_figures, METRIC_NAMES};
use iosched_report::study::{Study, StudyRun, Sweep, Verdict};
use iosched_sim::{GroupSetting, SimConfig};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The TOML file in each experiment folder.
pub const DEFINITION_FILE: &str = "experiment.toml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Definition {
    title: String,
    source: String,
    claim: String,
    job: String,
    #[serde(default = "default_device")]
    device: String,
    #[serde(default)]
    device_settings: BTreeMap<String, String>,
    #[serde(default)]
    settings: BTreeMap<String, String>,
    /// cgroup io controller files per group: `"/vm1" = { "io.weight" = "500" }`.
    #[serde(default)]
    groups: BTreeMap<String, BTreeMap<String, String>>,
    policies: Vec<PolicyEntry>,
    #[serde(default = "default_seed")]
    seed: u64,
    #[serde(default)]
    env: BTreeMap<String, String>,
    sweep: Option<SweepDefinition>,
    quick: Option<QuickDefinition>,
    #[serde(default)]
    check: Vec<CheckDefinition>,
}

/// A column of the matrix: a policy name (`"deadline"`, `"deadline:priorities=0"`), or a
/// labelled variant with its own tunables, job variables or job file.
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
enum PolicyEntry {
    Name(String),
    Variant(VariantDefinition),
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct VariantDefinition {
    label: String,
    policy: String,
    #[serde(default)]
    settings: BTreeMap<String, String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    job: Option<String>,
    /// cgroup io files for this variant: `groups = { "/g1" = { "io.max" = "rbps=1048576" } }`.
    #[serde(default)]
    groups: BTreeMap<String, BTreeMap<String, String>>,
    /// Device parameters for this variant, over the shared ones: `{ ncq_prio_enable = "on" }`.
    #[serde(default)]
    device_settings: BTreeMap<String, String>,
}

fn group_settings(
    groups: &BTreeMap<String, BTreeMap<String, String>>,
    origin: &str,
) -> Vec<GroupSetting> {
    groups
        .iter()
        .flat_map(|(path, files)| {
            files.iter().map(move |(file, value)| GroupSetting {
                path: path.clone(),
                file: file.clone(),
                value: value.clone(),
                origin: origin.to_string(),
            })
        })
        .collect()
}

impl PolicyEntry {
    fn label(&self) -> String {
        match self {
            PolicyEntry::Name(name) => name.trim().to_string(),
            PolicyEntry::Variant(variant) => variant.label.clone(),
        }
    }

    fn variant(&self, folder: &Path) -> Result<Variant> {
        match self {
            PolicyEntry::Name(text) => Variant::parse(text),
            PolicyEntry::Variant(definition) => Ok(Variant {
                label: definition.label.clone(),
                policy: definition.policy.clone(),
                settings: definition
                    .settings
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                env: definition.env.clone(),
                device_settings: definition
                    .device_settings
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                job: definition
                    .job
                    .as_ref()
                    .map(|job| JobSource::read(&folder.join(job)))
                    .transpose()?,
                group_settings: group_settings(
                    &definition.groups,
                    &format!(
                        "{}: policy {:?} groups",
                        folder.join(DEFINITION_FILE).display(),
                        definition.label
                    ),
                ),
            }),
        }
    }
}

fn default_device() -> String {
    "hdd".into()
}

fn default_seed() -> u64 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepDefinition {
    /// What the reader calls it (`iodepth`).
    name: String,
    /// The `${VAR}` the job file reads.
    variable: String,
    values: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct QuickDefinition {
    /// Variables overriding `env` in the quick variant.
    #[serde(default)]
    env: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
struct Selector {
    policy: Option<String>,
    point: Option<String>,
    job: Option<String>,
    metric: Option<String>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
enum Threshold {
    Number(f64),
    Text(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckDefinition {
    claim: String,
    metric: String,
    job: String,
    dir: Option<String>,
    policy: Option<String>,
    point: Option<String>,
    against: Option<Selector>,
    at_least: Option<Threshold>,
    at_most: Option<Threshold>,
    #[serde(default)]
    rising: bool,
    /// Check the bounds at every sweep point (and against the same point).
    #[serde(default)]
    every_point: bool,
    /// Why the claim is known not to hold in iosched yet; it is then reported as GAP.
    known_gap: Option<String>,
    #[serde(default)]
    tolerance: f64,
    /// A rank check: the source's figure for each variant (by label); the checked figure is
    /// Spearman's rank correlation between the metric across those variants and these.
    ranks: Option<BTreeMap<String, f64>>,
    /// For a rank check: measured figures within this fraction of each other rank as ties
    /// (experimental noise), e.g. 0.05.
    #[serde(default)]
    tie_within: f64,
}

/// A loaded experiment.
#[derive(Debug)]
pub struct Experiment {
    /// Folder name.
    pub name: String,
    /// The folder.
    pub folder: PathBuf,
    definition: Definition,
}

impl Experiment {
    /// Title.
    pub fn title(&self) -> &str {
        &self.definition.title
    }

    /// Where the claim comes from.
    pub fn source(&self) -> &str {
        &self.definition.source
    }

    /// The claim, in words.
    pub fn claim(&self) -> &str {
        self.definition.claim.trim()
    }

    /// The seed it runs with unless another is given.
    pub fn seed(&self) -> u64 {
        self.definition.seed
    }

    /// Number of runs in the matrix.
    pub fn cells(&self) -> usize {
        self.definition.policies.len()
            * self.definition.sweep.as_ref().map_or(1, |s| s.values.len())
    }
}

/// Parses a threshold: a plain number, or a number with a time (ns, us, ms, s) or rate
/// (KiB/s, MiB/s, MB/s) unit, into base units (ns, bytes/s).
fn threshold_value(threshold: &Threshold) -> Result<f64> {
    let text = match threshold {
        Threshold::Number(number) => return Ok(*number),
        Threshold::Text(text) => text.trim(),
    };
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .with_context(|| format!("threshold {text:?} is not a number"))?;
    let scale = match unit.trim() {
        "" => 1.0,
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "KiB/s" => 1024.0,
        "MiB/s" => 1024.0 * 1024.0,
        "MB/s" => 1e6,
        other => bail!(
            "threshold {text:?}: unknown unit {other:?} (use ns, us, ms, s, KiB/s, MiB/s, MB/s)"
        ),
    };
    Ok(number * scale)
}

/// Loads the experiment in `folder`.
pub fn load(folder: &Path) -> Result<Experiment> {
    let path = folder.join(DEFINITION_FILE);
    let text = iosched_fio::parse::read_text_file(
        &path,
        "experiment definition",
        iosched_core::limits::INPUT_FILE_BYTES_MAX,
    )
    .map_err(anyhow::Error::msg)?;
    let definition: Definition =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if definition.policies.is_empty() {
        bail!("{}: policies is empty", path.display());
    }
    let mut labels = std::collections::BTreeSet::new();
    for entry in &definition.policies {
        if !labels.insert(entry.label()) {
            bail!(
                "{}: two policies are labelled {:?}",
                path.display(),
                entry.label()
            );
        }
    }
    for check in &definition.check {
        if check.at_least.is_none() && check.at_most.is_none() && !check.rising {
            bail!(
                "{}: check {:?} has no at_least, at_most or rising",
                path.display(),
                check.claim
            );
        }
        for threshold in [&check.at_least, &check.at_most].into_iter().flatten() {
            threshold_value(threshold)
                .with_context(|| format!("{}: check {:?}", path.display(), check.claim))?;
        }
    }
    let name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Experiment {
        name,
        folder: folder.to_path_buf(),
        definition,
    })
}

/// Every experiment under `root`, by name.
pub fn discover(root: &Path) -> Result<Vec<Experiment>> {
    let entries = std::fs::read_dir(root).with_context(|| {
        format!(
            "no experiments folder at {} (run from the repository root or pass --dir)",
            root.display()
        )
    })?;
    let mut folders: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(DEFINITION_FILE).is_file())
        .collect();
    folders.sort();
    folders.iter().map(|f| load(f)).collect()
}

fn format_metric(metric: &str, value: f64) -> String {
    if metric == "iops" || metric == "iops_peak" {
        format!("{value:.1} IOPS")
    } else if metric == "bw" || metric == "bw_peak" {
        figures::rate(value)
    } else if metric.contains("_over_") {
        format!("{value:.0} I/Os")
    } else if metric.contains("lat_") || metric == "disk_time" {
        figures::duration(value)
    } else {
        format!("{value:.1}")
    }
}

fn cell<'a>(
    study: &'a Study,
    policy: &Option<String>,
    point: &Option<String>,
) -> Result<&'a StudyRun> {
    let policy = match policy {
        Some(policy) => policy.as_str(),
        None if study.policies.len() == 1 => study.policies[0].as_str(),
        None => bail!("the matrix has several policies: say which (policy = \"...\")"),
    };
    let point = match (point, &study.sweep) {
        (Some(point), Some(_)) => Some(point.as_str()),
        (None, None) => None,
        (Some(point), None) => bail!("point = {point:?} but the experiment sweeps nothing"),
        (None, Some(_)) => {
            bail!("the experiment sweeps a variable: say at which point (point = \"...\")")
        }
    };
    study.run(policy, point).with_context(|| {
        format!(
            "no run for policy {policy}{}",
            point.map(|p| format!(" at {p}")).unwrap_or_default()
        )
    })
}

fn measure(run: &StudyRun, job: &str, dir: Option<DataDir>, metric: &str) -> Result<f64> {
    let figures =
        job_figures(&run.report, job, dir).with_context(|| format!("no job named {job:?}"))?;
    figures
        .metric(metric)
        .with_context(|| format!("unknown metric {metric:?}; known: {METRIC_NAMES}"))
}

fn parse_dir(dir: &Option<String>) -> Result<Option<DataDir>> {
    Ok(match dir.as_deref() {
        None => None,
        Some("read") => Some(DataDir::Read),
        Some("write") => Some(DataDir::Write),
        Some("trim") => Some(DataDir::Trim),
        Some(other) => bail!("dir = {other:?}: use read, write or trim"),
    })
}

fn evaluate(check: &CheckDefinition, study: &Study) -> Result<Verdict> {
    let dir = parse_dir(&check.dir)?;
    let mut bounds = Vec::new();
    if let Some(at_least) = &check.at_least {
        bounds.push((">=", threshold_value(at_least)?));
    }
    if let Some(at_most) = &check.at_most {
        bounds.push(("<=", threshold_value(at_most)?));
    }
    if let Some(expected) = &check.ranks {
        if expected.len() < 3 {
            bail!("ranks needs at least three variants to order");
        }
        let mut measured = Vec::new();
        let mut seed = Vec::new();
        let mut listed = Vec::new();
        for (label, figure) in expected {
            let run = cell(study, &Some(label.clone()), &check.point)?;
            let value = measure(run, &check.job, dir, &check.metric)?;
            listed.push(format!("{label} {}", format_metric(&check.metric, value)));
            measured.push(value);
            seed.push(*figure);
        }
        let rho = spearman(&tied(&measured, check.tie_within), &seed);
        return Ok(Verdict {
            claim: check.claim.clone(),
            figure: format!("rank correlation {rho:.2} ({})", listed.join(", ")),
            pass: within(&bounds, rho),
            gap: check.known_gap.clone(),
        });
    }
    if check.rising {
        let sweep = study.sweep.as_ref().context("rising needs a sweep")?;
        let mut values = Vec::new();
        for point in &sweep.values {
            let run = cell(study, &check.policy, &Some(point.clone()))?;
            values.push((point.clone(), measure(run, &check.job, dir, &check.metric)?));
        }
        let rising = values
            .windows(2)
            .all(|w| w[1].1 >= w[0].1 * (1.0 - check.tolerance));
        let listed: Vec<String> = values
            .iter()
            .map(|(p, v)| format!("{p}: {}", format_metric(&check.metric, *v)))
            .collect();
        return Ok(Verdict {
            claim: check.claim.clone(),
            figure: listed.join(", "),
            pass: rising,
            gap: check.known_gap.clone(),
        });
    }
    if check.every_point {
        let sweep = study.sweep.as_ref().context("every_point needs a sweep")?;
        if check.point.is_some() {
            bail!("every_point and point exclude each other");
        }
        let mut figures = Vec::new();
        let mut pass = true;
        for point in &sweep.values {
            let (value, figure) = measure_at(check, study, dir, &Some(point.clone()))?;
            let holds = within(&bounds, value);
            pass &= holds;
            figures.push(format!(
                "{point}: {figure}{}",
                if holds { "" } else { " (fails)" }
            ));
        }
        return Ok(Verdict {
            claim: check.claim.clone(),
            figure: figures.join("; "),
            pass,
            gap: check.known_gap.clone(),
        });
    }
    let (value, figure) = measure_at(check, study, dir, &check.point)?;
    Ok(Verdict {
        claim: check.claim.clone(),
        figure,
        pass: within(&bounds, value),
        gap: check.known_gap.clone(),
    })
}

/// `values` with each run of sorted values within `fraction` of the run's smallest replaced
/// by that smallest, so that they tie.
fn tied(values: &[f64], fraction: f64) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut out = values.to_vec();
    let mut base = f64::NAN;
    for index in order {
        if base.is_nan() || values[index] > base * (1.0 + fraction) {
            base = values[index];
        }
        out[index] = base;
    }
    out
}

/// Spearman's rank correlation of `a` and `b` (ties take their mean rank): Pearson's
/// correlation of the ranks; 0 when either has no spread.
fn spearman(a: &[f64], b: &[f64]) -> f64 {
    fn ranks(values: &[f64]) -> Vec<f64> {
        let mut order: Vec<usize> = (0..values.len()).collect();
        order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
        let mut ranks = vec![0.0; values.len()];
        let mut start = 0;
        while start < order.len() {
            let mut end = start + 1;
            while end < order.len() && values[order[end]] == values[order[start]] {
                end += 1;
            }
            let mean = (start + end - 1) as f64 / 2.0 + 1.0;
            for &index in &order[start..end] {
                ranks[index] = mean;
            }
            start = end;
        }
        ranks
    }
    let (x, y) = (ranks(a), ranks(b));
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(&y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
    if vx == 0.0 || vy == 0.0 {
        0.0
    } else {
        cov / (vx * vy).sqrt()
    }
}

fn within(bounds: &[(&str, f64)], value: f64) -> bool {
    bounds.iter().all(|&(op, bound)| {
        if op == ">=" {
            value >= bound
        } else {
            value <= bound
        }
    })
}

/// The checked figure at `point`: the metric, or its ratio to the `against` cell (at the same
/// point unless `against` names one).
fn measure_at(
    check: &CheckDefinition,
    study: &Study,
    dir: Option<DataDir>,
    point: &Option<String>,
) -> Result<(f64, String)> {
    let run = cell(study, &check.policy, point)?;
    let value = measure(run, &check.job, dir, &check.metric)?;
    let (value, figure) = match &check.against {
        None => (value, format_metric(&check.metric, value)),
        Some(against) => {
            let policy = against.policy.clone().or_else(|| check.policy.clone());
            let point = against.point.clone().or_else(|| point.clone());
            let other = cell(study, &policy, &point)?;
            let metric = against.metric.as_deref().unwrap_or(&check.metric);
            let job = against.job.as_deref().unwrap_or(&check.job);
            let denominator = measure(other, job, dir, metric)?;
            let ratio = if denominator == 0.0 {
                f64::INFINITY
            } else {
                value / denominator
            };
            (
                ratio,
                format!(
                    "{} / {} = {ratio:.2}x",
                    format_metric(&check.metric, value),
                    format_metric(metric, denominator)
                ),
            )
        }
    };
    Ok((value, figure))
}

/// Runs `experiment` (its quick variant if `quick`) and checks its claims.
pub fn run_experiment(
    experiment: &Experiment,
    quick: bool,
    progress: &dyn Progress,
    seed: Option<u64>,
) -> Result<Study> {
    let definition = &experiment.definition;
    let job = JobSource::read(&experiment.folder.join(&definition.job))?;
    let variants = definition
        .policies
        .iter()
        .map(|entry| entry.variant(&experiment.folder))
        .collect::<Result<Vec<_>>>()
        .with_context(|| format!("experiment {}", experiment.name))?;
    let labels: Vec<String> = definition.policies.iter().map(PolicyEntry::label).collect();
    let mut env = definition.env.clone();
    if quick {
        if let Some(variant) = &definition.quick {
            env.extend(variant.env.clone());
        }
    }
    let seed = seed.unwrap_or(definition.seed);
    let sweep = definition.sweep.as_ref().map(|s| {
        (
            s.variable.clone(),
            Sweep {
                name: s.name.clone(),
                values: s.values.clone(),
            },
        )
    });
    let matrix = Matrix {
        job,
        env: env.clone(),
        policies: variants,
        sweep: sweep.clone(),
        config: SimConfig {
            seed,
            policy_settings: definition
                .settings
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            device: definition.device.clone(),
            device_settings: definition
                .device_settings
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            group_settings: group_settings(
                &definition.groups,
                &format!(
                    "{}: [groups]",
                    experiment.folder.join(DEFINITION_FILE).display()
                ),
            ),
            ..SimConfig::default()
        },
    };
    let runs = matrix::execute(&matrix, progress)
        .with_context(|| format!("experiment {}", experiment.name))?;
    let mut settings: Vec<(String, String)> = definition
        .device_settings
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    settings.extend(
        definition
            .settings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    settings.extend(env.iter().map(|(k, v)| (format!("${{{k}}}"), v.clone())));
    for (path, files) in &definition.groups {
        settings.extend(
            files
                .iter()
                .map(|(file, value)| (format!("{path} {file}"), value.clone())),
        );
    }
    for variant in &matrix.policies {
        settings.extend(
            variant
                .settings
                .iter()
                .map(|(k, v)| (format!("{}: {k}", variant.label), v.clone())),
        );
        settings.extend(
            variant
                .env
                .iter()
                .map(|(k, v)| (format!("{}: ${{{k}}}", variant.label), v.clone())),
        );
        if let Some(job) = &variant.job {
            settings.push((format!("{}: job file", variant.label), job.origin.clone()));
        }
        settings.extend(
            variant
                .device_settings
                .iter()
                .map(|(k, v)| (format!("{}: device {k}", variant.label), v.clone())),
        );
        settings.extend(variant.group_settings.iter().map(|g| {
            (
                format!("{}: {} {}", variant.label, g.path, g.file),
                g.value.clone(),
            )
        }));
    }
    let mut study = Study {
        title: format!("{}: {}", experiment.name, definition.title),
        summary: format!(
            "{}\n\nSource: {}",
            definition.claim.trim(),
            definition.source
        ),
        seed,
        device: definition.device.clone(),
        settings,
        policies: labels,
        sweep: sweep.map(|(_, s)| s),
        runs,
        verdicts: Vec::new(),
        headline: None,
    };
    for check in &definition.check {
        let verdict = evaluate(check, &study).with_context(|| {
            format!(
                "{}: check {:?}",
                experiment.folder.join(DEFINITION_FILE).display(),
                check.claim
            )
        })?;
        study.verdicts.push(verdict);
    }
    Ok(study)
}

/// The study as JSON ([`crate::export::study_json`]), headed by the experiment: its name,
/// claim, source, and whether the quick variant ran. Key order stays as before the export
/// module existed, so results files compare across versions.
pub fn results_json(experiment: &Experiment, study: &Study, quick: bool) -> serde_json::Value {
    let mut body = crate::export::study_json(study);
    let mut root = serde_json::Map::new();
    root.insert("experiment".into(), experiment.name.clone().into());
    root.insert(
        "title".into(),
        body.get("title").cloned().unwrap_or_default(),
    );
    root.insert(
        "claim".into(),
        experiment.definition.claim.trim().to_string().into(),
    );
    root.insert("source".into(), experiment.definition.source.clone().into());
    root.insert("quick".into(), quick.into());
    if let serde_json::Value::Object(fields) = &mut body {
        for (key, value) in std::mem::take(fields) {
            if key != "title" {
                root.insert(key, value);
            }
        }
    }
    serde_json::Value::Object(root)
}

#[cfg(test)]
mod tests {
    use super::{spearman, tied};

    // Proves the rank correlation: 1 for the same order, -1 for the reverse, mean ranks for
    // ties, 0 with no spread.
    #[test]
    fn spearman_orders_and_ties() {
        assert!((spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&[3.0, 2.0, 1.0], &[10.0, 20.0, 30.0]) + 1.0).abs() < 1e-12);
        // Ranks (1, 2.5, 2.5) against (1, 2, 3): 0.866.
        let ties = spearman(&[1.0, 5.0, 5.0], &[1.0, 2.0, 3.0]);
        assert!((ties - 0.866_025).abs() < 1e-5, "{ties}");
        assert_eq!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]), 0.0);
        // Within 5%: 100, 103 and 104 tie at 100; 120 does not.
        assert_eq!(
            tied(&[104.0, 100.0, 120.0, 103.0], 0.05),
            vec![100.0, 100.0, 120.0, 100.0]
        );
    }
}

//! What the page draws, read once from the study: for each job and direction with I/O, the
//! figures of every run.

use crate::figures::{self, JobFigures};
use crate::study::Study;
use iosched_core::Nanos;
use iosched_fio::{DataDir, Latency};
use std::collections::BTreeMap;

/// One job and direction, as it is followed across runs: the job's name (its clones pooled)
/// and the direction.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// The job's name.
    pub job: String,
    /// The data direction.
    pub dir: DataDir,
}

impl Key {
    /// `reader (read)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.job, self.dir.name())
    }
}

/// What one run measured for one job and direction.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Job clones pooled under the name (`numjobs`, or jobs sharing a name).
    pub members: usize,
    /// I/Os completed.
    pub ios: u64,
    /// I/Os per second over the runtime.
    pub iops: f64,
    /// Bytes per second over the runtime.
    pub bandwidth: f64,
    /// Completion latency distribution.
    pub clat: Latency,
    /// Bytes per second in each complete window of the time series.
    pub bandwidth_windows: Vec<f64>,
    /// The time series' window.
    pub window: Nanos,
    /// The run starved it: [`figures::starvation`]'s mark.
    pub starved: Option<String>,
}

impl Cell {
    fn new(figures: &JobFigures) -> Cell {
        let stats = &figures.stats;
        Cell {
            members: figures.clones,
            ios: stats.total_ios,
            iops: figures.iops(),
            bandwidth: figures.bandwidth(),
            clat: stats.clat.clone(),
            bandwidth_windows: stats.series.bandwidth_samples(figures.runtime),
            window: stats.series.window(),
            starved: figures::starvation(stats),
        }
    }
}

/// Everything the page draws, read once from the study.
pub struct Model<'a> {
    /// The study.
    pub study: &'a Study,
    /// Policies in the study's order, then any run's policy it did not list.
    pub policies: Vec<String>,
    /// Sweep points in order (`[None]` without a sweep), then any run's point not listed.
    pub points: Vec<Option<String>>,
    /// Jobs and directions with I/O, in order of first appearance.
    pub keys: Vec<Key>,
    /// Figures by (point index, policy index, key index).
    cells: BTreeMap<(usize, usize, usize), Cell>,
}

impl<'a> Model<'a> {
    /// Reads every run of `study`.
    pub fn new(study: &'a Study) -> Model<'a> {
        let mut policies: Vec<String> = study.policies.clone();
        let mut points: Vec<Option<String>> = match &study.sweep {
            Some(sweep) => sweep.values.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        for run in &study.runs {
            if !policies.contains(&run.policy) {
                policies.push(run.policy.clone());
            }
            if !points.contains(&run.point) {
                points.push(run.point.clone());
            }
        }
        // Jobs are pooled by name, as the terminal's tables pool them (`numjobs` clones are
        // one job), and every run gets a cell for every job it ran that any run had I/O in:
        // a run that starved a job keeps its row, bar and legend entry.
        let keys: Vec<Key> = figures::study_keys(study)
            .into_iter()
            .map(|(job, dir)| Key { job, dir })
            .collect();
        let mut cells = BTreeMap::new();
        for (point_index, point) in points.iter().enumerate() {
            for (policy_index, policy) in policies.iter().enumerate() {
                let Some(run) = study.run(policy, point.as_deref()) else {
                    continue;
                };
                for (key_index, key) in keys.iter().enumerate() {
                    if let Some(figures) =
                        figures::job_figures(&run.report, &key.job, Some(key.dir))
                    {
                        cells.insert((point_index, policy_index, key_index), Cell::new(&figures));
                    }
                }
            }
        }
        Model {
            study,
            policies,
            points,
            keys,
            cells,
        }
    }

    /// What the run of policy `policy` at point `point` measured for key `key`, by index.
    pub fn cell(&self, point: usize, policy: usize, key: usize) -> Option<&Cell> {
        self.cells.get(&(point, policy, key))
    }

    /// Every cell, in no particular order.
    pub fn all_cells(&self) -> impl Iterator<Item = &Cell> {
        self.cells.values()
    }

    /// The swept parameter's name, if the study sweeps one.
    pub fn sweep_name(&self) -> Option<&str> {
        self.study.sweep.as_ref().map(|s| s.name.as_str())
    }

    /// `iodepth=16` for a sweep point; empty without a sweep.
    pub fn point_label(&self, point: usize) -> String {
        match (&self.points[point], self.sweep_name()) {
            (Some(value), Some(name)) => format!("{name}={value}"),
            (Some(value), None) => value.clone(),
            (None, _) => String::new(),
        }
    }

    /// Whether any run measured anything.
    pub fn has_data(&self) -> bool {
        !self.cells.is_empty()
    }
}

//! Isolation verdicts: which policy protected the foreground job, and at what cost to the rest.
//!
//! The question iosched exists to answer is whether a latency-sensitive job stays fast while
//! other I/O shares the device. [`foreground`] finds the job the user marked as the one to
//! protect, as a user of Linux marks it: the one job with the best I/O priority (`prioclass`,
//! `prio`), else the one job in the heaviest cgroup (`io.weight`, fio's `cgroup_weight`), or
//! the job named with `--foreground`. [`alone`] runs it by itself on the same device and seed:
//! what the device gives it with nothing in the way. [`judge`] then puts each policy in one line:
//!
//! - the foreground's **slowdown**: its mean completion latency under the policy over its mean
//!   alone. Up to [`PROTECTED_SLOWDOWN`] the policy *protects* it; up to
//!   [`PARTLY_PROTECTED_SLOWDOWN`] it *partly protects* it; past that it does not;
//! - the **cost**: the bandwidth every other job got together, as a share of the most that any
//!   policy of the comparison gave them.
//!
//! The bounds are the rule of thumb of the seeds' figures (seed 000 counts a high-priority
//! reader isolated when its latency stays within a small factor of running alone, seed 003 when
//! groups get their shares); they are stated in each verdict, so a reader can judge by another.

use crate::setup::Setup;
use anyhow::{bail, Context, Result};
use iosched_core::group::GroupSetting;
use iosched_fio::{DataDir, JobFile, JobSpec, RunReport};
use iosched_report::figures::{duration, job_figures, rate};
use iosched_report::study::{Study, Verdict};
use std::collections::BTreeMap;

/// Slowdown (mean latency over alone) up to which a policy protects the foreground.
pub const PROTECTED_SLOWDOWN: f64 = 2.0;

/// Slowdown up to which a policy partly protects the foreground.
pub const PARTLY_PROTECTED_SLOWDOWN: f64 = 5.0;

/// The job to protect, and why it is the one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Foreground {
    /// The job's name (its clones pooled).
    pub job: String,
    /// Why: `the best I/O priority (RT level 0)`, `the heaviest cgroup (/fg, io.weight 800)`.
    pub reason: String,
}

/// The one job with the best I/O priority, else the one job in the heaviest cgroup; `None`
/// when no single job stands out (the user can then name one).
pub fn foreground(file: &JobFile, groups: &[GroupSetting]) -> Option<Foreground> {
    // Lower is better: (class, level) with RT < BE < IDLE.
    let rank = |job: &JobSpec| (job.prio.effective_class() as u8, job.prio.effective_level());
    if let Some(best) = file.jobs.iter().map(rank).min() {
        let top = names(file.jobs.iter().filter(|j| rank(j) == best));
        let differ = file.jobs.iter().any(|j| rank(j) != best);
        if differ && top.len() == 1 {
            let job = file.jobs.iter().find(|j| j.name == top[0])?;
            return Some(Foreground {
                job: top[0].to_string(),
                reason: format!(
                    "the best I/O priority ({} level {})",
                    job.prio.effective_class().name(),
                    job.prio.effective_level()
                ),
            });
        }
    }
    let weights = group_weights(file, groups);
    let weight = |job: &JobSpec| weights.get(&job.cgroup).copied().unwrap_or(DEFAULT_WEIGHT);
    let best = file.jobs.iter().map(weight).max()?;
    let differ = file.jobs.iter().any(|j| weight(j) != best);
    let top = names(file.jobs.iter().filter(|j| weight(j) == best));
    if differ && top.len() == 1 {
        let job = file.jobs.iter().find(|j| j.name == top[0])?;
        return Some(Foreground {
            job: top[0].to_string(),
            reason: format!("the heaviest cgroup ({}, io.weight {best})", job.cgroup),
        });
    }
    None
}

/// The distinct names of `jobs`, in order (clones are adjacent).
fn names<'a>(jobs: impl Iterator<Item = &'a JobSpec>) -> Vec<&'a str> {
    let mut names: Vec<&str> = jobs.map(|j| j.name.as_str()).collect();
    names.dedup();
    names
}

/// cgroup v2's default io.weight.
const DEFAULT_WEIGHT: u32 = 100;

/// Each group's io.weight: fio's `cgroup_weight`, then the group settings (the last write
/// wins, as in sysfs). Paths are normalised to start with '/', as jobs' are.
fn group_weights(file: &JobFile, groups: &[GroupSetting]) -> BTreeMap<String, u32> {
    let mut weights = BTreeMap::new();
    for job in &file.jobs {
        if let Some(weight) = job.cgroup_weight {
            weights.insert(job.cgroup.clone(), weight);
        }
    }
    for setting in groups.iter().filter(|s| s.file == "io.weight") {
        // `500` or `default 500`; a per-device line (`8:0 500`) is taken as the weight too:
        // one device per run.
        let Some(weight) = setting
            .value
            .split_whitespace()
            .last()
            .and_then(|w| w.parse().ok())
        else {
            continue;
        };
        let path = format!("/{}", setting.path.trim_start_matches('/'));
        weights.insert(path, weight);
    }
    weights
}

/// The job named `name`, as a foreground: an error names the jobs there are.
pub fn named(file: &JobFile, name: &str) -> Result<Foreground> {
    if file.jobs.iter().any(|j| j.name == name) {
        return Ok(Foreground {
            job: name.to_string(),
            reason: "named with --foreground".into(),
        });
    }
    let mut jobs: Vec<&str> = file.jobs.iter().map(|j| j.name.as_str()).collect();
    jobs.dedup();
    bail!(
        "--foreground {}: no such job; the jobs are {}",
        iosched_core::limits::quote(name),
        jobs.join(", ")
    )
}

/// Runs the foreground's jobs by themselves under `policy` on `setup`'s device and seed.
pub fn alone(
    file: &JobFile,
    foreground: &Foreground,
    setup: &Setup,
    policy: &str,
) -> Result<RunReport> {
    let mut file = file.clone();
    file.jobs.retain(|j| j.name == foreground.job);
    let config = setup.config(policy)?;
    iosched_sim::run(&config, &file)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{} alone", foreground.job))
}

/// One policy's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyVerdict {
    /// The policy's label in the study.
    pub policy: String,
    /// `protects`, `partly protects` or `does not protect`.
    pub word: &'static str,
    /// The foreground's mean latency over its mean alone.
    pub slowdown: f64,
    /// The foreground's mean and 99th percentile completion latency, ns.
    pub mean_ns: f64,
    /// See `mean_ns`.
    pub p99_ns: f64,
    /// Every other job's bandwidth together, bytes/s.
    pub background: f64,
    /// `background` as a share of the most any policy gave the other jobs (1 when none did I/O).
    pub background_share: f64,
    /// Jobs the run starved (no I/O completed within the runtime), the foreground too if so.
    pub starved: Vec<String>,
}

impl PolicyVerdict {
    /// `protects reader: mean 9.1 ms, 1.3x alone (p99 31 ms); the rest 42 MB/s, 88% of the best`,
    /// then `; starved: backup` when the run starved a job.
    pub fn line(&self, foreground: &str) -> String {
        let mut line = format!(
            "{} {foreground}: mean {}, {:.1}x alone (p99 {}); the rest {}, {} of the best",
            self.word,
            duration(self.mean_ns),
            self.slowdown,
            duration(self.p99_ns),
            rate(self.background),
            percent(self.background_share)
        );
        if !self.starved.is_empty() {
            line.push_str("; starved: ");
            line.push_str(&self.starved.join(", "));
        }
        line
    }
}

/// `88%`, `0.3%`, `0%`: small shares keep a digit, so that a starved job does not read as none.
fn percent(share: f64) -> String {
    let percent = share * 100.0;
    if percent > 0.0 && percent < 9.95 {
        format!("{percent:.1}%")
    } else {
        format!("{percent:.0}%")
    }
}

/// Each policy of `study` (at its first sweep point, if it sweeps) judged against the
/// foreground's run alone.
pub fn judge(
    study: &Study,
    foreground: &Foreground,
    alone: &RunReport,
) -> Result<Vec<PolicyVerdict>> {
    let alone_figures = job_figures(alone, &foreground.job, None)
        .with_context(|| format!("{} did no I/O alone", foreground.job))?;
    let alone_mean = alone_figures.stats.clat.mean();
    if alone_mean.is_nan() || alone_mean <= 0.0 {
        bail!("{} completed no I/O alone", foreground.job);
    }
    let point = study.sweep.as_ref().and_then(|s| s.values.first().cloned());
    let mut verdicts = Vec::new();
    for policy in &study.policies {
        let Some(run) = study.run(policy, point.as_deref()) else {
            continue;
        };
        let Some(fg) = job_figures(&run.report, &foreground.job, None) else {
            continue;
        };
        let mean_ns = fg.stats.clat.mean();
        let slowdown = mean_ns / alone_mean;
        let background: f64 = run
            .report
            .jobs
            .iter()
            .filter(|j| j.name != foreground.job && j.runtime > 0)
            .map(|j| {
                let bytes: u64 = DataDir::ALL.iter().map(|&d| j.dir(d).io_bytes).sum();
                bytes as f64 / (j.runtime as f64 / 1e9)
            })
            .sum();
        let mut starved: Vec<String> = Vec::new();
        for figures in iosched_report::figures::all_figures(&run.report) {
            let starving = iosched_report::figures::starvation(&figures.stats).is_some();
            if starving && !starved.contains(&figures.job) {
                starved.push(figures.job);
            }
        }
        let word = if starved.contains(&foreground.job) {
            "does not protect"
        } else if slowdown <= PROTECTED_SLOWDOWN {
            "protects"
        } else if slowdown <= PARTLY_PROTECTED_SLOWDOWN {
            "partly protects"
        } else {
            "does not protect"
        };
        verdicts.push(PolicyVerdict {
            policy: policy.clone(),
            word,
            slowdown,
            mean_ns,
            p99_ns: fg.stats.clat.percentile(99.0) as f64,
            background,
            background_share: 0.0,
            starved,
        });
    }
    let best = verdicts.iter().map(|v| v.background).fold(0.0, f64::max);
    for verdict in &mut verdicts {
        verdict.background_share = if best > 0.0 {
            verdict.background / best
        } else {
            1.0
        };
    }
    Ok(verdicts)
}

/// The verdicts as the study's, for its report: one per policy, passing when it protects.
pub fn study_verdicts(foreground: &Foreground, verdicts: &[PolicyVerdict]) -> Vec<Verdict> {
    verdicts
        .iter()
        .map(|v| Verdict {
            claim: format!(
                "{} protects {} (mean latency within {PROTECTED_SLOWDOWN}x of alone)",
                v.policy, foreground.job
            ),
            figure: v.line(&foreground.job),
            pass: v.word == "protects",
            gap: None,
        })
        .collect()
}

/// `2 of 5 policies protect reader: anticipatory, cfq`, or `No policy protects reader`.
pub fn headline(foreground: &Foreground, verdicts: &[PolicyVerdict]) -> String {
    let protecting: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.word == "protects")
        .map(|v| v.policy.as_str())
        .collect();
    match protecting.len() {
        0 => format!(
            "No policy of {} protects {}",
            verdicts.len(),
            foreground.job
        ),
        1 => format!(
            "1 of {} policies protects {}: {}",
            verdicts.len(),
            foreground.job,
            protecting[0]
        ),
        n => format!(
            "{n} of {} policies protect {}: {}",
            verdicts.len(),
            foreground.job,
            protecting.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn file(text: &str) -> JobFile {
        iosched_fio::parse::parse_str(text, "t.fio", Path::new("."), &|_| None).unwrap()
    }

    const JOBS: &str = "[global]\nsize=1m\n[a]\nrw=randread\n{A}\n[b]\nrw=write\nnumjobs=2\n{B}\n";

    fn jobs(a: &str, b: &str) -> JobFile {
        file(&JOBS.replace("{A}", a).replace("{B}", b))
    }

    // Proves the one job with the best priority is the foreground, whichever class or level
    // makes it best, and that clones of one job count as one.
    #[test]
    fn the_best_priority_is_the_foreground() {
        let fg = foreground(&jobs("prioclass=1", "prioclass=3"), &[]).unwrap();
        assert_eq!(fg.job, "a");
        let fg = foreground(&jobs("prioclass=2\nprio=7", "prioclass=2\nprio=0"), &[]).unwrap();
        assert_eq!(fg.job, "b", "both clones of b share the best level");
        assert_eq!(foreground(&jobs("", ""), &[]), None, "nothing stands out");
    }

    // Proves the heaviest cgroup gives the foreground, from fio's cgroup_weight or from the
    // group settings (the last write wins; `default N` is read).
    #[test]
    fn the_heaviest_group_is_the_foreground() {
        let file = jobs(
            "cgroup=db\ncgroup_weight=800",
            "cgroup=bk\ncgroup_weight=100",
        );
        assert_eq!(foreground(&file, &[]).unwrap().job, "a");
        let setting = |path: &str, value: &str| GroupSetting {
            path: path.into(),
            file: "io.weight".into(),
            value: value.into(),
            origin: "test".into(),
        };
        let moved = [setting("bk", "default 1000")];
        assert_eq!(foreground(&file, &moved).unwrap().job, "b");
        let even = [setting("/bk", "800")];
        assert_eq!(
            foreground(&file, &even),
            None,
            "equal weights: no foreground"
        );
    }

    // Proves small shares keep a digit and others do not.
    #[test]
    fn shares_read_right() {
        assert_eq!(percent(0.003), "0.3%");
        assert_eq!(percent(0.0), "0%");
        assert_eq!(percent(0.88), "88%");
        assert_eq!(percent(1.0), "100%");
    }
}

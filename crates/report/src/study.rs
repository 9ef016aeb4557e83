//! A study: several simulated runs of the same jobs side by side (policies, and optionally a
//! swept parameter), with the claims checked against them. `iosched compare` and
//! `iosched experiment run` produce one; the HTML report and the text tables draw it.

use iosched_fio::RunReport;

/// A parameter swept across runs (for example `iodepth` over 1, 2, 4, ... 32).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sweep {
    /// What is swept, as the reader should read it (`iodepth`, `numjobs`, `bs`).
    pub name: String,
    /// The values, in order.
    pub values: Vec<String>,
}

/// One simulated run in a study.
#[derive(Clone, Debug)]
pub struct StudyRun {
    /// The policy it ran under.
    pub policy: String,
    /// The swept parameter's value for this run, if the study sweeps one.
    pub point: Option<String>,
    /// Everything the run measured.
    pub report: RunReport,
}

/// The outcome of checking one claim.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The claim, in words, with its tolerance.
    pub claim: String,
    /// The figures that decide it, as measured.
    pub figure: String,
    /// Whether it holds.
    pub pass: bool,
    /// Why it is known not to hold yet (a missing model mechanism, say): a failing check with
    /// a known gap is reported as GAP and does not fail the study.
    pub gap: Option<String>,
}

impl Verdict {
    /// PASS, FAIL, or GAP (fails for the known reason).
    pub fn word(&self) -> &'static str {
        match (self.pass, &self.gap) {
            (true, _) => "PASS",
            (false, None) => "FAIL",
            (false, Some(_)) => "GAP",
        }
    }

    /// Whether it counts against the study.
    pub fn failed(&self) -> bool {
        !self.pass && self.gap.is_none()
    }
}

/// Runs side by side, and what they show.
#[derive(Clone, Debug)]
pub struct Study {
    /// Short title.
    pub title: String,
    /// What is compared and why; for experiments, the claim and its source.
    pub summary: String,
    /// The seed every run used.
    pub seed: u64,
    /// Device model.
    pub device: String,
    /// Device and policy settings given on top of the defaults, as (name, value).
    pub settings: Vec<(String, String)>,
    /// Policies compared, in order.
    pub policies: Vec<String>,
    /// The swept parameter, if any.
    pub sweep: Option<Sweep>,
    /// Every run: for each sweep point (or once), for each policy.
    pub runs: Vec<StudyRun>,
    /// The claims checked, if any.
    pub verdicts: Vec<Verdict>,
    /// What the verdicts sum up to, shown above them in place of the count of claims that
    /// hold: a comparison's verdicts judge the policies, not the study
    /// (`2 of 5 policies protect reader: anticipatory, cfq`).
    pub headline: Option<String>,
}

impl Study {
    /// The run of `policy` at `point`.
    pub fn run(&self, policy: &str, point: Option<&str>) -> Option<&StudyRun> {
        self.runs
            .iter()
            .find(|r| r.policy == policy && r.point.as_deref() == point)
    }

    /// Whether every claim holds (true when there are none).
    pub fn passed(&self) -> bool {
        self.verdicts.iter().all(|v| !v.failed())
    }
}

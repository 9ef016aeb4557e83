//! The HTML report of a real study (noop and deadline on the simulated disk, over three queue
//! depths): its structure, its determinism, its escaping, and what headless Chromium shows.

use iosched_fio::parse::parse_str;
use iosched_report::study::{Study, StudyRun, Sweep, Verdict};
use iosched_sim::{run, SimConfig};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A random reader whose queue depth is swept, next to two streaming writers reported as one
/// (`group_reporting`), for a few simulated seconds.
const JOBS: &str = "\
[global]
direct=1
ioengine=libaio
runtime=3
time_based=1
size=1g

[reader]
rw=randread
bs=4k
iodepth=${IODEPTH}

[writers]
new_group
rw=write
bs=64k
iodepth=4
numjobs=2
group_reporting=1
";

const POLICIES: [&str; 2] = ["noop", "deadline"];
const DEPTHS: [&str; 3] = ["1", "4", "16"];
const SEED: u64 = 7;
/// One command at a time in the disk, so that the policy's order is the order served (with
/// NCQ's 32 slots the disk reorders everything itself and the policies look alike).
const DEVICE_SETTINGS: [(&str, &str); 1] = [("queue_depth", "1")];
const SUMMARY: &str = concat!(
    "Does mq-deadline keep a random reader responsive next to streaming writers?\n\n",
    "Markup in a summary is text: <script>alert(\"x\")</script> & 'quotes'."
);

/// Every policy's run of `jobs` at every point, where `${VARIABLE}` in the job text takes the
/// point's value (no point: the job text needs no variable).
fn simulate_runs(
    jobs: &str,
    variable: &str,
    points: &[Option<&str>],
    policies: &[&str],
) -> Vec<StudyRun> {
    let mut runs = Vec::new();
    for &point in points {
        let env = |name: &str| (name == variable).then(|| point.unwrap_or_default().to_string());
        let file = parse_str(jobs, "report-test.fio", Path::new("."), &env).expect("job parses");
        for &policy in policies {
            let config = SimConfig {
                seed: SEED,
                policy: policy.into(),
                device: "hdd".into(),
                device_settings: DEVICE_SETTINGS.map(|(n, v)| (n.into(), v.into())).to_vec(),
                ..SimConfig::default()
            };
            let report = run(&config, &file).expect("simulation finishes");
            runs.push(StudyRun {
                policy: policy.into(),
                point: point.map(String::from),
                report,
            });
        }
    }
    runs
}

fn small_study(title: &str, policies: &[&str], sweep: Option<Sweep>, runs: Vec<StudyRun>) -> Study {
    Study {
        title: title.into(),
        summary: String::new(),
        seed: SEED,
        device: "hdd".into(),
        settings: Vec::new(),
        policies: policies.iter().map(|p| p.to_string()).collect(),
        sweep,
        runs,
        verdicts: Vec::new(),
        headline: None,
    }
}

fn simulate() -> Study {
    let points = DEPTHS.map(Some);
    let runs = simulate_runs(JOBS, "IODEPTH", &points, &POLICIES);
    let study = Study {
        title: "Reader vs writers <hdd>".into(),
        summary: SUMMARY.into(),
        seed: SEED,
        device: "hdd".into(),
        settings: DEVICE_SETTINGS
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .to_vec(),
        policies: POLICIES.map(String::from).to_vec(),
        sweep: Some(Sweep {
            name: "iodepth".into(),
            values: DEPTHS.map(String::from).to_vec(),
        }),
        runs,
        verdicts: Vec::new(),
        headline: None,
    };
    let reader_ios = |policy: &str, depth: &str| {
        study.run(policy, Some(depth)).unwrap().report.jobs[0].dirs[0].total_ios
    };
    let (shallow, deep) = (reader_ios("deadline", "1"), reader_ios("deadline", "16"));
    let verdicts = vec![
        Verdict {
            claim: "deadline: the reader completes more I/Os at iodepth=16 than at iodepth=1"
                .into(),
            figure: format!("{deep} vs {shallow} I/Os"),
            pass: deep > shallow,
            gap: None,
        },
        Verdict {
            claim: "a claim made to fail, so the page shows a FAIL <b>".into(),
            figure: "0 > 1".into(),
            pass: false,
            gap: None,
        },
        Verdict {
            claim: "a claim known not to hold yet".into(),
            figure: "2 > 3".into(),
            pass: false,
            gap: Some("a model mechanism is missing".into()),
        },
    ];
    Study { verdicts, ..study }
}

fn study() -> &'static Study {
    static STUDY: OnceLock<Study> = OnceLock::new();
    STUDY.get_or_init(simulate)
}

fn page() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| iosched_report::html(study()))
}

// Proves the page has every kind of chart, legends naming both policies, a table row
// per run and job, and both verdict classes.
#[test]
fn report_has_every_chart_table_row_and_verdict() {
    let html = page();
    let reader_read = "reader (read)";
    let writers_write = "writers (write)";
    // Two jobs x (CDF at first and last point + tail + bandwidth bars + IOPS bars + IOPS over
    // the sweep + p99.99 over the sweep + bandwidth over time).
    let charts = 2 * (2 + 1 + 2 + 2 + 1);
    assert_eq!(html.matches("<figure class=\"chart\"").count(), charts);
    assert_eq!(html.matches("<svg ").count(), charts);
    assert_eq!(html.matches("</svg>").count(), charts);
    assert!(
        !html.contains("class=\"chart-error\""),
        "a chart failed to draw"
    );
    for title in [
        "Latency CDF: reader (read) \u{2014} iodepth=1",
        "Latency CDF: reader (read) \u{2014} iodepth=16",
        "Latency tail: writers (write) \u{2014} iodepth=16",
        "Bandwidth: reader (read)",
        "IOPS: writers (write)",
        "IOPS over iodepth: reader (read)",
        "p99.99 latency over iodepth: writers (write)",
        "Bandwidth over time: reader (read) \u{2014} iodepth=16",
    ] {
        assert!(html.contains(title), "no chart titled {title:?}");
    }
    assert!(html.contains(reader_read) && html.contains(writers_write));
    // The per-job summary at the top: the policy each job was fastest under, and the cost.
    assert!(html.contains("<ul class=\"per-job\">"));
    assert!(
        html.contains("<li><b>reader (read)</b>: fastest under"),
        "no reader summary"
    );
    assert!(html.contains("of the most any policy gave them"));
    // Every chart has a legend entry and a series group per policy.
    for policy in POLICIES {
        let legend = format!("\n{policy}\n</text>");
        assert_eq!(html.matches(&legend).count(), charts, "{policy} legend");
        let group = format!("<g class=\"series\" data-series=\"{policy}\">");
        assert_eq!(html.matches(&group).count(), charts, "{policy} series");
    }
    // The swept axis is log2 because the depths are powers of two.
    assert!(html.contains("iodepth (log2 scale)"));
    assert!(html.contains("completion latency (s, log scale)"));
    // One row per (depth, policy, job): the two writers are one job, as the terminal pools them.
    let rows = DEPTHS.len() * POLICIES.len() * 2;
    assert_eq!(html.matches("<tr class=\"result\">").count(), rows);
    assert!(html.contains("(2 jobs)"));
    // Verdicts: the overall headline and one box per claim, coloured by outcome.
    // The second claim is made to fail; the first is a real one about the runs; the third
    // fails for a known reason and is shown as a gap, not a failure.
    let failed = study().verdicts.iter().filter(|v| v.failed()).count();
    let passed = study().verdicts.iter().filter(|v| v.pass).count();
    assert!(failed >= 1);
    assert!(html.contains("class=\"verdicts fail\""));
    let headline = format!(
        "FAIL: {failed} of 3 claims do{} not hold",
        if failed == 1 { "es" } else { "" }
    );
    assert!(html.contains(&headline), "{headline}");
    assert_eq!(html.matches("<div class=\"verdict pass\">").count(), passed);
    assert_eq!(html.matches("<div class=\"verdict fail\">").count(), failed);
    assert_eq!(html.matches("<div class=\"verdict gap\">").count(), 1);
    assert!(html.contains("known gap: a model mechanism is missing"));
    // Parameters: the seed, each policy's tunables, the device list folded away.
    assert!(html.contains("--seed 7"));
    assert!(html.contains("Tunables of"));
    assert!(html.contains("<details><summary>Device parameters of <code>hdd</code>"));
    // Nothing is fetched: no external scripts, styles, fonts or images.
    for external in ["src=", "href=\"http", "@import", "url("] {
        assert!(!html.contains(external), "external reference {external:?}");
    }
}

// Proves a study without a sweep draws each kind of chart once per job and no sweep lines.
#[test]
fn study_without_sweep() {
    let jobs = JOBS.replace("${IODEPTH}", "4");
    let runs = simulate_runs(&jobs, "", &[None], &POLICIES);
    let html = iosched_report::html(&small_study("no sweep", &POLICIES, None, runs));
    std::fs::write(scratch().join("no-sweep.html"), &html).unwrap();
    // Two jobs x (CDF + tail + bandwidth + IOPS + bandwidth over time).
    assert_eq!(html.matches("<figure class=\"chart\"").count(), 2 * 5);
    assert!(!html.contains("id=\"sweep\""));
    assert!(html.contains("Figure 1. Latency CDF: reader (read)</figcaption>"));
    assert_eq!(html.matches("<tr class=\"result\">").count(), 2 * 2);
    assert!(
        !html.contains("class=\"verdicts"),
        "no claims, no verdict box"
    );
}

// Proves a sweep of more than BAR_POINTS_MAX values shows bars at the last point only, and
// that values which are not powers of two are spaced evenly, in order.
#[test]
fn wide_sweep_of_block_sizes() {
    let jobs =
        "[global]\ndirect=1\nruntime=1\ntime_based=1\nsize=1g\n\n[reader]\nrw=randread\nbs=${BS}\n";
    let sizes = ["4k", "16k", "64k", "256k", "1m"];
    let points = sizes.map(Some);
    let runs = simulate_runs(jobs, "BS", &points, &["deadline"]);
    let sweep = Sweep {
        name: "bs".into(),
        values: sizes.map(String::from).to_vec(),
    };
    let html = iosched_report::html(&small_study("bs sweep", &["deadline"], Some(sweep), runs));
    std::fs::write(scratch().join("bs-sweep.html"), &html).unwrap();
    // One job: CDF at first and last point, tail, two bar charts, two sweep lines, time.
    assert_eq!(html.matches("<figure class=\"chart\"").count(), 8);
    assert!(html.contains("Bandwidth: reader (read) \u{2014} bs=1m"));
    assert!(html.contains("Latency CDF: reader (read) \u{2014} bs=4k"));
    assert!(!html.contains("log2 scale"));
    assert!(html.contains("IOPS over bs: reader (read)"));
    assert_eq!(html.matches("<tr class=\"result\">").count(), sizes.len());
}

// Proves the same study renders to the same bytes, and so does the same study simulated again.
#[test]
fn same_study_same_bytes() {
    let first = page();
    assert_eq!(first, iosched_report::html(study()));
    assert_eq!(first, iosched_report::html(&simulate()));
}

// Proves text from the study is escaped: the summary's markup shows as text and cannot run.
#[test]
fn summary_and_titles_are_escaped() {
    let html = page();
    assert!(html.contains(
        "Markup in a summary is text: &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;quotes&#39;."
    ));
    assert!(!html.contains("<script>alert"));
    assert!(html.contains("<title>Reader vs writers &lt;hdd&gt;</title>"));
    assert!(html.contains("a claim made to fail, so the page shows a FAIL &lt;b&gt;"));
    // Two paragraphs of summary.
    assert_eq!(html.matches("<p class=\"summary\">").count(), 2);
    // The page's only script is its self-check.
    assert_eq!(html.matches("<script>").count(), 1);
}

// Proves a comparison's headline replaces the count of claims that hold (its verdicts judge
// policies, not the study), above the verdicts, escaped, and that the page prints cleanly.
#[test]
fn a_headline_sums_up_the_verdicts() {
    let mut study = study().clone();
    study.headline = Some("1 of 2 policies protect <reader>".into());
    let html = iosched_report::html(&study);
    assert!(html.contains("1 of 2 policies protect &lt;reader&gt;"));
    assert!(!html.contains("claims do not hold") && !html.contains("claims hold"));
    let headline = html.find("class=\"headline\"").unwrap();
    let first_verdict = html.find("class=\"verdict ").unwrap();
    assert!(headline < first_verdict);
    assert!(html.contains("@media print"), "a print style");
}

/// Whether Chromium is here to render with. In CI it must be (CI installs it); elsewhere the
/// browser tests are skipped with a message.
fn chromium_available() -> bool {
    if Path::new("/usr/bin/chromium").exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "chromium is missing: CI must install it (apt-get install -y chromium) to check the report"
    );
    eprintln!("skipped: /usr/bin/chromium is missing (apt-get install -y chromium to run this)");
    false
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs scripts/check-report.sh on `html`; returns whether it passed and what it said.
fn check(name: &str, html: &str) -> (bool, String) {
    let dir = scratch();
    let page = dir.join(format!("{name}.html"));
    let png = dir.join(format!("{name}.png"));
    std::fs::write(&page, html).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/check-report.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg(&page)
        .arg(&png)
        .output()
        .expect("bash runs");
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_ne!(
        output.status.code(),
        Some(2),
        "the check could not run: {said}"
    );
    (output.status.success(), said)
}

// Proves the report renders in a real browser with every chart drawn and no errors, and leaves
// the screenshot for a person to look at (target/tmp/report/report.png).
#[test]
fn chromium_shows_the_report() {
    if !chromium_available() {
        return;
    }
    let (passed, said) = check("report", page());
    assert!(passed, "the report failed its check:\n{said}");
    let charts = page().matches("<figure class=\"chart\"").count();
    assert!(
        said.contains(&format!("page ok: {charts} charts")),
        "{said}"
    );
}

// Proves the check can fail: an emptied chart, overlapping labels, a script error, a page
// without the self-check and a blank page are each refused, with the reason.
#[test]
fn chromium_check_fails_on_broken_pages() {
    if !chromium_available() {
        return;
    }
    let html = page();
    // The first chart's drawing replaced by an empty <svg>.
    let start = html.find("<svg ").unwrap();
    let end = html[start..].find("</svg>").unwrap() + start + "</svg>".len();
    let empty_chart = format!("{}<svg></svg>{}", &html[..start], &html[end..]);
    let (passed, said) = check("broken-empty-chart", &empty_chart);
    assert!(!passed && said.contains("figure-1"), "{said}");

    // Two labels set on top of each other in the first chart.
    let on_top = "<text x=\"200\" y=\"200\">label</text><text x=\"204\" y=\"202\">label</text>";
    let overlapping = html.replacen("</svg>", &format!("{on_top}</svg>"), 1);
    let (passed, said) = check("broken-overlap", &overlapping);
    assert!(!passed && said.contains("overlap"), "{said}");

    let script_error = html.replace("</body>", "<script>undefinedFunction();</script>\n</body>");
    let (passed, said) = check("broken-script-error", &script_error);
    assert!(!passed && said.contains("script error"), "{said}");

    let (passed, said) = check(
        "broken-no-check",
        "<!DOCTYPE html><html><body><svg width=\"400\" height=\"300\"></svg></body></html>",
    );
    assert!(!passed && said.contains("no check result"), "{said}");

    // A page whose self-check passes (it has a chart) but that paints nothing visible.
    let invisible = html.replace("<main>", "<main style=\"visibility:hidden\">");
    let (passed, said) = check("broken-blank", &invisible);
    assert!(!passed && said.contains("looks blank"), "{said}");
}

// Proves a quantity has one unit on the whole page: the reader's bandwidth (tens of KiB/s)
// and the writers' (MiB/s) are drawn in the same unit, as are all latencies.
#[test]
fn one_unit_per_quantity() {
    let html = page();
    let units = |label: &str| {
        let mut found: Vec<String> = html
            .match_indices(label)
            .map(|(at, _)| {
                let rest = &html[at + label.len()..];
                rest[..rest.find(')').unwrap()].to_string()
            })
            .collect();
        found.sort();
        found.dedup();
        found
    };
    let bandwidth = units("\nbandwidth (");
    assert!(
        bandwidth.iter().all(|unit| unit.starts_with("MiB/s")),
        "{bandwidth:?}"
    );
    // The writers' tail passes a second, so every latency axis is in seconds.
    assert_eq!(
        units("\ncompletion latency ("),
        vec!["s, log scale".to_string()]
    );
    assert_eq!(
        units("\np99.99 completion latency ("),
        vec!["s, log".to_string()]
    );
}

/// A busy best-effort reader beside an idle-class reader for 3 s: mq-deadline serves the
/// idle class only once it has aged prio_aging_expire (10 s), so none of its I/O completes
/// within the runtime; bfq serves it after BFQ_CL_IDLE_TIMEOUT (200 ms).
const STARVING: &str = include_str!("../../../examples/idle-class-starvation.fio");

// Proves a starved job keeps its row, bars and legend entries, marked as starved, and the
// summary names the policy that starved it.
#[test]
fn a_starved_job_is_shown_not_dropped() {
    let policies = ["bfq", "deadline"];
    // The default disk: its 32 NCQ slots and the scheduler's queue hold all of the busy
    // reader's I/O, so a policy that never serves the idle class can starve it.
    let file = parse_str(STARVING, "starving.fio", Path::new("."), &|_| None).expect("parses");
    let runs: Vec<StudyRun> = policies
        .iter()
        .map(|&policy| {
            let config = SimConfig {
                seed: SEED,
                policy: policy.into(),
                ..SimConfig::default()
            };
            StudyRun {
                policy: policy.into(),
                point: None,
                report: run(&config, &file).expect("simulation finishes"),
            }
        })
        .collect();
    let idle = |run: &StudyRun| {
        let figures = iosched_report::figures::job_figures(&run.report, "idle", None).unwrap();
        iosched_report::figures::starvation(&figures.stats)
    };
    assert_eq!(idle(&runs[0]), None, "bfq serves the idle class");
    let mark = idle(&runs[1]).expect("deadline starves the idle class");
    assert!(
        mark.contains("no I/O completed within the runtime"),
        "{mark}"
    );
    let study = small_study("starved", &policies, None, runs);
    // The terminal's table marks the row rather than showing a slow job.
    let table = iosched_report::text::side_by_side(&study);
    let marked: Vec<&str> = table.lines().filter(|l| l.contains("starved:")).collect();
    assert_eq!(marked.len(), 1, "{table}");
    assert!(marked[0].trim_start().starts_with("deadline"), "{table}");
    let html = iosched_report::html(&study);
    // Every (policy, job) has its row; the starved one is marked.
    assert_eq!(html.matches("<tr class=\"result\">").count(), 4);
    assert_eq!(html.matches("<span class=\"starved\" title=").count(), 1);
    // The idle job's CDF, tail, bandwidth, IOPS and timeline charts keep deadline's legend
    // entry, named as starved; the busy job's charts name it plainly.
    assert_eq!(html.matches("\ndeadline (starved)\n</text>").count(), 5);
    assert_eq!(html.matches("\ndeadline\n</text>").count(), 5);
    assert!(html.contains("<li><b>idle (read)</b>: fastest under"));
    assert!(html.contains("<span class=\"starved\">starved</span> under"));
}

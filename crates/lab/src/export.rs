//! A study as data for scripts: JSON (the matrix, each run's key figures and its full fio
//! JSON, the verdicts) and CSV (one row per run, job and direction). `compare --output-format`
//! and the experiments' results files both use it.

use iosched_report::figures;
use iosched_report::study::Study;
use serde_json::{json, Value};

/// The study as JSON: title, seed, device, settings, policies, sweep, verdicts, and the runs,
/// each with its per-job figures and its fio JSON. Every run lists every job and direction
/// any run had I/O in; latencies are null where there were no samples, and `starved` holds
/// the mark of [`figures::starvation`] (null when the job was served).
pub fn study_json(study: &Study) -> Value {
    let keys = figures::study_keys(study);
    let runs: Vec<Value> = study
        .runs
        .iter()
        .map(|run| {
            let jobs: Vec<Value> = rows(&run.report, &keys)
                .iter()
                .map(|f| {
                    let clat = &f.stats.clat;
                    // No samples: null, not 0.
                    let latency = |nanos: f64| (clat.count() > 0).then_some(nanos);
                    json!({
                        "job": f.job,
                        "dir": f.dir.name(),
                        "clones": f.clones,
                        "iops": f.iops(),
                        "bw_bytes": f.bandwidth(),
                        "clat_mean_ns": latency(clat.mean()),
                        "clat_p99_ns": latency(clat.percentile(99.0) as f64),
                        "clat_p99_99_ns": latency(clat.percentile(99.99) as f64),
                        "clat_max_ns": latency(clat.max() as f64),
                        "ios": f.stats.total_ios,
                        "queued_at_end": f.stats.queued_at_end,
                        "oldest_queued_at_end_ns": f.stats.oldest_queued_at_end,
                        "starved": figures::starvation(&f.stats),
                    })
                })
                .collect();
            json!({
                "policy": run.policy,
                "point": run.point,
                "jobs": jobs,
                "fio": iosched_fio::output::json(&run.report),
            })
        })
        .collect();
    json!({
        "title": study.title,
        "seed": study.seed,
        "device": study.device,
        "settings": study.settings.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        "policies": study.policies,
        "sweep": study.sweep.as_ref().map(|s| json!({"name": s.name, "values": s.values})),
        "verdicts": study.verdicts.iter().map(|v| json!({
            "claim": v.claim,
            "figure": v.figure,
            "pass": v.pass,
            "verdict": v.word(),
            "known_gap": v.gap,
        })).collect::<Vec<_>>(),
        "pass": study.passed(),
        "runs": runs,
    })
}

/// The figures of `report` for each of `keys` whose job it ran.
fn rows(
    report: &iosched_fio::RunReport,
    keys: &[(String, iosched_fio::DataDir)],
) -> Vec<figures::JobFigures> {
    keys.iter()
        .filter_map(|(job, dir)| figures::job_figures(report, job, Some(*dir)))
        .collect()
}

/// The columns of [`study_csv`].
pub const CSV_HEADER: &str = "policy,point,job,dir,clones,iops,bw_bytes,clat_mean_ns,clat_p99_ns,\
                              clat_p99_99_ns,clat_max_ns,ios,queued_at_end,\
                              oldest_queued_at_end_ns,starved";

/// The study as CSV (RFC 4180): a header, then one row per run, job and direction that any
/// run had I/O in; latencies are empty where there were no samples.
pub fn study_csv(study: &Study) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    let keys = figures::study_keys(study);
    for run in &study.runs {
        for f in rows(&run.report, &keys) {
            let clat = &f.stats.clat;
            // No samples: an empty field, not 0.
            let latency = |nanos: String| {
                if clat.count() > 0 {
                    nanos
                } else {
                    String::new()
                }
            };
            let fields = [
                field(&run.policy),
                field(run.point.as_deref().unwrap_or("")),
                field(&f.job),
                f.dir.name().to_string(),
                f.clones.to_string(),
                format!("{:.3}", f.iops()),
                format!("{:.0}", f.bandwidth()),
                latency(format!("{:.0}", clat.mean())),
                latency(clat.percentile(99.0).to_string()),
                latency(clat.percentile(99.99).to_string()),
                latency(clat.max().to_string()),
                f.stats.total_ios.to_string(),
                f.stats.queued_at_end.to_string(),
                f.stats.oldest_queued_at_end.to_string(),
                figures::starvation(&f.stats).is_some().to_string(),
            ];
            out.push_str(&fields.join(","));
            out.push('\n');
        }
    }
    out
}

/// A CSV field: quoted when it holds a comma, a quote or a line break, quotes doubled.
pub(crate) fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_as_rfc_4180() {
        assert_eq!(field("deadline"), "deadline");
        assert_eq!(
            field("cfq:slice_idle=0,quantum=4"),
            "\"cfq:slice_idle=0,quantum=4\""
        );
        assert_eq!(field("a\"b"), "\"a\"\"b\"");
    }
}

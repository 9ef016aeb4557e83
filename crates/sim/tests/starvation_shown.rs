//! Starvation is shown, never hidden: a job none of whose I/O completed within its runtime
//! says so in fio's text and JSON output, and the I/O still waiting when the runtime ended is
//! counted with its age.

use iosched_fio::output::{json, normal};
use iosched_fio::parse::parse_str;
use iosched_fio::RunReport;
use iosched_sim::{run, SimConfig};
use std::path::Path;

/// A busy best-effort reader beside an idle-class reader for 3 s: mq-deadline serves the
/// idle class only once it has aged prio_aging_expire (10 s), so none of its I/O completes
/// within the runtime; bfq serves it after BFQ_CL_IDLE_TIMEOUT (200 ms).
const STARVING: &str = include_str!("../../../examples/idle-class-starvation.fio");

fn simulate(text: &str, policy: &str) -> RunReport {
    let file = parse_str(text, "starving.fio", Path::new("."), &|_| None).expect("parses");
    let config = SimConfig {
        policy: policy.into(),
        ..SimConfig::default()
    };
    run(&config, &file).expect("the run finishes")
}

// Proves a starved direction is marked in the text, and its I/O waiting at the end counted
// with the age it had reached: the whole runtime, as it was issued at the start.
#[test]
fn the_text_says_no_io_completed() {
    let report = simulate(STARVING, "deadline");
    let idle = &report.jobs[1].dirs[0];
    assert!(idle.starved(), "deadline starves the idle class for 3 s");
    assert_eq!(
        idle.queued_at_end, 2,
        "its whole depth was waiting at the end"
    );
    assert_eq!(idle.completed_in_runtime(), 0);
    let runtime = 3_000_000_000;
    assert!(
        idle.oldest_queued_at_end > runtime * 99 / 100 && idle.oldest_queued_at_end <= runtime,
        "issued at the start, it waited the whole runtime: {}",
        idle.oldest_queued_at_end
    );
    // fio waits for them and counts them; so do we.
    assert_eq!(idle.total_ios, 2);

    let text = normal(&report);
    let starved: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("no I/O completed within the runtime"))
        .collect();
    assert_eq!(starved.len(), 1, "{text}");
    assert!(starved[0].contains("2 queued at its end"), "{}", starved[0]);
    assert!(
        text.contains("     queued at end: 2,0,0 (oldest 3000,0,0 msec)"),
        "{text}"
    );
}

/// The directions a job's `iosched` note lists as starved.
fn starved(note: &serde_json::Value) -> Vec<&str> {
    let list = note["no_io_completed"].as_array().expect("a list");
    list.iter()
        .map(|dir| dir.as_str().expect("a name"))
        .collect()
}

// Proves the JSON keeps fio's schema and adds the note after fio's keys, listing the starved
// direction; a served job's note lists none.
#[test]
fn the_json_notes_it() {
    let report = simulate(STARVING, "deadline");
    let value = json(&report);
    let jobs = value["jobs"].as_array().unwrap();
    let idle = &jobs[1];
    assert_eq!(idle["jobname"], "idle");
    let note = &idle["iosched"];
    assert_eq!(starved(note), ["read"]);
    assert_eq!(note["queued_at_end"]["read"], 2);
    assert!(note["oldest_queued_at_end_ns"]["read"].as_u64().unwrap() > 2_900_000_000);
    // fio's keys are all there and first; the note is last.
    let keys: Vec<&String> = idle.as_object().unwrap().keys().collect();
    assert_eq!(keys.last().unwrap().as_str(), "iosched");
    assert_eq!(keys[keys.len() - 2].as_str(), "latency_window");
    assert_eq!(idle["read"]["total_ios"], 2);

    let busy = &jobs[0]["iosched"];
    assert!(starved(busy).is_empty());

    let served = json(&simulate(STARVING, "bfq"));
    assert!(starved(&served["jobs"][1]["iosched"]).is_empty());
}

// Proves a job that ends by size (no runtime) has no note: nothing waits past an end.
#[test]
fn a_job_ending_by_size_has_no_note() {
    let text = "[one]\nrw=randread\nbs=4k\nsize=4m\nioengine=libaio\niodepth=4\ndirect=1\n";
    let report = simulate(text, "noop");
    assert_eq!(report.jobs[0].dirs[0].queued_at_end, 0);
    assert!(json(&report)["jobs"][0].get("iosched").is_none());
    assert!(!normal(&report).contains("queued at end"));
}

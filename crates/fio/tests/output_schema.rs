//! Our JSON against real fio 3.33 output (tests/data/fio-3.33-prios-and-sync.json): for a
//! report of the same shape (a libaio job with two priorities in both directions, a psync job
//! with fsync), every key path, its value type (integer, float, string, object, array), the
//! key order, and the printed line layout must match fio's.
//!
//! Intended differences, and only these, are tolerated:
//! - the extra top-level `"iosched"` object (fio tools ignore unknown keys).
//!
//! Values are not compared: the fixture is a real run, ours a hand-built one.

mod common;

use common::*;
use iosched_fio::output::{json, render};
use iosched_fio::{DataDir, JobResult};
use serde_json::Value;

const FIXTURE: &str = include_str!("data/fio-3.33-prios-and-sync.json");

/// Top-level keys we add on purpose.
const INTENDED_EXTRA_KEYS: [&str; 1] = ["iosched"];

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every key path with its value type, in document order; array elements share the path
/// `[]`, each path listed once (at its first occurrence).
fn structure(value: &Value) -> Vec<(String, &'static str)> {
    fn walk(value: &Value, path: String, out: &mut Vec<(String, &'static str)>) {
        match out.iter().find(|(seen, _)| *seen == path) {
            Some((_, seen_kind)) => assert_eq!(*seen_kind, kind(value), "{path} changes type"),
            None => out.push((path.clone(), kind(value))),
        }
        match value {
            Value::Object(members) => {
                for (key, member) in members {
                    walk(member, format!("{path}/{key}"), out);
                }
            }
            Value::Array(items) => {
                for item in items {
                    walk(item, format!("{path}[]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, String::new(), &mut out);
    out
}

fn without_intended_extras(mut value: Value) -> Value {
    let object = value.as_object_mut().expect("top level is an object");
    for key in INTENDED_EXTRA_KEYS {
        assert!(object.shift_remove(key).is_some(), "we emit {key}");
    }
    value
}

/// A job shaped like the fixture's: its options copied from the fixture job.
fn job_like(fixture_job: &Value, runtime: u64) -> JobResult {
    let mut result = job(fixture_job["jobname"].as_str().unwrap(), 0, runtime);
    result.options = fixture_job["job options"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, value)| (name.clone(), value.as_str().unwrap().to_string()))
        .collect();
    result
}

/// Our report of the fixture's shape.
fn equivalent_report(fixture: &Value) -> iosched_fio::RunReport {
    let runtime = 2 * SECOND;
    // "mixed": randrw through libaio (slat measured), 30% of I/Os at RT level 0.
    let mut mixed = job_like(&fixture["jobs"][0], runtime);
    for i in 0..4000u64 {
        let prio = if i % 10 < 3 {
            rt(0)
        } else {
            iosched_core::IoPrio::NONE
        };
        let dir = if i % 2 == 0 {
            DataDir::Read
        } else {
            DataDir::Write
        };
        io_prio(
            &mut mixed,
            dir,
            4096,
            Some(5_000 + i),
            80_000 + 37 * i,
            prio,
            i * 500_000,
        );
        mixed.iodepth_levels[2] += 1;
    }
    // "writer": psync random writes (no slat), an fsync every 8 writes.
    let mut writer = job_like(&fixture["jobs"][1], runtime);
    for i in 0..2000u64 {
        io(
            &mut writer,
            DataDir::Write,
            4096,
            None,
            20_000 + 11 * i,
            i * MS,
        );
        writer.iodepth_levels[0] += 1;
        if i % 8 == 7 {
            writer.sync.record(900_000 + i);
        }
    }
    report(vec![mixed, writer], runtime)
}

// Proves every fio key path is present with fio's type and order, and nothing else is added
// beyond the intended extras.
#[test]
fn key_paths_and_types_match_fio_3_33() {
    let fixture: Value = serde_json::from_str(FIXTURE).expect("fixture is JSON");
    let ours = json(&equivalent_report(&fixture));
    let expected = structure(&fixture);
    let actual = structure(&without_intended_extras(ours));

    let missing: Vec<_> = expected.iter().filter(|p| !actual.contains(p)).collect();
    let extra: Vec<_> = actual.iter().filter(|p| !expected.contains(p)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing from ours: {missing:#?}\nnot in fio's: {extra:#?}"
    );
    // Same set and same document order.
    assert_eq!(actual, expected);
}

/// A printed line with its value replaced by its type, and without trailing commas.
fn line_shape(line: &str) -> String {
    let line = line.trim_end_matches(',');
    match line.split_once("\" : ") {
        Some((key, value)) => {
            let value = match value {
                "{" | "[" => value.to_string(),
                _ if value.starts_with('"') => "S".into(),
                _ if value.contains('.') => "F".into(),
                _ => "I".into(),
            };
            format!("{key}\" : {value}")
        }
        None => line.to_string(),
    }
}

// Proves our printed JSON lines up with fio's line for line (same indentation, one member per
// line, integers and floats printed as fio prints them), so the two diff cleanly.
#[test]
fn printed_layout_matches_fio_3_33() {
    let fixture: Value = serde_json::from_str(FIXTURE).expect("fixture is JSON");
    let printed = render(&json(&equivalent_report(&fixture)));
    // Drop our extra object: it is the last top-level member.
    let end = printed
        .find("\n  \"iosched\" : {")
        .expect("iosched object is printed last");
    let ours = format!("{}\n}}\n", &printed[..end]);

    let expected: Vec<String> = FIXTURE.lines().map(line_shape).collect();
    let actual: Vec<String> = ours.lines().map(line_shape).collect();
    for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
        assert_eq!(a, e, "line {} differs", i + 1);
    }
    assert_eq!(actual.len(), expected.len());
}

//! fio JSON output from hand-built reports: fio's arithmetic, key order, priorities, group
//! reporting, determinism and the layout of the printed text.

mod common;

use common::*;
use iosched_fio::output::{json, json_plus, json_string, render};
use iosched_fio::DataDir;
use serde_json::Value;

fn keys(value: &Value) -> Vec<&str> {
    value
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

fn assert_close(actual: &Value, expected: f64) {
    let actual = actual.as_f64().expect("a number");
    assert!(
        (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0),
        "{actual} != {expected}"
    );
}

// Proves a direction's counters, rates and latency summaries follow fio's formulas.
#[test]
fn direction_fields_follow_fio_arithmetic() {
    let report = report(vec![exact_reader()], 2 * SECOND + 500 * MS);
    let out = json(&report);
    let read = &out["jobs"][0]["read"];

    assert_eq!(read["io_bytes"], 4_096_000);
    assert_eq!(read["io_kbytes"], 4000);
    assert_eq!(read["bw_bytes"], 2_048_000);
    assert_eq!(read["bw"], 2000); // KiB/s
    assert!(read["iops"].is_f64());
    assert_close(&read["iops"], 500.0);
    assert_eq!(read["runtime"], 2000);
    assert_eq!(read["total_ios"], 1000);
    assert_eq!(read["short_ios"], 0);
    assert_eq!(read["drop_ios"], 0);

    let slat = &read["slat_ns"];
    assert_eq!(keys(slat), ["min", "max", "mean", "stddev", "N"]);
    assert_eq!(slat["min"], 100);
    assert_eq!(slat["N"], 1000);
    assert_close(&slat["stddev"], 0.0);

    let clat = &read["clat_ns"];
    assert_eq!(
        keys(clat),
        ["min", "max", "mean", "stddev", "N", "percentile"]
    );
    assert_eq!(clat["min"], 1);
    assert_eq!(clat["max"], 1000);
    assert_close(&clat["mean"], 500.5);
    // Sample standard deviation of 1..=1000: sqrt(1000 * 1001 / 12).
    assert_close(&clat["stddev"], (1000.0f64 * 1001.0 / 12.0).sqrt());

    let percentile = &clat["percentile"];
    assert_eq!(
        keys(percentile),
        [
            "1.000000",
            "5.000000",
            "10.000000",
            "20.000000",
            "30.000000",
            "40.000000",
            "50.000000",
            "60.000000",
            "70.000000",
            "80.000000",
            "90.000000",
            "95.000000",
            "99.000000",
            "99.500000",
            "99.900000",
            "99.950000",
            "99.990000"
        ]
    );
    // fio's bins: exact below 128 ns, then the middle of the bin (500 is in [500, 503], 990 in
    // [984, 991]); never past the largest sample (1000 is in [1000, 1007]).
    assert_eq!(percentile["1.000000"], 10);
    assert_eq!(percentile["50.000000"], 502);
    assert_eq!(percentile["99.000000"], 988);
    assert_eq!(percentile["99.990000"], 1000);

    // Total latency has no percentiles by default (fio's lat_percentiles=0).
    let lat = &read["lat_ns"];
    assert_eq!(keys(lat), ["min", "max", "mean", "stddev", "N"]);
    assert_eq!(lat["min"], 101);
    assert_close(&lat["mean"], 600.5);

    // Four 500 ms windows of 250 I/Os: 1_024_000 bytes each, 2000 KiB/s and 500 IOPS.
    assert_eq!(read["bw_min"], 2000);
    assert_eq!(read["bw_max"], 2000);
    assert_close(&read["bw_agg"], 100.0);
    assert_close(&read["bw_mean"], 2000.0);
    assert_close(&read["bw_dev"], 0.0);
    assert_eq!(read["bw_samples"], 4);
    assert_eq!(read["iops_min"], 500);
    assert_eq!(read["iops_max"], 500);
    assert_close(&read["iops_mean"], 500.0);
    assert_close(&read["iops_stddev"], 0.0);
    assert_eq!(read["iops_samples"], 4);
    assert!(read.get("prios").is_none());

    assert_eq!(
        keys(read),
        [
            "io_bytes",
            "io_kbytes",
            "bw_bytes",
            "bw",
            "iops",
            "runtime",
            "total_ios",
            "short_ios",
            "drop_ios",
            "slat_ns",
            "clat_ns",
            "lat_ns",
            "bw_min",
            "bw_max",
            "bw_agg",
            "bw_mean",
            "bw_dev",
            "bw_samples",
            "iops_min",
            "iops_max",
            "iops_mean",
            "iops_stddev",
            "iops_samples"
        ]
    );
}

// Proves bandwidth statistics use only windows with completions, as fio samples them, and
// compute the sample standard deviation.
#[test]
fn bandwidth_statistics_sample_active_windows() {
    let mut job = job("bursty", 0, 2 * SECOND);
    // Window 0: 100 writes of 4 KiB; window 1: idle; window 2: 300; window 3: 200.
    for (window, count) in [(0u64, 100u64), (2, 300), (3, 200)] {
        for i in 0..count {
            io(
                &mut job,
                DataDir::Write,
                4096,
                None,
                50_000,
                window * 500 * MS + i * MS,
            );
        }
    }
    let out = json(&report(vec![job], 2 * SECOND));
    let write = &out["jobs"][0]["write"];
    // 100 x 4 KiB in 0.5 s is 800 KiB/s; 300 is 2400 KiB/s; 200 is 1600 KiB/s.
    assert_eq!(write["bw_samples"], 3);
    assert_eq!(write["bw_min"], 800);
    assert_eq!(write["bw_max"], 2400);
    assert_close(&write["bw_mean"], 1600.0);
    assert_close(&write["bw_dev"], 800.0);
    assert_eq!(write["iops_min"], 200);
    assert_eq!(write["iops_max"], 600);
    assert_close(&write["iops_mean"], 400.0);
    assert_close(&write["iops_stddev"], 200.0);
    // The job's bandwidth is 600 x 4 KiB / 2 s = 1200 KiB/s; the mean of its samples 1600.
    assert_eq!(write["bw"], 1200);
    assert_close(&write["bw_agg"], 100.0);
    // No write samples spill into the read side.
    assert_eq!(out["jobs"][0]["read"]["bw_samples"], 0);
}

// Proves a direction without I/O is still present, with fio's zeros and types.
#[test]
fn empty_direction_is_zeros() {
    let out = json(&report(vec![exact_reader()], 2 * SECOND));
    let trim = &out["jobs"][0]["trim"];
    assert_eq!(trim["io_bytes"], 0);
    assert_eq!(trim["runtime"], 0);
    assert!(trim["iops"].is_f64());
    assert_close(&trim["iops"], 0.0);
    assert!(trim["bw_agg"].is_f64());
    assert_close(&trim["bw_agg"], 0.0);
    assert_eq!(trim["clat_ns"]["N"], 0);
    assert!(trim["clat_ns"]["mean"].is_f64());
    assert!(trim["clat_ns"].get("percentile").is_none());
    assert_eq!(trim["bw_samples"], 0);
}

// Proves the job object's keys, order and job-level distributions.
#[test]
fn job_fields_and_distributions() {
    let report = report(vec![exact_reader()], 2 * SECOND + 500 * MS);
    let out = json(&report);
    let job = &out["jobs"][0];
    assert_eq!(
        keys(job),
        [
            "jobname",
            "groupid",
            "error",
            "eta",
            "elapsed",
            "job options",
            "read",
            "write",
            "trim",
            "sync",
            "job_runtime",
            "usr_cpu",
            "sys_cpu",
            "ctx",
            "majf",
            "minf",
            "iodepth_level",
            "iodepth_submit",
            "iodepth_complete",
            "latency_ns",
            "latency_us",
            "latency_ms",
            "latency_depth",
            "latency_target",
            "latency_percentile",
            "latency_window"
        ]
    );
    assert_eq!(job["jobname"], "reader");
    assert_eq!(job["elapsed"], 3); // 2.5 s, rounded up as fio does
    assert_eq!(job["job options"]["rw"], "randrw");
    assert_eq!(job["job_runtime"], 2000);
    assert_eq!(job["latency_depth"], 4); // the iodepth option
    assert_close(&job["latency_percentile"], 100.0);
    assert_eq!(
        keys(&job["iodepth_level"]),
        ["1", "2", "4", "8", "16", "32", ">=64"]
    );
    assert_close(&job["iodepth_level"]["1"], 100.0);
    assert_close(&job["iodepth_level"]["2"], 0.0);
    assert_eq!(
        keys(&job["iodepth_submit"]),
        ["0", "4", "8", "16", "32", "64", ">=64"]
    );
    assert_close(&job["iodepth_submit"]["4"], 100.0);

    // clat 1..=1000 ns: fio's buckets hold [0,2), [2,4), [4,10) ... and 1000 ns is in the
    // first microsecond bucket, [1 us, 2 us).
    let ns = &job["latency_ns"];
    assert_eq!(
        keys(ns),
        ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"]
    );
    for (label, percent) in [
        ("2", 0.1),
        ("4", 0.2),
        ("10", 0.6),
        ("20", 1.0),
        ("50", 3.0),
        ("100", 5.0),
        ("250", 15.0),
        ("500", 25.0),
        ("750", 25.0),
        ("1000", 25.0),
    ] {
        assert_close(&ns[label], percent);
    }
    assert_close(&job["latency_us"]["2"], 0.1);
    assert_close(&job["latency_us"]["4"], 0.0);
    assert_eq!(
        keys(&job["latency_ms"]),
        ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000"]
    );

    let sync = &job["sync"];
    assert_eq!(keys(sync), ["total_ios", "lat_ns"]);
    assert_eq!(sync["total_ios"], 0);
}

// Proves latency buckets count all directions, floor tiny shares at 0.01 and reach >=2000 ms.
#[test]
fn latency_buckets_span_directions() {
    let mut job = job("slow", 0, SECOND);
    for i in 0..9_999u64 {
        io(&mut job, DataDir::Read, 4096, None, 300_000, i * 10_000);
    }
    io(&mut job, DataDir::Write, 4096, None, 3 * SECOND, 0);
    let out = json(&report(vec![job], SECOND));
    let job = &out["jobs"][0];
    assert_close(&job["latency_us"]["500"], 99.99);
    assert_close(&job["latency_ms"][">=2000"], 0.01);
}

// Proves "prios" appears only when two or more priorities have samples in that direction,
// with fio's keys, highest priority first.
#[test]
fn prios_need_two_priority_levels() {
    let mut single = job("single", 0, SECOND);
    let mut mixed = job("mixed", 0, SECOND);
    for i in 0..100u64 {
        io_prio(
            &mut single,
            DataDir::Read,
            4096,
            None,
            1000 + i,
            be(4),
            i * MS,
        );
        let prio = if i % 4 == 0 { rt(0) } else { be(6) };
        io_prio(
            &mut mixed,
            DataDir::Read,
            4096,
            None,
            1000 + i,
            prio,
            i * MS,
        );
        io_prio(
            &mut mixed,
            DataDir::Write,
            4096,
            None,
            1000 + i,
            be(6),
            i * MS,
        );
    }
    let out = json(&report(vec![single, mixed], SECOND));
    assert!(out["jobs"][0]["read"].get("prios").is_none());
    assert!(out["jobs"][1]["write"].get("prios").is_none());

    let read = &out["jobs"][1]["read"];
    let read_keys = keys(read);
    let at = read_keys.iter().position(|k| *k == "prios").expect("prios");
    assert_eq!(read_keys[at - 1], "lat_ns");
    assert_eq!(read_keys[at + 1], "bw_min");
    let prios = read["prios"].as_array().unwrap();
    assert_eq!(prios.len(), 2);
    assert_eq!(keys(&prios[0]), ["prioclass", "prio", "clat_ns"]);
    assert_eq!(prios[0]["prioclass"], 1);
    assert_eq!(prios[0]["prio"], 0);
    assert_eq!(prios[0]["clat_ns"]["N"], 25);
    assert_eq!(prios[1]["prioclass"], 2);
    assert_eq!(prios[1]["prio"], 6);
    assert_eq!(prios[1]["clat_ns"]["N"], 75);
    assert_eq!(
        keys(&prios[1]["clat_ns"]),
        ["min", "max", "mean", "stddev", "N", "percentile"]
    );
}

fn grouped(
    name: &str,
    group_id: u32,
    runtime: u64,
    reads: u64,
    clat: u64,
) -> iosched_fio::JobResult {
    let mut job = job(name, group_id, runtime);
    job.group_reporting = true;
    for i in 0..reads {
        io(
            &mut job,
            DataDir::Read,
            4096,
            None,
            clat,
            i * runtime / reads,
        );
    }
    job
}

// Proves group_reporting merges adjacent jobs of a group into one entry the way fio does:
// latencies pooled, counts added, runtime the longest, bandwidth statistics summed.
#[test]
fn group_reporting_merges_a_group() {
    let first = grouped("readers", 0, 2 * SECOND, 1000, 1000);
    let mut second = grouped("readers", 0, 1500 * MS, 600, 2000);
    second.options.push(("numjobs".into(), "2".into()));
    let other = grouped("other", 1, SECOND, 10, 500);
    let out = json(&report(vec![first, second, other], 2 * SECOND));

    let jobs = out["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    let merged = &jobs[0];
    assert_eq!(merged["jobname"], "readers");
    assert_eq!(merged["groupid"], 0);
    // fio shows the last member's options.
    assert_eq!(merged["job options"]["numjobs"], "2");
    let read = &merged["read"];
    assert_eq!(read["total_ios"], 1600);
    assert_eq!(read["io_bytes"], 1600 * 4096);
    assert_eq!(read["runtime"], 2000);
    assert_eq!(read["clat_ns"]["N"], 1600);
    assert_eq!(read["clat_ns"]["min"], 1000);
    assert_eq!(read["clat_ns"]["max"], 2000);
    assert_close(
        &read["clat_ns"]["mean"],
        (1000.0 * 1000.0 + 600.0 * 2000.0) / 1600.0,
    );
    // Member 1: four windows of 250 reads (2000 KiB/s); member 2: three of 200 (1600 KiB/s).
    // fio adds the members' statistics field by field.
    assert_eq!(read["bw_samples"], 7);
    assert_eq!(read["bw_min"], 2000 + 1600);
    assert_eq!(read["bw_max"], 2000 + 1600);
    assert_close(&read["bw_mean"], 3600.0);
    assert_eq!(read["iops_samples"], 7);
    assert_close(&read["iops_mean"], 500.0 + 400.0);
    // The group's aggregate is 1600 x 4 KiB over 2 s = 3200 KiB/s; the mean (3600) is capped.
    assert_eq!(read["bw"], 3200);
    assert_close(&read["bw_agg"], 100.0);
    assert_eq!(merged["job_runtime"], 2000 + 1500);

    assert_eq!(jobs[1]["jobname"], "other");
    assert_eq!(jobs[1]["groupid"], 1);
}

// Proves jobs without group_reporting are reported one by one even within a group, and the
// share of the group's bandwidth is computed per job.
#[test]
fn without_group_reporting_each_job_is_an_entry() {
    let mut first = grouped("a", 0, 2 * SECOND, 1000, 1000);
    let mut second = grouped("b", 0, 2 * SECOND, 1000, 1000);
    first.group_reporting = false;
    second.group_reporting = false;
    let out = json(&report(vec![first, second], 2 * SECOND));
    let jobs = out["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    // Each job moves half the group's bytes: 2000 of the group's 4000 KiB/s.
    assert_close(&jobs[0]["read"]["bw_agg"], 50.0);
    assert_close(&jobs[1]["read"]["bw_agg"], 50.0);
}

// Proves the top level is fixed for a given report (no clock), in fio's order, with the
// iosched object last.
#[test]
fn top_level_is_deterministic() {
    let report = report(vec![exact_reader()], 2 * SECOND);
    let out = json(&report);
    assert_eq!(
        keys(&out),
        [
            "fio version",
            "timestamp",
            "timestamp_ms",
            "time",
            "jobs",
            "disk_util",
            "iosched"
        ]
    );
    assert_eq!(
        out["fio version"],
        format!("iosched-{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(out["timestamp"], 0);
    assert_eq!(out["timestamp_ms"], 0);
    assert_eq!(out["time"], "Thu Jan  1 00:00:00 1970");
    assert_eq!(json_string(&report), json_string(&report.clone()));

    let disk = &out["disk_util"][0];
    assert_eq!(
        keys(disk),
        [
            "name",
            "read_ios",
            "write_ios",
            "read_merges",
            "write_merges",
            "read_ticks",
            "write_ticks",
            "in_queue",
            "util"
        ]
    );
    assert_close(&disk["util"], 75.5);

    let iosched = &out["iosched"];
    assert_eq!(
        keys(iosched),
        [
            "fio_schema",
            "engine",
            "seed",
            "policy",
            "tunables",
            "device",
            "device_parameters",
            "device_counters",
            "notes",
            "duration_ms"
        ]
    );
    assert_eq!(iosched["fio_schema"], "fio-3.33");
    assert_eq!(iosched["seed"], 42);
    assert_eq!(iosched["tunables"]["read_expire"], "500");
    assert_eq!(iosched["device_parameters"]["rpm"], "7200");
    assert_close(&iosched["device_counters"]["seeks"], 990.0);
    assert_close(&iosched["duration_ms"], 2000.0);
}

// Proves the printer reproduces fio's layout exactly.
#[test]
fn render_uses_fio_layout() {
    let value = serde_json::json!({
        "a" : 1,
        "b" : 0.5,
        "c" : [ { "d" : "x\"y" } ],
        "e" : {}
    });
    assert_eq!(
        render(&value),
        "{\n  \"a\" : 1,\n  \"b\" : 0.500000,\n  \"c\" : [\n    {\n      \"d\" : \"x\\\"y\"\n    }\n  ],\n  \"e\" : {\n\n  }\n}\n"
    );
}

/// Compares two JSON values, floats to the six decimals fio prints.
fn assert_same(printed: &Value, built: &Value, path: &str) {
    match (printed, built) {
        (Value::Object(a), Value::Object(b)) => {
            assert_eq!(
                a.keys().collect::<Vec<_>>(),
                b.keys().collect::<Vec<_>>(),
                "{path}"
            );
            for (key, value) in a {
                assert_same(value, &b[key], &format!("{path}/{key}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_same(x, y, &format!("{path}[{i}]"));
            }
        }
        (Value::Number(a), Value::Number(b)) if b.is_f64() => {
            assert!(a.is_f64(), "{path} lost its float type");
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!(
                (a - b).abs() <= 5e-7 + 1e-15 * b.abs(),
                "{path}: {a} != {b}"
            );
        }
        _ => assert_eq!(printed, built, "{path}"),
    }
}

// Proves the printed text parses back (serde_json, and python3's json module when present)
// to the same values and types.
#[test]
fn printed_json_round_trips() {
    let mut mixed = exact_reader();
    for i in 0..50u64 {
        io_prio(
            &mut mixed,
            DataDir::Read,
            8192,
            Some(7),
            123_456 + i,
            rt(1),
            i * MS,
        );
    }
    mixed.sync.record(2_000_000);
    mixed.name = "quote\"and\\slash\nnewline".into();
    let report = report(vec![mixed], 2 * SECOND);
    let built = json(&report);
    let text = render(&built);
    let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_same(&parsed, &built, "");

    let python = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, sys; d = json.load(sys.stdin); \
             assert d['jobs'][0]['read']['clat_ns']['percentile']['99.990000'] > 0; \
             print(json.dumps(d, sort_keys=False)[:1])",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn();
    let Ok(mut python) = python else {
        eprintln!("python3 not found: skipping its round trip");
        return;
    };
    use std::io::Write;
    python
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = python.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "python3's json rejected our output"
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "{");
}

// Proves json+ bins hold every sample exactly once, keyed by fio's value for each bin in ns.
#[test]
fn json_plus_bins_count_every_sample() {
    let report = report(vec![exact_reader()], 2 * SECOND);
    let out = json_plus(&report);
    let clat = &out["jobs"][0]["read"]["clat_ns"];
    assert_eq!(
        keys(clat),
        ["min", "max", "mean", "stddev", "N", "percentile", "bins"]
    );
    let bins = clat["bins"].as_object().unwrap();
    // 1..=127 one bin each, 128..=511 two groups of 64 bins, 512..=1000 62 bins of 8 ns.
    assert_eq!(bins.len(), 127 + 64 + 64 + 62);
    assert_eq!(bins["1"], 1);
    assert_eq!(bins["129"], 2); // 128 and 129
    assert_eq!(bins["988"], 8); // 984..=991
    assert_eq!(bins["1004"], 1); // 1000 alone
    let total: u64 = bins.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(total, 1000);
    // Bins exist only where percentiles do.
    assert!(out["jobs"][0]["read"]["lat_ns"].get("bins").is_none());
    assert!(json(&report)["jobs"][0]["read"]["clat_ns"]
        .get("bins")
        .is_none());
}

// Proves a real fio consumer reads our json+: Debian's fio package ships
// fio_jsonplus_clat2csv, which converts bins to CSV and can validate the result. Skipped when
// the tool is not installed.
#[test]
fn fio_jsonplus_clat2csv_reads_our_output() {
    let tool = "fio_jsonplus_clat2csv";
    if std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        eprintln!("{tool} not installed (Debian package fio): skipping");
        return;
    }
    let mut mixed = exact_reader();
    for i in 0..300u64 {
        let prio = if i % 3 == 0 { rt(0) } else { be(4) };
        io_prio(
            &mut mixed,
            DataDir::Write,
            4096,
            Some(500),
            20_000 + i * 977,
            prio,
            i * MS,
        );
    }
    let report = report(vec![mixed, exact_reader()], 2 * SECOND);
    let dir = std::env::temp_dir().join(format!("iosched-clat2csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("plus.json");
    std::fs::write(&source, render(&json_plus(&report))).unwrap();
    let dest = dir.join("plus.csv");
    for extra in [None, Some("--validate")] {
        let mut command = std::process::Command::new(tool);
        command.arg(&source).arg(&dest);
        command.args(extra);
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{tool} {extra:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // One CSV per job; job 0 has 317 read bins and the writes' bins above them.
    let csv = std::fs::read_to_string(dir.join("plus_job0.csv")).unwrap();
    assert!(csv.starts_with("nsec, read_slat_ns_count"));
    assert!(csv.lines().count() > 317 + 100);
    std::fs::remove_dir_all(&dir).unwrap();
}

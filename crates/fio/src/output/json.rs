//! fio's JSON output (`--output-format=json`, and `json+` with latency histogram bins), in fio
//! 3.33's schema and key order.
//!
//! [`json`] builds a [`serde_json::Value`] whose objects keep insertion order (serde_json's
//! `preserve_order`), so keys come out in fio's order; [`render`] prints it in fio's own layout
//! (two-space indent, `"key" : value`, floats with six decimals), so that our output and fio's
//! diff line by line.
//!
//! Deliberate differences from fio 3.33, all invisible to tools that read `jobs[]`:
//! - `"fio version"` is `iosched-<version>`: the file did not come from fio, and tools use the
//!   field only as a label. The schema followed is named in `iosched.fio_schema`.
//! - `timestamp`, `timestamp_ms` and `time` are when the run started ([`RunReport::started_ms`],
//!   set by the command that launched it: the wall clock, or `SOURCE_DATE_EPOCH` when set, so
//!   that a simulated run's output can still be made a function of its seed alone); `time` is
//!   in UTC where fio uses the local zone. Unrecorded, they are the Unix epoch. `eta` is 0 and
//!   `elapsed` the run's length in seconds, rounded up.
//! - No `job_start`: fio 3.33 does not have it (it arrived in 3.35, after `minf`).
//! - `"global options"` holds the `[global]` sections' options, `"job options"` each job's own,
//!   as fio lists them (fio omits the key when nothing is global).
//! - `usr_cpu`, `sys_cpu`, `ctx`, `majf`, `minf` are 0: nothing is measured on a host CPU.
//! - `iodepth_submit`/`iodepth_complete` put every I/O in the "4" bucket (1 to 4 I/Os per
//!   call): the engines submit and reap one I/O per call.
//! - `prios` is sorted by priority: unset (class 0) first, then RT, BE and IDLE, level 0 first
//!   within a class; fio lists the job's own priority first, then others as they appear.
//! - `iodepth_level` divides by the number of depth samples, not completed I/Os, so it adds up
//!   to 100.
//! - Percentile and bin values come from an HDR histogram (0.1% relative error) rather than
//!   fio's log-linear one, so they are not rounded to fio's bucket values; `latency_ns/us/ms`
//!   are read from the same histogram (see
//!   [`ReportedJob::latency_percentages`](crate::output::group::ReportedJob::latency_percentages)).
//! - One extra top-level object, `"iosched"`, after `disk_util`: engine, seed, policy,
//!   tunables, device and its parameters and counters, notes, and the run's duration.
//! - Strings are escaped completely (fio escapes only `"` and `\`).
//! - A job whose I/Os were still waiting when its runtime ended has an `"iosched"` object
//!   after fio's keys: `queued_at_end` and `oldest_queued_at_end_ns` by direction, and
//!   `no_io_completed`, the directions none of whose I/Os completed within the runtime. fio
//!   waits for such I/Os and counts them, and so do we; the note keeps a starved job from
//!   passing for a slow one.

use crate::job::DataDir;
use crate::output::format::{percentile_key, runtime_ms_floor, sorted_percentiles};
use crate::output::group::{
    group_of, group_runs, per_second, reported_jobs, GroupRun, ReportedJob, LATENCY_BUCKETS_MS,
    LATENCY_BUCKETS_NS, LATENCY_BUCKETS_US,
};
use crate::report::{Parameter, RunReport};
use crate::stats::{Latency, IODEPTH_LEVELS};
use serde_json::{Map, Number, Value};
use std::fmt::Write as _;

/// The `"fio version"` we write: `iosched-<crate version>`.
pub const VERSION: &str = concat!("iosched-", env!("CARGO_PKG_VERSION"));

/// The fio release whose JSON schema and key order we follow.
pub const FIO_SCHEMA: &str = "fio-3.33";

/// `ctime` of the Unix epoch, used for every date fio would print.
pub const EPOCH_CTIME: &str = "Thu Jan  1 00:00:00 1970";

/// Options as written (name, value), as fio's "global options" and "job options" objects.
fn options_json(options: &[(String, String)]) -> Value {
    Value::Object(
        options
            .iter()
            .map(|(name, value)| (name.clone(), value.clone().into()))
            .collect(),
    )
}

/// `seconds` since the Unix epoch as C's `ctime` writes it (without the newline), in UTC:
/// `Wed Nov 25 07:11:25 2026`.
pub fn ctime(seconds: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = seconds / 86_400;
    let of_day = seconds % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's days_from_civil, inverted).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        year
    )
}

/// fio's JSON output for `report` (`--output-format=json`).
pub fn json(report: &RunReport) -> Value {
    build(report, false)
}

/// fio's `json+` output: [`json`] plus a `"bins"` object (latency in ns to sample count) next to
/// every `"percentile"` object, as `fio_jsonplus_clat2csv` reads.
pub fn json_plus(report: &RunReport) -> Value {
    build(report, true)
}

/// [`json`] printed in fio's layout, ending with a newline.
pub fn json_string(report: &RunReport) -> String {
    render(&json(report))
}

/// The JSON document of a run that could not start or stopped on an error, so that a reader
/// of `--output-format=json` always gets valid JSON: fio's header, no jobs, and an `"iosched"`
/// object with the error in words. fio itself prints nothing on stdout in that case; a tool
/// parsing our output needs something it can parse.
pub fn error_json(message: &str) -> Value {
    let mut root = Map::new();
    root.insert("fio version".into(), VERSION.into());
    root.insert("timestamp".into(), 0.into());
    root.insert("timestamp_ms".into(), 0.into());
    root.insert("time".into(), EPOCH_CTIME.into());
    root.insert("jobs".into(), Value::Array(Vec::new()));
    let mut iosched = Map::new();
    iosched.insert("fio_schema".into(), FIO_SCHEMA.into());
    iosched.insert("error".into(), message.into());
    root.insert("iosched".into(), Value::Object(iosched));
    Value::Object(root)
}

/// [`error_json`] printed in fio's layout, ending with a newline.
pub fn error_string(message: &str) -> String {
    render(&error_json(message))
}

fn build(report: &RunReport, bins: bool) -> Value {
    let entries = reported_jobs(report);
    let groups = group_runs(&entries);
    let elapsed_s = runtime_ms_floor(report.duration).div_ceil(1000);

    let mut root = Map::new();
    root.insert("fio version".into(), VERSION.into());
    let started_ms = report.started_ms.unwrap_or(0);
    root.insert("timestamp".into(), (started_ms / 1000).into());
    root.insert("timestamp_ms".into(), started_ms.into());
    root.insert("time".into(), ctime(started_ms / 1000).into());
    if !report.global_options.is_empty() {
        root.insert(
            "global options".into(),
            options_json(&report.global_options),
        );
    }
    let jobs = entries
        .iter()
        .map(|entry| {
            job_json(
                entry,
                group_of(&groups, entry.result.group_id),
                elapsed_s,
                bins,
            )
        })
        .collect();
    root.insert("jobs".into(), Value::Array(jobs));
    if !report.disk.name.is_empty() {
        let disk = &report.disk;
        let mut object = Map::new();
        object.insert("name".into(), disk.name.clone().into());
        object.insert("read_ios".into(), disk.read_ios.into());
        object.insert("write_ios".into(), disk.write_ios.into());
        object.insert("read_merges".into(), disk.read_merges.into());
        object.insert("write_merges".into(), disk.write_merges.into());
        object.insert("read_ticks".into(), disk.read_ticks.into());
        object.insert("write_ticks".into(), disk.write_ticks.into());
        object.insert("in_queue".into(), disk.in_queue.into());
        object.insert("util".into(), float(disk.util.clamp(0.0, 100.0)));
        root.insert(
            "disk_util".into(),
            Value::Array(vec![Value::Object(object)]),
        );
    }
    root.insert("iosched".into(), iosched_json(report));
    Value::Object(root)
}

/// A float that fio prints with `%f`. Every float we compute is finite; a NaN would turn into
/// `null` in serde_json and change the schema, so it is a bug worth stopping on.
fn float(value: f64) -> Value {
    assert!(value.is_finite(), "non-finite value in fio output: {value}");
    Value::Number(Number::from_f64(value).expect("finite"))
}

/// A latency object: min, max, mean, stddev, N, then percentiles (and bins) when asked for.
fn latency_json(latency: &Latency, percentiles: Option<&[f64]>, bins: bool) -> Value {
    let mut object = Map::new();
    object.insert("min".into(), latency.min().into());
    object.insert("max".into(), latency.max().into());
    object.insert("mean".into(), float(latency.mean()));
    object.insert("stddev".into(), float(latency.stddev()));
    object.insert("N".into(), latency.count().into());
    if let Some(list) = percentiles {
        if latency.count() > 0 {
            let values: Map<String, Value> = list
                .iter()
                .zip(latency.percentiles(list))
                .map(|(&p, value)| (percentile_key(p), value.into()))
                .collect();
            object.insert("percentile".into(), Value::Object(values));
            if bins {
                object.insert("bins".into(), bins_json(latency));
            }
        }
    }
    Value::Object(object)
}

/// Histogram bins as fio's json+ `bins`: the bin's value in ns (fio's `plat_idx_to_val`) to
/// its number of samples, ascending.
fn bins_json(latency: &Latency) -> Value {
    Value::Object(
        latency
            .bins()
            .map(|(value, count)| (value.to_string(), count.into()))
            .collect(),
    )
}

fn dir_json(
    entry: &ReportedJob,
    dir: DataDir,
    group: &GroupRun,
    percentiles: Option<&[f64]>,
    bins: bool,
) -> Value {
    let index = dir as usize;
    let stats = &entry.result.dirs[index];
    let runtime_ms = entry.runtime_ms[index];
    let bw_bytes = per_second(stats.io_bytes, runtime_ms);
    let iops = if runtime_ms == 0 {
        0.0
    } else {
        stats.total_ios as f64 * 1000.0 / runtime_ms as f64
    };

    let mut object = Map::new();
    object.insert("io_bytes".into(), stats.io_bytes.into());
    object.insert("io_kbytes".into(), (stats.io_bytes >> 10).into());
    object.insert("bw_bytes".into(), bw_bytes.into());
    object.insert("bw".into(), (bw_bytes / 1024).into());
    object.insert("iops".into(), float(iops));
    object.insert("runtime".into(), runtime_ms.into());
    object.insert("total_ios".into(), stats.total_ios.into());
    object.insert("short_ios".into(), stats.short_ios.into());
    object.insert("drop_ios".into(), stats.drop_ios.into());
    // fio's defaults: percentiles for clat only (slat_percentiles=0, lat_percentiles=0).
    object.insert("slat_ns".into(), latency_json(&stats.slat, None, bins));
    object.insert(
        "clat_ns".into(),
        latency_json(&stats.clat, percentiles, bins),
    );
    object.insert("lat_ns".into(), latency_json(stats.lat(), None, bins));

    // fio 3.36 and later add "priohint"; it is written when a hint is in use, so output
    // without hints stays as fio 3.33 writes it.
    let hinted = stats.prio_clat().iter().any(|(prio, _)| prio.hint() != 0);
    let prios: Vec<Value> = stats
        .prio_clat()
        .into_iter()
        .filter(|(_, latency)| latency.count() > 0)
        .map(|(prio, latency)| {
            let raw = prio.to_raw();
            let mut object = Map::new();
            object.insert("prioclass".into(), (raw >> 13).into());
            object.insert("prio".into(), (raw & 7).into());
            if hinted {
                object.insert("priohint".into(), prio.hint().into());
            }
            object.insert("clat_ns".into(), latency_json(latency, percentiles, bins));
            Value::Object(object)
        })
        .collect();
    // fio breaks latency down by priority only when two or more priorities have samples.
    if prios.len() >= 2 {
        object.insert("prios".into(), Value::Array(prios));
    }

    let bw = &entry.bandwidth_kib[index];
    let share = if bw.samples == 0 {
        0.0
    } else {
        group.share_percent(dir, bw.mean)
    };
    object.insert("bw_min".into(), bw.min.into());
    object.insert("bw_max".into(), bw.max.into());
    object.insert("bw_agg".into(), float(share));
    object.insert("bw_mean".into(), float(bw.mean));
    object.insert("bw_dev".into(), float(bw.stddev()));
    object.insert("bw_samples".into(), bw.samples.into());
    let io = &entry.iops[index];
    object.insert("iops_min".into(), io.min.into());
    object.insert("iops_max".into(), io.max.into());
    object.insert("iops_mean".into(), float(io.mean));
    object.insert("iops_stddev".into(), float(io.stddev()));
    object.insert("iops_samples".into(), io.samples.into());
    Value::Object(object)
}

/// An object of float percentages under fio's labels.
fn distribution(labels: &[&str], percentages: &[f64]) -> Value {
    assert_eq!(labels.len(), percentages.len());
    Value::Object(
        labels
            .iter()
            .zip(percentages)
            .map(|(label, &percent)| (label.to_string(), float(percent)))
            .collect(),
    )
}

fn job_json(entry: &ReportedJob, group: &GroupRun, elapsed_s: u64, bins: bool) -> Value {
    let job = &entry.result;
    let percentile_list = sorted_percentiles(&job.percentile_list);
    // An empty list is how results say clat_percentiles=0.
    let percentiles = (!percentile_list.is_empty()).then_some(percentile_list.as_slice());

    let mut object = Map::new();
    object.insert("jobname".into(), job.name.clone().into());
    object.insert("groupid".into(), job.group_id.into());
    object.insert("error".into(), job.error.into());
    object.insert("eta".into(), 0.into());
    object.insert("elapsed".into(), elapsed_s.into());
    if !job.options.is_empty() {
        object.insert("job options".into(), options_json(&job.options));
    }
    for dir in DataDir::ALL {
        object.insert(
            dir.name().into(),
            dir_json(entry, dir, group, percentiles, bins),
        );
    }
    let mut sync = Map::new();
    sync.insert("total_ios".into(), job.sync.count().into());
    sync.insert("lat_ns".into(), latency_json(&job.sync, percentiles, bins));
    object.insert("sync".into(), Value::Object(sync));

    object.insert("job_runtime".into(), entry.job_runtime_ms.into());
    object.insert("usr_cpu".into(), float(0.0));
    object.insert("sys_cpu".into(), float(0.0));
    object.insert("ctx".into(), 0.into());
    object.insert("majf".into(), 0.into());
    object.insert("minf".into(), 0.into());

    const DEPTH_LABELS: [&str; IODEPTH_LEVELS] = ["1", "2", "4", "8", "16", "32", ">=64"];
    const BATCH_LABELS: [&str; IODEPTH_LEVELS] = ["0", "4", "8", "16", "32", "64", ">=64"];
    object.insert(
        "iodepth_level".into(),
        distribution(&DEPTH_LABELS, &entry.iodepth_percentages()),
    );
    let batches = batch_percentages(entry);
    object.insert(
        "iodepth_submit".into(),
        distribution(&BATCH_LABELS, &batches),
    );
    object.insert(
        "iodepth_complete".into(),
        distribution(&BATCH_LABELS, &batches),
    );

    let latency = entry.latency_percentages();
    let labels = |buckets: &[(&'static str, u64)]| -> Vec<&'static str> {
        buckets.iter().map(|(label, _)| *label).collect()
    };
    object.insert(
        "latency_ns".into(),
        distribution(&labels(&LATENCY_BUCKETS_NS), &latency.nsec),
    );
    object.insert(
        "latency_us".into(),
        distribution(&labels(&LATENCY_BUCKETS_US), &latency.usec),
    );
    object.insert(
        "latency_ms".into(),
        distribution(&labels(&LATENCY_BUCKETS_MS), &latency.msec),
    );
    if job.counts_errors {
        object.insert("total_err".into(), job.total_err.into());
        object.insert("first_error".into(), job.first_error.into());
    }
    object.insert("latency_depth".into(), entry.latency_depth.into());
    object.insert("latency_target".into(), 0.into());
    object.insert("latency_percentile".into(), float(100.0));
    object.insert("latency_window".into(), 0.into());
    if let Some(steady) = &job.steadystate {
        object.insert("steadystate".into(), steady_state(steady));
    }
    if let Some(note) = job_note(job) {
        object.insert("iosched".into(), note);
    }
    Value::Object(object)
}

/// fio's `"steadystate"` object: the criterion, the window's duration (s), the verdict, the
/// last criterion judged, and the window's samples (bytes per second and IOPS, oldest first).
fn steady_state(steady: &crate::steady::SteadyTracker) -> Value {
    let (iops_mean, bw_mean) = steady.means();
    let mut data = Map::new();
    data.insert("bw_mean".into(), bw_mean.into());
    data.insert("iops_mean".into(), iops_mean.into());
    data.insert(
        "iops".into(),
        Value::Array(
            steady
                .samples
                .iter()
                .map(|&(iops, _)| iops.into())
                .collect(),
        ),
    );
    data.insert(
        "bw".into(),
        Value::Array(steady.samples.iter().map(|&(_, bw)| bw.into()).collect()),
    );
    let mut object = Map::new();
    object.insert("ss".into(), steady.spec.describe().into());
    object.insert(
        "duration".into(),
        (steady.spec.duration / 1_000_000_000).into(),
    );
    object.insert("attained".into(), u8::from(steady.attained).into());
    object.insert(
        "criterion".into(),
        format!(
            "{:.6}{}",
            steady.criterion,
            if steady.spec.percent { "%" } else { "" }
        )
        .into(),
    );
    object.insert("max_deviation".into(), float(steady.deviation));
    object.insert("slope".into(), float(steady.slope));
    object.insert("data".into(), Value::Object(data));
    Value::Object(object)
}

/// The job's `"iosched"` note, after fio's keys, when there is something fio's schema has no
/// place for: I/Os still waiting when the runtime ended (`queued_at_end`, and how long the
/// oldest had waited), and the directions none of whose I/Os completed within the runtime
/// (`no_io_completed`: their statistics hold only what completed after it, or nothing).
fn job_note(job: &crate::stats::JobResult) -> Option<Value> {
    let queued = job.dirs.iter().any(|d| d.queued_at_end > 0);
    let starved: Vec<Value> = DataDir::ALL
        .into_iter()
        .filter(|&dir| job.dir(dir).starved())
        .map(|dir| dir.name().into())
        .collect();
    if !queued && starved.is_empty() {
        return None;
    }
    let by_dir = |value: &dyn Fn(&crate::stats::DirStats) -> u64| -> Value {
        Value::Object(
            DataDir::ALL
                .into_iter()
                .map(|dir| (dir.name().to_string(), value(job.dir(dir)).into()))
                .collect(),
        )
    };
    let mut note = Map::new();
    note.insert("no_io_completed".into(), Value::Array(starved));
    note.insert("queued_at_end".into(), by_dir(&|d| d.queued_at_end));
    note.insert(
        "oldest_queued_at_end_ns".into(),
        by_dir(&|d| d.oldest_queued_at_end),
    );
    Some(Value::Object(note))
}

/// I/Os per submit (and per reap) call, by fio's buckets 0, 1-4, 5-8, ...: our engines move
/// one I/O per call, so everything is in the 1-4 bucket.
pub(crate) fn batch_percentages(entry: &ReportedJob) -> [f64; IODEPTH_LEVELS] {
    let mut percentages = [0.0; IODEPTH_LEVELS];
    if entry.total_ios() > 0 {
        percentages[1] = 100.0;
    }
    percentages
}

fn parameters_json(parameters: &[Parameter]) -> Value {
    Value::Object(
        parameters
            .iter()
            .map(|p| (p.name.clone(), p.value.clone().into()))
            .collect(),
    )
}

fn iosched_json(report: &RunReport) -> Value {
    let mut object = Map::new();
    object.insert("fio_schema".into(), FIO_SCHEMA.into());
    object.insert("engine".into(), report.engine.clone().into());
    object.insert("seed".into(), report.seed.map_or(Value::Null, Value::from));
    object.insert("policy".into(), report.policy.clone().into());
    object.insert("tunables".into(), parameters_json(&report.tunables));
    object.insert("device".into(), report.device.clone().into());
    object.insert(
        "device_parameters".into(),
        parameters_json(&report.device_parameters),
    );
    // Counters come from device models; one that is not a number is shown as null rather
    // than stopping the report.
    let counters: Map<String, Value> = report
        .device_counters
        .iter()
        .map(|(name, value)| {
            let value = Number::from_f64(*value).map_or(Value::Null, Value::Number);
            (name.clone(), value)
        })
        .collect();
    object.insert("device_counters".into(), Value::Object(counters));
    object.insert(
        "notes".into(),
        Value::Array(report.notes.iter().cloned().map(Value::from).collect()),
    );
    object.insert("duration_ms".into(), float(report.duration as f64 / 1e6));
    Value::Object(object)
}

/// Prints `value` in fio's JSON layout: objects and arrays open on the current line and hold
/// one member per line, indented two spaces per level; `"key" : value`; integers as integers
/// and floats with six decimals (`%f`). Ends with a newline, as fio's output does.
pub fn render(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out.push('\n');
    out
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

/// `text` as a JSON string, as serde_json writes it: quoted as is when nothing in it needs
/// an escape (every key and nearly every value of a report), else through serde_json. A
/// string allocated per key and value was a tenth of a 1024-job report's cost.
fn write_string(out: &mut String, text: &str) {
    if text
        .bytes()
        .any(|byte| byte == b'"' || byte == b'\\' || byte < 0x20)
    {
        out.push_str(&serde_json::to_string(text).expect("strings always serialize"));
    } else {
        out.push('"');
        out.push_str(text);
        out.push('"');
    }
}

fn write_value(out: &mut String, value: &Value, level: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        Value::Number(number) => match (number.as_u64(), number.as_i64(), number.as_f64()) {
            // Written in place (a `String` of its own per number was most of the writing).
            (Some(unsigned), _, _) => write!(out, "{unsigned}").expect("a String takes it"),
            (None, Some(signed), _) => write!(out, "{signed}").expect("a String takes it"),
            (None, None, Some(float)) => write!(out, "{float:.6}").expect("a String takes it"),
            (None, None, None) => unreachable!("a JSON number is an integer or a float"),
        },
        Value::String(text) => write_string(out, text),
        Value::Array(values) => {
            out.push_str("[\n");
            for (i, item) in values.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, level + 1);
                write_value(out, item, level + 1);
            }
            out.push('\n');
            indent(out, level);
            out.push(']');
        }
        Value::Object(members) => {
            out.push_str("{\n");
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, level + 1);
                write_string(out, key);
                out.push_str(" : ");
                write_value(out, item, level + 1);
            }
            out.push('\n');
            indent(out, level);
            out.push('}');
        }
    }
}

#[cfg(test)]
mod writer_tests {
    use super::*;

    proptest::proptest! {
        // Proves write_string writes what serde_json does, for any text: quotes, backslashes,
        // control characters, non-ASCII.
        #[test]
        fn strings_are_written_as_serde_json_writes_them(text in "(?s).{0,40}") {
            let mut out = String::new();
            write_string(&mut out, &text);
            proptest::prop_assert_eq!(out, serde_json::to_string(&text).unwrap());
        }
    }

    // Proves numbers are written as before: integers as to_string, floats with six decimals.
    #[test]
    fn numbers_are_written_in_place_as_before() {
        for (value, text) in [
            (serde_json::json!(0u64), "0"),
            (serde_json::json!(u64::MAX), "18446744073709551615"),
            (serde_json::json!(-12i64), "-12"),
            (serde_json::json!(1.5f64), "1.500000"),
            (serde_json::json!(-0.1234567f64), "-0.123457"),
        ] {
            let mut out = String::new();
            write_value(&mut out, &value, 0);
            assert_eq!(out, text);
        }
    }
}

#[cfg(test)]
mod ctime_tests {
    use super::*;

    // Proves the ctime text against known dates (date -u -d @N '+%a %b %e %H:%M:%S %Y').
    #[test]
    fn ctime_matches_c() {
        assert_eq!(ctime(0), EPOCH_CTIME);
        assert_eq!(ctime(951_782_400), "Tue Feb 29 00:00:00 2000");
        assert_eq!(ctime(1_795_590_685), "Wed Nov 25 07:11:25 2026");
        assert_eq!(ctime(4_102_444_799), "Thu Dec 31 23:59:59 2099");
    }
}

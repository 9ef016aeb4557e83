//! fio's "normal" text output (`--output-format=normal`), laid out as fio 3.33 prints it.
//!
//! Deliberate differences from fio 3.33:
//! - fio's start-up lines (one per job with its rw/bs/ioengine, the version, "Starting N
//!   processes") are replaced by one line naming iosched, the engine, the seed, the policy
//!   and the device, so the seed is the first thing printed; the results follow after a blank
//!   line as in fio.
//! - The job header's pid is 0 and its date the Unix epoch, so the output depends on nothing
//!   but the run.
//! - `cpu` shows zeros, and `submit`/`complete` put every I/O in the 1-4 bucket (see the
//!   [JSON notes](mod@super::json)).
//! - Per-priority lines are sorted by priority (unset first, then RT, BE, IDLE).
//! - An "iosched:" section after "Disk stats" lists tunables, device parameters and counters,
//!   and the notes on options without effect.
//! - Starvation shows. A job's I/Os still waiting when its runtime ended are counted, as fio
//!   waits for them, and also listed after `issued rwts` as `queued at end: R,W,T (oldest
//!   R,W,T msec)`; a direction none of whose I/Os completed within the runtime says "no I/O
//!   completed within the runtime" under its IOPS line, and a job all of whose I/Os failed
//!   says "no I/O completed" (fio prints its header alone).

use crate::job::DataDir;
use crate::output::format::{
    num2str, percentile_precision, sorted_percentiles, TimeUnit, Unit, SIGNIFICANT_FIGURES,
};
use crate::output::group::{
    group_of, group_runs, per_second, reported_jobs, GroupRun, ReportedJob, LATENCY_BUCKETS_MS,
    LATENCY_BUCKETS_NS, LATENCY_BUCKETS_US,
};
use crate::output::json::{batch_percentages, ctime, VERSION};
use crate::report::{Parameter, RunReport};
use crate::stats::Latency;
use std::fmt::Write;

/// fio's normal text output for `report`.
pub fn normal(report: &RunReport) -> String {
    let entries = reported_jobs(report);
    let groups = group_runs(&entries);
    let mut out = String::new();

    let seed = report
        .seed
        .map_or_else(|| "none".to_string(), |seed| seed.to_string());
    writeln!(
        out,
        "{VERSION}: engine={}, seed={seed}, policy={}, device={}",
        report.engine, report.policy, report.device
    )
    .unwrap();
    // fio starts its results with a blank line.
    out.push('\n');

    for entry in &entries {
        job_status(
            &mut out,
            entry,
            group_of(&groups, entry.result.group_id),
            report.started_ms.unwrap_or(0),
        );
    }
    for group in &groups {
        group_status(&mut out, group);
    }
    if !report.disk.name.is_empty() {
        let disk = &report.disk;
        out.push_str("\nDisk stats (read/write):\n");
        writeln!(
            out,
            "  {}: ios={}/{}, merge={}/{}, ticks={}/{}, in_queue={}, util={:3.2}%",
            disk.name,
            disk.read_ios,
            disk.write_ios,
            disk.read_merges,
            disk.write_merges,
            disk.read_ticks,
            disk.write_ticks,
            disk.in_queue,
            disk.util.clamp(0.0, 100.0)
        )
        .unwrap();
    }
    iosched_section(&mut out, report);
    out
}

fn job_status(out: &mut String, entry: &ReportedJob, group: &GroupRun, started_ms: u64) {
    let job = &entry.result;
    let io_bytes: u64 = job.dirs.iter().map(|d| d.io_bytes).sum();
    if io_bytes == 0 && entry.total_ios() == 0 && job.error == 0 && job.total_err == 0 {
        // fio prints nothing for a job that issued no I/O.
        return;
    }
    write!(
        out,
        "{}: (groupid={}, jobs={}): err={:2}",
        job.name, job.group_id, entry.members, job.error
    )
    .unwrap();
    if job.error != 0 {
        write!(out, " ({})", error_text(job.error)).unwrap();
    }
    writeln!(out, ": pid=0: {}", ctime(started_ms / 1000)).unwrap();

    let percentile_list = sorted_percentiles(&job.percentile_list);
    let precision = percentile_precision(&percentile_list);
    for dir in DataDir::ALL {
        if job.dir(dir).io_bytes > 0 {
            dir_status(out, entry, dir, group, &percentile_list, precision);
        }
    }
    if io_bytes == 0 {
        // Every I/O it issued failed: said, rather than a job with no lines.
        out.push_str("  no I/O completed\n");
    }

    let latency = entry.latency_percentages();
    latency_line(out, "nsec", &LATENCY_BUCKETS_NS, &latency.nsec);
    latency_line(out, "usec", &LATENCY_BUCKETS_US, &latency.usec);
    latency_line(out, "msec", &LATENCY_BUCKETS_MS, &latency.msec);

    if job.sync.count() > 0 {
        out.push_str("  fsync/fdatasync/sync_file_range:\n");
        summary_line(out, "sync", &job.sync);
        percentile_block(out, "sync", &job.sync, &percentile_list, precision);
    }

    out.push_str("  cpu          : usr=0.00%, sys=0.00%, ctx=0, majf=0, minf=0\n");
    let depths = entry.iodepth_percentages();
    writeln!(
        out,
        "  IO depths    : 1={:3.1}%, 2={:3.1}%, 4={:3.1}%, 8={:3.1}%, 16={:3.1}%, 32={:3.1}%, >=64={:3.1}%",
        depths[0], depths[1], depths[2], depths[3], depths[4], depths[5], depths[6]
    )
    .unwrap();
    let batches = batch_percentages(entry);
    for label in ["submit    ", "complete  "] {
        writeln!(
            out,
            "     {label}: 0={:3.1}%, 4={:3.1}%, 8={:3.1}%, 16={:3.1}%, 32={:3.1}%, 64={:3.1}%, >=64={:3.1}%",
            batches[0], batches[1], batches[2], batches[3], batches[4], batches[5], batches[6]
        )
        .unwrap();
    }
    let [read, write, trim] = &job.dirs;
    writeln!(
        out,
        "     issued rwts: total={},{},{},{} short={},{},{},0 dropped={},{},{},0",
        read.total_ios,
        write.total_ios,
        trim.total_ios,
        job.sync.count(),
        read.short_ios,
        write.short_ios,
        trim.short_ios,
        read.drop_ios,
        write.drop_ios,
        trim.drop_ios
    )
    .unwrap();
    if job.dirs.iter().any(|d| d.queued_at_end > 0) {
        writeln!(
            out,
            "     queued at end: {},{},{} (oldest {},{},{} msec)",
            read.queued_at_end,
            write.queued_at_end,
            trim.queued_at_end,
            read.oldest_queued_at_end / 1_000_000,
            write.oldest_queued_at_end / 1_000_000,
            trim.oldest_queued_at_end / 1_000_000
        )
        .unwrap();
    }
    if job.counts_errors {
        writeln!(
            out,
            "     errors    : total={}, first_error={}/<{}>",
            job.total_err,
            job.first_error,
            error_text(job.first_error)
        )
        .unwrap();
    }
    writeln!(
        out,
        "     latency   : target=0, window=0, percentile=100.00%, depth={}",
        entry.latency_depth
    )
    .unwrap();
    if let Some(steady) = &job.steadystate {
        // fio's show_ss_normal.
        let (iops, bandwidth) = steady.means();
        writeln!(
            out,
            "  steadystate  : attained={}, bw={}, iops={}, {}{}={:.3}{}",
            if steady.attained { "yes" } else { "no" },
            rate_pair(bandwidth),
            num2str(iops, SIGNIFICANT_FIGURES, 1, false, Unit::None),
            match steady.spec.metric {
                crate::steady::SteadyMetric::Iops => "iops",
                crate::steady::SteadyMetric::Bw => "bw",
            },
            if steady.spec.slope {
                " slope"
            } else {
                " mean dev"
            },
            steady.criterion,
            if steady.spec.percent { "%" } else { "" }
        )
        .unwrap();
    }
}

/// A bandwidth as fio shows it, binary units then decimal ones: `94.6GiB/s (99.2GB/s)`.
fn rate_pair(bytes_per_second: u64) -> String {
    format!(
        "{} ({})",
        num2str(
            bytes_per_second,
            SIGNIFICANT_FIGURES,
            1,
            true,
            Unit::BytePerSecond
        ),
        num2str(
            bytes_per_second,
            SIGNIFICANT_FIGURES,
            1,
            false,
            Unit::BytePerSecond
        )
    )
}

/// The description of an errno value, as fio shows it after `err=`.
fn error_text(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    match text.find(" (os error") {
        Some(end) => text[..end].to_string(),
        None => text,
    }
}

fn dir_status(
    out: &mut String,
    entry: &ReportedJob,
    dir: DataDir,
    group: &GroupRun,
    percentiles: &[f64],
    precision: usize,
) {
    let index = dir as usize;
    let stats = &entry.result.dirs[index];
    let runtime_ms = entry.runtime_ms[index];
    if runtime_ms == 0 {
        return;
    }
    let bandwidth = per_second(stats.io_bytes, runtime_ms);
    let iops = per_second(stats.total_ios, runtime_ms);
    // fio 3.33 prints the write line's zoned-device status even for ordinary devices.
    let zone_status = if dir == DataDir::Write {
        format!("; {} zone resets", entry.result.zone_resets)
    } else {
        String::new()
    };
    writeln!(
        out,
        "  {}: IOPS={}, BW={}({}/{runtime_ms}msec){zone_status}",
        dir.name(),
        num2str(iops, SIGNIFICANT_FIGURES, 1, false, Unit::None),
        rate_pair(bandwidth),
        num2str(stats.io_bytes, SIGNIFICANT_FIGURES, 1, true, Unit::Byte),
    )
    .unwrap();
    if stats.starved() {
        writeln!(
            out,
            "    no I/O completed within the runtime: {} queued at its end, the oldest for \
             {}msec; counted here when they completed, after it",
            stats.queued_at_end,
            stats.oldest_queued_at_end / 1_000_000
        )
        .unwrap();
    }

    if stats.slat.count() > 0 {
        summary_line(out, "slat", &stats.slat);
    }
    if stats.clat.count() > 0 {
        summary_line(out, "clat", &stats.clat);
    }
    if stats.lat().count() > 0 {
        summary_line(out, " lat", stats.lat());
    }
    // Per-priority lines only when two or more priorities have samples, as in fio.
    // "class/level" as fio 3.33; "class/level/hint" as fio 3.36 when a hint is in use.
    let hinted = stats.prio_clat().iter().any(|(prio, _)| prio.hint() != 0);
    let prios: Vec<_> = stats
        .prio_clat()
        .into_iter()
        .filter(|(_, latency)| latency.count() > 0)
        .map(|(prio, latency)| {
            let raw = prio.to_raw();
            let name = if hinted {
                format!("clat prio {}/{}/{}", raw >> 13, raw & 7, prio.hint())
            } else {
                format!("clat prio {}/{}", raw >> 13, raw & 7)
            };
            (name, latency)
        })
        .collect();
    let by_priority = prios.len() >= 2;
    if by_priority {
        for (name, latency) in &prios {
            summary_line(out, name, latency);
        }
    }
    if stats.clat.count() > 0 {
        percentile_block(out, "clat", &stats.clat, percentiles, precision);
    }
    if by_priority && !percentiles.is_empty() {
        for (name, latency) in &prios {
            let share = 100.0 * latency.count() as f64 / stats.clat.count() as f64;
            let title = format!("{name} ({share:.2}% of IOs)");
            percentile_block(out, &title, latency, percentiles, precision);
        }
    }

    let bw = &entry.bandwidth_kib[index];
    if bw.samples > 0 {
        let share = group.share_percent(dir, bw.mean);
        let (mut min, mut max, mut mean, mut stddev) = (bw.min, bw.max, bw.mean, bw.stddev());
        let mut unit = "KiB";
        if mean > 1024.0 * 1024.0 {
            min /= 1024;
            max /= 1024;
            mean /= 1024.0;
            stddev /= 1024.0;
            unit = "MiB";
        }
        writeln!(
            out,
            "   bw ({unit:>5}/s): min={min:5}, max={max:5}, per={share:3.2}%, avg={mean:5.2}, stdev={stddev:5.2}, samples={}",
            bw.samples
        )
        .unwrap();
    }
    let io = &entry.iops[index];
    if io.samples > 0 {
        writeln!(
            out,
            "   iops        : min={:5}, max={:5}, avg={:5.2}, stdev={:5.2}, samples={}",
            io.min,
            io.max,
            io.mean,
            io.stddev(),
            io.samples
        )
        .unwrap();
    }
}

/// A latency summary line, `    clat (usec): min=.., max=.., avg=.., stdev=..`, in the unit
/// fio picks for its spread.
fn summary_line(out: &mut String, name: &str, latency: &Latency) {
    let stddev = latency.stddev();
    let unit = TimeUnit::for_summary(latency.min(), latency.max(), stddev);
    let divisor = unit.nanos();
    writeln!(
        out,
        "    {name} ({}): min={}, max={}, avg={:5.2}, stdev={:5.2}",
        unit.name(),
        num2str(latency.min() / divisor, 6, 1, false, Unit::None),
        num2str(latency.max() / divisor, 6, 1, false, Unit::None),
        latency.mean() / divisor as f64,
        stddev / divisor as f64
    )
    .unwrap();
}

/// A percentile block: a title line, then `|`-prefixed lines of `NN.NNth=[value]` entries,
/// as many per line as fit in 80 columns, values in the unit fio picks for their range
/// (rounded up when scaled).
fn percentile_block(
    out: &mut String,
    title: &str,
    latency: &Latency,
    percentiles: &[f64],
    precision: usize,
) {
    if percentiles.is_empty() || latency.count() == 0 {
        return;
    }
    let values = latency.percentiles(percentiles);
    let min = values.iter().copied().min().expect("non-empty");
    let max = values.iter().copied().max().expect("non-empty");
    let unit = TimeUnit::for_percentiles(min, max);
    let divisor = unit.nanos();
    write!(out, "    {title} percentiles ({}):\n     |", unit.name()).unwrap();

    let value_width = match max / divisor {
        0 => 5,
        scaled => (scaled.ilog10() as usize + 1).max(5),
    };
    let per_line = (80 - 7) / (precision + 10 + value_width);
    let label_width = precision + 3;
    for (i, (&percent, &value)) in percentiles.iter().zip(&values).enumerate() {
        if i != 0 && i % per_line == 0 {
            out.push_str("     |");
        }
        let scaled = value.div_ceil(divisor);
        let last = i == percentiles.len() - 1;
        write!(
            out,
            " {percent:label_width$.precision$}th=[{scaled:value_width$}]{}",
            if last { '\n' } else { ',' }
        )
        .unwrap();
        if !last && i % per_line == per_line - 1 {
            out.push('\n');
        }
    }
}

/// One of the `lat (usec)   : 100=17.78%, 250=80.57%` lines: non-empty buckets only, five
/// per line.
fn latency_line(out: &mut String, unit: &str, buckets: &[(&str, u64)], percentages: &[f64]) {
    let mut on_line = 0;
    let mut shown = false;
    for ((label, _), &percent) in buckets.iter().zip(percentages) {
        if percent <= 0.0 {
            continue;
        }
        if on_line == 0 {
            if shown {
                out.push('\n');
            }
            write!(out, "  lat ({unit})   : ").unwrap();
        } else {
            out.push_str(", ");
        }
        shown = true;
        write!(out, "{label}={percent:3.2}%").unwrap();
        on_line = (on_line + 1) % 5;
    }
    if shown {
        out.push('\n');
    }
}

fn group_status(out: &mut String, group: &GroupRun) {
    writeln!(out, "\nRun status group {} (all jobs):", group.group_id).unwrap();
    for (dir, label) in DataDir::ALL
        .into_iter()
        .zip(["   READ", "  WRITE", "   TRIM"])
    {
        let totals = group.dir(dir);
        if totals.runtime_ms_max == 0 {
            continue;
        }
        let rate = |value: u64, binary: bool| {
            num2str(value, SIGNIFICANT_FIGURES, 1, binary, Unit::BytePerSecond)
        };
        let bytes =
            |value: u64, binary: bool| num2str(value, SIGNIFICANT_FIGURES, 1, binary, Unit::Byte);
        writeln!(
            out,
            "{label}: bw={} ({}), {}-{} ({}-{}), io={} ({}), run={}-{}msec",
            rate(totals.bandwidth_aggregate, true),
            rate(totals.bandwidth_aggregate, false),
            rate(totals.bandwidth_min, true),
            rate(totals.bandwidth_max, true),
            rate(totals.bandwidth_min, false),
            rate(totals.bandwidth_max, false),
            bytes(totals.io_bytes, true),
            bytes(totals.io_bytes, false),
            totals.runtime_ms_min,
            totals.runtime_ms_max
        )
        .unwrap();
    }
}

/// `name: a=1ms, b=2`, or just `name` without parameters.
fn named_parameters(name: &str, parameters: &[Parameter]) -> String {
    if parameters.is_empty() {
        return name.to_string();
    }
    // Compact units read as part of the value (500ms, 76.3MB/s); counting units ("requests",
    // "sectors", "0/1") only repeat the name and are left to `iosched devices`/`policies`.
    // Per-zone rows are left out here too: the JSON and `iosched devices` list them.
    const COMPACT: [&str; 12] = [
        "ns", "us", "ms", "s", "KiB", "MiB", "GiB", "GB", "MB", "MB/s", "%", "rpm",
    ];
    let list: Vec<String> = parameters
        .iter()
        .filter(|p| !p.name.starts_with("zone_"))
        .map(|p| {
            let unit = if COMPACT.contains(&p.unit.as_str()) {
                p.unit.as_str()
            } else {
                ""
            };
            format!("{}={}{unit}", p.name, p.value)
        })
        .collect();
    format!("{name}: {}", list.join(", "))
}

/// A counter as an integer when it is one, else with three decimals.
fn counter_value(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
    }
}

/// What fio has no place for: the policy's tunables, the device model, its counters, notes.
fn iosched_section(out: &mut String, report: &RunReport) {
    out.push_str("\niosched:\n");
    writeln!(
        out,
        "  policy       : {}",
        named_parameters(&report.policy, &report.tunables)
    )
    .unwrap();
    writeln!(
        out,
        "  device       : {}",
        named_parameters(&report.device, &report.device_parameters)
    )
    .unwrap();
    if !report.device_counters.is_empty() {
        let counters: Vec<String> = report
            .device_counters
            .iter()
            .map(|(name, value)| format!("{name}={}", counter_value(*value)))
            .collect();
        writeln!(out, "  counters     : {}", counters.join(", ")).unwrap();
    }
    writeln!(
        out,
        "  duration     : {:.3}msec",
        report.duration as f64 / 1e6
    )
    .unwrap();
    for note in &report.notes {
        writeln!(out, "  note         : {note}").unwrap();
    }
}

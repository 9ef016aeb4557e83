//! NCQ priority (libata's `ncq_prio_enable`): the drive serves RT-class commands first. Seed
//! 004's setting: a foreground at QD1 beside a background keeping 32 commands queued, noop.

use iosched_fio::parse::parse_str;
use iosched_fio::{DataDir, RunReport};
use iosched_sim::{run, SimConfig};
use std::path::Path;

const JOBS: &str = "[global]\ndirect=1\nrw=randread\nbs=4k\nsize=100%\nfilename=/dev/sda\n\
                    runtime=${RUNTIME}\ntime_based=1\n\
                    [fg]\nioengine=psync\nprioclass=1\n\
                    [bg]\nioengine=libaio\niodepth=32\nprioclass=2\n";

fn mix(prio: &str) -> RunReport {
    let runtime = if cfg!(debug_assertions) { "20" } else { "60" };
    let file = parse_str(JOBS, "t.fio", Path::new("."), &|name| {
        (name == "RUNTIME").then(|| runtime.to_string())
    })
    .unwrap();
    let config = SimConfig {
        policy: "noop".into(),
        device: "hdd".into(),
        device_settings: vec![("ncq_prio_enable".into(), prio.into())],
        ..SimConfig::default()
    };
    run(&config, &file).unwrap()
}

fn figures(report: &RunReport, job: usize) -> (f64, f64) {
    let read = report.jobs[job].dir(DataDir::Read);
    let seconds = report.jobs[job].runtime as f64 / 1e9;
    (
        read.total_ios as f64 / seconds,
        read.clat.percentile(99.99) as f64 / 1e6,
    )
}

fn counter(report: &RunReport, name: &str) -> f64 {
    report
        .device_counters
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
        .unwrap()
}

// Proves drive-side priority cuts the RT foreground's tail (the host cannot reorder what is
// already queued in the drive), that the NCQ deadline still bounds the background's waits
// (so it keeps going), and that high-priority picks are counted apart from the host's choice.
#[test]
fn drive_priority_cuts_the_foreground_tail() {
    let (off, on) = (mix("off"), mix("on"));
    let (fg_off, bg_off) = (figures(&off, 0), figures(&off, 1));
    let (fg_on, bg_on) = (figures(&on, 0), figures(&on, 1));
    eprintln!("off: fg {fg_off:?} bg {bg_off:?}; on: fg {fg_on:?} bg {bg_on:?}");
    assert!(
        fg_off.1 >= 5.0 * fg_on.1,
        "fg p99.99 {:.0} ms -> {:.0} ms",
        fg_off.1,
        fg_on.1
    );
    assert!(fg_on.0 > fg_off.0, "the foreground gets more IOPS");
    assert!(
        bg_on.0 >= 0.3 * bg_off.0,
        "the background keeps going: {bg_on:?}"
    );
    assert!(
        bg_on.1 <= 2500.0,
        "the NCQ deadline (2 s) bounds its tail: {bg_on:?}"
    );
    assert_eq!(counter(&off, "ncq_high_picks"), 0.0);
    let fg_ios = on.jobs[0].dir(DataDir::Read).total_ios as f64;
    assert!(
        counter(&on, "ncq_high_picks") >= fg_ios * 0.9,
        "every fg command is high"
    );
}

const STREAM: &str = "[global]\nfilename=/dev/sda\ndirect=1\nbs=4k\nruntime=${RUNTIME}\n\
                      time_based=1\nioengine=psync\n\
                      [seq]\nrw=read\nprioclass=2\n\
                      [rt]\nrw=randread\nprioclass=1\nthinktime=20ms\n";

fn stream(prio: &str) -> RunReport {
    let file = parse_str(STREAM, "t.fio", Path::new("."), &|name| {
        (name == "RUNTIME").then(|| "30".to_string())
    })
    .unwrap();
    let config = SimConfig {
        policy: "noop".into(),
        device: "hdd".into(),
        device_settings: vec![("ncq_prio_enable".into(), prio.into())],
        ..SimConfig::default()
    };
    run(&config, &file).unwrap()
}

// Proves a high-priority command stops the read-ahead a sequential stream was promised
// (stream_read_ahead_kib), where a normal one waits for it: the RT reader's mean latency
// falls with drive priority, and the stream still reads.
#[test]
fn a_high_command_stops_a_streams_read_ahead() {
    let (off, on) = (stream("off"), stream("on"));
    let mean = |report: &RunReport, job: usize| report.jobs[job].dir(DataDir::Read).clat.mean();
    eprintln!(
        "rt mean {:.2} -> {:.2} ms; seq {:.0} -> {:.0} IOPS",
        mean(&off, 1) / 1e6,
        mean(&on, 1) / 1e6,
        figures(&off, 0).0,
        figures(&on, 0).0
    );
    assert!(mean(&on, 1) < 0.95 * mean(&off, 1));
    assert!(figures(&on, 0).0 > 0.5 * figures(&off, 0).0);
}

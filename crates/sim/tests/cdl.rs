//! Command duration limits (CDL) in the HDD model: requests with priority hints 1-7 carry a
//! descriptor; the drive serves them by their limits and applies each descriptor's policy when
//! a limit passes.

mod common;

use common::{build, counter, Rng};
use iosched_core::{testing::request, IoPrio, IoPrioClass, Nanos, Op};
use iosched_fio::parse::parse_str;
use iosched_fio::{DataDir, RunReport};
use iosched_sim::device::Device;
use iosched_sim::{run, SimConfig};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

const MS: Nanos = 1_000_000;
const ETIME: i32 = 62;

/// What happened to one command.
struct Finished {
    hint: u16,
    submitted: Nanos,
    completed: Nanos,
    error: Option<i32>,
}

/// Keeps `depth` 4 KiB random reads outstanding on `device` until `count` completed, each with
/// a hint drawn from `hints`; returns every command's fate, checking each completes once.
fn closed_loop(
    device: &mut dyn Device,
    depth: u32,
    count: u64,
    hints: &[u16],
    seed: u64,
) -> Vec<Finished> {
    let mut rng = Rng::new(seed);
    let span = device.capacity() / 4096;
    let mut outstanding: BTreeMap<u64, (Nanos, u16)> = BTreeMap::new();
    let mut finished = Vec::new();
    let (mut now, mut next_id, mut done) = (0, 0u64, Vec::new());
    let mut submit =
        |device: &mut dyn Device, outstanding: &mut BTreeMap<u64, (Nanos, u16)>, now: Nanos| {
            let hint = hints[rng.below(hints.len() as u64) as usize];
            let mut command = request(next_id, Op::Read, rng.below(span) * 4096, 4096);
            command.prio = IoPrio::new(IoPrioClass::Be, 0)
                .unwrap()
                .with_hint(hint)
                .unwrap();
            outstanding.insert(next_id, (now, hint));
            next_id += 1;
            device.submit(command, now);
        };
    for _ in 0..depth {
        submit(device, &mut outstanding, now);
    }
    while (finished.len() as u64) < count {
        now = device.next_event().expect("commands are outstanding");
        device.advance(now, &mut done);
        for (at, command) in done.drain(..) {
            let error = device.completion_error(&command);
            let (submitted, hint) = outstanding
                .remove(&command.id.0)
                .expect("every command completes exactly once");
            finished.push(Finished {
                hint,
                submitted,
                completed: at,
                error,
            });
        }
        while device.in_flight() < depth {
            submit(device, &mut outstanding, now);
        }
    }
    finished
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 6 } else { 24 }))]

    // Proves the abort policy's contract under random limits, depths and mixes: a command
    // with an aborting inactive limit either fails with ETIME exactly at its limit, or
    // completes within the limit plus one access (it started in time); no other command ever
    // fails; and best-effort commands are never aborted.
    #[test]
    fn abort_fails_exactly_at_the_limit_and_nothing_else_fails(
        limit_ms in 20u64..400,
        loose_ms in 100u64..2000,
        depth in 1u32..=32,
        seed in 0u64..1000,
    ) {
        let abort = format!("inactive={limit_ms}ms,policy=abort");
        let loose = format!("inactive={loose_ms}ms");
        let mut device = build(
            "he8",
            &[("cdl_enable", "on"), ("cdl_read_1", &abort), ("cdl_read_2", &loose)],
            seed,
        );
        let finished = closed_loop(device.as_mut(), depth, 600, &[0, 0, 1, 2], seed);
        let (mut aborted, mut worst) = (0, 0);
        for command in &finished {
            let waited = command.completed - command.submitted;
            match (command.hint, command.error) {
                (1, Some(errno)) => {
                    prop_assert_eq!(errno, ETIME);
                    prop_assert_eq!(waited, limit_ms * MS, "aborted at its limit");
                    aborted += 1;
                }
                // Started within its limit; one access on this drive is under 40 ms.
                (1, None) => worst = worst.max(waited),
                (_, error) => prop_assert_eq!(error, None, "only aborting descriptors fail"),
            }
        }
        prop_assert!(worst <= limit_ms * MS + 40 * MS, "worst {} ms", worst / MS);
        prop_assert_eq!(counter(device.as_ref(), "cdl_aborted"), f64::from(aborted));
    }
}

// Proves limits are served first once near: at QD32 of random reads, commands with a 100 ms
// inactive limit (best effort) complete well inside the plain commands' tail, and the demote
// policy drops a missed command's limit (counted) rather than failing it.
#[test]
fn limited_commands_go_first_and_demote_drops_the_limit() {
    let mut device = build(
        "he8",
        &[
            ("cdl_enable", "on"),
            ("cdl_read_1", "inactive=100ms"),
            ("cdl_read_2", "inactive=30ms,policy=demote"),
        ],
        7,
    );
    let finished = closed_loop(device.as_mut(), 32, 4000, &[0, 0, 0, 0, 0, 0, 1, 2], 7);
    let worst = |hint: u16| {
        let mut waits: Vec<Nanos> = finished
            .iter()
            .filter(|c| c.hint == hint)
            .map(|c| c.completed - c.submitted)
            .collect();
        waits.sort_unstable();
        waits[waits.len() * 99 / 100]
    };
    let (plain, limited) = (worst(0), worst(1));
    eprintln!("p99: plain {} ms, limited {} ms", plain / MS, limited / MS);
    assert!(limited <= 160 * MS, "limited p99 {} ms", limited / MS);
    assert!(plain >= 3 * limited, "plain p99 {} ms", plain / MS);
    assert!(finished.iter().all(|c| c.error.is_none()));
    assert!(counter(device.as_ref(), "cdl_demoted") > 0.0);
    assert!(counter(device.as_ref(), "cdl_urgent_picks") > 0.0);
}

// Proves CDL and NCQ priority exclude each other, as libata refuses enabling both.
#[test]
fn cdl_and_ncq_priority_are_exclusive() {
    let settings = [
        ("cdl_enable".to_string(), "on".to_string()),
        ("ncq_prio_enable".to_string(), "on".to_string()),
    ];
    let error = iosched_sim::device::build("hdd", &settings, 1)
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("cdl_enable"), "{error}");
}

fn cdl_run(job_options: &str) -> RunReport {
    let text = format!(
        "[global]\nfilename=/dev/sda\ndirect=1\nrw=randread\nbs=4k\nioengine=libaio\n\
         runtime=20\ntime_based=1\n[bounded]\niodepth=8\npriohint=1\n{job_options}\n\
         [bg]\niodepth=24\n"
    );
    let file = parse_str(&text, "t.fio", Path::new("."), &|_| None).unwrap();
    let config = SimConfig {
        policy: "noop".into(),
        device: "he8".into(),
        device_settings: vec![
            ("cdl_enable".into(), "on".into()),
            ("cdl_read_1".into(), "inactive=40ms,policy=abort".into()),
        ],
        ..SimConfig::default()
    };
    run(&config, &file).unwrap()
}

// Proves aborted commands reach the job as fio's errors: by default the first ETIME ends the
// job (error 62); with continue_on_error=read and ignore_error=ETIME they are counted
// (total_err, first_error), left out of the latencies, and the job goes on.
#[test]
fn aborts_are_job_errors_unless_ignored() {
    let stopped = cdl_run("");
    assert_eq!(stopped.jobs[0].error, ETIME);
    let going = cdl_run("continue_on_error=read\nignore_error=ETIME");
    let job = &going.jobs[0];
    assert_eq!(job.error, 0);
    assert!(job.total_err > 0, "aborts counted");
    assert_eq!(job.first_error, ETIME);
    let read = job.dir(DataDir::Read);
    assert!(read.total_ios > stopped.jobs[0].dir(DataDir::Read).total_ios);
    assert!(
        read.clat.max() <= 80 * MS,
        "max {} ms",
        read.clat.max() / MS
    );
    // EIO-only continue (fio's default list) does not cover ETIME.
    assert_eq!(cdl_run("continue_on_error=read").jobs[0].error, ETIME);
}

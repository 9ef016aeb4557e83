//! Parses the example job files in tests/data from disk, as `iosched run` would, and checks
//! what each resolves to.

use iosched_core::{IoPrio, IoPrioClass};
use iosched_fio::job::RandomDistribution;
use iosched_fio::parse::{parse_file, parse_str};
use iosched_fio::{Amount, BlockSize, Engine, JobFile, RwMode};
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const SECOND: u64 = 1_000_000_000;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn parse_data(name: &str) -> JobFile {
    parse_file(&data(name)).unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn random_read() {
    let file = parse_data("random-read.fio");
    assert_eq!(file.jobs.len(), 1);
    let job = &file.jobs[0];
    assert_eq!(job.name, "rand-read");
    assert_eq!(job.rw, RwMode::RandRead);
    assert_eq!(
        job.engine,
        Engine::Async {
            name: "libaio".into()
        }
    );
    assert_eq!(job.iodepth, 32);
    assert!(job.direct);
    assert_eq!(
        job.bs,
        [
            BlockSize::Fixed(4096),
            BlockSize::Fixed(4096),
            BlockSize::Fixed(4096)
        ]
    );
    assert_eq!(job.filenames, vec!["/dev/sdb".to_string()]);
    assert_eq!(job.size, Some(Amount::Bytes(10 * GIB)));
    assert_eq!(job.runtime, Some(30 * SECOND));
    assert!(job.time_based);
    assert!(!job.randrepeat);
    assert_eq!(job.percentile_list, vec![50.0, 90.0, 99.0, 99.9, 99.99]);
    assert!(file.notes.is_empty(), "{:?}", file.notes);
    assert_eq!(
        job.options,
        vec![
            ("rw".into(), "randread".into()),
            ("randrepeat".into(), "0".into())
        ]
    );
    assert_eq!(file.global_options.len(), 9);
    assert!(job.location.file.ends_with("random-read.fio"));
    assert_eq!(job.location.line, 14);
}

#[test]
fn sequential_write_with_rate() {
    let file = parse_data("seq-write-rate.fio");
    let job = &file.jobs[0];
    assert_eq!(
        job.engine,
        Engine::Sync {
            name: "psync".into()
        }
    );
    assert_eq!(job.rw, RwMode::Write);
    assert_eq!(job.bs[1], BlockSize::Fixed(MIB));
    assert_eq!(job.rate, [0, 50 * MIB, 50 * MIB]);
    assert_eq!(job.ramp_time, 5 * SECOND);
    assert_eq!(job.write_bw_log.as_deref(), Some("seqwrite"));
    assert_eq!(job.log_avg_msec, 1000);
    assert!(job.end_fsync);
    assert_eq!(
        job.description.as_deref(),
        Some("Rate-capped sequential writer")
    );
    assert_eq!(job.runtime, None);
}

#[test]
fn mixed_random_read_write() {
    let path = data("mixed-randrw.fio");
    let text = std::fs::read_to_string(&path).unwrap();
    let env = |name: &str| (name == "MIXED_SIZE").then(|| "8g".to_string());
    let file = parse_str(&text, "mixed-randrw.fio", path.parent().unwrap(), &env).unwrap();
    assert_eq!(file.jobs.len(), 4);
    for (clone, job) in file.jobs.iter().enumerate() {
        assert_eq!(job.clone, clone as u32);
        assert_eq!(job.numjobs, 4);
        assert_eq!(job.group_id, 0);
        assert!(job.group_reporting);
        assert_eq!(job.filenames, vec![format!("mixed.{clone}.0")]);
    }
    let job = &file.jobs[0];
    assert_eq!(job.rw, RwMode::RandReadWrite);
    assert_eq!(job.rwmixread, 70);
    assert_eq!(
        job.engine,
        Engine::Async {
            name: "io_uring".into()
        }
    );
    assert_eq!(job.size, Some(Amount::Bytes(8 * GIB)));
    assert_eq!(
        job.bs[0],
        BlockSize::Split(vec![(4096, 60), (16384, 30), (65536, 10)])
    );
    assert_eq!(job.bs[1], BlockSize::Split(vec![(4096, 20), (65536, 80)]));
    assert_eq!(job.bs[2], job.bs[1]);
    assert_eq!(job.random_distribution, RandomDistribution::Zipf(1.1));
    assert!(job.norandommap);
    assert_eq!(job.offset_increment, GIB);
    assert_eq!(job.runtime, Some(120 * SECOND));
    let noted: Vec<&str> = file.notes.iter().map(|n| n.option.as_str()).collect();
    assert_eq!(noted, vec!["cpus_allowed", "refill_buffers"]);
    assert_eq!(file.notes[0].location.line, 9);
}

#[test]
fn two_groups_with_include() {
    let file = parse_data("two-groups.fio");
    let summary: Vec<(&str, u32, bool)> = file
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.group_id, j.stonewall))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("rt-reader", 0, false),
            ("idle-reader", 0, false),
            ("writer", 1, true)
        ]
    );
    let (rt, idle, writer) = (&file.jobs[0], &file.jobs[1], &file.jobs[2]);
    assert_eq!(rt.prio, IoPrio::new(IoPrioClass::Rt, 0).unwrap());
    assert_eq!(rt.cgroup, "/fast");
    assert_eq!(idle.prio, IoPrio::new(IoPrioClass::Idle, 0).unwrap());
    assert_eq!(idle.cgroup, "/slow");
    assert_eq!(idle.cgroup_weight, Some(100));
    assert_eq!(idle.offset, Amount::Percent(50.0));
    assert_eq!(writer.bs[1], BlockSize::Fixed(256 * 1024));
    assert_eq!(writer.thinktime, 2_000_000);
    assert_eq!(writer.thinktime_blocks, 8);
    for job in &file.jobs {
        // From the included file.
        assert_eq!(job.ramp_time, SECOND);
        assert_eq!(job.startdelay, (0, 2 * SECOND));
        assert_eq!(job.filenames, vec!["/dev/sdd".to_string()]);
    }
    assert!(file
        .global_options
        .contains(&("startdelay".into(), "0-2".into())));
}

#[test]
fn missing_job_file_names_the_path() {
    let error = parse_file(&data("no-such-file.fio")).unwrap_err();
    assert!(error.location.is_none());
    let message = error.to_string();
    assert!(message.starts_with("cannot read job file \""), "{message}");
    assert!(message.contains("no-such-file.fio"), "{message}");
}

#[test]
fn include_loop_names_each_step() {
    let error = parse_file(&data("loop/a.fio")).unwrap_err();
    let message = error.to_string();
    assert!(message.starts_with("b.fio:2: include loop: "), "{message}");
    assert!(
        message.ends_with("a.fio:2 includes b.fio, b.fio:2 includes a.fio"),
        "{message}"
    );
}

#[test]
fn missing_include_names_the_file_and_line() {
    let base = data("");
    let error = parse_str("[job]\n\ninclude absent.inc\n", "main.fio", &base, &|_| {
        None
    })
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("main.fio:3: cannot read included file \""),
        "{error}"
    );
    assert!(error.contains("absent.inc"), "{error}");
}

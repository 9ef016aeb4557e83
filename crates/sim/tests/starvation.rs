//! Starvation: no request waits without bound, under any policy or stage.
//!
//! Two parts. First, whole simulations of issue 11's item 7: io.max limits smaller than one
//! request per throttling slice must still be served at their rate. Second, the starvation
//! guard: for every stack in the catalogue, random mixes of jobs on the `fixed` device (whose
//! constant service time cannot starve anything itself), and every request's wait, from
//! entering the stage or the scheduler to its dispatch, checked against a bound each policy
//! derives from its own tunables.

use iosched_fio::parse::parse_str;
use iosched_fio::RunReport;
use iosched_sim::{run, GroupSetting, SimConfig};
use std::path::Path;

/// Runs job file `text` on `device` under `policy`, with `io_max` written to `/g`'s io.max as
/// `iosched run --group /g:io.max=VALUE` does.
fn run_limited(text: &str, device: &str, policy: &str, io_max: &str) -> RunReport {
    let file = parse_str(text, "t.fio", Path::new("."), &|_| None).expect("a valid job file");
    let config = SimConfig {
        policy: policy.into(),
        device: device.into(),
        group_settings: vec![GroupSetting {
            path: "/g".into(),
            file: "io.max".into(),
            value: io_max.into(),
            origin: format!("--group /g:io.max={io_max}"),
        }],
        ..SimConfig::default()
    };
    run(&config, &file).expect("the run finishes")
}

/// Bytes and I/Os per second of job `index` in direction `dir` (0 read, 1 write).
fn rates(report: &RunReport, index: usize, dir: usize) -> (f64, f64) {
    let job = &report.jobs[index];
    let seconds = job.runtime as f64 / 1e9;
    let stats = &job.dirs[dir];
    (
        stats.io_bytes as f64 / seconds,
        stats.total_ios as f64 / seconds,
    )
}

// Regression (issue 11, item 7), as `iosched run --policy throttle+deadline --group
// /g:io.max=rbps=1048576` runs it: 1 MiB reads in a group limited to 1 MiB/s got no service
// at all. Proves they get 1 MiB/s within 5% over 20 s, on the fixed device and on the disk.
#[test]
fn one_mebibyte_reads_under_one_mebibyte_per_second() {
    let text = "[g]\nrw=read\nbs=1M\ndirect=1\nsize=256M\ntime_based=1\nruntime=20\ncgroup=/g\n";
    for device in ["fixed", "hdd"] {
        let report = run_limited(text, device, "throttle+deadline", "rbps=1048576");
        let (bytes, _) = rates(&report, 0, 0);
        println!("{device}: 1 MiB reads under rbps=1048576: {bytes:.0} B/s");
        assert!(
            (bytes / 1_048_576.0 - 1.0).abs() < 0.05,
            "{device}: {bytes} B/s"
        );
    }
}

// Regression (issue 11, item 7): riops=1 allows a tenth of an I/O per 100 ms slice, and the
// group got nothing. Proves riops=1 gives 1 IOPS and wiops=1 one write per second, within 5%
// over 20 s.
#[test]
fn one_iops_limits_give_one_iops() {
    for (rw, limit, dir) in [("randread", "riops=1", 0), ("randwrite", "wiops=1", 1)] {
        let text = format!(
            "[g]\nrw={rw}\nbs=4k\ndirect=1\nsize=256M\ntime_based=1\nruntime=20\ncgroup=/g\n"
        );
        let report = run_limited(&text, "fixed", "throttle+deadline", limit);
        let (_, ios) = rates(&report, 0, dir);
        println!("{limit}: {ios:.3} IOPS");
        assert!((ios - 1.0).abs() < 0.05, "{limit}: {ios} IOPS");
    }
}

// Proves small limits of each kind do not starve and converge to their value over a long
// window (200 s, within 2%): bps below ten requests per second, an iops limit under one per
// slice at depth 8, and read and write limits on one group with a reader and a writer.
#[test]
fn small_limits_converge_in_whole_runs() {
    let reader =
        "[r]\nrw=randread\nbs=4k\ndirect=1\nsize=256M\ntime_based=1\nruntime=200\ncgroup=/g\n";
    let deep_writer = "[w]\nrw=randwrite\nbs=64k\ndirect=1\nioengine=libaio\niodepth=8\nsize=256M\ntime_based=1\nruntime=200\ncgroup=/g\n";
    // (job file, io.max, [(job, dir, bytes/s, I/Os per s)]).
    type Case<'a> = (String, &'a str, Vec<(usize, usize, f64, f64)>);
    let cases: Vec<Case> = vec![
        (
            reader.to_string(),
            "rbps=20000",
            vec![(0, 0, 20_000.0, 20_000.0 / 4096.0)],
        ),
        (
            deep_writer.to_string(),
            "wiops=3",
            vec![(0, 1, 3.0 * 65536.0, 3.0)],
        ),
        (
            format!("{reader}{deep_writer}"),
            "rbps=8192 wiops=2 wbps=1000000",
            vec![(0, 0, 8192.0, 2.0), (1, 1, 2.0 * 65536.0, 2.0)],
        ),
    ];
    for (text, limit, expected) in cases {
        let report = run_limited(&text, "fixed", "throttle+deadline", limit);
        for (job, dir, bytes, ios) in expected {
            let (got_bytes, got_ios) = rates(&report, job, dir);
            println!("{limit}: job {job}: {got_bytes:.0} B/s, {got_ios:.3} IOPS");
            assert!(
                (got_bytes / bytes - 1.0).abs() < 0.02,
                "{limit}: job {job}: {got_bytes} B/s, want {bytes}"
            );
            assert!(
                (got_ios / ios - 1.0).abs() < 0.02,
                "{limit}: job {job}: {got_ios} IOPS, want {ios}"
            );
        }
    }
}

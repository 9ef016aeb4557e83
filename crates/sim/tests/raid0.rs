//! md RAID-0 under the scheduler: striping doubles what one disk gives.

use iosched_fio::parse::parse_str;
use iosched_fio::{DataDir, RunReport};
use iosched_sim::{run, SimConfig};
use std::path::Path;

fn simulate(jobs: &str, device: &str, settings: &[(&str, &str)]) -> RunReport {
    let file = parse_str(jobs, "t.fio", Path::new("."), &|_| None).unwrap();
    let config = SimConfig {
        policy: "deadline".into(),
        device: device.into(),
        device_settings: settings
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        ..SimConfig::default()
    };
    run(&config, &file).unwrap()
}

fn bandwidth(report: &RunReport) -> f64 {
    let job = &report.jobs[0];
    job.dir(DataDir::Read).io_bytes as f64 / (job.runtime as f64 / 1e9)
}

// Proves striping: a deep sequential reader of 1 MiB requests gets about twice one disk's
// bandwidth from two (each chunk of 512 KiB on the other disk), and four of 64 KiB chunks
// about four times; random 4 KiB reads at depth 16 gain from the second spindle too.
#[test]
fn striping_multiplies_a_disks_bandwidth() {
    let seq = "[s]\nrw=read\nbs=1m\niodepth=8\nioengine=libaio\ndirect=1\nsize=20g\n\
               time_based=1\nruntime=5\n";
    let one = bandwidth(&simulate(seq, "hdd", &[]));
    let two = bandwidth(&simulate(seq, "raid0", &[]));
    let four = bandwidth(&simulate(
        seq,
        "raid0",
        &[("members", "4"), ("chunk_kb", "64")],
    ));
    assert!(
        (1.8..2.2).contains(&(two / one)),
        "two disks: {:.2}x",
        two / one
    );
    assert!(
        (3.5..4.4).contains(&(four / one)),
        "four disks: {:.2}x",
        four / one
    );
    let random = "[r]\nrw=randread\nbs=4k\niodepth=16\nioengine=libaio\ndirect=1\nsize=20g\n\
                  time_based=1\nruntime=5\n";
    let one = bandwidth(&simulate(random, "hdd", &[]));
    let two = bandwidth(&simulate(random, "raid0", &[]));
    assert!(
        two / one > 1.5,
        "random reads on two disks: {:.2}x",
        two / one
    );
}

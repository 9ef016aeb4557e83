//! md RAID-0 under the scheduler: striping doubles what one disk gives.

mod report;

use iosched_fio::parse::parse_str;
use iosched_fio::{DataDir, RunReport};
use iosched_sim::{run, SimConfig};
use report::{counter, owned};
use std::path::Path;

fn simulate(jobs: &str, device: &str, settings: &[(&str, &str)]) -> RunReport {
    report::simulate(
        jobs,
        SimConfig {
            policy: "deadline".into(),
            device: device.into(),
            device_settings: owned(settings),
            ..SimConfig::default()
        },
    )
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

/// On raid0 under `policy` with device `settings`, the array's queue merging nothing (2.6's
/// bio-based md has no request queue of its own).
fn simulate_with(jobs: &str, policy: &str, settings: &[(&str, &str)]) -> RunReport {
    report::simulate(
        jobs,
        SimConfig {
            policy: policy.into(),
            policy_settings: owned(&[("nomerges", "1")]),
            device: "raid0".into(),
            device_settings: owned(settings),
            ..SimConfig::default()
        },
    )
}

// Proves each member can have its own elevator (2.6's arrangement, md itself with none):
// with any policy there, every I/O completes, the members' elevators merge what md passes
// on unmerged, and they schedule: an RT reader beside a best-effort one is served first at
// each member under cfq there, where with no elevator anywhere it waits in turn.
#[test]
fn members_can_have_their_own_elevators() {
    let sequential = "[s]\nrw=read\nbs=4k\niodepth=16\nioengine=libaio\ndirect=1\nsize=1g\n\
                      io_size=64m\n";
    for policy in ["deadline", "cfq", "anticipatory", "bfq"] {
        let report = simulate_with(
            sequential,
            "none",
            &[("member_policy", policy), ("member.queue_depth", "1")],
        );
        let reads = report.jobs[0].dir(DataDir::Read);
        assert_eq!(reads.io_bytes, 64 << 20, "{policy}: every read completed");
        assert!(counter(&report, "member_dispatched") > 0.0, "{policy}");
        assert!(
            counter(&report, "member_merged") > 1000.0,
            "{policy}: the members' queues merge md's 4 KiB pieces: {}",
            counter(&report, "member_merged")
        );
    }
    let two = "[global]\nrw=randread\nbs=4k\niodepth=8\nioengine=libaio\ndirect=1\nsize=20g\n\
               time_based=1\nruntime=5\n[rt]\nprioclass=1\n[be]\nprioclass=2\n";
    let shares = |settings: &[(&str, &str)]| {
        let report = simulate_with(two, "none", settings);
        let ios = |job: usize| report.jobs[job].dir(DataDir::Read).total_ios as f64;
        ios(0) / ios(1).max(1.0)
    };
    let with_bfq = shares(&[("member_policy", "bfq"), ("member.queue_depth", "1")]);
    let without = shares(&[("member.queue_depth", "1")]);
    assert!(
        with_bfq > 20.0 && (0.8..1.25).contains(&without),
        "the RT reader's I/Os over the other's: {with_bfq:.1} with bfq on the members, \
         {without:.2} with no elevator"
    );
}

// Proves the members' elevator settings are checked: an unknown policy or tunable, or a
// tunable without a policy, is refused with its name.
#[test]
fn member_policy_settings_are_checked() {
    let job = "[r]\nrw=read\nsize=1m\n";
    let file = parse_str(job, "t.fio", Path::new("."), &|_| None).unwrap();
    for (settings, says) in [
        (vec![("member_policy", "nosuch")], "nosuch"),
        (
            vec![("member_policy", "cfq"), ("member_policy.nosuch", "1")],
            "nosuch",
        ),
        (vec![("member_policy.slice_idle", "0")], "set member_policy"),
    ] {
        let config = SimConfig {
            device: "raid0".into(),
            device_settings: owned(&settings),
            ..SimConfig::default()
        };
        let error = run(&config, &file).unwrap_err().to_string();
        assert!(error.contains(says), "{settings:?}: {error}");
    }
}

// Proves a member's elevator idles for its own disk: two sequential direct readers on an
// array of one-command disks get far more from anticipatory on each member (it waits for the
// reader whose next block is near) than from deadline there, which seeks between them.
#[test]
fn anticipation_works_per_member() {
    let two = "[global]\nrw=read\nbs=4k\nsize=10g\ntime_based=1\nruntime=5\ndirect=1\n\
               [a]\n[b]\n";
    let total = |policy: &str| {
        let report = simulate_with(
            two,
            "none",
            &[("member_policy", policy), ("member.queue_depth", "1")],
        );
        (0..2)
            .map(|job| report.jobs[job].dir(DataDir::Read).io_bytes as f64)
            .sum::<f64>()
    };
    let (anticipatory, deadline) = (total("anticipatory"), total("deadline"));
    assert!(
        anticipatory > 1.3 * deadline,
        "two sequential readers: {:.2}x with anticipatory on the members",
        anticipatory / deadline
    );
}

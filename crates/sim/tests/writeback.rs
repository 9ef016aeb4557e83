//! Buffered writes through the page cache: writeback, dirty throttling, fsync and O_SYNC.

mod report;

use iosched_fio::parse::parse_str;
use iosched_fio::{DataDir, RunReport};
use iosched_sim::{SimConfig, Simulation};
use proptest::prelude::*;
use report::{counter, owned};
use std::path::Path;

fn simulation(jobs: &str, policy: &str, settings: &[(&str, &str)]) -> Simulation {
    let file = parse_str(jobs, "t.fio", Path::new("."), &|_| None).unwrap();
    let config = SimConfig {
        policy: policy.into(),
        device: "hdd".into(),
        policy_settings: owned(settings),
        ..SimConfig::default()
    };
    Simulation::new(&config, &file).unwrap()
}

fn written(report: &RunReport, job: usize) -> u64 {
    report.jobs[job].dir(DataDir::Write).io_bytes
}

#[derive(Clone, Debug)]
struct Writer {
    random: bool,
    block_kib: u64,
    size_mib: u64,
    fsync: u32,
    sync: bool,
    group: usize,
    dontneed: bool,
}

fn writer() -> impl Strategy<Value = Writer> {
    (
        any::<bool>(),
        prop_oneof![Just(4u64), Just(16), Just(64), Just(256)],
        1u64..48,
        prop_oneof![Just(0u32), Just(0), Just(1), Just(7)],
        prop_oneof![Just(false), Just(false), Just(false), Just(true)],
        0usize..3,
        any::<bool>(),
    )
        .prop_map(
            |(random, block_kib, size_mib, fsync, sync, group, dontneed)| Writer {
                random,
                block_kib,
                size_mib,
                fsync,
                sync,
                group,
                dontneed,
            },
        )
}

fn job_file(writers: &[Writer], shared: bool) -> String {
    let mut text = String::from("[global]\nend_fsync=1\n");
    if shared {
        // Every job writes the same file: pages are dirtied again, by several jobs.
        text.push_str("filename=shared\n");
    }
    for (index, w) in writers.iter().enumerate() {
        text.push_str(&format!(
            "[w{index}]\nrw={}\nbs={}k\nsize={}m\nfsync={}\nsync={}\ncgroup=/g{}\n\
             dontneed_every={}\n",
            if w.random { "randwrite" } else { "write" },
            w.block_kib,
            w.size_mib,
            w.fsync,
            u8::from(w.sync),
            w.group,
            if w.dontneed { "1m" } else { "0" }
        ));
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    // Proves issue 15's claim "no run loses a dirty page": whatever the mix of buffered
    // writers (sequential or random, fsync= or none, O_SYNC or not, fadvise DONTNEED every
    // 1 MiB or not, one file or their own),
    // the host's memory (small enough to throttle and reclaim), the throttle (2.6.x or
    // proportional) and cgroup writeback, every page's last written data is on the device
    // once every job has run its end_fsync. Also that fsync leaves nothing dirty and that
    // each job's bytes were all counted.
    #[test]
    fn no_dirty_page_is_lost(
        writers in proptest::collection::vec(writer(), 1..4),
        shared in any::<bool>(),
        mem in prop_oneof![Just("8"), Just("64"), Just("4096")],
        legacy in any::<bool>(),
        cgroup_writeback in any::<bool>(),
        policy in prop_oneof![Just("deadline"), Just("bfq"), Just("cfq"), Just("none")],
    ) {
        let text = job_file(&writers, shared);
        let settings = [
            ("mem", mem),
            ("dirty_throttle_legacy", if legacy { "1" } else { "0" }),
            ("cgroup_writeback", if cgroup_writeback { "1" } else { "0" }),
            ("dirty_expire_centisecs", "100"),
            ("dirty_writeback_centisecs", "50"),
        ];
        let mut simulation = simulation(&text, policy, &settings);
        simulation.track_pages();
        let report = simulation.run().unwrap();
        let lost = simulation.unwritten_pages();
        prop_assert!(lost.is_empty(), "{} pages not on the device, first {:?}", lost.len(), &lost[..lost.len().min(8)]);
        prop_assert_eq!(counter(&report, "dirty_at_end_pages"), 0.0);
        for (index, w) in writers.iter().enumerate() {
            prop_assert_eq!(written(&report, index), w.size_mib << 20);
        }
    }
}

// Proves writeback takes a buffered writer's pages to the device in large requests from the
// flusher (not the job's own 4 KiB writes), that the job runs ahead of the disk until the
// dirty limit, and that the throttle then holds it to the disk's pace.
#[test]
fn a_buffered_writer_runs_ahead_then_is_held_to_the_disk() {
    let text = "[w]\nrw=write\nbs=4k\nsize=8g\ntime_based=1\nruntime=20\n";
    let report = simulation(text, "deadline", &[("mem", "512")])
        .run()
        .unwrap();
    let device_writes = counter(&report, "writes");
    let ios = report.jobs[0].dir(DataDir::Write).total_ios as f64;
    assert!(
        device_writes * 100.0 < ios,
        "{device_writes} writes for {ios}"
    );
    assert!(counter(&report, "flusher_pages") > 0.0);
    assert!(counter(&report, "throttle_pauses") > 0.0);
    // Dirty limit: 20% of 512 MiB. The job wrote at most that more than the disk did.
    let on_disk = counter(&report, "pages_written_back") * 4096.0;
    let job = written(&report, 0) as f64;
    assert!(job > on_disk, "{job} vs {on_disk}");
    assert!(job - on_disk <= 0.2 * 512.0 * 1048576.0 + 64.0 * 1048576.0);
}

// Proves fsync waits for the file's pages and a flush: with fsync=1 every write is on the
// device when its fsync completes, so the job goes at the disk's pace with one flush per
// write (fio issues none after the last write: 255 for 256 writes, and end_fsync the last),
// while without fsync it runs at memory speed.
#[test]
fn fsync_writes_back_and_flushes() {
    let text = "[w]\nrw=write\nbs=64k\nsize=16m\nfsync=1\nend_fsync=1\n";
    let report = simulation(text, "deadline", &[]).run().unwrap();
    assert_eq!(
        report.jobs[0].sync.count(),
        256,
        "255 after writes and the end_fsync"
    );
    assert_eq!(counter(&report, "flushes"), 256.0);
    assert_eq!(counter(&report, "sync_pages"), 4096.0);
    assert_eq!(counter(&report, "dirty_at_end_pages"), 0.0);
    let free = simulation("[w]\nrw=write\nbs=64k\nsize=16m\n", "deadline", &[])
        .run()
        .unwrap();
    assert!(report.jobs[0].runtime > 20 * free.jobs[0].runtime);
    // O_SYNC: each write is written back and flushed before it completes.
    let osync = simulation("[w]\nrw=write\nbs=64k\nsize=4m\nsync=1\n", "deadline", &[])
        .run()
        .unwrap();
    assert_eq!(counter(&osync, "flushes"), 64.0);
    assert_eq!(counter(&osync, "sync_pages"), 1024.0);
}

// Proves writeback=0 keeps the older model: the job's own writes go to the scheduler.
#[test]
fn writeback_off_sends_the_jobs_writes() {
    let text = "[w]\nrw=write\nbs=64k\nsize=16m\n";
    let report = simulation(text, "deadline", &[("writeback", "0")])
        .run()
        .unwrap();
    assert_eq!(counter(&report, "pages_dirtied"), 0.0);
    assert_eq!(counter(&report, "writes"), 256.0);
}

// Proves bad host settings are refused with the reason.
#[test]
fn background_ratio_must_be_below_the_dirty_ratio() {
    let file = parse_str("[w]\nrw=write\nsize=1m\n", "t.fio", Path::new("."), &|_| {
        None
    })
    .unwrap();
    let config = SimConfig {
        policy_settings: vec![
            ("dirty_background_ratio".into(), "30".into()),
            ("dirty_ratio".into(), "20".into()),
        ],
        ..SimConfig::default()
    };
    let error = Simulation::new(&config, &file).err().unwrap().to_string();
    assert!(
        error.contains("dirty_background_ratio=30 must be below dirty_ratio=20"),
        "{error}"
    );
}

// Proves the two REQ_SYNC settings: an O_DIRECT write is synchronous to the scheduler unless
// direct_write_sync=0, fsync's writeback unless sync_write_flag=0, each independently of
// the other; reads always are.
#[test]
fn direct_and_fsync_writes_are_sync_by_their_own_settings() {
    let text = "[direct]\nrw=write\nbs=64k\nsize=1m\ndirect=1\nfilename=d\n\
                [fsynced]\nrw=write\nbs=64k\nsize=2m\nfsync=16\nfilename=f\n\
                [reader]\nrw=randread\nbs=4k\nsize=1m\ndirect=1\nfilename=r\n";
    for (direct_sync, fsync_sync) in [(true, true), (true, false), (false, true), (false, false)] {
        let flag = |on: bool| if on { "1" } else { "0" };
        let settings = [
            ("direct_write_sync", flag(direct_sync)),
            ("sync_write_flag", flag(fsync_sync)),
        ];
        let mut simulation = simulation(text, "deadline", &settings);
        simulation.enable_trace();
        simulation.run().unwrap();
        let mut seen = [0u32; 3];
        for entry in simulation.trace() {
            let job = entry.job as usize;
            let want = match (job, entry.op) {
                (_, iosched_core::Op::Flush) => continue,
                (0, iosched_core::Op::Write) => direct_sync,
                (1, iosched_core::Op::Write) => fsync_sync,
                (2, iosched_core::Op::Read) => true,
                (job, op) => panic!("job {job} issued an unexpected {op:?}"),
            };
            seen[job] += 1;
            assert_eq!(
                entry.sync, want,
                "job {job} {:?} with direct_write_sync={direct_sync} \
                 sync_write_flag={fsync_sync}",
                entry.op
            );
        }
        assert!(
            seen.iter().all(|&n| n > 0),
            "every job's requests traced: {seen:?}"
        );
    }
}

// Proves sync_file_range as Linux's fs/sync.c: WRITE alone starts asynchronous writeback of
// the range written since the last call and returns once it is submitted (no cache flush);
// with WAIT_AFTER the call lasts until the pages are on the device; all three flags make it
// WB_SYNC_ALL (REQ_SYNC); and every page of the calls' ranges is written by them, only the
// last writes (after which fio makes no call) left dirty.
#[test]
fn sync_file_range_writes_the_range_and_waits_as_asked() {
    let run = |flags: &str| {
        let text =
            format!("[w]\nrw=write\nbs=64k\nsize=8m\nsync_file_range={flags}:16\nfilename=f\n");
        let mut simulation = simulation(&text, "deadline", &[]);
        simulation.enable_trace();
        let report = simulation.run().unwrap();
        let writes: Vec<bool> = simulation
            .trace()
            .iter()
            .filter(|e| e.op == iosched_core::Op::Write)
            .map(|e| e.sync)
            .collect();
        let flushes = simulation
            .trace()
            .iter()
            .filter(|e| e.op == iosched_core::Op::Flush)
            .count();
        (report, writes, flushes)
    };
    let (write_only, async_writes, flushes) = run("write");
    assert_eq!(
        flushes, 0,
        "sync_file_range never flushes the device's cache"
    );
    assert!(
        !async_writes.is_empty() && async_writes.iter().all(|s| !s),
        "WB_SYNC_NONE"
    );
    assert_eq!(
        write_only.jobs[0].sync.count(),
        7,
        "a call per 16 writes of 64 KiB, none after the last write (fio's get_io_u)"
    );
    assert_eq!(
        counter(&write_only, "sync_pages"),
        1792.0,
        "every page of the calls' ranges"
    );
    assert_eq!(
        counter(&write_only, "dirty_at_end_pages"),
        256.0,
        "the last 16 writes' pages, which no call covers, are still dirty at the end"
    );

    let (waited, sync_writes, _) = run("wait_before,write,wait_after");
    assert!(
        sync_writes.iter().all(|&s| s),
        "WB_SYNC_ALL writes are REQ_SYNC"
    );
    let (submit, wait) = (write_only.jobs[0].sync.mean(), waited.jobs[0].sync.mean());
    assert!(
        wait > 10.0 * submit && wait > 1e6,
        "waiting for 1 MiB to reach the disk's cache ({wait} ns) lasts far longer than \
         submitting it ({submit} ns)"
    );
}

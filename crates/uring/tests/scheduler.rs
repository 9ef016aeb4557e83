//! The library API: several threads submit with flows, groups and priorities; every request
//! completes once, with its data.

mod common;

use iosched_core::{IoPrio, IoPrioClass};
use iosched_uring::{IoRequest, Scheduler, SchedulerConfig, SubmitError};
use std::sync::mpsc;

#[test]
fn threads_share_one_scheduler() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    std::fs::write(&path, vec![0u8; 4 << 20]).unwrap();
    for policy in ["noop", "deadline"] {
        let scheduler = Scheduler::open(
            &path,
            SchedulerConfig {
                policy: policy.into(),
                device_depth: 4,
                ..SchedulerConfig::default()
            },
        )
        .unwrap();
        assert_eq!(scheduler.size(), 4 << 20);
        let mut threads = Vec::new();
        for flow in 0..4u32 {
            let client = scheduler.client();
            threads.push(std::thread::spawn(move || {
                let prio = IoPrio::new(IoPrioClass::Be, flow as u8).unwrap();
                let (tx, rx) = mpsc::channel();
                // Each flow writes its own 64 blocks, then reads them back.
                for block in 0..64u64 {
                    let offset = (u64::from(flow) * 64 + block) * 4096;
                    let data = vec![flow as u8 + 1; 4096];
                    client
                        .submit_to(
                            IoRequest::write(offset, &data)
                                .flow(flow)
                                .group(&format!("/g{}", flow % 2))
                                .prio(prio),
                            &tx,
                        )
                        .unwrap();
                }
                for completion in rx.iter().take(64) {
                    completion.result.unwrap();
                }
                client
                    .submit(IoRequest::flush().flow(flow))
                    .unwrap()
                    .wait()
                    .unwrap();
                for block in 0..64u64 {
                    let offset = (u64::from(flow) * 64 + block) * 4096;
                    let done = client
                        .submit(IoRequest::read(offset, 4096).flow(flow).prio(prio))
                        .unwrap()
                        .wait()
                        .unwrap();
                    done.result.unwrap();
                    assert_eq!(done.offset, offset);
                    assert!(done.data.unwrap().iter().all(|&b| b == flow as u8 + 1));
                }
            }));
        }
        for thread in threads {
            thread.join().unwrap();
        }
        let live = scheduler.stats();
        assert_eq!(live.submitted, 4 * (64 + 1 + 64));
        let stats = scheduler.shutdown().unwrap();
        assert_eq!(stats.completed, 4 * (64 + 1 + 64), "{policy}");
        assert_eq!(stats.errors, 0);
        assert_eq!(stats.read_latency.count(), 4 * 64);
        assert_eq!(
            stats.elevator.dispatched + stats.elevator.merged,
            stats.elevator.submitted
        );
    }
}

#[test]
fn bad_requests_are_refused_at_once() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    let scheduler = Scheduler::open(&path, SchedulerConfig::default()).unwrap();
    assert_eq!(
        scheduler.submit(IoRequest::read(100, 4096)).err(),
        Some(SubmitError::Unaligned {
            offset: 100,
            len: 4096
        })
    );
    assert_eq!(
        scheduler.submit(IoRequest::read(0, 0)).err(),
        Some(SubmitError::Empty)
    );
    assert!(matches!(
        scheduler.submit(IoRequest::read(0, 512).group("/a/../b")),
        Err(SubmitError::BadGroup(_))
    ));
    // A read past the end of the file fails cleanly.
    let done = scheduler
        .submit(IoRequest::read(2 << 20, 4096))
        .unwrap()
        .wait()
        .unwrap();
    assert!(done.result.is_err());
    let missing = Scheduler::open(dir.path().join("absent"), SchedulerConfig::default());
    let error = missing.err().unwrap().to_string();
    assert!(error.contains("does not exist"), "{error}");
    assert!(Scheduler::open(
        &path,
        SchedulerConfig {
            policy: "nosuch".into(),
            ..SchedulerConfig::default()
        }
    )
    .is_err());
}

/// One scheduler over many files (as a mount uses it): each request names its file, a
/// read may stop at the end of the file, completions carry the caller's tag, and requests
/// of two files never merge into one command even when their offsets touch.
#[test]
fn one_scheduler_serves_many_files() {
    let dir = tempfile::tempdir().unwrap();
    let scheduler = Scheduler::start(SchedulerConfig {
        policy: "noop".into(),
        device_depth: 4,
        ..SchedulerConfig::default()
    })
    .unwrap();
    assert_eq!(
        scheduler.submit(IoRequest::read(0, 512)).err(),
        Some(SubmitError::NoFile)
    );
    let mut files = Vec::new();
    for i in 0..3u8 {
        let path = dir.path().join(format!("f{i}"));
        std::fs::write(&path, vec![i; 10_000]).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        files.push(scheduler.register(file, false).unwrap());
    }
    assert_ne!(files[0].base(), files[1].base());
    // Another descriptor of a file shares its range: the policy sees one file.
    let again = std::fs::File::open(dir.path().join("f0")).unwrap();
    let alias = scheduler.client().register_alias(&files[0], again, false);
    assert_eq!(alias.base(), files[0].base());
    let weak = alias.downgrade();
    assert!(weak.upgrade().is_some());
    let (tx, rx) = mpsc::channel();
    // Adjacent writes in two files, and a read past the end of each.
    for (i, file) in files.iter().enumerate() {
        let io = IoRequest::write(4096, &[0x40 + i as u8; 4096])
            .on(file)
            .tag(i as u64);
        scheduler.client().submit_to(io, &tx).unwrap();
        let io = IoRequest::write(0, &[0x50 + i as u8; 4096])
            .on(file)
            .tag(10 + i as u64);
        scheduler.client().submit_to(io, &tx).unwrap();
    }
    let mut tags: Vec<u64> = (0..6).map(|_| rx.recv().unwrap().tag).collect();
    tags.sort();
    assert_eq!(tags, [0, 1, 2, 10, 11, 12]);
    // A completion handed to a function on the engine thread.
    let engine = std::thread::current().id();
    let (then_tx, then_rx) = mpsc::channel();
    scheduler
        .client()
        .submit_then(IoRequest::read(0, 100).on(&files[2]).tag(7), move |done| {
            let elsewhere = std::thread::current().id() != engine;
            then_tx
                .send((done.tag, done.transferred, elsewhere))
                .unwrap();
        })
        .unwrap();
    assert_eq!(then_rx.recv().unwrap(), (7, 100, true));
    let done = scheduler
        .submit(IoRequest::read(0, 4096).on(&alias))
        .unwrap()
        .wait()
        .unwrap();
    assert!(
        done.data.unwrap().iter().all(|&b| b == 0x50),
        "the alias reads f0"
    );
    drop(alias);
    assert!(weak.upgrade().is_none());
    // The range stays taken while f0's first descriptor is registered: a new file gets
    // another one.
    let f3 = std::fs::File::open(dir.path().join("f1")).unwrap();
    let other = scheduler.register(f3, false).unwrap();
    assert!(files.iter().all(|file| file.base() != other.base()));
    for (i, file) in files.iter().enumerate() {
        let done = scheduler
            .submit(IoRequest::read(8192, 4096).on(file).up_to_eof())
            .unwrap()
            .wait()
            .unwrap();
        assert!(done.result.is_ok());
        assert_eq!(done.transferred, 10_000 - 8192);
        assert!(done.data.unwrap()[..10_000 - 8192]
            .iter()
            .all(|&b| b == i as u8));
        // Without up_to_eof, the end of the file is an error, as before.
        let done = scheduler
            .submit(IoRequest::read(8192, 4096).on(file))
            .unwrap()
            .wait()
            .unwrap();
        assert!(done.result.is_err());
        let data = std::fs::read(dir.path().join(format!("f{i}"))).unwrap();
        assert!(data[..4096].iter().all(|&b| b == 0x50 + i as u8));
        assert!(data[4096..8192].iter().all(|&b| b == 0x40 + i as u8));
    }
    assert_eq!(
        scheduler
            .submit(IoRequest::read(iosched_uring::FILE_SPAN, 512).on(&files[0]))
            .err(),
        Some(SubmitError::TooFar {
            end: iosched_uring::FILE_SPAN + 512
        })
    );
    // Group settings change while it runs; a bad one is refused and changes nothing.
    let client = scheduler.client();
    let setting = |value: &str| iosched_core::group::GroupSetting {
        path: "/a".into(),
        file: "io.weight".into(),
        value: value.into(),
        origin: "test".into(),
    };
    assert!(client.set_groups(vec![setting("300")]).is_ok());
    assert!(client
        .set_groups(vec![setting("0")])
        .unwrap_err()
        .contains("io.weight"));
    let stats = scheduler.shutdown().unwrap();
    assert_eq!(stats.completed, 14);
}

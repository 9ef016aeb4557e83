//! The real engine on temporary files: no root, no loop device.

mod common;

use iosched_fio::parse::parse_str;
use iosched_fio::{output, DataDir};
use iosched_uring::{run, UringConfig};
use std::path::Path;

fn parse(text: &str) -> iosched_fio::JobFile {
    parse_str(text, "t.fio", Path::new("."), &|_| None).unwrap()
}

fn config(policy: &str) -> UringConfig {
    UringConfig {
        policy: policy.into(),
        ..UringConfig::default()
    }
}

// Proves a run on a temporary file under noop and deadline completes every request exactly
// once, with plausible figures, and renders as fio's text and JSON.
#[test]
fn random_reads_on_a_temp_file_complete_once() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    for policy in ["noop", "deadline"] {
        let text = format!(
            "[global]\nfilename={}\nsize=8m\nbs=4k\ndirect=1\n\n[reader]\nrw=randread\n\
             ioengine=io_uring\niodepth=16\nio_size=2m\n\n[writer]\nrw=write\nio_size=1m\n",
            path.display()
        );
        let outcome = run(&config(policy), &parse(&text)).unwrap();
        assert!(outcome.ok(), "{:?}", outcome.errors);
        assert_eq!(outcome.issued, outcome.completed, "{policy}");
        assert_eq!(outcome.issued, 512 + 256, "{policy}");
        let report = &outcome.report;
        assert_eq!(report.policy, policy);
        let reader = report.jobs[0].dir(DataDir::Read);
        assert_eq!(reader.total_ios, 512);
        assert_eq!(reader.io_bytes, 2 << 20);
        let writer = report.jobs[1].dir(DataDir::Write);
        assert_eq!(writer.total_ios, 256);
        let iops = reader.total_ios as f64 / (report.jobs[0].runtime as f64 / 1e9);
        assert!(iops > 100.0, "{policy}: {iops} IOPS");
        assert!(reader.clat.mean() > 0.0 && reader.clat.mean() < 1e9);
        let elevator = |name: &str| {
            report
                .device_counters
                .iter()
                .find(|(n, _)| n == name)
                .unwrap()
                .1
        };
        assert_eq!(
            elevator("scheduler_dispatched") + elevator("scheduler_merged"),
            768.0
        );
        let text = output::normal(report);
        assert!(text.contains("reader: (groupid=0"), "{text}");
        assert!(text.contains(&format!("policy       : {policy}")), "{text}");
        let json = output::json(report);
        assert_eq!(json["jobs"][0]["jobname"], "reader");
        assert_eq!(json["jobs"][0]["read"]["total_ios"], 512);
    }
}

// Proves a missing file without size= is a clear error naming the job and the file.
#[test]
fn missing_file_is_named() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent");
    let text = format!("[lost]\nfilename={}\nrw=read\n", path.display());
    let error = run(&config("noop"), &parse(&text)).unwrap_err().to_string();
    assert!(error.starts_with("t.fio:1: job \"lost\": "), "{error}");
    assert!(error.contains("does not exist"), "{error}");
    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(error.contains("size="), "{error}");
}

/// Drops capabilities `caps` from the calling thread (Linux capabilities are per thread).
/// Returns false if the kernel refused.
fn drop_capabilities(caps: &[u32]) -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget/capset with a version-3 header and two data words, as capget(2) says.
    unsafe {
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
            return false;
        }
        for cap in caps {
            let bit = 1u32 << (cap % 32);
            let word = &mut data[(cap / 32) as usize];
            word.effective &= !bit;
            word.permitted &= !bit;
            word.inheritable &= !bit;
        }
        header.version = VERSION_3;
        libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) == 0
    }
}

const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_NICE: u32 = 23;

// Proves a file the user may not read is a clear error naming the job and the file. Runs in a
// thread without the capabilities that let root read anything.
#[test]
fn permission_denied_is_named() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("private");
    std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let text = format!("[nosy]\nfilename={}\nrw=read\n", path.display());
    let file = parse(&text);
    let error = std::thread::spawn(move || {
        if !drop_capabilities(&[CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH]) {
            return None;
        }
        Some(run(&config("noop"), &file).unwrap_err().to_string())
    })
    .join()
    .unwrap();
    let Some(error) = error else {
        eprintln!("skipped: cannot drop capabilities in this environment");
        return;
    };
    assert!(error.starts_with("t.fio:1: job \"nosy\": "), "{error}");
    assert!(error.contains("permission denied"), "{error}");
    assert!(error.contains(&path.display().to_string()), "{error}");
}

// Proves the real-time class reaches the kernel and, when the kernel refuses it (EPERM: the
// thread lacks CAP_SYS_ADMIN and CAP_SYS_NICE), the run warns once, goes on as best effort,
// and every request still completes once; the policy and the report still see RT.
#[test]
fn refused_real_time_priority_falls_back_to_best_effort() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let text = format!(
        "[rt]\nfilename={}\nsize=1m\nrw=randread\ndirect=1\nioengine=io_uring\niodepth=8\n\
         prioclass=1\nprio=2\n",
        path.display()
    );
    let file = parse(&text);
    let outcome = std::thread::spawn(move || {
        if !drop_capabilities(&[CAP_SYS_ADMIN, CAP_SYS_NICE]) {
            return None;
        }
        Some(run(&config("deadline"), &file).unwrap())
    })
    .join()
    .unwrap();
    let Some(outcome) = outcome else {
        eprintln!("skipped: cannot drop capabilities in this environment");
        return;
    };
    assert!(outcome.ok(), "{:?}", outcome.errors);
    assert_eq!(outcome.issued, 256);
    assert_eq!(outcome.completed, 256);
    let report = &outcome.report;
    let warnings: Vec<&String> = report
        .notes
        .iter()
        .filter(|n| n.contains("refused the real-time I/O priority"))
        .collect();
    assert_eq!(warnings.len(), 1, "{:?}", report.notes);
    assert!(warnings[0].contains("CAP_SYS_NICE"));
    let sent_as_be = report
        .device_counters
        .iter()
        .find(|(n, _)| n == "rt_sent_as_be")
        .unwrap()
        .1;
    assert_eq!(sent_as_be, 1.0);
    let prios = report.jobs[0].dir(DataDir::Read).prio_clat();
    assert_eq!(prios.len(), 1);
    assert_eq!(prios[0].0.class(), iosched_core::IoPrioClass::Rt);
}

// Proves a root run sends RT priorities without falling back (skipped without the capability).
#[test]
fn real_time_priority_is_accepted_with_the_capability() {
    if !common::uring_available() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (CAP_SYS_NICE or CAP_SYS_ADMIN) to send RT priorities");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let text = format!(
        "[rt]\nfilename={}\nsize=256k\nrw=randread\ndirect=1\nprioclass=1\nprio=0\n",
        path.display()
    );
    let outcome = run(&config("deadline"), &parse(&text)).unwrap();
    assert!(outcome.ok());
    assert!(!outcome
        .report
        .notes
        .iter()
        .any(|n| n.contains("refused the real-time")));
}

// Proves sync_file_range=FLAGS:N issues one sync_file_range(2) per N writes but the last N on
// the real engine (counted in fio's sync latencies), for buffered and direct writers alike, and the
// run completes every request once.
#[test]
fn sync_file_range_calls_every_n_writes() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (direct, flags) in [
        (0, "write"),
        (0, "wait_before,write,wait_after"),
        (1, "write"),
    ] {
        let text = format!(
            "[w]\nfilename={}\nrw=write\nbs=64k\nsize=1m\ndirect={direct}\n\
             sync_file_range={flags}:4\n",
            dir.path().join("data").display()
        );
        let outcome = run(&config("noop"), &parse(&text)).unwrap();
        assert!(outcome.ok(), "{:?}", outcome.errors);
        assert_eq!(outcome.issued, outcome.completed);
        // None after the last write: fio decides on a sync as it gets the next I/O.
        assert_eq!(outcome.issued, 16 + 3, "{flags}: 16 writes and 3 calls");
        assert_eq!(outcome.report.jobs[0].sync.count(), 3, "{flags}");
    }
}

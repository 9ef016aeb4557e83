//! `iosched mount` and `iosched top` as a user runs them: real FUSE mounts (root and
//! /dev/fuse needed; where either is missing each test says so on the terminal and passes
//! without running). fio's verification through the mount needs fio, which CI installs:
//! under `CI=true` its absence fails the test.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Mount tests one at a time: they measure and unmount, and share the machine's CPUs.
static SERIAL: Mutex<()> = Mutex::new(());

fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "\n*** {test}: SKIPPED: {why} ***\n");
}

fn can_mount(test: &str) -> bool {
    match iosched_mount::cannot_mount() {
        Some(why) => {
            skip(test, &why);
            false
        }
        None => true,
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    backing: PathBuf,
    mnt: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let backing = dir.path().join("backing");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&backing).unwrap();
    fs::create_dir(&mnt).unwrap();
    Fixture {
        _dir: dir,
        backing,
        mnt,
    }
}

fn is_mounted(path: &Path) -> bool {
    iosched_mount::is_mounted(path)
}

fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `iosched mount` in the foreground, as a child; returns once the mount serves.
fn mount(f: &Fixture, args: &[&str]) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_iosched"))
        .arg("mount")
        .arg(&f.backing)
        .arg(&f.mnt)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stats = f.mnt.join(".iosched/stats");
    wait_until("the mount", || stats.exists());
    child
}

fn iosched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_iosched"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn sigterm_unmounts_cleanly_and_top_shows_the_flows() {
    let test = "sigterm_unmounts_cleanly_and_top_shows_the_flows";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_mount(test) {
        return;
    }
    let f = fixture();
    let child = mount(&f, &["--policy", "bfq"]);
    fs::write(f.mnt.join("hello"), b"hello through the scheduler\n").unwrap();
    assert_eq!(
        fs::read(f.backing.join("hello")).unwrap(),
        b"hello through the scheduler\n"
    );
    let top = iosched(&["top", f.mnt.to_str().unwrap(), "--once"]);
    let table = String::from_utf8_lossy(&top.stdout);
    assert!(top.status.success(), "{table}");
    assert!(
        table.contains("policy bfq") && table.contains("write"),
        "{table}"
    );
    let json = iosched(&["top", f.mnt.to_str().unwrap(), "--json"]);
    let stats: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(stats["flows"]
        .as_array()
        .unwrap()
        .iter()
        .any(|flow| flow["pid"] == std::process::id()));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("SIGTERM: unmounting"), "{stderr}");
    assert!(stderr.contains("requests completed (0 failed)"), "{stderr}");
    assert!(!is_mounted(&f.mnt));
    let error = iosched(&["top", f.mnt.to_str().unwrap(), "--once"]);
    assert!(!error.status.success());
    assert!(String::from_utf8_lossy(&error.stderr).contains("is not an iosched mount"));
}

#[test]
fn a_daemon_ends_with_umount() {
    let test = "a_daemon_ends_with_umount";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_mount(test) {
        return;
    }
    let f = fixture();
    let output = iosched(&[
        "mount",
        f.backing.to_str().unwrap(),
        f.mnt.to_str().unwrap(),
        "--policy",
        "deadline",
        "--daemon",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let pid: i32 = stderr
        .split("daemon, pid ")
        .nth(1)
        .and_then(|rest| rest.trim_end().trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("no daemon pid in {stderr:?}"));
    assert!(is_mounted(&f.mnt));
    fs::write(f.mnt.join("x"), vec![5u8; 10_000]).unwrap();
    let status = Command::new("umount").arg(&f.mnt).status().unwrap();
    assert!(status.success());
    // SAFETY: kill with signal 0 only asks whether the process exists.
    wait_until("the daemon to exit", || unsafe { libc::kill(pid, 0) } != 0);
    assert_eq!(fs::read(f.backing.join("x")).unwrap(), vec![5u8; 10_000]);
    // A second mount of a missing directory fails in the foreground, with the reason.
    let output = iosched(&[
        "mount",
        f.backing.to_str().unwrap(),
        f.mnt.join("missing").to_str().unwrap(),
        "--daemon",
    ]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("mount point"));
}

#[test]
fn killing_the_daemon_loses_no_acknowledged_write() {
    let test = "killing_the_daemon_loses_no_acknowledged_write";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_mount(test) {
        return;
    }
    let f = fixture();
    let mut child = mount(&f, &["--policy", "cfq"]);
    // Aligned writes go to the backing file with O_DIRECT, unaligned ones through its page
    // cache: both are acknowledged only once the backing file has them.
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(f.mnt.join("aligned"))
        .unwrap();
    let block = iosched_uring::AlignedBuf::from_slice(&[0xa5; 4096]);
    for i in 0..256u64 {
        file.write_all_at(&block, i * 4096).unwrap();
    }
    let odd = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(f.mnt.join("odd"))
        .unwrap();
    for i in 0..300u64 {
        odd.write_all_at(&[i as u8; 333], i * 333).unwrap();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The dead mount answers ENOTCONN until detached.
    let _ = Command::new("umount").arg("-l").arg(&f.mnt).status();
    drop((file, odd));
    let aligned = fs::read(f.backing.join("aligned")).unwrap();
    assert_eq!(aligned.len(), 256 * 4096);
    assert!(aligned.iter().all(|&b| b == 0xa5));
    let odd = fs::read(f.backing.join("odd")).unwrap();
    assert_eq!(odd.len(), 300 * 333);
    for (i, chunk) in odd.chunks(333).enumerate() {
        assert!(chunk.iter().all(|&b| b == i as u8), "write {i} lost");
    }
}

#[test]
fn fio_verifies_its_writes_through_the_mount() {
    let test = "fio_verifies_its_writes_through_the_mount";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_mount(test) {
        return;
    }
    if Command::new("fio").arg("--version").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "fio is missing (.ci/run installs it)"
        );
        skip(test, "fio is not installed (apt-get install fio)");
        return;
    }
    let f = fixture();
    let child = mount(&f, &["--policy", "bfq"]);
    let dir = format!("--directory={}", f.mnt.display());
    // Asynchronous direct I/O at depth 16 (aligned: O_DIRECT on the backing file), then
    // buffered writes of 3 KiB (unaligned: the backing file's page cache), each verified.
    for job in [
        vec!["--ioengine=libaio", "--direct=1", "--iodepth=16", "--bs=4k"],
        vec!["--ioengine=psync", "--direct=0", "--bs=3k"],
    ] {
        let output = Command::new("fio")
            .args([
                "--name=verify",
                &dir,
                "--rw=randwrite",
                "--size=16m",
                "--verify=crc32c",
                "--do_verify=1",
                "--verify_state_save=0",
                "--output-format=terse",
            ])
            .args(&job)
            .current_dir(&f.backing)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "fio {job:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        fs::remove_file(f.mnt.join("verify.0.0")).unwrap();
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn bad_mount_arguments_are_refused_before_mounting() {
    let f = fixture();
    let output = iosched(&[
        "mount",
        f.backing.to_str().unwrap(),
        f.mnt.to_str().unwrap(),
        "--group",
        "/a:io.weight=0",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("io.weight") && stderr.contains('0'),
        "{stderr}"
    );
    let output = iosched(&[
        "mount",
        f.backing.to_str().unwrap(),
        f.mnt.to_str().unwrap(),
        "--policy",
        "fifo-of-dreams",
    ]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("fifo-of-dreams"));
    let output = iosched(&["top", f.mnt.to_str().unwrap(), "--interval", "0"]);
    assert!(String::from_utf8_lossy(&output.stderr).contains("--interval"));
    assert!(!is_mounted(&f.mnt));
}

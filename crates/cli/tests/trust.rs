//! Issue 11 as a hostile user meets the command: each input that once did harm (replaced a
//! device node, panicked, overflowed the stack, read without end, ran for minutes before
//! refusing, or answered unclearly) now gets a clear error or does the right thing.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn iosched_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iosched"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("iosched runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("iosched-trust-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A run that must fail cleanly: exit status 1, one error line, no panic; returns the error.
fn refused(output: &Output) -> String {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(!message.contains("overflow"), "{message}");
    message
        .lines()
        .find(|line| line.starts_with("iosched: error: "))
        .unwrap_or_else(|| panic!("no error line in {message}"))
        .to_string()
}

const JOB: &str = "[r]\nrw=randread\nsize=64m\ndirect=1\nruntime=1\ntime_based=1\n";

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// Regression (issue 11, item 1): --output to a device node writes to it and leaves it a
// device (run as root, /dev/null became a regular file); a symlink is followed and kept; a
// directory is refused before the run; and nothing else appears in the directory.
#[test]
fn output_never_replaces_what_it_was_not_named() {
    let dir = scratch("output");
    std::fs::write(dir.join("job.fio"), JOB).unwrap();
    let null = iosched_in(&dir, &["run", "job.fio", "--output", "/dev/null"]);
    assert!(null.status.success(), "{}", stderr(&null));
    let metadata = std::fs::metadata("/dev/null").unwrap();
    assert!(metadata.file_type().is_char_device());
    assert_eq!(metadata.rdev(), libc_makedev(1, 3), "still the null device");

    std::fs::write(dir.join("real.txt"), "old").unwrap();
    std::os::unix::fs::symlink("real.txt", dir.join("link.txt")).unwrap();
    let link = iosched_in(&dir, &["run", "job.fio", "--output", "link.txt"]);
    assert!(link.status.success(), "{}", stderr(&link));
    assert!(std::fs::symlink_metadata(dir.join("link.txt"))
        .unwrap()
        .file_type()
        .is_symlink());
    let text = std::fs::read_to_string(dir.join("real.txt")).unwrap();
    assert!(text.contains("read: IOPS="), "{text}");

    std::fs::create_dir(dir.join("sub")).unwrap();
    let error = refused(&iosched_in(&dir, &["run", "job.fio", "--output", "sub"]));
    assert!(error.contains("\"sub\": it is a directory"), "{error}");
    let error = refused(&iosched_in(
        &dir,
        &["compare", "job.fio", "--policy", "noop", "--report", "sub"],
    ));
    assert!(error.contains("it is a directory"), "{error}");
    assert_eq!(
        entries(&dir),
        vec!["job.fio", "link.txt", "real.txt", "sub"],
        "no temporary file is left behind"
    );
    assert!(entries(&dir.join("sub")).is_empty());
}

/// `makedev` as glibc encodes it, for comparing device numbers.
fn libc_makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xfffff000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffffff00) << 12)
        | (minor & 0xff)
}

// Regression (issue 11, items 2 and 3): numbers past the limits are refused with the option
// and the limit, never a panic ("time went backwards") or a stack overflow (a --group path
// 40,000 levels deep).
#[test]
fn absurd_numbers_and_paths_are_refused() {
    let dir = scratch("numbers");
    for device in ["hdd", "ssd"] {
        std::fs::write(
            dir.join("think.fio"),
            "[r]\nrw=randread\nsize=64m\nthinktime=18446744073709551\n",
        )
        .unwrap();
        let error = refused(&iosched_in(&dir, &["run", "think.fio", "--device", device]));
        assert!(
            error.contains("think.fio:4: thinktime: ") && error.contains("365 days"),
            "{error}"
        );
    }
    std::fs::write(dir.join("job.fio"), JOB).unwrap();
    let deep = format!("{}:io.weight=100", "/a".repeat(40_000));
    let error = refused(&iosched_in(&dir, &["run", "job.fio", "--group", &deep]));
    assert!(error.contains("the limit is 4096"), "{error}");
    assert!(
        error.len() < 400,
        "the path is echoed whole: {} bytes",
        error.len()
    );
    let deep = format!("{}:io.weight=100", "/a".repeat(65));
    let error = refused(&iosched_in(&dir, &["run", "job.fio", "--group", &deep]));
    assert!(error.contains("65 levels deep; the limit is 64"), "{error}");
}

// Regression (issue 11, item 4): endless inputs are refused at the limit instead of read
// without end: the job file, an include, and the groups file.
#[test]
fn endless_inputs_are_refused_at_the_limit() {
    let dir = scratch("endless");
    let error = refused(&iosched_in(&dir, &["run", "/dev/zero"]));
    assert!(
        error.contains("job file \"/dev/zero\" is larger than 4194304 bytes"),
        "{error}"
    );
    std::fs::write(dir.join("inc.fio"), "[r]\nsize=1m\ninclude /dev/zero\n").unwrap();
    let error = refused(&iosched_in(&dir, &["run", "inc.fio"]));
    assert!(
        error.contains("inc.fio:3: included file \"/dev/zero\" is larger than"),
        "{error}"
    );
    std::fs::write(dir.join("job.fio"), JOB).unwrap();
    let error = refused(&iosched_in(
        &dir,
        &["run", "job.fio", "--groups", "/dev/zero"],
    ));
    assert!(
        error.contains("groups file \"/dev/zero\" is larger"),
        "{error}"
    );
}

// Regression (issue 11, item 5): runtime=7d is refused before any simulation (it simulated up
// to the 604800 s cap first), naming the job, the options and the limit.
#[test]
fn caps_are_checked_before_the_run() {
    let dir = scratch("caps");
    std::fs::write(
        dir.join("week.fio"),
        "[r]\nrw=randread\nsize=64m\nruntime=7d\ntime_based=1\n",
    )
    .unwrap();
    let error = refused(&iosched_in(&dir, &["run", "week.fio"]));
    assert!(
        error.contains("week.fio:1: job \"r\": needs at least 7 d of simulated time")
            && error.contains("limit is 7 d (604800 s)"),
        "{error}"
    );
}

// Regression (issue 11, items 5 and 6): fio logs are written as the job runs, only when it
// succeeds; a log in a directory that does not exist is refused up front naming the option
// and the file, and leaves nothing behind.
#[test]
fn logs_are_refused_clearly_and_committed_whole() {
    let dir = scratch("logs");
    std::fs::write(dir.join("job.fio"), format!("{JOB}write_bw_log=nodir/bw\n")).unwrap();
    let error = refused(&iosched_in(&dir, &["run", "job.fio"]));
    assert!(
        error.contains(
            "write_bw_log: cannot write \"nodir/bw_bw.1.log\": directory \"nodir\" does not exist"
        ),
        "{error}"
    );
    assert!(!error.contains("tmp"), "{error}");
    assert_eq!(entries(&dir), vec!["job.fio"]);

    // A run refused after the logs were opened leaves the earlier logs as they were.
    std::fs::write(dir.join("lat_clat.1.log"), "earlier\n").unwrap();
    std::fs::write(dir.join("bad.fio"), format!("{JOB}write_lat_log=lat\n")).unwrap();
    let error = refused(&iosched_in(
        &dir,
        &["run", "bad.fio", "--output", "/nonexistent-dir/out"],
    ));
    assert!(error.contains("does not exist"), "{error}");
    assert_eq!(
        std::fs::read_to_string(dir.join("lat_clat.1.log")).unwrap(),
        "earlier\n"
    );
    let ran = iosched_in(&dir, &["run", "bad.fio"]);
    assert!(ran.status.success(), "{}", stderr(&ran));
    let log = std::fs::read_to_string(dir.join("lat_clat.1.log")).unwrap();
    assert!(
        log.lines().count() > 10 && !log.contains("earlier"),
        "{log}"
    );
    assert_eq!(
        entries(&dir),
        vec![
            "bad.fio",
            "job.fio",
            "lat_clat.1.log",
            "lat_lat.1.log",
            "lat_slat.1.log"
        ]
    );
}

// Regression (issue 11, item 6): errors name the place and what to do, and quote what the user
// wrote at most a few dozen bytes long.
#[test]
fn errors_name_the_place_and_stay_short() {
    let dir = scratch("errors");
    std::fs::write(
        dir.join("sched.fio"),
        "[r]\nrw=randread\nsize=64m\nioscheduler=frobnicate\n",
    )
    .unwrap();
    let error = refused(&iosched_in(&dir, &["run", "sched.fio"]));
    assert!(
        error.contains("sched.fio:4: ioscheduler=frobnicate: unknown policy"),
        "{error}"
    );

    let long = "9".repeat(5_000);
    std::fs::write(
        dir.join("long.fio"),
        format!("[r]\nrw=randread\nsize=64m\nbs={long}q\n"),
    )
    .unwrap();
    let error = refused(&iosched_in(&dir, &["run", "long.fio"]));
    assert!(error.contains("long.fio:4: bs: "), "{error}");
    assert!(error.contains("(5001 bytes)"), "{error}");
    assert!(error.len() < 300, "{error}");
    let error = refused(&iosched_in(
        &dir,
        &["run", "long.fio", "--set", &format!("read_expire={long}")],
    ));
    assert!(error.len() < 600, "{error}");

    std::fs::write(
        dir.join("utf.fio"),
        b"[r]\nrw=randread\n; caf\xe9\nsize=64m\n",
    )
    .unwrap();
    let error = refused(&iosched_in(&dir, &["run", "utf.fio"]));
    assert!(
        error.contains("utf.fio:3: byte 0xe9 at column 6 is not UTF-8"),
        "{error}"
    );

    std::fs::write(dir.join("job.fio"), JOB).unwrap();
    let error = refused(&iosched_in(
        &dir,
        &["run", "job.fio", "--device-set", "capacity_sectors=5"],
    ));
    assert!(
        error.contains("capacity_sectors is derived, not set")
            && error.contains("it follows from capacity_gb: set those instead"),
        "{error}"
    );
}

// Regression (issue 11, item 8): a run that fails before it starts (here a job file that does
// not parse, then a job whose file cannot be opened) still prints valid JSON with the error
// when JSON was asked for, and the error still goes to stderr with exit status 1.
#[test]
fn a_failed_run_still_prints_json() {
    let dir = scratch("json-error");
    std::fs::write(dir.join("bad.fio"), "[r]\nrw=sideways\n").unwrap();
    std::fs::write(
        dir.join("missing.fio"),
        "[r]\nfilename=/nonexistent-iosched/dir/data\nrw=read\nsize=1m\n",
    )
    .unwrap();
    for (job, engine) in [("bad.fio", "sim"), ("missing.fio", "real")] {
        let output = iosched_in(
            &dir,
            &["run", job, "--engine", engine, "--output-format", "json"],
        );
        let error = refused(&output);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let document: serde_json::Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{job}: not JSON ({e}): {stdout}"));
        assert_eq!(document["jobs"], serde_json::json!([]), "{stdout}");
        let message = document["iosched"]["error"].as_str().unwrap();
        assert!(error.ends_with(message), "{error} / {message}");
    }
}

/// Starts a 60 s real run, sends `signal` after a second, and returns its output.
fn interrupted(name: &str, signal: &str) -> Output {
    let dir = scratch(name);
    let data = dir.join("data");
    std::fs::write(
        dir.join("job.fio"),
        format!(
            "[r]\nfilename={}\nsize=8m\nbs=4k\nrw=randread\nioengine=io_uring\niodepth=4\n\
             time_based\nruntime=60s\n",
            data.display()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_iosched"))
        .current_dir(&dir)
        .args([
            "run",
            "job.fio",
            "--engine",
            "real",
            "--output-format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The file is laid out first; wait until the run is under way.
    let started = std::time::Instant::now();
    while !data.exists() && started.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait_with_output().unwrap()
}

// Regression (issue 11, item 8): SIGINT and SIGTERM stop a real run as they stop fio: nothing
// more is issued, what is in flight completes, the partial results are printed, and the exit
// status is 130 or 143.
#[test]
fn a_signal_stops_the_run_with_partial_results() {
    for (name, signal, code) in [("sigint", "-INT", 130), ("sigterm", "-TERM", 143)] {
        let output = interrupted(name, signal);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(code), "{message}");
        assert!(message.contains("iosched: stopped by SIG"), "{message}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let document: serde_json::Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
        let job = &document["jobs"][0];
        assert!(job["read"]["total_ios"].as_u64().unwrap() > 0, "{stdout}");
        let runtime_ms = job["job_runtime"].as_u64().unwrap();
        assert!((500..30_000).contains(&runtime_ms), "{runtime_ms}");
    }
}

//! The `iosched` command as a user meets it: exit codes, messages, output files, determinism.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn iosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iosched"))
        .args(args)
        .output()
        .expect("iosched runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("iosched-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `iosched bench` with `args` and one timed round of 2000 requests in all: its standard
/// output, the run having succeeded.
fn bench_output(args: &[&str]) -> String {
    let output = iosched(
        &[
            &["bench"][..],
            args,
            &["--requests", "2000", "--repeat", "1"],
        ]
        .concat(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

const SMALL_JOB: &str = "[global]\ndirect=1\nsize=64m\nruntime=2\ntime_based=1\n\n[r]\nrw=randread\n\n[w]\nrw=write\nbs=64k\nioengine=libaio\niodepth=4\n";

/// Runs a job file that should be refused and returns its error text, checking the exit code
/// and that nothing panicked.
fn refused(name: &str, text: &str) -> String {
    let dir = scratch(name);
    let path = write(&dir, "job.fio", text);
    let output = iosched(&["run", &path]);
    let message = stderr(&output);
    assert!(
        !output.status.success(),
        "{name}: expected failure, got success"
    );
    assert!(!message.contains("panicked"), "{name}: panicked: {message}");
    assert!(
        message.contains("job.fio:"),
        "{name}: no file:line in {message}"
    );
    message
}

// Proves each kind of bad input gets one clear error naming the problem and file:line.
#[test]
fn bad_job_files_are_refused_clearly() {
    let unknown = refused("unknown", "[a]\nsize=1m\nfrobnicate=3\n");
    assert!(
        unknown.contains("job.fio:3") && unknown.contains("frobnicate"),
        "{unknown}"
    );
    let suffix = refused("suffix", "[a]\nbs=4q\nsize=1m\n");
    assert!(
        suffix.contains("job.fio:2") && suffix.contains("4q"),
        "{suffix}"
    );
    let negative = refused("negative", "[a]\nsize=-1\n");
    assert!(
        negative.contains("job.fio:2") && negative.contains("size"),
        "{negative}"
    );
    let zero = refused("zero", "[a]\nsize=1m\nbs=0\n");
    assert!(zero.contains("job.fio:3") && zero.contains("bs"), "{zero}");
    let unaligned = refused("unaligned", "[a]\nsize=1m\ndirect=1\nbs=3\n");
    assert!(
        unaligned.contains("job.fio:1") && unaligned.contains("512"),
        "{unaligned}"
    );
    let beyond = refused("beyond", "[a]\nsize=1m\noffset=600g\n");
    assert!(
        beyond.contains("job.fio:1") && beyond.contains("beyond"),
        "{beyond}"
    );
    let missing_include = refused("missing-include", "include nowhere.fio\n[a]\nsize=1m\n");
    assert!(
        missing_include.contains("job.fio:1") && missing_include.contains("nowhere.fio"),
        "{missing_include}"
    );
    let dir = scratch("loop");
    write(&dir, "b.fio", "include job.fio\n");
    let path = write(&dir, "job.fio", "include b.fio\n[a]\nsize=1m\n");
    let output = iosched(&["run", &path]);
    let message = stderr(&output);
    assert!(!output.status.success() && !message.contains("panicked"));
    assert!(
        message.contains("b.fio:1") && message.contains("loop"),
        "{message}"
    );
}

#[test]
fn missing_job_file_is_named() {
    let output = iosched(&["run", "/nonexistent/jobs.fio"]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("/nonexistent/jobs.fio"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn bad_settings_are_named() {
    let dir = scratch("settings");
    let path = write(&dir, "job.fio", SMALL_JOB);
    let policy = iosched(&["run", &path, "--policy", "cfq-nope"]);
    assert!(!policy.status.success() && stderr(&policy).contains("cfq-nope"));
    let tunable = iosched(&["run", &path, "--set", "read_expire=-5"]);
    assert!(
        !tunable.status.success() && stderr(&tunable).contains("read_expire"),
        "{}",
        stderr(&tunable)
    );
    let device = iosched(&["run", &path, "--device-set", "queue_depth=0"]);
    assert!(
        !device.status.success() && stderr(&device).contains("queue_depth"),
        "{}",
        stderr(&device)
    );
}

// Proves one seed reproduces a run byte for byte (with the start time pinned by
// SOURCE_DATE_EPOCH, which fio's timestamp and the jobs' date then show), and another seed
// changes it.
#[test]
fn same_seed_same_bytes() {
    let dir = scratch("determinism");
    let path = write(&dir, "job.fio", SMALL_JOB);
    let run = |seed: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_iosched"))
            .args(["run", &path, "--seed", seed, "--output-format", "json"])
            .env("SOURCE_DATE_EPOCH", "1795590685")
            .output()
            .expect("iosched runs");
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(stderr(&output).starts_with(&format!("iosched: seed {seed}")));
        output.stdout
    };
    let first = run("42");
    let text = String::from_utf8_lossy(&first);
    assert!(text.contains("\"timestamp\" : 1795590685,"), "{text}");
    assert!(
        text.contains("\"time\" : \"Wed Nov 25 07:11:25 2026\""),
        "{text}"
    );
    assert_eq!(first, run("42"), "same seed, different output");
    assert_ne!(first, run("43"), "different seeds, same output");
}

// Proves a failed run leaves an existing output file untouched, and a good run replaces it.
#[test]
fn output_file_is_replaced_only_on_success() {
    let dir = scratch("output");
    let out = dir.join("result.json");
    std::fs::write(&out, "previous results").unwrap();
    let bad = write(&dir, "bad.fio", "[a]\nsize=1m\nbogus=1\n");
    let output = iosched(&["run", &bad, "--output", out.to_str().unwrap()]);
    assert!(!output.status.success());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous results");
    let good = write(&dir, "good.fio", SMALL_JOB);
    let output = iosched(&[
        "run",
        &good,
        "--output-format",
        "json",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(std::fs::read_to_string(&out).unwrap().contains("\"jobs\""));
}

#[test]
fn catalogs_list_every_parameter() {
    let policies = iosched(&["policies"]);
    let text = String::from_utf8_lossy(&policies.stdout);
    for name in [
        "noop",
        "deadline",
        "read_expire",
        "fifo_batch",
        "writes_starved",
        "nr_requests",
    ] {
        assert!(text.contains(name), "policies lacks {name}: {text}");
    }
    let devices = iosched(&["devices"]);
    let text = String::from_utf8_lossy(&devices.stdout);
    for name in ["hdd", "ssd", "queue_depth", "write_cache"] {
        assert!(text.contains(name), "devices lacks {name}: {text}");
    }
}

// Proves the device models meet their calibration targets (short runs, same targets).
#[test]
fn calibration_targets_are_met() {
    let output = iosched(&["calibrate", "--quick"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "calibration failed:\n{text}\n{}",
        stderr(&output)
    );
    assert!(text.contains("PASS") && !text.contains("FAIL"), "{text}");
}

// Proves write_lat_log/write_bw_log/write_iops_log produce fio-format logs whose lines agree
// with the run's own totals.
#[test]
fn fio_logs_are_written() {
    let dir = scratch("logs");
    let path = write(
        &dir,
        "job.fio",
        "[r]\nfilename=/dev/sda\nrw=randread\ndirect=1\nruntime=3\ntime_based=1\nwrite_lat_log=lat\nwrite_bw_log=bw\nwrite_iops_log=io\nlog_offset=1\n",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_iosched"))
        .current_dir(&dir)
        .args(["run", &path, "--output-format", "json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let json = String::from_utf8_lossy(&output.stdout);
    let total: usize = json
        .split("\"total_ios\" : ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .expect("read total_ios in the JSON");
    let clat = std::fs::read_to_string(dir.join("lat_clat.1.log")).unwrap();
    assert_eq!(clat.lines().count(), total, "one clat line per read");
    let fields: Vec<&str> = clat.lines().next().unwrap().split(", ").collect();
    assert_eq!(
        fields.len(),
        6,
        "time, value, direction, bs, offset, prio: {fields:?}"
    );
    assert_eq!((fields[2], fields[3]), ("0", "4096"));
    let iops = std::fs::read_to_string(dir.join("io_iops.1.log")).unwrap();
    assert_eq!(
        iops.lines().count(),
        6,
        "one line per 500 ms window over 3 s"
    );
    let logged: u64 = iops
        .lines()
        .map(|l| l.split(", ").nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(
        (logged as f64 / 2.0 - total as f64).abs() <= 2.0,
        "iops per window sum to the total: {logged} vs {total}"
    );
    assert!(
        std::fs::read_to_string(dir.join("bw_bw.1.log"))
            .unwrap()
            .lines()
            .count()
            == 6
    );
    assert!(
        std::fs::read_to_string(dir.join("lat_slat.1.log"))
            .unwrap()
            .is_empty(),
        "psync has no slat"
    );
}

// Proves `compare` runs the same jobs under each policy and prints one row per policy per job,
// with the seed first.
#[test]
fn compare_prints_policies_side_by_side() {
    let dir = scratch("compare");
    let path = write(&dir, "job.fio", SMALL_JOB);
    let output = iosched(&[
        "compare",
        &path,
        "--policy",
        "deadline",
        "--policy",
        "noop",
        "--sweep",
        "DEPTH=1,2",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).starts_with("iosched: seed 1"));
    let text = String::from_utf8_lossy(&output.stdout);
    for row in [
        "deadline depth=1",
        "noop depth=1",
        "deadline depth=2",
        "noop depth=2",
    ] {
        assert_eq!(
            text.matches(row).count(),
            3,
            "{row} in r, w and totals:\n{text}"
        );
    }
    for column in [
        "IOPS",
        "bandwidth",
        "mean",
        "p99",
        "p99.99",
        "max",
        "totals",
    ] {
        assert!(text.contains(column), "{column}:\n{text}");
    }
    let unknown = iosched(&["compare", &path, "--policy", "deadline", "--policy", "nope"]);
    assert!(!unknown.status.success() && stderr(&unknown).contains("nope"));
}

// Proves POLICY.NAME settings reach only that policy, in run and in compare.
#[test]
fn policy_scoped_settings() {
    let dir = scratch("scoped");
    let path = write(&dir, "job.fio", SMALL_JOB);
    let scoped = iosched(&[
        "run",
        &path,
        "--set",
        "deadline.read_expire=100",
        "--set",
        "noop.nomerges=1",
    ]);
    assert!(scoped.status.success(), "{}", stderr(&scoped));
    assert!(String::from_utf8_lossy(&scoped.stdout).contains("read_expire=100ms"));
    let wrong = iosched(&["run", &path, "--set", "nosuch.slice_idle=0"]);
    assert!(
        !wrong.status.success() && stderr(&wrong).contains("nosuch"),
        "{}",
        stderr(&wrong)
    );
    let both = iosched(&[
        "compare",
        &path,
        "--policy",
        "deadline",
        "--policy",
        "noop",
        "--set",
        "deadline.fifo_batch=4",
    ]);
    assert!(both.status.success(), "{}", stderr(&both));
}

// Proves that a reader closing the pipe early (`iosched policies | head -1`) ends the command
// quietly, as C tools end, instead of a panic about a failed write. The pipe's read end is
// closed before the command starts, so its first write fails.
#[test]
fn a_closed_pipe_is_not_a_panic() {
    for args in [&["policies"][..], &["devices"][..]] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let output = Command::new(env!("CARGO_BIN_EXE_iosched"))
            .args(args)
            .stdout(writer)
            .output()
            .expect("iosched runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!output.status.success(), "{args:?} cannot have succeeded");
    }
}

// Proves group settings reach the run: io.max through throttle holds a group to its limit
// while its neighbour runs free; and bad group settings are refused naming where they came
// from.
#[test]
fn group_settings_from_flags_and_files() {
    let dir = scratch("groups");
    let job = write(
        &dir,
        "groups.fio",
        "[global]\ndirect=1\nioengine=libaio\niodepth=8\nbs=64k\nrw=read\nsize=1g\nruntime=10\ntime_based=1\n\
         [limited]\ncgroup=/g1\n[free]\ncgroup=/g2\n",
    );
    let output = iosched(&[
        "run",
        &job,
        "--policy",
        "throttle+deadline",
        "--group",
        "/g1:io.max=rbps=1048576",
        "--output-format",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let bw = |job: usize| json["jobs"][job]["read"]["bw_bytes"].as_f64().unwrap();
    assert!(
        (bw(0) / 1_048_576.0 - 1.0).abs() < 0.02,
        "limited: {}",
        bw(0)
    );
    assert!(bw(1) > 20.0 * 1_048_576.0, "free: {}", bw(1));
    assert_eq!(json["iosched"]["policy"], "throttle+deadline");

    let file = write(
        &dir,
        "groups.conf",
        "# weights\n/g1 io.weight 300\n/g2 io.weight 0\n",
    );
    let bad = iosched(&["run", &job, "--policy", "ioband+noop", "--groups", &file]);
    assert!(!bad.status.success());
    let message = stderr(&bad);
    assert!(
        message.contains("groups.conf:3") && message.contains("io.weight"),
        "{message}"
    );
    let flag = iosched(&["run", &job, "--group", "g1-weight-300"]);
    assert!(!flag.status.success() && stderr(&flag).contains("PATH:FILE=VALUE"));
    let stage = iosched(&["run", &job, "--policy", "turbo+deadline"]);
    assert!(!stage.status.success() && stderr(&stage).contains("turbo+deadline"));
}

// Proves `--engine real` runs a job on a real file (created with size=), `--filename`
// overrides the jobs' files, JSON comes out clean, and the sim-only options are refused
// with the real ones and vice versa.
#[test]
fn real_engine_runs_on_a_file() {
    let dir = scratch("real");
    let job = write(
        &dir,
        "job.fio",
        "[r]\nfilename=elsewhere\nsize=4m\nrw=randread\ndirect=1\nioengine=io_uring\niodepth=8\nio_size=1m\n",
    );
    let data = dir.join("data").to_string_lossy().into_owned();
    let output = iosched(&[
        "run",
        &job,
        "--engine",
        "real",
        "--filename",
        &data,
        "--policy",
        "noop",
        "--device-depth",
        "4",
        "--set",
        "nr_requests=16",
        "--output-format",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("engine io_uring, policy noop, device depth 4"));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["jobs"][0]["read"]["total_ios"], 256);
    assert_eq!(std::fs::metadata(&data).unwrap().len(), 4 << 20);
    assert!(!Path::new("elsewhere").exists());

    let sim_only = iosched(&["run", &job, "--device-depth", "4"]);
    assert!(!sim_only.status.success());
    assert!(
        stderr(&sim_only).contains("--engine real"),
        "{}",
        stderr(&sim_only)
    );

    let missing = dir.join("missing").to_string_lossy().into_owned();
    let lost = write(
        &dir,
        "lost.fio",
        &format!("[lost]\nfilename={missing}\nrw=read\n"),
    );
    let output = iosched(&["run", &lost, "--engine", "real"]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("lost.fio:1: job \"lost\""), "{message}");
    assert!(message.contains("does not exist"), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    std::fs::remove_dir_all(&dir).ok();
}

// Proves `iosched frontier` refuses bad arguments before it touches a device, and without root
// (or with a device that is not there) fails with a message saying why, creating nothing. The
// comparison itself needs root and fio: tests/frontier.rs runs a brief one.
#[test]
fn frontier_refuses_clearly() {
    for (args, expected) in [
        (&["--runtime", "0"][..], "--runtime"),
        (&["--depths", "0,4"][..], "--depths"),
        (&["--targets", "0"][..], "--targets"),
        (&["--slices", "0"][..], "--slices"),
        (&["--runtime", "1", "--slices", "6"][..], "--slices 6"),
    ] {
        let mut all = vec!["frontier"];
        all.extend_from_slice(args);
        let output = iosched(&all);
        let message = stderr(&output);
        assert!(!output.status.success(), "{args:?}");
        assert!(message.contains(expected), "{args:?}: {message}");
        assert!(!message.contains("panicked"), "{message}");
    }
    let output = iosched(&["frontier", "--device", "/nonexistent/iosched-device"]);
    let message = stderr(&output);
    assert!(!output.status.success());
    assert!(
        message.contains("needs root")
            || message.contains("fio")
            || message.contains("cannot open /nonexistent/iosched-device"),
        "{message}"
    );
}

// Proves the latency policy says at start when no job sets a priority (it then has no
// foreground), and says nothing when one does.
#[test]
fn latency_policy_notes_a_missing_foreground() {
    let dir = scratch("latency-note");
    let plain = write(&dir, "plain.fio", SMALL_JOB);
    let output = iosched(&["run", &plain, "--policy", "latency", "-q"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("no foreground to protect"),
        "{}",
        stderr(&output)
    );
    let prioritised = write(&dir, "rt.fio", &format!("{SMALL_JOB}prioclass=1\n"));
    let output = iosched(&["run", &prioritised, "--policy", "latency", "-q"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        !stderr(&output).contains("no foreground"),
        "{}",
        stderr(&output)
    );
}

// Proves compare writes its comparison for scripts: CSV with one row per policy, job and
// direction, and JSON with every run's fio JSON and the verdicts, into --output.
#[test]
fn compare_writes_json_and_csv() {
    let dir = scratch("compare-data");
    let path = write(&dir, "job.fio", SMALL_JOB);
    let csv = iosched(&[
        "compare",
        &path,
        "--policy",
        "noop",
        "--policy",
        "deadline:priorities=0,fifo_batch=8",
        "-q",
        "--output-format",
        "csv",
    ]);
    assert!(csv.status.success(), "{}", stderr(&csv));
    let text = String::from_utf8_lossy(&csv.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("policy,point,job,dir,"), "{text}");
    assert_eq!(lines.len(), 1 + 2 * 2, "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("\"deadline:priorities=0,fifo_batch=8\",,w,write,")),
        "{text}"
    );
    let out = dir.join("cmp.json");
    let json = iosched(&[
        "compare",
        &path,
        "--policy",
        "noop",
        "-q",
        "--output-format",
        "json",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(json.status.success(), "{}", stderr(&json));
    assert!(json.stdout.is_empty(), "the data went to the file");
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(value["runs"][0]["policy"], "noop");
    assert!(value["runs"][0]["fio"]["jobs"].as_array().unwrap().len() == 2);
}

// Proves compare marks a starved job in its table, its verdicts and its CSV and JSON rather
// than showing it as a slow one: deadline serves the idle class only after 10 s.
#[test]
fn compare_marks_a_starved_job() {
    let job = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/idle-class-starvation.fio"
    );
    let policies = ["--policy", "bfq", "--policy", "deadline", "-q"];
    let text = iosched(&[&["compare", job][..], &policies].concat());
    assert!(text.status.success(), "{}", stderr(&text));
    let table = String::from_utf8_lossy(&text.stdout);
    let marked: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("starved: no I/O completed within the runtime"))
        .collect();
    assert_eq!(marked.len(), 1, "{table}");
    assert!(marked[0].trim_start().starts_with("deadline"), "{table}");
    assert!(table.contains("; starved: idle"), "{table}");

    let csv = iosched(
        &[
            &["compare", job][..],
            &policies,
            &["--output-format", "csv"],
        ]
        .concat(),
    );
    let csv = String::from_utf8_lossy(&csv.stdout);
    let starved: Vec<&str> = csv.lines().filter(|l| l.ends_with(",true")).collect();
    assert_eq!(starved.len(), 1, "{csv}");
    assert!(starved[0].starts_with("deadline,,idle,read,"), "{csv}");

    let json = iosched(
        &[
            &["compare", job][..],
            &policies,
            &["--output-format", "json"],
        ]
        .concat(),
    );
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let idle = |run: usize| {
        value["runs"][run]["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == "idle")
            .unwrap()
            .clone()
    };
    assert!(idle(0)["starved"].is_null(), "bfq serves the idle class");
    assert_eq!(idle(1)["queued_at_end"], 2);
    assert!(idle(1)["starved"]
        .as_str()
        .unwrap()
        .contains("no I/O completed"));
}

// Proves `iosched bench` covers a table of policies by job counts in one command: a row per
// policy, a column per job count, the slowdown from the fewest jobs to the most, the same
// total of requests in every cell; and a zero job count is refused.
#[test]
fn bench_prints_a_table_of_policies_by_jobs() {
    let output = iosched(&[
        "bench",
        "--policy",
        "noop,deadline",
        "--jobs",
        "1,4",
        "--requests",
        "4000",
        "--repeat",
        "1",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("4000 requests in all"), "{text}");
    assert!(
        lines[1].contains("1 jobs") && lines[1].contains("4 jobs"),
        "{text}"
    );
    assert!(lines[1].contains("4 vs 1"), "{text}");
    for (line, policy) in lines[2..].iter().zip(["noop", "deadline"]) {
        assert!(line.starts_with(policy), "{text}");
        assert!(line.ends_with("x slower"), "{text}");
    }
    assert_eq!(lines.len(), 4, "{text}");
    let refused = iosched(&["bench", "--jobs", "0"]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("--jobs: a number of jobs must be 1 or more"));
}

// Proves `iosched bench --in-flight` shares one load among the jobs: each job at its share of
// the depth (asynchronous), so that 1 job at iodepth 8 and 8 synchronous jobs keep the same
// number of I/Os in flight; the run says which; zero is refused.
#[test]
fn bench_in_flight_shares_the_depth_among_the_jobs() {
    let run = |jobs: &str| bench_output(&["--policy", "noop", "--jobs", jobs, "--in-flight", "8"]);
    let one = run("1");
    assert!(
        one.contains("1 4 KiB random readers at iodepth 8 (libaio) x 2000 requests"),
        "{one}"
    );
    let eight = run("8");
    assert!(
        eight.contains("8 synchronous 4 KiB random readers x 250 requests"),
        "{eight}"
    );
    let table = run("1,8");
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .contains("8 I/Os in flight in all"),
        "{table}"
    );
    assert!(
        table.lines().nth(2).unwrap().ends_with("x slower"),
        "{table}"
    );
    let refused = iosched(&["bench", "--in-flight", "0"]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("--in-flight: the I/Os in flight must be 1 or more"));
}

// Proves `iosched bench --cgroups` spreads the jobs over cgroups and says so, in the run's line
// and in a table's header, with a weight set for one of them through --group.
#[test]
fn bench_spreads_the_jobs_over_cgroups() {
    let run = |jobs: &str| {
        bench_output(&[
            "--policy",
            "bfq",
            "--jobs",
            jobs,
            "--in-flight",
            "16",
            "--cgroups",
            "2",
            "--group",
            "/bench1:io.weight=300",
        ])
    };
    let one = run("4");
    assert!(
        one.contains("4 4 KiB random readers at iodepth 4 (libaio) in 2 cgroups x 500 requests"),
        "{one}"
    );
    let table = run("2,8");
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .contains("the jobs spread over 2 cgroups"),
        "{table}"
    );
}

// Regression: `iosched bench --requests-per-job 4503599627370497` wrapped the job's size to
// 4 KiB and ran one request per job; a huge --requests or --in-flight was refused as a line of
// a job file the user never wrote. Each is now refused before any run, naming the option.
#[test]
fn bench_refuses_numbers_past_the_limits_naming_the_option() {
    for (args, message) in [
        (
            &["--requests-per-job", "4503599627370497"][..],
            "--requests-per-job: 4503599627370497 requests of 4 KiB per job is more than iosched's limit for any size",
        ),
        (
            &["--requests", "18446744073709551615"][..],
            "--requests: 4611686018427387903 requests of 4 KiB per job is more than iosched's limit",
        ),
        (
            &["--in-flight", "4000000000"][..],
            "--in-flight: 4000000000 I/Os over 4 jobs is an iodepth of 1000000000 per job, more than iosched's limit, 65536",
        ),
        (
            &["--jobs", "4,5000"][..],
            "--jobs: 5000 jobs is more than iosched's limit, 4096",
        ),
        (
            &["--cgroups", "0"][..],
            "--cgroups: the number of cgroups must be 1 or more",
        ),
        (
            &["--jobs", "64,4", "--cgroups", "8"][..],
            "--cgroups: 8 cgroups need a job each, and --jobs has 4",
        ),
    ] {
        let output = iosched(&[&["bench"][..], args].concat());
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr(&output).contains(message), "{args:?}: {}", stderr(&output));
        assert!(output.stdout.is_empty(), "{args:?}: nothing runs");
    }
}

// Proves `iosched sweep` as a user meets it: the table to --output and the summary to standard
// output, the same table from one thread or two, --list, a failed point failing the command
// after the table is written, and a bad grid refused with its file and line before any run.
#[test]
fn sweep_writes_one_table_whatever_the_threads() {
    let dir = scratch("sweep");
    write(&dir, "small.fio", SMALL_JOB);
    let grid = write(
        &dir,
        "grid.toml",
        "job = \"small.fio\"\n[[axis]]\npolicy = [\"noop\", \"deadline\"]\n[[axis]]\nseed = [1, 2, 3]\n",
    );
    let one = dir.join("one.csv");
    let two = dir.join("two.csv");
    let output = iosched(&[
        "sweep",
        &grid,
        "--threads",
        "1",
        "--output",
        one.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.contains("6 points (0 failed)"), "{summary}");
    assert!(summary.contains("| deadline | 3 |"), "{summary}");
    let output = iosched(&[
        "sweep",
        &grid,
        "--threads",
        "2",
        "--output",
        two.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = std::fs::read_to_string(&one).unwrap();
    assert_eq!(table, std::fs::read_to_string(&two).unwrap());
    assert!(table.starts_with("point,policy,seed,job,dir,clones,ios,"));
    // 6 points, each with r (read) and w (write).
    assert_eq!(table.lines().count(), 1 + 12);
    assert!(table
        .lines()
        .nth(12)
        .unwrap()
        .starts_with("5,deadline,3,w,write,1,"));

    let list = iosched(&["sweep", &grid, "--list"]);
    assert_eq!(
        String::from_utf8_lossy(&list.stdout),
        "point\tpolicy\tseed\n0\tnoop\t1\n1\tnoop\t2\n2\tnoop\t3\n3\tdeadline\t1\n4\tdeadline\t2\n5\tdeadline\t3\n"
    );

    let failing = write(
        &dir,
        "failing.toml",
        "job = \"small.fio\"\n[[axis]]\n\"set.nr_requests\" = [\"64\", \"-1\"]\n",
    );
    let out = dir.join("failing.csv");
    let output = iosched(&["sweep", &failing, "--output", out.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("1 of 2 points failed"),
        "{}",
        stderr(&output)
    );
    let table = std::fs::read_to_string(&out).unwrap();
    assert!(table.lines().nth(1).unwrap().starts_with("0,64,r,read,"));
    assert!(table.contains("nr_requests"), "{table}");

    let bad = write(
        &dir,
        "bad.toml",
        "job = \"small.fio\"\n\n[[axis]]\nspeed = [1]\n",
    );
    let never = dir.join("never.csv");
    let output = iosched(&["sweep", &bad, "--output", never.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("bad.toml:3: unknown axis \"speed\""),
        "{}",
        stderr(&output)
    );
    assert!(
        !never.exists(),
        "nothing is written for a grid that was refused"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// Proves `iosched sweep --engine ray` says what it needs when the Python package cannot be
// run, after checking the grid, and that the local engine's options are refused with it.
#[test]
fn sweep_on_ray_says_what_it_needs() {
    let dir = scratch("sweep-ray");
    write(&dir, "small.fio", SMALL_JOB);
    let grid = write(
        &dir,
        "grid.toml",
        "job = \"small.fio\"\n[[axis]]\nseed = [1, 2]\n",
    );
    let with_python = |python: &str, extra: &[&str]| {
        let mut args = vec!["sweep", grid.as_str(), "--engine", "ray"];
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_iosched"))
            .args(&args)
            .env("IOSCHED_PYTHON", python)
            .output()
            .unwrap()
    };
    let missing = with_python("/nonexistent/python3", &[]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("cannot be started"),
        "{}",
        stderr(&missing)
    );
    let refusing = with_python("/bin/false", &[]);
    assert!(
        stderr(&refusing).contains("pip install ."),
        "{}",
        stderr(&refusing)
    );
    let threads = with_python("/bin/false", &["--threads", "2"]);
    assert!(stderr(&threads).contains("--threads is for the local engine"));
    let address = iosched(&["sweep", &grid, "--address", "ray://x:1"]);
    assert!(stderr(&address).contains("--address is for --engine ray"));
    let bad = write(
        &dir,
        "bad.toml",
        "job = \"small.fio\"\n[[axis]]\nspeed = [1]\n",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_iosched"))
        .args(["sweep", &bad, "--engine", "ray"])
        .env("IOSCHED_PYTHON", "/nonexistent/python3")
        .output()
        .unwrap();
    assert!(
        stderr(&output).contains("bad.toml:2: unknown axis"),
        "{}",
        stderr(&output)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// Proves calibrate --iocost on a real file refuses to overwrite it unless told to, creates
// nothing it was not given, and gives an io.cost.model line measured through io_uring.
#[test]
fn calibrate_iocost_on_a_real_file() {
    let dir = scratch("iocost");
    let calibrate = |path: &std::path::Path, extra: &[&str]| {
        let mut args = vec![
            "calibrate",
            "--iocost",
            "--file",
            path.to_str().unwrap(),
            "--runtime",
            "1",
            "-q",
        ];
        args.extend_from_slice(extra);
        iosched(&args)
    };
    let missing = dir.join("missing.img");
    let output = calibrate(&missing, &[]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("creates none"));
    assert!(!missing.exists(), "a missing file is not created");
    let image = dir.join("disk.img");
    let file = std::fs::File::create(&image).unwrap();
    file.set_len(256 << 20).unwrap();
    let refused = calibrate(&image, &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--allow-overwrite"));
    let output = calibrate(&image, &["--allow-overwrite"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("io.cost.model: "))
        .expect("a model line");
    let mut model = iosched_core::iocost::CostModel::default();
    model.set(line).unwrap();
    assert!(model.i_lcoefs.iter().all(|&c| c > 0), "{line}");
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 256 << 20);
    std::fs::remove_dir_all(&dir).unwrap();
}

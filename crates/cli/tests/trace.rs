//! Traces as a user meets them: replay and capture with fio's `read_iolog`/`write_iolog` on
//! both engines, `iosched trace`, and the trace-replay experiment's committed inputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn iosched_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iosched"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("iosched runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("iosched-trace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn ok(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "failed: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The (direction, offset, length) of each I/O line of a version 3 iolog.
fn requests(path: &Path) -> Vec<(String, u64, u64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("fio version 3 iolog"));
    lines
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() == 5).then(|| {
                (
                    fields[2].to_string(),
                    fields[3].parse().unwrap(),
                    fields[4].parse().unwrap(),
                )
            })
        })
        .collect()
}

// Proves the round trip the issue names: a job run on the real engine with write_iolog,
// replayed in the simulator and on the real engine (each logging what it issues, which fio
// would not: its init_iolog ignores write_iolog beside read_iolog), issues the same requests
// (directions, offsets, lengths) in the same order, and counts them all.
#[test]
fn a_real_run_replays_the_same_requests_in_the_simulator_and_on_the_real_engine() {
    let dir = scratch("roundtrip");
    std::fs::File::create(dir.join("data.bin"))
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    std::fs::write(
        dir.join("record.fio"),
        "[j]\nfilename=data.bin\nrw=randrw\nbsrange=4k-16k\nsize=32m\nioengine=io_uring\n\
         iodepth=4\ndirect=1\nnumber_ios=300\nwrite_iolog=recorded.log\n",
    )
    .unwrap();
    ok(&iosched_in(
        &dir,
        &["run", "record.fio", "--engine", "real", "--policy", "noop"],
    ));
    let recorded = requests(&dir.join("recorded.log"));
    assert_eq!(recorded.len(), 300);
    assert!(recorded.iter().any(|r| r.0 == "read") && recorded.iter().any(|r| r.0 == "write"));
    let want_reads = recorded.iter().filter(|r| r.0 == "read").count() as u64;
    let want_read_bytes: u64 = recorded.iter().filter(|r| r.0 == "read").map(|r| r.2).sum();
    for engine in ["sim", "real"] {
        std::fs::write(
            dir.join(format!("{engine}.fio")),
            format!(
                "[j]\nfilename=data.bin\nread_iolog=recorded.log\nioengine=io_uring\n\
                 iodepth=4\ndirect=1\nwrite_iolog={engine}.log\n"
            ),
        )
        .unwrap();
        let output = iosched_in(
            &dir,
            &[
                "run",
                &format!("{engine}.fio"),
                "--engine",
                engine,
                "--output-format",
                "json",
                "--policy",
                "bfq",
            ],
        );
        let json: serde_json::Value = serde_json::from_str(&ok(&output)).unwrap();
        let job = &json["jobs"][0];
        let reads = job["read"]["total_ios"].as_u64().unwrap();
        let writes = job["write"]["total_ios"].as_u64().unwrap();
        assert_eq!((reads, writes), (want_reads, 300 - want_reads), "{engine}");
        assert_eq!(
            job["read"]["io_bytes"].as_u64().unwrap(),
            want_read_bytes,
            "{engine}"
        );
        assert_eq!(
            requests(&dir.join(format!("{engine}.log"))),
            recorded,
            "{engine}"
        );
    }
}

// Proves conversion keeps a trace's requests: a simulated run's log through blktrace's binary
// format and back is the same sequence, and the binary replays every request.
#[test]
fn a_log_converts_through_blktrace_and_replays_whole() {
    let dir = scratch("convert");
    std::fs::write(
        dir.join("record.fio"),
        "[j]\nfilename=/dev/sda\nrw=randrw\nbsrange=4k-64k\nsize=1g\nnumber_ios=200\niodepth=8\n\
         ioengine=libaio\ndirect=1\nwrite_iolog=a.log\n",
    )
    .unwrap();
    ok(&iosched_in(&dir, &["run", "record.fio"]));
    ok(&iosched_in(
        &dir,
        &["trace", "convert", "a.log", "a.bin", "--to", "blktrace"],
    ));
    ok(&iosched_in(
        &dir,
        &["trace", "convert", "a.bin", "b.log", "--to", "iolog"],
    ));
    let a = requests(&dir.join("a.log"));
    assert_eq!(a.len(), 200);
    assert_eq!(requests(&dir.join("b.log")), a);
    std::fs::write(
        dir.join("replay.fio"),
        "[j]\nfilename=/dev/sda\nread_iolog=a.bin\niodepth=8\nioengine=libaio\ndirect=1\n",
    )
    .unwrap();
    let output = iosched_in(&dir, &["run", "replay.fio", "--output-format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&ok(&output)).unwrap();
    let job = &json["jobs"][0];
    let ios =
        job["read"]["total_ios"].as_u64().unwrap() + job["write"]["total_ios"].as_u64().unwrap();
    assert_eq!(ios, 200);
}

// Proves a malformed trace is refused before the run with its file and line, leaving the
// outputs the job names as they were.
#[test]
fn a_malformed_trace_is_refused_with_its_line_and_nothing_is_written() {
    let dir = scratch("malformed");
    std::fs::write(
        dir.join("t.csv"),
        "1,web,0,Read,0,4096,1\n2,web,0,Raed,0,4096,1\n",
    )
    .unwrap();
    std::fs::write(dir.join("lat_lat.1.log"), "kept\n").unwrap();
    std::fs::write(
        dir.join("job.fio"),
        "[j]\nfilename=/dev/sda\nread_iolog=t.csv\nwrite_lat_log=lat\n",
    )
    .unwrap();
    let output = iosched_in(&dir, &["run", "job.fio"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("read_iolog: t.csv:2: Type \"raed\": Read or Write"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));
    assert_eq!(
        std::fs::read_to_string(dir.join("lat_lat.1.log")).unwrap(),
        "kept\n"
    );
}

// Proves `iosched trace info`, `jobs` and `run -` replay a trace's flows as jobs with the
// flow map's cgroups, and `convert` refuses to write over its input.
#[test]
fn trace_jobs_replay_each_flow() {
    let dir = scratch("jobs");
    std::fs::write(
        dir.join("t.blk"),
        "8,0 0 1 0.000 10 Q R 1000 + 8 [a]\n8,0 0 2 0.001 20 Q W 4000 + 8 [b]\n\
         8,0 0 3 0.002 10 Q R 9000 + 16 [a]\n8,0 0 4 0.003 20 Q W 4008 + 8 [b]\n",
    )
    .unwrap();
    let info = ok(&iosched_in(&dir, &["trace", "info", "t.blk"]));
    assert!(
        info.contains("(blkparse)")
            && info.contains("pid:10")
            && info.contains("2 reads, 2 writes"),
        "{info}"
    );
    let jobs = ok(&iosched_in(
        &dir,
        &[
            "trace",
            "jobs",
            "t.blk",
            "--flow-map",
            "pid:10=/db:rt/0",
            "--flow-map",
            "pid:20=/bulk",
        ],
    ));
    assert!(
        jobs.contains("[pid:10]") && jobs.contains("cgroup=/db"),
        "{jobs}"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_iosched"))
        .current_dir(&dir)
        .args(["run", "-", "--policy", "bfq", "--output-format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(jobs.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let json: serde_json::Value = serde_json::from_str(&ok(&output)).unwrap();
    let names: Vec<&str> = json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["jobname"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pid:10", "pid:20"]);
    assert_eq!(json["jobs"][0]["read"]["total_ios"], 2);
    assert_eq!(json["jobs"][1]["write"]["total_ios"], 2);
    let same = iosched_in(&dir, &["trace", "convert", "t.blk", "t.blk", "--to", "msr"]);
    assert!(!same.status.success());
    assert!(String::from_utf8_lossy(&same.stderr).contains("would destroy it"));
    let unknown = iosched_in(&dir, &["trace", "jobs", "t.blk", "--flow-map", "pid:99=/x"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("which the trace does not have"));
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

// Proves the trace-replay experiment's committed inputs are what their generators write:
// oltp.csv is make_trace.py's output, and db.log, log.log and scan.log are record.fio's logs
// at the seed its comment names.
#[test]
fn the_experiments_committed_traces_are_their_generators_output() {
    let folder = repo().join("experiments/trace-replay");
    let dir = scratch("committed");
    let python = Command::new("python3")
        .arg(folder.join("make_trace.py"))
        .args(["--out", dir.join("oltp.csv").to_str().unwrap()])
        .output()
        .expect("python3 runs make_trace.py (the machine's Python 3)");
    assert!(
        python.status.success(),
        "{}",
        String::from_utf8_lossy(&python.stderr)
    );
    assert_eq!(
        std::fs::read(dir.join("oltp.csv")).unwrap(),
        std::fs::read(folder.join("oltp.csv")).unwrap(),
        "oltp.csv is not make_trace.py's output: run it again in experiments/trace-replay"
    );
    std::fs::copy(folder.join("record.fio"), dir.join("record.fio")).unwrap();
    ok(&iosched_in(
        &dir,
        &[
            "run",
            "record.fio",
            "--device",
            "hdd",
            "--policy",
            "noop",
            "--seed",
            "1",
        ],
    ));
    for log in ["db.log", "log.log", "scan.log"] {
        assert_eq!(
            std::fs::read(dir.join(log)).unwrap(),
            std::fs::read(folder.join(log)).unwrap(),
            "{log} is not record.fio's log: record it again as record.fio says"
        );
    }
}

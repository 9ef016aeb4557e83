//! `iosched frontier` run for real, briefly, on a loop device: the kernel's io.cost beside
//! iosched's with the same cgroup files, and a latency target's mix in slices. They need root,
//! losetup and fio, and the first the io controller on cgroup v2; where one is missing a test
//! says so on the terminal and passes without running, except under `CI=true`, where fio's
//! absence fails it (.ci/run installs fio).
//!
//! On a hybrid machine whose io controller is bound to cgroup v1 (`blkio`, no child groups),
//! under `CI=true` the test unmounts that v1 hierarchy so that the controller can move to v2:
//! a throwaway CI machine may be reconfigured, a user's may not (the tool itself never does it,
//! and says how in its note).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "\n*** {test}: SKIPPED: {why} ***\n");
}

fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// (cgroup v2 mount, v1 blkio mount) from /proc/self/mounts.
fn hierarchies() -> (Option<PathBuf>, Option<PathBuf>) {
    let found = iosched_mount::cgroupfs::Hierarchies::find();
    (found.v2, found.blkio)
}

fn controllers(v2: &Path) -> String {
    std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default()
}

/// The v2 mount, with the io controller on it; under CI, moved there from an empty v1 blkio.
fn io_on_v2() -> Result<PathBuf, String> {
    let (v2, blkio) = hierarchies();
    let v2 = v2.ok_or("no cgroup v2 hierarchy is mounted")?;
    if controllers(&v2).split_whitespace().any(|c| c == "io") {
        return Ok(v2);
    }
    let blkio = blkio.ok_or("the io controller is on neither cgroup v2 nor v1")?;
    if !ci() {
        return Err(format!(
            "the io controller is bound to cgroup v1 at {} (under CI=true the test frees it)",
            blkio.display()
        ));
    }
    let children = std::fs::read_dir(&blkio)
        .map_err(|e| format!("{}: {e}", blkio.display()))?
        .filter_map(|entry| entry.ok())
        .any(|entry| entry.path().is_dir());
    if children {
        return Err(format!("{} has child groups", blkio.display()));
    }
    let status = Command::new("umount")
        .arg(&blkio)
        .status()
        .map_err(|e| format!("umount: {e}"))?;
    if !status.success() {
        return Err(format!("umount {} failed", blkio.display()));
    }
    // The v1 hierarchy is destroyed asynchronously.
    for _ in 0..50 {
        if controllers(&v2).split_whitespace().any(|c| c == "io") {
            return Ok(v2);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Err("the io controller did not move to cgroup v2".into())
}

/// Whether the machine can run a brief study (root for losetup, fio); if not, says why.
fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip(test, "needs root (losetup; cgroups for the controllers)");
        return false;
    }
    if Command::new("fio").arg("--version").output().is_err() {
        assert!(!ci(), "fio is missing (.ci/run installs it)");
        skip(test, "fio is not installed (apt-get install fio)");
        return false;
    }
    true
}

/// A brief `iosched frontier` in `dir` (64 MiB, 1 s per run, depths 1 and 8, the latency
/// policy at 2x only, no overhead pairs) with `args` added: (stdout, stderr, its JSON). A
/// claim that fails (the latency policy's, on a noisy machine) fails the command after it
/// wrote everything: that is the study's verdict, not a test's concern.
fn brief_frontier(dir: &Path, args: &[&str]) -> (String, String, serde_json::Value) {
    let output_file = dir.join("frontier.txt");
    let output = Command::new(env!("CARGO_BIN_EXE_iosched"))
        .args(["frontier", "--file"])
        .arg(dir.join("device.img"))
        .args([
            "--size-mib",
            "64",
            "--runtime",
            "1",
            "--depths",
            "1,8",
            "--policies",
            "--targets",
            "2",
            "--forwarded-targets",
            "--overhead-pairs",
            "0",
        ])
        .args(args)
        .arg("--output")
        .arg(&output_file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success() || stdout.contains("\nFAIL "),
        "{stderr}\n{stdout}"
    );
    let json =
        serde_json::from_str(&std::fs::read_to_string(output_file.with_extension("json")).unwrap())
            .unwrap();
    (stdout, stderr, json)
}

/// The mix row `label` of a study's JSON.
fn row(json: &serde_json::Value, label: &str) -> serde_json::Value {
    json["mixes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["label"] == label)
        .unwrap_or_else(|| panic!("no row {label}: {json}"))
        .clone()
}

fn frontier_groups(v2: &Path) -> Vec<String> {
    std::fs::read_dir(v2)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("iosched-frontier-"))
                .collect()
        })
        .unwrap_or_default()
}

// Proves the frontier runs the kernel's io.cost with the same files as iosched's io.cost: both
// rows are in the table with I/O in each group, the kernel's io.latency (missing here) is
// skipped with a note rather than failing the run, and the study leaves no cgroup behind and
// the root's controllers as it found them.
#[test]
fn the_kernels_io_cost_runs_beside_iosched_s() {
    let test = "the_kernels_io_cost_runs_beside_iosched_s";
    if !can_run(test) {
        return;
    }
    let v2 = match io_on_v2() {
        Ok(v2) => v2,
        Err(why) => {
            skip(test, &why);
            return;
        }
    };
    if !v2.join("io.cost.qos").exists() {
        skip(
            test,
            "this kernel has no io.cost (CONFIG_BLK_CGROUP_IOCOST)",
        );
        return;
    }
    let subtree_before = std::fs::read_to_string(v2.join("cgroup.subtree_control")).unwrap();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (_, _, json) = brief_frontier(
        dir.path(),
        &[
            "--kernel",
            "none",
            "--controllers",
            "io.cost",
            "--kernel-controllers",
            "io.cost,io.latency",
        ],
    );
    for label in ["fio io.cost 2x", "iosched io.cost 2x"] {
        let mix = row(&json, label);
        for side in ["fg", "bg"] {
            let iops = mix[side]["iops"].as_f64().unwrap();
            assert!(iops > 0.0, "{label} {side}: {mix}");
        }
        assert_eq!(mix["targets_us"].as_array().unwrap().len(), 1, "{mix}");
    }
    // The kernel's io.latency runs where the kernel has it, and is skipped with a note where
    // it does not (CONFIG_BLK_CGROUP_IOLATENCY).
    let notes = json["notes"].to_string();
    let latency_ran = json["mixes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["label"] == "fio io.latency 2x");
    assert!(
        latency_ran || notes.contains("kernel io.latency skipped"),
        "{notes}"
    );
    assert!(
        frontier_groups(&v2).is_empty(),
        "{:?}",
        frontier_groups(&v2)
    );
    assert_eq!(
        std::fs::read_to_string(v2.join("cgroup.subtree_control")).unwrap(),
        subtree_before
    );
}

// Proves a latency target's mix runs in slices, each with the curve beside it, on a real loop
// device: the table says so, the row has its fraction beside the mix, every figure is
// positive, and the loop device and its file are gone afterwards. Needs root, losetup and
// fio, but no cgroups, so it runs where the test above cannot.
#[test]
fn a_latency_targets_mix_runs_in_slices_beside_the_curve() {
    let test = "a_latency_targets_mix_runs_in_slices_beside_the_curve";
    if !can_run(test) {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (stdout, stderr, json) = brief_frontier(
        dir.path(),
        &[
            "--slices",
            "2",
            "--kernel",
            "--controllers",
            "--kernel-controllers",
        ],
    );
    assert!(
        stdout.contains("each latency target's mix in 2 slices"),
        "{stdout}"
    );
    // One mix and the two bracketing depths per slice.
    assert_eq!(
        stderr.matches("iosched latency 2x mix, slice").count(),
        2,
        "{stderr}"
    );
    assert_eq!(stderr.matches("beside it").count(), 4, "{stderr}");
    assert_eq!(json["slices"], 2, "{json}");
    let row = row(&json, "iosched latency 2x");
    for side in ["fg", "bg"] {
        assert!(row[side]["iops"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row[side]["mean_ns"].as_f64().unwrap() > 0.0, "{row}");
    }
    let beside = row["beside_fractions"].as_array().unwrap();
    assert_eq!(beside.len(), 1, "{row}");
    assert!(beside[0].as_f64().unwrap() > 0.0, "{row}");
    // The study removed the file it created, and the loop device over it.
    let image = dir.path().join("device.img");
    assert!(!image.exists());
    let loops = Command::new("losetup").arg("-a").output().unwrap();
    assert!(
        !String::from_utf8_lossy(&loops.stdout).contains(&*image.to_string_lossy()),
        "{}",
        String::from_utf8_lossy(&loops.stdout)
    );
}

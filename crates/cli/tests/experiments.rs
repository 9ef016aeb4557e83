//! The experiments: every quick variant holds in the test suite, and the machinery fails when
//! a claim does not hold or a definition is wrong.

use iosched_lab::experiment::{discover, load, run_experiment};
use iosched_lab::progress::Quiet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("iosched-exp-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// Proves every experiment's claim holds on its quick variant (the same claim, shorter runs),
// except claims listed as known gaps, which must say why.
#[test]
fn every_quick_experiment_passes() {
    let experiments = discover(&repository().join("experiments")).expect("experiments load");
    assert!(experiments.len() >= 2, "the first experiments exist");
    let mut failures = Vec::new();
    for experiment in &experiments {
        let study = run_experiment(experiment, true, &Quiet, None).expect("runs");
        assert!(
            !study.verdicts.is_empty(),
            "{} checks nothing",
            experiment.name
        );
        for verdict in &study.verdicts {
            if let Some(gap) = &verdict.gap {
                assert!(
                    gap.split_whitespace().count() >= 8,
                    "{}: a known gap must explain itself: {gap:?}",
                    experiment.name
                );
            }
        }
        for verdict in study.verdicts.iter().filter(|v| v.failed()) {
            failures.push(format!(
                "{}: {}: {}",
                experiment.name, verdict.claim, verdict.figure
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "claims not met:\n{}",
        failures.join("\n")
    );
}

fn write_experiment(dir: &Path, checks: &str) {
    std::fs::write(
        dir.join("job.fio"),
        "[reader]\nfilename=/dev/sda\nrw=randread\ndirect=1\nruntime=${RUNTIME}\ntime_based=1\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("experiment.toml"),
        format!(
            "title = \"t\"\nsource = \"s\"\nclaim = \"c\"\njob = \"job.fio\"\npolicies = [\"deadline\"]\n\
             [env]\nRUNTIME = \"2\"\n{checks}"
        ),
    )
    .unwrap();
}

// Proves a claim that does not hold makes `experiment run` print FAIL and exit non-zero,
// after writing its results.
#[test]
fn a_failed_claim_exits_non_zero() {
    let root = scratch("fail");
    let dir = root.join("impossible");
    std::fs::create_dir_all(&dir).unwrap();
    write_experiment(&dir, "[[check]]\nclaim = \"a disk does a million random reads a second\"\nmetric = \"iops\"\njob = \"reader\"\nat_least = 1000000\n");
    let results = root.join("results");
    let output = Command::new(env!("CARGO_BIN_EXE_iosched"))
        .args([
            "experiment",
            "run",
            "impossible",
            "--dir",
            root.to_str().unwrap(),
            "--results",
            results.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(
        stdout.contains("FAIL a disk does a million random reads a second"),
        "{stdout}"
    );
    let json: String = std::fs::read_to_string(results.join("impossible.json")).unwrap();
    assert!(json.contains("\"pass\": false"), "{json}");
}

// Proves a mistyped metric or threshold is refused with the file and the check named.
#[test]
fn bad_definitions_are_named() {
    let root = scratch("bad");
    let dir = root.join("typo");
    std::fs::create_dir_all(&dir).unwrap();
    write_experiment(
        &dir,
        "[[check]]\nclaim = \"x\"\nmetric = \"iopz\"\njob = \"reader\"\nat_least = 1\n",
    );
    let experiment = load(&dir).unwrap();
    let error = format!(
        "{:#}",
        run_experiment(&experiment, true, &Quiet, None).unwrap_err()
    );
    assert!(
        error.contains("iopz") && error.contains("experiment.toml"),
        "{error}"
    );
    write_experiment(&dir, "[[check]]\nclaim = \"x\"\nmetric = \"clat_max\"\njob = \"reader\"\nat_most = \"3 fortnights\"\n");
    let error = format!("{:#}", load(&dir).unwrap_err());
    assert!(error.contains("fortnights"), "{error}");
    write_experiment(&dir, "bogus_key = 1\n");
    let error = format!("{:#}", load(&dir).unwrap_err());
    assert!(error.contains("bogus_key"), "{error}");
}

#[test]
fn list_names_every_experiment() {
    let output = Command::new(env!("CARGO_BIN_EXE_iosched"))
        .current_dir(repository())
        .args(["experiment", "list"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    for name in ["hdd-queue-depth", "deadline-vs-noop"] {
        assert!(stdout.contains(name), "{stdout}");
    }
}

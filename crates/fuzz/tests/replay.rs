//! The fuzz targets in `cargo test`: every input of the seed corpus (`fuzz/corpus/TARGET`) and
//! every input that once failed (`fuzz/regressions/TARGET`), then a few deterministic mutations
//! of each, so that a short run of every target is part of the suite (seconds, on stable).
//! Long runs are libFuzzer's: `cargo +nightly fuzz run TARGET` (see the README).
//!
//! `FUZZ_MUTATIONS` sets the mutations per input (default 16); the mutations are drawn from a
//! fixed seed, so a failure here replays exactly.

use iosched_fuzz::TARGETS;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn inputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut inputs: Vec<(String, Vec<u8>)> = entries
        .map(|entry| entry.expect("a readable corpus folder").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let bytes = std::fs::read(&path).expect("a readable corpus file");
            (path.display().to_string(), bytes)
        })
        .collect();
    inputs.sort();
    inputs
}

/// splitmix64: the mutations' fixed-seed generator.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One mutation of `input`, in the spirit of libFuzzer's: flip a bit, set a byte to an
/// interesting value, insert or delete a run, duplicate a slice, or splice in digits.
fn mutate(input: &[u8], mix: &mut Mix) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + mix.below(4) {
        let at = mix.below(out.len() + 1);
        match mix.below(6) {
            0 if !out.is_empty() => {
                let i = at.min(out.len() - 1);
                out[i] ^= 1 << mix.below(8);
            }
            1 if !out.is_empty() => {
                let i = at.min(out.len() - 1);
                out[i] = [0, 0xff, b'\n', b'=', b'[', b'9', b'-', b','][mix.below(8)];
            }
            2 => {
                let run = mix.below(8) + 1;
                let byte = mix.next() as u8;
                out.splice(at..at, std::iter::repeat_n(byte, run));
            }
            3 if !out.is_empty() => {
                let end = (at + mix.below(16) + 1).min(out.len());
                out.drain(at.min(end)..end);
            }
            4 if !out.is_empty() => {
                let start = mix.below(out.len());
                let end = (start + mix.below(32) + 1).min(out.len());
                let copy = out[start..end].to_vec();
                out.splice(at..at, copy);
            }
            _ => {
                let digits = ["18446744073709551616", "9999999999999", "-1", "0", "1e308"];
                out.splice(at..at, digits[mix.below(digits.len())].bytes());
            }
        }
    }
    out
}

fn mutations() -> usize {
    std::env::var("FUZZ_MUTATIONS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(16)
}

/// Runs `target` on its corpus, its regressions and their mutations; returns how many inputs
/// ran and which failed.
fn failures(name: &str, target: fn(&[u8])) -> (usize, Vec<String>) {
    let mut corpus = inputs(&fuzz_dir().join("corpus").join(name));
    assert!(
        !corpus.is_empty(),
        "{name}: no seed corpus in fuzz/corpus/{name}"
    );
    corpus.extend(inputs(&fuzz_dir().join("regressions").join(name)));
    let mut failures = Vec::new();
    let mut mix = Mix(0x0069_6f73_6368_6564); // "iosched"
    let mut runs = 0;
    for (path, input) in &corpus {
        let variants =
            std::iter::once(input.clone()).chain((0..mutations()).map(|_| mutate(input, &mut mix)));
        for (index, variant) in variants.enumerate() {
            runs += 1;
            if catch_unwind(AssertUnwindSafe(|| target(&variant))).is_err() {
                let stem = Path::new(path).file_name().unwrap_or_default();
                let saved = std::env::temp_dir().join(format!(
                    "iosched-fuzz-{name}-{}-{}-{index}",
                    stem.to_string_lossy(),
                    std::process::id()
                ));
                let _ = std::fs::write(&saved, &variant);
                failures.push(format!(
                    "{path} (mutation {index}; input saved as {})",
                    saved.display()
                ));
            }
        }
    }
    (runs, failures)
}

/// Runs the target called `name` (looked up in `TARGETS`, so a renamed target fails here).
fn run_target(name: &str) {
    let (_, target) = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no target {name}"));
    let (runs, failures) = failures(name, *target);
    assert!(
        failures.is_empty(),
        "{name}: {} of {runs} inputs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn job_file_corpus() {
    run_target("job_file");
}

#[test]
fn groups_file_corpus() {
    run_target("groups_file");
}

#[test]
fn cli_values_corpus() {
    run_target("cli_values");
}

#[test]
fn policy_ops_corpus() {
    run_target("policy_ops");
}

#[test]
fn trace_formats_corpus() {
    run_target("trace_formats");
}

// Proves the replay can fail: a target that panics on some inputs (here, job files that
// start a section) is reported, input by input.
#[test]
fn a_failing_target_is_reported() {
    fn picky(data: &[u8]) {
        assert!(!data.contains(&b'['), "a section");
    }
    let (runs, failed) = failures("job_file", picky);
    assert!(
        !failed.is_empty() && failed.len() < runs,
        "{} of {runs}",
        failed.len()
    );
}

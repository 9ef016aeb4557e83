//! The Python package's tests (python/tests, pytest) as part of `cargo test --workspace`.
//!
//! Builds the package's wheel and installs it into a virtual environment of its own under
//! `target/python-tests/` (created on the first run, with maturin, pytest, pandas, pyarrow,
//! tqdm and ray from PyPI; later runs only rebuild what changed), then runs pytest from the
//! repository's root. Nothing of ours is written outside `target/` (no module into the
//! checkout, no pytest cache, no bytecode); the local Ray the tests start keeps its session
//! files where Ray always does (`/tmp/ray`, `~/.ray`). The
//! native module builds in its own target folder there, as the outer `cargo test` holds the
//! lock of the usual one. Needs python3 with venv and pip (on every machine CI uses), and
//! PyPI the first time. `IOSCHED_SKIP_PYTHON=1` skips it, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the package's tests need from PyPI.
const REQUIREMENTS: &[&str] = &[
    "maturin>=1.5,<2",
    "pytest>=7",
    "pandas>=1.3",
    "pyarrow>=8",
    "tqdm>=4",
    "ray>=2.5",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/python is two levels down")
        .to_path_buf()
}

fn run(what: &str, command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {command:?}: {e}"));
    if !output.status.success() {
        panic!(
            "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    println!("{what}: ok\n{}", String::from_utf8_lossy(&output.stdout));
}

#[test]
fn python_package() {
    if std::env::var_os("IOSCHED_SKIP_PYTHON").is_some_and(|v| v == "1") {
        eprintln!("SKIPPED: the Python package's tests (IOSCHED_SKIP_PYTHON=1)");
        return;
    }
    let root = root();
    let base = root.join("target").join("python-tests");
    let venv = base.join("venv");
    let bin = venv.join("bin");
    if !bin.join("python").exists() {
        run(
            "python3 -m venv",
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
        );
    }
    let mut install = Command::new(bin.join("python"));
    install
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(REQUIREMENTS);
    run("pip install", &mut install);
    // A wheel installed into the venv (not `maturin develop`, which would put the module
    // into python/iosched in the checkout).
    let wheels = base.join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    run(
        "maturin build",
        Command::new(bin.join("maturin"))
            .args(["build", "--release", "--quiet", "--out"])
            .arg(&wheels)
            .arg("--interpreter")
            .arg(bin.join("python"))
            .env("CARGO_TARGET_DIR", base.join("cargo"))
            .current_dir(&root),
    );
    let wheel = std::fs::read_dir(&wheels)
        .expect("maturin wrote its wheels folder")
        .map(|entry| entry.expect("a readable folder").path())
        .find(|path| path.extension().is_some_and(|e| e == "whl"))
        .expect("maturin built a wheel");
    run(
        "pip install the wheel",
        Command::new(bin.join("python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--force-reinstall",
                "--no-deps",
            ])
            .arg(&wheel),
    );
    // The command, for the test of `iosched sweep --engine ray`, when this profile built it.
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let command = root.join("target").join(profile).join("iosched");
    run(
        "pytest",
        Command::new(bin.join("python"))
            .env("IOSCHED_BIN", &command)
            // No cache or bytecode written into the checkout.
            .args([
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "python/tests",
            ])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(&root),
    );
}

//! Helpers for tests that run job files through the simulator and read its report.
#![allow(dead_code)] // each test crate uses its own subset

use iosched_fio::parse::parse_str;
use iosched_fio::RunReport;
use iosched_sim::{run, SimConfig};
use std::path::Path;

/// `(name, value)` pairs as the simulator's settings take them.
pub fn owned(settings: &[(&str, &str)]) -> Vec<(String, String)> {
    settings
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// Runs job file text `jobs` under `config` (its defaults otherwise).
pub fn simulate(jobs: &str, config: SimConfig) -> RunReport {
    let file = parse_str(jobs, "t.fio", Path::new("."), &|_| None).unwrap();
    run(&config, &file).unwrap()
}

/// A counter of the report's, 0 when absent.
pub fn counter(report: &RunReport, name: &str) -> f64 {
    report
        .device_counters
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0.0, |(_, v)| *v)
}

//! # iosched-lab
//!
//! The studies iosched runs, for every front end (the `iosched` command, the Python package,
//! a notebook) to call the same code:
//!
//! - [`setup`]: the simulated setup every study shares, and the cgroup settings' parsers;
//! - [`matrix`]: the same jobs under several policies, over a swept parameter, on all cores;
//! - [`experiment`]: the reproducible experiments, one folder per claim, and their checks;
//! - [`calibrate`]: the device models against their calibration targets;
//! - [`isolation`]: which policy protected the foreground job, at what cost to the rest;
//! - [`frontier`]: the real-device study (the kernel's schedulers and iosched's policies,
//!   each placed on the device's latency curve);
//! - [`sweep`]: grids of configurations (any setting, policy, device parameter, job variable,
//!   workload, seed) run point by point into one tidy table;
//! - [`progress`]: how a study reports its progress (the lab itself prints nothing).
//!
//! A study returns an [`iosched_report::study::Study`] (or its own figures); drawing it is
//! `iosched_report`'s job.

pub mod calibrate;
pub mod experiment;
pub mod export;
pub mod frontier;
pub mod isolation;
pub mod matrix;
pub mod progress;
pub mod setup;
pub mod sweep;

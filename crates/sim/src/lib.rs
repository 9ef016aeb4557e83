//! # iosched-sim
//!
//! A deterministic discrete-event simulator: fio jobs generate requests, an
//! [`Elevator`](iosched_core::Elevator) schedules them, a calibrated [`device`] model serves
//! them, and every completion is measured as fio measures it. One `u64` seed reproduces a run
//! byte for byte.
//!
//! ```
//! use iosched_fio::{Amount, JobFile, JobSpec, RwMode};
//! use iosched_sim::{run, SimConfig};
//!
//! let mut job = JobSpec::new("reader");
//! job.rw = RwMode::RandRead;
//! job.size = Some(Amount::Bytes(64 << 20));
//! job.io_size = Some(1 << 20);
//! let file = JobFile { jobs: vec![job], ..JobFile::default() };
//! let config = SimConfig { device: "fixed".into(), ..SimConfig::default() };
//! let report = run(&config, &file).unwrap();
//! assert_eq!(report.jobs[0].dirs[0].total_ios, 256);
//! ```

#![warn(missing_docs)]

pub mod device;
pub mod engine;
pub mod event;
mod horizon;
pub mod host;
pub mod layout;

pub use engine::{run, GroupSetting, SimConfig, Simulation, TraceEntry, HOST_TUNABLES};
/// The seeded generators and fio's workload generator live in the fio crate, shared with the
/// real engine; re-exported here under their former paths.
pub use iosched_fio::{random, workload};

use iosched_fio::JobSpec;
use std::fmt;

/// A simulation could not be set up or did not finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimError {
    message: String,
}

impl SimError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        SimError {
            message: message.into(),
        }
    }

    /// An error about `job`, prefixed with its location and name.
    pub fn job(job: &JobSpec, message: &str) -> Self {
        let place = if job.location.line > 0 {
            format!("{}: ", job.location)
        } else {
            String::new()
        };
        SimError {
            message: format!("{place}job {:?}: {message}", job.name),
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SimError {}

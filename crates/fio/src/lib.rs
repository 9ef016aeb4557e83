//! # iosched-fio
//!
//! fio's language in and out: job files are parsed into typed [`JobSpec`]s (with `[global]`
//! inheritance, `include`, `${ENV}` expansion, fio's size and time suffixes and ranges), and
//! results are written as fio's normal text and JSON, so that existing fio tooling reads them.
//! The measurement types ([`stats`]) live here too, shared by the simulator and the real engine,
//! and so does the [`workload`] generator that draws each job's I/O as fio does (with its
//! seeded [`random`] streams): both engines run the same jobs from the same description.

#![warn(missing_docs)]

pub mod driver;
pub mod job;
pub mod output;
pub mod parse;
mod prefetch;
pub mod random;
pub mod report;
pub mod stats;
pub mod steady;
pub mod trace;
pub mod workload;
pub mod zbd;

pub use job::{
    Amount, BlockSize, CmdPrio, CmdPrioShare, DataDir, Engine, ErrorHandling, ErrorKind, ExitWhat,
    Flow, JobFile, JobSpec, LatencyTarget, Location, Note, RwMode, SyncFileRange, Verify,
};
pub use report::{DiskAccounting, DiskUtil, Parameter, RunReport};
pub use stats::{DirStats, JobResult, Latency, TimeSeries};

//! # iosched-fio
//!
//! fio's language in and out: job files are parsed into typed [`JobSpec`]s (with `[global]`
//! inheritance, `include`, `${ENV}` expansion, fio's size and time suffixes and ranges), and
//! results are written as fio's normal text and JSON, so that existing fio tooling reads them.
//! The measurement types ([`stats`]) live here too, shared by the simulator and the real engine.

#![warn(missing_docs)]

pub mod job;
pub mod output;
pub mod parse;
pub mod report;
pub mod stats;

pub use job::{Amount, BlockSize, DataDir, Engine, JobFile, JobSpec, Location, Note, RwMode};
pub use report::{DiskUtil, Parameter, RunReport};
pub use stats::{DirStats, JobResult, Latency, TimeSeries};

//! # iosched-uring
//!
//! The real engine: the same policies that run in the simulator schedule real reads and writes
//! on a file or block device, through io_uring.
//!
//! - [`run`] runs a parsed fio job file ([`iosched_fio::JobFile`]) and fills the same
//!   [`RunReport`](iosched_fio::RunReport) the simulator fills, so `iosched_fio::output`
//!   renders fio's normal text and JSON from a real run.
//! - [`Scheduler`] schedules an application's own I/O on a file or device: threads submit
//!   requests with a flow, a group and a priority, and get completions back (see the
//!   [`scheduler`] module and `examples/scheduled_app.rs`).
//!
//! # Design
//!
//! One thread drives one ring for every job, because one scheduler orders them all. Requests
//! enter an [`Elevator`](iosched_core::Elevator) (the policy with Linux's queue limits); the
//! engine keeps at most a *device depth* of them in flight on the ring, puts each request's
//! class and level in its SQE's `ioprio`, feeds completions back with monotonic timestamps,
//! and honours a policy's `WaitUntil(t)` by sleeping in `io_uring_enter` with a timeout (see
//! the `ring` module). Buffers are aligned to 4096 bytes for `O_DIRECT`; `direct=0` jobs use
//! the page cache.
//!
//! The crate depends on `iosched-core` (policies) and `iosched-fio` (job descriptions, the
//! workload generator and the result types), never on the simulator.

#![warn(missing_docs)]

pub mod buffer;
pub mod engine;
mod error;
mod files;
mod ids;
mod ring;
pub mod scheduler;
pub mod sqe;
pub mod verify;

pub use buffer::AlignedBuf;
pub use engine::{device_depth, run, run_with_policy, Outcome, UringConfig, DEFAULT_DEVICE_DEPTH};
pub use error::{JobError, UringError};
pub use scheduler::{
    Client, Completion, IoRequest, SchedFile, Scheduler, SchedulerConfig, SchedulerStats,
    SubmitError, Ticket, WeakSchedFile, FILES_MAX, FILE_SPAN,
};

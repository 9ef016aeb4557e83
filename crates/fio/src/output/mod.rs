//! fio-compatible output: fio's "normal" text and its JSON, following fio 3.33 (in progress).
//!
//! Output is a pure function of a [`RunReport`](crate::RunReport): no clock, pid or host is
//! read, so a simulated run's output is byte-for-byte the same for the same seed.

pub mod format;

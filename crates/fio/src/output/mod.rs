//! fio-compatible output: fio's "normal" text and its JSON, following fio 3.33 (in progress).
//!
//! Output is a pure function of a [`RunReport`](crate::RunReport): no clock, pid or host is
//! read, so a simulated run's output is byte-for-byte the same for the same seed.
//!
//! [`group::reported_jobs`] turns the report's jobs into fio's reported entries, merging the
//! jobs of a group when `group_reporting` is set, and [`group::group_runs`] sums each reporting
//! group for "Run status group N" and for the share of the group's bandwidth.

pub mod format;
pub mod group;

//! fio-compatible output: fio's JSON ([`json()`], [`json_plus`], printed in fio's layout by
//! [`render`]), following fio 3.33; fio's normal text is in progress.
//!
//! Output is a pure function of a [`RunReport`](crate::RunReport): no clock, pid or host is
//! read, so a simulated run's output is byte-for-byte the same for the same seed. Where fio
//! prints a date we print the Unix epoch.
//!
//! The steps:
//! 1. [`group::reported_jobs`] turns the report's jobs into fio's reported entries, merging the
//!    jobs of a group when `group_reporting` is set;
//! 2. [`group::group_runs`] sums each reporting group for "Run status group N" and for the
//!    share of the group's bandwidth (`bw_agg`, `per=`);
//! 3. each format prints the entries, the groups and the device's counters.

pub mod format;
pub mod group;
pub mod json;

pub use json::{json, json_plus, json_string, render};

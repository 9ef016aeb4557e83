//! fio-compatible output: fio's "normal" text ([`normal()`]) and its JSON ([`json()`],
//! [`json_plus`], printed in fio's layout by [`render`]), following fio 3.33.
//!
//! Both are pure functions of a [`RunReport`](crate::RunReport): no clock, pid or host is read,
//! so a simulated run's output is byte-for-byte the same for the same seed. Where fio prints
//! a date or a pid we print the Unix epoch and 0.
//!
//! The steps, shared by both formats:
//! 1. [`group::reported_jobs`] turns the report's jobs into fio's reported entries, merging the
//!    jobs of a group when `group_reporting` is set;
//! 2. [`group::group_runs`] sums each reporting group for "Run status group N" and for the
//!    share of the group's bandwidth (`bw_agg`, `per=`);
//! 3. each format prints the entries, the groups and the device's counters.
//!
//! ```
//! use iosched_core::IoPrio;
//! use iosched_fio::output;
//! use iosched_fio::stats::{DirStats, JobResult, DEFAULT_SAMPLE_INTERVAL, IODEPTH_LEVELS};
//! use iosched_fio::{DataDir, DiskUtil, RunReport};
//!
//! let mut job = JobResult {
//!     name: "reader".into(),
//!     group_id: 0,
//!     clone: 0,
//!     numjobs: 1,
//!     group_reporting: false,
//!     options: vec![("rw".into(), "randread".into())],
//!     percentile_list: iosched_fio::job::DEFAULT_PERCENTILES.to_vec(),
//!     dirs: [0, 1, 2].map(|_| DirStats::new(DEFAULT_SAMPLE_INTERVAL)),
//!     sync: Default::default(),
//!     runtime: 1_000_000_000,
//!     measure_start: 0,
//!     iodepth_levels: [0; IODEPTH_LEVELS],
//!     error: 0,
//!     error_message: None,
//!     counts_errors: false,
//!     total_err: 0,
//!     first_error: 0,
//!     zone_resets: 0,
//!     steadystate: None,
//!     logs: Default::default(),
//!     log: None,
//!     iolog: None,
//!     device_time: 0,
//!     charts: true,
//! };
//! // One 4 KiB read every millisecond, each taking 800 us.
//! for i in 0..1000u64 {
//!     job.dirs[DataDir::Read as usize].record(4096, None, 800_000, IoPrio::NONE, i * 1_000_000);
//!     job.iodepth_levels[0] += 1;
//! }
//! let report = RunReport {
//!     engine: "sim".into(),
//!     seed: Some(1),
//!     policy: "noop".into(),
//!     tunables: vec![],
//!     device: "ssd".into(),
//!     device_parameters: vec![],
//!     jobs: vec![job],
//!     disk: DiskUtil { name: "sim0".into(), ..Default::default() },
//!     device_counters: vec![],
//!     notes: vec![],
//!     duration: 1_000_000_000,
//!     started_ms: None,
//!     global_options: Vec::new(),
//! };
//! let json = output::json(&report);
//! assert_eq!(json["jobs"][0]["read"]["bw"], 4000); // KiB/s
//! assert_eq!(json["jobs"][0]["read"]["clat_ns"]["percentile"]["99.990000"], 800_000);
//! assert!(output::normal(&report).contains("  read: IOPS=1000, BW=4000KiB/s (4096kB/s)"));
//! ```

pub mod file;
pub mod format;
pub mod group;
pub mod json;
pub mod logs;
pub mod normal;

pub use json::{json, json_plus, json_string, render};
pub use normal::normal;

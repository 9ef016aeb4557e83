//! iosched's own job options: QoS stated in units for the policies that take it (`pclock`,
//! `htbs`, `mclock`), one option per [`iosched_core::qos::QOS_SETTINGS`] entry:
//!
//! | option            | what                                   | e.g.            |
//! |-------------------|----------------------------------------|-----------------|
//! | `qos_rate`        | guaranteed rate (pClock's rho)         | `8800KiB/s`, `100iops` |
//! | `qos_burst`       | burst above the rate (sigma)           | `4`, `64KiB`    |
//! | `qos_delay`       | latency bound within the rate (delta)  | `100ms`         |
//! | `qos_reservation` | mClock's minimum rate                  | `250iops`       |
//! | `qos_weight`      | mClock's share of the spare capacity   | `2`             |
//! | `qos_limit`       | mClock's maximum rate                  | `500iops`       |
//!
//! And `dontneed_every` (a size, e.g. `16m`): after every so many bytes of the job's I/O,
//! `posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)` on each of its files, as seed 000's
//! "buf-fadv" antagonists drop their cache every 16 MB: dirty pages are written back (by the
//! job, asynchronously) and clean ones dropped; 0, the default, never.
//!
//! And the trace options beside fio's `read_iolog` ([`crate::trace::replay`]):
//! `iolog_format` (`iolog`, `blktrace`, `msr`, `spc`, `blkparse`; told from the trace's first
//! bytes when not given), `iolog_flow` (replay only this flow's records: `pid:1234`,
//! `disk:web_0`, `asu:1`, `file:NAME`) and `replay_mode` (`fio`, the default, `open` or
//! `closed`).
//!
//! The QoS options read as the cgroup files `qos.rate`, ... read ([`iosched_core::Qos::set`]), and apply
//! to the job alone: each job (each `numjobs` clone) is a flow of its own with these settings.
//! A job in a cgroup that states QoS of its own takes the cgroup's. fio does not know these
//! options and refuses a job file that uses them ("Bad option"); iosched refuses them nowhere,
//! and notes them under a policy that does not use QoS.

use super::table::{FioOption, Kind, Scope};

/// A text option of iosched's.
const fn qos_option(name: &'static str) -> FioOption {
    FioOption {
        name,
        alias: None,
        kind: Kind::StrStore,
        default: None,
        min: None,
        max: None,
        float_range: None,
        time_unit: None,
        directions: 1,
        choices: &[],
        scope: Scope::General,
    }
}

/// iosched's options beside fio's; names never clash with fio's (a test checks it).
pub(super) static IOSCHED_OPTIONS: &[FioOption] = &[
    qos_option("qos_rate"),
    qos_option("qos_burst"),
    qos_option("qos_delay"),
    qos_option("qos_reservation"),
    qos_option("qos_weight"),
    qos_option("qos_limit"),
    FioOption {
        name: "dontneed_every",
        alias: None,
        kind: Kind::StrVal,
        default: None,
        min: Some(0),
        max: None,
        float_range: None,
        time_unit: None,
        directions: 1,
        choices: &[],
        scope: Scope::General,
    },
    qos_option("iolog_format"),
    qos_option("iolog_flow"),
    qos_option("replay_mode"),
];

//! A whole run's results, ready for fio-compatible output.

use crate::stats::JobResult;
use iosched_core::Nanos;

/// A named parameter of a device or policy, with unit and where its value comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameter {
    /// Name, settable with `--device-set NAME=VALUE` or `--set NAME=VALUE`.
    pub name: String,
    /// Value as text.
    pub value: String,
    /// Unit (`ms`, `MB/s`, ...), empty if none.
    pub unit: String,
    /// Meaning and source of the value.
    pub note: String,
}

/// The device's counters for fio's "Disk stats" section (`disk_util` in JSON).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiskUtil {
    /// Device name.
    pub name: String,
    /// Read commands completed by the device.
    pub read_ios: u64,
    /// Write commands completed (flushes and discards included).
    pub write_ios: u64,
    /// Reads merged before reaching the device.
    pub read_merges: u64,
    /// Writes merged before reaching the device.
    pub write_merges: u64,
    /// Sum of read command times in the device, ms.
    pub read_ticks: u64,
    /// Sum of write command times in the device, ms.
    pub write_ticks: u64,
    /// Sum over time of commands in the device, ms (as /proc/diskstats' weighted time).
    pub in_queue: u64,
    /// Percent of the run during which the device had work.
    pub util: f64,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// "sim" or the real engine's name.
    pub engine: String,
    /// The seed that reproduces a simulated run.
    pub seed: Option<u64>,
    /// Policy name.
    pub policy: String,
    /// Policy and queue tunables in force.
    pub tunables: Vec<Parameter>,
    /// Device model name.
    pub device: String,
    /// Device parameters, given and derived.
    pub device_parameters: Vec<Parameter>,
    /// Per-job results, in job order.
    pub jobs: Vec<JobResult>,
    /// Device counters.
    pub disk: DiskUtil,
    /// Extra device counters (seeks, cache hits...), name and value.
    pub device_counters: Vec<(String, f64)>,
    /// Notes on options without effect, and other remarks.
    pub notes: Vec<String>,
    /// Total (simulated) time of the run.
    pub duration: Nanos,
}

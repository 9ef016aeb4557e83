//! A whole run's results, ready for fio-compatible output.

use crate::stats::JobResult;
use iosched_core::{Direction, Elevator, Nanos};

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

/// The device counters an engine keeps as `/proc/diskstats` keeps them, from which it reports
/// [`DiskUtil`]: commands in the device over time, busy time, completions, service time and
/// merges per direction.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiskAccounting {
    in_device: u64,
    last_change: Nanos,
    busy_since: Nanos,
    busy: Nanos,
    in_queue_area: u128,
    ios: [u64; 2],
    ticks: [Nanos; 2],
    merges: [u64; 2],
}

impl DiskAccounting {
    /// Empty counters.
    pub fn new() -> Self {
        Self::default()
    }

    fn advance(&mut self, now: Nanos) {
        self.in_queue_area +=
            u128::from(self.in_device) * u128::from(now.saturating_sub(self.last_change));
        self.last_change = now;
    }

    /// A command entered the device at `now`.
    pub fn dispatched(&mut self, now: Nanos) {
        self.advance(now);
        if self.in_device == 0 {
            self.busy_since = now;
        }
        self.in_device += 1;
    }

    /// A command of direction `dir` that spent `service` in the device left it; the engine
    /// noticed at `now`.
    pub fn completed(&mut self, now: Nanos, dir: Direction, service: Nanos) {
        self.advance(now);
        self.in_device -= 1;
        if self.in_device == 0 {
            self.busy += now.saturating_sub(self.busy_since);
        }
        self.ios[dir as usize] += 1;
        self.ticks[dir as usize] += service;
    }

    /// A request of direction `dir` merged into one already queued.
    pub fn merged(&mut self, dir: Direction) {
        self.merges[dir as usize] += 1;
    }

    /// The counters for a run of `duration`, for device `name`.
    pub fn util(&self, name: &str, duration: Nanos) -> DiskUtil {
        let util = if duration > 0 {
            self.busy as f64 * 100.0 / duration as f64
        } else {
            0.0
        };
        let milliseconds = |nanos: Nanos| nanos / 1_000_000;
        DiskUtil {
            name: name.to_string(),
            read_ios: self.ios[0],
            write_ios: self.ios[1],
            read_merges: self.merges[0],
            write_merges: self.merges[1],
            read_ticks: milliseconds(self.ticks[0]),
            write_ticks: milliseconds(self.ticks[1]),
            in_queue: (self.in_queue_area / 1_000_000) as u64,
            util,
        }
    }
}

/// The queue and policy tunables in force in `elevator`, as report parameters, then the
/// policy's text settings (a meta-policy's list of policies).
pub fn tunable_parameters(elevator: &Elevator) -> Vec<Parameter> {
    let mut parameters: Vec<Parameter> = elevator
        .tunables()
        .into_iter()
        .map(|(spec, value)| Parameter {
            name: spec.name.to_string(),
            value: value.to_string(),
            unit: spec.unit.symbol().to_string(),
            note: spec.doc.to_string(),
        })
        .collect();
    parameters.extend(
        elevator
            .policy()
            .text_settings()
            .into_iter()
            .map(|(name, value)| Parameter {
                name: name.to_string(),
                value,
                unit: String::new(),
                note: String::new(),
            }),
    );
    parameters
}

/// The elevator's counters as report counters (`scheduler_inserted`, `_merged`,
/// `_dispatched`, `_full_waits`, `_depth_limited`), then the policy's own
/// ([`Policy::counters`]).
///
/// [`Policy::counters`]: iosched_core::Policy::counters
pub fn scheduler_counters(elevator: &Elevator) -> Vec<(String, f64)> {
    let stats = elevator.stats();
    let mut counters = vec![
        ("scheduler_inserted".to_string(), stats.inserted as f64),
        ("scheduler_merged".to_string(), stats.merged as f64),
        ("scheduler_dispatched".to_string(), stats.dispatched as f64),
        ("scheduler_full_waits".to_string(), stats.full as f64),
        ("scheduler_depth_limited".to_string(), stats.limited as f64),
    ];
    counters.extend(
        elevator
            .policy()
            .counters()
            .into_iter()
            .map(|(name, value)| (name.to_string(), value)),
    );
    if let Some(stage) = elevator.stage() {
        counters.extend(
            stage
                .counters()
                .into_iter()
                .map(|(name, value)| (format!("{}_{name}", stage.name()), value)),
        );
    }
    counters
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
    /// When the run started, ms since the Unix epoch (fio's `timestamp_ms` and the jobs'
    /// start date); `None`: not recorded, printed as the epoch. Set by whoever launched the
    /// run, which knows the wall clock (engines do not read it).
    pub started_ms: Option<u64>,
    /// The options of the job file's `[global]` sections (fio's "global options").
    pub global_options: Vec<(String, String)>,
}

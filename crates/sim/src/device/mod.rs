//! Device models: what happens to a command after the scheduler dispatched it.
//!
//! # Protocol
//!
//! A device is a state machine driven by the event loop:
//!
//! 1. [`Device::submit`] hands it a command at `now` (only while
//!    `in_flight() < queue_depth()`). The device queues it internally and may reorder it, as
//!    drive firmware does.
//! 2. [`Device::next_event`] tells when something next happens inside: a command completes, a
//!    seek ends, read-ahead or destaging makes progress. The event loop schedules a wake-up then.
//! 3. [`Device::advance`] moves the device to `now`, processing every internal event up to and
//!    including `now`, and reports the commands that finished with their completion times.
//!
//! The event loop calls `advance(now)` before each `submit(now)`, so a device never sees time go
//! backwards. Devices may draw random numbers only from the seed they were built with.

pub mod fixed;
pub mod hdd;
pub mod ssd;

use iosched_core::{Nanos, Request};
use iosched_fio::Parameter;
use std::fmt;

/// A simulated storage device.
pub trait Device: Send {
    /// Model name as `--device` takes it.
    fn model(&self) -> &'static str;

    /// Capacity in bytes.
    fn capacity(&self) -> u64;

    /// Most commands the device holds at once (its NCQ / submission queue depth).
    fn queue_depth(&self) -> u32;

    /// Commands accepted and not yet completed.
    fn in_flight(&self) -> u32;

    /// Accepts `request` at `now`. Requires `in_flight() < queue_depth()`.
    fn submit(&mut self, request: Request, now: Nanos);

    /// When the next internal event happens, if any is pending.
    fn next_event(&self) -> Option<Nanos>;

    /// Processes every internal event at or before `now`, appending finished commands to `done`
    /// with their completion times, in completion order.
    fn advance(&mut self, now: Nanos, done: &mut Vec<(Nanos, Request)>);

    /// Every parameter, given and derived, with unit and source.
    fn parameters(&self) -> Vec<Parameter>;

    /// Internal counters (seeks, cache hits, ...), name and value.
    fn counters(&self) -> Vec<(String, f64)>;
}

/// A device could not be built as asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// No model of that name.
    UnknownModel(String),
    /// No parameter of that name for the model.
    UnknownParameter {
        /// The model.
        model: String,
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: Vec<String>,
    },
    /// A value that is not valid for the parameter.
    BadValue {
        /// The parameter.
        name: String,
        /// The text given.
        value: String,
        /// Why it was refused.
        reason: String,
    },
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::UnknownModel(model) => {
                let known: Vec<&str> = catalog().iter().map(|m| m.name).collect();
                write!(
                    f,
                    "unknown device model {model:?}; known: {}",
                    known.join(", ")
                )
            }
            DeviceError::UnknownParameter { model, name, known } => {
                write!(
                    f,
                    "device {model} has no parameter {name:?}; known: {}",
                    known.join(", ")
                )
            }
            DeviceError::BadValue {
                name,
                value,
                reason,
            } => {
                write!(f, "device parameter {name}: bad value {value:?}: {reason}")
            }
        }
    }
}

impl std::error::Error for DeviceError {}

/// Builds a model with `settings` (name, value) applied over its defaults, seeded.
pub type BuildFn =
    fn(settings: &[(String, String)], seed: u64) -> Result<Box<dyn Device>, DeviceError>;

/// A device model's entry in the catalog.
pub struct ModelInfo {
    /// Name as `--device` takes it.
    pub name: &'static str,
    /// One line on what it models.
    pub summary: &'static str,
    /// Builds the model with `settings` (name, value) applied over its defaults, seeded.
    pub build: BuildFn,
}

static CATALOG: &[ModelInfo] = &[
    ModelInfo {
        name: "fixed",
        summary: "every command takes a fixed time, `parallelism` at once (for tests and teaching)",
        build: |settings, _seed| Ok(Box::new(fixed::Fixed::from_settings(settings)?)),
    },
    ModelInfo {
        name: "hdd",
        summary: "7200 rpm SATA disk (Deskstar 7K500 class): zones, seek curve, rotation, \
                  read-ahead and write-back cache, NCQ aged SPTF",
        build: |settings, seed| Ok(Box::new(hdd::Hdd::from_settings(settings, seed)?)),
    },
    ModelInfo {
        name: "ssd",
        summary: "NVMe-class flash drive: 8 channels x 4 dies, tR 60 us, tPROG 750 us, DRAM \
                  write buffer",
        build: |settings, _seed| Ok(Box::new(ssd::Ssd::from_settings(settings)?)),
    },
];

/// Every device model.
pub fn catalog() -> &'static [ModelInfo] {
    CATALOG
}

/// Builds model `name` with `settings` over its defaults.
pub fn build(
    name: &str,
    settings: &[(String, String)],
    seed: u64,
) -> Result<Box<dyn Device>, DeviceError> {
    let info = CATALOG
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| DeviceError::UnknownModel(name.to_string()))?;
    (info.build)(settings, seed)
}

/// Parses a non-negative number for parameter `name`.
pub fn parse_number(name: &str, value: &str) -> Result<f64, DeviceError> {
    let bad = |reason: &str| DeviceError::BadValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let number: f64 = value.trim().parse().map_err(|_| bad("expected a number"))?;
    if !number.is_finite() || number < 0.0 {
        return Err(bad("expected a finite number >= 0"));
    }
    Ok(number)
}

/// Parses a whole number within `min..=max` for parameter `name`.
pub fn parse_integer(name: &str, value: &str, min: u64, max: u64) -> Result<u64, DeviceError> {
    let number: u64 = value.trim().parse().map_err(|_| DeviceError::BadValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: "expected a whole number".into(),
    })?;
    if number < min || number > max {
        return Err(DeviceError::BadValue {
            name: name.to_string(),
            value: value.to_string(),
            reason: format!("must be within {min}..={max}"),
        });
    }
    Ok(number)
}

/// Parses on/off for parameter `name`.
pub fn parse_flag(name: &str, value: &str) -> Result<bool, DeviceError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(DeviceError::BadValue {
            name: name.to_string(),
            value: value.to_string(),
            reason: "expected on or off".into(),
        }),
    }
}

/// A [`Parameter`] from parts.
pub fn parameter(name: &str, value: impl ToString, unit: &str, note: &str) -> Parameter {
    Parameter {
        name: name.into(),
        value: value.to_string(),
        unit: unit.into(),
        note: note.into(),
    }
}

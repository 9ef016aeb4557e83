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

    /// Whether the host may send `request` now: room in the queue, by default. A SATA drive
    /// takes a non-queued command (FLUSH CACHE) only once its queue is empty, and nothing while
    /// one runs (libata's `ata_std_qc_defer`); a refused request goes back to the scheduler.
    fn accepts(&self, request: &Request) -> bool {
        let _ = request;
        self.in_flight() < self.queue_depth()
    }

    /// Accepts `request` at `now`. Requires `accepts(&request)`.
    fn submit(&mut self, request: Request, now: Nanos);

    /// When the next internal event happens, if any is pending.
    fn next_event(&self) -> Option<Nanos>;

    /// Processes every internal event at or before `now`, appending finished commands to `done`
    /// with their completion times, in completion order.
    fn advance(&mut self, now: Nanos, done: &mut Vec<(Nanos, Request)>);

    /// The errno `request` completed with, if it failed (a command aborted by its duration
    /// limit: ETIME). Asked once for each command `advance` just reported, before the next
    /// `advance`.
    fn completion_error(&mut self, request: &Request) -> Option<i32> {
        let _ = request;
        None
    }

    /// The read-ahead the device's driver sets for its queue, when it sets one
    /// (`/sys/block/X/queue/read_ahead_kb`); `None` leaves the block layer's default.
    fn read_ahead_kb(&self) -> Option<u64> {
        None
    }

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
    /// A derived parameter (shown by `iosched devices`), which follows from others.
    Derived {
        /// The model.
        model: String,
        /// The derived parameter asked for.
        name: String,
        /// How it is derived.
        note: String,
        /// The settable parameters it follows from.
        from: Vec<&'static str>,
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
                    "unknown device model {}; known: {}",
                    iosched_core::limits::quote(model),
                    known.join(", ")
                )
            }
            DeviceError::UnknownParameter { model, name, known } => {
                write!(
                    f,
                    "device {model} has no parameter {}; known: {}",
                    iosched_core::limits::quote(name),
                    known.join(", ")
                )
            }
            DeviceError::Derived {
                model,
                name,
                note,
                from,
            } => {
                write!(
                    f,
                    "device {model}: {name} is derived, not set ({note}); it follows from {}: \
                     set those instead (--device-set NAME=VALUE; `iosched devices {model}` \
                     lists every parameter)",
                    from.join(", ")
                )
            }
            DeviceError::BadValue {
                name,
                value,
                reason,
            } => {
                let value = iosched_core::limits::quote(value);
                write!(f, "device parameter {name}: bad value {value}: {reason}")
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
    /// Each derived parameter (shown by `iosched devices`, not settable) and the settable
    /// parameters it follows from, so that asking to set it can say what to set instead.
    pub derived_from: &'static [(&'static str, &'static [&'static str])],
}

/// Every device model module, in the order `iosched devices` lists them: adding a model is its
/// file (with its `MODEL`) and one line in `register!` below.
macro_rules! register {
    ($($module:ident,)*) => {
        $(pub mod $module;)*

        /// Every device model.
        pub fn catalog() -> &'static [&'static ModelInfo] {
            static CATALOG: &[&ModelInfo] = &[$(&$module::MODEL),*];
            CATALOG
        }
    };
}

register! {
    fixed,
    hdd,
    ssd,
    he8,
    hd080hj,
    maxtor20,
    raid0,
}

/// Builds model `name` with `settings` over its defaults.
pub fn build(
    name: &str,
    settings: &[(String, String)],
    seed: u64,
) -> Result<Box<dyn Device>, DeviceError> {
    let info = catalog()
        .iter()
        .copied()
        .find(|m| m.name == name)
        .ok_or_else(|| DeviceError::UnknownModel(name.to_string()))?;
    (info.build)(settings, seed).map_err(|error| match error {
        DeviceError::UnknownParameter { model, name, known } => {
            derived(info, &name).unwrap_or(DeviceError::UnknownParameter { model, name, known })
        }
        other => other,
    })
}

/// The error for asking to set `name` when it is one of the model's derived parameters.
fn derived(info: &ModelInfo, name: &str) -> Option<DeviceError> {
    let zone = name
        .strip_prefix("zone_")
        .is_some_and(|n| n.parse::<u32>().is_ok());
    let key = if zone { "zone_N" } else { name };
    let (_, from) = info
        .derived_from
        .iter()
        .find(|(derived, _)| *derived == key)?;
    let note = (info.build)(&[], 0)
        .ok()?
        .parameters()
        .into_iter()
        .find(|p| p.name == name)
        .map_or_else(String::new, |p| p.note);
    Some(DeviceError::Derived {
        model: info.name.to_string(),
        name: name.to_string(),
        note,
        from: from.to_vec(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settable(info: &ModelInfo) -> Vec<String> {
        match (info.build)(&[("no_such_parameter".into(), "1".into())], 0) {
            Err(DeviceError::UnknownParameter { known, .. }) => known,
            Err(other) => panic!("{}: {other}", info.name),
            Ok(_) => panic!("{}: an unknown parameter was accepted", info.name),
        }
    }

    // Regression (issue 11, item 6): every derived parameter a model shows says what it
    // follows from, and those are settable, so asking to set it names what to set instead.
    #[test]
    fn derived_parameters_name_their_sources() {
        for info in catalog() {
            let settable = settable(info);
            let device = (info.build)(&[], 0).unwrap();
            for parameter in device.parameters() {
                if !parameter.note.starts_with("derived") {
                    assert!(settable.contains(&parameter.name), "{}", parameter.name);
                    continue;
                }
                let error = build(info.name, &[(parameter.name.clone(), "1".into())], 0)
                    .err()
                    .unwrap_or_else(|| panic!("{} was accepted", parameter.name));
                let DeviceError::Derived { from, .. } = &error else {
                    panic!("{}: {error}", parameter.name);
                };
                assert!(!from.is_empty(), "{}", parameter.name);
                for source in from {
                    assert!(settable.iter().any(|s| s == source), "{source}");
                }
                let text = error.to_string();
                assert!(text.contains("is derived, not set"), "{text}");
                assert!(text.contains(from[0]), "{text}");
            }
        }
    }
}

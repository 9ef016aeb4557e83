//! Named, unit-bearing tunables, set by name like the files under `/sys/block/X/queue/iosched/`.
//!
//! Each policy publishes a static table of [`TunableSpec`]s. Values are integers in the unit the
//! spec names (milliseconds for `read_expire`, requests for `fifo_batch`), as the kernel's sysfs
//! files are; [`TunableSpec::parse`] also accepts a value with an explicit unit suffix.

use std::fmt;

/// The unit a tunable's integer value is expressed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds of time.
    Milliseconds,
    /// Microseconds of time.
    Microseconds,
    /// Nanoseconds of time (kyber's `read_lat_nsec`).
    Nanoseconds,
    /// A number of requests.
    Requests,
    /// Kibibytes (1024 bytes).
    Kibibytes,
    /// Bytes.
    Bytes,
    /// A plain count or ratio.
    Count,
    /// 0 (off) or 1 (on).
    Flag,
}

impl Unit {
    /// Short unit name for listings.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Milliseconds => "ms",
            Unit::Microseconds => "us",
            Unit::Nanoseconds => "ns",
            Unit::Requests => "requests",
            Unit::Kibibytes => "KiB",
            Unit::Bytes => "bytes",
            Unit::Count => "count",
            Unit::Flag => "0/1",
        }
    }
}

/// The description of one tunable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunableSpec {
    /// Name as it appears in sysfs and on the command line (`--set read_expire=250`).
    pub name: &'static str,
    /// Unit of the integer value.
    pub unit: Unit,
    /// Value a new policy starts with.
    pub default: u64,
    /// Smallest accepted value.
    pub min: u64,
    /// Largest accepted value.
    pub max: u64,
    /// What it bounds or changes, in one sentence.
    pub doc: &'static str,
}

/// A tunable could not be set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TunableError {
    /// No tunable of that name; lists the names that exist.
    Unknown {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: Vec<&'static str>,
    },
    /// The text is not a value of the tunable's unit.
    BadValue {
        /// The tunable.
        name: &'static str,
        /// The text given.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// The value is outside the tunable's range.
    OutOfRange {
        /// The tunable.
        name: &'static str,
        /// The value given.
        value: u64,
        /// Smallest accepted.
        min: u64,
        /// Largest accepted.
        max: u64,
    },
}

impl fmt::Display for TunableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TunableError::Unknown { name, known } => {
                let name = crate::limits::quote(name);
                write!(f, "unknown tunable {name}; known: {}", known.join(", "))
            }
            TunableError::BadValue {
                name,
                value,
                reason,
            } => {
                let value = crate::limits::quote(value);
                write!(f, "tunable {name}: bad value {value}: {reason}")
            }
            TunableError::OutOfRange {
                name,
                value,
                min,
                max,
            } => {
                write!(f, "tunable {name}: value {value} is outside {min}..={max}")
            }
        }
    }
}

impl std::error::Error for TunableError {}

impl TunableSpec {
    /// Parses `text` as a value of this tunable: a bare integer in the tunable's unit, or for
    /// time units an integer with `ns`, `us`, `ms` or `s`, for sizes with `k`, `m`, `g` (powers of
    /// 1024), and for flags also `on`/`off`/`true`/`false`. The result is range-checked.
    pub fn parse(&self, text: &str) -> Result<u64, TunableError> {
        let bad = |reason: &str| TunableError::BadValue {
            name: self.name,
            value: text.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = text.trim();
        let value = match self.unit {
            Unit::Flag => match trimmed.to_ascii_lowercase().as_str() {
                "1" | "on" | "true" | "yes" => 1,
                "0" | "off" | "false" | "no" => 0,
                _ => return Err(bad("expected 0 or 1")),
            },
            Unit::Milliseconds | Unit::Microseconds | Unit::Nanoseconds => {
                let (digits, suffix) = split_number(trimmed);
                let number: u64 = digits.parse().map_err(|_| bad("expected a whole number"))?;
                let unit_nanos: u64 = match self.unit {
                    Unit::Milliseconds => 1_000_000,
                    Unit::Microseconds => 1_000,
                    _ => 1,
                };
                let nanos_per_unit: u64 = match suffix.to_ascii_lowercase().as_str() {
                    "" => unit_nanos,
                    "ns" | "nsec" => 1,
                    "us" | "usec" => 1_000,
                    "ms" | "msec" => 1_000_000,
                    "s" | "sec" => 1_000_000_000,
                    _ => return Err(bad("unknown time suffix; use ns, us, ms or s")),
                };
                let nanos = number
                    .checked_mul(nanos_per_unit)
                    .ok_or_else(|| bad("too large"))?;
                if nanos % unit_nanos != 0 {
                    return Err(bad(&format!(
                        "not a whole number of {}",
                        self.unit.symbol()
                    )));
                }
                nanos / unit_nanos
            }
            Unit::Kibibytes | Unit::Bytes => {
                let (digits, suffix) = split_number(trimmed);
                let number: u64 = digits.parse().map_err(|_| bad("expected a whole number"))?;
                let bytes_per_unit: u64 = match suffix.to_ascii_lowercase().as_str() {
                    "" => {
                        if self.unit == Unit::Kibibytes {
                            1024
                        } else {
                            1
                        }
                    }
                    "b" => 1,
                    "k" | "kb" | "kib" => 1 << 10,
                    "m" | "mb" | "mib" => 1 << 20,
                    "g" | "gb" | "gib" => 1 << 30,
                    _ => return Err(bad("unknown size suffix; use k, m or g")),
                };
                let unit_bytes = if self.unit == Unit::Kibibytes {
                    1024
                } else {
                    1
                };
                let bytes = number
                    .checked_mul(bytes_per_unit)
                    .ok_or_else(|| bad("too large"))?;
                if bytes % unit_bytes != 0 {
                    return Err(bad("not a whole number of KiB"));
                }
                bytes / unit_bytes
            }
            Unit::Requests | Unit::Count => trimmed
                .parse()
                .map_err(|_| bad("expected a whole number"))?,
        };
        self.check(value)
    }

    /// Checks `value` against the range.
    pub fn check(&self, value: u64) -> Result<u64, TunableError> {
        if value < self.min || value > self.max {
            return Err(TunableError::OutOfRange {
                name: self.name,
                value,
                min: self.min,
                max: self.max,
            });
        }
        Ok(value)
    }
}

fn split_number(text: &str) -> (&str, &str) {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    text.split_at(split)
}

/// Finds `name` in `specs`, or explains which names exist.
pub fn find<'a>(specs: &'a [TunableSpec], name: &str) -> Result<&'a TunableSpec, TunableError> {
    specs
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| unknown(name, specs))
}

/// The error for a name that is not among `specs`.
pub fn unknown(name: &str, specs: &[TunableSpec]) -> TunableError {
    TunableError::Unknown {
        name: name.to_string(),
        known: specs.iter().map(|s| s.name).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPIRE: TunableSpec = TunableSpec {
        name: "read_expire",
        unit: Unit::Milliseconds,
        default: 500,
        min: 0,
        max: 3_600_000,
        doc: "",
    };

    // Proves sysfs-style integers and suffixed values land in the tunable's own unit.
    #[test]
    fn parses_time_in_the_declared_unit() {
        assert_eq!(EXPIRE.parse("250").unwrap(), 250);
        assert_eq!(EXPIRE.parse("2s").unwrap(), 2000);
        assert_eq!(EXPIRE.parse("1500000us").unwrap(), 1500);
        assert!(matches!(
            EXPIRE.parse("1500us"),
            Err(TunableError::BadValue { .. })
        ));
        assert!(matches!(
            EXPIRE.parse("-1"),
            Err(TunableError::BadValue { .. })
        ));
        assert!(matches!(
            EXPIRE.parse("2h"),
            Err(TunableError::BadValue { .. })
        ));
    }

    #[test]
    fn range_and_flags() {
        let flag = TunableSpec {
            name: "front_merges",
            unit: Unit::Flag,
            default: 1,
            min: 0,
            max: 1,
            doc: "",
        };
        assert_eq!(flag.parse("off").unwrap(), 0);
        assert!(flag.parse("2").is_err());
        let batch = TunableSpec {
            name: "fifo_batch",
            unit: Unit::Requests,
            default: 16,
            min: 1,
            max: 1024,
            doc: "",
        };
        assert!(matches!(
            batch.parse("0"),
            Err(TunableError::OutOfRange { .. })
        ));
        let kb = TunableSpec {
            name: "max_sectors_kb",
            unit: Unit::Kibibytes,
            default: 1280,
            min: 4,
            max: 32768,
            doc: "",
        };
        assert_eq!(kb.parse("1m").unwrap(), 1024);
    }
}

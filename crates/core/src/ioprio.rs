//! I/O priority exactly as Linux defines it (`include/uapi/linux/ioprio.h`).
//!
//! A priority is a class, a level and a hint. The kernel packs them into one 16-bit value,
//! `(class << 13) | (hint << 3) | level`; [`IoPrio::to_raw`] and [`IoPrio::from_raw`] convert.
//! Hints (Linux 6.5+, `IOPRIO_PRIO_HINT`) travel with the request to the device: hints 1 to 7
//! select a command duration limit descriptor (`IOPRIO_HINT_DEV_DURATION_LIMIT_1..7`) on a
//! drive with CDL enabled; schedulers ignore them.

use std::fmt;

/// Scheduling class of an I/O priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IoPrioClass {
    /// No class set: the kernel derives best effort from the CPU nice value.
    None = 0,
    /// Real time: served before every other class.
    Rt = 1,
    /// Best effort: the default class.
    Be = 2,
    /// Idle: served only when nothing else wants the disk.
    Idle = 3,
}

impl IoPrioClass {
    /// The class as fio's `prioclass=` and the kernel number it (1 RT, 2 BE, 3 IDLE, 0 none).
    pub fn from_number(number: u8) -> Option<Self> {
        match number {
            0 => Some(Self::None),
            1 => Some(Self::Rt),
            2 => Some(Self::Be),
            3 => Some(Self::Idle),
            _ => None,
        }
    }

    /// Short lower-case name as `ionice` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Rt => "realtime",
            Self::Be => "best-effort",
            Self::Idle => "idle",
        }
    }
}

/// Number of levels inside the RT and BE classes (`IOPRIO_NR_LEVELS`).
pub const IOPRIO_LEVELS: u8 = 8;

/// Level the kernel gives a task with no explicit priority (nice 0 maps to level 4).
pub const IOPRIO_DEFAULT_LEVEL: u8 = 4;

/// Largest priority hint: the hint field is 10 bits wide (`IOPRIO_HINT_NR_BITS`).
pub const IOPRIO_MAX_HINT: u16 = (1 << 10) - 1;

/// An I/O priority: class, level 0 (highest) to 7 (lowest), and hint (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IoPrio {
    class: IoPrioClass,
    level: u8,
    hint: u16,
}

/// A priority value that Linux would refuse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidIoPrio {
    /// What is wrong, in words.
    pub reason: String,
}

impl fmt::Display for InvalidIoPrio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid I/O priority: {}", self.reason)
    }
}

impl std::error::Error for InvalidIoPrio {}

impl IoPrio {
    /// No priority set: behaves as best effort level 4.
    pub const NONE: IoPrio = IoPrio {
        class: IoPrioClass::None,
        level: 0,
        hint: 0,
    };

    /// A priority of `class` at `level` (0 highest .. 7 lowest). Levels are checked as
    /// `ioprio_check_cap` does: the idle class has only level 0 meaningfully, but Linux accepts
    /// and ignores any level there, so we do the same.
    pub fn new(class: IoPrioClass, level: u8) -> Result<Self, InvalidIoPrio> {
        if level >= IOPRIO_LEVELS {
            return Err(InvalidIoPrio {
                reason: format!("level {level} is outside 0..=7"),
            });
        }
        Ok(IoPrio {
            class,
            level,
            hint: 0,
        })
    }

    /// This priority with hint `hint` (0 none, 1-7 a duration limit descriptor, up to
    /// [`IOPRIO_MAX_HINT`] as fio's `priohint` accepts).
    pub fn with_hint(self, hint: u16) -> Result<Self, InvalidIoPrio> {
        if hint > IOPRIO_MAX_HINT {
            return Err(InvalidIoPrio {
                reason: format!("hint {hint} is outside 0..={IOPRIO_MAX_HINT}"),
            });
        }
        Ok(IoPrio { hint, ..self })
    }

    /// Decodes the kernel's 16-bit value `(class << 13) | (hint << 3) | level`.
    pub fn from_raw(raw: u16) -> Result<Self, InvalidIoPrio> {
        let class_number = (raw >> 13) as u8;
        let level = (raw & 0x7) as u8;
        let hint = (raw >> 3) & IOPRIO_MAX_HINT;
        let class = IoPrioClass::from_number(class_number).ok_or_else(|| InvalidIoPrio {
            reason: format!("class {class_number} is unknown"),
        })?;
        IoPrio::new(class, level)?.with_hint(hint)
    }

    /// The kernel's 16-bit encoding, as passed to `ioprio_set` or put in an SQE's `ioprio`.
    pub fn to_raw(self) -> u16 {
        ((self.class as u16) << 13) | (self.hint << 3) | self.level as u16
    }

    /// The hint as set (0: none).
    pub fn hint(self) -> u16 {
        self.hint
    }

    /// The command duration limit descriptor the hint selects, 1 to 7, if any
    /// (`IOPRIO_HINT_DEV_DURATION_LIMIT_1..7`; the kernel's `sd_cdl_dld`).
    pub fn duration_limit(self) -> Option<u8> {
        (1..=7).contains(&self.hint).then_some(self.hint as u8)
    }

    /// The class as set (may be [`IoPrioClass::None`]).
    pub fn class(self) -> IoPrioClass {
        self.class
    }

    /// The level as set.
    pub fn level(self) -> u8 {
        self.level
    }

    /// The class a scheduler acts on: "none" is treated as best effort, as the kernel does.
    pub fn effective_class(self) -> IoPrioClass {
        match self.class {
            IoPrioClass::None => IoPrioClass::Be,
            class => class,
        }
    }

    /// The level a scheduler acts on: "none" is level 4 (nice 0).
    pub fn effective_level(self) -> u8 {
        match self.class {
            IoPrioClass::None => IOPRIO_DEFAULT_LEVEL,
            _ => self.level,
        }
    }
}

impl Default for IoPrio {
    fn default() -> Self {
        IoPrio::NONE
    }
}

impl fmt::Display for IoPrio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.class {
            IoPrioClass::None => write!(f, "none")?,
            class => write!(f, "{}/{}", class.name(), self.level)?,
        }
        if self.hint != 0 {
            write!(f, " hint {}", self.hint)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the packing matches include/uapi/linux/ioprio.h for every class and level.
    #[test]
    fn raw_round_trip_matches_kernel_encoding() {
        for class in [
            IoPrioClass::None,
            IoPrioClass::Rt,
            IoPrioClass::Be,
            IoPrioClass::Idle,
        ] {
            for level in 0..IOPRIO_LEVELS {
                let prio = IoPrio::new(class, level).unwrap();
                assert_eq!(prio.to_raw(), ((class as u16) << 13) | level as u16);
                assert_eq!(IoPrio::from_raw(prio.to_raw()).unwrap(), prio);
            }
        }
        assert_eq!(IoPrio::new(IoPrioClass::Be, 4).unwrap().to_raw(), 0x4004);
    }

    #[test]
    fn rejects_out_of_range() {
        assert!(IoPrio::new(IoPrioClass::Be, 8).is_err());
        assert!(IoPrio::from_raw(4 << 13).is_err());
        assert!(IoPrio::new(IoPrioClass::Be, 0)
            .unwrap()
            .with_hint(1024)
            .is_err());
    }

    // The hint sits in bits 3..13 as include/uapi/linux/ioprio.h's IOPRIO_PRIO_HINT reads it.
    #[test]
    fn hint_round_trips_and_selects_a_duration_limit() {
        let prio = IoPrio::new(IoPrioClass::Be, 2)
            .unwrap()
            .with_hint(3)
            .unwrap();
        assert_eq!(prio.to_raw(), (2 << 13) | (3 << 3) | 2);
        assert_eq!(IoPrio::from_raw(prio.to_raw()).unwrap(), prio);
        assert_eq!(prio.duration_limit(), Some(3));
        assert_eq!(prio.with_hint(8).unwrap().duration_limit(), None);
        assert_eq!(IoPrio::NONE.duration_limit(), None);
        assert_eq!(prio.to_string(), "best-effort/2 hint 3");
    }

    #[test]
    fn none_acts_as_best_effort_four() {
        assert_eq!(IoPrio::NONE.effective_class(), IoPrioClass::Be);
        assert_eq!(IoPrio::NONE.effective_level(), 4);
    }
}

//! Command selection inside the drive (NCQ): aged shortest-positioning-time-first with a hard
//! deadline.
//!
//! Each time the mechanism is free, the firmware looks at every queued command that is ready
//! (its command overhead done) and computes its positioning time from where the head is now:
//! seek, plus write settle, plus the rotational wait until the first sector comes round. Then:
//!
//! 1. **Deadline**: a command that has waited `deadline` or longer is served first, oldest
//!    first, whatever its priority. Real drives bound starvation this way (roughly 1-4 s);
//!    it is also what keeps normal commands going when high-priority ones keep coming.
//! 2. **Priority**: otherwise only the commands of the highest [`CommandPriority`] present
//!    compete. With NCQ priority off every command is [`CommandPriority::Normal`]; with it on,
//!    the classes of `ncq_prio_classes` (RT, as libata) are [`CommandPriority::High`].
//! 3. **Aged SPTF**: among those, the command with the smallest
//!    `positioning_time - age_weight * age` goes next (DiskSim's aged SPTF). With
//!    `age_weight = 0` this is pure SPTF; large weights tend to FCFS.
//!
//! Ties go to the earliest accepted command, so the choice is deterministic.

use iosched_core::Nanos;

/// NCQ priority of a queued command (the PRIO bit of a READ/WRITE FPDMA QUEUED command).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CommandPriority {
    /// A high-priority command (NCQ PRIO bit set).
    High,
    /// An ordinary command.
    Normal,
}

/// How the firmware picks the next command.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Selection {
    /// Positioning nanoseconds forgiven per nanosecond of waiting (dimensionless).
    pub age_weight: f64,
    /// A command waiting this long is served before any other, ns.
    pub deadline: Nanos,
}

/// One command competing for the mechanism.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// Positioning time from the head's current place, ns.
    pub positioning_ns: f64,
    /// When the drive accepted the command.
    pub accepted: Nanos,
    /// Its priority.
    pub priority: CommandPriority,
}

impl Selection {
    /// Index of the candidate to serve at `now`, or `None` if there are none.
    pub fn choose(&self, candidates: &[Candidate], now: Nanos) -> Option<usize> {
        let best_priority = candidates.iter().map(|c| c.priority).min()?;
        // One pass over the competing commands: the oldest overdue one, and the best by aged
        // positioning (ties to the earliest accepted, then the first listed).
        let mut overdue: Option<(usize, Nanos)> = None;
        let mut best: Option<(usize, f64, Nanos)> = None;
        for (index, candidate) in candidates.iter().enumerate() {
            let age = now.saturating_sub(candidate.accepted);
            if age >= self.deadline && overdue.is_none_or(|(_, at)| candidate.accepted < at) {
                overdue = Some((index, candidate.accepted));
            }
            if candidate.priority != best_priority {
                continue;
            }
            let effective = candidate.positioning_ns - self.age_weight * age as f64;
            let better = match best {
                None => true,
                Some((_, best_effective, best_accepted)) => {
                    effective < best_effective
                        || (effective == best_effective && candidate.accepted < best_accepted)
                }
            };
            if better {
                best = Some((index, effective, candidate.accepted));
            }
        }
        overdue
            .map(|(index, _)| index)
            .or(best.map(|(index, _, _)| index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(positioning_ms: f64, accepted_ms: u64) -> Candidate {
        Candidate {
            positioning_ns: positioning_ms * 1e6,
            accepted: accepted_ms * 1_000_000,
            priority: CommandPriority::Normal,
        }
    }

    /// Without aging the shortest positioning time wins.
    #[test]
    fn pure_sptf_takes_the_nearest() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: u64::MAX,
        };
        let candidates = [candidate(9.0, 0), candidate(2.0, 5), candidate(4.0, 1)];
        assert_eq!(selection.choose(&candidates, 10_000_000), Some(1));
        assert_eq!(selection.choose(&[], 0), None);
    }

    /// Aging lets an old far command pass a young near one.
    #[test]
    fn aging_favours_old_commands() {
        let selection = Selection {
            age_weight: 0.01,
            deadline: u64::MAX,
        };
        // At 1000 ms: old one effective 12 - 10 = 2 ms; young one 3 - 0 = 3 ms.
        let candidates = [candidate(12.0, 0), candidate(3.0, 1000)];
        assert_eq!(selection.choose(&candidates, 1_000_000_000), Some(0));
    }

    /// Past the deadline the oldest goes first whatever its position.
    #[test]
    fn deadline_overrides_position() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: 2_000_000_000,
        };
        let candidates = [
            candidate(15.0, 500),
            candidate(0.1, 2000),
            candidate(16.0, 0),
        ];
        assert_eq!(selection.choose(&candidates, 2_600_000_000), Some(2));
    }

    /// An overdue normal command goes before a high-priority one: the deadline bounds every
    /// command's wait, so a stream of high-priority commands cannot starve normal ones.
    #[test]
    fn the_deadline_bounds_normal_commands_under_high_ones() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: 2_000_000_000,
        };
        let mut urgent = candidate(1.0, 1000);
        urgent.priority = CommandPriority::High;
        let candidates = [urgent, candidate(9.0, 0)];
        assert_eq!(selection.choose(&candidates, 2_600_000_000), Some(1));
        assert_eq!(selection.choose(&candidates, 1_900_000_000), Some(0));
    }

    /// A high-priority command competes only with its peers.
    #[test]
    fn priority_hook_filters_first() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: u64::MAX,
        };
        let mut urgent = candidate(10.0, 5);
        urgent.priority = CommandPriority::High;
        let candidates = [candidate(1.0, 0), urgent];
        assert_eq!(selection.choose(&candidates, 10_000_000), Some(1));
    }
}

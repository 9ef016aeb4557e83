//! Command selection inside the drive (NCQ): aged shortest-positioning-time-first with a hard
//! deadline.
//!
//! Each time the mechanism is free, the firmware looks at every queued command that is ready
//! (its command overhead done) and computes its positioning time from where the head is now:
//! seek, plus write settle, plus the rotational wait until the first sector comes round. Then:
//!
//! 1. **Deadline**: a command that has waited `deadline` or longer is served first, oldest
//!    first, whatever its priority; so are all of them while the caller says some command
//!    is *due* (it would miss the deadline by more than one access if every older one took
//!    its longest time first: see `Hdd::due_at`). Real drives bound starvation this way
//!    (roughly 1-4 s); it is also what keeps normal commands going when high-priority ones
//!    keep coming.
//! 2. **Aged SPTF with a priority credit**: otherwise the command with the smallest
//!    `positioning_time - age_weight * age - credit` goes next, where `credit` is
//!    `priority_credit` for a [`CommandPriority::High`] command and 0 for a normal one
//!    (DiskSim's aged SPTF, with priority blended into positioning as drives with NCQ
//!    priority do: a high command goes first unless a normal one is that much nearer). With
//!    `age_weight = 0` this is pure SPTF; large weights tend to FCFS. An infinite credit is
//!    strict priority: only the high commands compete, by aged SPTF among themselves.
//!
//! Between the two, with command duration limits (CDL): a command with an inactive limit
//! that is within `cdl_guard` of it goes before the others, earliest limit first (EDF); until
//! then it competes by aged SPTF like any command.
//!
//! With NCQ priority off every command is [`CommandPriority::Normal`]; with it on, the
//! classes of `ncq_prio_classes` (RT, as libata) are [`CommandPriority::High`].
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
    /// Positioning nanoseconds forgiven a high-priority command; infinite: strict priority.
    pub priority_credit_ns: f64,
    /// A command with an inactive limit goes first from this long before the limit, ns.
    pub cdl_guard: Nanos,
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
    /// When it must start by (a CDL inactive limit), if it must.
    pub start_by: Option<Nanos>,
}

impl Selection {
    /// Index of the candidate to serve at `now`, or `None` if there are none; with `due`, the
    /// oldest.
    pub fn choose(&self, candidates: &[Candidate], now: Nanos, due: bool) -> Option<usize> {
        let mut chooser = self.chooser(now, due);
        for (index, candidate) in candidates.iter().enumerate() {
            chooser.offer(index, *candidate);
        }
        chooser.chosen().map(|(index, _)| index)
    }

    /// The choice at `now`, when nothing is due, among commands without limits: the best by
    /// aged positioning, ties to the earliest accepted, then the first offered; or `None` as
    /// soon as one is of high priority or overdue, where only [`Selection::chooser`] can
    /// choose. Among the others it is the chooser's choice, at a fraction of its cost per
    /// command (the firmware's choice on a short queue; a longer one is walked by cylinder,
    /// `Hdd::plain_walk`, to the same choice).
    ///
    /// `candidates` gives each command's choice, accepted time and priority;
    /// `positioning_ns` computes a choice's positioning time, only while the choice is
    /// still plain. Returns the chosen one with its positioning time.
    #[inline]
    pub fn plain_best<T: Copy>(
        &self,
        now: Nanos,
        candidates: impl IntoIterator<Item = (T, Nanos, CommandPriority)>,
        positioning_ns: impl Fn(T) -> f64,
    ) -> Option<Option<(T, f64)>> {
        let mut best: Option<(T, f64, f64, Nanos)> = None;
        for (choice, accepted, priority) in candidates {
            let age = now.saturating_sub(accepted);
            if priority == CommandPriority::High || age >= self.deadline {
                return None;
            }
            // As [`Chooser::offer`] computes it for a normal command (its credit, 0, is
            // subtracted there: `x - 0.0` is `x`).
            let positioning = positioning_ns(choice);
            let effective = self.aged_ns(positioning, age);
            let better = match best {
                None => true,
                Some((_, _, best_effective, best_accepted)) => {
                    effective < best_effective
                        || (effective == best_effective && accepted < best_accepted)
                }
            };
            if better {
                best = Some((choice, positioning, effective, accepted));
            }
        }
        Some(best.map(|(choice, positioning, _, _)| (choice, positioning)))
    }

    /// `positioning_ns` less the aging credit of a command that has waited `age`: what every
    /// choice weighs (a high-priority command's credit comes off it after). One formula, so
    /// that the chooser, the plain pass and the walk round alike.
    #[inline(always)]
    pub(super) fn aged_ns(&self, positioning_ns: f64, age: Nanos) -> f64 {
        positioning_ns - self.age_weight * nanos_f64(age)
    }

    /// A choice at `now` made one candidate at a time ([`Chooser::offer`]), as the firmware
    /// computes each command's positioning: the same choice as [`Selection::choose`] over
    /// the candidates in the order offered, without collecting them first.
    pub fn chooser<T: Copy>(&self, now: Nanos, due: bool) -> Chooser<T> {
        Chooser {
            selection: *self,
            now,
            due,
            strict: self.priority_credit_ns.is_infinite(),
            overdue: None,
            urgent: None,
            best: [None; 2],
        }
    }
}

/// The choice among the candidates offered so far ([`Selection::chooser`]).
#[derive(Clone, Copy, Debug)]
pub struct Chooser<T> {
    selection: Selection,
    now: Nanos,
    due: bool,
    strict: bool,
    /// The oldest overdue candidate.
    overdue: Option<(T, Candidate)>,
    /// The candidate within its guard of the earliest limit.
    urgent: Option<(T, Candidate)>,
    /// The best by aged positioning (ties to the earliest accepted, then the first offered),
    /// with its aged positioning: under strict priority one per priority, as only the best
    /// priority's compete; else all in the first.
    best: [Option<(T, f64, Candidate)>; 2],
}

impl<T: Copy> Chooser<T> {
    /// `candidate`, known to the caller as `choice`, competes.
    #[inline]
    pub fn offer(&mut self, choice: T, candidate: Candidate) {
        let selection = &self.selection;
        let age = self.now.saturating_sub(candidate.accepted);
        if (self.due || age >= selection.deadline)
            && self
                .overdue
                .is_none_or(|(_, oldest)| candidate.accepted < oldest.accepted)
        {
            self.overdue = Some((choice, candidate));
        }
        if let Some(start_by) = candidate.start_by {
            let earlier = self.urgent.is_none_or(|(_, urgent)| {
                (start_by, candidate.accepted) < (urgent.start_by.unwrap_or(0), urgent.accepted)
            });
            if self.now.saturating_add(selection.cdl_guard) >= start_by && earlier {
                self.urgent = Some((choice, candidate));
            }
        }
        let (slot, credit) = match candidate.priority {
            CommandPriority::High if self.strict => (0, 0.0),
            CommandPriority::High => (0, selection.priority_credit_ns),
            CommandPriority::Normal => (usize::from(self.strict), 0.0),
        };
        let effective = selection.aged_ns(candidate.positioning_ns, age) - credit;
        let better = match self.best[slot] {
            None => true,
            Some((_, best_effective, best)) => {
                effective < best_effective
                    || (effective == best_effective && candidate.accepted < best.accepted)
            }
        };
        if better {
            self.best[slot] = Some((choice, effective, candidate));
        }
    }

    /// The candidate to serve, or `None` if none was offered: the oldest overdue one, else the
    /// most urgent limit, else the best by aged positioning (under strict priority, of the
    /// best priority offered).
    pub fn chosen(&self) -> Option<(T, Candidate)> {
        let best = self.best[0].or(self.best[1]).map(|(choice, _, c)| (choice, c));
        self.overdue.or(self.urgent).or(best)
    }
}

/// `nanos` as `f64` through `i64`: one instruction where a `u64` takes six, in the loop over
/// every queued command. The same value below 2^63 ns (292 years), where every age is.
#[inline(always)]
pub(super) fn nanos_f64(nanos: Nanos) -> f64 {
    nanos.min(i64::MAX as u64) as i64 as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(positioning_ms: f64, accepted_ms: u64) -> Candidate {
        Candidate {
            positioning_ns: positioning_ms * 1e6,
            accepted: accepted_ms * 1_000_000,
            priority: CommandPriority::Normal,
            start_by: None,
        }
    }

    /// Without aging the shortest positioning time wins.
    #[test]
    fn pure_sptf_takes_the_nearest() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: u64::MAX,
            priority_credit_ns: f64::INFINITY,
            cdl_guard: 0,
        };
        let candidates = [candidate(9.0, 0), candidate(2.0, 5), candidate(4.0, 1)];
        assert_eq!(selection.choose(&candidates, 10_000_000, false), Some(1));
        assert_eq!(selection.choose(&[], 0, false), None);
    }

    /// Aging lets an old far command pass a young near one.
    #[test]
    fn aging_favours_old_commands() {
        let selection = Selection {
            age_weight: 0.01,
            deadline: u64::MAX,
            priority_credit_ns: f64::INFINITY,
            cdl_guard: 0,
        };
        // At 1000 ms: old one effective 12 - 10 = 2 ms; young one 3 - 0 = 3 ms.
        let candidates = [candidate(12.0, 0), candidate(3.0, 1000)];
        assert_eq!(selection.choose(&candidates, 1_000_000_000, false), Some(0));
    }

    /// Past the deadline the oldest goes first whatever its position.
    #[test]
    fn deadline_overrides_position() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: 2_000_000_000,
            priority_credit_ns: f64::INFINITY,
            cdl_guard: 0,
        };
        let candidates = [
            candidate(15.0, 500),
            candidate(0.1, 2000),
            candidate(16.0, 0),
        ];
        assert_eq!(selection.choose(&candidates, 2_600_000_000, false), Some(2));
    }

    /// An overdue normal command goes before a high-priority one: the deadline bounds every
    /// command's wait, so a stream of high-priority commands cannot starve normal ones.
    #[test]
    fn the_deadline_bounds_normal_commands_under_high_ones() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: 2_000_000_000,
            priority_credit_ns: f64::INFINITY,
            cdl_guard: 0,
        };
        let mut urgent = candidate(1.0, 1000);
        urgent.priority = CommandPriority::High;
        let candidates = [urgent, candidate(9.0, 0)];
        assert_eq!(selection.choose(&candidates, 2_600_000_000, false), Some(1));
        assert_eq!(selection.choose(&candidates, 1_900_000_000, false), Some(0));
    }

    /// With a finite credit a high command goes first unless a normal one is nearer by more
    /// than the credit.
    #[test]
    fn a_credit_blends_priority_with_position() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: u64::MAX,
            priority_credit_ns: 8e6,
            cdl_guard: 0,
        };
        let mut high = candidate(10.0, 5);
        high.priority = CommandPriority::High;
        // 10 - 8 = 2 ms against 3 ms: the high one; against 1 ms: the normal one.
        assert_eq!(selection.choose(&[candidate(3.0, 0), high], 10_000_000, false), Some(1));
        assert_eq!(selection.choose(&[candidate(1.0, 0), high], 10_000_000, false), Some(0));
    }

    /// A high-priority command competes only with its peers under strict priority.
    #[test]
    fn priority_hook_filters_first() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: u64::MAX,
            priority_credit_ns: f64::INFINITY,
            cdl_guard: 0,
        };
        let mut urgent = candidate(10.0, 5);
        urgent.priority = CommandPriority::High;
        let candidates = [candidate(1.0, 0), urgent];
        assert_eq!(selection.choose(&candidates, 10_000_000, false), Some(1));
        // Whichever is offered first.
        let candidates = [urgent, candidate(1.0, 0), candidate(0.5, 0)];
        assert_eq!(selection.choose(&candidates, 10_000_000, false), Some(0));
    }

    /// A command near its inactive limit goes first, earliest limit first; one whose limit is
    /// further than the guard competes by position; the hard deadline still comes first.
    #[test]
    fn duration_limits_go_first_when_near() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: 2_000_000_000,
            priority_credit_ns: f64::INFINITY,
            cdl_guard: 25_000_000,
        };
        let mut limited = candidate(10.0, 0);
        limited.start_by = Some(100_000_000);
        let mut tighter = candidate(12.0, 5);
        tighter.start_by = Some(90_000_000);
        let near = candidate(1.0, 0);
        // At 50 ms both limits are more than 25 ms away: position decides.
        assert_eq!(selection.choose(&[near, limited, tighter], 50_000_000, false), Some(0));
        // At 70 ms the tighter one is within the guard.
        assert_eq!(selection.choose(&[near, limited, tighter], 70_000_000, false), Some(2));
        // At 80 ms both are: the earlier limit goes first.
        assert_eq!(selection.choose(&[near, limited, tighter], 80_000_000, false), Some(2));
        assert_eq!(selection.choose(&[near, limited], 80_000_000, false), Some(1));
        // A command past the hard deadline goes before them.
        let old = candidate(15.0, 0);
        let mut young = candidate(10.0, 1);
        young.start_by = Some(100_000_000);
        assert_eq!(selection.choose(&[young, old], 2_000_000_000, false), Some(1));
    }

    /// While some command is due, the oldest goes first, whatever its position.
    #[test]
    fn due_serves_the_oldest() {
        let selection = Selection {
            age_weight: 0.0,
            deadline: 2_000_000_000,
            priority_credit_ns: f64::INFINITY,
            cdl_guard: 0,
        };
        let candidates = [candidate(0.5, 900), candidate(12.0, 100), candidate(3.0, 500)];
        assert_eq!(selection.choose(&candidates, 1_000_000_000, false), Some(0));
        assert_eq!(selection.choose(&candidates, 1_000_000_000, true), Some(1));
    }

    proptest::proptest! {
        /// The plain pass chooses as the chooser does whenever it chooses, and declines
        /// exactly when some candidate is of high priority or overdue. Positions and accept
        /// times come from small sets, so that ties (which go to the earliest accepted, then
        /// the first offered) are frequent.
        #[test]
        fn the_plain_pass_chooses_as_the_chooser(
            commands in proptest::collection::vec((0u8..6, 0u64..8, proptest::bool::weighted(0.1)), 0..12),
            now_ms in 0u64..40,
            age_weight in proptest::sample::select(vec![0.0, 0.001, 0.5]),
            deadline_ms in proptest::sample::select(vec![5u64, 30, u64::MAX / 1_000_000]),
            credit in proptest::sample::select(vec![f64::INFINITY, 2e6]),
        ) {
            let selection = Selection {
                age_weight,
                deadline: deadline_ms * 1_000_000,
                priority_credit_ns: credit,
                cdl_guard: 0,
            };
            let now = now_ms * 1_000_000;
            let candidates: Vec<Candidate> = commands
                .iter()
                .map(|&(position, accepted_ms, high)| Candidate {
                    positioning_ns: f64::from(position) * 1e6,
                    accepted: (accepted_ms * 5_000_000).min(now),
                    priority: if high { CommandPriority::High } else { CommandPriority::Normal },
                    start_by: None,
                })
                .collect();
            let plain = selection.plain_best(
                now,
                candidates.iter().enumerate().map(|(i, c)| (i, c.accepted, c.priority)),
                |i| candidates[i].positioning_ns,
            );
            let declines = candidates.iter().any(|c| {
                c.priority == CommandPriority::High || now - c.accepted >= selection.deadline
            });
            match plain {
                None => proptest::prop_assert!(declines),
                Some(best) => {
                    proptest::prop_assert!(!declines);
                    let chosen = selection.choose(&candidates, now, false);
                    proptest::prop_assert_eq!(best.map(|(i, _)| i), chosen);
                    if let Some((i, positioning)) = best {
                        proptest::prop_assert_eq!(positioning, candidates[i].positioning_ns);
                    }
                }
            }
        }
    }
}

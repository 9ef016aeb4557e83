//! Every policy iosched implements, and the catalog that builds them by name.

use crate::policy::Policy;
use crate::tunable::TunableSpec;
use std::fmt;
use std::sync::OnceLock;

/// A policy's entry in the catalog.
pub struct PolicyInfo {
    /// Name used on the command line.
    pub name: &'static str,
    /// Other accepted names (Linux's names where they differ).
    pub aliases: &'static [&'static str],
    /// One line on what it does.
    pub summary: &'static str,
    /// Its tunables and their defaults.
    pub tunables: &'static [TunableSpec],
    /// Builds a fresh instance with default tunables.
    pub build: fn() -> Box<dyn Policy>,
}

/// No policy has the name asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPolicy {
    /// The name asked for.
    pub name: String,
}

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = catalog().iter().map(|p| p.name).collect();
        let stages: Vec<&str> = crate::stage::STAGES.iter().map(|(n, _, _)| *n).collect();
        write!(
            f,
            "unknown policy {}; known: {} (a stage may go above any of them: {}+POLICY)",
            crate::limits::quote(&self.name),
            known.join(", "),
            stages.join("+POLICY, ")
        )
    }
}

impl std::error::Error for UnknownPolicy {}

/// Every policy module, in the order `iosched policies` lists them: adding a policy is its
/// file (with its `TUNABLES` and `POLICIES`) and one line in `register!` below.
macro_rules! register {
    ($($module:ident,)*) => {
        $(pub mod $module;)*

        /// Every policy, in the order `iosched policies` lists them.
        pub fn catalog() -> &'static [&'static PolicyInfo] {
            static CATALOG: OnceLock<Vec<&'static PolicyInfo>> = OnceLock::new();
            CATALOG.get_or_init(|| [$($module::POLICIES),*].into_iter().flatten().collect())
        }
    };
}

register! {
    noop,
    deadline,
    kyber,
    anticipatory,
    cfq,
    bfq,
    htbs,
    mclock,
    grouped,
    latency,
    dass,
}

mod sorted;

/// The catalog entry for `name` or one of its aliases.
pub fn find(name: &str) -> Result<&'static PolicyInfo, UnknownPolicy> {
    catalog()
        .iter()
        .copied()
        .find(|p| p.name == name || p.aliases.contains(&name))
        .ok_or_else(|| UnknownPolicy {
            name: name.to_string(),
        })
}

/// A fresh policy called `name`, with default tunables.
pub fn build(name: &str) -> Result<Box<dyn Policy>, UnknownPolicy> {
    find(name).map(|info| (info.build)())
}

/// A policy with an optional stage above it, as `STAGE+POLICY` names it (`throttle+deadline`).
pub struct Stack {
    /// The stage's name, if any.
    pub stage: Option<&'static str>,
    /// The policy's catalog entry.
    pub policy: &'static PolicyInfo,
}

impl Stack {
    /// Parses `POLICY` or `STAGE+POLICY`.
    pub fn parse(spec: &str) -> Result<Stack, UnknownPolicy> {
        let unknown = || UnknownPolicy {
            name: spec.to_string(),
        };
        match spec.split_once('+') {
            None => Ok(Stack {
                stage: None,
                policy: find(spec.trim())?,
            }),
            Some((stage, policy)) => {
                let stage = crate::stage::STAGES
                    .iter()
                    .find(|(name, _, _)| *name == stage.trim())
                    .map(|(name, _, _)| *name)
                    .ok_or_else(unknown)?;
                if policy.contains('+') {
                    return Err(unknown());
                }
                Ok(Stack {
                    stage: Some(stage),
                    policy: find(policy.trim())?,
                })
            }
        }
    }

    /// A fresh elevator with this stack and `nr_requests`.
    pub fn elevator(&self, nr_requests: u32) -> crate::Elevator {
        let elevator = crate::Elevator::new((self.policy.build)(), nr_requests);
        match self.stage.and_then(crate::stage::build) {
            Some(stage) => elevator.with_stage(stage),
            None => elevator,
        }
    }
}

/// A setting that could not be applied: it names an unknown policy, or the tunable refused it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettingError {
    /// `POLICY.NAME` named no policy.
    UnknownPolicy(UnknownPolicy),
    /// The queue or the policy refused the name or the value.
    Tunable(crate::tunable::TunableError),
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingError::UnknownPolicy(error) => error.fmt(f),
            SettingError::Tunable(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for SettingError {}

/// Applies `settings` (name and value as text, in order) to `elevator`, as the engines'
/// `--set NAME=VALUE` does. A plain name sets a queue or policy tunable of whichever policy
/// runs; `POLICY.NAME` sets it only when the elevator runs POLICY (by name or alias), and
/// `STAGE.NAME` only when that stage is above it, so that one list can serve a comparison of
/// several policies.
pub fn apply_settings(
    elevator: &mut crate::Elevator,
    settings: &[(String, String)],
) -> Result<(), SettingError> {
    let running = elevator.policy().name();
    let stage = elevator.stage().map(|s| s.name());
    for (name, value) in settings {
        let name = match name.split_once('.') {
            Some((prefix, tunable))
                if crate::stage::STAGES.iter().any(|(n, _, _)| *n == prefix) =>
            {
                // STAGE.NAME: only when that stage is above the policy.
                if stage != Some(prefix) {
                    continue;
                }
                tunable
            }
            Some((policy, tunable)) => {
                let named = find(policy).map_err(SettingError::UnknownPolicy)?.name;
                if named != running {
                    // A meta-policy running POLICY among its candidates takes it.
                    if let Some(result) = elevator.policy_mut().set_text(name, value) {
                        result.map_err(SettingError::Tunable)?;
                    }
                    continue;
                }
                tunable
            }
            None => name.as_str(),
        };
        elevator.set(name, value).map_err(SettingError::Tunable)?;
    }
    Ok(())
}

#[cfg(test)]
mod settings_tests {
    use super::*;

    // Proves POLICY.NAME settings reach only that policy and plain names reach any.
    #[test]
    fn settings_by_policy() {
        let settings = vec![
            ("deadline.fifo_batch".to_string(), "4".to_string()),
            ("nr_requests".to_string(), "32".to_string()),
        ];
        let mut deadline = crate::Elevator::new(build("mq-deadline").unwrap(), 64);
        apply_settings(&mut deadline, &settings).unwrap();
        assert_eq!(deadline.get("fifo_batch").unwrap(), 4);
        assert_eq!(deadline.get("nr_requests").unwrap(), 32);
        let mut noop = crate::Elevator::new(build("noop").unwrap(), 64);
        apply_settings(&mut noop, &settings).unwrap();
        assert_eq!(noop.get("nr_requests").unwrap(), 32);
        let bad = vec![("nosuch.x".to_string(), "1".to_string())];
        assert!(matches!(
            apply_settings(&mut noop, &bad),
            Err(SettingError::UnknownPolicy(_))
        ));
    }
}

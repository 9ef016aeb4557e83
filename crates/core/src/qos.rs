//! Quality of service stated in units, for the policies that take it (`pclock`, `htbs`): a
//! rate (KiB/s or IOPS), a burst and a delay per flow, as pClock's arrival curves (sigma,
//! rho, delta) and seed 002 state them; and mClock's reservation, weight and limit.
//!
//! A flow is a cgroup (its `qos.*` files, [`crate::GroupSettings::set`]) or a job (the job
//! file's `qos_*` options). Sizes read as fio reads them with its default `kb_base=1024`: `K`,
//! `KB` and `KiB` are all 1024 bytes, `M`, `MB`, `MiB` 1024 KiB, and so on.

use crate::group::{GroupId, Groups};
use crate::ioprio::{IoPrio, IoPrioClass};
use crate::request::{FlowId, Request};
use crate::time::{Nanos, SECOND};
use std::collections::BTreeMap;
use std::fmt;

/// A rate: bytes or requests per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// Bytes per second.
    Bytes(u64),
    /// Requests per second.
    Iops(u64),
}

/// A burst: bytes or requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Amount {
    /// Bytes.
    Bytes(u64),
    /// Requests.
    Requests(u64),
}

/// One flow's QoS; `None` where it states nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Qos {
    /// `qos.rate`: the rate it is guaranteed (rho).
    pub rate: Option<Rate>,
    /// `qos.burst`: how far ahead of its rate it may go (sigma).
    pub burst: Option<Amount>,
    /// `qos.delay`: the latency bound of a request within its rate (delta).
    pub delay: Option<Nanos>,
    /// `qos.reservation`: mClock's minimum rate.
    pub reservation: Option<Rate>,
    /// `qos.weight`: mClock's share of the spare capacity.
    pub weight: Option<u32>,
    /// `qos.limit`: mClock's maximum rate.
    pub limit: Option<Rate>,
}

/// The QoS settings, as cgroup files and job options name them (`qos.rate` / `qos_rate`).
pub const QOS_SETTINGS: &[&str] = &["rate", "burst", "delay", "reservation", "weight", "limit"];

/// Largest `qos.weight`, as for `io.weight`.
pub const QOS_WEIGHT_MAX: u32 = 10_000;

/// A QoS value that cannot be used: why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QosError(pub String);

impl fmt::Display for QosError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for QosError {}

fn error<T>(text: impl Into<String>) -> Result<T, QosError> {
    Err(QosError(text.into()))
}

/// Splits `text` into a positive number and the rest (its unit).
fn number(text: &str) -> Result<(f64, &str), QosError> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(end);
    let value: f64 = match digits.parse() {
        Ok(value) => value,
        Err(_) => return error("expected a number with a unit"),
    };
    if !value.is_finite() || value <= 0.0 {
        return error(format!("{digits}: must be positive"));
    }
    Ok((value, unit.trim()))
}

/// Bytes per unit of a size suffix (`K`, `KiB`, `KB`, ..., or nothing for bytes).
fn size_unit(unit: &str) -> Option<u64> {
    let lower = unit.to_ascii_lowercase();
    let prefix = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    Some(match prefix {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return None,
    })
}

/// Converts `value` units of `scale` to a whole count of at least 1, or an error past u64.
fn whole(value: f64, scale: u64) -> Result<u64, QosError> {
    let total = value * scale as f64;
    if total >= u64::MAX as f64 {
        return error("is too large");
    }
    Ok((total.round() as u64).max(1))
}

impl Rate {
    /// Reads `8800KiB/s`, `8.5MiB/s`, `1000B/s` or `100iops` (case-insensitive units).
    pub fn parse(text: &str) -> Result<Rate, QosError> {
        let (value, unit) = number(text)?;
        if unit.eq_ignore_ascii_case("iops") {
            return Ok(Rate::Iops(whole(value, 1)?));
        }
        let Some(size) = unit.strip_suffix("/s").and_then(size_unit) else {
            return error(format!(
                "unknown unit {}: use bytes per second (B/s, KiB/s, MiB/s, GiB/s) or iops",
                crate::limits::quote(unit)
            ));
        };
        Ok(Rate::Bytes(whole(value, size)?))
    }

    /// Units per second, and whether the units are bytes.
    pub fn per_second(self) -> (u64, bool) {
        match self {
            Rate::Bytes(n) => (n, true),
            Rate::Iops(n) => (n, false),
        }
    }

    /// What `request_bytes` costs in this rate's unit: its bytes, or one request.
    pub fn cost(self, request_bytes: u64) -> u64 {
        match self {
            Rate::Bytes(_) => request_bytes,
            Rate::Iops(_) => 1,
        }
    }

    /// How long `units` take at this rate, ns (at least 1).
    pub fn time_for(self, units: u64) -> Nanos {
        let (per_second, _) = self.per_second();
        ((u128::from(units) * u128::from(SECOND)).div_ceil(u128::from(per_second.max(1))))
            .min(u128::from(u64::MAX)) as Nanos
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::Bytes(n) if n % 1024 == 0 => write!(f, "{}KiB/s", n / 1024),
            Rate::Bytes(n) => write!(f, "{n}B/s"),
            Rate::Iops(n) => write!(f, "{n}iops"),
        }
    }
}

impl Amount {
    /// Reads `4` (requests) or `64KiB` (bytes).
    pub fn parse(text: &str) -> Result<Amount, QosError> {
        let text = text.trim();
        if text == "0" {
            return Ok(Amount::Requests(0));
        }
        let (value, unit) = number(text)?;
        if unit.is_empty() || unit.eq_ignore_ascii_case("requests") {
            if value.fract() != 0.0 {
                return error("a burst in requests is a whole number");
            }
            return Ok(Amount::Requests(whole(value, 1)?));
        }
        match size_unit(unit) {
            Some(size) => Ok(Amount::Bytes(whole(value, size)?)),
            None => error(format!(
                "unknown unit {}: a burst is a number of requests or a size (KiB, MiB)",
                crate::limits::quote(unit)
            )),
        }
    }
}

/// Reads a duration: `100ms`, `0.5s`, `250us`, `1000000ns` (a bare number is milliseconds).
pub fn parse_delay(text: &str) -> Result<Nanos, QosError> {
    let (value, unit) = number(text)?;
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "ms" | "msec" => 1_000_000,
        "s" | "sec" => SECOND,
        "us" | "usec" => 1_000,
        "ns" | "nsec" => 1,
        _ => {
            return error(format!(
                "unknown unit {}: use s, ms, us or ns",
                crate::limits::quote(unit)
            ))
        }
    };
    whole(value, scale)
}

impl Qos {
    /// Whether it states anything.
    pub fn is_set(&self) -> bool {
        *self != Qos::default()
    }

    /// Sets setting `name` (`rate`, `burst`, `delay`, `reservation`, `weight`, `limit`) from
    /// `value`. A burst must count in the rate's unit (bytes with a byte rate, requests with
    /// IOPS), and a limit may not be below the reservation.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), QosError> {
        let mut next = *self;
        match name {
            "rate" => next.rate = Some(Rate::parse(value)?),
            "burst" => next.burst = Some(Amount::parse(value)?),
            "delay" => next.delay = Some(parse_delay(value)?),
            "reservation" => next.reservation = Some(Rate::parse(value)?),
            "limit" => next.limit = Some(Rate::parse(value)?),
            "weight" => {
                let weight: u32 = value.trim().parse().map_err(|_| {
                    QosError(format!("expected a weight from 1 to {QOS_WEIGHT_MAX}"))
                })?;
                if !(1..=QOS_WEIGHT_MAX).contains(&weight) {
                    return error(format!("weight {weight} is outside 1..={QOS_WEIGHT_MAX}"));
                }
                next.weight = Some(weight);
            }
            other => {
                return error(format!(
                    "unknown QoS setting {}; known: {}",
                    crate::limits::quote(other),
                    QOS_SETTINGS.join(", ")
                ))
            }
        }
        next.check()?;
        *self = next;
        Ok(())
    }

    /// The rules across settings.
    fn check(&self) -> Result<(), QosError> {
        if let (Some(rate), Some(burst)) = (self.rate, self.burst) {
            let bytes = matches!(rate, Rate::Bytes(_));
            match burst {
                Amount::Bytes(_) if !bytes => {
                    return error("the burst is in bytes but the rate in IOPS: use one unit")
                }
                Amount::Requests(n) if bytes && n > 0 => {
                    return error("the burst is in requests but the rate in bytes: use one unit")
                }
                _ => {}
            }
        }
        if let (Some(reservation), Some(limit)) = (self.reservation, self.limit) {
            match (reservation, limit) {
                (Rate::Bytes(r), Rate::Bytes(l)) | (Rate::Iops(r), Rate::Iops(l)) if l < r => {
                    return error(format!(
                        "the limit {limit} is below the reservation {reservation}"
                    ))
                }
                (Rate::Bytes(_), Rate::Iops(_)) | (Rate::Iops(_), Rate::Bytes(_)) => {
                    return error("the reservation and the limit must use one unit")
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The burst in the rate's unit: `sigma` (0 when it states none).
    pub fn sigma(&self) -> u64 {
        match self.burst {
            Some(Amount::Bytes(n)) | Some(Amount::Requests(n)) => n,
            None => 0,
        }
    }
}

/// The priority level a request counts under for QoS: its effective class and level ("none"
/// is best effort 4, as the kernel derives it; the idle class has one level), hint dropped.
pub fn level_of(prio: IoPrio) -> IoPrio {
    let class = prio.effective_class();
    let level = if class == IoPrioClass::Idle {
        0
    } else {
        prio.effective_level()
    };
    IoPrio::new(class, level).expect("an effective level is in range")
}

/// Reads a priority level as `--group @LEVEL:qos.*=...` names it: `rt/0`..`rt/7`,
/// `be/0`..`be/7` (or `realtime/N`, `best-effort/N`) or `idle`.
pub fn parse_level(text: &str) -> Result<IoPrio, String> {
    let usage = || {
        format!(
            "unknown priority level {}: use rt/0..rt/7, be/0..be/7 or idle",
            crate::limits::quote(text)
        )
    };
    let text = text.trim();
    if text == "idle" {
        return Ok(level_of(IoPrio::new(IoPrioClass::Idle, 0).expect("valid")));
    }
    let (class, level) = text.split_once('/').ok_or_else(usage)?;
    let class = match class {
        "rt" | "realtime" => IoPrioClass::Rt,
        "be" | "best-effort" => IoPrioClass::Be,
        _ => return Err(usage()),
    };
    let level: u8 = level.parse().map_err(|_| usage())?;
    IoPrio::new(class, level).map_err(|_| usage())
}

/// Who a QoS client is: a cgroup that states QoS, a priority level that does, or a flow (a
/// job).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QosKey {
    /// A cgroup with a `qos.*` file set: all of its jobs together.
    Group(GroupId),
    /// Every request of a priority level with `qos.*` set (`--group @be/4:...`).
    Prio(IoPrio),
    /// A job on its own (with its `qos_*` options, or none).
    Flow(FlowId),
}

/// The QoS settings a QoS policy knows: each cgroup's `qos.*`, each priority level's and each
/// job's `qos_*`, and whose a request is. A cgroup that states any QoS is one client for all
/// of its jobs; else a priority level that states any is one client for all of its requests;
/// any other job is a client of its own, with its own settings or none.
#[derive(Clone, Debug, Default)]
pub struct QosTable {
    /// By group id: the group's QoS if it states any.
    groups: Vec<Option<Qos>>,
    /// Jobs' own QoS (at most one entry per job of the run).
    flows: BTreeMap<FlowId, Qos>,
    /// Priority levels' QoS (at most 17 levels).
    levels: BTreeMap<IoPrio, Qos>,
}

impl QosTable {
    /// Takes the cgroups' `qos.*` settings.
    pub fn set_groups(&mut self, groups: &Groups) {
        self.groups = groups
            .ids()
            .map(|id| Some(groups.settings(id).qos).filter(Qos::is_set))
            .collect();
        self.levels = groups.prio_qos().filter(|(_, qos)| qos.is_set()).collect();
    }

    /// Takes a job's own QoS.
    pub fn set_flow(&mut self, flow: FlowId, qos: Qos) {
        if qos.is_set() {
            self.flows.insert(flow, qos);
        } else {
            self.flows.remove(&flow);
        }
    }

    /// The client `request` belongs to, and its settings.
    pub fn client(&self, request: &Request) -> (QosKey, Qos) {
        let key = self.key(request);
        (key, self.qos(key))
    }

    /// The settings of client `key`.
    pub fn qos(&self, key: QosKey) -> Qos {
        match key {
            QosKey::Group(group) => self.group(group),
            QosKey::Prio(level) => self.levels.get(&level).copied().unwrap_or_default(),
            QosKey::Flow(flow) => self.flow(flow),
        }
    }

    /// A cgroup's own QoS (none stated: the default).
    pub fn group(&self, group: GroupId) -> Qos {
        self.groups
            .get(group.0 as usize)
            .copied()
            .flatten()
            .unwrap_or_default()
    }

    /// A job's own QoS (none stated: the default).
    pub fn flow(&self, flow: FlowId) -> Qos {
        self.flows.get(&flow).copied().unwrap_or_default()
    }

    /// The client `request` belongs to.
    pub fn key(&self, request: &Request) -> QosKey {
        if let Some(Some(_)) = self.groups.get(request.group.0 as usize) {
            return QosKey::Group(request.group);
        }
        if !self.levels.is_empty() {
            let level = level_of(request.prio);
            if self.levels.contains_key(&level) {
                return QosKey::Prio(level);
            }
        }
        QosKey::Flow(request.flow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::MILLISECOND;

    #[test]
    fn rates_read_with_units() {
        assert_eq!(Rate::parse("8800KiB/s"), Ok(Rate::Bytes(8800 * 1024)));
        assert_eq!(Rate::parse("8800KB/s"), Ok(Rate::Bytes(8800 * 1024)));
        assert_eq!(Rate::parse("1.5MiB/s"), Ok(Rate::Bytes(1536 * 1024)));
        assert_eq!(Rate::parse("100 iops"), Ok(Rate::Iops(100)));
        assert_eq!(Rate::parse("100IOPS"), Ok(Rate::Iops(100)));
        for bad in [
            "0KiB/s",
            "-5KiB/s",
            "5KiB",
            "fast",
            "",
            "1e400KiB/s",
            "NaNiops",
        ] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Rate::Iops(100).time_for(1), 10 * MILLISECOND);
        assert_eq!(Rate::Bytes(1024).time_for(512), SECOND / 2);
    }

    #[test]
    fn delays_and_bursts_read_with_units() {
        assert_eq!(parse_delay("100ms"), Ok(100 * MILLISECOND));
        assert_eq!(parse_delay("0.5s"), Ok(SECOND / 2));
        assert_eq!(parse_delay("250us"), Ok(250_000));
        assert!(parse_delay("0ms").is_err());
        assert!(parse_delay("10 fortnights").is_err());
        assert_eq!(Amount::parse("4"), Ok(Amount::Requests(4)));
        assert_eq!(Amount::parse("0"), Ok(Amount::Requests(0)));
        assert_eq!(Amount::parse("64KiB"), Ok(Amount::Bytes(65536)));
        assert!(Amount::parse("2.5").is_err());
    }

    #[test]
    fn settings_are_checked_together() {
        let mut qos = Qos::default();
        qos.set("rate", "100iops").unwrap();
        assert!(qos.set("burst", "64KiB").is_err());
        qos.set("burst", "8").unwrap();
        assert_eq!(qos.sigma(), 8);
        qos.set("reservation", "50iops").unwrap();
        let error = qos.set("limit", "40iops").unwrap_err();
        assert!(
            error.to_string().contains("below the reservation"),
            "{error}"
        );
        assert!(qos.set("limit", "40KiB/s").is_err());
        qos.set("limit", "60iops").unwrap();
        assert!(qos.set("weight", "0").is_err());
        assert!(qos.set("speed", "1").is_err());
        // A refused value leaves the settings as they were.
        assert_eq!(qos.limit, Some(Rate::Iops(60)));
    }

    // Proves whose a request is: a cgroup that states QoS first, then a priority level that
    // does (every request of it, "none" counting as best effort 4), then the job itself.
    #[test]
    fn clients_are_cgroups_then_levels_then_jobs() {
        use crate::testing::request;
        use crate::Op;
        let mut groups = Groups::new();
        let app = groups.intern("/app").unwrap();
        groups.set(app, "qos.rate", "100iops").unwrap();
        groups.set_prio_qos("be/4", "qos.limit", "50iops").unwrap();
        assert!(groups.set_prio_qos("be/8", "qos.limit", "5iops").is_err());
        assert!(groups.set_prio_qos("rt/0", "io.weight", "5").is_err());
        assert!(groups.set_prio_qos("rt/0", "qos.weight", "0").is_err());
        let mut table = QosTable::default();
        table.set_groups(&groups);
        table.set_flow(
            FlowId(3),
            Qos {
                weight: Some(7),
                ..Qos::default()
            },
        );

        let mut r = request(1, Op::Read, 0, 4096);
        r.group = app;
        assert_eq!(table.client(&r).0, QosKey::Group(app));
        r.group = GroupId::ROOT;
        let be4 = IoPrio::new(IoPrioClass::Be, 4).unwrap();
        assert_eq!(
            table.client(&r),
            (QosKey::Prio(be4), table.qos(QosKey::Prio(be4)))
        );
        assert_eq!(table.client(&r).1.limit, Some(Rate::Iops(50)));
        r.prio = IoPrio::new(IoPrioClass::Rt, 0).unwrap();
        r.flow = FlowId(3);
        assert_eq!(table.client(&r).0, QosKey::Flow(FlowId(3)));
        assert_eq!(table.client(&r).1.weight, Some(7));
        assert_eq!(
            parse_level("idle"),
            Ok(level_of(IoPrio::new(IoPrioClass::Idle, 5).unwrap()))
        );
        assert_eq!(
            parse_level("best-effort/2"),
            IoPrio::new(IoPrioClass::Be, 2).map_err(|_| String::new())
        );
    }
}

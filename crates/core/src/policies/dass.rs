//! `dass`: seed 001's DASS (ADIO's Dynamic and Automatic Scheduler Selection), a meta-policy
//! that runs one of several policies at a time and swaps them to keep every request within a
//! latency bound while the bounds allow the one with the best throughput.
//!
//! # The candidates
//!
//! `policies=cfq,deadline` (the default, the seed's pair) names the candidates in order: the
//! first is the throughput policy the controller prefers, the last the latency-bounding one,
//! any in between steps from one to the other. Any policy of ours may be a candidate (bfq,
//! latency, anticipatory, ...), except `dass` itself. Each candidate is a whole policy with its
//! own state, kept across swaps; `POLICY.NAME=VALUE` (`cfq.slice_idle=0`) sets a candidate's
//! tunable, and a plain name that is not one of dass's sets every candidate that has it. A
//! candidate with deadlines of its own (`read_expire`, `write_expire`: deadline,
//! anticipatory) gets `expire_pct` of the bounds as its expiries (50% by default: its expiry
//! is soft, checked only when a batch starts, so the other half is left for the batch in
//! progress and the service itself); a candidate setting given afterwards overrides them.
//!
//! # The monitor
//!
//! As the seed's: over each adaptation period of `W` (1 s) it takes the largest latency of a
//! completed read and of a completed write, and the numbers of each completed. A request's
//! latency runs from its arrival in the scheduler to its completion (the block layer's view;
//! each request merged into another counts with its own arrival).
//!
//! # The controller (the switching rule)
//!
//! At the end of each period with completions:
//!
//! - **a bound missed** (a read over `read_bound`, 400 ms, or a write over `write_bound`, 4 s):
//!   swap to the next more bounding candidate (with two, the bounding one), if not there yet;
//! - **well within the bounds** (every read and write within `calm_pct`, 50%, of its bound):
//!   a calm period on a candidate other than the first; after `calm_windows` (3) calm periods
//!   in a row swap one step back toward the throughput policy. Any other period, and every
//!   swap, resets the count. This is the hysteresis: the controller returns only when the
//!   latencies have stayed far from the bounds for a while, not at the first quiet second.
//!
//! A period without completions changes nothing. With `predict` = 1 the controller also acts
//! between period ends, before a bound is missed: as soon as the oldest queued request of a
//! direction has waited `predict_pct` (75%) of its bound, it swaps one step toward the
//! bounding candidate, at most once per period. The seed's rule is the reactive one
//! (`predict` = 0): it can only see a miss after it happened, in the period that ends.
//!
//! # The swap
//!
//! Requests queued in the old policy are handed to the new one at once (`Policy::drain`, then
//! `Policy::adopt`, oldest first), which keeps each request's deadline counted from its
//! arrival. The kernel's elevator switch drains instead: it freezes the queue and lets the
//! old scheduler dispatch everything before the new one takes a request. Handing over is
//! chosen because the swap is made to fix latency now: draining would leave the requests
//! that the bound is about to miss in the order of the policy that was missing it, and hold
//! every new request behind them. Requests the old policy dispatched complete through it, so
//! its state stays consistent for its next turn; one the device hands back goes to the policy
//! active then. Nothing is lost or duplicated: every request is queued in exactly one policy
//! or in flight from exactly one.

use super::PolicyInfo;
use crate::group::Groups;
use crate::ordmap::OrdMap;
use crate::policy::{Dispatch, Policy};
use crate::qos::Qos;
use crate::request::{FlowId, MergeLimits, Request};
use crate::time::{Nanos, MILLISECOND};
use crate::tunable::{self, TunableError, TunableSpec, Unit};
use rustc_hash::FxHashMap;

/// dass's tunables.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "read_bound",
        unit: Unit::Milliseconds,
        default: 400,
        min: 1,
        max: 3_600_000,
        doc: "the latency bound of a read (seed 001: 400 ms)",
    },
    TunableSpec {
        name: "write_bound",
        unit: Unit::Milliseconds,
        default: 4000,
        min: 1,
        max: 3_600_000,
        doc: "the latency bound of a write (seed 001: 4 s)",
    },
    TunableSpec {
        name: "W",
        unit: Unit::Milliseconds,
        default: 1000,
        min: 1,
        max: 3_600_000,
        doc: "the adaptation period over which the monitor gathers latencies (seed 001: 1 s)",
    },
    TunableSpec {
        name: "calm_pct",
        unit: Unit::Count,
        default: 50,
        min: 1,
        max: 100,
        doc: "a period is calm when every latency is within this percentage of its bound",
    },
    TunableSpec {
        name: "calm_windows",
        unit: Unit::Count,
        default: 3,
        min: 1,
        max: 1_000_000,
        doc: "calm periods in a row before a step back toward the throughput policy",
    },
    TunableSpec {
        name: "predict",
        unit: Unit::Flag,
        default: 0,
        min: 0,
        max: 1,
        doc: "1: also swap toward the bounding policy when the oldest queued request has \
              waited predict_pct of its bound (0: the seed's reactive rule)",
    },
    TunableSpec {
        name: "predict_pct",
        unit: Unit::Count,
        default: 75,
        min: 1,
        max: 100,
        doc: "with predict: the age, in percent of its bound, that triggers a step",
    },
    TunableSpec {
        name: "expire_pct",
        unit: Unit::Count,
        default: 50,
        min: 1,
        max: 100,
        doc: "a candidate's read_expire and write_expire, in percent of the bounds",
    },
];

/// This module's entry in the policy catalog (`iosched policies`).
pub const POLICIES: &[PolicyInfo] = &[PolicyInfo {
    name: "dass",
    aliases: &["adio"],
    summary: "seed 001's DASS: runs one of `policies` (cfq,deadline) at a time, swapping to \
              keep reads within read_bound and writes within write_bound",
    tunables: TUNABLES,
    build: || Box::new(Dass::new()),
}];

/// The candidates when none are named: the seed's pair.
const DEFAULT_POLICIES: &str = "cfq,deadline";

/// Most candidates.
const MAX_CANDIDATES: usize = 8;

/// A request inside (queued or in flight): its arrival, and whether it writes.
#[derive(Clone, Copy, Debug)]
struct Inside {
    arrival: Nanos,
    write: bool,
}

/// The dass meta-policy.
pub struct Dass {
    /// The candidates' catalog names, in order, and the policies themselves.
    names: Vec<&'static str>,
    candidates: Vec<Box<dyn Policy>>,
    active: usize,
    /// Candidate settings given (`POLICY.NAME` or a plain name), replayed on a rebuild.
    candidate_settings: Vec<(String, String)>,
    groups: Option<Groups>,
    flow_qos: Vec<(FlowId, Qos)>,
    values: [u64; 8],
    /// Every original request inside, by id (looked up by id only, never in order: a hash map,
    /// where a B-tree cost a descent for each of the three lookups of a request's life).
    inside: FxHashMap<u64, Inside>,
    /// Queued requests by (arrival, id), per direction (reads 0, writes 1), for their ages.
    ages: [OrdMap<(Nanos, u64), ()>; 2],
    /// Dispatched requests (by carrier id): the candidate that dispatched them.
    owners: FxHashMap<u64, usize>,
    /// The period under way: its start, the largest latencies, completions.
    period_start: Option<Nanos>,
    max_latency: [Nanos; 2],
    completions: [u64; 2],
    calm: u64,
    swapped_in_period: bool,
    /// When the active candidate took over, and the time each has been active.
    since: Nanos,
    active_time: Vec<Nanos>,
    swaps: u64,
    periods: u64,
    over_bound: [u64; 2],
    worst: [Nanos; 2],
}

impl std::fmt::Debug for Dass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dass")
            .field("policies", &self.names)
            .field("active", &self.active)
            .field("swaps", &self.swaps)
            .finish()
    }
}

impl Default for Dass {
    fn default() -> Self {
        Self::new()
    }
}

fn index(name: &str) -> usize {
    TUNABLES
        .iter()
        .position(|spec| spec.name == name)
        .expect("a dass tunable")
}

impl Dass {
    /// dass over the seed's pair, cfq then deadline, with default tunables.
    pub fn new() -> Self {
        let mut values = [0; 8];
        for (value, spec) in values.iter_mut().zip(TUNABLES) {
            *value = spec.default;
        }
        let mut dass = Dass {
            names: Vec::new(),
            candidates: Vec::new(),
            active: 0,
            candidate_settings: Vec::new(),
            groups: None,
            flow_qos: Vec::new(),
            values,
            inside: FxHashMap::default(),
            ages: [OrdMap::new(), OrdMap::new()],
            owners: FxHashMap::default(),
            period_start: None,
            max_latency: [0; 2],
            completions: [0; 2],
            calm: 0,
            swapped_in_period: false,
            since: 0,
            active_time: Vec::new(),
            swaps: 0,
            periods: 0,
            over_bound: [0; 2],
            worst: [0; 2],
        };
        dass.set_policies(DEFAULT_POLICIES)
            .expect("the default candidates exist");
        dass
    }

    fn value(&self, name: &str) -> u64 {
        self.values[index(name)]
    }

    /// The bound of a read (0) or a write (1).
    fn bound(&self, dir: usize) -> Nanos {
        let name = if dir == 0 { "read_bound" } else { "write_bound" };
        self.value(name).saturating_mul(MILLISECOND)
    }

    /// The active candidate's name.
    pub fn active_policy(&self) -> &'static str {
        self.names[self.active]
    }

    /// Swaps so far.
    pub fn swaps(&self) -> u64 {
        self.swaps
    }

    fn idle(&self) -> bool {
        self.inside.is_empty() && self.owners.is_empty()
    }

    fn refuse(name: &'static str, text: &str, reason: impl Into<String>) -> TunableError {
        TunableError::BadValue {
            name,
            value: text.to_string(),
            reason: reason.into(),
        }
    }

    /// Sets the candidates from `text` (comma-separated policy names) and builds them.
    fn set_policies(&mut self, text: &str) -> Result<(), TunableError> {
        let refuse = |reason: String| Self::refuse("policies", text, reason);
        if !self.idle() {
            return Err(refuse(
                "requests are queued or in flight; set it before the run".into(),
            ));
        }
        let mut names: Vec<&'static str> = Vec::new();
        for word in text.split(',').map(str::trim) {
            let info = super::find(word).map_err(|e| refuse(e.to_string()))?;
            if info.name == "dass" {
                return Err(refuse("dass cannot run itself".into()));
            }
            if names.contains(&info.name) {
                return Err(refuse(format!("{} is named twice", info.name)));
            }
            names.push(info.name);
        }
        if !(2..=MAX_CANDIDATES).contains(&names.len()) {
            return Err(refuse(format!(
                "{} policies; give 2 to {MAX_CANDIDATES}, the throughput one first and the \
                 latency-bounding one last",
                names.len()
            )));
        }
        self.names = names;
        self.rebuild()
    }

    /// Builds the candidates afresh: the bounds as expiries, then the candidate settings in
    /// the order given, the groups and the flows' QoS.
    fn rebuild(&mut self) -> Result<(), TunableError> {
        let mut candidates = Vec::with_capacity(self.names.len());
        for name in &self.names {
            let mut policy = super::build(name).expect("checked names");
            let pct = self.value("expire_pct");
            for (tunable, dir) in [("read_expire", 0), ("write_expire", 1)] {
                if let Ok(spec) = tunable::find(policy.tunables(), tunable) {
                    let ms = (self.bound(dir) / MILLISECOND * pct / 100).clamp(spec.min, spec.max);
                    policy.set_tunable(tunable, ms)?;
                }
            }
            candidates.push(policy);
        }
        self.candidates = candidates;
        for (name, text) in self.candidate_settings.clone() {
            // A setting for a policy no longer among the candidates is kept for later.
            if let Some(Err(error)) = self.apply_candidate_setting(&name, &text) {
                return Err(error);
            }
        }
        if let Some(groups) = &self.groups {
            for policy in &mut self.candidates {
                policy.set_groups(groups);
            }
        }
        for &(flow, qos) in &self.flow_qos {
            for policy in &mut self.candidates {
                policy.set_flow_qos(flow, qos);
            }
        }
        self.active = 0;
        self.active_time = vec![0; self.names.len()];
        Ok(())
    }

    /// Applies a candidate setting: `POLICY.NAME` to that candidate, a plain name to each
    /// candidate that has it. `None` when no candidate takes it.
    fn apply_candidate_setting(
        &mut self,
        name: &str,
        text: &str,
    ) -> Option<Result<(), TunableError>> {
        let set = |policy: &mut Box<dyn Policy>, tunable: &str| -> Result<(), TunableError> {
            if let Some(result) = policy.set_text(tunable, text) {
                return result;
            }
            let spec = tunable::find(policy.tunables(), tunable)?;
            let value = spec.parse(text)?;
            policy.set_tunable(spec.name, value)
        };
        match name.split_once('.') {
            Some((policy, tunable)) => {
                let named = super::find(policy).ok()?.name;
                let at = self.names.iter().position(|n| *n == named)?;
                Some(set(&mut self.candidates[at], tunable))
            }
            None => {
                let mut taken = None;
                for policy in &mut self.candidates {
                    if tunable::find(policy.tunables(), name).is_ok()
                        || policy.text_settings().iter().any(|(n, _)| *n == name)
                    {
                        let result = set(policy, name);
                        if result.is_err() {
                            return Some(result);
                        }
                        taken = Some(Ok(()));
                    }
                }
                taken
            }
        }
    }

    /// Closes the periods that ended by `now`, and lets the controller decide at each end.
    fn observe(&mut self, now: Nanos) {
        let window = self.value("W").saturating_mul(MILLISECOND);
        let Some(start) = self.period_start else {
            self.period_start = Some(now);
            self.since = now;
            return;
        };
        if now < start.saturating_add(window) {
            return;
        }
        self.periods += 1;
        let n = self.candidates.len();
        if self.completions[0] + self.completions[1] > 0 {
            let missed = (0..2).any(|dir| self.max_latency[dir] > self.bound(dir));
            let pct = self.value("calm_pct");
            let calm = (0..2).all(|dir| {
                u128::from(self.max_latency[dir]) * 100
                    <= u128::from(self.bound(dir)) * u128::from(pct)
            });
            if missed {
                self.calm = 0;
                if self.active + 1 < n {
                    self.swap(self.active + 1, now);
                }
            } else if calm && self.active > 0 {
                self.calm += 1;
                if self.calm >= self.value("calm_windows") {
                    self.swap(self.active - 1, now);
                }
            } else {
                self.calm = 0;
            }
        }
        // The next period starts now: periods are counted from activity, and a long quiet
        // spell is one period, not many empty ones.
        self.period_start = Some(now);
        self.max_latency = [0; 2];
        self.completions = [0; 2];
        self.swapped_in_period = false;
    }

    /// With `predict`: a step toward the bounding candidate once the oldest queued request of
    /// either direction has waited `predict_pct` of its bound.
    fn predict(&mut self, now: Nanos) {
        if self.value("predict") == 0
            || self.swapped_in_period
            || self.active + 1 >= self.candidates.len()
        {
            return;
        }
        let pct = u128::from(self.value("predict_pct"));
        let late = (0..2).any(|dir| {
            self.ages[dir].first().is_some_and(|(&(arrival, _), _)| {
                u128::from(now.saturating_sub(arrival)) * 100 >= u128::from(self.bound(dir)) * pct
            })
        });
        if late {
            self.calm = 0;
            self.swap(self.active + 1, now);
        }
    }

    /// Makes candidate `to` the active one, handing it the old one's queue.
    fn swap(&mut self, to: usize, now: Nanos) {
        let from = self.active;
        let mut queue = Vec::new();
        self.candidates[from].drain(&mut queue);
        queue.sort_by_key(|r| (r.arrival, r.id));
        for request in queue {
            self.candidates[to].adopt(request, now);
        }
        self.active_time[from] += now.saturating_sub(self.since);
        self.since = now;
        self.active = to;
        self.calm = 0;
        self.swaps += 1;
        self.swapped_in_period = true;
    }

    /// Original request `id`, arrived at `arrival`, is queued in the active candidate.
    fn enter(&mut self, id: u64, arrival: Nanos, write: bool) {
        self.inside.entry(id).or_insert(Inside { arrival, write });
        self.ages[usize::from(write)].insert((arrival, id), ());
    }
}

impl Policy for Dass {
    /// A single-queue scheduler: BLKDEV_MAX_RQ requests (block/blk-core.c, 2.6 to 4.x).
    fn default_nr_requests(&self) -> Option<u32> {
        Some(crate::elevator::LEGACY_NR_REQUESTS)
    }

    fn name(&self) -> &'static str {
        "dass"
    }

    fn try_merge(
        &mut self,
        request: Request,
        limits: MergeLimits,
        now: Nanos,
    ) -> Result<(), Request> {
        self.observe(now);
        let (id, arrival, write) = (
            request.id.0,
            request.arrival,
            request.direction() != crate::request::Direction::Read,
        );
        self.candidates[self.active].try_merge(request, limits, now)?;
        self.enter(id, arrival, write);
        Ok(())
    }

    fn insert(&mut self, request: Request, now: Nanos) {
        self.observe(now);
        let write = request.direction() != crate::request::Direction::Read;
        for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
            self.enter(id.0, request.arrival, write);
        }
        self.candidates[self.active].insert(request, now);
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.observe(now);
        self.predict(now);
        let decision = self.candidates[self.active].dispatch(now);
        if let Dispatch::Request(request) = &decision {
            self.owners.insert(request.id.0, self.active);
            for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
                if let Some(inside) = self.inside.get(&id.0) {
                    self.ages[usize::from(inside.write)].remove(&(inside.arrival, id.0));
                }
            }
        }
        decision
    }

    fn completed(&mut self, request: &Request, now: Nanos) {
        self.observe(now);
        if let Some(owner) = self.owners.remove(&request.id.0) {
            self.candidates[owner].completed(request, now);
        }
        for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
            let Some(inside) = self.inside.remove(&id.0) else {
                continue;
            };
            let dir = usize::from(inside.write);
            let latency = now.saturating_sub(inside.arrival);
            self.max_latency[dir] = self.max_latency[dir].max(latency);
            self.completions[dir] += 1;
            self.worst[dir] = self.worst[dir].max(latency);
            if latency > self.bound(dir) {
                self.over_bound[dir] += 1;
            }
        }
    }

    fn requeue(&mut self, request: Request, now: Nanos) {
        let owner = self.owners.remove(&request.id.0).unwrap_or(self.active);
        for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
            if let Some(inside) = self.inside.get(&id.0) {
                self.ages[usize::from(inside.write)].insert((inside.arrival, id.0), ());
            }
        }
        if owner == self.active {
            self.candidates[owner].requeue(request, now);
        } else {
            // Back to the policy that dispatched it (so it stops counting it in flight), then
            // with the rest of its queue (none: it was handed over) to the active one.
            self.candidates[owner].requeue(request, now);
            let mut queue = Vec::new();
            self.candidates[owner].drain(&mut queue);
            for request in queue {
                self.candidates[self.active].adopt(request, now);
            }
        }
    }

    fn may_allocate(&self, request: &Request, in_use: usize, nr_requests: u32) -> bool {
        self.candidates[self.active].may_allocate(request, in_use, nr_requests)
    }

    fn queued(&self) -> usize {
        self.candidates.iter().map(|c| c.queued()).sum()
    }

    fn drain(&mut self, out: &mut Vec<Request>) {
        let start = out.len();
        for policy in &mut self.candidates {
            policy.drain(out);
        }
        for request in &out[start..] {
            for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
                if let Some(inside) = self.inside.remove(&id.0) {
                    self.ages[usize::from(inside.write)].remove(&(inside.arrival, id.0));
                }
            }
        }
        out[start..].sort_by_key(|r| (r.arrival, r.id));
    }

    fn set_groups(&mut self, groups: &Groups) {
        self.groups = Some(groups.clone());
        for policy in &mut self.candidates {
            policy.set_groups(groups);
        }
    }

    fn set_flow_qos(&mut self, flow: FlowId, qos: Qos) {
        self.flow_qos.retain(|(f, _)| *f != flow);
        self.flow_qos.push((flow, qos));
        for policy in &mut self.candidates {
            policy.set_flow_qos(flow, qos);
        }
    }

    fn uses_qos(&self) -> bool {
        self.candidates.iter().any(|c| c.uses_qos())
    }

    fn tunables(&self) -> &'static [TunableSpec] {
        TUNABLES
    }

    fn tunable(&self, name: &str) -> Result<u64, TunableError> {
        let spec = tunable::find(TUNABLES, name)?;
        Ok(self.value(spec.name))
    }

    fn set_tunable(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        let spec = tunable::find(TUNABLES, name)?;
        spec.check(value)?;
        self.values[index(spec.name)] = value;
        if matches!(spec.name, "read_bound" | "write_bound" | "expire_pct") && self.idle() {
            // The candidates' expiries follow the bounds.
            self.rebuild()?;
        }
        Ok(())
    }

    fn set_text(&mut self, name: &str, text: &str) -> Option<Result<(), TunableError>> {
        if name == "policies" {
            return Some(self.set_policies(text));
        }
        if tunable::find(TUNABLES, name).is_ok() {
            return None;
        }
        let result = self.apply_candidate_setting(name, text)?;
        if result.is_ok() {
            self.candidate_settings
                .push((name.to_string(), text.to_string()));
        }
        Some(result)
    }

    fn text_settings(&self) -> Vec<(&'static str, String)> {
        vec![("policies", self.names.join(","))]
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut active_time = self.active_time.clone();
        if let Some(last) = active_time.get_mut(self.active) {
            // Up to the last event it saw.
            let end = self.period_start.unwrap_or(self.since).max(self.since);
            *last += end.saturating_sub(self.since);
        }
        let ms = |nanos: Nanos| nanos as f64 / MILLISECOND as f64;
        vec![
            ("dass_swaps", self.swaps as f64),
            ("dass_periods", self.periods as f64),
            ("dass_active_at_end", self.active as f64),
            ("dass_reads_over_bound", self.over_bound[0] as f64),
            ("dass_writes_over_bound", self.over_bound[1] as f64),
            ("dass_max_read_latency_ms", ms(self.worst[0])),
            ("dass_max_write_latency_ms", ms(self.worst[1])),
            ("dass_ms_in_first", ms(active_time[0])),
            ("dass_ms_in_last", ms(*active_time.last().unwrap_or(&0))),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elevator::Elevator;
    use crate::group::GroupId;
    use crate::ioprio::IoPrio;
    use crate::request::{Op, RequestId};
    use crate::time::MILLISECOND as MS;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn read(id: u64, flow: u32, offset: u64, at: Nanos) -> Request {
        Request::new(
            RequestId(id),
            Op::Read,
            offset,
            4096,
            true,
            IoPrio::NONE,
            FlowId(flow),
            GroupId::ROOT,
            at,
        )
    }

    /// Dispatches and completes whatever `dass` gives at `now`, each after `service`.
    fn serve(dass: &mut Dass, now: &mut Nanos, service: Nanos) -> usize {
        let mut served = 0;
        while let Dispatch::Request(request) = dass.dispatch(*now) {
            *now += service;
            dass.completed(&request, *now);
            served += 1;
        }
        served
    }

    // Proves the seed's controller: a read over the bound in a period swaps to the bounding
    // policy at the period's end, and calm_windows calm periods swap back to the first.
    #[test]
    fn a_missed_bound_swaps_and_calm_periods_swap_back() {
        let mut dass = Dass::new();
        assert_eq!(dass.active_policy(), "cfq");
        let mut now = 0;
        dass.insert(read(1, 0, 0, 0), 0);
        // The read takes 500 ms: over the 400 ms bound.
        serve(&mut dass, &mut now, 500 * MS);
        assert_eq!(dass.active_policy(), "cfq", "decided only when the period ends");
        now = 1000 * MS;
        dass.insert(read(2, 0, 4096, now), now);
        assert_eq!(dass.active_policy(), "deadline");
        assert_eq!(dass.swaps(), 1);
        // Calm periods: one fast read in each; the third brings cfq back.
        for period in 0..3 {
            serve(&mut dass, &mut now, MS);
            now = (2 + period) * 1000 * MS;
            dass.insert(read(3 + period, 0, 0, now), now);
            let expected = if period < 2 { "deadline" } else { "cfq" };
            assert_eq!(dass.active_policy(), expected, "after calm period {}", period + 1);
        }
        assert_eq!(dass.swaps(), 2);
    }

    // Proves prediction: with predict=1 a read that has waited predict_pct of its bound
    // swaps to the bounding policy before anything completes; without it, nothing does.
    #[test]
    fn prediction_swaps_before_a_miss() {
        for predict in [0, 1] {
            let mut dass = Dass::new();
            dass.set_tunable("predict", predict).unwrap();
            dass.insert(read(1, 0, 0, 0), 0);
            let _ = dass.dispatch(0);
            dass.insert(read(2, 1, 1 << 30, 0), 0);
            let _ = dass.dispatch(299 * MS);
            assert_eq!(dass.active_policy(), "cfq");
            let _ = dass.dispatch(300 * MS);
            let expected = if predict == 1 { "deadline" } else { "cfq" };
            assert_eq!(dass.active_policy(), expected, "predict={predict}");
        }
    }

    // Proves the candidates can be any policies and are checked, and that candidate settings
    // reach the candidate (and survive a change of the bounds).
    #[test]
    fn candidates_and_their_settings() {
        let mut elevator = Elevator::new(Box::new(Dass::new()), 64);
        elevator.set("policies", "bfq, latency, deadline").unwrap();
        let settings = [
            ("deadline.fifo_batch".to_string(), "4".to_string()),
            ("cfq.slice_idle".to_string(), "0".to_string()),
        ];
        // A setting for a candidate reaches it; one for a policy dass does not run is left.
        super::super::apply_settings(&mut elevator, &settings).unwrap();
        elevator.set("read_bound", "300").unwrap();
        let text = elevator.policy().text_settings();
        assert_eq!(text, vec![("policies", "bfq,latency,deadline".to_string())]);
        assert!(elevator.set("nosuch", "1").is_err(), "unknown names are refused");
        for (bad, says) in [
            ("deadline", "2 to 8"),
            ("cfq,dass", "itself"),
            ("cfq,cfq", "twice"),
            ("cfq,nosuch", "nosuch"),
        ] {
            let error = elevator.set("policies", bad).unwrap_err().to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
        // read_expire was given after the bounds' 50%: it stays 100 ms after a bound change.
        let dass = Dass::new();
        let mut dass = dass;
        dass.set_text("read_expire", "100").unwrap().unwrap();
        dass.set_tunable("read_bound", 1000).unwrap();
        let deadline = &dass.candidates[1];
        assert_eq!(deadline.tunable("read_expire").unwrap(), 100);
        assert_eq!(deadline.tunable("write_expire").unwrap(), 2000, "50% of 4 s");
        assert!(dass.set_text("nosuch", "1").is_none());
        dass.set_text("deadline.fifo_batch", "4").unwrap().unwrap();
        assert_eq!(dass.candidates[1].tunable("fifo_batch").unwrap(), 4);
    }

    #[derive(Clone, Debug)]
    struct Flow {
        depth: usize,
        think: Nanos,
        write_pct: u8,
        count: usize,
    }

    fn flow() -> impl Strategy<Value = Flow> {
        (1usize..4, 0u64..5, 0u8..60, 5usize..300).prop_map(|(depth, think, write_pct, count)| {
            Flow {
                depth,
                think: think * MS,
                write_pct,
                count,
            }
        })
    }

    /// One completion: id, arrival, completion, whether a write.
    type Done = (u64, Nanos, Nanos, bool);

    /// A one-command disk under dass: seek time by distance, 4 KiB transfers, closed-loop
    /// `flows`, and the forced swaps `swaps` (time, candidate). Returns every completion and
    /// every swap, forced or the controller's, as (time, candidate now active).
    fn run(
        candidates: &str,
        flows: &[Flow],
        swaps: &[(Nanos, usize)],
        seed: u64,
    ) -> (Vec<Done>, Vec<(Nanos, usize)>) {
        let mut dass = Dass::new();
        dass.set_text("policies", candidates).unwrap().unwrap();
        let n = dass.candidates.len();
        let limits = MergeLimits {
            max_request_bytes: 512 << 10,
        };
        let mut rng = seed | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut issued = vec![0usize; flows.len()];
        let mut outstanding = vec![0usize; flows.len()];
        let mut ready_at = vec![0 as Nanos; flows.len()];
        let mut arrivals: BTreeMap<u64, (Nanos, usize)> = BTreeMap::new();
        let mut id = 0u64;
        let mut now: Nanos = 0;
        let mut busy: Option<(Nanos, Request)> = None;
        let mut head = 0u64;
        let mut done = Vec::new();
        let mut log = Vec::new();
        let mut forced: Vec<(Nanos, usize)> = swaps.to_vec();
        forced.sort();
        forced.reverse();
        let mut wake: Option<Nanos> = None;
        let mut seen_swaps = 0;
        loop {
            for (f, flow) in flows.iter().enumerate() {
                while issued[f] < flow.count && outstanding[f] < flow.depth && ready_at[f] <= now
                {
                    let mut request = read(id, f as u32, (next() % (1 << 18)) * 4096, now);
                    if (next() % 100) < u64::from(flow.write_pct) {
                        request.op = Op::Write;
                        request.sync = false;
                    }
                    arrivals.insert(id, (now, f));
                    id += 1;
                    issued[f] += 1;
                    outstanding[f] += 1;
                    if let Err(request) = dass.try_merge(request, limits, now) {
                        dass.insert(request, now);
                    }
                }
            }
            while forced.last().is_some_and(|(at, _)| *at <= now) {
                let (_, to) = forced.pop().expect("due");
                dass.observe(now);
                if to % n != dass.active {
                    dass.swap(to % n, now);
                }
            }
            if busy.is_none() {
                match dass.dispatch(now) {
                    Dispatch::Request(request) => {
                        let distance = request.offset.abs_diff(head) >> 20;
                        let service = MS + distance * 8 * MS / 1024 + request.len * 20;
                        head = request.offset + request.len;
                        busy = Some((now + service, request));
                        wake = None;
                    }
                    Dispatch::WaitUntil(at) => wake = Some(at.max(now + 1)),
                    Dispatch::Empty => wake = None,
                }
            }
            if dass.swaps() != seen_swaps {
                seen_swaps = dass.swaps();
                log.push((now, dass.active));
            }
            let all_issued = flows.iter().enumerate().all(|(f, fl)| issued[f] == fl.count);
            if all_issued && busy.is_none() && dass.queued() == 0 {
                return (done, log);
            }
            let mut at = Nanos::MAX;
            if let Some((end, _)) = &busy {
                at = at.min(*end);
            }
            if let Some(w) = wake {
                at = at.min(w);
            }
            for (f, flow) in flows.iter().enumerate() {
                if issued[f] < flow.count && outstanding[f] < flow.depth {
                    at = at.min(ready_at[f].max(now));
                }
            }
            if let Some((s, _)) = forced.last() {
                at = at.min(*s);
            }
            assert!(at != Nanos::MAX, "stuck with {} queued", dass.queued());
            now = at.max(now);
            if busy.as_ref().is_some_and(|(end, _)| *end <= now) {
                let (end, request) = busy.take().expect("busy");
                dass.completed(&request, end);
                for original in std::iter::once(request.id).chain(request.merged.iter().copied())
                {
                    let (arrival, f) = arrivals.remove(&original.0).expect("issued once");
                    done.push((original.0, arrival, end, request.op == Op::Write));
                    outstanding[f] -= 1;
                    ready_at[f] = end + flows[f].think;
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        // Proves the swap is lossless and keeps deadlines: under random workloads (closed-loop
        // flows of reads and writes, at most 9 requests outstanding, well within the disk's
        // capacity) and random forced swaps between any candidates, every request completes
        // exactly once; and once the bounding policy has been active for one W, every request
        // that completes under it is within its bound (those handed over included: writes,
        // whose 4 s bound is longer than W, keep the deadline their arrival gave them).
        #[test]
        fn swaps_lose_nothing_and_keep_the_bounds(
            flows in proptest::collection::vec(flow(), 1..4),
            swaps in proptest::collection::vec((0u64..3000, 0usize..3), 0..8),
            candidates in prop_oneof![
                Just("cfq,deadline"),
                Just("bfq,anticipatory,deadline"),
                Just("noop,latency,deadline"),
            ],
            seed in any::<u64>(),
        ) {
            let swaps: Vec<(Nanos, usize)> =
                swaps.into_iter().map(|(t, to)| (t * MS, to)).collect();
            let (done, log) = run(candidates, &flows, &swaps, seed);
            let total: usize = flows.iter().map(|f| f.count).sum();
            let mut ids: Vec<u64> = done.iter().map(|d| d.0).collect();
            ids.sort_unstable();
            let before = ids.len();
            ids.dedup();
            prop_assert_eq!(before, ids.len(), "a request completed twice");
            prop_assert_eq!(ids.len(), total, "every request completes");
            let last = candidates.split(',').count() - 1;
            // Which candidate was active at time t, from the swap log.
            let active_at = |t: Nanos| {
                log.iter().take_while(|(at, _)| *at <= t).last().map_or(0, |s| s.1)
            };
            let bounding_since = |t: Nanos| {
                // The start of the bounding policy's current turn, if it is active at t.
                if active_at(t) != last {
                    return None;
                }
                log.iter().rev().find(|(at, to)| *at <= t && *to == last).map(|s| s.0)
            };
            for &(id, arrival, completion, write) in &done {
                let Some(since) = bounding_since(completion) else { continue };
                if completion < since + 1000 * MS || log.iter().any(|(at, _)| *at > since && *at < completion) {
                    continue;
                }
                let bound = if write { 4000 * MS } else { 400 * MS };
                prop_assert!(
                    completion - arrival <= bound,
                    "request {} ({}) waited {} ms under the bounding policy, in its turn since {} ms",
                    id,
                    if write { "write" } else { "read" },
                    (completion - arrival) / MS,
                    since / MS
                );
            }
        }
    }
}

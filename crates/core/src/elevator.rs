//! The elevator: what every Linux scheduler shares around its policy.
//!
//! The kernel's block layer wraps each `elevator_mq_ops` with generic machinery: a bounded pool
//! of scheduler requests (`nr_requests`, held from insertion until completion), a maximum request
//! size for merges (`max_sectors_kb`), and a switch to turn merging off (`nomerges`). The
//! [`Elevator`] is that wrapper. Engines talk only to it, so every policy gets the same limits
//! and the same accounting, and no policy can be handed more requests than `nr_requests`.

use crate::group::Groups;
use crate::policy::{Dispatch, HeldBy, Policy};
use crate::qos::Qos;
use crate::request::{Direction, FlowId, MergeLimits, Op, Request};
use crate::stage::Stage;
use crate::time::Nanos;
use crate::tunable::{self, TunableError, TunableSpec, Unit};
use rustc_hash::{FxHashMap, FxHashSet};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// `nr_requests` of the single-queue block layer's schedulers (BLKDEV_MAX_RQ).
pub const LEGACY_NR_REQUESTS: u32 = 128;

/// Default `nr_requests` for a device that accepts `device_queue_depth` commands at once:
/// `2 * min(depth, 128)`, as `blk_mq_init_sched` sets it.
pub fn default_nr_requests(device_queue_depth: u32) -> u32 {
    2 * device_queue_depth.clamp(1, 128)
}

/// The queue tunables every policy shares, as in `/sys/block/X/queue/`.
pub const QUEUE_TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "nr_requests",
        unit: Unit::Requests,
        default: 64,
        min: 4,
        max: 65_536,
        doc: "most requests queued in the scheduler or in flight on the device at once; \
              submitters wait beyond it (Linux: 2 x min(device queue depth, 128))",
    },
    TunableSpec {
        name: "max_sectors_kb",
        unit: Unit::Kibibytes,
        default: 1280,
        min: 4,
        max: 32_768,
        doc: "largest request merging may build (Linux default BLK_DEF_MAX_SECTORS_CAP, 1280 KiB)",
    },
    TunableSpec {
        name: "nr_group_requests",
        unit: Unit::Requests,
        default: 0,
        min: 0,
        max: 65_536,
        doc: "most requests one cgroup may hold at once (0: no per-group limit); seed 003's \
              IO controller gave each group its own request descriptors so that one group's \
              flood cannot keep another's requests out of the scheduler",
    },
    TunableSpec {
        name: "request_lists",
        unit: Unit::Flag,
        default: 0,
        min: 0,
        max: 1,
        doc: "1: nr_requests counts reads and writes apart, as the single-queue block layer's \
              request_list did before blk-mq (count[READ], count[WRITE] in 2.6.18): a flood \
              of writes cannot take the reads' requests; 0: one pool, as blk-mq's tags",
    },
    TunableSpec {
        name: "nomerges",
        unit: Unit::Flag,
        default: 0,
        min: 0,
        max: 1,
        doc: "1 disables merging entirely (Linux's nomerges=2; its one-hit mode 1 is not modelled)",
    },
];

fn direction_index(direction: crate::request::Direction) -> usize {
    match direction {
        crate::request::Direction::Read => 0,
        crate::request::Direction::Write => 1,
    }
}

/// Counters kept by the elevator, in requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElevatorStats {
    /// Requests offered by the engine (admitted or merged).
    pub submitted: u64,
    /// Requests merged into a queued request.
    pub merged: u64,
    /// Requests queued in the policy.
    pub inserted: u64,
    /// Requests sent to the device.
    pub dispatched: u64,
    /// Requests the device finished (merged companions not counted).
    pub completed: u64,
    /// Requests the device handed back.
    pub requeued: u64,
    /// Times a request was turned away because `nr_requests` (or its group's
    /// `nr_group_requests`) were in use: a waiter set aside until its group frees a request
    /// ([`Waiters`]) counts once for that wait.
    pub full: u64,
    /// Times the policy turned a request away with room in the queue
    /// ([`Policy::may_allocate`], Linux's `limit_depth`): a waiter set aside under a hold
    /// ([`Policy::allocation_hold`]) is not asked again until the hold loosens, so counts once
    /// for that wait.
    pub limited: u64,
    /// Requests a stage above the policy held back.
    pub held: u64,
}

/// How a submitted request was taken in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admitted {
    /// Folded into a request already queued; it completes with that one.
    Merged,
    /// Queued in the policy.
    Queued,
    /// Held by the stage above the policy; it enters the policy when the stage releases it.
    Held,
}

/// A policy inside the queue limits every scheduler shares.
pub struct Elevator {
    policy: Box<dyn Policy>,
    stage: Option<Box<dyn Stage>>,
    /// Requests the stage released that wait for a free scheduler request.
    released: VecDeque<Request>,
    /// Cache flushes, which bypass the stage and the policy and go to the device before
    /// anything the policy holds (block/blk-flush.c: `blk_insert_flush` sends a flush with no
    /// data straight to the dispatch list's head, `blk_mq_request_bypass_insert`).
    flushes: VecDeque<Request>,
    nr_requests: u32,
    max_sectors_kb: u32,
    nomerges: bool,
    nr_group_requests: u32,
    /// `request_lists`: nr_requests per direction.
    per_direction: bool,
    /// Requests each direction holds (queued or in flight), reads then writes.
    held_by_direction: [usize; 2],
    /// Requests each group holds (queued in the policy or in flight), when limited.
    per_group: rustc_hash::FxHashMap<crate::group::GroupId, u32>,
    /// Groups that freed a request since the waiters last asked (`Elevator::loosened`), once
    /// a group's waiter was held for its `nr_group_requests` (`Elevator::waiter_group_held`).
    freed_groups: Vec<crate::group::GroupId>,
    freed_marked: rustc_hash::FxHashSet<crate::group::GroupId>,
    group_holds: bool,
    in_flight: usize,
    stats: ElevatorStats,
}

impl Elevator {
    /// Wraps `policy` with `nr_requests` scheduler requests and Linux's other queue defaults.
    pub fn new(policy: Box<dyn Policy>, nr_requests: u32) -> Self {
        assert!(nr_requests >= 1);
        // A single-queue scheduler keeps its own default (Policy::default_nr_requests).
        let nr_requests = policy.default_nr_requests().unwrap_or(nr_requests);
        Elevator {
            policy,
            stage: None,
            released: VecDeque::new(),
            flushes: VecDeque::new(),
            nr_requests,
            max_sectors_kb: QUEUE_TUNABLES[1].default as u32,
            nomerges: false,
            nr_group_requests: 0,
            per_direction: false,
            held_by_direction: [0; 2],
            per_group: rustc_hash::FxHashMap::default(),
            freed_groups: Vec::new(),
            freed_marked: rustc_hash::FxHashSet::default(),
            group_holds: false,
            in_flight: 0,
            stats: ElevatorStats::default(),
        }
    }

    /// Puts `stage` above the policy (`throttle+deadline`).
    pub fn with_stage(mut self, mut stage: Box<dyn Stage>) -> Self {
        stage.set_nr_requests(self.nr_requests);
        self.stage = Some(stage);
        self
    }

    /// The stage above the policy, if any.
    pub fn stage(&self) -> Option<&dyn Stage> {
        self.stage.as_deref()
    }

    /// Hands the groups' settings (`io.weight`, `io.max`, ...) to the stage and the policy.
    pub fn set_groups(&mut self, groups: &Groups) {
        if let Some(stage) = &mut self.stage {
            stage.set_groups(groups);
        }
        self.policy.set_groups(groups);
    }

    /// Hands a job's own QoS (`qos_*`) to the policy.
    pub fn set_flow_qos(&mut self, flow: FlowId, qos: Qos) {
        self.policy.set_flow_qos(flow, qos);
    }

    /// Whether the policy reads QoS settings.
    pub fn uses_qos(&self) -> bool {
        self.policy.uses_qos()
    }

    /// Requests held by the stage or released and waiting for a scheduler request.
    pub fn held(&self) -> usize {
        self.stage.as_ref().map_or(0, |s| s.held()) + self.released.len()
    }

    /// The merge limits in force.
    pub fn merge_limits(&self) -> MergeLimits {
        MergeLimits {
            max_request_bytes: u64::from(self.max_sectors_kb) * 1024,
        }
    }

    /// Whether a new request (that does not merge) would be admitted now.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.queued() + self.in_flight < self.nr_requests as usize
    }

    /// Whether a new request in `direction` would be admitted now: room in the queue, or
    /// with `request_lists` in that direction's list.
    #[inline]
    pub fn has_room_in(&self, direction: crate::request::Direction) -> bool {
        if self.per_direction {
            self.held_by_direction[direction_index(direction)] < self.nr_requests as usize
        } else {
            self.has_room()
        }
    }

    /// Whether requests the stage released wait for a scheduler request: then every new
    /// request but a flush waits behind them ([`Elevator::submit`]).
    pub fn stage_backlog(&self) -> bool {
        self.stage.is_some() && !self.released.is_empty()
    }

    /// Whether a new request of `group` in `direction` would be admitted now: room in the
    /// queue (or the direction's list), and in the group's own share when
    /// `nr_group_requests` is set.
    pub fn has_room_for(
        &self,
        group: crate::group::GroupId,
        direction: crate::request::Direction,
    ) -> bool {
        self.has_room_in(direction)
            && (self.nr_group_requests == 0
                || self.per_group.get(&group).copied().unwrap_or(0) < self.nr_group_requests)
    }

    /// Requests in use that count against a new one's allocation.
    fn in_use(&self, direction: crate::request::Direction) -> usize {
        if self.per_direction {
            self.held_by_direction[direction_index(direction)]
        } else {
            self.queued() + self.in_flight
        }
    }

    /// Offers a request. It may merge into a queued one (even when the queue is full, as a bio
    /// merges without needing a free request in the kernel), or be queued if there is room;
    /// otherwise it is handed back and the submitter must wait for a completion.
    pub fn submit(&mut self, request: Request, now: Nanos) -> Result<Admitted, Request> {
        let room = self.has_room_for(request.group, request.direction());
        if request.op == Op::Flush {
            // It takes a request like any other, but neither the stage nor the policy sees it.
            if !room {
                self.stats.full += 1;
                return Err(request);
            }
            self.stats.submitted += 1;
            self.stats.inserted += 1;
            if self.nr_group_requests > 0 {
                *self.per_group.entry(request.group).or_insert(0) += 1;
            }
            self.held_by_direction[direction_index(request.direction())] += 1;
            self.flushes.push_back(request);
            return Ok(Admitted::Queued);
        }
        let request = match &mut self.stage {
            None => request,
            Some(_) if !room || !self.released.is_empty() => {
                // The submitter waits for a request before the stage sees the bio, so a
                // stage is never asked twice about the same one. It also waits behind
                // requests the stage has released and that wait for a request themselves:
                // they were submitted first, and a flow that took every freed request at
                // once kept a throttled group's released write out of the scheduler for
                // the whole run (found by the starvation guard).
                self.stats.full += 1;
                return Err(request);
            }
            Some(stage) => match stage.admit(request, now) {
                Some(request) => request,
                None => {
                    self.stats.submitted += 1;
                    self.stats.held += 1;
                    return Ok(Admitted::Held);
                }
            },
        };
        match self.enter(request, now) {
            // Past the stage, a request the policy turns away (`may_allocate`) waits with the
            // released ones: the stage has counted it and must not see it again.
            Err(request) if self.stage.is_some() => {
                self.stats.submitted += 1;
                self.stats.held += 1;
                self.released.push_back(request);
                Ok(Admitted::Held)
            }
            entered => entered,
        }
    }

    /// Offers `request` to the policy's merging alone, as a bio tries to merge before it
    /// waits for a request: blk-mq's `blk_mq_submit_bio` calls `blk_mq_attempt_bio_merge`
    /// before `blk_mq_get_new_requests` may sleep for a tag, as 2.6's `__make_request` called
    /// `elv_merge` before `get_request_wait`. Nothing merges past a stage (blk-throttle sees
    /// a bio before any merge), with `nomerges`, or for a flush.
    pub fn merge_before_waiting(
        &mut self,
        request: Request,
        now: Nanos,
    ) -> Result<Admitted, Request> {
        if self.stage.is_some() || self.nomerges || request.op == Op::Flush {
            return Err(request);
        }
        self.policy.try_merge(request, self.merge_limits(), now)?;
        self.stats.submitted += 1;
        self.stats.merged += 1;
        Ok(Admitted::Merged)
    }

    /// Whether a waiter of `group` in `direction` can have a request now ([`has_room_for`]);
    /// one that cannot is counted as turned away for a full queue, as a failed
    /// [`Elevator::submit`] is. A waiter without a request does not merge: the kernel's
    /// sleeper in `blk_mq_get_tag` (`get_request_wait` in 2.6) tries no merge until it holds
    /// one.
    ///
    /// [`has_room_for`]: Elevator::has_room_for
    pub fn waiter_has_room(&mut self, group: crate::group::GroupId, direction: Direction) -> bool {
        let room = self.has_room_for(group, direction);
        if !room {
            self.stats.full += 1;
        }
        room
    }

    /// Whether the policy lets a waiter that has room take a request now
    /// ([`Policy::may_allocate`]), asked before the waiter tries its insert merge: a sleeper
    /// in `blk_mq_get_tag` takes its tag under the depth `limit_depth` gave it (bfq's
    /// `bfq_limit_depth`) and merges only once it holds a request, at insertion
    /// (`blk_mq_sched_try_insert_merge`). One turned away is counted as limited, as a refused
    /// [`Elevator::submit`] is. Behind a stage the stage sees the bio first ([`Elevator::submit`]
    /// decides), and a flush is never limited: both are let through here.
    pub fn waiter_may_allocate(&mut self, request: &Request) -> bool {
        if self.stage.is_some() || request.op == Op::Flush {
            return true;
        }
        let in_use = self.in_use(request.direction());
        let allowed = self.policy.may_allocate(request, in_use, self.nr_requests);
        if !allowed {
            self.stats.limited += 1;
        }
        allowed
    }

    /// What holds back a waiter [`Elevator::waiter_may_allocate`] just turned away, when the
    /// policy will report it loosened ([`Policy::allocation_hold`]): the waiters then set it
    /// aside. Only with one pool of requests and no group limit or stage, where a waiter the
    /// policy turns away changes nothing in the pass but its flow's turn (see
    /// [`Waiters`]); `None` otherwise, and the waiter is asked again at every pass.
    fn waiter_hold(&mut self, request: &Request) -> Option<HeldBy> {
        if self.stage.is_some()
            || self.per_direction
            || self.nr_group_requests > 0
            || request.op == Op::Flush
        {
            return None;
        }
        let in_use = self.in_use(request.direction());
        self.policy
            .allocation_hold(request, in_use, self.nr_requests)
    }

    /// Whether a waiter of `group` in `direction` that [`Elevator::waiter_has_room`] turned
    /// away is held by its group's `nr_group_requests` alone (room in the queue, none in the
    /// group), which only a completion of the group frees: the waiters then set it aside
    /// until one ([`Elevator::loosened`]). Only with one pool of requests and no stage.
    fn waiter_group_held(
        &mut self,
        group: crate::group::GroupId,
        direction: crate::request::Direction,
    ) -> bool {
        let held = self.nr_group_requests > 0
            && self.stage.is_none()
            && !self.per_direction
            && self.has_room_in(direction)
            && self.per_group.get(&group).copied().unwrap_or(0) >= self.nr_group_requests;
        self.group_holds |= held;
        held
    }

    /// The holds that may have loosened since the last call: the policy's
    /// ([`Policy::loosened`]) in `keys`, `true` when all of them may have; the groups that
    /// freed a request in `groups`.
    fn loosened(&mut self, keys: &mut Vec<u64>, groups: &mut Vec<crate::group::GroupId>) -> bool {
        groups.append(&mut self.freed_groups);
        self.freed_marked.clear();
        self.policy.loosened(self.nr_requests, keys)
    }

    /// Whether the policy would turn `request` away now, asked without counting it: a debug
    /// build's check that a waiter set aside is still held.
    #[cfg(debug_assertions)]
    fn turns_away(&self, request: &Request) -> bool {
        let in_use = self.in_use(request.direction());
        !self.policy.may_allocate(request, in_use, self.nr_requests)
    }

    /// A request past the stage: merged, or queued if there is room.
    fn enter(&mut self, request: Request, now: Nanos) -> Result<Admitted, Request> {
        let request = if self.nomerges {
            request
        } else {
            match self.policy.try_merge(request, self.merge_limits(), now) {
                Ok(()) => {
                    self.stats.submitted += 1;
                    self.stats.merged += 1;
                    return Ok(Admitted::Merged);
                }
                Err(request) => request,
            }
        };
        if !self.has_room_for(request.group, request.direction()) {
            self.stats.full += 1;
            return Err(request);
        }
        let in_use = self.in_use(request.direction());
        if !self.policy.may_allocate(&request, in_use, self.nr_requests) {
            self.stats.limited += 1;
            return Err(request);
        }
        self.stats.submitted += 1;
        self.stats.inserted += 1;
        if self.nr_group_requests > 0 {
            *self.per_group.entry(request.group).or_insert(0) += 1;
        }
        self.held_by_direction[direction_index(request.direction())] += 1;
        self.policy.insert(request, now);
        Ok(Admitted::Queued)
    }

    /// Asks the policy what to send next and counts what leaves for the device.
    pub fn dispatch(&mut self, now: Nanos) -> Dispatch {
        if let Some(stage) = &mut self.stage {
            stage.release(now, &mut self.released);
        }
        while let Some(request) = self.released.pop_front() {
            if let Err(request) = self.enter(request, now) {
                self.released.push_front(request);
                break;
            }
        }
        if let Some(flush) = self.flushes.pop_front() {
            self.in_flight += 1;
            self.stats.dispatched += 1;
            return Dispatch::Request(flush);
        }
        // The policy's answer is returned in place, on every path: moved into a tuple to be
        // matched, it was copied out of the stack slot the policy had just written field by
        // field, a copy the CPU cannot forward from its store buffer (4% of the time with 4
        // synchronous readers, in perf's profile).
        let mut decision = self.policy.dispatch(now);
        if let Dispatch::Request(_) = decision {
            self.in_flight += 1;
            self.stats.dispatched += 1;
        } else if let Some(release) = match &mut self.stage {
            Some(stage) if stage.held() > 0 => stage.next_release(now),
            _ => None,
        } {
            match decision {
                Dispatch::WaitUntil(at) => decision = Dispatch::WaitUntil(at.min(release)),
                Dispatch::Empty => decision = Dispatch::WaitUntil(release),
                Dispatch::Request(_) => {}
            }
        }
        decision
    }

    /// The device finished `request`.
    pub fn completed(&mut self, request: &Request, now: Nanos) {
        assert!(self.in_flight > 0, "completion without a request in flight");
        self.in_flight -= 1;
        self.stats.completed += 1;
        if let Some(held) = self.per_group.get_mut(&request.group) {
            *held = held.saturating_sub(1);
            if self.group_holds && self.freed_marked.insert(request.group) {
                self.freed_groups.push(request.group);
            }
        }
        let held = &mut self.held_by_direction[direction_index(request.direction())];
        *held = held.saturating_sub(1);
        if request.op == Op::Flush {
            // The stage and the policy never saw it.
            return;
        }
        if let Some(stage) = &mut self.stage {
            stage.completed(request, now);
        }
        self.policy.completed(request, now);
    }

    /// The device handed `request` back unserved.
    pub fn requeue(&mut self, request: Request, now: Nanos) {
        assert!(self.in_flight > 0, "requeue without a request in flight");
        self.in_flight -= 1;
        self.stats.requeued += 1;
        if request.op == Op::Flush {
            self.flushes.push_front(request);
            return;
        }
        self.policy.requeue(request, now);
    }

    /// Requests queued: in the policy, and flushes waiting to go.
    #[inline]
    pub fn queued(&self) -> usize {
        self.policy.queued() + self.flushes.len()
    }

    /// Requests dispatched and not yet completed.
    #[inline]
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The `nr_requests` limit.
    pub fn nr_requests(&self) -> u32 {
        self.nr_requests
    }

    /// Counters so far.
    pub fn stats(&self) -> ElevatorStats {
        self.stats
    }

    /// The policy inside.
    pub fn policy(&self) -> &dyn Policy {
        self.policy.as_ref()
    }

    /// The policy inside, mutably.
    pub fn policy_mut(&mut self) -> &mut dyn Policy {
        self.policy.as_mut()
    }

    /// Every tunable with its current value: the queue's first, then the policy's.
    pub fn tunables(&self) -> Vec<(TunableSpec, u64)> {
        let mut out: Vec<(TunableSpec, u64)> = QUEUE_TUNABLES
            .iter()
            .map(|spec| (*spec, self.queue_value(spec.name).expect("queue tunable")))
            .collect();
        if let Some(stage) = &self.stage {
            for spec in stage.tunables() {
                let value = stage
                    .tunable(spec.name)
                    .expect("a stage reads its own tunables");
                out.push((*spec, value));
            }
        }
        for spec in self.policy.tunables() {
            let value = self
                .policy
                .tunable(spec.name)
                .expect("a policy reads its own tunables");
            out.push((*spec, value));
        }
        out
    }

    fn queue_value(&self, name: &str) -> Option<u64> {
        match name {
            "nr_requests" => Some(u64::from(self.nr_requests)),
            "max_sectors_kb" => Some(u64::from(self.max_sectors_kb)),
            "nomerges" => Some(u64::from(self.nomerges)),
            "nr_group_requests" => Some(u64::from(self.nr_group_requests)),
            "request_lists" => Some(u64::from(self.per_direction)),
            _ => None,
        }
    }

    /// Sets a queue or policy tunable by name from text, as writing to its sysfs file does.
    pub fn set(&mut self, name: &str, text: &str) -> Result<(), TunableError> {
        if let Ok(spec) = tunable::find(QUEUE_TUNABLES, name) {
            let value = spec.parse(text)?;
            match name {
                "nr_requests" => {
                    self.nr_requests = value as u32;
                    if let Some(stage) = &mut self.stage {
                        stage.set_nr_requests(self.nr_requests);
                    }
                }
                "nr_group_requests" => {
                    if self.in_flight > 0 || self.policy.queued() > 0 {
                        return Err(TunableError::BadValue {
                            name: spec.name,
                            value: text.to_string(),
                            reason: "requests are queued or in flight; set it before the run"
                                .into(),
                        });
                    }
                    self.nr_group_requests = value as u32;
                }
                "max_sectors_kb" => self.max_sectors_kb = value as u32,
                "nomerges" => self.nomerges = value == 1,
                "request_lists" => self.per_direction = value == 1,
                _ => unreachable!("every queue tunable is handled"),
            }
            return Ok(());
        }
        if let Some(stage) = &mut self.stage {
            if let Ok(spec) = tunable::find(stage.tunables(), name) {
                let value = spec.parse(text)?;
                return stage.set_tunable(name, value);
            }
        }
        if let Some(result) = self.policy.set_text(name, text) {
            return result;
        }
        let spec = match tunable::find(self.policy.tunables(), name) {
            Ok(spec) => spec,
            Err(_) => {
                let mut known: Vec<&'static str> = QUEUE_TUNABLES.iter().map(|s| s.name).collect();
                if let Some(stage) = &self.stage {
                    known.extend(stage.tunables().iter().map(|s| s.name));
                }
                known.extend(self.policy.tunables().iter().map(|s| s.name));
                return Err(TunableError::Unknown {
                    name: name.to_string(),
                    known,
                });
            }
        };
        let value = spec.parse(text)?;
        self.policy.set_tunable(name, value)
    }

    /// The current value of a queue or policy tunable.
    pub fn get(&self, name: &str) -> Result<u64, TunableError> {
        if let Some(value) = self.queue_value(name) {
            return Ok(value);
        }
        if let Some(stage) = &self.stage {
            if let Ok(value) = stage.tunable(name) {
                return Ok(value);
            }
        }
        self.policy.tunable(name)
    }
}
/// Submitters waiting for a scheduler request, in the order they came: blk-mq's tag wait
/// queues, which both engines keep in front of the [`Elevator`].
///
/// A waiter goes in as soon as the elevator takes it: in order, each submitter (flow) behind
/// its own earlier requests, and, with `nr_group_requests` set, each cgroup behind its own.
/// One turned away for its kind ([`Policy::may_allocate`]: bfq's async writes past half the
/// requests) does not hold back others the policy keeps requests for (sync reads), as a task
/// blocked in `blk_mq_get_tag` does not hold back another's allocation. When the queue is
/// full, nobody passes anybody: the first one turned away ends the pass. A request tries to
/// merge once as it arrives, before it waits ([`Elevator::merge_before_waiting`]), and a
/// waiter merges again only when it has a request (as the kernel's insert merge,
/// `blk_mq_sched_try_insert_merge`, does): a full queue turns waiters away without asking the
/// policy. The queue holds no more than the engines' submitters have in flight, which their
/// job depths bound.
///
/// The waiters are kept in lanes, one per flow and direction, each a FIFO, with the lanes'
/// first waiters ordered by arrival: a pass visits lanes, not waiters, so a flow the policy
/// turns away costs one visit however many requests it has waiting (with 64 jobs at depth 64
/// under bfq, a pass over one queue of 4000 waiters was the engine's main cost). The heads
/// are kept per direction, so that once a direction is full its lanes are not visited at all
/// (with `request_lists` and 1024 readers, a pass used to step over every reader's lane after
/// the reads' list filled). A pass takes the heads it visits out in order (`Heads`) and puts
/// back those that stay, which are then the earliest.
///
/// A lane whose first waiter the policy turns away under a hold it will report loosened
/// ([`Policy::allocation_hold`]: bfq's queue over its share of the requests) is set aside
/// until the policy reports it ([`Policy::loosened`]), as a task sleeping on its tag waits to
/// be woken, so a pass does not ask it again and again (with 64 jobs at depth 64 under bfq,
/// 27 times per request). A pass treats a lane set aside as the visit it replaces (its flow's
/// later lanes wait behind it), so the waiters go in as they would if each were asked. A
/// hold the policy reports loosened gives back its lanes one at a time, in arrival order: the
/// first is asked in its turn, and unless the same hold turns it away again the next comes
/// back, later in the same pass (a hold is shared, [`Policy::allocation_hold`]: what it turns
/// away once it turns away for all its lanes; with 256 jobs per cgroup under bfq, giving them
/// all back at each completion in the cgroup cost 240 questions per request). A lane's own key
/// reported loosened gives that lane back at once. So is a lane whose group holds all its
/// `nr_group_requests` while the queue has room set aside, until one of the group's requests
/// completes, and then given back with the group's others.
#[derive(Debug, Default)]
pub struct Waiters {
    /// Each lane's waiters in arrival order, with their arrival numbers.
    lanes: FxHashMap<Lane, VecDeque<(u64, Request)>>,
    /// The arrival number of each non-empty lane's first waiter, in order, per direction.
    heads: [Heads; 2],
    /// The heads a pass visited and left, per direction, kept between passes for their memory.
    visited: [Vec<Head>; 2],
    /// The next arrival number.
    next: u64,
    /// Waiters in all.
    len: usize,
    /// Flushes among them: the only waiters a stage's backlog does not hold back.
    flushes: usize,
    /// A pass's flows and groups turned away, kept between passes for their memory.
    stuck_flows: FxHashSet<FlowId>,
    stuck_groups: FxHashSet<crate::group::GroupId>,
    /// Lanes set aside: those whose first waiter the policy turned away under a hold it
    /// reports loosened ([`Policy::allocation_hold`]), by hold, with their heads (out of
    /// `heads` until then) and directions. Emptied holds stay for their memory, unless
    /// LANES_KEPT holds are listed (a bfq queue's hold is new each time the queue is).
    parked: FxHashMap<Hold, Parked>,
    /// The lanes set aside under a policy's hold, by their own keys ([`HeldBy::own`]), with
    /// that hold's key.
    owned: Owned,
    /// The lanes of an own key being given back (kept for its memory).
    owned_scratch: Vec<(Head, u8, u64)>,
    /// Lanes given back one at a time for a loosened hold and not visited yet, with that
    /// hold's key ([`Waiters::probe`]).
    probes: FxHashMap<Lane, u64>,
    /// The holds reported loosened that have not turned a waiter away since (some may have,
    /// [`Parked::loose`] says): a pass begins by giving back the first lane of each.
    loose: Vec<u64>,
    /// Lanes set aside in all.
    parked_len: usize,
    /// Each flow with a lane set aside: the arrival of that lane's head, per direction
    /// (`u64::MAX`: none).
    parked_flows: FxHashMap<FlowId, [u64; 2]>,
    /// The holds the policy reported loosened, and the groups that freed a request, kept
    /// between passes for their memory.
    loosened: Vec<u64>,
    freed_groups: Vec<crate::group::GroupId>,
    /// Never sets a lane aside (tests compare the two).
    #[cfg(test)]
    asking_all: bool,
}

/// The lanes set aside under one hold.
#[derive(Debug, Default)]
struct Parked {
    /// By head (arrival order), with their own keys ([`HeldBy::own`]) if they have one.
    lanes: ParkedLanes,
    /// A policy's hold reported loosened that has not turned a waiter away since: its lanes
    /// may go in, and come back one at a time to be asked.
    loose: bool,
    /// In [`Waiters::loose`].
    listed: bool,
    /// The arrivals of its lanes given back and not visited yet.
    probes: Vec<u64>,
}

/// A hold's lanes set aside, in arrival order, with their own keys: a sorted double-ended
/// queue, as lanes are set aside mostly in a pass's order (at the back) and given back
/// mostly first (from the front); a sorted vector, which shifts every lane to give back the
/// first, was a tenth of a request's cost with 64 jobs per cgroup under bfq.
#[derive(Debug, Default)]
struct ParkedLanes(VecDeque<((Head, u8), Option<u64>)>);

impl ParkedLanes {
    fn insert(&mut self, lane: (Head, u8), own: Option<u64>) {
        if self.0.back().is_none_or(|&(last, _)| last < lane) {
            self.0.push_back((lane, own));
        } else {
            let at = self.0.partition_point(|&(other, _)| other < lane);
            self.0.insert(at, (lane, own));
        }
    }

    /// Takes `lane` out; its own key, if it was there.
    fn remove(&mut self, lane: &(Head, u8)) -> Option<Option<u64>> {
        let at = self.0.binary_search_by(|(other, _)| other.cmp(lane)).ok()?;
        self.0.remove(at).map(|(_, own)| own)
    }

    /// The first lane that arrived after `after` (`None`: the first of all).
    fn first_after(&self, after: Option<u64>) -> Option<((Head, u8), Option<u64>)> {
        match after {
            None => self.0.front().copied(),
            Some(at) => {
                let from = self
                    .0
                    .partition_point(|&(((arrival, _), _), _)| arrival <= at);
                self.0.get(from).copied()
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = &((Head, u8), Option<u64>)> {
        self.0.iter()
    }

    #[cfg(debug_assertions)]
    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// The lanes set aside under a policy's hold that have own keys, by own key, with their
/// holds; emptied lists kept for reuse (a bfq queue's own key comes and goes).
#[derive(Debug, Default)]
struct Owned {
    by_own: FxHashMap<u64, Vec<(Head, u8, u64)>>,
    spare: Vec<Vec<(Head, u8, u64)>>,
    len: usize,
}

/// Emptied lists [`Owned`] keeps for reuse, at most.
const OWNED_SPARE: usize = 64;

impl Owned {
    fn insert(&mut self, own: u64, lane: (Head, u8), hold: u64) {
        let spare = &mut self.spare;
        self.by_own
            .entry(own)
            .or_insert_with(|| spare.pop().unwrap_or_default())
            .push((lane.0, lane.1, hold));
        self.len += 1;
    }

    fn remove(&mut self, own: u64, lane: (Head, u8)) {
        let Some(lanes) = self.by_own.get_mut(&own) else {
            return;
        };
        if let Some(at) = lanes.iter().position(|&(head, d, _)| (head, d) == lane) {
            lanes.swap_remove(at);
            self.len -= 1;
        }
        if lanes.is_empty() {
            let lanes = self.by_own.remove(&own).expect("just found");
            self.keep(lanes);
        }
    }

    /// Takes out every lane of `own`, into `out`.
    fn take(&mut self, own: u64, out: &mut Vec<(Head, u8, u64)>) {
        if let Some(mut lanes) = self.by_own.remove(&own) {
            self.len -= lanes.len();
            out.append(&mut lanes);
            self.keep(lanes);
        }
    }

    fn keep(&mut self, mut lanes: Vec<(Head, u8, u64)>) {
        if self.spare.len() < OWNED_SPARE {
            lanes.clear();
            self.spare.push(lanes);
        }
    }

    /// The hold lane `lane` of `own` is set aside under.
    #[cfg(debug_assertions)]
    fn hold_of(&self, own: u64, lane: (Head, u8)) -> Option<u64> {
        self.by_own
            .get(&own)?
            .iter()
            .find(|&&(head, d, _)| (head, d) == lane)
            .map(|&(_, _, hold)| hold)
    }
}

/// What a lane set aside waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Hold {
    /// A hold of the policy's ([`Policy::allocation_hold`]).
    Policy(u64),
    /// Its group's `nr_group_requests`, all taken ([`Elevator::waiter_group_held`]).
    Group(crate::group::GroupId),
}

/// A flow's waiters of one direction.
type Lane = (FlowId, u8);

/// Empty lanes kept for reuse, at most.
const LANES_KEPT: usize = 4096;

fn lane_of(request: &Request) -> Lane {
    (request.flow, direction_index(request.direction()) as u8)
}

impl Waiters {
    /// Nobody waiting.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waiters that never set a lane aside: every one is asked at every pass. What they let
    /// in, and when, is what [`Waiters::new`]'s do (the tests compare them).
    #[cfg(test)]
    pub(crate) fn asking_all() -> Self {
        Waiters {
            asking_all: true,
            ..Self::default()
        }
    }

    /// Submitters waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nobody waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues `request` behind the waiters; [`Waiters::admit`] offers it.
    pub fn push(&mut self, request: Request) {
        let lane = lane_of(&request);
        let arrival = self.next;
        self.next += 1;
        self.len += 1;
        self.flushes += usize::from(request.op == Op::Flush);
        let queue = self.lanes.entry(lane).or_default();
        if queue.is_empty() {
            self.heads[usize::from(lane.1)].insert((arrival, lane.0));
        }
        queue.push_back((arrival, request));
    }

    /// Offers `request` to `elevator` at `now`: at once when nobody waits (`admitted` hears
    /// of it if it is taken in), else behind the waiters, then every waiter the elevator takes
    /// now goes in ([`Waiters::admit`]).
    pub fn submit(
        &mut self,
        mut request: Request,
        elevator: &mut Elevator,
        now: Nanos,
        mut admitted: impl FnMut(crate::request::RequestId, crate::request::Direction, Admitted),
    ) {
        request.arrival = now;
        if !self.is_empty() {
            // It tries to merge first, as a bio does before it waits for a request; else it
            // waits behind the others.
            let (id, direction) = (request.id, request.direction());
            match elevator.merge_before_waiting(request, now) {
                Ok(how) => admitted(id, direction, how),
                Err(request) => {
                    self.push(request);
                    self.admit(elevator, now, admitted);
                }
            }
            return;
        }
        let (id, direction) = (request.id, request.direction());
        match elevator.submit(request, now) {
            Ok(how) => admitted(id, direction, how),
            Err(request) => self.push(request),
        }
    }

    /// Offers the waiters to `elevator` at `now`, in order, under the rules above. `admitted`
    /// hears of each one taken in (its id and direction, and how), for the engine's books.
    ///
    /// The common answer, nobody waiting or no room for anybody, is given here, inlined into
    /// the engines' loops, which ask after every completion and dispatch (with 1024 readers
    /// behind 64 requests, several times per request, nearly always to hear "full"); the pass
    /// itself is `Waiters::admit_pass`.
    #[inline]
    pub fn admit(
        &mut self,
        elevator: &mut Elevator,
        now: Nanos,
        admitted: impl FnMut(crate::request::RequestId, crate::request::Direction, Admitted),
    ) {
        if self.is_empty() {
            return;
        }
        let full = if elevator.per_direction {
            [Direction::Read, Direction::Write].map(|d| !elevator.has_room_in(d))
        } else {
            [!elevator.has_room(); 2]
        };
        if full == [true; 2] {
            // Nobody can have a request (with 1024 synchronous readers behind 64 requests,
            // nearly every pass).
            elevator.stats.full += 1;
            return;
        }
        self.admit_pass(elevator, now, full, admitted);
    }

    /// The pass of [`Waiters::admit`] over the waiters, with `full` telling which directions
    /// have no room (not both).
    fn admit_pass(
        &mut self,
        elevator: &mut Elevator,
        now: Nanos,
        mut full: [bool; 2],
        mut admitted: impl FnMut(crate::request::RequestId, crate::request::Direction, Admitted),
    ) {
        let group_limits = elevator.nr_group_requests > 0;
        let mut stuck_flows = std::mem::take(&mut self.stuck_flows);
        let mut stuck_groups = std::mem::take(&mut self.stuck_groups);
        if !stuck_flows.is_empty() {
            stuck_flows.clear();
        }
        if !stuck_groups.is_empty() {
            stuck_groups.clear();
        }
        let mut visited = std::mem::take(&mut self.visited);
        if self.parked_len > 0 {
            self.unpark_loosened(elevator, None, &mut visited, &mut stuck_flows);
        }
        // One pass over the lanes' first waiters in arrival order, both directions merged; a
        // lane whose first waiter goes in shows its next, later in the same pass. Each head
        // visited is taken out; those whose waiter stays go back after the pass.
        loop {
            let next_in = |d: usize| (!full[d]).then(|| self.heads[d].first()).flatten();
            let (d, key) = match (next_in(0), next_in(1)) {
                (None, None) => break,
                (Some(read), None) => (0, read),
                (None, Some(write)) => (1, write),
                (Some(read), Some(write)) => {
                    if read.0 < write.0 {
                        (0, read)
                    } else {
                        (1, write)
                    }
                }
            };
            self.heads[d].pop_first();
            let lane = (key.1, d as u8);
            // A lane given back for a loosened hold: once visited, unless that hold turns it
            // away again, the hold's next lane comes back.
            let probe = if self.probes.is_empty() {
                None
            } else {
                self.probes.remove(&lane)
            };
            let keep_empty = self.lanes.len() <= LANES_KEPT;
            let queue = self
                .lanes
                .get_mut(&lane)
                .expect("a head's lane has waiters");
            let waiter = &queue.front().expect("a head's lane has waiters").1;
            // A flow is stuck behind a lane of its own the pass turned away, or set aside
            // (which a pass would have visited first, and turned away).
            if (!stuck_flows.is_empty() && stuck_flows.contains(&waiter.flow))
                || (group_limits && stuck_groups.contains(&waiter.group))
                || (self.parked_len > 0
                    && self
                        .parked_flows
                        .get(&waiter.flow)
                        .is_some_and(|arrivals| arrivals.iter().any(|&a| a < key.0)))
            {
                // Behind a group that holds all its requests, it waits for one of them as the
                // first one does.
                let (flow, group, direction) = (waiter.flow, waiter.group, waiter.direction());
                let parked = group_limits
                    && stuck_groups.contains(&group)
                    && elevator.waiter_group_held(group, direction)
                    && self.park(Hold::Group(group), None, key, d, flow);
                if !parked {
                    visited[d].push(key);
                }
                self.visited_probe(probe, key.0);
                continue;
            }
            let (flow, group, direction) = (waiter.flow, waiter.group, waiter.direction());
            // Full: nobody passes anybody (with `request_lists`, in that direction); a group
            // at its `nr_group_requests` holds back its own. Turned away by the policy with
            // room: its flow waits on, and others may pass. Either way the waiter stays where
            // it is, without trying a merge (it has no request to merge with).
            let room = elevator.waiter_has_room(group, direction);
            if !room || !elevator.waiter_may_allocate(waiter) {
                mark_full(elevator, direction, &mut full);
                stuck_flows.insert(flow);
                if group_limits {
                    stuck_groups.insert(group);
                }
                // Turned away by the policy under a hold it reports loosened: set aside
                // until then, not asked at every pass.
                let (hold, own) = if room {
                    match elevator.waiter_hold(waiter) {
                        Some(held) => (Some(Hold::Policy(held.hold)), Some(held)),
                        None => (None, None),
                    }
                } else {
                    let held = elevator.waiter_group_held(group, direction);
                    (held.then_some(Hold::Group(group)), None)
                };
                if !hold.is_some_and(|hold| self.park(hold, own, key, d, flow)) {
                    visited[d].push(key);
                }
                self.visited_probe(probe, key.0);
                continue;
            }
            let (_, mut request) = queue.pop_front().expect("a head's lane has waiters");
            request.arrival = now;
            let (id, direction) = (request.id, request.direction());
            let flush = request.op == Op::Flush;
            match elevator.submit(request, now) {
                Ok(how) => {
                    self.len -= 1;
                    self.flushes -= usize::from(flush);
                    match queue.front() {
                        Some(&(arrival, _)) => {
                            self.heads[d].insert((arrival, lane.0));
                        }
                        // An emptied lane is kept, its memory for the flow's next waiter
                        // (with many flows each waiting one request at a time, a lane came and
                        // went with every request), unless LANES_KEPT lanes exist already:
                        // the map holds at most that many plus the lanes with waiters.
                        None if !keep_empty => {
                            self.lanes.remove(&lane);
                        }
                        None => {}
                    }
                    admitted(id, direction, how);
                    self.visited_probe(probe, key.0);
                    if self.parked_len > 0 {
                        // Taking it in may have loosened a hold (bfq's queue in service
                        // expired for a newcomer).
                        self.unpark_loosened(elevator, Some(key.0), &mut visited, &mut stuck_flows);
                    }
                    // With one pool of requests, one that fills it ends the pass: every later
                    // waiter would find no room. Visiting the next one found that and counted
                    // a full wait, then ended the pass; the count is kept without the visit
                    // (a lane lookup and a head taken out and put back, with 1024 readers
                    // behind 64 requests at every request). While some flow or group is stuck
                    // the visits go on as before: stuck ones are passed over uncounted.
                    if !elevator.per_direction
                        && stuck_flows.is_empty()
                        && stuck_groups.is_empty()
                        && !elevator.has_room()
                    {
                        if (0..2).any(|d| !full[d] && self.heads[d].first().is_some()) {
                            elevator.stats.full += 1;
                        }
                        break;
                    }
                }
                Err(request) => {
                    // Turned away with room (the policy's `may_allocate`, or a stage's
                    // released requests ahead): its flow waits on, and others may pass.
                    mark_full(elevator, request.direction(), &mut full);
                    stuck_flows.insert(request.flow);
                    if group_limits {
                        stuck_groups.insert(request.group);
                    }
                    queue.push_front((key.0, request));
                    visited[d].push(key);
                    self.visited_probe(probe, key.0);
                    if self.flushes == 0 && elevator.stage_backlog() {
                        // Every other waiter would be turned away the same way, and nothing
                        // in this pass can empty the backlog: the pass ends here, counted
                        // once, as a pass that finds the queue full is (with 1024 readers
                        // behind ioband's backlog, going on made each pass visit every lane).
                        break;
                    }
                }
            }
        }
        for (heads, visited) in self.heads.iter_mut().zip(&mut visited) {
            heads.put_back(visited);
        }
        self.visited = visited;
        self.stuck_flows = stuck_flows;
        self.stuck_groups = stuck_groups;
    }

    /// Sets lane `head` of direction `d` (of `flow`) aside under `hold` (a policy's, with
    /// what it said, `held`); `false` when these waiters set nothing aside. The hold has just
    /// turned the lane's waiter away, so it turns away every lane it holds: it is not loose.
    fn park(
        &mut self,
        hold: Hold,
        held: Option<HeldBy>,
        head: Head,
        d: usize,
        flow: FlowId,
    ) -> bool {
        #[cfg(test)]
        if self.asking_all {
            return false;
        }
        let parked = self.parked.entry(hold).or_default();
        let own = held.and_then(|held| held.own);
        parked.lanes.insert((head, d as u8), own);
        parked.loose = false;
        if let (Some(own), Hold::Policy(key)) = (own, hold) {
            self.owned.insert(own, (head, d as u8), key);
        }
        self.parked_flows.entry(flow).or_insert([u64::MAX; 2])[d] = head.0;
        self.parked_len += 1;
        true
    }

    /// Gives lane `(head, d)` back, already taken out of its hold's lanes, with its own key
    /// if `owned` still lists it: before a pass or ahead of it (`position` `None`, or an
    /// arrival before the lane's) among the heads; behind it, as a lane the pass visited and
    /// turned away (it was held then), its flow stuck.
    fn release(
        &mut self,
        (head, d): (Head, u8),
        own: Option<u64>,
        position: Option<u64>,
        visited: &mut [Vec<Head>; 2],
        stuck_flows: &mut FxHashSet<FlowId>,
    ) {
        if let Some(own) = own {
            self.owned.remove(own, (head, d));
        }
        let flow = head.1;
        self.parked_len -= 1;
        let arrivals = self
            .parked_flows
            .get_mut(&flow)
            .expect("a flow set aside is listed");
        arrivals[usize::from(d)] = u64::MAX;
        if *arrivals == [u64::MAX; 2] {
            self.parked_flows.remove(&flow);
        }
        match position {
            Some(position) if head.0 < position => {
                let visited = &mut visited[usize::from(d)];
                let at = visited.partition_point(|other| *other < head);
                visited.insert(at, head);
                stuck_flows.insert(flow);
            }
            _ => self.heads[usize::from(d)].insert(head),
        }
    }

    /// Gives back every lane set aside under `hold`.
    fn unpark_all(
        &mut self,
        hold: Hold,
        position: Option<u64>,
        visited: &mut [Vec<Head>; 2],
        stuck_flows: &mut FxHashSet<FlowId>,
    ) {
        let Some(parked) = self.parked.get_mut(&hold) else {
            return;
        };
        let mut lanes = std::mem::take(&mut parked.lanes);
        for &(lane, own) in lanes.iter() {
            self.release(lane, own, position, visited, stuck_flows);
        }
        if self.parked.len() > LANES_KEPT {
            self.parked.remove(&hold);
        } else {
            // Its memory, for the hold's next lanes.
            lanes.clear();
            self.parked.get_mut(&hold).expect("still listed").lanes = lanes;
        }
    }

    /// Gives back the first lane set aside under the policy's hold `key` that arrived after
    /// `after` (`None`: the first of all), to be asked in its turn, unless a lane given back
    /// for the hold and not visited yet comes before it (that one's visit goes on from
    /// there); with `loosened`, the hold was just reported loosened. A loose hold with lanes
    /// left is listed in [`Waiters::loose`], for the next pass to start again from its first.
    fn probe(&mut self, key: u64, after: Option<u64>, loosened: bool) {
        let Some(parked) = self.parked.get_mut(&Hold::Policy(key)) else {
            return;
        };
        if parked.lanes.is_empty() {
            return;
        }
        parked.loose |= loosened;
        if !parked.loose {
            return;
        }
        let next = parked.lanes.first_after(after);
        let next = next.filter(|&((head, _), _)| {
            parked
                .probes
                .iter()
                .all(|&probe| after.is_some_and(|at| probe <= at) || probe > head.0)
        });
        if let Some(((head, d), _)) = next {
            parked.lanes.remove(&(head, d));
            // The hold's last lane has nothing after it to bring back.
            if !parked.lanes.is_empty() {
                parked.probes.push(head.0);
                self.probes.insert((head.1, d), key);
            }
        }
        if !parked.lanes.is_empty() && !parked.listed {
            parked.listed = true;
            self.loose.push(key);
        }
        // An emptied hold stays for its memory, unless LANES_KEPT holds are listed (a bfq
        // queue's holds are new each time the queue is).
        let forget = parked.lanes.is_empty() && parked.probes.is_empty() && !parked.listed;
        if forget && self.parked.len() > LANES_KEPT {
            self.parked.remove(&Hold::Policy(key));
        }
        if let Some((lane, own)) = next {
            // Ahead of any pass position (it arrived after `after`): among the heads.
            let mut none = [Vec::new(), Vec::new()];
            let mut unused = FxHashSet::default();
            self.release(lane, own, None, &mut none, &mut unused);
        }
    }

    /// A pass visited lane `probe` gave back for its hold, arrived `at`: unless that hold
    /// turned it away again (and so every lane it holds), the hold's next lane comes back.
    fn visited_probe(&mut self, probe: Option<u64>, at: u64) {
        let Some(key) = probe else {
            return;
        };
        if let Some(parked) = self.parked.get_mut(&Hold::Policy(key)) {
            parked.probes.retain(|&probe| probe != at);
        }
        self.probe(key, Some(at), false);
    }

    /// Brings back the lanes whose hold the policy reports loosened ([`Policy::loosened`]):
    /// a policy's hold one lane at a time ([`Waiters::probe`]), from the first that arrived
    /// after `position` (a pass's, or before one `None`; those before it were visited and
    /// turned away in this pass, and the next pass asks them); a lane's own key, and a
    /// group's requests, every lane at once. Before a pass, each hold still loose gives back
    /// its first lane.
    fn unpark_loosened(
        &mut self,
        elevator: &mut Elevator,
        position: Option<u64>,
        visited: &mut [Vec<Head>; 2],
        stuck_flows: &mut FxHashSet<FlowId>,
    ) {
        let mut keys = std::mem::take(&mut self.loosened);
        let mut groups = std::mem::take(&mut self.freed_groups);
        let all = elevator.loosened(&mut keys, &mut groups);
        if all {
            // Every hold's lanes, the map taken out meanwhile (giving a lane back does not
            // touch it) rather than its keys copied out at each such report.
            let mut parked = std::mem::take(&mut self.parked);
            for hold in parked.values_mut() {
                for &(lane, own) in hold.lanes.iter() {
                    self.release(lane, own, position, visited, stuck_flows);
                }
                hold.lanes.clear();
                hold.loose = false;
                hold.listed = false;
                hold.probes.clear();
            }
            if parked.len() > LANES_KEPT {
                parked.clear();
            }
            self.parked = parked;
            self.probes.clear();
            self.loose.clear();
        } else {
            let mut owned = std::mem::take(&mut self.owned_scratch);
            for &key in &keys {
                if self.owned.len > 0 {
                    self.owned.take(key, &mut owned);
                    for (head, d, hold) in owned.drain(..) {
                        let parked = self.parked.get_mut(&Hold::Policy(hold));
                        let own = parked.and_then(|parked| parked.lanes.remove(&(head, d)));
                        debug_assert_eq!(own, Some(Some(key)), "listed under its own key");
                        // Out of `owned` already: no own key to take it out of again.
                        self.release((head, d), None, position, visited, stuck_flows);
                    }
                }
                self.probe(key, position, true);
            }
            self.owned_scratch = owned;
            for &group in &groups {
                self.unpark_all(Hold::Group(group), position, visited, stuck_flows);
            }
        }
        if position.is_none() && !self.loose.is_empty() {
            // A pass begins: each hold still loose gives back its first lane again.
            let mut loose = std::mem::take(&mut self.loose);
            for key in loose.drain(..) {
                if let Some(parked) = self.parked.get_mut(&Hold::Policy(key)) {
                    parked.listed = false;
                }
                self.probe(key, None, false);
            }
            // `probe` listed again those still loose.
            std::mem::swap(&mut self.loose, &mut loose);
            self.loose.append(&mut loose);
        }
        keys.clear();
        self.loosened = keys;
        groups.clear();
        self.freed_groups = groups;
        #[cfg(debug_assertions)]
        self.check_parked(elevator);
    }

    /// A debug build's check of [`Policy::loosened`]: every lane set aside under a hold that
    /// is not loose is one the policy turns away (a loose hold's lanes are being asked again,
    /// one at a time); and the books agree.
    #[cfg(debug_assertions)]
    fn check_parked(&self, elevator: &Elevator) {
        let mut count = 0;
        for (hold, parked) in &self.parked {
            count += parked.lanes.len();
            for &(((arrival, flow), d), own) in parked.lanes.iter() {
                let (first, waiter) = self.lanes[&(flow, d)]
                    .front()
                    .expect("a lane set aside has waiters");
                assert_eq!(*first, arrival, "a lane set aside keeps its first waiter");
                match hold {
                    Hold::Policy(key) => {
                        if let Some(own) = own {
                            assert_eq!(
                                self.owned.hold_of(own, ((arrival, flow), d)),
                                Some(*key),
                                "a lane set aside is listed by its own key, with its hold"
                            );
                        }
                        assert!(
                            parked.loose || elevator.turns_away(waiter),
                            "a waiter set aside under {hold:?} would be let in: the policy did \
                             not report the hold loosened"
                        );
                    }
                    Hold::Group(group) => assert!(
                        !elevator.has_room_for(*group, waiter.direction()),
                        "a waiter set aside under {hold:?} has room in its group"
                    ),
                }
            }
        }
        assert_eq!(count, self.parked_len, "every lane set aside is counted");
        let owned = self
            .parked
            .values()
            .map(|parked| parked.lanes.iter().filter(|(_, own)| own.is_some()).count())
            .sum::<usize>();
        assert_eq!(
            self.owned.len, owned,
            "every lane with an own key is listed by it"
        );
    }
}

/// A lane's first waiter: its arrival number and flow.
type Head = (u64, FlowId);

/// The first waiters of one direction's lanes, in arrival order: a double-ended queue for the
/// heads that came in order, and a heap for the others.
///
/// A lane gets a head either when a waiter comes to an empty lane, the latest arrival of all,
/// or when its head goes in and its next waiter, an earlier arrival than others waiting,
/// shows. With flows that wait one request at a time (1024 synchronous readers behind 64
/// requests) every head is of the first kind: each is added at the back and taken from the
/// front, in constant time. The others go to the heap, in O(log n). A pass takes heads out in
/// order ([`Heads::pop_first`]), so those it leaves are earlier than every head still in, and
/// go back at the front ([`Heads::put_back`]). A B-tree of the heads, as before, cost several
/// hundred instructions per waiter at 1024 lanes.
#[derive(Debug, Default)]
struct Heads {
    /// Heads in arrival order.
    in_order: VecDeque<Head>,
    /// Heads that came earlier than the last of `in_order`.
    out_of_order: BinaryHeap<Reverse<Head>>,
}

impl Heads {
    /// Adds a lane's head (its arrival is not among the heads already).
    #[inline]
    fn insert(&mut self, head: Head) {
        if self.in_order.back().is_none_or(|&last| last < head) {
            self.in_order.push_back(head);
        } else {
            self.out_of_order.push(Reverse(head));
        }
    }

    /// The earliest head, and whether it is the heap's.
    #[inline]
    fn earliest(&self) -> Option<(Head, bool)> {
        match (self.in_order.front(), self.out_of_order.peek()) {
            (Some(&a), Some(&Reverse(b))) => Some(if b < a { (b, true) } else { (a, false) }),
            (Some(&a), None) => Some((a, false)),
            (None, Some(&Reverse(b))) => Some((b, true)),
            (None, None) => None,
        }
    }

    /// The earliest head.
    #[inline]
    fn first(&self) -> Option<Head> {
        self.earliest().map(|(head, _)| head)
    }

    /// Takes the earliest head out.
    #[inline]
    fn pop_first(&mut self) {
        match self.earliest() {
            Some((_, true)) => {
                self.out_of_order.pop();
            }
            Some((_, false)) => {
                self.in_order.pop_front();
            }
            None => {}
        }
    }

    /// Puts back `heads`, taken out by [`Heads::pop_first`] in order (earliest first) and all
    /// earlier than every head in: they go to the front, in order. Leaves `heads` empty.
    fn put_back(&mut self, heads: &mut Vec<Head>) {
        debug_assert!(heads.windows(2).all(|pair| pair[0] < pair[1]));
        debug_assert!(heads
            .last()
            .zip(self.first())
            .is_none_or(|(last, first)| *last < first));
        for &head in heads.iter().rev() {
            self.in_order.push_front(head);
        }
        heads.clear();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.in_order.len() + self.out_of_order.len()
    }
}

/// Marks the directions with no room left: both when reads and writes share one pool,
/// else `direction`'s list ([`Elevator::has_room_in`]).
fn mark_full(elevator: &Elevator, direction: Direction, full: &mut [bool; 2]) {
    if elevator.per_direction {
        full[direction_index(direction)] = !elevator.has_room_in(direction);
    } else {
        *full = [!elevator.has_room(); 2];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // Proves the heads come out as a B-tree of the lanes' first arrivals would give them,
        // through waiters coming to lanes, passes that let some in (their lane's next waiter
        // becoming its head) and leave others, and heads put back after each pass.
        #[test]
        fn heads_keep_the_lanes_first_waiters_in_arrival_order(
            ops in proptest::collection::vec(
                prop_oneof![
                    (0u32..12).prop_map(Ok),
                    proptest::collection::vec(any::<bool>(), 0..10).prop_map(Err),
                ],
                0..200,
            )
        ) {
            let mut heads = Heads::default();
            let mut lanes: Vec<VecDeque<u64>> = vec![VecDeque::new(); 12];
            let mut next = 0u64;
            let model = |lanes: &[VecDeque<u64>]| -> std::collections::BTreeSet<Head> {
                lanes
                    .iter()
                    .enumerate()
                    .filter_map(|(flow, lane)| lane.front().map(|&a| (a, FlowId(flow as u32))))
                    .collect()
            };
            let mut visited = Vec::new();
            for op in ops {
                match op {
                    Ok(flow) => {
                        let lane = &mut lanes[flow as usize];
                        if lane.is_empty() {
                            heads.insert((next, FlowId(flow)));
                        }
                        lane.push_back(next);
                        next += 1;
                    }
                    Err(admits) => {
                        for admit in admits {
                            let expected = model(&lanes)
                                .into_iter()
                                .find(|head| !visited.contains(head));
                            prop_assert_eq!(heads.first(), expected);
                            let Some(head) = expected else { break };
                            heads.pop_first();
                            if admit {
                                let lane = &mut lanes[head.1 .0 as usize];
                                lane.pop_front();
                                if let Some(&arrival) = lane.front() {
                                    heads.insert((arrival, head.1));
                                }
                            } else {
                                visited.push(head);
                            }
                        }
                        heads.put_back(&mut visited);
                    }
                }
                let expected = model(&lanes);
                prop_assert_eq!(heads.len(), expected.len());
                prop_assert_eq!(heads.first(), expected.first().copied());
            }
        }
    }

    /// A policy that lets each flow hold one request, and holds a flow's waiter under a new
    /// key at every refusal (as bfq's queues get new keys as they come and go).
    struct OnePerFlow {
        queue: VecDeque<Request>,
        held: FxHashMap<FlowId, u32>,
        next_key: u64,
        keys: FxHashMap<FlowId, u64>,
        loosened: Vec<u64>,
    }

    impl Policy for OnePerFlow {
        fn name(&self) -> &'static str {
            "one-per-flow"
        }

        fn insert(&mut self, request: Request, _now: Nanos) {
            *self.held.entry(request.flow).or_default() += 1;
            self.queue.push_back(request);
        }

        fn dispatch(&mut self, _now: Nanos) -> Dispatch {
            self.queue
                .pop_front()
                .map_or(Dispatch::Empty, Dispatch::Request)
        }

        fn completed(&mut self, request: &Request, _now: Nanos) {
            *self.held.get_mut(&request.flow).expect("held") -= 1;
            if let Some(key) = self.keys.remove(&request.flow) {
                self.loosened.push(key);
            }
        }

        fn may_allocate(&self, request: &Request, _in_use: usize, _nr_requests: u32) -> bool {
            self.held.get(&request.flow).copied().unwrap_or(0) == 0
        }

        fn allocation_hold(
            &mut self,
            request: &Request,
            _in_use: usize,
            _nr_requests: u32,
        ) -> Option<HeldBy> {
            let key = *self.keys.entry(request.flow).or_insert_with(|| {
                self.next_key += 1;
                self.next_key
            });
            Some(HeldBy {
                hold: key,
                own: None,
            })
        }

        fn loosened(&mut self, _nr_requests: u32, keys: &mut Vec<u64>) -> bool {
            keys.append(&mut self.loosened);
            false
        }

        fn queued(&self) -> usize {
            self.queue.len()
        }

        fn drain(&mut self, out: &mut Vec<Request>) {
            out.extend(self.queue.drain(..));
        }
    }

    // Proves the waiters' memory is bounded by their settings, not the run's length: with a
    // new hold at every refusal (20,000 of them), the holds kept stay within LANES_KEPT and
    // the lanes set aside; every request goes in and completes once.
    #[test]
    fn holds_kept_stay_bounded_as_holds_come_and_go() {
        let policy = OnePerFlow {
            queue: VecDeque::new(),
            held: FxHashMap::default(),
            next_key: 0,
            keys: FxHashMap::default(),
            loosened: Vec::new(),
        };
        let mut elevator = Elevator::new(Box::new(policy), 64);
        let mut waiters = Waiters::new();
        let (flows, rounds) = (8u32, 2500u64);
        let mut id = 0;
        let mut done = 0;
        for _ in 0..rounds {
            for flow in 0..flows {
                for _ in 0..2 {
                    id += 1;
                    let mut r = request(id, Op::Read, id * 8, 4096);
                    r.flow = FlowId(flow);
                    waiters.submit(r, &mut elevator, 0, |_, _, _| {});
                }
            }
            while let Dispatch::Request(r) = elevator.dispatch(0) {
                elevator.completed(&r, 0);
                done += 1;
                waiters.admit(&mut elevator, 0, |_, _, _| {});
            }
            assert!(waiters.parked.len() <= LANES_KEPT + 1 + waiters.parked_len);
        }
        while let Dispatch::Request(r) = elevator.dispatch(0) {
            elevator.completed(&r, 0);
            done += 1;
            waiters.admit(&mut elevator, 0, |_, _, _| {});
        }
        assert_eq!(done, id, "every request in and done once");
        assert!(waiters.is_empty());
        assert!(
            waiters.parked.len() <= LANES_KEPT + 1,
            "{}",
            waiters.parked.len()
        );
    }

    // Proves the single-queue schedulers keep BLKDEV_MAX_RQ (128) whatever the device's depth,
    // the blk-mq ones take the engine's 2 * min(depth, 128), and a setting overrides both.
    #[test]
    fn legacy_schedulers_default_to_128_requests() {
        for (name, expected) in [
            ("cfq", 128),
            ("anticipatory", 128),
            ("grouped-cfq", 128),
            ("dass", 128),
            ("deadline", 2),
            ("bfq", 2),
            ("noop", 2),
        ] {
            let mut elevator = Elevator::new(crate::policies::build(name).unwrap(), 2);
            assert_eq!(elevator.nr_requests(), expected, "{name}");
            elevator.set("nr_requests", "16").unwrap();
            assert_eq!(elevator.nr_requests(), 16, "{name}");
        }
    }
    use crate::policies::noop::Noop;
    use crate::request::Direction;
    use crate::testing::request;

    // Proves request_lists: with it, writes that fill nr_requests leave the reads' list free
    // (a waiting read goes in past waiting writes); without it, one pool, and nobody passes.
    #[test]
    fn request_lists_keep_reads_apart_from_writes() {
        for lists in [true, false] {
            let mut elevator = Elevator::new(Box::new(Noop::new()), 4);
            elevator
                .set("request_lists", if lists { "1" } else { "0" })
                .unwrap();
            let mut waiters = Waiters::new();
            let mut taken = Vec::new();
            for id in 1..=6 {
                let write = request(id, Op::Write, id * (1 << 20), 4096);
                waiters.submit(write, &mut elevator, 0, |id, _, _| taken.push(id.0));
            }
            // Another process's read.
            let mut read = request(9, Op::Read, 1 << 30, 4096);
            read.flow = crate::request::FlowId(7);
            waiters.submit(read, &mut elevator, 0, |id, _, _| taken.push(id.0));
            if lists {
                assert_eq!(taken, vec![1, 2, 3, 4, 9]);
                assert!(elevator.has_room_in(Direction::Read));
                assert!(!elevator.has_room_in(Direction::Write));
            } else {
                assert_eq!(taken, vec![1, 2, 3, 4]);
            }
            assert_eq!(waiters.len(), if lists { 2 } else { 3 });
        }
    }

    // Proves a flush bypasses the policy and goes to the device before what the policy holds
    // (blk_insert_flush), takes a request from nr_requests like any other, and that its
    // completion and requeue do not reach the policy.
    #[test]
    fn a_flush_bypasses_the_policy_to_the_head() {
        let mut elevator = Elevator::new(Box::new(Noop::new()), 3);
        for id in [1, 2] {
            let write = request(id, Op::Write, id * (1 << 20), 4096);
            assert!(elevator.submit(write, 0).is_ok());
        }
        let flush = request(3, Op::Flush, 0, 0);
        assert_eq!(elevator.submit(flush, 0), Ok(Admitted::Queued));
        assert_eq!(
            elevator.policy().queued(),
            2,
            "the policy never saw the flush"
        );
        assert_eq!(elevator.queued(), 3);
        assert!(!elevator.has_room(), "the flush holds a request");
        let Dispatch::Request(first) = elevator.dispatch(0) else {
            panic!("something to dispatch")
        };
        assert_eq!(first.op, Op::Flush, "the flush goes first");
        elevator.requeue(first, 1);
        let Dispatch::Request(again) = elevator.dispatch(1) else {
            panic!("the requeued flush")
        };
        assert_eq!(again.op, Op::Flush, "a requeued flush goes first again");
        elevator.completed(&again, 2);
        let order: Vec<u64> = (0..2)
            .map(|_| match elevator.dispatch(2) {
                Dispatch::Request(r) => r.id.0,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(order, vec![1, 2]);
    }
}

//! The common hierarchical fair-queuing layer: B-WF2Q+ over a tree of groups and leaves.
//!
//! This is the scheduling engine that BFQ (block/bfq-wf2q.c) puts under its queues and cgroups,
//! and that the 2009 "IO scheduler based IO controller" patches (seed 003) proposed as a layer
//! shared by every elevator. It decides *who* is served next and how service is accounted; it
//! knows nothing about requests, sectors or time slices. Policies (bfq, cfq with groups, a
//! throttling controller) build on it: they keep the requests, decide budgets and when a leaf's
//! turn ends, and report the service they gave.
//!
//! # Entities
//!
//! The tree has two kinds of node, both *entities* with a weight and an I/O priority class:
//!
//! - a **leaf** ([`LeafId`]): something that queues work, typically one flow's queue;
//! - a **group** ([`FqGroupId`]): a cgroup such as `/vm1/db`, whose children are leaves and
//!   groups. The root group ([`FqGroupId::ROOT`]) always exists and is no entity itself.
//!
//! Weights follow cgroup v2's `io.weight`: 1 to 10 000, default 100 ([`DEFAULT_WEIGHT`]); any
//! other value is refused with [`FqError::Weight`]. The class (RT, BE or IDLE; "none" counts as
//! BE) selects which of its parent's three *service trees* the entity sits in. Entities live in
//! one arena addressed by typed indices with a generation, so a stale id is refused instead of
//! reaching a recycled slot; removing an entity puts its slot on a free list. The arena never
//! holds more than [`FqConfig::capacity`] entities.
//!
//! # B-WF2Q+ in one service tree
//!
//! Each service tree has a virtual time `V`. An active entity has a virtual start `S` and
//! finish `F = S + budget / weight`, where the budget is the service it is expected to receive
//! the next time it is picked (`bfq_calc_finish`). An entity is *eligible* when `S <= V`. The
//! tree serves the eligible entity with the smallest `F` (ties: the smaller slot index); if
//! none is eligible, `V` first jumps to the smallest `S` (`bfq_calc_vtime_jump`,
//! `bfq_update_vtime`). Serving `s` units of service to an entity moves its start to
//! `S + s / weight` (the finish its actual service gives it) and its finish to that plus
//! `budget / weight`; the tree's `V` grows by `s / wsum` (`bfq_bfqq_served`), `wsum` being the
//! sum of the weights of the tree's active entities and of its idle entities still remembered
//! (see below), exactly as BFQ's `st->wsum`.
//!
//! Virtual times are fixed point with [`SERVICE_SHIFT`] = 22 fractional bits (BFQ's
//! `WFQ_SERVICE_SHIFT`): `delta(s, w) = (s << 22) / w`, kept in `u128` and saturating at
//! [`MAX_TAG`] = 2^104 - 1, that is 2^82 units of service per unit of weight: no wrap-around in
//! any realistic life (BFQ's `u64` timestamps wrap and are compared modulo 2^64), and room for
//! a 24-bit slot beside a tag in one 128-bit heap key. The divisions are done in `u64` (one
//! hardware division when `s < 2^42`, two otherwise). Each tree also carries the remainder of
//! its `s / wsum` division, so that many small charges (one I/O at a time, with a large `wsum`)
//! move `V` by exactly the total; the remainder is dropped when `wsum` changes or `V` jumps (an
//! error below 2^-22 of a service unit).
//!
//! ## The data structure, and why not BFQ's tree
//!
//! BFQ keeps one red-black tree per service tree ordered by `F`, each node augmented with the
//! smallest `S` in its subtree, and descends it to find the eligible entity with the smallest
//! `F` (`bfq_first_active_entity`, `bfq_update_active_tree`). Here each service tree keeps the
//! active entities in two indexed binary heaps instead, the classic WF2Q+ implementation:
//!
//! - `eligible`, ordered by `(F, slot)`: the entities with `S <= V`;
//! - `pending`, ordered by `(S, slot)`: the entities with `S > V`.
//!
//! The next entity is the top of `eligible`; when `V` grows, the tops of `pending` whose `S`
//! has been reached move over. An entity moves from `pending` to `eligible` at most once per
//! change of its tags, and `V` never decreases, so every operation costs O(log n) amortized
//! (a single operation that makes k entities eligible costs O(k log n), paid for by their
//! insertions). The selection is exactly BFQ's (the eligible entity with the smallest `F`,
//! ties to the smaller slot). Why heaps: a heap is a flat array of 16-byte keys (virtual time
//! and slot packed in one `u128`, so a comparison is one instruction pair), needs no
//! rebalancing or parent pointers, and its common operations here are a pop and a push; the
//! usual step of a backlogged tree, the entity just served becoming pending while the first
//! pending entity becomes eligible, is done as one sift in each heap. An augmented red-black
//! tree gives the same bounds with pointer chasing, rotations and `min_start` fix-ups on every
//! update. `benches/fq.rs` measures the cost per request from 10 to 10 000 leaves.
//!
//! A tree with few active entities (at most 16) keeps no heaps: its active entities sit in an
//! unordered list of `(S, F)` keys, and a selection scans it for the eligible one with the
//! smallest `F` (with conditional moves: which entities are eligible changes at every charge, so
//! branches there would be mispredicted). A charge then rewrites one entry instead of moving the
//! entity between two heaps. The entity that would make the list longer builds the heaps from
//! it; a tree down to half that goes back to the list, so a tree at the threshold does not
//! rebuild at every step. The scan's answer is kept until the list or `V` changes, as a
//! group's tree is asked twice in a row (for the group's budget during a charge, then by the
//! next selection). List and heaps make the same selections: the model-based tests run every
//! threshold, 0 (heaps only) included.
//!
//! The two divisions of a charge (`s / weight` for the entity, `s / wsum` for the tree's `V`)
//! are multiplications by a reciprocal (`strength_reduce`): the entity's is made when its weight
//! is set, the tree's when two charges in a row divide by the same `wsum` (making one costs
//! three divisions, which a tree whose `wsum` changes at every charge would not get back). The
//! quotients are exact, as a property test checks against 128-bit division.
//!
//! # Classes
//!
//! A group has one service tree per class, each with its own `V`. RT is served strictly before
//! BE, BE strictly before IDLE, as `bfq_lookup_next_entity` does. So that IDLE is not starved
//! forever, each group keeps the time its idle-class timer last fired: when a selection passes
//! through the group more than [`FqConfig::idle_class_timeout`] (default 200 ms,
//! `BFQ_CL_IDLE_TIMEOUT`) after it, the timer fires again (whether or not an IDLE entity
//! waits, as in BFQ) and, if an IDLE entity is active, that selection serves the IDLE class
//! once. Groups are created with the timer at time 0.
//!
//! # The hierarchy
//!
//! A group is an entity in its parent's tree. It is active exactly when at least one of its
//! children is. Its budget is the budget of the child it would serve next (BFQ's
//! `bfq_update_parent_budget`), taken as: in its first class with active children, the top of
//! `eligible`, or if that is empty the top of `pending`. Whenever a group's children change
//! (activation, deactivation, charge, new weight or class), its budget and finish are
//! recomputed, and so on up to the root (`bfq_activate_requeue_entity`,
//! `bfq_deactivate_entity`); the walk stops at the first level where nothing changed.
//!
//! [`FairQueue::select_next`] descends from the root, choosing in each group as above, until it
//! reaches a leaf (`bfq_get_next_queue`): O(log n) per level. [`FairQueue::charge`] charges the
//! service to the leaf and to each ancestor in its own parent's tree, advancing each of those
//! trees' `V`: O(log n) per level. [`FairQueue::next_in_service_differs`] tells a policy
//! whether, with one leaf in service, the root would serve something else next (BFQ's
//! `next_queue_may_preempt`).
//!
//! # The idle tree
//!
//! When an active entity stops being active (its leaf was deactivated, or a group lost its last
//! active child) its finish becomes `F = S`, the virtual time up to which it has received
//! service (BFQ's `bfq_calc_finish(entity, entity->service)` at deactivation). If `F > V` it is
//! kept in the tree's `idle` heap, ordered by `F`, and its weight stays in `wsum`; otherwise it
//! is forgotten at once (`__bfq_deactivate_entity`). When it becomes active again:
//!
//! - remembered: `S = max(V, F)`, so leaving and coming back before `V` passed the service it
//!   already had gains it nothing (`__bfq_activate_entity` on an entity of the idle tree);
//! - forgotten or new: `S = V`, and its weight is added to `wsum`.
//!
//! Every time `V` grows (a charge or a jump), the idle entities with `F <= V` are forgotten and
//! their weight leaves `wsum` (`bfq_forget_idle`; BFQ forgets one per call, here all of them,
//! still O(log n) amortized since each was inserted once). So the idle heap only holds entities
//! that are still owed a place, and never more than the tree's children.
//!
//! Charging an idle entity (service reported after its leaf was deactivated, for example a
//! completion) moves its remembered `F` by `service / weight`; charging a forgotten one
//! remembers it with `F = V + service / weight`. Either way what it consumed counts the next
//! time it comes back.
//!
//! # Service out of turn
//!
//! BFQ may dispatch a request of a busy queue that is not in service (I/O injection, while the
//! queue in service idles). `bfq_bfqq_served` then advances the virtual time of every tree on
//! the injected queue's path, and adds the service to each entity's `entity->service`, but
//! moves no timestamps. That service reaches an entity's tags only if the entity leaves the
//! race first (`__bfq_deactivate_entity` computes its finish from `entity->service`), or, for
//! a group in service, when it is requeued at the end of its turn (`__bfq_requeue_entity`);
//! otherwise it is forgotten when the entity is next put in service (`bfq_get_next_queue` sets
//! `entity->service = 0`). [`FairQueue::serve_aside`] and [`FairQueue::begin_turn`] are these
//! two steps: an entity keeps the service it received aside, a deactivation moves its start by
//! it before `F = S`, a charge adds it to the charged service, and a new turn forgets it.
//!
//! Two deliberate differences from BFQ: an entity deactivated without ever being served keeps
//! `F = S` rather than the `S + budget / weight` BFQ leaves it with, so it is not charged for
//! a budget it never had; and a new weight or class applies at once (BFQ defers it to the next
//! activation). BFQ's "backshifted" timestamps (`non_blocking_wait_rq`) and weight raising are
//! policy matters and are not here.
//!
//! # Correspondence with BFQ (block/bfq-wf2q.c)
//!
//! | here | BFQ |
//! | --- | --- |
//! | `delta` | `bfq_delta` (`WFQ_SERVICE_SHIFT` = 22) |
//! | `F = S + budget / weight` | `bfq_calc_finish` |
//! | [`FairQueue::activate`] | `bfq_activate_bfqq` -> `bfq_activate_requeue_entity`, `__bfq_activate_entity` |
//! | [`FairQueue::set_budget`], group budgets | `__bfq_requeue_entity`, `bfq_update_parent_budget` |
//! | [`FairQueue::deactivate`] | `bfq_del_bfqq_busy` -> `bfq_deactivate_entity`, `__bfq_deactivate_entity` |
//! | [`FairQueue::select_next`] | `bfq_get_next_queue`, `bfq_lookup_next_entity`, `__bfq_lookup_next_entity` |
//! | the eligible heap's top | `bfq_first_active_entity` |
//! | `V` jump to the smallest start | `bfq_calc_vtime_jump`, `bfq_update_vtime` |
//! | [`FairQueue::charge`] | `bfq_bfqq_served` (`V += s / wsum` per level) and the start update of `__bfq_requeue_entity` |
//! | [`FairQueue::serve_aside`] | `bfq_bfqq_served` for a queue not in service: `entity->service` grows, no timestamp moves |
//! | [`FairQueue::begin_turn`] | `bfq_get_next_queue`'s `entity->service = 0` at each level |
//! | [`FairQueue::expire`] | `__bfq_bfqq_expire`: the charge, then `bfq_requeue_bfqq` or `bfq_del_bfqq_busy` |
//! | the idle heap, forgetting | `bfq_idle_insert`, `bfq_idle_extract`, `bfq_forget_idle`, `bfq_forget_entity` |
//! | IDLE after the timeout | the `bfq_class_idle_last_service` test in `bfq_lookup_next_entity` |
//! | [`FairQueue::set_weight`], [`FairQueue::set_class`] | `__bfq_entity_update_weight_prio` (applied at once here) |
//!
//! # Charging: what the unit of service is
//!
//! The layer is agnostic: [`FairQueue::activate`] budgets and [`FairQueue::charge`] service
//! are plain `u64` in a unit the policy chooses and keeps consistent. A policy can charge
//! bytes (or sectors), which gives throughput fairness; I/Os, which gives IOPS fairness; or
//! disk time in nanoseconds, which gives time fairness. Seed 003 explains why time matters on a
//! disk: controllers that count bytes let a seeky flow take most of the disk's time (each of its
//! small requests costs a long seek), while the I/O scheduler, which knows how long each queue
//! held the disk, can charge for that time. BFQ charges sectors for sequential queues and, for
//! slow or seeky ones, the sectors they would have transferred at peak rate in the time they
//! used (`bfq_bfqq_charge_time`): any such mix works here as long as it is one unit.
//!
//! # Protocol
//!
//! 1. A leaf gets work: [`FairQueue::activate`] with the service it is expected to take next
//!    (a request's size, or a budget). Activating an active leaf only updates its budget.
//! 2. The device can take work: [`FairQueue::select_next`] names the leaf to serve. Selection
//!    changes nothing but `V` jumps and the idle-class timers: asking twice gives the same leaf.
//! 3. The leaf was served: [`FairQueue::charge`] with the service it received (per request or
//!    once per turn, as the policy likes). The leaf stays active with its budget.
//! 4. The leaf has no more work: [`FairQueue::deactivate`]; it goes to the idle tree.
//!
//! A policy that charges a leaf at the end of its turn and then gives it a new budget or
//! takes it out of the race (BFQ's expiry) calls [`FairQueue::expire`], which does both with
//! one update of the leaf's place.
//!
//! ```
//! use iosched_core::fq::{FairQueue, FqGroupId};
//! use iosched_core::IoPrioClass;
//!
//! let mut fq = FairQueue::new();
//! let vm = fq.add_group(FqGroupId::ROOT, 300, IoPrioClass::Be).unwrap();
//! let a = fq.add_leaf(vm, 100, IoPrioClass::Be).unwrap();
//! let b = fq.add_leaf(FqGroupId::ROOT, 100, IoPrioClass::Be).unwrap();
//! fq.activate(a, 4096).unwrap();
//! fq.activate(b, 4096).unwrap();
//! let mut served = [0u64; 2];
//! for _ in 0..400 {
//!     let leaf = fq.select_next(0).unwrap();
//!     served[usize::from(leaf == b)] += 4096;
//!     fq.charge(leaf, 4096).unwrap();
//! }
//! // The group has weight 300 against 100: its leaf gets three quarters of the service.
//! assert_eq!(served, [300 * 4096, 100 * 4096]);
//! ```

mod cgroups;
pub(crate) mod heap;
mod hierarchy;
#[cfg(test)]
mod model;
mod node;
#[cfg(test)]
mod tests;
mod tree;

pub use cgroups::CgroupTree;
pub use node::{check_weight, FqError, FqGroupId, LeafId, Node};

use crate::ioprio::IoPrioClass;
use crate::time::{Nanos, MILLISECOND};
use heap::{key, slot_of, tag_of, Heap};
use std::fmt;
use strength_reduce::StrengthReducedU64;
use tree::{delta, sat, Entity, GroupData, Kind, Place, Tree};

/// Fractional bits of virtual times (BFQ's `WFQ_SERVICE_SHIFT`).
pub const SERVICE_SHIFT: u32 = 22;

/// Smallest weight (cgroup v2 `io.weight`).
pub const MIN_WEIGHT: u32 = 1;

/// Largest weight (cgroup v2 `io.weight`).
pub const MAX_WEIGHT: u32 = 10_000;

/// Weight of a cgroup that sets none.
pub const DEFAULT_WEIGHT: u32 = 100;

/// How long the idle class may go unserved while others are (BFQ's `BFQ_CL_IDLE_TIMEOUT`).
pub const DEFAULT_IDLE_CLASS_TIMEOUT: Nanos = 200 * MILLISECOND;

/// Largest capacity a [`FairQueue`] accepts. It keeps every tree's weight sum below 2^38, so
/// that the fixed-point divisions stay within 64 bits, and every slot below 2^24 - 1, so that
/// no heap key is `u128::MAX`.
pub const MAX_CAPACITY: usize = (1 << 24) - 1;

/// Largest virtual time: tags saturate here (2^82 units of service per unit of weight, more
/// than a hundred million years of nanoseconds), so that they fit beside a slot in a heap key.
pub const MAX_TAG: u128 = (1 << (128 - heap::SLOT_BITS)) - 1;

const NONE: u32 = u32::MAX;

const ROOT_SLOT: u32 = 0;

const CLASSES: usize = 3;

const IDLE_CLASS: usize = 2;

/// Most active entities a service tree keeps in a list before it builds its heaps (see
/// `Tree`): below this a scan of the list is cheaper than keeping the heaps in order.
const LIST_MAX: u32 = 16;

/// Settings of a [`FairQueue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FqConfig {
    /// The idle class is served once when a selection passes through a group this long after
    /// the group's idle-class timer last fired.
    pub idle_class_timeout: Nanos,
    /// Most entities (leaves and groups, the root included) held at once; at most
    /// [`MAX_CAPACITY`].
    pub capacity: usize,
}

impl Default for FqConfig {
    fn default() -> Self {
        FqConfig {
            idle_class_timeout: DEFAULT_IDLE_CLASS_TIMEOUT,
            capacity: 1 << 20,
        }
    }
}

/// Where an entity is in its parent's service tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Not active and not remembered: it restarts at the tree's virtual time.
    Inactive,
    /// Active: competing for service.
    Active,
    /// Not active, but remembered on the idle tree with its finish time.
    Idle,
}

/// An entity's scheduling state, for policies that look (BFQ peeks at timestamps to decide
/// preemption) and for tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tags {
    /// Virtual start `S` (meaningful while active).
    pub start: u128,
    /// Virtual finish `F`: `S + budget / weight` while active, the remembered finish while idle.
    pub finish: u128,
    /// The service expected at the entity's next turn.
    pub budget: u64,
    /// Service received out of turn and not yet on its tags ([`FairQueue::serve_aside`]).
    pub aside: u64,
    /// Active, idle or inactive.
    pub state: State,
}

/// The hierarchical B-WF2Q+ scheduler. See the [module documentation](self).
#[derive(Clone, Debug)]
pub struct FairQueue {
    ents: Vec<Entity>,
    /// Heap position of each slot (in whichever heap it is).
    pos: Vec<u32>,
    groups: Vec<GroupData>,
    free_slots: Vec<u32>,
    free_groups: Vec<u32>,
    config: FqConfig,
    leaves: usize,
    group_count: usize,
    /// Longest list of active entities a service tree keeps before it builds its heaps.
    list_max: u32,
}

impl Default for FairQueue {
    fn default() -> Self {
        Self::new()
    }
}

fn class_index(class: IoPrioClass) -> u8 {
    match class {
        IoPrioClass::Rt => 0,
        IoPrioClass::None | IoPrioClass::Be => 1,
        IoPrioClass::Idle => 2,
    }
}

fn class_of(index: u8) -> IoPrioClass {
    match index {
        0 => IoPrioClass::Rt,
        1 => IoPrioClass::Be,
        _ => IoPrioClass::Idle,
    }
}

impl FairQueue {
    /// An empty tree (the root only) with the default settings.
    pub fn new() -> Self {
        Self::with_config(FqConfig::default())
    }

    /// An empty tree with `config`; the capacity is clamped to 2..=[`MAX_CAPACITY`].
    pub fn with_config(config: FqConfig) -> Self {
        Self::with_list_max(config, LIST_MAX)
    }

    /// As [`FairQueue::with_config`], with service trees that keep lists of up to `list_max`
    /// active entities (0: always heaps). The tests run every threshold.
    pub(super) fn with_list_max(config: FqConfig, list_max: u32) -> Self {
        let config = FqConfig {
            capacity: config.capacity.clamp(2, MAX_CAPACITY),
            ..config
        };
        FairQueue {
            ents: vec![Entity {
                start: 0,
                finish: 0,
                span: 0,
                budget: 0,
                aside: 0,
                weight: DEFAULT_WEIGHT,
                per_weight: StrengthReducedU64::new(DEFAULT_WEIGHT as u64),
                parent: NONE,
                group: 0,
                generation: 0,
                kind: Kind::Root,
                class: 1,
                place: Place::Inactive,
            }],
            pos: vec![0],
            groups: vec![GroupData::new(list_max)],
            free_slots: Vec::new(),
            free_groups: Vec::new(),
            config,
            leaves: 0,
            group_count: 0,
            list_max,
        }
    }

    /// The settings in force.
    pub fn config(&self) -> FqConfig {
        self.config
    }

    /// Number of leaves.
    pub fn leaf_count(&self) -> usize {
        self.leaves
    }

    /// Number of groups, the root excluded.
    pub fn group_count(&self) -> usize {
        self.group_count
    }

    /// Whether any leaf is active.
    pub fn has_active(&self) -> bool {
        self.groups[0].has_active()
    }

    /// Whether `leaf` is active.
    pub fn is_active(&self, leaf: LeafId) -> Result<bool, FqError> {
        Ok(self.ents[self.leaf_slot(leaf)? as usize].place.active())
    }

    /// The scheduling state of a leaf or non-root group.
    pub fn tags(&self, node: impl Into<Node>) -> Result<Tags, FqError> {
        let entity = &self.ents[self.node_slot(node.into())? as usize];
        Ok(Tags {
            start: entity.start,
            finish: entity.finish,
            budget: entity.budget,
            aside: entity.aside,
            state: match entity.place {
                Place::Inactive => State::Inactive,
                Place::Eligible | Place::Pending | Place::Listed => State::Active,
                Place::Idle => State::Idle,
            },
        })
    }

    /// The weight sum of `group`'s service tree for `class`: its active children's weights and
    /// those of its idle children still remembered (BFQ's `st->wsum`).
    #[inline]
    pub fn wsum(&self, group: FqGroupId, class: IoPrioClass) -> Result<u64, FqError> {
        let slot = self.group_slot(group)?;
        let data = self.ents[slot as usize].group as usize;
        Ok(self.groups[data].trees[class_index(class) as usize].wsum)
    }

    /// How many times the weight sum of `group`'s service tree for `class` ([`FairQueue::wsum`])
    /// has fallen: while it reads the same, no share of that sum has grown.
    #[inline]
    pub fn wsum_drops(&self, group: FqGroupId, class: IoPrioClass) -> Result<u64, FqError> {
        let slot = self.group_slot(group)?;
        let data = self.ents[slot as usize].group as usize;
        Ok(self.groups[data].trees[class_index(class) as usize].drops)
    }

    /// The virtual time of `group`'s service tree for `class`.
    pub fn vtime(&self, group: FqGroupId, class: IoPrioClass) -> Result<u128, FqError> {
        let slot = self.group_slot(group)?;
        let data = self.ents[slot as usize].group as usize;
        Ok(self.groups[data].trees[class_index(class) as usize].vtime)
    }

    /// `leaf` has work: it becomes active with `budget`, the service it is expected to take at
    /// its next turn, and so do its inactive ancestors. On an active leaf this only updates the
    /// budget (and so its finish time).
    pub fn activate(&mut self, leaf: LeafId, budget: u64) -> Result<(), FqError> {
        let slot = self.leaf_slot(leaf)?;
        self.enter(slot, budget);
        self.propagate(self.ents[slot as usize].parent);
        Ok(())
    }

    /// Sets the budget `leaf` will be scheduled with, active or not.
    pub fn set_budget(&mut self, leaf: LeafId, budget: u64) -> Result<(), FqError> {
        let slot = self.leaf_slot(leaf)?;
        if self.ents[slot as usize].place.active() {
            self.enter(slot, budget);
            self.propagate(self.ents[slot as usize].parent);
        } else {
            self.ents[slot as usize].set_budget(budget);
        }
        Ok(())
    }

    /// `leaf` has no more work: it leaves the competition (to the idle tree, see the module
    /// documentation), and so do the ancestors it leaves without active children. Does nothing
    /// to a leaf that is not active.
    pub fn deactivate(&mut self, leaf: LeafId) -> Result<(), FqError> {
        let slot = self.leaf_slot(leaf)?;
        if self.ents[slot as usize].place.active() {
            self.leave(slot);
            self.propagate(self.ents[slot as usize].parent);
        }
        Ok(())
    }

    /// The leaf to serve next, descending from the root and choosing in each group by class
    /// and then by B-WF2Q+; `None` when no leaf is active. `now` drives the idle-class timers.
    pub fn select_next(&mut self, now: Nanos) -> Option<LeafId> {
        let timeout = self.config.idle_class_timeout;
        let ents = &mut self.ents[..];
        let pos = &mut self.pos[..];
        let mut group = 0usize;
        loop {
            let data = &mut self.groups[group];
            let (class, fires) = data.class_at(now, timeout)?;
            if fires {
                data.idle_checked = now;
            }
            let slot = data.trees[class].select(ents, pos);
            let entity = &ents[slot as usize];
            if entity.kind == Kind::Leaf {
                return Some(LeafId {
                    index: slot,
                    generation: entity.generation,
                });
            }
            group = entity.group as usize;
        }
    }

    /// BFQ's `next_queue_may_preempt` with `in_service` in service and `newcomer` just
    /// activated: whether the root's next entity to serve is not the one `in_service` is
    /// served through (`sd->next_in_service != sd->in_service_entity` at the root).
    ///
    /// BFQ takes the entity in service out of its tree when it is a queue, or a group with one
    /// active child (`bfq_no_longer_next_in_service`), and puts it back when a child becomes
    /// active below it (`__bfq_requeue_entity`). So the answer is yes when `in_service` is a
    /// child of the root, or its root child has no other active child and `newcomer` is not
    /// below it; otherwise it is whether a selection at `now` would begin elsewhere at the
    /// root. That selection takes the root child's tags as they were when the turn began,
    /// where BFQ's requeue first moves its start past the service of the turn so far.
    pub fn next_in_service_differs(
        &self,
        now: Nanos,
        in_service: LeafId,
        newcomer: LeafId,
    ) -> Result<bool, FqError> {
        let root_child = |mut slot: u32| {
            while self.ents[slot as usize].parent != ROOT_SLOT {
                slot = self.ents[slot as usize].parent;
            }
            slot
        };
        let served = root_child(self.leaf_slot(in_service)?);
        let arrived = root_child(self.leaf_slot(newcomer)?);
        let entity = &self.ents[served as usize];
        if entity.kind == Kind::Leaf {
            return Ok(true);
        }
        let children: usize = self.groups[entity.group as usize]
            .trees
            .iter()
            .map(Tree::active_count)
            .sum();
        if children <= 1 && arrived != served {
            return Ok(true);
        }
        let root = &self.groups[ROOT_SLOT as usize];
        let Some((class, _)) = root.class_at(now, self.config.idle_class_timeout) else {
            return Ok(true);
        };
        Ok(root.trees[class].first() != Some(served))
    }

    /// `leaf` received `service` (in the policy's unit): its start moves by
    /// `service / weight`, and so does each ancestor's in its own parent's tree, whose virtual
    /// time grows by `service / wsum`; an active entity's start also moves by the service it
    /// received aside ([`FairQueue::serve_aside`]), which is then on its tags. Active entities
    /// keep their budget; an idle or forgotten one has the service added to its remembered
    /// finish (see the module documentation).
    pub fn charge(&mut self, leaf: LeafId, service: u64) -> Result<(), FqError> {
        let slot = self.leaf_slot(leaf)?;
        self.charge_from(slot, service);
        Ok(())
    }

    /// `leaf`'s turn ends (BFQ's `__bfq_bfqq_expire`): it received `service`, as
    /// [`FairQueue::charge`], and then either stays in the race with `next` as its budget, as
    /// [`FairQueue::set_budget`] (`bfq_requeue_bfqq`), or, with `None`, has no more work, as
    /// [`FairQueue::deactivate`] (`bfq_del_bfqq_busy`). The same as those two calls, with one
    /// update of the leaf's place in its tree instead of two: a leaf that leaves is not first
    /// put back in order.
    pub fn expire(&mut self, leaf: LeafId, service: u64, next: Option<u64>) -> Result<(), FqError> {
        let slot = self.leaf_slot(leaf)?;
        let entity = &self.ents[slot as usize];
        let parent = entity.parent;
        if !entity.place.active() {
            self.charge_from(slot, service);
            if let Some(budget) = next {
                self.ents[slot as usize].set_budget(budget);
            }
            return Ok(());
        }
        let (group, class) = self.tree_of(slot);
        let tree = &mut self.groups[group].trees[class];
        let ents = &mut self.ents[..];
        let pos = &mut self.pos[..];
        let entity = &mut ents[slot as usize];
        entity.start = sat(entity.start + delta(entity.take_aside(service), entity.per_weight));
        tree.advance(service);
        match next {
            Some(budget) => {
                entity.set_budget(budget);
                entity.finish = sat(entity.start + entity.span);
                tree.requeue(slot, ents, pos);
            }
            None => {
                // Taken out, then the tree settles; `charge` then `deactivate` settle first,
                // with the leaf in the tree, to the same end: settling never touches the leaf
                // (a pending leaf it would make eligible leaves either way), and `leave` puts
                // it on the idle tree only with its finish ahead of V, where settling keeps it.
                if tree.remove_top_promoting(slot, ents, pos) {
                    self.retire(slot, group, class);
                } else {
                    self.leave(slot);
                }
                let tree = &mut self.groups[group].trees[class];
                tree.settle(&mut self.ents, &mut self.pos);
            }
        }
        if parent != ROOT_SLOT {
            // The ancestors' budgets are those of the children they would serve next, the
            // leaf's new budget or its absence included: no further propagation for a leaf
            // that stays; one that left may leave its groups without active children.
            self.charge_from(parent, service);
            // The charge set each ancestor's budget from its children as they are now: only
            // a group the leaf left without active children has more to change.
            if next.is_none()
                && !self.groups[self.ents[parent as usize].group as usize].has_active()
            {
                self.propagate(parent);
            }
        }
        Ok(())
    }

    /// `leaf`, active and not in service, received `service` out of its turn (BFQ injects a
    /// request of a busy queue into the drive while the queue in service idles): each tree on
    /// its path advances its virtual time by `service / wsum`, as a charge does
    /// (`bfq_bfqq_served`), but no entity's tags move. Each entity on the path keeps the
    /// service as received aside (BFQ's `entity->service` of an entity not in service):
    /// [`FairQueue::begin_turn`] forgets it when the entity is next put in service, and it
    /// moves the entity's start when the entity leaves the race (`__bfq_deactivate_entity`'s
    /// `bfq_calc_finish(entity, entity->service)`) or is charged (the requeue of an entity in
    /// service, `__bfq_requeue_entity`: a group in service is charged at the end of its leaf's
    /// turn for what its other children received meanwhile). A leaf that is not active is
    /// charged, as [`FairQueue::charge`].
    pub fn serve_aside(&mut self, leaf: LeafId, service: u64) -> Result<(), FqError> {
        let mut slot = self.leaf_slot(leaf)?;
        if !self.ents[slot as usize].place.active() {
            self.charge_from(slot, service);
            return Ok(());
        }
        let first_group = self.ents[slot as usize].parent;
        let ents = &mut self.ents[..];
        let pos = &mut self.pos[..];
        loop {
            let entity = &mut ents[slot as usize];
            debug_assert!(
                entity.place.active(),
                "an active leaf's ancestors are active"
            );
            entity.aside = entity.aside.saturating_add(service);
            let (parent, class) = (entity.parent, entity.class as usize);
            let tree = &mut self.groups[ents[parent as usize].group as usize].trees[class];
            tree.advance(service);
            tree.settle(ents, pos);
            if parent == ROOT_SLOT {
                break;
            }
            slot = parent;
        }
        // Every tree on the path advanced, so each group on it may serve another child next,
        // with another budget: each is looked at, from the bottom up.
        let mut group = first_group;
        while group != ROOT_SLOT {
            let entity = &self.ents[group as usize];
            let next = self.groups[entity.group as usize].next_budget(&self.ents);
            if let Some(budget) = next.filter(|&budget| budget != entity.budget) {
                self.enter(group, budget);
            }
            group = self.ents[group as usize].parent;
        }
        Ok(())
    }

    /// `leaf` is put in service (BFQ's `bfq_get_next_queue`, which sets `entity->service = 0`
    /// at each level): the service it and its ancestors received aside
    /// ([`FairQueue::serve_aside`]) is forgotten, and its tags stay as they are.
    pub fn begin_turn(&mut self, leaf: LeafId) -> Result<(), FqError> {
        let mut slot = self.leaf_slot(leaf)?;
        while slot != ROOT_SLOT {
            let entity = &mut self.ents[slot as usize];
            entity.aside = 0;
            slot = entity.parent;
        }
        Ok(())
    }

    /// Charges `service` to the entity in `slot` and its ancestors (see [`FairQueue::charge`]).
    fn charge_from(&mut self, mut slot: u32, service: u64) {
        let ents = &mut self.ents[..];
        let pos = &mut self.pos[..];
        loop {
            let entity = &ents[slot as usize];
            let parent = entity.parent;
            let weight = entity.weight;
            let per_weight = entity.per_weight;
            let own = entity.group;
            let next_budget = match (entity.place.active(), own) {
                (true, own) if own != NONE => self.groups[own as usize].next_budget(ents),
                _ => None,
            };
            let tree = &mut self.groups[ents[parent as usize].group as usize].trees
                [ents[slot as usize].class as usize];
            let entity = &mut ents[slot as usize];
            match entity.place {
                Place::Eligible | Place::Pending | Place::Listed => {
                    let d = delta(entity.take_aside(service), per_weight);
                    entity.start = sat(entity.start + d);
                    if let Some(budget) = next_budget {
                        entity.set_budget(budget);
                    }
                    entity.finish = sat(entity.start + entity.span);
                    tree.advance(service);
                    tree.requeue(slot, ents, pos);
                    if parent == ROOT_SLOT {
                        return;
                    }
                    slot = parent;
                    continue;
                }
                Place::Idle => {
                    let d = delta(service, per_weight);
                    entity.finish = sat(entity.finish + d);
                    tree.idle
                        .set_key(pos[slot as usize], key(entity.finish, slot), pos);
                }
                Place::Inactive => {
                    let d = delta(service, per_weight);
                    entity.finish = sat(tree.vtime + d);
                    entity.place = Place::Idle;
                    tree.add_weight(weight);
                    tree.idle.push(key(entity.finish, slot), pos);
                }
            }
            tree.advance(service);
            tree.settle(ents, pos);
            if parent == ROOT_SLOT {
                return;
            }
            slot = parent;
        }
    }
}

//! The scheduling trees: one per group and class, entities ordered by finish tag among the eligible
//! (B-WF2Q+, as block/bfq-wf2q.c), the group's virtual time, and entering, leaving and propagating
//! service up the hierarchy.

use super::*;
use std::cell::Cell;
use std::hint::select_unpredictable;
use strength_reduce::StrengthReducedU64;

/// `Tree::best` when it must be found again.
const UNKNOWN: u32 = u32::MAX;

/// `Tree::best` when no listed entity is eligible (slots are below 2^24).
const NO_ELIGIBLE: u32 = u32::MAX - 1;

/// `x` saturated at [`MAX_TAG`].
#[inline(always)]
pub(super) fn sat(x: u128) -> u128 {
    x.min(MAX_TAG)
}

/// Maps service into virtual time: `(service << SERVICE_SHIFT) / weight` without a 128-bit
/// division (BFQ's `bfq_delta`). `weight` is the entity's weight, ready to divide by (a
/// multiplication by its reciprocal). It must be below 2^42.
#[inline(always)]
pub(super) fn delta(service: u64, weight: StrengthReducedU64) -> u128 {
    if service < 1 << (64 - SERVICE_SHIFT) {
        // The common case: the shifted service fits in 64 bits, one division.
        return ((service << SERVICE_SHIFT) / weight) as u128;
    }
    let (whole, rest) = StrengthReducedU64::div_rem(service, weight);
    ((whole as u128) << SERVICE_SHIFT) + (((rest << SERVICE_SHIFT) / weight) as u128)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Free,
    Root,
    Group,
    Leaf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    Inactive,
    /// Active, in its tree's `eligible` heap.
    Eligible,
    /// Active, in its tree's `pending` heap.
    Pending,
    /// Active, in its tree's `list` (a tree with few active entities keeps no heaps).
    Listed,
    Idle,
}

impl Entity {
    #[inline(always)]
    pub(super) fn set_budget(&mut self, budget: u64) {
        if budget != self.budget {
            self.budget = budget;
            self.span = delta(budget, self.per_weight);
        }
    }

    /// `service` and what the entity received aside, which is then on its tags.
    #[inline(always)]
    pub(super) fn take_aside(&mut self, service: u64) -> u64 {
        let total = service.saturating_add(self.aside);
        self.aside = 0;
        total
    }

    pub(super) fn set_weight(&mut self, weight: u32) {
        self.weight = weight;
        self.per_weight = StrengthReducedU64::new(weight.max(1) as u64);
        self.span = delta(self.budget, self.per_weight);
    }
}

impl Place {
    #[inline(always)]
    pub(super) fn active(self) -> bool {
        matches!(self, Place::Eligible | Place::Pending | Place::Listed)
    }
}

#[derive(Clone, Debug)]
pub(super) struct Entity {
    pub(super) start: u128,
    pub(super) finish: u128,
    /// `delta(budget, weight)`, kept in step with both so that a charge divides only once.
    pub(super) span: u128,
    pub(super) budget: u64,
    /// Service received out of turn and not yet on its tags (BFQ's `entity->service` of an
    /// entity not in service): see [`FairQueue::serve_aside`].
    pub(super) aside: u64,
    pub(super) weight: u32,
    /// `weight`, ready to divide by.
    pub(super) per_weight: StrengthReducedU64,
    /// Slot of the parent group; `NONE` for the root.
    pub(super) parent: u32,
    /// Index in `groups` for the root and groups; `NONE` for leaves.
    pub(super) group: u32,
    pub(super) generation: u32,
    pub(super) kind: Kind,
    pub(super) class: u8,
    pub(super) place: Place,
}

/// An active entity of a tree that keeps them in a list: its start and finish keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Listed {
    pub(super) start: u128,
    pub(super) finish: u128,
}

impl Listed {
    /// The entry of `entity`, in `slot`, with its tags as they are.
    #[inline(always)]
    fn of(slot: u32, entity: &Entity) -> Self {
        Listed {
            start: key(entity.start, slot),
            finish: key(entity.finish, slot),
        }
    }
}

/// One service tree: the entities of one class under one group.
///
/// Its active entities are either in `list`, unordered, or in the two heaps `eligible` and
/// `pending`. A tree starts with the list; the active entity that would make it longer than
/// `list_max` builds the heaps from it, and the tree goes back to the list when it is down to
/// `list_max / 2` active entities (so that a tree at the threshold does not rebuild at every
/// step; each rebuild is paid for by the `list_max / 2` insertions or removals before it). A
/// selection scans the list: with a handful of entities a scan of 32-byte entries costs less
/// than keeping two heaps in order at every charge, which is a removal and an insertion in
/// each (see `benches/fq.rs`). Both give the same selections.
#[derive(Clone, Debug)]
pub(super) struct Tree {
    pub(super) vtime: u128,
    /// Remainder of the last `service << SHIFT` division by `wsum`.
    pub(super) rem: u64,
    pub(super) wsum: u64,
    /// Times `wsum` fell (never reset): a policy that keeps a share of `wsum` sees whether it
    /// could have grown ([`FairQueue::wsum_drops`]).
    pub(super) drops: u64,
    /// A weight sum ready to divide by (a reciprocal costs three divisions to make, so it is
    /// made for a `wsum` that two charges in a row divided by).
    per_wsum: StrengthReducedU64,
    /// The `wsum` of the last charge.
    last_wsum: u64,
    /// Whether the active entities are in `eligible` and `pending` rather than in `list`.
    pub(super) heaps: bool,
    /// Most entities `list` holds.
    pub(super) list_max: u32,
    pub(super) list: Vec<Listed>,
    /// The slot `best_listed` found (or [`NO_ELIGIBLE`]) while neither `list` nor `V` changed
    /// since; [`UNKNOWN`] otherwise. A group's tree is asked twice between its changes: for
    /// the group's budget when a charge passes through it, then by the next selection.
    best: Cell<u32>,
    pub(super) eligible: Heap,
    pub(super) pending: Heap,
    pub(super) idle: Heap,
}

impl Tree {
    /// Starts an empty tree afresh (a group's slot reused).
    pub(super) fn reset(&mut self) {
        debug_assert!(!self.has_active() && self.idle.is_empty());
        self.vtime = 0;
        self.rem = 0;
        self.wsum = 0;
        self.heaps = false;
        self.best.set(UNKNOWN);
    }

    pub(super) fn new(list_max: u32) -> Self {
        Tree {
            vtime: 0,
            rem: 0,
            wsum: 0,
            drops: 0,
            per_wsum: StrengthReducedU64::new(1),
            last_wsum: 0,
            heaps: false,
            list_max,
            list: Vec::new(),
            best: Cell::new(UNKNOWN),
            eligible: Heap::default(),
            pending: Heap::default(),
            idle: Heap::default(),
        }
    }

    #[inline(always)]
    pub(super) fn has_active(&self) -> bool {
        !self.list.is_empty() || !self.eligible.is_empty() || !self.pending.is_empty()
    }

    /// How many active entities it has.
    pub(super) fn active_count(&self) -> usize {
        self.list.len() + self.eligible.len() + self.pending.len()
    }

    #[inline(always)]
    pub(super) fn add_weight(&mut self, weight: u32) {
        self.wsum += weight as u64;
        self.rem = 0;
    }

    #[inline(always)]
    pub(super) fn sub_weight(&mut self, weight: u32) {
        self.wsum -= weight as u64;
        self.drops += 1;
        self.rem = 0;
    }

    /// `V += service / wsum`, carrying the remainder (`bfq_bfqq_served`).
    #[inline(always)]
    pub(super) fn advance(&mut self, service: u64) {
        let wsum = self.wsum;
        debug_assert!(wsum > 0);
        if service < 1 << (63 - SERVICE_SHIFT) {
            // The common case, one division: rem < wsum < 2^38, so the sum fits in 64 bits.
            let shifted = (service << SERVICE_SHIFT) + self.rem;
            let (quotient, rem) = if self.per_wsum.get() == wsum {
                StrengthReducedU64::div_rem(shifted, self.per_wsum)
            } else {
                if self.last_wsum == wsum {
                    self.per_wsum = StrengthReducedU64::new(wsum);
                }
                (shifted / wsum, shifted % wsum)
            };
            self.last_wsum = wsum;
            self.vtime = sat(self.vtime + quotient as u128);
            self.rem = rem;
            self.best.set(UNKNOWN);
            return;
        }
        let whole = service / wsum;
        let rest = ((service % wsum) << SERVICE_SHIFT) + self.rem;
        self.vtime = sat(self.vtime + ((whole as u128) << SERVICE_SHIFT) + (rest / wsum) as u128);
        self.rem = rest % wsum;
        self.best.set(UNKNOWN);
    }

    /// The listed entity with `S <= V` and the smallest finish key, if any. No key is
    /// `u128::MAX` (slots stay below `SLOT_MASK`), so it marks "none".
    #[inline(always)]
    fn best_listed(&self) -> Option<u32> {
        let known = self.best.get();
        if known != UNKNOWN {
            return (known != NO_ELIGIBLE).then_some(known);
        }
        let limit = key(self.vtime, heap::SLOT_MASK as u32);
        let mut best = u128::MAX;
        for entry in &self.list {
            // Which entities are eligible, and which of them is best, changes from one scan to
            // the next: conditional moves, as branches here are mispredicted often.
            let candidate = select_unpredictable(entry.start <= limit, entry.finish, u128::MAX);
            best = select_unpredictable(candidate < best, candidate, best);
        }
        let found = if best == u128::MAX {
            NO_ELIGIBLE
        } else {
            slot_of(best)
        };
        self.best.set(found);
        (found != NO_ELIGIBLE).then_some(found)
    }

    /// The smallest start key among the listed entities (the list is not empty).
    #[inline]
    fn earliest_listed(&self) -> u128 {
        self.list
            .iter()
            .map(|entry| entry.start)
            .min()
            .expect("an active tree")
    }

    /// The entity this tree would serve if `V` stayed where it is: the eligible one with the
    /// smallest finish or, if none is eligible, the one with the smallest start. `None` when
    /// nothing is active.
    #[inline(always)]
    pub(super) fn first(&self) -> Option<u32> {
        if self.heaps {
            self.eligible
                .peek()
                .or_else(|| self.pending.peek())
                .map(slot_of)
        } else if self.list.is_empty() {
            None
        } else {
            Some(
                self.best_listed()
                    .unwrap_or_else(|| slot_of(self.earliest_listed())),
            )
        }
    }

    /// The entity to serve (the tree has an active one): the eligible one with the smallest
    /// finish, after `V` jumped to the smallest start if none was eligible.
    #[inline(always)]
    pub(super) fn select(&mut self, ents: &mut [Entity], pos: &mut [u32]) -> u32 {
        if self.heaps {
            if self.eligible.is_empty() {
                // Nothing eligible: V jumps to the smallest start.
                self.vtime = tag_of(self.pending.peek().expect("an active tree"));
                self.rem = 0;
                self.settle(ents, pos);
            }
            return slot_of(self.eligible.peek().expect("an eligible entity"));
        }
        if let Some(slot) = self.best_listed() {
            return slot;
        }
        self.vtime = tag_of(self.earliest_listed());
        self.rem = 0;
        self.best.set(UNKNOWN);
        self.settle(ents, pos);
        self.best_listed().expect("an eligible entity")
    }

    /// Puts an active entity in the list, or in the heaps if the tree has them or the list is
    /// full.
    #[inline(always)]
    pub(super) fn insert(&mut self, slot: u32, ents: &mut [Entity], pos: &mut [u32]) {
        if !self.heaps {
            if self.list.len() < self.list_max as usize {
                let entity = &mut ents[slot as usize];
                entity.place = Place::Listed;
                let entry = Listed::of(slot, entity);
                self.keep_best_with(entry, pos);
                pos[slot as usize] = self.list.len() as u32;
                self.list.push(entry);
                return;
            }
            self.build_heaps(ents, pos);
        }
        self.insert_heaps(slot, ents, pos);
    }

    /// Keeps the scan's answer ([`Tree::best_listed`]) when `entry` joins the list: the new
    /// entry if it is eligible and finishes first, else the answer as it was. A leaf whose
    /// request arrives is asked about at once (for its group's budget), and again by the next
    /// selection; with this neither scans the list again.
    #[inline(always)]
    fn keep_best_with(&self, entry: Listed, pos: &[u32]) {
        let known = self.best.get();
        if known == UNKNOWN || entry.start > key(self.vtime, heap::SLOT_MASK as u32) {
            // Unknown stays unknown; an entry not eligible changes nothing.
            return;
        }
        if known == NO_ELIGIBLE || entry.finish < self.list[pos[known as usize] as usize].finish {
            self.best.set(slot_of(entry.finish));
        }
    }

    /// Moves the listed entities into the heaps.
    fn build_heaps(&mut self, ents: &mut [Entity], pos: &mut [u32]) {
        self.heaps = true;
        let list = std::mem::take(&mut self.list);
        for entry in &list {
            self.insert_heaps(slot_of(entry.start), ents, pos);
        }
        // Keep the allocation for the next time the tree goes back to its list.
        self.list = list;
        self.list.clear();
    }

    /// Moves the entities of the heaps into the list.
    fn flatten(&mut self, ents: &mut [Entity], pos: &mut [u32]) {
        self.heaps = false;
        self.best.set(UNKNOWN);
        for k in self.eligible.drain().chain(self.pending.drain()) {
            let slot = slot_of(k);
            let entity = &mut ents[slot as usize];
            entity.place = Place::Listed;
            pos[slot as usize] = self.list.len() as u32;
            self.list.push(Listed::of(slot, entity));
        }
    }

    /// Writes a listed entity's keys again after its tags changed.
    #[inline(always)]
    fn relist(&mut self, slot: u32, entity: &Entity, pos: &[u32]) {
        self.best.set(UNKNOWN);
        self.list[pos[slot as usize] as usize] = Listed::of(slot, entity);
    }

    /// Puts an active entity in `eligible` or `pending` by its start.
    #[inline(always)]
    fn insert_heaps(&mut self, slot: u32, ents: &mut [Entity], pos: &mut [u32]) {
        let entity = &mut ents[slot as usize];
        if entity.start <= self.vtime {
            entity.place = Place::Eligible;
            self.eligible.push(key(entity.finish, slot), pos);
        } else {
            entity.place = Place::Pending;
            self.pending.push(key(entity.start, slot), pos);
        }
    }

    /// Takes an active entity out of the tree; leaves its place to the caller. A tree down to
    /// half its list's size goes back to the list.
    #[inline(always)]
    pub(super) fn remove(&mut self, slot: u32, ents: &mut [Entity], pos: &mut [u32]) {
        let at = pos[slot as usize];
        match ents[slot as usize].place {
            Place::Listed => {
                self.best.set(UNKNOWN);
                self.list.swap_remove(at as usize);
                if let Some(moved) = self.list.get(at as usize) {
                    pos[slot_of(moved.start) as usize] = at;
                }
                return;
            }
            Place::Eligible => {
                self.eligible.remove(at, pos);
            }
            Place::Pending => {
                self.pending.remove(at, pos);
            }
            _ => unreachable!("remove of an entity that is not active"),
        }
        self.flatten_if_small(ents, pos);
    }

    /// Moves an active entity whose tags changed to its new place.
    #[inline(always)]
    pub(super) fn reposition(&mut self, slot: u32, ents: &mut [Entity], pos: &mut [u32]) {
        let entity = &mut ents[slot as usize];
        if entity.place == Place::Listed {
            self.relist(slot, entity, pos);
            return;
        }
        let at = pos[slot as usize];
        let eligible = entity.start <= self.vtime;
        match (entity.place, eligible) {
            (Place::Eligible, true) => self.eligible.set_key(at, key(entity.finish, slot), pos),
            (Place::Pending, false) => self.pending.set_key(at, key(entity.start, slot), pos),
            (Place::Eligible, false) => {
                self.eligible.remove(at, pos);
                entity.place = Place::Pending;
                self.pending.push(key(entity.start, slot), pos);
            }
            (Place::Pending, true) => {
                self.pending.remove(at, pos);
                entity.place = Place::Eligible;
                self.eligible.push(key(entity.finish, slot), pos);
            }
            _ => unreachable!("reposition of an entity that is not active"),
        }
    }

    /// After an active entity's tags changed and `V` grew: puts the entity in its place and
    /// settles the tree. The common case, the entity served (the top of `eligible`) becoming
    /// pending while the top of `pending` becomes eligible, swaps the two with one sift in each
    /// heap instead of a removal and an insertion in each.
    #[inline(always)]
    pub(super) fn requeue(&mut self, slot: u32, ents: &mut [Entity], pos: &mut [u32]) {
        let entity = &ents[slot as usize];
        if entity.place == Place::Listed {
            self.relist(slot, entity, pos);
            self.settle(ents, pos);
            return;
        }
        if entity.place == Place::Eligible && pos[slot as usize] == 0 && entity.start > self.vtime {
            if let Some(top) = self.pending.peek() {
                if tag_of(top) <= self.vtime {
                    let start = entity.start;
                    ents[slot as usize].place = Place::Pending;
                    self.pending.replace_top(key(start, slot), pos);
                    let promoted = slot_of(top);
                    let entity = &mut ents[promoted as usize];
                    entity.place = Place::Eligible;
                    self.eligible.replace_top(key(entity.finish, promoted), pos);
                    self.settle(ents, pos);
                    return;
                }
            }
        }
        self.reposition(slot, ents, pos);
        self.settle(ents, pos);
    }

    /// Takes out `slot`, the top of `eligible`, when the first pending entity has become
    /// eligible: that one takes its place with one sift, where a removal and then `settle`
    /// take two (a sync reader's expiry in a busy tree). Returns whether it did; otherwise
    /// nothing changed. The place of the entity taken out is left to the caller.
    #[inline(always)]
    pub(super) fn remove_top_promoting(
        &mut self,
        slot: u32,
        ents: &mut [Entity],
        pos: &mut [u32],
    ) -> bool {
        if !self.heaps || ents[slot as usize].place != Place::Eligible || pos[slot as usize] != 0 {
            return false;
        }
        let Some(top) = self.pending.peek().filter(|&top| tag_of(top) <= self.vtime) else {
            return false;
        };
        let promoted = slot_of(top);
        self.pending.pop(pos);
        let entity = &mut ents[promoted as usize];
        entity.place = Place::Eligible;
        self.eligible.replace_top(key(entity.finish, promoted), pos);
        self.flatten_if_small(ents, pos);
        true
    }

    /// Goes back to the list once the heaps are down to half its size (after a removal).
    #[inline(always)]
    fn flatten_if_small(&mut self, ents: &mut [Entity], pos: &mut [u32]) {
        if self.eligible.len() + self.pending.len() <= self.list_max as usize / 2 {
            self.flatten(ents, pos);
        }
    }

    /// After `V` grew: moves the entities it made eligible, forgets the idle ones it passed.
    #[inline(always)]
    pub(super) fn settle(&mut self, ents: &mut [Entity], pos: &mut [u32]) {
        while let Some(top) = self.pending.peek() {
            if tag_of(top) > self.vtime {
                break;
            }
            let slot = slot_of(top);
            self.pending.pop(pos);
            let entity = &mut ents[slot as usize];
            entity.place = Place::Eligible;
            self.eligible.push(key(entity.finish, slot), pos);
        }
        while let Some(top) = self.idle.peek() {
            if tag_of(top) > self.vtime {
                break;
            }
            let slot = slot_of(top);
            self.idle.pop(pos);
            let entity = &mut ents[slot as usize];
            entity.place = Place::Inactive;
            let weight = entity.weight;
            self.sub_weight(weight);
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct GroupData {
    pub(super) trees: [Tree; CLASSES],
    /// When the idle-class timer last fired.
    pub(super) idle_checked: Nanos,
    /// Child entities (active or not).
    pub(super) children: u32,
}

impl GroupData {
    pub(super) fn new(list_max: u32) -> Self {
        GroupData {
            trees: std::array::from_fn(|_| Tree::new(list_max)),
            idle_checked: 0,
            children: 0,
        }
    }

    /// The class a selection through this group at `now` serves, if any child is active, and
    /// whether its idle-class timer fires (more than `timeout` since it last did): then the
    /// IDLE class, if it has an active child ([`FairQueue::select_next`]).
    #[inline(always)]
    pub(super) fn class_at(&self, now: Nanos, timeout: Nanos) -> Option<(usize, bool)> {
        let class = self.trees.iter().position(Tree::has_active)?;
        let fires = now > self.idle_checked.saturating_add(timeout);
        if fires && self.trees[IDLE_CLASS].has_active() {
            return Some((IDLE_CLASS, true));
        }
        Some((class, fires))
    }

    /// The budget of the child this group would serve next, if any child is active.
    #[inline(always)]
    pub(super) fn next_budget(&self, ents: &[Entity]) -> Option<u64> {
        for tree in &self.trees {
            if let Some(slot) = tree.first() {
                return Some(ents[slot as usize].budget);
            }
        }
        None
    }

    pub(super) fn has_active(&self) -> bool {
        self.trees.iter().any(Tree::has_active)
    }
}

impl FairQueue {
    /// (group data index, class index) of the tree `slot` sits in.
    #[inline(always)]
    pub(super) fn tree_of(&self, slot: u32) -> (usize, usize) {
        let entity = &self.ents[slot as usize];
        (
            self.ents[entity.parent as usize].group as usize,
            entity.class as usize,
        )
    }

    /// Makes `slot` active with `budget`, or updates the budget of an active one
    /// (`__bfq_activate_entity`, `__bfq_requeue_entity`).
    pub(super) fn enter(&mut self, slot: u32, budget: u64) {
        let (group, class) = self.tree_of(slot);
        let tree = &mut self.groups[group].trees[class];
        let ents = &mut self.ents[..];
        let pos = &mut self.pos[..];
        let entity = &mut ents[slot as usize];
        entity.set_budget(budget);
        match entity.place {
            Place::Eligible | Place::Pending | Place::Listed => {
                entity.finish = sat(entity.start + entity.span);
                tree.reposition(slot, ents, pos);
            }
            Place::Idle => {
                tree.idle.remove(pos[slot as usize], pos);
                entity.start = entity.finish.max(tree.vtime);
                entity.finish = sat(entity.start + entity.span);
                tree.insert(slot, ents, pos);
            }
            Place::Inactive => {
                entity.start = tree.vtime;
                entity.finish = sat(entity.start + entity.span);
                tree.add_weight(entity.weight);
                tree.insert(slot, ents, pos);
            }
        }
    }

    /// Takes an active `slot` out of its tree: remembered on the idle tree if its finish is
    /// still ahead of `V`, forgotten otherwise (`__bfq_deactivate_entity`).
    pub(super) fn leave(&mut self, slot: u32) {
        let (group, class) = self.tree_of(slot);
        let tree = &mut self.groups[group].trees[class];
        tree.remove(slot, &mut self.ents, &mut self.pos);
        self.retire(slot, group, class);
    }

    /// Remembers `slot`, just taken out of its tree (`group`'s for `class`), on the idle tree
    /// if its finish is still ahead of `V`, or forgets it (the second half of
    /// [`FairQueue::leave`]).
    #[inline(always)]
    pub(super) fn retire(&mut self, slot: u32, group: usize, class: usize) {
        let tree = &mut self.groups[group].trees[class];
        let ents = &mut self.ents[..];
        let pos = &mut self.pos[..];
        let entity = &mut ents[slot as usize];
        // What it received out of turn counts now (`bfq_calc_finish(entity, entity->service)`
        // in `__bfq_deactivate_entity`).
        if entity.aside > 0 {
            entity.start = sat(entity.start + delta(entity.aside, entity.per_weight));
            entity.aside = 0;
        }
        entity.finish = entity.start;
        if entity.finish > tree.vtime {
            entity.place = Place::Idle;
            tree.idle.push(key(entity.finish, slot), pos);
        } else {
            entity.place = Place::Inactive;
            let weight = entity.weight;
            tree.sub_weight(weight);
        }
    }

    /// After the children of group `slot` changed: updates its budget and place, and so on up
    /// to the root, stopping where nothing changed.
    pub(super) fn propagate(&mut self, mut slot: u32) {
        while slot != ROOT_SLOT {
            let entity = &self.ents[slot as usize];
            let next = self.groups[entity.group as usize].next_budget(&self.ents);
            match next {
                None => {
                    if !entity.place.active() {
                        return;
                    }
                    self.leave(slot);
                }
                Some(budget) => {
                    if entity.place.active() && entity.budget == budget {
                        return;
                    }
                    self.enter(slot, budget);
                }
            }
            slot = self.ents[slot as usize].parent;
        }
    }
}

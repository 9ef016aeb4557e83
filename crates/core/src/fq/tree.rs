//! The scheduling trees: one per group and class, entities ordered by finish tag among the eligible
//! (B-WF2Q+, as block/bfq-wf2q.c), the group's virtual time, and entering, leaving and propagating
//! service up the hierarchy.

use super::*;

/// `x` saturated at [`MAX_TAG`].
#[inline(always)]
pub(super) fn sat(x: u128) -> u128 {
    x.min(MAX_TAG)
}

/// Maps service into virtual time: `(service << SERVICE_SHIFT) / weight` without a 128-bit
/// division (BFQ's `bfq_delta`). `weight` must be below 2^42.
#[inline(always)]
pub(super) fn delta(service: u64, weight: u64) -> u128 {
    if service < 1 << (64 - SERVICE_SHIFT) {
        // The common case: the shifted service fits in 64 bits, one division.
        return ((service << SERVICE_SHIFT) / weight) as u128;
    }
    let whole = service / weight;
    let rest = service % weight;
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
    Eligible,
    Pending,
    Idle,
}

impl Entity {
    #[inline(always)]
    pub(super) fn set_budget(&mut self, budget: u64) {
        if budget != self.budget {
            self.budget = budget;
            self.span = delta(budget, self.weight as u64);
        }
    }

    pub(super) fn set_weight(&mut self, weight: u32) {
        self.weight = weight;
        self.span = delta(self.budget, weight as u64);
    }
}

impl Place {
    #[inline(always)]
    pub(super) fn active(self) -> bool {
        matches!(self, Place::Eligible | Place::Pending)
    }
}

#[derive(Clone, Debug)]
pub(super) struct Entity {
    pub(super) start: u128,
    pub(super) finish: u128,
    /// `delta(budget, weight)`, kept in step with both so that a charge divides only once.
    pub(super) span: u128,
    pub(super) budget: u64,
    pub(super) weight: u32,
    /// Slot of the parent group; `NONE` for the root.
    pub(super) parent: u32,
    /// Index in `groups` for the root and groups; `NONE` for leaves.
    pub(super) group: u32,
    pub(super) generation: u32,
    pub(super) kind: Kind,
    pub(super) class: u8,
    pub(super) place: Place,
}

/// One service tree: the entities of one class under one group.
#[derive(Clone, Debug, Default)]
pub(super) struct Tree {
    pub(super) vtime: u128,
    /// Remainder of the last `service << SHIFT` division by `wsum`.
    pub(super) rem: u64,
    pub(super) wsum: u64,
    pub(super) eligible: Heap,
    pub(super) pending: Heap,
    pub(super) idle: Heap,
}

impl Tree {
    #[inline(always)]
    pub(super) fn has_active(&self) -> bool {
        !self.eligible.is_empty() || !self.pending.is_empty()
    }

    #[inline(always)]
    pub(super) fn add_weight(&mut self, weight: u32) {
        self.wsum += weight as u64;
        self.rem = 0;
    }

    #[inline(always)]
    pub(super) fn sub_weight(&mut self, weight: u32) {
        self.wsum -= weight as u64;
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
            self.vtime = sat(self.vtime + (shifted / wsum) as u128);
            self.rem = shifted % wsum;
            return;
        }
        let whole = service / wsum;
        let rest = ((service % wsum) << SERVICE_SHIFT) + self.rem;
        self.vtime = sat(self.vtime + ((whole as u128) << SERVICE_SHIFT) + (rest / wsum) as u128);
        self.rem = rest % wsum;
    }

    /// Puts an active entity in `eligible` or `pending` by its start.
    #[inline(always)]
    pub(super) fn insert(&mut self, slot: u32, ents: &mut [Entity], pos: &mut [u32]) {
        let entity = &mut ents[slot as usize];
        if entity.start <= self.vtime {
            entity.place = Place::Eligible;
            self.eligible.push(key(entity.finish, slot), pos);
        } else {
            entity.place = Place::Pending;
            self.pending.push(key(entity.start, slot), pos);
        }
    }

    /// Takes an active entity out of `eligible` or `pending`; leaves its place to the caller.
    #[inline(always)]
    pub(super) fn remove(&mut self, slot: u32, ents: &[Entity], pos: &mut [u32]) {
        let at = pos[slot as usize];
        match ents[slot as usize].place {
            Place::Eligible => {
                self.eligible.remove(at, pos);
            }
            Place::Pending => {
                self.pending.remove(at, pos);
            }
            _ => unreachable!("remove of an entity that is not active"),
        }
    }

    /// Moves an active entity whose tags changed to its new place.
    #[inline(always)]
    pub(super) fn reposition(&mut self, slot: u32, ents: &mut [Entity], pos: &mut [u32]) {
        let entity = &mut ents[slot as usize];
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

#[derive(Clone, Debug, Default)]
pub(super) struct GroupData {
    pub(super) trees: [Tree; CLASSES],
    /// When the idle-class timer last fired.
    pub(super) idle_checked: Nanos,
    /// Child entities (active or not).
    pub(super) children: u32,
}

impl GroupData {
    /// The budget of the child this group would serve next, if any child is active.
    #[inline(always)]
    pub(super) fn next_budget(&self, ents: &[Entity]) -> Option<u64> {
        for tree in &self.trees {
            if let Some(top) = tree.eligible.peek().or_else(|| tree.pending.peek()) {
                return Some(ents[slot_of(top) as usize].budget);
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
            Place::Eligible | Place::Pending => {
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
        let ents = &mut self.ents[..];
        let pos = &mut self.pos[..];
        tree.remove(slot, ents, pos);
        let entity = &mut ents[slot as usize];
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

//! A naive reference for the fair queue: the same B-WF2Q+ rules, written as plainly as
//! possible. Every entity is a row in a table; every question ("who is eligible?", "what is
//! the smallest start?", "which idle entities has V passed?") is answered by scanning the rows,
//! and the arithmetic uses 128-bit divisions. The model-based tests drive it and the real
//! [`FairQueue`](super::FairQueue) with the same operations and require the same selections and
//! the same tags.
//!
//! Entities are keyed by the slot index the real structure gave them, since ties between equal
//! virtual times are broken by slot.

use super::SERVICE_SHIFT;
use crate::time::Nanos;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MState {
    Inactive,
    Active,
    Idle,
}

#[derive(Clone, Debug)]
pub struct MEntity {
    pub leaf: bool,
    pub parent: u32,
    pub weight: u32,
    pub class: u8,
    pub state: MState,
    pub start: u128,
    pub finish: u128,
    pub budget: u64,
    /// Service received out of turn, not yet on the tags.
    pub aside: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MTree {
    pub vtime: u128,
    pub rem: u128,
    pub wsum: u128,
}

#[derive(Clone, Debug)]
pub struct Model {
    /// Live entities by slot; the root (slot 0) is not in it.
    pub ents: BTreeMap<u32, MEntity>,
    /// Service trees by (group slot, class).
    pub trees: BTreeMap<(u32, u8), MTree>,
    /// Idle-class timer of each group (the root is 0).
    pub idle_checked: BTreeMap<u32, Nanos>,
    pub timeout: Nanos,
}

pub fn delta(service: u64, weight: u32) -> u128 {
    ((service as u128) << SERVICE_SHIFT) / weight as u128
}

impl Model {
    pub fn new(timeout: Nanos) -> Self {
        let mut idle_checked = BTreeMap::new();
        idle_checked.insert(0, 0);
        Model {
            ents: BTreeMap::new(),
            trees: BTreeMap::new(),
            idle_checked,
            timeout,
        }
    }

    pub fn add(&mut self, slot: u32, parent: u32, weight: u32, class: u8, leaf: bool) {
        self.ents.insert(
            slot,
            MEntity {
                leaf,
                parent,
                weight,
                class,
                state: MState::Inactive,
                start: 0,
                finish: 0,
                budget: 0,
                aside: 0,
            },
        );
        if !leaf {
            self.idle_checked.insert(slot, 0);
            for class in 0..3 {
                self.trees.insert((slot, class), MTree::default());
            }
        }
    }

    pub fn has_children(&self, group: u32) -> bool {
        self.ents.values().any(|e| e.parent == group)
    }

    fn tree(&mut self, group: u32, class: u8) -> &mut MTree {
        self.trees.entry((group, class)).or_default()
    }

    fn tree_of(&mut self, slot: u32) -> &mut MTree {
        let (parent, class) = {
            let e = &self.ents[&slot];
            (e.parent, e.class)
        };
        self.tree(parent, class)
    }

    fn active_in(&self, group: u32, class: u8) -> Vec<u32> {
        self.ents
            .iter()
            .filter(|(_, e)| e.parent == group && e.class == class && e.state == MState::Active)
            .map(|(&slot, _)| slot)
            .collect()
    }

    fn vtime(&self, group: u32, class: u8) -> u128 {
        self.trees
            .get(&(group, class))
            .map(|t| t.vtime)
            .unwrap_or(0)
    }

    /// The eligible entity with the smallest (finish, slot), if any.
    fn best_eligible(&self, group: u32, class: u8) -> Option<u32> {
        let vtime = self.vtime(group, class);
        self.active_in(group, class)
            .into_iter()
            .filter(|s| self.ents[s].start <= vtime)
            .min_by_key(|s| (self.ents[s].finish, *s))
    }

    fn next_budget(&self, group: u32) -> Option<u64> {
        for class in 0..3 {
            let active = self.active_in(group, class);
            if active.is_empty() {
                continue;
            }
            let chosen = self.best_eligible(group, class).unwrap_or_else(|| {
                *active
                    .iter()
                    .min_by_key(|s| (self.ents[s].start, **s))
                    .unwrap()
            });
            return Some(self.ents[&chosen].budget);
        }
        None
    }

    fn add_weight(tree: &mut MTree, weight: u32) {
        tree.wsum += weight as u128;
        tree.rem = 0;
    }

    fn sub_weight(tree: &mut MTree, weight: u32) {
        tree.wsum -= weight as u128;
        tree.rem = 0;
    }

    fn forget_passed(&mut self, group: u32, class: u8) {
        let vtime = self.vtime(group, class);
        let passed: Vec<u32> = self
            .ents
            .iter()
            .filter(|(_, e)| {
                e.parent == group
                    && e.class == class
                    && e.state == MState::Idle
                    && e.finish <= vtime
            })
            .map(|(&s, _)| s)
            .collect();
        for slot in passed {
            let weight = self.ents[&slot].weight;
            self.ents.get_mut(&slot).unwrap().state = MState::Inactive;
            Self::sub_weight(self.tree(group, class), weight);
        }
    }

    fn enter(&mut self, slot: u32, budget: u64) {
        let vtime = self.tree_of(slot).vtime;
        let e = self.ents.get_mut(&slot).unwrap();
        e.budget = budget;
        let weight = e.weight;
        match e.state {
            MState::Active => {}
            MState::Idle => e.start = e.finish.max(vtime),
            MState::Inactive => e.start = vtime,
        }
        let was = e.state;
        e.finish = e.start + delta(budget, weight);
        e.state = MState::Active;
        if was == MState::Inactive {
            Self::add_weight(self.tree_of(slot), weight);
        }
    }

    fn leave(&mut self, slot: u32) {
        let vtime = self.tree_of(slot).vtime;
        let e = self.ents.get_mut(&slot).unwrap();
        e.start += delta(e.aside, e.weight);
        e.aside = 0;
        e.finish = e.start;
        if e.finish > vtime {
            e.state = MState::Idle;
        } else {
            e.state = MState::Inactive;
            let weight = e.weight;
            Self::sub_weight(self.tree_of(slot), weight);
        }
    }

    /// Walks all the way to the root (no early stop), recomputing each group.
    fn propagate(&mut self, mut group: u32) {
        while group != 0 {
            match self.next_budget(group) {
                None => {
                    if self.ents[&group].state == MState::Active {
                        self.leave(group);
                    }
                }
                Some(budget) => self.enter(group, budget),
            }
            group = self.ents[&group].parent;
        }
    }

    pub fn activate(&mut self, slot: u32, budget: u64) {
        self.enter(slot, budget);
        let parent = self.ents[&slot].parent;
        self.propagate(parent);
    }

    pub fn set_budget(&mut self, slot: u32, budget: u64) {
        if self.ents[&slot].state == MState::Active {
            self.activate(slot, budget);
        } else {
            self.ents.get_mut(&slot).unwrap().budget = budget;
        }
    }

    pub fn deactivate(&mut self, slot: u32) {
        if self.ents[&slot].state == MState::Active {
            self.leave(slot);
            let parent = self.ents[&slot].parent;
            self.propagate(parent);
        }
    }

    pub fn remove(&mut self, slot: u32) {
        self.deactivate(slot);
        if self.ents[&slot].state == MState::Idle {
            let weight = self.ents[&slot].weight;
            Self::sub_weight(self.tree_of(slot), weight);
        }
        self.ents.remove(&slot);
        for class in 0..3 {
            self.trees.remove(&(slot, class));
        }
        self.idle_checked.remove(&slot);
    }

    pub fn select(&mut self, now: Nanos) -> Option<u32> {
        let mut group = 0u32;
        loop {
            let mut class = (0..3u8).find(|&c| !self.active_in(group, c).is_empty())?;
            let checked = self.idle_checked[&group];
            if now > checked.saturating_add(self.timeout) {
                self.idle_checked.insert(group, now);
                if !self.active_in(group, 2).is_empty() {
                    class = 2;
                }
            }
            if self.best_eligible(group, class).is_none() {
                let min_start = self
                    .active_in(group, class)
                    .iter()
                    .map(|s| self.ents[s].start)
                    .min()
                    .unwrap();
                let tree = self.tree(group, class);
                tree.vtime = min_start;
                tree.rem = 0;
                self.forget_passed(group, class);
            }
            let slot = self.best_eligible(group, class).unwrap();
            if self.ents[&slot].leaf {
                return Some(slot);
            }
            group = slot;
        }
    }

    pub fn charge(&mut self, mut slot: u32, service: u64) {
        loop {
            let (parent, class, weight, state, leaf) = {
                let e = &self.ents[&slot];
                (e.parent, e.class, e.weight, e.state, e.leaf)
            };
            let vtime = self.vtime(parent, class);
            let next_budget = if !leaf && state == MState::Active {
                self.next_budget(slot)
            } else {
                None
            };
            let e = self.ents.get_mut(&slot).unwrap();
            match state {
                MState::Active => {
                    e.start += delta(service.saturating_add(e.aside), weight);
                    e.aside = 0;
                    if let Some(budget) = next_budget {
                        e.budget = budget;
                    }
                    e.finish = e.start + delta(e.budget, weight);
                }
                MState::Idle => e.finish += delta(service, weight),
                MState::Inactive => {
                    e.finish = vtime + delta(service, weight);
                    e.state = MState::Idle;
                    Self::add_weight(self.tree(parent, class), weight);
                }
            }
            self.advance(parent, class, service);
            if parent == 0 {
                return;
            }
            slot = parent;
        }
    }

    /// The tree's V grows by `service / wsum` (the remainder carried), and the idle entities
    /// it passed are forgotten.
    fn advance(&mut self, group: u32, class: u8, service: u64) {
        let tree = self.tree(group, class);
        let total = ((service as u128) << SERVICE_SHIFT) + tree.rem;
        tree.vtime += total / tree.wsum;
        tree.rem = total % tree.wsum;
        self.forget_passed(group, class);
    }

    /// Service out of turn to an active leaf: every tree on its path advances, every entity
    /// on it keeps the service aside; an inactive leaf is charged.
    pub fn serve_aside(&mut self, mut slot: u32, service: u64) {
        if self.ents[&slot].state != MState::Active {
            self.charge(slot, service);
            return;
        }
        let first_group = self.ents[&slot].parent;
        loop {
            let e = self.ents.get_mut(&slot).unwrap();
            e.aside = e.aside.saturating_add(service);
            let (parent, class) = (e.parent, e.class);
            self.advance(parent, class, service);
            if parent == 0 {
                break;
            }
            slot = parent;
        }
        self.propagate(first_group);
    }

    /// A leaf put in service: it and its ancestors forget what they received aside.
    pub fn begin_turn(&mut self, mut slot: u32) {
        while slot != 0 {
            let e = self.ents.get_mut(&slot).unwrap();
            e.aside = 0;
            slot = e.parent;
        }
    }

    pub fn set_weight(&mut self, slot: u32, weight: u32) {
        let (old, state) = {
            let e = &self.ents[&slot];
            (e.weight, e.state)
        };
        if old == weight {
            return;
        }
        self.ents.get_mut(&slot).unwrap().weight = weight;
        if state != MState::Inactive {
            let tree = self.tree_of(slot);
            Self::sub_weight(tree, old);
            Self::add_weight(tree, weight);
        }
        if state == MState::Active {
            let e = self.ents.get_mut(&slot).unwrap();
            e.finish = e.start + delta(e.budget, weight);
            let parent = e.parent;
            self.propagate(parent);
        }
    }

    pub fn set_class(&mut self, slot: u32, class: u8) {
        let (old, state, weight) = {
            let e = &self.ents[&slot];
            (e.class, e.state, e.weight)
        };
        if old == class {
            return;
        }
        if state != MState::Inactive {
            Self::sub_weight(self.tree_of(slot), weight);
            self.ents.get_mut(&slot).unwrap().state = MState::Inactive;
        }
        self.ents.get_mut(&slot).unwrap().class = class;
        if state == MState::Active {
            let budget = self.ents[&slot].budget;
            self.enter(slot, budget);
            let parent = self.ents[&slot].parent;
            self.propagate(parent);
        }
    }
}

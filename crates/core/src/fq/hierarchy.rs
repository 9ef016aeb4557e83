//! The hierarchy: adding and removing leaves and groups, finding their slots, their parents,
//! weights and classes, and changing them.

use super::*;
use strength_reduce::StrengthReducedU64;

impl FairQueue {
    pub(super) fn leaf_slot(&self, leaf: LeafId) -> Result<u32, FqError> {
        match self.ents.get(leaf.index as usize) {
            Some(e) if e.kind == Kind::Leaf && e.generation == leaf.generation => Ok(leaf.index),
            _ => Err(FqError::UnknownLeaf(leaf)),
        }
    }

    pub(super) fn group_slot(&self, group: FqGroupId) -> Result<u32, FqError> {
        match self.ents.get(group.index as usize) {
            Some(e)
                if matches!(e.kind, Kind::Group | Kind::Root)
                    && e.generation == group.generation =>
            {
                Ok(group.index)
            }
            _ => Err(FqError::UnknownGroup(group)),
        }
    }

    /// The slot of a leaf or non-root group.
    pub(super) fn node_slot(&self, node: Node) -> Result<u32, FqError> {
        match node {
            Node::Leaf(leaf) => self.leaf_slot(leaf),
            Node::Group(group) => {
                let slot = self.group_slot(group)?;
                if slot == ROOT_SLOT {
                    Err(FqError::Root)
                } else {
                    Ok(slot)
                }
            }
        }
    }

    pub(super) fn group_id(&self, slot: u32) -> FqGroupId {
        FqGroupId {
            index: slot,
            generation: self.ents[slot as usize].generation,
        }
    }

    /// Whether `leaf` exists.
    pub fn contains(&self, leaf: LeafId) -> bool {
        self.leaf_slot(leaf).is_ok()
    }

    /// Whether `group` exists.
    pub fn contains_group(&self, group: FqGroupId) -> bool {
        self.group_slot(group).is_ok()
    }

    pub(super) fn alloc(
        &mut self,
        parent: FqGroupId,
        weight: u32,
        class: IoPrioClass,
        kind: Kind,
    ) -> Result<(u32, u32), FqError> {
        check_weight(weight)?;
        let parent = self.group_slot(parent)?;
        let slot = match self.free_slots.pop() {
            Some(slot) => slot,
            None => {
                if self.ents.len() >= self.config.capacity {
                    return Err(FqError::Full {
                        capacity: self.config.capacity,
                    });
                }
                self.ents.push(Entity {
                    start: 0,
                    finish: 0,
                    span: 0,
                    budget: 0,
                    aside: 0,
                    weight: 0,
                    per_weight: StrengthReducedU64::new(1),
                    parent: NONE,
                    group: NONE,
                    generation: 0,
                    kind: Kind::Free,
                    class: 0,
                    place: Place::Inactive,
                });
                self.pos.push(0);
                (self.ents.len() - 1) as u32
            }
        };
        let group = if kind == Kind::Group {
            match self.free_groups.pop() {
                Some(index) => {
                    // Its trees are empty (every child was removed); start them afresh.
                    let data = &mut self.groups[index as usize];
                    data.idle_checked = 0;
                    for tree in &mut data.trees {
                        tree.reset();
                    }
                    index
                }
                None => {
                    self.groups.push(GroupData::new(self.list_max));
                    (self.groups.len() - 1) as u32
                }
            }
        } else {
            NONE
        };
        let parent_group = self.ents[parent as usize].group;
        self.groups[parent_group as usize].children += 1;
        let entity = &mut self.ents[slot as usize];
        *entity = Entity {
            start: 0,
            finish: 0,
            span: 0,
            budget: 0,
            aside: 0,
            weight,
            per_weight: StrengthReducedU64::new(weight as u64),
            parent,
            group,
            generation: entity.generation,
            kind,
            class: class_index(class),
            place: Place::Inactive,
        };
        Ok((slot, entity.generation))
    }

    /// Adds a group under `parent` with `weight` (1..=10000) and `class` (groups are normally
    /// best effort; cgroup v2's `io.prio.class` can make them otherwise).
    pub fn add_group(
        &mut self,
        parent: FqGroupId,
        weight: u32,
        class: IoPrioClass,
    ) -> Result<FqGroupId, FqError> {
        let (index, generation) = self.alloc(parent, weight, class, Kind::Group)?;
        self.group_count += 1;
        Ok(FqGroupId { index, generation })
    }

    /// Adds an inactive leaf under `parent` with `weight` (1..=10000) and `class`.
    pub fn add_leaf(
        &mut self,
        parent: FqGroupId,
        weight: u32,
        class: IoPrioClass,
    ) -> Result<LeafId, FqError> {
        let (index, generation) = self.alloc(parent, weight, class, Kind::Leaf)?;
        self.leaves += 1;
        Ok(LeafId { index, generation })
    }

    /// Frees `slot` after it left the active trees.
    pub(super) fn release(&mut self, slot: u32) {
        if self.ents[slot as usize].place == Place::Idle {
            let (group, class) = self.tree_of(slot);
            let weight = self.ents[slot as usize].weight;
            let tree = &mut self.groups[group].trees[class];
            tree.idle.remove(self.pos[slot as usize], &mut self.pos);
            tree.sub_weight(weight);
        }
        debug_assert!(!self.ents[slot as usize].place.active());
        let parent_group = self.ents[self.ents[slot as usize].parent as usize].group;
        self.groups[parent_group as usize].children -= 1;
        let entity = &mut self.ents[slot as usize];
        entity.kind = Kind::Free;
        entity.place = Place::Inactive;
        entity.generation = entity.generation.wrapping_add(1);
        entity.parent = NONE;
        if entity.group != NONE {
            self.free_groups.push(entity.group);
            entity.group = NONE;
        }
        self.free_slots.push(slot);
    }

    /// Removes a leaf, deactivating it first; its slot is reused by later additions.
    pub fn remove_leaf(&mut self, leaf: LeafId) -> Result<(), FqError> {
        let slot = self.leaf_slot(leaf)?;
        self.deactivate(leaf)?;
        self.release(slot);
        self.leaves -= 1;
        Ok(())
    }

    /// Removes an empty group (remove its children first).
    pub fn remove_group(&mut self, group: FqGroupId) -> Result<(), FqError> {
        let slot = self.node_slot(Node::Group(group))?;
        let data = self.ents[slot as usize].group;
        if self.groups[data as usize].children > 0 {
            return Err(FqError::GroupNotEmpty(group));
        }
        debug_assert!(!self.ents[slot as usize].place.active());
        self.release(slot);
        self.group_count -= 1;
        Ok(())
    }

    /// The parent group of a leaf or group (`None` for the root).
    pub fn parent(&self, node: impl Into<Node>) -> Result<Option<FqGroupId>, FqError> {
        let slot = match node.into() {
            Node::Leaf(leaf) => self.leaf_slot(leaf)?,
            Node::Group(group) => self.group_slot(group)?,
        };
        let parent = self.ents[slot as usize].parent;
        Ok((parent != NONE).then(|| self.group_id(parent)))
    }

    /// The weight of a leaf or non-root group.
    pub fn weight(&self, node: impl Into<Node>) -> Result<u32, FqError> {
        Ok(self.ents[self.node_slot(node.into())? as usize].weight)
    }

    /// The class of a leaf or non-root group.
    pub fn class(&self, node: impl Into<Node>) -> Result<IoPrioClass, FqError> {
        Ok(class_of(
            self.ents[self.node_slot(node.into())? as usize].class,
        ))
    }

    /// Sets the weight (1..=10000) of a leaf or non-root group. It applies at once: an active
    /// entity keeps its start and gets a new finish.
    pub fn set_weight(&mut self, node: impl Into<Node>, weight: u32) -> Result<(), FqError> {
        let slot = self.node_slot(node.into())?;
        check_weight(weight)?;
        let old = self.ents[slot as usize].weight;
        if old == weight {
            return Ok(());
        }
        let (group, class) = self.tree_of(slot);
        let tree = &mut self.groups[group].trees[class];
        let entity = &mut self.ents[slot as usize];
        entity.set_weight(weight);
        match entity.place {
            Place::Inactive => {}
            Place::Idle => {
                tree.sub_weight(old);
                tree.add_weight(weight);
            }
            Place::Eligible | Place::Pending | Place::Listed => {
                tree.sub_weight(old);
                tree.add_weight(weight);
                entity.finish = sat(entity.start + entity.span);
                tree.reposition(slot, &mut self.ents, &mut self.pos);
                self.propagate(self.ents[slot as usize].parent);
            }
        }
        Ok(())
    }

    /// Moves a leaf or non-root group to another class's service tree. An active entity starts
    /// afresh at the new tree's virtual time; an idle one is forgotten.
    pub fn set_class(&mut self, node: impl Into<Node>, class: IoPrioClass) -> Result<(), FqError> {
        let slot = self.node_slot(node.into())?;
        let class = class_index(class);
        let old = self.ents[slot as usize].class;
        if old == class {
            return Ok(());
        }
        let (group, _) = self.tree_of(slot);
        let weight = self.ents[slot as usize].weight;
        match self.ents[slot as usize].place {
            Place::Inactive => {}
            Place::Idle => {
                let tree = &mut self.groups[group].trees[old as usize];
                tree.idle.remove(self.pos[slot as usize], &mut self.pos);
                tree.sub_weight(weight);
                self.ents[slot as usize].place = Place::Inactive;
            }
            Place::Eligible | Place::Pending | Place::Listed => {
                let tree = &mut self.groups[group].trees[old as usize];
                tree.remove(slot, &mut self.ents, &mut self.pos);
                tree.sub_weight(weight);
                self.ents[slot as usize].place = Place::Inactive;
                self.ents[slot as usize].class = class;
                let budget = self.ents[slot as usize].budget;
                self.enter(slot, budget);
                self.propagate(self.ents[slot as usize].parent);
            }
        }
        self.ents[slot as usize].class = class;
        Ok(())
    }
}

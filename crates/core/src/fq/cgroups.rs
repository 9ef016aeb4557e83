//! The layer's groups for a cgroup tree: what every policy on the layer needs to place its
//! leaves under the right cgroups with their `io.weight`.

use super::{FairQueue, FqGroupId};
use crate::group::{GroupId, Groups, IO_WEIGHT_DEFAULT};
use crate::ioprio::IoPrioClass;
use std::collections::BTreeMap;

/// Maps cgroups ([`GroupId`]) to the layer's groups, creating them (ancestors first) on first
/// use with the cgroup's `io.weight`. The root cgroup is the layer's root.
#[derive(Clone, Debug, Default)]
pub struct CgroupTree {
    groups: Groups,
    map: BTreeMap<GroupId, FqGroupId>,
}

impl CgroupTree {
    /// No cgroups known yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The cgroups and their settings.
    pub fn groups(&self) -> &Groups {
        &self.groups
    }

    /// `group`'s `io.weight` (the default for a group not known).
    pub fn weight(&self, group: GroupId) -> u32 {
        if (group.0 as usize) < self.groups.len() {
            self.groups.settings(group).weight
        } else {
            IO_WEIGHT_DEFAULT
        }
    }

    /// `group`'s parent (the root for the root and for a group not known).
    pub fn parent(&self, group: GroupId) -> GroupId {
        if (group.0 as usize) < self.groups.len() {
            self.groups.parent(group).unwrap_or(GroupId::ROOT)
        } else {
            GroupId::ROOT
        }
    }

    /// Takes new cgroup settings, and gives the layer's groups made so far their weights.
    pub fn set_groups(&mut self, groups: &Groups, fq: &mut FairQueue) {
        self.groups = groups.clone();
        for (&group, &id) in &self.map {
            fq.set_weight(id, self.weight(group))
                .expect("io.weight is checked when written");
        }
    }

    /// The layer's group for cgroup `group` if it has one yet (the root's for the root and for
    /// a cgroup not configured).
    pub fn existing(&self, group: GroupId) -> Option<FqGroupId> {
        if group == GroupId::ROOT || (group.0 as usize) >= self.groups.len() {
            return Some(FqGroupId::ROOT);
        }
        self.map.get(&group).copied()
    }

    /// The layer's group for `group`, made on first use.
    pub fn fq_group(&mut self, fq: &mut FairQueue, group: GroupId) -> FqGroupId {
        if group == GroupId::ROOT || (group.0 as usize) >= self.groups.len() {
            return FqGroupId::ROOT;
        }
        if let Some(&id) = self.map.get(&group) {
            return id;
        }
        let parent = self.parent(group);
        let parent = self.fq_group(fq, parent);
        let id = fq
            .add_group(parent, self.weight(group), IoPrioClass::Be)
            .expect("cgroups are bounded by GROUPS_MAX and io.weight is checked");
        self.map.insert(group, id);
        id
    }
}

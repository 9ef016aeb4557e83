//! The handles of the tree (leaves, groups, nodes) and its errors.

use super::*;

/// A leaf of the tree: something that queues work, such as a flow's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeafId {
    pub(super) index: u32,
    pub(super) generation: u32,
}

impl LeafId {
    /// The arena slot; ties between equal virtual times go to the smaller slot.
    pub fn index(self) -> u32 {
        self.index
    }
}

/// A group of the tree (a cgroup). Not the same numbering as [`crate::GroupId`]: a policy maps
/// its cgroups to these as it creates them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FqGroupId {
    pub(super) index: u32,
    pub(super) generation: u32,
}

impl FqGroupId {
    /// The root group, which always exists.
    pub const ROOT: FqGroupId = FqGroupId {
        index: ROOT_SLOT,
        generation: 0,
    };

    /// The arena slot.
    pub fn index(self) -> u32 {
        self.index
    }
}

/// Either kind of entity, for the operations that apply to both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// A leaf.
    Leaf(LeafId),
    /// A group.
    Group(FqGroupId),
}

impl From<LeafId> for Node {
    fn from(leaf: LeafId) -> Self {
        Node::Leaf(leaf)
    }
}

impl From<FqGroupId> for Node {
    fn from(group: FqGroupId) -> Self {
        Node::Group(group)
    }
}

/// Something the layer refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FqError {
    /// A weight outside 1..=10000.
    Weight(u32),
    /// The leaf does not exist (never did, or was removed).
    UnknownLeaf(LeafId),
    /// The group does not exist (never did, or was removed).
    UnknownGroup(FqGroupId),
    /// The root group has no weight or class and cannot be removed.
    Root,
    /// The group still has children.
    GroupNotEmpty(FqGroupId),
    /// The arena holds `capacity` entities already.
    Full {
        /// The configured capacity.
        capacity: usize,
    },
}

impl fmt::Display for FqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FqError::Weight(weight) => write!(
                f,
                "weight {weight} is outside {MIN_WEIGHT}..={MAX_WEIGHT} (cgroup io.weight)"
            ),
            FqError::UnknownLeaf(leaf) => write!(
                f,
                "leaf {} (generation {}) does not exist",
                leaf.index, leaf.generation
            ),
            FqError::UnknownGroup(group) => write!(
                f,
                "group {} (generation {}) does not exist",
                group.index, group.generation
            ),
            FqError::Root => write!(
                f,
                "the root group has no weight or class and cannot be removed"
            ),
            FqError::GroupNotEmpty(group) => write!(
                f,
                "group {} still has children: remove them first",
                group.index
            ),
            FqError::Full { capacity } => {
                write!(f, "the fair queue already holds {capacity} entities")
            }
        }
    }
}

impl std::error::Error for FqError {}

/// Checks a weight as cgroup v2 checks `io.weight`.
pub fn check_weight(weight: u32) -> Result<u32, FqError> {
    if (MIN_WEIGHT..=MAX_WEIGHT).contains(&weight) {
        Ok(weight)
    } else {
        Err(FqError::Weight(weight))
    }
}

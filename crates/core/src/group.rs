//! Groups of flows, named by cgroup-like paths ("/", "/a", "/a/b").
//!
//! Requests carry a compact [`GroupId`]; a [`Groups`] table maps ids to paths and parents so that
//! hierarchical policies can walk the tree. The root "/" always exists and is id 0.

use std::collections::HashMap;
use std::fmt;

/// Index of a group in its [`Groups`] table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GroupId(pub u32);

impl GroupId {
    /// The root group "/".
    pub const ROOT: GroupId = GroupId(0);
}

/// Upper bound on the number of groups in one table; cgroup hierarchies are small, and a bound
/// keeps every per-group array in a policy bounded too.
pub const MAX_GROUPS: usize = 4096;

/// A group path that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupError {
    /// The path is not absolute or has an empty or dot component.
    BadPath(String),
    /// More than [`MAX_GROUPS`] groups.
    TooMany,
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupError::BadPath(path) => write!(
                f,
                "group path {path:?} is not valid: use an absolute path like \"/\" or \"/a/b\""
            ),
            GroupError::TooMany => write!(f, "more than {MAX_GROUPS} groups"),
        }
    }
}

impl std::error::Error for GroupError {}

#[derive(Clone, Debug)]
struct GroupEntry {
    path: String,
    parent: Option<GroupId>,
    depth: u32,
}

/// The table of known groups. Adding a path adds its missing ancestors first, so every group's
/// parent has a smaller id.
#[derive(Clone, Debug)]
pub struct Groups {
    entries: Vec<GroupEntry>,
    by_path: HashMap<String, GroupId>,
}

impl Default for Groups {
    fn default() -> Self {
        Self::new()
    }
}

impl Groups {
    /// A table holding only the root.
    pub fn new() -> Self {
        let mut by_path = HashMap::new();
        by_path.insert("/".to_string(), GroupId::ROOT);
        Groups {
            entries: vec![GroupEntry {
                path: "/".into(),
                parent: None,
                depth: 0,
            }],
            by_path,
        }
    }

    /// Normalises a path: fio's `cgroup=a/b` means "/a/b"; trailing slashes are dropped.
    pub fn normalize(path: &str) -> Result<String, GroupError> {
        let trimmed = path.trim();
        let mut out = String::with_capacity(trimmed.len() + 1);
        for component in trimmed.split('/').filter(|c| !c.is_empty()) {
            if component == "." || component == ".." {
                return Err(GroupError::BadPath(path.to_string()));
            }
            out.push('/');
            out.push_str(component);
        }
        if out.is_empty() {
            out.push('/');
        }
        Ok(out)
    }

    /// The id of `path`, adding it and its ancestors if they are new.
    pub fn intern(&mut self, path: &str) -> Result<GroupId, GroupError> {
        let normalized = Self::normalize(path)?;
        if let Some(&id) = self.by_path.get(&normalized) {
            return Ok(id);
        }
        let (parent_path, _) = normalized
            .rsplit_once('/')
            .expect("normalized paths start with /");
        let parent = self.intern(if parent_path.is_empty() {
            "/"
        } else {
            parent_path
        })?;
        if self.entries.len() >= MAX_GROUPS {
            return Err(GroupError::TooMany);
        }
        let id = GroupId(self.entries.len() as u32);
        let depth = self.entries[parent.0 as usize].depth + 1;
        self.entries.push(GroupEntry {
            path: normalized.clone(),
            parent: Some(parent),
            depth,
        });
        self.by_path.insert(normalized, id);
        Ok(id)
    }

    /// The id of an existing path.
    pub fn get(&self, path: &str) -> Option<GroupId> {
        Self::normalize(path)
            .ok()
            .and_then(|p| self.by_path.get(&p).copied())
    }

    /// The path of `id`.
    pub fn path(&self, id: GroupId) -> &str {
        &self.entries[id.0 as usize].path
    }

    /// The parent of `id`; `None` for the root.
    pub fn parent(&self, id: GroupId) -> Option<GroupId> {
        self.entries[id.0 as usize].parent
    }

    /// Distance from the root (the root is 0).
    pub fn depth(&self, id: GroupId) -> u32 {
        self.entries[id.0 as usize].depth
    }

    /// Number of groups, the root included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Always false: the root exists.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Every id in creation order (parents before children).
    pub fn ids(&self) -> impl Iterator<Item = GroupId> {
        (0..self.entries.len() as u32).map(GroupId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves interning creates ancestors first and normalises fio-style relative paths.
    #[test]
    fn intern_builds_the_tree() {
        let mut groups = Groups::new();
        let ab = groups.intern("a/b/").unwrap();
        let a = groups.get("/a").unwrap();
        assert_eq!(groups.path(ab), "/a/b");
        assert_eq!(groups.parent(ab), Some(a));
        assert_eq!(groups.parent(a), Some(GroupId::ROOT));
        assert_eq!(groups.depth(ab), 2);
        assert!(a.0 < ab.0);
        assert_eq!(groups.intern("/a/b").unwrap(), ab);
        assert_eq!(groups.intern("").unwrap(), GroupId::ROOT);
        assert!(groups.intern("/a/../b").is_err());
    }
}

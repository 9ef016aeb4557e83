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

use crate::limits::{GROUPS_MAX, GROUP_DEPTH_MAX, GROUP_PATH_BYTES_MAX};

/// A group path that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupError {
    /// The path is not absolute or has an empty or dot component.
    BadPath(String),
    /// More than [`GROUPS_MAX`] groups (a bound that keeps every per-group array in a policy
    /// bounded too).
    TooMany,
    /// A path longer than [`GROUP_PATH_BYTES_MAX`] bytes: its length.
    TooLong(usize),
    /// A path more than [`GROUP_DEPTH_MAX`] levels deep: its depth.
    TooDeep(usize),
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupError::BadPath(path) => write!(
                f,
                "group path {} is not valid: use an absolute path like \"/\" or \"/a/b\"",
                crate::limits::quote(path)
            ),
            GroupError::TooMany => write!(f, "more than {GROUPS_MAX} groups (iosched's limit)"),
            GroupError::TooLong(bytes) => write!(
                f,
                "group path is {bytes} bytes long; the limit is {GROUP_PATH_BYTES_MAX} (PATH_MAX)"
            ),
            GroupError::TooDeep(depth) => write!(
                f,
                "group path is {depth} levels deep; the limit is {GROUP_DEPTH_MAX}"
            ),
        }
    }
}

impl std::error::Error for GroupError {}

#[derive(Clone, Debug)]
struct GroupEntry {
    path: String,
    parent: Option<GroupId>,
    depth: u32,
    settings: GroupSettings,
}

/// cgroup v2's default and bounds for `io.weight`.
pub const IO_WEIGHT_DEFAULT: u32 = 100;
/// Smallest `io.weight`.
pub const IO_WEIGHT_MIN: u32 = 1;
/// Largest `io.weight`.
pub const IO_WEIGHT_MAX: u32 = 10_000;

/// `io.max`: per-direction limits in bytes and I/Os per second; `None` is "max" (no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoMax {
    /// Read bytes per second.
    pub rbps: Option<u64>,
    /// Write bytes per second.
    pub wbps: Option<u64>,
    /// Read I/Os per second.
    pub riops: Option<u64>,
    /// Write I/Os per second.
    pub wiops: Option<u64>,
}

impl IoMax {
    /// Whether any limit is set.
    pub fn is_limited(&self) -> bool {
        self.rbps.is_some() || self.wbps.is_some() || self.riops.is_some() || self.wiops.is_some()
    }

    /// The (bytes, I/Os) per second limits of one direction (0 read, 1 write).
    pub fn of(&self, dir: usize) -> (Option<u64>, Option<u64>) {
        if dir == 0 {
            (self.rbps, self.riops)
        } else {
            (self.wbps, self.wiops)
        }
    }
}

/// `io.prio.class`: how a group changes the priority class of its requests (blk-ioprio).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PrioClassPolicy {
    /// `no-change`: requests keep their priority.
    #[default]
    NoChange,
    /// `promote-to-rt`: requests not already RT become RT level 4.
    PromoteToRt,
    /// `restrict-to-be`: RT requests become BE level 0, unset ones BE at their nice level;
    /// BE and IDLE ones are kept.
    RestrictToBe,
    /// `idle`: every request becomes IDLE.
    Idle,
}

impl PrioClassPolicy {
    /// The priority a request of this group is given, from the one its issuer set:
    /// `blkcg_set_ioprio` (block/blk-ioprio.c). A request without a class has already taken
    /// its task's (best effort, the level from its nice value: `bio_set_ioprio`); then
    /// `promote-to-rt` (and its old name `none-to-rt`) makes any non-RT request RT level 4, and
    /// `restrict-to-be` and `idle` keep the lower of the request's priority and the class at
    /// level 0 (`max_t` of the raw values, where a larger class is a lower priority): an RT
    /// request becomes BE level 0, a BE one keeps its level, an IDLE one stays IDLE.
    pub fn apply(self, prio: crate::IoPrio) -> crate::IoPrio {
        use crate::ioprio::{IoPrio, IoPrioClass, IOPRIO_DEFAULT_LEVEL};
        let build = |class, level| IoPrio::new(class, level).expect("levels stay in 0..8");
        let class = prio.class();
        // bio_set_ioprio: no class yet takes the task's, BE at its nice level.
        let issued = if class == IoPrioClass::None {
            build(IoPrioClass::Be, prio.effective_level())
        } else {
            prio
        };
        let floor = |floor: IoPrioClass| {
            let rank = |c: IoPrioClass| match c {
                IoPrioClass::None => 0,
                IoPrioClass::Rt => 1,
                IoPrioClass::Be => 2,
                IoPrioClass::Idle => 3,
            };
            if rank(issued.class()) >= rank(floor) {
                issued
            } else {
                build(floor, 0)
            }
        };
        match self {
            PrioClassPolicy::NoChange => prio,
            PrioClassPolicy::PromoteToRt if class == IoPrioClass::Rt => prio,
            PrioClassPolicy::PromoteToRt => build(IoPrioClass::Rt, IOPRIO_DEFAULT_LEVEL),
            PrioClassPolicy::RestrictToBe => floor(IoPrioClass::Be),
            PrioClassPolicy::Idle => floor(IoPrioClass::Idle),
        }
    }

    /// The name as the cgroup file takes it.
    pub fn name(self) -> &'static str {
        match self {
            PrioClassPolicy::NoChange => "no-change",
            PrioClassPolicy::PromoteToRt => "promote-to-rt",
            PrioClassPolicy::RestrictToBe => "restrict-to-be",
            PrioClassPolicy::Idle => "idle",
        }
    }
}

/// A group's io controller settings, as cgroup v2 names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    /// `io.weight`: share among siblings, 1..=10000 (default 100).
    pub weight: u32,
    /// `io.max`: bandwidth and IOPS ceilings.
    pub max: IoMax,
    /// `io.prio.class`.
    pub prio_class: PrioClassPolicy,
    /// `io.latency`'s target in microseconds (blk-iolatency), if any.
    pub latency_target_us: Option<u64>,
    /// `qos.rate`, `qos.burst`, `qos.delay`, `qos.reservation`, `qos.weight`, `qos.limit`
    /// (iosched's own files, for `pclock` and `htbs`).
    pub qos: crate::qos::Qos,
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            weight: IO_WEIGHT_DEFAULT,
            max: IoMax::default(),
            prio_class: PrioClassPolicy::NoChange,
            latency_target_us: None,
            qos: crate::qos::Qos::default(),
        }
    }
}

/// A cgroup file write that Linux would refuse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingError {
    /// The file written (`io.weight`, ...).
    pub file: String,
    /// The value written.
    pub value: String,
    /// Why it is refused.
    pub reason: String,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A value is quoted back at most QUOTED_BYTES_MAX bytes long (found by fuzzing: a
        // 4 kB io.max value was echoed whole).
        write!(
            f,
            "{} {}: {}",
            crate::limits::cut(&self.file),
            crate::limits::quote(&self.value),
            self.reason
        )
    }
}

impl std::error::Error for SettingError {}

/// One write to a group's io controller file, as `echo 500 > /sys/fs/cgroup/vm1/io.weight`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSetting {
    /// The group, as fio's `cgroup=` names it (`/vm1`, `vm1/db`).
    pub path: String,
    /// `io.weight`, `io.max` or `io.prio.class`.
    pub file: String,
    /// What is written.
    pub value: String,
    /// Where it came from, for errors (`groups.conf:3`, `--group ...`).
    pub origin: String,
}

/// The io controller files a group has.
pub const SETTING_FILES: &[&str] = &[
    "io.weight",
    "io.max",
    "io.prio.class",
    "io.latency",
    "qos.rate",
    "qos.burst",
    "qos.delay",
    "qos.reservation",
    "qos.weight",
    "qos.limit",
    "io.cost.qos",
    "io.cost.model",
];

/// The files only the root group has: `io.cost.qos` and `io.cost.model` (blk-iocost), one
/// line per device.
pub const ROOT_FILES: &[&str] = &["io.cost.qos", "io.cost.model"];

pub(crate) fn strip_device(value: &str) -> &str {
    // "MAJ:MIN rest": one simulated or real device per run, so the device is not checked.
    let value = value.trim();
    match value.split_once(char::is_whitespace) {
        Some((first, rest))
            if first.contains(':') && first.split(':').all(|p| p.parse::<u32>().is_ok()) =>
        {
            rest.trim()
        }
        _ => value,
    }
}

impl GroupSettings {
    /// Writes `value` to cgroup file `file`, with the syntax Linux accepts: `io.weight` takes
    /// `N`, `default N` or `MAJ:MIN N`; `io.max` takes `[MAJ:MIN] rbps=N wbps=N riops=N wiops=N`
    /// (any subset, `max` for no limit); `io.prio.class` takes `no-change`, `promote-to-rt`
    /// (or `none-to-rt`), `restrict-to-be` or `idle`; the `qos.*` files take
    /// [`crate::qos::Qos::set`]'s values (`qos.rate` `8800KiB/s`, `qos.delay` `100ms`, ...).
    pub fn set(&mut self, file: &str, value: &str) -> Result<(), SettingError> {
        let error = |reason: String| SettingError {
            file: file.to_string(),
            value: value.to_string(),
            reason,
        };
        match file {
            "io.weight" => {
                let text = strip_device(value);
                let text = text.strip_prefix("default").unwrap_or(text).trim();
                let weight: u32 = text
                    .parse()
                    .map_err(|_| error("expected a weight from 1 to 10000".into()))?;
                if !(IO_WEIGHT_MIN..=IO_WEIGHT_MAX).contains(&weight) {
                    return Err(error(format!(
                        "weight {weight} is outside {IO_WEIGHT_MIN}..={IO_WEIGHT_MAX}"
                    )));
                }
                self.weight = weight;
            }
            "io.max" => {
                let text = strip_device(value);
                if text.is_empty() {
                    return Err(error("expected rbps=, wbps=, riops= or wiops=".into()));
                }
                let mut max = self.max;
                for pair in text.split_whitespace() {
                    let Some((key, number)) = pair.split_once('=') else {
                        return Err(error(format!(
                            "{} is not KEY=VALUE",
                            crate::limits::quote(pair)
                        )));
                    };
                    let limit = if number == "max" {
                        None
                    } else {
                        let n: u64 = number.parse().map_err(|_| {
                            error(format!(
                                "{}: expected a number or max",
                                crate::limits::quote(pair)
                            ))
                        })?;
                        if n == 0 {
                            return Err(error(format!(
                                "{}=0: a limit must be positive",
                                crate::limits::cut(key)
                            )));
                        }
                        Some(n)
                    };
                    match key {
                        "rbps" => max.rbps = limit,
                        "wbps" => max.wbps = limit,
                        "riops" => max.riops = limit,
                        "wiops" => max.wiops = limit,
                        other => {
                            return Err(error(format!(
                                "unknown key {} (rbps, wbps, riops, wiops)",
                                crate::limits::quote(other)
                            )))
                        }
                    }
                }
                self.max = max;
            }
            "io.prio.class" => {
                self.prio_class = match value.trim() {
                    "no-change" => PrioClassPolicy::NoChange,
                    "promote-to-rt" | "none-to-rt" => PrioClassPolicy::PromoteToRt,
                    "restrict-to-be" => PrioClassPolicy::RestrictToBe,
                    "idle" => PrioClassPolicy::Idle,
                    _ => {
                        return Err(error(
                            "expected no-change, promote-to-rt, restrict-to-be or idle".into(),
                        ))
                    }
                };
            }
            "io.latency" => {
                // iolatency_set_limit: "[MAJ:MIN] target=USEC" or "target=max".
                let text = strip_device(value);
                let Some(target) = text.strip_prefix("target=") else {
                    return Err(error(
                        "expected target=MICROSECONDS or target=max (Invalid argument)".into(),
                    ));
                };
                self.latency_target_us = match target.trim() {
                    "max" => None,
                    number => match number.parse::<u64>() {
                        Ok(0) => None,
                        Ok(us) => Some(us),
                        Err(_) => {
                            return Err(error(format!(
                                "target={}: expected microseconds or max (Invalid argument)",
                                crate::limits::cut(number)
                            )))
                        }
                    },
                };
            }
            root if ROOT_FILES.contains(&root) => {
                return Err(error(format!(
                    "{root} exists only in the root group: write it to / (--group /:{root}=...)"
                )))
            }
            qos if qos.starts_with("qos.") => {
                self.qos
                    .set(&qos["qos.".len()..], value)
                    .map_err(|e| error(e.0))?;
            }
            other => {
                return Err(SettingError {
                    file: other.to_string(),
                    value: value.to_string(),
                    reason: format!("unknown file; known: {}", SETTING_FILES.join(", ")),
                })
            }
        }
        Ok(())
    }
}

/// The table of known groups. Adding a path adds its missing ancestors first, so every group's
/// parent has a smaller id.
#[derive(Clone, Debug)]
pub struct Groups {
    entries: Vec<GroupEntry>,
    by_path: HashMap<String, GroupId>,
    /// QoS per priority level (`@be/4` ...): every request of that level is one client.
    prio_qos: std::collections::BTreeMap<crate::IoPrio, crate::qos::Qos>,
    /// The root group's `io.cost.qos` and `io.cost.model`.
    cost: crate::iocost::CostSettings,
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
                settings: GroupSettings::default(),
            }],
            by_path,
            prio_qos: std::collections::BTreeMap::new(),
            cost: crate::iocost::CostSettings::default(),
        }
    }

    /// The root group's `io.cost.qos` and `io.cost.model` (blk-iocost's settings).
    pub fn cost(&self) -> &crate::iocost::CostSettings {
        &self.cost
    }

    /// The QoS stated for priority levels (`--group @rt/0:qos.reservation=...`), by level
    /// as [`crate::qos::level_of`] names it.
    pub fn prio_qos(&self) -> impl Iterator<Item = (crate::IoPrio, crate::qos::Qos)> + '_ {
        self.prio_qos.iter().map(|(&prio, &qos)| (prio, qos))
    }

    /// Sets a priority level's `qos.*` file: `level` is `rt/0`..`rt/7`, `be/0`..`be/7` or
    /// `idle` (as after the `@` of `--group @be/4:qos.weight=2`).
    pub fn set_prio_qos(&mut self, level: &str, file: &str, value: &str) -> Result<(), String> {
        let prio = crate::qos::parse_level(level)?;
        let Some(setting) = file.strip_prefix("qos.") else {
            return Err(format!(
                "{}: a priority level has only qos.* files ({})",
                crate::limits::quote(file),
                crate::qos::QOS_SETTINGS
                    .iter()
                    .map(|s| format!("qos.{s}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        let mut qos = self.prio_qos.get(&prio).copied().unwrap_or_default();
        qos.set(setting, value)
            .map_err(|e| format!("{file}={}: {e}", crate::limits::cut(value)))?;
        self.prio_qos.insert(prio, qos);
        Ok(())
    }

    /// Normalises a path: fio's `cgroup=a/b` means "/a/b"; trailing slashes are dropped. The
    /// length and depth limits are checked here, before anything is built.
    pub fn normalize(path: &str) -> Result<String, GroupError> {
        let trimmed = path.trim();
        if trimmed.len() > GROUP_PATH_BYTES_MAX {
            return Err(GroupError::TooLong(trimmed.len()));
        }
        let mut out = String::with_capacity(trimmed.len() + 1);
        let mut depth = 0;
        for component in trimmed.split('/').filter(|c| !c.is_empty()) {
            if component == "." || component == ".." {
                return Err(GroupError::BadPath(path.to_string()));
            }
            depth += 1;
            if depth > GROUP_DEPTH_MAX {
                return Err(GroupError::TooDeep(
                    trimmed.split('/').filter(|c| !c.is_empty()).count(),
                ));
            }
            out.push('/');
            out.push_str(component);
        }
        if out.is_empty() {
            out.push('/');
        }
        Ok(out)
    }

    /// The id of `path`, adding it and its ancestors if they are new. Nothing is added when
    /// the path, or the groups it would add, break a limit.
    pub fn intern(&mut self, path: &str) -> Result<GroupId, GroupError> {
        let normalized = Self::normalize(path)?;
        if let Some(&id) = self.by_path.get(&normalized) {
            return Ok(id);
        }
        // The prefixes of the path ("/a", "/a/b", ...) that are new, found from the end.
        let mut ends: Vec<usize> = normalized
            .match_indices('/')
            .skip(1)
            .map(|(index, _)| index)
            .chain([normalized.len()])
            .collect();
        let known = ends
            .iter()
            .rposition(|&end| self.by_path.contains_key(&normalized[..end]))
            .map_or(0, |index| index + 1);
        let mut parent = match known {
            0 => GroupId::ROOT,
            count => self.by_path[&normalized[..ends[count - 1]]],
        };
        ends.drain(..known);
        if self.entries.len() + ends.len() > GROUPS_MAX {
            return Err(GroupError::TooMany);
        }
        for end in ends {
            let id = GroupId(self.entries.len() as u32);
            let depth = self.entries[parent.0 as usize].depth + 1;
            let prefix = normalized[..end].to_string();
            self.entries.push(GroupEntry {
                path: prefix.clone(),
                parent: Some(parent),
                depth,
                settings: GroupSettings::default(),
            });
            self.by_path.insert(prefix, id);
            parent = id;
        }
        Ok(parent)
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

    /// The io controller settings of `id`.
    pub fn settings(&self, id: GroupId) -> &GroupSettings {
        &self.entries[id.0 as usize].settings
    }

    /// Writes cgroup file `file` of `id` (see [`GroupSettings::set`]). The root group has
    /// only `io.cost.qos` and `io.cost.model` in cgroup v2, so writing others is refused.
    pub fn set(&mut self, id: GroupId, file: &str, value: &str) -> Result<(), SettingError> {
        if id == GroupId::ROOT && ROOT_FILES.contains(&file) {
            return self.cost.set(file, value);
        }
        if id == GroupId::ROOT {
            return Err(SettingError {
                file: file.to_string(),
                value: value.to_string(),
                reason: "the root group has no io controller files; use a child group".into(),
            });
        }
        self.entries[id.0 as usize].settings.set(file, value)
    }

    /// Applies `settings` in order, creating the groups they name; an error names the
    /// setting's origin, the group and the problem.
    pub fn apply(&mut self, settings: &[GroupSetting]) -> Result<(), String> {
        for setting in settings {
            if let Some(level) = setting.path.trim().strip_prefix('@') {
                self.set_prio_qos(level, &setting.file, &setting.value)
                    .map_err(|e| format!("{}: priority level @{level}: {e}", setting.origin))?;
                continue;
            }
            let id = self
                .intern(&setting.path)
                .map_err(|e| format!("{}: {e}", setting.origin))?;
            self.set(id, &setting.file, &setting.value).map_err(|e| {
                let path = crate::limits::cut(&setting.path);
                format!("{}: group {path}: {e}", setting.origin)
            })?;
        }
        Ok(())
    }

    /// `id` and its ancestors up to (not including) the root, nearest first.
    pub fn ancestry(&self, id: GroupId) -> impl Iterator<Item = GroupId> + '_ {
        std::iter::successors(Some(id), move |&g| self.parent(g))
            .take_while(|&g| g != GroupId::ROOT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Regression (issue 11, item 3): a path 40,000 levels deep overflowed the stack, because
    // groups were built recursively before any limit was checked. Now the depth and length are
    // refused first and nothing is added.
    #[test]
    fn deep_and_long_paths_are_refused_before_anything_is_built() {
        let mut groups = Groups::new();
        let deep = "/a".repeat(40_000);
        assert_eq!(groups.intern(&deep), Err(GroupError::TooLong(80_000)));
        let deep = "/a".repeat(GROUP_DEPTH_MAX + 1);
        assert_eq!(
            groups.intern(&deep),
            Err(GroupError::TooDeep(GROUP_DEPTH_MAX + 1))
        );
        assert_eq!(groups.len(), 1);
        let deepest = "/a".repeat(GROUP_DEPTH_MAX);
        let id = groups.intern(&deepest).unwrap();
        assert_eq!(groups.depth(id) as usize, GROUP_DEPTH_MAX);
        assert_eq!(groups.len(), GROUP_DEPTH_MAX + 1);
        let error = Groups::new().intern(&"/a".repeat(40_000)).unwrap_err();
        assert!(error.to_string().contains("limit is 4096"), "{error}");
    }

    // Proves the group count is checked before a path's new ancestors are added.
    #[test]
    fn too_many_groups_adds_nothing() {
        let mut groups = Groups::new();
        for index in 0..GROUPS_MAX - 2 {
            groups.intern(&format!("/g{index}")).unwrap();
        }
        assert_eq!(groups.len(), GROUPS_MAX - 1);
        assert_eq!(groups.intern("/x/y"), Err(GroupError::TooMany));
        assert_eq!(groups.len(), GROUPS_MAX - 1);
        assert!(groups.get("/x").is_none());
        groups.intern("/x").unwrap();
        assert_eq!(groups.len(), GROUPS_MAX);
    }

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
        assert_eq!(groups.ancestry(ab).collect::<Vec<_>>(), vec![ab, a]);
    }

    // Proves the io controller files take Linux's syntax and refuse what Linux refuses, naming
    // the file and the problem.
    #[test]
    fn cgroup_files_parse_as_linux() {
        let mut s = GroupSettings::default();
        assert_eq!(s.weight, 100);
        s.set("io.weight", "500").unwrap();
        assert_eq!(s.weight, 500);
        s.set("io.weight", "default 250").unwrap();
        assert_eq!(s.weight, 250);
        s.set("io.weight", "8:16 300").unwrap();
        assert_eq!(s.weight, 300);
        for bad in ["0", "10001", "-5", "heavy"] {
            let error = s.set("io.weight", bad).unwrap_err();
            assert!(error.to_string().contains("io.weight"), "{error}");
        }
        s.set("io.max", "8:16 rbps=2097152 wiops=120").unwrap();
        assert_eq!(s.max.rbps, Some(2_097_152));
        assert_eq!(s.max.wiops, Some(120));
        s.set("io.max", "rbps=max").unwrap();
        assert_eq!(s.max.rbps, None);
        assert_eq!(s.max.wiops, Some(120), "other limits are kept");
        assert!(s.set("io.max", "rbps=0").is_err());
        assert!(s
            .set("io.max", "speed=1")
            .unwrap_err()
            .reason
            .contains("unknown key"));
        s.set("io.prio.class", "idle").unwrap();
        assert_eq!(s.prio_class, PrioClassPolicy::Idle);
        assert!(s.set("io.prio.class", "fast").is_err());
        assert!(s
            .set("io.nosuch", "1")
            .unwrap_err()
            .reason
            .contains("unknown file"));
        let mut groups = Groups::new();
        assert!(groups.set(GroupId::ROOT, "io.weight", "200").is_err());
    }

    // Proves io.prio.class changes priorities as blk-ioprio does.
    #[test]
    fn prio_class_policies() {
        use crate::ioprio::{IoPrio, IoPrioClass};
        let be2 = IoPrio::new(IoPrioClass::Be, 2).unwrap();
        let rt1 = IoPrio::new(IoPrioClass::Rt, 1).unwrap();
        let idle = IoPrio::new(IoPrioClass::Idle, 0).unwrap();
        assert_eq!(PrioClassPolicy::NoChange.apply(be2), be2);
        assert_eq!(
            PrioClassPolicy::PromoteToRt.apply(be2),
            IoPrio::new(IoPrioClass::Rt, 4).unwrap()
        );
        assert_eq!(PrioClassPolicy::PromoteToRt.apply(rt1), rt1);
        // blkcg_set_ioprio's max_t: RT level 1 is a smaller raw value than BE level 0.
        assert_eq!(
            PrioClassPolicy::RestrictToBe.apply(rt1),
            IoPrio::new(IoPrioClass::Be, 0).unwrap()
        );
        assert_eq!(PrioClassPolicy::RestrictToBe.apply(be2), be2);
        assert_eq!(
            PrioClassPolicy::RestrictToBe.apply(IoPrio::NONE),
            IoPrio::new(IoPrioClass::Be, 4).unwrap()
        );
        assert_eq!(PrioClassPolicy::RestrictToBe.apply(idle), idle);
        assert_eq!(PrioClassPolicy::Idle.apply(rt1), idle);
        let idle5 = IoPrio::new(IoPrioClass::Idle, 5).unwrap();
        assert_eq!(PrioClassPolicy::Idle.apply(idle5), idle5);
    }
}

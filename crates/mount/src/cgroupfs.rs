//! The real cgroups' io controller files, read so that a mount follows what an administrator
//! wrote there (`echo 300 > /sys/fs/cgroup/db/io.weight`), as the kernel's schedulers do.
//!
//! For a cgroup path, the settings are read from the cgroup v2 hierarchy (wherever
//! `cgroup2` is mounted): `io.weight` (or bfq's `io.bfq.weight` where the kernel has no
//! `io.weight`), `io.max` and `io.prio.class`; on a hybrid system whose io controller is
//! v1's `blkio`, from `blkio.bfq.weight` (or `blkio.weight`). A file's line for the backing
//! device (`MAJ:MIN ...`) wins over its `default` line, as in the kernel. A file that is
//! missing or unreadable gives nothing; a value our groups refuse is skipped with a warning.
//! The settings given on the command line are applied after these, so they win.

use iosched_core::group::GroupSetting;
use std::path::{Path, PathBuf};

/// Where the hierarchies are mounted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hierarchies {
    /// The cgroup v2 mount.
    pub v2: Option<PathBuf>,
    /// The v1 mount carrying the `blkio` controller.
    pub blkio: Option<PathBuf>,
}

impl Hierarchies {
    /// Reads the mounts from `/proc/self/mounts`.
    pub fn find() -> Self {
        std::fs::read_to_string("/proc/self/mounts")
            .map(|text| Self::parse(&text))
            .unwrap_or_default()
    }

    /// Finds the hierarchies in a mounts table.
    pub fn parse(mounts: &str) -> Self {
        let mut found = Hierarchies::default();
        for line in mounts.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [_, dir, fstype, options, ..] = fields[..] else {
                continue;
            };
            let dir = PathBuf::from(unescape(dir));
            if fstype == "cgroup2" && found.v2.is_none() {
                found.v2 = Some(dir);
            } else if fstype == "cgroup"
                && options.split(',').any(|o| o == "blkio")
                && found.blkio.is_none()
            {
                found.blkio = Some(dir);
            }
        }
        found
    }

    /// The settings cgroup `path` has in the kernel's files, for device `dev` (`MAJ:MIN`).
    pub fn settings(&self, path: &str, dev: &str) -> Vec<GroupSetting> {
        let relative = path.trim_start_matches('/');
        let mut settings: Vec<GroupSetting> = Vec::new();
        if relative.is_empty() {
            return settings; // The root has no io files.
        }
        let add = |settings: &mut Vec<GroupSetting>, file: &str, value: String, origin: &Path| {
            settings.push(GroupSetting {
                path: path.to_string(),
                file: file.to_string(),
                value,
                origin: origin.display().to_string(),
            });
        };
        if let Some(root) = &self.v2 {
            let dir = root.join(relative);
            let weight = ["io.weight", "io.bfq.weight"]
                .iter()
                .find_map(|name| read_for(&dir.join(name), dev).map(|v| (dir.join(name), v)));
            if let Some((origin, value)) = weight {
                add(&mut settings, "io.weight", value, &origin);
            }
            let max = dir.join("io.max");
            if let Some(value) = std::fs::read_to_string(&max)
                .ok()
                .and_then(|text| device_line(&text, dev))
            {
                add(&mut settings, "io.max", value, &max);
            }
            let class = dir.join("io.prio.class");
            if let Ok(value) = std::fs::read_to_string(&class) {
                add(
                    &mut settings,
                    "io.prio.class",
                    value.trim().to_string(),
                    &class,
                );
            }
        }
        if let Some(root) = &self.blkio {
            let dir = root.join(relative);
            if !settings.iter().any(|s| s.file == "io.weight") {
                let weight = ["blkio.bfq.weight", "blkio.weight"]
                    .iter()
                    .find_map(|name| read_for(&dir.join(name), dev).map(|v| (dir.join(name), v)));
                if let Some((origin, value)) = weight {
                    add(&mut settings, "io.weight", value, &origin);
                }
            }
        }
        settings
    }
}

/// A weight file's value for `dev`: its `MAJ:MIN N` line, else its `default N` line, else
/// a lone number (v1's `blkio.weight`).
fn read_for(path: &Path, dev: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    weight_for(&text, dev)
}

/// See [`read_for`].
pub fn weight_for(text: &str, dev: &str) -> Option<String> {
    let mut default = None;
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next()) {
            (Some(key), Some(value)) if key == dev => return Some(value.to_string()),
            (Some("default"), Some(value)) => default = Some(value.to_string()),
            (Some(value), None) if value.parse::<u32>().is_ok() => default = Some(value.into()),
            _ => {}
        }
    }
    default
}

/// `io.max`'s limits for `dev` (the line `MAJ:MIN rbps=... wbps=... riops=... wiops=...`),
/// if they limit anything.
pub fn device_line(text: &str, dev: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (key, rest) = line.trim().split_once(char::is_whitespace)?;
        let rest = rest.trim();
        let limits = rest.split_whitespace().any(|pair| !pair.ends_with("=max"));
        (key == dev && limits).then(|| rest.to_string())
    })
}

/// `/proc/mounts` escapes spaces and such as octal (`\040`).
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            if let Ok(n) = u8::from_str_radix(&text[i + 1..i + 4], 8) {
                out.push(n);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `MAJ:MIN` of the device holding `path`.
pub fn device_of(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    Some(format!("{}:{}", libc::major(dev), libc::minor(dev)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hierarchies_from_a_hybrid_mount_table() {
        let mounts = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                      cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
        let found = Hierarchies::parse(mounts);
        assert_eq!(
            found.v2.as_deref(),
            Some(Path::new("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            found.blkio.as_deref(),
            Some(Path::new("/sys/fs/cgroup/blkio"))
        );
        let spaced = Hierarchies::parse("none /a\\040b cgroup2 rw 0 0\n");
        assert_eq!(spaced.v2.as_deref(), Some(Path::new("/a b")));
    }

    #[test]
    fn the_devices_line_wins_over_the_default() {
        assert_eq!(
            weight_for("default 100\n8:0 300\n", "8:0").as_deref(),
            Some("300")
        );
        assert_eq!(
            weight_for("default 100\n8:0 300\n", "8:16").as_deref(),
            Some("100")
        );
        assert_eq!(weight_for("500\n", "8:0").as_deref(), Some("500"));
        assert_eq!(weight_for("", "8:0"), None);
        let max = "8:0 rbps=1048576 wbps=max riops=max wiops=max\n8:16 rbps=max wbps=max riops=max wiops=max\n";
        assert_eq!(
            device_line(max, "8:0").as_deref(),
            Some("rbps=1048576 wbps=max riops=max wiops=max")
        );
        assert_eq!(device_line(max, "8:16"), None);
    }

    #[test]
    fn settings_are_read_from_the_files_with_their_origin() {
        let dir = tempfile::tempdir().unwrap();
        let group = dir.path().join("v2/db");
        std::fs::create_dir_all(&group).unwrap();
        std::fs::write(group.join("io.weight"), "default 100\n7:3 250\n").unwrap();
        std::fs::write(
            group.join("io.max"),
            "7:3 rbps=2097152 wbps=max riops=max wiops=max\n",
        )
        .unwrap();
        std::fs::write(group.join("io.prio.class"), "restrict-to-be\n").unwrap();
        let found = Hierarchies {
            v2: Some(dir.path().join("v2")),
            blkio: None,
        };
        let settings = found.settings("/db", "7:3");
        let files: Vec<(&str, &str)> = settings
            .iter()
            .map(|s| (s.file.as_str(), s.value.as_str()))
            .collect();
        assert_eq!(
            files,
            [
                ("io.weight", "250"),
                ("io.max", "rbps=2097152 wbps=max riops=max wiops=max"),
                ("io.prio.class", "restrict-to-be")
            ]
        );
        assert!(settings[0].origin.ends_with("v2/db/io.weight"));
        assert!(found.settings("/", "7:3").is_empty());
        assert!(found.settings("/missing", "7:3").is_empty());
    }
}

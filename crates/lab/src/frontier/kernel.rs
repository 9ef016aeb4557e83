//! Linux's own cgroup controllers (io.cost, io.latency) in the frontier's mix: fio runs the
//! foreground and the background in cgroups of their own on the cgroup v2 hierarchy, with the
//! same files, in the kernel's syntax, that iosched's stages are given
//! ([`super::runs::controller_groups`]).
//!
//! What the study touches, and how it is undone when it ends (also on failure):
//!
//! - two cgroups, `iosched-frontier-PID-fg` and `-bg`, made under the v2 root and removed;
//! - `+io` in the root's `cgroup.subtree_control`, only if it was not there, taken back after;
//! - the device's line in the root's `io.cost.model` and `io.cost.qos`, saved first and
//!   written back (a loop device the study made goes away with it anyway).
//!
//! It never moves a controller between hierarchies: where the io controller is bound to
//! cgroup v1 (`blkio`), the kernel's controllers are skipped with a note that says how to free
//! it.

use super::*;
use iosched_core::group::GroupSetting;
use iosched_mount::cgroupfs::Hierarchies;

/// The kernel controllers the study knows.
pub const KERNEL_CONTROLLERS: [&str; 2] = ["io.latency", "io.cost"];

/// Why the kernel's `controller` cannot run here, from what the machine shows: the cgroup v2
/// mount and its `cgroup.controllers` (`None` when there is no v2 mount), the v1 mount of the
/// blkio controller, and whether the controller's file exists (`io.cost.qos` in the root,
/// `io.latency` in a child with io enabled). `None` when it can run.
pub fn unavailable(
    controller: &str,
    v2: Option<(&Path, &str)>,
    v1_blkio: Option<&Path>,
    has_file: bool,
) -> Option<String> {
    let Some((root, controllers)) = v2 else {
        return Some(format!(
            "kernel {controller} skipped: no cgroup v2 hierarchy is mounted \
             (mount -t cgroup2 none /sys/fs/cgroup/unified)"
        ));
    };
    if !controllers.split_whitespace().any(|c| c == "io") {
        return Some(match v1_blkio {
            Some(blkio) => format!(
                "kernel {controller} skipped: the io controller is bound to cgroup v1 \
                 (blkio at {}); with no child groups there, `umount {}` gives it to cgroup v2 \
                 at {}",
                blkio.display(),
                blkio.display(),
                root.display()
            ),
            None => format!(
                "kernel {controller} skipped: {} does not list the io controller in \
                 cgroup.controllers",
                root.display()
            ),
        });
    }
    if !has_file {
        let option = match controller {
            "io.cost" => "CONFIG_BLK_CGROUP_IOCOST",
            _ => "CONFIG_BLK_CGROUP_IOLATENCY",
        };
        return Some(format!(
            "kernel {controller} skipped: this kernel has no {controller} files ({option})"
        ));
    }
    None
}

/// The cgroups the kernel's controllers run the mix in; undone when dropped.
pub(super) struct KernelGroups {
    root: PathBuf,
    dev: String,
    enabled_io: bool,
    /// Names under the root: the foreground's and the background's.
    pub(super) fg: String,
    pub(super) bg: String,
    created: Vec<PathBuf>,
    /// Root files and the device's line in them before the study wrote there.
    saved: std::cell::RefCell<Vec<(PathBuf, Option<String>)>>,
    /// The controllers that can run.
    pub(super) available: Vec<String>,
}

/// `MAJ:MIN` of a block device node.
fn rdev(device: &Path) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let meta =
        std::fs::metadata(device).with_context(|| format!("cannot open {}", device.display()))?;
    let rdev = meta.rdev();
    Ok(format!("{}:{}", libc::major(rdev), libc::minor(rdev)))
}

/// The line of a cgroup file that starts with `dev`, without it.
fn device_line(text: &str, dev: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (key, rest) = line.trim().split_once(char::is_whitespace)?;
        (key == dev).then(|| rest.trim().to_string())
    })
}

impl KernelGroups {
    /// Makes the two groups for `controllers` on `device`, or explains in `notes` why each
    /// cannot run. `None` when none can.
    pub(super) fn open(
        controllers: &[String],
        device: &Path,
        notes: &mut Vec<String>,
    ) -> Result<Option<KernelGroups>> {
        if controllers.is_empty() {
            return Ok(None);
        }
        let found = Hierarchies::find();
        let listed = found.v2.as_ref().map(|root| {
            let text = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            (root.clone(), text)
        });
        let v2 = listed.as_ref().map(|(r, t)| (r.as_path(), t.as_str()));
        let missing: Vec<String> = controllers
            .iter()
            .filter_map(|c| unavailable(c, v2, found.blkio.as_deref(), true))
            .collect();
        if !missing.is_empty() {
            notes.extend(missing);
            return Ok(None);
        }
        let root = listed.as_ref().expect("checked").0.clone();
        let subtree = root.join("cgroup.subtree_control");
        let enabled = std::fs::read_to_string(&subtree).unwrap_or_default();
        let mut groups = KernelGroups {
            dev: rdev(device)?,
            enabled_io: false,
            fg: format!("iosched-frontier-{}-fg", std::process::id()),
            bg: format!("iosched-frontier-{}-bg", std::process::id()),
            created: Vec::new(),
            saved: Default::default(),
            available: Vec::new(),
            root,
        };
        if !enabled.split_whitespace().any(|c| c == "io") {
            std::fs::write(&subtree, "+io")
                .with_context(|| format!("cannot enable io in {}", subtree.display()))?;
            groups.enabled_io = true;
        }
        for name in [groups.fg.clone(), groups.bg.clone()] {
            let dir = groups.root.join(&name);
            std::fs::create_dir(&dir)
                .with_context(|| format!("cannot create the cgroup {}", dir.display()))?;
            groups.created.push(dir);
        }
        for controller in controllers {
            let file = match controller.as_str() {
                "io.cost" => groups.root.join("io.cost.qos"),
                _ => groups.root.join(&groups.fg).join("io.latency"),
            };
            match unavailable(controller, v2, None, file.exists()) {
                Some(why) => notes.push(why),
                None => groups.available.push(controller.clone()),
            }
        }
        if groups.available.is_empty() {
            return Ok(None);
        }
        Ok(Some(groups))
    }

    /// The kernel file and the line to write there for one of iosched's group settings.
    fn target(&self, setting: &GroupSetting) -> (PathBuf, String) {
        let dir = match setting.path.as_str() {
            "/fg" => self.root.join(&self.fg),
            "/bg" => self.root.join(&self.bg),
            _ => self.root.clone(),
        };
        let line = match setting.file.as_str() {
            // A weight on its own is the default for every device, as cgroup v2 reads it.
            "io.weight" => format!("default {}", setting.value),
            _ => format!("{} {}", self.dev, setting.value),
        };
        (dir.join(&setting.file), line)
    }

    /// Writes `settings` (as [`super::runs::controller_groups`] gives them) into the kernel's
    /// files, saving the root's lines for the device first.
    pub(super) fn apply(&self, settings: &[GroupSetting]) -> Result<()> {
        for setting in settings {
            let (file, line) = self.target(setting);
            let mut saved = self.saved.borrow_mut();
            if setting.path == "/" && !saved.iter().any(|(f, _)| *f == file) {
                let before = std::fs::read_to_string(&file).unwrap_or_default();
                saved.push((file.clone(), device_line(&before, &self.dev)));
            }
            std::fs::write(&file, &line)
                .with_context(|| format!("the kernel refused {line:?} in {}", file.display()))?;
        }
        Ok(())
    }

    /// Turns off what `settings` turned on: io.cost's QoS and io.latency's target, so that the
    /// next run starts without them.
    pub(super) fn reset(&self, settings: &[GroupSetting]) {
        for setting in settings {
            let (file, _) = self.target(setting);
            let line = match setting.file.as_str() {
                "io.cost.qos" => format!("{} enable=0", self.dev),
                "io.latency" => format!("{} target=max", self.dev),
                _ => continue,
            };
            if let Err(error) = std::fs::write(&file, &line) {
                eprintln!(
                    "iosched frontier: cannot write {line:?} to {}: {error}",
                    file.display()
                );
            }
        }
    }
}

impl Drop for KernelGroups {
    fn drop(&mut self) {
        for (file, line) in self.saved.borrow().iter() {
            // io.cost.qos and io.cost.model print their keys in a form they accept back; a
            // device that had none goes back to the kernel's automatic settings, off.
            let line = match line {
                Some(line) => format!("{} {line}", self.dev),
                None if file.ends_with("io.cost.qos") => format!("{} enable=0 ctrl=auto", self.dev),
                None => format!("{} ctrl=auto", self.dev),
            };
            let _ = std::fs::write(file, line);
        }
        for dir in self.created.iter().rev() {
            if let Err(error) = std::fs::remove_dir(dir) {
                eprintln!(
                    "iosched frontier: cannot remove the cgroup {}: {error}",
                    dir.display()
                );
            }
        }
        if self.enabled_io {
            let _ = std::fs::write(self.root.join("cgroup.subtree_control"), "-io");
        }
    }
}

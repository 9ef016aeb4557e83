//! # iosched-mount
//!
//! Transparent mode: a FUSE passthrough mount of a backing directory whose reads, writes
//! and fsyncs go through one of iosched's policies and io_uring, so that unmodified programs
//! (a database, `dd`, system fio) are scheduled as the seeds' kernels scheduled them.
//!
//! - [`Mounted::mount`] mounts, [`Mounted::unmount`] unmounts and drains; `iosched mount`
//!   wraps them with signals and `--daemon`.
//! - Each request is classified as the kernel's block layer classifies a bio
//!   ([`classify`]): the caller's I/O priority (its `ioprio_set` value, or the one its nice
//!   level gives), its cgroup (so `--group` settings and the real cgroup's `io.weight`,
//!   `io.max` and `io.prio.class` apply, [`cgroupfs`]) and its process, whose requests form
//!   one flow, as cfq and bfq keep one queue per io context.
//! - Statistics per process and cgroup ([`stats`]) are in the mount's control directory,
//!   `MOUNTPOINT/.iosched/stats` (a table) and `stats.json`.
//!
//! # Semantics
//!
//! Files are opened in FUSE's direct I/O mode by default, so the kernel's page cache above
//! the mount does not absorb the I/O being scheduled (`cached` keeps it, for metadata-heavy
//! use). Backing files are read and written with `O_DIRECT` when a request is aligned as the
//! backing file system needs (`statx`'s `STATX_DIOALIGN`), through the page cache otherwise.
//! A write is acknowledged only when io_uring reports it done on the backing file, and an
//! fsync is an fsync of the backing file, so killing the daemon loses nothing acknowledged.
//! Metadata operations (lookup, create, rename, ...) pass through unscheduled.

#![warn(missing_docs)]

pub mod cgroupfs;
pub mod classify;
mod fs;
pub mod stats;

pub use fs::CONTROL_DIR;

use fs::{FsOptions, GroupSync, Passthrough, Shared};
use fuser::{BackgroundSession, Config, MountOption, SessionACL};
use iosched_core::group::GroupSetting;
use iosched_uring::{Scheduler, SchedulerConfig, SchedulerStats};
use std::ffi::CString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountConfig {
    /// The directory whose files are served.
    pub backing: PathBuf,
    /// Where they appear (an existing directory).
    pub mountpoint: PathBuf,
    /// The policy (or `STAGE+POLICY`).
    pub policy: String,
    /// Queue and policy tunables, by name, as text.
    pub settings: Vec<(String, String)>,
    /// Group settings given by the user; they win over the kernel's cgroup files.
    pub group_settings: Vec<GroupSetting>,
    /// Most requests in flight on the backing device.
    pub device_depth: u32,
    /// Keep the kernel's page cache above the mount (no FUSE direct I/O).
    pub cached: bool,
    /// Read and write the backing files with `O_DIRECT` where alignment allows.
    pub direct_backing: bool,
    /// Follow the real cgroups' io controller files (re-read every second).
    pub kernel_cgroups: bool,
    /// Threads reading FUSE requests.
    pub threads: usize,
}

impl MountConfig {
    /// Defaults for mounting `backing` on `mountpoint` under `policy`.
    pub fn new(backing: impl Into<PathBuf>, mountpoint: impl Into<PathBuf>, policy: &str) -> Self {
        MountConfig {
            backing: backing.into(),
            mountpoint: mountpoint.into(),
            policy: policy.into(),
            settings: Vec::new(),
            group_settings: Vec::new(),
            device_depth: iosched_uring::DEFAULT_DEVICE_DEPTH,
            cached: false,
            direct_backing: true,
            kernel_cgroups: true,
            threads: 2,
        }
    }
}

/// Why a mount failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountError(pub String);

impl fmt::Display for MountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MountError {}

/// What a mount did, when it ended.
#[derive(Debug)]
pub struct Summary {
    /// The scheduler's counters.
    pub scheduler: SchedulerStats,
    /// The flows' table, as `.iosched/stats` showed it last.
    pub stats: String,
}

/// A mounted file system.
pub struct Mounted {
    session: Option<BackgroundSession>,
    scheduler: Option<Scheduler>,
    refresher: Option<JoinHandle<()>>,
    stop_refresh: Arc<AtomicBool>,
    shared: Arc<Shared>,
    mountpoint: PathBuf,
}

/// Checks that FUSE can be used here: `/dev/fuse` opens. The error says what is missing.
pub fn fuse_available() -> Result<(), MountError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map(drop)
        .map_err(|error| {
            MountError(format!(
                "cannot open /dev/fuse: {error} (load the fuse module, or give the container \
                 the device: --device /dev/fuse --cap-add SYS_ADMIN)"
            ))
        })
}

/// Why this process cannot mount here (not root, or no usable /dev/fuse), if it cannot.
pub fn cannot_mount() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("mounting FUSE needs root".into());
    }
    fuse_available().err().map(|error| error.to_string())
}

/// Whether a file system is mounted at `path` (`/proc/self/mountinfo`).
pub fn is_mounted(path: &Path) -> bool {
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    let Some(path) = path.to_str() else {
        return false;
    };
    // The mount point is the fifth field, with spaces and such escaped as octal.
    let escaped = path
        .replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012");
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|text| {
            text.lines()
                .any(|line| line.split(' ').nth(4) == Some(escaped.as_str()))
        })
        .unwrap_or(false)
}

impl Mounted {
    /// Mounts `config.backing` on `config.mountpoint`.
    pub fn mount(config: &MountConfig) -> Result<Mounted, MountError> {
        let backing = check_dir(&config.backing, "backing directory")?;
        let mountpoint = check_dir(&config.mountpoint, "mount point")?;
        if mountpoint.starts_with(&backing) {
            return Err(MountError(format!(
                "the mount point {} is inside the backing directory {}: the mount would serve \
                 itself",
                mountpoint.display(),
                backing.display()
            )));
        }
        if config.threads == 0 {
            return Err(MountError("threads must be at least 1".into()));
        }
        fuse_available()?;
        let root = std::fs::File::open(&backing)
            .map_err(|e| MountError(format!("cannot open {}: {e}", backing.display())))?;
        let scheduler = Scheduler::start(SchedulerConfig {
            policy: config.policy.clone(),
            settings: config.settings.clone(),
            device_depth: config.device_depth,
            direct: true,
            group_settings: config.group_settings.clone(),
        })
        .map_err(|e| MountError(e.to_string()))?;
        let title = format!(
            "iosched mount {} on {}, policy {}{}",
            backing.display(),
            mountpoint.display(),
            config.policy,
            if config.cached { ", cached" } else { "" }
        );
        let shared = Arc::new(Shared::new(title, Instant::now()));
        let kernel = config.kernel_cgroups.then(|| {
            (
                cgroupfs::Hierarchies::find(),
                cgroupfs::device_of(&backing).unwrap_or_default(),
            )
        });
        let groups = Arc::new(GroupSync::new(
            config.group_settings.clone(),
            kernel,
            scheduler.client(),
        ));
        let stop_refresh = Arc::new(AtomicBool::new(false));
        let refresher = config
            .kernel_cgroups
            .then(|| {
                let (groups, stop) = (groups.clone(), stop_refresh.clone());
                std::thread::Builder::new()
                    .name("iosched-cgroups".into())
                    .spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(250));
                            groups.refresh();
                        }
                    })
            })
            .transpose()
            .map_err(|e| MountError(format!("cannot start a thread: {e}")))?;
        let fs = Passthrough::new(
            root,
            FsOptions {
                cached: config.cached,
                direct_backing: config.direct_backing,
                ttl: Duration::from_secs(1),
            },
            scheduler.client(),
            shared.clone(),
            groups,
        )
        .map_err(|e| MountError(format!("cannot read {}: {e}", backing.display())))?;
        let mut fuse = Config::default();
        fuse.mount_options = vec![
            MountOption::FSName(backing.display().to_string()),
            MountOption::Subtype("iosched".into()),
            MountOption::DefaultPermissions,
        ];
        // SAFETY: geteuid has no preconditions.
        fuse.acl = if unsafe { libc::geteuid() } == 0 {
            SessionACL::All
        } else {
            SessionACL::Owner
        };
        fuse.n_threads = Some(config.threads);
        fuse.clone_fd = config.threads > 1;
        let mut mounted = Mounted {
            session: None,
            scheduler: Some(scheduler),
            refresher,
            stop_refresh,
            shared,
            mountpoint: mountpoint.clone(),
        };
        let session = fuser::spawn_mount(fs, &mountpoint, &fuse).map_err(|error| {
            MountError(format!(
                "cannot mount on {}: {error}{}",
                mountpoint.display(),
                if error.raw_os_error() == Some(libc::EPERM) {
                    " (mounting needs root, or fusermount3 from the fuse3 package)"
                } else {
                    ""
                }
            ))
        });
        match session {
            Ok(session) => mounted.session = Some(session),
            Err(error) => {
                let _ = mounted.finish();
                return Err(error);
            }
        }
        Ok(mounted)
    }

    /// The mount point.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Whether the file system was unmounted from outside (`umount`, `fusermount -u`).
    pub fn is_finished(&self) -> bool {
        self.session
            .as_ref()
            .is_none_or(|session| session.guard.is_finished())
    }

    /// The flows' table now.
    pub fn stats(&self) -> String {
        self.shared
            .stats
            .lock()
            .map(|stats| stats.text(Instant::now()))
            .unwrap_or_default()
    }

    /// Unmounts (lazily if files are still open: the mount disappears from the tree at once
    /// and is served until the last file is closed), waits for the session to end, and
    /// completes every request in flight.
    pub fn unmount(mut self) -> Result<Summary, MountError> {
        if !self.is_finished() {
            let path = CString::new(self.mountpoint.as_os_str().as_bytes())
                .map_err(|_| MountError("the mount point has a NUL byte".into()))?;
            // SAFETY: a NUL-terminated path.
            if unsafe { libc::umount2(path.as_ptr(), 0) } != 0 {
                let error = std::io::Error::last_os_error();
                if error.raw_os_error() == Some(libc::EBUSY) {
                    eprintln!(
                        "iosched: mount: {} is busy (files are open): detached; it is served \
                         until they are closed",
                        self.mountpoint.display()
                    );
                }
                // SAFETY: as above.
                if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } != 0
                    && !self.is_finished()
                {
                    return Err(MountError(format!(
                        "cannot unmount {}: {}",
                        self.mountpoint.display(),
                        std::io::Error::last_os_error()
                    )));
                }
            }
        }
        self.finish()
    }

    fn finish(&mut self) -> Result<Summary, MountError> {
        let mut result = Ok(());
        if let Some(session) = self.session.take() {
            // Ends when the kernel has let go of the file system; dropping the session drops
            // the file system and its handles.
            if let Err(error) = session.join() {
                result = Err(MountError(format!("the FUSE session ended with: {error}")));
            }
        }
        self.stop_refresh.store(true, Ordering::Relaxed);
        if let Some(refresher) = self.refresher.take() {
            let _ = refresher.join();
        }
        let scheduler = match self.scheduler.take() {
            Some(scheduler) => scheduler
                .shutdown()
                .map_err(|e| MountError(e.to_string()))?,
            None => SchedulerStats::default(),
        };
        result?;
        Ok(Summary {
            scheduler,
            stats: self.stats(),
        })
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.session.is_some() || self.scheduler.is_some() {
            let path = CString::new(self.mountpoint.as_os_str().as_bytes()).ok();
            if let (Some(path), false) = (path, self.is_finished()) {
                // SAFETY: a NUL-terminated path.
                unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
            }
            let _ = self.finish();
        }
    }
}

fn check_dir(path: &Path, what: &str) -> Result<PathBuf, MountError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| MountError(format!("{what} {}: {e}", path.display())))?;
    if !meta.is_dir() {
        return Err(MountError(format!(
            "{what} {} is not a directory",
            path.display()
        )));
    }
    path.canonicalize()
        .map_err(|e| MountError(format!("{what} {}: {e}", path.display())))
}

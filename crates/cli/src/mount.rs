//! `iosched mount` (transparent mode: a FUSE passthrough mount scheduled by a policy) and
//! `iosched top` (its flows, live).

use crate::run::parse_setting;
use anyhow::{bail, Context, Result};
use clap::Args;
use iosched_lab::setup::{parse_group_flag, read_groups_file};
use iosched_mount::{MountConfig, Mounted, CONTROL_DIR};
use iosched_sim::GroupSetting;
use std::io::{IsTerminal, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `iosched mount`'s options.
#[derive(Args, Clone, Debug)]
pub struct MountArgs {
    /// The directory whose files are served (its files are read and written in place).
    pub backing: PathBuf,
    /// Where they appear: an existing directory, outside the backing directory.
    pub mountpoint: PathBuf,
    /// Scheduling policy (see `iosched policies`), or STAGE+POLICY.
    #[arg(long, default_value = "deadline")]
    pub policy: String,
    /// Set a queue or policy tunable (repeatable): --set slice_idle=0
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_setting)]
    pub settings: Vec<(String, String)>,
    /// Write a cgroup io controller file (repeatable), for the real cgroup of that path:
    /// --group /batch:io.weight=100. These win over the cgroup's own files.
    #[arg(long = "group", value_name = "PATH:FILE=VALUE", value_parser = parse_group_flag)]
    pub groups: Vec<GroupSetting>,
    /// Read group settings from a file: one `PATH FILE VALUE` per line, `#` comments.
    #[arg(long = "groups", value_name = "FILE")]
    pub groups_file: Option<PathBuf>,
    /// Most requests in flight on the backing device.
    #[arg(long, default_value_t = iosched_uring::DEFAULT_DEVICE_DEPTH)]
    pub device_depth: u32,
    /// Keep the kernel's page cache above the mount (for metadata-heavy use, and programs
    /// that mmap files): reads it holds are not scheduled, and writes to mapped pages reach
    /// the mount later from the kernel's writeback (write(2) still goes through at once).
    #[arg(long)]
    pub cached: bool,
    /// Read and write the backing files through the page cache even when a request is
    /// aligned for O_DIRECT.
    #[arg(long)]
    pub buffered_backing: bool,
    /// Do not read the real cgroups' io.weight, io.max and io.prio.class files; only --group
    /// settings apply.
    #[arg(long)]
    pub ignore_cgroup_files: bool,
    /// Threads reading FUSE requests.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Go to the background once mounted (the command returns when the mount is ready, or
    /// with the error); stop it with SIGTERM or umount.
    #[arg(long)]
    pub daemon: bool,
}

/// `iosched top`'s options.
#[derive(Args, Clone, Debug)]
pub struct TopArgs {
    /// The mount point of an `iosched mount`.
    pub mountpoint: PathBuf,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Print once and exit.
    #[arg(long)]
    pub once: bool,
    /// Print the statistics as JSON (once).
    #[arg(long)]
    pub json: bool,
}

/// `iosched mount`: mounts, serves until SIGINT, SIGTERM or an unmount, then unmounts
/// cleanly (lazily when files are open) and completes every request in flight; a second
/// signal ends the process at once.
pub fn mount(args: MountArgs) -> Result<ExitCode> {
    let mut group_settings = match &args.groups_file {
        Some(path) => read_groups_file(path)?,
        None => Vec::new(),
    };
    group_settings.extend(args.groups.iter().cloned());
    // Checked before going to the background, so that errors reach the terminal.
    let mut groups = iosched_core::Groups::new();
    groups.apply(&group_settings).map_err(anyhow::Error::msg)?;
    iosched_core::policies::Stack::parse(&args.policy)?;
    let config = MountConfig {
        settings: args.settings.clone(),
        group_settings,
        device_depth: args.device_depth,
        cached: args.cached,
        direct_backing: !args.buffered_backing,
        kernel_cgroups: !args.ignore_cgroup_files,
        threads: args.threads,
        ..MountConfig::new(&args.backing, &args.mountpoint, &args.policy)
    };
    let ready = if args.daemon {
        Some(daemonize()?)
    } else {
        None
    };
    let mounted = match Mounted::mount(&config) {
        Ok(mounted) => mounted,
        Err(error) => {
            if let Some(mut ready) = ready {
                let _ = write!(ready, "{error}");
                std::process::exit(1);
            }
            bail!(error);
        }
    };
    // The first SIGINT or SIGTERM unmounts; a second ends the process at once (a mount with
    // files open is served until they are closed, which may be never).
    let stop = Arc::new(AtomicUsize::new(0));
    crate::run::catch_stop_signals(&stop)?;
    let banner = format!(
        "iosched: mounted {} on {} under {} (statistics: {}/{CONTROL_DIR}/stats, iosched top {})",
        args.backing.display(),
        mounted.mountpoint().display(),
        args.policy,
        mounted.mountpoint().display(),
        mounted.mountpoint().display(),
    );
    match ready {
        Some(mut ready) => {
            let _ = writeln!(ready, "ok {banner}");
            drop(ready);
            detach_stdio();
            // A daemon's working directory would keep its file system busy.
            let _ = std::env::set_current_dir("/");
        }
        None => eprintln!("{banner}"),
    }
    while stop.load(Ordering::Relaxed) == 0 && !mounted.is_finished() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let signal = stop.load(Ordering::Relaxed);
    if signal != 0 {
        eprintln!(
            "iosched: {}: unmounting {} (if files are open, it is detached and served until \
             they are closed; a second signal stops at once)",
            iosched_uring::engine::signal_name(signal as i32),
            mounted.mountpoint().display()
        );
    }
    let summary = mounted.unmount()?;
    eprintln!(
        "iosched: unmounted: {} requests completed ({} failed)\n{}",
        summary.scheduler.completed, summary.scheduler.errors, summary.stats
    );
    Ok(ExitCode::SUCCESS)
}

/// Forks; the parent waits for the child's word (`ok ...` or an error) and exits with it.
/// The child leaves the session and returns the pipe to write the word to.
fn daemonize() -> Result<std::fs::File> {
    let mut fds = [0; 2];
    // SAFETY: a valid two-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        bail!("cannot create a pipe: {}", std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors we own.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: no other thread runs yet (the command has started none), so the child may go
    // on with Rust's runtime.
    match unsafe { libc::fork() } {
        -1 => bail!("cannot fork: {}", std::io::Error::last_os_error()),
        0 => {
            drop(read);
            // SAFETY: no preconditions.
            unsafe { libc::setsid() };
            Ok(std::fs::File::from(write))
        }
        child => {
            drop(write);
            let mut word = String::new();
            let _ = std::fs::File::from(read).read_to_string(&mut word);
            match word.strip_prefix("ok ") {
                Some(banner) => {
                    eprintln!("{} (daemon, pid {child})", banner.trim_end());
                    std::process::exit(0);
                }
                None if word.is_empty() => bail!("the daemon died before mounting"),
                None => bail!(word),
            }
        }
    }
}

/// A daemon's standard streams go to /dev/null.
fn detach_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        use std::os::fd::AsRawFd;
        for fd in 0..3 {
            // SAFETY: duplicating an open descriptor over a standard one.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}

/// `iosched top`: the flows of a mount, refreshed.
pub fn top(args: TopArgs) -> Result<ExitCode> {
    if !(args.interval.is_finite() && args.interval > 0.0 && args.interval <= 3600.0) {
        bail!(
            "--interval {}: expected seconds in (0, 3600]",
            args.interval
        );
    }
    let path = args.mountpoint.join(CONTROL_DIR).join("stats.json");
    let read = || -> Result<serde_json::Value> {
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "{} is not an iosched mount (cannot read {})",
                args.mountpoint.display(),
                path.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&read()?)?);
        return Ok(ExitCode::SUCCESS);
    }
    let tty = std::io::stdout().is_terminal();
    loop {
        let table = iosched_mount::stats::render(&read()?);
        let mut out = std::io::stdout().lock();
        if tty && !args.once {
            write!(out, "\x1b[H\x1b[2J")?;
        }
        write!(out, "{table}")?;
        out.flush()?;
        if args.once {
            return Ok(ExitCode::SUCCESS);
        }
        drop(out);
        std::thread::sleep(Duration::from_secs_f64(args.interval));
        if !tty {
            println!();
        }
    }
}

//! The device under study: a loop device over a file of random data (or the block device given),
//! its scheduler in sysfs, and undoing all of it at the end.

use super::*;

/// Whether the process runs as root (effective uid 0).
pub(super) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

pub(super) fn command_output(program: &str, args: &[&str]) -> Result<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !output.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// The device, its scheduler file, and what to undo at the end.
pub(super) struct Setup {
    pub(super) device: PathBuf,
    pub(super) scheduler_file: PathBuf,
    pub(super) original_scheduler: Option<String>,
    pub(super) loop_device: bool,
    pub(super) remove_file: Option<PathBuf>,
    pub(super) description: String,
}

impl Setup {
    pub(super) fn new(args: &Options, progress: &dyn Progress) -> Result<Setup> {
        let (device, loop_device, remove_file, description) = match &args.device {
            Some(device) => {
                use std::os::unix::fs::FileTypeExt;
                let meta = std::fs::metadata(device)
                    .with_context(|| format!("cannot open {}", device.display()))?;
                if !meta.file_type().is_block_device() {
                    bail!("{} is not a block device", device.display());
                }
                (
                    device.clone(),
                    false,
                    None,
                    format!("{} (only read)", device.display()),
                )
            }
            None => {
                let created = prepare_file(&args.file, args.size_mib, progress)?;
                let remove = (created && !args.keep_file).then(|| args.file.clone());
                let path = args.file.to_str().context("the file's path is not UTF-8")?;
                let device =
                    match command_output("losetup", &["-f", "--show", "--direct-io=on", path]) {
                        Ok(device) => device,
                        Err(error) => {
                            if let Some(file) = &remove {
                                let _ = std::fs::remove_file(file);
                            }
                            return Err(error.context("cannot set up the loop device"));
                        }
                    };
                progress.note(&format!(
                    "{device} over {} (if interrupted hard: losetup -d {device})",
                    args.file.display()
                ));
                (
                    PathBuf::from(&device),
                    true,
                    remove,
                    format!(
                        "{device}, a loop device (direct-io) over {} ({} MiB)",
                        args.file.display(),
                        args.size_mib
                    ),
                )
            }
        };
        // Built first, so that the loop device and the file are undone if what follows fails.
        let mut setup = Setup {
            scheduler_file: PathBuf::new(),
            device,
            original_scheduler: None,
            loop_device,
            remove_file,
            description,
        };
        setup.scheduler_file = scheduler_file(&setup.device)?;
        setup.original_scheduler = setup.current_scheduler().ok();
        Ok(setup)
    }

    pub(super) fn schedulers(&self) -> Result<String> {
        std::fs::read_to_string(&self.scheduler_file)
            .with_context(|| format!("cannot read {}", self.scheduler_file.display()))
    }

    pub(super) fn current_scheduler(&self) -> Result<String> {
        let text = self.schedulers()?;
        text.split_whitespace()
            .find(|s| s.starts_with('['))
            .map(|s| s.trim_matches(['[', ']']).to_string())
            .context("no scheduler is selected")
    }

    /// Whether the device offers `name`, loading its module if needed.
    pub(super) fn offers(&self, name: &str) -> Result<bool> {
        let listed = |text: String| {
            text.split_whitespace()
                .any(|s| s.trim_matches(['[', ']']) == name)
        };
        if listed(self.schedulers()?) {
            return Ok(true);
        }
        let module = match name {
            "kyber" => "kyber-iosched",
            other => other,
        };
        let _ = Command::new("modprobe").arg(module).output();
        Ok(listed(self.schedulers()?))
    }

    /// The device's queue depth: `nr_requests` while the scheduler is none.
    pub(super) fn queue_depth(&self) -> Result<u32> {
        let file = self.scheduler_file.with_file_name("nr_requests");
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        text.trim()
            .parse()
            .with_context(|| format!("{} holds {text:?}", file.display()))
    }

    pub(super) fn select(&self, name: &str) -> Result<()> {
        std::fs::write(&self.scheduler_file, name).with_context(|| {
            format!(
                "cannot select scheduler {name} in {}",
                self.scheduler_file.display()
            )
        })?;
        let now = self.current_scheduler()?;
        if now != name {
            bail!(
                "{} selects {now}, not {name}",
                self.scheduler_file.display()
            );
        }
        Ok(())
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(original) = &self.original_scheduler {
            let _ = std::fs::write(&self.scheduler_file, original);
        }
        if self.loop_device {
            if let Err(error) = command_output("losetup", &["-d", &self.device.to_string_lossy()]) {
                eprintln!("iosched frontier: {error}");
            }
        }
        if let Some(file) = &self.remove_file {
            if let Err(error) = std::fs::remove_file(file) {
                eprintln!(
                    "iosched frontier: cannot remove {}: {error}",
                    file.display()
                );
            }
        }
    }
}

/// `/sys/class/block/NAME/queue/scheduler`, or the parent disk's for a partition.
pub(super) fn scheduler_file(device: &Path) -> Result<PathBuf> {
    let real = std::fs::canonicalize(device)
        .with_context(|| format!("cannot resolve {}", device.display()))?;
    let name = real
        .file_name()
        .context("a device path without a name")?
        .to_string_lossy()
        .to_string();
    let class = Path::new("/sys/class/block").join(&name);
    for candidate in [
        class.join("queue/scheduler"),
        class.join("../queue/scheduler"),
    ] {
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    bail!("{} has no queue/scheduler in sysfs", device.display())
}

/// Creates `path` of `size_mib` MiB filled with random data, unless it is already there and
/// fully allocated (reads of holes never reach the device). Returns whether it was created.
pub(super) fn prepare_file(path: &Path, size_mib: u64, progress: &dyn Progress) -> Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let bytes = size_mib << 20;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.len() == bytes && meta.blocks() * 512 >= bytes {
            return Ok(false);
        }
    }
    progress.note(&format!(
        "writing {} MiB of random data to {}",
        size_mib,
        path.display()
    ));
    let mut file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut chunk = vec![0u8; 1 << 20];
    for index in 0..size_mib {
        iosched_uring::buffer::fill_pattern(&mut chunk, index.wrapping_mul(0x9e37_79b9) + 1);
        file.write_all(&chunk)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    file.sync_all()
        .with_context(|| format!("cannot sync {}", path.display()))?;
    Ok(true)
}

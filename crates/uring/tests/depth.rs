//! The real engine's device depth: as set, else the block device's own queue depth, else 32.
//! The loop-device case needs root and losetup; without them it says so and passes.

use iosched_fio::parse::parse_str;
use iosched_uring::{device_depth, UringConfig, DEFAULT_DEVICE_DEPTH};
use std::io::Write;
use std::path::Path;
use std::process::Command;

fn job_on(paths: &[&Path]) -> iosched_fio::JobFile {
    let mut text = String::from("[global]\nrw=randread\nbs=4k\nsize=1m\n");
    for (index, path) in paths.iter().enumerate() {
        text.push_str(&format!("[job{index}]\nfilename={}\n", path.display()));
    }
    parse_str(&text, "t.fio", Path::new("."), &|_| None).unwrap()
}

/// A loop device over a file, detached when dropped.
struct Loop(String);

impl Loop {
    fn attach(backing: &Path) -> Option<Loop> {
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(backing)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| Loop(String::from_utf8_lossy(&out.stdout).trim().to_string()))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

#[test]
fn a_set_depth_is_kept_and_files_get_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::write(&data, vec![0u8; 1 << 20]).unwrap();
    let file = job_on(&[&data]);
    let config = UringConfig::default();
    assert_eq!(device_depth(&config, &file), DEFAULT_DEVICE_DEPTH);
    for (set, used) in [
        (7, 7),
        (0, 1),
        (u32::MAX, iosched_core::limits::IODEPTH_MAX),
    ] {
        let config = UringConfig {
            device_depth: Some(set),
            ..UringConfig::default()
        };
        assert_eq!(device_depth(&config, &file), used, "--device-depth {set}");
    }
}

#[test]
fn a_block_device_gives_its_own_queue_depth() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("backing");
    std::fs::write(&backing, vec![0u8; 4 << 20]).unwrap();
    let Some(device) = Loop::attach(&backing) else {
        let _ = writeln!(
            std::io::stderr(),
            "\n*** a_block_device_gives_its_own_queue_depth: SKIPPED: no loop device (needs root and losetup) ***\n"
        );
        return;
    };
    let name = Path::new(&device.0)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let tags: u32 = std::fs::read_to_string(format!("/sys/block/{name}/mq/0/nr_tags"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let config = UringConfig::default();
    let on_device = job_on(&[Path::new(&device.0)]);
    assert_eq!(device_depth(&config, &on_device), tags);
    // --filename names the device for every job.
    let elsewhere = job_on(&[&backing]);
    let config_filename = UringConfig {
        filename: Some(device.0.clone().into()),
        ..UringConfig::default()
    };
    assert_eq!(device_depth(&config_filename, &elsewhere), tags);
    // A job on a regular file beside it: the device's depth is not the run's.
    let mixed = job_on(&[Path::new(&device.0), &backing]);
    assert_eq!(device_depth(&config, &mixed), DEFAULT_DEVICE_DEPTH);
}

//! The mount end to end: real FUSE mounts of a temporary directory (they need root and
//! /dev/fuse; where either is missing each test says so on the terminal and passes without
//! running, never silently).

use iosched_core::{IoPrio, IoPrioClass};
use iosched_mount::{MountConfig, Mounted, CONTROL_DIR};
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Mount tests one at a time: the weight test measures shares, which other mounts' work on
/// the same CPUs would disturb.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Says on the terminal (past the test harness's capture) why a test did not run.
fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "\n*** {test}: SKIPPED: {why} ***\n");
}

/// Whether mounts can be made here; if not, says why.
fn can_mount(test: &str) -> bool {
    match iosched_mount::cannot_mount() {
        Some(why) => {
            skip(test, &why);
            false
        }
        None => true,
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    backing: PathBuf,
    mnt: PathBuf,
}

fn fixture() -> Fixture {
    // Under the target directory: on the same file system as a checkout, which does
    // O_DIRECT (a tmpfs /tmp would not).
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tempfile::tempdir_in(base).unwrap();
    let backing = dir.path().join("backing");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&backing).unwrap();
    fs::create_dir(&mnt).unwrap();
    Fixture {
        _dir: dir,
        backing,
        mnt,
    }
}

fn mount(fixture: &Fixture, policy: &str) -> Mounted {
    let mut config = MountConfig::new(&fixture.backing, &fixture.mnt, policy);
    config.device_depth = 8;
    Mounted::mount(&config).unwrap()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn files_read_and_write_through_the_mount_as_on_the_backing_directory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_mount("files_read_and_write_through_the_mount") {
        return;
    }
    let f = fixture();
    let mounted = mount(&f, "deadline");
    // Unaligned sizes and offsets go through the page cache, aligned ones with O_DIRECT.
    let odd = pattern(1_048_576 + 17, 1);
    fs::write(f.mnt.join("odd"), &odd).unwrap();
    assert_eq!(fs::read(f.backing.join("odd")).unwrap(), odd);
    assert_eq!(fs::read(f.mnt.join("odd")).unwrap(), odd);
    // A read across the end of the file is short, as read(2) is.
    let file = fs::File::open(f.mnt.join("odd")).unwrap();
    let mut buf = vec![0u8; 8192];
    let n = file.read_at(&mut buf, odd.len() as u64 - 100).unwrap();
    assert_eq!(&buf[..n], &odd[odd.len() - 100..]);
    assert_eq!(file.read_at(&mut buf, odd.len() as u64 + 4096).unwrap(), 0);
    // An aligned O_DIRECT writer and reader through the mount.
    let mut direct = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(f.mnt.join("direct"))
        .unwrap();
    let block = iosched_uring::AlignedBuf::from_slice(&pattern(65536, 7));
    direct.write_all(&block).unwrap();
    direct.sync_all().unwrap();
    let mut back = iosched_uring::AlignedBuf::zeroed(65536);
    direct.seek(SeekFrom::Start(0)).unwrap();
    direct.read_exact(&mut back).unwrap();
    assert_eq!(&back[..], &block[..]);
    drop((file, direct));
    // Metadata passes through: directories, renames, links, truncation, modes.
    fs::create_dir(f.mnt.join("d")).unwrap();
    fs::rename(f.mnt.join("odd"), f.mnt.join("d/renamed")).unwrap();
    assert!(f.backing.join("d/renamed").exists());
    std::os::unix::fs::symlink("renamed", f.mnt.join("d/link")).unwrap();
    assert_eq!(
        fs::read_link(f.mnt.join("d/link")).unwrap(),
        Path::new("renamed")
    );
    assert_eq!(fs::read(f.mnt.join("d/link")).unwrap().len(), odd.len());
    fs::hard_link(f.mnt.join("d/renamed"), f.mnt.join("hard")).unwrap();
    assert_eq!(
        fs::metadata(f.backing.join("hard")).unwrap().len(),
        odd.len() as u64
    );
    OpenOptions::new()
        .write(true)
        .open(f.mnt.join("hard"))
        .unwrap()
        .set_len(100)
        .unwrap();
    assert_eq!(
        fs::metadata(f.backing.join("d/renamed")).unwrap().len(),
        100
    );
    fs::set_permissions(f.mnt.join("hard"), fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        fs::metadata(f.backing.join("hard"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let mut names: Vec<String> = fs::read_dir(&f.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [CONTROL_DIR, "d", "direct", "hard"]);
    fs::remove_file(f.mnt.join("hard")).unwrap();
    fs::remove_file(f.mnt.join("d/link")).unwrap();
    fs::remove_file(f.mnt.join("d/renamed")).unwrap();
    fs::remove_dir(f.mnt.join("d")).unwrap();
    assert!(!f.backing.join("d").exists());
    // Extended attributes pass through.
    let on = |path: &Path| std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let (mounted_file, backing_file) = (on(&f.mnt.join("direct")), on(&f.backing.join("direct")));
    // SAFETY: NUL-terminated paths and names, buffers as long as said.
    unsafe {
        let value = b"scheduled";
        assert_eq!(
            libc::setxattr(
                mounted_file.as_ptr(),
                c"user.iosched".as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0
            ),
            0,
            "{}",
            std::io::Error::last_os_error()
        );
        let mut buf = [0u8; 64];
        let n = libc::getxattr(
            backing_file.as_ptr(),
            c"user.iosched".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        );
        assert_eq!(&buf[..n as usize], value);
        let size = libc::getxattr(
            mounted_file.as_ptr(),
            c"user.iosched".as_ptr(),
            std::ptr::null_mut(),
            0,
        );
        assert_eq!(size, value.len() as isize);
        let n = libc::listxattr(mounted_file.as_ptr(), buf.as_mut_ptr().cast(), buf.len());
        assert!(buf[..n as usize]
            .split(|&b| b == 0)
            .any(|name| name == b"user.iosched"));
        assert_eq!(
            libc::removexattr(mounted_file.as_ptr(), c"user.iosched".as_ptr()),
            0
        );
        let gone = libc::getxattr(
            backing_file.as_ptr(),
            c"user.iosched".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        );
        assert_eq!(gone, -1);
    }
    // The control directory cannot be written, removed or replaced.
    assert!(fs::write(f.mnt.join(CONTROL_DIR).join("stats"), "x").is_err());
    assert!(fs::remove_dir(f.mnt.join(CONTROL_DIR)).is_err());
    assert!(fs::create_dir(f.mnt.join(CONTROL_DIR)).is_err());
    // This process's requests are one flow in the statistics.
    let stats: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(f.mnt.join(CONTROL_DIR).join("stats.json")).unwrap(),
    )
    .unwrap();
    let own = stats["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|flow| flow["pid"] == std::process::id())
        .expect("this process is a flow");
    assert!(own["write"]["ios"].as_u64().unwrap() >= 2);
    assert!(own["read"]["bytes"].as_u64().unwrap() >= odd.len() as u64);
    assert!(own["fsync"]["ios"].as_u64().unwrap() >= 1);
    let summary = mounted.unmount().unwrap();
    assert!(summary.scheduler.completed > 0);
    assert_eq!(summary.scheduler.errors, 0);
    assert!(!is_mounted(&f.mnt));
}

fn is_mounted(path: &Path) -> bool {
    iosched_mount::is_mounted(path)
}

/// Runs `program` with `args` at I/O priority `prio` (set in the child before exec), in the
/// cgroup `procs` names (a `cgroup.procs` file) if any.
fn spawn_as(
    program: &str,
    args: &[&str],
    prio: Option<IoPrio>,
    procs: Option<PathBuf>,
) -> std::process::Child {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    // SAFETY: the closure only makes system calls (and writes a file) before exec.
    unsafe {
        command.pre_exec(move || {
            if let Some(prio) = prio {
                if libc::syscall(libc::SYS_ioprio_set, 1, 0, prio.to_raw() as libc::c_long) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(procs) = &procs {
                fs::write(procs, std::process::id().to_string())?;
            }
            Ok(())
        });
    }
    command.spawn().unwrap()
}

fn flows(mnt: &Path) -> Vec<serde_json::Value> {
    let text = fs::read_to_string(mnt.join(CONTROL_DIR).join("stats.json")).unwrap();
    let stats: serde_json::Value = serde_json::from_str(&text).unwrap();
    stats["flows"].as_array().unwrap().clone()
}

#[test]
fn requests_carry_their_callers_priority_and_process() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_mount("requests_carry_their_callers_priority_and_process") {
        return;
    }
    let f = fixture();
    fs::write(f.backing.join("data"), pattern(4 << 20, 3)).unwrap();
    let mounted = mount(&f, "bfq");
    let data = f.mnt.join("data");
    let data = data.to_str().unwrap();
    let idle = IoPrio::new(IoPrioClass::Idle, 0).unwrap();
    let rt = IoPrio::new(IoPrioClass::Rt, 2).unwrap();
    let mut children = Vec::new();
    for prio in [Some(idle), Some(rt), None] {
        children.push((prio, spawn_as("cat", &[data], prio, None)));
    }
    let mut pids = Vec::new();
    for (prio, mut child) in children {
        assert!(child.wait().unwrap().success());
        pids.push((prio, child.id()));
    }
    let flows = flows(&f.mnt);
    for (prio, pid) in pids {
        let flow = flows
            .iter()
            .find(|flow| flow["pid"] == pid)
            .unwrap_or_else(|| panic!("no flow for pid {pid}: {flows:?}"));
        assert_eq!(
            flow["read"]["bytes"],
            4 << 20,
            "each process is its own flow"
        );
        let want = match prio {
            Some(prio) if prio.class() == IoPrioClass::Idle => "idle".to_string(),
            Some(prio) => format!("rt/{}", prio.level()),
            // No ioprio set: the kernel's rule from nice 0 gives best effort 4.
            None => "be/4".to_string(),
        };
        assert_eq!(flow["prio"], want.as_str());
    }
    mounted.unmount().unwrap();
}

/// Where a test may create two cgroups whose weight our mount reads: the v2 hierarchy when
/// it has the io controller, else v1's blkio (bfq's `blkio.bfq.weight`).
fn weighted_cgroups() -> Option<(PathBuf, &'static str)> {
    let found = iosched_mount::cgroupfs::Hierarchies::find();
    if let Some(v2) = &found.v2 {
        let controllers = fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
        if controllers.split_whitespace().any(|c| c == "io") {
            let _ = fs::write(v2.join("cgroup.subtree_control"), "+io");
            return Some((v2.clone(), "io.weight"));
        }
    }
    found.blkio.map(|blkio| (blkio, "blkio.bfq.weight"))
}

/// Kills every process in cgroup `dir` until none is left.
fn empty_cgroup(dir: &Path) {
    let start = Instant::now();
    loop {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        if procs.trim().is_empty() || start.elapsed() > Duration::from_secs(20) {
            return;
        }
        for pid in procs
            .lines()
            .filter_map(|line| line.trim().parse::<i32>().ok())
        {
            // SAFETY: signalling processes the test put in its own cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_cgroups_share_the_mount_by_their_io_weight_under_bfq() {
    let test = "two_cgroups_share_the_mount_by_their_io_weight_under_bfq";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_mount(test) {
        return;
    }
    let Some((root, weight_file)) = weighted_cgroups() else {
        skip(
            test,
            "no cgroup hierarchy with an io weight (v2 io or v1 blkio)",
        );
        return;
    };
    let f = fixture();
    // Files written out (holes would be read without touching the device, and the CPU,
    // not the device, would then set each turn's rate), read over and over by fio.
    for name in ["a", "b"] {
        let mut file = fs::File::create(f.backing.join(name)).unwrap();
        let chunk = pattern(1 << 20, 9);
        for _ in 0..256 {
            file.write_all(&chunk).unwrap();
        }
        file.sync_all().unwrap();
    }
    let tag = format!("iosched-test-{}", std::process::id());
    let mut groups = Vec::new();
    for (name, weight) in [("a", 100), ("b", 300)] {
        let dir = root.join(format!("{tag}-{name}"));
        fs::create_dir(&dir).unwrap();
        if fs::write(dir.join(weight_file), weight.to_string()).is_err() {
            let _ = fs::remove_dir(&dir);
            for (dir, _) in &groups {
                let _ = fs::remove_dir(dir);
            }
            skip(test, &format!("{weight_file} cannot be written here"));
            return;
        }
        groups.push((dir, name));
    }
    let mounted = mount(&f, "bfq");
    // Each group reads its own file sequentially in 1 MiB requests, as dd does, but sixteen
    // at a time (fio, libaio), twice the mount's device depth, so that a group's queue
    // always holds requests while the device works on others of it. A reader one request at
    // a time (dd) leaves its queue empty between requests, and so does a reader whose every
    // request is on the device; bfq then idles for it and injects the other group's requests
    // into the gap (charging the waiting queue its turn's time when the turn times out), and
    // the byte shares move off the weights by as much as the gaps are long, from run to run,
    // in the kernel's bfq as in ours (scripts/mount-show.py shows both readers beside it).
    if Command::new("fio").arg("--version").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "fio is missing (.ci/run installs it)"
        );
        for (dir, _) in &groups {
            let _ = fs::remove_dir(dir);
        }
        mounted.unmount().unwrap();
        skip(test, "fio is not installed (apt-get install fio)");
        return;
    }
    let mut children = Vec::new();
    for (dir, name) in &groups {
        let file = format!("--filename={}", f.mnt.join(name).display());
        children.push(spawn_as(
            "fio",
            &[
                "--name=reader",
                &file,
                "--rw=read",
                "--bs=1M",
                "--ioengine=libaio",
                "--iodepth=16",
                "--direct=1",
                "--time_based",
                "--runtime=60",
            ],
            None,
            Some(dir.join("cgroup.procs")),
        ));
    }
    let bytes = |mnt: &Path| -> [u64; 2] {
        let mut by_group = [0u64; 2];
        for flow in flows(mnt) {
            let cgroup = flow["cgroup"].as_str().unwrap_or("");
            for (i, (_, name)) in groups.iter().enumerate() {
                if cgroup.ends_with(&format!("{tag}-{name}")) {
                    by_group[i] += flow["read"]["bytes"].as_u64().unwrap();
                }
            }
        }
        by_group
    };
    std::thread::sleep(Duration::from_secs(2));
    let before = bytes(&f.mnt);
    let start = Instant::now();
    // Long enough for many turns (bfq's are up to timeout_sync, 125 ms, each).
    std::thread::sleep(Duration::from_secs(8));
    let after = bytes(&f.mnt);
    let seconds = start.elapsed().as_secs_f64();
    // Every process in the groups (fio's job processes start sessions of their own).
    for (dir, _) in &groups {
        empty_cgroup(dir);
    }
    for child in &mut children {
        let _ = child.wait();
    }
    mounted.unmount().unwrap();
    for (dir, _) in &groups {
        let _ = fs::remove_dir(dir);
    }
    let (a, b) = (after[0] - before[0], after[1] - before[1]);
    let ratio = b as f64 / a.max(1) as f64;
    let _ = writeln!(
        std::io::stderr(),
        "{test}: weight 100: {:.1} MiB/s, weight 300: {:.1} MiB/s, ratio {ratio:.2} (1:3 wanted)",
        a as f64 / seconds / 1048576.0,
        b as f64 / seconds / 1048576.0
    );
    assert!(
        (2.55..=3.45).contains(&ratio),
        "service ratio {ratio:.2}, not within 15% of 3 ({a} and {b} bytes)"
    );
}

#[test]
fn the_mount_point_inside_the_backing_directory_is_refused() {
    let f = fixture();
    let inner = f.backing.join("inner");
    fs::create_dir(&inner).unwrap();
    let config = MountConfig::new(&f.backing, &inner, "noop");
    let error = Mounted::mount(&config).err().unwrap().to_string();
    assert!(error.contains("inside the backing directory"), "{error}");
    let config = MountConfig::new(f.backing.join("missing"), &f.mnt, "noop");
    let error = Mounted::mount(&config).err().unwrap().to_string();
    assert!(
        error.contains("backing directory") && error.contains("missing"),
        "{error}"
    );
    let file = f.backing.join("file");
    fs::write(&file, "x").unwrap();
    let config = MountConfig::new(&f.backing, &file, "noop");
    let error = Mounted::mount(&config).err().unwrap().to_string();
    assert!(error.contains("is not a directory"), "{error}");
    let config = MountConfig::new(&f.backing, &f.mnt, "no-such-policy");
    let error = Mounted::mount(&config).err().unwrap().to_string();
    assert!(error.contains("no-such-policy"), "{error}");
    assert!(!is_mounted(&f.mnt));
}

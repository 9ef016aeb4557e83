//! Who asked: a FUSE request's caller as the kernel's block layer would classify its I/O.
//!
//! FUSE hands the daemon the calling thread's id, user and group. From the thread id we read
//! what the kernel reads for a bio of that thread:
//!
//! - **the I/O priority**: `ioprio_get(IOPRIO_WHO_PROCESS, tid)` gives the value the thread
//!   set (block/ioprio.c, `get_task_raw_ioprio`); when it set none (class NONE), the kernel
//!   derives one from the scheduling policy and nice level (block/ioprio.c,
//!   `__get_task_ioprio`, with include/linux/ioprio.h's `task_nice_ioclass`: `SCHED_IDLE` is
//!   the idle class, `SCHED_FIFO`/`SCHED_RR` real-time, others best effort; and
//!   `task_nice_ioprio`: level `(nice + 20) / 5`), and so do we;
//! - **the cgroup**: the cgroup v2 path from `/proc/TID/cgroup` (`0::/path`), or, on a
//!   hybrid system whose v2 path is the root, the v1 `blkio` hierarchy's path;
//! - **the process**: the thread group (`Tgid:` in `/proc/TID/status`), since cfq and bfq
//!   keep one queue per io context, which a process's threads share (unless one was cloned
//!   with its own): requests from one process form one flow.
//!
//! Reading `/proc` costs a few system calls, so a thread's answer is kept for
//! [`CACHE_TTL`] (a process that changes its priority or cgroup is seen within that time),
//! in a table bounded by [`CACHE_MAX`].

use iosched_core::{IoPrio, IoPrioClass};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a thread's classification is reused.
pub const CACHE_TTL: Duration = Duration::from_secs(1);

/// Most threads whose classification is kept.
pub const CACHE_MAX: usize = 4096;

/// A request's caller, as the block layer sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The process (thread group id); 0 for requests the kernel makes on no one's behalf.
    pub pid: u32,
    /// The process's command name (`comm`), for statistics.
    pub comm: String,
    /// The caller's user id.
    pub uid: u32,
    /// The I/O priority its I/O would carry.
    pub prio: IoPrio,
    /// Its cgroup's path (`/` for the root or when unknown).
    pub cgroup: String,
}

/// Classifies callers, keeping recent answers.
#[derive(Debug, Default)]
pub struct Classifier {
    cache: HashMap<u32, (Instant, Caller)>,
}

impl Classifier {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The caller behind thread `tid` running as `uid`, at `now`.
    pub fn classify(&mut self, tid: u32, uid: u32, now: Instant) -> Caller {
        if let Some((at, caller)) = self.cache.get(&tid) {
            if now.duration_since(*at) < CACHE_TTL && caller.uid == uid {
                return caller.clone();
            }
        }
        let caller = read_caller(tid, uid);
        if self.cache.len() >= CACHE_MAX {
            self.cache
                .retain(|_, (at, _)| now.duration_since(*at) < CACHE_TTL);
            if self.cache.len() >= CACHE_MAX {
                self.cache.clear();
            }
        }
        self.cache.insert(tid, (now, caller.clone()));
        caller
    }
}

/// Reads `tid`'s classification from the kernel; a thread that is gone (or the kernel's own
/// requests, tid 0) is the root cgroup at the default priority.
pub fn read_caller(tid: u32, uid: u32) -> Caller {
    if tid == 0 {
        return Caller {
            pid: 0,
            comm: "kernel".into(),
            uid,
            prio: IoPrio::NONE,
            cgroup: "/".into(),
        };
    }
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).unwrap_or_default();
    let pid = status_field(&status, "Tgid:").unwrap_or(tid);
    let comm = std::fs::read_to_string(format!("/proc/{tid}/comm"))
        .map(|c| c.trim_end().to_string())
        .unwrap_or_else(|_| "?".into());
    let cgroup = std::fs::read_to_string(format!("/proc/{tid}/cgroup"))
        .map(|text| cgroup_path(&text))
        .unwrap_or_else(|_| "/".into());
    Caller {
        pid,
        comm,
        uid,
        prio: task_ioprio(tid),
        cgroup,
    }
}

/// A numeric field of `/proc/PID/status` (`Tgid:`).
fn status_field(status: &str, name: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|value| value.trim().parse().ok())
}

/// The cgroup a `/proc/PID/cgroup` file names for I/O: the v2 path (`0::/path`), unless it is
/// the root and the v1 `blkio` hierarchy places the task elsewhere (a hybrid system whose io
/// controller is v1's).
pub fn cgroup_path(text: &str) -> String {
    let mut v2 = None;
    let mut blkio = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path);
        } else if controllers.split(',').any(|c| c == "blkio") {
            blkio = Some(path);
        }
    }
    let path = match (v2, blkio) {
        (Some(v2), Some(blkio)) if v2 == "/" && blkio != "/" => blkio,
        (Some(v2), _) => v2,
        (None, Some(blkio)) => blkio,
        (None, None) => "/",
    };
    // A cgroup that was removed reads "/path (deleted)".
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    if path.is_empty() {
        "/".into()
    } else {
        path.to_string()
    }
}

/// The I/O priority the kernel gives thread `tid`'s I/O (see the module documentation).
pub fn task_ioprio(tid: u32) -> IoPrio {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    // SAFETY: ioprio_get takes two integers and touches no memory of ours.
    let raw = unsafe {
        libc::syscall(
            libc::SYS_ioprio_get,
            IOPRIO_WHO_PROCESS,
            libc::c_long::from(tid as i32),
        )
    };
    if raw >= 0 {
        if let Ok(prio) = IoPrio::from_raw(raw as u16) {
            if prio.class() != IoPrioClass::None {
                return prio;
            }
        }
    }
    // SAFETY: plain integer system calls.
    let policy = unsafe { libc::sched_getscheduler(tid as libc::pid_t) };
    // getpriority returns -1 both as a nice level and as an error: clear errno to tell.
    // SAFETY: errno is thread-local; getpriority takes integers.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        if nice == -1 && *libc::__errno_location() != 0 {
            0
        } else {
            nice
        }
    };
    nice_ioprio(policy, nice)
}

/// include/linux/ioprio.h's `task_nice_ioclass` and `task_nice_ioprio`: the priority of a
/// task that set none, from its scheduling policy and nice level.
pub fn nice_ioprio(policy: libc::c_int, nice: libc::c_int) -> IoPrio {
    let class = match policy {
        libc::SCHED_IDLE => IoPrioClass::Idle,
        libc::SCHED_FIFO | libc::SCHED_RR => IoPrioClass::Rt,
        // SCHED_DEADLINE (6) is a real-time policy too.
        6 => IoPrioClass::Rt,
        _ => IoPrioClass::Be,
    };
    let level = ((nice.clamp(-20, 19) + 20) / 5) as u8;
    IoPrio::new(class, level).expect("(nice + 20) / 5 is 0..=7")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_path_unless_it_is_the_root_on_a_hybrid() {
        assert_eq!(cgroup_path("0::/user.slice/db\n"), "/user.slice/db");
        let hybrid = "9:name=systemd:/\n7:blkio:/batch\n4:memory:/x\n0::/\n";
        assert_eq!(cgroup_path(hybrid), "/batch");
        let both = "7:blkio:/batch\n0::/svc\n";
        assert_eq!(cgroup_path(both), "/svc");
        assert_eq!(cgroup_path("7:blkio,cpu:/v1only\n"), "/v1only");
        assert_eq!(cgroup_path("0::/gone (deleted)\n"), "/gone");
        assert_eq!(cgroup_path(""), "/");
        assert_eq!(cgroup_path("garbage\n"), "/");
    }

    #[test]
    fn nice_gives_the_kernels_class_and_level() {
        let be = |level| IoPrio::new(IoPrioClass::Be, level).unwrap();
        assert_eq!(nice_ioprio(libc::SCHED_OTHER, 0), be(4));
        assert_eq!(nice_ioprio(libc::SCHED_OTHER, -20), be(0));
        assert_eq!(nice_ioprio(libc::SCHED_OTHER, 19), be(7));
        assert_eq!(nice_ioprio(libc::SCHED_BATCH, 5), be(5));
        assert_eq!(nice_ioprio(libc::SCHED_IDLE, 0).class(), IoPrioClass::Idle);
        assert_eq!(nice_ioprio(libc::SCHED_FIFO, 0).class(), IoPrioClass::Rt);
    }

    #[test]
    fn this_thread_is_classified_as_the_kernel_would() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let caller = read_caller(tid, 0);
        assert_eq!(caller.pid, std::process::id());
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        assert_eq!(caller.cgroup, cgroup_path(&own));
        // Set a priority on this thread and see it; then clear it (class NONE) and see nice's.
        let idle = IoPrio::new(IoPrioClass::Idle, 0).unwrap();
        // SAFETY: ioprio_set takes integers.
        let set = |raw: u16| unsafe {
            libc::syscall(
                libc::SYS_ioprio_set,
                1 as libc::c_long,
                0 as libc::c_long,
                raw as libc::c_long,
            )
        };
        assert_eq!(set(idle.to_raw()), 0);
        assert_eq!(task_ioprio(tid), idle);
        assert_eq!(set(0), 0);
        // SAFETY: integer system calls.
        let (policy, nice) = unsafe {
            (
                libc::sched_getscheduler(0),
                libc::getpriority(libc::PRIO_PROCESS, 0),
            )
        };
        assert_eq!(task_ioprio(tid), nice_ioprio(policy, nice));
    }

    #[test]
    fn the_cache_is_bounded_and_expires() {
        let mut classifier = Classifier::new();
        let start = Instant::now();
        for tid in 1..=(CACHE_MAX as u32 + 10) {
            classifier.classify(4_000_000 + tid, 0, start);
        }
        assert!(classifier.cache.len() <= CACHE_MAX);
        let later = start + CACHE_TTL * 2;
        classifier.classify(1, 0, later);
        assert!(classifier.cache.len() <= CACHE_MAX);
    }
}

//! The device side of the real engine: one io_uring, the elevator in front of it, and the
//! bookkeeping between them. Both the fio job engine and the library's [`Scheduler`] drive one.
//!
//! # One step of the event loop
//!
//! 1. Requests enter the [`Elevator`] ([`Core::submit`], then [`Core::admit_blocked`]);
//!    beyond `nr_requests`, or the policy's `limit_depth`, they wait in arrival order
//!    ([`iosched_core::Waiters`]) and are admitted as completions free scheduler requests.
//! 2. [`Core::dispatch`] asks the policy for requests while fewer than the device depth are in
//!    flight and turns each into an SQE (its buffers come from the caller through a lookup),
//!    submitted at once, one `io_uring_enter` per request, as fio submits by default.
//!    A [`Dispatch::WaitUntil`] is remembered as the policy's wake-up time.
//! 3. [`Core::wait`] submits the SQEs and sleeps in `io_uring_enter` until a completion
//!    arrives or the earliest deadline passes: the policy's wake-up, or the caller's own timer.
//!    The timeout is the kernel's (`IORING_ENTER_EXT_ARG` with a timespec), so a policy that
//!    idles costs no extra SQE, nothing needs cancelling when the wait is superseded, and an
//!    early completion ends the wait at once.
//! 4. [`Core::reap`] takes every CQE, timestamps it with the monotonic clock (nanoseconds since
//!    the core started), and tells the elevator. A short transfer is resubmitted for the rest;
//!    an `EPERM` on a real-time SQE means the kernel refused the class (RT needs
//!    `CAP_SYS_ADMIN` or `CAP_SYS_NICE`): the core warns once and from then on sends
//!    real-time requests as best effort at the same level, starting with this one.
//!
//! [`Scheduler`]: crate::Scheduler

use crate::error::errno_text;
use crate::ids::IdMap;
use crate::sqe;
use crate::UringError;
use io_uring::{squeue::Entry, types, IoUring};
use iosched_core::{Admitted, Dispatch, Elevator, Nanos, Op, Request, RequestId, Waiters};
use iosched_fio::DiskAccounting;
use std::os::fd::RawFd;
use std::time::Instant;

/// `user_data` of the poll that wakes the loop when another thread submits.
pub(crate) const WAKE: u64 = u64::MAX;

/// Where one original request's data lives, as its owner knows it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    /// The file descriptor to use.
    pub fd: RawFd,
    /// Whether `fd` was opened without `O_DIRECT`.
    pub buffered: bool,
    /// Its index among the ring's registered files, if registered.
    pub fixed_file: Option<u32>,
    /// The data (null for a flush).
    pub buf: *mut u8,
    /// The registered buffer holding the data, if it is in one.
    pub fixed_buffer: Option<u16>,
    /// Offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// For a flush: sync_file_range(2) of `[offset, offset + len)` with these flags instead
    /// of an fsync.
    pub sync_range: Option<u32>,
    /// A read that ends at a short transfer, as read(2) may (the end of the file), instead of
    /// asking for the rest.
    pub short_ok: bool,
}

/// Why a command failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The CQE carried `-errno`.
    Errno(i32),
    /// A read returned 0 bytes before the end of the request: the file ends there.
    EndOfFile,
}

impl Failure {
    /// The errno fio would report.
    pub fn errno(self) -> i32 {
        match self {
            Failure::Errno(errno) => errno,
            Failure::EndOfFile => libc::EIO,
        }
    }

    /// In words.
    pub fn describe(self, op: Op) -> String {
        match self {
            Failure::Errno(libc::EINVAL) => format!(
                "{} failed: {} (with direct=1, offsets, sizes and buffers must be aligned to \
                 the device's logical block size)",
                op.name(),
                errno_text(libc::EINVAL)
            ),
            Failure::Errno(errno) => format!("{} failed: {}", op.name(), errno_text(errno)),
            Failure::EndOfFile => format!("{} stopped at the end of the file", op.name()),
        }
    }
}

/// A request the device finished, with its outcome.
#[derive(Debug)]
pub(crate) struct Finished {
    /// The request as dispatched (merged companions included).
    pub request: Request,
    /// When the completion was reaped, on the core's clock.
    pub at: Nanos,
    /// The failure and the file offset it concerns, if it failed.
    pub error: Option<(Failure, u64)>,
    /// Whether the device transferred less than asked at first (and the rest was resubmitted).
    pub short: bool,
}

/// A request on the device.
struct Command {
    request: Request,
    fd: RawFd,
    fixed_file: Option<u32>,
    iovecs: Vec<libc::iovec>,
    /// The registered buffer holding a lone request's data.
    fixed_buffer: Option<u16>,
    /// File offset of the first byte still to transfer.
    offset: u64,
    /// Bytes still to transfer.
    remaining: u64,
    dispatched: Nanos,
    ioprio: u16,
    short: bool,
    /// A flush that is a sync_file_range of `offset`, `remaining` bytes: its flags.
    sync_range: Option<u32>,
    /// A short read ends the command ([`Target::short_ok`] of every request in it).
    short_ok: bool,
}

/// The ring, the elevator and the requests between them.
pub(crate) struct Core {
    ring: IoUring,
    /// The policy and its queue limits.
    pub elevator: Elevator,
    depth: usize,
    commands: IdMap<Command>,
    /// Submitters waiting for a free scheduler request (`nr_requests`, or the policy's
    /// `limit_depth`).
    blocked: Waiters,
    policy_wake: Option<Nanos>,
    rt_refused: bool,
    /// Remarks for the report (the real-time fallback).
    pub warnings: Vec<String>,
    /// Device counters, as /proc/diskstats keeps them.
    pub disk: DiskAccounting,
    start: Instant,
    wake_armed: bool,
    /// Times the policy asked to wait, and times the loop slept until a policy's wake-up.
    pub policy_waits: u64,
    /// Reaped completions, kept to reuse the allocation.
    completions: Vec<(u64, i32)>,
}

impl Core {
    /// A ring for `depth` commands in flight, in front of `elevator`.
    pub fn new(elevator: Elevator, depth: u32) -> Result<Self, UringError> {
        let depth = depth.max(1) as usize;
        // Room for every command, a wake-up poll and resubmissions.
        let entries = (depth + 4).next_power_of_two() as u32;
        let ring = IoUring::builder()
            .setup_submit_all()
            .build(entries)
            .or_else(|_| IoUring::new(entries))
            .map_err(|error| {
                UringError::new(format!(
                    "cannot create an io_uring of {entries} entries: {error} (io_uring needs \
                     Linux 5.11 or later, and may be disabled by \
                     /proc/sys/kernel/io_uring_disabled or a seccomp policy)"
                ))
            })?;
        if !ring.params().is_feature_ext_arg() {
            return Err(UringError::new(
                "this kernel's io_uring cannot wait with a timeout (IORING_FEAT_EXT_ARG, Linux \
                 5.11): the real engine needs it to honour policies that wait",
            ));
        }
        Ok(Core {
            ring,
            elevator,
            depth,
            commands: IdMap::default(),
            blocked: Waiters::new(),
            policy_wake: None,
            rt_refused: false,
            warnings: Vec::new(),
            disk: DiskAccounting::new(),
            start: Instant::now(),
            wake_armed: false,
            policy_waits: 0,
            completions: Vec::new(),
        })
    }

    /// Registers `regions` as the ring's fixed buffers (`IORING_REGISTER_BUFFERS`), index by
    /// index; false if the kernel refused (each region is at most 1 GiB, and without
    /// CAP_IPC_LOCK they count against RLIMIT_MEMLOCK), and then I/O goes on through plain
    /// reads and writes.
    ///
    /// # Safety
    /// Every region stays allocated while any I/O naming its index may be in flight.
    pub unsafe fn register_buffers(&mut self, regions: &[libc::iovec]) -> bool {
        // SAFETY: the caller keeps the regions alive; the kernel pins their pages.
        !regions.is_empty() && unsafe { self.ring.submitter().register_buffers(regions) }.is_ok()
    }

    /// Registers `fds` as the ring's fixed files (`IORING_REGISTER_FILES`), index by index;
    /// false if the kernel refused (then entries name descriptors).
    pub fn register_files(&mut self, fds: &[RawFd]) -> bool {
        !fds.is_empty() && self.ring.submitter().register_files(fds).is_ok()
    }

    /// Nanoseconds since the core was created (monotonic).
    pub fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }

    /// The device depth: most commands in flight at once.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Commands in flight on the device.
    pub fn in_device(&self) -> usize {
        self.commands.len()
    }

    /// Whether the kernel refused the real-time class and real-time requests go out as best
    /// effort.
    pub fn rt_refused(&self) -> bool {
        self.rt_refused
    }

    /// Nothing queued, held by a stage, waiting or in flight.
    pub fn idle(&self) -> bool {
        self.commands.is_empty()
            && self.blocked.is_empty()
            && self.elevator.queued() == 0
            && self.elevator.held() == 0
    }

    /// Offers `request` to the elevator: it waits behind the submitters already waiting
    /// ([`Waiters`]) until [`Core::admit_blocked`] admits it.
    pub fn submit(&mut self, request: Request) {
        self.blocked.push(request);
    }

    /// Admits the waiting requests the elevator takes now; their ids go to `admitted`.
    pub fn admit_blocked(&mut self, now: Nanos, admitted: &mut Vec<RequestId>) {
        let disk = &mut self.disk;
        self.blocked
            .admit(&mut self.elevator, now, |id, direction, how| {
                if how == Admitted::Merged {
                    disk.merged(direction);
                }
                admitted.push(id);
            });
    }

    /// Sends requests from the policy to the ring while the device has room. `lookup` says
    /// where each original request's data is.
    pub fn dispatch(
        &mut self,
        now: Nanos,
        lookup: impl Fn(RequestId) -> Target,
    ) -> Result<(), UringError> {
        self.policy_wake = None;
        while self.commands.len() < self.depth {
            match self.elevator.dispatch(now) {
                Dispatch::Request(request) => self.start(request, now, &lookup)?,
                Dispatch::WaitUntil(at) => {
                    self.policy_wake = Some(at.max(now + 1));
                    self.policy_waits += 1;
                    break;
                }
                Dispatch::Empty => break,
            }
        }
        Ok(())
    }

    fn start(
        &mut self,
        request: Request,
        now: Nanos,
        lookup: &impl Fn(RequestId) -> Target,
    ) -> Result<(), UringError> {
        let user_data = request.id.0;
        debug_assert_ne!(user_data, WAKE);
        self.disk.dispatched(now);
        let ioprio = sqe::ioprio(request.prio, self.rt_refused);
        let command = if request.op == Op::Flush {
            let target = lookup(request.id);
            Command {
                request,
                fd: target.fd,
                fixed_file: None,
                iovecs: Vec::new(),
                fixed_buffer: None,
                offset: target.offset,
                remaining: target.len,
                dispatched: now,
                ioprio,
                short: false,
                sync_range: target.sync_range,
                short_ok: false,
            }
        } else if request.merged.is_empty() {
            // The common case, one original request: no list of targets to sort.
            let target = lookup(request.id);
            debug_assert_eq!(target.len, request.len);
            Command {
                fd: target.fd,
                fixed_file: target.fixed_file,
                iovecs: vec![libc::iovec {
                    iov_base: target.buf.cast(),
                    iov_len: target.len as usize,
                }],
                fixed_buffer: target.fixed_buffer,
                offset: target.offset,
                remaining: request.len,
                dispatched: now,
                ioprio,
                short: false,
                sync_range: None,
                short_ok: target.short_ok,
                request,
            }
        } else {
            let mut targets: Vec<Target> = std::iter::once(request.id)
                .chain(request.merged.iter().copied())
                .map(lookup)
                .collect();
            targets.sort_by_key(|target| target.offset);
            debug_assert!(
                targets
                    .windows(2)
                    .all(|t| t[0].offset + t[0].len == t[1].offset),
                "a merged request covers one contiguous range of one file"
            );
            debug_assert_eq!(targets.iter().map(|t| t.len).sum::<u64>(), request.len);
            // Requests from jobs with and without O_DIRECT may merge on one file: the buffered
            // descriptor accepts any alignment, so it carries such a mix.
            let file = targets
                .iter()
                .find(|target| target.buffered)
                .unwrap_or(&targets[0]);
            Command {
                fd: file.fd,
                fixed_file: file.fixed_file,
                fixed_buffer: None,
                iovecs: targets
                    .iter()
                    .map(|target| libc::iovec {
                        iov_base: target.buf.cast(),
                        iov_len: target.len as usize,
                    })
                    .collect(),
                offset: targets[0].offset,
                remaining: request.len,
                dispatched: now,
                ioprio,
                short: false,
                sync_range: None,
                short_ok: targets.iter().all(|target| target.short_ok),
                request,
            }
        };
        let entry = Self::entry(&command, user_data);
        self.commands.insert(user_data, command);
        self.push(entry)?;
        // Each dispatched request goes to the kernel at once, as fio's default
        // iodepth_batch_submit=1 sends each I/O: submitting a policy's dispatches as one batch
        // plugs them into one burst for the device, which then completes them in bursts too
        // (measured on a virtio disk: 50k IOPS batched, 70k one by one, at depth 32).
        self.submit_now()
    }

    fn submit_now(&mut self) -> Result<(), UringError> {
        match self.ring.submit() {
            Ok(_) => Ok(()),
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::EBUSY | libc::EINTR | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(error) => Err(UringError::new(format!("io_uring_enter failed: {error}"))),
        }
    }

    fn entry(command: &Command, user_data: u64) -> Entry {
        if command.request.op == Op::Flush {
            match command.sync_range {
                Some(flags) => sqe::sync_file_range(
                    command.fd,
                    command.offset,
                    command.remaining,
                    flags,
                    user_data,
                ),
                None => sqe::fsync(command.fd, user_data),
            }
        } else {
            sqe::read_write(
                command.request.op,
                command
                    .fixed_file
                    .map_or(sqe::FileRef::Fd(command.fd), sqe::FileRef::Fixed),
                command.offset,
                &command.iovecs,
                command.fixed_buffer,
                command.ioprio,
                user_data,
            )
        }
    }

    fn push(&mut self, entry: Entry) -> Result<(), UringError> {
        // The ring has room for every command in flight and the wake-up poll, and the queue is
        // handed to the kernel at every wait, so it is full only if the kernel stopped taking
        // entries; give it a few chances before giving up.
        for _ in 0..1000 {
            // SAFETY: every buffer and iovec array an entry points to is owned by a command in
            // `self.commands` (or by the caller's records behind them) until its completion is
            // reaped.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(error) if matches!(error.raw_os_error(), Some(libc::EBUSY | libc::EINTR)) => {}
                Err(error) => {
                    return Err(UringError::new(format!("io_uring_enter failed: {error}")))
                }
            }
        }
        Err(UringError::new(
            "the io_uring submission queue stayed full: the kernel is not taking entries",
        ))
    }

    /// Arms the poll that wakes [`Core::wait`] when `fd` (an eventfd) becomes readable.
    pub fn arm_wake(&mut self, fd: RawFd) -> Result<(), UringError> {
        if !self.wake_armed {
            let entry = io_uring::opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
                .build()
                .user_data(WAKE);
            self.push(entry)?;
            self.wake_armed = true;
        }
        Ok(())
    }

    /// Submits what is queued and sleeps until a completion arrives or `until` (or the policy's
    /// wake-up, if earlier) passes. Returns at once when a completion is already waiting or
    /// nothing could ever complete.
    pub fn wait(&mut self, until: Option<Nanos>) -> Result<(), UringError> {
        let deadline = match (until, self.policy_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let result = if !self.ring.completion().is_empty() {
            self.ring.submit().map(|_| ())
        } else if let Some(deadline) = deadline {
            let now = self.now();
            if deadline <= now {
                self.ring.submit().map(|_| ())
            } else {
                let wait = deadline - now;
                let timespec = types::Timespec::new()
                    .sec(wait / 1_000_000_000)
                    .nsec((wait % 1_000_000_000) as u32);
                let args = types::SubmitArgs::new().timespec(&timespec);
                self.ring.submitter().submit_with_args(1, &args).map(|_| ())
            }
        } else if self.commands.is_empty() && !self.wake_armed {
            self.ring.submit().map(|_| ())
        } else {
            self.ring.submit_and_wait(1).map(|_| ())
        };
        match result {
            Ok(()) => Ok(()),
            // ETIME: the timeout passed; EINTR: a signal; EBUSY: completions must be reaped first.
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(error) => Err(UringError::new(format!("io_uring_enter failed: {error}"))),
        }
    }

    /// Takes every completion. Finished requests go to `finished`; returns whether the wake-up
    /// poll fired.
    pub fn reap(&mut self, finished: &mut Vec<Finished>) -> Result<bool, UringError> {
        let mut completions = std::mem::take(&mut self.completions);
        completions.clear();
        completions.extend(
            self.ring
                .completion()
                .map(|cqe| (cqe.user_data(), cqe.result())),
        );
        let mut woken = false;
        let result = self.finish_all(&completions, &mut woken, finished);
        self.completions = completions;
        result.map(|()| woken)
    }

    /// Handles reaped completions: resubmits, or tells the elevator and hands them on.
    fn finish_all(
        &mut self,
        completions: &[(u64, i32)],
        woken: &mut bool,
        finished: &mut Vec<Finished>,
    ) -> Result<(), UringError> {
        for &(user_data, result) in completions {
            if user_data == WAKE {
                *woken = true;
                self.wake_armed = false;
                continue;
            }
            let Some(mut command) = self.commands.remove(&user_data) else {
                debug_assert!(false, "a completion for no command: {user_data}");
                continue;
            };
            let now = self.now();
            if result == -libc::EPERM && sqe::is_rt(command.ioprio) {
                self.refuse_rt(&command.request);
                command.ioprio = sqe::ioprio(command.request.prio, true);
                self.resubmit(command, user_data)?;
                continue;
            }
            let outcome = if result < 0 {
                Some((Failure::Errno(-result), command.offset))
            } else if command.request.op == Op::Flush || result as u64 >= command.remaining {
                None
            } else if result == 0 || command.short_ok {
                // The file ends at the first byte not read.
                Some((Failure::EndOfFile, command.offset + result as u64))
            } else {
                // A short transfer: send the rest, as fio does.
                advance(&mut command.iovecs, result as usize);
                command.offset += result as u64;
                command.remaining -= result as u64;
                command.short = true;
                self.resubmit(command, user_data)?;
                continue;
            };
            self.disk.completed(
                now,
                command.request.direction(),
                now - command.dispatched.min(now),
            );
            self.elevator.completed(&command.request, now);
            finished.push(Finished {
                request: command.request,
                at: now,
                error: outcome,
                short: command.short,
            });
        }
        Ok(())
    }

    fn resubmit(&mut self, command: Command, user_data: u64) -> Result<(), UringError> {
        let entry = Self::entry(&command, user_data);
        self.commands.insert(user_data, command);
        self.push(entry)
    }

    fn refuse_rt(&mut self, request: &Request) {
        if self.rt_refused {
            return;
        }
        self.rt_refused = true;
        let warning = format!(
            "warning: the kernel refused the real-time I/O priority of request {request} \
             (EPERM: the RT class needs CAP_SYS_ADMIN or CAP_SYS_NICE); real-time requests are \
             sent as best effort at the same level from now on (the policy still sees RT)"
        );
        eprintln!("iosched: {warning}");
        self.warnings.push(warning);
    }
}

/// Drops the first `n` bytes from `iovecs`.
fn advance(iovecs: &mut Vec<libc::iovec>, mut n: usize) {
    while n > 0 {
        let first = &mut iovecs[0];
        if n >= first.iov_len {
            n -= first.iov_len;
            iovecs.remove(0);
        } else {
            // SAFETY: stays inside the buffer, since n < iov_len.
            first.iov_base = unsafe { first.iov_base.cast::<u8>().add(n) }.cast();
            first.iov_len -= n;
            n = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_skips_whole_and_partial_vectors() {
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        let mut iovecs = vec![
            libc::iovec {
                iov_base: a.as_mut_ptr().cast(),
                iov_len: 8,
            },
            libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: 8,
            },
        ];
        advance(&mut iovecs, 11);
        assert_eq!(iovecs.len(), 1);
        assert_eq!(iovecs[0].iov_len, 5);
        assert_eq!(iovecs[0].iov_base as usize, b.as_ptr() as usize + 3);
    }
}

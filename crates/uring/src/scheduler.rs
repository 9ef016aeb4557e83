//! The library API: an application's own I/O on one file or device, scheduled by a policy.
//!
//! A [`Scheduler`] owns an engine thread with one ring and one elevator. Any number of threads
//! submit through [`Client`]s (cheap to clone): each request names its flow (the issuer, as
//! policies key per-process state), its group (a cgroup-like path) and its I/O priority, and
//! comes back as a [`Completion`] through its [`Ticket`], or through a channel of the caller's
//! choosing. Submissions travel over an mpsc channel; an eventfd polled by the ring wakes the
//! engine thread, so it sleeps in one place (`io_uring_enter`) whether it waits for the device,
//! for a policy's `WaitUntil` or for new work.
//!
//! ```
//! use iosched_core::{IoPrio, IoPrioClass};
//! use iosched_uring::{IoRequest, Scheduler, SchedulerConfig};
//!
//! let path = std::env::temp_dir().join(format!("iosched-doc-{}", std::process::id()));
//! std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
//! let scheduler = Scheduler::open(&path, SchedulerConfig::default()).unwrap();
//!
//! let write = scheduler
//!     .submit(IoRequest::write(4096, &[7u8; 4096]).flow(1).group("/app/db"))
//!     .unwrap();
//! assert!(write.wait().unwrap().result.is_ok());
//!
//! let urgent = IoPrio::new(IoPrioClass::Be, 0).unwrap();
//! let read = scheduler.submit(IoRequest::read(4096, 4096).flow(2).prio(urgent)).unwrap();
//! let done = read.wait().unwrap();
//! assert_eq!(&done.data.unwrap()[..4], &[7, 7, 7, 7]);
//!
//! let stats = scheduler.shutdown().unwrap();
//! assert_eq!(stats.completed, 2);
//! std::fs::remove_file(&path).unwrap();
//! ```

use crate::buffer::AlignedBuf;
use crate::files::open_for_scheduler;
use crate::ids::IdMap;
use crate::ring::{Core, Finished, Target};
use crate::UringError;
use iosched_core::{
    elevator::default_nr_requests, policies, Elevator, ElevatorStats, FlowId, Groups, IoPrio,
    Nanos, Op, Policy, Request, RequestId,
};
use iosched_fio::Latency;
use std::fmt;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How a [`Scheduler`] runs.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// Policy name (see `iosched policies`).
    pub policy: String,
    /// Queue and policy tunables, by name, as text (`POLICY.NAME` for one policy only).
    pub settings: Vec<(String, String)>,
    /// Most commands in flight on the device at once.
    pub device_depth: u32,
    /// Open the file with `O_DIRECT` (offsets and lengths then need whole 512-byte blocks).
    pub direct: bool,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            policy: "deadline".into(),
            settings: Vec::new(),
            device_depth: crate::DEFAULT_DEVICE_DEPTH,
            direct: true,
        }
    }
}

/// One I/O an application asks for.
#[derive(Debug)]
pub struct IoRequest {
    op: Op,
    offset: u64,
    len: u64,
    data: Option<AlignedBuf>,
    flow: FlowId,
    group: String,
    prio: IoPrio,
}

impl IoRequest {
    /// Read `len` bytes at `offset`.
    pub fn read(offset: u64, len: u64) -> Self {
        IoRequest {
            op: Op::Read,
            offset,
            len,
            data: None,
            flow: FlowId(0),
            group: "/".into(),
            prio: IoPrio::NONE,
        }
    }

    /// Write a copy of `data` at `offset`.
    pub fn write(offset: u64, data: &[u8]) -> Self {
        Self::write_buf(offset, AlignedBuf::from_slice(data))
    }

    /// Write `data` at `offset` without copying it.
    pub fn write_buf(offset: u64, data: AlignedBuf) -> Self {
        IoRequest {
            op: Op::Write,
            offset,
            len: data.len() as u64,
            data: Some(data),
            ..Self::read(0, 0)
        }
    }

    /// Make earlier writes durable (`fsync`).
    pub fn flush() -> Self {
        IoRequest {
            op: Op::Flush,
            ..Self::read(0, 0)
        }
    }

    /// The issuer (default 0): policies keep per-flow state (time slices, anticipation).
    pub fn flow(mut self, flow: u32) -> Self {
        self.flow = FlowId(flow);
        self
    }

    /// The issuer's group, a cgroup-like path such as `/app/db` (default `/`).
    pub fn group(mut self, path: &str) -> Self {
        self.group = path.to_string();
        self
    }

    /// The I/O priority (default none: best effort level 4). It goes to the policy and into
    /// the SQE.
    pub fn prio(mut self, prio: IoPrio) -> Self {
        self.prio = prio;
        self
    }
}

/// A finished request.
#[derive(Debug)]
pub struct Completion {
    /// What it did.
    pub op: Op,
    /// Where.
    pub offset: u64,
    /// How many bytes.
    pub len: u64,
    /// Whether the device did it.
    pub result: std::io::Result<()>,
    /// The bytes read, or the buffer written (handed back for reuse); `None` for a flush.
    pub data: Option<AlignedBuf>,
    /// From submission to completion.
    pub latency: Duration,
}

/// Why a request was not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// The scheduler has shut down.
    Closed,
    /// With `O_DIRECT`, offset and length must be whole 512-byte blocks.
    Unaligned {
        /// The offset asked for.
        offset: u64,
        /// The length asked for.
        len: u64,
    },
    /// A read or write of no bytes.
    Empty,
    /// The group path is not valid.
    BadGroup(String),
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::Closed => write!(f, "the scheduler has shut down"),
            SubmitError::Unaligned { offset, len } => write!(
                f,
                "offset {offset} and length {len} must be multiples of 512 with O_DIRECT"
            ),
            SubmitError::Empty => write!(f, "a read or write needs at least one byte"),
            SubmitError::BadGroup(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for SubmitError {}

/// The way back for one request.
pub struct Ticket(Receiver<Completion>);

impl Ticket {
    /// Waits for the request to complete. `Err` only if the engine stopped without
    /// completing it (it met a fatal error).
    pub fn wait(self) -> Result<Completion, SubmitError> {
        self.0.recv().map_err(|_| SubmitError::Closed)
    }

    /// The completion, if it has arrived.
    pub fn try_wait(&self) -> Option<Completion> {
        self.0.try_recv().ok()
    }
}

/// Counters and latencies so far.
#[derive(Clone, Debug, Default)]
pub struct SchedulerStats {
    /// Requests taken.
    pub submitted: u64,
    /// Requests completed (each exactly once).
    pub completed: u64,
    /// Requests the device failed.
    pub errors: u64,
    /// The elevator's counters (merges, dispatches, full waits).
    pub elevator: ElevatorStats,
    /// Latency of reads, submission to completion.
    pub read_latency: Latency,
    /// Latency of writes, submission to completion.
    pub write_latency: Latency,
    /// Whether the kernel refused the real-time class (then sent as best effort).
    pub rt_sent_as_be: bool,
}

enum Message {
    Submit {
        io: IoRequest,
        reply: Sender<Completion>,
        at: Instant,
    },
    Shutdown,
}

/// Submits requests to a [`Scheduler`] from any thread.
#[derive(Clone)]
pub struct Client {
    sender: Sender<Message>,
    wake: Arc<OwnedFd>,
    direct: bool,
}

impl Client {
    /// Submits `io`; its completion comes back through the ticket.
    pub fn submit(&self, io: IoRequest) -> Result<Ticket, SubmitError> {
        let (reply, receiver) = mpsc::channel();
        self.submit_to(io, &reply)?;
        Ok(Ticket(receiver))
    }

    /// Submits `io`; its completion is sent to `reply` (one channel may collect many).
    pub fn submit_to(&self, io: IoRequest, reply: &Sender<Completion>) -> Result<(), SubmitError> {
        if io.op != Op::Flush {
            if io.len == 0 {
                return Err(SubmitError::Empty);
            }
            if self.direct && (io.offset % 512 != 0 || io.len % 512 != 0) {
                return Err(SubmitError::Unaligned {
                    offset: io.offset,
                    len: io.len,
                });
            }
        }
        Groups::normalize(&io.group).map_err(|e| SubmitError::BadGroup(e.to_string()))?;
        self.sender
            .send(Message::Submit {
                io,
                reply: reply.clone(),
                at: Instant::now(),
            })
            .map_err(|_| SubmitError::Closed)?;
        self.wake();
        Ok(())
    }

    fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own. A full counter
        // (EAGAIN) already means "wake up".
        unsafe {
            libc::write(
                self.wake.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}

/// An application's I/O on one file or device, scheduled by a policy.
pub struct Scheduler {
    client: Client,
    stats: Arc<Mutex<SchedulerStats>>,
    thread: Option<JoinHandle<Result<(), UringError>>>,
    size: u64,
}

impl Scheduler {
    /// Opens `path` (which must exist) under the policy `config.policy`.
    pub fn open(path: impl AsRef<Path>, config: SchedulerConfig) -> Result<Self, UringError> {
        let policy = policies::build(&config.policy).map_err(|e| UringError::new(e.to_string()))?;
        Self::with_policy(path, config, policy)
    }

    /// Opens `path` under `policy` (any [`Policy`]; `config.policy` is not used).
    pub fn with_policy(
        path: impl AsRef<Path>,
        config: SchedulerConfig,
        policy: Box<dyn Policy>,
    ) -> Result<Self, UringError> {
        let (file, size) = open_for_scheduler(path.as_ref(), config.direct)?;
        let depth = config.device_depth.max(1);
        let mut elevator = Elevator::new(policy, default_nr_requests(depth));
        policies::apply_settings(&mut elevator, &config.settings)
            .map_err(|e| UringError::new(e.to_string()))?;
        // SAFETY: eventfd has no memory preconditions; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(UringError::new(format!(
                "cannot create an eventfd: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
        let (sender, receiver) = mpsc::channel();
        let stats = Arc::new(Mutex::new(SchedulerStats::default()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = {
            let wake = wake.clone();
            let stats = stats.clone();
            std::thread::Builder::new()
                .name("iosched-uring".into())
                .spawn(move || {
                    // The ring lives and dies on this thread.
                    let core = match Core::new(elevator, depth) {
                        Ok(core) => {
                            let _ = ready_tx.send(Ok(()));
                            core
                        }
                        Err(error) => {
                            let _ = ready_tx.send(Err(error.clone()));
                            return Err(error);
                        }
                    };
                    EngineThread {
                        core,
                        file,
                        direct: config.direct,
                        receiver,
                        wake,
                        stats,
                        pending: IdMap::default(),
                        groups: Groups::new(),
                        next_id: 0,
                    }
                    .run()
                })
                .map_err(|e| UringError::new(format!("cannot start the engine thread: {e}")))?
        };
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(error),
            Err(_) => return Err(UringError::new("the engine thread stopped while starting")),
        }
        Ok(Scheduler {
            client: Client {
                sender,
                wake,
                direct: config.direct,
            },
            stats,
            thread: Some(thread),
            size,
        })
    }

    /// A handle for submitting from other threads.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Submits `io` (see [`Client::submit`]).
    pub fn submit(&self, io: IoRequest) -> Result<Ticket, SubmitError> {
        self.client.submit(io)
    }

    /// Size of the file or device in bytes, when it was opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Counters and latencies so far.
    pub fn stats(&self) -> SchedulerStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Stops taking requests, completes everything submitted, and returns the final counters,
    /// or the error that stopped the engine.
    pub fn shutdown(mut self) -> Result<SchedulerStats, UringError> {
        self.stop()?;
        Ok(self.stats())
    }

    fn stop(&mut self) -> Result<(), UringError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        let _ = self.client.sender.send(Message::Shutdown);
        self.client.wake();
        thread
            .join()
            .unwrap_or_else(|_| Err(UringError::new("the engine thread panicked")))
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            eprintln!("iosched: scheduler: {error}");
        }
    }
}

/// A request between submission and completion.
struct Pending {
    op: Op,
    offset: u64,
    len: u64,
    data: Option<AlignedBuf>,
    reply: Sender<Completion>,
    at: Instant,
}

struct EngineThread {
    core: Core,
    file: File,
    direct: bool,
    receiver: Receiver<Message>,
    wake: Arc<OwnedFd>,
    stats: Arc<Mutex<SchedulerStats>>,
    pending: IdMap<Pending>,
    groups: Groups,
    next_id: u64,
}

impl EngineThread {
    fn run(mut self) -> Result<(), UringError> {
        let mut shutting_down = false;
        let mut admitted = Vec::new();
        let mut finished: Vec<Finished> = Vec::new();
        loop {
            let wake_fd = self.wake.as_raw_fd();
            self.core.arm_wake(wake_fd)?;
            let now = self.core.now();
            loop {
                match self.receiver.try_recv() {
                    Ok(Message::Submit { io, reply, at }) => self.accept(io, reply, at, now),
                    Ok(Message::Shutdown) | Err(TryRecvError::Disconnected) => {
                        shutting_down = true;
                        break;
                    }
                    Err(TryRecvError::Empty) => break,
                }
            }
            self.core.admit_blocked(now, &mut admitted);
            admitted.clear();
            let (pending, fd, direct) = (&self.pending, self.file.as_raw_fd(), self.direct);
            self.core
                .dispatch(now, |id| target(pending, fd, direct, id))?;
            if shutting_down && self.core.idle() {
                break;
            }
            self.core.wait(None)?;
            if self.core.reap(&mut finished)? {
                drain(wake_fd);
            }
            for done in finished.drain(..) {
                self.complete(done);
            }
        }
        self.publish();
        Ok(())
    }

    fn accept(&mut self, io: IoRequest, reply: Sender<Completion>, at: Instant, now: Nanos) {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        let group = self
            .groups
            .intern(&io.group)
            .expect("the client checked the path");
        let request = Request::new(
            id, io.op, io.offset, io.len, true, io.prio, io.flow, group, now,
        );
        let len = if io.op == Op::Flush { 0 } else { io.len };
        let data = match io.op {
            Op::Read => Some(AlignedBuf::zeroed(len as usize)),
            _ => io.data,
        };
        self.pending.insert(
            id.0,
            Pending {
                op: io.op,
                offset: io.offset,
                len,
                data,
                reply,
                at,
            },
        );
        if let Ok(mut stats) = self.stats.lock() {
            stats.submitted += 1;
        }
        self.core.submit(request);
    }

    fn complete(&mut self, done: Finished) {
        let mut stats = self.stats.lock().ok();
        for id in std::iter::once(done.request.id).chain(done.request.merged.iter().copied()) {
            let Some(pending) = self.pending.remove(&id.0) else {
                continue;
            };
            let latency = pending.at.elapsed();
            let result = match done.error {
                Some((failure, _)) => Err(std::io::Error::from_raw_os_error(failure.errno())),
                None => Ok(()),
            };
            if let Some(stats) = stats.as_mut() {
                stats.completed += 1;
                if result.is_err() {
                    stats.errors += 1;
                }
                let nanos = latency.as_nanos() as u64;
                match pending.op {
                    Op::Read => stats.read_latency.record(nanos),
                    Op::Write => stats.write_latency.record(nanos),
                    _ => {}
                }
            }
            // A client that stopped listening is no error.
            let _ = pending.reply.send(Completion {
                op: pending.op,
                offset: pending.offset,
                len: pending.len,
                result,
                data: pending.data,
                latency,
            });
        }
        if let Some(stats) = stats.as_mut() {
            stats.elevator = self.core.elevator.stats();
            stats.rt_sent_as_be = self.core.rt_refused();
        }
    }

    fn publish(&self) {
        if let Ok(mut stats) = self.stats.lock() {
            stats.elevator = self.core.elevator.stats();
            stats.rt_sent_as_be = self.core.rt_refused();
        }
    }
}

fn target(pending: &IdMap<Pending>, fd: RawFd, direct: bool, id: RequestId) -> Target {
    let request = &pending[&id.0];
    Target {
        fd,
        fixed_file: None,
        buffered: !direct,
        buf: request
            .data
            .as_ref()
            .map_or(std::ptr::null_mut(), |data| data.raw()),
        fixed_buffer: None,
        offset: request.offset,
        len: request.len,
        sync_range: None,
    }
}

/// Empties the eventfd's counter.
fn drain(fd: RawFd) {
    let mut value: u64 = 0;
    // SAFETY: reads 8 bytes into a valid u64 from a non-blocking eventfd.
    unsafe {
        libc::read(
            fd,
            (&mut value as *mut u64).cast(),
            std::mem::size_of::<u64>(),
        )
    };
}

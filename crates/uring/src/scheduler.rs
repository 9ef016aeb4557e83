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
use crate::ring::{Core, Failure, Finished, Target};
use crate::UringError;
use iosched_core::group::GroupSetting;
use iosched_core::stage::Stage;
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
    /// cgroup io controller settings (`io.weight`, `io.max`, `io.prio.class`) of the groups
    /// requests name; [`Client::set_groups`] changes them while the scheduler runs.
    pub group_settings: Vec<GroupSetting>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            policy: "deadline".into(),
            settings: Vec::new(),
            device_depth: crate::DEFAULT_DEVICE_DEPTH,
            direct: true,
            group_settings: Vec::new(),
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
    file: Option<SchedFile>,
    tag: u64,
    to_eof: bool,
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
            file: None,
            tag: 0,
            to_eof: false,
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

    /// On `file` (registered with [`Client::register`]) instead of the file the scheduler
    /// was opened on.
    pub fn on(mut self, file: &SchedFile) -> Self {
        self.file = Some(file.clone());
        self
    }

    /// A number of the caller's, handed back in the [`Completion`] (to match completions
    /// collected on one channel with their requests).
    pub fn tag(mut self, tag: u64) -> Self {
        self.tag = tag;
        self
    }

    /// A read that may end early at the end of the file, as read(2) does: the completion
    /// succeeds with [`Completion::transferred`] bytes instead of failing with `EIO`.
    pub fn up_to_eof(mut self) -> Self {
        self.to_eof = true;
        self
    }
}

/// How far into a file a request may address: each registered file has this much of the
/// scheduler's address space (its base plus the offset), so a policy sorts and merges the
/// requests of one file and never joins two files' (16 TiB, ext4's largest file with 4 KiB
/// blocks).
pub const FILE_SPAN: u64 = 1 << 44;

/// Most files registered at once (their address ranges fill the 64-bit space).
pub const FILES_MAX: u32 = 1 << 19;

/// The free address ranges.
#[derive(Debug, Default)]
struct Slots {
    next: u32,
    free: Vec<u32>,
}

impl Slots {
    fn take(&mut self) -> Option<u32> {
        if let Some(slot) = self.free.pop() {
            return Some(slot);
        }
        (self.next < FILES_MAX).then(|| {
            self.next += 1;
            self.next - 1
        })
    }
}

/// One file's range of the scheduler's address space, shared by its descriptors.
#[derive(Debug)]
struct Range {
    slot: u32,
    slots: Arc<Mutex<Slots>>,
}

impl Drop for Range {
    fn drop(&mut self) {
        // Every request on the file holds a handle until it completes, so the range is free
        // of queued requests when it is handed out again.
        if let Ok(mut slots) = self.slots.lock() {
            slots.free.push(self.slot);
        }
    }
}

#[derive(Debug)]
struct FileInner {
    file: File,
    direct: bool,
    range: Arc<Range>,
}

/// A file or device registered with a [`Scheduler`] ([`Client::register`]): requests name it
/// with [`IoRequest::on`]. Cheap to clone; the file is closed when the last handle and the
/// last request on it are gone.
#[derive(Clone, Debug)]
pub struct SchedFile(Arc<FileInner>);

/// A [`SchedFile`] that does not keep it open ([`SchedFile::downgrade`]).
#[derive(Clone, Debug, Default)]
pub struct WeakSchedFile(std::sync::Weak<FileInner>);

impl WeakSchedFile {
    /// The file, if a handle or a request still holds it.
    pub fn upgrade(&self) -> Option<SchedFile> {
        self.0.upgrade().map(SchedFile)
    }
}

impl SchedFile {
    /// Where the file's offset 0 is in the scheduler's address space.
    pub fn base(&self) -> u64 {
        u64::from(self.0.range.slot) * FILE_SPAN
    }

    /// A reference that does not keep the file open.
    pub fn downgrade(&self) -> WeakSchedFile {
        WeakSchedFile(Arc::downgrade(&self.0))
    }

    /// Whether the file was opened with `O_DIRECT`.
    pub fn direct(&self) -> bool {
        self.0.direct
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.0.file
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
    /// The request's [`IoRequest::tag`].
    pub tag: u64,
    /// Bytes moved: the length, or less for an [`IoRequest::up_to_eof`] read that met the
    /// end of the file.
    pub transferred: u64,
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
    /// The request names no file: the scheduler was started without one and the request has
    /// no [`IoRequest::on`].
    NoFile,
    /// The request ends beyond [`FILE_SPAN`].
    TooFar {
        /// One past its last byte.
        end: u64,
    },
    /// [`FILES_MAX`] files are registered already.
    TooManyFiles,
}

impl SubmitError {
    /// The errno a file system would answer with.
    pub fn errno(&self) -> i32 {
        match self {
            SubmitError::Closed => libc::EIO,
            SubmitError::Unaligned { .. } | SubmitError::Empty | SubmitError::NoFile => {
                libc::EINVAL
            }
            SubmitError::BadGroup(_) => libc::EINVAL,
            SubmitError::TooFar { .. } => libc::EFBIG,
            SubmitError::TooManyFiles => libc::EMFILE,
        }
    }
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
            SubmitError::NoFile => write!(
                f,
                "the request names no file (IoRequest::on) and the scheduler has none"
            ),
            SubmitError::TooFar { end } => write!(
                f,
                "the request ends at byte {end}, beyond the {} TiB a file may span",
                FILE_SPAN >> 40
            ),
            SubmitError::TooManyFiles => {
                write!(
                    f,
                    "{FILES_MAX} files are registered with the scheduler already"
                )
            }
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

/// Where a completion goes.
enum ReplyTo {
    /// Sent on a channel.
    Channel(Sender<Completion>),
    /// Handed to a function, called on the engine thread.
    Call(Box<dyn FnOnce(Completion) + Send>),
}

impl ReplyTo {
    fn deliver(self, completion: Completion) {
        match self {
            // A client that stopped listening is no error.
            ReplyTo::Channel(sender) => {
                let _ = sender.send(completion);
            }
            ReplyTo::Call(call) => call(completion),
        }
    }
}

enum Message {
    Submit {
        io: IoRequest,
        reply: ReplyTo,
        at: Instant,
    },
    Groups {
        settings: Vec<GroupSetting>,
        reply: Sender<Result<(), String>>,
    },
    Shutdown,
}

/// Submits requests to a [`Scheduler`] from any thread.
#[derive(Clone)]
pub struct Client {
    sender: Sender<Message>,
    wake: Arc<OwnedFd>,
    default_file: Option<SchedFile>,
    slots: Arc<Mutex<Slots>>,
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
        self.send(io, ReplyTo::Channel(reply.clone()))
    }

    /// Submits `io`; `then` is called with its completion on the scheduler's engine thread,
    /// as soon as the device is done (no other thread need wake up to pass it on). `then`
    /// should be short: the engine issues nothing while it runs.
    pub fn submit_then(
        &self,
        io: IoRequest,
        then: impl FnOnce(Completion) + Send + 'static,
    ) -> Result<(), SubmitError> {
        self.send(io, ReplyTo::Call(Box::new(then)))
    }

    fn send(&self, mut io: IoRequest, reply: ReplyTo) -> Result<(), SubmitError> {
        if io.file.is_none() {
            io.file = Some(self.default_file.clone().ok_or(SubmitError::NoFile)?);
        }
        let direct = io.file.as_ref().is_some_and(SchedFile::direct);
        if io.op != Op::Flush {
            if io.len == 0 {
                return Err(SubmitError::Empty);
            }
            if direct && (!io.offset.is_multiple_of(512) || !io.len.is_multiple_of(512)) {
                return Err(SubmitError::Unaligned {
                    offset: io.offset,
                    len: io.len,
                });
            }
            match io.offset.checked_add(io.len) {
                Some(end) if end <= FILE_SPAN => {}
                end => {
                    return Err(SubmitError::TooFar {
                        end: end.unwrap_or(u64::MAX),
                    })
                }
            }
        }
        Groups::normalize(&io.group).map_err(|e| SubmitError::BadGroup(e.to_string()))?;
        self.sender
            .send(Message::Submit {
                io,
                reply,
                at: Instant::now(),
            })
            .map_err(|_| SubmitError::Closed)?;
        self.wake();
        Ok(())
    }

    /// Registers an open file or device (read and write, `O_DIRECT` if `direct`, as it was
    /// opened) for requests to name with [`IoRequest::on`].
    pub fn register(&self, file: File, direct: bool) -> Result<SchedFile, SubmitError> {
        let slot = self
            .slots
            .lock()
            .map_err(|_| SubmitError::Closed)?
            .take()
            .ok_or(SubmitError::TooManyFiles)?;
        Ok(SchedFile(Arc::new(FileInner {
            file,
            direct,
            range: Arc::new(Range {
                slot,
                slots: self.slots.clone(),
            }),
        })))
    }

    /// Registers another descriptor of the file `of` names (opened with or without
    /// `O_DIRECT`, by another process's handle...): its requests share `of`'s range of the
    /// scheduler's address space, so the policy sees one file, sorts and merges them with
    /// `of`'s (a merged command goes out on a descriptor without `O_DIRECT` if any of its
    /// requests came on one).
    pub fn register_alias(&self, of: &SchedFile, file: File, direct: bool) -> SchedFile {
        SchedFile(Arc::new(FileInner {
            file,
            direct,
            range: of.0.range.clone(),
        }))
    }

    /// Replaces the groups' io controller settings (as
    /// [`SchedulerConfig::group_settings`]); the policy and its stage act on them from the
    /// next request on. Refused settings change nothing and come back as the error.
    pub fn set_groups(&self, settings: Vec<GroupSetting>) -> Result<(), String> {
        let (reply, answer) = mpsc::channel();
        self.sender
            .send(Message::Groups { settings, reply })
            .map_err(|_| SubmitError::Closed.to_string())?;
        self.wake();
        answer.recv().map_err(|_| SubmitError::Closed.to_string())?
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
    /// Opens `path` (which must exist) under the policy `config.policy` (or a stack,
    /// `STAGE+POLICY`); requests without [`IoRequest::on`] go to it.
    pub fn open(path: impl AsRef<Path>, config: SchedulerConfig) -> Result<Self, UringError> {
        let mut scheduler = Self::start(config.clone())?;
        scheduler.open_default(path.as_ref(), config.direct)?;
        Ok(scheduler)
    }

    /// Opens `path` under `policy` (any [`Policy`]; `config.policy` is not used).
    pub fn with_policy(
        path: impl AsRef<Path>,
        config: SchedulerConfig,
        policy: Box<dyn Policy>,
    ) -> Result<Self, UringError> {
        let direct = config.direct;
        let mut scheduler = Self::spawn(config, policy, None)?;
        scheduler.open_default(path.as_ref(), direct)?;
        Ok(scheduler)
    }

    /// Starts the scheduler with no file of its own: requests name theirs
    /// ([`Client::register`], [`IoRequest::on`]), any number of files under one policy.
    pub fn start(config: SchedulerConfig) -> Result<Self, UringError> {
        let stack =
            policies::Stack::parse(&config.policy).map_err(|e| UringError::new(e.to_string()))?;
        let policy = (stack.policy.build)();
        let stage = stack.stage.and_then(iosched_core::stage::build);
        Self::spawn(config, policy, stage)
    }

    fn open_default(&mut self, path: &Path, direct: bool) -> Result<(), UringError> {
        let (file, size) = open_for_scheduler(path, direct)?;
        let file = self
            .client
            .register(file, direct)
            .map_err(|e| UringError::new(e.to_string()))?;
        self.client.default_file = Some(file);
        self.size = size;
        Ok(())
    }

    fn spawn(
        config: SchedulerConfig,
        policy: Box<dyn Policy>,
        stage: Option<Box<dyn Stage>>,
    ) -> Result<Self, UringError> {
        let depth = config.device_depth.max(1);
        let mut elevator = Elevator::new(policy, default_nr_requests(depth));
        if let Some(stage) = stage {
            elevator = elevator.with_stage(stage);
        }
        policies::apply_settings(&mut elevator, &config.settings)
            .map_err(|e| UringError::new(e.to_string()))?;
        let mut groups = Groups::new();
        groups
            .apply(&config.group_settings)
            .map_err(UringError::new)?;
        elevator.set_groups(&groups);
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
                        receiver,
                        wake,
                        stats,
                        pending: IdMap::default(),
                        groups,
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
                default_file: None,
                slots: Arc::default(),
            },
            stats,
            thread: Some(thread),
            size: 0,
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

    /// Registers a file (see [`Client::register`]).
    pub fn register(&self, file: File, direct: bool) -> Result<SchedFile, SubmitError> {
        self.client.register(file, direct)
    }

    /// Size of the file or device in bytes, when it was opened (0 for [`Scheduler::start`]).
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
    reply: ReplyTo,
    at: Instant,
    file: SchedFile,
    tag: u64,
    to_eof: bool,
}

struct EngineThread {
    core: Core,
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
                    Ok(Message::Groups { settings, reply }) => {
                        let _ = reply.send(self.set_groups(&settings));
                    }
                    Ok(Message::Shutdown) | Err(TryRecvError::Disconnected) => {
                        shutting_down = true;
                        break;
                    }
                    Err(TryRecvError::Empty) => break,
                }
            }
            self.core.admit_blocked(now, &mut admitted);
            admitted.clear();
            let pending = &self.pending;
            self.core.dispatch(now, |id| target(pending, id))?;
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

    fn set_groups(&mut self, settings: &[GroupSetting]) -> Result<(), String> {
        // Settings replace the last ones; the groups requests named stay (as their ids do).
        let mut groups = Groups::new();
        for id in self.groups.ids() {
            groups
                .intern(self.groups.path(id))
                .map_err(|e| e.to_string())?;
        }
        groups.apply(settings)?;
        self.groups = groups;
        self.core.elevator.set_groups(&self.groups);
        Ok(())
    }

    fn accept(&mut self, io: IoRequest, reply: ReplyTo, at: Instant, now: Nanos) {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        let known = self.groups.len();
        let group = self
            .groups
            .intern(&io.group)
            .expect("the client checked the path");
        if self.groups.len() != known {
            // The policy places a group it has not been told of under the root.
            self.core.elevator.set_groups(&self.groups);
        }
        let file = io.file.expect("the client names the file");
        // io.prio.class of the group changes the priority (blk-ioprio).
        let prio = self.groups.settings(group).prio_class.apply(io.prio);
        let request = Request::new(
            id,
            io.op,
            file.base() + io.offset,
            io.len,
            true,
            prio,
            io.flow,
            group,
            now,
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
                file,
                tag: io.tag,
                to_eof: io.to_eof,
            },
        );
        if let Ok(mut stats) = self.stats.lock() {
            stats.submitted += 1;
        }
        self.core.submit(request);
    }

    fn complete(&mut self, done: Finished) {
        for id in std::iter::once(done.request.id).chain(done.request.merged.iter().copied()) {
            let Some(pending) = self.pending.remove(&id.0) else {
                continue;
            };
            let latency = pending.at.elapsed();
            let (result, transferred) = match done.error {
                // A read up to the end of the file got what lies before it.
                Some((Failure::EndOfFile, at)) if pending.to_eof => {
                    (Ok(()), at.saturating_sub(pending.offset).min(pending.len))
                }
                Some((failure, _)) => (Err(std::io::Error::from_raw_os_error(failure.errno())), 0),
                None => (Ok(()), pending.len),
            };
            if let Ok(mut stats) = self.stats.lock() {
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
            // The request lets go of its file before anyone hears of its completion, so a
            // caller that drops its last handle then knows the file is closed.
            drop(pending.file);
            pending.reply.deliver(Completion {
                op: pending.op,
                offset: pending.offset,
                len: pending.len,
                result,
                data: pending.data,
                latency,
                tag: pending.tag,
                transferred,
            });
        }
        if let Ok(mut stats) = self.stats.lock() {
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

fn target(pending: &IdMap<Pending>, id: RequestId) -> Target {
    let request = &pending[&id.0];
    Target {
        fd: request.file.file().as_raw_fd(),
        fixed_file: None,
        buffered: !request.file.direct(),
        buf: request
            .data
            .as_ref()
            .map_or(std::ptr::null_mut(), |data| data.raw()),
        fixed_buffer: None,
        offset: request.offset,
        len: request.len,
        sync_range: None,
        short_ok: request.to_eof && request.op == Op::Read,
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

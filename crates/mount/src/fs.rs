//! The passthrough file system: FUSE operations on the backing directory.
//!
//! Every inode the kernel knows is an `O_PATH` descriptor of the backing file (as libfuse's
//! `passthrough_ll` keeps them), so names are resolved by the backing file system
//! (`openat`, `renameat2`, `unlinkat` relative to the parent's descriptor) and a rename
//! behind our back changes nothing. Metadata operations are system calls made at once, on
//! the FUSE thread. Reads, writes and fsyncs go to the [`Client`] of the mount's scheduler,
//! classified by their caller, and are answered on the scheduler's engine thread
//! ([`Shared::complete`]) when the device is done: a write is acknowledged only once the
//! backing file has it.
//!
//! Each open file has two descriptors of the backing file: one with `O_DIRECT` (when the
//! backing file system supports it, reported by `statx`'s `STATX_DIOALIGN`) for requests
//! aligned to its direct I/O alignment, and one without for the others (FUSE's direct I/O
//! mode hands over the caller's own offsets and sizes, which need not be aligned).

use crate::classify::{Caller, Classifier};
use crate::stats::{Kind, Stats};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use iosched_core::group::GroupSetting;
use iosched_core::Groups;
use iosched_uring::{AlignedBuf, Client, Completion, IoRequest, SchedFile, WeakSchedFile};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The control directory at the mount's root.
pub const CONTROL_DIR: &str = ".iosched";
/// Its files.
const CONTROL_FILES: [(&str, u64); 2] = [("stats", CTL_STATS), ("stats.json", CTL_JSON)];
const CTL_DIR: u64 = 2;
const CTL_STATS: u64 = 3;
const CTL_JSON: u64 = 4;
/// The first inode number given to a backing file.
const FIRST_INO: u64 = 16;
/// Most processes given a flow id at once.
const FLOWS_MAX: usize = 65536;

/// How the file system behaves.
#[derive(Clone, Debug)]
pub struct FsOptions {
    /// Keep the kernel's page cache (no FUSE direct I/O).
    pub cached: bool,
    /// Open backing files with `O_DIRECT` where the request's alignment allows.
    pub direct_backing: bool,
    /// How long the kernel may keep names and attributes.
    pub ttl: Duration,
}

struct Inode {
    fd: OwnedFd,
    key: (u64, u64),
    nlookup: u64,
    /// A descriptor of the file registered with the scheduler, while one is open: every
    /// open of the inode shares its range of the scheduler's address space, so the policy
    /// sees one file whichever process or descriptor a request comes on.
    anchor: WeakSchedFile,
}

#[derive(Default)]
struct Inodes {
    by_ino: HashMap<u64, Inode>,
    by_key: HashMap<(u64, u64), u64>,
    next: u64,
}

/// A directory entry as an open directory handle lists it: inode, kind, name.
type DirEntry = (u64, FileType, OsString);

struct Handle {
    direct: Option<(SchedFile, u64)>,
    buffered: SchedFile,
}

impl Handle {
    /// The descriptor for a request at `offset` of `len` bytes.
    fn file_for(&self, offset: u64, len: u64) -> &SchedFile {
        match &self.direct {
            Some((file, align)) if offset.is_multiple_of(*align) && len.is_multiple_of(*align) => {
                file
            }
            _ => &self.buffered,
        }
    }
}

enum Waiting {
    Read(ReplyData),
    Write(ReplyWrite),
    Fsync(ReplyEmpty),
}

struct Outstanding {
    reply: Waiting,
    caller: Caller,
    started: Instant,
}

/// What the FUSE threads and the completion thread share.
pub struct Shared {
    /// Per-flow statistics.
    pub stats: Mutex<Stats>,
    outstanding: Mutex<HashMap<u64, Outstanding>>,
}

impl Shared {
    /// Statistics titled `title`, nothing outstanding.
    pub fn new(title: String, started: Instant) -> Self {
        Shared {
            stats: Mutex::new(Stats::new(title, started)),
            outstanding: Mutex::new(HashMap::new()),
        }
    }

    /// Answers the FUSE request behind a completion, and counts it.
    pub fn complete(&self, done: Completion) {
        let Some(waiting) = lock(&self.outstanding).remove(&done.tag) else {
            return;
        };
        let now = Instant::now();
        let ok = done.result.is_ok();
        let kind = match waiting.reply {
            Waiting::Read(reply) => {
                match (&done.result, &done.data) {
                    (Ok(()), Some(data)) => reply.data(&data[..done.transferred as usize]),
                    (Ok(()), None) => reply.data(&[]),
                    (Err(error), _) => reply.error(errno(error)),
                }
                Kind::Read
            }
            Waiting::Write(reply) => {
                match &done.result {
                    Ok(()) => reply.written(done.transferred as u32),
                    Err(error) => reply.error(errno(error)),
                }
                Kind::Write
            }
            Waiting::Fsync(reply) => {
                match &done.result {
                    Ok(()) => reply.ok(),
                    Err(error) => reply.error(errno(error)),
                }
                Kind::Fsync
            }
        };
        lock(&self.stats).record(
            &waiting.caller,
            kind,
            done.transferred,
            now.duration_since(waiting.started),
            ok,
            now,
        );
    }
}

fn errno(error: &std::io::Error) -> Errno {
    Errno::from_i32(error.raw_os_error().unwrap_or(libc::EIO))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Keeps the mount's groups' settings: what the command line gave, over what the kernel's
/// cgroup files say for each cgroup a caller was seen in.
pub struct GroupSync {
    explicit: Vec<GroupSetting>,
    kernel: Option<(crate::cgroupfs::Hierarchies, String)>,
    known: Mutex<BTreeMap<String, Vec<GroupSetting>>>,
    client: Client,
}

impl GroupSync {
    /// `explicit` settings always; with `kernel` (the hierarchies and the backing device's
    /// `MAJ:MIN`), each seen cgroup's own files too.
    pub fn new(
        explicit: Vec<GroupSetting>,
        kernel: Option<(crate::cgroupfs::Hierarchies, String)>,
        client: Client,
    ) -> Self {
        GroupSync {
            explicit,
            kernel,
            known: Mutex::new(BTreeMap::new()),
            client,
        }
    }

    /// Notes that a caller in `path` was seen; reads its files the first time.
    pub fn see(&self, path: &str) {
        if self.kernel.is_none() || lock(&self.known).contains_key(path) {
            return;
        }
        let settings = self.read(path);
        lock(&self.known).insert(path.to_string(), settings);
        self.push();
    }

    /// Re-reads every known cgroup's files, and hands the settings over if they changed.
    pub fn refresh(&self) {
        if self.kernel.is_none() {
            return;
        }
        let paths: Vec<String> = lock(&self.known).keys().cloned().collect();
        let mut changed = false;
        for path in paths {
            let settings = self.read(&path);
            let mut known = lock(&self.known);
            if known.get(&path) != Some(&settings) {
                known.insert(path, settings);
                changed = true;
            }
        }
        if changed {
            self.push();
        }
    }

    fn read(&self, path: &str) -> Vec<GroupSetting> {
        let Some((hierarchies, dev)) = &self.kernel else {
            return Vec::new();
        };
        hierarchies
            .settings(path, dev)
            .into_iter()
            .filter(|setting| {
                // A value our groups refuse (or a path too deep) is left out, not fatal.
                let mut groups = Groups::new();
                match groups.apply(std::slice::from_ref(setting)) {
                    Ok(()) => true,
                    Err(error) => {
                        eprintln!("iosched: mount: ignoring {}: {error}", setting.origin);
                        false
                    }
                }
            })
            .collect()
    }

    fn push(&self) {
        let mut settings: Vec<GroupSetting> =
            lock(&self.known).values().flatten().cloned().collect();
        settings.extend(self.explicit.iter().cloned());
        if let Err(error) = self.client.set_groups(settings) {
            eprintln!("iosched: mount: group settings refused: {error}");
        }
    }
}

/// The passthrough file system.
pub struct Passthrough {
    options: FsOptions,
    inodes: Mutex<Inodes>,
    files: Mutex<HashMap<u64, Arc<Handle>>>,
    dirs: Mutex<HashMap<u64, Arc<Vec<DirEntry>>>>,
    control: Mutex<HashMap<u64, Arc<Vec<u8>>>>,
    next_fh: AtomicU64,
    next_tag: AtomicU64,
    client: Client,
    shared: Arc<Shared>,
    classifier: Mutex<Classifier>,
    flows: Mutex<HashMap<u32, (u32, Instant)>>,
    next_flow: AtomicU64,
    groups: Arc<GroupSync>,
    owner_is_root: bool,
}

impl Passthrough {
    /// A file system over the open backing directory `root`.
    pub fn new(
        root: File,
        options: FsOptions,
        client: Client,
        shared: Arc<Shared>,
        groups: Arc<GroupSync>,
    ) -> std::io::Result<Self> {
        let fd = OwnedFd::from(root);
        let st = stat_fd(fd.as_raw_fd())?;
        let mut inodes = Inodes {
            next: FIRST_INO,
            ..Inodes::default()
        };
        let key = (st.st_dev, st.st_ino);
        inodes.by_key.insert(key, INodeNo::ROOT.0);
        inodes.by_ino.insert(
            INodeNo::ROOT.0,
            Inode {
                fd,
                key,
                nlookup: 1,
                anchor: WeakSchedFile::default(),
            },
        );
        Ok(Passthrough {
            options,
            inodes: Mutex::new(inodes),
            files: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            control: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            next_tag: AtomicU64::new(1),
            client,
            shared,
            classifier: Mutex::new(Classifier::new()),
            flows: Mutex::new(HashMap::new()),
            next_flow: AtomicU64::new(1),
            groups,
            // SAFETY: geteuid has no preconditions.
            owner_is_root: unsafe { libc::geteuid() } == 0,
        })
    }

    /// The `O_PATH` descriptor of inode `ino` (duplicated, so it outlives a forget).
    fn fd(&self, ino: INodeNo) -> Result<OwnedFd, Errno> {
        let inodes = lock(&self.inodes);
        let inode = inodes.by_ino.get(&ino.0).ok_or(Errno::ESTALE)?;
        inode.fd.try_clone().map_err(Errno::from)
    }

    /// Looks `name` up under `parent` and counts the kernel's reference.
    fn lookup_entry(&self, parent: INodeNo, name: &OsStr) -> Result<FileAttr, Errno> {
        let parent_fd = self.fd(parent)?;
        let cname = cstring(name)?;
        let fd = open_at(
            parent_fd.as_raw_fd(),
            &cname,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )?;
        let st = stat_fd(fd.as_raw_fd()).map_err(Errno::from)?;
        let key = (st.st_dev, st.st_ino);
        let mut inodes = lock(&self.inodes);
        let ino = match inodes.by_key.get(&key).copied() {
            Some(ino) => {
                if let Some(inode) = inodes.by_ino.get_mut(&ino) {
                    inode.nlookup += 1;
                }
                ino
            }
            None => {
                let ino = inodes.next;
                inodes.next += 1;
                inodes.by_key.insert(key, ino);
                inodes.by_ino.insert(
                    ino,
                    Inode {
                        fd,
                        key,
                        nlookup: 1,
                        anchor: WeakSchedFile::default(),
                    },
                );
                ino
            }
        };
        Ok(attr(INodeNo(ino), &st))
    }

    fn reply_entry(&self, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.lookup_entry(parent, name) {
            Ok(attr) => reply.entry(&self.options.ttl, &attr, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    /// Gives a new file what the caller would own, as the kernel does for local files.
    fn chown_to_caller(&self, parent: RawFd, name: &CString, req: &Request) {
        if !self.owner_is_root {
            return;
        }
        // SAFETY: valid descriptor and name.
        unsafe {
            libc::fchownat(
                parent,
                name.as_ptr(),
                req.uid(),
                req.gid(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
    }

    fn caller(&self, req: &Request) -> (Caller, u32) {
        let now = Instant::now();
        let mut caller = lock(&self.classifier).classify(req.pid(), req.uid(), now);
        if Groups::normalize(&caller.cgroup).is_err() {
            caller.cgroup = "/".into();
        }
        self.groups.see(&caller.cgroup);
        let flow = {
            let mut flows = lock(&self.flows);
            if !flows.contains_key(&caller.pid) && flows.len() >= FLOWS_MAX {
                flows.retain(|_, (_, at)| now.duration_since(*at) < Duration::from_secs(60));
                if flows.len() >= FLOWS_MAX {
                    flows.clear();
                }
            }
            let next = &self.next_flow;
            let entry = flows
                .entry(caller.pid)
                .or_insert_with(|| (next.fetch_add(1, Ordering::Relaxed) as u32, now));
            entry.1 = now;
            entry.0
        };
        (caller, flow)
    }

    /// Sends `io` to the scheduler; the completion thread answers `reply`.
    fn submit(&self, req: &Request, io: IoRequest, reply: Waiting) {
        let (caller, flow) = self.caller(req);
        let tag = self.next_tag.fetch_add(1, Ordering::Relaxed);
        let io = io
            .flow(flow)
            .group(&caller.cgroup)
            .prio(caller.prio)
            .tag(tag);
        lock(&self.shared.outstanding).insert(
            tag,
            Outstanding {
                reply,
                caller,
                started: Instant::now(),
            },
        );
        // Answered on the engine thread as soon as the device is done.
        let shared = self.shared.clone();
        if let Err(error) = self
            .client
            .submit_then(io, move |done| shared.complete(done))
        {
            if let Some(waiting) = lock(&self.shared.outstanding).remove(&tag) {
                let errno = Errno::from_i32(error.errno());
                match waiting.reply {
                    Waiting::Read(reply) => reply.error(errno),
                    Waiting::Write(reply) => reply.error(errno),
                    Waiting::Fsync(reply) => reply.error(errno),
                }
            }
        }
    }

    fn handle(&self, fh: FileHandle) -> Option<Arc<Handle>> {
        lock(&self.files).get(&fh.0).cloned()
    }

    /// Opens the backing file of inode `ino` (whose `O_PATH` descriptor is `path_fd`) for
    /// I/O with the caller's `flags`.
    fn open_handle(&self, ino: INodeNo, path_fd: RawFd, flags: i32) -> Result<Handle, Errno> {
        let proc = proc_path(path_fd);
        let base = (flags
            & !(libc::O_CREAT
                | libc::O_EXCL
                | libc::O_NOCTTY
                | libc::O_NOFOLLOW
                | libc::O_APPEND
                | libc::O_DIRECT))
            | libc::O_CLOEXEC;
        let buffered = File::from(open_path(&proc, base)?);
        let direct = if !self.options.cached && self.options.direct_backing {
            dio_align(buffered.as_raw_fd()).and_then(|align| {
                let fd = open_path(&proc, (base & !libc::O_TRUNC) | libc::O_DIRECT).ok()?;
                Some((File::from(fd), align))
            })
        } else {
            None
        };
        let mut inodes = lock(&self.inodes);
        let inode = inodes.by_ino.get_mut(&ino.0);
        let buffered = match inode.as_ref().and_then(|inode| inode.anchor.upgrade()) {
            Some(anchor) => self.client.register_alias(&anchor, buffered, false),
            None => {
                let file = self
                    .client
                    .register(buffered, false)
                    .map_err(|e| Errno::from_i32(e.errno()))?;
                if let Some(inode) = inode {
                    inode.anchor = file.downgrade();
                }
                file
            }
        };
        let direct =
            direct.map(|(file, align)| (self.client.register_alias(&buffered, file, true), align));
        Ok(Handle { direct, buffered })
    }

    fn open_flags(&self) -> FopenFlags {
        if self.options.cached {
            FopenFlags::empty()
        } else {
            FopenFlags::FOPEN_DIRECT_IO
        }
    }

    fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    fn control_attr(ino: u64) -> FileAttr {
        let dir = ino == CTL_DIR;
        let now = SystemTime::now();
        FileAttr {
            ino: INodeNo(ino),
            size: 0,
            blocks: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            kind: if dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: if dir { 0o555 } else { 0o444 },
            nlink: if dir { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn control_text(&self, ino: u64) -> Vec<u8> {
        let stats = lock(&self.shared.stats);
        let now = Instant::now();
        if ino == CTL_JSON {
            let mut text = serde_json::to_vec_pretty(&stats.json(now)).unwrap_or_default();
            text.push(b'\n');
            text
        } else {
            stats.text(now).into_bytes()
        }
    }
}

impl Filesystem for Passthrough {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Asynchronous direct I/O lets a caller's aio or io_uring keep many requests in
        // flight; the background limit bounds how many the kernel sends us at once.
        let _ = config.add_capabilities(
            fuser::InitFlags::FUSE_ASYNC_DIO | fuser::InitFlags::FUSE_PARALLEL_DIROPS,
        );
        let _ = config.set_max_background(256);
        let _ = config.set_congestion_threshold(192);
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent == INodeNo::ROOT && name == CONTROL_DIR {
            return reply.entry(
                &self.options.ttl,
                &Self::control_attr(CTL_DIR),
                Generation(0),
            );
        }
        if parent.0 == CTL_DIR {
            return match CONTROL_FILES.iter().find(|(n, _)| name == *n) {
                Some(&(_, ino)) => {
                    reply.entry(&Duration::ZERO, &Self::control_attr(ino), Generation(0))
                }
                None => reply.error(Errno::ENOENT),
            };
        }
        self.reply_entry(parent, name, reply);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if ino == INodeNo::ROOT || ino.0 < FIRST_INO {
            return;
        }
        let mut inodes = lock(&self.inodes);
        let gone = match inodes.by_ino.get_mut(&ino.0) {
            Some(inode) => {
                inode.nlookup = inode.nlookup.saturating_sub(nlookup);
                inode.nlookup == 0
            }
            None => false,
        };
        if gone {
            if let Some(inode) = inodes.by_ino.remove(&ino.0) {
                inodes.by_key.remove(&inode.key);
            }
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if (2..FIRST_INO).contains(&ino.0) {
            return reply.attr(&Duration::ZERO, &Self::control_attr(ino.0));
        }
        let result = self
            .fd(ino)
            .and_then(|fd| stat_fd(fd.as_raw_fd()).map_err(Errno::from));
        match result {
            Ok(st) => reply.attr(&self.options.ttl, &attr(ino, &st)),
            Err(error) => reply.error(error),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if ino.0 < FIRST_INO && ino != INodeNo::ROOT {
            return reply.error(Errno::EACCES);
        }
        let result = (|| -> Result<libc::stat64, Errno> {
            let fd = self.fd(ino)?;
            let st = stat_fd(fd.as_raw_fd()).map_err(Errno::from)?;
            let symlink = st.st_mode & libc::S_IFMT == libc::S_IFLNK;
            let proc = cstring(OsStr::new(&proc_path(fd.as_raw_fd())))?;
            if let Some(mode) = mode {
                if !symlink {
                    // SAFETY: a NUL-terminated path.
                    check(unsafe { libc::chmod(proc.as_ptr(), mode & 0o7777) })?;
                }
            }
            if uid.is_some() || gid.is_some() {
                // SAFETY: a valid descriptor and an empty path with AT_EMPTY_PATH.
                check(unsafe {
                    libc::fchownat(
                        fd.as_raw_fd(),
                        c"".as_ptr(),
                        uid.unwrap_or(u32::MAX),
                        gid.unwrap_or(u32::MAX),
                        libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
                    )
                })?;
            }
            if let Some(size) = size {
                let handle = fh.and_then(|fh| self.handle(fh));
                let size = i64::try_from(size).map_err(|_| Errno::EFBIG)?;
                match handle {
                    // SAFETY: an open descriptor.
                    Some(handle) => check(unsafe {
                        libc::ftruncate64(handle.buffered.file().as_raw_fd(), size)
                    })?,
                    // SAFETY: a NUL-terminated path.
                    None => check(unsafe { libc::truncate64(proc.as_ptr(), size) })?,
                }
            }
            if (atime.is_some() || mtime.is_some()) && !symlink {
                let times = [timespec(atime), timespec(mtime)];
                // SAFETY: a NUL-terminated path and two timespecs.
                check(unsafe {
                    libc::utimensat(libc::AT_FDCWD, proc.as_ptr(), times.as_ptr(), 0)
                })?;
            }
            stat_fd(fd.as_raw_fd()).map_err(Errno::from)
        })();
        match result {
            Ok(st) => reply.attr(&self.options.ttl, &attr(ino, &st)),
            Err(error) => reply.error(error),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let result = self.fd(ino).and_then(|fd| {
            let mut buf = vec![0u8; libc::PATH_MAX as usize];
            // SAFETY: the buffer is as long as we say.
            let n = unsafe {
                libc::readlinkat(
                    fd.as_raw_fd(),
                    c"".as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n < 0 {
                return Err(last_errno());
            }
            buf.truncate(n as usize);
            Ok(buf)
        });
        match result {
            Ok(target) => reply.data(&target),
            Err(error) => reply.error(error),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.make(req, parent, name, reply, |dir, name| {
            // SAFETY: valid descriptor and name.
            unsafe { libc::mknodat(dir, name.as_ptr(), mode & !umask, libc::dev_t::from(rdev)) }
        });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.make(req, parent, name, reply, |dir, name| {
            // SAFETY: valid descriptor and name.
            unsafe { libc::mkdirat(dir, name.as_ptr(), mode & !umask) }
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_result(reply, self.unlink_at(parent, name, 0));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_result(reply, self.unlink_at(parent, name, libc::AT_REMOVEDIR));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        let Ok(target) = cstring(target.as_os_str()) else {
            return reply.error(Errno::EINVAL);
        };
        self.make(req, parent, link_name, reply, |dir, name| {
            // SAFETY: valid descriptor and names.
            unsafe { libc::symlinkat(target.as_ptr(), dir, name.as_ptr()) }
        });
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if (parent == INodeNo::ROOT && name == CONTROL_DIR)
            || (newparent == INodeNo::ROOT && newname == CONTROL_DIR)
        {
            return reply.error(Errno::EACCES);
        }
        let result = (|| {
            let from = self.fd(parent)?;
            let to = self.fd(newparent)?;
            let (cname, cnew) = (cstring(name)?, cstring(newname)?);
            // SAFETY: valid descriptors and names.
            check(unsafe {
                libc::renameat2(
                    from.as_raw_fd(),
                    cname.as_ptr(),
                    to.as_raw_fd(),
                    cnew.as_ptr(),
                    flags.bits(),
                )
            })
        })();
        reply_result(reply, result);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let result = (|| {
            let fd = self.fd(ino)?;
            let to = self.fd(newparent)?;
            let cnew = cstring(newname)?;
            let proc = cstring(OsStr::new(&proc_path(fd.as_raw_fd())))?;
            // SAFETY: valid descriptors and names; following /proc's link reaches the inode.
            check(unsafe {
                libc::linkat(
                    libc::AT_FDCWD,
                    proc.as_ptr(),
                    to.as_raw_fd(),
                    cnew.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            })
        })();
        match result {
            Ok(()) => self.reply_entry(newparent, newname, reply),
            Err(error) => reply.error(error),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if (2..FIRST_INO).contains(&ino.0) {
            if ino.0 == CTL_DIR {
                return reply.error(Errno::EISDIR);
            }
            if flags.0 & libc::O_ACCMODE != libc::O_RDONLY {
                return reply.error(Errno::EACCES);
            }
            let fh = self.new_fh();
            lock(&self.control).insert(fh, Arc::new(self.control_text(ino.0)));
            return reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
        }
        let result = self
            .fd(ino)
            .and_then(|fd| self.open_handle(ino, fd.as_raw_fd(), flags.0));
        match result {
            Ok(handle) => {
                let fh = self.new_fh();
                lock(&self.files).insert(fh, Arc::new(handle));
                reply.opened(FileHandle(fh), self.open_flags());
            }
            Err(error) => reply.error(error),
        }
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if let Some(text) = lock(&self.control).get(&fh.0).cloned() {
            let start = (offset as usize).min(text.len());
            let end = (start + size as usize).min(text.len());
            return reply.data(&text[start..end]);
        }
        let Some(handle) = self.handle(fh) else {
            return reply.error(Errno::EBADF);
        };
        if size == 0 {
            return reply.data(&[]);
        }
        let file = handle.file_for(offset, u64::from(size));
        let io = IoRequest::read(offset, u64::from(size))
            .on(file)
            .up_to_eof();
        self.submit(req, io, Waiting::Read(reply));
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(handle) = self.handle(fh) else {
            return reply.error(if lock(&self.control).contains_key(&fh.0) {
                Errno::EACCES
            } else {
                Errno::EBADF
            });
        };
        if data.is_empty() {
            return reply.written(0);
        }
        let file = handle.file_for(offset, data.len() as u64);
        let io = IoRequest::write_buf(offset, AlignedBuf::from_slice(data)).on(file);
        self.submit(req, io, Waiting::Write(reply));
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // A close(2): the daemon holds no data (a write is answered once the backing file
        // has it), so there is nothing to push; fsync is what makes data durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Requests in flight keep their own handles on the backing file.
        lock(&self.files).remove(&fh.0);
        lock(&self.control).remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let Some(handle) = self.handle(fh) else {
            return reply.error(Errno::EBADF);
        };
        // fsync(2) of any descriptor of the file makes all its data durable.
        let io = IoRequest::flush().on(&handle.buffered);
        self.submit(req, io, Waiting::Fsync(reply));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let result = (|| -> Result<Vec<DirEntry>, Errno> {
            let mut entries = vec![
                (ino.0, FileType::Directory, OsString::from(".")),
                (ino.0, FileType::Directory, OsString::from("..")),
            ];
            if ino.0 == CTL_DIR {
                for (name, file) in CONTROL_FILES {
                    entries.push((file, FileType::RegularFile, name.into()));
                }
                return Ok(entries);
            }
            let fd = self.fd(ino)?;
            if ino == INodeNo::ROOT {
                entries.push((CTL_DIR, FileType::Directory, CONTROL_DIR.into()));
            }
            let listing = std::fs::read_dir(proc_path(fd.as_raw_fd())).map_err(Errno::from)?;
            for entry in listing {
                use std::os::unix::fs::DirEntryExt;
                let entry = entry.map_err(Errno::from)?;
                let name = entry.file_name();
                if ino == INodeNo::ROOT && name == CONTROL_DIR {
                    continue; // Shadowed by the control directory.
                }
                let kind = entry
                    .file_type()
                    .ok()
                    .and_then(FileType::from_std)
                    .unwrap_or(FileType::RegularFile);
                entries.push((entry.ino(), kind, name));
            }
            Ok(entries)
        })();
        match result {
            Ok(entries) => {
                let fh = self.new_fh();
                lock(&self.dirs).insert(fh, Arc::new(entries));
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Err(error) => reply.error(error),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(entries) = lock(&self.dirs).get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        for (index, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), index as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.dirs).remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let result = self.fd(ino).and_then(|fd| {
            let dir = open_path(&proc_path(fd.as_raw_fd()), libc::O_RDONLY | libc::O_CLOEXEC)?;
            // SAFETY: an open descriptor.
            check(unsafe {
                if datasync {
                    libc::fdatasync(dir.as_raw_fd())
                } else {
                    libc::fsync(dir.as_raw_fd())
                }
            })
        });
        reply_result(reply, result);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let result = self.fd(INodeNo::ROOT).and_then(|fd| {
            let proc = cstring(OsStr::new(&proc_path(fd.as_raw_fd())))?;
            // SAFETY: zeroed plain data filled by the call.
            let mut st: libc::statvfs64 = unsafe { std::mem::zeroed() };
            // SAFETY: a NUL-terminated path and a valid out pointer.
            check(unsafe { libc::statvfs64(proc.as_ptr(), &mut st) })?;
            Ok(st)
        });
        match result {
            Ok(st) => reply.statfs(
                st.f_blocks,
                st.f_bfree,
                st.f_bavail,
                st.f_files,
                st.f_ffree,
                st.f_bsize as u32,
                st.f_namemax as u32,
                st.f_frsize as u32,
            ),
            Err(error) => reply.error(error),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        if parent == INodeNo::ROOT && name == CONTROL_DIR {
            return reply.error(Errno::EEXIST);
        }
        let result = (|| {
            let parent_fd = self.fd(parent)?;
            let cname = cstring(name)?;
            // Create it (and see O_EXCL refused as the caller would); I/O goes through the
            // handle's own descriptors.
            drop(open_at(
                parent_fd.as_raw_fd(),
                &cname,
                (flags & !libc::O_DIRECT) | libc::O_CREAT | libc::O_CLOEXEC,
                mode & !umask,
            )?);
            self.chown_to_caller(parent_fd.as_raw_fd(), &cname, req);
            let attr = self.lookup_entry(parent, name)?;
            let fd = self.fd(attr.ino)?;
            let handle = self.open_handle(
                attr.ino,
                fd.as_raw_fd(),
                flags & !(libc::O_TRUNC | libc::O_EXCL),
            )?;
            Ok((attr, handle))
        })();
        match result {
            Ok((attr, handle)) => {
                let fh = self.new_fh();
                lock(&self.files).insert(fh, Arc::new(handle));
                reply.created(
                    &self.options.ttl,
                    &attr,
                    Generation(0),
                    FileHandle(fh),
                    self.open_flags(),
                );
            }
            Err(error) => reply.error(error),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let result = self.xattr_path(ino).and_then(|(_fd, path)| {
            let cname = cstring(name)?;
            let mut buf = vec![0u8; size as usize];
            // SAFETY: the buffer is as long as we say (a size of 0 asks for the length).
            let n = unsafe {
                libc::getxattr(
                    path.as_ptr(),
                    cname.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n < 0 {
                return Err(last_errno());
            }
            buf.truncate(n as usize);
            Ok((n as usize, buf))
        });
        reply_xattr(reply, size, result);
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let result = self.xattr_path(ino).and_then(|(_fd, path)| {
            let mut buf = vec![0u8; size as usize];
            // SAFETY: the buffer is as long as we say (a size of 0 asks for the length).
            let n = unsafe { libc::listxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                return Err(last_errno());
            }
            buf.truncate(n as usize);
            Ok((n as usize, buf))
        });
        reply_xattr(reply, size, result);
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let result = self.xattr_path(ino).and_then(|(_fd, path)| {
            let cname = cstring(name)?;
            // SAFETY: valid path, name and value.
            check(unsafe {
                libc::setxattr(
                    path.as_ptr(),
                    cname.as_ptr(),
                    value.as_ptr().cast(),
                    value.len(),
                    flags,
                )
            })
        });
        reply_result(reply, result);
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = self.xattr_path(ino).and_then(|(_fd, path)| {
            let cname = cstring(name)?;
            // SAFETY: valid path and name.
            check(unsafe { libc::removexattr(path.as_ptr(), cname.as_ptr()) })
        });
        reply_result(reply, result);
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some(handle) = self.handle(fh) else {
            return reply.error(Errno::EBADF);
        };
        let (Ok(offset), Ok(length)) = (i64::try_from(offset), i64::try_from(length)) else {
            return reply.error(Errno::EFBIG);
        };
        // SAFETY: an open descriptor.
        let result = check(unsafe {
            libc::fallocate64(handle.buffered.file().as_raw_fd(), mode, offset, length)
        });
        reply_result(reply, result);
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let Some(handle) = self.handle(fh) else {
            return reply.error(Errno::EBADF);
        };
        // SAFETY: an open descriptor (SEEK_DATA and SEEK_HOLE; the kernel does the others).
        let at = unsafe { libc::lseek64(handle.buffered.file().as_raw_fd(), offset, whence) };
        if at < 0 {
            reply.error(last_errno());
        } else {
            reply.offset(at);
        }
    }
}

impl Passthrough {
    /// The `/proc/self/fd` path that reaches inode `ino` for extended attributes: regular
    /// files and directories only (the path follows a symbolic link to its target, so a
    /// link's own attributes are not reachable, as in libfuse's passthrough_ll).
    fn xattr_path(&self, ino: INodeNo) -> Result<(OwnedFd, CString), Errno> {
        if (2..FIRST_INO).contains(&ino.0) {
            return Err(Errno::ENOTSUP);
        }
        let fd = self.fd(ino)?;
        let st = stat_fd(fd.as_raw_fd()).map_err(Errno::from)?;
        if !matches!(st.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFDIR) {
            return Err(Errno::ENOTSUP);
        }
        // The caller keeps the descriptor open while it uses the path.
        let path = cstring(OsStr::new(&proc_path(fd.as_raw_fd())))?;
        Ok((fd, path))
    }

    /// Makes `name` under `parent` with `make(parent's descriptor, name)` (mknodat, mkdirat,
    /// symlinkat), gives it to the caller, and answers with its entry.
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        reply: ReplyEntry,
        make: impl FnOnce(RawFd, &CString) -> libc::c_int,
    ) {
        if parent == INodeNo::ROOT && name == CONTROL_DIR {
            return reply.error(Errno::EEXIST);
        }
        let result = (|| {
            let parent_fd = self.fd(parent)?;
            let cname = cstring(name)?;
            check(make(parent_fd.as_raw_fd(), &cname))?;
            self.chown_to_caller(parent_fd.as_raw_fd(), &cname, req);
            Ok(())
        })();
        match result {
            Ok(()) => self.reply_entry(parent, name, reply),
            Err(error) => reply.error(error),
        }
    }

    fn unlink_at(&self, parent: INodeNo, name: &OsStr, flags: i32) -> Result<(), Errno> {
        if parent == INodeNo::ROOT && name == CONTROL_DIR {
            return Err(Errno::EACCES);
        }
        let parent_fd = self.fd(parent)?;
        let cname = cstring(name)?;
        // SAFETY: valid descriptor and name.
        check(unsafe { libc::unlinkat(parent_fd.as_raw_fd(), cname.as_ptr(), flags) })
    }
}

/// Answers an extended attribute request: its length when `size` is 0, else its bytes.
fn reply_xattr(reply: ReplyXattr, size: u32, result: Result<(usize, Vec<u8>), Errno>) {
    match result {
        Ok((len, _)) if size == 0 => reply.size(len as u32),
        Ok((_, data)) => reply.data(&data),
        Err(error) => reply.error(error),
    }
}

fn reply_result(reply: ReplyEmpty, result: Result<(), Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(error) => reply.error(error),
    }
}

fn last_errno() -> Errno {
    Errno::from(std::io::Error::last_os_error())
}

fn check(result: libc::c_int) -> Result<(), Errno> {
    if result < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

fn cstring(name: &OsStr) -> Result<CString, Errno> {
    CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)
}

fn proc_path(fd: RawFd) -> String {
    format!("/proc/self/fd/{fd}")
}

fn open_path(path: &str, flags: i32) -> Result<OwnedFd, Errno> {
    open_at(libc::AT_FDCWD, &cstring(OsStr::new(path))?, flags, 0)
}

/// `openat(dir, name, flags, mode)` as an owned descriptor.
fn open_at(dir: RawFd, name: &CString, flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
    // SAFETY: a NUL-terminated name; `dir` is open or AT_FDCWD.
    let raw = unsafe { libc::openat(dir, name.as_ptr(), flags, mode) };
    if raw < 0 {
        return Err(last_errno());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `fstatat(fd, "", AT_EMPTY_PATH)`: the inode itself, symlinks not followed.
fn stat_fd(fd: RawFd) -> std::io::Result<libc::stat64> {
    // SAFETY: zeroed plain data, filled by the call.
    let mut st: libc::stat64 = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor, an empty NUL-terminated path and an out pointer.
    let result = unsafe {
        libc::fstatat64(
            fd,
            c"".as_ptr(),
            &mut st,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if result < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// The alignment `O_DIRECT` needs on an open file (`statx`'s `STATX_DIOALIGN`), or `None`
/// when the file system does not do direct I/O (or needs a buffer alignment beyond ours).
fn dio_align(fd: RawFd) -> Option<u64> {
    // SAFETY: zeroed plain data, filled by the call.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor, an empty path with AT_EMPTY_PATH, an out pointer.
    let result = unsafe {
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if result < 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        // A kernel or file system that does not say: try with the page size, which every
        // block device accepts.
        return (result == 0).then_some(4096);
    }
    let (offset, memory) = (stx.stx_dio_offset_align, stx.stx_dio_mem_align);
    (offset > 0 && memory > 0 && memory <= 4096).then_some(u64::from(offset))
}

fn attr(ino: INodeNo, st: &libc::stat64) -> FileAttr {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    };
    FileAttr {
        ino,
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: system_time(st.st_atime, st.st_atime_nsec),
        mtime: system_time(st.st_mtime, st.st_mtime_nsec),
        ctime: system_time(st.st_ctime, st.st_ctime_nsec),
        crtime: UNIX_EPOCH,
        kind,
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

fn system_time(seconds: i64, nanos: i64) -> SystemTime {
    if seconds >= 0 {
        UNIX_EPOCH + Duration::new(seconds as u64, nanos as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(seconds.unsigned_abs())
            + Duration::from_nanos(nanos as u64)
    }
}

fn timespec(time: Option<TimeOrNow>) -> libc::timespec {
    match time {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(at)) => {
            let (sec, nsec) = match at.duration_since(UNIX_EPOCH) {
                Ok(since) => (since.as_secs() as i64, since.subsec_nanos() as i64),
                Err(before) => {
                    let d = before.duration();
                    (
                        -(d.as_secs() as i64) - 1,
                        1_000_000_000 - d.subsec_nanos() as i64,
                    )
                }
            };
            libc::timespec {
                tv_sec: sec,
                tv_nsec: nsec,
            }
        }
    }
}

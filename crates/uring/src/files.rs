//! The jobs' files on the real machine: found or created, laid out, opened.
//!
//! As fio does: a name that is a block device is the device (never created or extended); any
//! other name is a regular file, created when missing and extended when shorter than a job's
//! `offset + size`, by writing it out in full ("laying out"), so that reads touch real blocks
//! rather than holes. A job without `size=` covers the file (or device) from its offset to the
//! end; a missing file without `size=` is an error. Before the jobs run, each file's cached
//! pages are dropped (`POSIX_FADV_DONTNEED`), as fio's default `invalidate=1` does, so buffered
//! reads start cold.
//!
//! Each file gets a range of scheduler addresses (its *base* plus the file offset), files one
//! after another with a gap, so that the policy sorts requests of one file by offset and never
//! merges requests of two files.

use crate::buffer::{fill_pattern, SlotBuffers};
use crate::error::errno_text;
use crate::UringError;
use iosched_fio::job::Fadvise;
use iosched_fio::workload::Region;
use iosched_fio::{Amount, JobSpec};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Gap between two files' scheduler addresses, so that requests never look adjacent across
/// files; also their alignment.
const ADDRESS_GAP: u64 = 1 << 20;

/// Chunk written at a time when laying a file out.
const LAYOUT_CHUNK: usize = 1 << 20;

/// One distinct file (or device) the jobs use.
pub(crate) struct OpenFile {
    /// The name as the job file (or `--filename`) gives it.
    pub name: String,
    /// A block device rather than a regular file.
    pub block: bool,
    /// Size in bytes, after any layout.
    pub size: u64,
    /// First scheduler address of the file.
    pub base: u64,
    /// The block device holding it (or the device itself), as /sys/dev/block names it.
    pub device: Option<String>,
    /// Open descriptors by open flags.
    handles: Vec<(i32, File)>,
}

/// The zoned model of a block device ("host-managed" or "host-aware", as
/// /sys/block/DEV/queue/zoned says), or `None` for a regular file or a conventional device.
pub(crate) fn zoned_model(file: &OpenFile) -> Option<String> {
    if !file.block {
        return None;
    }
    let model = disk_attribute(file.device.as_ref()?, "queue/zoned")?;
    (model != "none").then_some(model)
}

/// The attribute at `path` under block device `device`'s sysfs directory, trimmed; for a
/// partition, whose directory has no queue, its disk's (one level up).
fn disk_attribute(device: &str, path: &str) -> Option<String> {
    [path.to_string(), format!("../{path}")]
        .iter()
        .find_map(|path| std::fs::read_to_string(format!("/sys/class/block/{device}/{path}")).ok())
        .map(|text| text.trim().to_string())
}

/// [`JobFile::file`] of an `ioengine=null` job's files, which are never opened.
pub(crate) const NO_FILE: usize = usize::MAX;

/// One file as one job uses it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct JobFile {
    /// Index in [`Files::files`].
    pub file: usize,
    /// The job's region, in file offsets.
    pub region: Region,
    /// The descriptor the job uses.
    pub fd: RawFd,
    /// Whether that descriptor is buffered (no `O_DIRECT`).
    pub buffered: bool,
    /// Its index among the ring's registered files, once registered.
    pub fixed: Option<u32>,
}

/// Every file, and each job's view of its files.
pub(crate) struct Files {
    /// Distinct files in the order jobs first name them.
    pub files: Vec<OpenFile>,
    /// For each job, its files in the order it names them.
    pub jobs: Vec<Vec<JobFile>>,
}

fn amount_bytes(amount: Amount, whole: u64) -> u64 {
    match amount {
        Amount::Bytes(bytes) => bytes,
        Amount::Percent(percent) => ((whole as f64) * percent / 100.0) as u64,
    }
}

/// The file names job `job` uses: `--filename` if given, else its own.
pub(crate) fn names(job: &JobSpec, filename: Option<&Path>) -> Vec<String> {
    match filename {
        Some(path) => vec![path.display().to_string()],
        None => job.filenames.clone(),
    }
}

/// What is at a path before the run.
enum Found {
    Missing,
    Regular(u64),
    Block,
}

fn inspect(job: &JobSpec, name: &str) -> Result<Found, UringError> {
    match std::fs::metadata(name) {
        Ok(metadata) if metadata.file_type().is_block_device() => Ok(Found::Block),
        Ok(metadata) if metadata.is_file() => Ok(Found::Regular(metadata.len())),
        Ok(metadata) if metadata.is_dir() => Err(UringError::job(
            job,
            format!("{name:?} is a directory; name a file or a block device in filename="),
        )),
        Ok(_) => Err(UringError::job(
            job,
            format!("{name:?} is neither a regular file nor a block device"),
        )),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Found::Missing),
        Err(error) => Err(UringError::job(
            job,
            format!("cannot look at {name:?}: {}", describe_io(&error)),
        )),
    }
}

fn describe_io(error: &std::io::Error) -> String {
    match error.raw_os_error() {
        Some(errno) => errno_text(errno),
        None => error.to_string(),
    }
}

/// The job's offset into a file of `whole` bytes (its clone's share of `offset_increment`
/// included).
fn job_offset(job: &JobSpec, whole: u64) -> u64 {
    amount_bytes(job.offset, whole) + u64::from(job.clone) * job.offset_increment
}

/// Finds, creates, lays out and opens every file of `jobs` (named as `names` says), and plans
/// each job's region. Layout notes go to `notes`.
pub(crate) fn prepare(
    jobs: &[JobSpec],
    filename: Option<&Path>,
    notes: &mut Vec<String>,
) -> Result<Files, UringError> {
    // Pass 1: every distinct name, what is there, and the size absolute sizes ask of it.
    let mut order: Vec<String> = Vec::new();
    let mut found: HashMap<String, Found> = HashMap::new();
    let mut needed: HashMap<String, (u64, usize)> = HashMap::new();
    for (index, job) in jobs.iter().enumerate() {
        if job.engine.is_null() {
            // fio's null engine is disk-less: its files are never opened.
            continue;
        }
        let job_names = names(job, filename);
        if job_names.is_empty() {
            return Err(UringError::job(job, "no filename"));
        }
        let count = job_names.len() as u64;
        for name in &job_names {
            if !found.contains_key(name) {
                found.insert(name.clone(), inspect(job, name)?);
                order.push(name.clone());
            }
            if let Some(Amount::Bytes(size)) = job.size {
                let want = job_offset(job, 0) + size / count;
                let entry = needed.entry(name.clone()).or_insert((0, index));
                if want > entry.0 {
                    *entry = (want, index);
                }
            }
        }
    }

    // Pass 2: create or extend regular files, measure devices, place every file.
    let mut files = Vec::with_capacity(order.len());
    let mut cursor = 0u64;
    for name in &order {
        let (want, asker) = needed.get(name).copied().unwrap_or((0, usize::MAX));
        let (block, size) = match found[name] {
            Found::Block => (true, device_size(name, jobs, filename)?),
            Found::Regular(size) if size >= want => (false, size),
            Found::Regular(size) => {
                lay_out(&jobs[asker], name, size, want, notes)?;
                (false, want)
            }
            Found::Missing if want > 0 => {
                lay_out(&jobs[asker], name, 0, want, notes)?;
                (false, want)
            }
            Found::Missing => {
                let job = first_job_naming(jobs, filename, name);
                return Err(UringError::job(
                    job,
                    format!(
                        "file {name:?} does not exist, and the job gives no size= to create it \
                         (fio creates a missing file of size= bytes; a percentage needs an \
                         existing file)"
                    ),
                ));
            }
        };
        let device = std::fs::metadata(name)
            .ok()
            .and_then(|m| device_name(if block { m.rdev() } else { m.dev() }));
        files.push(OpenFile {
            name: name.clone(),
            block,
            size,
            base: cursor,
            device,
            handles: Vec::new(),
        });
        cursor = (cursor + size).div_ceil(ADDRESS_GAP) * ADDRESS_GAP + ADDRESS_GAP;
    }
    let index: HashMap<String, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.clone(), i))
        .collect();

    // Pass 3: each job's region in each of its files, and its descriptors.
    let mut job_files = Vec::with_capacity(jobs.len());
    for job in jobs {
        let job_names = names(job, filename);
        let count = job_names.len().max(1) as u64;
        if job.engine.is_null() {
            // Regions of size= bytes, in files that do not exist: nothing is read or written.
            let size = amount_bytes(job.size.unwrap_or(Amount::Bytes(0)), 0) / count;
            let offset = job_offset(job, 0);
            job_files.push(
                (0..count)
                    .map(|_| JobFile {
                        file: NO_FILE,
                        region: Region {
                            start: offset,
                            len: size.max(1),
                        },
                        fd: -1,
                        buffered: false,
                        fixed: None,
                    })
                    .collect(),
            );
            continue;
        }
        let mut mine = Vec::with_capacity(job_names.len());
        for name in &job_names {
            let file_index = index[name];
            let file = &mut files[file_index];
            let what = if file.block { "the device" } else { "the file" };
            let offset = job_offset(job, file.size);
            let size = match job.size {
                Some(amount) => amount_bytes(amount, file.size) / count,
                None => file.size.saturating_sub(offset),
            };
            if size == 0 {
                return Err(UringError::job(
                    job,
                    format!("nothing to do in {name:?}: the size is 0"),
                ));
            }
            if offset + size > file.size {
                return Err(UringError::job(
                    job,
                    format!(
                        "offset {offset} + size {size} lies beyond the end of {what} {name:?} \
                         ({} bytes)",
                        file.size
                    ),
                ));
            }
            let min_block = job
                .bs
                .iter()
                .map(|b| b.min())
                .filter(|&b| b > 0)
                .min()
                .unwrap_or(4096);
            if size < min_block {
                return Err(UringError::job(
                    job,
                    format!(
                        "the region in {name:?} ({size} bytes) is smaller than one block \
                         ({min_block})"
                    ),
                ));
            }
            if job.direct && !offset.is_multiple_of(512) {
                return Err(UringError::job(
                    job,
                    format!(
                        "direct=1 needs the job's offset in {name:?} in whole 512-byte blocks, \
                         but it is {offset}"
                    ),
                ));
            }
            let fd = open(job, file)?;
            mine.push(JobFile {
                file: file_index,
                region: Region {
                    start: offset,
                    len: size,
                },
                fd,
                buffered: !job.direct,
                fixed: None,
            });
        }
        job_files.push(mine);
    }
    // What fio does as it opens a job's files: pre_read reads the job's region into the page
    // cache, else invalidate=1 drops it from there (posix_fadvise DONTNEED); fadvise_hint
    // advises the descriptor (shared by the jobs that open the file alike: the last one's
    // advice holds). Done once for every job before any starts.
    for (job, mine) in jobs.iter().zip(&job_files) {
        if job.engine.is_null() {
            continue;
        }
        for file in mine {
            let (start, len) = (
                file.region.start as libc::off_t,
                file.region.len as libc::off_t,
            );
            if job.pre_read && file.buffered {
                pre_read(file.fd, file.region)
                    .map_err(|error| UringError::job(job, format!("pre_read: {error}")))?;
            } else if job.invalidate {
                // SAFETY: a plain advisory call on an open descriptor.
                unsafe { libc::posix_fadvise(file.fd, start, len, libc::POSIX_FADV_DONTNEED) };
            }
            let advice = match job.fadvise {
                Some(Fadvise::Sequential) => libc::POSIX_FADV_SEQUENTIAL,
                Some(Fadvise::Random) => libc::POSIX_FADV_RANDOM,
                Some(Fadvise::Noreuse) => libc::POSIX_FADV_NOREUSE,
                None => continue,
            };
            // SAFETY: as above.
            unsafe { libc::posix_fadvise(file.fd, start, len, advice) };
        }
    }
    Ok(Files {
        files,
        jobs: job_files,
    })
}

/// Reads `region` of buffered descriptor `fd` once, into the page cache (fio's `pre_read`).
fn pre_read(fd: RawFd, region: Region) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 1 << 20];
    let mut at = region.start;
    let end = region.start + region.len;
    while at < end {
        let want = (end - at).min(buffer.len() as u64) as usize;
        // SAFETY: `buffer` has `want` writable bytes; `fd` is open for reading.
        let got = unsafe { libc::pread(fd, buffer.as_mut_ptr().cast(), want, at as libc::off_t) };
        match got {
            0 => break,
            n if n < 0 => {
                let error = std::io::Error::last_os_error();
                if error.kind() != std::io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
            n => at += n as u64,
        }
    }
    Ok(())
}

fn first_job_naming<'a>(jobs: &'a [JobSpec], filename: Option<&Path>, name: &str) -> &'a JobSpec {
    jobs.iter()
        .find(|job| names(job, filename).iter().any(|n| n == name))
        .expect("a job names every file")
}

fn device_size(name: &str, jobs: &[JobSpec], filename: Option<&Path>) -> Result<u64, UringError> {
    let job = first_job_naming(jobs, filename, name);
    let mut file = File::open(name).map_err(|error| open_error(job, name, &error, false, false))?;
    file.seek(SeekFrom::End(0))
        .map_err(|error| UringError::job(job, format!("cannot measure device {name:?}: {error}")))
}

/// The queue depth of the block device every job runs on: the most commands its hardware
/// queue holds (`/sys/class/block/DEV/mq/0/nr_tags`, a partition's disk's), as many as the
/// kernel keeps in flight on it under the scheduler none. `None` when a job runs on a regular
/// file, on a device that does not say (one without blk-mq queues), or on devices of different
/// depths. Only looks: nothing is opened or created.
pub(crate) fn device_queue_depth(jobs: &[JobSpec], filename: Option<&Path>) -> Option<u32> {
    let mut depth = None;
    for job in jobs.iter().filter(|job| !job.engine.is_null()) {
        for name in names(job, filename) {
            let metadata = std::fs::metadata(&name).ok()?;
            if !metadata.file_type().is_block_device() {
                return None;
            }
            let device = device_name(metadata.rdev())?;
            let tags: u32 = disk_attribute(&device, "mq/0/nr_tags")?.parse().ok()?;
            if depth.is_some_and(|depth| depth != tags) {
                return None;
            }
            depth = Some(tags);
        }
    }
    depth.filter(|&depth| depth > 0)
}

/// The /sys/dev/block name of device number `dev` (the disk, for a file on a partition of it).
fn device_name(dev: u64) -> Option<String> {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    link.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// Writes `name` out from `from` to `to` bytes with pseudo-random data, and syncs it.
fn lay_out(
    job: &JobSpec,
    name: &str,
    from: u64,
    to: u64,
    notes: &mut Vec<String>,
) -> Result<(), UringError> {
    let fail = |what: &str, error: std::io::Error| {
        UringError::job(
            job,
            format!("cannot {what} {name:?}: {}", describe_io(&error)),
        )
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(name)
        .map_err(|error| match error.raw_os_error() {
            Some(libc::EACCES | libc::EPERM | libc::EROFS) => {
                open_error(job, name, &error, true, false)
            }
            _ => fail("create", error),
        })?;
    file.seek(SeekFrom::Start(from))
        .map_err(|error| fail("extend", error))?;
    let mut chunk = vec![0u8; LAYOUT_CHUNK];
    let mut position = from;
    while position < to {
        let len = ((to - position) as usize).min(LAYOUT_CHUNK);
        fill_pattern(&mut chunk[..len], position ^ 0x6c61_796f_7574);
        file.write_all(&chunk[..len])
            .map_err(|error| fail("lay out", error))?;
        position += len as u64;
    }
    file.sync_all().map_err(|error| fail("sync", error))?;
    notes.push(format!(
        "laid out {name:?}: {} bytes written ({} MiB{})",
        to - from,
        (to - from).div_ceil(1 << 20),
        if from == 0 {
            ", new file".to_string()
        } else {
            format!(", extended from {from} bytes")
        }
    ));
    Ok(())
}

/// An error opening `name`, in words a user can act on.
fn open_error(
    job: &JobSpec,
    name: &str,
    error: &std::io::Error,
    write: bool,
    direct: bool,
) -> UringError {
    let access = if write {
        "reading and writing"
    } else {
        "reading"
    };
    let message = match error.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => format!(
            "permission denied opening {name:?} for {access}: run as a user who may, or name \
             another file"
        ),
        Some(libc::EROFS) => {
            format!("{name:?} is on a read-only file system: the job writes, so it cannot run")
        }
        Some(libc::ENOENT) => format!("{name:?} does not exist"),
        Some(libc::EINVAL) if direct => format!(
            "O_DIRECT is not supported for {name:?} (open answered EINVAL: tmpfs and some \
             other file systems have no direct I/O); set direct=0 to use buffered I/O"
        ),
        Some(libc::EBUSY) => format!(
            "{name:?} is in use (mounted, or claimed by another program): the job writes, and \
             writing to it would destroy what is there"
        ),
        _ => format!("cannot open {name:?}: {}", describe_io(error)),
    };
    UringError::job(job, message)
}

/// The descriptor `job` uses for `file`, opened once per set of flags.
fn open(job: &JobSpec, file: &mut OpenFile) -> Result<RawFd, UringError> {
    let write = job.writes();
    let mut flags = libc::O_CLOEXEC;
    if job.direct {
        flags |= libc::O_DIRECT;
    }
    if job.sync_writes && write {
        flags |= libc::O_SYNC;
    }
    let mode_key = flags | if write { libc::O_RDWR } else { libc::O_RDONLY };
    if let Some((_, handle)) = file.handles.iter().find(|(key, _)| *key == mode_key) {
        return Ok(handle.as_raw_fd());
    }
    if write && file.block {
        // O_EXCL on a block device fails with EBUSY while it is mounted or claimed: fio
        // refuses to write to a mounted device too (allow_mounted_write=0).
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL | libc::O_CLOEXEC)
            .open(&file.name)
            .map_err(|error| open_error(job, &file.name, &error, true, false))?;
    }
    let handle = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(flags)
        .open(&file.name)
        .map_err(|error| open_error(job, &file.name, &error, write, job.direct))?;
    let fd = handle.as_raw_fd();
    file.handles.push((mode_key, handle));
    Ok(fd)
}

/// Opens `path` for the library's [`Scheduler`](crate::Scheduler): read and write, direct or
/// not, creating nothing.
pub(crate) fn open_for_scheduler(path: &Path, direct: bool) -> Result<(File, u64), UringError> {
    let mut flags = libc::O_CLOEXEC;
    if direct {
        flags |= libc::O_DIRECT;
    }
    let name = path.display().to_string();
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|error| {
            let mut job = JobSpec::new("scheduler");
            job.numjobs = 1;
            let text = open_error(&job, &name, &error, true, direct).to_string();
            UringError::new(text.trim_start_matches("job \"scheduler\": ").to_string())
        })?;
    let size = file
        .seek(SeekFrom::End(0))
        .map_err(|error| UringError::new(format!("cannot measure {name:?}: {error}")))?;
    Ok((file, size))
}

/// A fresh write buffer of `len` bytes filled with pseudo-random data.
pub(crate) fn random_buffers(slots: usize, len: usize, seed: u64) -> SlotBuffers {
    SlotBuffers::new(slots, len, |slot, bytes| {
        fill_pattern(bytes, seed ^ slot as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves each open failure reads as what to do, naming the job and the file. (EINVAL for
    // O_DIRECT cannot be provoked on this machine's file systems, so the mapping is tested.)
    #[test]
    fn open_errors_say_what_to_do() {
        let mut job = JobSpec::new("j");
        job.location.file = "t.fio".into();
        job.location.line = 3;
        let error = |errno: i32, write: bool, direct: bool| {
            open_error(
                &job,
                "/x/data",
                &std::io::Error::from_raw_os_error(errno),
                write,
                direct,
            )
            .to_string()
        };
        let einval = error(libc::EINVAL, false, true);
        assert!(
            einval.starts_with("t.fio:3: job \"j\": O_DIRECT is not supported"),
            "{einval}"
        );
        assert!(
            einval.contains("\"/x/data\"") && einval.contains("direct=0"),
            "{einval}"
        );
        assert!(error(libc::EACCES, true, false).contains("permission denied opening"));
        assert!(error(libc::EROFS, true, false).contains("read-only file system"));
        assert!(error(libc::EBUSY, true, false).contains("in use (mounted"));
        assert!(error(libc::ENOENT, false, false).contains("does not exist"));
    }
}

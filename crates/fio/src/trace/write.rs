//! Writing traces: [`TraceWriter`] turns records into any format ([`iosched trace convert`]),
//! and [`IologStream`] is a job's `write_iolog`, fio's version 3 log of what it issued.

use super::blktrace::{
    RawTrace, TA_QUEUE, TC_DISCARD, TC_FLUSH, TC_QUEUE, TC_READ, TC_SYNC, TC_WRITE,
};
use super::text::parse_device;
use super::{Action, Format, Names, TraceOp, TraceRecord};
use crate::output::file::OutputFile;
use iosched_core::Nanos;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// A name without the kind iosched gives it (`disk:`, `asu:`, `file:`, `pid:`).
fn bare(name: &str) -> &str {
    for prefix in ["disk:", "asu:", "file:", "pid:"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            return rest;
        }
    }
    name
}

/// Writes records in one format, each as it comes.
pub struct TraceWriter<W: Write> {
    format: Format,
    out: W,
    /// The first record's time: times are written relative to it, except MSR's, which stay
    /// absolute filetime ticks so an MSR trace converts back unchanged.
    first_at: Option<Nanos>,
    /// iolog: the targets added and opened so far, in order.
    opened: Vec<u32>,
    added: HashSet<u32>,
    last_at: Nanos,
    sequence: u64,
    /// Records the format cannot hold, by reason.
    dropped: Vec<(String, u64)>,
    written: u64,
}

impl<W: Write> TraceWriter<W> {
    /// A writer of `format` to `out`; an iolog gets its version 3 header at once.
    pub fn new(format: Format, mut out: W) -> std::io::Result<TraceWriter<W>> {
        if format == Format::Iolog {
            writeln!(out, "fio version 3 iolog")?;
        }
        Ok(TraceWriter {
            format,
            out,
            first_at: None,
            opened: Vec::new(),
            added: HashSet::new(),
            last_at: 0,
            sequence: 0,
            dropped: Vec::new(),
            written: 0,
        })
    }

    fn drop_record(&mut self, reason: &str) {
        match self.dropped.iter_mut().find(|(r, _)| r == reason) {
            Some((_, count)) => *count += 1,
            None => self.dropped.push((reason.to_string(), 1)),
        }
    }

    /// The output, once [`finish`](Self::finish)ed.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Records written, and those the format could not hold with the reason.
    pub fn counts(&self) -> (u64, &[(String, u64)]) {
        (self.written, &self.dropped)
    }

    /// Writes `record`, whose names are in `names`.
    pub fn write(&mut self, record: &TraceRecord, names: &Names) -> std::io::Result<()> {
        let at = record.at.unwrap_or(self.last_at);
        let first = *self.first_at.get_or_insert(at);
        let since = at.saturating_sub(first);
        self.last_at = self.last_at.max(at);
        let target = bare(names.get(record.target)).to_string();
        match self.format {
            Format::Iolog => self.iolog(record, &target, since),
            Format::Msr => {
                let Action::Io(op @ (TraceOp::Read | TraceOp::Write)) = record.action else {
                    self.drop_record("MSR holds only reads and writes");
                    return Ok(());
                };
                let (host, disk) = match target.rsplit_once('_') {
                    Some((host, disk)) if disk.parse::<u32>().is_ok() && !host.is_empty() => {
                        (host.to_string(), disk.to_string())
                    }
                    _ => (target.replace([',', ' '], "_"), record.target.to_string()),
                };
                writeln!(
                    self.out,
                    "{},{host},{disk},{},{},{},{}",
                    at / 100,
                    if op == TraceOp::Read { "Read" } else { "Write" },
                    record.offset,
                    record.len,
                    record.response.map_or(0, |r| r / 100)
                )?;
                self.written += 1;
                Ok(())
            }
            Format::Spc => {
                let Action::Io(op @ (TraceOp::Read | TraceOp::Write)) = record.action else {
                    self.drop_record("SPC holds only reads and writes");
                    return Ok(());
                };
                if !record.offset.is_multiple_of(512) {
                    self.drop_record("SPC addresses 512-byte blocks");
                    return Ok(());
                }
                let asu = target.parse::<u64>().unwrap_or(u64::from(record.target));
                writeln!(
                    self.out,
                    "{asu},{},{},{},{}.{:06}",
                    record.offset / 512,
                    record.len,
                    if op == TraceOp::Read { "R" } else { "W" },
                    since / 1_000_000_000,
                    since % 1_000_000_000 / 1000
                )?;
                self.written += 1;
                Ok(())
            }
            Format::Blkparse | Format::Blktrace => {
                let Action::Io(op) = record.action else {
                    return Ok(());
                };
                if op == TraceOp::Datasync {
                    self.drop_record("block traces have no datasync (a flush is a sync)");
                    return Ok(());
                }
                if !record.offset.is_multiple_of(512) || !record.len.is_multiple_of(512) {
                    self.drop_record("block traces address 512-byte sectors");
                    return Ok(());
                }
                let (major, minor) = parse_device(&target).unwrap_or((8, record.target * 16));
                let flow = names.get(record.flow);
                let pid: u32 = flow
                    .strip_prefix("pid:")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(record.flow + 1);
                self.sequence += 1;
                if self.format == Format::Blkparse {
                    let rwbs = match op {
                        TraceOp::Read => "R",
                        TraceOp::Write => "W",
                        TraceOp::Trim => "D",
                        TraceOp::Sync | TraceOp::Datasync => "FWS",
                    };
                    writeln!(
                        self.out,
                        "{:>3},{:<3} {:>2} {:>8} {:>5}.{:09} {:>5}  Q {:>3} {} + {} [iosched]",
                        major,
                        minor,
                        0,
                        self.sequence,
                        since / 1_000_000_000,
                        since % 1_000_000_000,
                        pid,
                        rwbs,
                        record.offset / 512,
                        record.len / 512
                    )?;
                } else {
                    let category = match op {
                        TraceOp::Read => TC_READ,
                        TraceOp::Write => TC_WRITE,
                        TraceOp::Trim => TC_DISCARD | TC_WRITE,
                        TraceOp::Sync | TraceOp::Datasync => TC_FLUSH | TC_WRITE | TC_SYNC,
                    };
                    let raw = RawTrace {
                        time: since,
                        sector: record.offset / 512,
                        bytes: u32::try_from(record.len).unwrap_or(u32::MAX),
                        action: TA_QUEUE | TC_QUEUE | category,
                        pid,
                        device: (major << 20) | (minor & 0xf_ffff),
                        cpu: 0,
                    };
                    let mut bytes = raw.encode();
                    bytes[4..8].copy_from_slice(
                        &u32::try_from(self.sequence)
                            .unwrap_or(u32::MAX)
                            .to_le_bytes(),
                    );
                    self.out.write_all(&bytes)?;
                }
                self.written += 1;
                Ok(())
            }
        }
    }

    fn iolog(&mut self, record: &TraceRecord, target: &str, since: Nanos) -> std::io::Result<()> {
        let micros = since / 1000;
        match record.action {
            Action::Add => {
                if self.added.insert(record.target) {
                    writeln!(self.out, "{micros} {target} add")?;
                }
            }
            Action::Open => {
                self.added.insert(record.target);
                if !self.opened.contains(&record.target) {
                    self.opened.push(record.target);
                }
                writeln!(self.out, "{micros} {target} open")?;
            }
            Action::Close => {
                self.opened.retain(|&t| t != record.target);
                writeln!(self.out, "{micros} {target} close")?;
            }
            Action::Wait(_) => self.drop_record("version 3 iologs have no wait"),
            Action::Io(op) => {
                if self.added.insert(record.target) {
                    writeln!(self.out, "{micros} {target} add")?;
                }
                if !self.opened.contains(&record.target) {
                    self.opened.push(record.target);
                    writeln!(self.out, "{micros} {target} open")?;
                }
                writeln!(
                    self.out,
                    "{micros} {target} {} {} {}",
                    op.iolog_name(),
                    record.offset,
                    record.len
                )?;
                self.written += 1;
            }
        }
        Ok(())
    }

    /// Ends the trace (an iolog closes the files still open) and flushes it.
    pub fn finish(&mut self, names: &Names) -> std::io::Result<()> {
        if self.format == Format::Iolog {
            let micros = self.last_at.saturating_sub(self.first_at.unwrap_or(0)) / 1000;
            for target in std::mem::take(&mut self.opened) {
                writeln!(self.out, "{micros} {} close", bare(names.get(target)))?;
            }
        }
        self.out.flush()
    }
}

/// A job's `write_iolog`: fio's version 3 log, `TIME FILE ACTION [OFFSET LENGTH]` with times
/// in microseconds since the job began (iolog.c `init_iolog_write`, `log_io_u`, `log_file`),
/// written as the job issues. The file is an [`OutputFile`]: it replaces its target only when
/// the run succeeds ([`IologStream::commit`]). Clones share it.
#[derive(Clone)]
pub struct IologStream(Arc<Mutex<IologState>>);

impl std::fmt::Debug for IologStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("IologStream")
            .field(&self.lock().name)
            .finish()
    }
}

impl PartialEq for IologStream {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

struct IologState {
    name: String,
    file: Option<OutputFile>,
    /// The job's files: name and where its offset 0 lies in the engine's coordinates.
    files: Vec<(String, u64)>,
    started: Option<Nanos>,
    last: Nanos,
    line: String,
    error: Option<String>,
}

impl IologStream {
    /// Opens `path` for a job whose files are `files` (each with its base offset); the
    /// header and each file's `add` line are written at once.
    pub fn open(path: &str, files: Vec<(String, u64)>) -> Result<IologStream, String> {
        let file =
            OutputFile::create(Path::new(path)).map_err(|error| format!("write_iolog: {error}"))?;
        let mut state = IologState {
            name: path.to_string(),
            file: Some(file),
            files,
            started: None,
            last: 0,
            line: String::new(),
            error: None,
        };
        state.line.push_str("fio version 3 iolog\n");
        state.write_line();
        state.every_file(0, "add");
        Ok(IologStream(Arc::new(Mutex::new(state))))
    }

    fn lock(&self) -> MutexGuard<'_, IologState> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The job began at `now`: its files are opened.
    pub fn start(&self, now: Nanos) {
        let mut state = self.lock();
        if state.started.is_some() {
            return;
        }
        state.started = Some(now);
        state.every_file(0, "open");
    }

    /// The job issued `op` of `len` bytes at `offset` (the engine's coordinates) of its file
    /// `file` at `now`.
    pub fn issue(&self, now: Nanos, file: usize, op: TraceOp, offset: u64, len: u64) {
        let mut guard = self.lock();
        let state = &mut *guard;
        let micros = now.saturating_sub(state.started.unwrap_or(now)) / 1000;
        state.last = micros;
        let Some((name, base)) = state.files.get(file) else {
            return;
        };
        let (offset, len) = if op.is_data() {
            (offset.saturating_sub(*base), len)
        } else {
            (0, 0)
        };
        state.line.clear();
        let _ = writeln!(
            state.line,
            "{micros} {name} {} {offset} {len}",
            op.iolog_name()
        );
        state.write_line();
    }

    /// The job ended at `now`: its files are closed.
    pub fn finish(&self, now: Nanos) {
        let mut state = self.lock();
        let Some(started) = state.started.take() else {
            return;
        };
        let micros = (now.saturating_sub(started) / 1000).max(state.last);
        state.every_file(micros, "close");
    }

    /// Moves the log into place; an error names the file.
    pub fn commit(&self) -> Result<(), String> {
        let mut state = self.lock();
        if let Some(error) = state.error.take() {
            return Err(format!("cannot write {:?}: {error}", state.name));
        }
        match state.file.take() {
            Some(file) => file.commit().map_err(|error| error.to_string()),
            None => Ok(()),
        }
    }
}

impl IologState {
    /// Writes `self.line`; the first error is kept for the commit to report.
    fn write_line(&mut self) {
        if self.error.is_some() {
            return;
        }
        if let Some(file) = &mut self.file {
            if let Err(error) = file.write_all(self.line.as_bytes()) {
                self.error = Some(error.to_string());
            }
        }
    }

    /// A file action line (`add`, `open`, `close`) at `micros` for each of the job's files.
    fn every_file(&mut self, micros: u64, action: &str) {
        for index in 0..self.files.len() {
            self.line.clear();
            let _ = writeln!(self.line, "{micros} {} {action}", self.files[index].0);
            self.write_line();
        }
    }
}

/// Refuses jobs that would write the same `write_iolog` file: fio would interleave their lines
/// into one corrupt log.
pub fn check_iolog_names<'a>(jobs: impl Iterator<Item = &'a crate::JobSpec>) -> Result<(), String> {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for spec in jobs {
        let Some(path) = spec.write_iolog.as_deref() else {
            continue;
        };
        if let Some(first) = seen.insert(path, &spec.name) {
            return Err(format!(
                "{}: write_iolog={path}: job {first:?} writes it too; give each job its own log \
                 (fio would interleave their lines into one corrupt file)",
                spec.location
            ));
        }
    }
    Ok(())
}

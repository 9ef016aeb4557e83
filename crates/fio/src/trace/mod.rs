//! Traces: fio's I/O logs, blktrace captures and the public block traces, read as streams of
//! records, written back, and replayed by a job ([`replay`]).
//!
//! | format     | what                                              | who issues (flow)  | what it addresses (target) |
//! |------------|---------------------------------------------------|--------------------|----------------------------|
//! | `iolog`    | fio's `write_iolog`, versions 2 and 3 (iolog.c)   | `file:NAME`        | the file                   |
//! | `blktrace` | blktrace's binary `blk_io_trace` records          | `pid:N`            | the device `MAJ,MIN`       |
//! | `msr`      | MSR Cambridge CSV                                 | `disk:HOST_N`      | the disk                   |
//! | `spc`      | SPC (UMass Financial, WebSearch) ASCII            | `asu:N`            | the ASU                    |
//! | `blkparse` | blkparse's default text output                    | `pid:N`            | the device `MAJ,MIN`       |
//!
//! Each format's units are the trace's own, turned into bytes and nanoseconds here:
//!
//! - iolog v3 timestamps are microseconds since the job began (fio's `log_io_u` writes
//!   `utime_since_now`); v2 has none, and its `wait` lines give milliseconds since the start.
//! - blktrace times are nanoseconds, sectors 512 bytes (fio's blktrace.c `store_ipo`); only queue
//!   (`Q`) events are requests, as fio's `handle_trace` takes them: the others are the block
//!   layer's own steps.
//! - MSR timestamps and response times are Windows filetime ticks of 100 ns.
//! - SPC's LBA counts 512-byte blocks and its timestamp is in seconds.
//! - blkparse gives seconds with nine decimals and sectors; as for blktrace, its `Q` events are
//!   the requests, and the summary blkparse prints at its end closes the trace.
//!
//! Records are read one at a time from a buffered reader ([`TraceReader`]): memory holds the
//! names seen (files, processes, disks), never the trace. A malformed line is an error that
//! names the file and the line ([`TraceError`]).

pub mod blktrace;
pub mod jobs;
pub mod replay;
pub mod text;
pub mod write;

#[cfg(test)]
mod tests;

use iosched_core::Nanos;
use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

pub use replay::{Replay, ReplayMode, ReplaySpec};
pub use write::{IologStream, TraceWriter};

/// A trace's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// fio's I/O log, version 2 or 3.
    Iolog,
    /// blktrace's binary records.
    Blktrace,
    /// MSR Cambridge CSV.
    Msr,
    /// SPC (UMass) ASCII.
    Spc,
    /// blkparse's default text.
    Blkparse,
}

impl Format {
    /// Every format, in the order their names are listed.
    pub const ALL: [Format; 5] = [
        Format::Iolog,
        Format::Blktrace,
        Format::Msr,
        Format::Spc,
        Format::Blkparse,
    ];

    /// Its name, as options and commands take it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Iolog => "iolog",
            Format::Blktrace => "blktrace",
            Format::Msr => "msr",
            Format::Spc => "spc",
            Format::Blkparse => "blkparse",
        }
    }

    /// The format named `name`.
    pub fn parse(name: &str) -> Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|format| format.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                format!("unknown trace format {name:?}; one of {}", names.join(", "))
            })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a record asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceOp {
    /// A read.
    Read,
    /// A write.
    Write,
    /// A trim (discard).
    Trim,
    /// An fsync of the target.
    Sync,
    /// An fdatasync of the target.
    Datasync,
}

impl TraceOp {
    /// fio's name for it in an iolog (`io_ddir_name`).
    pub fn iolog_name(self) -> &'static str {
        match self {
            TraceOp::Read => "read",
            TraceOp::Write => "write",
            TraceOp::Trim => "trim",
            TraceOp::Sync => "sync",
            TraceOp::Datasync => "datasync",
        }
    }

    /// Whether it moves data (a read, write or trim).
    pub fn is_data(self) -> bool {
        matches!(self, TraceOp::Read | TraceOp::Write | TraceOp::Trim)
    }
}

/// What a trace line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// An I/O.
    Io(TraceOp),
    /// iolog: the target is added to the job's files.
    Add,
    /// iolog: the target is opened.
    Open,
    /// iolog: the target is closed.
    Close,
    /// iolog version 2: wait until this long after the job began.
    Wait(Nanos),
}

/// One record of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// Its line in the file (1-based), or its index among the records of a binary trace.
    pub line: u64,
    /// When it was issued, in nanoseconds on the trace's own clock (not made relative).
    pub at: Option<Nanos>,
    /// Who issued it: an index into the reader's [`Names`].
    pub flow: u32,
    /// What it addresses: an index into the reader's [`Names`].
    pub target: u32,
    /// What it asks for.
    pub action: Action,
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// How long it took, when the trace recorded it (MSR).
    pub response: Option<Nanos>,
}

/// The names a trace's records refer to, each stored once.
#[derive(Clone, Debug, Default)]
pub struct Names {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Names {
    /// The index of `name`, added if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), id);
        id
    }

    /// The name at `id`.
    pub fn get(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", String::as_str)
    }

    /// How many names there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// A trace that cannot be read: which file, which line, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// The file as given.
    pub path: String,
    /// The line (or binary record) at fault, if one is.
    pub line: Option<u64>,
    /// What is wrong.
    pub message: String,
}

impl TraceError {
    /// An error at `line` of `path`. What the message quotes of the trace is cut as every
    /// error cuts it ([`iosched_core::limits::shorten_quoted`]).
    pub fn at(path: &str, line: u64, message: impl Into<String>) -> TraceError {
        TraceError {
            path: path.to_string(),
            line: Some(line),
            message: iosched_core::limits::shorten_quoted(&message.into()),
        }
    }

    /// An error about `path` as a whole, its quotes cut as [`TraceError::at`]'s.
    pub fn file(path: &str, message: impl Into<String>) -> TraceError {
        TraceError {
            path: path.to_string(),
            line: None,
            message: iosched_core::limits::shorten_quoted(&message.into()),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

impl std::error::Error for TraceError {}

/// Reads a trace's records one at a time.
pub struct TraceReader {
    inner: Inner,
    format: Format,
    names: Names,
    /// Bytes of the input read so far and its size, when known (for progress).
    size: Option<u64>,
}

enum Inner {
    Text(text::TextReader),
    Blktrace(blktrace::BlktraceReader),
}

/// The blktrace per-CPU files of a capture called `prefix` (`prefix.blktrace.0`,
/// `prefix.blktrace.1`, ...), in CPU order; empty when there are none.
pub fn per_cpu_files(prefix: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for cpu in 0..4096 {
        let mut name = prefix.as_os_str().to_owned();
        name.push(format!(".blktrace.{cpu}"));
        let path = PathBuf::from(name);
        if !path.is_file() {
            break;
        }
        files.push(path);
    }
    files
}

impl TraceReader {
    /// Opens the trace at `path` in `format`, or in the format its first bytes show when
    /// `format` is `None`: blktrace's magic, fio's iolog header, or a first line shaped as an
    /// MSR, SPC or blkparse record. A path that is not a file but the prefix of blktrace's
    /// per-CPU files (`sda` for `sda.blktrace.0`, ...) reads those files merged by time.
    pub fn open(path: &Path, format: Option<Format>) -> Result<TraceReader, TraceError> {
        let shown = path.display().to_string();
        if !path.exists() {
            let cpus = per_cpu_files(path);
            if !cpus.is_empty() && matches!(format, None | Some(Format::Blktrace)) {
                let reader = blktrace::BlktraceReader::open_merged(&shown, &cpus)?;
                return Ok(TraceReader {
                    size: reader.size(),
                    inner: Inner::Blktrace(reader),
                    format: Format::Blktrace,
                    names: Names::default(),
                });
            }
        }
        let file = File::open(path)
            .map_err(|error| TraceError::file(&shown, format!("cannot open the trace: {error}")))?;
        let metadata = file
            .metadata()
            .map_err(|error| TraceError::file(&shown, format!("cannot read the trace: {error}")))?;
        if metadata.is_dir() {
            return Err(TraceError::file(&shown, "is a directory, not a trace"));
        }
        let size = metadata.is_file().then_some(metadata.len());
        let mut input = BufReader::with_capacity(1 << 16, file);
        let format = match format {
            Some(format) => format,
            None => detect(&shown, &mut input)?,
        };
        let inner = match format {
            Format::Blktrace => {
                Inner::Blktrace(blktrace::BlktraceReader::new(&shown, Box::new(input))?)
            }
            text_format => {
                Inner::Text(text::TextReader::new(&shown, text_format, Box::new(input))?)
            }
        };
        Ok(TraceReader {
            inner,
            format,
            names: Names::default(),
            size,
        })
    }

    /// A reader over `input` already in memory, in `format` (for tests and tools).
    pub fn from_bytes(
        origin: &str,
        format: Format,
        input: Vec<u8>,
    ) -> Result<TraceReader, TraceError> {
        let size = Some(input.len() as u64);
        let boxed: Box<dyn BufRead + Send> = Box::new(std::io::Cursor::new(input));
        let inner = match format {
            Format::Blktrace => Inner::Blktrace(blktrace::BlktraceReader::new(origin, boxed)?),
            text_format => Inner::Text(text::TextReader::new(origin, text_format, boxed)?),
        };
        Ok(TraceReader {
            inner,
            format,
            names: Names::default(),
            size,
        })
    }

    /// The trace's format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// For iolog, its version (2 or 3); 0 for other formats.
    pub fn iolog_version(&self) -> u8 {
        match &self.inner {
            Inner::Text(reader) => reader.iolog_version(),
            Inner::Blktrace(_) => 0,
        }
    }

    /// The names records refer to so far.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The next record, or `None` at the end.
    pub fn next_record(&mut self) -> Result<Option<TraceRecord>, TraceError> {
        match &mut self.inner {
            Inner::Text(reader) => reader.next_record(&mut self.names),
            Inner::Blktrace(reader) => reader.next_record(&mut self.names),
        }
    }

    /// Bytes of input consumed and the input's size, when it is known.
    pub fn progress(&self) -> (u64, Option<u64>) {
        let read = match &self.inner {
            Inner::Text(reader) => reader.bytes_read(),
            Inner::Blktrace(reader) => reader.bytes_read(),
        };
        (read, self.size)
    }
}

/// The format of a trace from its first bytes.
fn detect(shown: &str, input: &mut BufReader<File>) -> Result<Format, TraceError> {
    let head = input
        .fill_buf()
        .map_err(|error| TraceError::file(shown, format!("cannot read the trace: {error}")))?;
    if head.len() >= 4 && blktrace::magic_endianness(&head[..4]).is_some() {
        return Ok(Format::Blktrace);
    }
    let mut first = String::new();
    let mut peek = head.take(4096);
    let _ = peek.read_to_string(&mut first);
    let line = first
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("");
    if line.starts_with("fio version") {
        return Ok(Format::Iolog);
    }
    for format in [Format::Msr, Format::Spc, Format::Blkparse] {
        if text::looks_like(format, line) {
            return Ok(format);
        }
    }
    Err(TraceError::at(
        shown,
        1,
        "not a trace iosched can tell: no fio iolog header (\"fio version 2 iolog\" or \"fio \
         version 3 iolog\"), no blktrace magic, and not an MSR, SPC or blkparse line; name the \
         format (iolog_format= in a job, --format on the command line)",
    ))
}

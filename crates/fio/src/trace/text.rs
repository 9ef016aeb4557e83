//! The text formats, one line at a time: fio's iolog (versions 2 and 3), MSR Cambridge CSV,
//! SPC ASCII and blkparse's default output.

use super::{Action, Format, Names, TraceError, TraceOp, TraceRecord};
use iosched_core::Nanos;
use std::fmt::Write as _;
use std::io::{BufRead, Read};

/// Longest line read; a longer one is an error, not an allocation without bound.
const LINE_MAX: usize = 64 << 10;

/// Reads a text trace line by line.
pub struct TextReader {
    origin: String,
    format: Format,
    input: Box<dyn BufRead + Send>,
    line: String,
    /// The raw bytes of the line being read, kept between lines.
    bytes: Vec<u8>,
    /// A flow or target name being built, kept between records.
    key: String,
    line_number: u64,
    bytes_read: u64,
    /// iolog's version (2 or 3), read from its first line.
    iolog_version: u8,
    /// blkparse: its closing summary began; nothing after it is a record.
    ended: bool,
}

impl TextReader {
    /// A reader of `input` in `format`, called `origin` in errors. An iolog's header is read
    /// at once: a missing or unknown version is an error at line 1.
    pub fn new(
        origin: &str,
        format: Format,
        input: Box<dyn BufRead + Send>,
    ) -> Result<TextReader, TraceError> {
        let mut reader = TextReader {
            origin: origin.to_string(),
            format,
            input,
            line: String::new(),
            bytes: Vec::new(),
            key: String::new(),
            line_number: 0,
            bytes_read: 0,
            iolog_version: 0,
            ended: false,
        };
        if format == Format::Iolog {
            if !reader.read_line()? {
                return Err(TraceError::at(origin, 1, "empty: an iolog begins with \"fio version 2 iolog\" or \"fio version 3 iolog\""));
            }
            reader.iolog_version = match reader.line.trim_end() {
                "fio version 2 iolog" => 2,
                "fio version 3 iolog" => 3,
                other => {
                    return Err(TraceError::at(
                        origin,
                        1,
                        format!(
                            "{other:?} is not an iolog header; fio reads \"fio version 2 \
                             iolog\" and \"fio version 3 iolog\" (version 1 is no longer \
                             supported, as fio says)"
                        ),
                    ))
                }
            };
        }
        Ok(reader)
    }

    /// The iolog version, or 0 for the other formats.
    pub fn iolog_version(&self) -> u8 {
        self.iolog_version
    }

    /// Bytes consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Reads the next line into `self.line`; false at the end.
    fn read_line(&mut self) -> Result<bool, TraceError> {
        self.line.clear();
        self.bytes.clear();
        let input: &mut (dyn BufRead + Send) = &mut *self.input;
        let read = Read::take(input, LINE_MAX as u64 + 1)
            .read_until(b'\n', &mut self.bytes)
            .map_err(|error| {
                TraceError::file(&self.origin, format!("cannot read the trace: {error}"))
            })?;
        if read == 0 {
            return Ok(false);
        }
        self.line_number += 1;
        self.bytes_read += read as u64;
        if read > LINE_MAX {
            return Err(self.error(format!("a line longer than {LINE_MAX} bytes")));
        }
        match std::str::from_utf8(&self.bytes) {
            Ok(text) => self.line.push_str(text),
            Err(_) => return Err(self.error("not UTF-8 text")),
        }
        Ok(true)
    }

    fn error(&self, message: impl Into<String>) -> TraceError {
        TraceError::at(&self.origin, self.line_number, message)
    }

    /// The next record, or `None` at the end; blank lines and `#` comments are skipped.
    pub fn next_record(&mut self, names: &mut Names) -> Result<Option<TraceRecord>, TraceError> {
        loop {
            if self.ended || !self.read_line()? {
                return Ok(None);
            }
            let line = self.line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let parsed = match self.format {
                Format::Iolog => self.iolog(names),
                Format::Msr => self.msr(names),
                Format::Spc => self.spc(names),
                Format::Blkparse => self.blkparse(names),
                Format::Blktrace => unreachable!("blktrace is binary"),
            };
            match parsed {
                Ok(Some(record)) => return Ok(Some(record)),
                Ok(None) => continue,
                Err(message) => return Err(self.error(message)),
            }
        }
    }

    fn record(&self, flow: u32, target: u32, action: Action) -> TraceRecord {
        TraceRecord {
            line: self.line_number,
            at: None,
            flow,
            target,
            action,
            offset: 0,
            len: 0,
            response: None,
        }
    }

    /// fio's `read_iolog`: v2 `FILE ACTION [OFFSET LENGTH]`, v3 `TIME FILE ACTION [OFFSET
    /// LENGTH]`; file actions (add, open, close) have no offset, I/O actions (read, write,
    /// trim, sync, datasync, and v2's wait) have both. v3's `wait` is ignored, as fio ignores
    /// it.
    fn iolog(&self, names: &mut Names) -> Result<Option<TraceRecord>, String> {
        let fields: Vec<&str> = self.line.split_whitespace().collect();
        let (at, rest) = if self.iolog_version == 3 {
            let Some((time, rest)) = fields.split_first() else {
                return Ok(None);
            };
            let micros = number(time, "timestamp (microseconds)")?;
            (Some(micros.saturating_mul(1000)), rest)
        } else {
            (None, &fields[..])
        };
        let io_fields = 4;
        let file_fields = 2;
        let (file, action) = match rest {
            [file, action, ..] => (*file, *action),
            _ => {
                return Err(format!(
                    "expected {}FILE ACTION [OFFSET LENGTH], found {:?}",
                    if at.is_some() { "TIME " } else { "" },
                    self.line.trim()
                ))
            }
        };
        let name = names.intern(file);
        if rest.len() == file_fields {
            let action = match action {
                "add" => Action::Add,
                "open" => Action::Open,
                "close" => Action::Close,
                "unlink" => return Ok(None),
                other => {
                    return Err(format!(
                        "bad iolog file action {other:?} (add, open or close; an I/O action \
                         needs an offset and a length)"
                    ))
                }
            };
            let mut record = self.record(name, name, action);
            record.at = at;
            return Ok(Some(record));
        }
        if rest.len() != io_fields {
            return Err(format!(
                "expected {}FILE ACTION OFFSET LENGTH, found {} fields",
                if at.is_some() { "TIME " } else { "" },
                fields.len()
            ));
        }
        let offset = number(rest[2], "offset")?;
        let len = number(rest[3], "length")?;
        if len > u64::from(u32::MAX) {
            return Err(format!(
                "length {len}: more than fio reads (an unsigned 32-bit count)"
            ));
        }
        let action = match action {
            "read" => Action::Io(TraceOp::Read),
            "write" => Action::Io(TraceOp::Write),
            "trim" => Action::Io(TraceOp::Trim),
            "sync" => Action::Io(TraceOp::Sync),
            "datasync" => Action::Io(TraceOp::Datasync),
            "wait" if self.iolog_version == 3 => return Ok(None),
            "wait" => Action::Wait(offset.saturating_mul(1_000_000)),
            other => {
                return Err(format!(
                    "bad iolog action {other:?} (read, write, trim, sync, datasync{})",
                    if self.iolog_version == 2 {
                        ", wait"
                    } else {
                        ""
                    }
                ))
            }
        };
        let mut record = self.record(name, name, action);
        record.at = at;
        if !matches!(action, Action::Wait(_)) {
            record.offset = offset;
            record.len = len;
        }
        Ok(Some(record))
    }

    /// `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, times in 100 ns ticks.
    fn msr(&mut self, names: &mut Names) -> Result<Option<TraceRecord>, String> {
        let fields: Vec<&str> = self.line.trim().split(',').map(str::trim).collect();
        if fields.len() < 6 {
            return Err(format!(
                "expected Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime; found {} \
                 fields",
                fields.len()
            ));
        }
        if fields[0].eq_ignore_ascii_case("timestamp") {
            return Ok(None);
        }
        let ticks = number(fields[0], "Timestamp")?;
        let at = ticks
            .checked_mul(100)
            .ok_or_else(|| format!("Timestamp {ticks}: too large"))?;
        let host = fields[1];
        if host.is_empty() {
            return Err("empty Hostname".into());
        }
        let disk = number(fields[2], "DiskNumber")?;
        let op = match fields[3].to_ascii_lowercase().as_str() {
            "read" => TraceOp::Read,
            "write" => TraceOp::Write,
            other => return Err(format!("Type {other:?}: Read or Write")),
        };
        let offset = number(fields[4], "Offset")?;
        let len = number(fields[5], "Size")?;
        let response = match fields.get(6) {
            Some(text) if !text.is_empty() => {
                Some(number(text, "ResponseTime")?.saturating_mul(100))
            }
            _ => None,
        };
        self.key.clear();
        let _ = write!(self.key, "disk:{host}_{disk}");
        let name = names.intern(&self.key);
        let mut record = self.record(name, name, Action::Io(op));
        record.at = Some(at);
        record.offset = offset;
        record.len = len;
        record.response = response;
        Ok(Some(record))
    }

    /// `ASU,LBA,Size,Opcode,Timestamp[,...]`: LBA in 512-byte blocks, timestamp in seconds.
    fn spc(&mut self, names: &mut Names) -> Result<Option<TraceRecord>, String> {
        let fields: Vec<&str> = self.line.trim().split(',').map(str::trim).collect();
        if fields.len() < 5 {
            return Err(format!(
                "expected ASU,LBA,Size,Opcode,Timestamp; found {} fields",
                fields.len()
            ));
        }
        let asu = number(fields[0], "ASU")?;
        let lba = number(fields[1], "LBA")?;
        let len = number(fields[2], "Size")?;
        let op = match fields[3] {
            "r" | "R" => TraceOp::Read,
            "w" | "W" => TraceOp::Write,
            other => return Err(format!("Opcode {other:?}: r or w")),
        };
        let at = seconds(fields[4], "Timestamp")?;
        let offset = lba
            .checked_mul(512)
            .ok_or_else(|| format!("LBA {lba}: beyond any device"))?;
        self.key.clear();
        let _ = write!(self.key, "asu:{asu}");
        let name = names.intern(&self.key);
        let mut record = self.record(name, name, Action::Io(op));
        record.at = Some(at);
        record.offset = offset;
        record.len = len;
        Ok(Some(record))
    }

    /// blkparse's default format, `%D %2c %8s %5T.%9t %5p %2a %3d `: device, CPU, sequence,
    /// time, pid, action, RWBS, then for a request `SECTOR + COUNT [process]`. Queue events
    /// (`Q`) are the requests; other events are skipped, and the per-CPU summary blkparse
    /// prints last ends the trace.
    fn blkparse(&mut self, names: &mut Names) -> Result<Option<TraceRecord>, String> {
        let summary = {
            let start = self.line.trim_start();
            start.starts_with("CPU") || start.starts_with("Total")
        };
        if summary {
            self.ended = true;
            return Ok(None);
        }
        let line = self.line.trim();
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 6 {
            return Err(format!(
                "expected DEV CPU SEQUENCE TIME PID ACTION ..., found {line:?}"
            ));
        }
        let device = fields[0];
        if parse_device(device).is_none() {
            return Err(format!("device {device:?}: MAJOR,MINOR"));
        }
        number(fields[1], "CPU")?;
        number(fields[2], "sequence")?;
        let at = seconds(fields[3], "time")?;
        let pid = number(fields[4], "pid")?;
        if fields[5] != "Q" {
            return Ok(None);
        }
        let (rwbs, sector, count) = match fields.get(6..10) {
            Some([rwbs, sector, "+", count]) => (*rwbs, *sector, *count),
            _ => {
                return Err(format!(
                    "a queue event needs RWBS SECTOR + COUNT, found {line:?}"
                ))
            }
        };
        let sector = number(sector, "sector")?;
        let count = number(count, "sector count")?;
        // RWBS: a leading F is a flush before the request (alone, with no data, a sync),
        // then D (discard), W, R or N (none).
        let op = if rwbs.starts_with('F') && count == 0 {
            TraceOp::Sync
        } else if rwbs.contains('D') {
            TraceOp::Trim
        } else if rwbs.contains('W') {
            TraceOp::Write
        } else if rwbs.contains('R') {
            TraceOp::Read
        } else {
            return Ok(None);
        };
        self.key.clear();
        let _ = write!(self.key, "pid:{pid}");
        let flow = names.intern(&self.key);
        let target = names.intern(device);
        let mut record = self.record(flow, target, Action::Io(op));
        record.at = Some(at);
        record.offset = sector
            .checked_mul(512)
            .ok_or_else(|| format!("sector {sector}: beyond any device"))?;
        record.len = count
            .checked_mul(512)
            .ok_or_else(|| format!("count {count}: too large"))?;
        if op == TraceOp::Sync && record.len == 0 {
            record.offset = 0;
        }
        Ok(Some(record))
    }
}

/// `MAJOR,MINOR`.
pub fn parse_device(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.split_once(',')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// An unsigned decimal integer called `what` in the error.
fn number(text: &str, what: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("{what} {text:?}: not an unsigned integer"))
}

/// Seconds with an optional decimal fraction, to nanoseconds exactly (digits past the ninth
/// are dropped).
pub fn seconds(text: &str, what: &str) -> Result<Nanos, String> {
    let bad = || format!("{what} {text:?}: not a time in seconds");
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err(bad());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let mut nanos = 0u64;
    for (i, digit) in fraction.bytes().take(9).enumerate() {
        nanos += u64::from(digit - b'0') * 10u64.pow(8 - i as u32);
    }
    whole
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(nanos))
        .ok_or_else(|| format!("{what} {text:?}: too large"))
}

/// Whether `line` has the shape of a record of `format` (for detection).
pub fn looks_like(format: Format, line: &str) -> bool {
    let fields: Vec<&str> = line.trim().split(',').map(str::trim).collect();
    match format {
        Format::Msr => {
            fields.len() >= 6
                && (fields[0].parse::<u64>().is_ok() || fields[0].eq_ignore_ascii_case("timestamp"))
                && (["read", "write", "type"].contains(&fields[3].to_ascii_lowercase().as_str()))
        }
        Format::Spc => {
            fields.len() >= 5
                && fields[0].parse::<u64>().is_ok()
                && ["r", "w", "R", "W"].contains(&fields[3])
        }
        Format::Blkparse => {
            let words: Vec<&str> = line.split_whitespace().collect();
            words.len() >= 6 && parse_device(words[0]).is_some() && seconds(words[3], "").is_ok()
        }
        _ => false,
    }
}

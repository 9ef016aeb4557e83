//! blktrace's binary records (`struct blk_io_trace`, include/uapi/linux/blktrace_api.h), read
//! as fio's blktrace.c reads them: 48-byte records in the byte order of the machine that
//! captured them (told by the magic), each followed by `pdu_len` bytes skipped; only queue
//! events of file-system requests are I/O (`handle_trace`: `__BLK_TA_QUEUE`, not `BLK_TC_PC`,
//! not a notify), a discard is a trim and a flush without data a sync. A capture's per-CPU
//! files (`sda.blktrace.0`, `sda.blktrace.1`, ...) are merged by time as they are read.

use super::{Action, Names, TraceError, TraceOp, TraceRecord};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

/// `BLK_IO_TRACE_MAGIC`: the magic's upper 24 bits.
pub const MAGIC: u32 = 0x6561_7400;
/// `BLK_IO_TRACE_VERSION`.
pub const VERSION: u32 = 0x07;
/// Bytes of one record before its payload.
pub const RECORD_BYTES: usize = 48;

/// `__BLK_TA_QUEUE`.
pub const TA_QUEUE: u32 = 1;
/// Category bits (`BLK_TC_*`), shifted by `BLK_TC_SHIFT` (16) into `action`.
pub const TC_READ: u32 = 1 << 16;
/// A write.
pub const TC_WRITE: u32 = 1 << 17;
/// A flush.
pub const TC_FLUSH: u32 = 1 << 18;
/// Synchronous.
pub const TC_SYNC: u32 = 1 << 19;
/// A queue event.
pub const TC_QUEUE: u32 = 1 << 20;
/// A passthrough (SCSI) command, not a file-system request.
pub const TC_PC: u32 = 1 << 25;
/// A notify (process name, timestamp, message), not a request.
pub const TC_NOTIFY: u32 = 1 << 26;
/// A discard.
pub const TC_DISCARD: u32 = 1 << 29;

/// Whether `magic` (4 bytes) is blktrace's, and if so whether it is little-endian.
pub fn magic_endianness(magic: &[u8]) -> Option<bool> {
    let bytes: [u8; 4] = magic.try_into().ok()?;
    if u32::from_le_bytes(bytes) & 0xffff_ff00 == MAGIC {
        Some(true)
    } else if u32::from_be_bytes(bytes) & 0xffff_ff00 == MAGIC {
        Some(false)
    } else {
        None
    }
}

/// One raw record's fields that matter here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawTrace {
    /// Nanoseconds.
    pub time: u64,
    /// 512-byte sector.
    pub sector: u64,
    /// Bytes.
    pub bytes: u32,
    /// Action and category bits.
    pub action: u32,
    /// Issuing process.
    pub pid: u32,
    /// Device number (major << 20 | minor).
    pub device: u32,
    /// CPU.
    pub cpu: u32,
}

impl RawTrace {
    /// The 48 bytes of a record (little-endian) with `pdu_len` 0.
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut out = [0u8; RECORD_BYTES];
        out[0..4].copy_from_slice(&(MAGIC | VERSION).to_le_bytes());
        out[8..16].copy_from_slice(&self.time.to_le_bytes());
        out[16..24].copy_from_slice(&self.sector.to_le_bytes());
        out[24..28].copy_from_slice(&self.bytes.to_le_bytes());
        out[28..32].copy_from_slice(&self.action.to_le_bytes());
        out[32..36].copy_from_slice(&self.pid.to_le_bytes());
        out[36..40].copy_from_slice(&self.device.to_le_bytes());
        out[40..44].copy_from_slice(&self.cpu.to_le_bytes());
        out
    }
}

/// One file's records, in its order.
struct Stream {
    origin: String,
    input: Box<dyn BufRead + Send>,
    little: Option<bool>,
    records: u64,
    bytes_read: u64,
}

impl Stream {
    /// The next raw record with its index, or `None` at the end.
    fn next(&mut self) -> Result<Option<(u64, RawTrace)>, TraceError> {
        let mut head = [0u8; RECORD_BYTES];
        let mut filled = 0;
        while filled < RECORD_BYTES {
            let read = self.input.read(&mut head[filled..]).map_err(|error| {
                TraceError::file(&self.origin, format!("cannot read the trace: {error}"))
            })?;
            if read == 0 {
                break;
            }
            filled += read;
        }
        if filled == 0 {
            return Ok(None);
        }
        self.records += 1;
        let index = self.records;
        if filled < RECORD_BYTES {
            return Err(TraceError::at(
                &self.origin,
                index,
                format!("record cut short: {filled} of {RECORD_BYTES} bytes"),
            ));
        }
        let little = match magic_endianness(&head[0..4]) {
            Some(little) => little,
            None => {
                return Err(TraceError::at(
                    &self.origin,
                    index,
                    format!("bad magic {:02x?}: not a blktrace record", &head[0..4]),
                ))
            }
        };
        if *self.little.get_or_insert(little) != little {
            return Err(TraceError::at(
                &self.origin,
                index,
                "byte order changed mid-trace",
            ));
        }
        let u32_at = |at: usize| {
            let bytes: [u8; 4] = head[at..at + 4].try_into().expect("4 bytes");
            if little {
                u32::from_le_bytes(bytes)
            } else {
                u32::from_be_bytes(bytes)
            }
        };
        let u64_at = |at: usize| {
            let bytes: [u8; 8] = head[at..at + 8].try_into().expect("8 bytes");
            if little {
                u64::from_le_bytes(bytes)
            } else {
                u64::from_be_bytes(bytes)
            }
        };
        let version = u32_at(0) & 0xff;
        if version != VERSION {
            return Err(TraceError::at(
                &self.origin,
                index,
                format!("blktrace version {version}; fio reads version {VERSION}"),
            ));
        }
        let pdu_bytes: [u8; 2] = head[46..48].try_into().expect("2 bytes");
        let pdu_len = if little {
            u16::from_le_bytes(pdu_bytes)
        } else {
            u16::from_be_bytes(pdu_bytes)
        };
        let input: &mut (dyn BufRead + Send) = &mut *self.input;
        let skipped = std::io::copy(
            &mut Read::take(input, u64::from(pdu_len)),
            &mut std::io::sink(),
        )
        .map_err(|error| {
            TraceError::file(&self.origin, format!("cannot read the trace: {error}"))
        })?;
        if skipped != u64::from(pdu_len) {
            return Err(TraceError::at(
                &self.origin,
                index,
                format!("payload cut short: {skipped} of {pdu_len} bytes"),
            ));
        }
        self.bytes_read += RECORD_BYTES as u64 + u64::from(pdu_len);
        Ok(Some((
            index,
            RawTrace {
                time: u64_at(8),
                sector: u64_at(16),
                bytes: u32_at(24),
                action: u32_at(28),
                pid: u32_at(32),
                device: u32_at(36),
                cpu: u32_at(40),
            },
        )))
    }
}

/// Reads a blktrace capture: one file, or per-CPU files merged by time.
pub struct BlktraceReader {
    streams: Vec<Stream>,
    /// The next record of each stream (time, stream, index), smallest time first.
    heads: BinaryHeap<Reverse<(u64, usize, u64)>>,
    pending: Vec<Option<RawTrace>>,
    started: bool,
    size: Option<u64>,
    /// A stream's error met while reading ahead, reported after the record before it.
    pending_error: Option<TraceError>,
}

impl BlktraceReader {
    /// A reader of one capture file.
    pub fn new(origin: &str, input: Box<dyn BufRead + Send>) -> Result<BlktraceReader, TraceError> {
        Ok(BlktraceReader {
            streams: vec![Stream {
                origin: origin.to_string(),
                input,
                little: None,
                records: 0,
                bytes_read: 0,
            }],
            heads: BinaryHeap::new(),
            pending: vec![None],
            started: false,
            size: None,
            pending_error: None,
        })
    }

    /// A reader of a capture's per-CPU `files`, merged by time; `origin` names the capture.
    pub fn open_merged(origin: &str, files: &[PathBuf]) -> Result<BlktraceReader, TraceError> {
        let mut streams = Vec::with_capacity(files.len());
        let mut size = 0;
        for path in files {
            let shown = path.display().to_string();
            let file = File::open(path)
                .map_err(|error| TraceError::file(&shown, format!("cannot open: {error}")))?;
            size += file.metadata().map(|m| m.len()).unwrap_or(0);
            streams.push(Stream {
                origin: shown,
                input: Box::new(BufReader::with_capacity(1 << 16, file)),
                little: None,
                records: 0,
                bytes_read: 0,
            });
        }
        if streams.is_empty() {
            return Err(TraceError::file(origin, "no per-CPU files"));
        }
        let pending = vec![None; streams.len()];
        Ok(BlktraceReader {
            streams,
            heads: BinaryHeap::new(),
            pending,
            started: false,
            size: Some(size),
            pending_error: None,
        })
    }

    /// The inputs' total size, when known.
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    /// Bytes consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes_read).sum()
    }

    /// Reads stream `stream`'s next record into the heap; an error waits in
    /// `pending_error` until the records before it are out.
    fn refill(&mut self, stream: usize) {
        match self.streams[stream].next() {
            Ok(Some((index, raw))) => {
                self.pending[stream] = Some(raw);
                self.heads.push(Reverse((raw.time, stream, index)));
            }
            Ok(None) => {}
            Err(error) => {
                self.pending_error.get_or_insert(error);
            }
        }
    }

    /// The next I/O record (queue events only), or `None` at the end.
    pub fn next_record(&mut self, names: &mut Names) -> Result<Option<TraceRecord>, TraceError> {
        if !self.started {
            self.started = true;
            for stream in 0..self.streams.len() {
                self.refill(stream);
            }
        }
        loop {
            if let Some(error) = self.pending_error.take() {
                return Err(error);
            }
            let Some(Reverse((_, stream, index))) = self.heads.pop() else {
                return Ok(None);
            };
            let raw = self.pending[stream].take().expect("a head has its record");
            self.refill(stream);
            if let Some(record) = to_record(&raw, index, names) {
                return Ok(Some(record));
            }
        }
    }
}

/// The request a raw record is, if it is one (fio's `handle_trace`).
fn to_record(raw: &RawTrace, index: u64, names: &mut Names) -> Option<TraceRecord> {
    if raw.action & 0xffff != TA_QUEUE || raw.action & (TC_PC | TC_NOTIFY) != 0 {
        return None;
    }
    let op = if raw.action & TC_DISCARD != 0 {
        TraceOp::Trim
    } else if raw.action & TC_FLUSH != 0 && raw.bytes == 0 {
        TraceOp::Sync
    } else if raw.action & TC_WRITE != 0 {
        TraceOp::Write
    } else {
        TraceOp::Read
    };
    let flow = names.intern(&format!("pid:{}", raw.pid));
    let target = names.intern(&format!("{},{}", raw.device >> 20, raw.device & 0xf_ffff));
    Some(TraceRecord {
        line: index,
        at: Some(raw.time),
        flow,
        target,
        action: Action::Io(op),
        offset: if op == TraceOp::Sync {
            0
        } else {
            raw.sector.saturating_mul(512)
        },
        len: u64::from(raw.bytes),
        response: None,
    })
}

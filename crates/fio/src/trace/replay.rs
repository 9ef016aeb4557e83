//! Replaying a trace as a job's I/O: fio's `read_iolog` and its `replay_*` options, for every
//! format [`TraceReader`] reads, and iosched's `iolog_format`, `iolog_flow` and `replay_mode`.
//!
//! Before the run, [`prepare`] reads the trace once, end to end, holding only counts: it
//! refuses a malformed trace with its file and line before anything runs, and sets what fio
//! sets from the log (iolog.c `read_iolog`, blktrace.c `load_blktrace`): the job's files (an
//! iolog's `add` lines, unless `replay_redirect`), its directions, its largest block sizes,
//! and, on the simulator, files large enough for every offset. The run then reads the trace
//! again, one record ahead of the job ([`Replay`]): memory is bounded by the job's depth and
//! the names in the trace, never by its length.
//!
//! When each I/O goes (`replay_mode`):
//!
//! - `fio` (fio's rule, the default): an I/O waits the trace's gap since the one before it,
//!   counted from when the job issued that one (iolog.c `iolog_delay` from `td->last_issue`),
//!   and only while the job's `iodepth` has room; a version 2 `wait` holds until that long after
//!   the job began. `replay_no_stall` drops the gaps; `replay_time_scale` scales them (200
//!   replays twice as fast, fio's `delay_since_ttime`); a time earlier than the one before is
//!   no gap.
//! - `open`: each I/O goes at its own time in the trace since the trace's first, scaled, so an
//!   I/O that had to wait for room in `iodepth` does not delay the ones after it; give a depth
//!   larger than the trace's concurrency.
//! - `closed`: one I/O at a time (depth 1); each goes when the one before completed plus the
//!   trace's think time, its gap since the one before completed in the trace (its time plus its
//!   recorded response time, MSR's `ResponseTime`); a trace without response times gives
//!   fio's rule at depth 1.
//!
//! Which records: with `iolog_flow=KEY` only that flow's (`pid:1234`, `disk:web_0`, `asu:1`,
//! `file:/dev/sdb`); `replay_skip` leaves out directions; offsets are divided by `replay_scale`
//! and aligned down to `replay_align`.
//!
//! Requests that overlap one another, in flight or not, are issued as the trace has them, as
//! fio does without `serialize_overlap`.
//!
//! A block-level trace (blktrace, blkparse, MSR, SPC) is replayed with `direct=1`, as fio's
//! `load_blktrace` sets `odirect`: it was taken below the page cache.
//!
//! Where they go: an iolog's files are the job's files, as in fio (or the one
//! `replay_redirect` names). In other formats each target (a disk, an ASU, a device) takes the
//! job's next `filename`, in the order they first appear; a trace with more targets than the
//! job names files is refused unless `replay_redirect` sends them all to one. On the real
//! engine nothing is written to a file the job file does not name: an iolog naming a file that
//! is not among the job's `filename`s is refused.

use super::{per_cpu_files, Action, Format, TraceError, TraceOp, TraceReader, TraceRecord};
use crate::job::Amount;
use crate::workload::NextIo;
use crate::{BlockSize, DataDir, JobSpec, RwMode};
use iosched_core::Nanos;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// When each replayed I/O goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplayMode {
    /// fio's rule: the trace's gaps from the last issue, within `iodepth`.
    #[default]
    Fio,
    /// At the trace's own times, within `iodepth`.
    Open,
    /// One at a time, after the last completion and the trace's think time.
    Closed,
}

impl ReplayMode {
    /// The mode named `name` (`fio`, `open`, `closed`).
    pub fn parse(name: &str) -> Result<ReplayMode, String> {
        match name {
            "fio" => Ok(ReplayMode::Fio),
            "open" => Ok(ReplayMode::Open),
            "closed" => Ok(ReplayMode::Closed),
            other => Err(format!("replay_mode={other}: fio, open or closed")),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            ReplayMode::Fio => "fio",
            ReplayMode::Open => "open",
            ReplayMode::Closed => "closed",
        }
    }
}

/// What a job replays and how (`read_iolog` and the options around it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplaySpec {
    /// The trace as the job names it.
    pub path: String,
    /// The job file's folder, where a relative path not found in the current directory is
    /// looked for.
    pub base_dir: Option<PathBuf>,
    /// Its format (`iolog_format`), or `None` to tell from its first bytes.
    pub format: Option<Format>,
    /// Only this flow's records (`iolog_flow`).
    pub flow: Option<String>,
    /// When each I/O goes (`replay_mode`).
    pub mode: ReplayMode,
    /// `replay_no_stall`.
    pub no_stall: bool,
    /// `replay_time_scale`, percent (100: the trace's pace).
    pub time_scale: u32,
    /// `replay_scale`: offsets are divided by it.
    pub scale: u64,
    /// `replay_align`: offsets are aligned down to it (a power of 2), 0 for none.
    pub align: u64,
    /// `replay_redirect`: every I/O goes to this file.
    pub redirect: Option<String>,
    /// `replay_skip`: reads, writes, trims, syncs left out.
    pub skip: [bool; 4],
}

impl ReplaySpec {
    /// A replay of `path` with fio's defaults.
    pub fn new(path: &str) -> ReplaySpec {
        ReplaySpec {
            path: path.to_string(),
            base_dir: None,
            format: None,
            flow: None,
            mode: ReplayMode::Fio,
            no_stall: false,
            time_scale: 100,
            scale: 1,
            align: 0,
            redirect: None,
            skip: [false; 4],
        }
    }

    /// Where the trace is: the path as given when it exists (fio's rule, relative to the
    /// current directory), else beside the job file when that exists.
    pub fn resolved(&self) -> PathBuf {
        let given = PathBuf::from(&self.path);
        let found = |path: &Path| path.exists() || !per_cpu_files(path).is_empty();
        if given.is_absolute() || found(&given) {
            return given;
        }
        match &self.base_dir {
            Some(dir) if found(&dir.join(&given)) => dir.join(given),
            _ => given,
        }
    }

    /// Opens the trace.
    pub fn open(&self) -> Result<TraceReader, TraceError> {
        TraceReader::open(&self.resolved(), self.format)
    }

    /// The record's operation, offset and length as replayed, or `None` when the job leaves
    /// it out (another flow, a skipped direction, not an I/O).
    fn admit(&self, reader: &TraceReader, record: &TraceRecord) -> Option<(TraceOp, u64, u64)> {
        let Action::Io(op) = record.action else {
            return None;
        };
        if let Some(flow) = &self.flow {
            if !is_flow(reader, record, flow) {
                return None;
            }
        }
        let skipped = match op {
            TraceOp::Read => self.skip[0],
            TraceOp::Write => self.skip[1],
            TraceOp::Trim => self.skip[2],
            TraceOp::Sync | TraceOp::Datasync => self.skip[3],
        };
        if skipped {
            return None;
        }
        let mut offset = record.offset / self.scale.max(1);
        if self.align > 0 {
            offset &= !(self.align - 1);
        }
        Some((op, offset, record.len))
    }
}

/// A record's flow as `iolog_flow` names it: `file:NAME` for an iolog, the reader's name
/// otherwise.
pub fn flow_key(reader: &TraceReader, record: &TraceRecord) -> String {
    let name = reader.names().get(record.flow);
    if reader.format() == Format::Iolog {
        format!("file:{name}")
    } else {
        name.to_string()
    }
}

/// Whether `record` is of the flow `key` names ([`flow_key`]), without building the key.
fn is_flow(reader: &TraceReader, record: &TraceRecord, key: &str) -> bool {
    let name = reader.names().get(record.flow);
    if reader.format() == Format::Iolog {
        key.strip_prefix("file:") == Some(name)
    } else {
        key == name
    }
}

/// What a whole trace holds for one job, counted in one pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceSummary {
    /// The format read.
    pub format: Option<Format>,
    /// I/Os per direction (read, write, trim) and syncs the job replays.
    pub ios: [u64; 3],
    /// Syncs (and datasyncs) it replays.
    pub syncs: u64,
    /// Bytes per direction.
    pub bytes: [u64; 3],
    /// Smallest and largest length per direction (0 when none).
    pub min_bs: [u64; 3],
    /// Largest length per direction.
    pub max_bs: [u64; 3],
    /// The targets the replayed records address, in the order they appear (an iolog's
    /// added files too), each with the end of its furthest I/O.
    pub targets: Vec<(String, u64)>,
    /// Every flow in the trace, in the order they appear, with its I/O count (before
    /// `iolog_flow` picks one).
    pub flows: Vec<(String, u64)>,
    /// The replayed records' first and last times, ns on the trace's clock.
    pub first_at: Option<Nanos>,
    /// The last time.
    pub last_at: Option<Nanos>,
    /// Records earlier than the one before them (replayed with no gap, as fio does).
    pub out_of_order: u64,
    /// The sum and count of recorded response times.
    pub response_sum: u128,
    /// How many records had one.
    pub responses: u64,
}

impl TraceSummary {
    /// I/Os (and syncs) replayed.
    pub fn records(&self) -> u64 {
        self.ios.iter().sum::<u64>() + self.syncs
    }

    /// The trace's span, first to last replayed record.
    pub fn span(&self) -> Nanos {
        match (self.first_at, self.last_at) {
            (Some(first), Some(last)) => last.saturating_sub(first),
            _ => 0,
        }
    }

    /// The mean recorded response time, if the trace has them.
    pub fn mean_response(&self) -> Option<Nanos> {
        (self.responses > 0).then(|| (self.response_sum / u128::from(self.responses)) as Nanos)
    }
}

/// Reads the trace of `spec` end to end, counting what the job replays.
pub fn summarize(spec: &ReplaySpec) -> Result<TraceSummary, TraceError> {
    let mut reader = spec.open()?;
    let mut summary = TraceSummary {
        format: Some(reader.format()),
        ..TraceSummary::default()
    };
    let mut target_index: HashMap<u32, usize> = HashMap::new();
    let mut flow_index: HashMap<u32, usize> = HashMap::new();
    let mut last_at = None;
    while let Some(record) = reader.next_record()? {
        if matches!(record.action, Action::Io(_)) {
            let index = *flow_index.entry(record.flow).or_insert_with(|| {
                summary.flows.push((flow_key(&reader, &record), 0));
                summary.flows.len() - 1
            });
            summary.flows[index].1 += 1;
        }
        if record.action == Action::Add && spec.flow.is_none() && spec.redirect.is_none() {
            target_index.entry(record.target).or_insert_with(|| {
                summary
                    .targets
                    .push((reader.names().get(record.target).to_string(), 0));
                summary.targets.len() - 1
            });
        }
        let Some((op, offset, len)) = spec.admit(&reader, &record) else {
            continue;
        };
        let end = offset.checked_add(len).ok_or_else(|| {
            TraceError::at(&spec.path, record.line, "offset plus length passes 2^64")
        })?;
        let index = *target_index.entry(record.target).or_insert_with(|| {
            summary
                .targets
                .push((reader.names().get(record.target).to_string(), 0));
            summary.targets.len() - 1
        });
        if let Some(at) = record.at {
            if last_at.is_some_and(|last| at < last) {
                summary.out_of_order += 1;
            }
            last_at = Some(at);
            summary.first_at.get_or_insert(at);
            summary.last_at = Some(summary.last_at.map_or(at, |l: Nanos| l.max(at)));
        }
        if let Some(response) = record.response {
            summary.response_sum += u128::from(response);
            summary.responses += 1;
        }
        let dir = match op {
            TraceOp::Read => 0,
            TraceOp::Write => 1,
            TraceOp::Trim => 2,
            TraceOp::Sync | TraceOp::Datasync => {
                summary.syncs += 1;
                continue;
            }
        };
        summary.targets[index].1 = summary.targets[index].1.max(end);
        summary.ios[dir] += 1;
        summary.bytes[dir] += len;
        summary.max_bs[dir] = summary.max_bs[dir].max(len);
        summary.min_bs[dir] = if summary.min_bs[dir] == 0 {
            len
        } else {
            summary.min_bs[dir].min(len)
        };
    }
    Ok(summary)
}

/// Reads the trace of `spec.replay` once and sets what fio sets from a log: the job's files,
/// directions, block sizes and (on the simulator, `real` false) file sizes; a trace without an
/// I/O for the job, or one whose targets the job cannot place, is refused.
pub fn prepare(spec: &mut JobSpec, real: bool) -> Result<TraceSummary, String> {
    let Some(mut replay) = spec.replay.clone() else {
        return Ok(TraceSummary::default());
    };
    // fio's get_name_by_idx: `read_iolog=a.log:b.log` gives each numjobs clone its own log,
    // the clone's number modulo the count (a path that exists as written is one path).
    if replay.path.contains(':') && !replay.resolved().exists() {
        let parts: Vec<&str> = replay.path.split(':').filter(|p| !p.is_empty()).collect();
        if !parts.is_empty() {
            replay.path = parts[spec.clone as usize % parts.len()].to_string();
            spec.replay = Some(replay.clone());
        }
    }
    if spec.zbd.is_some() {
        return Err("read_iolog: replaying into zonemode=zbd is not supported".into());
    }
    if replay.path == "-" {
        return Err(
            "read_iolog=-: iosched reads a trace twice (once before the run, to refuse \
                    a malformed one before anything runs), so it must be a file; save standard \
                    input to one first"
                .into(),
        );
    }
    let summary = summarize(&replay).map_err(|error| format!("read_iolog: {error}"))?;
    if summary.records() == 0 {
        let which = replay
            .flow
            .as_ref()
            .map_or(String::new(), |flow| format!(" of flow {flow}"));
        let flows: Vec<&str> = summary.flows.iter().map(|(f, _)| f.as_str()).collect();
        return Err(format!(
            "read_iolog: {}: no I/O{which} to replay (flows in the trace: {})",
            replay.path,
            if flows.is_empty() {
                "none".to_string()
            } else {
                flows.join(", ")
            }
        ));
    }
    let format = summary.format.unwrap_or(Format::Iolog);
    let targets: Vec<&str> = summary.targets.iter().map(|(t, _)| t.as_str()).collect();
    let filenames: Vec<String> = if let Some(redirect) = &replay.redirect {
        vec![redirect.clone()]
    } else if format == Format::Iolog {
        if real {
            if let Some(missing) = targets
                .iter()
                .find(|t| !spec.filenames.iter().any(|f| f == *t))
            {
                return Err(format!(
                    "read_iolog: {} names {missing:?}, which the job does not name; on a real \
                     device iosched writes only to files the job file names: add \
                     filename={missing} (or replay_redirect=FILE)",
                    replay.path
                ));
            }
        }
        targets.iter().map(|t| t.to_string()).collect()
    } else {
        if targets.len() > spec.filenames.len() {
            return Err(format!(
                "read_iolog: {} addresses {} targets ({}) but the job names {} file(s); give \
                 one filename per target (filename=a:b:...) or replay_redirect=FILE",
                replay.path,
                targets.len(),
                targets.join(", "),
                spec.filenames.len()
            ));
        }
        spec.filenames[..targets.len()].to_vec()
    };
    spec.filenames = filenames;
    let (reads, writes, trims) = (summary.ios[0] > 0, summary.ios[1] > 0, summary.ios[2] > 0);
    spec.rw = match (reads, writes, trims) {
        (true, false, false) => RwMode::RandRead,
        (false, true, false) => RwMode::RandWrite,
        (false, false, true) => RwMode::RandTrim,
        _ => RwMode::RandReadWrite,
    };
    for dir in DataDir::ALL {
        let d = dir as usize;
        if summary.ios[d] > 0 {
            let (min, max) = (summary.min_bs[d].max(1), summary.max_bs[d].max(1));
            spec.bs[d] = if min == max {
                BlockSize::Fixed(max)
            } else {
                BlockSize::Range { min, max }
            };
        }
    }
    if !real && spec.size.is_none() && !spec.filenames.iter().all(|f| f.starts_with("/dev/")) {
        let furthest = summary
            .targets
            .iter()
            .map(|(_, end)| *end)
            .max()
            .unwrap_or(0);
        let per_file = furthest.max(4096).div_ceil(4096) * 4096;
        spec.size = Some(Amount::Bytes(
            per_file.saturating_mul(spec.filenames.len() as u64),
        ));
    }
    if replay.mode == ReplayMode::Closed {
        spec.iodepth = 1;
    }
    // A block trace was taken below the page cache: fio replays blktrace with O_DIRECT
    // (load_blktrace sets odirect), and so does iosched every block-level format.
    if format != Format::Iolog {
        spec.direct = true;
    }
    Ok(summary)
}

/// When a replayed I/O may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// This long after the job's last issue.
    AfterIssue(Nanos),
    /// This long after the job began.
    AfterStart(Nanos),
    /// This long after the job's last completion.
    AfterCompletion(Nanos),
}

/// What the replay asks of the job next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayOp {
    /// An I/O.
    Io(NextIo),
    /// A sync of the job's file `file`.
    Sync(usize),
}

/// The job's next replayed step and when it may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayStep {
    /// What.
    pub op: ReplayOp,
    /// When.
    pub pace: Pace,
}

/// One job's replay, one record ahead.
pub struct Replay {
    spec: ReplaySpec,
    reader: TraceReader,
    /// The job's files: where each begins in the engine's coordinates and its length.
    files: Vec<(String, u64, u64)>,
    /// Job file index per trace name index, once known.
    file_of: Vec<Option<usize>>,
    /// Targets mapped so far, for formats that take the job's files in order.
    mapped: usize,
    first_at: Option<Nanos>,
    prev_at: Option<Nanos>,
    prev_response: Option<Nanos>,
}

impl Replay {
    /// Opens the replay of a job whose files are `files` (name, start, length in the
    /// engine's coordinates), as [`prepare`] set them.
    pub fn open(spec: &ReplaySpec, files: Vec<(String, u64, u64)>) -> Result<Replay, TraceError> {
        Ok(Replay {
            reader: spec.open()?,
            spec: spec.clone(),
            files,
            file_of: Vec::new(),
            mapped: 0,
            first_at: None,
            prev_at: None,
            prev_response: None,
        })
    }

    /// Share of the trace read, 0 to 1, when its size is known.
    pub fn done_fraction(&self) -> Option<f64> {
        let (read, size) = self.reader.progress();
        size.filter(|&s| s > 0).map(|s| read as f64 / s as f64)
    }

    fn file_index(&mut self, record: &TraceRecord) -> Result<usize, TraceError> {
        let target = record.target as usize;
        if let Some(Some(index)) = self.file_of.get(target) {
            return Ok(*index);
        }
        let index = if self.spec.redirect.is_some() {
            0
        } else if self.reader.format() == Format::Iolog {
            let name = self.reader.names().get(record.target);
            self.files
                .iter()
                .position(|(file, _, _)| file == name)
                .ok_or_else(|| {
                    TraceError::at(
                        &self.spec.path,
                        record.line,
                        format!("{name:?} is not one of the job's files"),
                    )
                })?
        } else {
            self.mapped += 1;
            self.mapped - 1
        };
        if index >= self.files.len() {
            return Err(TraceError::at(
                &self.spec.path,
                record.line,
                "more targets than the job has files",
            ));
        }
        if self.file_of.len() <= target {
            self.file_of.resize(target + 1, None);
        }
        self.file_of[target] = Some(index);
        Ok(index)
    }

    fn scaled(&self, gap: Nanos) -> Nanos {
        if self.spec.no_stall {
            return 0;
        }
        let scale = self.spec.time_scale.max(1);
        if scale == 100 {
            gap
        } else {
            (u128::from(gap) * 100 / u128::from(scale)).min(u128::from(Nanos::MAX)) as Nanos
        }
    }

    /// The next step, or `None` when the trace is done.
    pub fn next_step(&mut self) -> Result<Option<ReplayStep>, TraceError> {
        let mut wait_until = None;
        loop {
            let Some(record) = self.reader.next_record()? else {
                return Ok(None);
            };
            if let Action::Wait(until) = record.action {
                if !self.spec.no_stall {
                    wait_until = Some(until);
                }
                continue;
            }
            let Some((op, offset, len)) = self.spec.admit(&self.reader, &record) else {
                continue;
            };
            let file = self.file_index(&record)?;
            let pace = self.pace(&record, wait_until);
            if !op.is_data() {
                return Ok(Some(ReplayStep {
                    op: ReplayOp::Sync(file),
                    pace,
                }));
            }
            let (name, start, size) = &self.files[file];
            if offset.saturating_add(len) > *size {
                return Err(TraceError::at(
                    &self.spec.path,
                    record.line,
                    format!(
                        "{} of {len} bytes at offset {offset} passes the end of {name:?} \
                         ({size} bytes)",
                        op.iolog_name()
                    ),
                ));
            }
            if len == 0 {
                continue;
            }
            let dir = match op {
                TraceOp::Read => DataDir::Read,
                TraceOp::Write => DataDir::Write,
                _ => DataDir::Trim,
            };
            return Ok(Some(ReplayStep {
                op: ReplayOp::Io(NextIo {
                    dir,
                    offset: start + offset,
                    len,
                    file,
                }),
                pace,
            }));
        }
    }

    fn pace(&mut self, record: &TraceRecord, wait_until: Option<Nanos>) -> Pace {
        if let Some(until) = wait_until {
            return Pace::AfterStart(until);
        }
        let Some(at) = record.at else {
            return Pace::AfterIssue(0);
        };
        let first = *self.first_at.get_or_insert(at);
        let prev = self.prev_at.replace(at);
        let prev_response = std::mem::replace(&mut self.prev_response, record.response);
        match self.spec.mode {
            ReplayMode::Open => Pace::AfterStart(self.scaled(at.saturating_sub(first))),
            ReplayMode::Closed if prev_response.is_some() || prev.is_none() => {
                let done = prev.map_or(at, |p| p.saturating_add(prev_response.unwrap_or(0)));
                Pace::AfterCompletion(self.scaled(at.saturating_sub(done)))
            }
            ReplayMode::Fio | ReplayMode::Closed => {
                Pace::AfterIssue(prev.map_or(0, |p| self.scaled(at.saturating_sub(p))))
            }
        }
    }
}

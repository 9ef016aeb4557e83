//! The request: the unit every policy queues, merges, dispatches and completes.

use crate::group::GroupId;
use crate::ioprio::IoPrio;
use crate::time::Nanos;
use std::fmt;

/// Identifies a request for its whole life. Engines hand out ids in arrival order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// The issuer of a request: a process, an application, a VM, a client. Policies that keep
/// per-process state (anticipation, time slices, token buckets) key it by flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub u32);

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// Read `len` bytes at `offset`.
    Read,
    /// Write `len` bytes at `offset`.
    Write,
    /// Make earlier writes durable (a cache flush); carries no data.
    Flush,
    /// Tell the device that `len` bytes at `offset` are no longer needed (TRIM / UNMAP).
    Discard,
}

/// Data direction as Linux's `rq_data_dir`: flushes and discards count as writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Data flows from the device.
    Read = 0,
    /// Data flows to the device (or the device state changes).
    Write = 1,
}

impl Op {
    /// The direction Linux would assign this operation.
    pub fn direction(self) -> Direction {
        match self {
            Op::Read => Direction::Read,
            Op::Write | Op::Flush | Op::Discard => Direction::Write,
        }
    }

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Discard => "discard",
        }
    }
}

/// Largest number of original requests one merged request may carry, as the kernel's
/// `BLK_MAX_SEGMENTS` (128) bounds the bios in one request. This keeps [`Request::merged`]
/// bounded whatever the workload.
pub const MAX_MERGED_REQUESTS: usize = 127;

/// One I/O request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Unique id, assigned by the engine in arrival order.
    pub id: RequestId,
    /// What to do.
    pub op: Op,
    /// First byte addressed on the device.
    pub offset: u64,
    /// Number of bytes addressed; zero for a flush.
    pub len: u64,
    /// Linux's `op_is_sync`: every read, and O_DIRECT, O_SYNC and fsync writes. Asynchronous
    /// writeback is `false`. Read-ahead is a read, so sync too (`readahead` tells it apart).
    pub sync: bool,
    /// A read the page cache issues ahead of its reader (REQ_RAHEAD): nobody waits for it yet.
    pub readahead: bool,
    /// I/O priority carried from the issuer.
    pub prio: IoPrio,
    /// The issuer.
    pub flow: FlowId,
    /// The issuer's group (cgroup).
    pub group: GroupId,
    /// When the request entered the scheduler.
    pub arrival: Nanos,
    /// Requests merged into this one. Completing this request completes each of them.
    /// Never longer than [`MAX_MERGED_REQUESTS`].
    pub merged: Vec<RequestId>,
    /// Force unit access (REQ_FUA): a write that completes only once its data is on the
    /// media, past any volatile cache. Linux sets it on O_DSYNC/O_SYNC direct writes to a
    /// block device (block/fops.c, `dio_bio_write_op`).
    pub fua: bool,
}

impl Request {
    /// A request with no merged companions.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: RequestId,
        op: Op,
        offset: u64,
        len: u64,
        sync: bool,
        prio: IoPrio,
        flow: FlowId,
        group: GroupId,
        arrival: Nanos,
    ) -> Self {
        Request {
            id,
            op,
            offset,
            len,
            sync,
            prio,
            flow,
            group,
            arrival,
            merged: Vec::new(),
            fua: false,
            readahead: false,
        }
    }

    /// One past the last byte addressed.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }

    /// The data direction.
    pub fn direction(&self) -> Direction {
        self.op.direction()
    }

    /// Whether this is a read.
    pub fn is_read(&self) -> bool {
        self.op == Op::Read
    }

    /// Number of original requests this one completes: itself and every merged one.
    pub fn request_count(&self) -> usize {
        1 + self.merged.len()
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{} {} {}+{} flow {} prio {}",
            self.id.0,
            self.op.name(),
            self.offset,
            self.len,
            self.flow.0,
            self.prio
        )
    }
}

/// The limits a merge must respect: the device queue's `max_sectors_kb` and the policy's own
/// choice to merge at the front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeLimits {
    /// Largest request, in bytes, that merging may build.
    pub max_request_bytes: u64,
}

/// Why two requests may or may not become one. Mirrors `blk_rq_merge_ok`: same operation
/// (flushes never merge), same priority, same group, neither FUA (`REQ_NOMERGE_FLAGS`), and
/// the result within the size and segment limits. Adjacency is checked by the caller, which knows which side it merges on.
pub fn mergeable(existing: &Request, incoming: &Request, limits: MergeLimits) -> bool {
    existing.op == incoming.op
        && existing.op != Op::Flush
        && existing.prio == incoming.prio
        && existing.group == incoming.group
        && !existing.fua
        && !incoming.fua
        && existing.len + incoming.len <= limits.max_request_bytes
        && existing.merged.len() + incoming.merged.len() + 1 < MAX_MERGED_REQUESTS
}

/// Appends `incoming` at the back of `existing` (`existing.end() == incoming.offset`).
pub fn merge_back(existing: &mut Request, incoming: Request) {
    debug_assert_eq!(existing.end(), incoming.offset);
    existing.len += incoming.len;
    absorb(existing, incoming);
}

/// Prepends `incoming` in front of `existing` (`incoming.end() == existing.offset`).
pub fn merge_front(existing: &mut Request, incoming: Request) {
    debug_assert_eq!(incoming.end(), existing.offset);
    existing.offset = incoming.offset;
    existing.len += incoming.len;
    absorb(existing, incoming);
}

fn absorb(existing: &mut Request, incoming: Request) {
    existing.sync |= incoming.sync;
    existing.readahead &= incoming.readahead;
    existing.arrival = existing.arrival.min(incoming.arrival);
    existing.merged.push(incoming.id);
    existing.merged.extend(incoming.merged);
    assert!(
        existing.merged.len() < MAX_MERGED_REQUESTS,
        "merge exceeded the segment bound"
    );
}

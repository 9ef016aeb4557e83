//! `raid0`: Linux md RAID-0 (drivers/md/raid0.c) striped over `members` member devices of one
//! model, `chunk_kb` per chunk.
//!
//! With equal members there is one strip zone: chunk `c` of the array is chunk `c / members`
//! of member `c % members` (`map_sector`). A command is split at chunk boundaries as
//! `raid0_make_request` splits a bio (`bio_split` at the chunk's end), and the pieces that
//! land next to each other on one member go to it as one command, as the member's queue would
//! merge them. The command completes when its last piece does (the parent bio's endio after
//! its clones'), with the first error any piece had. A flush goes to every member
//! (`md_flush_request`).
//!
//! Where the scheduling happens is selectable. By default the policy runs on the md device and
//! the members have none below it: the kernel's arrangement since blk-mq (md is bio-based;
//! each member's scheduler is usually `none`). With `member_policy=NAME` each member has its
//! own elevator running that policy, as every disk had its own in the 2.6 kernels, where md
//! had none (`--policy none` on the array then gives the 2.6 arrangement): a piece enters its
//! member's elevator as a bio enters the member's queue (merging there, or taking one of its
//! `nr_requests`), the elevator dispatches to the member while the member has room, and its
//! idling (anticipation, cfq's slice_idle) keeps that member waiting. When a member's queue
//! is full the md submitter blocks: the array takes no new command whose pieces would go to
//! a member with pieces still waiting for a request.
//!
//! Settings: `members` (2), `chunk_kb` (512, mdadm's default since 3.1; 64 before), `member`
//! (the members' model, `hdd`), `member.NAME=VALUE` for any setting of that model, given to
//! every member, `member_policy` (none) and `member_policy.NAME=VALUE` for any tunable of its
//! queue or policy. Member `i` draws from its own stream of the device's seed.

use super::{parameter, parse_integer, Device, DeviceError, ModelInfo};
use iosched_core::{policies, Dispatch, Elevator, Nanos, Op, Request, RequestId};
use iosched_fio::Parameter;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// A command of the array, waiting for its pieces.
#[derive(Debug)]
struct Parent {
    request: Request,
    pieces_left: u32,
    /// The latest completion among its pieces so far.
    done_at: Nanos,
    error: Option<i32>,
}

/// One member: its device, and with `member_policy` its own elevator.
struct Member {
    device: Box<dyn Device>,
    elevator: Option<Elevator>,
    /// Pieces its elevator had no request for: the md submitter waits (2.6's
    /// `get_request_wait`), in order.
    waiting: VecDeque<Request>,
    /// When its elevator asked to be called again (idling), if it did.
    wake: Option<Nanos>,
}

/// The md RAID-0 array.
pub struct Raid0 {
    members: Vec<Member>,
    member_model: String,
    /// The members' policy and its settings, when each member has its own elevator.
    member_policy: Option<String>,
    chunk: u64,
    capacity: u64,
    parents: FxHashMap<u64, Parent>,
    /// Piece id -> parent id.
    pieces: FxHashMap<u64, u64>,
    next_piece: u64,
    /// Errors of the parents `advance` last reported, for `completion_error`.
    errors: FxHashMap<u64, i32>,
    splits: u64,
    /// Pieces a member reported while being brought to the present before a submit:
    /// (completion time, piece id, error).
    early: Vec<(Nanos, u64, Option<i32>)>,
}

impl std::fmt::Debug for Raid0 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Raid0")
            .field("members", &self.members.len())
            .field("member_model", &self.member_model)
            .field("chunk", &self.chunk)
            .finish()
    }
}

/// Most members.
const MEMBERS_MAX: u64 = 64;

impl Raid0 {
    /// Builds the array from `settings` over the defaults, seeded.
    pub fn from_settings(settings: &[(String, String)], seed: u64) -> Result<Self, DeviceError> {
        let mut members = 2;
        let mut chunk_kb = 512;
        let mut member_model = "hdd".to_string();
        let mut member_settings = Vec::new();
        let mut member_policy: Option<String> = None;
        let mut policy_settings = Vec::new();
        for (name, value) in settings {
            match name.as_str() {
                "members" => members = parse_integer(name, value, 2, MEMBERS_MAX)?,
                "chunk_kb" => {
                    chunk_kb = parse_integer(name, value, 4, 1 << 20)?;
                    if !chunk_kb.is_power_of_two() {
                        return Err(DeviceError::BadValue {
                            name: name.clone(),
                            value: value.clone(),
                            reason: "md chunks are a power of two of KiB (4, 8, ..., 512, ...)"
                                .into(),
                        });
                    }
                }
                "member" => {
                    if value == MODEL.name {
                        return Err(DeviceError::BadValue {
                            name: name.clone(),
                            value: value.clone(),
                            reason: "a RAID-0 of RAID-0s is not modelled".into(),
                        });
                    }
                    member_model = value.clone();
                }
                "member_policy" => {
                    member_policy = match value.trim() {
                        "" | "none" => None,
                        policy => Some(policy.to_string()),
                    }
                }
                other => match (
                    other.strip_prefix("member."),
                    other.strip_prefix("member_policy."),
                ) {
                    (Some(setting), _) => {
                        member_settings.push((setting.to_string(), value.clone()))
                    }
                    (_, Some(setting)) => {
                        policy_settings.push((setting.to_string(), value.clone()))
                    }
                    (None, None) => {
                        return Err(DeviceError::UnknownParameter {
                            model: MODEL.name.into(),
                            name: other.into(),
                            known: vec![
                                "members".into(),
                                "chunk_kb".into(),
                                "member".into(),
                                "member.NAME (any setting of the member model)".into(),
                                "member_policy".into(),
                                "member_policy.NAME (any tunable of the members' policy)"
                                    .into(),
                            ],
                        })
                    }
                },
            }
        }
        let chunk = chunk_kb * 1024;
        let mut built = Vec::with_capacity(members as usize);
        for index in 0..members {
            let member_seed = crate::random::derive_seed(seed, index);
            let device = super::build(&member_model, &member_settings, member_seed)?;
            let elevator = match &member_policy {
                Some(policy) => Some(member_elevator(policy, &policy_settings, &*device)?),
                None if !policy_settings.is_empty() => {
                    return Err(DeviceError::BadValue {
                        name: format!("member_policy.{}", policy_settings[0].0),
                        value: policy_settings[0].1.clone(),
                        reason: "the members have no elevator: set member_policy too".into(),
                    })
                }
                None => None,
            };
            built.push(Member {
                device,
                elevator,
                waiting: VecDeque::new(),
                wake: None,
            });
        }
        let smallest = built.iter().map(|m| m.device.capacity()).min().unwrap_or(0);
        // Each member contributes whole chunks (raid0's strip zone of equal members).
        let capacity = smallest / chunk * chunk * members;
        if capacity == 0 {
            return Err(DeviceError::BadValue {
                name: "chunk_kb".into(),
                value: chunk_kb.to_string(),
                reason: "larger than a member".into(),
            });
        }
        Ok(Raid0 {
            members: built,
            member_model,
            member_policy,
            chunk,
            capacity,
            parents: FxHashMap::default(),
            pieces: FxHashMap::default(),
            next_piece: 0,
            errors: FxHashMap::default(),
            splits: 0,
            early: Vec::new(),
        })
    }

    /// Where array byte `offset` is: (member, offset on the member) (`map_sector`).
    pub fn map(&self, offset: u64) -> (usize, u64) {
        let n = self.members.len() as u64;
        let chunk = offset / self.chunk;
        let within = offset % self.chunk;
        ((chunk % n) as usize, (chunk / n) * self.chunk + within)
    }

    /// The member commands of array range `[offset, offset + len)`: split at chunk
    /// boundaries, adjacent pieces on one member joined. (member, offset, len), in order.
    fn split(&self, offset: u64, len: u64) -> Vec<(usize, u64, u64)> {
        let mut out: Vec<(usize, u64, u64)> = Vec::new();
        let mut at = offset;
        let end = offset + len;
        while at < end {
            let piece = (self.chunk - at % self.chunk).min(end - at);
            let (member, member_offset) = self.map(at);
            match out.iter_mut().find(|p| p.0 == member && p.1 + p.2 == member_offset) {
                Some(previous) => previous.2 += piece,
                None => out.push((member, member_offset, piece)),
            }
            at += piece;
        }
        out
    }

    fn piece(&mut self, parent: &Request, offset: u64, len: u64) -> Request {
        let id = self.next_piece;
        self.next_piece += 1;
        self.pieces.insert(id, parent.id.0);
        piece_of(parent, RequestId(id), offset, len)
    }

    /// Brings member `m` to `now`: its device's completions go to `early` (and to its
    /// elevator), a due wake is taken, waiting pieces enter its elevator as requests free
    /// up, and its elevator dispatches while the device has room.
    fn pump(&mut self, m: usize, now: Nanos) {
        let member = &mut self.members[m];
        let mut finished = Vec::new();
        member.device.advance(now, &mut finished);
        for (at, done) in finished {
            let error = member.device.completion_error(&done);
            if let Some(elevator) = &mut member.elevator {
                elevator.completed(&done, at);
            }
            // Pieces the member's elevator merged into this one complete with it.
            for id in std::iter::once(done.id).chain(done.merged.iter().copied()) {
                self.early.push((at, id.0, error));
            }
        }
        let Some(elevator) = &mut member.elevator else {
            return;
        };
        if member.wake.is_some_and(|at| at <= now) {
            member.wake = None;
        }
        loop {
            while let Some(piece) = member.waiting.pop_front() {
                if let Err(piece) = elevator.submit(piece, now) {
                    member.waiting.push_front(piece);
                    break;
                }
            }
            if member.device.in_flight() >= member.device.queue_depth() {
                break;
            }
            match elevator.dispatch(now) {
                Dispatch::Request(request) => {
                    if !member.device.accepts(&request) {
                        // A non-queued command waits for the queue to drain.
                        elevator.requeue(request, now);
                        break;
                    }
                    member.device.submit(request, now);
                }
                Dispatch::WaitUntil(at) => {
                    member.wake = Some(at.max(now + 1));
                    break;
                }
                Dispatch::Empty => break,
            }
        }
    }

    /// Whether member `m` takes `piece` now: into its device (no elevator), or into its
    /// elevator, which needs a free request and no piece waiting before it.
    fn member_accepts(&self, m: usize, piece: &Request) -> bool {
        let member = &self.members[m];
        match &member.elevator {
            None => member.device.accepts(piece),
            Some(elevator) => {
                member.waiting.is_empty()
                    && elevator.has_room_for(piece.group, piece.direction())
            }
        }
    }
}

/// Member `device`'s own elevator running `policy` with `settings`. Its nr_requests is 128
/// (BLKDEV_MAX_RQ, the single-queue block layer's default of the 2.6 kernels this
/// arrangement is theirs), or blk-mq's for a deeper device; `member_policy.nr_requests` sets
/// it.
fn member_elevator(
    policy: &str,
    settings: &[(String, String)],
    device: &dyn Device,
) -> Result<Elevator, DeviceError> {
    let bad = |reason: String| DeviceError::BadValue {
        name: "member_policy".into(),
        value: policy.to_string(),
        reason,
    };
    let stack = policies::Stack::parse(policy).map_err(|e| bad(e.to_string()))?;
    let nr_requests = iosched_core::elevator::default_nr_requests(device.queue_depth()).max(128);
    let mut elevator = stack.elevator(nr_requests);
    policies::apply_settings(&mut elevator, settings).map_err(|e| bad(e.to_string()))?;
    Ok(elevator)
}

/// The member command for `[offset, offset + len)` of `parent` on its member: the parent's
/// kind, priority and issuer, without its merged companions.
fn piece_of(parent: &Request, id: RequestId, offset: u64, len: u64) -> Request {
    let mut piece = Request::new(
        id,
        parent.op,
        offset,
        len,
        parent.sync,
        parent.prio,
        parent.flow,
        parent.group,
        parent.arrival,
    );
    piece.fua = parent.fua;
    piece.readahead = parent.readahead;
    piece
}

impl Device for Raid0 {
    fn model(&self) -> &'static str {
        MODEL.name
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn queue_depth(&self) -> u32 {
        // With the members' elevators, md passes bios on at once: their request lists bound
        // what it holds.
        self.members
            .iter()
            .map(|m| match &m.elevator {
                Some(elevator) => elevator.nr_requests(),
                None => m.device.queue_depth(),
            })
            .sum()
    }

    fn in_flight(&self) -> u32 {
        self.parents.len() as u32
    }

    fn accepts(&self, request: &Request) -> bool {
        // Every member it goes to must take its piece (at most one piece per member: a
        // member's pieces of one command are adjacent on it and joined).
        if request.op == Op::Flush || request.len == 0 {
            return (0..self.members.len()).all(|m| self.member_accepts(m, request));
        }
        self.split(request.offset, request.len)
            .into_iter()
            .all(|(member, offset, len)| {
                self.member_accepts(member, &piece_of(request, request.id, offset, len))
            })
    }

    fn submit(&mut self, request: Request, now: Nanos) {
        let parts: Vec<(usize, u64, u64)> = if request.op == Op::Flush || request.len == 0 {
            (0..self.members.len()).map(|m| (m, 0, 0)).collect()
        } else {
            self.split(request.offset, request.len)
        };
        if parts.len() > 1 && request.op != Op::Flush {
            self.splits += 1;
        }
        let mut issued = Vec::with_capacity(parts.len());
        for (member, offset, len) in &parts {
            let piece = self.piece(&request, *offset, *len);
            issued.push((*member, piece));
        }
        self.parents.insert(
            request.id.0,
            Parent {
                pieces_left: issued.len() as u32,
                request,
                done_at: now,
                error: None,
            },
        );
        for (m, piece) in issued {
            // The protocol: a device is advanced to `now` before each submit.
            self.pump(m, now);
            let member = &mut self.members[m];
            match &mut member.elevator {
                None => member.device.submit(piece, now),
                Some(elevator) => {
                    if member.waiting.is_empty() {
                        if let Err(piece) = elevator.submit(piece, now) {
                            member.waiting.push_back(piece);
                        }
                    } else {
                        member.waiting.push_back(piece);
                    }
                    self.pump(m, now);
                }
            }
        }
    }

    fn next_event(&self) -> Option<Nanos> {
        self.members
            .iter()
            .flat_map(|m| [m.device.next_event(), m.wake])
            .flatten()
            .min()
    }

    fn advance(&mut self, now: Nanos, done: &mut Vec<(Nanos, Request)>) {
        self.errors.clear();
        for m in 0..self.members.len() {
            self.pump(m, now);
        }
        let mut completions = std::mem::take(&mut self.early);
        completions.sort_by_key(|&(at, id, _)| (at, id));
        let mut ready = Vec::new();
        for (at, piece, error) in completions {
            let parent_id = self.pieces.remove(&piece).expect("a piece of ours");
            let parent = self.parents.get_mut(&parent_id).expect("its parent");
            parent.pieces_left -= 1;
            parent.done_at = parent.done_at.max(at);
            parent.error = parent.error.or(error);
            if parent.pieces_left == 0 {
                let parent = self.parents.remove(&parent_id).expect("its parent");
                if let Some(errno) = parent.error {
                    self.errors.insert(parent_id, errno);
                }
                ready.push((parent.done_at, parent.request));
            }
        }
        ready.sort_by_key(|(at, request)| (*at, request.id.0));
        done.extend(ready);
    }

    fn completion_error(&mut self, request: &Request) -> Option<i32> {
        self.errors.get(&request.id.0).copied()
    }

    /// Twice a whole stripe, so that read-ahead of a large file keeps every member busy:
    /// raid0.c's `raid0_run` raises the array's `ra_pages` to `2 * members * chunk` (never
    /// lowering the block layer's default).
    fn read_ahead_kb(&self) -> Option<u64> {
        let stripe_kb = self.members.len() as u64 * self.chunk / 1024;
        Some((2 * stripe_kb).max(128))
    }

    fn parameters(&self) -> Vec<Parameter> {
        let parameters = vec![
            parameter("members", self.members.len(), "devices", "member devices"),
            parameter(
                "chunk_kb",
                self.chunk / 1024,
                "KiB",
                "stripe chunk (mdadm --chunk; 512 KiB by default since mdadm 3.1)",
            ),
            parameter("member", &self.member_model, "", "the members' model"),
            parameter(
                "member_policy",
                self.member_policy.as_deref().unwrap_or("none"),
                "",
                "each member's own elevator (2.6's arrangement); none: the policy on the array",
            ),
            parameter(
                "capacity_gib",
                self.capacity >> 30,
                "GiB",
                "derived: members x whole chunks of the smallest member",
            ),
        ];
        // The members' own parameters are `iosched devices MEMBER`'s; `member.NAME` sets them.
        parameters
    }

    fn counters(&self) -> Vec<(String, f64)> {
        // Each member's counters summed by name, in the first member's order.
        let mut names: Vec<String> = Vec::new();
        let mut sums: FxHashMap<String, f64> = FxHashMap::default();
        for member in &self.members {
            for (name, value) in member.device.counters() {
                if !sums.contains_key(&name) {
                    names.push(name.clone());
                }
                *sums.entry(name).or_insert(0.0) += value;
            }
        }
        let mut counters = vec![("md_split_commands".to_string(), self.splits as f64)];
        if self.member_policy.is_some() {
            // The members' elevators, summed: what they merged, dispatched, and how often
            // the md submitter found a member's request list full.
            let mut stats = [0u64; 3];
            for elevator in self.members.iter().filter_map(|m| m.elevator.as_ref()) {
                let s = elevator.stats();
                stats[0] += s.merged;
                stats[1] += s.dispatched;
                stats[2] += s.full + s.limited;
            }
            for (name, value) in ["member_merged", "member_dispatched", "member_full_waits"]
                .into_iter()
                .zip(stats)
            {
                counters.push((name.to_string(), value as f64));
            }
            // The members' policies' own counters, summed (the largest for a `max` figure),
            // prefixed `member_`.
            let mut names: Vec<&'static str> = Vec::new();
            let mut values: Vec<f64> = Vec::new();
            for elevator in self.members.iter().filter_map(|m| m.elevator.as_ref()) {
                for (name, value) in elevator.policy().counters() {
                    match names.iter().position(|n| *n == name) {
                        Some(at) if name.contains("max") => values[at] = values[at].max(value),
                        Some(at) => values[at] += value,
                        None => {
                            names.push(name);
                            values.push(value);
                        }
                    }
                }
            }
            counters.extend(
                names
                    .into_iter()
                    .zip(values)
                    .map(|(name, value)| (format!("member_{name}"), value)),
            );
        }
        counters.extend(names.into_iter().map(|name| {
            let value = sums[&name];
            (name, value)
        }));
        counters
    }
}

/// This model's entry in the device catalog (`iosched devices`).
pub const MODEL: ModelInfo = ModelInfo {
    name: "raid0",
    summary: "Linux md RAID-0 striped over `members` devices of model `member` (hdd), \
              `chunk_kb` (512) per chunk; `member.NAME=VALUE` sets each member, \
              `member_policy` gives each its own elevator (2.6's arrangement)",
    build: |settings, seed| Ok(Box::new(Raid0::from_settings(settings, seed)?)),
    derived_from: &[("capacity_gib", &["members", "chunk_kb", "member"])],
};

#[cfg(test)]
mod tests {
    use super::*;
    use iosched_core::{FlowId, GroupId, IoPrio};

    fn array(settings: &[(&str, &str)]) -> Raid0 {
        let settings: Vec<(String, String)> = settings
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        Raid0::from_settings(&settings, 7).unwrap()
    }

    fn request(id: u64, op: Op, offset: u64, len: u64) -> Request {
        Request::new(
            RequestId(id),
            op,
            offset,
            len,
            true,
            IoPrio::NONE,
            FlowId(0),
            GroupId::ROOT,
            0,
        )
    }

    // Proves raid0's map: chunk c on member c % n at chunk c / n, and the split at chunk
    // boundaries with a member's adjacent pieces joined.
    #[test]
    fn chunks_stripe_over_the_members() {
        let md = array(&[("members", "3"), ("chunk_kb", "64"), ("member", "fixed")]);
        let k = 1024;
        assert_eq!(md.map(0), (0, 0));
        assert_eq!(md.map(64 * k), (1, 0));
        assert_eq!(md.map(130 * k), (2, 2 * k));
        assert_eq!(md.map(192 * k + 5), (0, 64 * k + 5));
        assert_eq!(md.split(60 * k, 8 * k), vec![(0, 60 * k, 4 * k), (1, 0, 4 * k)]);
        // Seven chunks from 0: member 0 gets chunks 0, 3, 6 (member chunks 0, 1, 2) as one.
        let parts = md.split(0, 7 * 64 * k);
        assert_eq!(
            parts,
            vec![(0, 0, 192 * k), (1, 0, 128 * k), (2, 0, 128 * k)]
        );
    }

    // Proves a split command completes once, when its last piece does, and a flush goes to
    // every member; the array's capacity is whole chunks of each member.
    #[test]
    fn a_command_completes_with_its_last_piece() {
        let mut md = array(&[
            ("members", "2"),
            ("chunk_kb", "4"),
            ("member", "fixed"),
            ("member.latency_us", "100"),
            ("member.parallelism", "1"),
        ]);
        assert_eq!(md.capacity() % (2 * 4096), 0);
        // Three pieces: two on member 0 (joined? no: chunks 0 and 2 are member chunks 0 and 1,
        // adjacent, so one command), one on member 1.
        let big = request(1, Op::Read, 0, 3 * 4096);
        assert!(md.accepts(&big));
        md.submit(big, 0);
        md.submit(request(2, Op::Flush, 0, 0), 0);
        assert_eq!(md.in_flight(), 2);
        let mut done = Vec::new();
        let mut now = 0;
        while let Some(at) = md.next_event() {
            now = at;
            md.advance(now, &mut done);
        }
        let ids: Vec<u64> = done.iter().map(|(_, r)| r.id.0).collect();
        assert_eq!(ids, vec![1, 2]);
        // Member 0 serves the read (100 us) then the flush (100 us).
        assert_eq!(done[0].0, 100_000);
        assert_eq!(done[1].0, 200_000);
        assert_eq!(md.in_flight(), 0);
        assert!(now >= 200_000);
        assert_eq!(
            md.counters().iter().find(|(n, _)| n == "md_split_commands").map(|c| c.1),
            Some(1.0)
        );
    }

    // Proves bad settings are refused with the reason.
    #[test]
    fn bad_settings_are_refused() {
        let refuse = |settings: &[(&str, &str)]| {
            let settings: Vec<(String, String)> = settings
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            Raid0::from_settings(&settings, 1).unwrap_err().to_string()
        };
        assert!(refuse(&[("chunk_kb", "96")]).contains("power of two"));
        assert!(refuse(&[("members", "1")]).contains("2..=64"));
        assert!(refuse(&[("member", "raid0")]).contains("RAID-0 of RAID-0s"));
        assert!(refuse(&[("member", "tape")]).contains("unknown device model"));
        assert!(refuse(&[("stripe", "4")]).contains("no parameter"));
        assert!(refuse(&[("member.rpm", "-1")]).contains("rpm"));
    }
}

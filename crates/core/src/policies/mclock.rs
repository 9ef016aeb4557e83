//! `mclock`: mClock (Gulati, Merchant and Varman, OSDI 2010) as Ceph's dmclock runs it
//! (`ceph/dmclock`, src/dmclock_server.h, `PriorityQueueBase`): each client has a
//! **reservation** (a rate it is guaranteed), a **weight** (its share of what is left) and a
//! **limit** (a rate it may not pass): a cgroup's `qos.reservation`, `qos.weight` and
//! `qos.limit`, or a job's `qos_reservation`, `qos_weight` and `qos_limit`
//! ([`crate::qos`]).
//!
//! # Tags
//!
//! Each request gets three tags when it arrives (dmclock's `RequestTag`, immediate tag
//! calculation), from its client's previous ones, the time `t` and the request's cost:
//!
//! - reservation `R = max(t, R' + cost / reservation)`, none without a reservation;
//! - proportion `P = max(t, P' + cost / weight)`;
//! - limit `L = max(t, L' + cost / limit)`, none (always within its limit) without a limit.
//!
//! # Dispatch (`do_next_request`)
//!
//! 1. **Reservation phase**: the client whose first request has the smallest reservation tag,
//!    if that tag is not in the future.
//! 2. **Weight phase**: among the clients whose first request is within its limit (`L <= t`),
//!    the smallest proportion tag (plus the client's `prop_delta`, below). The client's
//!    reservation tags then move back by the request's cost over its reservation
//!    (`reduce_reservation_tags`): what it gets by weight does not count against its
//!    reservation.
//! 3. With `allow_limit_break` (dmclock's `AtLimit::Allow`), when no client is within its
//!    limit, the smallest proportion tag all the same; otherwise (`AtLimit::Wait`, the
//!    default) the policy waits until the next reservation or limit tag comes due.
//!
//! A client that has sent nothing for `idle_age` (dmclock: 10 minutes) is idle; when it sends
//! again, its proportion tags are moved to the smallest of the active clients' (`prop_delta`),
//! so that it neither makes up for the time it was away nor waits for the others to catch up.
//! A new client arrives the same way.
//!
//! # Cost
//!
//! dmclock leaves a request's cost to its caller (Ceph's OSD charges by size). Here a rate in
//! IOPS costs one per request, a rate in bytes per second the request's bytes, and the weight
//! phase one per started 4 KiB: so a 64 KiB request weighs as 16 of 4 KiB. Where dmclock
//! reduces reservation tags by one request's worth whatever the cost, this policy reduces them
//! by the request's own cost, which is what the reservation tag was advanced by.
//!
//! # Where ours differs
//!
//! - Time and tags are integers (ns with 32 fractional bits), not doubles: the order of
//!   requests is exact and the same on every machine; ties go to the client seen first.
//! - Idleness is measured exactly at each arrival, where dmclock marks clients idle from a
//!   timer every `check_time` (6 minutes).
//! - `AtLimit::Reject` (refusing a request over its limit with EAGAIN) has no place in a
//!   block scheduler, which cannot refuse I/O.
//! - A client states any of the three: no weight is weight 1.
//!
//! Which client a request belongs to: a cgroup that states any `qos.*` setting is one client
//! for all of its jobs; any other job is a client of its own ([`crate::qos::QosTable`]).
//! Requests are not merged.

use super::PolicyInfo;
use crate::fq::heap::{key, slot_of, tag_of, Heap};
use crate::group::Groups;
use crate::policy::{Dispatch, Policy};
use crate::qos::{Qos, QosKey, QosTable, Rate};
use crate::request::{FlowId, Request};
use crate::time::{from_millis, Nanos, MILLISECOND, SECOND};
use crate::tunable::{TunableError, TunableSpec, Unit};
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;

/// mClock's tunables, with dmclock's names and defaults.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "allow_limit_break",
        unit: Unit::Flag,
        default: 0,
        min: 0,
        max: 1,
        doc: "when every client with work is over its limit, serve the smallest proportion tag \
              anyway (dmclock's AtLimit::Allow) instead of waiting (AtLimit::Wait)",
    },
    TunableSpec {
        name: "idle_age",
        unit: Unit::Milliseconds,
        default: 600_000,
        min: 1,
        max: 86_400_000,
        doc: "a client that sent nothing for this long is idle: its proportion tags restart \
              beside the active clients' when it returns",
    },
];

/// This module's entry in the policy catalog (`iosched policies`).
pub const POLICIES: &[PolicyInfo] = &[PolicyInfo {
    name: "mclock",
    aliases: &["dmclock"],
    summary: "mClock as Ceph's dmclock: reservation tags first (qos.reservation), then proportion tags (qos.weight) among clients within their limit (qos.limit)",
    tunables: TUNABLES,
    build: || Box::new(Mclock::new()),
}];

/// Fractional bits of a tag: tags are ns x 2^32.
const FRACTION: u32 = 32;
/// Tags are kept within +-2^99 and stored in heap keys as 2^100 + tag (below the heap's
/// 2^104).
const TAG_BOUND: i128 = 1 << 99;
const TAG_BASE: i128 = 1 << 100;
/// Weight-phase cost unit: one per started 4 KiB.
const COST_BYTES: u64 = 4096;
/// Clients remembered at most (more than `nr_requests` can keep busy at once); idle ones are
/// forgotten past it.
const MAX_CLIENTS: usize = 1 << 17;
/// No slot: not in that heap.
const ABSENT: u32 = u32::MAX;

fn clamp(tag: i128) -> i128 {
    tag.clamp(-TAG_BOUND, TAG_BOUND)
}

fn tag_at(now: Nanos) -> i128 {
    i128::from(now) << FRACTION
}

/// The first ns at or after `tag`.
fn time_of(tag: i128) -> Nanos {
    let ns = (tag + (1 << FRACTION) - 1) >> FRACTION;
    ns.clamp(0, i128::from(u64::MAX)) as Nanos
}

fn heap_key(tag: i128, slot: u32) -> u128 {
    key((TAG_BASE + tag) as u128, slot)
}

fn heap_tag(key: u128) -> i128 {
    tag_of(key) as i128 - TAG_BASE
}

/// How far one unit of cost moves a tag.
#[derive(Clone, Copy, Debug)]
struct Step {
    /// Tag per unit (ns x 2^32): below 2^62, so that any u64 count of units times it fits
    /// an i128.
    per_unit: u64,
    /// The unit: bytes, else requests (for a rate) or 4 KiB (for the weight).
    bytes: bool,
    weight: bool,
}

impl Step {
    fn of_rate(rate: Rate) -> Step {
        let (per_second, bytes) = rate.per_second();
        Step {
            per_unit: ((SECOND << FRACTION) / per_second.max(1)).max(1),
            bytes,
            weight: false,
        }
    }

    fn of_weight(weight: u32) -> Step {
        Step {
            per_unit: (SECOND << FRACTION) / u64::from(weight.max(1)),
            bytes: false,
            weight: true,
        }
    }

    /// The tag advance for a request of `len` bytes.
    fn advance(self, len: u64) -> i128 {
        let units = if self.bytes {
            len.max(1)
        } else if self.weight {
            len.div_ceil(COST_BYTES).max(1)
        } else {
            1
        };
        clamp((u128::from(self.per_unit) * u128::from(units)) as i128)
    }
}

/// A queued request and its tags.
#[derive(Debug)]
struct Queued {
    request: Request,
    /// Reservation tag plus the client's `shift` when it was tagged.
    reservation: i128,
    proportion: i128,
    limit: i128,
}

/// One client's settings, tags and queue (dmclock's `ClientRec`).
#[derive(Debug)]
struct Client {
    key: QosKey,
    reservation: Option<Step>,
    weight: Step,
    limit: Option<Step>,
    queue: VecDeque<Queued>,
    /// The previous request's tags (reservation without the shift).
    prev_reservation: i128,
    prev_proportion: i128,
    prev_limit: i128,
    /// Reservation tag reductions so far (`reduce_reservation_tags`).
    shift: i128,
    /// Added to its proportion tags, set when it returns from idle.
    prop_delta: i128,
    last_arrival: Option<Nanos>,
}

impl Client {
    fn new(key: QosKey, qos: Qos) -> Client {
        let mut client = Client {
            key,
            reservation: None,
            weight: Step::of_weight(1),
            limit: None,
            queue: VecDeque::new(),
            prev_reservation: 0,
            prev_proportion: 0,
            prev_limit: 0,
            shift: 0,
            prop_delta: 0,
            last_arrival: None,
        };
        client.configure(qos);
        client
    }

    fn configure(&mut self, qos: Qos) {
        self.reservation = qos.reservation.map(Step::of_rate);
        self.weight = Step::of_weight(qos.weight.unwrap_or(1));
        self.limit = qos.limit.map(Step::of_rate);
    }

    /// The reservation tag of the first request, reductions applied.
    fn head_reservation(&self) -> Option<i128> {
        self.reservation?;
        self.queue.front().map(|q| clamp(q.reservation - self.shift))
    }

    fn head_proportion(&self) -> Option<i128> {
        self.queue
            .front()
            .map(|q| clamp(q.proportion + self.prop_delta))
    }

    fn idle(&self, now: Nanos, idle_age: Nanos) -> bool {
        self.last_arrival
            .is_none_or(|last| now.saturating_sub(last) >= idle_age)
    }
}

/// Which phase sent a request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Reservation,
    Weight,
    LimitBreak,
}

/// mClock.
pub struct Mclock {
    qos: QosTable,
    clients: Vec<Option<Client>>,
    slots: Slots,
    free: Vec<u32>,
    /// Clients with a reservation and work, by their first request's reservation tag.
    by_reservation: Heap,
    reservation_at: Vec<u32>,
    /// Clients whose first request is within its limit, by proportion tag.
    ready: Heap,
    ready_at: Vec<u32>,
    /// Clients whose first request is over its limit, by limit tag...
    limited: Heap,
    limited_at: Vec<u32>,
    /// ...and by proportion tag (for `allow_limit_break`).
    over: Heap,
    over_at: Vec<u32>,
    requeued: VecDeque<Request>,
    queued: usize,
    allow_limit_break: bool,
    idle_age: Nanos,
    reservation_dispatches: u64,
    weight_dispatches: u64,
    limit_break_dispatches: u64,
}

impl Default for Mclock {
    fn default() -> Self {
        Mclock::new()
    }
}

impl Mclock {
    /// mClock with dmclock's defaults (`AtLimit::Wait`, 10 minutes' idle age).
    pub fn new() -> Mclock {
        Mclock {
            qos: QosTable::default(),
            clients: Vec::new(),
            slots: Slots::default(),
            free: Vec::new(),
            by_reservation: Heap::default(),
            reservation_at: Vec::new(),
            ready: Heap::default(),
            ready_at: Vec::new(),
            limited: Heap::default(),
            limited_at: Vec::new(),
            over: Heap::default(),
            over_at: Vec::new(),
            requeued: VecDeque::new(),
            queued: 0,
            allow_limit_break: TUNABLES[0].default == 1,
            idle_age: from_millis(TUNABLES[1].default),
            reservation_dispatches: 0,
            weight_dispatches: 0,
            limit_break_dispatches: 0,
        }
    }

    fn client(&self, slot: u32) -> &Client {
        self.clients[slot as usize].as_ref().expect("live slot")
    }

    fn client_mut(&mut self, slot: u32) -> &mut Client {
        self.clients[slot as usize].as_mut().expect("live slot")
    }

    /// The slot of `key`, made for it if new.
    fn slot(&mut self, key: QosKey) -> u32 {
        if let Some(slot) = self.slots.get(key) {
            return slot;
        }
        let qos = self.qos.qos(key);
        if self.slots.len() >= MAX_CLIENTS {
            self.forget_idle();
        }
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                let slot = self.clients.len() as u32;
                self.clients.push(None);
                for at in [
                    &mut self.reservation_at,
                    &mut self.ready_at,
                    &mut self.limited_at,
                    &mut self.over_at,
                ] {
                    at.push(ABSENT);
                }
                slot
            }
        };
        self.clients[slot as usize] = Some(Client::new(key, qos));
        self.slots.insert(key, slot);
        slot
    }

    /// Forgets the clients with nothing queued (dmclock erases a client that sent nothing for
    /// `erase_age`; here only when the table is full, so a client forgotten had nothing
    /// queued when more than `MAX_CLIENTS` others were seen).
    fn forget_idle(&mut self) {
        for slot in 0..self.clients.len() as u32 {
            let forget = self.clients[slot as usize]
                .as_ref()
                .is_some_and(|c| c.queue.is_empty());
            if forget {
                let client = self.clients[slot as usize].take().expect("live");
                self.slots.remove(client.key);
                self.free.push(slot);
            }
        }
    }

    /// Puts client `slot` in the heaps its first request belongs in (none when it has none).
    #[inline]
    fn place(&mut self, slot: u32, now: Nanos) {
        let client = self.client(slot);
        let reservation = client.head_reservation();
        let proportion = client.head_proportion();
        let over_limit = match (client.limit, client.queue.front()) {
            (Some(_), Some(head)) if head.limit > tag_at(now) => Some(head.limit),
            _ => None,
        };
        set(
            &mut self.by_reservation,
            &mut self.reservation_at,
            slot,
            reservation,
        );
        let (ready, limited) = match over_limit {
            Some(limit) => (None, Some(limit)),
            None => (proportion, None),
        };
        set(&mut self.ready, &mut self.ready_at, slot, ready);
        set(&mut self.limited, &mut self.limited_at, slot, limited);
        set(
            &mut self.over,
            &mut self.over_at,
            slot,
            limited.and(proportion),
        );
    }

    /// The lowest proportion tag among the active clients other than `slot` (dmclock's
    /// `lowest_prop_tag`): their first request's, or their last one's if they have none.
    fn lowest_proportion(&self, slot: u32, now: Nanos) -> Option<i128> {
        self.clients
            .iter()
            .enumerate()
            .filter_map(|(other, client)| {
                let client = client.as_ref()?;
                if other as u32 == slot || client.idle(now, self.idle_age) {
                    return None;
                }
                Some(
                    client
                        .head_proportion()
                        .unwrap_or(clamp(client.prev_proportion + client.prop_delta)),
                )
            })
            .min()
    }

    /// Sends client `slot`'s first request.
    fn serve(&mut self, slot: u32, phase: Phase, now: Nanos) -> Request {
        let client = self.client_mut(slot);
        let queued = client.queue.pop_front().expect("a placed client has work");
        if phase != Phase::Reservation {
            if let Some(step) = client.reservation {
                // reduce_reservation_tags: weight-phase service is not charged to the
                // reservation.
                let reduction = step.advance(queued.request.len);
                client.shift = clamp(client.shift + reduction);
                client.prev_reservation = clamp(client.prev_reservation - reduction);
            }
        }
        match phase {
            Phase::Reservation => self.reservation_dispatches += 1,
            Phase::Weight => self.weight_dispatches += 1,
            Phase::LimitBreak => self.limit_break_dispatches += 1,
        }
        self.queued -= 1;
        self.place(slot, now);
        queued.request
    }
}

/// Client slots by key: flows and groups are small numbers in a run (job and cgroup
/// indexes), looked up in arrays; any beyond `DENSE_IDS` in a map.
#[derive(Default)]
struct Slots {
    flows: Vec<u32>,
    groups: Vec<u32>,
    others: HashMap<QosKey, u32>,
    len: usize,
}

/// Ids below this are array indexes.
const DENSE_IDS: usize = 1 << 16;

impl Slots {
    fn array(&mut self, key: QosKey) -> Option<(&mut Vec<u32>, usize)> {
        let (array, id) = match key {
            QosKey::Flow(flow) => (&mut self.flows, flow.0 as usize),
            QosKey::Group(group) => (&mut self.groups, group.0 as usize),
            QosKey::Prio(_) => return None,
        };
        (id < DENSE_IDS).then_some((array, id))
    }

    #[inline]
    fn get(&self, key: QosKey) -> Option<u32> {
        let (array, id) = match key {
            QosKey::Flow(flow) => (&self.flows, flow.0 as usize),
            QosKey::Group(group) => (&self.groups, group.0 as usize),
            QosKey::Prio(_) => return self.others.get(&key).copied(),
        };
        if id < DENSE_IDS {
            array.get(id).copied().filter(|&slot| slot != ABSENT)
        } else {
            self.others.get(&key).copied()
        }
    }

    fn insert(&mut self, key: QosKey, slot: u32) {
        self.len += 1;
        match self.array(key) {
            Some((array, id)) => {
                if array.len() <= id {
                    array.resize(id + 1, ABSENT);
                }
                array[id] = slot;
            }
            None => {
                self.others.insert(key, slot);
            }
        }
    }

    fn remove(&mut self, key: QosKey) {
        self.len -= 1;
        match self.array(key) {
            Some((array, id)) => array[id] = ABSENT,
            None => {
                self.others.remove(&key);
            }
        }
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// Puts `slot` in `heap` with `tag`, moves it there, or takes it out (`None`).
#[inline]
fn set(heap: &mut Heap, at: &mut [u32], slot: u32, tag: Option<i128>) {
    let position = at[slot as usize];
    match (tag, position) {
        (Some(tag), ABSENT) => heap.push(heap_key(tag, slot), at),
        (Some(tag), position) => heap.set_key(position, heap_key(tag, slot), at),
        (None, ABSENT) => {}
        (None, position) => {
            heap.remove(position, at);
            at[slot as usize] = ABSENT;
        }
    }
}

impl Policy for Mclock {
    fn name(&self) -> &'static str {
        "mclock"
    }

    fn set_groups(&mut self, groups: &Groups) {
        self.qos.set_groups(groups);
        self.reconfigure();
    }

    fn set_flow_qos(&mut self, flow: FlowId, qos: Qos) {
        self.qos.set_flow(flow, qos);
        self.reconfigure();
    }

    fn uses_qos(&self) -> bool {
        true
    }

    fn insert(&mut self, request: Request, now: Nanos) {
        let slot = self.slot(self.qos.key(&request));
        let t = tag_at(now);
        if self.client(slot).idle(now, self.idle_age) {
            if let Some(lowest) = self.lowest_proportion(slot, now) {
                self.client_mut(slot).prop_delta = clamp(lowest - t);
            }
        }
        let client = self.client_mut(slot);
        client.last_arrival = Some(now);
        let len = request.len;
        let reservation = match client.reservation {
            Some(step) => {
                client.prev_reservation = clamp((client.prev_reservation + step.advance(len)).max(t));
                client.prev_reservation + client.shift
            }
            None => 0,
        };
        client.prev_proportion = clamp((client.prev_proportion + client.weight.advance(len)).max(t));
        if let Some(step) = client.limit {
            client.prev_limit = clamp((client.prev_limit + step.advance(len)).max(t));
        }
        let first = client.queue.is_empty();
        client.queue.push_back(Queued {
            request,
            reservation,
            proportion: client.prev_proportion,
            limit: client.prev_limit,
        });
        self.queued += 1;
        if first {
            self.place(slot, now);
        }
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        if let Some(request) = self.requeued.pop_front() {
            self.queued -= 1;
            return Dispatch::Request(request);
        }
        if self.queued == 0 {
            return Dispatch::Empty;
        }
        let t = tag_at(now);
        if let Some(top) = self.by_reservation.peek() {
            if heap_tag(top) <= t {
                return Dispatch::Request(self.serve(slot_of(top), Phase::Reservation, now));
            }
        }
        // Clients whose limit tag has come due are within their limit again.
        while let Some(top) = self.limited.peek() {
            if heap_tag(top) > t {
                break;
            }
            self.place(slot_of(top), now);
        }
        if let Some(top) = self.ready.peek() {
            return Dispatch::Request(self.serve(slot_of(top), Phase::Weight, now));
        }
        if self.allow_limit_break {
            if let Some(top) = self.over.peek() {
                return Dispatch::Request(self.serve(slot_of(top), Phase::LimitBreak, now));
            }
        }
        let next = [self.by_reservation.peek(), self.limited.peek()]
            .into_iter()
            .flatten()
            .map(heap_tag)
            .min()
            .expect("queued work is in a heap");
        Dispatch::WaitUntil(time_of(next).max(now + 1))
    }

    fn requeue(&mut self, request: Request, _now: Nanos) {
        // Tags are taken at arrival (dmclock's add_request): a request handed back goes out
        // again first, its tags already counted.
        self.queued += 1;
        self.requeued.push_back(request);
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn drain(&mut self, out: &mut Vec<Request>) {
        let start = out.len();
        out.extend(self.requeued.drain(..));
        for slot in 0..self.clients.len() as u32 {
            if let Some(client) = self.clients[slot as usize].as_mut() {
                out.extend(client.queue.drain(..).map(|q| q.request));
                self.place(slot, 0);
            }
        }
        out[start..].sort_by_key(|r| (r.arrival, r.id));
        self.queued = 0;
    }

    fn tunables(&self) -> &'static [TunableSpec] {
        TUNABLES
    }

    fn tunable(&self, name: &str) -> Result<u64, TunableError> {
        crate::tunable::find(TUNABLES, name)?;
        Ok(match name {
            "allow_limit_break" => u64::from(self.allow_limit_break),
            _ => self.idle_age / MILLISECOND,
        })
    }

    fn set_tunable(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        let value = crate::tunable::find(TUNABLES, name)?.check(value)?;
        match name {
            "allow_limit_break" => self.allow_limit_break = value == 1,
            _ => self.idle_age = from_millis(value),
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("mclock_reservation", self.reservation_dispatches as f64),
            ("mclock_weight", self.weight_dispatches as f64),
            ("mclock_limit_break", self.limit_break_dispatches as f64),
        ]
    }
}

impl Mclock {
    /// Applies changed settings to the clients already known (their tags stay).
    fn reconfigure(&mut self) {
        for slot in 0..self.clients.len() as u32 {
            let Some(client) = self.clients[slot as usize].as_mut() else {
                continue;
            };
            client.configure(self.qos.qos(client.key));
            // Limits are checked again at the next dispatch.
            self.place(slot, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::request;
    use crate::Op;

    /// Clients backlogged with `depth` requests each (of `len` bytes), from `start` (ns) on,
    /// served one at a time every `service` ns until `end`; returns each client's requests
    /// served in `[from, end)`.
    struct Bench {
        policy: Mclock,
        next_id: u64,
    }

    struct Flow {
        qos: &'static [(&'static str, &'static str)],
        start: Nanos,
        len: u64,
    }

    impl Bench {
        fn new() -> Bench {
            Bench {
                policy: Mclock::new(),
                next_id: 0,
            }
        }

        fn add(&mut self, flow: u32, len: u64, now: Nanos) {
            self.next_id += 1;
            let mut r = request(self.next_id, Op::Read, self.next_id * len, len);
            r.flow = FlowId(flow);
            r.arrival = now;
            self.policy.insert(r, now);
        }

        fn run(&mut self, flows: &[Flow], service: Nanos, from: Nanos, end: Nanos) -> Vec<u64> {
            const DEPTH: usize = 4;
            for (index, flow) in flows.iter().enumerate() {
                let mut qos = Qos::default();
                for (name, value) in flow.qos {
                    qos.set(name, value).unwrap();
                }
                self.policy.set_flow_qos(FlowId(index as u32), qos);
            }
            let mut served = vec![0u64; flows.len()];
            let mut started = vec![false; flows.len()];
            let mut now = 0;
            while now < end {
                for (index, flow) in flows.iter().enumerate() {
                    if !started[index] && now >= flow.start {
                        started[index] = true;
                        for _ in 0..DEPTH {
                            self.add(index as u32, flow.len, now);
                        }
                    }
                }
                match self.policy.dispatch(now) {
                    Dispatch::Request(r) => {
                        now += service;
                        self.policy.completed(&r, now);
                        let index = r.flow.0 as usize;
                        if now > from {
                            served[index] += 1;
                        }
                        // A closed loop: the next request follows the completion.
                        self.add(r.flow.0, flows[index].len, now);
                    }
                    Dispatch::WaitUntil(until) => {
                        assert!(until > now);
                        let next_start = flows
                            .iter()
                            .zip(&started)
                            .filter(|(_, s)| !**s)
                            .map(|(f, _)| f.start)
                            .min()
                            .unwrap_or(Nanos::MAX);
                        now = until.min(next_start);
                    }
                    Dispatch::Empty => {
                        now = flows
                            .iter()
                            .zip(&started)
                            .filter(|(_, s)| !**s)
                            .map(|(f, _)| f.start)
                            .min()
                            .expect("nothing queued and nothing to start");
                    }
                }
            }
            served
        }
    }

    const KIB4: u64 = 4096;

    fn flow(qos: &'static [(&'static str, &'static str)]) -> Flow {
        Flow {
            qos,
            start: 0,
            len: KIB4,
        }
    }

    /// Each client's requests per second over `[1 s, 11 s)` on a 1000-IOPS device.
    fn iops(flows: &[Flow]) -> (Vec<f64>, Mclock) {
        let mut bench = Bench::new();
        let served = bench.run(flows, MILLISECOND, SECOND, 11 * SECOND);
        (
            served.iter().map(|&n| n as f64 / 10.0).collect(),
            bench.policy,
        )
    }

    // Proves mClock's allocation: shares in proportion to the weights, except that no
    // client gets less than its reservation; the clients whose reservation binds take it,
    // and the others share the rest by weight (the reservation phase, then the weight
    // phase, with reduce_reservation_tags). On a 1000-IOPS device:
    #[test]
    fn reservations_are_floors_and_weights_share_the_rest() {
        // A reservation below the weighted share changes nothing: 1:3.
        let (rates, _) = iops(&[
            flow(&[("reservation", "100iops"), ("weight", "1")]),
            flow(&[("weight", "3")]),
        ]);
        assert!((rates[0] - 250.0).abs() < 5.0, "{rates:?}");
        assert!((rates[1] - 750.0).abs() < 5.0, "{rates:?}");
        // A reservation above it binds; the others split the rest 1:2.
        let (rates, policy) = iops(&[
            flow(&[("reservation", "500iops"), ("weight", "1")]),
            flow(&[("weight", "1")]),
            flow(&[("weight", "2")]),
        ]);
        assert!((rates[0] - 500.0).abs() < 5.0, "{rates:?}");
        assert!((rates[1] - 500.0 / 3.0).abs() < 5.0, "{rates:?}");
        assert!((rates[2] - 1000.0 / 3.0).abs() < 5.0, "{rates:?}");
        assert!(policy.reservation_dispatches > 0 && policy.weight_dispatches > 0);
    }

    // Proves limits: a client limited to 100 IOPS gets 100 though the device could do 1000
    // and nothing else wants it (AtLimit::Wait); with allow_limit_break it gets the device.
    #[test]
    fn limits_hold_unless_broken() {
        let mut bench = Bench::new();
        let served = bench.run(
            &[flow(&[("limit", "100iops")])],
            MILLISECOND,
            SECOND,
            11 * SECOND,
        );
        assert!((served[0] as i64 - 1000).abs() <= 1, "{served:?}");
        let mut bench = Bench::new();
        bench.policy.set_tunable("allow_limit_break", 1).unwrap();
        let served = bench.run(
            &[flow(&[("limit", "100iops")])],
            MILLISECOND,
            SECOND,
            11 * SECOND,
        );
        assert!(served[0] >= 9990, "{served:?}");
        assert!(bench.policy.limit_break_dispatches > 0);
    }

    // Proves weights in cost: with weights 1, 2 and 3, requests of 4 KiB share a device in
    // those proportions, and a client of 16 KiB requests with weight 4 gets as many bytes as
    // a weight-4 client of 4 KiB requests would (a quarter of its requests).
    #[test]
    fn weights_share_by_cost() {
        let mut bench = Bench::new();
        let served = bench.run(
            &[
                flow(&[("weight", "1")]),
                flow(&[("weight", "2")]),
                flow(&[("weight", "3")]),
            ],
            MILLISECOND,
            SECOND,
            13 * SECOND,
        );
        let total: u64 = served.iter().sum();
        for (index, &n) in served.iter().enumerate() {
            let share = n as f64 / total as f64;
            let want = (index + 1) as f64 / 6.0;
            assert!((share - want).abs() < 0.01, "{served:?}");
        }
        let mut bench = Bench::new();
        let served = bench.run(
            &[
                flow(&[("weight", "4")]),
                Flow {
                    qos: &[("weight", "4")],
                    start: 0,
                    len: 4 * KIB4,
                },
            ],
            MILLISECOND,
            SECOND,
            11 * SECOND,
        );
        let ratio = served[0] as f64 / served[1] as f64;
        assert!((ratio - 4.0).abs() < 0.1, "{served:?}");
    }

    // Proves the idle adjustment: a client arriving after the others have run for a minute
    // (their proportion tags far ahead of the clock) shares by weight at once, where tags
    // from its arrival time alone would give it the device until it caught up.
    #[test]
    fn a_new_client_starts_beside_the_active_ones() {
        let mut bench = Bench::new();
        let late = 60 * SECOND;
        let served = bench.run(
            &[
                flow(&[("weight", "1")]),
                Flow {
                    qos: &[("weight", "1")],
                    start: late,
                    len: KIB4,
                },
            ],
            MILLISECOND,
            late,
            late + SECOND,
        );
        let share = served[1] as f64 / (served[0] + served[1]) as f64;
        assert!((share - 0.5).abs() < 0.02, "{served:?}");
    }

    // Proves the tags stay exact over a long run with byte rates: a 1 MiB/s reservation of
    // 4 KiB requests is 256 requests a second, each second.
    #[test]
    fn byte_rates_are_exact() {
        let mut bench = Bench::new();
        let served = bench.run(
            &[
                flow(&[("reservation", "1MiB/s"), ("limit", "1MiB/s")]),
                flow(&[("weight", "1")]),
            ],
            MILLISECOND,
            SECOND,
            101 * SECOND,
        );
        assert!((served[0] as i64 - 25_600).abs() <= 1, "{served:?}");
    }

    // Proves drain hands back every queued request and leaves the policy empty and usable.
    #[test]
    fn drain_empties_the_heaps() {
        let mut bench = Bench::new();
        bench.run(
            &[flow(&[("reservation", "10iops")]), flow(&[("limit", "5iops")])],
            MILLISECOND,
            0,
            SECOND,
        );
        let mut out = Vec::new();
        bench.policy.drain(&mut out);
        assert_eq!(out.len(), 8);
        assert_eq!(bench.policy.queued(), 0);
        assert_eq!(bench.policy.dispatch(SECOND), Dispatch::Empty);
        bench.add(0, KIB4, SECOND);
        assert!(matches!(bench.policy.dispatch(SECOND), Dispatch::Request(_)));
    }
}

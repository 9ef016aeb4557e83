//! `pclock` and `htbs`: QoS stated in units (seed 002). Each flow, an *application*, has a
//! rate rho, a burst sigma and a delay delta (a cgroup's `qos.rate`, `qos.burst`,
//! `qos.delay`, [`crate::qos`]); every request gets a start and a finish tag from its
//! application's token bucket, exactly as seed 002's Fig. 2 (after pClock, Gulati, Merchant
//! and Varman, SIGMETRICS 2007):
//!
//! - `update_num_tokens`: the bucket gains the time since the application's last request times
//!   rho, and holds at most sigma.
//! - `compute_tags`: with less than one request's worth of tokens, the start tag is
//!   `max(MaxS, t)` and `MaxS` moves on by the request's cost over rho; otherwise it is `t`,
//!   the arrival. The finish tag is the start plus delta. The request's cost is taken from the
//!   bucket either way (it may go negative).
//!
//! **`pclock`** dispatches the request with the smallest finish tag, work-conserving.
//! **`htbs`** (seed 002's Fig. 1) keeps an *active application*: it dispatches that
//! application's smallest-finish request until it has dispatched `B_max` in a row, and when
//! the application has none it waits up to `T_wait` after its last completion for the next
//! (anticipation, when its last request was synchronous); past either, or when the application's pattern is random (most of its last
//! 8 requests started more than 400 KiB from where the one before ended), the application of
//! the smallest finish tag overall becomes the active one.
//!
//! A cgroup with any `qos.*` file set is one application for all of its jobs; any other job
//! is an application of its own, with its `qos_*` job options if it has any
//! ([`crate::qos::QosTable`]). Where a setting is missing: no rate means the bucket never
//! runs out (every start tag is the arrival), no burst means one request's worth, and no
//! delay means `default_delay`. Rates in bytes per second count tokens in bytes (a request
//! costs its size); in IOPS, in requests. Not modelled: request merging (requests are
//! dispatched as they came).

use super::PolicyInfo;
use crate::group::Groups;
use crate::policy::{Dispatch, Policy};
use crate::qos::{Qos, QosKey as AppKey, QosTable, Rate};
use crate::request::{FlowId, Request, RequestId};
use crate::time::{from_millis, Nanos, MILLISECOND, SECOND};
use crate::tunable::{TunableError, TunableSpec, Unit};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, VecDeque};

/// pClock's tunables.
pub const PCLOCK_TUNABLES: &[TunableSpec] = &[DEFAULT_DELAY];

/// HTBS's tunables, with seed 002's names and defaults.
pub const HTBS_TUNABLES: &[TunableSpec] = &[
    TunableSpec {
        name: "B_max",
        unit: Unit::Requests,
        default: 20,
        min: 1,
        max: 1_000_000,
        doc: "most requests of the active application dispatched in a row",
    },
    TunableSpec {
        name: "T_wait",
        unit: Unit::Milliseconds,
        default: 10,
        min: 0,
        max: 10_000,
        doc: "longest wait for the active application's next request after its last completion",
    },
    DEFAULT_DELAY,
];

const DEFAULT_DELAY: TunableSpec = TunableSpec {
    name: "default_delay",
    unit: Unit::Milliseconds,
    default: 1_000,
    min: 1,
    max: 3_600_000,
    doc: "delay (delta) of an application that states none in qos.delay",
};

/// This module's entries in the policy catalog (`iosched policies`).
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "pclock",
        aliases: &[],
        summary: "pClock: per-application token buckets (qos.rate, qos.burst) tag each request with a start and a deadline (qos.delay); the earliest deadline goes first, work-conserving (seed 002's baseline)",
        tunables: PCLOCK_TUNABLES,
        build: || Box::new(Tagged::new(false)),
    },
    PolicyInfo {
        name: "htbs",
        aliases: &[],
        summary: "HTBS (seed 002): pClock's tags, and the active application keeps the disk for up to B_max requests in a row, waiting up to T_wait for its next synchronous request unless its pattern is random",
        tunables: HTBS_TUNABLES,
        build: || Box::new(Tagged::new(true)),
    },
];

/// Applications remembered at most; idle ones are forgotten past it.
const MAX_APPLICATIONS: usize = 4096;
/// A request starting farther than this from where its application's previous one ended is
/// a seek (BFQ's `BFQQ_SEEK_THR`, 800 sectors).
const SEEK_THRESHOLD: u64 = 800 * 512;
/// Of the last 8 requests, this many seeks make a pattern random.
const RANDOM_SEEKS: u32 = 4;

/// An application's QoS and token bucket.
#[derive(Debug)]
struct App {
    rate: Option<Rate>,
    sigma: u64,
    delay: Option<Nanos>,
    /// Tokens in units x SECOND (exact: a refill is elapsed ns x units per second).
    tokens: i128,
    last_update: Nanos,
    max_s: Nanos,
    /// Queued requests by (finish tag, id).
    queue: BTreeMap<(Nanos, RequestId), Request>,
    in_flight: usize,
    last_completion: Nanos,
    last_end: u64,
    /// One bit per recent request: whether it was a seek.
    seeks: u8,
    /// Whether its last request dispatched was synchronous (only those are waited for).
    sync: bool,
}

impl App {
    fn new(qos: Qos, now: Nanos) -> App {
        App {
            rate: qos.rate,
            sigma: qos.sigma(),
            delay: qos.delay,
            tokens: i128::from(qos.sigma()) * i128::from(SECOND),
            last_update: now,
            max_s: 0,
            queue: BTreeMap::new(),
            in_flight: 0,
            last_completion: now,
            last_end: 0,
            seeks: 0,
            sync: true,
        }
    }

    fn random(&self) -> bool {
        self.seeks.count_ones() >= RANDOM_SEEKS
    }

    /// `update_num_tokens` then `compute_tags` for a request of `bytes` arriving at `now`:
    /// returns its start and finish tags.
    fn tag(&mut self, bytes: u64, now: Nanos, default_delay: Nanos) -> (Nanos, Nanos) {
        let delay = self.delay.unwrap_or(default_delay);
        let Some(rate) = self.rate else {
            return (now, now.saturating_add(delay));
        };
        let (per_second, _) = rate.per_second();
        let cost = rate.cost(bytes);
        let scale = i128::from(SECOND);
        let elapsed = now.saturating_sub(self.last_update);
        self.last_update = now;
        let cap = i128::from(self.sigma.max(cost)) * scale;
        self.tokens = (self.tokens + i128::from(elapsed) * i128::from(per_second)).min(cap);
        let start = if self.tokens < i128::from(cost) * scale {
            let start = self.max_s.max(now);
            self.max_s = start.saturating_add(rate.time_for(cost));
            start
        } else {
            now
        };
        self.tokens -= i128::from(cost) * scale;
        (start, start.saturating_add(delay))
    }
}

/// pClock (`anticipate` false) or HTBS (true).
pub struct Tagged {
    anticipate: bool,
    /// The applications by key: looked up at every request, iterated only to forget idle ones
    /// and to drain, where the order does not matter.
    apps: FxHashMap<AppKey, App>,
    /// Every queued request by (finish tag, id), with its application.
    by_finish: BTreeMap<(Nanos, RequestId), AppKey>,
    /// Requests the device handed back, sent again first.
    requeued: VecDeque<Request>,
    queued: usize,
    /// Whose each request is, and their settings.
    qos: QosTable,
    /// HTBS: the active application and how many it dispatched in a row.
    active: Option<AppKey>,
    in_a_row: u64,
    /// Counters: active-application changes by cause.
    switches_b_max: u64,
    switches_t_wait: u64,
    switches_random: u64,
    b_max: u64,
    t_wait: Nanos,
    default_delay: Nanos,
}

impl Tagged {
    /// pClock, or HTBS when `anticipate`, with the defaults.
    pub fn new(anticipate: bool) -> Tagged {
        Tagged {
            anticipate,
            apps: FxHashMap::default(),
            by_finish: BTreeMap::new(),
            requeued: VecDeque::new(),
            queued: 0,
            qos: QosTable::default(),
            active: None,
            in_a_row: 0,
            switches_b_max: 0,
            switches_t_wait: 0,
            switches_random: 0,
            b_max: HTBS_TUNABLES[0].default,
            t_wait: from_millis(HTBS_TUNABLES[1].default),
            default_delay: from_millis(DEFAULT_DELAY.default),
        }
    }

    /// Forgets applications with nothing queued or in flight (their buckets go with them).
    fn forget_idle(&mut self) {
        let active = self.active;
        self.apps.retain(|key, app| {
            !app.queue.is_empty() || app.in_flight > 0 || Some(*key) == active
        });
    }

    /// Takes request `id` with finish `finish` off application `key`'s queue.
    fn take(&mut self, key: AppKey, finish: (Nanos, RequestId)) -> Request {
        self.by_finish.remove(&finish);
        let app = self.apps.get_mut(&key).expect("queued request's application");
        let request = app.queue.remove(&finish).expect("queued");
        let seek = request.offset.abs_diff(app.last_end) > SEEK_THRESHOLD;
        app.seeks = (app.seeks << 1) | u8::from(seek);
        app.last_end = request.end();
        app.sync = request.sync;
        app.in_flight += 1;
        self.queued -= 1;
        request
    }

    /// HTBS's `dispatch_request`.
    fn dispatch_htbs(&mut self, now: Nanos) -> Dispatch {
        if let Some(key) = self.active {
            let app = &self.apps[&key];
            if self.in_a_row >= self.b_max {
                self.switches_b_max += 1;
                self.active = None;
            } else if let Some((&finish, _)) = app.queue.iter().next() {
                self.in_a_row += 1;
                return Dispatch::Request(self.take_active(key, finish));
            } else if app.random() {
                // Nothing to gain from waiting for a random application.
                self.switches_random += 1;
                self.active = None;
            } else if !app.sync {
                // Only a synchronous request's successor is worth waiting for.
                self.active = None;
            } else if app.in_flight > 0 {
                // Its next request follows the completion: the wait starts there.
                return Dispatch::WaitUntil(now.saturating_add(self.t_wait.max(1)));
            } else {
                let until = app.last_completion.saturating_add(self.t_wait);
                if now < until {
                    return Dispatch::WaitUntil(until);
                }
                // timer_expired.
                self.switches_t_wait += 1;
                self.active = None;
            }
        }
        let Some((&finish, &key)) = self.by_finish.iter().next() else {
            return Dispatch::Empty;
        };
        self.active = Some(key);
        self.in_a_row = 1;
        Dispatch::Request(self.take_active(key, finish))
    }

    /// Dispatches `finish` of the active application `key`; a random application does not
    /// stay active.
    fn take_active(&mut self, key: AppKey, finish: (Nanos, RequestId)) -> Request {
        let request = self.take(key, finish);
        if self.apps[&key].random() && self.apps[&key].queue.is_empty() {
            self.switches_random += 1;
            self.active = None;
        }
        request
    }
}

impl Policy for Tagged {
    fn name(&self) -> &'static str {
        if self.anticipate {
            "htbs"
        } else {
            "pclock"
        }
    }

    fn set_groups(&mut self, groups: &Groups) {
        self.qos.set_groups(groups);
    }

    fn set_flow_qos(&mut self, flow: FlowId, qos: Qos) {
        self.qos.set_flow(flow, qos);
    }

    fn uses_qos(&self) -> bool {
        true
    }

    fn insert(&mut self, request: Request, now: Nanos) {
        let (key, qos) = self.qos.client(&request);
        if !self.apps.contains_key(&key) && self.apps.len() >= MAX_APPLICATIONS {
            self.forget_idle();
        }
        let app = self.apps.entry(key).or_insert_with(|| App::new(qos, now));
        let (_, finish) = app.tag(request.len, now, self.default_delay);
        let slot = (finish, request.id);
        app.queue.insert(slot, request);
        self.by_finish.insert(slot, key);
        self.queued += 1;
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        if let Some(request) = self.requeued.pop_front() {
            self.queued -= 1;
            let key = self.qos.key(&request);
            if let Some(app) = self.apps.get_mut(&key) {
                app.in_flight += 1;
            }
            return Dispatch::Request(request);
        }
        if self.anticipate {
            return self.dispatch_htbs(now);
        }
        match self.by_finish.iter().next() {
            Some((&finish, &key)) => Dispatch::Request(self.take(key, finish)),
            None => Dispatch::Empty,
        }
    }

    fn completed(&mut self, request: &Request, now: Nanos) {
        let key = self.qos.key(request);
        if let Some(app) = self.apps.get_mut(&key) {
            app.in_flight = app.in_flight.saturating_sub(1);
            app.last_completion = now;
        }
    }

    fn requeue(&mut self, request: Request, _now: Nanos) {
        let key = self.qos.key(&request);
        if let Some(app) = self.apps.get_mut(&key) {
            app.in_flight = app.in_flight.saturating_sub(1);
        }
        self.queued += 1;
        self.requeued.push_back(request);
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn drain(&mut self, out: &mut Vec<Request>) {
        let start = out.len();
        out.extend(self.requeued.drain(..));
        for app in self.apps.values_mut() {
            out.extend(std::mem::take(&mut app.queue).into_values());
        }
        out[start..].sort_by_key(|r| (r.arrival, r.id));
        self.by_finish.clear();
        self.queued = 0;
        self.active = None;
    }

    fn tunables(&self) -> &'static [TunableSpec] {
        if self.anticipate {
            HTBS_TUNABLES
        } else {
            PCLOCK_TUNABLES
        }
    }

    fn tunable(&self, name: &str) -> Result<u64, TunableError> {
        crate::tunable::find(self.tunables(), name)?;
        Ok(match name {
            "B_max" => self.b_max,
            "T_wait" => self.t_wait / MILLISECOND,
            _ => self.default_delay / MILLISECOND,
        })
    }

    fn set_tunable(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        let value = crate::tunable::find(self.tunables(), name)?.check(value)?;
        match name {
            "B_max" => self.b_max = value,
            "T_wait" => self.t_wait = from_millis(value),
            _ => self.default_delay = from_millis(value),
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        if !self.anticipate {
            return Vec::new();
        }
        vec![
            ("htbs_switches_b_max", self.switches_b_max as f64),
            ("htbs_switches_t_wait", self.switches_t_wait as f64),
            ("htbs_switches_random", self.switches_random as f64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::GroupId;
    use crate::testing::request;
    use crate::Op;

    fn groups_with(settings: &[(&str, &str, &str)]) -> Groups {
        let mut groups = Groups::new();
        for (path, file, value) in settings {
            let id = groups.intern(path).unwrap();
            groups.set(id, file, value).unwrap();
        }
        groups
    }

    fn read(id: u64, group: GroupId, offset: u64) -> Request {
        let mut r = request(id, Op::Read, offset, 4096);
        r.group = group;
        r
    }

    // Proves the tags of seed 002's Fig. 2: within its rate an application's start tag is
    // its arrival; past its tokens it is pushed to MaxS, one 1/rho apart; the finish is the
    // start plus delta; the bucket refills with time, up to sigma.
    #[test]
    fn tags_follow_the_token_bucket() {
        let groups = groups_with(&[
            ("/a", "qos.rate", "100iops"),
            ("/a", "qos.burst", "2"),
            ("/a", "qos.delay", "50ms"),
        ]);
        let mut app = App::new(groups.settings(GroupId(1)).qos, 0);
        // Two tokens: two requests at once start now.
        assert_eq!(app.tag(4096, 0, 0), (0, 50 * MILLISECOND));
        assert_eq!(app.tag(4096, 0, 0), (0, 50 * MILLISECOND));
        // Out of tokens: 10 ms apart from MaxS, which starts at now.
        assert_eq!(app.tag(4096, 0, 0), (0, 50 * MILLISECOND));
        assert_eq!(app.tag(4096, 0, 0), (10 * MILLISECOND, 60 * MILLISECOND));
        // A second later the bucket is full again (capped at 2, the debt repaid).
        assert_eq!(app.tag(4096, SECOND, 0), (SECOND, SECOND + 50 * MILLISECOND));
        assert_eq!(app.tag(4096, SECOND, 0), (SECOND, SECOND + 50 * MILLISECOND));
        assert_eq!(
            app.tag(4096, SECOND, 0),
            (SECOND, SECOND + 50 * MILLISECOND),
            "MaxS is behind now, so the start is now"
        );
    }

    // Proves pClock serves by earliest finish tag: an application with a short delay goes
    // before one with a long delay that arrived first.
    #[test]
    fn pclock_serves_the_earliest_deadline() {
        let groups = groups_with(&[("/slow", "qos.delay", "500ms"), ("/fast", "qos.delay", "20ms")]);
        let mut policy = Tagged::new(false);
        policy.set_groups(&groups);
        policy.insert(read(1, GroupId(1), 0), 0);
        policy.insert(read(2, GroupId(2), 1 << 30), MILLISECOND);
        let Dispatch::Request(first) = policy.dispatch(MILLISECOND) else {
            panic!("work-conserving")
        };
        assert_eq!(first.id, RequestId(2));
    }

    // Proves HTBS's anticipation and B_max: a sequential application's next request is
    // waited for (T_wait after its completion) though another is queued, and after B_max in
    // a row the other gets the disk.
    #[test]
    fn htbs_waits_for_the_active_application_up_to_b_max() {
        let mut policy = Tagged::new(true);
        policy.set_tunable("B_max", 3).unwrap();
        policy.insert(read(1, GroupId::ROOT, 0), 0);
        let mut other = read(100, GroupId::ROOT, 1 << 30);
        other.flow = FlowId(2);
        policy.insert(other, 0);
        let mut now = 0;
        for n in 1..=3u64 {
            let Dispatch::Request(r) = policy.dispatch(now) else {
                panic!("a request is queued")
            };
            assert_eq!((r.flow, r.id), (FlowId(0), RequestId(n)), "request {n}");
            now += MILLISECOND;
            policy.completed(&r, now);
            if n == 3 {
                break;
            }
            // The other application's request waits while this one's next is expected.
            assert_eq!(
                policy.dispatch(now),
                Dispatch::WaitUntil(now + 10 * MILLISECOND)
            );
            now += MILLISECOND;
            policy.insert(read(n + 1, GroupId::ROOT, n * 4096), now);
        }
        // Three in a row: the smallest finish tag overall, the other's, goes next, without
        // waiting for the third one's next.
        let Dispatch::Request(r) = policy.dispatch(now) else {
            panic!("queued")
        };
        assert_eq!(r.flow, FlowId(2));
    }

    // Proves T_wait: when the active application's next request does not come within T_wait
    // of its completion, another application gets the disk.
    #[test]
    fn htbs_stops_waiting_after_t_wait() {
        let mut policy = Tagged::new(true);
        policy.insert(read(1, GroupId::ROOT, 0), 0);
        let mut other = read(2, GroupId::ROOT, 1 << 30);
        other.flow = FlowId(1);
        policy.insert(other, 0);
        let Dispatch::Request(r) = policy.dispatch(0) else {
            panic!("queued")
        };
        assert_eq!(r.flow, FlowId(0));
        policy.completed(&r, MILLISECOND);
        assert_eq!(
            policy.dispatch(MILLISECOND),
            Dispatch::WaitUntil(11 * MILLISECOND)
        );
        let Dispatch::Request(r) = policy.dispatch(11 * MILLISECOND) else {
            panic!("the wait is over")
        };
        assert_eq!(r.flow, FlowId(1));
    }
}

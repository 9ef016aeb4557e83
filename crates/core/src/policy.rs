//! The policy contract, modelled on Linux's `elevator_mq_ops` with time passed in.
//!
//! # Protocol
//!
//! An engine (the simulator, or the io_uring engine) drives a policy through an
//! [`Elevator`](crate::Elevator), which adds the queue limits every Linux scheduler shares:
//!
//! 1. A request arrives: the engine offers it with [`Policy::try_merge`]. If the policy folds it
//!    into a queued request, it is done. Otherwise, if the queue has room, [`Policy::insert`].
//! 2. Whenever the device can take a command (after an insert, after a completion, or at the time
//!    a policy asked to be woken), the engine calls [`Policy::dispatch`] until it stops returning
//!    requests:
//!    - [`Dispatch::Request`]: send this request to the device now.
//!    - [`Dispatch::WaitUntil`]: the policy is deliberately idle (anticipation, token shortage,
//!      `T_wait`) with work queued; ask again at that time, or earlier if a request arrives or
//!      completes.
//!    - [`Dispatch::Empty`]: nothing to send now (the queue is empty, or the policy holds its
//!      requests until something completes); ask again after the next insert or completion.
//! 3. The device finishes a request: [`Policy::completed`] with the request as dispatched.
//!
//! Policies never read a clock, never do I/O, never use unseeded randomness, and never hold more
//! than the elevator lets in (`nr_requests`), so each is a state machine that is cheap to test.

use crate::group::Groups;
use crate::qos::Qos;
use crate::request::{FlowId, MergeLimits, Request};
use crate::time::Nanos;
use crate::tunable::{TunableError, TunableSpec};

/// What holds back a waiter a policy turned away ([`Policy::allocation_hold`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeldBy {
    /// The hold it shares with others: every waiter held by it is let in or turned away
    /// alike, until [`Policy::loosened`] reports this key or a waiter's own.
    pub hold: u64,
    /// Its own key, if the hold may turn it away when it lets in others of the hold: reported
    /// loosened, it gives back every waiter of that key, whatever holds them. Apart from
    /// every `hold` key. `None`: the hold is the waiter's alone to answer (it holds only
    /// waiters that are let in or turned away alike in every case).
    pub own: Option<u64>,
}

/// What a policy wants the engine to do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// Send this request to the device now.
    Request(Request),
    /// Deliberately idle although work is queued; ask again at this time (or sooner, on the next
    /// insert or completion).
    WaitUntil(Nanos),
    /// Nothing to send now; ask again after the next insert or completion.
    Empty,
}

/// An I/O scheduling policy. Only `insert`, `dispatch` and the bookkeeping queries are required;
/// the other hooks have defaults that do nothing, as unused `elevator_mq_ops` are left NULL.
pub trait Policy: Send {
    /// The policy's name as `iosched policies` lists it.
    fn name(&self) -> &'static str;

    /// Offers `request` for merging into a queued request (a bio merge, in kernel terms).
    /// Returns `Ok(())` if it was absorbed; otherwise hands it back.
    fn try_merge(
        &mut self,
        request: Request,
        limits: MergeLimits,
        now: Nanos,
    ) -> Result<(), Request> {
        let _ = (limits, now);
        Err(request)
    }

    /// Queues `request`. The elevator guarantees room: at most `nr_requests` requests are ever
    /// queued or in flight at once.
    fn insert(&mut self, request: Request, now: Nanos);

    /// Takes over `request`, queued elsewhere since `request.arrival` (a meta-policy handing
    /// its queue from one policy to another at run time): a policy with deadlines counts them
    /// from the request's arrival, as it would have had the request been its own all along.
    /// The default queues it as a new request.
    fn adopt(&mut self, request: Request, now: Nanos) {
        self.insert(request, now);
    }

    /// Picks what the device should do next.
    fn dispatch(&mut self, now: Nanos) -> Dispatch;

    /// The device finished `request` (as it was dispatched, merged companions included).
    fn completed(&mut self, request: &Request, now: Nanos) {
        let _ = (request, now);
    }

    /// The device handed back a dispatched request unserved; it should go out again first.
    /// The default queues it like a new request.
    fn requeue(&mut self, request: Request, now: Nanos) {
        self.insert(request, now);
    }

    /// Whether `request` may take a scheduler request now, with `in_use` of the queue's
    /// `nr_requests` taken (queued or in the device): Linux's `limit_depth` hook, which keeps
    /// some of the requests for the I/O a policy favours (bfq keeps a quarter for sync reads,
    /// and each queue to its weight's share). Asked only with room in the queue; flushes
    /// never ask, as `limit_depth` is not called for them. The default takes any.
    fn may_allocate(&self, request: &Request, in_use: usize, nr_requests: u32) -> bool {
        let _ = (request, in_use, nr_requests);
        true
    }

    /// After [`Policy::may_allocate`] turned `request` away (with `in_use` of `nr_requests`
    /// taken): what holds it back, if the policy will report that hold loosened
    /// ([`Policy::loosened`]) before it could let `request` in. The elevator's waiters then set
    /// the waiter aside until then, instead of asking again at every pass (bfq's share of
    /// the requests per queue: with 64 jobs at depth 64, asking cost more than the request).
    /// `None`, the default: ask again at every pass.
    ///
    /// A hold is shared: the waiters held by the same [`HeldBy::hold`] are let in or turned
    /// away alike, but for what their own keys ([`HeldBy::own`]) say. So when the hold
    /// loosens the waiters ask one of them at a time, in arrival order, and stop at the first
    /// one turned away by that same hold: the others would be too. A change that lets in one
    /// waiter and not the others of its hold (bfq: its queue left the race, which no share
    /// binds) is reported by the waiter's own key, which gives back every waiter of that key.
    fn allocation_hold(
        &mut self,
        request: &Request,
        in_use: usize,
        nr_requests: u32,
    ) -> Option<HeldBy> {
        let _ = (request, in_use, nr_requests);
        None
    }

    /// The holds ([`Policy::allocation_hold`]) that may have loosened since the last call,
    /// with `nr_requests` the queue's now: each one's key, a hold's or a waiter's own, goes to
    /// `keys`; `true` when every hold may have loosened. Only what was reported here may let
    /// in a waiter set aside: a debug build checks that every waiter set aside under a hold
    /// that turned one away since it was last reported is turned away.
    fn loosened(&mut self, nr_requests: u32, keys: &mut Vec<u64>) -> bool {
        let _ = (nr_requests, keys);
        false
    }

    /// The `nr_requests` this policy's queue had by default in the kernel, when it is not the
    /// blk-mq default the engines give (`2 * min(device depth, 128)`): the schedulers of the
    /// single-queue block layer (cfq, anticipatory, the 2009 IO controller, seed 001's DASS)
    /// had BLKDEV_MAX_RQ, 128, whatever the device's depth. `--set nr_requests` still wins.
    fn default_nr_requests(&self) -> Option<u32> {
        None
    }

    /// Number of requests queued (not yet dispatched).
    fn queued(&self) -> usize;

    /// Whether any request is queued.
    fn has_work(&self) -> bool {
        self.queued() > 0
    }

    /// Removes every queued request, oldest first where the policy knows an order. Used when a
    /// meta-policy hands its queue to another policy at run time.
    fn drain(&mut self, out: &mut Vec<Request>);

    /// The groups and their io controller settings (`io.weight`, ...), before any request
    /// and whenever they change. Policies without groups ignore it.
    fn set_groups(&mut self, groups: &Groups) {
        let _ = groups;
    }

    /// A job's own QoS (the job file's `qos_*` options), before any of its requests. Only
    /// the policies that take QoS settings keep it.
    fn set_flow_qos(&mut self, flow: FlowId, qos: Qos) {
        let _ = (flow, qos);
    }

    /// Whether this policy reads QoS settings (a job's `qos_*`, a cgroup's `qos.*`): an
    /// engine notes settings that a policy would ignore.
    fn uses_qos(&self) -> bool {
        false
    }

    /// The tunables this policy publishes.
    fn tunables(&self) -> &'static [TunableSpec] {
        &[]
    }

    /// The current value of tunable `name`, in its unit.
    fn tunable(&self, name: &str) -> Result<u64, TunableError> {
        Err(crate::tunable::unknown(name, self.tunables()))
    }

    /// Sets tunable `name` to `value` (in its unit; already range-checked by the caller through
    /// [`TunableSpec::parse`] or [`TunableSpec::check`]).
    fn set_tunable(&mut self, name: &str, value: u64) -> Result<(), TunableError> {
        let _ = value;
        Err(crate::tunable::unknown(name, self.tunables()))
    }

    /// The policy's own state for a run's report, as name and value (a kernel scheduler shows
    /// such state in debugfs). Most policies have none.
    fn counters(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Sets `name` to `text` when it is a setting this policy takes as text rather than as one
    /// of its numeric tunables: a meta-policy's list of policies, or a tunable of a policy it
    /// runs (`dass`'s `policies=cfq,deadline`, `cfq.slice_idle=0`). `None` when it is not.
    fn set_text(&mut self, name: &str, text: &str) -> Option<Result<(), TunableError>> {
        let _ = (name, text);
        None
    }

    /// The current values of the settings [`Policy::set_text`] takes, for a run's report.
    fn text_settings(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

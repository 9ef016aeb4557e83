//! The fuzz targets' bodies: each takes any bytes and returns normally, or panics on a finding.

use crate::bytes::Bytes;
use iosched_core::group::GroupSetting;
use iosched_core::{
    limits, policies, stage, Admitted, Dispatch, Elevator, FlowId, GroupId, Groups, IoPrio,
    IoPrioClass, Nanos, Op, Request, RequestId,
};
use iosched_fio::parse::{parse_str_with_loader, ParseError};
use iosched_sim::{SimConfig, Simulation};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

/// A fuzz target's body.
pub type Target = fn(&[u8]);

/// Every target, by the name `cargo fuzz run NAME` and the corpus folders use.
pub const TARGETS: &[(&str, Target)] = &[
    ("job_file", job_file),
    ("groups_file", groups_file),
    ("cli_values", cli_values),
    ("policy_ops", policy_ops),
    ("trace_formats", trace_formats),
];

/// The longest error any input may produce: what the user wrote is quoted at most
/// [`limits::QUOTED_BYTES_MAX`] bytes long, and an include loop names at most
/// [`limits::INCLUDE_DEPTH_MAX`] steps.
const ERROR_BYTES_MAX: usize = 4096;

fn check_error(what: &str, error: &str) {
    assert!(
        error.len() <= ERROR_BYTES_MAX,
        "{what}: an error of {} bytes: {}...",
        error.len(),
        error.chars().take(300).collect::<String>()
    );
    assert!(!error.trim().is_empty(), "{what}: an empty error");
}

/// A job file: the text up to the first NUL byte is the job file (`fuzz.fio`); each later
/// NUL-separated part is a file it may include as `1.fio`, `2.fio`, ... Parsing must succeed
/// or give a short error; a parsed file must set up a simulation on every device model, or
/// be refused with an error.
pub fn job_file(data: &[u8]) {
    let mut parts = data.split(|&b| b == 0);
    let main = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let includes: Vec<String> = parts
        .map(|part| String::from_utf8_lossy(part).into_owned())
        .collect();
    let loader = |path: &Path| -> Result<String, ParseError> {
        path.file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(".fio"))
            .and_then(|number| number.parse::<usize>().ok())
            .and_then(|number| number.checked_sub(1))
            .and_then(|index| includes.get(index))
            .cloned()
            .ok_or_else(|| ParseError {
                location: None,
                message: format!("cannot read included file {:?}: not found", path.display()),
            })
    };
    let env = |name: &str| (name == "SIZE").then(|| "4k".to_string());
    let file = match parse_str_with_loader(&main, "fuzz.fio", Path::new("/fuzz"), &env, &loader) {
        Ok(file) => file,
        Err(error) => return check_error("job file", &error.to_string()),
    };
    assert!(
        file.jobs.len() <= limits::JOBS_MAX,
        "{} jobs",
        file.jobs.len()
    );
    for job in &file.jobs {
        assert!(
            job.iodepth <= limits::IODEPTH_MAX,
            "iodepth {}",
            job.iodepth
        );
        assert!(job.runtime.is_none_or(|t| t <= limits::JOB_TIME_MAX));
    }
    for device in iosched_sim::device::catalog() {
        let config = SimConfig {
            device: device.name.to_string(),
            ..SimConfig::default()
        };
        if let Err(error) = Simulation::new(&config, &file) {
            check_error("simulation", &error.to_string());
        }
    }
}

/// A `--groups` file: parsed, applied to a set of groups, and handed to every stage and to
/// the policies that read groups.
pub fn groups_file(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let settings = match iosched_lab::setup::parse_groups(&text, "fuzz.groups") {
        Ok(settings) => settings,
        Err(error) => return check_error("groups file", &format!("{error:#}")),
    };
    apply_groups(&settings);
}

/// Applies `settings` to fresh groups; when they are accepted, every stage and every policy
/// is given them. Returns the groups.
fn apply_groups(settings: &[GroupSetting]) -> Option<Groups> {
    let mut groups = Groups::new();
    if let Err(error) = groups.apply(settings) {
        check_error("group settings", &error);
        return None;
    }
    assert!(
        groups.len() <= limits::GROUPS_MAX + 1,
        "{} groups",
        groups.len()
    );
    for id in groups.ids() {
        assert!(groups.depth(id) as usize <= limits::GROUP_DEPTH_MAX);
    }
    for stack in stacks() {
        let mut elevator = policies::Stack::parse(&stack)
            .expect("a listed stack")
            .elevator(64);
        elevator.set_groups(&groups);
    }
    Some(groups)
}

/// Every policy, alone and under every stage, as `--policy` names them.
fn stacks() -> Vec<String> {
    let mut names = Vec::new();
    for policy in policies::catalog() {
        names.push(policy.name.to_string());
        for (stage, _, _) in stage::STAGES {
            names.push(format!("{stage}+{}", policy.name));
        }
    }
    names
}

/// One command-line value: the first byte chooses the option, the rest is its text.
pub fn cli_values(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match selector % 5 {
        // --set NAME=VALUE, under every policy stack.
        0 => match iosched::run::parse_setting(&text) {
            Ok(setting) => {
                for stack in stacks() {
                    let mut elevator = policies::Stack::parse(&stack)
                        .expect("a listed stack")
                        .elevator(64);
                    if let Err(error) =
                        policies::apply_settings(&mut elevator, std::slice::from_ref(&setting))
                    {
                        check_error("--set", &error.to_string());
                    }
                }
            }
            Err(error) => check_error("--set", &error),
        },
        // --group PATH:FILE=VALUE
        1 => match iosched_lab::setup::parse_group_flag(&text) {
            Ok(setting) => {
                apply_groups(&[setting]);
            }
            Err(error) => check_error("--group", &error),
        },
        // --device-set NAME=VALUE, on every device model.
        2 => match iosched::run::parse_setting(&text) {
            Ok(setting) => {
                for device in iosched_sim::device::catalog() {
                    if let Err(error) =
                        iosched_sim::device::build(device.name, std::slice::from_ref(&setting), 1)
                    {
                        check_error("--device-set", &error.to_string());
                    }
                }
            }
            Err(error) => check_error("--device-set", &error),
        },
        // --policy STACK
        3 => {
            if let Err(error) = policies::Stack::parse(&text) {
                check_error("--policy", &error.to_string());
            }
        }
        // --output-format LIST
        _ => {
            if let Err(error) = iosched::run::parse_formats(&text) {
                check_error("--output-format", &format!("{error:#}"));
            }
        }
    }
}

/// Most operations one input runs, and most steps to empty the queue after them.
const OPS_MAX: usize = 4096;
const DRAIN_STEPS_MAX: usize = 200_000;

/// Group paths the operations' requests are issued from (index 0 is the root).
const GROUP_PATHS: &[&str] = &["/", "/a", "/b", "/a/c"];

/// An original request as the model knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Waiting for a free scheduler request (the elevator handed it back).
    Blocked,
    /// Taken in by the elevator (queued, merged or held by the stage).
    Admitted,
    /// On the device, in the command carried by the given request id.
    Dispatched(u64),
    Completed,
}

struct Model {
    elevator: Elevator,
    now: Nanos,
    depth: usize,
    /// Original requests: op, offset, len, state.
    requests: BTreeMap<u64, (Op, u64, u64, State)>,
    blocked: VecDeque<Request>,
    device: VecDeque<Request>,
    label: String,
    /// Print every operation (`IOSCHED_FUZZ_TRACE=1`), to follow a finding.
    trace: bool,
}

impl Model {
    fn trace(&self, what: impl FnOnce() -> String) {
        if self.trace {
            eprintln!("{:>14} {}", self.now, what());
        }
    }

    fn submit(&mut self, request: Request) {
        self.trace(|| format!("submit {request:?}"));
        let id = request.id.0;
        self.requests.insert(
            id,
            (request.op, request.offset, request.len, State::Blocked),
        );
        if !self.blocked.is_empty() {
            self.blocked.push_back(request);
            return;
        }
        match self.elevator.submit(request, self.now) {
            Ok(_) => self.set(id, State::Admitted),
            Err(request) => self.blocked.push_back(request),
        }
    }

    fn set(&mut self, id: u64, state: State) {
        self.requests.get_mut(&id).expect("a known request").3 = state;
    }

    fn admit_blocked(&mut self) {
        while let Some(request) = self.blocked.pop_front() {
            let id = request.id.0;
            match self.elevator.submit(request, self.now) {
                Ok(Admitted::Merged | Admitted::Queued | Admitted::Held) => {
                    self.set(id, State::Admitted)
                }
                Err(request) => {
                    self.blocked.push_front(request);
                    return;
                }
            }
        }
    }

    /// Asks the policy once; returns what it answered.
    fn dispatch(&mut self) -> Dispatch {
        self.admit_blocked();
        if self.device.len() >= self.depth {
            return Dispatch::Empty;
        }
        let decision = self.elevator.dispatch(self.now);
        self.trace(|| format!("dispatch -> {decision:?}"));
        if let Dispatch::Request(request) = &decision {
            self.check_dispatched(request);
            self.device.push_back(request.clone());
        }
        decision
    }

    /// Every original in `request` was admitted and is not on the device already, and
    /// together they cover exactly the request's range, in its direction.
    fn check_dispatched(&mut self, request: &Request) {
        let label = &self.label;
        let mut parts = Vec::new();
        for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
            let &(op, offset, len, state) = self
                .requests
                .get(&id.0)
                .unwrap_or_else(|| panic!("{label}: dispatched {id:?}, never submitted"));
            assert_eq!(
                state,
                State::Admitted,
                "{label}: dispatched {id:?} in state {state:?}"
            );
            assert_eq!(
                op.direction(),
                request.op.direction(),
                "{label}: {id:?} merged across directions"
            );
            parts.push((offset, len));
        }
        parts.sort_unstable();
        if request.op != Op::Flush {
            assert_eq!(
                parts[0].0, request.offset,
                "{label}: request starts off its first part"
            );
            for pair in parts.windows(2) {
                assert_eq!(
                    pair[0].0 + pair[0].1,
                    pair[1].0,
                    "{label}: merged parts not contiguous: {parts:?}"
                );
            }
            let total: u64 = parts.iter().map(|p| p.1).sum();
            assert_eq!(
                total, request.len,
                "{label}: parts {parts:?} vs {request:?}"
            );
        }
        for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
            self.set(id.0, State::Dispatched(request.id.0));
        }
    }

    fn complete(&mut self, index: usize) {
        let Some(request) = self.device.remove(index) else {
            return;
        };
        self.trace(|| format!("complete {:?}", request.id));
        self.elevator.completed(&request, self.now);
        for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
            self.set(id.0, State::Completed);
        }
    }

    fn requeue(&mut self, index: usize) {
        let Some(request) = self.device.remove(index) else {
            return;
        };
        self.trace(|| format!("requeue {:?}", request.id));
        for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
            self.set(id.0, State::Admitted);
        }
        self.elevator.requeue(request, self.now);
    }

    /// Serves everything left: dispatch while there is room, complete the oldest command
    /// 1 ms later when the policy has nothing to send, and follow its waits. Panics if the
    /// queue does not empty within [`DRAIN_STEPS_MAX`] steps.
    fn drain(&mut self) {
        for _ in 0..DRAIN_STEPS_MAX {
            match self.dispatch() {
                Dispatch::Request(_) => continue,
                Dispatch::WaitUntil(at) if self.device.is_empty() => {
                    self.now = at.max(self.now + 1);
                }
                _ if !self.device.is_empty() => {
                    self.now += 1_000_000;
                    self.complete(0);
                }
                Dispatch::WaitUntil(_) => unreachable!("handled above"),
                Dispatch::Empty => {
                    if self.blocked.is_empty()
                        && self.elevator.queued() == 0
                        && self.elevator.held() == 0
                    {
                        return;
                    }
                    let waiting: Vec<u64> = self
                        .requests
                        .iter()
                        .filter(|(_, r)| r.3 == State::Admitted)
                        .map(|(id, _)| *id)
                        .take(8)
                        .collect();
                    panic!(
                        "{}: stuck: nothing on the device, the policy has nothing to send, \
                         but {} queued, {} held, {} blocked (admitted and not dispatched: \
                         {waiting:?})",
                        self.label,
                        self.elevator.queued(),
                        self.elevator.held(),
                        self.blocked.len()
                    );
                }
            }
        }
        panic!(
            "{}: the queue did not empty in {DRAIN_STEPS_MAX} steps ({} queued, {} held, {} \
             blocked, {} on the device, at {} ns)",
            self.label,
            self.elevator.queued(),
            self.elevator.held(),
            self.blocked.len(),
            self.device.len(),
            self.now
        );
    }
}

/// Random operations against one policy (alone or under a stage): the input chooses the
/// policy, the stage, the queue's size, the device's depth, a few tunables and group
/// settings, then a sequence of insert, dispatch, complete, requeue and timer operations.
/// Every request submitted must be dispatched whole (alone or merged with neighbours in its
/// direction), never twice at once, and completed exactly once, and the queue must empty
/// when the device serves what it is given.
pub fn policy_ops(data: &[u8]) {
    let mut input = Bytes::new(data);
    let stacks = stacks();
    let stack = &stacks[input.below(stacks.len())];
    let nr_requests = u32::from(input.u8() % 64) + 1;
    let depth = usize::from(input.u8() % 32) + 1;
    let mut elevator = policies::Stack::parse(stack)
        .expect("a listed stack")
        .elevator(nr_requests);
    // A few tunables, each set to a value drawn from the input (refusals are fine).
    let tunables: Vec<String> = elevator
        .tunables()
        .iter()
        .map(|(spec, _)| spec.name.to_string())
        .collect();
    for _ in 0..input.below(4) {
        if tunables.is_empty() {
            break;
        }
        let name = &tunables[input.below(tunables.len())];
        let value = match input.below(4) {
            0 => "0".to_string(),
            1 => u32::from(input.u8()).to_string(),
            2 => input.u32().to_string(),
            _ => u64::MAX.to_string(),
        };
        if let Err(error) = elevator.set(name, &value) {
            check_error("tunable", &error.to_string());
        }
    }
    let mut settings = Vec::new();
    for _ in 0..input.below(4) {
        let path = GROUP_PATHS[1 + input.below(GROUP_PATHS.len() - 1)];
        let (file, value) = match input.below(4) {
            0 => ("io.weight", (u32::from(input.u16()) % 10_001).to_string()),
            1 => (
                "io.max",
                format!("rbps={} wiops={}", u32::from(input.u16()) * 512, input.u8()),
            ),
            2 => ("io.max", format!("riops={} wbps=max", input.u8())),
            _ => (
                "io.prio.class",
                ["no-change", "promote-to-rt", "restrict-to-be", "idle"][input.below(4)]
                    .to_string(),
            ),
        };
        settings.push(GroupSetting {
            path: path.to_string(),
            file: file.to_string(),
            value,
            origin: "fuzz".to_string(),
        });
    }
    let mut groups = Groups::new();
    let _ = groups.apply(&settings);
    let group_ids: Vec<GroupId> = GROUP_PATHS
        .iter()
        .map(|path| groups.intern(path).expect("a short path"))
        .collect();
    elevator.set_groups(&groups);
    let mut model = Model {
        elevator,
        now: 0,
        depth,
        requests: BTreeMap::new(),
        blocked: VecDeque::new(),
        device: VecDeque::new(),
        label: format!("{stack} (nr_requests {nr_requests}, depth {depth})"),
        trace: std::env::var_os("IOSCHED_FUZZ_TRACE").is_some(),
    };
    let mut next_id = 0u64;
    for _ in 0..OPS_MAX {
        if input.is_empty() {
            break;
        }
        match input.below(8) {
            0..=2 => {
                let op = match input.below(8) {
                    0..=3 => Op::Read,
                    4..=6 => Op::Write,
                    _ => Op::Flush,
                };
                // Offsets on a small range, so that neighbours meet and merge.
                let offset = u64::from(input.u8() % 64) * 4096 + u64::from(input.u8() % 8) * 512;
                let len = match op {
                    Op::Flush => 0,
                    _ => match input.below(4) {
                        0 => 4096,
                        1 => u64::from(input.u8() % 32 + 1) * 512,
                        2 => 1 << 20,
                        _ => u64::from(input.u16() % 8192 + 1) * 512,
                    },
                };
                let class = [
                    IoPrioClass::None,
                    IoPrioClass::Rt,
                    IoPrioClass::Be,
                    IoPrioClass::Idle,
                ][input.below(4)];
                let prio = IoPrio::new(class, input.u8() % 8).unwrap_or(IoPrio::NONE);
                let flow = FlowId(u32::from(input.u8() % 6));
                let group = group_ids[input.below(group_ids.len())];
                let sync = op == Op::Read || input.u8().is_multiple_of(2);
                let id = RequestId(next_id);
                next_id += 1;
                let request = Request::new(id, op, offset, len, sync, prio, flow, group, model.now);
                model.submit(request);
            }
            3 | 4 => {
                model.dispatch();
            }
            5 => {
                let index = input.below(model.device.len().max(1));
                model.complete(index);
            }
            6 => {
                if input.u8().is_multiple_of(8) {
                    let index = input.below(model.device.len().max(1));
                    model.requeue(index);
                }
            }
            _ => {
                model.now += match input.below(4) {
                    0 => u64::from(input.u8()),
                    1 => u64::from(input.u16()) * 1_000,
                    2 => u64::from(input.u16()) * 1_000_000,
                    _ => u64::from(input.u8()) * 1_000_000_000,
                };
            }
        }
    }
    model.drain();
    let label = &model.label;
    for (id, (_, _, _, state)) in &model.requests {
        assert_eq!(
            *state,
            State::Completed,
            "{label}: request {id} ended {state:?}"
        );
    }
    let stats = model.elevator.stats();
    assert_eq!(model.elevator.in_flight(), 0, "{label}");
    assert_eq!(
        stats.dispatched,
        stats.completed + stats.requeued,
        "{label}: {stats:?}"
    );
}

/// A trace: the first byte picks the format (iolog, blktrace, msr, spc, blkparse, by its value
/// modulo 5), the rest is the trace. Reading it record by record must end or stop at an error
/// that names a line (never panic, never hold more than the names it met), and every record
/// read must convert to every format.
pub fn trace_formats(data: &[u8]) {
    use iosched_fio::trace::{Format, TraceReader, TraceWriter};
    let Some((&pick, trace)) = data.split_first() else {
        return;
    };
    let format = Format::ALL[usize::from(pick) % Format::ALL.len()];
    let mut reader = match TraceReader::from_bytes("fuzz", format, trace.to_vec()) {
        Ok(reader) => reader,
        Err(error) => return check_error("trace header", &error.to_string()),
    };
    let mut writers: Vec<TraceWriter<Vec<u8>>> = Format::ALL
        .iter()
        .map(|&to| TraceWriter::new(to, Vec::new()).expect("memory cannot fail"))
        .collect();
    let mut records = 0usize;
    loop {
        match reader.next_record() {
            Ok(Some(record)) => {
                records += 1;
                assert!(records <= trace.len(), "more records than bytes");
                for writer in &mut writers {
                    writer
                        .write(&record, reader.names())
                        .expect("memory cannot fail");
                }
            }
            Ok(None) => break,
            Err(error) => {
                assert!(error.line.is_some() || !error.message.is_empty());
                check_error("trace", &error.to_string());
                break;
            }
        }
    }
    for writer in &mut writers {
        writer.finish(reader.names()).expect("memory cannot fail");
    }
}

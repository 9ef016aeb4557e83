//! A tiny closed-loop driver for device models: it keeps `depth` commands outstanding, wakes the
//! device at its next event, and resubmits as soon as one completes, the way fio's libaio engine
//! with `iodepth=depth` (or a synchronous job at depth 1) would. It checks the protocol as it
//! goes: every command completes exactly once, completion times never go backwards and never lie
//! in the future.

#![allow(dead_code)]

use iosched_core::{testing::request, Nanos, Op, Request};
use iosched_sim::device::Device;
use std::collections::BTreeMap;

/// SplitMix64: a small seeded generator for offsets.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound`.
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

/// Where the next command goes.
#[derive(Clone, Copy, Debug)]
pub enum Pattern {
    /// Block-aligned offsets uniformly over `[0, span)`.
    Random { span: u64 },
    /// One block after another from `start`, shared by all outstanding commands.
    Sequential { start: u64 },
    /// `depth` independent synchronous sequential readers or writers, stream `s` starting at
    /// `s * spacing`: each resubmits its own next block when its command completes.
    Streams { spacing: u64 },
    /// A mix of operations at random offsets over `[0, span)`: reads, writes, and now and then
    /// a flush or a discard.
    Mixed { span: u64 },
}

/// What to run.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub op: Op,
    pub block: u64,
    pub depth: u32,
    pub pattern: Pattern,
    /// Commands to complete, warm-up included.
    pub count: u64,
    /// Completions at the start left out of the statistics.
    pub warmup: u64,
}

/// What came out.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// (completion time, request id) in completion order, warm-up included.
    pub sequence: Vec<(Nanos, u64)>,
    /// Latencies after warm-up, ns.
    pub latencies: Vec<Nanos>,
    /// Time of the last warm-up completion (or 0).
    pub measured_from: Nanos,
    /// Time of the last completion.
    pub end: Nanos,
    /// Bytes completed after warm-up.
    pub bytes: u64,
}

impl Outcome {
    pub fn iops(&self) -> f64 {
        self.latencies.len() as f64 / ((self.end - self.measured_from) as f64 / 1e9)
    }

    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / ((self.end - self.measured_from) as f64 / 1e9) / 1e6
    }

    pub fn mean_us(&self) -> f64 {
        self.latencies.iter().sum::<u64>() as f64 / self.latencies.len() as f64 / 1e3
    }

    /// The `p`-th percentile latency (0 < p <= 100), ms, nearest rank.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1] as f64 / 1e6
    }
}

/// Runs `workload` on `device` to the end, checking the protocol.
pub fn run(device: &mut dyn Device, workload: Workload, seed: u64) -> Outcome {
    assert!(workload.depth >= 1 && workload.depth <= device.queue_depth());
    let capacity = device.capacity();
    let mut rng = Rng::new(seed);
    let mut next_id = 0u64;
    let mut next_sequential = match workload.pattern {
        Pattern::Sequential { start } => start,
        _ => 0,
    };
    let mut stream_next: Vec<u64> = match workload.pattern {
        Pattern::Streams { spacing } => (0..u64::from(workload.depth))
            .map(|stream| stream * spacing)
            .collect(),
        _ => Vec::new(),
    };
    let mut make = |rng: &mut Rng, next_id: &mut u64, now: Nanos, stream: usize| -> Request {
        let (op, offset, len) = match workload.pattern {
            Pattern::Streams { .. } => {
                let offset = stream_next[stream];
                stream_next[stream] += workload.block;
                assert!(
                    offset + workload.block <= capacity,
                    "stream ran off the end"
                );
                (workload.op, offset, workload.block)
            }
            Pattern::Random { span } => {
                let blocks = span.min(capacity) / workload.block;
                (
                    workload.op,
                    rng.below(blocks) * workload.block,
                    workload.block,
                )
            }
            Pattern::Sequential { .. } => {
                if next_sequential + workload.block > capacity {
                    next_sequential = 0;
                }
                let offset = next_sequential;
                next_sequential += workload.block;
                (workload.op, offset, workload.block)
            }
            Pattern::Mixed { span } => {
                let blocks = span.min(capacity) / workload.block;
                let offset = rng.below(blocks) * workload.block;
                match rng.below(20) {
                    0 => (Op::Flush, 0, 0),
                    1 => (Op::Discard, offset, workload.block),
                    2..=10 => (Op::Write, offset, workload.block),
                    _ => (Op::Read, offset, workload.block),
                }
            }
        };
        let mut request = request(*next_id, op, offset, len);
        request.arrival = now;
        *next_id += 1;
        request
    };

    // Request id -> (submission time, stream).
    let mut outstanding: BTreeMap<u64, (Nanos, usize)> = BTreeMap::new();
    let mut submitted = 0u64;
    let mut outcome = Outcome::default();
    let mut now: Nanos = 0;
    let mut done = Vec::new();
    let mut completed = 0u64;
    let mut free_streams: Vec<usize> = Vec::new();
    while submitted < workload.count && submitted < u64::from(workload.depth) {
        let stream = submitted as usize;
        let request = make(&mut rng, &mut next_id, now, stream);
        outstanding.insert(request.id.0, (now, stream));
        device.submit(request, now);
        submitted += 1;
    }
    while completed < workload.count {
        let at = device
            .next_event()
            .expect("commands outstanding, so an event is pending");
        assert!(at >= now, "next event {at} before now {now}");
        now = at;
        done.clear();
        device.advance(now, &mut done);
        for (finished, request) in done.drain(..) {
            assert!(finished <= now, "completion in the future");
            assert!(
                finished >= outcome.end,
                "completion times went backwards: {finished} after {}",
                outcome.end
            );
            let (issued, stream) = outstanding
                .remove(&request.id.0)
                .expect("every command completes exactly once");
            free_streams.push(stream);
            outcome.end = finished;
            outcome.sequence.push((finished, request.id.0));
            completed += 1;
            if completed <= workload.warmup {
                outcome.measured_from = finished;
            } else {
                outcome.latencies.push(finished - issued);
                outcome.bytes += request.len;
            }
        }
        // Streams whose command completed resubmit, lowest stream first.
        free_streams.sort_unstable_by(|a, b| b.cmp(a));
        while submitted < workload.count && device.in_flight() < workload.depth {
            let stream = free_streams.pop().expect("a stream completed");
            let request = make(&mut rng, &mut next_id, now, stream);
            outstanding.insert(request.id.0, (now, stream));
            device.submit(request, now);
            submitted += 1;
        }
    }
    assert!(outstanding.is_empty());
    assert_eq!(device.in_flight(), 0);
    outcome
}

/// A device from the catalog with `settings`.
pub fn build(model: &str, settings: &[(&str, &str)], seed: u64) -> Box<dyn Device> {
    let settings: Vec<(String, String)> = settings
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    iosched_sim::device::build(model, &settings, seed).expect("device builds")
}

/// A counter's value.
pub fn counter(device: &dyn Device, name: &str) -> f64 {
    device
        .counters()
        .into_iter()
        .find(|(counter, _)| counter == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

/// Runs the fio job text `text` in the simulator on `device` with every other setting at its
/// default; a parse or set-up error as its message.
pub fn simulate_text(text: &str, device: &str) -> Result<iosched_fio::RunReport, String> {
    let file = iosched_fio::parse::parse_str(text, "t.fio", std::path::Path::new("."), &|_| None)
        .map_err(|e| e.to_string())?;
    let config = iosched_sim::SimConfig {
        device: device.into(),
        ..iosched_sim::SimConfig::default()
    };
    iosched_sim::run(&config, &file).map_err(|e| e.to_string())
}

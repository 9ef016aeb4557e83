//! Properties of whole simulations over randomized workloads, seeds and policies.

use iosched_core::{IoPrio, IoPrioClass, Nanos, Op};
use iosched_fio::{Amount, BlockSize, Engine, JobFile, JobSpec, RwMode};
use iosched_sim::{SimConfig, Simulation, TraceEntry};
use proptest::prelude::*;
use std::collections::BTreeSet;

#[derive(Clone, Debug)]
struct JobShape {
    rw: RwMode,
    block_kib: u64,
    iodepth: u32,
    is_async: bool,
    ios: u64,
    thinktime_us: u64,
    file: u8,
    prio: IoPrio,
}

fn job_shape() -> impl Strategy<Value = JobShape> {
    (
        prop_oneof![
            Just(RwMode::Read),
            Just(RwMode::Write),
            Just(RwMode::RandRead),
            Just(RwMode::RandWrite),
            Just(RwMode::ReadWrite),
            Just(RwMode::RandReadWrite),
        ],
        prop_oneof![Just(4u64), Just(8), Just(64)],
        1u32..16,
        any::<bool>(),
        1u64..120,
        prop_oneof![Just(0u64), 1u64..3000],
        0u8..3,
        prop_oneof![
            Just(IoPrioClass::None),
            Just(IoPrioClass::Rt),
            Just(IoPrioClass::Be),
            Just(IoPrioClass::Idle),
        ],
        0u8..8,
    )
        .prop_map(
            |(rw, block_kib, iodepth, is_async, ios, thinktime_us, file, class, level)| JobShape {
                rw,
                block_kib,
                iodepth,
                is_async,
                ios,
                thinktime_us,
                file,
                prio: IoPrio::new(class, level).expect("levels 0..8 are valid"),
            },
        )
}

fn job(index: usize, shape: &JobShape) -> JobSpec {
    let mut job = JobSpec::new(&format!("job{index}"));
    job.rw = shape.rw;
    job.bs = std::array::from_fn(|_| BlockSize::Fixed(shape.block_kib * 1024));
    job.blockalign = [shape.block_kib * 1024; 3];
    job.filenames = vec![format!("file{}", shape.file)];
    // Jobs spread over three cgroups, so grouped policies schedule groups (the others ignore
    // groups).
    job.cgroup = format!("/g{}", index % 3);
    job.size = Some(Amount::Bytes(8 << 20));
    job.io_size = Some(shape.ios * shape.block_kib * 1024);
    job.thinktime = shape.thinktime_us * 1000;
    job.prio = shape.prio;
    job.direct = true;
    if shape.is_async {
        job.engine = Engine::Async {
            name: "libaio".into(),
        };
        job.iodepth = shape.iodepth;
    }
    job
}

fn simulate(jobs: Vec<JobSpec>, config: SimConfig) -> (Vec<TraceEntry>, (u64, u64)) {
    let file = JobFile {
        jobs,
        ..JobFile::default()
    };
    let mut simulation = Simulation::new(&config, &file).expect("valid setup");
    simulation.enable_trace();
    simulation.run().expect("the run finishes");
    (simulation.trace().to_vec(), simulation.request_totals())
}

fn fixed_device(latency_us: u64, parallelism: u32, depth: u32) -> Vec<(String, String)> {
    vec![
        ("latency_us".into(), latency_us.to_string()),
        ("parallelism".into(), parallelism.to_string()),
        ("queue_depth".into(), depth.to_string()),
    ]
}

/// Every id issued completes exactly once: ids 0..issued, each once.
fn assert_exactly_once(trace: &[TraceEntry], totals: (u64, u64)) -> Result<(), TestCaseError> {
    prop_assert_eq!(totals.0, totals.1);
    prop_assert_eq!(trace.len() as u64, totals.0);
    let ids: BTreeSet<u64> = trace.iter().map(|t| t.id.0).collect();
    prop_assert_eq!(ids.len(), trace.len(), "an id completed twice");
    prop_assert_eq!(
        ids.iter().next_back().map(|&m| m + 1).unwrap_or(0),
        totals.0,
        "ids are 0..issued"
    );
    for entry in trace {
        prop_assert!(entry.admitted <= entry.dispatched && entry.dispatched <= entry.completed);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    // Proves that under every policy, with merging, queue limits and any device depth, every
    // request issued completes exactly once and none is lost or duplicated.
    #[test]
    fn every_request_completes_exactly_once(
        shapes in proptest::collection::vec(job_shape(), 1..5),
        seed in any::<u64>(),
        policy in prop_oneof![Just("noop"), Just("deadline"), Just("anticipatory"), Just("cfq"), Just("grouped-deadline"), Just("grouped-cfq"), Just("bfq"), Just("latency"), Just("pclock"), Just("htbs"), Just("mclock")],
        latency_us in 50u64..5000,
        parallelism in 1u32..4,
        depth in 1u32..32,
        nr_requests in 4u32..64,
    ) {
        let jobs = shapes.iter().enumerate().map(|(i, s)| job(i, s)).collect();
        let config = SimConfig {
            seed,
            policy: policy.into(),
            policy_settings: vec![("nr_requests".into(), nr_requests.to_string())],
            device: "fixed".into(),
            device_settings: fixed_device(latency_us, parallelism, depth),
            ..SimConfig::default()
        };
        let (trace, totals) = simulate(jobs, config);
        assert_exactly_once(&trace, totals)?;
    }

    // Proves noop's promise: requests reach the device in arrival order; merging only folds a
    // request into an older one, never reorders survivors.
    #[test]
    fn noop_keeps_arrival_order(
        shapes in proptest::collection::vec(job_shape(), 1..5),
        seed in any::<u64>(),
        depth in 1u32..8,
    ) {
        let jobs = shapes.iter().enumerate().map(|(i, s)| job(i, s)).collect();
        let config = SimConfig {
            seed,
            policy: "noop".into(),
            device: "fixed".into(),
            device_settings: fixed_device(300, 1, depth),
            ..SimConfig::default()
        };
        let (mut trace, totals) = simulate(jobs, config);
        assert_exactly_once(&trace, totals)?;
        trace.sort_by_key(|t| (t.dispatch_order, t.id));
        let mut last_carrier = None;
        for entry in &trace {
            prop_assert!(entry.id >= entry.carrier, "#{} was folded into a younger request", entry.id.0);
            if entry.id == entry.carrier {
                prop_assert!(last_carrier < Some(entry.carrier), "carrier #{} dispatched out of order", entry.carrier.0);
                last_carrier = Some(entry.carrier);
            }
        }
    }

    // Proves deadline's read promise. With R synchronous readers (one read each in flight) among
    // writers, a read waits in the scheduler at most read_expire plus (2R + 1) batches of
    // fifo_batch dispatches: once expired it is at most R-th in the read FIFO, each read batch
    // starts at the FIFO head, and writes_starved >= 1 lets at most one write batch in between.
    // With a single reader it is dispatched within one batch (plus the write batch that may be
    // due), whatever read_expire is.
    #[test]
    fn deadline_bounds_read_waits(
        readers in 1usize..4,
        writers in proptest::collection::vec((1u32..16, any::<bool>()), 0..4),
        seed in any::<u64>(),
        read_expire_ms in 1u64..50,
        fifo_batch in 1u64..17,
        writes_starved in 1u64..4,
        latency_us in 200u64..3000,
        parallelism in 1u32..4,
        depth in 1u32..32,
    ) {
        let mut jobs = Vec::new();
        for r in 0..readers {
            jobs.push(job(jobs.len(), &JobShape { rw: RwMode::RandRead, block_kib: 4, iodepth: 1, is_async: false, ios: 60, thinktime_us: 0, file: r as u8, prio: IoPrio::NONE }));
        }
        for &(iodepth, sequential) in &writers {
            let rw = if sequential { RwMode::Write } else { RwMode::RandWrite };
            jobs.push(job(jobs.len(), &JobShape { rw, block_kib: 4, iodepth, is_async: true, ios: 200, thinktime_us: 0, file: 3, prio: IoPrio::NONE }));
        }
        let config = SimConfig {
            seed,
            policy: "deadline".into(),
            policy_settings: vec![
                ("read_expire".into(), read_expire_ms.to_string()),
                ("fifo_batch".into(), fifo_batch.to_string()),
                ("writes_starved".into(), writes_starved.to_string()),
            ],
            device: "fixed".into(),
            device_settings: fixed_device(latency_us, parallelism, depth),
            ..SimConfig::default()
        };
        let (trace, totals) = simulate(jobs, config);
        assert_exactly_once(&trace, totals)?;
        let latency: Nanos = latency_us * 1000;
        let servers = u64::from(parallelism.min(depth));
        let slots = |dispatches: u64| (dispatches.div_ceil(servers) + 1) * latency;
        let batches = if readers == 1 { 2 } else { 2 * readers as u64 + 1 };
        let expire = if readers == 1 { 0 } else { read_expire_ms * 1_000_000 };
        let bound = expire + slots(batches * fifo_batch);
        for entry in trace.iter().filter(|t| t.op == Op::Read) {
            let wait = entry.dispatched - entry.admitted;
            prop_assert!(wait <= bound, "read #{} waited {} ns, bound {} ns", entry.id.0, wait, bound);
        }
    }

    // Proves that priorities never starve a level for good. High-priority (BE 0) readers keep
    // the disk busy for the whole run while an IDLE-class writer waits; anticipatory serves
    // the idle level one batch (at least one request) whenever it has waited
    // prio_aging_expire, so each write completes within (its queue position + 2) aging periods,
    // each stretched by the high-priority requests in flight and one batch, plus write_expire
    // (after which it is first in its level's FIFO). deadline's prio_aging_expire gives the
    // same kind of bound.
    #[test]
    fn priorities_do_not_starve_lower_levels(
        readers in proptest::collection::vec(1u32..9, 1..4),
        low_depth in 1u32..5,
        seed in any::<u64>(),
        policy in prop_oneof![Just("anticipatory"), Just("deadline")],
        aging_ms in 20u64..200,
        latency_us in 200u64..2000,
        depth in 1u32..8,
    ) {
        let high = IoPrio::new(IoPrioClass::Be, 0).unwrap();
        let low = IoPrio::new(IoPrioClass::Idle, 0).unwrap();
        let mut jobs = Vec::new();
        for &iodepth in &readers {
            let mut reader = job(jobs.len(), &JobShape { rw: RwMode::RandRead, block_kib: 4, iodepth, is_async: true, ios: 1, thinktime_us: 0, file: 0, prio: IoPrio::NONE });
            reader.io_size = None;
            reader.runtime = Some(2_000_000_000);
            reader.time_based = true;
            reader.prio = high;
            jobs.push(reader);
        }
        let mut writer = job(jobs.len(), &JobShape { rw: RwMode::RandWrite, block_kib: 4, iodepth: low_depth, is_async: true, ios: 1, thinktime_us: 0, file: 1, prio: IoPrio::NONE });
        writer.io_size = None;
        writer.runtime = Some(2_000_000_000);
        writer.time_based = true;
        writer.prio = low;
        jobs.push(writer);
        let config = SimConfig {
            seed,
            policy: policy.into(),
            policy_settings: vec![("prio_aging_expire".into(), aging_ms.to_string())],
            device: "fixed".into(),
            device_settings: fixed_device(latency_us, 1, depth),
            ..SimConfig::default()
        };
        let (trace, totals) = simulate(jobs, config);
        assert_exactly_once(&trace, totals)?;
        let latency: Nanos = latency_us * 1000;
        let high_in_flight: u64 = readers.iter().map(|&d| u64::from(d)).sum::<u64>().min(u64::from(depth));
        // One aging period, the high-priority requests ahead in the device, and a batch of
        // at most level_tokens (4) requests plus the drain before it.
        let period = aging_ms * 1_000_000 + (high_in_flight + 4 + u64::from(depth) + 2) * latency;
        let bound = (u64::from(low_depth) + 2) * period + 250_000_000;
        let writes: Vec<&TraceEntry> = trace.iter().filter(|t| t.op == Op::Write).collect();
        prop_assert!(!writes.is_empty(), "the low-priority writer issued nothing");
        let served_during_load = writes.iter().filter(|t| t.completed < 2_000_000_000).count();
        prop_assert!(served_during_load > 0, "no low-priority write was served while the readers ran");
        for entry in writes {
            let wait = entry.completed - entry.admitted;
            prop_assert!(wait <= bound, "write #{} waited {} ns, bound {} ns", entry.id.0, wait, bound);
        }
    }
}

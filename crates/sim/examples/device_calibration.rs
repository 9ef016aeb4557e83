//! Prints the calibration figures of the device models and how fast the HDD model runs.
//!
//! `cargo run --release -p iosched-sim --example device_calibration [hdd settings NAME=VALUE ...]`

#[path = "../tests/common/mod.rs"]
mod common;

use common::{build, counter, run, Pattern, Workload};
use iosched_core::Op;
use std::time::Instant;

const GIB: u64 = 1 << 30;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let settings: Vec<(&str, &str)> = args
        .iter()
        .map(|arg| arg.split_once('=').expect("NAME=VALUE"))
        .collect();
    let seed = 7;
    let full = build("hdd", &settings, seed).capacity();
    println!("seed {seed}; hdd settings {settings:?}");

    println!("\n4 KiB random reads over the full span:");
    for depth in [1u32, 4, 8, 16, 32] {
        let mut with_depth = settings.clone();
        let depth_text = depth.to_string();
        with_depth.push(("queue_depth", &depth_text));
        let mut device = build("hdd", &with_depth, seed);
        let count = if depth == 1 { 20_000 } else { 100_000 };
        let started = Instant::now();
        let outcome = run(
            device.as_mut(),
            Workload {
                op: Op::Read,
                block: 4096,
                depth,
                pattern: Pattern::Random { span: full },
                count,
                warmup: 200,
            },
            seed,
        );
        let wall = started.elapsed().as_secs_f64();
        println!(
            "  QD{depth:>2}: {:7.1} IOPS, mean {:7.2} ms, p99 {:7.1} ms, p99.9 {:7.1} ms, \
             p99.99 {:7.1} ms, max {:7.1} ms, deadline picks {}, {:.2} M commands/wall s",
            outcome.iops(),
            outcome.mean_us() / 1e3,
            outcome.percentile_ms(99.0),
            outcome.percentile_ms(99.9),
            outcome.percentile_ms(99.99),
            outcome.percentile_ms(100.0),
            counter(device.as_ref(), "ncq_deadline_picks"),
            count as f64 / wall / 1e6
        );
    }

    let mut device = build("hdd", &settings, seed);
    let started = Instant::now();
    let outcome = run(
        device.as_mut(),
        Workload {
            op: Op::Read,
            block: 4096,
            depth: 1,
            pattern: Pattern::Sequential { start: 0 },
            count: 200_000,
            warmup: 100,
        },
        seed,
    );
    println!(
        "\nsynchronous 4 KiB sequential reader: {:.1} MB/s ({:.2} M commands/wall s); hits {}, \
         waits {}, misses {}",
        outcome.mb_per_s(),
        200_000.0 / started.elapsed().as_secs_f64() / 1e6,
        counter(device.as_ref(), "read_hits"),
        counter(device.as_ref(), "read_ahead_waits"),
        counter(device.as_ref(), "read_misses"),
    );

    let mut device = build("hdd", &settings, seed);
    let outcome = run(
        device.as_mut(),
        Workload {
            op: Op::Read,
            block: 1 << 20,
            depth: 1,
            pattern: Pattern::Sequential { start: 0 },
            count: 300,
            warmup: 5,
        },
        seed,
    );
    println!(
        "1 MiB sequential reads at QD1 from LBA 0: {:.1} MB/s",
        outcome.mb_per_s()
    );

    for cache in ["on", "off"] {
        let mut with_cache = settings.clone();
        with_cache.push(("write_cache", cache));
        for (span, label) in [(full, "full span"), (2 * GIB, "2 GiB")] {
            let mut device = build("hdd", &with_cache, seed);
            let outcome = run(
                device.as_mut(),
                Workload {
                    op: Op::Write,
                    block: 4096,
                    depth: 1,
                    pattern: Pattern::Random { span },
                    count: 6000,
                    warmup: 0,
                },
                seed,
            );
            println!(
                "random 4 KiB writes, QD1, {label}, write cache {cache}: {:.1} IOPS, mean {:.3} ms, \
                 destages {}",
                outcome.iops(),
                outcome.mean_us() / 1e3,
                counter(device.as_ref(), "destages")
            );
        }
    }

    let mut device = build("hdd", &settings, seed);
    let outcome = run(
        device.as_mut(),
        Workload {
            op: Op::Read,
            block: 4096,
            depth: 1,
            pattern: Pattern::Random { span: 2 * GIB },
            count: 5000,
            warmup: 100,
        },
        seed,
    );
    println!(
        "random 4 KiB reads in the first 2 GiB, QD1: {:.1} IOPS ({:.0} KiB/s; seed 003: 484 KiB/s)",
        outcome.iops(),
        outcome.iops() * 4.0
    );

    if iosched_sim::device::catalog()
        .iter()
        .all(|m| m.name != "ssd")
    {
        return;
    }
    println!("\nssd, 4 KiB random reads:");
    for depth in [1u32, 2, 4, 8, 16, 32, 64, 128] {
        let depth_text = depth.to_string();
        let mut device = build("ssd", &[("queue_depth", &depth_text)], seed);
        let capacity = device.capacity();
        let outcome = run(
            device.as_mut(),
            Workload {
                op: Op::Read,
                block: 4096,
                depth,
                pattern: Pattern::Random { span: capacity },
                count: 50_000,
                warmup: 500,
            },
            seed,
        );
        println!(
            "  QD{depth:>3}: {:9.0} IOPS, mean {:7.1} us, p99 {:.3} ms",
            outcome.iops(),
            outcome.mean_us(),
            outcome.percentile_ms(99.0)
        );
    }
}

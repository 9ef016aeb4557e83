//! An application that schedules its own I/O with iosched's policies.
//!
//! Three threads share one file: an interactive reader (best effort, level 0), a batch reader
//! (best effort, level 7) and a background writer (idle class). Each submits through its own
//! `Client` with its own flow and group; the deadline policy orders their requests, and the
//! completions come back on the threads that asked.
//!
//! Run it with `cargo run --release -p iosched-uring --example scheduled_app [POLICY]`; it
//! works on a temporary 64 MiB file, which it removes.

use iosched_core::{IoPrio, IoPrioClass};
use iosched_uring::{IoRequest, Scheduler, SchedulerConfig};
use std::sync::mpsc;
use std::time::Duration;

const FILE_SIZE: u64 = 64 << 20;
const BLOCK: u64 = 4096;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = std::env::args().nth(1).unwrap_or_else(|| "deadline".into());
    let path = std::env::temp_dir().join(format!("iosched-app-{}", std::process::id()));
    std::fs::write(&path, vec![0x5a; FILE_SIZE as usize])?;

    let scheduler = Scheduler::open(
        &path,
        SchedulerConfig {
            policy: policy.clone(),
            device_depth: 8,
            ..SchedulerConfig::default()
        },
    )?;

    let workers = [
        (
            "interactive",
            1,
            "/app/ui",
            IoPrio::new(IoPrioClass::Be, 0)?,
            false,
        ),
        (
            "batch",
            2,
            "/app/batch",
            IoPrio::new(IoPrioClass::Be, 7)?,
            false,
        ),
        (
            "background",
            3,
            "/app/backup",
            IoPrio::new(IoPrioClass::Idle, 0)?,
            true,
        ),
    ];
    let mut threads = Vec::new();
    for (name, flow, group, prio, writes) in workers {
        let client = scheduler.client();
        threads.push(std::thread::spawn(move || {
            // Each worker keeps 4 requests in flight, collecting completions on one channel.
            let (done_tx, done_rx) = mpsc::channel();
            let mut in_flight = 0;
            let mut total = Duration::ZERO;
            let mut seed = flow as u64 * 0x9e37_79b9_7f4a_7c15;
            for i in 0..2000u64 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let offset = (seed >> 33) % (FILE_SIZE / BLOCK) * BLOCK;
                let request = if writes {
                    IoRequest::write(offset, &[i as u8; BLOCK as usize])
                } else {
                    IoRequest::read(offset, BLOCK)
                };
                client
                    .submit_to(request.flow(flow).group(group).prio(prio), &done_tx)
                    .expect("the scheduler is running");
                in_flight += 1;
                if in_flight == 4 {
                    let completion = done_rx.recv().expect("a completion");
                    completion.result.expect("the I/O succeeded");
                    total += completion.latency;
                    in_flight -= 1;
                }
            }
            for completion in done_rx.iter().take(in_flight) {
                completion.result.expect("the I/O succeeded");
                total += completion.latency;
            }
            (name, prio, total / 2000)
        }));
    }
    for thread in threads {
        let (name, prio, mean) = thread.join().expect("worker finished");
        let prio = prio.to_string();
        println!(
            "{name:12} {prio:14} mean latency {:>8.1} us",
            mean.as_secs_f64() * 1e6
        );
    }

    let stats = scheduler.shutdown()?;
    println!(
        "policy {policy}: {} requests completed, {} errors, {} merged, reads {:.1} us mean, \
         writes {:.1} us mean",
        stats.completed,
        stats.errors,
        stats.elevator.merged,
        stats.read_latency.mean() / 1e3,
        stats.write_latency.mean() / 1e3
    );
    std::fs::remove_file(&path)?;
    Ok(())
}

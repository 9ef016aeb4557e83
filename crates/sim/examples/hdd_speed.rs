//! How many commands per wall second the `hdd` model serves alone: `depth` synchronous 4 KiB
//! random readers over the whole disk (the simulator's benchmark shape), driven by a minimal
//! closed loop.
//!
//! `cargo run --release -p iosched-sim --example hdd_speed [depth] [commands]`

use iosched_core::{testing::request, Op};
use iosched_sim::device::{build, Device};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let depth: u32 = args.next().map_or(4, |a| a.parse().expect("depth"));
    let commands: u64 = args
        .next()
        .map_or(2_000_000, |a| a.parse().expect("commands"));
    let settings = vec![("queue_depth".to_string(), depth.to_string())];
    let mut device: Box<dyn Device> = build("hdd", &settings, 1).expect("hdd builds");
    let blocks = device.capacity() / 4096;
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next_offset = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % blocks) * 4096
    };
    let started = Instant::now();
    let mut now = 0;
    let mut done = Vec::with_capacity(64);
    let mut id = 0;
    for _ in 0..depth {
        device.submit(request(id, Op::Read, next_offset(), 4096), 0);
        id += 1;
    }
    let mut completed = 0u64;
    while completed < commands {
        now = device.next_event().expect("pending");
        device.advance(now, &mut done);
        for _ in done.drain(..) {
            completed += 1;
            device.submit(request(id, Op::Read, next_offset(), 4096), now);
            id += 1;
        }
    }
    let wall = started.elapsed().as_secs_f64();
    println!(
        "hdd, {depth} sync 4 KiB random readers: {completed} commands in {wall:.2} s wall = {:.2} M \
         commands per wall second ({:.0} simulated s, {:.1} IOPS)",
        completed as f64 / wall / 1e6,
        now as f64 / 1e9,
        completed as f64 / (now as f64 / 1e9)
    );
}

//! Quick speed probe of the engine alone: simulated requests per wall second.
use iosched_fio::{Amount, JobFile, JobSpec, RwMode};
use iosched_sim::{run, SimConfig};
use std::time::Instant;

fn main() {
    let device = std::env::args().nth(1).unwrap_or_else(|| "fixed".into());
    let policy = std::env::args().nth(2).unwrap_or_else(|| "deadline".into());
    let jobs = (0..4)
        .map(|i| {
            let mut job = JobSpec::new(&format!("r{i}"));
            job.rw = RwMode::RandRead;
            job.filenames = vec!["/dev/sda".into()];
            job.direct = true;
            job.size = Some(Amount::Percent(100.0));
            job.io_size = Some(500_000 * 4096);
            job
        })
        .collect();
    let file = JobFile { jobs, notes: vec![] };
    let config = SimConfig { device, policy, ..SimConfig::default() };
    let start = Instant::now();
    let report = run(&config, &file).unwrap();
    let wall = start.elapsed().as_secs_f64();
    let n: u64 = report.jobs.iter().map(|j| j.dirs[0].total_ios).sum();
    println!("{n} requests in {wall:.3} s: {:.0}/s", n as f64 / wall);
}

//! Buffered reads through the page cache and Linux's on-demand read-ahead.

mod report;

use iosched_fio::{DataDir, RunReport};
use iosched_sim::SimConfig;
use report::{counter, owned};

fn simulate(jobs: &str, settings: &[(&str, &str)]) -> RunReport {
    report::simulate(
        jobs,
        SimConfig {
            policy: "deadline".into(),
            device: "hdd".into(),
            policy_settings: owned(settings),
            ..SimConfig::default()
        },
    )
}

fn bandwidth(report: &RunReport) -> f64 {
    let job = &report.jobs[0];
    job.dir(DataDir::Read).io_bytes as f64 / (job.runtime as f64 / 1e9)
}

const SEQUENTIAL: &str = "[global]\nrw=read\nsize=2g\ntime_based=1\nruntime=10\n";

// Proves read-ahead (issue 15's claim): a sequential buffered reader of 4 KiB requests gets at
// least 90% of a direct reader of 128 KiB requests on the disk model, because its reads are
// served from windows read ahead in large requests, and most find their pages already there.
#[test]
fn read_ahead_makes_small_sequential_reads_large() {
    let buffered = simulate(&format!("{SEQUENTIAL}[r]\nbs=4k\n"), &[]);
    let direct = simulate(&format!("{SEQUENTIAL}[r]\nbs=128k\ndirect=1\n"), &[]);
    let ratio = bandwidth(&buffered) / bandwidth(&direct);
    assert!(ratio >= 0.9, "buffered 4 KiB / direct 128 KiB = {ratio:.2}");
    let reads = buffered.jobs[0].dir(DataDir::Read).total_ios as f64;
    let device_reads = counter(&buffered, "reads");
    assert!(
        device_reads * 16.0 < reads,
        "{device_reads} device reads for {reads}"
    );
    assert!(counter(&buffered, "read_ahead_bytes") > 0.0);
    // Without read-ahead every 4 KiB read is a device read of one page.
    let none = simulate(
        &format!("{SEQUENTIAL}[r]\nbs=4k\n"),
        &[("read_ahead_kb", "0")],
    );
    assert_eq!(counter(&none, "read_ahead_bytes"), 0.0);
    assert!(bandwidth(&none) < 0.5 * bandwidth(&buffered));
}

// Proves fadvise RANDOM (fio's default for random jobs): no read-ahead, one page per miss;
// that a file read twice is served from the cache the second time with invalidate=0, and
// that with fio's default invalidate=1 the second loop reads it again (fio reopens a job's
// files at each loop, dropping their cache).
#[test]
fn random_reads_read_only_their_pages_and_hit_the_second_time() {
    let reopened = simulate("[r]\nrw=randread\nbs=4k\nsize=16m\nloops=2\n", &[]);
    assert_eq!(
        counter(&reopened, "reads"),
        8192.0,
        "each page once per loop"
    );
    assert_eq!(counter(&reopened, "page_cache_hits"), 0.0);
    let text = "[r]\nrw=randread\nbs=4k\nsize=16m\nloops=2\ninvalidate=0\n";
    let report = simulate(text, &[]);
    assert_eq!(counter(&report, "read_ahead_bytes"), 0.0);
    assert_eq!(counter(&report, "reads"), 4096.0, "each page once");
    assert_eq!(
        counter(&report, "page_cache_hits"),
        4096.0,
        "the second loop"
    );
    assert_eq!(report.jobs[0].dir(DataDir::Read).total_ios, 8192);
}

// Proves pre_read (the file is cached before the job, which then reads nothing from the
// device), and that a cache smaller than the file evicts and misses again (mem in MiB).
#[test]
fn pre_read_and_a_small_memory() {
    let text = "[r]\nrw=randread\nbs=4k\nsize=16m\npre_read=1\n";
    let report = simulate(text, &[]);
    assert_eq!(counter(&report, "reads"), 0.0);
    assert_eq!(counter(&report, "page_cache_hits"), 4096.0);
    let text = "[r]\nrw=randread\nbs=4k\nsize=16m\nloops=2\ninvalidate=0\n";
    let report = simulate(text, &[("mem", "8")]);
    assert!(counter(&report, "page_cache_evicted") > 0.0);
    assert!(
        counter(&report, "reads") > 4096.0 + 1000.0,
        "misses again on the second loop"
    );
}

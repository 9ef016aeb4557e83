//! The mechanisms behind seed 003's random-reader table: ext3's indirect-block reads
//! (`indirect_blocks`), the settle of short seeks (`seek_settle_ms`) and a drive that orders
//! its queue by seek (`ncq_order=sstf`). Each test fails if its rule is removed.

mod report;

use iosched_fio::{DataDir, RunReport};
use iosched_sim::SimConfig;
use report::owned;

fn simulate(jobs: &str, policy: &[(&str, &str)], device: &[(&str, &str)]) -> RunReport {
    report::simulate(
        jobs,
        SimConfig {
            policy: "noop".into(),
            device: "hdd".into(),
            policy_settings: owned(policy),
            device_settings: owned(device),
            ..SimConfig::default()
        },
    )
}

fn read_iops(report: &RunReport) -> f64 {
    report
        .jobs
        .iter()
        .map(|job| job.dir(DataDir::Read).total_ios as f64 / (job.runtime as f64 / 1e9))
        .sum()
}

// Proves ext3's block map (fs/ext3/inode.c, ext3_get_branch): a direct sequential read of a
// 16 MiB file reads, besides its 4096 blocks, the indirect block of blocks 12-1035, the
// double-indirect block and the three indirect blocks below it that map blocks 1036-4095,
// each once (the buffer cache keeps them); a device node and extent-mapped files read none.
#[test]
fn a_block_mapped_file_reads_each_indirect_block_once() {
    let job = "[r]\nfilename=data\nrw=read\nbs=4k\nsize=16m\ndirect=1\n";
    let mapped = simulate(job, &[("indirect_blocks", "1")], &[]);
    assert_eq!(mapped.jobs[0].dir(DataDir::Read).total_ios, 4096);
    assert_eq!(mapped.disk.read_ios, 4096 + 1 + 1 + 3);
    let extents = simulate(job, &[], &[]);
    assert_eq!(extents.disk.read_ios, 4096);
    let device = simulate(
        "[r]\nfilename=/dev/sdb\nrw=read\nbs=4k\nsize=16m\ndirect=1\n",
        &[("indirect_blocks", "1")],
        &[],
    );
    assert_eq!(device.disk.read_ios, 4096);
}

// Proves the indirect read comes before the data and in the reader's time: random reads over
// a 2 GB file, cold, are slower with the block map (about one read in seven needs its
// indirect block in the first 10 s at QD1), and the page cache's own reads need them too.
#[test]
fn cold_random_reads_pay_for_their_indirect_blocks() {
    let job = "[r]\nfilename=data\nrw=randread\nbs=4k\nsize=2g\ndirect=1\nruntime=10\n\
               time_based=1\n";
    let mapped = simulate(job, &[("indirect_blocks", "1")], &[]);
    let plain = simulate(job, &[], &[]);
    let extra = mapped.disk.read_ios - mapped.jobs[0].dir(DataDir::Read).total_ios;
    assert!((300..=513).contains(&extra), "{extra} indirect reads");
    assert!(
        read_iops(&mapped) < 0.95 * read_iops(&plain),
        "{:.0} vs {:.0} IOPS",
        read_iops(&mapped),
        read_iops(&plain)
    );
    let buffered = simulate(
        "[r]\nfilename=data\nrw=randread\nbs=4k\nsize=2g\nruntime=5\ntime_based=1\n",
        &[("indirect_blocks", "1")],
        &[],
    );
    let reads = buffered.jobs[0].dir(DataDir::Read).total_ios;
    assert!(
        buffered.disk.read_ios > reads + 50,
        "{} for {reads}",
        buffered.disk.read_ios
    );
}

// Proves the settle: 4 KiB random reads within a 2 GB file (about 300 cylinders of 106,000)
// take the settle on every seek, so they are clearly slower than DiskSim's curve through the
// single-track time makes them; over the whole disk, where the curve keeps its average, the
// difference is small.
#[test]
fn the_settle_slows_short_seeks_not_the_average() {
    let short = "[r]\nfilename=data\nrw=randread\nbs=4k\nsize=2g\ndirect=1\nruntime=10\n\
                 time_based=1\n";
    let full = "[r]\nfilename=/dev/sda\nrw=randread\nbs=4k\ndirect=1\nruntime=10\n\
                time_based=1\n";
    let settled = read_iops(&simulate(short, &[], &[]));
    let diskim = read_iops(&simulate(short, &[], &[("seek_settle_ms", "1.0")]));
    assert!(settled < 0.9 * diskim, "{settled:.0} vs {diskim:.0} IOPS");
    let settled = read_iops(&simulate(full, &[], &[]));
    let diskim = read_iops(&simulate(full, &[], &[("seek_settle_ms", "1.0")]));
    assert!(
        (settled / diskim - 1.0).abs() < 0.05,
        "{settled:.0} vs {diskim:.0} IOPS"
    );
}

// Proves the seek-ordered queue: eight random readers of 2 GB files each gain from the drive's
// queue when it orders by positioning time (rotation included) and not when it orders by seek
// alone, which also starves the readers at the edges of the span longer.
#[test]
fn a_seek_ordered_queue_gains_little_from_depth() {
    let job = "[r]\nrw=randread\nbs=4k\nsize=2g\ndirect=1\nnumjobs=8\nruntime=10\n\
               time_based=1\n";
    let one = read_iops(&simulate(
        "[r]\nrw=randread\nbs=4k\nsize=2g\ndirect=1\nruntime=10\ntime_based=1\n",
        &[],
        &[],
    ));
    let sptf = simulate(job, &[], &[]);
    let sstf = simulate(job, &[], &[("ncq_order", "sstf")]);
    assert!(
        read_iops(&sptf) > 1.3 * one,
        "{:.0} vs {one:.0}",
        read_iops(&sptf)
    );
    assert!(
        read_iops(&sstf) < 1.15 * one,
        "{:.0} vs {one:.0}",
        read_iops(&sstf)
    );
    let worst = |report: &RunReport| {
        report
            .jobs
            .iter()
            .map(|job| job.dir(DataDir::Read).clat.max())
            .max()
            .unwrap()
    };
    let (sstf_worst, sptf_worst) = (worst(&sstf), worst(&sptf));
    assert!(
        sstf_worst as f64 > 1.25 * sptf_worst as f64,
        "longest wait {sstf_worst} ns (sstf) vs {sptf_worst} ns (sptf)"
    );
}

// Proves the setting is refused with the reason when it is not one of the two orders.
#[test]
fn an_unknown_order_is_refused() {
    let file = iosched_fio::parse::parse_str(
        "[r]\nrw=randread\nsize=1m\n",
        "t.fio",
        std::path::Path::new("."),
        &|_| None,
    )
    .unwrap();
    let config = SimConfig {
        device: "hdd".into(),
        device_settings: owned(&[("ncq_order", "elevator")]),
        ..SimConfig::default()
    };
    let error = iosched_sim::run(&config, &file).unwrap_err().to_string();
    assert!(
        error.contains("ncq_order") && error.contains("sstf"),
        "{error}"
    );
}

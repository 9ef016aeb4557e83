//! fio "normal" text output from hand-built reports: the whole layout for a simple job, unit
//! scaling, per-priority lines, group reporting.

mod common;

use common::*;
use iosched_fio::output::normal;
use iosched_fio::DataDir;

// Proves the complete text for one job, every value worked out by hand from fio 3.33's rules
// (percentiles are the middles of fio's bins, capped at the largest sample).
#[test]
fn one_job_prints_as_fio_does() {
    let report = report(vec![exact_reader()], 2 * SECOND);
    let expected = format!(
        "\
iosched-{version}: engine=sim, seed=42, policy=mq-deadline, device=hdd-7200

reader: (groupid=0, jobs=1): err= 0: pid=0: Thu Jan  1 00:00:00 1970
  read: IOPS=500, BW=2000KiB/s (2048kB/s)(4000KiB/2000msec)
    slat (nsec): min=100, max=100, avg=100.00, stdev= 0.00
    clat (nsec): min=1, max=1000, avg=500.50, stdev=288.82
     lat (nsec): min=101, max=1100, avg=600.50, stdev=288.82
    clat percentiles (nsec):
     |  1.00th=[   10],  5.00th=[   50], 10.00th=[  100], 20.00th=[  201],
     | 30.00th=[  302], 40.00th=[  402], 50.00th=[  502], 60.00th=[  604],
     | 70.00th=[  700], 80.00th=[  804], 90.00th=[  900], 95.00th=[  948],
     | 99.00th=[  988], 99.50th=[  996], 99.90th=[ 1000], 99.95th=[ 1000],
     | 99.99th=[ 1000]
   bw (  KiB/s): min= 2000, max= 2000, per=100.00%, avg=2000.00, stdev= 0.00, samples=4
   iops        : min=  500, max=  500, avg=500.00, stdev= 0.00, samples=4
  lat (nsec)   : 2=0.10%, 4=0.20%, 10=0.60%, 20=1.00%, 50=3.00%
  lat (nsec)   : 100=5.00%, 250=15.00%, 500=25.00%, 750=25.00%, 1000=25.00%
  lat (usec)   : 2=0.10%
  cpu          : usr=0.00%, sys=0.00%, ctx=0, majf=0, minf=0
  IO depths    : 1=100.0%, 2=0.0%, 4=0.0%, 8=0.0%, 16=0.0%, 32=0.0%, >=64=0.0%
     submit    : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%
     complete  : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%
     issued rwts: total=1000,0,0,0 short=0,0,0,0 dropped=0,0,0,0
     latency   : target=0, window=0, percentile=100.00%, depth=4

Run status group 0 (all jobs):
   READ: bw=2000KiB/s (2048kB/s), 2000KiB/s-2000KiB/s (2048kB/s-2048kB/s), io=4000KiB (4096kB), run=2000-2000msec

Disk stats (read/write):
  sim0: ios=1000/10, merge=2/1, ticks=1500/20, in_queue=1520, util=75.50%

iosched:
  policy       : mq-deadline: read_expire=500ms
  device       : hdd-7200: rpm=7200
  counters     : seeks=990
  duration     : 2000.000msec
  note         : job.fio:3: note: thread: has no effect in simulation
",
        version = env!("CARGO_PKG_VERSION")
    );
    let actual = normal(&report);
    for (i, (a, e)) in actual.lines().zip(expected.lines()).enumerate() {
        assert_eq!(a, e, "line {}", i + 1);
    }
    assert_eq!(actual, expected);
}

fn line<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting with {start:?} in:\n{text}"))
}

// Proves fio's unit choices: usec and msec latency lines, MiB/s bandwidth, k-scaled IOPS,
// percentile values rounded up into the chosen unit, and the write line's zone status.
#[test]
fn units_scale_as_fio_does() {
    let mut job = job("writer", 0, SECOND);
    // 20_000 writes of 64 KiB in 1 s; clat 150..=249 us then 260..=359 us, slat 3..=5 us.
    for i in 0..20_000u64 {
        let clat = if i < 10_000 { 150_000 } else { 260_000 } + (i % 100) * 1000;
        io(
            &mut job,
            DataDir::Write,
            65536,
            Some(3_000 + i % 2_001),
            clat,
            i * 50_000,
        );
    }
    let text = normal(&report(vec![job], SECOND));
    // 20_000 IOPS; 1_310_720_000 B/s is 1250 MiB/s (1311 MB/s); 1.22 GiB moved.
    assert_eq!(
        line(&text, "  write:"),
        "  write: IOPS=20.0k, BW=1250MiB/s (1311MB/s)(1250MiB/1000msec); 0 zone resets"
    );
    assert!(line(&text, "    slat").starts_with("    slat (nsec): min=3000, max=5000, avg="));
    assert!(line(&text, "    clat").starts_with("    clat (usec): min=150, max=359, avg=254.50,"));
    assert_eq!(
        line(&text, "    clat percentiles"),
        "    clat percentiles (usec):"
    );
    // 1.28 GB/s of 64 KiB writes in 500 ms windows: 1_280_000 KiB/s is above 1 GiB/s, so MiB.
    assert_eq!(
        line(&text, "   bw ("),
        "   bw (  MiB/s): min= 1250, max= 1250, per=100.00%, avg=1250.00, stdev= 0.00, samples=2"
    );
    assert_eq!(
        line(&text, "   iops"),
        "   iops        : min=20000, max=20000, avg=20000.00, stdev= 0.00, samples=2"
    );
    assert_eq!(
        line(&text, "  lat (usec)"),
        "  lat (usec)   : 250=50.00%, 500=50.00%"
    );
    assert!(!text.contains("  lat (nsec)   :"));
    assert!(!text.contains("  lat (msec)   :"));
    assert_eq!(
        line(&text, "  WRITE:"),
        "  WRITE: bw=1250MiB/s (1311MB/s), 1250MiB/s-1250MiB/s (1311MB/s-1311MB/s), io=1250MiB (1311MB), run=1000-1000msec"
    );
}

// Proves millisecond scaling of summaries and percentiles for a slow disk.
#[test]
fn slow_latencies_print_in_msec() {
    let mut job = job("hdd", 0, 10 * SECOND);
    for i in 0..1000u64 {
        // 4 ms to 203.8 ms.
        io(
            &mut job,
            DataDir::Read,
            4096,
            None,
            4 * MS + i * 199_800,
            i * 10 * MS,
        );
    }
    let text = normal(&report(vec![job], 10 * SECOND));
    assert!(line(&text, "    clat").starts_with("    clat (msec): min=4, max=203, avg="));
    assert_eq!(
        line(&text, "    clat percentiles"),
        "    clat percentiles (msec):"
    );
    // Values are rounded up to whole ms: the 1st percentile (about 5.8 ms) shows as 6.
    assert!(line(&text, "     |  1.00th").starts_with("     |  1.00th=[    6],"));
    assert!(line(&text, "  lat (msec)").starts_with("  lat (msec)   : 10=3.10%, 20=5.00%, 50="));
}

// Proves per-priority summaries and percentile blocks appear only with two or more priorities,
// in fio 3.33's "clat prio class/level" form with each priority's share of I/Os.
#[test]
fn priority_lines_need_two_priorities() {
    let mut mixed = job("mixed", 0, SECOND);
    let mut single = job("single", 0, SECOND);
    for i in 0..100u64 {
        let prio = if i % 4 == 0 { rt(0) } else { be(6) };
        io_prio(
            &mut mixed,
            DataDir::Read,
            4096,
            None,
            1000 + i,
            prio,
            i * MS,
        );
        io_prio(
            &mut single,
            DataDir::Read,
            4096,
            None,
            1000 + i,
            be(6),
            i * MS,
        );
    }
    let text = normal(&report(vec![mixed, single], SECOND));
    let (mixed_text, single_text) = text.split_at(text.find("single: (groupid").unwrap());
    assert!(mixed_text.contains("    clat prio 1/0 (nsec): min=1000, max=1096, avg=1048.00,"));
    assert!(mixed_text.contains("    clat prio 2/6 (nsec): min=1001, max=1099,"));
    assert!(mixed_text.contains("    clat prio 1/0 (25.00% of IOs) percentiles (nsec):\n     |"));
    assert!(mixed_text.contains("    clat prio 2/6 (75.00% of IOs) percentiles (nsec):\n     |"));
    // Summaries come after lat, blocks after the overall percentiles.
    let order = [
        "     lat (nsec)",
        "    clat prio 1/0 (nsec)",
        "    clat prio 2/6 (nsec)",
        "    clat percentiles",
        "    clat prio 1/0 (25.00%",
        "    clat prio 2/6 (75.00%",
        "   bw (",
    ]
    .map(|needle| mixed_text.find(needle).expect(needle));
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    assert!(!single_text.contains("prio"));
}

// Proves group_reporting prints one block per group with jobs=N, and the group status lines
// sum the group.
#[test]
fn group_reporting_prints_one_block() {
    let mut jobs = Vec::new();
    for runtime in [2 * SECOND, SECOND] {
        let mut member = job("readers", 0, runtime);
        member.group_reporting = true;
        for i in 0..1000u64 {
            io(
                &mut member,
                DataDir::Read,
                4096,
                Some(2_000),
                100_000,
                i * runtime / 1000,
            );
        }
        jobs.push(member);
    }
    let mut lone = job("lone", 1, SECOND);
    io(&mut lone, DataDir::Write, 4096, None, 50_000, 0);
    jobs.push(lone);
    let text = normal(&report(jobs, 2 * SECOND));

    assert_eq!(text.matches("readers: (groupid=0, jobs=2)").count(), 1);
    assert!(text.contains("lone: (groupid=1, jobs=1)"));
    // 2000 reads of 4 KiB; longest runtime 2 s.
    assert_eq!(
        line(&text, "  read:"),
        "  read: IOPS=1000, BW=4000KiB/s (4096kB/s)(8000KiB/2000msec)"
    );
    assert_eq!(
        line(&text, "     issued rwts"),
        "     issued rwts: total=2000,0,0,0 short=0,0,0,0 dropped=0,0,0,0"
    );
    assert!(text.contains("\nRun status group 0 (all jobs):\n   READ: bw=4000KiB/s (4096kB/s), 4000KiB/s-4000KiB/s (4096kB/s-4096kB/s), io=8000KiB (8192kB), run=2000-2000msec\n"));
    assert!(text.contains("\nRun status group 1 (all jobs):\n  WRITE: bw=4096B/s (4096B/s), 4096B/s-4096B/s (4096B/s-4096B/s), io=4096B (4096B), run=1000-1000msec\n"));
}

// Proves group status lines without group_reporting: min and max over the group's jobs.
#[test]
fn group_status_spans_jobs() {
    let mut fast = job("fast", 0, SECOND);
    let mut slow = job("slow", 0, 2 * SECOND);
    for i in 0..1000u64 {
        io(&mut fast, DataDir::Read, 4096, None, 10_000, i * MS);
        io(&mut slow, DataDir::Read, 4096, None, 10_000, i * 2 * MS);
    }
    let text = normal(&report(vec![fast, slow], 2 * SECOND));
    // fast: 4000 KiB/s over 1 s; slow: 2000 KiB/s over 2 s; together 8000 KiB in 2 s.
    assert_eq!(
        line(&text, "   READ:"),
        "   READ: bw=4000KiB/s (4096kB/s), 2000KiB/s-4000KiB/s (2048kB/s-4096kB/s), io=8000KiB (8192kB), run=1000-2000msec"
    );
    // Each job's share of the group's 4000 KiB/s.
    assert!(text.contains("per=100.00%"));
    assert!(text.contains("per=50.00%"));
}

// Proves fsync latencies get fio's block, and a job without I/O prints nothing.
#[test]
fn sync_block_and_idle_jobs() {
    let mut writer = job("writer", 0, SECOND);
    for i in 0..16u64 {
        io(&mut writer, DataDir::Write, 4096, None, 30_000, i * MS);
        if i % 8 == 7 {
            writer.sync.record(1_500_000);
        }
    }
    let idle = job("idle", 0, SECOND);
    let text = normal(&report(vec![writer, idle], SECOND));
    assert!(text.contains(
        "  fsync/fdatasync/sync_file_range:\n    sync (nsec): min=1500.0k, max=1500.0k, avg=1500000.00, stdev= 0.00\n    sync percentiles (usec):\n"
    ));
    assert!(text.contains("     issued rwts: total=0,16,0,2 "));
    assert!(!text.contains("idle:"));
}

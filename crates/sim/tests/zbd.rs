//! fio's `zonemode=zbd` in the simulator: zones emulated over a conventional disk, as fio
//! emulates them on devices that are not zoned (zbd.c `init_zone_info`).

mod common;

use iosched_fio::{DataDir, RunReport};

fn simulate(text: &str) -> Result<RunReport, String> {
    common::simulate_text(text, "hdd")
}

// Proves the zone rules through the engine and the driver, with I/O in flight: four libaio
// writers at depth 8 put 2 GiB into 256 MiB of 16 MiB zones, four open, and reset a zone
// each time one is full (fio 3.33 counts 114 resets for the psync version of this job on a
// file here; depth changes who fills which zone, not how many fills 2 GiB makes), with
// every write completed; a verifying writer reads back all it wrote without a reset between;
// a reader after them reads exactly the bytes the writer left in the zones, and a reader of
// fresh zones reads nothing, as fio on a conventional device.
#[test]
fn zoned_writers_readers_and_verify_run_as_fio() {
    let report = simulate(
        "[global]\nfilename=/dev/sdb\nzonemode=zbd\nzonesize=16m\nmax_open_zones=4\nbs=512k\n\
         direct=1\nsize=256m\n\
         [w]\nrw=randwrite\nnumjobs=4\nio_size=512m\nioengine=libaio\niodepth=8\n",
    )
    .unwrap();
    let resets: u64 = report.jobs.iter().map(|j| j.zone_resets).sum();
    let writes: u64 = report
        .jobs
        .iter()
        .map(|j| j.dir(DataDir::Write).total_ios)
        .sum();
    assert!(report.jobs.iter().all(|j| j.error == 0));
    assert_eq!(writes, 4096);
    assert!((110..=118).contains(&resets), "{resets} resets");

    let report = simulate(
        "[global]\nfilename=/dev/sdb\nzonemode=zbd\nzonesize=4m\nbs=128k\ndirect=1\nsize=64m\n\
         [fresh]\nrw=read\n\
         [v]\nstonewall\nrw=randwrite\nio_size=24m\nverify=crc32c\nioengine=libaio\niodepth=4\n\
         [r]\nstonewall\nrw=read\n",
    )
    .unwrap();
    let job = |name: &str| report.jobs.iter().find(|j| j.name == name).unwrap();
    assert_eq!(job("fresh").dir(DataDir::Read).total_ios, 0);
    assert_eq!(job("v").error, 0, "{:?}", job("v").error_message);
    assert_eq!(job("v").dir(DataDir::Write).io_bytes, 24 << 20);
    assert_eq!(job("v").dir(DataDir::Read).io_bytes, 24 << 20);
    assert_eq!(job("v").zone_resets, 0);
    assert_eq!(job("r").dir(DataDir::Read).io_bytes, 24 << 20);
}

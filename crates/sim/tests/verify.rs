//! fio's verify in the simulator: a job reads back and checks what it wrote; a reading job
//! checks that what it reads was written with a verify header for that block; blocks follow
//! the writes in the order they complete.

mod common;

use iosched_fio::RunReport;

const EILSEQ: i32 = 84;

fn simulate(text: &str) -> Result<RunReport, String> {
    common::simulate_text(text, "hdd")
}

fn note<'a>(report: &'a RunReport, job: &str) -> &'a str {
    report
        .notes
        .iter()
        .find(|n| n.contains(&format!("job \"{job}\": verify=")))
        .unwrap_or_else(|| panic!("no verify note for {job}: {:?}", report.notes))
}

// Proves the read-back: a random writer with verify reads every block it wrote once its
// writes are done (the reads are counted as reads, as fio counts them) and all verify, with
// direct and with buffered I/O.
#[test]
fn a_writer_reads_back_what_it_wrote() {
    for direct in [1, 0] {
        let report = simulate(&format!(
            "[w]\nrw=randwrite\nbs=4k\nsize=2m\ndirect={direct}\nioengine=libaio\niodepth=8\n\
             verify=crc32c\n"
        ))
        .unwrap();
        let job = &report.jobs[0];
        assert_eq!(job.error, 0, "{:?}", job.error_message);
        assert_eq!(job.dir(iosched_fio::DataDir::Write).total_ios, 512);
        assert_eq!(job.dir(iosched_fio::DataDir::Read).total_ios, 512);
        assert!(
            note(&report, "w").contains(
                "512 blocks written with a verify header; all 512 read back and verified"
            ),
            "{}",
            note(&report, "w")
        );
    }
}

// Proves a reading job with verify checks the blocks' headers: after a verifying writer
// (do_verify=0) its reads verify; over blocks never written, or overwritten by a plain
// writer, the job fails with EILSEQ and says which block and why.
#[test]
fn a_reader_checks_headers() {
    let writer = "[w]\nfilename=/dev/sdb\nrw=write\nbs=4k\nsize=1m\ndirect=1\nverify=crc32c\n\
                  do_verify=0\n";
    let reader = "[r]\nstonewall\nfilename=/dev/sdb\nrw=randread\nbs=4k\nsize=1m\ndirect=1\n\
                  verify=crc32c\n";
    let good = simulate(&format!("{writer}{reader}")).unwrap();
    assert_eq!(good.jobs[1].error, 0, "{:?}", good.jobs[1].error_message);
    assert!(note(&good, "r").contains("all 256 blocks read verified"));
    assert!(note(&good, "w").contains("not read back"));

    let unwritten = simulate(reader).unwrap();
    assert_eq!(unwritten.jobs[0].error, EILSEQ);
    let message = unwritten.jobs[0].error_message.as_deref().unwrap();
    assert!(
        message.contains("never written with a verify header"),
        "{message}"
    );
    assert!(note(&unwritten, "r").contains("256 of 256 blocks read did not verify"));

    let plain = "[p]\nstonewall\nfilename=/dev/sdb\nrw=write\nbs=4k\nsize=64k\ndirect=1\n";
    let overwritten = simulate(&format!("{writer}{plain}{reader}")).unwrap();
    let job = &overwritten.jobs[2];
    assert_eq!(job.error, EILSEQ);
    assert!(job
        .error_message
        .as_deref()
        .unwrap()
        .contains("overwritten by a write without a verify header"));
    assert!(note(&overwritten, "r").contains("16 of 256 blocks read did not verify"));
}

// Proves a verifying mixed job (fio's enospc-pressure.fio has one) verifies what it wrote: its
// own reads, of blocks perhaps never written, are not checked; once its I/O is done it reads
// back each block it wrote, and all verify. A job that trims is refused with its location.
#[test]
fn a_mixed_job_reads_back_its_writes() {
    let report =
        simulate("[j]\nrw=randrw\nbs=4k\nsize=1m\nverify=crc32c\nnorandommap=1\n").unwrap();
    let job = &report.jobs[0];
    assert_eq!(job.error, 0, "{:?}", job.error_message);
    let reads = job.dir(iosched_fio::DataDir::Read).total_ios;
    let writes = job.dir(iosched_fio::DataDir::Write).total_ios;
    assert_eq!(
        reads + writes,
        256 + written_blocks(&report),
        "{reads} + {writes}"
    );
    assert!(
        note(&report, "j").contains("read back and verified"),
        "{}",
        note(&report, "j")
    );
    let error = simulate("[j]\nrw=randtrimwrite\nsize=1m\nverify=crc32c\n").unwrap_err();
    assert!(
        error.starts_with("t.fio:4: verify=crc32c: refused"),
        "{error}"
    );
    assert!(error.contains("rw=randtrimwrite"), "{error}");
}

/// Distinct blocks the job wrote, from its verify note ("...; all M read back and verified").
fn written_blocks(report: &RunReport) -> u64 {
    let note = note(report, "j");
    let all = note.find("; all ").expect("all M read back");
    let digits: String = note[all + 6..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().unwrap()
}

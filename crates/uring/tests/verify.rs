//! verify=crc32c on the real engine: what a job writes it reads back and checks, and a
//! corrupted block is found and named by file and byte offset.

mod common;

use iosched_fio::parse::parse_str;
use iosched_fio::DataDir;
use iosched_uring::{run, UringConfig};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

fn parse(text: &str) -> iosched_fio::JobFile {
    parse_str(text, "v.fio", Path::new("."), &|_| None).unwrap()
}

#[test]
fn verify_finds_a_corrupted_block() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let config = UringConfig {
        policy: "deadline".into(),
        ..UringConfig::default()
    };

    // Write every block with a header, then read each back and check it.
    let write = format!(
        "[writer]\nfilename={}\nsize=1m\nbs=4k\nrw=randwrite\ndirect=1\nioengine=io_uring\n\
         iodepth=8\nverify=crc32c\n",
        path.display()
    );
    let outcome = run(&config, &parse(&write)).unwrap();
    assert!(outcome.ok(), "{:?}", outcome.errors);
    let job = &outcome.report.jobs[0];
    assert_eq!(job.dir(DataDir::Write).total_ios, 256);
    assert_eq!(job.dir(DataDir::Read).total_ios, 256, "the read-back phase");
    assert!(
        outcome
            .report
            .notes
            .iter()
            .any(|n| n.contains("all 256 read back and verified")),
        "{:?}",
        outcome.report.notes
    );

    // Reading with verify checks every block: all good so far.
    let read = format!(
        "[reader]\nfilename={}\nbs=4k\nrw=read\ndirect=1\nverify=crc32c\n",
        path.display()
    );
    let outcome = run(&config, &parse(&read)).unwrap();
    assert!(outcome.ok(), "{:?}", outcome.errors);
    assert_eq!(outcome.report.jobs[0].dir(DataDir::Read).total_ios, 256);

    // Flip one byte in block 37.
    let corrupt_at = 37 * 4096 + 1234;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut byte = [0u8; 1];
    file.seek(SeekFrom::Start(corrupt_at)).unwrap();
    file.read_exact(&mut byte).unwrap();
    byte[0] ^= 0xff;
    file.seek(SeekFrom::Start(corrupt_at)).unwrap();
    file.write_all(&byte).unwrap();
    file.sync_all().unwrap();
    drop(file);

    let outcome = run(&config, &parse(&read)).unwrap();
    assert_eq!(outcome.errors.len(), 1, "{:?}", outcome.errors);
    let error = &outcome.errors[0];
    assert_eq!(error.errno, libc::EILSEQ);
    assert_eq!(error.offset, Some(corrupt_at));
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("v.fio:1: job \"reader\": {}: ", path.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("verify=crc32c failed at byte offset {corrupt_at}")),
        "{text}"
    );
    assert!(text.contains("block at offset 151552"), "{text}");
    // fio checks every block (verify_fatal=0) and reports the job's error.
    assert_eq!(outcome.report.jobs[0].dir(DataDir::Read).total_ios, 256);
    assert_eq!(outcome.report.jobs[0].error, libc::EILSEQ);
    let normal = iosched_fio::output::normal(&outcome.report);
    assert!(normal.contains("err=84"), "{normal}");
}

#[test]
fn unsupported_verify_methods_are_refused_with_their_line() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let text = format!(
        "[w]\nfilename={}\nsize=64k\nrw=write\nverify=md5\n",
        path.display()
    );
    let error = run(&UringConfig::default(), &parse(&text))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("v.fio:5: job \"w\": verify=md5: refused"),
        "{error}"
    );
    assert!(error.contains("verify=crc32c"), "{error}");
}

// Proves a mixed job verifies the read-back of its writes, not its own reads of blocks never
// written (the file starts empty here), as fio's enospc-pressure.fio asks.
#[test]
fn a_mixed_job_reads_back_its_writes() {
    if !common::uring_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let mixed = format!(
        "[m]\nfilename={}\nsize=64k\nrw=randrw\nverify=crc32c\n",
        path.display()
    );
    let outcome = run(&UringConfig::default(), &parse(&mixed)).unwrap();
    let job = &outcome.report.jobs[0];
    assert_eq!(job.error, 0, "{:?}", job.error_message);
    assert!(job.dir(DataDir::Read).total_ios > job.dir(DataDir::Write).total_ios / 2);
}

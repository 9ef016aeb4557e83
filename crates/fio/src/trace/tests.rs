//! The trace formats, their conversion, and replay's choices, each against the rule it follows.

use super::blktrace::{
    RawTrace, MAGIC, TA_QUEUE, TC_DISCARD, TC_FLUSH, TC_NOTIFY, TC_QUEUE, TC_READ, TC_WRITE,
    VERSION,
};
use super::jobs::{job_file, FlowMap, JobsOptions};
use super::replay::{prepare, summarize, Pace, ReplayOp};
use super::text::seconds;
use super::*;
use crate::job::Amount;
use crate::{BlockSize, DataDir, JobSpec, RwMode};
use std::io::Write as _;

fn read_all(format: Format, text: &str) -> Result<(Vec<TraceRecord>, Names), TraceError> {
    let mut reader = TraceReader::from_bytes("t", format, text.as_bytes().to_vec())?;
    let mut records = Vec::new();
    while let Some(record) = reader.next_record()? {
        records.push(record);
    }
    Ok((records, reader.names().clone()))
}

fn error(format: Format, text: &str) -> String {
    read_all(format, text).expect_err("an error").to_string()
}

fn write_file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(bytes))
        .expect("write");
    path.display().to_string()
}

// iolog v3 (iolog.c read_iolog): times in microseconds, file actions with three fields, I/O
// actions with five; v3's wait is ignored as fio ignores it.
#[test]
fn iolog_v3_reads_as_fio_reads_it() {
    let (records, names) = read_all(
        Format::Iolog,
        "fio version 3 iolog\n0 /dev/sdb add\n5 /dev/sdb open\n10 /dev/sdb read 4096 8192\n\
         25 /dev/sdb write 0 512\n30 /dev/sdb wait 0 0\n40 /dev/sdb sync 0 0\n50 /dev/sdb close\n",
    )
    .unwrap();
    let actions: Vec<Action> = records.iter().map(|r| r.action).collect();
    assert_eq!(
        actions,
        [
            Action::Add,
            Action::Open,
            Action::Io(TraceOp::Read),
            Action::Io(TraceOp::Write),
            Action::Io(TraceOp::Sync),
            Action::Close
        ]
    );
    assert_eq!(records[2].at, Some(10_000));
    assert_eq!((records[2].offset, records[2].len), (4096, 8192));
    assert_eq!(records[2].line, 4);
    assert_eq!(names.get(records[2].target), "/dev/sdb");
}

// iolog v2: no times; `wait N` holds until N ms after the start (read_iolog_get).
#[test]
fn iolog_v2_has_waits_and_no_times() {
    let (records, _) = read_all(
        Format::Iolog,
        "fio version 2 iolog\nf add\nf open\nf read 0 4096\nf wait 20 0\nf trim 8192 4096\n",
    )
    .unwrap();
    assert_eq!(records[2].at, None);
    assert_eq!(records[3].action, Action::Wait(20_000_000));
    assert_eq!(records[4].action, Action::Io(TraceOp::Trim));
}

// A malformed iolog is refused with its file and line, never skipped silently.
#[test]
fn iolog_errors_name_the_line() {
    assert_eq!(
        error(Format::Iolog, "fio version 1 iolog\n"),
        "t:1: \"fio version 1 iolog\" is not an iolog header; fio reads \"fio version 2 iolog\" \
         and \"fio version 3 iolog\" (version 1 is no longer supported, as fio says)"
    );
    assert!(error(
        Format::Iolog,
        "fio version 3 iolog\n0 f add\n1 f raed 0 4\n"
    )
    .starts_with("t:3: bad iolog action \"raed\""));
    assert!(error(Format::Iolog, "fio version 3 iolog\nx f read 0 4\n")
        .starts_with("t:2: timestamp (microseconds) \"x\": not an unsigned integer"));
    assert!(error(Format::Iolog, "fio version 2 iolog\nf read 0\n")
        .starts_with("t:2: expected FILE ACTION OFFSET LENGTH, found 3 fields"));
    assert!(error(Format::Iolog, "fio version 2 iolog\nf read -1 4\n").contains("offset \"-1\""));
    assert!(
        error(Format::Iolog, "fio version 2 iolog\nf read 0 5000000000\n")
            .contains("more than fio reads")
    );
    assert!(error(Format::Iolog, "fio version 2 iolog\nf frobnicate\n")
        .contains("bad iolog file action \"frobnicate\""));
    assert!(error(Format::Iolog, "").starts_with("t:1: empty"));
}

// MSR: filetime ticks of 100 ns, Read/Write, bytes; a flow per host and disk.
#[test]
fn msr_reads_ticks_and_bytes() {
    let (records, names) = read_all(
        Format::Msr,
        "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
         128166372003061629,web,0,Read,4294950912,4096,1227\n\
         128166372003071629,web,1,write,0,512,30\n",
    )
    .unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].at, Some(12_816_637_200_306_162_900));
    assert_eq!(records[0].response, Some(122_700));
    assert_eq!(records[0].offset, 4_294_950_912);
    assert_eq!(names.get(records[0].flow), "disk:web_0");
    assert_eq!(names.get(records[1].flow), "disk:web_1");
    assert_eq!(records[1].action, Action::Io(TraceOp::Write));
    assert!(error(Format::Msr, "1,web,0,Erase,0,4096,1\n").starts_with("t:1: Type \"erase\""));
    assert!(error(Format::Msr, "1,web,0,Read\n").contains("found 4 fields"));
}

// Proves a trace's errors quote at most 64 bytes of what it holds, as every error does (found
// by fuzzing trace_formats: an MSR Type field of 4 KiB came back whole in the error).
#[test]
fn trace_errors_cut_what_they_quote() {
    let long = "x".repeat(4096);
    for (format, line) in [
        (Format::Msr, format!("1,web,0,{long},0,4096,1\n")),
        (Format::Spc, format!("0,1,512,{long},0.1\n")),
        (Format::Msr, format!("{long},web,0,Read,0,4096,1\n")),
    ] {
        let message = error(format, &line);
        assert!(message.len() < 200, "{} bytes: {message}", message.len());
        assert!(message.contains("(4096 bytes)"), "{message}");
    }
}

// SPC: LBA in 512-byte blocks, time in seconds (exactly, to the nanosecond).
#[test]
fn spc_reads_blocks_and_seconds() {
    let (records, names) = read_all(
        Format::Spc,
        "0,20941264,8192,W,0.551706\n1,3436288,15872,r,0.554041,x\n",
    )
    .unwrap();
    assert_eq!(records[0].offset, 20_941_264 * 512);
    assert_eq!(records[0].at, Some(551_706_000));
    assert_eq!(names.get(records[1].flow), "asu:1");
    assert_eq!(records[1].action, Action::Io(TraceOp::Read));
    assert!(error(Format::Spc, "0,1,512,X,0.1\n").contains("Opcode \"X\""));
    assert_eq!(seconds("12.000000001", "t"), Ok(12_000_000_001));
    assert_eq!(seconds(".5", "t"), Ok(500_000_000));
    assert!(seconds("1.2.3", "t").is_err());
    assert!(seconds("99999999999999999999", "t").is_err());
}

// blkparse's default output: queue events are the requests (as blktrace.c takes only
// __BLK_TA_QUEUE), other events are skipped, and the summary ends the trace.
#[test]
fn blkparse_takes_queue_events() {
    let text = "  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]\n\
                  8,0    3        2     0.000001000   697  G   W 223490 + 8 [kjournald]\n\
                  8,0    3        3     0.000010000   697  D   W 223490 + 8 [kjournald]\n\
                  8,0    0        4     0.100000000  1234  Q   R 1000 + 16 [db]\n\
                  8,0    0        5     0.200000000  1234  Q  RA 2000 + 16 [db]\n\
                  8,0    0        6     0.300000000    77  Q   D 4096 + 64 [fstrim]\n\
                  8,0    0        7     0.400000000    77  Q FWS 0 + 0 [sync]\n\
                  8,0    0        8     0.500000000    77  U   N [sync] 1\n\
                CPU0 (8,0):\n Reads Queued:           2,       16KiB\n";
    let (records, names) = read_all(Format::Blkparse, text).unwrap();
    let ops: Vec<Action> = records.iter().map(|r| r.action).collect();
    assert_eq!(
        ops,
        [
            Action::Io(TraceOp::Write),
            Action::Io(TraceOp::Read),
            Action::Io(TraceOp::Read),
            Action::Io(TraceOp::Trim),
            Action::Io(TraceOp::Sync)
        ]
    );
    assert_eq!((records[1].offset, records[1].len), (1000 * 512, 16 * 512));
    assert_eq!(records[1].at, Some(100_000_000));
    assert_eq!(names.get(records[1].flow), "pid:1234");
    assert_eq!(names.get(records[1].target), "8,0");
    assert!(error(Format::Blkparse, "8,0 0 1 0.1 5 Q R 10 - 8 [x]\n")
        .contains("a queue event needs RWBS SECTOR + COUNT"));
    assert!(error(Format::Blkparse, "sda 0 1 0.1 5 Q R 10 + 8 [x]\n").contains("MAJOR,MINOR"));
}

fn raw(time: u64, action: u32, sector: u64, bytes: u32, pid: u32, cpu: u32) -> RawTrace {
    RawTrace {
        time,
        sector,
        bytes,
        action,
        pid,
        device: (8 << 20) | 16,
        cpu,
    }
}

// blktrace binary: queue events of file-system requests only, in either byte order, a
// discard a trim and a data-less flush a sync; a cut record is an error at its index.
#[test]
fn blktrace_binary_reads_in_either_byte_order() {
    let queue = TA_QUEUE | TC_QUEUE;
    let mut bytes = Vec::new();
    bytes.extend(raw(100, queue | TC_READ, 8, 4096, 7, 0).encode());
    bytes.extend(raw(150, 7 | TC_READ, 8, 4096, 7, 0).encode()); // issue: skipped
    bytes.extend(raw(200, queue | TC_WRITE, 16, 512, 7, 0).encode());
    bytes.extend(raw(250, queue | TC_NOTIFY, 0, 0, 7, 0).encode());
    bytes.extend(raw(300, queue | TC_WRITE | TC_DISCARD, 32, 8192, 9, 0).encode());
    bytes.extend(raw(400, queue | TC_WRITE | TC_FLUSH, 0, 0, 9, 0).encode());
    let (records, names) = {
        let mut reader = TraceReader::from_bytes("b", Format::Blktrace, bytes.clone()).unwrap();
        let mut records = Vec::new();
        while let Some(r) = reader.next_record().unwrap() {
            records.push(r);
        }
        (records, reader.names().clone())
    };
    let ops: Vec<Action> = records.iter().map(|r| r.action).collect();
    assert_eq!(
        ops,
        [
            Action::Io(TraceOp::Read),
            Action::Io(TraceOp::Write),
            Action::Io(TraceOp::Trim),
            Action::Io(TraceOp::Sync)
        ]
    );
    assert_eq!(
        (records[0].offset, records[0].len, records[0].at),
        (4096, 4096, Some(100))
    );
    assert_eq!(names.get(records[0].target), "8,16");
    // The same records big-endian: every field swapped.
    let mut big = Vec::new();
    for chunk in bytes.chunks(48) {
        let mut record = chunk.to_vec();
        for (at, width) in [
            (0, 4),
            (4, 4),
            (8, 8),
            (16, 8),
            (24, 4),
            (28, 4),
            (32, 4),
            (36, 4),
            (40, 4),
            (44, 2),
            (46, 2),
        ] {
            record[at..at + width].reverse();
        }
        big.extend(record);
    }
    let mut reader = TraceReader::from_bytes("b", Format::Blktrace, big).unwrap();
    let mut count = 0;
    while let Some(r) = reader.next_record().unwrap() {
        assert_eq!(r.action, records[count].action);
        assert_eq!(r.offset, records[count].offset);
        count += 1;
    }
    assert_eq!(count, 4);
    let cut = bytes[..48 + 20].to_vec();
    let mut reader = TraceReader::from_bytes("b", Format::Blktrace, cut).unwrap();
    assert_eq!(reader.next_record().unwrap().unwrap().offset, 4096);
    assert_eq!(
        reader.next_record().unwrap_err().to_string(),
        "b:2: record cut short: 20 of 48 bytes"
    );
    assert_eq!(
        MAGIC | VERSION,
        u32::from_le_bytes(bytes[0..4].try_into().unwrap())
    );
}

// A capture's per-CPU files are merged by time, and found by their prefix.
#[test]
fn per_cpu_files_merge_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let queue = TA_QUEUE | TC_QUEUE | TC_READ;
    let cpu0: Vec<u8> = [10u64, 40, 50]
        .iter()
        .flat_map(|&t| raw(t, queue, t, 512, 1, 0).encode())
        .collect();
    let cpu1: Vec<u8> = [20u64, 30, 60]
        .iter()
        .flat_map(|&t| raw(t, queue, t, 512, 2, 1).encode())
        .collect();
    write_file(&dir, "sdb.blktrace.0", &cpu0);
    write_file(&dir, "sdb.blktrace.1", &cpu1);
    let mut reader = TraceReader::open(&dir.path().join("sdb"), None).unwrap();
    assert_eq!(reader.format(), Format::Blktrace);
    let mut times = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        times.push(r.at.unwrap());
    }
    assert_eq!(times, [10, 20, 30, 40, 50, 60]);
}

// The format is told from the first bytes; a file that is none of them is refused at line 1.
#[test]
fn formats_are_told_from_their_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], Format); 5] = [
        ("a", b"fio version 3 iolog\n0 f add\n", Format::Iolog),
        (
            "b",
            b"128166372003061629,web,0,Read,0,4096,1\n",
            Format::Msr,
        ),
        ("c", b"0,20941264,8192,W,0.551706\n", Format::Spc),
        (
            "d",
            b"  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [k]\n",
            Format::Blkparse,
        ),
        (
            "e",
            &raw(1, TA_QUEUE | TC_QUEUE, 0, 512, 1, 0).encode(),
            Format::Blktrace,
        ),
    ];
    for (name, bytes, format) in cases {
        let path = write_file(&dir, name, bytes);
        let reader = TraceReader::open(std::path::Path::new(&path), None).unwrap();
        assert_eq!(reader.format(), format, "{name}");
    }
    let path = write_file(&dir, "x", b"hello world\n");
    let message = TraceReader::open(std::path::Path::new(&path), None)
        .err()
        .unwrap()
        .to_string();
    assert!(message.ends_with("x:1: not a trace iosched can tell: no fio iolog header (\"fio version 2 iolog\" or \"fio version 3 iolog\"), no blktrace magic, and not an MSR, SPC or blkparse line; name the format (iolog_format= in a job, --format on the command line)"), "{message}");
    let missing = TraceReader::open(&dir.path().join("nothing"), None)
        .err()
        .unwrap();
    assert!(missing.to_string().contains("cannot open the trace"));
}

fn convert(from: Format, text: &[u8], to: Format) -> Vec<u8> {
    let mut reader = TraceReader::from_bytes("in", from, text.to_vec()).unwrap();
    let mut writer = TraceWriter::new(to, Vec::new()).unwrap();
    while let Some(record) = reader.next_record().unwrap() {
        writer.write(&record, reader.names()).unwrap();
    }
    writer.finish(reader.names()).unwrap();
    writer.into_inner()
}

// Conversion keeps each request's direction, offset and length (and times, relative to the
// first); MSR stays absolute so it converts back unchanged; what a format cannot hold is
// counted, not written.
#[test]
fn conversions_keep_the_requests() {
    let msr = b"128166372003061629,web,0,Read,4096,4096,1227\n128166372003071629,web,0,Write,8192,512,30\n";
    let iolog = convert(Format::Msr, msr, Format::Iolog);
    assert_eq!(
        String::from_utf8(iolog.clone()).unwrap(),
        "fio version 3 iolog\n0 web_0 add\n0 web_0 open\n0 web_0 read 4096 4096\n\
         1000 web_0 write 8192 512\n1000 web_0 close\n"
    );
    let back = convert(Format::Iolog, &iolog, Format::Msr);
    assert_eq!(
        String::from_utf8(back).unwrap(),
        "0,web,0,Read,4096,4096,0\n10000,web,0,Write,8192,512,0\n"
    );
    assert_eq!(convert(Format::Msr, msr, Format::Msr), msr.to_vec());
    let spc = convert(Format::Msr, msr, Format::Spc);
    assert_eq!(
        String::from_utf8(spc).unwrap(),
        "0,8,4096,R,0.000000\n0,16,512,W,0.001000\n"
    );
    let blkparse = convert(Format::Msr, msr, Format::Blkparse);
    let text = String::from_utf8(blkparse.clone()).unwrap();
    assert_eq!(
        text,
        "  8,0    0        1     0.000000000     1  Q   R 8 + 8 [iosched]\n  8,0    0        2     \
         0.001000000     1  Q   W 16 + 1 [iosched]\n"
    );
    let again = convert(Format::Blkparse, &blkparse, Format::Blktrace);
    let (records, _) = {
        let mut reader = TraceReader::from_bytes("b", Format::Blktrace, again).unwrap();
        let mut records = Vec::new();
        while let Some(r) = reader.next_record().unwrap() {
            records.push(r);
        }
        (records, ())
    };
    assert_eq!(records.len(), 2);
    assert_eq!(
        (records[1].offset, records[1].len, records[1].at),
        (8192, 512, Some(1_000_000))
    );
    assert_eq!(records[1].action, Action::Io(TraceOp::Write));
    let mut writer = TraceWriter::new(Format::Spc, Vec::new()).unwrap();
    let mut reader = TraceReader::from_bytes(
        "i",
        Format::Iolog,
        b"fio version 2 iolog\nf read 3 4096\nf sync 0 0\n".to_vec(),
    )
    .unwrap();
    while let Some(record) = reader.next_record().unwrap() {
        writer.write(&record, reader.names()).unwrap();
    }
    let (written, dropped) = writer.counts();
    assert_eq!(written, 0);
    assert_eq!(dropped.len(), 2, "{dropped:?}");
}

fn spec_for(path: &str) -> ReplaySpec {
    ReplaySpec::new(path)
}

/// The pace of each step of a replay of `spec` over `files`.
fn paces_of(spec: &ReplaySpec, files: &[(String, u64, u64)]) -> Vec<Pace> {
    steps(&mut Replay::open(spec, files.to_vec()).unwrap())
        .iter()
        .map(|s| s.pace)
        .collect()
}

fn steps(replay: &mut Replay) -> Vec<ReplayStep> {
    let mut out = Vec::new();
    while let Some(step) = replay.next_step().unwrap() {
        out.push(step);
    }
    out
}

use super::replay::ReplayStep;

// fio's pacing (iolog_delay, delay_since_ttime): each gap counts from the last issue, scaled
// by replay_time_scale, dropped by replay_no_stall, and none for a time earlier than the last.
#[test]
fn fio_pacing_counts_gaps_from_the_last_issue() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        &dir,
        "t.log",
        b"fio version 3 iolog\n0 f add\n100 f read 0 4096\n300 f read 4096 4096\n250 f write 0 4096\n1250 f sync 0 0\n",
    );
    let files = vec![("f".to_string(), 1 << 20, 1 << 20)];
    let mut replay = Replay::open(&spec_for(&path), files.clone()).unwrap();
    let got = steps(&mut replay);
    let paces: Vec<Pace> = got.iter().map(|s| s.pace).collect();
    assert_eq!(
        paces,
        [
            Pace::AfterIssue(0),
            Pace::AfterIssue(200_000),
            Pace::AfterIssue(0),
            Pace::AfterIssue(1_000_000)
        ]
    );
    // Offsets land in the file's extent.
    assert_eq!(
        got[1].op,
        ReplayOp::Io(io_at(DataDir::Read, (1 << 20) + 4096, 4096))
    );
    assert_eq!(got[3].op, ReplayOp::Sync(0));
    let mut fast = spec_for(&path);
    fast.time_scale = 200;
    let paces = paces_of(&fast, &files);
    assert_eq!(paces[1], Pace::AfterIssue(100_000));
    let mut nostall = spec_for(&path);
    nostall.no_stall = true;
    assert!(steps(&mut Replay::open(&nostall, files).unwrap())
        .iter()
        .all(|s| s.pace == Pace::AfterIssue(0)));
}

/// An I/O of the job's first file.
fn io_at(dir: DataDir, offset: u64, len: u64) -> crate::workload::NextIo {
    crate::workload::NextIo {
        dir,
        offset,
        len,
        file: 0,
    }
}

// Open loop goes at the trace's own times since its first; closed loop after the last
// completion and the trace's think time (the gap from the previous request's recorded end).
#[test]
fn open_and_closed_pacing() {
    let dir = tempfile::tempdir().unwrap();
    // Requests at 0, 10 ms and 12 ms, each recorded as taking 4 ms (filetime ticks).
    let path = write_file(
        &dir,
        "t.csv",
        b"1000000,h,0,Read,0,4096,40000\n1100000,h,0,Read,4096,4096,40000\n1120000,h,0,Read,8192,4096,40000\n",
    );
    let files = vec![("/dev/sda".to_string(), 0, 1 << 30)];
    let mut open = spec_for(&path);
    open.mode = ReplayMode::Open;
    let paces = paces_of(&open, &files);
    assert_eq!(
        paces,
        [
            Pace::AfterStart(0),
            Pace::AfterStart(10_000_000),
            Pace::AfterStart(12_000_000)
        ]
    );
    let mut closed = spec_for(&path);
    closed.mode = ReplayMode::Closed;
    let paces = paces_of(&closed, &files);
    // Think times: 10 - (0 + 4) = 6 ms; 12 - (10 + 4) < 0, so none.
    assert_eq!(
        paces,
        [
            Pace::AfterCompletion(0),
            Pace::AfterCompletion(6_000_000),
            Pace::AfterCompletion(0)
        ]
    );
}

// iolog_flow picks one flow; replay_skip drops directions; replay_scale divides offsets and
// replay_align aligns them down; an I/O past its file's end stops the replay at its line.
#[test]
fn replay_picks_flows_and_shapes_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        &dir,
        "t.blk",
        b"8,0 0 1 0.1 10 Q R 1000 + 8 [a]\n8,0 0 2 0.2 20 Q W 4000 + 8 [b]\n8,0 0 3 0.3 10 Q W 9 + 8 [a]\n",
    );
    let files = vec![("/dev/sda".to_string(), 0, 1 << 30)];
    let mut spec = spec_for(&path);
    spec.flow = Some("pid:10".into());
    spec.scale = 2;
    spec.align = 1024;
    let got = steps(&mut Replay::open(&spec, files.clone()).unwrap());
    let offsets: Vec<u64> = got
        .iter()
        .map(|s| match s.op {
            ReplayOp::Io(io) => io.offset,
            ReplayOp::Sync(_) => u64::MAX,
        })
        .collect();
    // 1000 sectors = 512000 bytes / 2 = 256000, aligned down to 1024: 256000; 9 sectors =
    // 4608 / 2 = 2304 -> 2048.
    assert_eq!(offsets, [256_000, 2048]);
    spec.skip = [false, true, false, false];
    assert_eq!(steps(&mut Replay::open(&spec, files).unwrap()).len(), 1);
    let small = vec![("/dev/sda".to_string(), 0, 600_000)];
    let mut replay = Replay::open(&spec_for(&path), small).unwrap();
    replay.next_step().unwrap();
    let error = replay.next_step().unwrap_err().to_string();
    assert!(error.ends_with("t.blk:2: write of 4096 bytes at offset 2048000 passes the end of \"/dev/sda\" (600000 bytes)"), "{error}");
}

// prepare sets what fio sets from a log (files, directions, block sizes) and, on the
// simulator, sizes files to the furthest offset; it refuses what cannot be placed.
#[test]
fn prepare_takes_the_jobs_shape_from_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        &dir,
        "t.log",
        b"fio version 3 iolog\n0 data.0 add\n0 data.1 add\n1 data.0 read 0 4096\n2 data.1 read 1048576 16384\n",
    );
    let mut spec = JobSpec::new("j");
    spec.replay = Some(ReplaySpec::new(&path));
    let summary = prepare(&mut spec, false).unwrap();
    assert_eq!(summary.ios, [2, 0, 0]);
    assert_eq!(spec.filenames, ["data.0", "data.1"]);
    assert_eq!(spec.rw, RwMode::RandRead);
    assert_eq!(
        spec.bs[0],
        BlockSize::Range {
            min: 4096,
            max: 16384
        }
    );
    assert_eq!(spec.size, Some(Amount::Bytes(2 * (1_048_576 + 16384))));
    // The real engine writes only to files the job names.
    let mut real = JobSpec::new("j");
    real.replay = Some(ReplaySpec::new(&path));
    real.filenames = vec!["data.0".into()];
    let refused = prepare(&mut real, true).unwrap_err();
    assert!(
        refused.contains("names \"data.1\", which the job does not name"),
        "{refused}"
    );
    // Other formats take the job's files in order; more targets than files is refused.
    let msr = write_file(&dir, "t.csv", b"1,a,0,Read,0,4096,1\n2,b,0,Read,0,4096,1\n");
    let mut two = JobSpec::new("j");
    two.replay = Some(ReplaySpec::new(&msr));
    two.filenames = vec!["/dev/sda".into()];
    let refused = prepare(&mut two, false).unwrap_err();
    assert!(
        refused.contains("addresses 2 targets (disk:a_0, disk:b_0) but the job names 1 file(s)"),
        "{refused}"
    );
    let mut redirected = JobSpec::new("j");
    let mut replay = ReplaySpec::new(&msr);
    replay.redirect = Some("/dev/sdc".into());
    redirected.replay = Some(replay);
    prepare(&mut redirected, false).unwrap();
    assert_eq!(redirected.filenames, ["/dev/sdc"]);
    assert!(
        redirected.direct,
        "a block trace replays below the page cache"
    );
    assert!(!spec.direct, "an iolog keeps the job's direct=");
    let mut nobody = JobSpec::new("j");
    let mut replay = ReplaySpec::new(&msr);
    replay.flow = Some("disk:c_0".into());
    nobody.replay = Some(replay);
    let refused = prepare(&mut nobody, false).unwrap_err();
    assert!(
        refused.ends_with(
            "no I/O of flow disk:c_0 to replay (flows in the trace: disk:a_0, disk:b_0)"
        ),
        "{refused}"
    );
    let mut stdin = JobSpec::new("j");
    stdin.replay = Some(ReplaySpec::new("-"));
    assert!(prepare(&mut stdin, false)
        .unwrap_err()
        .contains("must be a file"));
    let summary = summarize(&ReplaySpec::new(&msr)).unwrap();
    assert_eq!(
        summary.flows,
        [("disk:a_0".to_string(), 1), ("disk:b_0".to_string(), 1)]
    );
}

// A relative trace path not in the current directory is found beside the job file.
#[test]
fn relative_traces_are_found_beside_the_job_file() {
    let dir = tempfile::tempdir().unwrap();
    write_file(&dir, "beside.csv", b"1,a,0,Read,0,4096,1\n");
    let mut spec = ReplaySpec::new("beside.csv");
    spec.base_dir = Some(dir.path().to_path_buf());
    assert_eq!(spec.resolved(), dir.path().join("beside.csv"));
    assert_eq!(summarize(&spec).unwrap().ios[0], 1);
}

// write_iolog writes fio's version 3 log: header, add, open, one line per I/O in microseconds
// since the job began with file offsets, close; it replaces its target only on commit.
#[test]
fn iolog_stream_writes_fios_version_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.log");
    std::fs::write(&path, "old\n").unwrap();
    let stream = IologStream::open(
        path.to_str().unwrap(),
        vec![("/dev/sdb".into(), 0), ("data".into(), 1 << 20)],
    )
    .unwrap();
    stream.start(5_000_000);
    stream.issue(5_010_000, 1, TraceOp::Read, (1 << 20) + 4096, 512);
    stream.issue(6_000_000, 0, TraceOp::Sync, 0, 0);
    stream.finish(7_000_000);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
    stream.commit().unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "fio version 3 iolog\n0 /dev/sdb add\n0 data add\n0 /dev/sdb open\n0 data open\n\
         10 data read 4096 512\n1000 /dev/sdb sync 0 0\n2000 /dev/sdb close\n2000 data close\n"
    );
}

// Each flow becomes a job replaying only its own records, with the cgroup and priority the
// flow map gives it.
#[test]
fn job_files_have_a_job_per_flow() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        &dir,
        "t.blk",
        b"8,0 0 1 0.1 10 Q R 1000 + 8 [a]\n8,16 0 2 0.2 20 Q W 4000 + 8 [b]\n8,0 0 3 0.3 10 Q W 9 + 8 [a]\n",
    );
    let options = JobsOptions {
        path: path.clone(),
        format: None,
        mode: ReplayMode::Open,
        time_scale: 100,
        iodepth: 32,
        filenames: vec![("8,16".into(), "/dev/sdc".into())],
        flow_map: vec![FlowMap::parse("pid:10=/db:rt/0").unwrap()],
    };
    let text = job_file(&options).unwrap();
    assert!(
        text.contains(
            "[pid:10]\niolog_flow=pid:10\nfilename=8_0.dat\ncgroup=/db\nprioclass=1\nprio=0\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("[pid:20]\niolog_flow=pid:20\nfilename=/dev/sdc\n"),
        "{text}"
    );
    assert!(text.contains("replay_mode=open\n") && text.contains("iodepth=32\n"));
    let parsed = crate::parse::parse_str(&text, "g.fio", dir.path(), &|_| None).unwrap();
    assert_eq!(parsed.jobs.len(), 2);
    assert_eq!(parsed.jobs[0].cgroup, "/db");
    let bad_target = JobsOptions {
        filenames: vec![("9,9".into(), "/dev/sdz".into())],
        ..options.clone()
    };
    assert!(job_file(&bad_target).unwrap_err().to_string().contains(
        "--target names \"9,9\", which the trace does not address (its targets: 8,0, 8,16)"
    ));
    let unknown = JobsOptions {
        flow_map: vec![FlowMap::parse("pid:99=/x").unwrap()],
        ..options
    };
    assert!(job_file(&unknown).unwrap_err().to_string().contains(
        "names flow \"pid:99\", which the trace does not have (its flows: pid:10, pid:20)"
    ));
    assert!(FlowMap::parse("pid:1").unwrap_err().contains("KEY=/cgroup"));
    assert!(FlowMap::parse("pid:1=db")
        .unwrap_err()
        .contains("must start with '/'"));
    assert!(FlowMap::parse("pid:1=/db:rt/9")
        .unwrap_err()
        .contains("0 to 7"));
    assert_eq!(FlowMap::parse("pid:1=:idle/7").unwrap().prio, Some((3, 7)));
}

// An iolog's flows are its files: each job keeps the log's file unless --target names
// another, which the job then reaches by replay_redirect.
#[test]
fn iolog_flows_are_redirected_only_when_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        &dir,
        "t.log",
        b"fio version 3 iolog\n0 a add\n0 b add\n1 a read 0 4096\n2 b write 0 4096\n",
    );
    let options = JobsOptions {
        path,
        format: None,
        mode: ReplayMode::Fio,
        time_scale: 50,
        iodepth: 8,
        filenames: vec![("b".into(), "/srv/b.img".into())],
        flow_map: Vec::new(),
    };
    let text = job_file(&options).unwrap();
    assert!(text.contains("[file:a]\niolog_flow=file:a\n\n"), "{text}");
    assert!(
        text.contains("[file:b]\niolog_flow=file:b\nreplay_redirect=/srv/b.img\n"),
        "{text}"
    );
    assert!(text.contains("replay_time_scale=50\n") && text.contains("replay_mode=fio\n"));
}

// fio's get_name_by_idx: a colon-separated read_iolog gives each clone its own trace.
#[test]
fn clones_take_their_own_log_from_a_list() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_file(&dir, "a.log", b"fio version 2 iolog\nf read 0 4096\n");
    let b = write_file(
        &dir,
        "b.log",
        b"fio version 2 iolog\nf write 0 4096\nf write 4096 4096\n",
    );
    for (clone, reads, writes) in [(0, 1, 0), (1, 0, 2), (2, 1, 0)] {
        let mut spec = JobSpec::new("j");
        spec.clone = clone;
        spec.replay = Some(ReplaySpec::new(&format!("{a}:{b}")));
        let summary = prepare(&mut spec, false).unwrap();
        assert_eq!(
            (summary.ios[0], summary.ios[1]),
            (reads, writes),
            "clone {clone}"
        );
    }
}

//! Whole-parser tests on text, with a fixed machine and in-memory includes.

use super::*;
use crate::job::RandomDistribution;
use crate::{Amount, BlockSize, Engine, JobSpec, RwMode};
use iosched_core::{IoPrio, IoPrioClass};
use std::collections::HashMap;
use std::path::PathBuf;

const MACHINE: Machine = Machine::Fixed {
    ncpus: 8,
    pagesize: 4096,
    mb_memory: 16000,
};

fn env(name: &str) -> Option<String> {
    match name {
        "SIZE" => Some("64m".into()),
        "JOBS" => Some("3".into()),
        _ => None,
    }
}

fn parse_files(text: &str, files: &[(&str, &str)]) -> Result<JobFile, ParseError> {
    let files: HashMap<PathBuf, String> = files
        .iter()
        .map(|(name, text)| (Path::new("/jobs").join(name), text.to_string()))
        .collect();
    let loader = move |path: &Path| {
        files.get(path).cloned().ok_or_else(|| ParseError {
            location: None,
            message: format!(
                "cannot read included file \"{}\": not found",
                path.display()
            ),
        })
    };
    parse_with(text, "t.fio", Path::new("/jobs"), &env, &MACHINE, &loader)
}

fn parse(text: &str) -> Result<JobFile, ParseError> {
    parse_files(text, &[])
}

fn job(text: &str) -> JobSpec {
    let file = parse(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file.jobs.len(), 1, "one job expected");
    file.jobs.into_iter().next().unwrap()
}

fn error(text: &str) -> String {
    parse(text).expect_err("an error").to_string()
}

const MIB: u64 = 1 << 20;
const SECOND: u64 = 1_000_000_000;

// A job with no options is fio's defaults, as JobSpec::new documents them.
#[test]
fn empty_job_has_fio_defaults() {
    let spec = job("[job]\n");
    let mut expected = JobSpec::new("job");
    expected.location = Location {
        file: "t.fio".into(),
        line: 1,
    };
    assert_eq!(spec, expected);
    assert_eq!(spec.rw, RwMode::Read);
    assert_eq!(
        spec.bs,
        [
            BlockSize::Fixed(4096),
            BlockSize::Fixed(4096),
            BlockSize::Fixed(4096)
        ]
    );
    assert_eq!(
        spec.engine,
        Engine::Sync {
            name: "psync".into()
        }
    );
    assert_eq!((spec.iodepth, spec.rwmixread, spec.numjobs), (1, 50, 1));
    assert!(!spec.direct);
    assert_eq!(spec.filenames, vec!["job.0.0".to_string()]);
    assert_eq!(spec.size, None, "no size is not an error at parse time");
}

// Several [global] sections: each job takes the defaults as they stand at its header.
#[test]
fn globals_apply_to_the_jobs_below_them_only() {
    let text = "\
[global]
bs=8k
rw=randread
[a]
[global]
bs=16k
[b]
rw=write
";
    let file = parse(text).unwrap();
    let (a, b) = (&file.jobs[0], &file.jobs[1]);
    assert_eq!(a.bs[0], BlockSize::Fixed(8192));
    assert_eq!(a.rw, RwMode::RandRead);
    assert_eq!(b.bs[0], BlockSize::Fixed(16384));
    assert_eq!(b.rw, RwMode::Write);
    // fio's "job options" are the section's own; globals are listed once, apart.
    assert!(a.options.is_empty());
    assert_eq!(b.options, vec![("rw".to_string(), "write".to_string())]);
    assert_eq!(
        file.global_options,
        vec![
            ("bs".to_string(), "8k".to_string()),
            ("rw".to_string(), "randread".to_string()),
            ("bs".to_string(), "16k".to_string()),
        ]
    );
}

// "job options" list names as fio does (aliases resolved), kb_base first as fio applies it.
#[test]
fn job_options_use_canonical_names_in_fio_order() {
    let spec = job("[j]\nreadwrite=randrw\nblocksize=8k\nkb_base=1000\ntime_based\n");
    assert_eq!(
        spec.options,
        vec![
            ("kb_base".to_string(), "1000".to_string()),
            ("rw".to_string(), "randrw".to_string()),
            ("bs".to_string(), "8k".to_string()),
            ("time_based".to_string(), String::new()),
        ]
    );
    assert_eq!(
        spec.bs[0],
        BlockSize::Fixed(8000),
        "kb_base applies to the whole section"
    );
}

// A global size is read with the global kb_base, not the job's, as in fio.
#[test]
fn kb_base_is_read_where_each_value_is_written() {
    let file = parse("[global]\nsize=1m\n[a]\nkb_base=1000\n[b]\nkb_base=1000\nsize=1m\n").unwrap();
    assert_eq!(file.jobs[0].size, Some(Amount::Bytes(MIB)));
    assert_eq!(file.jobs[1].size, Some(Amount::Bytes(1_000_000)));
}

// Trailing comments are cut and blanks around '=' ignored.
#[test]
fn comments_and_blanks_around_equals() {
    let spec = job("[j]\n  bs = 64k   ; the block size\nrw= randwrite # random\n# iodepth=4\n");
    assert_eq!(spec.bs[1], BlockSize::Fixed(65536));
    assert_eq!(spec.rw, RwMode::RandWrite);
    assert_eq!(spec.iodepth, 1);
}

// ${VAR} and fio's $ncpus/$pagesize keywords, with bc-style arithmetic on keywords.
#[test]
fn environment_and_keywords() {
    let spec = job("[j]\nsize=${SIZE}\nnumjobs=1\niodepth=$ncpus\nbs=$pagesize\n");
    assert_eq!(spec.size, Some(Amount::Bytes(64 * MIB)));
    assert_eq!(spec.iodepth, 8);
    assert_eq!(spec.bs[0], BlockSize::Fixed(4096));
    let file = parse("[j]\nnumjobs=${JOBS}\n").unwrap();
    assert_eq!(file.jobs.len(), 3);
    let file = parse("[j]\nnumjobs=$ncpus/4\n").unwrap();
    assert_eq!(file.jobs.len(), 2);
}

// fio substitutes nothing for an unset variable; the error says which variable it was.
#[test]
fn unset_variable_is_named_in_the_error() {
    assert_eq!(
        error("[j]\nsize=${NOPE}\n"),
        "t.fio:2: size: bad size \"\": empty value (${NOPE} not set; fio substitutes an empty string)"
    );
    // Where empty is fine, an unset variable is fine.
    assert_eq!(
        job("[j]\ndescription=run ${NOPE}x\n")
            .description
            .as_deref(),
        Some("run x")
    );
}

// Clones are adjacent and numbered; stonewall, wait_for_previous and new_group open groups.
#[test]
fn numjobs_clones_and_group_ids() {
    let text = "\
[a]
numjobs=3
[b]
stonewall
[c]
new_group
numjobs=2
[d]
[e]
wait_for_previous
";
    let file = parse(text).unwrap();
    let summary: Vec<(&str, u32, u32, u32, bool)> = file
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.clone, j.numjobs, j.group_id, j.stonewall))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("a", 0, 3, 0, false),
            ("a", 1, 3, 0, false),
            ("a", 2, 3, 0, false),
            ("b", 0, 1, 1, true),
            ("c", 0, 2, 2, false),
            ("c", 1, 2, 2, false),
            ("d", 0, 1, 2, false),
            ("e", 0, 1, 3, true),
        ]
    );
    let names: Vec<&str> = file.jobs[..3]
        .iter()
        .map(|j| j.filenames[0].as_str())
        .collect();
    assert_eq!(names, vec!["a.0.0", "a.1.0", "a.2.0"]);
}

// A stonewall on the first job does not start a new group; clones never do.
#[test]
fn first_job_stonewall_stays_in_group_zero() {
    let file = parse("[a]\nstonewall\nnumjobs=2\n[b]\n").unwrap();
    let groups: Vec<u32> = file.jobs.iter().map(|j| j.group_id).collect();
    assert_eq!(groups, vec![0, 0, 0]);
    assert!(file.jobs[0].stonewall);
    assert!(!file.jobs[1].stonewall);
    // A global stonewall applies to every job: each after the first opens a group.
    let file = parse("[global]\nstonewall\n[a]\n[b]\n[c]\n").unwrap();
    let groups: Vec<u32> = file.jobs.iter().map(|j| j.group_id).collect();
    assert_eq!(groups, vec![0, 1, 2]);
}

// Explicit, split, escaped, formatted, per-directory and per-clone file names.
#[test]
fn file_names() {
    let spec = job("[j]\nfilename=/dev/sdb:/dev/sdc\n");
    assert_eq!(spec.filenames, vec!["/dev/sdb", "/dev/sdc"]);
    let spec = job("[j]\nfilename=a\\:b\n");
    assert_eq!(spec.filenames, vec!["a:b"]);
    let file = parse("[j]\ndirectory=/x:/y\nnumjobs=3\nnrfiles=2\n").unwrap();
    let names: Vec<Vec<String>> = file.jobs.iter().map(|j| j.filenames.clone()).collect();
    assert_eq!(
        names,
        vec![
            vec!["/x/j.0.0".to_string(), "/x/j.0.1".to_string()],
            vec!["/y/j.1.0".to_string(), "/y/j.1.1".to_string()],
            vec!["/x/j.2.0".to_string(), "/x/j.2.1".to_string()],
        ]
    );
    let file = parse("[j]\nfilename_format=data.$jobnum\nnumjobs=2\n").unwrap();
    assert_eq!(file.jobs[1].filenames, vec!["data.1"]);
    // Clones share explicit files.
    let file = parse("[j]\nfilename=/dev/sdb\nnumjobs=2\n").unwrap();
    assert_eq!(file.jobs[1].filenames, vec!["/dev/sdb"]);
    // A section named after a device is that device.
    assert_eq!(job("[/dev/sdd]\n").filenames, vec!["/dev/sdd"]);
    // fio adds a job's filename to a global one rather than replacing it.
    let spec = job("[global]\nfilename=/dev/sda\n[j]\nfilename=/dev/sdb\n");
    assert_eq!(spec.filenames, vec!["/dev/sda", "/dev/sdb"]);
}

// name= changes the reported name; default file and log names follow fio's rules.
#[test]
fn name_option_renames_the_job_but_not_its_files() {
    let spec = job("[section]\nname=shown\nwrite_lat_log\n");
    assert_eq!(spec.name, "shown");
    assert_eq!(spec.filenames, vec!["section.0.0"]);
    assert_eq!(spec.write_lat_log.as_deref(), Some("shown"));
    // fio ignores a global name.
    assert_eq!(job("[global]\nname=x\n[j]\n").name, "j");
}

// Per-direction bs, bsrange and bssplit precedence, and blockalign's effect.
#[test]
fn block_sizes() {
    let spec = job("[j]\nbs=4k,64k\n");
    assert_eq!(
        spec.bs,
        [
            BlockSize::Fixed(4096),
            BlockSize::Fixed(65536),
            BlockSize::Fixed(65536)
        ]
    );
    let spec = job("[j]\nbs=,8k\n");
    assert_eq!(spec.bs[0], BlockSize::Fixed(4096));
    assert_eq!(spec.bs[1], BlockSize::Fixed(8192));
    let spec = job("[j]\nbsrange=1k-4k,2k-8k\nbs=16k\n");
    assert_eq!(
        spec.bs[0],
        BlockSize::Range {
            min: 1024,
            max: 4096
        }
    );
    assert_eq!(
        spec.bs[1],
        BlockSize::Range {
            min: 2048,
            max: 8192
        }
    );
    assert_eq!(
        spec.bs[2],
        BlockSize::Range {
            min: 2048,
            max: 8192
        }
    );
    let spec = job("[j]\nbssplit=4k/10:64k/50:32k/40\nbsrange=1k-2k\n");
    assert_eq!(
        spec.bs[0],
        BlockSize::Split(vec![(4096, 10), (65536, 50), (32768, 40)])
    );
    assert_eq!(spec.blockalign, [4096; 3]);
    let spec = job("[j]\nrw=randread\nbs=8k\nblockalign=4k\n");
    assert_eq!(spec.blockalign, [4096; 3]);
    assert!(
        spec.norandommap,
        "fio turns the random map off for blockalign"
    );
    // blockalign applies to random I/O only.
    let spec = job("[j]\nrw=read\nbs=8k\nba=4k\n");
    assert_eq!(spec.blockalign, [8192; 3]);
    assert!(!spec.norandommap);
}

// rw postfixes, rwmixwrite, distributions and seeds.
#[test]
fn access_patterns() {
    let spec = job("[j]\nrw=randread:8\n");
    assert_eq!(
        (spec.rw, spec.rw_sequencer_nr, spec.rw_skip_bytes),
        (RwMode::RandRead, 8, 0)
    );
    let spec = job("[j]\nrw=write:4k\n");
    assert_eq!(
        (spec.rw, spec.rw_sequencer_nr, spec.rw_skip_bytes),
        (RwMode::Write, 1, 4096)
    );
    let spec = job("[j]\nrw=read:-8k\n");
    assert_eq!(
        (spec.rw, spec.rw_sequencer_nr, spec.rw_skip_bytes),
        (RwMode::Read, 1, -8192)
    );
    assert_eq!(job("[j]\nrw=randrw\nrwmixwrite=30\n").rwmixread, 70);
    let spec = job("[j]\nrw=randread\nrandom_distribution=zipf:1.2\n");
    assert_eq!(spec.random_distribution, RandomDistribution::Zipf(1.2));
    assert!(spec.norandommap);
    let spec = job("[j]\nrandseed=42\n");
    assert_eq!(spec.randseed, Some(42));
    assert!(!spec.randrepeat);
    assert!(error("[j]\nrw=randread:8\nrw_sequencer=identical\n").contains("identical"));
}

// Each time option with its default unit, thinktime_spin capped, startdelay ranges.
#[test]
fn times() {
    let spec = job(
        "[j]\nruntime=1m\ntime_based\nramp_time=500ms\nstartdelay=1-5\nthinktime=100\n\
         thinktime_spin=1s\nthinktime_blocks=4\n",
    );
    assert_eq!(spec.runtime, Some(60 * SECOND));
    assert!(spec.time_based);
    assert_eq!(spec.ramp_time, SECOND / 2);
    assert_eq!(spec.startdelay, (SECOND, 5 * SECOND));
    assert_eq!(spec.thinktime, 100_000);
    assert_eq!(spec.thinktime_spin, 100_000, "capped at thinktime");
    assert_eq!(spec.thinktime_blocks, 4);
    assert_eq!(job("[j]\ntimeout=10\n").runtime, Some(10 * SECOND));
    assert_eq!(
        job("[j]\nstartdelay=3\n").startdelay,
        (3 * SECOND, 3 * SECOND)
    );
}

// rate and rate_iops per direction, and their exclusion.
#[test]
fn rates_per_direction() {
    let spec = job("[j]\nrate=1m,500k\n");
    assert_eq!(spec.rate, [MIB, 500 * 1024, 500 * 1024]);
    let spec = job("[j]\nrate=500k,\n");
    assert_eq!(spec.rate, [500 * 1024, 0, 0]);
    let spec = job("[j]\nrate_iops=,200\n");
    assert_eq!(spec.rate_iops, [0, 200, 200]);
    assert!(error("[j]\nrate=1m\nrate_iops=100\n").contains("mutually exclusive"));
}

// prioclass/prio combine as fio's ioprio_value: no class means best effort.
#[test]
fn priorities() {
    let rt = |level| IoPrio::new(IoPrioClass::Rt, level).unwrap();
    assert_eq!(job("[j]\nprioclass=1\nprio=2\n").prio, rt(2));
    assert_eq!(
        job("[j]\nprio=3\n").prio,
        IoPrio::new(IoPrioClass::Be, 3).unwrap()
    );
    assert_eq!(
        job("[j]\nprioclass=3\n").prio,
        IoPrio::new(IoPrioClass::Idle, 0).unwrap()
    );
    assert_eq!(
        job("[j]\nprioclass=0\nprio=1\n").prio,
        IoPrio::new(IoPrioClass::Be, 1).unwrap()
    );
    assert_eq!(job("[j]\n").prio, IoPrio::NONE);
}

// Engine families, issue options, and engine options tied to their engine.
#[test]
fn engines_and_issue_options() {
    let spec = job("[j]\nioengine=libaio\niodepth=32\ndirect=1\nfsync=8\nend_fsync=1\nsync=1\n");
    assert_eq!(
        spec.engine,
        Engine::Async {
            name: "libaio".into()
        }
    );
    assert_eq!(spec.iodepth, 32);
    assert!(spec.direct && spec.end_fsync && spec.sync_writes);
    assert_eq!(spec.fsync_every, 8);
    assert!(job("[j]\nbuffered=0\n").direct);
    assert_eq!(
        job("[j]\nioengine=pvsync2\n").engine,
        Engine::Sync {
            name: "pvsync2".into()
        }
    );
    let message = error("[j]\nioengine=mmap\n");
    assert_eq!(
        message,
        "t.fio:2: ioengine \"mmap\": refused: iosched runs the sync (sync, psync, vsync, \
         pvsync, pvsync2), async (libaio, io_uring, posixaio) and null engines"
    );
    assert_eq!(job("[j]\nioengine=null\n").engine, Engine::Null);
    // An engine's options belong to that engine.
    assert!(parse("[j]\nioengine=io_uring\nhipri\nfixedbufs\n").is_ok());
    assert!(error("[j]\nhipri\n").starts_with("t.fio:2: hipri: an option of the"));
}

// The remaining honoured fields, each from its option.
#[test]
fn other_fields() {
    let spec = job(
        "[j]\ncgroup=fast\ncgroup_weight=500\nioscheduler=mq-deadline\ndescription=demo\n\
         group_reporting\nwrite_bw_log=bw\nlog_avg_msec=1000\npercentile_list=50:99\n\
         clat_percentiles=0\nloops=0\noffset=10%\noffset_increment=1m\nio_size=2g\nsize=20%\n",
    );
    assert_eq!(spec.cgroup, "/fast");
    assert_eq!(spec.cgroup_weight, Some(500));
    assert_eq!(spec.ioscheduler.as_deref(), Some("mq-deadline"));
    assert_eq!(spec.description.as_deref(), Some("demo"));
    assert!(spec.group_reporting);
    assert_eq!(spec.write_bw_log.as_deref(), Some("bw"));
    assert_eq!(spec.log_avg_msec, 1000);
    assert_eq!(spec.percentile_list, vec![50.0, 99.0]);
    assert!(!spec.clat_percentiles);
    assert_eq!(spec.loops, 1);
    assert_eq!(spec.offset, Amount::Percent(10.0));
    assert_eq!(spec.offset_increment, MIB);
    assert_eq!(spec.io_size, Some(2048 * MIB));
    assert_eq!(spec.size, Some(Amount::Percent(20.0)));
}

// filesize, fill_device and size checks.
#[test]
fn file_sizes() {
    assert_eq!(
        job("[j]\nfilesize=1g\nnrfiles=2\n").size,
        Some(Amount::Bytes(2048 * MIB))
    );
    assert!(error("[j]\nfilesize=1g-2g\n").contains("range"));
    // With filesize, size is only the I/O to do: files of 1 GiB, 5 GiB of I/O over them.
    let spec = job("[j]\nfilesize=1g\nsize=5g\nnrfiles=2\n");
    assert_eq!(
        (spec.size, spec.io_size),
        (Some(Amount::Bytes(2 << 30)), Some(5 << 30))
    );
    assert!(error("[j]\nfilesize=1g\nsize=50%\n").contains("together with size as a percentage"));
    assert_eq!(job("[j]\nfill_device=1\n").size, None);
    assert!(error("[j]\nfill_device=1\nsize=1g\n").contains("fill_device"));
    assert!(error("[j]\nsize=1k\nbs=4k\n").contains("smaller than the minimum block size"));
    assert_eq!(
        job("[j]\nsize=0\n").size,
        None,
        "fio reads size=0 as not set"
    );
}

// Options without meaning in simulation are accepted with a note saying why.
#[test]
fn notes_for_options_without_effect() {
    let file = parse("[global]\ncpus_allowed=0-3\ndirect=1\n[a]\n[b]\nrefill_buffers\n").unwrap();
    let notes: Vec<String> = file.notes.iter().map(|n| n.to_string()).collect();
    assert_eq!(
        notes,
        vec![
            "t.fio:2: note: cpus_allowed: no meaning in simulation: CPU placement and process \
             attributes do not affect simulated I/O",
            "t.fio:6: note: refill_buffers: no meaning in simulation: no data is transferred, so \
             buffer contents and compressibility do not apply",
        ]
    );
}

#[test]
fn notes_that_depend_on_the_job() {
    let note_for = |text: &str, option: &str| -> Option<String> {
        let file = parse(text).unwrap();
        file.notes
            .iter()
            .find(|n| n.option == option)
            .map(|n| n.to_string())
    };
    // Buffered reads and writes go through the page cache: nothing to note.
    assert!(note_for("[j]\n", "direct").is_none());
    assert!(note_for("[j]\nrw=write\n", "direct").is_none());
    assert!(note_for("[j]\nrw=randrw\ndirect=0\n", "direct").is_none());
    assert!(note_for("[j]\nrw=write\ndirect=1\n", "direct").is_none());
    assert!(note_for("[j]\niodepth=8\ndirect=1\n", "iodepth").is_some());
    assert!(note_for("[j]\nioengine=libaio\niodepth=8\n", "iodepth").is_none());
    assert!(note_for("[j]\ntime_based\n", "time_based").is_some());
    assert!(!job("[j]\ntime_based\n").time_based);
}

// verify is resolved for the engine to decide on: the method as written, do_verify and where.
#[test]
fn verify_is_resolved_for_the_engine() {
    let verify = job("[j]\nrw=write\nverify=md5\n").verify.unwrap();
    assert_eq!(verify.method, "md5");
    assert!(verify.do_verify);
    assert_eq!(verify.location.to_string(), "t.fio:3");
    assert!(
        !job("[j]\nverify=crc32c\ndo_verify=0\n")
            .verify
            .unwrap()
            .do_verify
    );
    assert_eq!(job("[j]\nverify=0\n").verify, None);
    assert!(error("[j]\nverify=nosuch\n").contains("verify"));
}

// cmdprio_percentage, cmdprio_class and cmdprio give a share of reads and writes another
// priority (RT 0 unless set), per direction as fio's `,` forms; they are options of the
// libaio and io_uring engines only, and out-of-range values are refused.
#[test]
fn cmdprio_options_per_direction() {
    use crate::CmdPrio;
    let rt0 = IoPrio::new(IoPrioClass::Rt, 0).unwrap();
    let spec = job("[j]\nioengine=libaio\ncmdprio_percentage=30\n");
    let share = Some(CmdPrio::percentage(30, rt0));
    assert_eq!(spec.cmdprio, [share.clone(), share]);
    let spec =
        job("[j]\nioengine=io_uring\ncmdprio_percentage=10,50\ncmdprio_class=1,3\ncmdprio=4,0\n");
    assert_eq!(
        spec.cmdprio,
        [
            Some(CmdPrio::percentage(
                10,
                IoPrio::new(IoPrioClass::Rt, 4).unwrap()
            )),
            Some(CmdPrio::percentage(
                50,
                IoPrio::new(IoPrioClass::Idle, 0).unwrap()
            )),
        ]
    );
    let spec = job("[j]\nioengine=libaio\ncmdprio_percentage=,25\n");
    assert_eq!(spec.cmdprio[0], None);
    assert_eq!(
        spec.cmdprio[1].as_ref().map(|c| c.shares[0].percentage),
        Some(25)
    );
    assert!(error("[j]\nioengine=psync\ncmdprio_percentage=10\n").contains("libaio"));
    assert!(error("[j]\nioengine=libaio\ncmdprio_percentage=101\n").contains("cmdprio_percentage"));
    assert!(error("[j]\nioengine=libaio\ncmdprio_class=4\n").contains("cmdprio_class"));
    assert!(error("[j]\nioengine=libaio\ncmdprio=8\n").contains("cmdprio"));
}

// cmdprio_bssplit in fio's three forms (examples/cmdprio-bssplit.fio): shares per block size
// with the cmdprio_* priority, or each entry's own class/level[/hint]; 0% entries dropped;
// exclusive with cmdprio_percentage; bad entries refused with the option named.
#[test]
fn cmdprio_bssplit_forms() {
    use crate::{CmdPrio, CmdPrioShare};
    let share =
        |size: u64, percentage: u8, class: IoPrioClass, level: u8, hint: u16| CmdPrioShare {
            block_size: Some(size),
            percentage,
            prio: IoPrio::new(class, level).unwrap().with_hint(hint).unwrap(),
        };
    let spec = job(
        "[j]\nioengine=libaio\nrw=randrw\nbssplit=64k/40:1024k/60,1024k/100\n\
         cmdprio_bssplit=64k/100:1024k/0,1024k/0\ncmdprio_class=1\ncmdprio=0\n",
    );
    assert_eq!(
        spec.cmdprio,
        [
            Some(CmdPrio {
                shares: vec![share(65536, 100, IoPrioClass::Rt, 0, 0)]
            }),
            None
        ]
    );
    let spec = job("[j]\nioengine=libaio\nrw=randread\nbssplit=1M/40:2M/60\n\
         cmdprio_bssplit=2M/10/2/0/3:1M/10/2/0/1:1M/30/2/0/2:1M/60/2/0/0\n");
    let read = spec.cmdprio[0].clone().unwrap();
    let be = IoPrioClass::Be;
    assert_eq!(
        read.shares,
        vec![
            share(1 << 20, 10, be, 0, 1),
            share(1 << 20, 30, be, 0, 2),
            share(1 << 20, 60, be, 0, 0),
            share(2 << 20, 10, be, 0, 3),
        ]
    );
    // The draw walks the shares of the I/O's size in order.
    assert_eq!(read.pick(1 << 20, 9).map(|p| p.hint()), Some(1));
    assert_eq!(read.pick(1 << 20, 10).map(|p| p.hint()), Some(2));
    assert_eq!(read.pick(2 << 20, 9).map(|p| p.hint()), Some(3));
    assert_eq!(read.pick(2 << 20, 10), None);
    assert!(!read.applies_to(4096));
    let both = "[j]\nioengine=libaio\ncmdprio_percentage=5\ncmdprio_bssplit=4k/10\n";
    assert!(error(both).contains("mutually exclusive"));
    assert!(error("[j]\nioengine=libaio\ncmdprio_bssplit=4k/60:4k/50\n").contains("more than 100"));
    assert!(error("[j]\nioengine=libaio\ncmdprio_bssplit=4k/10/1\n").contains("cmdprio_bssplit"));
    assert!(error("[j]\nioengine=libaio\ncmdprio_bssplit=4k/10/4/0\n").contains("class 4"));
    assert!(error("[j]\nioengine=psync\ncmdprio_bssplit=4k/10\n").contains("libaio"));
}

// priohint and cmdprio_hint put a hint in the priority (bits 3..13), as fio 3.36+.
#[test]
fn priority_hints() {
    let spec = job("[j]\nprioclass=2\nprio=1\npriohint=3\n");
    assert_eq!(spec.prio.to_raw(), (2 << 13) | (3 << 3) | 1);
    let spec = job("[j]\nioengine=io_uring\ncmdprio_percentage=20\ncmdprio_hint=2,0\n");
    let read = spec.cmdprio[0].clone().unwrap();
    assert_eq!(read.shares[0].prio.duration_limit(), Some(2));
    assert_eq!(spec.cmdprio[1].clone().unwrap().shares[0].prio.hint(), 0);
    assert!(error("[j]\npriohint=1024\n").contains("priohint"));
}

// Refused options fail with the option, value and reason.
#[test]
fn refusals_name_the_option_and_reason() {
    assert!(error("[j]\nzonemode=zbd\n").starts_with(
        "t.fio:2: Specifying the zone size is mandatory for regular file/block device with \
         --zonemode=zbd"
    ));
    assert!(error("[j]\nzonemode=zbd\nzonesize=1m\nzonerange=2m\n").contains("identical"));
    assert!(error("[j]\nzonemode=zbd\nzonesize=1m\nrw=trim\n").contains("trims"));
    let zoned = job("[j]\nzonemode=zbd\nzonesize=256m\nmax_open_zones=32\nzonecapacity=200m\n");
    let zbd = zoned.zbd.expect("zonemode=zbd");
    assert_eq!(
        (zbd.zone_size, zbd.zone_capacity, zbd.max_open_zones),
        (256 << 20, 200 << 20, 32)
    );
    assert!(error("[j]\nzonemode=strided\n").contains("--zonesize must be specified"));
    assert!(error("[j]\nzonesize=1m\n").contains("not compatible"));
    assert!(
        error("[j]\nss_dur=3\nss_interval=2\n").contains("multiple of steadystate_check_interval")
    );
    assert!(error("[j]\nss=iops\nss_dur=5\n").contains("no limit"));
    assert!(error("[j]\nss=lat:1%\nss_dur=5\n").contains("criterion is one of"));
    assert!(job("[j]\nrate_process=poisson\n").rate_poisson);
    assert!(error("[j]\nflow=-1\n").contains("weight since fio 3.23"));
    assert!(error("[j]\nrwmixcycle=10\n").contains("no longer accepts"));
    assert!(error("[j]\nhostname=x\n").contains("engine the simulator does not run"));
    assert!(error("[j]\nmerge_blktrace_file=m.bin\n").contains("merge_blktrace_file"));
    assert!(error("[j]\nioengine=libaio\niodepth=32\niodepth_low=8\n").contains("iodepth_low"));
}

// Each class of error names the problem and file:line.
#[test]
fn errors_name_the_problem_and_line() {
    assert!(error("[j]\nfoo=1\n").starts_with("t.fio:2: unknown option \"foo\""));
    assert_eq!(
        error("[j]\nzzzzzzzz=1\n"),
        "t.fio:2: unknown option \"zzzzzzzz\""
    );
    assert_eq!(
        error("[j]\niodpeth=4\n"),
        "t.fio:2: unknown option \"iodpeth\" (did you mean \"iodepth\"?)"
    );
    assert_eq!(
        error("[j]\n\nbs=4q\n"),
        "t.fio:3: bs: bad size \"4q\": unknown suffix \"q\""
    );
    assert_eq!(
        error("[j]\nsize=-1\n"),
        "t.fio:2: size: bad size \"-1\": negative"
    );
    assert_eq!(
        error("[j]\nbs=0\n"),
        "t.fio:2: bs: 0 is out of range (minimum 1)"
    );
    assert_eq!(
        error("[j]\nprio=9\n"),
        "t.fio:2: prio: 9 is out of range (0 to 7)"
    );
    assert_eq!(
        error("[j]\nrwmixread=101\n"),
        "t.fio:2: rwmixread: 101 is out of range (maximum 100)"
    );
    assert_eq!(
        error("[j]\nblocksize=1x\n"),
        "t.fio:2: blocksize (bs): bad size \"1x\": unknown suffix \"x\""
    );
    assert!(error("bs=4k\n[j]\n").starts_with("t.fio:1: \"bs=4k\" is outside any [section]"));
    assert!(error("[job\n").starts_with("t.fio:1: malformed section header"));
    assert!(error("[j]\nnumjobs=0\n").contains("at least 1"));
    assert!(error("[j]\nruntime=10sec\n").contains("write \"s\""));
    assert!(error("[j]\ndirect=yes\n").contains("0 or 1"));
    assert!(error("[j]\nRW=read\n").contains("unknown option \"RW\""));
    assert_eq!(
        error("[global]\nbs=4k\n"),
        "t.fio: no jobs defined (fio needs at least one job section)"
    );
}

// Included lines join the including section and keep their own locations.
#[test]
fn includes_bring_options_into_the_section() {
    let files = [("common.fio", "ioengine=libaio\niodepth=16\n")];
    let file = parse_files("[global]\ninclude common.fio\n[j]\nrw=randread\n", &files).unwrap();
    assert_eq!(
        file.jobs[0].engine,
        Engine::Async {
            name: "libaio".into()
        }
    );
    assert_eq!(file.jobs[0].iodepth, 16);
    let files = [("bad.fio", "\nbs=4q\n")];
    let message = parse_files("[j]\ninclude bad.fio\n", &files)
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "bad.fio:2: bs: bad size \"4q\": unknown suffix \"q\""
    );
}

// The job count is bounded as fio bounds it.
#[test]
fn total_jobs_are_bounded() {
    assert!(error("[j]\nnumjobs=5000\n").contains("more than 4096 jobs"));
    assert!(parse("[j]\nnumjobs=4096\n").is_ok());
}

// JobSpec::new's defaults are fio's: every honoured option set to the default fio's own option
// table gives (generated from options.c) resolves to exactly JobSpec::new.
#[test]
fn job_spec_defaults_match_fio_option_table() {
    let names = [
        "rw",
        "bs",
        "ioengine",
        "iodepth",
        "rwmixread",
        "direct",
        "buffered",
        "numjobs",
        "randrepeat",
        "loops",
        "thinktime",
        "thinktime_spin",
        "thinktime_blocks",
        "offset",
        "offset_increment",
        "startdelay",
        "runtime",
        "fsync",
        "fdatasync",
        "sync",
        "end_fsync",
        "clat_percentiles",
        "lat_percentiles",
        "percentile_list",
        "log_avg_msec",
        "kb_base",
        "random_distribution",
        "fill_device",
        "verify",
        "do_verify",
    ];
    let mut text = String::from("[job]\n");
    for name in names {
        let default = table::find(name)
            .and_then(|option| option.default)
            .unwrap_or_else(|| panic!("{name} has no default in fio's table"));
        text.push_str(&format!("{name}={default}\n"));
    }
    let mut spec = job(&text);
    spec.options.clear();
    let mut expected = JobSpec::new("job");
    expected.location = spec.location.clone();
    assert_eq!(spec, expected);
}

// fio swaps a range written high-low (parse.c), for bsrange and startdelay alike.
#[test]
fn reversed_ranges_are_swapped() {
    let spec = job("[j]\nbsrange=8k-4k\nstartdelay=5-1\n");
    assert_eq!(
        spec.bs[0],
        crate::BlockSize::Range {
            min: 4096,
            max: 8192
        }
    );
    assert_eq!(spec.startdelay, (1_000_000_000, 5_000_000_000));
}

// Regression (issue 11, item 4): an include tree that fans out (each file including the next
// sixteen times, six levels: 2^24 lines) is refused at the stated limit, quickly, instead of
// being expanded.
#[test]
fn include_fan_out_is_bounded() {
    let names: Vec<String> = (0..7).map(|level| format!("f{level}.fio")).collect();
    let mut files: Vec<(String, String)> = Vec::new();
    for level in 0..6 {
        files.push((
            names[level].clone(),
            format!("include {}\n", names[level + 1]).repeat(16),
        ));
    }
    files.push((names[6].clone(), "bs=4k\n".into()));
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let error = parse_files("[job]\nsize=1m\ninclude f0.fio\n", &borrowed).unwrap_err();
    assert!(
        error.message.contains(&format!(
            "more than {} includes",
            iosched_core::limits::INCLUDES_MAX
        )),
        "{error}"
    );
    assert!(error.location.is_some(), "{error}");
}

// Regression (issue 11, item 4): reading stops at the limit, so an endless file such as
// /dev/zero is refused instead of read without end; a directory is refused by name.
#[test]
fn reading_is_bounded() {
    let error = super::read_text_file(Path::new("/dev/zero"), "job file", 1 << 20).unwrap_err();
    assert_eq!(
        error.message,
        "job file \"/dev/zero\" is larger than 1048576 bytes (iosched's limit)"
    );
    let error = super::read_text_file(Path::new("/"), "groups file", 1 << 20).unwrap_err();
    assert!(error.message.contains("is a directory"), "{error}");
}

// Regression (issue 11, item 6): one byte that is not UTF-8 is reported at its line and
// column, instead of rejecting the file without a place.
#[test]
fn invalid_utf8_names_line_and_column() {
    let dir = std::env::temp_dir().join(format!("iosched-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("job.fio");
    std::fs::write(&path, b"[job]\nsize=1m\n; caf\xe9\n").unwrap();
    let error = super::parse_file(&path).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    let text = error.to_string();
    assert!(
        text.contains("job.fio:3: byte 0xe9 at column 6 is not UTF-8"),
        "{text}"
    );
}

// Regression (issue 11, item 2): times and sizes past iosched's limits are refused at their
// line, naming the option and the limit, so no engine ever adds two of them and wraps.
#[test]
fn times_and_sizes_are_checked_against_the_limits() {
    let error = parse("[job]\nsize=1m\nthinktime=18446744073709551\n").unwrap_err();
    assert_eq!(error.location.as_ref().unwrap().line, 3);
    assert!(error.message.starts_with("thinktime: "), "{error}");
    assert!(error.message.contains("365 days"), "{error}");
    for line in [
        "runtime=400d",
        "startdelay=1-400d",
        "size=2e",
        "bs=2048p",
        "offset=2048p",
        "rate=2048p",
        "bsrange=4k-2048p",
        "iodepth=65537",
    ] {
        let text = format!("[job]\nsize=1m\nioengine=libaio\n{line}\n");
        let error = parse(&text).unwrap_err();
        assert_eq!(error.location.as_ref().unwrap().line, 4, "{line}: {error}");
        assert!(
            error.message.contains("limit") || error.message.contains("suffix"),
            "{line}: {error}"
        );
    }
    // The limits themselves are accepted, and seeds may be any 64-bit value.
    job("[job]\nsize=1m\nthinktime=365d\nrandseed=18446744073709551615\n");
    job("[job]\nsize=1024p\n");
}

// continue_on_error and ignore_error as fio reads them: kinds by name or 0/1, errno lists per
// kind by name or number; unknown names are refused with the option named.
#[test]
fn error_handling_options() {
    use crate::ErrorKind;
    let spec = job("[j]\ncontinue_on_error=io\nignore_error=ETIME:EIO,28\n");
    assert_eq!(spec.errors.continue_on, 3);
    assert!(spec.errors.non_fatal(ErrorKind::Read, 62));
    assert!(!spec.errors.non_fatal(ErrorKind::Read, 84));
    assert!(spec.errors.non_fatal(ErrorKind::Write, 28));
    assert!(
        !spec.errors.non_fatal(ErrorKind::Verify, 84),
        "verify is not in io"
    );
    let spec = job("[j]\ncontinue_on_error=1\n");
    assert!(spec.errors.non_fatal(ErrorKind::Verify, 84));
    assert!(
        !spec.errors.non_fatal(ErrorKind::Read, 62),
        "ETIME is not in fio's default list"
    );
    assert!(!job("[j]\n").errors.non_fatal(ErrorKind::Read, 5));
    assert!(error("[j]\nignore_error=EBOGUS\n").contains("ignore_error"));
    assert!(error("[j]\nignore_error=1,2,3,4\n").contains("ignore_error"));
}

// iosched's qos_* options: read with units into the job's QoS, inherited from [global] like
// any option, each job (and clone) keeping its own; a bad value names the line, the job, the
// option and why; a typo is suggested.
#[test]
fn qos_options_read_into_the_job() {
    use iosched_core::qos::{Amount as Burst, Rate};
    let file = parse(
        "[global]\nqos_delay=100ms\n[app1]\nqos_rate=8800KiB/s\nqos_burst=64KiB\n\
         [app2]\nnumjobs=2\nqos_reservation=100iops\nqos_weight=3\nqos_limit=250iops\n",
    )
    .unwrap();
    let app1 = &file.jobs[0].qos;
    assert_eq!(app1.rate, Some(Rate::Bytes(8800 * 1024)));
    assert_eq!(app1.burst, Some(Burst::Bytes(65536)));
    assert_eq!(app1.delay, Some(100 * 1_000_000));
    for clone in &file.jobs[1..] {
        assert_eq!(clone.qos.reservation, Some(Rate::Iops(100)));
        assert_eq!(clone.qos.weight, Some(3));
        assert_eq!(clone.qos.limit, Some(Rate::Iops(250)));
        assert_eq!(clone.qos.delay, Some(100 * 1_000_000), "from [global]");
    }
    assert!(!job("[plain]\n").qos.is_set());
    assert_eq!(
        error("[a]\nqos_reservation=100iops\nqos_limit=50iops\n"),
        "t.fio:3: job \"a\": qos_limit=50iops: the limit 50iops is below the reservation 100iops"
    );
    assert_eq!(
        error("[a]\nqos_rate=-5KiB/s\n"),
        "t.fio:2: job \"a\": qos_rate=-5KiB/s: -5: must be positive"
    );
    assert!(error("[a]\nqos_weight=0\n").contains("weight 0 is outside 1..=10000"));
    assert!(error("[a]\nqos_delay=0\n").contains("qos_delay=0: 0: must be positive"));
    assert!(error("[a]\nqos_rte=5iops\n").contains("did you mean \"qos_rate\""));
}

// Proves a profile's option (tiobench's `threads`, act's `threads-per-queue`) is accepted with a
// note, as fio accepts it in any job (its profiles add their options at start): fio's own
// examples steadystate.fio and waitfor.fio set `threads=1`.
#[test]
fn profile_options_are_accepted_with_a_note() {
    let file = parse("[a]\nthreads=1\nthreads-per-queue=4\nrw=read\nsize=4k\n").unwrap();
    for option in ["threads", "threads-per-queue"] {
        let note = file.notes.iter().find(|n| n.option == option).unwrap();
        assert!(note.message.contains("--profile"), "{}", note.message);
    }
}

// read_iolog and the replay_* options read as fio documents them, with iosched's trace options;
// bad values name the option and the line.
#[test]
fn replay_options_read_as_fio_documents_them() {
    use crate::trace::{Format, ReplayMode};
    let spec = job(
        "[j]\nread_iolog=t.log\nreplay_no_stall=1\nreplay_time_scale=200\n\
                    replay_scale=8\nreplay_align=4096\nreplay_redirect=/dev/sdb\n\
                    replay_skip=write,trim\niolog_format=msr\niolog_flow=disk:web_0\n\
                    replay_mode=closed\n",
    );
    let replay = spec.replay.expect("a replay");
    assert_eq!(replay.path, "t.log");
    assert!(replay.no_stall);
    assert_eq!(replay.time_scale, 200);
    assert_eq!(replay.scale, 8);
    assert_eq!(replay.align, 4096);
    assert_eq!(replay.redirect.as_deref(), Some("/dev/sdb"));
    assert_eq!(replay.skip, [false, true, true, false]);
    assert_eq!(replay.format, Some(Format::Msr));
    assert_eq!(replay.flow.as_deref(), Some("disk:web_0"));
    assert_eq!(replay.mode, ReplayMode::Closed);
    assert_eq!(
        job("[j]\nwrite_iolog=out.log\n").write_iolog.as_deref(),
        Some("out.log")
    );
    assert!(job("[j]\n").replay.is_none());
    assert!(error("[j]\nread_iolog=t.log\nreplay_align=3000\n")
        .starts_with("t.fio:3: replay_align=3000: a power of 2"));
    assert!(error("[j]\nread_iolog=t.log\nreplay_skip=reads\n")
        .contains("\"reads\" is not read, write, trim or sync"));
    assert!(
        error("[j]\nread_iolog=t.log\niolog_format=csv\n").contains("unknown trace format \"csv\"")
    );
    assert!(error("[j]\nread_iolog=t.log\nreplay_mode=later\n").contains("fio, open or closed"));
    assert!(error("[j]\niolog_flow=pid:1\n").contains("applies only with read_iolog"));
    let both = job("[j]\nread_iolog=t.log\nwrite_iolog=u.log\n");
    assert!(both.replay.is_some() && both.write_iolog.is_some());
}

//! What iosched does with each of fio's options: honour it, accept it with a note, or refuse it.
//!
//! Every option in [`super::fio_options`] has exactly one disposition (a test checks it):
//!
//! - **Honoured**: [`super::resolve`] maps it onto a [`crate::JobSpec`] field (a few of these
//!   are honoured for some values and noted or refused for others; `resolve` says which).
//! - **Noted**: it has no meaning in a simulation; the job runs and a [`crate::Note`] says why
//!   the option did nothing, so that nothing is silently ignored.
//! - **Refused unless default**: at fio's default it changes nothing, so it is accepted; any
//!   other value would change what fio does in a way the simulator cannot reproduce, so it is a
//!   parse error naming the option and the reason.
//! - **Refused**: any use is such an error.
//!
//! The reasons are written once per class of option below. Options of the engines the
//! simulator does not run, and options of fio's profiles, are refused by rule.

#[cfg(test)]
use super::table;
use super::table::{FioOption, Scope};
use std::collections::HashMap;
use std::sync::OnceLock;

/// What happens to one option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Disposition {
    /// Mapped onto the job by `resolve`.
    Honoured,
    /// Accepted; a note gives this reason.
    Noted(&'static str),
    /// Accepted at fio's default; otherwise an error with this reason.
    RefusedUnlessDefault(&'static str),
    /// An error with this reason whenever set.
    Refused(&'static str),
}

use Disposition::{Honoured, Noted, Refused, RefusedUnlessDefault};

/// The engines whose I/O the simulator reproduces: one I/O at a time.
pub(super) const SYNC_ENGINES: [&str; 5] = ["sync", "psync", "vsync", "pvsync", "pvsync2"];
/// The engines whose I/O the simulator reproduces: up to `iodepth` in flight.
pub(super) const ASYNC_ENGINES: [&str; 3] = ["libaio", "io_uring", "posixaio"];

const CPU_AND_PROCESS: &str =
    "no meaning in simulation: CPU placement and process attributes do not affect simulated I/O";
const MEMORY: &str = "no meaning in simulation: I/O buffers are not allocated";
const DATA: &str = "no meaning in simulation: no data is transferred, so buffer contents and \
                    compressibility do not apply";
const VERIFY_VARIANTS: &str = "accepted without effect: iosched reads back after the writes (as \
                               fio without verify_backlog) and checks each block whole, the \
                               same way whatever the pattern, interval or dump settings";
const FILE_SETUP: &str = "no meaning in simulation: files are regions of the simulated device, \
                          there is no file system to create, lay out or remove them in";
const PAGE_CACHE: &str = "accepted without effect: the page cache does not model uncached \
                          (RWF_DONTCACHE) buffered I/O";
const CLOCK: &str = "no meaning in simulation: time is simulated and every latency is measured";
const REPORTING: &str = "accepted without effect: iosched's reports and logs do not offer this \
                         fio reporting variant";
const ERRORS: &str = "accepted without effect: iosched writes no error dump";
const SUBMISSION: &str = "no meaning in simulation: how the engine batches, polls or registers \
                          its system calls does not change the I/O the device sees";
const COMMANDS: &str = "not run in simulation: iosched does not execute commands from job files";
const CGROUP_CLEANUP: &str = "no meaning in simulation: simulated cgroups are not created on \
                              the host";
const RANDOM_GENERATOR: &str = "accepted without effect: the simulator draws offsets from its \
                                own seeded generator, so fio's generator choice does not apply";
const RANDOM_MAP: &str = "accepted without effect: the simulator's random map is always allocated";
const SOFT_DEPRECATED: &str = "accepted without effect: deprecated, and ignored by fio as well";
const WITHOUT_ZONES: &str = "accepted without effect: iosched emulates zones (zonemode=zbd) on \
                             devices that are not zoned, as fio does on them: no device limit \
                             to ignore, no zoned write errors to recover from";
const WITHOUT_PLACEMENT: &str =
    "accepted without effect: placement options apply only with fdp=1 or a dataplacement";
const WITHOUT_SPRANDOM: &str = "accepted without effect: applies only with sprandom=1";
const CHUNKED_IOLOG: &str = "accepted without effect: iosched always reads a replayed trace as \
                             the job goes, one record ahead (read_iolog_chunked=1's memory, \
                             without its refill heuristic)";
const MERGE_BLKTRACE: &str = "accepted without effect: applies only with merge_blktrace_file, \
                              which iosched does not support";
const WITHOUT_SEQUENCE: &str =
    "accepted without effect: applies only with random_distribution=sequence";
const WRITE_HINT: &str =
    "accepted without effect: the simulated devices do not separate writes by lifetime hint";

const REMOVED: &str = "fio no longer accepts this option";
const PROFILE: &str = "accepted without effect: an option of a fio profile (act, tiobench), \
                       which fio accepts in any job (profiles add their options to fio's at \
                       start) and uses only under --profile, which iosched does not run";
const UNSUPPORTED_ENGINE: &str =
    "belongs to an I/O engine the simulator does not run (it supports the sync and async \
     engine families only)";
const TRACE_MERGE: &str = "merging blktrace files into one (merge_blktrace_file) is not \
                           supported; replay each with its own job (read_iolog), or give the \
                           capture's per-CPU files' prefix to read them merged";
const OPENDIR: &str = "opendir needs a real directory tree to list";
const VERIFY_ONLY: &str = "a verify-only job reads back data written earlier; the simulator \
                           has no data to verify";
const PROFILE_OPTION: &str = "fio profiles are not supported";
const RAMP_SIZE: &str = "a ramp measured in bytes (ramp_size) is not modelled; use ramp_time";

const PLACEMENT: &str = "data placement (FDP, streams) is not modelled";
const SPRANDOM: &str = "SanDisk pseudo-random preconditioning (sprandom) is not modelled";
const TRIM_VERIFY: &str = "trimming verified blocks (trim_percentage) is not modelled";
const MULTI_RANGE_TRIM: &str = "multi-range trims are not modelled";
const LOCKFILE: &str = "file locking between jobs is not modelled";
const THINKTIME_VARIANTS: &str = "only thinktime counted in completed I/Os is modelled \
                                  (thinktime_blocks_type=complete, no thinktime_iotime, no \
                                  thinkcycles)";
const RATE_THINKTIME: &str = "rate_ignore_thinktime is not modelled";
const MAX_LATENCY: &str = "fio ends a job whose latency exceeds max_latency; the simulator does \
                           not";
const PERCENTAGE_RANDOM: &str = "mixing sequential and random offsets in one job is not modelled";
const FILE_SERVICE: &str = "only round-robin service of a job's files is modelled";
const BS_VARIANTS: &str =
    "block sizes that are not multiples of the minimum, or chosen by sequential/random, are not \
     modelled";
const BARRIER: &str = "accepted without effect, as in fio: fio marks every N-th write a \
                       barrier only for an engine that can send one (FIO_BARRIER), which none \
                       of the sync, libaio and io_uring engines is";
const FILE_APPEND: &str = "appending past the end of a file is not modelled";
const OFFSET_ALIGN: &str = "offset_align is not modelled";
const FUA: &str = "has no effect here: fio applies it in the io_uring_cmd and sg engines \
                   only, which iosched does not run (O_SYNC writes, sync=1, go to the device \
                   with FUA)";
const WRITE_MODE: &str = "write variants other than plain writes are not modelled";

/// The zone options that take effect only with `zonemode=zbd` (noted otherwise).
pub(super) const ZBD_ONLY: [&str; 6] = [
    "zonecapacity",
    "read_beyond_wp",
    "max_open_zones",
    "job_max_open_zones",
    "zone_reset_threshold",
    "zone_reset_frequency",
];

/// Options grouped by what iosched does with them.
static GROUPS: &[(Disposition, &[&str])] = &[
    (Honoured, &ZBD_ONLY),
    (
        Honoured,
        &[
            "description",
            "name",
            "filename",
            "directory",
            "filename_format",
            "rw",
            "rw_sequencer",
            "ioengine",
            "iodepth",
            "iodepth_low",
            "iodepth_batch_complete_min",
            "size",
            "io_size",
            "fill_device",
            "filesize",
            "offset",
            "offset_increment",
            "bs",
            "ba",
            "bsrange",
            "bssplit",
            "randrepeat",
            "randseed",
            "norandommap",
            "random_distribution",
            "nrfiles",
            "fsync",
            "fdatasync",
            "sync_file_range",
            "direct",
            "atomic",
            "buffered",
            "loops",
            "numjobs",
            "startdelay",
            "runtime",
            "time_based",
            "ramp_time",
            "verify",
            "do_verify",
            "ioscheduler",
            "invalidate",
            "fadvise_hint",
            "pre_read",
            "qos_rate",
            "qos_burst",
            "qos_delay",
            "qos_reservation",
            "qos_weight",
            "qos_limit",
            "dontneed_every",
            "iolog_format",
            "iolog_flow",
            "replay_mode",
            "rwmixread",
            "rwmixwrite",
            "prio",
            "prioclass",
            "cmdprio_percentage",
            "cmdprio_class",
            "cmdprio",
            "cmdprio_hint",
            "cmdprio_bssplit",
            "priohint",
            "continue_on_error",
            "ignore_error",
            "thinktime",
            "thinktime_spin",
            "thinktime_blocks",
            "rate",
            "rate_iops",
            "sync",
            "end_fsync",
            "fsync_on_close",
            "end_syncfs",
            "stonewall",
            "new_group",
            "write_bw_log",
            "write_lat_log",
            "write_iops_log",
            "log_avg_msec",
            "log_offset",
            "log_prio",
            "group_reporting",
            "clat_percentiles",
            "lat_percentiles",
            "percentile_list",
            "cgroup",
            "cgroup_weight",
            "kb_base",
            "number_ios",
            "io_submit_mode",
            "rate_min",
            "rate_iops_min",
            "rate_cycle",
            "latency_target",
            "latency_window",
            "latency_percentile",
            "latency_run",
            "flow",
            "flow_id",
            "flow_sleep",
            "exitall",
            "exit_what",
            "exitall_on_error",
            "rate_process",
            "steadystate_duration",
            "zonemode",
            "zonesize",
            "zonerange",
            "zoneskip",
            "wait_for",
        ],
    ),
    (
        Noted(CPU_AND_PROCESS),
        &[
            "comm",
            "nice",
            "cpumask",
            "cpus_allowed",
            "cpus_allowed_policy",
            "numa_cpu_nodes",
            "numa_mem_policy",
            "gtod_cpu",
            "thread",
            "uid",
            "gid",
            "verify_async_cpus",
            "log_compression_cpus",
            "sqthread_poll_cpu",
        ],
    ),
    (
        Noted(MEMORY),
        &[
            "mem",
            "iomem_align",
            "hugepage-size",
            "lockmem",
            "gpu_dev_id",
            "md_per_io_size",
        ],
    ),
    (
        Noted(DATA),
        &[
            "zero_buffers",
            "refill_buffers",
            "scramble_buffers",
            "buffer_pattern",
            "buffer_compress_percentage",
            "buffer_compress_chunk",
            "dedupe_percentage",
            "dedupe_global",
            "dedupe_mode",
            "dedupe_working_set_percentage",
        ],
    ),
    (
        Noted(VERIFY_VARIANTS),
        &[
            "verify_policy",
            "verify_interval",
            "verify_offset",
            "verify_pattern",
            "verify_pattern_interval",
            "verify_fatal",
            "verify_dump",
            "verify_async",
            "verify_backlog",
            "verify_backlog_batch",
            "experimental_verify",
            "verify_state_load",
            "verify_state_save",
            "verify_write_sequence",
            "verify_header_seed",
            "verify_mode",
            "verify_bytchk",
        ],
    ),
    (
        Noted(DATA),
        &[
            "trim_verify_zero",
            "trim_backlog",
            "trim_backlog_batch",
            "pi_act",
            "pi_chk",
            "apptag",
            "apptag_mask",
        ],
    ),
    (
        Noted(FILE_SETUP),
        &[
            "filetype",
            "unique_filename",
            "openfiles",
            "fallocate",
            "overwrite",
            "create_serialize",
            "create_fsync",
            "create_on_open",
            "create_only",
            "allow_file_create",
            "allow_mounted_write",
            "unlink",
            "unlink_each_loop",
        ],
    ),
    (Noted(PAGE_CACHE), &["uncached"]),
    (
        Noted(CLOCK),
        &[
            "clocksource",
            "gtod_reduce",
            "disable_lat",
            "disable_clat",
            "disable_slat",
            "disable_bw_measurement",
            "job_start_clock_id",
            "log_alternate_epoch",
            "log_alternate_epoch_clock_id",
        ],
    ),
    (
        Noted(REPORTING),
        &[
            "per_job_logs",
            "log_entries",
            "log_hist_msec",
            "log_hist_coarseness",
            "write_hist_log",
            "log_window_value",
            "log_issue_time",
            "log_compression",
            "log_store_compressed",
            "block_error_percentiles",
            "bwavgtime",
            "iopsavgtime",
            "stats",
            "slat_percentiles",
            "significant_figures",
            "disk_util",
            "unified_rw_reporting",
            "unit_base",
        ],
    ),
    (Noted(ERRORS), &["error_dump"]),
    (Noted(BARRIER), &["write_barrier"]),
    (Noted(FUA), &["readfua", "writefua"]),
    (
        Noted(SUBMISSION),
        &[
            "iodepth_batch",
            "iodepth_batch_complete_max",
            "serialize_overlap",
            "hipri",
            "hipri_percentage",
            "fixedbufs",
            "registerfiles",
            "sqthread_poll",
            "nonvectored",
            "nowait",
            "force_async",
            "cmd_type",
            "cdb_len",
            "read_mode",
            "deac",
            "userspace_reap",
            "libaio_vectored",
        ],
    ),
    (Noted(COMMANDS), &["exec_prerun", "exec_postrun"]),
    (Noted(CGROUP_CLEANUP), &["cgroup_nodelete"]),
    (Noted(RANDOM_GENERATOR), &["random_generator"]),
    (Noted(RANDOM_MAP), &["softrandommap"]),
    (
        Noted(SOFT_DEPRECATED),
        &["verifysort", "verifysort_nr", "flow_watermark"],
    ),
    (
        Noted(WITHOUT_ZONES),
        &[
            "ignore_zone_limits",
            "recover_zbd_write_error",
            "write_zone_remainder",
        ],
    ),
    (
        Noted(WITHOUT_PLACEMENT),
        &["plid_select", "plids", "dp_scheme"],
    ),
    (
        Noted(WITHOUT_SPRANDOM),
        &["spr_num_regions", "spr_op", "spr_cs"],
    ),
    (Noted(CHUNKED_IOLOG), &["read_iolog_chunked"]),
    (
        Noted(MERGE_BLKTRACE),
        &["merge_blktrace_scalars", "merge_blktrace_iters"],
    ),
    (
        Honoured,
        &[
            "read_iolog",
            "write_iolog",
            "replay_no_stall",
            "replay_redirect",
            "replay_scale",
            "replay_align",
            "replay_time_scale",
            "replay_skip",
            "steadystate",
            "steadystate_ramp_time",
            "steadystate_check_interval",
        ],
    ),
    (Noted(WITHOUT_SEQUENCE), &["random_sequence_stride"]),
    (Noted(WRITE_HINT), &["write_hint"]),
    (RefusedUnlessDefault(PLACEMENT), &["fdp", "dataplacement"]),
    (RefusedUnlessDefault(SPRANDOM), &["sprandom"]),
    (RefusedUnlessDefault(TRIM_VERIFY), &["trim_percentage"]),
    (RefusedUnlessDefault(MULTI_RANGE_TRIM), &["num_range"]),
    (RefusedUnlessDefault(LOCKFILE), &["lockfile"]),
    (
        RefusedUnlessDefault(THINKTIME_VARIANTS),
        &["thinktime_blocks_type", "thinktime_iotime", "thinkcycles"],
    ),
    (
        RefusedUnlessDefault(RATE_THINKTIME),
        &["rate_ignore_thinktime"],
    ),
    (RefusedUnlessDefault(MAX_LATENCY), &["max_latency"]),
    (
        RefusedUnlessDefault(PERCENTAGE_RANDOM),
        &["percentage_random"],
    ),
    (RefusedUnlessDefault(FILE_SERVICE), &["file_service_type"]),
    (
        RefusedUnlessDefault(BS_VARIANTS),
        &["bs_unaligned", "bs_is_seq_rand"],
    ),
    (RefusedUnlessDefault(FILE_APPEND), &["file_append"]),
    (RefusedUnlessDefault(OFFSET_ALIGN), &["offset_align"]),
    (RefusedUnlessDefault(WRITE_MODE), &["write_mode"]),
    (RefusedUnlessDefault(VERIFY_ONLY), &["verify_only"]),
    (RefusedUnlessDefault(RAMP_SIZE), &["ramp_size"]),
    (Refused(REMOVED), &["rwmixcycle", "percentage_sequential"]),
    (Refused(TRACE_MERGE), &["merge_blktrace_file"]),
    (Refused(OPENDIR), &["opendir"]),
    (Refused(PROFILE_OPTION), &["profile"]),
];

/// Whether the simulator runs `engine`.
pub(super) fn engine_supported(engine: &str) -> bool {
    SYNC_ENGINES.contains(&engine) || ASYNC_ENGINES.contains(&engine)
}

fn explicit() -> &'static HashMap<&'static str, Disposition> {
    static INDEX: OnceLock<HashMap<&'static str, Disposition>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut index = HashMap::new();
        for (disposition, names) in GROUPS {
            for name in *names {
                let previous = index.insert(*name, *disposition);
                assert!(previous.is_none(), "{name} has two dispositions");
            }
        }
        index
    })
}

/// What iosched does with `option`.
pub(super) fn disposition(option: &FioOption) -> Disposition {
    if let Some(disposition) = explicit().get(option.name) {
        return *disposition;
    }
    match option.scope {
        Scope::Profile(_) => Noted(PROFILE),
        Scope::Engines(engines) if !engines.iter().any(|e| engine_supported(e)) => {
            Refused(UNSUPPORTED_ENGINE)
        }
        // Unreachable for the generated table (a test checks it); refusing is the safe answer.
        _ => Refused("not classified by iosched"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every option fio defines has a disposition, by name or by rule, and every name given a
    // disposition by hand is one fio defines.
    #[test]
    fn every_option_is_classified_exactly_once() {
        for option in table::all() {
            let by_name = explicit().contains_key(option.name);
            let by_rule = match option.scope {
                Scope::Profile(_) => true,
                Scope::Engines(engines) => !engines.iter().any(|e| engine_supported(e)),
                Scope::General => false,
            };
            assert!(by_name || by_rule, "{} has no disposition", option.name);
            assert!(!(by_name && by_rule), "{} is classified twice", option.name);
        }
        for name in explicit().keys() {
            assert!(
                table::find(name).is_some_and(|o| o.name == *name),
                "{name} is not an option name (fio's or iosched's)"
            );
        }
    }

    #[test]
    fn counts_are_stable() {
        let mut honoured = 0;
        let mut noted = 0;
        let mut refused = 0;
        for option in table::all() {
            match disposition(option) {
                Honoured => honoured += 1,
                Noted(_) => noted += 1,
                RefusedUnlessDefault(_) | Refused(_) => refused += 1,
            }
        }
        assert_eq!(honoured + noted + refused, table::all().len());
        assert!(honoured >= 60, "{honoured}");
    }
}

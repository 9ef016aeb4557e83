//! Turning a job section's settings into [`JobSpec`]s: one per clone (`numjobs`), with what
//! fio decides from several options at once (init.c's `fixup_options` and `add_job`):
//!
//! - block sizes: `bssplit` over `bsrange` over `bs`, per direction; `blockalign` applies to
//!   random I/O only and, when it differs from the minimum block size, turns the random map off;
//! - a non-uniform `random_distribution` also turns the random map off, and `randseed` turns
//!   `randrepeat` off;
//! - `thinktime_spin` is capped at `thinktime`, `loops=0` means 1, `rate` and `rate_iops`
//!   exclude each other, `size` may not be below the smallest block size;
//! - `time_based` without `runtime` does nothing (fio warns; we note it);
//! - `prio`/`prioclass`: either one set gives the job a priority, class 0 meaning best effort;
//! - default file names follow `filename_format` (`$jobname.$jobnum.$filenum`), one set per
//!   clone, spread over the `directory` list by clone number; an explicit `filename` list is
//!   shared by every clone.
//!
//! It also refuses and notes what depends on the job as a whole: the engine, engine options
//! used with another engine, buffered I/O. `verify` is resolved into [`crate::Verify`] and left
//! to the engine (both run its read-back phase; the real engine checks crc32c data, the
//! simulator the identity of the blocks).
//! iosched's own `qos_*` options are read into [`JobSpec::qos`] by [`iosched_core::Qos::set`].

use super::disposition::{ASYNC_ENGINES, SYNC_ENGINES, ZBD_ONLY};
use super::settings::{split_colon_list, Setting, Settings, Size, Value};
use super::table::Scope;
use super::ParseError;
use crate::job::{
    CmdPrio, CmdPrioShare, Fadvise, RandomDistribution, StridedZones, DEFAULT_PERCENTILES,
};
use crate::steady::{SteadyMetric, SteadyState};
use crate::trace::{Format, ReplayMode, ReplaySpec};
use crate::zbd::ZbdOptions;
use crate::RwMode;
use crate::{
    Amount, BlockSize, Engine, ExitWhat, Flow, JobSpec, LatencyTarget, Location, Note,
    SyncFileRange, Verify,
};
use iosched_core::{IoPrio, IoPrioClass, Nanos};

/// fio's limit on jobs in one run (`REAL_MAX_JOBS`), counting clones.
pub(super) const JOBS_MAX: usize = iosched_core::limits::JOBS_MAX;
/// Bound on the file names of one job, over all its clones.
pub(super) const FILES_MAX: usize = iosched_core::limits::FILES_PER_JOB_MAX;

/// A job section, ready to resolve.
pub(super) struct Job<'a> {
    /// The section's name (the `[name]`), which file names use.
    pub section_name: &'a str,
    /// Where the header is.
    pub location: &'a Location,
    /// Defaults, globals and the section's own lines, applied.
    pub settings: &'a Settings,
    /// The section's own options, for fio's "job options".
    pub own_options: &'a [(String, String)],
    /// The job's `name=` in its own section, if any (fio ignores a global `name`).
    pub own_name: Option<&'a str>,
}

/// The job's clones, and notes on options that did nothing.
pub(super) fn resolve(
    job: &Job<'_>,
    jobs_so_far: usize,
    notes: &mut Vec<Note>,
) -> Result<Vec<JobSpec>, ParseError> {
    let resolver = Resolver { job };
    resolver.resolve(jobs_so_far, notes)
}

struct Resolver<'a> {
    job: &'a Job<'a>,
}

/// Linux errno names as fio's `str2error` lists them: the n-th is errno n.
const ERRNO_NAMES: &[&str] = &[
    "EPERM",
    "ENOENT",
    "ESRCH",
    "EINTR",
    "EIO",
    "ENXIO",
    "E2BIG",
    "ENOEXEC",
    "EBADF",
    "ECHILD",
    "EAGAIN",
    "ENOMEM",
    "EACCES",
    "EFAULT",
    "ENOTBLK",
    "EBUSY",
    "EEXIST",
    "EXDEV",
    "ENODEV",
    "ENOTDIR",
    "EISDIR",
    "EINVAL",
    "ENFILE",
    "EMFILE",
    "ENOTTY",
    "ETXTBSY",
    "EFBIG",
    "ENOSPC",
    "ESPIPE",
    "EROFS",
    "EMLINK",
    "EPIPE",
    "EDOM",
    "ERANGE",
    "EDEADLK",
    "ENAMETOOLONG",
    "ENOLCK",
    "ENOSYS",
    "ENOTEMPTY",
    "ELOOP",
    "EWOULDBLOCK",
    "ENOMSG",
    "EIDRM",
    "ECHRNG",
    "EL2NSYNC",
    "EL3HLT",
    "EL3RST",
    "ELNRNG",
    "EUNATCH",
    "ENOCSI",
    "EL2HLT",
    "EBADE",
    "EBADR",
    "EXFULL",
    "ENOANO",
    "EBADRQC",
    "EBADSLT",
    "EDEADLOCK",
    "EBFONT",
    "ENOSTR",
    "ENODATA",
    "ETIME",
    "ENOSR",
    "ENONET",
    "ENOPKG",
    "EREMOTE",
    "ENOLINK",
    "EADV",
    "ESRMNT",
    "ECOMM",
    "EPROTO",
    "EMULTIHOP",
    "EDOTDOT",
    "EBADMSG",
    "EOVERFLOW",
    "ENOTUNIQ",
    "EBADFD",
    "EREMCHG",
    "ELIBACC",
    "ELIBBAD",
    "ELIBSCN",
    "ELIBMAX",
    "ELIBEXEC",
    "EILSEQ",
    "ERESTART",
    "ESTRPIPE",
    "EUSERS",
    "ENOTSOCK",
    "EDESTADDRREQ",
    "EMSGSIZE",
    "EPROTOTYPE",
    "ENOPROTOOPT",
    "EPROTONOSUPPORT",
    "ESOCKTNOSUPPORT",
    "EOPNOTSUPP",
    "EPFNOSUPPORT",
    "EAFNOSUPPORT",
    "EADDRINUSE",
    "EADDRNOTAVAIL",
    "ENETDOWN",
    "ENETUNREACH",
    "ENETRESET",
    "ECONNABORTED",
    "ECONNRESET",
    "ENOBUFS",
    "EISCONN",
    "ENOTCONN",
    "ESHUTDOWN",
    "ETOOMANYREFS",
    "ETIMEDOUT",
    "ECONNREFUSED",
    "EHOSTDOWN",
    "EHOSTUNREACH",
    "EALREADY",
    "EINPROGRESS",
    "ESTALE",
    "EUCLEAN",
    "ENOTNAM",
    "ENAVAIL",
    "EISNAM",
    "EREMOTEIO",
    "EDQUOT",
    "ENOMEDIUM",
    "EMEDIUMTYPE",
    "ECANCELED",
    "ENOKEY",
    "EKEYEXPIRED",
    "EKEYREVOKED",
    "EKEYREJECTED",
    "EOWNERDEAD",
    "ENOTRECOVERABLE",
    "ERFKILL",
    "EHWPOISON",
];

/// The errno `name` stands for (EWOULDBLOCK is EAGAIN, EDEADLOCK EDEADLK, as in fio).
fn errno_named(name: &str) -> Option<i32> {
    match name {
        "EWOULDBLOCK" => return Some(11),
        "EDEADLOCK" => return Some(35),
        _ => {}
    }
    ERRNO_NAMES
        .iter()
        .position(|known| *known == name)
        .map(|index| index as i32 + 1)
}

fn micros_to_nanos(micros: u64) -> Nanos {
    micros.saturating_mul(1_000)
}

fn to_u64(value: i128) -> u64 {
    value.clamp(0, i128::from(u64::MAX)) as u64
}

fn to_u32(value: i128) -> u32 {
    value.clamp(0, i128::from(u32::MAX)) as u32
}

impl Resolver<'_> {
    fn setting(&self, name: &str) -> Option<&Setting> {
        self.job.settings.get(name)
    }

    fn location(&self, name: &str) -> &Location {
        self.setting(name)
            .map_or(self.job.location, |setting| &setting.location)
    }

    fn flag(&self, name: &str, default: bool) -> bool {
        match self.job.settings.value(name) {
            Some(Value::Flag(flag)) => *flag,
            _ => default,
        }
    }

    fn int(&self, name: &str) -> Option<i128> {
        match self.job.settings.value(name) {
            Some(Value::Int(value)) => Some(*value),
            _ => None,
        }
    }

    fn time(&self, name: &str) -> Option<u64> {
        match self.job.settings.value(name) {
            Some(Value::Time(value)) => Some(*value),
            _ => None,
        }
    }

    fn text(&self, name: &str) -> Option<&str> {
        match self.job.settings.value(name) {
            Some(Value::Text(text)) => Some(text),
            _ => None,
        }
    }

    fn size(&self, name: &str) -> Option<Size> {
        match self.job.settings.value(name) {
            Some(Value::Size(size)) => Some(*size),
            _ => None,
        }
    }

    fn directions(&self, name: &str) -> [Option<i128>; 3] {
        match self.job.settings.value(name) {
            Some(Value::Directions(values)) => *values,
            _ => [None; 3],
        }
    }

    fn error(&self, name: &str, message: impl Into<String>) -> ParseError {
        ParseError::at(self.location(name), message)
    }

    fn note(&self, notes: &mut Vec<Note>, name: &str, message: impl Into<String>) {
        notes.push(Note {
            location: self.location(name).clone(),
            option: name.to_string(),
            message: message.into(),
        });
    }

    fn resolve(
        &self,
        jobs_so_far: usize,
        notes: &mut Vec<Note>,
    ) -> Result<Vec<JobSpec>, ParseError> {
        let display_name = self.job.own_name.unwrap_or(self.job.section_name);
        let mut spec = JobSpec::new(display_name);
        spec.location = self.job.location.clone();
        spec.options = self.job.own_options.to_vec();

        spec.engine = self.engine()?;
        self.check_engine_options(&spec.engine)?;

        self.access_pattern(&mut spec)?;
        (spec.strided_zones, spec.zbd) = self.zone_mode(&spec, notes)?;
        self.block_sizes(&mut spec)?;
        self.region(&mut spec)?;
        self.issue(&mut spec, notes)?;
        self.timing(&mut spec, notes)?;
        self.control(&mut spec, notes)?;
        self.identity(&mut spec, display_name, notes)?;
        self.replay(&mut spec, display_name)?;

        let numjobs = self.int("numjobs").unwrap_or(1);
        if numjobs < 1 {
            return Err(self.error("numjobs", format!("numjobs={numjobs}: must be at least 1")));
        }
        if numjobs > (JOBS_MAX - jobs_so_far.min(JOBS_MAX)) as i128 {
            return Err(self.error(
                "numjobs",
                format!("numjobs={numjobs}: more than {JOBS_MAX} jobs in all, fio's limit"),
            ));
        }
        spec.numjobs = numjobs as u32;

        let filesets = self.filenames(spec.numjobs)?;
        self.file_size(&mut spec, filesets[0].len())?;
        self.check_size(&spec)?;

        let mut clones = Vec::with_capacity(filesets.len());
        for (clone, files) in filesets.into_iter().enumerate() {
            let mut clone_spec = spec.clone();
            clone_spec.clone = clone as u32;
            clone_spec.filenames = files;
            // fio clears stonewall on clones: they start with the first one.
            if clone > 0 {
                clone_spec.stonewall = false;
            }
            clones.push(clone_spec);
        }
        Ok(clones)
    }

    fn engine(&self) -> Result<Engine, ParseError> {
        let name = self.text("ioengine").unwrap_or("psync").to_string();
        if SYNC_ENGINES.contains(&name.as_str()) {
            return Ok(Engine::Sync { name });
        }
        if ASYNC_ENGINES.contains(&name.as_str()) {
            return Ok(Engine::Async { name });
        }
        if name == "null" {
            return Ok(Engine::Null);
        }
        Err(self.error(
            "ioengine",
            format!(
                "ioengine \"{name}\": refused: iosched runs the sync ({}), async ({}) and null \
                 engines",
                SYNC_ENGINES.join(", "),
                ASYNC_ENGINES.join(", ")
            ),
        ))
    }

    /// fio knows an engine's options only once that engine is loaded ("Bad option" otherwise).
    fn check_engine_options(&self, engine: &Engine) -> Result<(), ParseError> {
        let mut settings: Vec<&Setting> = self.job.settings.iter().collect();
        settings.sort_by(|a, b| a.location.cmp(&b.location));
        for setting in settings {
            if let Scope::Engines(engines) = setting.option.scope {
                if !engines.contains(&engine.name()) {
                    return Err(ParseError::at(
                        &setting.location,
                        format!(
                            "{}: an option of the {} engine, not of ioengine={} (fio rejects it \
                             as a bad option)",
                            setting.option.name,
                            engines.join("/"),
                            engine.name()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `steadystate` (`ss`), with `ss_dur`, `ss_ramp` and `ss_interval`, as fio's
    /// `str_steadystate_cb`: a criterion (`iops`, `iops_slope`, `bw`, `bw_slope`) and a limit,
    /// a percentage of the mean or a number (bytes per second, with fio's units, for `bw`).
    fn steady_state(&self, notes: &mut Vec<Note>) -> Result<Option<SteadyState>, ParseError> {
        let duration = self.time("steadystate_duration").unwrap_or(0);
        if duration == 0 {
            for name in [
                "steadystate",
                "steadystate_ramp_time",
                "steadystate_check_interval",
            ] {
                if self.setting(name).is_some() {
                    self.note(notes, name, "no effect without steadystate_duration");
                }
            }
            return Ok(None);
        }
        let text = self.text("steadystate").unwrap_or("iops_slope:0.01%");
        let bad = |why: &str| {
            self.error(
                "steadystate",
                format!("steadystate={text}: {why} (criterion:limit, e.g. iops_slope:0.1%)"),
            )
        };
        let (criterion, limit) = text
            .split_once(':')
            .ok_or_else(|| bad("no limit after the criterion"))?;
        let (metric, slope) = match criterion.trim().to_ascii_lowercase().as_str() {
            "iops" => (SteadyMetric::Iops, false),
            "iops_slope" => (SteadyMetric::Iops, true),
            "bw" => (SteadyMetric::Bw, false),
            "bw_slope" => (SteadyMetric::Bw, true),
            _ => {
                return Err(bad(
                    "the criterion is one of iops, iops_slope, bw, bw_slope",
                ))
            }
        };
        let limit = limit.trim();
        let (limit, percent) = match limit.strip_suffix('%') {
            Some(number) => (
                number
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| bad("the limit is not a number"))?,
                true,
            ),
            None if metric == SteadyMetric::Bw => {
                match super::value::number(limit, super::value::Context::Size { kb_base: 1024 }) {
                    Ok(super::value::Number::Value(bytes)) => (bytes as f64, false),
                    _ => return Err(bad("the limit is not a size")),
                }
            }
            None => (
                limit
                    .parse::<f64>()
                    .map_err(|_| bad("the limit is not a number"))?,
                false,
            ),
        };
        if !(limit.is_finite() && limit >= 0.0) {
            return Err(bad("the limit must be a number of 0 or more"));
        }
        let interval =
            micros_to_nanos(self.time("steadystate_check_interval").unwrap_or(1_000_000));
        let duration = micros_to_nanos(duration);
        if interval == 0 || !duration.is_multiple_of(interval) || duration < interval {
            return Err(self.error(
                "steadystate_duration",
                "steadystate_duration must be a multiple of steadystate_check_interval (1 s by \
                 default)",
            ));
        }
        Ok(Some(SteadyState {
            metric,
            slope,
            limit,
            percent,
            duration,
            ramp: micros_to_nanos(self.time("steadystate_ramp_time").unwrap_or(0)),
            interval,
        }))
    }

    /// `zonemode` with `zonesize`, `zonerange` and `zoneskip`, checked as fio's
    /// `fixup_options`: strided needs a zone size, none takes none; zbd takes the zone
    /// options of zbd.c (the zone size is mandatory on devices that are not zoned).
    fn zone_mode(
        &self,
        spec: &JobSpec,
        notes: &mut Vec<Note>,
    ) -> Result<(Option<StridedZones>, Option<ZbdOptions>), ParseError> {
        let bytes = |name: &str| match self.size(name) {
            Some(Size::Bytes(bytes)) => bytes,
            _ => 0,
        };
        let (size, range, skip) = (bytes("zonesize"), bytes("zonerange"), bytes("zoneskip"));
        let mode = self.text("zonemode").unwrap_or("none");
        if mode != "zbd" {
            for name in ZBD_ONLY {
                if self.setting(name).is_some() {
                    self.note(
                        notes,
                        name,
                        format!("accepted without effect: {name} applies only with zonemode=zbd"),
                    );
                }
            }
        }
        match mode {
            "strided" if size == 0 => Err(self.error(
                "zonemode",
                "--zonesize must be specified when using --zonemode=strided (fio's check)",
            )),
            "strided" => Ok((
                Some(StridedZones {
                    size,
                    range: if range == 0 { size } else { range },
                    skip,
                }),
                None,
            )),
            "zbd" => {
                if size == 0 {
                    return Err(self.error(
                        "zonemode",
                        "Specifying the zone size is mandatory for regular file/block device \
                         with --zonemode=zbd (fio's check; iosched emulates zones, as fio does \
                         on devices that are not zoned)",
                    ));
                }
                if range != 0 && range != size {
                    return Err(self.error(
                        "zonerange",
                        "with zonemode=zbd, zonerange and zonesize must be identical (fio's \
                         HOWTO)",
                    ));
                }
                if skip != 0 {
                    return Err(self.error(
                        "zoneskip",
                        "zoneskip with zonemode=zbd: refused: skipping zones of a zoned device \
                         is not supported",
                    ));
                }
                if matches!(
                    spec.rw,
                    RwMode::Trim | RwMode::RandTrim | RwMode::TrimWrite | RwMode::RandTrimWrite
                ) {
                    return Err(self.error(
                        "rw",
                        "trims with zonemode=zbd (zone resets in place of trims) are refused: \
                         not supported",
                    ));
                }
                let threshold = |name: &str| match self.job.settings.value(name) {
                    Some(Value::Floats(list)) => list.first().copied().unwrap_or(0.0),
                    _ => 0.0,
                };
                let count = |name: &str| to_u32(self.int(name).unwrap_or(0));
                Ok((
                    None,
                    Some(ZbdOptions {
                        zone_size: size,
                        zone_capacity: bytes("zonecapacity"),
                        max_open_zones: count("max_open_zones"),
                        job_max_open_zones: count("job_max_open_zones"),
                        read_beyond_wp: self.flag("read_beyond_wp", false),
                        reset_threshold: threshold("zone_reset_threshold"),
                        reset_frequency: threshold("zone_reset_frequency"),
                    }),
                ))
            }
            _ if size != 0 => Err(self.error(
                "zonesize",
                "--zonemode=none and --zonesize are not compatible (fio's check)",
            )),
            _ => {
                for name in ["zonerange", "zoneskip"] {
                    if self.setting(name).is_some() {
                        return Err(self.error(
                            name,
                            format!("{name} applies only with zonemode=strided (or zbd)"),
                        ));
                    }
                }
                Ok((None, None))
            }
        }
    }

    fn access_pattern(&self, spec: &mut JobSpec) -> Result<(), ParseError> {
        if let Some(Value::Rw {
            mode,
            random_run,
            skip_bytes,
        }) = self.job.settings.value("rw")
        {
            spec.rw = *mode;
            if mode.is_random() {
                spec.rw_sequencer_nr = *random_run;
            } else {
                spec.rw_skip_bytes = *skip_bytes;
            }
        }
        if self.text("rw_sequencer") == Some("identical") && spec.rw_sequencer_nr > 1 {
            return Err(self.error(
                "rw_sequencer",
                "rw_sequencer=identical: refused: repeating one offset several times is not \
                 modelled",
            ));
        }
        if let Some(read) = self.int("rwmixread") {
            spec.rwmixread = to_u32(read);
        }

        if let Some(Value::Distribution(distribution)) =
            self.job.settings.value("random_distribution")
        {
            spec.random_distribution = distribution.clone();
        }
        spec.norandommap = self.flag("norandommap", false);
        // fio: a non-uniform distribution excludes the random map.
        if spec.random_distribution != RandomDistribution::Random {
            spec.norandommap = true;
        }
        spec.randrepeat = self.flag("randrepeat", true);
        if let Some(Size::Bytes(seed)) = self.size("randseed") {
            spec.randseed = Some(seed);
            // fio: an explicit seed overrides randrepeat.
            spec.randrepeat = false;
        }
        Ok(())
    }

    fn block_sizes(&self, spec: &mut JobSpec) -> Result<(), ParseError> {
        let bs = self.directions("bs");
        let ranges = match self.job.settings.value("bsrange") {
            Some(Value::DirectionRanges(ranges)) => *ranges,
            _ => [None; 3],
        };
        let splits = match self.job.settings.value("bssplit") {
            Some(Value::Split(splits)) => splits.clone(),
            _ => [None, None, None],
        };
        for direction in 0..3 {
            spec.bs[direction] = if let Some(split) = &splits[direction] {
                match split.as_slice() {
                    [(size, _)] => BlockSize::Fixed(*size),
                    parts => BlockSize::Split(parts.to_vec()),
                }
            } else if let Some((low, high)) = ranges[direction] {
                // fio swaps a range written high-low, as parse.c does for every range option.
                let (min, max) = (low.min(high), low.max(high));
                if min == max {
                    BlockSize::Fixed(min)
                } else {
                    BlockSize::Range { min, max }
                }
            } else {
                BlockSize::Fixed(bs[direction].map_or(4096, to_u64))
            };
        }
        let align = self.directions("ba");
        for direction in 0..3 {
            let min = spec.bs[direction].min();
            spec.blockalign[direction] = match align[direction] {
                Some(align) if spec.rw.is_random() => to_u64(align),
                _ => min,
            };
            // fio: any blockalign other than the minimum block size turns the random map off.
            if spec.blockalign[direction] != min {
                spec.norandommap = true;
            }
        }
        Ok(())
    }

    fn region(&self, spec: &mut JobSpec) -> Result<(), ParseError> {
        spec.size = match self.size("size") {
            None | Some(Size::Bytes(0)) | Some(Size::Percent(0)) => None,
            Some(Size::Bytes(bytes)) => Some(Amount::Bytes(bytes)),
            Some(Size::Percent(percent)) => Some(Amount::Percent(f64::from(percent))),
        };
        spec.fill_device = self.flag("fill_device", false);
        if spec.fill_device && spec.size.is_some() {
            return Err(self.error(
                "fill_device",
                "fill_device=1 with size: refused: writing on past size until the device is \
                 full is not modelled (leave size out to cover the whole device)",
            ));
        }
        spec.io_size = match self.size("io_size") {
            None | Some(Size::Bytes(0)) => None,
            Some(Size::Bytes(bytes)) => Some(bytes),
            Some(Size::Percent(_)) => {
                return Err(self.error(
                    "io_size",
                    "io_size as a percentage: refused: not modelled; give it in bytes",
                ))
            }
        };
        spec.offset = match self.size("offset") {
            None | Some(Size::Percent(0)) => Amount::Bytes(0),
            Some(Size::Bytes(bytes)) => Amount::Bytes(bytes),
            Some(Size::Percent(percent)) => Amount::Percent(f64::from(percent)),
        };
        spec.offset_increment = match self.size("offset_increment") {
            None => 0,
            Some(Size::Bytes(bytes)) => bytes,
            Some(Size::Percent(_)) => {
                return Err(self.error(
                    "offset_increment",
                    "offset_increment as a percentage: refused: not modelled; give it in bytes",
                ))
            }
        };
        if let Some(loops) = self.int("loops") {
            if loops < 0 {
                return Err(self.error("loops", format!("loops={loops}: must not be negative")));
            }
            // fio runs a job with loops=0 once.
            spec.loops = to_u32(loops).max(1);
        }
        Ok(())
    }

    fn issue(&self, spec: &mut JobSpec, notes: &mut Vec<Note>) -> Result<(), ParseError> {
        if let Some(depth) = self.int("iodepth") {
            spec.iodepth = to_u32(depth);
        }
        if !spec.engine.is_async() && spec.iodepth > 1 {
            self.note(
                notes,
                "iodepth",
                format!(
                    "no effect with ioengine={}: a sync engine has one I/O in flight (fio caps \
                     the depth at 1 too)",
                    spec.engine.name()
                ),
            );
        }
        if spec.engine.is_async() {
            if let Some(low) = self.int("iodepth_low") {
                if low > 0 && low < i128::from(spec.iodepth) {
                    return Err(self.error(
                        "iodepth_low",
                        format!(
                            "iodepth_low={low}: refused: refilling the queue only once it drains \
                             to iodepth_low is not modelled"
                        ),
                    ));
                }
            }
            if let Some(batch) = self.int("iodepth_batch_complete_min") {
                if batch > 1 {
                    return Err(self.error(
                        "iodepth_batch_complete_min",
                        format!(
                            "iodepth_batch_complete_min={batch}: refused: waiting for several \
                             completions before refilling the queue is not modelled"
                        ),
                    ));
                }
            }
        }

        spec.direct = self.flag("direct", false);
        if self.flag("atomic", false) {
            spec.direct = true;
            self.note(
                notes,
                "atomic",
                "atomicity has no meaning in simulation; the I/O is issued as direct I/O, which \
                 atomic implies",
            );
        }
        spec.sync_writes = matches!(self.text("sync"), Some("sync" | "1" | "dsync"));
        let fsync = self.int("fsync").unwrap_or(0);
        let fdatasync = self.int("fdatasync").unwrap_or(0);
        spec.fsync_every = to_u32(if fsync > 0 { fsync } else { fdatasync });
        spec.end_fsync = self.flag("end_fsync", false) || self.flag("end_syncfs", false);
        if let Some(text) = self.text("sync_file_range") {
            spec.sync_file_range = Some(
                sync_file_range(text).map_err(|reason| self.error("sync_file_range", reason))?,
            );
        }
        if self.flag("fsync_on_close", false) {
            if spec.loops > 1 {
                return Err(self.error(
                    "fsync_on_close",
                    "fsync_on_close=1 with loops > 1: refused: a flush after every loop is not \
                     modelled",
                ));
            }
            spec.end_fsync = true;
        }

        // Which verify methods run is the engine's decision: the simulator checks the blocks'
        // identity whatever the method, the real engine checks crc32c.
        if let Some(method) = self.text("verify").filter(|method| *method != "0") {
            spec.verify = Some(Verify {
                method: method.to_string(),
                do_verify: self.flag("do_verify", true),
                location: self.location("verify").clone(),
            });
        }

        let rate = self.directions("rate");
        let rate_iops = self.directions("rate_iops");
        for direction in 0..3 {
            spec.rate[direction] = rate[direction].map_or(0, to_u64);
            spec.rate_iops[direction] = rate_iops[direction].map_or(0, to_u64);
        }
        spec.rate_poisson = self.text("rate_process") == Some("poisson");
        if spec.rate.iter().any(|r| *r > 0) && spec.rate_iops.iter().any(|r| *r > 0) {
            return Err(self.error(
                "rate_iops",
                "rate and rate_iops are mutually exclusive (fio refuses both)",
            ));
        }
        Ok(())
    }

    fn timing(&self, spec: &mut JobSpec, notes: &mut Vec<Note>) -> Result<(), ParseError> {
        spec.runtime = self.time("runtime").filter(|t| *t > 0).map(micros_to_nanos);
        spec.time_based = self.flag("time_based", false);
        if spec.time_based && spec.runtime.is_none() {
            spec.time_based = false;
            self.note(
                notes,
                "time_based",
                "no effect without runtime (fio ignores it too)",
            );
        }
        spec.ramp_time = micros_to_nanos(self.time("ramp_time").unwrap_or(0));
        if let Some(Value::TimeRange(low, high)) = self.job.settings.value("startdelay") {
            // A range written high-low is swapped, as fio's parser does.
            let (low, high) = ((*low).min(*high), (*low).max(*high));
            spec.startdelay = (micros_to_nanos(low), micros_to_nanos(high));
        }
        spec.thinktime = micros_to_nanos(self.time("thinktime").unwrap_or(0));
        // fio caps the spinning part of thinktime at thinktime.
        spec.thinktime_spin =
            micros_to_nanos(self.time("thinktime_spin").unwrap_or(0)).min(spec.thinktime);
        if let Some(blocks) = self.int("thinktime_blocks") {
            spec.thinktime_blocks = to_u32(blocks);
        }

        let class = self.int("prioclass");
        let level = self.int("prio");
        if class.is_some() || level.is_some() {
            // fio: with no class set, a priority is best effort.
            let class = match class.unwrap_or(0) {
                0 => IoPrioClass::Be,
                number => IoPrioClass::from_number(number as u8).unwrap_or(IoPrioClass::Be),
            };
            let name = if level.is_some() { "prio" } else { "prioclass" };
            spec.prio = IoPrio::new(class, level.unwrap_or(0) as u8)
                .map_err(|error| self.error(name, error.to_string()))?;
        }
        if let Some(hint) = self.int("priohint") {
            spec.prio = spec
                .prio
                .with_hint(hint as u16)
                .map_err(|error| self.error("priohint", error.to_string()))?;
        }
        self.cmdprio(spec)?;
        self.errors(spec)
    }

    /// What ends a job or holds it back besides its size and runtime: `number_ios`,
    /// `rate_min`/`rate_iops_min` over `rate_cycle`, the `latency_target` search, `flow`,
    /// `exitall` with `exit_what`, `exitall_on_error`; and `io_submit_mode`.
    fn control(&self, spec: &mut JobSpec, notes: &mut Vec<Note>) -> Result<(), ParseError> {
        if let Some(Size::Bytes(count)) = self.size("number_ios") {
            spec.number_ios = (count > 0).then_some(count);
        }

        let rate_min = self.directions("rate_min");
        let rate_iops_min = self.directions("rate_iops_min");
        for direction in 0..3 {
            spec.rate_min[direction] = rate_min[direction].map_or(0, to_u64);
            spec.rate_iops_min[direction] = rate_iops_min[direction].map_or(0, to_u64);
        }
        let any_min = spec
            .rate_min
            .iter()
            .chain(&spec.rate_iops_min)
            .any(|r| *r > 0);
        if let Some(cycle) = self.int("rate_cycle") {
            if cycle < 1 {
                return Err(self.error(
                    "rate_cycle",
                    format!("rate_cycle={cycle}: must be at least 1 ms"),
                ));
            }
            spec.rate_cycle = to_u64(cycle).saturating_mul(1_000_000);
            if !any_min && self.setting("rate_cycle").is_some() {
                self.note(
                    notes,
                    "rate_cycle",
                    "no effect without rate_min or rate_iops_min",
                );
            }
        }

        spec.steadystate = self.steady_state(notes)?;

        match self.time("latency_target").filter(|t| *t > 0) {
            Some(target) => {
                let percentile = match self.job.settings.value("latency_percentile") {
                    Some(Value::Floats(list)) => list.first().copied().unwrap_or(100.0),
                    _ => 100.0,
                };
                spec.latency_target = Some(LatencyTarget {
                    target: micros_to_nanos(target),
                    window: micros_to_nanos(self.time("latency_window").unwrap_or(0)),
                    percentile,
                    run: self.flag("latency_run", false),
                });
            }
            None => {
                for name in ["latency_window", "latency_percentile", "latency_run"] {
                    if self.setting(name).is_some() {
                        self.note(notes, name, "no effect without latency_target");
                    }
                }
            }
        }

        let weight = self.int("flow").unwrap_or(0);
        if weight < 0 {
            return Err(self.error(
                "flow",
                format!(
                    "flow={weight}: a flow is a weight since fio 3.23, 0 (off) to 1000; the \
                     old signed counters are gone"
                ),
            ));
        }
        if weight > 0 {
            let sleep = self.int("flow_sleep").unwrap_or(0);
            if sleep < 0 {
                return Err(self.error("flow_sleep", format!("flow_sleep={sleep}: negative")));
            }
            spec.flow = Some(Flow {
                weight: to_u32(weight),
                id: to_u32(self.int("flow_id").unwrap_or(0)),
                sleep: micros_to_nanos(to_u64(sleep)),
            });
        } else {
            for name in ["flow_id", "flow_sleep"] {
                if self.setting(name).is_some() {
                    self.note(notes, name, "no effect without flow");
                }
            }
        }

        if self.flag("exitall", false) {
            spec.exitall = Some(match self.text("exit_what").unwrap_or("group") {
                "stonewall" => ExitWhat::Stonewall,
                "all" => ExitWhat::All,
                _ => ExitWhat::Group,
            });
        } else if self.setting("exit_what").is_some() {
            self.note(notes, "exit_what", "no effect without exitall");
        }
        spec.exitall_on_error = self.flag("exitall_on_error", false);
        spec.wait_for = self
            .text("wait_for")
            .filter(|name| !name.is_empty())
            .map(str::to_string);

        if self.text("io_submit_mode") == Some("offload") {
            self.note(
                notes,
                "io_submit_mode",
                "offload: the I/O is issued when the job decides it, as with inline; fio's \
                 submission thread pool only moves the system calls off the job's thread",
            );
        }
        Ok(())
    }

    /// `continue_on_error` and `ignore_error` (fio's options.c: `str_ignore_error_cb`).
    fn errors(&self, spec: &mut JobSpec) -> Result<(), ParseError> {
        spec.errors.continue_on = match self.text("continue_on_error").unwrap_or("none") {
            "none" | "0" => 0,
            "read" => 1,
            "write" => 2,
            "io" => 3,
            "verify" => 4,
            _ => 7,
        };
        let Some(text) = self.text("ignore_error") else {
            return Ok(());
        };
        // Lists for read, write and verify errors, in that order, separated by ','; in each,
        // errno names or numbers separated by ':'.
        for (kind, list) in text.split(',').enumerate() {
            if kind == 3 {
                return Err(self.error(
                    "ignore_error",
                    format!("ignore_error={text}: more than three lists (read, write, verify)"),
                ));
            }
            let mut errnos = Vec::new();
            for item in list
                .split(':')
                .map(str::trim)
                .filter(|item| !item.is_empty())
            {
                let errno = errno_named(item)
                    .or_else(|| item.parse::<i32>().ok().map(i32::abs).filter(|n| *n > 0))
                    .ok_or_else(|| {
                        self.error(
                            "ignore_error",
                            format!(
                                "ignore_error: {item:?} is not an errno name (such as EIO or \
                                 ETIME) or number"
                            ),
                        )
                    })?;
                errnos.push(errno);
            }
            if !errnos.is_empty() {
                spec.errors.ignore[kind] = Some(errnos);
            }
        }
        Ok(())
    }

    /// cmdprio.c: `cmdprio_percentage` or `cmdprio_bssplit` (never both), per direction;
    /// `cmdprio_class` defaults to the highest class (RT), `cmdprio` and `cmdprio_hint` to 0.
    fn cmdprio(&self, spec: &mut JobSpec) -> Result<(), ParseError> {
        let percentages = self.directions("cmdprio_percentage");
        let classes = self.directions("cmdprio_class");
        let levels = self.directions("cmdprio");
        let hints = self.directions("cmdprio_hint");
        let split = match self.job.settings.value("cmdprio_bssplit") {
            Some(Value::PrioSplit(split)) => Some(split),
            _ => None,
        };
        if split.is_some_and(|split| split.iter().any(Option::is_some))
            && percentages[..2].iter().any(|p| p.is_some_and(|p| p > 0))
        {
            return Err(self.error(
                "cmdprio_bssplit",
                "cmdprio_percentage and cmdprio_bssplit are mutually exclusive (fio refuses both)",
            ));
        }
        let build = |name: &str, class: u8, level: u8, hint: u16| {
            let class = IoPrioClass::from_number(class).unwrap_or(IoPrioClass::Rt);
            IoPrio::new(class, level)
                .and_then(|prio| prio.with_hint(hint))
                .map_err(|error| self.error(name, error.to_string()))
        };
        for direction in 0..2 {
            let implicit = build(
                "cmdprio",
                classes[direction].unwrap_or(1) as u8,
                levels[direction].unwrap_or(0) as u8,
                hints[direction].unwrap_or(0) as u16,
            )?;
            if let Some(entries) = split.and_then(|split| split[direction].as_ref()) {
                let mut shares = Vec::with_capacity(entries.len());
                for &(size, percentage, own) in entries {
                    let prio = match own {
                        Some((class, level, hint)) => build("cmdprio_bssplit", class, level, hint)?,
                        None => implicit,
                    };
                    shares.push(CmdPrioShare {
                        block_size: Some(size),
                        percentage: percentage as u8,
                        prio,
                    });
                }
                spec.cmdprio[direction] = Some(CmdPrio { shares });
                continue;
            }
            let percentage = percentages[direction].unwrap_or(0);
            if percentage > 0 {
                spec.cmdprio[direction] = Some(CmdPrio::percentage(percentage as u8, implicit));
            }
        }
        Ok(())
    }

    fn identity(
        &self,
        spec: &mut JobSpec,
        display_name: &str,
        notes: &mut Vec<Note>,
    ) -> Result<(), ParseError> {
        spec.stonewall = self.flag("stonewall", false);
        spec.group_reporting = self.flag("group_reporting", false);
        spec.description = self.text("description").map(str::to_string);
        if let Some(cgroup) = self.text("cgroup") {
            spec.cgroup = if cgroup.starts_with('/') {
                cgroup.to_string()
            } else {
                format!("/{cgroup}")
            };
        }
        spec.cgroup_weight = self.int("cgroup_weight").map(to_u32);
        for setting in iosched_core::qos::QOS_SETTINGS {
            let name = format!("qos_{setting}");
            if let Some(text) = self.text(&name) {
                spec.qos.set(setting, text).map_err(|error| {
                    self.error(
                        &name,
                        format!("job {display_name:?}: {name}={text}: {error}"),
                    )
                })?;
            }
        }
        spec.invalidate = self.flag("invalidate", true);
        spec.pre_read = self.flag("pre_read", false);
        spec.dontneed_every = match self.size("dontneed_every") {
            Some(Size::Bytes(0)) | None => None,
            Some(Size::Bytes(bytes)) => Some(bytes),
            Some(Size::Percent(_)) => {
                return Err(self.error(
                    "dontneed_every",
                    format!(
                        "job {display_name:?}: dontneed_every: a size in bytes, not a percentage"
                    ),
                ))
            }
        };
        spec.drop_caches = self.text("exec_prerun").and_then(drop_caches);
        spec.fadvise = match self.text("fadvise_hint").unwrap_or("1") {
            "0" => None,
            "random" => Some(Fadvise::Random),
            "sequential" => Some(Fadvise::Sequential),
            "noreuse" => Some(Fadvise::Noreuse),
            // 1: fio's fio_file_fadvise, by the pattern.
            _ if spec.rw.is_random() => Some(Fadvise::Random),
            _ => Some(Fadvise::Sequential),
        };
        spec.ioscheduler = self.text("ioscheduler").map(str::to_string);
        // fio switches the device to this scheduler; here it names the policy that runs, so an
        // unknown name is refused at its line.
        if let Some(name) = &spec.ioscheduler {
            iosched_core::policies::Stack::parse(name).map_err(|error| {
                self.error("ioscheduler", format!("ioscheduler={name}: {error}"))
            })?;
        }

        if let Some(Value::Floats(percentiles)) = self.job.settings.value("percentile_list") {
            spec.percentile_list = percentiles.clone();
        } else {
            spec.percentile_list = DEFAULT_PERCENTILES.to_vec();
        }
        spec.clat_percentiles = self.flag("clat_percentiles", true);
        if self.flag("lat_percentiles", false) {
            spec.clat_percentiles = true;
            self.note(
                notes,
                "lat_percentiles",
                "reported as completion-latency percentiles (total latency is completion plus \
                 submission latency, which only async engines have)",
            );
        }
        let log = |name: &str| -> Option<String> {
            match self.job.settings.value(name) {
                Some(Value::Text(prefix)) if prefix.is_empty() => Some(display_name.to_string()),
                Some(Value::Text(prefix)) => Some(prefix.clone()),
                _ => None,
            }
        };
        spec.write_lat_log = log("write_lat_log");
        spec.write_bw_log = log("write_bw_log");
        spec.write_iops_log = log("write_iops_log");
        if let Some(msec) = self.int("log_avg_msec") {
            spec.log_avg_msec = to_u32(msec);
        }
        spec.log_offset = self.flag("log_offset", false);
        spec.log_prio = self.flag("log_prio", false);
        Ok(())
    }

    /// `read_iolog` and the options that shape a replay; `write_iolog`.
    fn replay(&self, spec: &mut JobSpec, display_name: &str) -> Result<(), ParseError> {
        spec.write_iolog = self
            .text("write_iolog")
            .filter(|path| !path.is_empty())
            .map(str::to_string);
        let trace_options = ["iolog_format", "iolog_flow", "replay_mode"];
        let Some(path) = self.text("read_iolog").filter(|path| !path.is_empty()) else {
            if let Some(option) = trace_options.iter().find(|o| self.setting(o).is_some()) {
                return Err(self.error(
                    option,
                    format!("job {display_name:?}: {option} applies only with read_iolog"),
                ));
            }
            return Ok(());
        };
        // With read_iolog, fio's init_iolog never opens write_iolog; iosched writes it, the
        // replay's own issue log (the same requests, at the replay's times).
        let mut replay = ReplaySpec::new(path);
        replay.base_dir = std::path::Path::new(&self.job.location.file)
            .parent()
            .map(std::path::Path::to_path_buf);
        if let Some(format) = self.text("iolog_format") {
            replay.format =
                Some(Format::parse(format).map_err(|error| {
                    self.error("iolog_format", format!("iolog_format: {error}"))
                })?);
        }
        replay.flow = self.text("iolog_flow").map(str::to_string);
        if let Some(mode) = self.text("replay_mode") {
            replay.mode =
                ReplayMode::parse(mode).map_err(|error| self.error("replay_mode", error))?;
        }
        replay.no_stall = self.flag("replay_no_stall", false);
        if let Some(scale) = self.int("replay_time_scale") {
            if scale < 1 {
                return Err(self.error(
                    "replay_time_scale",
                    format!("replay_time_scale={scale}: a percentage of at least 1"),
                ));
            }
            replay.time_scale = to_u32(scale);
        }
        if let Some(scale) = self.int("replay_scale") {
            if scale < 1 {
                return Err(self.error(
                    "replay_scale",
                    format!("replay_scale={scale}: offsets are divided by it; at least 1"),
                ));
            }
            replay.scale = to_u64(scale);
        }
        if let Some(align) = self.int("replay_align") {
            if align < 0 || (align > 0 && !to_u64(align).is_power_of_two()) {
                return Err(self.error(
                    "replay_align",
                    format!("replay_align={align}: a power of 2 (or 0 for none)"),
                ));
            }
            replay.align = to_u64(align);
        }
        replay.redirect = self
            .text("replay_redirect")
            .filter(|name| !name.is_empty())
            .map(str::to_string);
        if let Some(skip) = self.text("replay_skip") {
            for word in skip.split(',').map(str::trim).filter(|w| !w.is_empty()) {
                let index = match word {
                    "read" => 0,
                    "write" => 1,
                    "trim" => 2,
                    "sync" => 3,
                    other => {
                        return Err(self.error(
                            "replay_skip",
                            format!("replay_skip: {other:?} is not read, write, trim or sync"),
                        ))
                    }
                };
                replay.skip[index] = true;
            }
        }
        spec.replay = Some(replay);
        Ok(())
    }

    fn filenames(&self, numjobs: u32) -> Result<Vec<Vec<String>>, ParseError> {
        let too_many = |name: &str| {
            self.error(
                name,
                format!("more than {FILES_MAX} file names in all for this job's clones"),
            )
        };
        if let Some(Value::Files(files)) = self.job.settings.value("filename") {
            if files.len().saturating_mul(numjobs as usize) > FILES_MAX {
                return Err(too_many("filename"));
            }
            return Ok(vec![files.clone(); numjobs as usize]);
        }
        let nrfiles = self.int("nrfiles").unwrap_or(1);
        if nrfiles < 1 {
            return Err(self.error("nrfiles", format!("nrfiles={nrfiles}: must be at least 1")));
        }
        if nrfiles.saturating_mul(i128::from(numjobs)) > FILES_MAX as i128 {
            return Err(too_many("nrfiles"));
        }
        let nrfiles = to_u32(nrfiles);
        let directories = self
            .text("directory")
            .map(split_colon_list)
            .unwrap_or_default();
        let format = self.text("filename_format");
        let mut sets = Vec::with_capacity(numjobs as usize);
        for clone in 0..numjobs {
            let directory =
                (!directories.is_empty()).then(|| &directories[clone as usize % directories.len()]);
            let in_directory = |name: String| match directory {
                Some(directory) => format!("{directory}/{name}"),
                None => name,
            };
            // fio uses a section named after a device as that device (exists_and_not_regfile).
            let names: Vec<String> = if nrfiles == 1 && self.job.section_name.starts_with("/dev/") {
                vec![in_directory(self.job.section_name.to_string())]
            } else {
                (0..nrfiles)
                    .map(|file| {
                        in_directory(make_filename(format, self.job.section_name, clone, file))
                    })
                    .collect()
            };
            sets.push(names);
        }
        Ok(sets)
    }

    fn file_size(&self, spec: &mut JobSpec, files: usize) -> Result<(), ParseError> {
        let Some(Value::SizeRange(low, high)) = self.job.settings.value("filesize") else {
            return Ok(());
        };
        if low != high {
            return Err(self.error(
                "filesize",
                "filesize as a range: refused: files of random sizes are not modelled",
            ));
        }
        // fio divides `size` between the files "unless filesize is specified": then each file
        // is `filesize` and `size` is only the I/O to do (as `io_size` would say it).
        match spec.size {
            Some(Amount::Bytes(total)) => {
                spec.io_size.get_or_insert(total);
            }
            Some(Amount::Percent(_)) => {
                return Err(self.error(
                    "filesize",
                    "filesize together with size as a percentage: refused: give size in bytes",
                ));
            }
            None => {}
        }
        spec.size = Some(Amount::Bytes(low.saturating_mul(files as u64)));
        Ok(())
    }

    fn check_size(&self, spec: &JobSpec) -> Result<(), ParseError> {
        if let Some(Amount::Bytes(size)) = spec.size {
            let min_block = spec.bs.iter().map(BlockSize::min).min().unwrap_or(0);
            if size < min_block {
                let name = if self.setting("size").is_some() {
                    "size"
                } else {
                    "filesize"
                };
                return Err(self.error(
                    name,
                    format!("size {size} is smaller than the minimum block size {min_block}"),
                ));
            }
        }
        Ok(())
    }
}

/// fio's `make_filename`: `filename_format` with `$jobname`, `$jobnum`, `$filenum` (and
/// `$clientuid`, empty here) replaced, case-insensitively; `jobname.jobnum.filenum` by default.
pub(super) fn make_filename(format: Option<&str>, jobname: &str, clone: u32, file: u32) -> String {
    let Some(format) = format.filter(|f| !f.is_empty()) else {
        return format!("{jobname}.{clone}.{file}");
    };
    let mut name = format.to_string();
    for (keyword, value) in [
        ("$jobname", jobname.to_string()),
        ("$jobnum", clone.to_string()),
        ("$filenum", file.to_string()),
        ("$clientuid", String::new()),
    ] {
        name = replace_ignoring_case(&name, keyword, &value);
    }
    name
}

fn replace_ignoring_case(text: &str, keyword: &str, value: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut start = 0;
    while let Some(found) = lower[start..].find(keyword) {
        out.push_str(&text[start..start + found]);
        out.push_str(value);
        start += found + keyword.len();
    }
    out.push_str(&text[start..]);
    out
}

/// The `N` of an `exec_prerun` that drops the host's caches, as fio job files do it: `echo N >
/// /proc/sys/vm/drop_caches`, optionally after `sync;` or `sync &&` (N: 1 the page cache, 2
/// slab objects, 3 both).
pub(super) fn drop_caches(command: &str) -> Option<u8> {
    let command = command.trim();
    let command = command
        .strip_prefix("sync")
        .map(|rest| {
            rest.trim_start()
                .trim_start_matches([';', '&'])
                .trim_start()
        })
        .unwrap_or(command);
    let rest = command.strip_prefix("echo")?.trim_start();
    let (value, target) = rest.split_once('>')?;
    let value: u8 = value.trim().parse().ok()?;
    (target.trim() == "/proc/sys/vm/drop_caches" && (1..=3).contains(&value)).then_some(value)
}

/// fio's `sync_file_range=FLAGS[:N]` (`str_sfr_cb`): FLAGS one or more of wait_before, write
/// and wait_after separated by commas, N the writes between calls (1 without it).
fn sync_file_range(text: &str) -> Result<SyncFileRange, String> {
    let (words, every) = match text.split_once(':') {
        Some((words, every)) => {
            let every: u32 = every.trim().parse().map_err(|_| {
                format!("bad count \"{every}\" after ':' (a number of writes, 1 or more)")
            })?;
            if every == 0 {
                return Err("a count of 0 writes between calls: give 1 or more".into());
            }
            (words, every)
        }
        None => (text, 1),
    };
    let mut flags = 0;
    for word in words.split(',').map(str::trim) {
        flags |= match word {
            "wait_before" => SyncFileRange::WAIT_BEFORE,
            "write" => SyncFileRange::WRITE,
            "wait_after" => SyncFileRange::WAIT_AFTER,
            _ => {
                return Err(format!(
                    "bad flag \"{word}\" (valid: wait_before, write, wait_after, joined by \
                     ',', then ':N' for every N writes)"
                ))
            }
        };
    }
    Ok(SyncFileRange { flags, every })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filename_formats() {
        assert_eq!(make_filename(None, "job", 2, 0), "job.2.0");
        assert_eq!(
            make_filename(Some("$jobname-$jobnum-$filenum"), "a", 1, 3),
            "a-1-3"
        );
        assert_eq!(make_filename(Some("data.$JobNum"), "a", 4, 0), "data.4");
        assert_eq!(make_filename(Some("fixed"), "a", 4, 0), "fixed");
    }

    // Proves the drop_caches commands fio job files use are recognised, and nothing else.
    #[test]
    fn drop_caches_commands() {
        assert_eq!(drop_caches("echo 3 > /proc/sys/vm/drop_caches"), Some(3));
        assert_eq!(
            drop_caches("sync; echo 1 >/proc/sys/vm/drop_caches"),
            Some(1)
        );
        assert_eq!(
            drop_caches("sync && echo 2 > /proc/sys/vm/drop_caches"),
            Some(2)
        );
        assert_eq!(drop_caches("echo 4 > /proc/sys/vm/drop_caches"), None);
        assert_eq!(drop_caches("echo 3 > /tmp/x"), None);
        assert_eq!(drop_caches("rm -rf /"), None);
    }
}

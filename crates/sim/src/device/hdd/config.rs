//! Every parameter of the `hdd` model: its default, unit, and where the value comes from.
//!
//! The defaults describe a Hitachi Deskstar 7K500 (HDS725050KLA360, 2005-2006): 500 GB,
//! 7200 rpm, SATA 3 Gb/s with NCQ, 16 MB buffer. Figures come from its OEM specification
//! (30 zones, 76.3 / 36.5 MB/s instantaneous and 64.8 / 31.0 MB/s sustained media rates in
//! zones 0 / 29, 8.5 ms average read seek, the random-read throughput table), from the Hitachi
//! Deskstar family of the same era (single-track seek, write seeks 1 ms slower), from DiskSim's
//! Seagate Barracuda (full stroke 16.68 ms, command overheads as a starting point), and from the
//! seeds' measurements (seed 003: a synchronous 4 KiB sequential reader reaches ~35 MB/s; seed
//! 004: NCQ doubles IOPS from QD1 to QD32 and stretches the p99.99 past a second).

use crate::device::{parse_flag, parse_integer, parse_number, DeviceError};

/// The settable parameters of the `hdd` model. See [`SETTINGS`] for units and sources.
#[derive(Clone, Debug, PartialEq)]
pub struct HddConfig {
    /// The model's name, as `--device` takes it (a preset of this model has its own).
    pub model: &'static str,
    /// Spindle speed, revolutions per minute.
    pub rpm: f64,
    /// Addressable 512-byte sectors.
    pub capacity_sectors: u64,
    /// Recording surfaces (heads).
    pub heads: u32,
    /// Recording zones.
    pub zones: u32,
    /// Sectors per track in the outermost zone.
    pub outer_sectors_per_track: u32,
    /// Sectors per track in the innermost zone.
    pub inner_sectors_per_track: u32,
    /// One-cylinder seek, ms.
    pub track_to_track_ms: f64,
    /// Intercept of seeks of two cylinders or more: the settle every real seek ends with, ms.
    pub seek_settle_ms: f64,
    /// Average read seek over all pairs of cylinders, ms.
    pub average_seek_ms: f64,
    /// Full-stroke seek, ms.
    pub full_stroke_ms: f64,
    /// Extra settling before a write after the head moved, ms.
    pub write_settle_ms: f64,
    /// Head switch within a cylinder, ms.
    pub head_switch_ms: f64,
    /// Controller overhead of a read served from the buffer, ms.
    pub read_hit_overhead_ms: f64,
    /// Controller overhead of a read that goes to the media, ms.
    pub read_miss_overhead_ms: f64,
    /// Controller overhead of a write, ms.
    pub write_overhead_ms: f64,
    /// Host interface payload rate, MB/s (10^6 bytes).
    pub bus_mb_per_s: f64,
    /// Read segments in the buffer.
    pub cache_segments: u32,
    /// Size of one read segment, KiB.
    pub segment_kib: u64,
    /// Write-back buffer, KiB.
    pub write_buffer_kib: u64,
    /// Write-back caching on.
    pub write_cache: bool,
    /// NCQ depth.
    pub queue_depth: u32,
    /// What the firmware orders queued commands by.
    pub ncq_order: NcqOrder,
    /// Aged SPTF weight: positioning ns forgiven per ns waited.
    pub ncq_age_weight: f64,
    /// NCQ hard deadline, ms.
    pub ncq_deadline_ms: f64,
    /// NCQ priority (libata's `ncq_prio_enable`): commands of the classes in
    /// `ncq_prio_classes` go to the drive as high priority.
    pub ncq_prio_enable: bool,
    /// The I/O priority classes sent as high-priority commands when `ncq_prio_enable` is on:
    /// bit 0 RT, bit 1 BE, bit 2 IDLE (libata: RT only).
    pub ncq_prio_classes: u8,
    /// Positioning forgiven a high-priority command, in revolutions.
    pub ncq_prio_credit_rev: f64,
    /// Command duration limits (Linux 6.5+ `cdl_enable`): a request whose priority hint is 1
    /// to 7 carries that descriptor of its direction.
    pub cdl_enable: bool,
    /// The read descriptors 1 to 7 (T2A page).
    pub cdl_read: [CdlDescriptor; 7],
    /// The write descriptors 1 to 7 (T2B page).
    pub cdl_write: [CdlDescriptor; 7],
    /// A command this close to its inactive limit is served before others, ms.
    pub cdl_guard_ms: f64,
    /// Idle time before background destaging starts, ms.
    pub destage_idle_ms: f64,
    /// Dirty share of the write buffer above which destages compete with host commands, %.
    pub destage_high_water_pct: f64,
    /// Largest single destage, KiB.
    pub destage_max_kib: u64,
    /// Dirty extents examined on each side of the head when choosing a destage.
    pub destage_candidates: u32,
    /// Free share of a segment that restarts a paused read-ahead, %.
    pub read_ahead_resume_pct: f64,
    /// Read-ahead no command may interrupt after a miss continuing a sequential stream, KiB.
    pub stream_read_ahead_kib: u64,
}

/// What the drive does with a command that exceeds a limit of its descriptor (the policy
/// fields of a CDL descriptor; cdl-tools' names in parentheses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CdlPolicy {
    /// Go on and complete it as soon as possible (`complete-earliest`, 0h).
    #[default]
    BestEffort,
    /// Abort it: the host sees the command fail with ETIME, as Linux reports
    /// `BLK_STS_DURATION_LIMIT` (`abort`, Fh).
    Abort,
    /// Drop its limits: from then on it is an ordinary command (`continue-no-limit`, 2h, a
    /// duration guideline policy; here for the inactive limit too).
    Demote,
}

impl CdlPolicy {
    fn name(self) -> &'static str {
        match self {
            CdlPolicy::BestEffort => "best-effort",
            CdlPolicy::Abort => "abort",
            CdlPolicy::Demote => "demote",
        }
    }
}

/// One command duration limit descriptor: limits in ms (0: none) and the policy for both.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CdlDescriptor {
    /// Longest wait in the queue before the drive starts the command, ms (0: none).
    pub inactive_ms: f64,
    /// Longest time from the start of its media access to its completion, ms (0: none).
    pub active_ms: f64,
    /// What happens when a limit is exceeded.
    pub policy: CdlPolicy,
}

impl CdlDescriptor {
    /// Whether it limits anything.
    pub fn is_set(&self) -> bool {
        self.inactive_ms > 0.0 || self.active_ms > 0.0
    }

    /// `off`, or `inactive=30ms,active=0ms,policy=abort` (any of the three; a limit without a
    /// unit is in ms; `us` and `s` are accepted).
    fn parse(name: &str, value: &str) -> Result<CdlDescriptor, DeviceError> {
        let text = value.trim();
        let mut descriptor = CdlDescriptor::default();
        if text.eq_ignore_ascii_case("off") || text.is_empty() {
            return Ok(descriptor);
        }
        for field in text.split(',').map(str::trim) {
            let Some((key, item)) = field.split_once('=') else {
                return Err(bad(
                    name,
                    value,
                    &format!("\"{field}\" is not key=value; expected off or \
                              inactive=30ms,active=50ms,policy=abort"),
                ));
            };
            match key.trim() {
                "inactive" => descriptor.inactive_ms = parse_limit_ms(name, value, item)?,
                "active" => descriptor.active_ms = parse_limit_ms(name, value, item)?,
                "policy" => {
                    descriptor.policy = match item.trim() {
                        "best-effort" | "complete-earliest" => CdlPolicy::BestEffort,
                        "abort" => CdlPolicy::Abort,
                        "demote" | "continue-no-limit" => CdlPolicy::Demote,
                        other => {
                            return Err(bad(
                                name,
                                value,
                                &format!("policy \"{other}\": expected best-effort, abort or demote"),
                            ))
                        }
                    }
                }
                other => {
                    return Err(bad(
                        name,
                        value,
                        &format!("unknown field \"{other}\"; expected inactive, active or policy"),
                    ))
                }
            }
        }
        Ok(descriptor)
    }

    fn text(&self) -> String {
        if !self.is_set() {
            return "off".into();
        }
        format!(
            "inactive={}ms,active={}ms,policy={}",
            self.inactive_ms,
            self.active_ms,
            self.policy.name()
        )
    }
}

/// A time limit: `30ms`, `500us`, `2s`, or a bare number of ms; at most an hour.
fn parse_limit_ms(name: &str, value: &str, item: &str) -> Result<f64, DeviceError> {
    let item = item.trim();
    let (number, scale) = if let Some(n) = item.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = item.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = item.strip_suffix('s') {
        (n, 1e3)
    } else {
        (item, 1.0)
    };
    let number: f64 = number
        .trim()
        .parse()
        .map_err(|_| bad(name, value, &format!("limit \"{item}\" is not a time")))?;
    let ms = number * scale;
    if !ms.is_finite() || !(0.0..=3_600_000.0).contains(&ms) {
        return Err(bad(
            name,
            value,
            &format!("limit \"{item}\" must be within 0..=1h"),
        ));
    }
    Ok(ms)
}

/// The names of the descriptor settings, reads then writes.
pub const CDL_SETTING_NAMES: [&str; 14] = [
    "cdl_read_1",
    "cdl_read_2",
    "cdl_read_3",
    "cdl_read_4",
    "cdl_read_5",
    "cdl_read_6",
    "cdl_read_7",
    "cdl_write_1",
    "cdl_write_2",
    "cdl_write_3",
    "cdl_write_4",
    "cdl_write_5",
    "cdl_write_6",
    "cdl_write_7",
];

/// The descriptor a `cdl_read_N` / `cdl_write_N` name refers to: (write, index 0..7).
fn cdl_setting(name: &str) -> Option<(bool, usize)> {
    let index = CDL_SETTING_NAMES.iter().position(|n| *n == name)?;
    Some((index >= 7, index % 7))
}

/// `ncq_prio_classes` bit of the RT class.
pub const PRIO_CLASS_RT: u8 = 1;
/// `ncq_prio_classes` bit of the BE class (and of no class, which is BE).
pub const PRIO_CLASS_BE: u8 = 2;
/// `ncq_prio_classes` bit of the IDLE class.
pub const PRIO_CLASS_IDLE: u8 = 4;

/// Parses `rt`, `rt,be`...: the classes sent as high-priority commands.
fn parse_prio_classes(name: &str, value: &str) -> Result<u8, DeviceError> {
    let mut bits = 0;
    for class in value.split(',').map(str::trim) {
        bits |= match class.to_ascii_lowercase().as_str() {
            "rt" => PRIO_CLASS_RT,
            "be" => PRIO_CLASS_BE,
            "idle" => PRIO_CLASS_IDLE,
            _ => {
                return Err(DeviceError::BadValue {
                    name: name.to_string(),
                    value: value.to_string(),
                    reason: "expected a comma-separated list of rt, be and idle".into(),
                })
            }
        };
    }
    Ok(bits)
}

/// What the drive's firmware orders its queued commands by (`ncq_order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NcqOrder {
    /// Shortest positioning time first: seek and rotational wait (DiskSim's SPTF).
    Sptf,
    /// Shortest seek first: the rotational wait is not looked at (DiskSim's SSTF).
    Sstf,
}

impl NcqOrder {
    /// The setting's value for it.
    pub fn name(self) -> &'static str {
        match self {
            NcqOrder::Sptf => "sptf",
            NcqOrder::Sstf => "sstf",
        }
    }

    fn parse(name: &str, value: &str) -> Result<NcqOrder, DeviceError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "sptf" => Ok(NcqOrder::Sptf),
            "sstf" => Ok(NcqOrder::Sstf),
            _ => Err(DeviceError::BadValue {
                name: name.to_string(),
                value: value.to_string(),
                reason: "expected sptf (positioning time) or sstf (seek time)".into(),
            }),
        }
    }
}

/// Sectors of the default 500 GB drive (IDEMA LBA count for 500 GB, the 7K500's capacity).
pub const DEFAULT_CAPACITY_SECTORS: u64 = 976_773_168;

impl Default for HddConfig {
    fn default() -> Self {
        HddConfig {
            model: "hdd",
            rpm: 7200.0,
            capacity_sectors: DEFAULT_CAPACITY_SECTORS,
            heads: 10,
            zones: 30,
            // 76.3 MB/s = sectors * 512 B * 120 rev/s.
            outer_sectors_per_track: 1242,
            // 36.5 MB/s.
            inner_sectors_per_track: 594,
            track_to_track_ms: 1.0,
            seek_settle_ms: 2.0,
            average_seek_ms: 8.5,
            full_stroke_ms: 16.7,
            write_settle_ms: 1.0,
            head_switch_ms: 1.4,
            read_hit_overhead_ms: 0.1,
            read_miss_overhead_ms: 0.23,
            write_overhead_ms: 0.16,
            bus_mb_per_s: 300.0,
            cache_segments: 16,
            segment_kib: 512,
            write_buffer_kib: 8192,
            write_cache: true,
            queue_depth: 32,
            ncq_order: NcqOrder::Sptf,
            ncq_age_weight: 0.001,
            ncq_deadline_ms: 2000.0,
            ncq_prio_enable: false,
            ncq_prio_classes: PRIO_CLASS_RT,
            ncq_prio_credit_rev: 1000.0,
            cdl_enable: false,
            cdl_read: [CdlDescriptor::default(); 7],
            cdl_write: [CdlDescriptor::default(); 7],
            cdl_guard_ms: 25.0,
            destage_idle_ms: 0.5,
            destage_high_water_pct: 75.0,
            destage_max_kib: 512,
            destage_candidates: 4,
            read_ahead_resume_pct: 25.0,
            stream_read_ahead_kib: 512,
        }
    }
}

/// One settable parameter: name, unit, and what it is and where the default comes from.
pub struct Setting {
    /// Name as `--device-set NAME=VALUE` takes it.
    pub name: &'static str,
    /// Unit.
    pub unit: &'static str,
    /// Meaning and source.
    pub note: &'static str,
}

/// Every settable parameter, in the order `parameters()` lists them.
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "rpm",
        unit: "rev/min",
        note: "spindle speed; 7K500 spec: 7200 (8.333 ms per revolution)",
    },
    Setting {
        name: "capacity_gb",
        unit: "GB",
        note: "addressable size (10^9 B); default 976,773,168 sectors, the 7K500's 500 GB; a \
               smaller value keeps the format and the seek figures and uses fewer cylinders",
    },
    Setting {
        name: "heads",
        unit: "surfaces",
        note: "7K500: 5 platters, 10 heads",
    },
    Setting {
        name: "zones",
        unit: "zones",
        note: "7K500 spec lists zones 0..29; equal cylinders per zone, sectors per track linear",
    },
    Setting {
        name: "outer_sectors_per_track",
        unit: "sectors",
        note: "zone 0; 7K500 spec: 76.3 MB/s instantaneous = 1242 x 512 B x 120 rev/s",
    },
    Setting {
        name: "inner_sectors_per_track",
        unit: "sectors",
        note: "innermost zone; 7K500 spec: 36.5 MB/s instantaneous (zone 29)",
    },
    Setting {
        name: "track_to_track_ms",
        unit: "ms",
        note: "one-cylinder seek t1; Hitachi specs of the era: 1.0 ms read (REFERENCE: 0.2-1.0)",
    },
    Setting {
        name: "seek_settle_ms",
        unit: "ms",
        note: "intercept s of every seek of two cylinders or more (the servo settling the head \
               on its new track); the single-track t1 is a micro-jog. 2.0 ms: the track-to-track \
               seek of WD's desktop 7200 rpm data sheets of the era (Caviar SE16, Blue), which \
               Hitachi's 1.0 ms single-track figure leaves out. Seeds 000 (64 KiB reads over \
               10 GB: 8.91 ms) and 003 (4 KiB over 2 GB: 484 KiB/s) both need ~3 ms seeks over \
               such spans, where s = t1 (DiskSim's curve) gives 1.4-1.7 ms",
    },
    Setting {
        name: "average_seek_ms",
        unit: "ms",
        note: "average read seek A over all cylinder pairs; 7K500 spec: 8.5 ms",
    },
    Setting {
        name: "full_stroke_ms",
        unit: "ms",
        note: "full stroke F; DiskSim's Barracuda 16.68 ms (REFERENCE: 15-18 ms)",
    },
    Setting {
        name: "write_settle_ms",
        unit: "ms",
        note: "added to a write's seek; Deskstar 7K1000.C: 9.5 ms write vs 8.5 ms read average",
    },
    Setting {
        name: "head_switch_ms",
        unit: "ms",
        note: "7K500 sustained 64.8 of 76.3 MB/s = 10 revs / (10 revs + 9 head + 1 cylinder \
               switches) gives ~1.4-1.5 ms per switch",
    },
    Setting {
        name: "read_hit_overhead_ms",
        unit: "ms",
        note: "read served from the buffer; DiskSim Barracuda 0.082 ms; 0.1 ms + bus gives seed \
               003's ~35 MB/s for one synchronous 4 KiB sequential reader",
    },
    Setting {
        name: "read_miss_overhead_ms",
        unit: "ms",
        note: "read going to the media; 7K500 random-read table: 4096 reads in 55.5 s typical \
               (105% of T) leaves 0.23 ms besides 8.5 ms seek and 4.17 ms latency (DiskSim \
               Barracuda: 0.61 ms, a 1990s controller)",
    },
    Setting {
        name: "write_overhead_ms",
        unit: "ms",
        note: "write command; seed 003: one 4 KiB direct sequential writer ~22.7 MB/s into the \
               write cache = 0.18 ms per write including bus (DiskSim Barracuda: 1.05 ms)",
    },
    Setting {
        name: "bus_mb_s",
        unit: "MB/s",
        note: "SATA 3 Gb/s payload rate; 7K500 spec: 300 MB/s buffer-host",
    },
    Setting {
        name: "cache_segments",
        unit: "segments",
        note: "read segments (LRU); with segment_kib and write_buffer_kib they split the 7K500's \
               16 MB buffer (our choice: real firmware adapts the split)",
    },
    Setting {
        name: "segment_kib",
        unit: "KiB",
        note: "size of one read segment, also how far read-ahead runs past the last host read",
    },
    Setting {
        name: "write_buffer_kib",
        unit: "KiB",
        note: "write-back buffer for dirty data",
    },
    Setting {
        name: "write_cache",
        unit: "on/off",
        note: "write-back caching (hdparm -W); on by default as shipped",
    },
    Setting {
        name: "queue_depth",
        unit: "commands",
        note: "NCQ depth, 1..32 (SATA NCQ has 32 tags; Linux libata uses 31 of them)",
    },
    Setting {
        name: "ncq_order",
        unit: "sptf|sstf",
        note: "what the firmware orders queued commands by: sptf, the positioning time (seek and \
               the rotational wait, DiskSim's SPTF, the rotational position ordering of \
               enterprise drives); sstf, the seek alone (DiskSim's SSTF), rotation left to \
               chance: small gains for commands close together and long starvation at the \
               edges of the busy span, as seed 003's desktop SATA drive shows (4 KiB random \
               readers of 2 GB files each: aggregate falling from 1 to 16 readers, the slowest \
               getting a fifth of the fastest's share, waits to 4 s)",
    },
    Setting {
        name: "ncq_age_weight",
        unit: "ns/ns",
        note: "aged SPTF (DiskSim): effective = positioning - weight x age; 1 ms of credit per \
               second waited. At QD32 (mean wait ~160 ms) it leaves throughput at pure SPTF's \
               (~197 IOPS) but lets commands near the tail win the many near-ties, cutting the \
               4K random p99.99 from 1.7 s (pure SPTF, as REFERENCE's model) to ~1.3 s \
               (seed 004: over 1 s)",
    },
    Setting {
        name: "ncq_deadline_ms",
        unit: "ms",
        note: "hard deadline: no command waits longer than this plus one access (real \
               drives: ~1-4 s, REFERENCE). The firmware goes oldest first from the moment a \
               command would otherwise miss it, counting the longest access of each older \
               one, and even stops a stream's read-ahead for it. Just above the longest wait \
               aged SPTF gives under random load (~1.9 s at QD32), so it fires only where \
               positioning alone would starve a command, e.g. a far read behind a stream",
    },
    Setting {
        name: "ncq_prio_enable",
        unit: "on/off",
        note: "NCQ priority, as libata's ncq_prio_enable (sysfs, off by default): commands of \
               the classes in ncq_prio_classes carry the PRIO bit (ata_build_rw_tf: \
               ATA_PRIO_HIGH), and the drive serves them before normal ones, by positioning \
               among themselves; ncq_deadline_ms still bounds every command's wait",
    },
    Setting {
        name: "ncq_prio_classes",
        unit: "classes",
        note: "I/O priority classes sent as high priority when ncq_prio_enable is on: rt (as \
               libata), or a list such as rt,be",
    },
    Setting {
        name: "ncq_prio_credit_rev",
        unit: "revolutions",
        note: "how a high-priority command is blended with positioning: it goes first unless a \
               normal command can be reached this many revolutions sooner. 1000 or more (the \
               default) is strict priority: high commands first, by positioning among \
               themselves, every command's wait bounded by ncq_deadline_ms. REFERENCE says \
               drives blend priority with positioning; how much is not published",
    },
    Setting {
        name: "cdl_enable",
        unit: "on/off",
        note: "command duration limits (Linux 6.5+ sysfs cdl_enable, off by default; libata \
               refuses it together with ncq_prio_enable): a request with priority hint 1-7 \
               (fio's priohint, cmdprio_hint) carries that descriptor (sd_cdl_dld), and the \
               drive serves it by its limits",
    },
    Setting {
        name: "cdl_read_1",
        unit: "descriptor",
        note: "read command duration limit descriptor 1, for requests with priority hint 1: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_read_2",
        unit: "descriptor",
        note: "read command duration limit descriptor 2, for requests with priority hint 2: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_read_3",
        unit: "descriptor",
        note: "read command duration limit descriptor 3, for requests with priority hint 3: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_read_4",
        unit: "descriptor",
        note: "read command duration limit descriptor 4, for requests with priority hint 4: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_read_5",
        unit: "descriptor",
        note: "read command duration limit descriptor 5, for requests with priority hint 5: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_read_6",
        unit: "descriptor",
        note: "read command duration limit descriptor 6, for requests with priority hint 6: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_read_7",
        unit: "descriptor",
        note: "read command duration limit descriptor 7, for requests with priority hint 7: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_write_1",
        unit: "descriptor",
        note: "write command duration limit descriptor 1, for requests with priority hint 1: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_write_2",
        unit: "descriptor",
        note: "write command duration limit descriptor 2, for requests with priority hint 2: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_write_3",
        unit: "descriptor",
        note: "write command duration limit descriptor 3, for requests with priority hint 3: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_write_4",
        unit: "descriptor",
        note: "write command duration limit descriptor 4, for requests with priority hint 4: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_write_5",
        unit: "descriptor",
        note: "write command duration limit descriptor 5, for requests with priority hint 5: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_write_6",
        unit: "descriptor",
        note: "write command duration limit descriptor 6, for requests with priority hint 6: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_write_7",
        unit: "descriptor",
        note: "write command duration limit descriptor 7, for requests with priority hint 7: \
               off, or inactive=T,active=T,policy=best-effort|abort|demote",
    },
    Setting {
        name: "cdl_guard_ms",
        unit: "ms",
        note: "a command with an inactive limit is served first (earliest limit first) from \
               this long before its limit: one full-stroke seek plus one revolution (our \
               choice; how drives schedule limits is not published)",
    },
    Setting {
        name: "destage_idle_ms",
        unit: "ms",
        note: "idle time before background destaging (our choice: lets a synchronous host's next \
               command take the head first)",
    },
    Setting {
        name: "destage_high_water_pct",
        unit: "%",
        note: "above this dirty share, destages compete with host commands by positioning time",
    },
    Setting {
        name: "destage_max_kib",
        unit: "KiB",
        note: "largest destage written in one go (bounds how long a destage holds the head)",
    },
    Setting {
        name: "destage_candidates",
        unit: "extents",
        note: "dirty extents examined on each side of the head (plus the oldest) per destage",
    },
    Setting {
        name: "read_ahead_resume_pct",
        unit: "%",
        note: "a read-ahead paused by a full segment resumes when this share is free again",
    },
    Setting {
        name: "stream_read_ahead_kib",
        unit: "KiB",
        note: "after a miss that continues a sequential stream, read-ahead this far is not \
               interrupted (firmware stream detection; at most a segment; 0 turns it off), \
               except by a command that has waited ncq_deadline_ms. Keeps interleaved \
               sequential readers from thrashing the head",
    },
];

fn bad(name: &str, value: &str, reason: &str) -> DeviceError {
    DeviceError::BadValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

fn within(name: &str, value: &str, number: f64, min: f64, max: f64) -> Result<f64, DeviceError> {
    if number < min || number > max {
        return Err(bad(name, value, &format!("must be within {min}..={max}")));
    }
    Ok(number)
}

impl HddConfig {
    /// Applies one setting.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), DeviceError> {
        let number = |min: f64, max: f64| -> Result<f64, DeviceError> {
            within(name, value, parse_number(name, value)?, min, max)
        };
        match name {
            "rpm" => self.rpm = number(1000.0, 20_000.0)?,
            "capacity_gb" => {
                let gigabytes = number(0.1, 100_000.0)?;
                // Whole 4 KiB blocks, as drives report.
                self.capacity_sectors = ((gigabytes * 1e9 / 512.0) as u64 / 8) * 8;
            }
            "heads" => self.heads = parse_integer(name, value, 1, 32)? as u32,
            "zones" => self.zones = parse_integer(name, value, 1, 256)? as u32,
            "outer_sectors_per_track" => {
                self.outer_sectors_per_track = parse_integer(name, value, 16, 100_000)? as u32
            }
            "inner_sectors_per_track" => {
                self.inner_sectors_per_track = parse_integer(name, value, 16, 100_000)? as u32
            }
            "track_to_track_ms" => self.track_to_track_ms = number(0.01, 100.0)?,
            "seek_settle_ms" => self.seek_settle_ms = number(0.01, 100.0)?,
            "average_seek_ms" => self.average_seek_ms = number(0.01, 100.0)?,
            "full_stroke_ms" => self.full_stroke_ms = number(0.01, 200.0)?,
            "write_settle_ms" => self.write_settle_ms = number(0.0, 100.0)?,
            "head_switch_ms" => self.head_switch_ms = number(0.0, 100.0)?,
            "read_hit_overhead_ms" => self.read_hit_overhead_ms = number(0.0, 100.0)?,
            "read_miss_overhead_ms" => self.read_miss_overhead_ms = number(0.0, 100.0)?,
            "write_overhead_ms" => self.write_overhead_ms = number(0.0, 100.0)?,
            "bus_mb_s" => self.bus_mb_per_s = number(1.0, 100_000.0)?,
            "cache_segments" => self.cache_segments = parse_integer(name, value, 1, 256)? as u32,
            "segment_kib" => self.segment_kib = parse_integer(name, value, 4, 1 << 20)?,
            "write_buffer_kib" => self.write_buffer_kib = parse_integer(name, value, 4, 1 << 22)?,
            "write_cache" => self.write_cache = parse_flag(name, value)?,
            "queue_depth" => self.queue_depth = parse_integer(name, value, 1, 32)? as u32,
            "ncq_order" => self.ncq_order = NcqOrder::parse(name, value)?,
            "ncq_age_weight" => self.ncq_age_weight = number(0.0, 1000.0)?,
            "ncq_deadline_ms" => self.ncq_deadline_ms = number(1.0, 3_600_000.0)?,
            "ncq_prio_enable" => self.ncq_prio_enable = parse_flag(name, value)?,
            "ncq_prio_classes" => self.ncq_prio_classes = parse_prio_classes(name, value)?,
            "ncq_prio_credit_rev" => self.ncq_prio_credit_rev = number(0.0, 1000.0)?,
            "cdl_enable" => self.cdl_enable = parse_flag(name, value)?,
            "cdl_guard_ms" => self.cdl_guard_ms = number(0.0, 3_600_000.0)?,
            _ if cdl_setting(name).is_some() => {
                let (write, index) = cdl_setting(name).expect("checked");
                let descriptor = CdlDescriptor::parse(name, value)?;
                if write {
                    self.cdl_write[index] = descriptor;
                } else {
                    self.cdl_read[index] = descriptor;
                }
            }
            "destage_idle_ms" => self.destage_idle_ms = number(0.0, 60_000.0)?,
            "destage_high_water_pct" => self.destage_high_water_pct = number(0.0, 100.0)?,
            "destage_max_kib" => self.destage_max_kib = parse_integer(name, value, 4, 1 << 20)?,
            "destage_candidates" => {
                self.destage_candidates = parse_integer(name, value, 1, 1024)? as u32
            }
            "read_ahead_resume_pct" => self.read_ahead_resume_pct = number(1.0, 100.0)?,
            "stream_read_ahead_kib" => {
                self.stream_read_ahead_kib = parse_integer(name, value, 0, 1 << 20)?
            }
            _ => {
                return Err(DeviceError::UnknownParameter {
                    model: self.model.into(),
                    name: name.to_string(),
                    known: SETTINGS.iter().map(|s| s.name.to_string()).collect(),
                })
            }
        }
        Ok(())
    }

    /// The value of setting `name` as text.
    pub fn get(&self, name: &str) -> String {
        match name {
            "rpm" => format!("{}", self.rpm),
            "capacity_gb" => format!("{:.3}", self.capacity_sectors as f64 * 512.0 / 1e9),
            "heads" => self.heads.to_string(),
            "zones" => self.zones.to_string(),
            "outer_sectors_per_track" => self.outer_sectors_per_track.to_string(),
            "inner_sectors_per_track" => self.inner_sectors_per_track.to_string(),
            "track_to_track_ms" => format!("{}", self.track_to_track_ms),
            "seek_settle_ms" => format!("{}", self.seek_settle_ms),
            "average_seek_ms" => format!("{}", self.average_seek_ms),
            "full_stroke_ms" => format!("{}", self.full_stroke_ms),
            "write_settle_ms" => format!("{}", self.write_settle_ms),
            "head_switch_ms" => format!("{}", self.head_switch_ms),
            "read_hit_overhead_ms" => format!("{}", self.read_hit_overhead_ms),
            "read_miss_overhead_ms" => format!("{}", self.read_miss_overhead_ms),
            "write_overhead_ms" => format!("{}", self.write_overhead_ms),
            "bus_mb_s" => format!("{}", self.bus_mb_per_s),
            "cache_segments" => self.cache_segments.to_string(),
            "segment_kib" => self.segment_kib.to_string(),
            "write_buffer_kib" => self.write_buffer_kib.to_string(),
            "write_cache" => if self.write_cache { "on" } else { "off" }.to_string(),
            "queue_depth" => self.queue_depth.to_string(),
            "ncq_order" => self.ncq_order.name().to_string(),
            "ncq_age_weight" => format!("{}", self.ncq_age_weight),
            "ncq_deadline_ms" => format!("{}", self.ncq_deadline_ms),
            "ncq_prio_enable" => if self.ncq_prio_enable { "on" } else { "off" }.to_string(),
            "ncq_prio_credit_rev" => format!("{}", self.ncq_prio_credit_rev),
            "cdl_enable" => if self.cdl_enable { "on" } else { "off" }.to_string(),
            "cdl_guard_ms" => format!("{}", self.cdl_guard_ms),
            _ if cdl_setting(name).is_some() => {
                let (write, index) = cdl_setting(name).expect("checked");
                if write {
                    self.cdl_write[index].text()
                } else {
                    self.cdl_read[index].text()
                }
            }
            "ncq_prio_classes" => [
                (PRIO_CLASS_RT, "rt"),
                (PRIO_CLASS_BE, "be"),
                (PRIO_CLASS_IDLE, "idle"),
            ]
            .iter()
            .filter(|(bit, _)| self.ncq_prio_classes & bit != 0)
            .map(|(_, name)| *name)
            .collect::<Vec<_>>()
            .join(","),
            "destage_idle_ms" => format!("{}", self.destage_idle_ms),
            "destage_high_water_pct" => format!("{}", self.destage_high_water_pct),
            "destage_max_kib" => self.destage_max_kib.to_string(),
            "destage_candidates" => self.destage_candidates.to_string(),
            "read_ahead_resume_pct" => format!("{}", self.read_ahead_resume_pct),
            "stream_read_ahead_kib" => self.stream_read_ahead_kib.to_string(),
            _ => unreachable!("every setting has a getter: {name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed setting can be read back and set to its own value.
    #[test]
    fn every_setting_round_trips() {
        let defaults = HddConfig::default();
        let mut config = HddConfig::default();
        for setting in SETTINGS {
            let value = defaults.get(setting.name);
            config.set(setting.name, &value).unwrap();
        }
        let mut expected = defaults.clone();
        // capacity_gb prints rounded; it comes back as whole 4 KiB blocks of that size.
        expected.capacity_sectors = config.capacity_sectors;
        assert_eq!(config, expected);
        assert!(matches!(
            config.set("nonsense", "1"),
            Err(DeviceError::UnknownParameter { .. })
        ));
        assert!(config.set("queue_depth", "33").is_err());
        config
            .set("cdl_read_2", "inactive=30ms,active=0.5s,policy=abort")
            .unwrap();
        assert_eq!(
            config.get("cdl_read_2"),
            "inactive=30ms,active=500ms,policy=abort"
        );
        let again = config.get("cdl_read_2");
        config.set("cdl_read_2", &again).unwrap();
        assert_eq!(config.cdl_read[1].policy, CdlPolicy::Abort);
        for bad in ["inactive", "inactive=-1ms", "policy=drop", "nope=1", "inactive=2h"] {
            let error = config.set("cdl_write_7", bad).unwrap_err().to_string();
            assert!(error.contains("cdl_write_7"), "{bad}: {error}");
        }
        assert!(config.set("write_cache", "maybe").is_err());
    }
}

//! fio's `zonemode=zbd` (zbd.c) on devices and files that are not zoned.
//!
//! fio emulates zones of `zonesize` bytes over a regular file or a conventional block device
//! (`init_zone_info`): every zone is sequential-write-required and empty at the start, its
//! write pointer at its first byte. The jobs that name one file share its zones
//! (`zbd_init_zone_info`), and fio keeps the rules a host-managed drive imposes:
//!
//! - A write goes to the write pointer of its zone (`zbd_adjust_block`), which moves on as the
//!   write is queued (`zbd_queue_io`); a zone too full for the smallest block is reset first
//!   (`zbd_reset_zone`: no data is lost on an emulated zone, the reset is bookkeeping, counted
//!   as fio's "zone resets"), except under `verify`, which skips full zones instead.
//! - At most `max_open_zones` zones (and `job_max_open_zones` per job) take writes at once
//!   (`zbd_open_zone`); a write whose zone cannot be opened goes to an open zone chosen from its
//!   offset (`zbd_convert_to_open_zone`, `pick_random_zone_idx`), and a zone closes when a
//!   write that filled it completes (`zbd_end_zone_io`). When every open slot is taken the job
//!   first waits for its own I/O to complete (`io_u_quiesce`).
//! - A read sees only written data (`read_beyond_wp=0`): it is moved to a zone holding at
//!   least one block (`zbd_find_zone`: the next such zone for sequential reads, the nearest
//!   for random ones) and shortened to end at the write pointer; with no data anywhere the job
//!   has nothing to do (`io_u_eof`).
//! - A mixed job's first reads become writes while no zone holds data (`zbd_adjust_ddir`).
//! - `zone_reset_threshold` and `zone_reset_frequency` reset a zone every 1/frequency writes
//!   once the zones hold that share of the job's range.
//! - Zone locks (`zone_lock`): a zone with I/O in flight from one job takes no I/O from another
//!   until that completes; the other job waits (fio blocks on the zone's mutex).
//! - Writers' ranges are rounded to whole zones (`zbd_verify_sizes`), and with `verify` every
//!   block size must divide the zone size (`zbd_verify_bs`).
//!
//! Where ours differs: zones are looked up and locked once, for the zone an I/O ends up in
//! (fio locks each zone it considers on the way); a job that finds nothing to do ends, where a
//! time-based fio job would keep looking, doing no I/O, until its runtime ends; a real zoned
//! device (a zone report through `BLKREPORTZONE`) is not supported, nor trims as zone resets.

use crate::job::DataDir;
use crate::workload::{NextIo, Region};
use crate::{BlockSize, JobSpec, RwMode};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// fio's `ZBD_MAX_OPEN_ZONES`: the most open zones it tracks.
pub const ZBD_MAX_OPEN_ZONES: u32 = 4096;

/// The most zones one file may be cut into here (16 Mi: 256 MiB of zone state).
const MAX_ZONES: u64 = 1 << 24;

const EINVAL: i32 = 22;
const EIO: i32 = 5;

/// A job's `zonemode=zbd` settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZbdOptions {
    /// Bytes per zone (`zonesize`).
    pub zone_size: u64,
    /// Writable bytes per zone (`zonecapacity`; 0 is the zone size).
    pub zone_capacity: u64,
    /// Most zones open for writing on the device at once (`max_open_zones`; 0: no limit).
    pub max_open_zones: u32,
    /// Most zones this job keeps open (`job_max_open_zones`; 0: no limit).
    pub job_max_open_zones: u32,
    /// Reads may go past the write pointer (`read_beyond_wp`).
    pub read_beyond_wp: bool,
    /// Share of the job's range that must hold data before `reset_frequency` applies
    /// (`zone_reset_threshold`).
    pub reset_threshold: f64,
    /// Share of writes that reset their zone first (`zone_reset_frequency`; 0: none).
    pub reset_frequency: f64,
}

/// One file's zones, shared by every job naming it (fio's `zoned_block_device_info`).
#[derive(Debug)]
struct ZoneTable {
    name: String,
    zone_size: u64,
    capacity: u64,
    nr_zones: u32,
    /// Write pointer of each zone, from the file's first byte.
    wp: Vec<u64>,
    /// Zones open for writing: the first `num_open` entries, in opening order; the rest keep
    /// what closing moved down, as fio's `open_zones` array after its `memmove`.
    open_zones: Vec<u32>,
    num_open: u32,
    is_open: Vec<bool>,
    reset_zone: Vec<bool>,
    max_open_zones: u32,
    /// Bytes written in the zones (fio's `sectors_with_data`, `wp_sectors_with_data`: the
    /// same here, every emulated zone having a write pointer).
    with_data: u64,
    /// Writes until the next reset under `zone_reset_frequency`.
    write_cnt: u32,
    /// Zones with I/O in flight: the job holding each and how many of its I/Os.
    locks: HashMap<u32, (usize, u32)>,
    /// Jobs waiting for a locked zone.
    waiters: Vec<usize>,
}

impl ZoneTable {
    fn new(name: &str, size: u64, options: &ZbdOptions) -> Result<ZoneTable, String> {
        let zone_size = options.zone_size;
        if zone_size == 0 {
            return Err(format!(
                "{name}: Specifying the zone size is mandatory for regular file/block device \
                 with --zonemode=zbd"
            ));
        }
        if zone_size < 512 {
            return Err(format!(
                "{name}: zone size must be at least 512 bytes for --zonemode=zbd"
            ));
        }
        let capacity = if options.zone_capacity == 0 {
            zone_size
        } else {
            options.zone_capacity
        };
        if capacity > zone_size {
            return Err(format!(
                "{name}: job parameter zonecapacity {capacity} is larger than zone size {zone_size}"
            ));
        }
        if size < zone_size {
            return Err(format!(
                "{name}: file/device size {size} is smaller than zone size {zone_size}"
            ));
        }
        let zones = size.div_ceil(zone_size);
        if zones > MAX_ZONES {
            return Err(format!(
                "{name}: {zones} zones of {zone_size} bytes are more than the {MAX_ZONES} \
                 iosched keeps; give a larger zonesize"
            ));
        }
        let nr_zones = zones as u32;
        Ok(ZoneTable {
            name: name.to_string(),
            zone_size,
            capacity,
            nr_zones,
            wp: (0..u64::from(nr_zones)).map(|z| z * zone_size).collect(),
            open_zones: vec![0; options.max_open_zones as usize + 1],
            num_open: 0,
            is_open: vec![false; nr_zones as usize],
            reset_zone: vec![false; nr_zones as usize],
            max_open_zones: options.max_open_zones,
            with_data: 0,
            write_cnt: u32::MAX,
            locks: HashMap::new(),
            waiters: Vec::new(),
        })
    }

    /// fio's `zbd_zone_idx`: the zone holding byte `offset`, or the sentinel past the end.
    fn zone_idx(&self, offset: u64) -> u32 {
        (offset / self.zone_size).min(u64::from(self.nr_zones)) as u32
    }

    fn start(&self, zone: u32) -> u64 {
        u64::from(zone) * self.zone_size
    }

    fn capacity_end(&self, zone: u32) -> u64 {
        self.start(zone) + self.capacity
    }

    /// fio's `zbd_zone_full`: fewer than `required` bytes left before the capacity.
    fn full(&self, zone: u32, required: u64) -> bool {
        self.wp[zone as usize] + required > self.capacity_end(zone)
    }

    fn data(&self, zone: u32) -> u64 {
        self.wp[zone as usize] - self.start(zone)
    }

    /// fio's `zbd_close_zone`; returns whether the zone was open.
    fn close(&mut self, zone: u32) -> bool {
        let open = self.num_open as usize;
        let Some(at) = self.open_zones[..open].iter().position(|&z| z == zone) else {
            return false;
        };
        self.open_zones.copy_within(at + 1.., at);
        self.num_open -= 1;
        self.is_open[zone as usize] = false;
        true
    }

    /// fio's `zbd_reset_zone`; returns whether the zone held data (and a reset was counted).
    fn reset(&mut self, zone: u32) -> bool {
        let data = self.data(zone);
        if data == 0 {
            return false;
        }
        self.with_data -= data;
        self.wp[zone as usize] = self.start(zone);
        true
    }

    fn reset_write_cnt(&mut self, frequency: f64) {
        self.write_cnt = if frequency > 0.0 {
            (1.0 / frequency).min(f64::from(u32::MAX)) as u32
        } else {
            u32::MAX
        };
    }

    /// Whether `zone` has I/O in flight from a job other than `job`.
    fn locked_by_other(&self, zone: u32, job: usize) -> bool {
        self.locks
            .get(&zone)
            .is_some_and(|&(holder, _)| holder != job)
    }

    fn wait(&mut self, job: usize) {
        if !self.waiters.contains(&job) {
            self.waiters.push(job);
        }
    }

    fn lock(&mut self, zone: u32, job: usize) {
        self.locks.entry(zone).or_insert((job, 0)).1 += 1;
    }
}

/// One of a job's files under `zonemode=zbd`: its zones, where the file begins in the
/// coordinates of the job's offsets, and the job's range in it (fio's `file_offset`,
/// `io_size`, `min_zone`, `max_zone`, from the file's first byte).
#[derive(Debug)]
struct JobZoneFile {
    table: Arc<Mutex<ZoneTable>>,
    range: ZoneRange,
}

/// Where a file begins in the coordinates of the job's offsets, and the job's range in it.
#[derive(Clone, Copy, Debug)]
struct ZoneRange {
    base: u64,
    file_offset: u64,
    io_size: u64,
    min_zone: u32,
    max_zone: u32,
}

impl ZoneRange {
    /// fio's `is_valid_offset`.
    fn valid(&self, offset: u64) -> bool {
        offset.wrapping_sub(self.file_offset) < self.io_size
    }
}

fn lock(table: &Mutex<ZoneTable>) -> MutexGuard<'_, ZoneTable> {
    // A poisoned lock means a panic elsewhere already ended the run.
    table.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// What the zones make of a job's next I/O.
#[derive(Clone, Debug, PartialEq)]
pub enum ZbdStep {
    /// Issue this I/O (moved, shortened or turned into a write).
    Issue(NextIo),
    /// Wait for the job's I/O in flight to complete, then ask again (fio's `io_u_quiesce`,
    /// before a zone reset or while all open zones are taken).
    Quiesce,
    /// The zone is busy with another job's I/O: the job is woken when it is free.
    Busy,
    /// Nothing to do: no zone can take the write, or no data is there to read (`io_u_eof`).
    Eof,
    /// The job fails with this errno and message (fio's `td_verror`).
    Fail(i32, String),
}

/// What [`JobZbd::convert_to_open_zone`] found.
enum Convert {
    Zone(u32),
    None,
    Quiesce,
    Busy,
}

/// A file of a job, for [`ZbdRegistry::attach`]: its name (jobs naming one file share its
/// zones), where it begins in the coordinates of the job's regions, and its size.
#[derive(Clone, Copy, Debug)]
pub struct ZbdFile<'a> {
    /// The file's name.
    pub name: &'a str,
    /// Its first byte, in the coordinates of the job's regions.
    pub base: u64,
    /// Its size in bytes (fio's `real_file_size`).
    pub size: u64,
}

/// The zones of every file of a run, by name.
#[derive(Debug, Default)]
pub struct ZbdRegistry {
    tables: HashMap<String, Arc<Mutex<ZoneTable>>>,
}

impl ZbdRegistry {
    /// A registry with no files.
    pub fn new() -> ZbdRegistry {
        ZbdRegistry::default()
    }

    /// Sets up job `index`'s zones (fio's `zbd_init_files` and `zbd_setup_files`): its files'
    /// zone tables, shared with earlier jobs naming them, and a writer's `regions` (one per
    /// file) rounded to whole zones. `None` unless the job has `zonemode=zbd`. Errors are
    /// fio's, naming the file.
    pub fn attach(
        &mut self,
        index: usize,
        spec: &JobSpec,
        files: &[ZbdFile<'_>],
        regions: &mut [Region],
    ) -> Result<Option<JobZbd>, String> {
        let Some(options) = spec.zbd else {
            return Ok(None);
        };
        let min_bs = std::array::from_fn(|d| spec.bs[d].min().max(1));
        let writes = spec.writes();
        if options.job_max_open_zones > 0 && options.max_open_zones == 0 {
            return Err(
                "'job_max_open_zones' cannot be used without a global open zones limit".to_string(),
            );
        }
        let mut zone_files = Vec::with_capacity(files.len());
        for (file, region) in files.iter().zip(regions.iter_mut()) {
            let table = match self.tables.get(file.name) {
                Some(table) => table.clone(),
                None => {
                    let table =
                        Arc::new(Mutex::new(ZoneTable::new(file.name, file.size, &options)?));
                    self.tables.insert(file.name.to_string(), table.clone());
                    table
                }
            };
            let mut zone_file = ZoneRange {
                base: file.base,
                file_offset: region.start - file.base,
                io_size: region.len,
                min_zone: 0,
                max_zone: 0,
            };
            {
                let zones = lock(&table);
                if zones.zone_size != options.zone_size {
                    return Err(format!(
                        "{}: job parameter zonesize {} does not match disk zone size {}.",
                        file.name, options.zone_size, zones.zone_size
                    ));
                }
                if zones.max_open_zones != options.max_open_zones {
                    return Err("Different 'max_open_zones' values".to_string());
                }
                if spec.verify.is_some() {
                    if let Some(bs) = spec
                        .bs
                        .iter()
                        .flat_map(|bs| match bs {
                            BlockSize::Split(parts) => parts.iter().map(|p| p.0).collect(),
                            other => vec![other.min(), other.max()],
                        })
                        .find(|&bs| bs == 0 || !zones.zone_size.is_multiple_of(bs))
                    {
                        return Err(format!(
                            "{}: block size {bs} is not a divisor of the zone size {}",
                            file.name, zones.zone_size
                        ));
                    }
                }
                // zbd_verify_sizes: a writer's range starts and ends at zone boundaries.
                if writes {
                    let start_zone = zones.zone_idx(zone_file.file_offset);
                    if zone_file.file_offset != zones.start(start_zone) {
                        let new_offset = zones.start(start_zone + 1);
                        if new_offset >= zone_file.file_offset + zone_file.io_size {
                            return Err(format!(
                                "{}: io_size must be at least one zone",
                                file.name
                            ));
                        }
                        zone_file.io_size -= new_offset - zone_file.file_offset;
                        zone_file.file_offset = new_offset;
                    }
                    let end_zone = zones.zone_idx(zone_file.file_offset + zone_file.io_size);
                    let new_end = zones.start(end_zone);
                    if zone_file.file_offset + zone_file.io_size != new_end {
                        if new_end <= zone_file.file_offset {
                            return Err(format!(
                                "{}: io_size must be at least one zone",
                                file.name
                            ));
                        }
                        zone_file.io_size = new_end - zone_file.file_offset;
                    }
                }
                zone_file.min_zone = zones.zone_idx(zone_file.file_offset);
                zone_file.max_zone = zones.zone_idx(zone_file.file_offset + zone_file.io_size);
                if zone_file.min_zone >= zone_file.max_zone {
                    return Err(format!(
                        "{}: the job's range ({} bytes at {}) lies inside one zone of {} bytes; \
                         zonemode=zbd needs it to reach a zone boundary",
                        file.name, zone_file.io_size, zone_file.file_offset, zones.zone_size
                    ));
                }
            }
            *region = Region {
                start: zone_file.base + zone_file.file_offset,
                len: zone_file.io_size,
            };
            zone_files.push(JobZoneFile {
                table,
                range: zone_file,
            });
        }
        Ok(Some(JobZbd {
            job: index,
            options,
            files: zone_files,
            min_bs,
            random: spec.rw.is_random(),
            mixed: matches!(spec.rw, RwMode::ReadWrite | RwMode::RandReadWrite),
            writes,
            verify: spec.verify.is_some(),
            num_open_zones: 0,
            resets: 0,
        }))
    }
}

/// One job's view of its zones.
#[derive(Debug)]
pub struct JobZbd {
    job: usize,
    options: ZbdOptions,
    files: Vec<JobZoneFile>,
    min_bs: [u64; 3],
    random: bool,
    mixed: bool,
    writes: bool,
    verify: bool,
    /// Zones this job opened and that are still open (fio's `td->num_open_zones`).
    num_open_zones: u32,
    /// Zone resets this job made (fio's `nr_zone_resets`).
    pub resets: u64,
}

impl JobZbd {
    /// The job starts (fio's `zbd_file_reset`): a writer that verifies resets its zones, so
    /// that no reset comes between its writes and their read-back; the reset countdown of
    /// `zone_reset_frequency` starts again.
    pub fn start(&mut self) {
        if !self.writes {
            return;
        }
        for file in &self.files {
            let mut zones = lock(&file.table);
            if self.verify {
                for zone in file.range.min_zone..file.range.max_zone {
                    if zones.close(zone) {
                        self.num_open_zones = self.num_open_zones.saturating_sub(1);
                    }
                    if zones.reset(zone) {
                        self.resets += 1;
                    }
                }
            }
            zones.reset_write_cnt(self.options.reset_frequency);
        }
    }

    /// fio's `zbd_adjust_ddir` and `zbd_adjust_block` for the job's next I/O `io`, with
    /// `in_flight` of its I/Os in flight. An I/O to issue holds its zone until
    /// [`JobZbd::completed`] is called for it.
    pub fn adjust(&mut self, mut io: NextIo, in_flight: u32) -> ZbdStep {
        let table = self.files[io.file].table.clone();
        let file = self.files[io.file].range;
        let mut zones = lock(&table);
        // zbd_adjust_ddir: a mixed job writes until some zone holds data.
        if io.dir == DataDir::Read
            && self.mixed
            && !self.options.read_beyond_wp
            && zones.with_data == 0
        {
            io.dir = DataDir::Write;
        }
        if io.dir == DataDir::Read && self.options.read_beyond_wp {
            return ZbdStep::Issue(io);
        }
        let min_bs = self.min_bs[io.dir as usize];
        let offset = io.offset - file.base;
        let orig_zone = zones.zone_idx(offset);
        // fio locks the zone of the offset drawn first, waiting while another job uses it.
        if io.dir != DataDir::Trim && zones.locked_by_other(orig_zone, self.job) {
            zones.wait(self.job);
            return ZbdStep::Busy;
        }
        match io.dir {
            DataDir::Read => {
                let mut zone = orig_zone;
                let mut offset = offset;
                let mut range = zones.data(zone);
                if range < min_bs || (!self.random && offset + min_bs > zones.wp[zone as usize]) {
                    let Some(found) = self.find_zone(&zones, &file, min_bs, zone) else {
                        return ZbdStep::Eof;
                    };
                    zone = found;
                    range = zones.data(zone);
                    if !self.random {
                        offset = zones.start(zone);
                    }
                }
                if range <= io.len {
                    offset = zones.start(zone);
                } else if self.random {
                    let moved = (offset - zones.start(orig_zone)) % (range - io.len);
                    offset = zones.start(zone) + moved / min_bs * min_bs;
                }
                let len = io.len.min(zones.wp[zone as usize] - offset) / min_bs * min_bs;
                if zones.locked_by_other(zone, self.job) {
                    zones.wait(self.job);
                    return ZbdStep::Busy;
                }
                zones.lock(zone, self.job);
                ZbdStep::Issue(NextIo {
                    offset: file.base + offset,
                    len,
                    ..io
                })
            }
            DataDir::Write => {
                if io.len > zones.zone_size {
                    return ZbdStep::Fail(EINVAL, "I/O buflen exceeds zone size".to_string());
                }
                let mut zone = orig_zone;
                if !self.open_zone(&mut zones, zone) {
                    match self.convert_to_open_zone(&mut zones, &file, offset, min_bs, in_flight) {
                        Convert::Zone(open) => zone = open,
                        Convert::None => return ZbdStep::Eof,
                        Convert::Quiesce => return ZbdStep::Quiesce,
                        Convert::Busy => {
                            zones.wait(self.job);
                            return ZbdStep::Busy;
                        }
                    }
                }
                if zones.locked_by_other(zone, self.job) {
                    zones.wait(self.job);
                    return ZbdStep::Busy;
                }
                // Reset under zone_reset_frequency: every 1/frequency writes once the zones
                // hold the threshold's share of the job's range.
                let frequency = self.options.reset_frequency;
                let counting = frequency > 0.0
                    && zones.with_data as f64 >= file.io_size as f64 * self.options.reset_threshold;
                let needs_reset = zones.reset_zone[zone as usize]
                    || zones.full(zone, min_bs)
                    || (counting && zones.write_cnt <= 1);
                // fio waits for the job's I/O in flight before a reset (and asks again here,
                // which leaves the countdown as it was).
                if needs_reset && in_flight > 0 {
                    return ZbdStep::Quiesce;
                }
                if counting {
                    zones.write_cnt = zones.write_cnt.saturating_sub(1);
                    if zones.write_cnt == 0 {
                        zones.reset_write_cnt(frequency);
                        zones.reset_zone[zone as usize] = true;
                    }
                }
                if zones.reset_zone[zone as usize] || zones.full(zone, min_bs) {
                    zones.reset_zone[zone as usize] = false;
                    if zones.reset(zone) {
                        self.resets += 1;
                    }
                    if zones.capacity < min_bs {
                        return ZbdStep::Fail(
                            EINVAL,
                            format!(
                                "zone capacity {} smaller than minimum block size {min_bs}",
                                zones.capacity
                            ),
                        );
                    }
                }
                let at = zones.wp[zone as usize];
                if !file.valid(at) {
                    return ZbdStep::Fail(EINVAL, "invalid WP value".to_string());
                }
                let room = zones.capacity_end(zone) - at;
                let len = io.len.min(room) / min_bs * min_bs;
                if len < min_bs {
                    return ZbdStep::Fail(
                        EIO,
                        format!("zone remainder {room} smaller than min block size {min_bs}"),
                    );
                }
                // zbd_queue_io: the write pointer moves as the write is queued.
                zones.wp[zone as usize] = at + len;
                zones.with_data += len;
                zones.lock(zone, self.job);
                ZbdStep::Issue(NextIo {
                    offset: file.base + at,
                    len,
                    ..io
                })
            }
            DataDir::Trim => ZbdStep::Issue(io),
        }
    }

    /// An I/O of this job that [`JobZbd::adjust`] let through completed (`zbd_put_io`): a
    /// write that reached its zone's capacity closes the zone (`zbd_end_zone_io`), and the
    /// zone is free for other jobs once none of this job's I/O is in it. Returns the jobs
    /// that waited for a zone of the file, to be woken.
    pub fn completed(&mut self, dir: DataDir, file: usize, offset: u64, len: u64) -> Vec<usize> {
        if dir == DataDir::Trim || (dir == DataDir::Read && self.options.read_beyond_wp) {
            return Vec::new();
        }
        let Some(file) = self.files.get(file) else {
            return Vec::new();
        };
        let mut zones = lock(&file.table);
        let offset = offset - file.range.base;
        let zone = zones.zone_idx(offset);
        if dir == DataDir::Write && offset + len >= zones.capacity_end(zone) && zones.close(zone) {
            self.num_open_zones = self.num_open_zones.saturating_sub(1);
        }
        let mut freed = false;
        if let Some((holder, count)) = zones.locks.get_mut(&zone) {
            if *holder == self.job {
                *count -= 1;
                if *count == 0 {
                    zones.locks.remove(&zone);
                    freed = true;
                }
            }
        }
        if freed {
            std::mem::take(&mut zones.waiters)
        } else {
            Vec::new()
        }
    }

    /// fio's `zbd_open_zone`: whether `zone` is open for writing, opening it if the limits
    /// allow.
    fn open_zone(&mut self, zones: &mut ZoneTable, zone: u32) -> bool {
        if self.verify && zones.full(zone, self.min_bs[DataDir::Write as usize]) {
            return false;
        }
        if zones.max_open_zones == 0 {
            return true;
        }
        if zones.is_open[zone as usize] {
            // Open, and about to be full by writes in flight: full, not open.
            return zones.wp[zone as usize] < zones.capacity_end(zone);
        }
        if self.options.job_max_open_zones > 0
            && self.num_open_zones >= self.options.job_max_open_zones
        {
            return false;
        }
        if zones.num_open >= zones.max_open_zones {
            return false;
        }
        let slot = zones.num_open as usize;
        zones.open_zones[slot] = zone;
        zones.num_open += 1;
        zones.is_open[zone as usize] = true;
        self.num_open_zones += 1;
        true
    }

    /// fio's `pick_random_zone_idx`: an index into the open zones, from where the I/O's
    /// offset lies in the job's range.
    fn pick_random_zone_idx(zones: &ZoneTable, file: &ZoneRange, offset: u64) -> usize {
        let into = u128::from(offset.saturating_sub(file.file_offset));
        (into * u128::from(zones.num_open) / u128::from(file.io_size.max(1))) as usize
    }

    /// fio's `zbd_convert_to_open_zone`: a zone that is open and can take at least `min_bs`
    /// bytes for a write first aimed at `offset`, opening one if the limits allow. Each zone
    /// it considers that another job is using makes it wait (fio blocks on the zone's lock,
    /// and finds the zone changed after).
    fn convert_to_open_zone(
        &mut self,
        zones: &mut ZoneTable,
        file: &ZoneRange,
        offset: u64,
        min_bs: u64,
        in_flight: u32,
    ) -> Convert {
        let job = self.job;
        let limited = zones.max_open_zones > 0 || self.options.job_max_open_zones > 0;
        let mut zone = if limited {
            zones.open_zones
                [Self::pick_random_zone_idx(zones, file, offset).min(zones.open_zones.len() - 1)]
        } else {
            zones.zone_idx(offset)
        };
        zone = zone.clamp(file.min_zone, file.max_zone - 1);
        let examine = if !limited {
            true
        } else if zones.num_open == 0 {
            false
        } else {
            // The open zones are shared by all jobs: start from one picked by the offset
            // and take the first inside this job's range.
            let open = zones.num_open as usize;
            let first = Self::pick_random_zone_idx(zones, file, offset);
            let candidate = (0..open)
                .map(|i| zones.open_zones[(first + i) % open])
                .find(|&z| file.min_zone <= z && z < file.max_zone);
            match candidate {
                Some(candidate) => {
                    zone = candidate;
                    true
                }
                None => return Convert::None,
            }
        };
        if zones.locked_by_other(zone, job) {
            return Convert::Busy;
        }
        if examine && zones.wp[zone as usize] + min_bs <= zones.capacity_end(zone) {
            return Convert::Zone(zone);
        }
        // open_other_zone: when the limits are reached, wait for the job's own writes to
        // complete (and close their zones) before opening another.
        let wait_zone_close = zones.num_open == file.max_zone - file.min_zone
            || (zones.max_open_zones > 0 && zones.num_open == zones.max_open_zones)
            || (self.options.job_max_open_zones > 0
                && self.num_open_zones == self.options.job_max_open_zones);
        if wait_zone_close && in_flight > 0 {
            return Convert::Quiesce;
        }
        for _ in 0..file.io_size / zones.zone_size {
            zone += 1;
            if !file.valid(zones.start(zone)) {
                zone = file.min_zone;
            }
            if zones.locked_by_other(zone, job) {
                return Convert::Busy;
            }
            if zones.is_open[zone as usize] {
                continue;
            }
            if self.open_zone(zones, zone) {
                return Convert::Zone(zone);
            }
        }
        // Does the write fit in a zone already open?
        let open = zones.num_open as usize;
        for &z in &zones.open_zones[..open] {
            if z < file.min_zone || z >= file.max_zone {
                continue;
            }
            if zones.locked_by_other(z, job) {
                return Convert::Busy;
            }
            if zones.wp[z as usize] + min_bs <= zones.capacity_end(z) {
                return Convert::Zone(z);
            }
        }
        Convert::None
    }

    /// fio's `zbd_find_zone`: a zone holding at least `min_bytes` of data, after `zone` (the
    /// next for a sequential job) or nearest to it on either side (a random job), inside the
    /// job's range.
    fn find_zone(
        &self,
        zones: &ZoneTable,
        file: &ZoneRange,
        min_bytes: u64,
        zone: u32,
    ) -> Option<u32> {
        let has = |z: u32| zones.start(z) + min_bytes <= zones.wp[z as usize];
        let (first, last) = (i64::from(file.min_zone), i64::from(file.max_zone));
        let (mut up, mut down) = (i64::from(zone) + 1, i64::from(zone) - 1);
        while up < last || down >= first {
            if up < last {
                if has(up as u32) {
                    return Some(up as u32);
                }
            } else if !self.random {
                break;
            }
            if self.random && down >= first && has(down as u32) {
                return Some(down as u32);
            }
            up += 1;
            down -= 1;
        }
        None
    }

    /// For a sequential writer on zones whose capacity is below their size, its write position
    /// `position` (in the job's coordinates, in file `file`) moved past the gap to the zone's
    /// end when it reached the capacity (fio's `setup_zbd_zone_mode`); `None` when it stays.
    pub fn skip_capacity_gap(&self, file: usize, position: u64) -> Option<u64> {
        if self.random || !self.writes {
            return None;
        }
        let file = self.files.get(file)?;
        let zones = lock(&file.table);
        if zones.capacity >= zones.zone_size {
            return None;
        }
        let at = position.checked_sub(file.range.base)?;
        let zone = zones.zone_idx(at);
        (zone < zones.nr_zones && at >= zones.capacity_end(zone))
            .then(|| file.range.base + zones.start(zone + 1))
    }

    /// The name of the file of index `file` (for messages).
    pub fn file_name(&self, file: usize) -> String {
        self.files
            .get(file)
            .map(|f| lock(&f.table).name.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::Rng;
    use crate::workload::Generator;

    const M: u64 = 1 << 20;
    const K: u64 = 1 << 10;

    fn options(zone_size: u64) -> ZbdOptions {
        ZbdOptions {
            zone_size,
            zone_capacity: 0,
            max_open_zones: 0,
            job_max_open_zones: 0,
            read_beyond_wp: false,
            reset_threshold: 0.0,
            reset_frequency: 0.0,
        }
    }

    fn spec(rw: RwMode, bs: u64, zbd: ZbdOptions) -> JobSpec {
        let mut spec = JobSpec::new("z");
        spec.rw = rw;
        spec.bs = std::array::from_fn(|_| BlockSize::Fixed(bs));
        spec.zbd = Some(zbd);
        spec
    }

    fn file(size: u64) -> [ZbdFile<'static>; 1] {
        [ZbdFile {
            name: "/dev/zoned",
            base: 0,
            size,
        }]
    }

    /// Runs `jobs` (spec, region) over one shared file of `size` bytes, one I/O at a time
    /// round robin, each completing before the next: what they issued, per job.
    fn run(size: u64, jobs: &[(JobSpec, Region)], ios: usize) -> (Vec<Vec<NextIo>>, Vec<u64>) {
        let mut registry = ZbdRegistry::new();
        let mut states: Vec<(JobZbd, Generator)> = jobs
            .iter()
            .enumerate()
            .map(|(index, (spec, region))| {
                let mut regions = [*region];
                let mut zbd = registry
                    .attach(index, spec, &file(size), &mut regions)
                    .expect("valid")
                    .expect("zoned");
                zbd.start();
                let generator = Generator::new(spec, &regions, Rng::new(index as u64 + 7));
                (zbd, generator)
            })
            .collect();
        let mut issued = vec![Vec::new(); jobs.len()];
        let mut done = vec![false; jobs.len()];
        for round in 0..ios {
            let index = round % jobs.len();
            if done[index] {
                continue;
            }
            let (zbd, generator) = &mut states[index];
            match zbd.adjust(generator.next_io(), 0) {
                ZbdStep::Issue(io) => {
                    if !jobs[index].0.rw.is_random() {
                        generator.set_sequential_position(io.file, io.dir, io.offset + io.len);
                    }
                    assert!(zbd.completed(io.dir, io.file, io.offset, io.len).is_empty());
                    issued[index].push(io);
                }
                ZbdStep::Eof => done[index] = true,
                other => panic!("unexpected {other:?}"),
            }
        }
        (issued, states.iter().map(|(z, _)| z.resets).collect())
    }

    // Proves the write rules of zbd.c: every write lands at its zone's write pointer (so each
    // zone is written front to back), never crosses the capacity, at most max_open_zones zones
    // take writes between resets, and a zone too full for a block is reset first: fio 3.33
    // counts 114 resets for four 512 KiB random writers putting 2 GiB into 256 MiB of 16 MiB
    // zones with 4 open (the same job on a file, /tmp/zw.fio in the note); the count follows
    // from the fills, whatever the offsets drawn.
    #[test]
    fn writes_go_to_write_pointers_of_open_zones() {
        let mut zbd = options(16 * M);
        zbd.max_open_zones = 4;
        let job = spec(RwMode::RandWrite, 512 * K, zbd);
        let region = Region {
            start: 0,
            len: 256 * M,
        };
        let jobs = vec![(job, region); 4];
        let (issued, resets) = run(2 * 1024 * M, &jobs, 4096);
        let mut wp = [0u64; 16];
        let mut open = std::collections::BTreeSet::new();
        let mut order: Vec<NextIo> = Vec::new();
        for round in 0..1024 {
            for job in &issued {
                order.push(job[round]);
            }
        }
        for io in &order {
            let zone = (io.offset / (16 * M)) as usize;
            let in_zone = io.offset % (16 * M);
            assert!(
                in_zone == wp[zone] || in_zone == 0,
                "{io:?} not at wp {}",
                wp[zone]
            );
            assert!(in_zone + io.len <= 16 * M);
            wp[zone] = in_zone + io.len;
            open.insert(zone);
            if wp[zone] == 16 * M {
                open.remove(&zone);
            }
            assert!(open.len() <= 4, "{} zones open", open.len());
        }
        assert_eq!(resets.iter().sum::<u64>(), 114);
    }

    // Proves reads see only written data: nothing to read on fresh zones (fio reads nothing
    // from a conventional device with zonemode=zbd), and after a sequential write of 2.5
    // zones a sequential reader goes from zone to zone while one holds a whole block, and
    // ends there (fio's io_u_eof); a random reader stays below the write pointers.
    #[test]
    fn reads_stay_below_write_pointers() {
        let region = Region {
            start: 0,
            len: 8 * M,
        };
        let reader = spec(RwMode::Read, 256 * K, options(M));
        let (issued, _) = run(8 * M, &[(reader.clone(), region)], 10);
        assert!(issued[0].is_empty(), "fresh zones hold nothing to read");

        let mut registry = ZbdRegistry::new();
        let mut regions = [region];
        let mut writer = spec(RwMode::Write, 512 * K, options(M));
        writer.io_size = Some(5 * 512 * K);
        let mut w = registry
            .attach(0, &writer, &file(8 * M), &mut regions)
            .unwrap()
            .unwrap();
        w.start();
        let mut generator = Generator::new(&writer, &regions, Rng::new(1));
        for _ in 0..5 {
            let ZbdStep::Issue(io) = w.adjust(generator.next_io(), 0) else {
                panic!("a write is issued")
            };
            generator.set_sequential_position(0, io.dir, io.offset + io.len);
            w.completed(io.dir, 0, io.offset, io.len);
        }
        let regions = [region];
        let read_with = |registry: &mut ZbdRegistry, rw: RwMode, bs: u64, n: usize| {
            let job = spec(rw, bs, options(M));
            let mut regions = regions;
            let mut zbd = registry
                .attach(1, &job, &file(8 * M), &mut regions)
                .unwrap()
                .unwrap();
            let mut generator = Generator::new(&job, &regions, Rng::new(3));
            let mut out = Vec::new();
            for _ in 0..n {
                match zbd.adjust(generator.next_io(), 0) {
                    ZbdStep::Issue(io) => {
                        if !rw.is_random() {
                            generator.set_sequential_position(0, io.dir, io.offset + io.len);
                        }
                        zbd.completed(io.dir, 0, io.offset, io.len);
                        out.push((io.offset, io.len));
                    }
                    ZbdStep::Eof => break,
                    other => panic!("{other:?}"),
                }
            }
            out
        };
        let reads = read_with(&mut registry, RwMode::Read, 768 * K, 10);
        assert_eq!(
            reads,
            vec![(0, 768 * K), (M, 768 * K)],
            "each zone from its start while it holds a whole block; the third's half zone is \
             less than one, and the reader ends"
        );
        let reads = read_with(&mut registry, RwMode::Read, 512 * K, 10);
        assert_eq!(reads.len(), 5, "{reads:?}");
        assert_eq!(reads[4], (2 * M, 512 * K));
        for (offset, len) in read_with(&mut registry, RwMode::RandRead, 256 * K, 200) {
            let zone_wp = match offset / M {
                0 | 1 => M,
                2 => 512 * K,
                z => panic!("read in empty zone {z}"),
            };
            assert!(offset % M + len <= zone_wp, "read past the write pointer");
        }
    }

    // Proves zbd.c's set-up checks: a writer's range is rounded to whole zones, and the
    // errors fio gives for a missing zone size, a capacity over the size, a per-job limit
    // without a device limit, and a verify block size that does not divide the zone.
    #[test]
    fn setup_rounds_writers_and_refuses_what_fio_refuses() {
        let mut registry = ZbdRegistry::new();
        let writer = spec(RwMode::Write, 64 * K, options(M));
        let mut regions = [Region {
            start: M / 2,
            len: 3 * M,
        }];
        registry
            .attach(0, &writer, &file(8 * M), &mut regions)
            .unwrap();
        assert_eq!(
            regions[0],
            Region {
                start: M,
                len: 2 * M
            }
        );
        let attach = |job: &JobSpec| {
            let mut regions = [Region {
                start: 0,
                len: 8 * M,
            }];
            ZbdRegistry::new()
                .attach(0, job, &file(8 * M), &mut regions)
                .map(|_| ())
                .unwrap_err()
        };
        assert!(attach(&spec(RwMode::Write, 4 * K, options(0))).contains("mandatory"));
        let mut over = options(M);
        over.zone_capacity = 2 * M;
        assert!(attach(&spec(RwMode::Write, 4 * K, over)).contains("larger than zone size"));
        let mut per_job = options(M);
        per_job.job_max_open_zones = 2;
        assert!(attach(&spec(RwMode::Write, 4 * K, per_job)).contains("global open zones"));
        let mut verifying = spec(RwMode::Write, 3 * K, options(M));
        verifying.verify = Some(crate::Verify {
            method: "crc32c".to_string(),
            do_verify: true,
            location: verifying.location.clone(),
        });
        assert!(attach(&verifying).contains("not a divisor"));
    }

    // Proves zone locking (fio's zone_lock): while one job has a write in flight in a zone,
    // another job's I/O to that zone waits and is woken when the write completes; the same
    // job may have several in flight there (fio's recursive mutex), and a reset waits for
    // the job's own I/O in flight (io_u_quiesce).
    #[test]
    fn a_zone_in_use_waits_for_its_io() {
        let mut registry = ZbdRegistry::new();
        let region = Region {
            start: 0,
            len: 4 * M,
        };
        let job = spec(RwMode::Write, 256 * K, options(M));
        let mut attach = |index| {
            let mut regions = [region];
            registry
                .attach(index, &job, &file(4 * M), &mut regions)
                .unwrap()
                .unwrap()
        };
        let (mut first, mut second) = (attach(0), attach(1));
        let write = |offset| NextIo {
            dir: DataDir::Write,
            offset,
            len: 256 * K,
            file: 0,
        };
        let ZbdStep::Issue(a) = first.adjust(write(0), 0) else {
            panic!()
        };
        let ZbdStep::Issue(b) = first.adjust(write(0), 1) else {
            panic!("the holder may write on")
        };
        assert_eq!((a.offset, b.offset), (0, 256 * K));
        assert_eq!(second.adjust(write(0), 0), ZbdStep::Busy);
        assert_eq!(second.adjust(write(M), 0), ZbdStep::Issue(write(M)));
        assert!(first.completed(a.dir, 0, a.offset, a.len).is_empty());
        assert_eq!(first.completed(b.dir, 0, b.offset, b.len), vec![1]);
        assert_eq!(second.adjust(write(0), 1), ZbdStep::Issue(write(512 * K)));
        // Fill zone 1 from the first job; its next write there needs a reset, which waits
        // for its I/O in flight.
        second.completed(DataDir::Write, 0, M, 256 * K);
        for _ in 0..3 {
            let ZbdStep::Issue(io) = first.adjust(write(M), 0) else {
                panic!()
            };
            first.completed(io.dir, 0, io.offset, io.len);
        }
        assert_eq!(first.adjust(write(M), 1), ZbdStep::Quiesce);
        assert_eq!(first.adjust(write(M), 0), ZbdStep::Issue(write(M)));
        assert_eq!(first.resets, 1);
    }
}

//! Where each job's files lie on the simulated device.
//!
//! A name under `/dev/` is the raw device: the whole capacity, as fio treats a block device.
//! Any other name is a file. Files are laid out one after another from the start of the device
//! (the outer, fastest zone of a disk), each aligned to 1 MiB, in the order jobs first name them,
//! as a fresh file system allocating contiguous extents would. A file is as large as the largest
//! `offset + size` any job asks of it; jobs naming the same file share its blocks.
//!
//! A disk may have a partition table (the device setting `partitions`, [`parse_partitions`]):
//! then a partition's name, `/dev/sdb2` or `/dev/nvme0n1p2` as the kernel names them
//! ([`partition_number`]), is that partition's extent (a job's `offset` and `size` inside it,
//! as fio on a partition's node), and the files' file system is on partition 1. A disk given
//! no table that a job addresses by partition has fdisk's default: one partition from 1 MiB to
//! the end.

use crate::SimError;
use iosched_fio::{Amount, JobSpec};
use std::collections::BTreeMap;

/// Alignment of file extents on the device.
pub const FILE_ALIGNMENT: u64 = 1 << 20;

pub use iosched_fio::workload::Region;

/// The placement of every file, and each job's regions within them.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Files in placement order: name and extent.
    pub files: Vec<(String, Region)>,
    /// For each job (same order as given), one region per file it names.
    pub job_regions: Vec<Vec<Region>>,
    /// For each job, the whole extent of each file it names (the file, partition or device).
    pub job_extents: Vec<Vec<Region>>,
}

fn is_device(name: &str) -> bool {
    name.starts_with("/dev/")
}

/// Most partitions in a table (GPT's default number of entries).
pub const PARTITIONS_MAX: usize = 128;

/// The partition number in a device node's name, as the kernel names partitions
/// (block/partitions/core.c, `bdev_add_partition` via `disk_name`): a disk whose name ends
/// in a digit takes `p` before the number (`nvme0n1p2`, `mmcblk0p1`, `md0p1`, `loop0p1`),
/// any other takes the number alone (`sdb2`, `vda1`, `hdc3`, `xvdb1`). `None` for a whole
/// disk (`/dev/sdb`, `/dev/nvme0n1`) or a name that is not a device node.
pub fn partition_number(name: &str) -> Option<usize> {
    let base = name.strip_prefix("/dev/")?;
    let stem = base.trim_end_matches(|c: char| c.is_ascii_digit());
    if stem.len() == base.len() || stem.is_empty() {
        return None;
    }
    let number: usize = base[stem.len()..].parse().ok()?;
    let partition = match stem.strip_suffix('p') {
        Some(disk) if disk.ends_with(|c: char| c.is_ascii_digit()) => true,
        _ => {
            ["sd", "hd", "vd", "xvd"]
                .iter()
                .any(|prefix| stem.starts_with(prefix))
                && stem.chars().all(|c| c.is_ascii_lowercase())
        }
    };
    (partition && number > 0).then_some(number)
}

/// A disk's partition table from the device setting `partitions`: a comma-separated list of
/// sizes, partition 1 first. Each is fio's size (`200g`), a percentage of the disk (`25%`),
/// or, for the last only, `rest`. Partition 1 starts at 1 MiB and each next one at the
/// first 1 MiB boundary after the previous, as fdisk and parted align them. Refused: an empty
/// or zero size, more than [`PARTITIONS_MAX`], a table beyond the disk's `capacity`.
pub fn parse_partitions(value: &str, capacity: u64) -> Result<Vec<Region>, SimError> {
    let bad = |reason: String| SimError::new(format!("partitions={value}: {reason}"));
    let entries: Vec<&str> = value.split(',').map(str::trim).collect();
    if entries.len() > PARTITIONS_MAX {
        return Err(bad(format!(
            "{} partitions; a table holds at most {PARTITIONS_MAX}",
            entries.len()
        )));
    }
    let mut table = Vec::with_capacity(entries.len());
    let mut start = FILE_ALIGNMENT;
    for (index, entry) in entries.iter().enumerate() {
        let number = index + 1;
        let len = if entry.eq_ignore_ascii_case("rest") {
            if number != entries.len() {
                return Err(bad(format!(
                    "partition {number}: only the last partition can take the rest of the disk"
                )));
            }
            capacity.saturating_sub(start)
        } else if let Some(percent) = entry.strip_suffix('%') {
            let percent: f64 = percent.trim().parse().map_err(|_| {
                bad(format!(
                    "partition {number}: \"{entry}\" is not a percentage"
                ))
            })?;
            if !(percent > 0.0 && percent <= 100.0) {
                return Err(bad(format!(
                    "partition {number}: {entry} is not a percentage in (0, 100]"
                )));
            }
            (capacity as f64 * percent / 100.0) as u64
        } else {
            iosched_fio::parse::parse_bytes(entry)
                .map_err(|reason| bad(format!("partition {number}: {reason}")))?
        };
        if len == 0 {
            return Err(bad(format!("partition {number} is empty")));
        }
        let region = Region { start, len };
        if region.end() > capacity {
            return Err(bad(format!(
                "partition {number} ends at {} MiB, beyond the disk's {} MiB",
                region.end().div_ceil(1 << 20),
                capacity >> 20
            )));
        }
        table.push(region);
        start = region.end().div_ceil(FILE_ALIGNMENT) * FILE_ALIGNMENT;
    }
    Ok(table)
}

fn amount_bytes(amount: Amount, whole: u64) -> u64 {
    match amount {
        Amount::Bytes(bytes) => bytes,
        Amount::Percent(percent) => ((whole as f64) * percent / 100.0) as u64,
    }
}

/// Plans the layout of `jobs` on a device of `capacity` bytes with the partition table
/// `partitions` (none: the whole disk, and the files from its start).
pub fn plan(jobs: &[JobSpec], capacity: u64, partitions: &[Region]) -> Result<Layout, SimError> {
    // A job naming a partition of a disk given no table finds the table fdisk makes by
    // default: one partition from 1 MiB to the end (fio's examples name /dev/sdb1).
    let names_partition = jobs
        .iter()
        .flat_map(|job| &job.filenames)
        .any(|name| partition_number(name).is_some());
    let default_table;
    let (partitions, defaulted) = if partitions.is_empty() && names_partition {
        default_table = [Region {
            start: FILE_ALIGNMENT.min(capacity),
            len: capacity.saturating_sub(FILE_ALIGNMENT),
        }];
        (&default_table[..], true)
    } else {
        (partitions, false)
    };
    // The files' file system: partition 1, or the whole disk.
    let (fs_start, fs_end) = partitions
        .first()
        .map_or((0, capacity), |first| (first.start, first.end()));
    // Pass 1: the size each file needs, from the jobs that give absolute sizes.
    let mut order: Vec<String> = Vec::new();
    let mut needed: BTreeMap<String, u64> = BTreeMap::new();
    for job in jobs {
        if job.filenames.is_empty() {
            return Err(SimError::job(job, "no filename"));
        }
        let files = job.filenames.len() as u64;
        for name in &job.filenames {
            if !is_device(name) && !needed.contains_key(name) {
                order.push(name.clone());
                needed.insert(name.clone(), 0);
            }
            if is_device(name) {
                continue;
            }
            let offset = match job.offset {
                Amount::Bytes(bytes) => bytes,
                Amount::Percent(_) => 0,
            } + u64::from(job.clone) * job.offset_increment;
            if let Some(Amount::Bytes(size)) = job.size {
                let entry = needed.get_mut(name).expect("inserted above");
                *entry = (*entry).max(offset + size / files);
            }
        }
    }
    // A file that a job fills (`fill_device`, no size) is as large as the file system's free
    // space: it is placed after the others, which share the rest equally.
    let filled: Vec<&String> = order
        .iter()
        .filter(|name| {
            needed[*name] == 0
                && jobs
                    .iter()
                    .any(|job| job.fill_device && job.filenames.contains(name))
        })
        .collect();
    let order: Vec<String> = order
        .iter()
        .filter(|name| !filled.contains(name))
        .chain(filled.iter().copied())
        .cloned()
        .collect();
    let filled: Vec<String> = filled.into_iter().cloned().collect();
    let sized: u64 = order
        .iter()
        .filter(|name| !filled.contains(name))
        .map(|name| needed[name].div_ceil(FILE_ALIGNMENT) * FILE_ALIGNMENT)
        .sum();
    if !filled.is_empty() {
        let free = fs_end.saturating_sub(fs_start).saturating_sub(sized);
        let share = free / filled.len() as u64 / FILE_ALIGNMENT * FILE_ALIGNMENT;
        for name in &filled {
            needed.insert(name.clone(), share);
        }
    }
    // Pass 2: place the files.
    let mut files = Vec::with_capacity(order.len());
    let mut placed: BTreeMap<&str, Region> = BTreeMap::new();
    let mut cursor = fs_start;
    for name in &order {
        let len = needed[name];
        if len == 0 {
            let job = jobs
                .iter()
                .find(|j| j.filenames.contains(name))
                .expect("a job names it");
            return Err(SimError::job(
                job,
                &format!(
                    "file {name:?} has no size: set size= to a number of bytes (a percentage \
                     needs a file whose size another job sets, or a device under /dev/)"
                ),
            ));
        }
        let region = Region { start: cursor, len };
        cursor = (region.end()).div_ceil(FILE_ALIGNMENT) * FILE_ALIGNMENT;
        if region.end() > fs_end {
            // Name the job that asked most of the file that did not fit.
            let job = jobs
                .iter()
                .filter(|j| j.filenames.contains(name))
                .max_by_key(|j| match (j.offset, j.size) {
                    (Amount::Bytes(offset), Some(Amount::Bytes(size))) => offset + size,
                    _ => 0,
                })
                .expect("a job names it");
            return Err(SimError::job(
                job,
                &format!(
                    "file {name:?} ({} MiB, from offset + size) ends at {} MiB, beyond {} \
                     ({} MiB)",
                    len.div_ceil(1 << 20),
                    region.end().div_ceil(1 << 20),
                    if partitions.is_empty() {
                        "the simulated device"
                    } else {
                        "the end of partition 1, which holds the files"
                    },
                    fs_end >> 20
                ),
            ));
        }
        files.push((name.clone(), region));
    }
    for (name, region) in &files {
        placed.insert(name.as_str(), *region);
    }
    // Pass 3: each job's region inside each of its files.
    let device = Region {
        start: 0,
        len: capacity,
    };
    let mut job_regions = Vec::with_capacity(jobs.len());
    let mut job_extents = Vec::with_capacity(jobs.len());
    for job in jobs {
        let files_count = job.filenames.len() as u64;
        let mut regions = Vec::with_capacity(job.filenames.len());
        let mut extents = Vec::with_capacity(job.filenames.len());
        for name in &job.filenames {
            let extent = match partition_number(name) {
                Some(number) => *partitions.get(number - 1).ok_or_else(|| {
                    let table = if defaulted {
                        "a disk given no partition table has one partition over the whole \
                         disk; give a table with --device-set partitions=SIZE,SIZE,..."
                            .to_string()
                    } else {
                        format!("the partition table has {}", partitions.len())
                    };
                    SimError::job(job, &format!("{name:?} is partition {number}, but {table}"))
                })?,
                None if is_device(name) => device,
                None => placed[name.as_str()],
            };
            let offset =
                amount_bytes(job.offset, extent.len) + u64::from(job.clone) * job.offset_increment;
            if offset >= extent.len {
                let increment = if job.clone > 0 && job.offset_increment > 0 {
                    format!(
                        " (offset plus {} x offset_increment {}, this job being clone {})",
                        job.clone, job.offset_increment, job.clone
                    )
                } else {
                    String::new()
                };
                return Err(SimError::job(
                    job,
                    &format!(
                        "offset {offset}{increment} lies at or beyond the end of {name:?} \
                         ({} bytes): nothing to do there; a device needs --device-set \
                         capacity_gb=N to be larger",
                        extent.len
                    ),
                ));
            }
            let size = match job.size {
                Some(amount) => amount_bytes(amount, extent.len) / files_count,
                None => extent.len.saturating_sub(offset),
            };
            if size == 0 {
                return Err(SimError::job(
                    job,
                    &format!("nothing to do in {name:?}: the size is 0"),
                ));
            }
            if offset + size > extent.len {
                return Err(SimError::job(
                    job,
                    &format!(
                        "offset {offset} + size {size} lies beyond the end of {name:?} ({} bytes)",
                        extent.len
                    ),
                ));
            }
            let min_block = job
                .bs
                .iter()
                .map(|b| b.min())
                .filter(|&b| b > 0)
                .min()
                .unwrap_or(4096);
            if size < min_block {
                return Err(SimError::job(
                    job,
                    &format!("the region in {name:?} ({size} bytes) is smaller than one block ({min_block})"),
                ));
            }
            regions.push(Region {
                start: extent.start + offset,
                len: size,
            });
            extents.push(extent);
        }
        job_regions.push(regions);
        job_extents.push(extents);
    }
    Ok(Layout {
        files,
        job_regions,
        job_extents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, file: &str, size: Option<Amount>) -> JobSpec {
        let mut spec = JobSpec::new(name);
        spec.filenames = vec![file.to_string()];
        spec.size = size;
        spec
    }

    // Proves files are packed from the outer edge, aligned, shared by name, and devices span all.
    #[test]
    fn files_are_packed_in_order() {
        let jobs = vec![
            job("a", "fa", Some(Amount::Bytes(3 << 20))),
            job("b", "fb", Some(Amount::Bytes(1 << 20))),
            job("c", "fa", Some(Amount::Percent(50.0))),
            job("d", "/dev/sda", None),
        ];
        let layout = plan(&jobs, 1 << 30, &[]).unwrap();
        assert_eq!(
            layout.files[0].1,
            Region {
                start: 0,
                len: 3 << 20
            }
        );
        assert_eq!(
            layout.files[1].1,
            Region {
                start: 3 << 20,
                len: 1 << 20
            }
        );
        assert_eq!(
            layout.job_regions[2][0],
            Region {
                start: 0,
                len: 3 << 19
            }
        );
        assert_eq!(
            layout.job_regions[3][0],
            Region {
                start: 0,
                len: 1 << 30
            }
        );
    }

    // Proves a file a job fills (fill_device, no size) takes the file system's free space,
    // after the sized files, whatever the order they are named in; a later job reading it
    // without a size reads all of it (fio's surface-scan.fio).
    #[test]
    fn a_filled_file_takes_the_free_space() {
        let mut fill = job("w", "data", None);
        fill.fill_device = true;
        let jobs = vec![
            fill,
            job("s", "small", Some(Amount::Bytes(3 << 20))),
            job("r", "data", None),
        ];
        let layout = plan(&jobs, 1 << 30, &[]).unwrap();
        let names: Vec<&str> = layout.files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["small", "data"]);
        let data = layout.files[1].1;
        assert_eq!(data.start, 3 << 20);
        assert_eq!(data.end(), 1 << 30);
        assert_eq!(layout.job_regions[2][0], data);
    }

    #[test]
    fn clear_errors() {
        let no_size = plan(&[job("a", "fa", None)], 1 << 30, &[])
            .unwrap_err()
            .to_string();
        assert!(no_size.contains("no size"), "{no_size}");
        let too_big = plan(
            &[job("a", "fa", Some(Amount::Bytes(2 << 30)))],
            1 << 30,
            &[],
        )
        .unwrap_err();
        assert!(
            too_big.to_string().contains("job \"a\"") && too_big.to_string().contains("MiB"),
            "{too_big}"
        );
    }

    // Proves partition names follow the kernel's: a number after a letter for sd/hd/vd/xvd
    // disks, `p` and a number after a disk name ending in a digit; whole disks are none.
    #[test]
    fn partition_names_are_the_kernels() {
        for (name, number) in [
            ("/dev/sdb1", Some(1)),
            ("/dev/sdab12", Some(12)),
            ("/dev/vda2", Some(2)),
            ("/dev/xvdb3", Some(3)),
            ("/dev/nvme0n1p2", Some(2)),
            ("/dev/mmcblk0p1", Some(1)),
            ("/dev/md0p4", Some(4)),
            ("/dev/sdb", None),
            ("/dev/nvme0n1", None),
            ("/dev/md0", None),
            ("/dev/loop3", None),
            ("/dev/sdb0", None),
            ("sdb1", None),
        ] {
            assert_eq!(partition_number(name), number, "{name}");
        }
    }

    // Proves a table is laid out as fdisk aligns it (1 MiB first, 1 MiB boundaries), that
    // jobs on a partition get its extent (offset and size inside it), files go on partition
    // 1, and bad tables or names are refused with the reason.
    #[test]
    fn partitions_place_jobs_inside_them() {
        const MIB: u64 = 1 << 20;
        let table = parse_partitions("100m, 25%, rest", 1 << 30).unwrap();
        assert_eq!(
            table[0],
            Region {
                start: MIB,
                len: 100 * MIB
            }
        );
        assert_eq!(
            table[1],
            Region {
                start: 101 * MIB,
                len: 256 * MIB
            }
        );
        assert_eq!(
            table[2],
            Region {
                start: 357 * MIB,
                len: 667 * MIB
            }
        );
        let mut second = job("b", "/dev/sdb2", Some(Amount::Percent(50.0)));
        second.offset = Amount::Bytes(MIB);
        let jobs = vec![
            job("a", "/dev/sdb1", None),
            second,
            job("f", "data", Some(Amount::Bytes(MIB))),
        ];
        let layout = plan(&jobs, 1 << 30, &table).unwrap();
        assert_eq!(layout.job_regions[0][0], table[0]);
        assert_eq!(
            layout.job_regions[1][0],
            Region {
                start: 102 * MIB,
                len: 128 * MIB
            }
        );
        assert_eq!(
            layout.files[0].1,
            Region {
                start: MIB,
                len: MIB
            }
        );

        for (value, reason) in [
            ("600m,600m", "beyond the disk"),
            ("rest,1g", "only the last"),
            ("0", "empty"),
            ("10x", "partition 1"),
            ("150%", "percentage"),
        ] {
            let error = parse_partitions(value, 1 << 30).unwrap_err().to_string();
            assert!(
                error.contains(reason) && error.contains(value),
                "{value}: {error}"
            );
        }
        let missing = plan(&[job("c", "/dev/sdb4", None)], 1 << 30, &table).unwrap_err();
        assert!(missing.to_string().contains("table has 3"), "{missing}");
        // No table: partition 1 is fdisk's default, the disk from 1 MiB on; 2 is refused.
        let default = plan(&[job("c", "/dev/sdb1", None)], 1 << 30, &[]).unwrap();
        assert_eq!(
            default.job_regions[0],
            vec![Region {
                start: MIB,
                len: (1 << 30) - MIB
            }]
        );
        let no_table = plan(&[job("c", "/dev/sdb2", None)], 1 << 30, &[]).unwrap_err();
        assert!(no_table.to_string().contains("partitions="), "{no_table}");
        let big_file = plan(
            &[job("f", "data", Some(Amount::Bytes(200 * MIB)))],
            1 << 30,
            &table,
        );
        assert!(big_file.unwrap_err().to_string().contains("partition 1"));
    }
}

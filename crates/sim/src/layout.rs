//! Where each job's files lie on the simulated device.
//!
//! A name under `/dev/` is the raw device: the whole capacity, as fio treats a block device.
//! Any other name is a file. Files are laid out one after another from the start of the device
//! (the outer, fastest zone of a disk), each aligned to 1 MiB, in the order jobs first name them,
//! as a fresh file system allocating contiguous extents would. A file is as large as the largest
//! `offset + size` any job asks of it; jobs naming the same file share its blocks.

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
}

fn is_device(name: &str) -> bool {
    name.starts_with("/dev/")
}

fn amount_bytes(amount: Amount, whole: u64) -> u64 {
    match amount {
        Amount::Bytes(bytes) => bytes,
        Amount::Percent(percent) => ((whole as f64) * percent / 100.0) as u64,
    }
}

/// Plans the layout of `jobs` on a device of `capacity` bytes.
pub fn plan(jobs: &[JobSpec], capacity: u64) -> Result<Layout, SimError> {
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
    // Pass 2: place the files.
    let mut files = Vec::with_capacity(order.len());
    let mut placed: BTreeMap<&str, Region> = BTreeMap::new();
    let mut cursor = 0u64;
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
        if region.end() > capacity {
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
                    "file {name:?} ({} MiB, from offset + size) ends at {} MiB, beyond the \
                     simulated device's {} MiB",
                    len.div_ceil(1 << 20),
                    region.end().div_ceil(1 << 20),
                    capacity >> 20
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
    for job in jobs {
        let files_count = job.filenames.len() as u64;
        let mut regions = Vec::with_capacity(job.filenames.len());
        for name in &job.filenames {
            let extent = if is_device(name) {
                device
            } else {
                placed[name.as_str()]
            };
            let offset =
                amount_bytes(job.offset, extent.len) + u64::from(job.clone) * job.offset_increment;
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
        }
        job_regions.push(regions);
    }
    Ok(Layout { files, job_regions })
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
        let layout = plan(&jobs, 1 << 30).unwrap();
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

    #[test]
    fn clear_errors() {
        let no_size = plan(&[job("a", "fa", None)], 1 << 30)
            .unwrap_err()
            .to_string();
        assert!(no_size.contains("no size"), "{no_size}");
        let too_big = plan(&[job("a", "fa", Some(Amount::Bytes(2 << 30)))], 1 << 30).unwrap_err();
        assert!(
            too_big.to_string().contains("job \"a\"") && too_big.to_string().contains("MiB"),
            "{too_big}"
        );
    }
}

//! What a job asks for next: direction, offset and size, drawn as fio draws them.
//!
//! - Direction: fixed by `rw`, or for mixed modes read with probability `rwmixread`%.
//!   `trimwrite` trims a block, then writes it.
//! - Offset: sequential modes keep one position per file and direction and wrap at the end of
//!   the region. Random modes cover every block exactly once per pass (fio's random map) unless
//!   `norandommap`, or draw from `random_distribution` (zipf, pareto, normal, zoned, which like
//!   fio do not use the map). `rw=randread:8` issues 8 sequential I/Os after each random offset.
//! - Size: `bs`, `bsrange` (multiples of the minimum) or `bssplit` weights, per direction.
//! - Files: a job naming several files visits them round robin.
//! - Strided zones (`zonemode=strided`, io_u.c `__fill_io_u_zone`): offsets stay in a zone of
//!   `zonerange` bytes (random ones drawn in it, sequential ones starting it again at its end)
//!   until `zonesize` bytes were transferred, then the zone moves `zonerange + zoneskip` on,
//!   back to the region's start past its end.

use crate::job::{RandomDistribution, StridedZones};
use crate::prefetch::prefetch;
use crate::random::{mix64, Permutation, Rng};
use crate::{BlockSize, DataDir, JobSpec, RwMode};

/// A byte range: of the simulated device, or of a real file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
}

impl Region {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// The next I/O a job issues, in the coordinates of the regions the generator was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextIo {
    /// Direction.
    pub dir: DataDir,
    /// Offset in bytes, inside the region of file `file`.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Index of the file (in the job's `filenames`, and of the regions given) it addresses.
    pub file: usize,
}

#[derive(Clone, Debug)]
struct FileState {
    region: Region,
    /// Sequential position per direction, relative to the region start: where the last I/O
    /// ended (fio's `last_pos`), 0 before the first.
    position: [u64; 3],
    /// Random map: the current pass's permutation of blocks and how far along it we are.
    map: Option<(Permutation, u64)>,
    /// Start of the current strided zone, relative to the region (fio's `file_offset`).
    zone_start: u64,
}

/// Draws one job's I/O sequence.
///
/// Laid out for the I/O path (`repr(C)`, in this order): with many jobs a job's generator is
/// cold when its next I/O is drawn, and each cache line it reads is a miss. What a random or
/// sequential I/O reads fills the first two lines; the rest (the last I/O, kept for
/// `rw=randread:N`, strided zones, the block sizes of `bsrange` and `bssplit`, non-uniform
/// distributions, trimwrite's pending write) follows.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Generator {
    rng: Rng,
    files: Vec<FileState>,
    next_file: usize,
    rwmixread: u32,
    sequencer_nr: u32,
    /// I/Os left to issue sequentially after a random offset (`rw=randread:N`).
    sequential_run_left: u32,
    rw: RwMode,
    /// Random offsets come from the file's random map: a uniform distribution without
    /// `norandommap`.
    permuted: bool,
    /// Whether `zones` is set: tested on the hot lines, so that jobs without strided zones
    /// never read `zones` ([`Generator::strided`]).
    zoned: bool,
    align: [u64; 3],
    /// Each direction's block size when it is fixed (`bs`), else 0: `bs` is read only for
    /// `bsrange` and `bssplit`.
    fixed_bs: [u64; 3],
    /// Added to the offset after each sequential I/O (`rw=read:4k`, `rw=read:-8k`).
    skip: i64,
    /// fio's `zone_bytes` (one count for the job), kept with `zonemode=strided` only.
    zone_bytes: u64,
    /// The last I/O, kept only while `rw=randread:N` (N > 1) may continue from it.
    last: Option<NextIo>,
    /// `zonemode=strided`.
    zones: Option<StridedZones>,
    bs: [BlockSize; 3],
    distribution: RandomDistribution,
    /// For trimwrite: the block just trimmed, to be written next.
    pending_write: Option<NextIo>,
}

fn choose_size(bs: &BlockSize, rng: &mut Rng) -> u64 {
    match bs {
        BlockSize::Fixed(size) => *size,
        BlockSize::Range { min, max } => {
            let steps = (max - min) / min;
            min + rng.below(steps + 1) * min
        }
        BlockSize::Split(parts) => {
            let mut pick = rng.below(100) as u32;
            for (size, percent) in parts {
                if pick < *percent {
                    return *size;
                }
                pick -= percent;
            }
            parts.last().map(|p| p.0).unwrap_or(4096)
        }
    }
}

impl Generator {
    /// A generator for `job` over its `regions` (one per file), drawing from `rng`.
    pub fn new(job: &JobSpec, regions: &[Region], rng: Rng) -> Self {
        assert!(!regions.is_empty());
        let align = std::array::from_fn(|d| job.blockalign[d].max(1));
        Generator {
            rw: job.rw,
            rwmixread: job.rwmixread,
            fixed_bs: std::array::from_fn(|d| match job.bs[d] {
                BlockSize::Fixed(size) => size,
                _ => 0,
            }),
            bs: job.bs.clone(),
            align,
            permuted: matches!(job.random_distribution, RandomDistribution::Random)
                && !job.norandommap,
            distribution: job.random_distribution.clone(),
            sequencer_nr: job.rw_sequencer_nr.max(1),
            skip: if job.rw.is_random() {
                0
            } else {
                job.rw_skip_bytes
            },
            files: regions
                .iter()
                .map(|&region| FileState {
                    region,
                    position: [0; 3],
                    map: None,
                    zone_start: 0,
                })
                .collect(),
            next_file: 0,
            sequential_run_left: 0,
            last: None,
            pending_write: None,
            zoned: job.strided_zones.is_some(),
            zones: job.strided_zones,
            zone_bytes: 0,
            rng,
        }
    }

    /// The file the next I/O addresses (files are visited round robin).
    pub fn next_file(&self) -> usize {
        self.next_file
    }

    /// Where the next sequential I/O of `dir` in file `file` would start, before any skip or
    /// wrap: where the last one ended, in the regions' coordinates.
    pub fn sequential_position(&self, file: usize, dir: DataDir) -> u64 {
        let file = &self.files[file];
        file.region.start + file.position[dir as usize]
    }

    /// Moves the sequential position of `dir` in file `file` to `at` (in the regions'
    /// coordinates), as fio's `last_pos` follows an I/O that zoned devices moved
    /// (`zonemode=zbd`); a position outside the region starts it again.
    pub fn set_sequential_position(&mut self, file: usize, dir: DataDir, at: u64) {
        let file = &mut self.files[file];
        file.position[dir as usize] = match at.checked_sub(file.region.start) {
            Some(position) if position <= file.region.len => position,
            _ => 0,
        };
    }

    fn choose_dir(&mut self) -> DataDir {
        match self.rw {
            RwMode::Read | RwMode::RandRead => DataDir::Read,
            RwMode::Write | RwMode::RandWrite => DataDir::Write,
            RwMode::Trim | RwMode::RandTrim | RwMode::TrimWrite | RwMode::RandTrimWrite => {
                DataDir::Trim
            }
            RwMode::ReadWrite | RwMode::RandReadWrite => {
                if (self.rng.below(100) as u32) < self.rwmixread {
                    DataDir::Read
                } else {
                    DataDir::Write
                }
            }
        }
    }

    /// `zonemode=strided`'s zones, read only when there are some.
    #[inline]
    fn strided(&self) -> Option<StridedZones> {
        if self.zoned {
            self.zones
        } else {
            None
        }
    }

    /// Asks the CPU for what drawing the next I/O reads (see [`crate::prefetch`]).
    #[inline]
    pub(crate) fn prefetch(&self) {
        prefetch(&self.rng);
        prefetch(&self.rw);
        prefetch(&self.fixed_bs);
        prefetch(&self.bs);
        prefetch(&self.last);
        prefetch(&self.distribution);
        if let Some(file) = self.files.get(self.next_file) {
            prefetch(file);
        }
    }

    /// The next I/O.
    pub fn next_io(&mut self) -> NextIo {
        // Only trimwrite ever leaves a write pending: its test reads `rw`, which is hot.
        if matches!(self.rw, RwMode::TrimWrite | RwMode::RandTrimWrite) {
            if let Some(write) = self.pending_write.take() {
                return write;
            }
        }
        let dir = self.choose_dir();
        let len = match self.fixed_bs[dir as usize] {
            0 => choose_size(&self.bs[dir as usize], &mut self.rng),
            size => size,
        };
        let file_index = self.next_file;
        self.next_file = (self.next_file + 1) % self.files.len();
        if let Some(zones) = self.strided() {
            self.enter_zone(zones, file_index, dir);
        }
        let io = if !self.rw.is_random() {
            self.sequential(file_index, dir, len)
        } else if self.sequential_run_left > 0 && self.last.is_some_and(|l| l.dir == dir) {
            self.sequential_run_left -= 1;
            let last = self.last.expect("checked");
            let file = &self.files[file_index];
            if last.offset + last.len + len <= file.region.end() {
                NextIo {
                    dir,
                    offset: last.offset + last.len,
                    len,
                    file: last.file,
                }
            } else {
                NextIo {
                    dir,
                    offset: file.region.start,
                    len,
                    file: file_index,
                }
            }
        } else {
            self.sequential_run_left = self.sequencer_nr - 1;
            self.random(file_index, dir, len)
        };
        if self.sequencer_nr > 1 {
            self.last = Some(io);
        }
        if self.zoned {
            self.zone_bytes += io.len;
        }
        if matches!(self.rw, RwMode::TrimWrite | RwMode::RandTrimWrite) {
            self.pending_write = Some(NextIo {
                dir: DataDir::Write,
                ..io
            });
        }
        io
    }

    /// fio's `__fill_io_u_zone` before an I/O of `dir` in file `file_index`: past `size`
    /// bytes in the zone, the next zone (`range + skip` on, wrapping to the start); a
    /// sequential position at the zone's end starts it again; every `range` bytes the
    /// random map and the positions start afresh (`fio_file_reset`).
    fn enter_zone(&mut self, zones: StridedZones, file_index: usize, dir: DataDir) {
        let file = &mut self.files[file_index];
        if self.zone_bytes >= zones.size {
            self.zone_bytes = 0;
            file.zone_start = file.zone_start.saturating_add(zones.range + zones.skip);
            if file.zone_start >= file.region.len {
                file.zone_start = 0;
            }
            file.position[dir as usize] = file.zone_start;
        }
        if file.position[dir as usize] >= file.zone_start + zones.range {
            file.position[dir as usize] = file.zone_start;
        }
        if self.zone_bytes.is_multiple_of(zones.range) {
            file.position = [file.zone_start; 3];
            file.map = None;
        }
    }

    /// The next sequential offset, as fio's `get_next_seq_offset`: where the last I/O ended,
    /// plus the skip of `rw=read:N` (not before the first I/O); a backwards job starts from
    /// the end of the region; past either end it wraps, a backwards job to the end.
    fn sequential(&mut self, file_index: usize, dir: DataDir, len: u64) -> NextIo {
        let skip = self.skip;
        let file = &mut self.files[file_index];
        let len = len.min(file.region.len);
        let region_len = file.region.len;
        let mut position = file.position[dir as usize];
        if skip < 0 && position == 0 {
            position = region_len;
        }
        if skip != 0 && position != 0 {
            let moved = i128::from(position) + i128::from(skip);
            let fits = |at: i128| at >= 0 && at + i128::from(len) <= i128::from(region_len);
            let wrapped = if fits(moved) {
                moved
            } else if skip > 0 {
                0
            } else {
                (i128::from(region_len) + i128::from(skip)).max(0)
            };
            position = u64::try_from(wrapped).unwrap_or(0);
        }
        if position + len > region_len {
            position = if skip < 0 { region_len - len } else { 0 };
        }
        file.position[dir as usize] = position + len;
        NextIo {
            dir,
            offset: file.region.start + position,
            len,
            file: file_index,
        }
    }

    fn random(&mut self, file_index: usize, dir: DataDir, len: u64) -> NextIo {
        let unit = self.align[dir as usize];
        let zones = self.strided();
        let file = &mut self.files[file_index];
        // The blocks to draw from: the region, or the current strided zone of it.
        let (window_start, window_len) = match zones {
            Some(zones) => (
                file.zone_start,
                zones.range.min(file.region.len - file.zone_start),
            ),
            None => (0, file.region.len),
        };
        let len = len.min(window_len);
        let blocks = (window_len / unit).max(1);
        let block = if self.permuted {
            let needs_pass = match &file.map {
                Some((permutation, next)) => *next >= permutation.len(),
                None => true,
            };
            if needs_pass {
                file.map = Some((Permutation::new(blocks, &mut self.rng), 0));
            }
            let (permutation, next) = file.map.as_mut().expect("just ensured");
            let block = permutation.get(*next);
            *next += 1;
            block
        } else {
            match &self.distribution {
                // The map is off (`norandommap`).
                RandomDistribution::Random => self.rng.below(blocks),
                RandomDistribution::Zipf(theta) => {
                    scramble(zipf_rank(*theta, blocks, &mut self.rng), blocks)
                }
                RandomDistribution::Pareto(h) => {
                    let power = h.ln() / (1.0 - h).ln();
                    let rank = ((blocks - 1) as f64 * self.rng.unit().powf(power)) as u64;
                    scramble(rank, blocks)
                }
                RandomDistribution::Normal(deviation_percent) => {
                    let center = blocks as f64 / 2.0;
                    let deviation = blocks as f64 * deviation_percent / 100.0;
                    let value =
                        (center + self.rng.normal() * deviation).clamp(0.0, (blocks - 1) as f64);
                    scramble(value as u64, blocks)
                }
                RandomDistribution::Zoned(zones) => {
                    let mut pick = self.rng.unit() * 100.0;
                    let mut range_start = 0.0;
                    let mut chosen = (0.0, 100.0);
                    for &(access, range) in zones {
                        if pick < access {
                            chosen = (range_start, range);
                            break;
                        }
                        pick -= access;
                        range_start += range;
                    }
                    let first = (blocks as f64 * chosen.0 / 100.0) as u64;
                    let count = ((blocks as f64 * chosen.1 / 100.0) as u64).max(1);
                    (first + self.rng.below(count)).min(blocks - 1)
                }
            }
        };
        let mut offset = block * unit;
        if offset + len > window_len {
            offset = (window_len - len) / unit * unit;
        }
        NextIo {
            dir,
            offset: file.region.start + window_start + offset,
            len,
            file: file_index,
        }
    }
}

/// Spreads popular ranks over the whole range, as fio hashes them, so hot blocks are not all at
/// the start of the file.
fn scramble(rank: u64, blocks: u64) -> u64 {
    mix64(rank) % blocks
}

/// A Zipf-distributed rank in `0..n` with exponent `theta` (rejection-inversion sampling,
/// Hörmann and Derflinger 1996), 0 the most popular.
fn zipf_rank(theta: f64, n: u64, rng: &mut Rng) -> u64 {
    if n == 1 {
        return 0;
    }
    let s = theta.max(1e-9);
    let h = |x: f64| -> f64 {
        if (s - 1.0).abs() < 1e-12 {
            x.ln()
        } else {
            (x.powf(1.0 - s) - 1.0) / (1.0 - s)
        }
    };
    let h_inverse = |y: f64| -> f64 {
        if (s - 1.0).abs() < 1e-12 {
            y.exp()
        } else {
            (1.0 + y * (1.0 - s)).powf(1.0 / (1.0 - s))
        }
    };
    let n_f = n as f64;
    let h_x1 = h(1.5) - 1.0;
    let h_n = h(n_f + 0.5);
    let threshold = 2.0 - h_inverse(h(2.5) - 2f64.powf(-s));
    loop {
        let u = h_n + rng.unit() * (h_x1 - h_n);
        let x = h_inverse(u);
        let k = (x + 0.5).floor().clamp(1.0, n_f);
        if k - x <= threshold || u >= h(k + 0.5) - k.powf(-s) {
            return k as u64 - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobSpec;

    fn generator(rw: RwMode, region: Region, adjust: impl FnOnce(&mut JobSpec)) -> Generator {
        let mut job = JobSpec::new("t");
        job.rw = rw;
        adjust(&mut job);
        Generator::new(&job, &[region], Rng::new(3))
    }

    // Proves a random job with the random map touches every block once per pass.
    #[test]
    fn random_map_covers_each_block_once() {
        let region = Region {
            start: 1 << 20,
            len: 64 * 4096,
        };
        let mut g = generator(RwMode::RandRead, region, |_| {});
        let mut offsets: Vec<u64> = (0..64).map(|_| g.next_io().offset).collect();
        offsets.sort();
        let expected: Vec<u64> = (0..64).map(|b| region.start + b * 4096).collect();
        assert_eq!(offsets, expected);
    }

    // Proves zonemode=strided gives the offsets fio 3.33 gives (its write_iolog on a 64 MiB
    // file, bs=64k): zonesize=1m zoneskip=3m reads [0, 1m), [4m, 5m), ... and wraps to 0
    // after the last zone; with zonerange=512k each zone's half megabyte is read twice before
    // moving 3.5 MiB on; random reads with zonerange=2m stay in [0, 2m), then [5m, 7m).
    #[test]
    fn strided_zones_visit_zones_as_fio() {
        const K: u64 = 1024;
        const M: u64 = 1024 * 1024;
        let region = Region {
            start: 0,
            len: 64 * M,
        };
        let zoned = |rw: RwMode, size: u64, range: u64, skip: u64| {
            generator(rw, region, move |job| {
                job.bs = std::array::from_fn(|_| BlockSize::Fixed(64 * K));
                job.strided_zones = Some(StridedZones { size, range, skip });
            })
        };
        let mut g = zoned(RwMode::Read, M, M, 3 * M);
        let offsets: Vec<u64> = (0..1024).map(|_| g.next_io().offset).collect();
        assert_eq!(
            offsets[..16],
            (0..16).map(|i| i * 64 * K).collect::<Vec<_>>()[..]
        );
        assert_eq!(offsets[16], 4 * M);
        assert_eq!(offsets[255], 60 * M + 15 * 64 * K);
        assert_eq!(offsets[256], 0, "wraps after the last zone");
        let distinct: std::collections::BTreeSet<u64> = offsets.iter().copied().collect();
        assert_eq!(distinct.len(), 256);

        let mut g = zoned(RwMode::Read, M, 512 * K, 3 * M);
        let offsets: Vec<u64> = (0..20).map(|_| g.next_io().offset / K).collect();
        let half: Vec<u64> = (0..8).map(|i| i * 64).collect();
        assert_eq!(offsets[..8], half[..]);
        assert_eq!(offsets[8..16], half[..]);
        assert_eq!(offsets[16], 3584);

        let mut g = zoned(RwMode::RandRead, M, 2 * M, 3 * M);
        let offsets: Vec<u64> = (0..32).map(|_| g.next_io().offset).collect();
        assert!(offsets[..16].iter().all(|&o| o < 2 * M), "{offsets:?}");
        assert!(
            offsets[16..].iter().all(|&o| (5 * M..7 * M).contains(&o)),
            "{offsets:?}"
        );
    }

    // Proves sequential I/O climbs and wraps inside the region.
    #[test]
    fn sequential_wraps() {
        let region = Region {
            start: 8192,
            len: 3 * 4096,
        };
        let mut g = generator(RwMode::Read, region, |_| {});
        let offsets: Vec<u64> = (0..4).map(|_| g.next_io().offset).collect();
        assert_eq!(offsets, vec![8192, 12288, 16384, 8192]);
    }

    // Proves rw=read:-8k with 4 KiB blocks reads the region block by block from the end
    // down and wraps to the end, and rw=write:4k leaves a 4 KiB hole after every block, as
    // fio's get_next_seq_offset.
    #[test]
    fn holes_and_backwards() {
        let region = Region {
            start: 8192,
            len: 4 * 4096,
        };
        let mut g = generator(RwMode::Read, region, |job| job.rw_skip_bytes = -8192);
        let offsets: Vec<u64> = (0..6).map(|_| g.next_io().offset - region.start).collect();
        assert_eq!(offsets, vec![8192, 4096, 0, 8192, 4096, 0]);
        let mut g = generator(RwMode::Write, region, |job| job.rw_skip_bytes = 4096);
        let offsets: Vec<u64> = (0..4).map(|_| g.next_io().offset - region.start).collect();
        assert_eq!(offsets, vec![0, 8192, 0, 8192]);
    }

    // Proves rwmixread and bssplit shares come out near what was asked.
    #[test]
    fn mixes_and_splits() {
        let region = Region {
            start: 0,
            len: 1 << 30,
        };
        let mut g = generator(RwMode::RandReadWrite, region, |job| {
            job.rwmixread = 70;
            job.bs[0] = BlockSize::Split(vec![(4096, 25), (65536, 75)]);
        });
        let ios: Vec<NextIo> = (0..20_000).map(|_| g.next_io()).collect();
        let reads: Vec<&NextIo> = ios.iter().filter(|io| io.dir == DataDir::Read).collect();
        let read_share = reads.len() as f64 / ios.len() as f64;
        assert!((read_share - 0.70).abs() < 0.02, "{read_share}");
        let big = reads.iter().filter(|io| io.len == 65536).count() as f64 / reads.len() as f64;
        assert!((big - 0.75).abs() < 0.02, "{big}");
        assert!(ios
            .iter()
            .all(|io| io.offset + io.len <= region.end() && io.offset % 4096 == 0));
    }

    // Proves zipf concentrates accesses: the most popular 10% of blocks get most of them.
    #[test]
    fn zipf_is_skewed() {
        let region = Region {
            start: 0,
            len: 1000 * 4096,
        };
        let mut g = generator(RwMode::RandRead, region, |job| {
            job.random_distribution = RandomDistribution::Zipf(1.2);
        });
        let mut counts = vec![0u32; 1000];
        for _ in 0..20_000 {
            counts[(g.next_io().offset / 4096) as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u32 = counts[..100].iter().sum();
        assert!(top > 14_000, "top 10% got {top} of 20000");
    }
}

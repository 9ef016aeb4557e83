//! Writeback: which dirty pages each `bdi_writeback` holds, in which order the flusher takes
//! them, and how fast a dirtying task may go, as Linux's fs/fs-writeback.c and
//! mm/page-writeback.c decide.
//!
//! - **Dirty inodes, oldest first.** Each writeback context (`Wb`: one per device, or one per
//!   cgroup with cgroup writeback) keeps its dirty inodes in the order they were first dirtied
//!   (`inode->dirtied_when`, set when a clean inode gets its first dirty page and kept while it
//!   stays dirty). Writeback takes a chunk of at most [`MAX_WRITEBACK_PAGES`] from the inode
//!   at the front, from where its last chunk ended (`mapping->writeback_index`, cyclic), and
//!   moves an inode with pages left behind the others (`requeue_io`: the b_io/b_more_io round
//!   robin of `writeback_sb_inodes`). Periodic (kupdate) writeback takes only inodes dirtied
//!   at least `dirty_expire_centisecs` ago (`move_expired_inodes`).
//! - **Thresholds** (`domain_dirty_limits`): background at `dirty_background_ratio` and the
//!   hard limit at `dirty_ratio` percent of the host's memory (all of it dirtyable here).
//! - **Throttling** (`balance_dirty_pages`), two ways. The 2.6.x one ([`Throttle::Legacy`],
//!   2.6.32): a task that dirtied `ratelimit_pages` (1024, or 8 once the limit was exceeded)
//!   and finds dirty plus writeback pages over the limit writes out a chunk of 1.5 times that
//!   (`sync_writeback_pages`) itself, from any inode of the device, then sleeps up to 100 ms
//!   (`congestion_wait`) while still over. The modern one ([`Throttle::Proportional`], 3.2+):
//!   no task writes; below the midpoint of the two thresholds (`freerun`) it runs free, above
//!   it it pauses for the pages it dirtied at `dirty_ratelimit x pos_ratio`, with pos_ratio
//!   the cubic curve of `wb_position_ratio` around the setpoint and `dirty_ratelimit` the
//!   balanced rate (its writeback context's write bandwidth over its dirtying tasks), at most
//!   200 ms a pause (`MAX_PAUSE`); pauses shorter than 10 ms are accumulated instead.
//!
//! Simplified, and said so: one bandwidth estimate per context over 200 ms windows
//! (`BANDWIDTH_INTERVAL`) with the kernel's 1:7 smoothing replaced by halving; no per-task
//! dirty limits (`task_dirty_limit`), no per-memcg dirty domains (with cgroup writeback each
//! context runs its own flusher and its own rate, within the host's thresholds).

use iosched_core::Nanos;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Largest chunk the flusher writes from one inode before moving to the next (4 MiB of
/// pages, `MAX_WRITEBACK_PAGES` of 2.6.32; `writeback_chunk_size`'s floor since).
pub const MAX_WRITEBACK_PAGES: u64 = 1024;

/// `ratelimit_pages` of 2.6.32 on a host of 4 GiB and more: a task enters
/// `balance_dirty_pages` after dirtying this many pages (8 once the limit was exceeded).
pub const RATELIMIT_PAGES: u64 = 1024;
/// `ratelimit` once `dirty_exceeded` is set.
pub const RATELIMIT_EXCEEDED: u64 = 8;

/// `congestion_wait(BLK_RW_ASYNC, HZ/10)`.
pub const CONGESTION_WAIT: Nanos = 100_000_000;

/// The longest pause of the proportional throttle (`MAX_PAUSE`, HZ/5).
pub const MAX_PAUSE: Nanos = 200_000_000;
/// Pauses shorter than this are not taken: the pages count towards the next one.
pub const MIN_PAUSE: Nanos = 10_000_000;

/// Bandwidth estimation window (`BANDWIDTH_INTERVAL`, 200 ms).
const BANDWIDTH_INTERVAL: Nanos = 200_000_000;
/// The estimate before anything was measured (`INIT_BW`, 100 MB/s), in pages per second.
const INIT_BW_PAGES: u64 = (100 << 20) / 4096;

/// How `balance_dirty_pages` throttles a dirtying task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Throttle {
    /// 2.6.x: the task writes out pages of any inode itself, then waits for congestion.
    Legacy,
    /// 3.2+: the task sleeps in proportion to what it dirtied; only flushers write.
    Proportional,
}

/// The host's writeback settings (`/proc/sys/vm/dirty_*`).
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Pages of memory that may be dirty (all of the host's).
    pub dirtyable: u64,
    /// `dirty_background_ratio` (percent).
    pub background_ratio: u64,
    /// `dirty_ratio` (percent).
    pub ratio: u64,
    /// `dirty_expire_centisecs`, as ns.
    pub expire: Nanos,
    /// `dirty_writeback_centisecs`, as ns (0: no periodic writeback).
    pub interval: Nanos,
    /// How tasks are throttled.
    pub throttle: Throttle,
}

impl Settings {
    /// (background threshold, dirty limit) in pages, at least 1 and 2.
    pub fn thresholds(&self) -> (u64, u64) {
        let background = (self.dirtyable * self.background_ratio / 100).max(1);
        let limit = (self.dirtyable * self.ratio / 100).max(background + 1);
        (background, limit)
    }
}

/// One inode's dirty pages in one writeback context.
#[derive(Clone, Debug)]
struct InodeDirt {
    pages: BTreeSet<u64>,
    dirtied_when: Nanos,
    /// Where the next chunk starts (`writeback_index`).
    cursor: u64,
}

/// A writeback context (`struct bdi_writeback`): its dirty inodes and its write bandwidth.
#[derive(Clone, Debug)]
pub struct Wb {
    inodes: BTreeMap<u64, InodeDirt>,
    /// Dirty inodes in service order: dirtied_when order, a requeued one at the back.
    queue: VecDeque<u64>,
    dirty: u64,
    /// Pages written back in the current bandwidth window, and when it began.
    window_pages: u64,
    window_start: Nanos,
    /// Write bandwidth, pages per second (`avg_write_bandwidth`).
    pub bandwidth: u64,
    /// Pages this context wrote back in all.
    pub written: u64,
    /// Pages of its writeback in flight.
    pub writeback: u64,
    /// Pages it wrote back lately (halved each period, with every context's): its share of
    /// completions (`wb->completions`).
    pub recent: u64,
}

impl Default for Wb {
    fn default() -> Self {
        Wb {
            inodes: BTreeMap::new(),
            queue: VecDeque::new(),
            dirty: 0,
            window_pages: 0,
            window_start: 0,
            bandwidth: INIT_BW_PAGES,
            written: 0,
            writeback: 0,
            recent: 0,
        }
    }
}

impl Wb {
    /// Dirty pages it holds.
    pub fn dirty(&self) -> u64 {
        self.dirty
    }

    /// `page` of `inode` was dirtied at `now` (it was clean). `__mark_inode_dirty` keeps the
    /// inode's first dirtying time.
    pub fn add(&mut self, inode: u64, page: u64, now: Nanos) {
        let entry = self.inodes.entry(inode).or_insert_with(|| {
            self.queue.push_back(inode);
            InodeDirt {
                pages: BTreeSet::new(),
                dirtied_when: now,
                cursor: 0,
            }
        });
        if entry.pages.insert(page) {
            self.dirty += 1;
        }
    }

    /// Forgets `page` of `inode` (written back, or replaced by a direct write).
    pub fn remove(&mut self, inode: u64, page: u64) -> bool {
        let Some(entry) = self.inodes.get_mut(&inode) else {
            return false;
        };
        if !entry.pages.remove(&page) {
            return false;
        }
        self.dirty -= 1;
        if entry.pages.is_empty() {
            self.inodes.remove(&inode);
            self.queue.retain(|&i| i != inode);
        }
        true
    }

    /// The dirty pages of `inode` here, in order (fsync's: `WB_SYNC_ALL` takes them all).
    pub fn pages_of(&self, inode: u64) -> Vec<u64> {
        self.inodes
            .get(&inode)
            .map(|entry| entry.pages.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The next chunk of writeback: up to `max` dirty pages of the first inode in service
    /// order (the first dirtied at or before `expired_before`, for periodic writeback) that
    /// `writable` accepts, from its cursor on and wrapping, in page order. The inode goes to
    /// the back of the queue when pages are left. Returns the inode and its pages, which are
    /// no longer dirty here; empty when no inode qualifies.
    pub fn next_chunk(
        &mut self,
        max: u64,
        expired_before: Option<Nanos>,
        mut writable: impl FnMut(u64) -> bool,
    ) -> Option<(u64, Vec<u64>)> {
        for position in 0..self.queue.len() {
            let inode = self.queue[position];
            let entry = self
                .inodes
                .get_mut(&inode)
                .expect("queued inodes are dirty");
            if expired_before.is_some_and(|cutoff| entry.dirtied_when > cutoff) {
                continue;
            }
            let mut chunk = Vec::new();
            let cursor = entry.cursor;
            for &page in entry
                .pages
                .range(cursor..)
                .chain(entry.pages.range(..cursor))
            {
                if chunk.len() as u64 == max {
                    break;
                }
                if writable(page) {
                    chunk.push(page);
                }
            }
            if chunk.is_empty() {
                continue;
            }
            for page in &chunk {
                entry.pages.remove(page);
            }
            entry.cursor = chunk.last().map_or(cursor, |&last| last + 1);
            self.dirty -= chunk.len() as u64;
            self.queue.remove(position);
            if entry.pages.is_empty() {
                self.inodes.remove(&inode);
            } else {
                self.queue.push_back(inode);
            }
            return Some((inode, chunk));
        }
        None
    }

    /// Whether an inode was dirtied at or before `cutoff`.
    pub fn has_expired(&self, cutoff: Nanos) -> bool {
        self.inodes
            .values()
            .any(|inode| inode.dirtied_when <= cutoff)
    }

    /// `pages` of its writeback completed at `now`: the bandwidth estimate moves
    /// (`wb_update_write_bandwidth`, once per window, halfway to the window's rate).
    pub fn completed(&mut self, pages: u64, now: Nanos) {
        self.written += pages;
        self.recent += pages;
        self.writeback = self.writeback.saturating_sub(pages);
        self.window_pages += pages;
        let elapsed = now.saturating_sub(self.window_start);
        if elapsed >= BANDWIDTH_INTERVAL {
            let rate = (u128::from(self.window_pages) * 1_000_000_000 / u128::from(elapsed)) as u64;
            self.bandwidth = ((self.bandwidth + rate) / 2).max(1);
            self.window_pages = 0;
            self.window_start = now;
        }
    }

    /// Starts a bandwidth window at `now` if none is open (the context was idle).
    pub fn touch(&mut self, now: Nanos) {
        if self.window_pages == 0 {
            self.window_start = now;
        }
    }
}

/// A writeback context's part in the proportional throttle: its dirty and writeback pages,
/// and its share of the host's recent writeback completions (`wb_calc_thresh`).
#[derive(Clone, Copy, Debug)]
pub struct WbShare {
    /// Dirty plus writeback pages of the context.
    pub dirty: u64,
    /// Its fraction of recent completions, 0..=1.
    pub fraction: f64,
    /// Its write bandwidth, pages per second.
    pub bandwidth: u64,
    /// Tasks dirtying pages in it.
    pub dirtiers: u64,
}

/// The proportional throttle's pause for a task that dirtied `pages` since its last pause,
/// with `dirty` dirty-plus-writeback pages on the host and its context `wb`
/// (`balance_dirty_pages`, `wb_position_ratio`): the global control line (a cubic around
/// the setpoint between freerun and the limit) times the context's own (a line through its
/// share of the setpoint, 1 there, falling to a quarter of it above; and the reserve area
/// below half its threshold, up to 8x, so that a context's flusher is not left idle),
/// applied to the balanced rate, its bandwidth over its dirtiers. None: run free (below
/// freerun, or a pause under [`MIN_PAUSE`]: keep counting).
pub fn proportional_pause(
    settings: &Settings,
    dirty: u64,
    pages: u64,
    wb: WbShare,
) -> Option<Nanos> {
    let (background, limit) = settings.thresholds();
    let freerun = (background + limit) / 2;
    if dirty <= freerun {
        return None;
    }
    if dirty >= limit {
        return Some(MAX_PAUSE);
    }
    // pos_ratio = 1 + ((setpoint - dirty) / (limit - setpoint))^3, in [0, 2].
    let setpoint = (freerun + limit) / 2;
    let x = (setpoint as f64 - dirty as f64) / ((limit - setpoint).max(1) as f64);
    let mut pos_ratio = (1.0 + x * x * x).clamp(0.0, 2.0);
    // The context's line.
    let thresh = limit as f64;
    let wb_thresh = (thresh * wb.fraction.clamp(0.0, 1.0)).max((limit - dirty) as f64 / 8.0);
    let share = wb_thresh / thresh;
    let wb_setpoint = setpoint as f64 * share;
    let span = (thresh - wb_thresh + 8.0 * wb.bandwidth as f64) * share;
    let x_intercept = wb_setpoint + span;
    let wb_dirty = wb.dirty as f64;
    if wb_dirty < x_intercept - span / 4.0 {
        pos_ratio *= (x_intercept - wb_dirty) / (x_intercept - wb_setpoint).max(1.0);
    } else {
        pos_ratio /= 4.0;
    }
    let reserve = wb_thresh / 2.0;
    if wb_dirty < reserve {
        pos_ratio *= if wb_dirty > reserve / 8.0 {
            reserve / wb_dirty
        } else {
            8.0
        };
    }
    let ratelimit = wb.bandwidth as f64 / wb.dirtiers.max(1) as f64 * pos_ratio;
    if ratelimit <= 0.0 {
        return Some(MAX_PAUSE);
    }
    let pause = (pages as f64 / ratelimit * 1e9).min(MAX_PAUSE as f64) as Nanos;
    (pause >= MIN_PAUSE).then_some(pause)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            dirtyable: 100_000,
            background_ratio: 10,
            ratio: 20,
            expire: 30_000_000_000,
            interval: 5_000_000_000,
            throttle: Throttle::Proportional,
        }
    }

    // Proves the flusher's order: oldest-dirtied inode first, at most a chunk of it, from its
    // cursor, then the next inode (round robin), and that periodic writeback skips young
    // inodes.
    #[test]
    fn oldest_inode_first_in_chunks_round_robin() {
        let mut wb = Wb::default();
        for page in 0..10 {
            wb.add(1000, 1000 + page, 5);
        }
        for page in 0..3 {
            wb.add(2000, 2000 + page, 7);
        }
        wb.add(1000, 1020, 9);
        assert_eq!(wb.dirty(), 14);
        let (inode, chunk) = wb.next_chunk(4, None, |_| true).unwrap();
        assert_eq!((inode, chunk), (1000, vec![1000, 1001, 1002, 1003]));
        let (inode, chunk) = wb.next_chunk(4, None, |_| true).unwrap();
        assert_eq!((inode, chunk), (2000, vec![2000, 2001, 2002]));
        let (inode, chunk) = wb.next_chunk(4, None, |p| p != 1005).unwrap();
        assert_eq!((inode, chunk), (1000, vec![1004, 1006, 1007, 1008]));
        // Only inode 1000 is left; dirtied at 5, so it is expired for a cutoff of 6.
        assert!(wb.next_chunk(4, Some(4), |_| true).is_none());
        let (_, chunk) = wb.next_chunk(4, Some(6), |_| true).unwrap();
        assert_eq!(chunk, vec![1009, 1020, 1005]);
        assert_eq!(wb.dirty(), 0);
        assert!(wb.next_chunk(4, None, |_| true).is_none());
    }

    // Proves removal (fsync's, a direct write's) keeps the counts and the queue right.
    #[test]
    fn take_and_remove() {
        let mut wb = Wb::default();
        wb.add(1, 10, 0);
        wb.add(1, 11, 0);
        wb.add(2, 20, 1);
        assert!(wb.remove(1, 10));
        assert!(!wb.remove(1, 10));
        assert_eq!(wb.pages_of(1), vec![11]);
        assert!(wb.remove(1, 11));
        assert_eq!(wb.dirty(), 1);
        assert!(wb.has_expired(1));
        assert!(!wb.has_expired(0));
        assert_eq!(wb.next_chunk(8, None, |_| true), Some((2, vec![20])));
    }

    fn one(dirty: u64, bandwidth: u64, dirtiers: u64) -> WbShare {
        WbShare {
            dirty,
            fraction: 1.0,
            bandwidth,
            dirtiers,
        }
    }

    // Proves the proportional throttle's shape: free below freerun, longer pauses as dirty
    // pages near the limit, the longest at it, a context with twice the bandwidth pausing
    // half as long, and a context below its share of the setpoint pausing less than one
    // above it.
    #[test]
    fn pauses_grow_towards_the_limit() {
        let s = settings();
        let (background, limit) = s.thresholds();
        assert_eq!((background, limit), (10_000, 20_000));
        assert_eq!(
            proportional_pause(&s, 15_000, 1024, one(15_000, 25_600, 1)),
            None
        );
        let near = proportional_pause(&s, 19_000, 1024, one(19_000, 25_600, 1)).unwrap();
        let middle = proportional_pause(&s, 17_000, 1024, one(17_000, 25_600, 1)).unwrap();
        assert!(near > middle, "{near} vs {middle}");
        assert_eq!(
            proportional_pause(&s, 20_000, 1, one(20_000, 25_600, 1)),
            Some(MAX_PAUSE)
        );
        let slow = proportional_pause(&s, 17_500, 1024, one(17_500, 25_600, 1)).unwrap();
        let fast = proportional_pause(&s, 17_500, 1024, one(17_500, 51_200, 1)).unwrap();
        let ratio = slow as f64 / fast as f64;
        assert!(ratio > 1.5, "{slow} vs {fast}");
        // Two dirtiers share the rate.
        let shared = proportional_pause(&s, 17_500, 1024, one(17_500, 25_600, 2)).unwrap();
        assert!(shared > slow);
        // Two contexts of half each: the one holding fewer pages goes faster.
        let half = |dirty| WbShare {
            dirty,
            fraction: 0.5,
            bandwidth: 25_600,
            dirtiers: 1,
        };
        let under = proportional_pause(&s, 17_500, 1024, half(5_000)).unwrap_or(0);
        let over = proportional_pause(&s, 17_500, 1024, half(12_500)).unwrap();
        assert!(under < over, "{under} vs {over}");
    }

    // Proves the bandwidth estimate follows what completes, a window at a time.
    #[test]
    fn bandwidth_follows_completions() {
        let mut wb = Wb::default();
        wb.touch(0);
        for step in 1..=50u64 {
            // 1000 pages per 100 ms: 10 000 pages/s.
            wb.completed(1000, step * 100_000_000);
        }
        assert!((9_000..=11_000).contains(&wb.bandwidth), "{}", wb.bandwidth);
        assert_eq!(wb.written, 50_000);
    }
}

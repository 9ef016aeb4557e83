//! The page cache: which pages of the device the host holds, as Linux's two LRU lists keep
//! them (mm/swap.c `folio_mark_accessed`, mm/vmscan.c `shrink_inactive_list` and
//! `shrink_active_list`), with one page per folio.
//!
//! A page read from the device is *locked* until its read completes, then *up to date*. A new
//! page starts on the inactive list; a page accessed twice while inactive (the first access
//! sets its referenced bit) moves to the active list. When the cache is over its capacity,
//! reclaim drops pages from the inactive list's tail (an unmapped clean page cache page is
//! reclaimed whatever its referenced bit, `folio_check_references`); when the inactive list is
//! smaller than the active one, the active list's tail moves to the inactive list first
//! (`inactive_is_low`, with a 1:1 ratio where Linux uses sqrt(10 x GiB of memory)). So a working set read twice survives a stream read once, which only ever sits
//! on the inactive list. Locked pages are on no list and are never reclaimed.
//!
//! Simplified: no workingset refault detection (shadow entries), no per-cgroup LRUs, and the
//! cache's capacity is the host's memory with nothing else using it.

use rustc_hash::FxHashMap;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Where {
    Locked,
    Inactive,
    Active,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    page: u64,
    prev: u32,
    next: u32,
    at: Where,
    referenced: bool,
    /// PG_readahead.
    mark: bool,
    /// PG_dirty: written by a task, not yet written back.
    dirty: bool,
    /// PG_writeback: a write of it to the device is in flight.
    writeback: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct List {
    head: u32,
    tail: u32,
    len: u64,
}

impl List {
    fn new() -> List {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

/// What the cache holds of one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageState {
    /// Its read has completed.
    pub uptodate: bool,
    /// It carries PG_readahead.
    pub mark: bool,
    /// It is dirty (PG_dirty).
    pub dirty: bool,
    /// It is being written back (PG_writeback).
    pub writeback: bool,
}

/// The page cache of one host.
#[derive(Clone, Debug)]
pub struct PageCache {
    capacity: u64,
    index: FxHashMap<u64, u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    inactive: List,
    active: List,
    /// Pages dropped to make room (counted for the report).
    pub evicted: u64,
    dirty: u64,
    writeback: u64,
}

impl PageCache {
    /// An empty cache of at most `capacity` pages (at least 1).
    pub fn new(capacity: u64) -> PageCache {
        PageCache {
            capacity: capacity.max(1),
            index: FxHashMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            inactive: List::new(),
            active: List::new(),
            evicted: 0,
            dirty: 0,
            writeback: 0,
        }
    }

    /// Most pages it keeps.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Pages held (locked ones too).
    pub fn len(&self) -> u64 {
        self.index.len() as u64
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// What it holds of `page`.
    pub fn get(&self, page: u64) -> Option<PageState> {
        let node = &self.nodes[*self.index.get(&page)? as usize];
        Some(PageState {
            uptodate: node.at != Where::Locked,
            mark: node.mark,
            dirty: node.dirty,
            writeback: node.writeback,
        })
    }

    /// Whether `page` is held (locked or up to date).
    pub fn contains(&self, page: u64) -> bool {
        self.index.contains_key(&page)
    }

    /// Adds `page`, locked for its read, with PG_readahead if `mark`. False if it was held.
    pub fn add_locked(&mut self, page: u64, mark: bool) -> bool {
        if self.index.contains_key(&page) {
            return false;
        }
        let node = Node {
            page,
            prev: NIL,
            next: NIL,
            at: Where::Locked,
            referenced: false,
            mark,
            dirty: false,
            writeback: false,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.index.insert(page, slot);
        true
    }

    /// `page`'s read completed: it is up to date, at the inactive list's head. Reclaims to
    /// capacity.
    pub fn unlock(&mut self, page: u64) {
        let Some(&slot) = self.index.get(&page) else {
            return;
        };
        if self.nodes[slot as usize].at != Where::Locked {
            return;
        }
        self.push_head(slot, Where::Inactive);
        self.reclaim();
    }

    /// A read touched `page` (`folio_mark_accessed`).
    pub fn access(&mut self, page: u64) {
        let Some(&slot) = self.index.get(&page) else {
            return;
        };
        let node = self.nodes[slot as usize];
        match (node.at, node.referenced) {
            (Where::Locked, _) => {}
            (Where::Inactive, true) => {
                self.unlink(slot);
                self.push_head(slot, Where::Active);
                self.nodes[slot as usize].referenced = false;
            }
            (_, false) => self.nodes[slot as usize].referenced = true,
            (Where::Active, true) => {}
        }
    }

    /// Clears `page`'s PG_readahead.
    pub fn clear_mark(&mut self, page: u64) {
        if let Some(&slot) = self.index.get(&page) {
            self.nodes[slot as usize].mark = false;
        }
    }

    /// A task wrote `page` whole (`generic_perform_write`): it is held, up to date and dirty
    /// (PG_dirty), and a write counts as an access. Returns whether it was clean before (a
    /// page being written back that is written again is dirty again, and stays under
    /// writeback). A page whose read is in flight is written over: its read completes into
    /// the new data, which the model does not distinguish.
    pub fn write(&mut self, page: u64) -> bool {
        if !self.index.contains_key(&page) {
            self.add_locked(page, false);
            let slot = self.index[&page];
            self.push_head(slot, Where::Inactive);
        }
        let slot = self.index[&page];
        let was_clean = !self.nodes[slot as usize].dirty;
        self.nodes[slot as usize].dirty = true;
        self.dirty += u64::from(was_clean);
        self.access(page);
        self.reclaim();
        was_clean
    }

    /// Writeback takes `page`: it is clean and under writeback (`folio_clear_dirty_for_io`,
    /// `folio_start_writeback`). False if it was not dirty or is already under writeback.
    pub fn start_writeback(&mut self, page: u64) -> bool {
        let Some(&slot) = self.index.get(&page) else {
            return false;
        };
        let node = &mut self.nodes[slot as usize];
        if !node.dirty || node.writeback {
            return false;
        }
        node.dirty = false;
        node.writeback = true;
        self.dirty -= 1;
        self.writeback += 1;
        true
    }

    /// The write of `page` completed (`folio_end_writeback`); it may be dirty again.
    pub fn end_writeback(&mut self, page: u64) {
        let Some(&slot) = self.index.get(&page) else {
            return;
        };
        let node = &mut self.nodes[slot as usize];
        if node.writeback {
            node.writeback = false;
            self.writeback -= 1;
            self.reclaim();
        }
    }

    /// Forgets that `page` is dirty: a direct write over it replaces its data on the device.
    /// Returns whether it was dirty.
    pub fn clean(&mut self, page: u64) -> bool {
        let Some(&slot) = self.index.get(&page) else {
            return false;
        };
        let node = &mut self.nodes[slot as usize];
        let was = node.dirty;
        node.dirty = false;
        self.dirty -= u64::from(was);
        was
    }

    /// Dirty pages held (NR_FILE_DIRTY).
    pub fn dirty_pages(&self) -> u64 {
        self.dirty
    }

    /// Pages under writeback (NR_WRITEBACK).
    pub fn writeback_pages(&self) -> u64 {
        self.writeback
    }

    /// Drops a locked `page` whose read failed.
    pub fn discard(&mut self, page: u64) {
        if let Some(&slot) = self.index.get(&page) {
            let node = self.nodes[slot as usize];
            if node.at == Where::Locked && node.dirty {
                // Written while its read was in flight: the data is the writer's.
                self.unlock(page);
            } else if node.at == Where::Locked {
                self.drop_slot(slot);
            }
        }
    }

    /// Drops the clean up-to-date pages in `[first, last]` (`invalidate_mapping_pages`:
    /// locked, dirty and writeback pages stay). Returns how many.
    pub fn invalidate(&mut self, first: u64, last: u64) -> u64 {
        let pages: Vec<u64> = if last - first < self.index.len() as u64 {
            (first..=last)
                .filter(|p| self.index.contains_key(p))
                .collect()
        } else {
            self.index
                .keys()
                .copied()
                .filter(|p| (first..=last).contains(p))
                .collect()
        };
        let mut dropped = 0;
        for page in pages {
            let slot = self.index[&page];
            let node = &self.nodes[slot as usize];
            if node.at != Where::Locked && !node.dirty && !node.writeback {
                self.unlink(slot);
                self.drop_slot(slot);
                dropped += 1;
            }
        }
        dropped
    }

    fn list(&mut self, at: Where) -> &mut List {
        match at {
            Where::Inactive => &mut self.inactive,
            Where::Active => &mut self.active,
            Where::Locked => unreachable!("locked pages are on no list"),
        }
    }

    fn push_head(&mut self, slot: u32, at: Where) {
        let head = self.list(at).head;
        {
            let node = &mut self.nodes[slot as usize];
            node.at = at;
            node.prev = NIL;
            node.next = head;
        }
        if head != NIL {
            self.nodes[head as usize].prev = slot;
        }
        let list = self.list(at);
        list.head = slot;
        if list.tail == NIL {
            list.tail = slot;
        }
        list.len += 1;
    }

    fn unlink(&mut self, slot: u32) {
        let node = self.nodes[slot as usize];
        if node.at == Where::Locked {
            return;
        }
        if node.prev != NIL {
            self.nodes[node.prev as usize].next = node.next;
        }
        if node.next != NIL {
            self.nodes[node.next as usize].prev = node.prev;
        }
        let list = self.list(node.at);
        if list.head == slot {
            list.head = node.next;
        }
        if list.tail == slot {
            list.tail = node.prev;
        }
        list.len -= 1;
        self.nodes[slot as usize].at = Where::Locked;
    }

    fn drop_slot(&mut self, slot: u32) {
        let page = self.nodes[slot as usize].page;
        self.index.remove(&page);
        self.free.push(slot);
    }

    /// Drops pages until the cache fits its capacity (or only locked, dirty and writeback
    /// pages are left). A dirty or writeback page at the inactive tail goes back to the head
    /// (`folio_rotate_reclaimable`: reclaim does not wait for writeback; the flusher and
    /// dirty throttling keep such pages a fraction of memory).
    fn reclaim(&mut self) {
        let mut rotations = 0;
        while self.len() > self.capacity
            && self.inactive.len + self.active.len > 0
            && rotations <= self.inactive.len + self.active.len
        {
            if self.inactive.len < self.active.len || self.inactive.len == 0 {
                // shrink_active_list: the active tail goes to the inactive head.
                let tail = self.active.tail;
                self.unlink(tail);
                self.push_head(tail, Where::Inactive);
                self.nodes[tail as usize].referenced = false;
                continue;
            }
            let tail = self.inactive.tail;
            self.unlink(tail);
            let node = self.nodes[tail as usize];
            if node.dirty || node.writeback {
                self.push_head(tail, Where::Inactive);
                rotations += 1;
                continue;
            }
            self.drop_slot(tail);
            self.evicted += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(cache: &mut PageCache, page: u64) {
        if !cache.contains(page) {
            cache.add_locked(page, false);
            cache.unlock(page);
        }
        cache.access(page);
    }

    // Proves the point of two lists: a working set read twice survives a stream read once
    // that is many times the cache's size; with one LRU list it would be wiped.
    #[test]
    fn a_stream_does_not_wipe_the_working_set() {
        let mut cache = PageCache::new(1000);
        for _ in 0..2 {
            for page in 0..400 {
                read(&mut cache, page);
            }
        }
        for page in 10_000..20_000 {
            read(&mut cache, page);
        }
        let kept = (0..400).filter(|&p| cache.contains(p)).count();
        assert_eq!(kept, 400);
        assert!(cache.len() <= 1000);
        assert!(cache.evicted >= 9_000);
    }

    // Proves locked pages are never reclaimed and are not up to date until unlocked, that
    // marks are kept and cleared, and that invalidation drops only up-to-date pages.
    #[test]
    fn locked_pages_marks_and_invalidation() {
        let mut cache = PageCache::new(2);
        for page in 0..5 {
            assert!(cache.add_locked(page, page == 3));
        }
        assert!(!cache.add_locked(3, false));
        assert_eq!(
            cache.get(3),
            Some(PageState {
                uptodate: false,
                mark: true,
                dirty: false,
                writeback: false,
            })
        );
        cache.clear_mark(3);
        assert_eq!(
            cache.get(3),
            Some(PageState {
                uptodate: false,
                mark: false,
                dirty: false,
                writeback: false,
            })
        );
        assert_eq!(cache.len(), 5, "locked pages stay though over capacity");
        // Unlocked while four others are locked: over capacity, it goes at once.
        cache.unlock(3);
        assert_eq!(cache.get(3), None);
        for page in [0, 1, 2, 4] {
            cache.unlock(page);
        }
        assert_eq!(cache.len(), 2);
        assert_eq!(
            cache.get(4),
            Some(PageState {
                uptodate: true,
                mark: false,
                dirty: false,
                writeback: false,
            })
        );
        cache.add_locked(9, false);
        assert_eq!(cache.invalidate(0, 100), 2);
        assert_eq!(cache.len(), 1);
        assert!(cache.contains(9));
    }

    // Proves dirty and writeback pages are never reclaimed or invalidated, and that a page
    // written during its writeback is dirty again after it.
    #[test]
    fn dirty_pages_stay_until_written_back() {
        let mut cache = PageCache::new(4);
        for page in 0..4 {
            assert!(cache.write(page));
        }
        assert!(!cache.write(0), "already dirty");
        assert_eq!(cache.dirty_pages(), 4);
        for page in 10..20 {
            read(&mut cache, page);
        }
        assert!((0..4).all(|p| cache.contains(p)), "dirty pages reclaimed");
        assert_eq!(cache.invalidate(0, 3), 0);
        assert!(cache.start_writeback(1));
        assert!(!cache.start_writeback(1));
        assert_eq!((cache.dirty_pages(), cache.writeback_pages()), (3, 1));
        assert!(cache.write(1), "clean while under writeback");
        cache.end_writeback(1);
        assert_eq!(
            cache.get(1).map(|s| (s.dirty, s.writeback)),
            Some((true, false))
        );
        assert!(cache.clean(2));
        cache.end_writeback(1);
        assert_eq!((cache.dirty_pages(), cache.writeback_pages()), (3, 0));
        // Clean now: the next reads reclaim it.
        for page in 20..30 {
            read(&mut cache, page);
        }
        assert!(!cache.contains(2));
        assert!(cache.contains(1) && cache.contains(3));
    }

    // Model test: against a plain set and a bound, any sequence of adds, unlocks, accesses
    // and invalidations keeps the index, the lists and the capacity consistent.
    #[test]
    fn the_lists_stay_consistent() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut cache = PageCache::new(64);
        let mut locked = std::collections::BTreeSet::new();
        for _ in 0..20_000 {
            let page = next() % 256;
            match next() % 4 {
                0 => {
                    if cache.add_locked(page, false) {
                        locked.insert(page);
                    }
                }
                1 => {
                    if let Some(&page) = locked.iter().next() {
                        locked.remove(&page);
                        cache.unlock(page);
                    }
                }
                2 => cache.access(page),
                _ => {
                    cache.invalidate(page, page + 3);
                }
            }
            let listed = cache.inactive.len + cache.active.len;
            assert_eq!(listed + locked.len() as u64, cache.len());
            assert!(listed <= 64 || locked.len() as u64 + 64 >= cache.len());
            for &page in &locked {
                assert_eq!(cache.get(page).map(|s| s.uptodate), Some(false));
            }
        }
    }
}

//! On-demand read-ahead, as Linux's mm/readahead.c decides it (`ondemand_readahead`,
//! `page_cache_sync_ra`, `page_cache_async_ra`, 6.x, with one page per folio).
//!
//! Each open file has a window `[start, start + size)` read ahead of the reader, whose last
//! `async_size` pages are still ahead of it; the page where they begin carries the
//! PG_readahead mark. A read that misses a page asks for a *synchronous* read-ahead; a read
//! that reaches the marked page asks for an *asynchronous* one, the next window, while the
//! reader goes on with the pages it has:
//!
//! - at the start of the file, after a read that ended where this one begins, or for a read
//!   larger than the window, the *initial* window: the request rounded up to a power of two
//!   and scaled up (x4 if small, x2 if medium, else the maximum, `get_init_ra_size`);
//! - at the mark, or right after the window, the *next* window: 4x, then 2x the last one, up
//!   to the maximum (`get_next_ra_size`);
//! - a read in a cached run of pages longer than it (`try_context_readahead`): a window the
//!   length of the run;
//! - anything else is random: only the pages asked for.
//!
//! The maximum is the file's `ra_pages` (`read_ahead_kb` over 4 KiB; twice that after
//! `POSIX_FADV_SEQUENTIAL`), or the request up to the device's largest I/O (`io_pages`) for a
//! larger request. `POSIX_FADV_RANDOM` (`FMODE_RANDOM`) turns it off: a miss reads the pages
//! asked for (`force_page_cache_ra`), and so does `read_ahead_kb=0` (one page).

/// Bytes per page.
pub const PAGE: u64 = 4096;

/// What `posix_fadvise` said of the file (fio's `fadvise_hint`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    /// `POSIX_FADV_NORMAL`: the device's read-ahead.
    Normal,
    /// `POSIX_FADV_SEQUENTIAL`: twice the device's read-ahead.
    Sequential,
    /// `POSIX_FADV_RANDOM`: none.
    Random,
}

/// Pages to read: `[start, start + pages)`, skipping those already cached; the page at `mark`
/// (if any) gets PG_readahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// First page.
    pub start: u64,
    /// How many pages.
    pub pages: u64,
    /// The page to mark.
    pub mark: Option<u64>,
}

/// One open file's read-ahead state (`struct file_ra_state`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaState {
    /// First page of the current window.
    pub start: u64,
    /// Its length in pages.
    pub size: u64,
    /// How many of its last pages are read ahead of the reader.
    pub async_size: u64,
    /// Largest window.
    pub ra_pages: u64,
    /// Where the last read ended (bytes), if there was one.
    pub prev_pos: Option<u64>,
    /// `FMODE_RANDOM`.
    random: bool,
    /// The device's largest request in pages (`bdi->io_pages`).
    io_pages: u64,
}

/// `get_init_ra_size`.
fn init_size(size: u64, max: u64) -> u64 {
    let size = size.max(1).next_power_of_two();
    if size <= max / 32 {
        size * 4
    } else if size <= max / 4 {
        size * 2
    } else {
        max
    }
}

/// `get_next_ra_size`.
fn next_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

impl RaState {
    /// A file opened on a device with `read_ahead_pages` of read-ahead and requests of up to
    /// `io_pages`, after `advice`.
    pub fn new(read_ahead_pages: u64, io_pages: u64, advice: Advice) -> RaState {
        RaState {
            start: 0,
            size: 0,
            async_size: 0,
            ra_pages: match advice {
                Advice::Sequential => read_ahead_pages * 2,
                _ => read_ahead_pages,
            },
            prev_pos: None,
            random: advice == Advice::Random,
            io_pages: io_pages.max(1),
        }
    }

    /// `page_cache_sync_ra`: a read of `req` pages found page `index` missing. `last` is the
    /// file's last page; `cached(p)` says whether page `p` is in the cache.
    pub fn sync(
        &mut self,
        index: u64,
        req: u64,
        last: u64,
        cached: impl Fn(u64) -> bool,
    ) -> Option<Window> {
        let mut req = req.max(1);
        if self.random || self.ra_pages == 0 {
            if self.ra_pages == 0 && !self.random {
                req = 1;
            }
            // force_page_cache_ra: what was asked, at most the larger of the two limits.
            let pages = req.min(self.io_pages.max(self.ra_pages));
            return clip(index, pages, None, last);
        }
        self.ondemand(index, req, false, last, cached)
    }

    /// `page_cache_async_ra`: the read of `req` pages from `index` reached the marked page
    /// `index`.
    pub fn on_mark(
        &mut self,
        index: u64,
        req: u64,
        last: u64,
        cached: impl Fn(u64) -> bool,
    ) -> Option<Window> {
        if self.ra_pages == 0 {
            return None;
        }
        self.ondemand(index, req.max(1), true, last, cached)
    }

    /// Notes that a read ended at byte `end` (`ra->prev_pos`).
    pub fn read_done(&mut self, end: u64) {
        self.prev_pos = Some(end);
    }

    fn ondemand(
        &mut self,
        index: u64,
        req: u64,
        at_mark: bool,
        last: u64,
        cached: impl Fn(u64) -> bool,
    ) -> Option<Window> {
        let mut max = self.ra_pages;
        if req > max && self.io_pages > max {
            max = req.min(self.io_pages);
        }
        let initial = if index == 0 {
            true
        } else if index == self.start + self.size - self.async_size
            || index == self.start + self.size
        {
            // Sequential: the next window.
            self.start += self.size;
            self.size = next_size(self.size, max);
            self.async_size = self.size;
            false
        } else if at_mark {
            // A marked page out of step (another reader's window): read on from the next
            // page not cached, if it is near.
            let start = (index + 1..=index + max).find(|&p| !cached(p))?;
            self.start = start;
            self.size = next_size(start - index + req, max);
            self.async_size = self.size;
            false
        } else if req > max
            || self
                .prev_pos
                .is_some_and(|pos| index.abs_diff(pos / PAGE) <= 1 && index >= pos / PAGE)
        {
            // A large read, or one right after the last: an initial window.
            true
        } else {
            // try_context_readahead: the cached run just before the read.
            let history = (1..=max.min(index))
                .take_while(|&back| cached(index - back))
                .count() as u64;
            if history <= req {
                // Random: only what was asked.
                return clip(index, req, None, last);
            }
            let size = if history >= index {
                history * 2
            } else {
                history
            };
            self.start = index;
            self.size = (size + req).min(max);
            self.async_size = 1;
            false
        };
        if initial {
            self.start = index;
            self.size = init_size(req, max);
            self.async_size = if self.size > req {
                self.size - req
            } else {
                self.size
            };
        }
        // readit: a window read wholly ahead grows at once by the next one.
        if index == self.start && self.size == self.async_size {
            let add = next_size(self.size, max);
            if self.size + add <= max {
                self.async_size = add;
                self.size += add;
            } else {
                self.size = max;
                self.async_size = max >> 1;
            }
        }
        let mark = (self.async_size > 0).then(|| self.start + self.size - self.async_size);
        clip(self.start, self.size, mark, last)
    }
}

/// The window cut at the file's last page (`do_page_cache_ra`).
fn clip(start: u64, pages: u64, mark: Option<u64>, last: u64) -> Option<Window> {
    if start > last || pages == 0 {
        return None;
    }
    let pages = pages.min(last - start + 1);
    Some(Window {
        start,
        pages,
        mark: mark.filter(|&m| m < start + pages),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAST: u64 = 1 << 30;

    // Proves Linux's window sizes for a sequential reader of 4 KiB (one page) with 128 KiB
    // of read-ahead (32 pages): 4 pages at the start (1 rounded, x4), marked at page 1; each
    // mark then brings the next window, read wholly ahead: twice as large, up to 32.
    #[test]
    fn a_sequential_reader_ramps_up_to_ra_pages() {
        let mut ra = RaState::new(32, 320, Advice::Normal);
        let none = |_| false;
        assert_eq!(
            ra.sync(0, 1, LAST, none),
            Some(Window {
                start: 0,
                pages: 4,
                mark: Some(1)
            })
        );
        // Page 1 is marked: the next window, 2 x 4 = 8 pages from 4, read wholly ahead.
        assert_eq!(
            ra.on_mark(1, 1, LAST, none),
            Some(Window {
                start: 4,
                pages: 8,
                mark: Some(4)
            })
        );
        assert_eq!(
            ra.on_mark(4, 1, LAST, none),
            Some(Window {
                start: 12,
                pages: 16,
                mark: Some(12)
            })
        );
        assert_eq!(
            ra.on_mark(12, 1, LAST, none),
            Some(Window {
                start: 28,
                pages: 32,
                mark: Some(28)
            })
        );
        assert_eq!(
            ra.on_mark(28, 1, LAST, none),
            Some(Window {
                start: 60,
                pages: 32,
                mark: Some(60)
            })
        );
    }

    // Proves the other rules: a read right after the last one reads an initial window; a read
    // elsewhere with no cached run before it reads only its pages; one inside a long cached run
    // reads a window the run's length; fadvise RANDOM and read_ahead_kb=0 read what is asked
    // (one page for the latter); SEQUENTIAL doubles the maximum; a window stops at the file's
    // end.
    #[test]
    fn initial_random_context_and_advice() {
        let none = |_| false;
        let mut ra = RaState::new(32, 320, Advice::Normal);
        ra.read_done(100 * PAGE);
        assert_eq!(ra.sync(100, 2, LAST, none).unwrap().pages, 4, "2 pages: x2");
        let mut ra = RaState::new(32, 320, Advice::Normal);
        ra.read_done(PAGE);
        assert_eq!(
            ra.sync(500, 2, LAST, none),
            Some(Window {
                start: 500,
                pages: 2,
                mark: None
            })
        );
        let cached_before = |p: u64| (490..500).contains(&p);
        let window = ra.sync(500, 2, LAST, cached_before).unwrap();
        assert_eq!(
            (window.start, window.pages),
            (500, 12),
            "10 cached + 2 asked"
        );
        let mut ra = RaState::new(32, 320, Advice::Random);
        assert_eq!(ra.sync(0, 3, LAST, none).unwrap().pages, 3);
        let mut ra = RaState::new(0, 320, Advice::Normal);
        assert_eq!(ra.sync(0, 3, LAST, none).unwrap().pages, 1);
        assert_eq!(ra.on_mark(0, 3, LAST, none), None);
        let mut ra = RaState::new(32, 320, Advice::Sequential);
        assert_eq!(
            ra.sync(0, 16, LAST, none).unwrap().pages,
            32,
            "16 of 64: x2"
        );
        let mut ra = RaState::new(32, 320, Advice::Normal);
        assert_eq!(
            ra.sync(0, 1, 2, none).unwrap().pages,
            3,
            "the file has pages 0..=2"
        );
        // A read larger than the window may read up to the device's largest request.
        let mut ra = RaState::new(32, 320, Advice::Normal);
        assert_eq!(ra.sync(0, 64, LAST, none).unwrap().pages, 64);
    }
}

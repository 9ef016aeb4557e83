//! Buffered writes through the page cache: dirtying, the flushers, dirty throttling, fsync
//! and O_SYNC (the rules are `host::writeback`'s; this is their wiring into the event loop).
//!
//! A buffered write (`generic_perform_write`) dirties its pages and completes at memory speed
//! unless `balance_dirty_pages` holds it. Dirty pages are written back by a *writer*: a
//! flusher per writeback context (the device's, or each cgroup's with `cgroup_writeback`),
//! in the root cgroup with no I/O priority, or with cgroup writeback in the cgroup that
//! dirtied them; or, under the 2.6.x throttle, by the throttled task itself, in its own
//! context (flow, cgroup, priority), from any inode. A writer submits one request at a time
//! and stops while the elevator keeps it waiting, as a task blocked in request allocation
//! does. Writeback requests are asynchronous; fsync's and O_SYNC's are synchronous (plain
//! writes with `sync_write_flag=0`, as 2.6.19-2.6.28 sent them) and are followed by a flush.
//! Writers take no new work once every job is done: the run ends as fio's does, with what is
//! still dirty left in memory.

use super::*;
use iosched_fio::SyncFileRange;

/// `sync_writeback_pages`: the chunk a throttled 2.6.x task writes out.
const WRITE_CHUNK: u64 = writeback::RATELIMIT_PAGES + writeback::RATELIMIT_PAGES / 2;

impl Simulation {
    /// The writeback context of job `index`'s dirty pages.
    fn wb_of(&self, index: usize) -> u32 {
        if self.cgroup_writeback {
            self.own[index].group.0
        } else {
            0
        }
    }

    /// The inode (its first device page) of the file of job `index` that holds `page`.
    fn inode_of(&self, index: usize, page: u64) -> u64 {
        let byte = page * PAGE;
        self.own[index]
            .regions
            .iter()
            .find(|r| r.start <= byte && byte < r.start + r.len.max(1))
            .map_or(0, |r| r.start / PAGE)
    }

    /// The inode holding device `page`, from any job's files (a failed writeback's page).
    fn inode_at(&self, page: u64) -> u64 {
        let byte = page * PAGE;
        self.own
            .iter()
            .flat_map(|own| own.regions.iter())
            .find(|r| r.start <= byte && byte < r.start + r.len.max(1))
            .map_or(0, |r| r.start / PAGE)
    }

    /// Whether buffered writes of job `index` go through the page cache.
    pub(super) fn writes_buffered(&self, index: usize) -> bool {
        self.writeback_on && !self.jobs[index].spec.direct
    }

    /// Records every page's versions, for [`Simulation::unwritten_pages`].
    pub fn track_pages(&mut self) {
        self.versions = Some(FxHashMap::default());
    }

    /// Pages whose latest written data is not on the device (needs [`Self::track_pages`]).
    pub fn unwritten_pages(&self) -> Vec<u64> {
        let mut pages: Vec<u64> = self
            .versions
            .iter()
            .flat_map(|v| v.iter())
            .filter(|(_, (latest, on_device))| latest != on_device)
            .map(|(&page, _)| page)
            .collect();
        pages.sort_unstable();
        pages
    }

    /// A buffered write of job `index` (`generic_perform_write`): its pages are dirty, and it
    /// completes at memory speed unless the dirty throttle holds it.
    pub(super) fn buffered_write(&mut self, index: usize, io: NextIo, prio: IoPrio) {
        let first = io.offset / PAGE;
        let last = (io.offset + io.len.max(1) - 1) / PAGE;
        let wb = self.wb_of(index);
        for page in first..=last {
            if let Some(versions) = &mut self.versions {
                versions.entry(page).or_insert((0, 0)).0 += 1;
            }
            if self.cache.write(page) && !self.dirty_at.contains_key(&page) {
                let inode = self.inode_of(index, page);
                let now = self.now;
                let context = self.wbs.entry(wb).or_default();
                let first_dirty = context.dirty() == 0;
                if first_dirty {
                    context.touch(now);
                }
                context.add(inode, page, now);
                if first_dirty {
                    self.flusher(wb);
                }
                self.dirty_at.insert(
                    page,
                    Dirt {
                        wb,
                        inode,
                        job: index,
                    },
                );
            }
        }
        let pages = last - first + 1;
        self.wb_counters.pages_dirtied += pages;
        let issued = Issued::io(index, &io, prio, self.now);
        self.schedule_kupdate();
        if self.jobs[index].spec.sync_writes {
            // O_SYNC: generic_write_sync writes the range back, waits, and flushes.
            self.start_sync(index, issued, (first, last));
            return;
        }
        let id = self.copy_record(issued);
        let copy = CACHE_HIT_NS + io.len / COPY_BYTES_PER_NS;
        self.throttles[index].dirtied += pages;
        self.throttles[index].recent += pages;
        self.recent_dirtied += pages;
        if self.recent_dirtied > self.wb_settings.thresholds().1 {
            self.recent_dirtied /= 2;
            for throttle in &mut self.throttles {
                throttle.recent /= 2;
            }
        }
        match self.wb_settings.throttle {
            Throttle::Proportional => {
                let dirty = self.cache.dirty_pages() + self.cache.writeback_pages();
                // Its context exists even when every page it wrote was dirty in another's.
                self.wbs.entry(wb).or_default();
                let context = &self.wbs[&wb];
                let total: u64 = self.wbs.values().map(|c| c.recent).sum();
                let share = writeback::WbShare {
                    dirty: context.dirty() + context.writeback,
                    fraction: if total == 0 {
                        1.0 / self.wbs.len() as f64
                    } else {
                        context.recent as f64 / total as f64
                    },
                    bandwidth: context.bandwidth,
                    dirtiers: self.dirtiers.get(&wb).copied().unwrap_or(1),
                };
                let pause = writeback::proportional_pause(
                    &self.wb_settings,
                    dirty,
                    self.throttles[index].dirtied,
                    share,
                );
                if let Some(pause) = pause {
                    self.throttles[index].dirtied = 0;
                    self.wb_counters.throttle_pauses += 1;
                    self.wb_counters.throttle_ns += pause;
                }
                self.events
                    .push(self.now + copy + pause.unwrap_or(0), Event::CacheDone(id));
            }
            Throttle::Legacy => {
                let ratelimit = if self.dirty_exceeded {
                    writeback::RATELIMIT_EXCEEDED
                } else {
                    writeback::RATELIMIT_PAGES
                };
                if self.throttles[index].dirtied >= ratelimit {
                    self.throttles[index].dirtied = 0;
                    self.throttles[index].held = Some(id);
                    self.throttles[index].written = 0;
                    self.legacy_balance(index);
                } else {
                    self.events.push(self.now + copy, Event::CacheDone(id));
                }
            }
        }
        self.pump_writers();
    }

    /// One turn of 2.6.32's `balance_dirty_pages` loop for job `index`, whose write is held.
    /// Its limit is the device's less up to an eighth by its share of what was dirtied
    /// lately (`task_dirty_limit`), so the heaviest dirtier is throttled first.
    fn legacy_balance(&mut self, index: usize) {
        let (background, global) = self.wb_settings.thresholds();
        let share = self.throttles[index].recent as f64 / self.recent_dirtied.max(1) as f64;
        let limit = global - (global as f64 / 8.0 * share.min(1.0)) as u64;
        let dirty = self.cache.dirty_pages();
        let total = dirty + self.cache.writeback_pages();
        let state = self.throttles[index];
        let done = total <= limit
            || total < (background + global) / 2
            || state.written >= WRITE_CHUNK
            || (state.written > 0 && dirty == 0);
        if done {
            if total < global {
                self.dirty_exceeded = false;
            }
            let throttle = &mut self.throttles[index];
            throttle.congestion = None;
            if let Some(id) = throttle.held.take() {
                let bytes = self.cache_reads[&id].issued.bytes;
                let at = self.now + CACHE_HIT_NS + bytes / COPY_BYTES_PER_NS;
                self.events.push(at, Event::CacheDone(id));
            }
            return;
        }
        self.dirty_exceeded = true;
        if dirty > limit && state.written < WRITE_CHUNK {
            // writeback_inodes_wbc: the task writes out pages of any inode, itself.
            self.wb_counters.throttle_pauses += 1;
            self.throttles[index].writing = true;
            let writer = self.job_writer(index, WriterKind::Throttle);
            self.writers[writer].budget = WRITE_CHUNK - state.written;
            self.pump_writer(writer);
            return;
        }
        self.congestion_wait(index);
    }

    /// Job `index` sleeps in congestion_wait: until a writeback completion with the queue
    /// below its congestion threshold, or 100 ms.
    fn congestion_wait(&mut self, index: usize) {
        self.wb_counters.congestion_waits += 1;
        let generation = self.throttles[index].congestion.map_or(0, |g| g + 1);
        self.throttles[index].congestion = Some(generation);
        self.events.push(
            self.now + writeback::CONGESTION_WAIT,
            Event::Congestion(index as u32, generation),
        );
    }

    /// A congestion_wait's timeout.
    pub(super) fn congestion_timeout(&mut self, index: usize, generation: u64) {
        if self.throttles[index].congestion == Some(generation) {
            self.throttles[index].congestion = None;
            self.legacy_balance(index);
        }
    }

    /// Job `index`'s writer of `kind` (made on first use): in its flow, cgroup and
    /// priority.
    fn job_writer(&mut self, index: usize, kind: WriterKind) -> usize {
        if let Some(found) = self
            .writers
            .iter()
            .position(|w| w.job == Some(index) && w.kind == kind)
        {
            return found;
        }
        let wb = self.wb_of(index);
        let prio = self.job_prio(index);
        self.writers.push(Writer {
            wb,
            flow: self.own[index].flow,
            group: self.own[index].group,
            prio,
            job: Some(index),
            kind,
            budget: 0,
            pending: VecDeque::new(),
            waiting: None,
        });
        self.writers.len() - 1
    }

    /// The flusher of context `wb` (made on first use): a kernel thread with no I/O priority
    /// (the best-effort class at level 4), in the root cgroup, or in the cgroup of the
    /// context with cgroup writeback.
    fn flusher(&mut self, wb: u32) -> usize {
        if let Some(found) = self
            .writers
            .iter()
            .position(|w| w.job.is_none() && w.wb == wb)
        {
            return found;
        }
        let group = if self.cgroup_writeback {
            GroupId(wb)
        } else {
            GroupId::ROOT
        };
        self.writers.push(Writer {
            wb,
            flow: FlowId(self.jobs.len() as u32 + wb),
            group,
            prio: IoPrio::default(),
            job: None,
            kind: WriterKind::Flusher,
            budget: u64::MAX,
            pending: VecDeque::new(),
            waiting: None,
        });
        self.writers.len() - 1
    }

    /// Lets every writer with work and room submit: the flushers of contexts with dirty
    /// pages or work in hand, and the throttled tasks writing out.
    pub(super) fn pump_writers(&mut self) {
        // Every context with dirty pages has its flusher: made when it got its first.
        for writer in 0..self.writers.len() {
            let active = match (self.writers[writer].kind, self.writers[writer].job) {
                (WriterKind::Throttle, Some(job)) => self.throttles[job].writing,
                (WriterKind::Task, job) => {
                    let w = &self.writers[writer];
                    !w.pending.is_empty()
                        || w.waiting.is_some()
                        || job.is_some_and(|job| self.throttles[job].deferred.is_some())
                }
                _ => {
                    let w = &self.writers[writer];
                    !w.pending.is_empty() || self.wbs.get(&w.wb).is_some_and(|c| c.dirty() > 0)
                }
            };
            if active {
                self.pump_writer(writer);
            }
        }
    }

    /// Whether the request queue is congested (`blk_queue_congestion_threshold`: seven
    /// eighths of nr_requests in use).
    fn congested(&self) -> bool {
        self.elevator.queued() + self.elevator.in_flight() + self.blocked.len()
            >= self.elevator.nr_requests() as usize * 7 / 8
    }

    /// Whether the jobs still run (writers take new work only then).
    fn jobs_running(&self) -> bool {
        self.jobs.iter().any(|run| run.phase != Phase::Done)
    }

    /// Writer `w` submits while the elevator takes its requests and it has work.
    fn pump_writer(&mut self, w: usize) {
        loop {
            if let Some(id) = self.writers[w].waiting {
                if self.ios.get(&id).is_some_and(|io| !io.admitted) {
                    return;
                }
                self.writers[w].waiting = None;
            }
            if self.writers[w].kind == WriterKind::Flusher
                && self.wb_settings.throttle == Throttle::Legacy
                && self.congested()
            {
                // 2.6.x background writeback is non-blocking: at a congested queue it
                // backs off (`encountered_congestion`) until a write completes.
                return;
            }
            if self.writers[w].pending.is_empty() && !self.take_work(w) {
                let (kind, job) = (self.writers[w].kind, self.writers[w].job);
                if let (WriterKind::Task, Some(job)) = (kind, job) {
                    // Its pages are submitted: its sync_file_range calls return and the I/O
                    // after its fadvise goes.
                    for id in self.range_submits.remove(&job).unwrap_or_default() {
                        self.sync_progress(id, 1);
                    }
                    if let Some((io, prio)) = self.throttles[job].deferred.take() {
                        self.submit_io_now(job, io, prio);
                    }
                } else if let Some(job) = job {
                    // The task wrote what it could: back to its balance loop.
                    if self.throttles[job].writing {
                        self.throttles[job].writing = false;
                        if self.throttles[job].written < WRITE_CHUNK {
                            self.congestion_wait(job);
                        } else {
                            self.legacy_balance(job);
                        }
                    }
                }
                return;
            }
            let writer = &mut self.writers[w];
            // One request: the longest run of consecutive pages, at most max_sectors_kb.
            let (first, owner, sync) = writer.pending.pop_front().expect("work");
            let mut pages = 1;
            while pages < self.io_pages
                && writer
                    .pending
                    .front()
                    .is_some_and(|p| p.0 == first + pages && p.2 == sync)
            {
                writer.pending.pop_front();
                pages += 1;
            }
            let (wb, flow, group, mut prio, job, kind) = (
                writer.wb,
                writer.flow,
                writer.group,
                writer.prio,
                writer.job,
                writer.kind,
            );
            if job.is_none() && self.page_ioprio && owner < self.jobs.len() {
                // Seed 000's prototype: the priority of the task that dirtied the page.
                prio = self.job_prio(owner);
            }
            match (kind, job) {
                (WriterKind::Throttle, Some(job)) => {
                    self.throttles[job].written += pages;
                    self.wb_counters.task_writeout_pages += pages;
                }
                (WriterKind::Flusher, _) => self.wb_counters.flusher_pages += pages,
                _ => {}
            }
            let id = self.issue_writeback(
                job.unwrap_or(usize::MAX),
                (flow, group, prio),
                (first, pages),
                (wb, owner),
                sync,
            );
            if self.ios.get(&id).is_some_and(|io| !io.admitted) {
                self.writers[w].waiting = Some(id);
                return;
            }
        }
    }

    /// Gives writer `w` its next chunk; false when it has none.
    fn take_work(&mut self, w: usize) -> bool {
        let writer = &self.writers[w];
        let (wb, budget, task) = (writer.wb, writer.budget, writer.job.is_some());
        if budget == 0 || !self.jobs_running() {
            return false;
        }
        let (background, _) = self.wb_settings.thresholds();
        let cutoff = if task || self.cache.dirty_pages() > background {
            None
        } else {
            match self.kupdate.get(&wb) {
                Some(&cutoff) => Some(cutoff),
                None => return false,
            }
        };
        let Some(context) = self.wbs.get_mut(&wb) else {
            return false;
        };
        let cache = &self.cache;
        let chunk =
            context.next_chunk(writeback::MAX_WRITEBACK_PAGES.min(budget), cutoff, |page| {
                cache.get(page).is_some_and(|s| s.dirty && !s.writeback)
            });
        let Some((_, pages)) = chunk else {
            self.kupdate.remove(&wb);
            return false;
        };
        let mut taken = Vec::with_capacity(pages.len());
        for page in pages {
            let dirt = self.dirty_at.remove(&page).expect("a dirty page");
            self.start_writeback(page);
            taken.push((page, dirt.job, false));
        }
        let writer = &mut self.writers[w];
        if writer.job.is_some() {
            writer.budget -= taken.len() as u64;
        }
        writer.pending.extend(taken);
        true
    }

    /// Issues a write of pages `[first, first + pages)` (dirty, taken from their context)
    /// for `job` (usize::MAX: a flusher) in the given (flow, cgroup, priority); synchronous
    /// for fsync and O_SYNC. Returns its request id.
    fn issue_writeback(
        &mut self,
        job: usize,
        (flow, group, prio): (FlowId, GroupId, IoPrio),
        (first, pages): (u64, u64),
        (wb, owner): (u32, usize),
        sync: bool,
    ) -> u64 {
        self.wbs.entry(wb).or_default().writeback += pages;
        let id = RequestId(self.next_request_id);
        self.next_request_id += 1;
        let request = Request::new(
            id,
            Op::Write,
            first * PAGE,
            pages * PAGE,
            sync,
            prio,
            flow,
            group,
            self.now,
        );
        let issued = Issued {
            job,
            dir: DataDir::Write,
            flush: false,
            bytes: pages * PAGE,
            offset: first * PAGE,
            file: 0,
            prio,
            created: self.now,
            admitted: self.now,
        };
        self.ios.insert(
            id.0,
            Io {
                writeback: Some(WbIo {
                    first,
                    pages,
                    wb,
                    owner,
                }),
                ..Io::new(issued, sync)
            },
        );
        self.issued_total += 1;
        self.submit(request);
        id.0
    }

    /// A write of cached pages completed at `at`: they are clean (unless written again), the
    /// context's bandwidth moves, fsyncs waiting for them go on, and writers go on.
    pub(super) fn written_back(&mut self, io: WbIo, at: Nanos, error: Option<i32>) {
        let mut redo = Vec::new();
        for page in io.first..io.first + io.pages {
            self.cache.end_writeback(page);
            self.under_writeback.remove(&page);
            if let Some(version) = self.carried.remove(&page) {
                if let (Some(versions), None) = (&mut self.versions, error) {
                    let entry = versions.entry(page).or_insert((0, 0));
                    entry.1 = entry.1.max(version);
                }
            }
            if error.is_some() {
                // AS_EIO: the page stays dirty, to be written again (the kernel keeps it
                // dirty only for some file systems; here always, so nothing is lost).
                if self.cache.write(page) && !self.dirty_at.contains_key(&page) {
                    let inode = self.inode_at(page);
                    self.wbs.entry(io.wb).or_default().add(inode, page, at);
                    self.flusher(io.wb);
                    let dirt = Dirt {
                        wb: io.wb,
                        inode,
                        job: io.owner,
                    };
                    self.dirty_at.insert(page, dirt);
                }
            }
            for (sync, again) in self.sync_waiters.remove(&page).unwrap_or_default() {
                if again && self.cache.get(page).is_some_and(|s| s.dirty) {
                    redo.push((sync, page));
                } else {
                    self.sync_progress(sync, 1);
                }
            }
        }
        self.wb_counters.pages_written_back += io.pages;
        self.wbs.entry(io.wb).or_default().completed(io.pages, at);
        // The period of the completion fractions: halve them all every dirty limit's worth.
        let total: u64 = self.wbs.values().map(|c| c.recent).sum();
        if total > self.wb_settings.thresholds().1 {
            for context in self.wbs.values_mut() {
                context.recent /= 2;
            }
        }
        for (sync, page) in redo {
            if self.claim(page) {
                self.sync_write_pages(sync, vec![page]);
            } else {
                self.sync_progress(sync, 1);
            }
        }
        // clear_bdi_congested: sleepers in congestion_wait wake once the queue is below its
        // congestion threshold.
        if !self.congested() {
            for index in 0..self.throttles.len() {
                if self.throttles[index].congestion.is_some() {
                    self.throttles[index].congestion = None;
                    self.legacy_balance(index);
                }
            }
        }
        self.pump_writers();
    }

    /// Starts an O_SYNC write's sync of pages `[first, last]` of job `index`
    /// (`generic_write_sync`): the range's dirty pages are written synchronously in the job's
    /// context, it waits for them and for those already under writeback, then a flush; the
    /// write (`issued`) completes with the flush.
    fn start_sync(&mut self, index: usize, issued: Issued, (first, last): (u64, u64)) {
        let id = self.new_sync(index, issued);
        self.sync_range(id, first, last, None);
        // The placeholder taken at the start.
        self.sync_progress(id, 1);
    }

    /// A new sync of job `index` completing as `issued`, holding one placeholder page that
    /// its starter releases (`sync_progress(id, 1)`) once every page is counted.
    fn new_sync(&mut self, index: usize, issued: Issued) -> u64 {
        let id = self.next_sync;
        self.next_sync += 1;
        self.syncs.insert(
            id,
            SyncWait {
                issued,
                pending: 1,
                job: index,
                flush: true,
            },
        );
        id
    }

    /// Adds pages `[first, last]` to sync `id`: it waits for those under writeback (and
    /// writes them again if dirty again), and writes the dirty ones, of inode `inode` only
    /// when given (fsync takes a whole inode; O_SYNC a range).
    fn sync_range(&mut self, id: u64, first: u64, last: u64, inode: Option<u64>) {
        // Pages under writeback: wait for them; one dirty again by then is written again
        // (`redo` in `written_back`). Those stay in their contexts meanwhile.
        let busy: Vec<u64> = self.under_writeback.range(first..=last).copied().collect();
        let mut count = busy.len() as u64;
        for page in busy {
            self.sync_waiters.entry(page).or_default().push((id, true));
        }
        let candidates: Vec<u64> = match inode {
            Some(inode) => {
                let mut pages = Vec::new();
                for context in self.wbs.values() {
                    pages.extend(context.pages_of(inode));
                }
                pages
            }
            None => (first..=last)
                .filter(|page| self.dirty_at.contains_key(page))
                .collect(),
        };
        let mut pages = Vec::with_capacity(candidates.len());
        for page in candidates {
            // claim() leaves a page under writeback where it is.
            if self.claim(page) {
                pages.push(page);
            }
        }
        pages.sort_unstable();
        pages.dedup();
        count += pages.len() as u64;
        self.syncs.get_mut(&id).expect("a waiting sync").pending += count;
        if !pages.is_empty() {
            self.sync_write_pages(id, pages);
        }
    }

    /// Takes dirty `page` out of its context for a write; false if it is not dirty or is
    /// under writeback (then it stays where it is).
    fn claim(&mut self, page: u64) -> bool {
        if !self
            .cache
            .get(page)
            .is_some_and(|s| s.dirty && !s.writeback)
        {
            return false;
        }
        if let Some(dirt) = self.dirty_at.remove(&page) {
            if let Some(context) = self.wbs.get_mut(&dirt.wb) {
                context.remove(dirt.inode, page);
            }
        }
        self.start_writeback(page);
        true
    }

    /// Dirty `page`, taken for a write, is under writeback from now on
    /// (`folio_clear_dirty_for_io`, `folio_start_writeback`): a write of it after this is
    /// dirty again, and fsync waits for it.
    fn start_writeback(&mut self, page: u64) {
        let started = self.cache.start_writeback(page);
        debug_assert!(started, "page {page} was dirty and not under writeback");
        self.under_writeback.insert(page);
        if let Some(versions) = &self.versions {
            let latest = versions.get(&page).map_or(0, |v| v.0);
            self.carried.insert(page, latest);
        }
    }

    /// Writes `pages` (sorted, taken from their contexts) for sync `id`, synchronously, in
    /// its job's context; each page is one the sync waits for.
    fn sync_write_pages(&mut self, id: u64, pages: Vec<u64>) {
        let index = self.syncs[&id].job;
        for &page in &pages {
            self.sync_waiters.entry(page).or_default().push((id, false));
        }
        self.wb_counters.sync_pages += pages.len() as u64;
        // WB_SYNC_ALL writes are REQ_SYNC (wbc_to_write_flags), plain with
        // sync_write_flag=0 (2.6.19-2.6.28).
        let sync = self.sync_write_flag;
        let writer = self.job_writer(index, WriterKind::Task);
        self.writers[writer]
            .pending
            .extend(pages.into_iter().map(|page| (page, index, sync)));
        self.pump_writer(writer);
    }

    /// `pages` of sync `id` are on the device: when none is left, its flush goes.
    fn sync_progress(&mut self, id: u64, pages: u64) {
        let sync = self.syncs.get_mut(&id).expect("a waiting sync");
        sync.pending -= pages;
        if sync.pending > 0 {
            return;
        }
        let sync = self.syncs.remove(&id).expect("a waiting sync");
        if sync.flush {
            self.submit_flush_for(sync.job, sync.issued);
        } else {
            self.complete_now(sync.issued);
        }
    }

    /// `issued`, which needs no I/O of its own, completes now.
    fn complete_now(&mut self, issued: Issued) {
        let id = self.copy_record(issued);
        self.events.push(self.now, Event::CacheDone(id));
    }

    /// A record for `issued` that waits for no page (a buffered write's copy, a call that
    /// completes without I/O): its `cache_reads` id, for an `Event::CacheDone`.
    pub(super) fn copy_record(&mut self, issued: Issued) -> u64 {
        let id = self.next_cache_read;
        self.next_cache_read += 1;
        self.cache_reads.insert(
            id,
            CacheRead {
                issued,
                missing: 0,
                error: None,
            },
        );
        id
    }

    /// sync_file_range(2) of job `index` with `flags` (fs/sync.c `sync_file_range`) over the
    /// pages it wrote in the file it wrote last since that file's last call (fio's range):
    /// with SYNC_FILE_RANGE_WAIT_BEFORE it waits for the range's pages already under
    /// writeback (with all three flags writing again those dirty again by then, as fsync
    /// does; with fewer, such a page is left to the flusher); with WRITE it starts
    /// writeback of the range's dirty pages in its own context, asynchronous
    /// (`__filemap_fdatawrite_range` with WB_SYNC_NONE) unless all three flags ask for
    /// WB_SYNC_ALL (then REQ_SYNC as fsync's, by `sync_write_flag`); with WAIT_AFTER it waits
    /// for every page of the range under writeback, those it started included. Without
    /// WAIT_AFTER a WRITE returns once its writes are submitted. No cache flush follows: the
    /// call makes no promise about the device's cache.
    /// Returns whether a call is in flight: none when nothing was written since the last
    /// (fio's do_sync_file_range returns at once).
    pub(super) fn sync_file_range(&mut self, index: usize, flags: u32) -> bool {
        let issued = Issued::flush(index, self.job_prio(index), self.now);
        let own = &mut self.own[index];
        let file = own.last_write_file;
        let Some((first, last)) = own.written.get_mut(file).and_then(Option::take) else {
            return false;
        };
        let (before, write, after) = (
            flags & SyncFileRange::WAIT_BEFORE != 0,
            flags & SyncFileRange::WRITE != 0,
            flags & SyncFileRange::WAIT_AFTER != 0,
        );
        let id = self.new_sync(index, issued);
        self.syncs.get_mut(&id).expect("just made").flush = false;
        let mut count = 0;
        if before || after {
            let busy: Vec<u64> = self.under_writeback.range(first..=last).copied().collect();
            count += busy.len() as u64;
            for page in busy {
                self.sync_waiters
                    .entry(page)
                    .or_default()
                    .push((id, before && write && after));
            }
        }
        if write {
            let candidates: Vec<u64> = (first..=last)
                .filter(|page| self.dirty_at.contains_key(page))
                .collect();
            let mut pages = Vec::with_capacity(candidates.len());
            for page in candidates {
                if self.claim(page) {
                    pages.push(page);
                }
            }
            if !pages.is_empty() {
                let all =
                    SyncFileRange::WAIT_BEFORE | SyncFileRange::WRITE | SyncFileRange::WAIT_AFTER;
                let sync = flags & all == all && self.sync_write_flag;
                if after {
                    count += pages.len() as u64;
                    for &page in &pages {
                        self.sync_waiters.entry(page).or_default().push((id, false));
                    }
                } else {
                    // Returns when the task has submitted them.
                    count += 1;
                    self.range_submits.entry(index).or_default().push(id);
                }
                self.wb_counters.sync_pages += pages.len() as u64;
                let writer = self.job_writer(index, WriterKind::Task);
                self.writers[writer]
                    .pending
                    .extend(pages.into_iter().map(|page| (page, index, sync)));
                self.syncs.get_mut(&id).expect("waiting").pending += count;
                self.pump_writer(writer);
                self.sync_progress(id, 1);
                return true;
            }
        }
        self.syncs.get_mut(&id).expect("waiting").pending += count;
        self.sync_progress(id, 1);
        true
    }

    /// fsync of job `index` (`fsync=`, `end_fsync`) when its writes are buffered: every
    /// file's dirty pages, then one flush, counted as one operation.
    pub(super) fn buffered_fsync(&mut self, index: usize) {
        let issued = Issued::flush(index, self.job_prio(index), self.now);
        // One sync over every file: a placeholder page keeps it from completing until every
        // file's pages are counted.
        let id = self.new_sync(index, issued);
        for (first, last) in self.file_pages(index) {
            self.sync_range(id, first, last, Some(first));
        }
        // The placeholder taken at the start.
        self.sync_progress(id, 1);
    }

    /// A direct write or trim of pages `[first, last]`: dirty pages there are superseded
    /// (the kernel writes them back first, `filemap_write_and_wait_range`, then the direct
    /// write replaces them; here they are dropped, their data replaced), then the cached
    /// copies are invalidated.
    pub(super) fn direct_write_over(&mut self, first: u64, last: u64) {
        if self.cache.dirty_pages() > 0 {
            let pages: Vec<u64> = if last - first < self.dirty_at.len() as u64 {
                (first..=last)
                    .filter(|p| self.dirty_at.contains_key(p))
                    .collect()
            } else {
                self.dirty_at
                    .keys()
                    .copied()
                    .filter(|p| (first..=last).contains(p))
                    .collect()
            };
            for page in pages {
                let dirt = self.dirty_at.remove(&page).expect("dirty");
                if let Some(context) = self.wbs.get_mut(&dirt.wb) {
                    context.remove(dirt.inode, page);
                }
                self.cache.clean(page);
            }
        }
        self.cache.invalidate(first, last);
    }

    /// `posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)` on each file of job `index`
    /// (`generic_fadvise`): writeback of the dirty pages starts, in the job's context and
    /// asynchronously (`__filemap_fdatawrite_range`, WB_SYNC_NONE; here without waiting for
    /// request allocation), and the clean pages are dropped; those under writeback stay.
    pub(super) fn fadvise_dontneed(&mut self, index: usize) -> bool {
        let mut claimed = Vec::new();
        for (first, last) in self.file_pages(index) {
            let mut pages = Vec::new();
            for context in self.wbs.values() {
                pages.extend(context.pages_of(first));
            }
            pages.sort_unstable();
            for page in pages {
                // Taken pages are under writeback from here: invalidation keeps them.
                if self.claim(page) {
                    claimed.push(page);
                }
            }
            // invalidate_mapping_pages: the clean pages go.
            self.cache.invalidate(first, last);
        }
        if claimed.is_empty() {
            return false;
        }
        self.wb_counters.task_writeout_pages += claimed.len() as u64;
        let writer = self.job_writer(index, WriterKind::Task);
        self.writers[writer]
            .pending
            .extend(claimed.into_iter().map(|page| (page, index, false)));
        self.pump_writer(writer);
        // The job waits only if the writer could not submit them all at once.
        if self.writers[writer].pending.is_empty() && self.writers[writer].waiting.is_none() {
            return false;
        }
        true
    }

    /// Marks the versions of a direct write's pages as on the device at its completion.
    pub(super) fn direct_written(&mut self, first: u64, last: u64) {
        if let Some(versions) = &mut self.versions {
            for page in first..=last {
                let entry = versions.entry(page).or_insert((0, 0));
                entry.0 += 1;
                entry.1 = entry.0;
            }
        }
    }

    /// Schedules periodic writeback if it is on and none is pending.
    fn schedule_kupdate(&mut self) {
        let interval = self.wb_settings.interval;
        if interval > 0 && !self.kupdate_pending {
            self.kupdate_pending = true;
            self.events.push(self.now + interval, Event::Kupdate);
        }
    }

    /// Periodic writeback (`wb_check_old_data_flush`): each context writes the inodes
    /// dirtied `dirty_expire_centisecs` ago or earlier; the next period is scheduled while
    /// pages are dirty and jobs run.
    pub(super) fn kupdate_tick(&mut self) {
        self.kupdate_pending = false;
        if !self.jobs_running() {
            return;
        }
        let cutoff = self.now.saturating_sub(self.wb_settings.expire);
        let contexts: Vec<u32> = self.wbs.keys().copied().collect();
        for wb in contexts {
            if self.wbs[&wb].has_expired(cutoff) {
                self.kupdate.insert(wb, cutoff);
            }
        }
        if self.cache.dirty_pages() > 0 {
            self.schedule_kupdate();
        }
        self.pump_writers();
    }

    /// Counters for the report.
    pub(super) fn writeback_counters(&self) -> Vec<(String, f64)> {
        let c = &self.wb_counters;
        if c.pages_dirtied == 0 {
            return Vec::new();
        }
        let mut counters = vec![
            ("pages_dirtied".to_string(), c.pages_dirtied as f64),
            (
                "pages_written_back".to_string(),
                c.pages_written_back as f64,
            ),
            ("flusher_pages".to_string(), c.flusher_pages as f64),
            (
                "task_writeout_pages".to_string(),
                c.task_writeout_pages as f64,
            ),
            ("sync_pages".to_string(), c.sync_pages as f64),
            ("throttle_pauses".to_string(), c.throttle_pauses as f64),
            ("congestion_waits".to_string(), c.congestion_waits as f64),
            ("throttle_ms".to_string(), c.throttle_ns as f64 / 1e6),
            (
                "dirty_at_end_pages".to_string(),
                self.cache.dirty_pages() as f64,
            ),
        ];
        if self.cgroup_writeback {
            for (wb, context) in &self.wbs {
                let path = self.groups.path(GroupId(*wb)).to_string();
                counters.push((format!("written_back_pages{path}"), context.written as f64));
            }
        }
        counters
    }
}

//! The drive's buffer: read segments filled by read misses and read-ahead, and the write-back
//! buffer of dirty extents waiting to be destaged.
//!
//! # Read segments
//!
//! Each segment holds one run of consecutive sectors, at most `segment_sectors` long: the data
//! of a read miss followed by whatever read-ahead added after it. It behaves as a sliding window
//! over a sequential stream: `consumed` is the end of the highest range the host has read from
//! it, and read-ahead may run until `consumed + segment_sectors`, discarding the oldest sectors
//! as it goes. A miss takes the segment whose data ends where the miss starts (the same stream)
//! or else the least recently used one.
//!
//! # Write buffer
//!
//! Dirty data is kept as non-overlapping extents keyed by first LBA, coalescing overlapping and
//! adjacent writes, each tagged with the sequence number of its oldest write. A second map orders
//! extents by that tag, so the oldest is found in O(log n) and a flush knows when every write it
//! covers is on the media. Space is counted in sectors, the extent being destaged included until
//! its media write completes.

use std::collections::{BTreeMap, BTreeSet};

/// One read segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First sector of the run (data below `end - segment_sectors` has been dropped).
    pub start: u64,
    /// One past the last sector read from the media into the segment.
    pub end: u64,
    /// One past the highest sector the host has read from the segment.
    pub consumed: u64,
    /// Recency stamp for LRU replacement; 0 marks a segment never used.
    pub last_used: u64,
}

/// The read segments.
#[derive(Clone, Debug)]
pub struct ReadCache {
    segments: Vec<Segment>,
    segment_sectors: u64,
    clock: u64,
}

impl ReadCache {
    /// `count` segments of `segment_sectors` each.
    pub fn new(count: usize, segment_sectors: u64) -> ReadCache {
        assert!(count >= 1 && segment_sectors >= 1);
        ReadCache {
            segments: vec![
                Segment {
                    start: 0,
                    end: 0,
                    consumed: 0,
                    last_used: 0,
                };
                count
            ],
            segment_sectors,
            clock: 0,
        }
    }

    /// Sectors one segment holds.
    pub fn segment_sectors(&self) -> u64 {
        self.segment_sectors
    }

    /// Segment `index`.
    pub fn segment(&self, index: usize) -> &Segment {
        &self.segments[index]
    }

    /// First sector still held by segment `index` whose data ends at `end`.
    #[inline]
    pub fn valid_start(&self, index: usize, end: u64) -> u64 {
        let segment = &self.segments[index];
        segment.start.max(end.saturating_sub(self.segment_sectors))
    }

    /// The segment holding all of `[first, end)`, looking at every segment but `skip`.
    #[inline]
    pub fn find(&self, first: u64, end: u64, skip: Option<usize>) -> Option<usize> {
        let skip = skip.unwrap_or(usize::MAX);
        // Every segment is weighed without a branch, the first that holds it kept (the walk
        // goes backwards, so the last one kept is the first): whether a random read's range
        // lies below a segment's end is a coin toss, and the early exits of a search were
        // mispredicted at nearly every segment (6% of the time with 4 synchronous readers, in
        // perf's profile).
        let mut found = usize::MAX;
        for (index, segment) in self.segments.iter().enumerate().rev() {
            let holds = (end <= segment.end)
                & (first >= segment.start)
                & (first >= segment.end.saturating_sub(self.segment_sectors))
                & (segment.last_used != 0)
                & (index != skip);
            found = std::hint::select_unpredictable(holds, index, found);
        }
        (found != usize::MAX).then_some(found)
    }

    /// Records that the host read `[_, end)` from segment `index`.
    #[inline]
    pub fn touch(&mut self, index: usize, end: u64) {
        self.clock += 1;
        let segment = &mut self.segments[index];
        segment.consumed = segment.consumed.max(end);
        segment.last_used = self.clock;
    }

    /// Takes a segment for a read miss of `[first, end)`: the one whose data ends at `first`,
    /// or holds `first` and ends before `end` (the read runs past what was read ahead), if any
    /// (the miss continues a sequential stream), else the least recently used. Its old data is
    /// dropped; it will hold `[first, end)` once the media read completes
    /// ([`ReadCache::filled`]). Returns the segment and whether the miss continues a stream.
    ///
    /// Without the second case a read straddling the end of a stream's read-ahead took the
    /// least recently used segment, another stream's, whose data was then lost: with as many
    /// streams as segments, each served a few requests in turn (HTBS's B_max), every turn
    /// missed.
    pub fn allocate(&mut self, first: u64, end: u64) -> (usize, bool) {
        // One pass: the first segment the read continues, else the least recently used
        // (the first of equals).
        let mut continued = None;
        let (mut oldest_used, mut oldest) = (u64::MAX, 0);
        // A segment whose data ends in `[first, end)` (just `first` for an empty read): one
        // unsigned comparison, as a random read's miss is usually far from every segment.
        let within = (end - first).saturating_sub(1);
        for (index, segment) in self.segments.iter().enumerate() {
            if segment.end.wrapping_sub(first) <= within
                && segment.last_used != 0
                && (segment.end == first || first >= self.valid_start(index, segment.end))
            {
                continued = Some(index);
                break;
            }
            // The least recently used so far, chosen without a branch (which went either way).
            let older = segment.last_used < oldest_used;
            oldest_used = if older { segment.last_used } else { oldest_used };
            oldest = if older { index } else { oldest };
        }
        let index = continued.unwrap_or(oldest);
        self.clock += 1;
        self.segments[index] = Segment {
            start: first,
            end: first,
            consumed: end,
            last_used: self.clock,
        };
        (index, continued.is_some())
    }

    /// The media read into segment `index` has reached `end`.
    #[inline]
    pub fn filled(&mut self, index: usize, end: u64) {
        let segment = &mut self.segments[index];
        debug_assert!(end >= segment.end);
        segment.end = end;
    }

    /// How far read-ahead may fill segment `index`: `consumed + segment_sectors`.
    #[inline]
    pub fn read_ahead_limit(&self, index: usize) -> u64 {
        self.segments[index].consumed + self.segment_sectors
    }
}

/// One dirty extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// One past the last dirty sector.
    pub end: u64,
    /// Sequence number of the oldest write merged into it.
    pub sequence: u64,
    /// When that oldest write entered the buffer, ns.
    pub written_at: u64,
}

/// The write-back buffer.
#[derive(Clone, Debug)]
pub struct WriteBuffer {
    /// Dirty extents by first sector; never overlapping.
    extents: BTreeMap<u64, Extent>,
    /// Each extent as (sequence number, first sector), oldest first. Two parts of one extent
    /// split by [`WriteBuffer::discard`] share a sequence number.
    by_age: BTreeSet<(u64, u64)>,
    /// Dirty sectors, the extent being destaged included.
    dirty_sectors: u64,
    /// Most dirty sectors held at once.
    capacity_sectors: u64,
    /// The part being written to the media: first sector, end, sequence.
    destaging: Option<(u64, u64, u64)>,
    /// Reused to collect the extents a write overlaps.
    scratch: Vec<(u64, Extent)>,
}

impl WriteBuffer {
    /// A buffer of `capacity_sectors`.
    pub fn new(capacity_sectors: u64) -> WriteBuffer {
        WriteBuffer {
            extents: BTreeMap::new(),
            by_age: BTreeSet::new(),
            dirty_sectors: 0,
            capacity_sectors,
            destaging: None,
            scratch: Vec::new(),
        }
    }

    /// Most dirty sectors held at once.
    pub fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }

    /// Dirty sectors, the extent being destaged included.
    pub fn dirty_sectors(&self) -> u64 {
        self.dirty_sectors
    }

    /// Whether `sectors` more fit now.
    #[inline]
    pub fn has_room(&self, sectors: u64) -> bool {
        self.dirty_sectors + sectors <= self.capacity_sectors
    }

    /// Whether nothing is waiting for the media.
    pub fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    /// Whether every write with sequence number up to `sequence` is on the media.
    pub fn clean_up_to(&self, sequence: u64) -> bool {
        let oldest_waiting = self.by_age.first().map_or(u64::MAX, |&(sequence, _)| sequence);
        let oldest_in_flight = self.destaging.map_or(u64::MAX, |(_, _, s)| s);
        oldest_waiting > sequence && oldest_in_flight > sequence
    }

    /// Whether `[first, end)` is entirely dirty (a read of it is served from the buffer).
    #[inline]
    pub fn contains(&self, first: u64, end: u64) -> bool {
        if self.extents.is_empty() {
            return false;
        }
        self.extents
            .range(..=first)
            .next_back()
            .is_some_and(|(_, extent)| extent.end >= end)
    }

    /// Adds the write `[first, end)` with `sequence` at time `now`, coalescing with every extent
    /// it overlaps or touches. The caller checked [`WriteBuffer::has_room`].
    pub fn insert(&mut self, first: u64, end: u64, sequence: u64, now: u64) {
        debug_assert!(first < end);
        self.scratch.clear();
        // Extents starting at or before `end` whose end reaches `first` touch the write.
        for (&start, &extent) in self.extents.range(..=end).rev() {
            if extent.end < first {
                break;
            }
            self.scratch.push((start, extent));
        }
        let mut merged_first = first;
        let mut merged_end = end;
        let mut merged_sequence = sequence;
        let mut written_at = now;
        let mut replaced = 0;
        for &(start, extent) in &self.scratch {
            merged_first = merged_first.min(start);
            merged_end = merged_end.max(extent.end);
            if extent.sequence < merged_sequence {
                merged_sequence = extent.sequence;
                written_at = extent.written_at;
            }
            replaced += extent.end - start;
            self.extents.remove(&start);
            self.by_age.remove(&(extent.sequence, start));
        }
        self.extents.insert(
            merged_first,
            Extent {
                end: merged_end,
                sequence: merged_sequence,
                written_at,
            },
        );
        self.by_age.insert((merged_sequence, merged_first));
        self.dirty_sectors += (merged_end - merged_first) - replaced;
    }

    /// The oldest extent: first sector and extent.
    pub fn oldest(&self) -> Option<(u64, Extent)> {
        let &(_, start) = self.by_age.first()?;
        Some((start, self.extents[&start]))
    }

    /// Up to `count` extents starting at or after `lba`, then up to `count` before it, passed to
    /// `visit` as (first sector, extent).
    pub fn around(&self, lba: u64, count: usize, mut visit: impl FnMut(u64, Extent)) {
        for (&start, &extent) in self.extents.range(lba..).take(count) {
            visit(start, extent);
        }
        for (&start, &extent) in self.extents.range(..lba).rev().take(count) {
            visit(start, extent);
        }
    }

    /// Takes up to `max_sectors` from the front of the extent starting at `first` for a media
    /// write; returns its end. The rest of the extent stays dirty with the same sequence.
    pub fn begin_destage(&mut self, first: u64, max_sectors: u64) -> u64 {
        assert!(self.destaging.is_none(), "one destage at a time");
        let extent = self.extents.remove(&first).expect("extent exists");
        let end = extent.end.min(first + max_sectors);
        self.by_age.remove(&(extent.sequence, first));
        if end < extent.end {
            self.extents.insert(end, extent);
            self.by_age.insert((extent.sequence, end));
        }
        self.destaging = Some((first, end, extent.sequence));
        end
    }

    /// Drops the dirty data in `[first, end)`: a newer write of those sectors is going to the
    /// media itself. Extents it covers in part keep their other parts, with their sequence
    /// numbers and ages. The extent being destaged is not touched (the destage ends before the
    /// mechanism writes anything else). Returns the sectors freed.
    pub fn discard(&mut self, first: u64, end: u64) -> u64 {
        self.scratch.clear();
        for (&start, &extent) in self.extents.range(..end).rev() {
            if extent.end <= first {
                break;
            }
            self.scratch.push((start, extent));
        }
        let mut freed = 0;
        for &(start, extent) in &self.scratch {
            self.extents.remove(&start);
            self.by_age.remove(&(extent.sequence, start));
            if start < first {
                self.extents.insert(start, Extent { end: first, ..extent });
                self.by_age.insert((extent.sequence, start));
            }
            if extent.end > end {
                self.extents.insert(end, extent);
                self.by_age.insert((extent.sequence, end));
            }
            freed += extent.end.min(end) - start.max(first);
        }
        self.dirty_sectors -= freed;
        freed
    }

    /// The destage begun last is on the media; returns the sectors freed.
    pub fn end_destage(&mut self) -> u64 {
        let (first, end, _) = self.destaging.take().expect("a destage in flight");
        let sectors = end - first;
        self.dirty_sectors -= sectors;
        sectors
    }

    /// Whether a destage is in flight.
    pub fn destaging(&self) -> bool {
        self.destaging.is_some()
    }

    /// Number of dirty extents waiting.
    pub fn extent_count(&self) -> usize {
        self.extents.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `find` gives what a search in order gives: the first segment but `skip` that holds
    /// the whole range within its window, over random segments (some overlapping, some never
    /// used) and ranges.
    #[test]
    fn find_is_the_first_segment_that_holds_the_range() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |bound: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % bound
        };
        for _ in 0..2000 {
            let count = 1 + next(20) as usize;
            let mut cache = ReadCache::new(count, 1 + next(64));
            for segment in &mut cache.segments {
                let start = next(200);
                *segment = Segment {
                    start,
                    end: start + next(100),
                    consumed: 0,
                    last_used: next(3),
                };
            }
            for _ in 0..20 {
                let first = next(300);
                let end = first + next(16);
                let skip = (next(3) == 0).then(|| next(count as u64) as usize);
                let search = cache.segments.iter().enumerate().position(|(index, s)| {
                    end <= s.end
                        && first >= s.start
                        && first >= s.end.saturating_sub(cache.segment_sectors)
                        && s.last_used != 0
                        && Some(index) != skip
                });
                assert_eq!(cache.find(first, end, skip), search);
            }
        }
    }

    /// A naive model: a set of dirty sectors.
    fn naive_dirty(buffer: &WriteBuffer) -> Vec<u64> {
        let mut sectors = Vec::new();
        for (&start, extent) in &buffer.extents {
            sectors.extend(start..extent.end);
        }
        sectors
    }

    /// Coalescing keeps exactly the union of the writes, less what was discarded, counts it
    /// once, and never overlaps.
    #[test]
    fn write_buffer_coalesces_like_a_set() {
        let mut buffer = WriteBuffer::new(1 << 20);
        let mut model = std::collections::BTreeSet::new();
        let mut state = 12345u64;
        for sequence in 0..2000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let first = (state >> 33) % 5000;
            let len = 1 + (state >> 20) % 40;
            if sequence % 5 == 4 {
                // A newer write going to the media drops what it covers.
                let freed = buffer.discard(first, first + len);
                let before = model.len();
                model.retain(|sector| !(first..first + len).contains(sector));
                assert_eq!(freed as usize, before - model.len());
            } else {
                buffer.insert(first, first + len, sequence, sequence);
                model.extend(first..first + len);
            }
            let sectors = naive_dirty(&buffer);
            assert_eq!(sectors.len() as u64, buffer.dirty_sectors());
            assert!(sectors.iter().copied().eq(model.iter().copied()));
            assert_eq!(buffer.extents.len(), buffer.by_age.len());
        }
        // Destaging everything empties it.
        while let Some((first, _)) = buffer.oldest() {
            buffer.begin_destage(first, 16);
            buffer.end_destage();
        }
        assert_eq!(buffer.dirty_sectors(), 0);
        assert!(buffer.clean_up_to(u64::MAX - 1));
    }

    /// Segments slide over a stream and replace the least recently used.
    #[test]
    fn segments_slide_and_replace_lru() {
        let mut cache = ReadCache::new(2, 100);
        let (a, continued) = cache.allocate(1000, 1008);
        assert!(!continued);
        cache.filled(a, 1008);
        assert_eq!(cache.find(1000, 1008, None), Some(a));
        cache.filled(a, 1300);
        // Only the last 100 sectors stay.
        assert_eq!(cache.find(1000, 1008, None), None);
        assert_eq!(cache.find(1250, 1300, None), Some(a));
        let (b, _) = cache.allocate(5000, 5008);
        assert_ne!(a, b);
        // The stream continues in its own segment.
        assert_eq!(cache.allocate(1300, 1308), (a, true));
        cache.touch(a, 1308);
        // b is now least recently used.
        assert_eq!(cache.allocate(9000, 9008), (b, false));
    }

    /// A miss that starts in a segment's data and runs past it continues that segment's
    /// stream instead of taking the least recently used segment (another stream's).
    #[test]
    fn a_read_past_the_read_ahead_continues_its_segment() {
        let mut cache = ReadCache::new(2, 100);
        let (a, _) = cache.allocate(1000, 1008);
        cache.filled(a, 1300);
        let (b, _) = cache.allocate(5000, 5008);
        cache.filled(b, 5100);
        cache.touch(b, 5008);
        // a is least recently used, but the read straddling b's end continues b.
        assert_eq!(cache.find(5096, 5104, None), None);
        assert_eq!(cache.allocate(5096, 5104), (b, true));
        // A read that starts before what a segment still holds is no continuation.
        let (c, continued) = cache.allocate(1100, 1400);
        assert!(!continued);
        assert_eq!(c, a);
    }
}

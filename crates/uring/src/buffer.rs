//! I/O buffers aligned for `O_DIRECT`.
//!
//! Direct I/O moves data between the device and user memory without the page cache, so the
//! memory must be aligned as the device requires (its logical block size at most; 4096 bytes
//! covers every device). [`AlignedBuf`] allocates with that alignment, as `posix_memalign`
//! does, through [`std::alloc::Layout`].

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Alignment of every buffer: a page, which satisfies the logical block size of any device.
pub const ALIGNMENT: usize = 4096;

/// A zero-initialised byte buffer whose start is aligned to [`ALIGNMENT`].
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// The buffer owns its memory exclusively, like a `Vec<u8>`.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        let layout =
            Layout::from_size_align(len.max(1), ALIGNMENT).expect("a buffer size below isize::MAX");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len, layout }
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> Self {
        let mut buffer = Self::zeroed(data.len());
        buffer.copy_from_slice(data);
        buffer
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start of the buffer, for the kernel to read from or write into.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn raw(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` initialised bytes owned by this buffer.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

/// A job's I/O buffers: one aligned region cut into equal slots (each rounded up to
/// [`ALIGNMENT`]), one per I/O the job may have in flight, so that the ring can register the
/// whole region as one fixed buffer (`IORING_REGISTER_BUFFERS`) and the kernel need not pin
/// the pages of every I/O again.
pub struct SlotBuffers {
    region: AlignedBuf,
    stride: usize,
    len: usize,
}

impl SlotBuffers {
    /// `slots` buffers of `len` bytes each, each filled by `fill(slot, bytes)`.
    pub fn new(slots: usize, len: usize, mut fill: impl FnMut(usize, &mut [u8])) -> Self {
        let stride = len.div_ceil(ALIGNMENT).max(1) * ALIGNMENT;
        let total = stride
            .checked_mul(slots)
            .expect("a job's buffers fit in memory");
        let mut buffers = SlotBuffers {
            region: AlignedBuf::zeroed(total),
            stride,
            len,
        };
        for slot in 0..slots {
            fill(slot, buffers.slot_mut(slot));
        }
        buffers
    }

    /// Slot `slot`'s bytes.
    pub fn slot(&self, slot: usize) -> &[u8] {
        &self.region[slot * self.stride..][..self.len]
    }

    /// Slot `slot`'s bytes, to fill.
    pub fn slot_mut(&mut self, slot: usize) -> &mut [u8] {
        &mut self.region[slot * self.stride..][..self.len]
    }

    /// The start of slot `slot`, for the kernel to read from or write into.
    pub(crate) fn slot_ptr(&self, slot: usize) -> *mut u8 {
        debug_assert!((slot + 1) * self.stride <= self.region.len());
        self.region.raw().wrapping_add(slot * self.stride)
    }

    /// The whole region, as `IORING_REGISTER_BUFFERS` takes it.
    pub(crate) fn region(&self) -> libc::iovec {
        libc::iovec {
            iov_base: self.region.raw().cast(),
            iov_len: self.region.len(),
        }
    }
}

/// Fills `bytes` with a pseudo-random pattern drawn from `seed` (SplitMix64 words), as fio
/// fills write buffers with random data by default so that compressing or deduplicating
/// devices see realistic data.
pub fn fill_pattern(bytes: &mut [u8], seed: u64) {
    let mut state = seed;
    for chunk in bytes.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for len in [1, 512, 4096, 65_536, 1 << 20] {
            let buffer = AlignedBuf::zeroed(len);
            assert_eq!(buffer.raw() as usize % ALIGNMENT, 0);
            assert_eq!(buffer.len(), len);
            assert!(buffer.iter().all(|&b| b == 0));
        }
        let copy = AlignedBuf::from_slice(b"abc");
        assert_eq!(&copy[..], b"abc");
    }

    #[test]
    fn slots_are_aligned_apart_and_filled_each() {
        let buffers = SlotBuffers::new(3, 5000, |slot, bytes| bytes.fill(slot as u8 + 1));
        for slot in 0..3 {
            assert_eq!(buffers.slot(slot).len(), 5000);
            assert!(buffers.slot(slot).iter().all(|&b| b == slot as u8 + 1));
            assert_eq!(buffers.slot_ptr(slot) as usize % ALIGNMENT, 0);
        }
        assert_eq!(buffers.region().iov_len, 3 * 8192);
    }

    #[test]
    fn pattern_depends_on_the_seed() {
        let mut a = vec![0u8; 100];
        let mut b = vec![0u8; 100];
        fill_pattern(&mut a, 1);
        fill_pattern(&mut b, 1);
        assert_eq!(a, b);
        fill_pattern(&mut b, 2);
        assert_ne!(a, b);
    }
}

//! Submission queue entries: one dispatched request becomes one SQE.
//!
//! A request the policy dispatched may carry merged companions; their buffers are separate, so
//! a merged request becomes a vectored read or write (`IORING_OP_READV`/`WRITEV`) over the
//! buffers in offset order, and a lone request a plain `IORING_OP_READ`/`WRITE`, or
//! `IORING_OP_READ_FIXED`/`WRITE_FIXED` when its buffer is registered with the ring. A flush is
//! `IORING_OP_FSYNC`. Every read and write carries the request's I/O priority in the SQE's
//! `ioprio` field, `(class << 13) | level` as the kernel packs it ([`IoPrio::to_raw`]).

use io_uring::{opcode, squeue::Entry, types};
use iosched_core::{IoPrio, IoPrioClass, Op};
use std::os::fd::RawFd;

/// The `ioprio` an SQE carries for `prio`. Once the kernel has refused the real-time class
/// (`rt_refused`), real-time requests go out as best effort at the same level.
pub fn ioprio(prio: IoPrio, rt_refused: bool) -> u16 {
    if rt_refused && prio.class() == IoPrioClass::Rt {
        IoPrio::new(IoPrioClass::Be, prio.level())
            .expect("the level of a valid priority is valid")
            .to_raw()
    } else {
        prio.to_raw()
    }
}

/// Whether `raw` asks for the real-time class.
pub fn is_rt(raw: u16) -> bool {
    raw >> 13 == IoPrioClass::Rt as u16
}

/// A file as an SQE names it: its descriptor, or its index among the files registered with
/// the ring (`IOSQE_FIXED_FILE`), which spares the kernel looking the descriptor up on every
/// I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileRef {
    /// A descriptor.
    Fd(RawFd),
    /// A registered file's index.
    Fixed(u32),
}

/// The SQE for a read or write of `iovecs` (in file order, contiguous) at `offset` in `file`.
/// A lone buffer inside the registered buffer `fixed_buffer` goes out as
/// `IORING_OP_READ_FIXED`/`WRITE_FIXED`, whose pages the kernel pinned once at registration.
///
/// The caller keeps every buffer and the `iovecs` array alive until the completion arrives.
pub fn read_write(
    op: Op,
    file: FileRef,
    offset: u64,
    iovecs: &[libc::iovec],
    fixed_buffer: Option<u16>,
    ioprio: u16,
    user_data: u64,
) -> Entry {
    macro_rules! build {
        ($fd:expr) => {
            match (op, iovecs, fixed_buffer) {
                (Op::Read, [one], Some(index)) => {
                    opcode::ReadFixed::new($fd, one.iov_base.cast(), one.iov_len as u32, index)
                        .offset(offset)
                        .ioprio(ioprio)
                        .build()
                }
                (Op::Write, [one], Some(index)) => {
                    opcode::WriteFixed::new($fd, one.iov_base.cast(), one.iov_len as u32, index)
                        .offset(offset)
                        .ioprio(ioprio)
                        .build()
                }
                (Op::Read, [one], None) => {
                    opcode::Read::new($fd, one.iov_base.cast(), one.iov_len as u32)
                        .offset(offset)
                        .ioprio(ioprio)
                        .build()
                }
                (Op::Write, [one], None) => {
                    opcode::Write::new($fd, one.iov_base.cast(), one.iov_len as u32)
                        .offset(offset)
                        .ioprio(ioprio)
                        .build()
                }
                (Op::Read, _, _) => opcode::Readv::new($fd, iovecs.as_ptr(), iovecs.len() as u32)
                    .offset(offset)
                    .ioprio(ioprio)
                    .build(),
                (Op::Write, _, _) => opcode::Writev::new($fd, iovecs.as_ptr(), iovecs.len() as u32)
                    .offset(offset)
                    .ioprio(ioprio)
                    .build(),
                (Op::Flush | Op::Discard, _, _) => {
                    unreachable!("only reads and writes carry data")
                }
            }
        };
    }
    let entry = match file {
        FileRef::Fd(fd) => build!(types::Fd(fd)),
        FileRef::Fixed(index) => build!(types::Fixed(index)),
    };
    entry.user_data(user_data)
}

/// The SQE for a flush of `fd` (`fsync`).
pub fn fsync(fd: RawFd, user_data: u64) -> Entry {
    opcode::Fsync::new(types::Fd(fd))
        .build()
        .user_data(user_data)
}

/// The SQE for sync_file_range(2) of `fd` over `len` bytes from `offset` with `flags`
/// (SYNC_FILE_RANGE_*). The ring's length field holds 32 bits: a longer range becomes 0,
/// "to the end of the file", which covers it.
pub fn sync_file_range(fd: RawFd, offset: u64, len: u64, flags: u32, user_data: u64) -> Entry {
    let len = u32::try_from(len).unwrap_or(0);
    opcode::SyncFileRange::new(types::Fd(fd), len)
        .offset(offset)
        .flags(flags)
        .build()
        .user_data(user_data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SQE as the kernel reads it: `struct io_uring_sqe`, 64 bytes.
    fn bytes(entry: Entry) -> [u8; 64] {
        // SAFETY: `Entry` is `#[repr(C)]` around `struct io_uring_sqe`, which is 64 bytes.
        unsafe { std::mem::transmute::<Entry, [u8; 64]>(entry) }
    }

    // Proves the request's class and level land in the SQE's ioprio field (bytes 2..4 of
    // struct io_uring_sqe), for plain and vectored reads and writes alike, and that a refused
    // real-time class goes out as best effort at the same level.
    #[test]
    fn priorities_reach_the_sqe() {
        let mut buffer = vec![0u8; 8192];
        let iovecs = [
            libc::iovec {
                iov_base: buffer.as_mut_ptr().cast(),
                iov_len: 4096,
            },
            libc::iovec {
                iov_base: buffer[4096..].as_mut_ptr().cast(),
                iov_len: 4096,
            },
        ];
        for class in [
            IoPrioClass::None,
            IoPrioClass::Rt,
            IoPrioClass::Be,
            IoPrioClass::Idle,
        ] {
            for level in [0, 3, 7] {
                let prio = IoPrio::new(class, level).unwrap();
                for op in [Op::Read, Op::Write] {
                    for vectors in [&iovecs[..1], &iovecs[..]] {
                        let raw = ioprio(prio, false);
                        let sqe = bytes(read_write(
                            op,
                            FileRef::Fd(7),
                            1 << 20,
                            vectors,
                            None,
                            raw,
                            42,
                        ));
                        let field = u16::from_ne_bytes([sqe[2], sqe[3]]);
                        assert_eq!(field, prio.to_raw(), "{op:?} {prio}");
                        assert_eq!(field >> 13, class as u16);
                        assert_eq!(field & 7, u16::from(level));
                        // fd at 4..8, offset at 8..16, user_data at 32..40.
                        assert_eq!(i32::from_ne_bytes(sqe[4..8].try_into().unwrap()), 7);
                        assert_eq!(u64::from_ne_bytes(sqe[8..16].try_into().unwrap()), 1 << 20);
                        assert_eq!(u64::from_ne_bytes(sqe[32..40].try_into().unwrap()), 42);
                    }
                }
            }
        }
        let rt = IoPrio::new(IoPrioClass::Rt, 2).unwrap();
        assert!(is_rt(ioprio(rt, false)));
        assert_eq!(
            ioprio(rt, true),
            IoPrio::new(IoPrioClass::Be, 2).unwrap().to_raw()
        );
        let sqe = bytes(read_write(
            Op::Read,
            FileRef::Fd(3),
            0,
            &iovecs[..1],
            None,
            ioprio(rt, true),
            1,
        ));
        assert_eq!(
            u16::from_ne_bytes([sqe[2], sqe[3]]) >> 13,
            IoPrioClass::Be as u16
        );
    }

    #[test]
    fn opcodes() {
        let mut buffer = vec![0u8; 4096];
        let one = [libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: 4096,
        }];
        let two = [one[0], one[0]];
        let code = |entry: Entry| entry.get_opcode();
        let fd = FileRef::Fd(0);
        let fixed = FileRef::Fixed(3);
        // A merged request's buffers are separate: vectored even inside a registered buffer.
        type Case<'a> = (Op, FileRef, &'a [libc::iovec], Option<u16>, u8);
        let cases: [Case; 7] = [
            (Op::Read, fd, &one, None, opcode::Read::CODE),
            (Op::Write, fd, &one, None, opcode::Write::CODE),
            (Op::Read, fd, &two, None, opcode::Readv::CODE),
            (Op::Write, fd, &two, None, opcode::Writev::CODE),
            (Op::Read, fixed, &one, Some(1), opcode::ReadFixed::CODE),
            (Op::Write, fd, &one, Some(1), opcode::WriteFixed::CODE),
            (Op::Read, fixed, &two, Some(1), opcode::Readv::CODE),
        ];
        for (op, file, iovecs, buffer, expected) in cases {
            let entry = read_write(op, file, 0, iovecs, buffer, 0, 0);
            assert_eq!(
                code(entry.clone()),
                u32::from(expected),
                "{op:?} {file:?} {buffer:?}"
            );
            // A registered file is named by its index with IOSQE_FIXED_FILE (flags, byte 1);
            // a registered buffer by its index (buf_index, bytes 40..42).
            let sqe = bytes(entry);
            assert_eq!(sqe[1] & 1 == 1, file == fixed, "{op:?} {file:?}");
            if iovecs.len() == 1 {
                let index = u16::from_ne_bytes([sqe[40], sqe[41]]);
                assert_eq!(index, buffer.unwrap_or(0), "{op:?} {buffer:?}");
            }
        }
        assert_eq!(code(fsync(0, 0)), opcode::Fsync::CODE as u32);
    }
}

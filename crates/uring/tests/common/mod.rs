//! Shared by the integration tests.

/// Whether io_uring can be used here; prints why a test is skipped when it cannot (a kernel
/// before 5.11, `kernel.io_uring_disabled`, or a seccomp policy that forbids it).
pub fn uring_available() -> bool {
    match io_uring::IoUring::new(4) {
        Ok(ring) if ring.params().is_feature_ext_arg() => true,
        Ok(_) => {
            eprintln!("skipped: this kernel's io_uring has no IORING_FEAT_EXT_ARG (Linux 5.11)");
            false
        }
        Err(error) => {
            eprintln!("skipped: io_uring is not available here: {error}");
            false
        }
    }
}

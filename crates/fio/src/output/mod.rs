//! fio-compatible output (in progress).

//! fio job file parser (in progress).

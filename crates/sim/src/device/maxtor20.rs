//! A Maxtor DiamondMax Plus 8 of 20 GB (6E020L0, 2003), the kind of drive of seed 001's
//! RAID-0 ("four Maxtor IDE 7.2K RPM 20GB drives"): the `hdd` model with the figures of its
//! data sheet as we know them: 20 GB, 7200 rpm, one platter of 40 GB used on one side (one
//! head), 9.0 ms average seek, a 2 MB buffer, Ultra ATA/133, and no command queuing (an IDE
//! drive under Linux 2.6.11 takes one command at a time).
//!
//! The seed names neither the model nor its figures beyond the capacity, the spindle speed and
//! the interface; the DiamondMax Plus 8 is the 20 GB 7200 rpm Maxtor IDE drive of the years
//! before the seed. What the data sheet does not give is ours, stated here and visible in
//! `iosched devices maxtor20`: the track-to-track (1.0 ms) and full-stroke (18 ms) seeks and
//! the sustained rate (about 52 MB/s at the outer zone and 30 MB/s at the inner, as drives of
//! 40 GB platters measured), and how the 2 MB buffer is split (1 MB of read segments, 4 of
//! 256 KiB, and 1 MB of write buffer). Every `hdd` setting can be set over the preset with
//! `--device-set` (or `member.NAME` in a `raid0` of them).

use super::hdd::{build_preset, config::HddConfig, preset, DERIVED_FROM};
use super::{DeviceError, ModelInfo};

/// The preset, before any `--device-set`.
pub fn config() -> Result<HddConfig, DeviceError> {
    preset(
        MODEL.name,
        &[
            // 20,020,396,032 bytes: IDEMA's 39,102,336 sectors of 512 bytes for 20 GB.
            ("capacity_gb", "20.020396032"),
            ("rpm", "7200"),
            ("heads", "1"),
            ("track_to_track_ms", "1.0"),
            ("average_seek_ms", "9.0"),
            ("full_stroke_ms", "18"),
            // 52 MB/s = sectors x 512 B x 120 rev/s at the outer zone; 30 MB/s at the inner.
            ("outer_sectors_per_track", "846"),
            ("inner_sectors_per_track", "488"),
            // Ultra ATA/133.
            ("bus_mb_s", "133"),
            ("cache_segments", "4"),
            ("segment_kib", "256"),
            ("write_buffer_kib", "1024"),
            // IDE: one command at a time.
            ("queue_depth", "1"),
        ],
    )
}

/// This model's entry in the device catalog (`iosched devices`).
pub const MODEL: ModelInfo = ModelInfo {
    name: "maxtor20",
    summary: "Maxtor DiamondMax Plus 8 6E020L0 (seed 001's kind of drive): the hdd model with \
              its data sheet's 20 GB, 7200 rpm, 9.0 ms average seek, 2 MB buffer, ATA/IDE, \
              one command at a time",
    build: |settings, seed| build_preset(config(), settings, seed),
    derived_from: DERIVED_FROM,
};

//! The Samsung SpinPoint P80 HD080HJ, the drive of seed 002: the `hdd` model with the figures
//! of its data sheet (80 GB, 7200 rpm, one platter and two heads, 8.9 ms average seek, 0.8 ms
//! track to track, 18 ms full stroke, 8 MB buffer, SATA 1.5 Gb/s without NCQ, so one command
//! at a time).
//!
//! What the data sheet does not give is ours, stated here and visible in
//! `iosched devices hd080hj`: the sustained rate (about 60 MB/s at the outer zone and 33 MB/s
//! at the inner, as drives of its generation and density measure) and how the 8 MB buffer is
//! split (4 MB of read segments, 8 of 512 KiB, and 4 MB of write buffer). Every `hdd` setting
//! can still be set over the preset with `--device-set`.

use super::hdd::{build_preset, config::HddConfig, preset, DERIVED_FROM};
use super::{DeviceError, ModelInfo};

/// The preset, before any `--device-set`.
pub fn config() -> Result<HddConfig, DeviceError> {
    preset(
        MODEL.name,
        &[
            // 80,026,361,856 bytes (156,301,488 sectors of 512 bytes, IDEMA's count for 80 GB).
            ("capacity_gb", "80.026361856"),
            ("rpm", "7200"),
            ("heads", "2"),
            ("track_to_track_ms", "0.8"),
            ("average_seek_ms", "8.9"),
            ("full_stroke_ms", "18"),
            // 60 MB/s = sectors x 512 B x 120 rev/s at the outer zone; 33 MB/s at the inner.
            ("outer_sectors_per_track", "977"),
            ("inner_sectors_per_track", "537"),
            // SATA 1.5 Gb/s: 150 MB/s after 8b/10b coding.
            ("bus_mb_s", "150"),
            ("cache_segments", "8"),
            ("segment_kib", "512"),
            ("write_buffer_kib", "4096"),
            // No NCQ.
            ("queue_depth", "1"),
        ],
    )
}

/// This model's entry in the device catalog (`iosched devices`).
pub const MODEL: ModelInfo = ModelInfo {
    name: "hd080hj",
    summary: "Samsung SpinPoint P80 HD080HJ (seed 002's drive): the hdd model with its data \
              sheet's 80 GB, 7200 rpm, 2 heads, 8.9 ms average seek, 8 MB buffer, no NCQ",
    build: |settings, seed| build_preset(config(), settings, seed),
    derived_from: DERIVED_FROM,
};

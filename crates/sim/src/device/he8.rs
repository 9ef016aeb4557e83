//! The HGST Ultrastar He8 (HUH728080ALE600), the drive of seed 004: the `hdd` model with the
//! figures of its data sheet (8 TB, 7200 rpm, 7 helium-filled platters and 14 heads, 8.0 ms
//! average read seek, 205 MB/s sustained, 128 MB cache, SATA 6 Gb/s with NCQ 32).
//!
//! What the data sheet does not give is ours, stated here and visible in `iosched devices he8`:
//! the inner zone's rate (half the outer's, as on other drives of the class), the full-stroke
//! seek (twice the average, the `hdd` model's own ratio), and how the 128 MB cache is split
//! (64 MB of read segments, 64 MB of write buffer). Every `hdd` setting can still be set over
//! the preset with `--device-set`.

use super::hdd::{build_preset, config::HddConfig, preset, DERIVED_FROM};
use super::{DeviceError, ModelInfo};

/// The preset, before any `--device-set`.
pub fn config() -> Result<HddConfig, DeviceError> {
    preset(
        MODEL.name,
        &[
            // 8,001,563,222,016 bytes (15,628,053,168 sectors of 512 bytes).
            ("capacity_gb", "8001.563222016"),
            ("rpm", "7200"),
            ("heads", "14"),
            ("average_seek_ms", "8.0"),
            ("full_stroke_ms", "16.0"),
            // 205 MB/s = sectors x 512 B x 120 rev/s at the outer zone.
            ("outer_sectors_per_track", "3337"),
            ("inner_sectors_per_track", "1668"),
            ("bus_mb_s", "600"),
            ("cache_segments", "32"),
            ("segment_kib", "2048"),
            ("write_buffer_kib", "65536"),
            ("queue_depth", "32"),
        ],
    )
}

/// This model's entry in the device catalog (`iosched devices`).
pub const MODEL: ModelInfo = ModelInfo {
    name: "he8",
    summary: "HGST Ultrastar He8 (seed 004's drive): the hdd model with its data sheet's 8 TB, \
              7200 rpm, 14 heads, 8.0 ms average seek, 205 MB/s, 128 MB cache, NCQ 32",
    build: |settings, seed| build_preset(config(), settings, seed),
    derived_from: DERIVED_FROM,
};

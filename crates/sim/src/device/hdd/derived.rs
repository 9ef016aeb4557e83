//! The parameters `iosched devices hdd` shows that follow from others (zones, rates, mean seek),
//! and which settable parameters each follows from.

use super::*;

pub(super) const SEEK_CURVE: &[&str] = &[
    "track_to_track_ms",
    "seek_settle_ms",
    "average_seek_ms",
    "full_stroke_ms",
    "capacity_gb",
];

pub(super) const FORMAT: &[&str] = &[
    "capacity_gb",
    "heads",
    "zones",
    "outer_sectors_per_track",
    "inner_sectors_per_track",
];

/// Each derived parameter of [`derived_parameters`] and the settings it follows from.
pub const DERIVED_FROM: &[(&str, &[&str])] = &[
    ("revolution_ms", &["rpm"]),
    ("capacity_sectors", &["capacity_gb"]),
    ("cylinders", FORMAT),
    ("seek_sqrt_coefficient_ms", SEEK_CURVE),
    ("seek_linear_coefficient_ms", SEEK_CURVE),
    ("mean_seek_cylinder_pairs_ms", SEEK_CURVE),
    ("mean_seek_lba_pairs_ms", SEEK_CURVE),
    (
        "expected_qd1_random_4k_iops",
        &[
            "read_miss_overhead_ms",
            "average_seek_ms",
            "rpm",
            "capacity_gb",
        ],
    ),
    ("outer_media_rate", &["outer_sectors_per_track", "rpm"]),
    ("inner_media_rate", &["inner_sectors_per_track", "rpm"]),
    (
        "outer_sustained_rate",
        &["outer_sectors_per_track", "rpm", "head_switch_ms", "heads"],
    ),
    (
        "inner_sustained_rate",
        &["inner_sectors_per_track", "rpm", "head_switch_ms", "heads"],
    ),
    ("zone_N", FORMAT),
];

/// Values that follow from the settings: the format, the seek curve's fit, expected rates.
pub(super) fn derived_parameters(hdd: &Hdd) -> Vec<Parameter> {
    let geometry = &hdd.geometry;
    let revolution = hdd.revolution_ns;
    let zones = geometry.zones();
    let last = zones.len() - 1;
    let mb = |bytes_per_s: f64| format!("{:.1}", bytes_per_s / 1e6);
    let mean_cylinder_pairs_ms = hdd.seek.mean_over_cylinder_pairs_ns() / 1e6;
    let mean_lba_pairs_ms = mean_seek_over_lba_pairs_ns(hdd) / 1e6;
    let transfer_4k_ms = 8.0 * hdd.zone_sector_ns[zones.len() / 2] / 1e6;
    let expected_qd1_ms =
        hdd.config.read_miss_overhead_ms + mean_lba_pairs_ms + revolution / 2e6 + transfer_4k_ms;
    let mut parameters = vec![
        parameter(
            "revolution_ms",
            format!("{:.3}", revolution / 1e6),
            "ms",
            "derived: 60 / rpm; mean rotational latency is half of it",
        ),
        parameter(
            "capacity_sectors",
            geometry.sectors(),
            "sectors",
            "derived: addressable 512-byte sectors",
        ),
        parameter(
            "cylinders",
            geometry.cylinders(),
            "cylinders",
            "derived: equal cylinders per zone, enough for the capacity",
        ),
        parameter(
            "seek_sqrt_coefficient_ms",
            format!("{:.5}", hdd.seek.sqrt_coefficient_ms()),
            "ms",
            "derived: a = (-10 s + 15 A - 5 F) / (3 sqrt N) (DiskSim 3-point curve from the \
             settle s)",
        ),
        parameter(
            "seek_linear_coefficient_ms",
            format!("{:.3e}", hdd.seek.linear_coefficient_ms()),
            "ms/cylinder",
            "derived: b = (7 s - 15 A + 8 F) / (3 N)",
        ),
        parameter(
            "mean_seek_cylinder_pairs_ms",
            format!("{mean_cylinder_pairs_ms:.3}"),
            "ms",
            "derived: seek averaged over all cylinder pairs, summed numerically (should be A)",
        ),
        parameter(
            "mean_seek_lba_pairs_ms",
            format!("{mean_lba_pairs_ms:.3}"),
            "ms",
            "derived: seek averaged over uniformly random LBA pairs (outer zones hold more LBAs, \
             so shorter than A)",
        ),
        parameter(
            "expected_qd1_random_4k_iops",
            format!("{:.1}", 1e3 / expected_qd1_ms),
            "IOPS",
            "derived: 1 / (miss overhead + mean LBA seek + half a revolution + 4 KiB transfer)",
        ),
        parameter(
            "outer_media_rate",
            mb(geometry.media_rate(0, revolution)),
            "MB/s",
            "derived: zone 0 instantaneous (sectors per track x 512 x rev/s)",
        ),
        parameter(
            "inner_media_rate",
            mb(geometry.media_rate(last, revolution)),
            "MB/s",
            "derived: innermost zone instantaneous",
        ),
        parameter(
            "outer_sustained_rate",
            mb(geometry.sustained_rate(0, revolution)),
            "MB/s",
            "derived: zone 0 counting head and cylinder switch skews (7K500 spec: 64.8)",
        ),
        parameter(
            "inner_sustained_rate",
            mb(geometry.sustained_rate(last, revolution)),
            "MB/s",
            "derived: innermost zone counting skews (7K500 spec: 31.0)",
        ),
    ];
    for (index, zone) in zones.iter().enumerate() {
        parameters.push(parameter(
            &format!("zone_{index}"),
            zone.sectors_per_track,
            "sectors/track",
            &format!(
                "derived: cylinders {}..{}, LBAs {}..{}, {} MB/s, track skew {} and cylinder \
                 skew {} sectors",
                zone.first_cylinder,
                zone.first_cylinder + zone.cylinders,
                zone.first_lba,
                zone.first_lba + zone.sectors,
                mb(geometry.media_rate(index, revolution)),
                zone.track_skew,
                zone.cylinder_skew
            ),
        ));
    }
    parameters
}

/// Mean seek time between two uniformly random LBAs, ns, by numerical integration over the LBA
/// space: the capacity is cut into equal slices whose middles stand for them, and every pair of
/// slices is weighed equally.
pub fn mean_seek_over_lba_pairs_ns(hdd: &Hdd) -> f64 {
    pub(super) const SLICES: u64 = 400;
    let sectors = hdd.geometry.sectors();
    let cylinders: Vec<u32> = (0..SLICES)
        .map(|slice| {
            let lba = ((2 * slice + 1) * sectors / (2 * SLICES)).min(sectors - 1);
            hdd.geometry.locate(lba).cylinder
        })
        .collect();
    let mut total = 0.0;
    for &a in &cylinders {
        for &b in &cylinders {
            total += hdd.seek.time_ns(a.abs_diff(b));
        }
    }
    total / (SLICES * SLICES) as f64
}

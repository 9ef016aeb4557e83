//! Zoned geometry: where each LBA lies on the platters, and the angle at which it passes under
//! the head.
//!
//! # Layout
//!
//! The surface is divided into zones of equal radial width (the same number of cylinders each).
//! Sectors per track fall linearly from the outer zone to the inner one, as the track
//! circumference does at constant linear density, so the media rate of the outer zone is about
//! twice that of the inner one. LBA 0 is on the outermost cylinder. Within a zone LBAs fill a
//! track, then the next head of the same cylinder, then the next cylinder ("cylinder mode", as
//! DiskSim's Barracuda and most drives of the era).
//!
//! # Skew
//!
//! Moving to the next track takes time: a head switch within a cylinder, a head switch plus a
//! one-cylinder seek between cylinders. If sector 0 of every track sat at the same angle, a
//! sequential transfer would arrive just after it had passed and lose a whole revolution at every
//! boundary. So the first sector of each track is rotated ("skewed") by the number of sectors
//! that pass during the switch, rounded up: `track_skew` after a head switch, `cylinder_skew`
//! after a cylinder switch. The angle of a track's sector 0 is the sum of the skews of every
//! boundary crossed since the start of the disk.
//!
//! Angles are fractions of a revolution in `[0, 1)`.

/// `angle` brought into `[0, 1)`, for angles within `[-1, 2)` (cheaper than `rem_euclid`).
#[inline]
pub fn wrap_unit(angle: f64) -> f64 {
    if angle >= 1.0 {
        angle - 1.0
    } else if angle < 0.0 {
        angle + 1.0
    } else {
        angle
    }
}

/// One recording zone.
#[derive(Clone, Debug, PartialEq)]
pub struct Zone {
    /// First LBA of the zone.
    pub first_lba: u64,
    /// LBAs in the zone that are in use (the last zone may be partly unused).
    pub sectors: u64,
    /// First cylinder of the zone.
    pub first_cylinder: u32,
    /// Cylinders of the zone that hold LBAs in use.
    pub cylinders: u32,
    /// Sectors on every track of the zone.
    pub sectors_per_track: u32,
    /// Skew between consecutive tracks of a cylinder, sectors.
    pub track_skew: u32,
    /// Skew between the last track of a cylinder and the first of the next, sectors.
    pub cylinder_skew: u32,
    /// Angle of sector 0 on the zone's first track.
    pub base_angle: f64,
}

/// Where an LBA lies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Location {
    /// Index of the zone.
    pub zone: u32,
    /// Cylinder, 0 outermost.
    pub cylinder: u32,
    /// Head (surface).
    pub head: u32,
    /// Sector within the track, 0-based.
    pub sector: u32,
    /// Angle at which the sector starts to pass under the head.
    pub angle: f64,
}

/// The disk's format: zones, heads, and the skews derived from the switch times.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    zones: Vec<Zone>,
    heads: u32,
    sectors: u64,
    cylinders: u32,
    /// The zone of each chunk's first LBA, the LBAs cut in chunks of `1 << chunk_shift`
    /// (at most [`ZONE_CHUNKS`] of them): [`Geometry::zone_of`] starts there and steps over
    /// the zones that begin within the chunk, where a binary search over the zones was a
    /// chain of five dependent loads at every command queued and every access.
    chunk_zone: Vec<u8>,
    chunk_shift: u32,
}

/// Most chunks [`Geometry::zone_of`] keeps a zone for.
const ZONE_CHUNKS: u64 = 4096;

/// The requested format cannot be built.
#[derive(Clone, Debug, PartialEq)]
pub struct GeometryError(pub String);

/// What the format is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct Format {
    /// Addressable sectors (512 bytes).
    pub sectors: u64,
    /// Recording surfaces.
    pub heads: u32,
    /// Number of zones.
    pub zones: u32,
    /// Sectors per track in the outermost zone.
    pub outer_sectors_per_track: u32,
    /// Sectors per track in the innermost zone.
    pub inner_sectors_per_track: u32,
    /// Time to switch heads within a cylinder, ns.
    pub head_switch_ns: f64,
    /// Time to move to the next cylinder (and switch to its first head), ns.
    pub cylinder_switch_ns: f64,
    /// One revolution, ns.
    pub revolution_ns: f64,
}

impl Geometry {
    /// Lays out `format`.
    pub fn new(format: &Format) -> Result<Geometry, GeometryError> {
        let Format {
            sectors,
            heads,
            zones: zone_count,
            outer_sectors_per_track: outer,
            inner_sectors_per_track: inner,
            head_switch_ns,
            cylinder_switch_ns,
            revolution_ns,
        } = *format;
        if sectors == 0 || heads == 0 || zone_count == 0 {
            return Err(GeometryError(
                "sectors, heads and zones must be positive".into(),
            ));
        }
        if inner == 0 || inner > outer {
            return Err(GeometryError(format!(
                "need 0 < inner sectors per track ({inner}) <= outer ({outer})"
            )));
        }
        let sectors_per_track = |zone: u32| -> u32 {
            if zone_count == 1 {
                return outer;
            }
            let fraction = f64::from(zone) / f64::from(zone_count - 1);
            (f64::from(outer) - (f64::from(outer) - f64::from(inner)) * fraction).round() as u32
        };
        let sectors_per_zone_cylinder: u64 = (0..zone_count)
            .map(|zone| u64::from(sectors_per_track(zone)) * u64::from(heads))
            .sum();
        let cylinders_per_zone = sectors.div_ceil(sectors_per_zone_cylinder);
        if cylinders_per_zone > u64::from(u32::MAX) / u64::from(zone_count) {
            return Err(GeometryError(format!(
                "{sectors} sectors need too many cylinders"
            )));
        }
        let cylinders_per_zone = cylinders_per_zone as u32;

        let mut zones = Vec::with_capacity(zone_count as usize);
        let mut first_lba = 0u64;
        let mut first_cylinder = 0u32;
        let mut previous_last_track_angle = 0.0f64;
        for zone in 0..zone_count {
            if first_lba >= sectors {
                break;
            }
            let per_track = sectors_per_track(zone);
            let sector_ns = revolution_ns / f64::from(per_track);
            // Strictly more sectors than the switch lasts, so the head is settled before the
            // first sector of the next track arrives (whole sectors, rounded up).
            let track_skew = (head_switch_ns / sector_ns).floor() as u32 + 1;
            let cylinder_skew = (cylinder_switch_ns / sector_ns).floor() as u32 + 1;
            let capacity = u64::from(cylinders_per_zone) * u64::from(heads) * u64::from(per_track);
            let used = capacity.min(sectors - first_lba);
            let tracks_used = used.div_ceil(u64::from(per_track));
            let cylinders_used = tracks_used.div_ceil(u64::from(heads)) as u32;
            let base_angle = if zone == 0 {
                0.0
            } else {
                // Entering a zone is a cylinder switch: skew by the new zone's cylinder skew.
                wrap_unit(
                    previous_last_track_angle + f64::from(cylinder_skew) / f64::from(per_track),
                )
            };
            let new_zone = Zone {
                first_lba,
                sectors: used,
                first_cylinder,
                cylinders: cylinders_used,
                sectors_per_track: per_track,
                track_skew,
                cylinder_skew,
                base_angle,
            };
            previous_last_track_angle = new_zone.track_angle(tracks_used - 1, heads);
            zones.push(new_zone);
            first_lba += used;
            first_cylinder += cylinders_used;
        }
        debug_assert_eq!(first_lba, sectors);
        // Chunks of a power of two of LBAs, the fewest that keep to ZONE_CHUNKS; at most
        // 256 zones (u8), as the `zones` setting allows.
        let chunk_shift = (0..64)
            .find(|shift| (sectors - 1) >> shift < ZONE_CHUNKS)
            .unwrap_or(63);
        let chunk_zone = (0..=(sectors - 1) >> chunk_shift)
            .map(|chunk| {
                let lba = chunk << chunk_shift;
                let zone = zones.partition_point(|zone| zone.first_lba <= lba) - 1;
                u8::try_from(zone).map_err(|_| {
                    GeometryError(format!("{zone_count} zones: at most 256 are modelled"))
                })
            })
            .collect::<Result<Vec<u8>, _>>()?;
        Ok(Geometry {
            zones,
            heads,
            sectors,
            cylinders: first_cylinder,
            chunk_zone,
            chunk_shift,
        })
    }

    /// Addressable sectors.
    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    /// Cylinders holding LBAs.
    pub fn cylinders(&self) -> u32 {
        self.cylinders
    }

    /// Recording surfaces.
    pub fn heads(&self) -> u32 {
        self.heads
    }

    /// The zones, outermost first.
    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    /// Index of the zone holding `lba`. Requires `lba < sectors()`.
    #[inline]
    pub fn zone_of(&self, lba: u64) -> usize {
        debug_assert!(lba < self.sectors);
        let mut zone = usize::from(self.chunk_zone[(lba >> self.chunk_shift) as usize]);
        while self
            .zones
            .get(zone + 1)
            .is_some_and(|next| next.first_lba <= lba)
        {
            zone += 1;
        }
        zone
    }

    /// Where `lba` lies. Requires `lba < sectors()`.
    #[inline]
    pub fn locate(&self, lba: u64) -> Location {
        let zone_index = self.zone_of(lba);
        let zone = &self.zones[zone_index];
        let offset = lba - zone.first_lba;
        let per_track = u64::from(zone.sectors_per_track);
        let track = offset / per_track;
        let sector = (offset % per_track) as u32;
        let heads = u64::from(self.heads);
        // Sectors from the track's sector 0 (skewed) to this one, within one revolution.
        let from_zone_base =
            (zone.track_skew_sectors(track, self.heads) + u64::from(sector)) % per_track;
        let angle = wrap_unit(zone.base_angle + from_zone_base as f64 / per_track as f64);
        Location {
            zone: zone_index as u32,
            cylinder: zone.first_cylinder + (track / heads) as u32,
            head: (track % heads) as u32,
            sector,
            angle,
        }
    }

    /// The LBA at `cylinder`, `head`, `sector`, if that place holds one.
    pub fn lba_of(&self, cylinder: u32, head: u32, sector: u32) -> Option<u64> {
        if head >= self.heads {
            return None;
        }
        let zone = self.zones.iter().find(|zone| {
            cylinder >= zone.first_cylinder && cylinder - zone.first_cylinder < zone.cylinders
        })?;
        if sector >= zone.sectors_per_track {
            return None;
        }
        let track =
            u64::from(cylinder - zone.first_cylinder) * u64::from(self.heads) + u64::from(head);
        let offset = track * u64::from(zone.sectors_per_track) + u64::from(sector);
        (offset < zone.sectors).then_some(zone.first_lba + offset)
    }

    /// Time for one sector of `zone` to pass under the head, ns.
    #[inline]
    pub fn sector_ns(&self, zone: u32, revolution_ns: f64) -> f64 {
        revolution_ns / f64::from(self.zones[zone as usize].sectors_per_track)
    }

    /// Last LBA (exclusive) of the track holding `location`, given `lba` at that location.
    #[inline]
    pub fn track_end(&self, lba: u64, location: &Location) -> u64 {
        let zone = &self.zones[location.zone as usize];
        let end = lba - u64::from(location.sector) + u64::from(zone.sectors_per_track);
        end.min(zone.first_lba + zone.sectors)
    }

    /// Mean media rate of `zone` in bytes per second at `revolution_ns` per revolution.
    pub fn media_rate(&self, zone: usize, revolution_ns: f64) -> f64 {
        f64::from(self.zones[zone].sectors_per_track) * 512.0 / (revolution_ns * 1e-9)
    }

    /// Sustained rate of `zone` reading whole cylinders, counting the skews (head and cylinder
    /// switches), bytes per second. The datasheet's "sustained" figure, `A / (B + C + D)`.
    pub fn sustained_rate(&self, zone: usize, revolution_ns: f64) -> f64 {
        let zone = &self.zones[zone];
        let heads = f64::from(self.heads);
        let per_track = f64::from(zone.sectors_per_track);
        let sectors_passed = heads * per_track
            + (heads - 1.0) * f64::from(zone.track_skew)
            + f64::from(zone.cylinder_skew);
        heads * per_track * 512.0 / (sectors_passed / per_track * revolution_ns * 1e-9)
    }
}

impl Zone {
    /// Total skew, in sectors, of the zone's track `track` (counted from the zone's first
    /// track): the sum over every boundary crossed since the zone's first track.
    #[inline]
    fn track_skew_sectors(&self, track: u64, heads: u32) -> u64 {
        let cylinder_switches = track / u64::from(heads);
        let head_switches = track - cylinder_switches;
        cylinder_switches * u64::from(self.cylinder_skew)
            + head_switches * u64::from(self.track_skew)
    }

    /// Angle of sector 0 on the zone's track `track` (counted from the zone's first track).
    fn track_angle(&self, track: u64, heads: u32) -> f64 {
        let per_track = u64::from(self.sectors_per_track);
        // Reduce modulo the track before converting, so the fraction keeps full precision.
        let skew = self.track_skew_sectors(track, heads) % per_track;
        wrap_unit(self.base_angle + skew as f64 / per_track as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Geometry {
        Geometry::new(&Format {
            sectors: 100_000,
            heads: 3,
            zones: 4,
            outer_sectors_per_track: 200,
            inner_sectors_per_track: 100,
            head_switch_ns: 1.0e6,
            cylinder_switch_ns: 1.2e6,
            revolution_ns: 60e9 / 7200.0,
        })
        .unwrap()
    }

    /// Every LBA maps to a distinct place and back, including across zone boundaries.
    #[test]
    fn mapping_round_trips() {
        let geometry = small();
        for lba in 0..geometry.sectors() {
            let location = geometry.locate(lba);
            assert_eq!(
                geometry.lba_of(location.cylinder, location.head, location.sector),
                Some(lba)
            );
        }
    }

    /// The zone found through the chunks is the one a search of the zones finds, at every
    /// zone's first and last LBA and between, for disks of one zone to 256, some zones smaller
    /// than a chunk, and at the largest LBAs.
    #[test]
    fn zone_of_matches_a_search() {
        let formats = [
            (100_000, 3, 4, 200, 100),
            (1 << 20, 1, 1, 64, 64),
            (5_000, 2, 256, 600, 300),
            (u64::from(u32::MAX) * 2, 4, 30, 2000, 1000),
            (1_000_003, 5, 17, 900, 301),
        ];
        for (sectors, heads, zones, outer, inner) in formats {
            let geometry = Geometry::new(&Format {
                sectors,
                heads,
                zones,
                outer_sectors_per_track: outer,
                inner_sectors_per_track: inner,
                head_switch_ns: 1.0e6,
                cylinder_switch_ns: 1.2e6,
                revolution_ns: 60e9 / 7200.0,
            })
            .unwrap();
            let search = |lba: u64| {
                geometry
                    .zones()
                    .partition_point(|zone| zone.first_lba <= lba)
                    - 1
            };
            let mut lbas = vec![0, sectors - 1, sectors / 2, sectors / 3];
            for zone in geometry.zones() {
                lbas.extend([zone.first_lba, zone.first_lba + zone.sectors - 1]);
                lbas.push(zone.first_lba.saturating_sub(1));
            }
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for _ in 0..10_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                lbas.push(x % sectors);
            }
            for lba in lbas {
                assert_eq!(geometry.zone_of(lba), search(lba), "{sectors} sectors, lba {lba}");
            }
        }
    }

    /// Sectors per track fall from the outside in, and cylinders are contiguous.
    #[test]
    fn zones_fall_inwards() {
        let geometry = small();
        let zones = geometry.zones();
        assert_eq!(zones[0].sectors_per_track, 200);
        assert_eq!(zones.last().unwrap().sectors_per_track, 100);
        for pair in zones.windows(2) {
            assert!(pair[0].sectors_per_track > pair[1].sectors_per_track);
            assert_eq!(
                pair[0].first_cylinder + pair[0].cylinders,
                pair[1].first_cylinder
            );
            assert_eq!(pair[0].first_lba + pair[0].sectors, pair[1].first_lba);
        }
    }

    /// Skew covers the switch: the first sector of the next track starts after the switch ends
    /// and less than a sector later.
    #[test]
    fn skew_covers_the_switch() {
        let geometry = small();
        let zone = &geometry.zones()[0];
        let revolution = 60e9 / 7200.0;
        let sector_ns = revolution / f64::from(zone.sectors_per_track);
        let track_skew_ns = f64::from(zone.track_skew) * sector_ns;
        assert!(track_skew_ns > 1.0e6 && track_skew_ns <= 1.0e6 + sector_ns);
        // Track 0 ends where track 1 begins minus the skew.
        let end_of_track0 = geometry.locate(199).angle + 1.0 / 200.0;
        let start_of_track1 = geometry.locate(200).angle;
        let gap = (start_of_track1 - end_of_track0).rem_euclid(1.0);
        assert!((gap - f64::from(zone.track_skew) / 200.0).abs() < 1e-9);
    }
}

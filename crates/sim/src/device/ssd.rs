//! `ssd`: an NVMe-class flash drive: channels x dies, pages striped across them, a DRAM write
//! buffer flushed to the dies in the background.
//!
//! # How a command is served
//!
//! - **Read**: after the controller overhead (command fetch, FTL lookup) the read is split into
//!   page reads, each queued at the die its page is striped to. A die senses the page (`read_us`,
//!   tR), then moves the requested bytes over its channel, which the dies of that channel share.
//!   When every page is in, the data crosses the host link (PCIe) and the command completes.
//!   A die serves queued reads before programs, but never suspends a program that has started:
//!   a read of a die busy programming waits for it.
//! - **Write**: while the DRAM buffer has room the data is accepted at once and the command
//!   completes after the write overhead and the host transfer (~20 us). Each 4 KiB unit becomes
//!   dirty at the die of its page; an idle die programs up to one page of its dirty units
//!   (channel transfer, then `program_us`). When the buffer is full, writes wait, in order.
//! - **Flush**: completes when every unit accepted before it is programmed.
//! - **Discard**: completes after the write overhead; nothing else is modelled.
//!
//! So IOPS rise with queue depth while there are idle dies to spread over (channels x dies) and
//! flatten beyond.
//!
//! # Left for later
//!
//! No FTL: the LBA-to-die mapping is static striping, writes go to the die of their own page
//! (no log-structured placement, no packing of small writes from different pages), reads of
//! data still in the write buffer are served from flash, and there is no garbage collection,
//! over-provisioning, wear levelling, erase, SLC cache, program suspend or multi-plane operation.
//! Channel transfers are booked in the order the dies start their operations.

use super::{parameter, parse_flag, parse_integer, parse_number, Device, DeviceError};
use iosched_core::{Nanos, Op, Request};
use iosched_fio::Parameter;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// The buffer's allocation unit, bytes.
pub const UNIT_BYTES: u64 = 4096;

/// The settable parameters of the `ssd` model.
#[derive(Clone, Debug, PartialEq)]
pub struct SsdConfig {
    /// Addressable bytes.
    pub capacity_bytes: u64,
    /// Flash channels.
    pub channels: u32,
    /// Dies on each channel.
    pub dies_per_channel: u32,
    /// Flash page, KiB.
    pub page_kib: u64,
    /// Page sense time tR, us.
    pub read_us: f64,
    /// Page program time tPROG, us.
    pub program_us: f64,
    /// Channel (flash bus) rate, MB/s.
    pub channel_mb_per_s: f64,
    /// Host link rate, MB/s.
    pub host_mb_per_s: f64,
    /// Controller overhead of a read, us.
    pub read_overhead_us: f64,
    /// Controller overhead of a write, flush or discard, us.
    pub write_overhead_us: f64,
    /// DRAM write buffer, MiB.
    pub write_buffer_mib: u64,
    /// Buffer writes in DRAM (off: every write waits for its programs).
    pub write_cache: bool,
    /// Commands accepted at once.
    pub queue_depth: u32,
}

impl Default for SsdConfig {
    fn default() -> Self {
        SsdConfig {
            capacity_bytes: 512_000_000_000,
            channels: 8,
            dies_per_channel: 4,
            page_kib: 16,
            read_us: 60.0,
            program_us: 750.0,
            channel_mb_per_s: 800.0,
            host_mb_per_s: 3500.0,
            read_overhead_us: 20.0,
            write_overhead_us: 18.0,
            write_buffer_mib: 32,
            write_cache: true,
            queue_depth: 128,
        }
    }
}

/// One settable parameter.
struct Setting {
    name: &'static str,
    unit: &'static str,
    note: &'static str,
}

/// Each derived parameter (see `parameters`) and the settings it follows from.
pub const DERIVED_FROM: &[(&str, &[&str])] = &[
    ("dies", &["channels", "dies_per_channel"]),
    (
        "expected_qd1_read_us",
        &["read_overhead_us", "read_us", "channel_mb_s", "host_mb_s"],
    ),
    (
        "max_random_read_iops",
        &["channels", "dies_per_channel", "read_us", "channel_mb_s"],
    ),
    (
        "max_write_mb_s",
        &[
            "channels",
            "dies_per_channel",
            "page_kib",
            "program_us",
            "channel_mb_s",
        ],
    ),
];

const SETTINGS: &[Setting] = &[
    Setting {
        name: "capacity_gb",
        unit: "GB",
        note: "addressable size (10^9 B), a 512 GB class drive",
    },
    Setting {
        name: "channels",
        unit: "channels",
        note: "flash channels; MQSim's default 8",
    },
    Setting {
        name: "dies_per_channel",
        unit: "dies",
        note:
            "dies sharing a channel; MQSim: 4 chips per channel (x2 dies), here 4 dies: 32 in all",
    },
    Setting {
        name: "page_kib",
        unit: "KiB",
        note: "flash page, the striping unit; 16 KiB in TLC of the NVMe era",
    },
    Setting {
        name: "read_us",
        unit: "us",
        note: "page sense tR; SimpleSSD TLC LSB 58 us, MQSim MLC 75 us",
    },
    Setting {
        name: "program_us",
        unit: "us",
        note: "page program tPROG; MQSim MLC 750 us (SimpleSSD TLC LSB 558 us)",
    },
    Setting {
        name: "channel_mb_s",
        unit: "MB/s",
        note: "flash bus per channel; ONFI 4 / Toggle 800 MT/s x 8 bit",
    },
    Setting {
        name: "host_mb_s",
        unit: "MB/s",
        note: "host link; PCIe 3.0 x4 after protocol overhead",
    },
    Setting {
        name: "read_overhead_us",
        unit: "us",
        note: "NVMe command handling and FTL lookup; with tR, channel and link a 4 KiB read at \
               QD1 takes ~86 us (REFERENCE: NVMe TLC 85-115 us)",
    },
    Setting {
        name: "write_overhead_us",
        unit: "us",
        note: "write into the DRAM buffer; with the link ~20 us per 4 KiB (REFERENCE)",
    },
    Setting {
        name: "write_buffer_mib",
        unit: "MiB",
        note: "DRAM write buffer (our choice; sustained writes are die-bound whatever its size)",
    },
    Setting {
        name: "write_cache",
        unit: "on/off",
        note: "buffer writes in DRAM (power-loss protected drives always do)",
    },
    Setting {
        name: "queue_depth",
        unit: "commands",
        note: "commands accepted at once (one NVMe queue pair)",
    },
];

impl SsdConfig {
    /// Applies one setting.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), DeviceError> {
        let number = |min: f64, max: f64| -> Result<f64, DeviceError> {
            let number = parse_number(name, value)?;
            if number < min || number > max {
                return Err(DeviceError::BadValue {
                    name: name.to_string(),
                    value: value.to_string(),
                    reason: format!("must be within {min}..={max}"),
                });
            }
            Ok(number)
        };
        match name {
            "capacity_gb" => {
                let bytes = number(0.1, 1_000_000.0)? * 1e9;
                self.capacity_bytes = (bytes as u64 / UNIT_BYTES) * UNIT_BYTES;
            }
            "channels" => self.channels = parse_integer(name, value, 1, 64)? as u32,
            "dies_per_channel" => self.dies_per_channel = parse_integer(name, value, 1, 64)? as u32,
            "page_kib" => {
                let kib = parse_integer(name, value, 4, 64)?;
                if !kib.is_power_of_two() {
                    return Err(DeviceError::BadValue {
                        name: name.to_string(),
                        value: value.to_string(),
                        reason: "must be a power of two".into(),
                    });
                }
                self.page_kib = kib;
            }
            "read_us" => self.read_us = number(0.0, 100_000.0)?,
            "program_us" => self.program_us = number(0.0, 1_000_000.0)?,
            "channel_mb_s" => self.channel_mb_per_s = number(1.0, 100_000.0)?,
            "host_mb_s" => self.host_mb_per_s = number(1.0, 1_000_000.0)?,
            "read_overhead_us" => self.read_overhead_us = number(0.0, 100_000.0)?,
            "write_overhead_us" => self.write_overhead_us = number(0.0, 100_000.0)?,
            "write_buffer_mib" => self.write_buffer_mib = parse_integer(name, value, 1, 1 << 20)?,
            "write_cache" => self.write_cache = parse_flag(name, value)?,
            "queue_depth" => self.queue_depth = parse_integer(name, value, 1, 65_536)? as u32,
            _ => {
                return Err(DeviceError::UnknownParameter {
                    model: "ssd".into(),
                    name: name.to_string(),
                    known: SETTINGS.iter().map(|s| s.name.to_string()).collect(),
                })
            }
        }
        Ok(())
    }

    /// The value of setting `name` as text.
    pub fn get(&self, name: &str) -> String {
        match name {
            "capacity_gb" => format!("{:.3}", self.capacity_bytes as f64 / 1e9),
            "channels" => self.channels.to_string(),
            "dies_per_channel" => self.dies_per_channel.to_string(),
            "page_kib" => self.page_kib.to_string(),
            "read_us" => format!("{}", self.read_us),
            "program_us" => format!("{}", self.program_us),
            "channel_mb_s" => format!("{}", self.channel_mb_per_s),
            "host_mb_s" => format!("{}", self.host_mb_per_s),
            "read_overhead_us" => format!("{}", self.read_overhead_us),
            "write_overhead_us" => format!("{}", self.write_overhead_us),
            "write_buffer_mib" => self.write_buffer_mib.to_string(),
            "write_cache" => if self.write_cache { "on" } else { "off" }.to_string(),
            "queue_depth" => self.queue_depth.to_string(),
            _ => unreachable!("every setting has a getter: {name}"),
        }
    }
}

/// What a die is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DieWork {
    /// Reading `bytes` of a page for the command in `slot`.
    Read { slot: u32 },
    /// Programming `units` buffered units.
    Program { units: u64 },
}

/// One flash die.
#[derive(Clone, Debug, Default)]
struct Die {
    /// Page reads waiting: (slot, bytes).
    reads: VecDeque<(u32, u64)>,
    /// Buffered units waiting to be programmed here.
    dirty_units: u64,
    /// Units ever accepted into the buffer for this die.
    accepted_units: u64,
    /// Units ever programmed here.
    programmed_units: u64,
    busy: Option<DieWork>,
    busy_ns: u64,
}

/// What an accepted command waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Wait {
    /// Page reads still outstanding.
    Pages(u32),
    /// Room in the write buffer.
    Room,
    /// Units programmed: per die, the count that must be reached.
    Programs(Vec<u64>),
    /// Its completion is scheduled.
    Completing,
}

#[derive(Clone, Debug)]
struct Command {
    request: Request,
    accepted: Nanos,
    wait: Wait,
}

/// Internal events, ordered by (time, sequence).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A read's overhead is done: queue its pages.
    ReadReady(u32),
    /// A die finished its operation.
    DieDone(u32),
    /// A command completes.
    Complete(u32),
}

#[derive(Clone, Debug, Default)]
struct Counters {
    reads: u64,
    writes: u64,
    flushes: u64,
    discards: u64,
    completed: u64,
    page_reads: u64,
    reads_behind_program: u64,
    programs: u64,
    programmed_units: u64,
    writes_waited_for_room: u64,
}

/// The SSD model.
pub struct Ssd {
    config: SsdConfig,
    read_ns: Nanos,
    program_ns: Nanos,
    read_overhead: Nanos,
    write_overhead: Nanos,
    channel_ns_per_byte: f64,
    host_ns_per_byte: f64,
    page_bytes: u64,
    units_per_page: u64,
    buffer_capacity_units: u64,

    dies: Vec<Die>,
    channel_free_at: Vec<Nanos>,
    host_free_at: Nanos,
    slots: Vec<Option<Command>>,
    free_slots: Vec<u32>,
    in_flight: u32,
    events: BinaryHeap<Reverse<(Nanos, u64, Event)>>,
    event_sequence: u64,
    buffer_used_units: u64,
    waiting_for_room: VecDeque<u32>,
    /// Write-through writes and flushes waiting for programs.
    waiting_for_programs: Vec<u32>,
    now: Nanos,
    counters: Counters,
}

fn us_to_nanos(us: f64) -> Nanos {
    (us * 1e3).round() as Nanos
}

impl Ssd {
    /// Builds the model from `settings` (name, value) over the defaults.
    pub fn from_settings(settings: &[(String, String)]) -> Result<Ssd, DeviceError> {
        let mut config = SsdConfig::default();
        for (name, value) in settings {
            config.set(name, value)?;
        }
        Ok(Ssd::new(config))
    }

    /// Builds the model from `config`. It draws no random numbers.
    pub fn new(config: SsdConfig) -> Ssd {
        let dies = (config.channels * config.dies_per_channel) as usize;
        let page_bytes = config.page_kib * 1024;
        let queue_depth = config.queue_depth as usize;
        Ssd {
            read_ns: us_to_nanos(config.read_us),
            program_ns: us_to_nanos(config.program_us),
            read_overhead: us_to_nanos(config.read_overhead_us),
            write_overhead: us_to_nanos(config.write_overhead_us),
            channel_ns_per_byte: 1e9 / (config.channel_mb_per_s * 1e6),
            host_ns_per_byte: 1e9 / (config.host_mb_per_s * 1e6),
            page_bytes,
            units_per_page: page_bytes / UNIT_BYTES,
            buffer_capacity_units: config.write_buffer_mib * (1 << 20) / UNIT_BYTES,
            dies: vec![Die::default(); dies],
            channel_free_at: vec![0; config.channels as usize],
            host_free_at: 0,
            slots: (0..queue_depth).map(|_| None).collect(),
            free_slots: (0..queue_depth as u32).rev().collect(),
            in_flight: 0,
            events: BinaryHeap::with_capacity(queue_depth * 2),
            event_sequence: 0,
            buffer_used_units: 0,
            waiting_for_room: VecDeque::new(),
            waiting_for_programs: Vec::new(),
            now: 0,
            counters: Counters::default(),
            config,
        }
    }

    /// The parameters in force.
    pub fn config(&self) -> &SsdConfig {
        &self.config
    }

    /// The die page `page` is striped to: consecutive pages go to consecutive channels first,
    /// then to the next die of each channel.
    #[inline]
    fn die_of_page(&self, page: u64) -> usize {
        (page % self.dies.len() as u64) as usize
    }

    #[inline]
    fn channel_of(&self, die: usize) -> usize {
        die % self.config.channels as usize
    }

    fn schedule(&mut self, at: Nanos, event: Event) {
        debug_assert!(at >= self.now);
        self.event_sequence += 1;
        self.events.push(Reverse((at, self.event_sequence, event)));
    }

    fn complete_at(&mut self, slot: u32, at: Nanos) {
        self.slots[slot as usize]
            .as_mut()
            .expect("slot in use")
            .wait = Wait::Completing;
        self.schedule(at, Event::Complete(slot));
    }

    /// Moves `bytes` over the host link no earlier than `ready`; returns when it is done.
    fn host_transfer(&mut self, ready: Nanos, bytes: u64) -> Nanos {
        let start = ready.max(self.host_free_at);
        self.host_free_at = start + (bytes as f64 * self.host_ns_per_byte).ceil() as Nanos;
        self.host_free_at
    }

    /// Books `bytes` on `channel` no earlier than `ready`; returns when the transfer is done.
    fn channel_transfer(&mut self, channel: usize, ready: Nanos, bytes: u64) -> Nanos {
        let start = ready.max(self.channel_free_at[channel]);
        let done = start + (bytes as f64 * self.channel_ns_per_byte).ceil() as Nanos;
        self.channel_free_at[channel] = done;
        done
    }

    /// Starts the next operation of idle die `die` at `now`: a queued read first, else a
    /// program of up to one page of its dirty units.
    fn start_die(&mut self, die: usize, now: Nanos) {
        if self.dies[die].busy.is_some() {
            return;
        }
        let channel = self.channel_of(die);
        let (work, done) = if let Some((slot, bytes)) = self.dies[die].reads.pop_front() {
            self.counters.page_reads += 1;
            let done = self.channel_transfer(channel, now + self.read_ns, bytes);
            (DieWork::Read { slot }, done)
        } else if self.dies[die].dirty_units > 0 {
            let units = self.dies[die].dirty_units.min(self.units_per_page);
            self.dies[die].dirty_units -= units;
            self.counters.programs += 1;
            let loaded = self.channel_transfer(channel, now, units * UNIT_BYTES);
            (DieWork::Program { units }, loaded + self.program_ns)
        } else {
            return;
        };
        let state = &mut self.dies[die];
        state.busy = Some(work);
        state.busy_ns += done - now;
        self.schedule(done, Event::DieDone(die as u32));
    }

    /// Accepts the write in `slot` into the buffer at `now`.
    fn accept_write(&mut self, slot: u32, now: Nanos) {
        let command = self.slots[slot as usize].as_ref().expect("slot in use");
        let (offset, end, accepted) = (
            command.request.offset,
            command.request.end(),
            command.accepted,
        );
        let first_unit = offset / UNIT_BYTES;
        let end_unit = end.div_ceil(UNIT_BYTES);
        self.buffer_used_units += end_unit - first_unit;
        for unit in first_unit..end_unit {
            let die = self.die_of_page(unit / self.units_per_page);
            self.dies[die].dirty_units += 1;
            self.dies[die].accepted_units += 1;
            self.start_die(die, now);
        }
        if self.config.write_cache {
            let ready = now.max(accepted + self.write_overhead);
            let done = self.host_transfer(ready, end - offset);
            self.complete_at(slot, done);
        } else {
            self.wait_for_programs(slot, now);
        }
    }

    /// Makes the command in `slot` wait until every unit accepted so far is programmed.
    fn wait_for_programs(&mut self, slot: u32, now: Nanos) {
        let targets: Vec<u64> = self.dies.iter().map(|die| die.accepted_units).collect();
        if self.programs_reached(&targets) {
            let ready = now.max(self.command(slot).accepted + self.write_overhead);
            self.complete_at(slot, ready);
            return;
        }
        self.slots[slot as usize]
            .as_mut()
            .expect("slot in use")
            .wait = Wait::Programs(targets);
        self.waiting_for_programs.push(slot);
    }

    fn programs_reached(&self, targets: &[u64]) -> bool {
        self.dies
            .iter()
            .zip(targets)
            .all(|(die, &target)| die.programmed_units >= target)
    }

    fn command(&self, slot: u32) -> &Command {
        self.slots[slot as usize].as_ref().expect("slot in use")
    }

    fn units_of(request: &Request) -> u64 {
        request.end().div_ceil(UNIT_BYTES) - request.offset / UNIT_BYTES
    }

    /// Writes waiting for room enter the buffer in order while they fit (one larger than the
    /// whole buffer enters an empty one).
    fn admit_waiting_writes(&mut self, now: Nanos) {
        while let Some(&slot) = self.waiting_for_room.front() {
            let units = Ssd::units_of(&self.command(slot).request);
            if self.buffer_used_units + units > self.buffer_capacity_units
                && self.buffer_used_units > 0
            {
                break;
            }
            self.waiting_for_room.pop_front();
            self.accept_write(slot, now);
        }
    }

    /// Commands waiting for programs whose targets are reached complete.
    fn complete_programmed(&mut self, now: Nanos) {
        let mut index = 0;
        while index < self.waiting_for_programs.len() {
            let slot = self.waiting_for_programs[index];
            let reached = match &self.command(slot).wait {
                Wait::Programs(targets) => self.programs_reached(targets),
                other => unreachable!("waiting for programs, found {other:?}"),
            };
            if reached {
                self.waiting_for_programs.swap_remove(index);
                let ready = now.max(self.command(slot).accepted + self.write_overhead);
                self.complete_at(slot, ready);
            } else {
                index += 1;
            }
        }
    }

    fn handle(&mut self, at: Nanos, event: Event, done: &mut Vec<(Nanos, Request)>) {
        match event {
            Event::ReadReady(slot) => {
                let request = &self.command(slot).request;
                let (offset, end) = (request.offset, request.end());
                let mut pages = 0u32;
                let mut position = offset;
                while position < end {
                    let page = position / self.page_bytes;
                    let page_end = ((page + 1) * self.page_bytes).min(end);
                    let die = self.die_of_page(page);
                    if matches!(self.dies[die].busy, Some(DieWork::Program { .. })) {
                        self.counters.reads_behind_program += 1;
                    }
                    self.dies[die].reads.push_back((slot, page_end - position));
                    pages += 1;
                    self.start_die(die, at);
                    position = page_end;
                }
                // Pages already done cannot be: each one ends in the future.
                self.slots[slot as usize]
                    .as_mut()
                    .expect("slot in use")
                    .wait = Wait::Pages(pages);
            }
            Event::DieDone(die) => {
                let die = die as usize;
                match self.dies[die].busy.take().expect("die was busy") {
                    DieWork::Read { slot } => {
                        let command = self.slots[slot as usize].as_mut().expect("slot in use");
                        let Wait::Pages(pages) = &mut command.wait else {
                            unreachable!("a read waits for pages");
                        };
                        *pages -= 1;
                        if *pages == 0 {
                            let bytes = command.request.len;
                            let sent = self.host_transfer(at, bytes);
                            self.complete_at(slot, sent);
                        }
                    }
                    DieWork::Program { units } => {
                        self.dies[die].programmed_units += units;
                        self.counters.programmed_units += units;
                        self.buffer_used_units -= units;
                        self.admit_waiting_writes(at);
                        self.complete_programmed(at);
                    }
                }
                self.start_die(die, at);
            }
            Event::Complete(slot) => {
                let command = self.slots[slot as usize].take().expect("slot in use");
                self.free_slots.push(slot);
                self.in_flight -= 1;
                self.counters.completed += 1;
                done.push((at, command.request));
            }
        }
    }
}

impl Device for Ssd {
    fn model(&self) -> &'static str {
        "ssd"
    }

    fn capacity(&self) -> u64 {
        self.config.capacity_bytes
    }

    fn queue_depth(&self) -> u32 {
        self.config.queue_depth
    }

    fn in_flight(&self) -> u32 {
        self.in_flight
    }

    fn submit(&mut self, request: Request, now: Nanos) {
        assert!(
            self.in_flight < self.config.queue_depth,
            "device queue is full"
        );
        assert!(now >= self.now, "time went backwards");
        debug_assert!(
            request.op == Op::Flush || request.end() <= self.config.capacity_bytes,
            "request beyond the end of the device"
        );
        self.now = now;
        let op = request.op;
        let empty = request.len == 0;
        let units = Ssd::units_of(&request);
        let slot = self
            .free_slots
            .pop()
            .expect("a free slot below queue depth");
        self.slots[slot as usize] = Some(Command {
            request,
            accepted: now,
            wait: Wait::Completing,
        });
        self.in_flight += 1;
        match op {
            Op::Read => {
                self.counters.reads += 1;
                let event = if empty {
                    Event::Complete(slot)
                } else {
                    Event::ReadReady(slot)
                };
                self.schedule(now + self.read_overhead, event);
            }
            Op::Write => {
                self.counters.writes += 1;
                if empty {
                    self.complete_at(slot, now + self.write_overhead);
                } else if self.waiting_for_room.is_empty()
                    && (self.buffer_used_units + units <= self.buffer_capacity_units
                        || self.buffer_used_units == 0)
                {
                    self.accept_write(slot, now);
                } else {
                    self.counters.writes_waited_for_room += 1;
                    self.slots[slot as usize]
                        .as_mut()
                        .expect("slot in use")
                        .wait = Wait::Room;
                    self.waiting_for_room.push_back(slot);
                }
            }
            Op::Flush => {
                self.counters.flushes += 1;
                self.wait_for_programs(slot, now);
            }
            Op::Discard => {
                self.counters.discards += 1;
                self.complete_at(slot, now + self.write_overhead);
            }
        }
    }

    fn next_event(&self) -> Option<Nanos> {
        self.events.peek().map(|Reverse((at, _, _))| *at)
    }

    fn advance(&mut self, now: Nanos, done: &mut Vec<(Nanos, Request)>) {
        assert!(now >= self.now, "time went backwards");
        while let Some(&Reverse((at, _, event))) = self.events.peek() {
            if at > now {
                break;
            }
            self.events.pop();
            self.now = at;
            self.handle(at, event, done);
        }
        self.now = now;
    }

    fn parameters(&self) -> Vec<Parameter> {
        let mut parameters: Vec<Parameter> = SETTINGS
            .iter()
            .map(|s| parameter(s.name, self.config.get(s.name), s.unit, s.note))
            .collect();
        let dies = self.dies.len() as f64;
        let transfer_4k_us = 4096.0 * self.channel_ns_per_byte / 1e3;
        let qd1_read_us = self.config.read_overhead_us
            + self.config.read_us
            + transfer_4k_us
            + 4096.0 * self.host_ns_per_byte / 1e3;
        let die_read_us = self.config.read_us + transfer_4k_us;
        parameters.extend([
            parameter(
                "dies",
                self.dies.len(),
                "dies",
                "derived: channels x dies_per_channel, the parallelism",
            ),
            parameter(
                "expected_qd1_read_us",
                format!("{qd1_read_us:.1}"),
                "us",
                "derived: overhead + tR + 4 KiB over the channel + 4 KiB over the host link",
            ),
            parameter(
                "max_random_read_iops",
                format!("{:.0}", dies / (die_read_us * 1e-6)),
                "IOPS",
                "derived: every die busy with 4 KiB reads (tR + channel transfer each)",
            ),
            parameter(
                "max_write_mb_s",
                format!(
                    "{:.0}",
                    dies * self.page_bytes as f64
                        / ((self.config.program_us
                            + self.page_bytes as f64 * self.channel_ns_per_byte / 1e3)
                            * 1e-6)
                        / 1e6
                ),
                "MB/s",
                "derived: every die programming full pages back to back",
            ),
        ]);
        parameters
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let c = &self.counters;
        let die_busy_ns: u64 = self.dies.iter().map(|die| die.busy_ns).sum();
        [
            ("reads", c.reads as f64),
            ("writes", c.writes as f64),
            ("flushes", c.flushes as f64),
            ("discards", c.discards as f64),
            ("completed", c.completed as f64),
            ("page_reads", c.page_reads as f64),
            ("reads_behind_program", c.reads_behind_program as f64),
            ("programs", c.programs as f64),
            ("programmed_bytes", (c.programmed_units * UNIT_BYTES) as f64),
            ("writes_waited_for_room", c.writes_waited_for_room as f64),
            (
                "buffered_bytes",
                (self.buffer_used_units * UNIT_BYTES) as f64,
            ),
            ("die_busy_ms", die_busy_ns as f64 / 1e6),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
    }
}


/// This model's entry in the device catalog (`iosched devices`).
pub const MODEL: super::ModelInfo = super::ModelInfo {
        name: "ssd",
        summary: "NVMe-class flash drive: 8 channels x 4 dies, tR 60 us, tPROG 750 us, DRAM \
                  write buffer",
        build: |settings, _seed| Ok(Box::new(Ssd::from_settings(settings)?)),
        derived_from: DERIVED_FROM,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed setting can be read back and set to its own value.
    #[test]
    fn every_setting_round_trips() {
        let defaults = SsdConfig::default();
        let mut config = SsdConfig::default();
        for setting in SETTINGS {
            config
                .set(setting.name, &defaults.get(setting.name))
                .unwrap();
        }
        assert_eq!(config, defaults);
        assert!(config.set("page_kib", "12").is_err());
        assert!(config.set("nonsense", "1").is_err());
    }
}

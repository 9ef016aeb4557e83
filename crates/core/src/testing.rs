//! Small constructors for tests, here and in the crates that build on core.

use crate::group::GroupId;
use crate::ioprio::IoPrio;
use crate::request::{FlowId, Op, Request, RequestId};

/// A request from flow 0 in the root group with no priority, arriving at time 0.
pub fn request(id: u64, op: Op, offset: u64, len: u64) -> Request {
    Request::new(
        RequestId(id),
        op,
        offset,
        len,
        op == Op::Read,
        IoPrio::NONE,
        FlowId(0),
        GroupId::ROOT,
        0,
    )
}

/// A seeded xorshift generator: the draws a test makes from its one seed (a zero seed is
/// made non-zero, as xorshift would stay at zero).
#[derive(Clone, Debug)]
pub struct XorShift(pub u64);

impl XorShift {
    /// A generator from `seed`, spread so that nearby seeds draw differently.
    pub fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next draw.
    pub fn draw(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A draw below `bound` (not 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.draw() % bound
    }
}

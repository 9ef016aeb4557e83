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

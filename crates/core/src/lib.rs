//! # iosched-core
//!
//! The pure heart of iosched: the request model, Linux I/O priorities, cgroup-like groups, the
//! [`Policy`] contract modelled on the kernel's elevator hooks, the [`Elevator`] that adds the
//! queue limits every scheduler shares, and every scheduling policy.
//!
//! Nothing here reads a clock, performs I/O, starts a thread or draws unseeded random numbers:
//! time is a parameter ([`Nanos`]). The same policy object therefore runs in the simulator's
//! virtual time and on a real device in wall time.
//!
//! ```
//! use iosched_core::{policies, Dispatch, Elevator, FlowId, GroupId, IoPrio, Op, Request, RequestId};
//!
//! let mut elevator = Elevator::new(policies::build("deadline").unwrap(), 64);
//! elevator.set("read_expire", "250").unwrap();
//! for (id, offset) in [(1, 8192), (2, 0), (3, 4096)] {
//!     let request = Request::new(RequestId(id), Op::Read, offset, 4096, true, IoPrio::NONE,
//!                                FlowId(0), GroupId::ROOT, 0);
//!     elevator.submit(request, 0).unwrap();
//! }
//! // The three reads are contiguous: they merged into one 12 KiB request.
//! match elevator.dispatch(1) {
//!     Dispatch::Request(request) => assert_eq!((request.offset, request.len), (0, 12_288)),
//!     other => panic!("{other:?}"),
//! }
//! ```

#![warn(missing_docs)]

pub mod elevator;
pub mod fq;
pub mod group;
pub mod iocost;
pub mod iolatency;
pub mod ioprio;
pub mod limits;
pub mod ordmap;
pub mod policies;
pub mod policy;
pub mod qos;
pub mod request;
pub mod stage;
pub mod testing;
pub mod time;
pub mod tunable;

pub use elevator::{Admitted, Elevator, ElevatorStats, Waiters};
pub use group::{GroupId, GroupSettings, Groups, IoMax, PrioClassPolicy};
pub use ioprio::{IoPrio, IoPrioClass};
pub use policy::{Dispatch, HeldBy, Policy};
pub use qos::Qos;
pub use request::{Direction, FlowId, MergeLimits, Op, Request, RequestId};
pub use time::Nanos;
pub use tunable::{TunableError, TunableSpec, Unit};

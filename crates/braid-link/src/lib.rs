//! braid-link: the one model of a link. The simulator applies it to packets
//! in virtual time, the real-time relay (`braid relay`, `braid demo`) and
//! `braid link` to real datagrams on a real clock; one seed gives the same
//! losses, jitter and duplicates wherever a path is emulated.
//!
//! A [`Link`] is one direction of a path. Like the rest of braid's core it
//! does no I/O and reads no clock: the caller [offers](Link::offer) each
//! packet's wire size at an [`Instant`](braid_proto::Instant) and the link
//! answers with the packet's fate, dropped (and why) or delivered at a
//! computed time; the caller holds the packet until then ([`InFlight`] in
//! the real-time emulators, the event queue in the simulator). An offered
//! packet meets, in order:
//!
//! - the link's **state**: up, down (until an `Up` event or for a set
//!   outage) or closed for good, driven by [`LinkEvent`]s the caller
//!   applies in the order of [`state_changes`];
//! - **random loss** at entry, as netem does it: Bernoulli with probability
//!   [`LinkConfig::loss`] and, on top, a four-parameter Gilbert–Elliott
//!   chain ([`Gilbert`]);
//! - a **drop-tail FIFO queue** limited in packets or bytes ([`QueueLimit`]),
//!   which can mark congestion ([`EcnMode`]): CE on ECN-capable packets from
//!   a queue depth on, or the multi-bit MB-ECN level `depth >> 4`;
//! - a **server** of a fixed rate in bits/s or packets/s ([`Rate`]), or a
//!   mahimahi packet-delivery [`Trace`] (1500-byte opportunities, looping),
//!   or none (instant), optionally releasing packets only on the ticks of a
//!   burst interval ([`LinkConfig::burst`]);
//! - **propagation delay** plus uniform **jitter** (packets may reorder,
//!   none arrives before it left), and with [`LinkConfig::duplicate`]'s
//!   probability a second copy with its own jitter.
//!
//! Beside the link: [`units`] parses the quantities people write ("50Mbit",
//! "20ms", "4MiB", "1%"), also as serde fields of scenario files; [`seeds`]
//! derives every seed of a run from its one seed (a path's two links among
//! them); [`in_flight`] holds accepted packets until their arrival; [`Nat`]
//! is a NAT box or firewall between a simulated site and the internet.
//! Randomness comes only from each link's own seeded ChaCha8 RNG, so a link
//! is a pure function of its config, its seed and the packets offered.

pub mod in_flight;
pub mod seeds;
pub mod units;

mod config;
mod link;
mod loss;
mod nat;
mod trace;

pub use config::{
    state_changes, EcnMode, LinkConfig, LinkConfigError, LinkEvent, LinkEventKind, LinkState,
    QueueLimit,
};
pub use in_flight::InFlight;
pub use link::{DropReason, Link, LinkStats, Offer, ETHERNET_MTU, IP_UDP_OVERHEAD};
pub use loss::Gilbert;
pub use nat::{Nat, NatKind};
pub use trace::{Trace, TraceError, OPPORTUNITY_BYTES};
pub use units::Rate;

//! MB-ECN, the multi-bit forward-ECN congestion avoidance of the Ouroboros
//! prototype 0.18 (seed 004: D. Staessens, "Congestion avoidance in
//! Ouroboros", 2020-12-12). Constants the post leaves open were checked
//! against the prototype's `src/ipcpd/unicast/ca/mb-ecn.c` (2021).
//!
//! Forwarders OR their queue depth / 16 into an 8-bit field of each packet
//! (braid-sim and the packet header do that, not this file). The receiver,
//! [`EceReceiver`], keeps a floating sum of that field over about 32 packets,
//! the ECE, and decides when the sender must hear it. The sender, [`MbEcn`],
//! is rate-based: it allows a byte budget per time slot and adjusts it once
//! per slot, doubling it in slow start, cutting it in proportion to the ECE
//! while congested and otherwise adding 64 KiB per 2^24 ns (scaled: see
//! below). Because slots are
//! counted in time rather than in RTTs, every flow ramps up at the same speed
//! whatever its RTT.
//!
//! Where braid differs from the prototype:
//! - Ouroboros blocks each send until the slot has budget left, so it sends a
//!   burst at the start of every slot. braid paces at budget / slot width
//!   instead ([`Controller::pacing_rate`]), which gives the same rate on
//!   average without the burst. The connection must read the rate again
//!   before each send, because a slot can roll in `on_sent`, `on_ack` or
//!   `on_ece`. Slots count the packets and bytes the connection reports to
//!   `on_sent` (its data packets), while the prototype counts everything on
//!   the flow.
//!   The window only caps what is in flight and is set so that it never binds
//!   (see [`MbEcn`]'s `window`).
//! - Receiver: a packet with field 0 halves the ECE, as the post says (the
//!   prototype divides it by four). Every rise is reported at once, as the
//!   post says (the prototype reports only the start of congestion, every
//!   8th packet and the end). The every-M-packets cadence counts packets since
//!   the last update, including unmarked ones.
//! - Sender: the budget grows, by doubling or by the additive step, only
//!   after a slot that used it. The prototype grows it when the slot went over
//!   the budget; a paced sender lands within one packet of it instead. An idle
//!   sender's budget therefore stays where it is.
//! - Slots start where the previous slot's grid reaches `now`, not at
//!   multiples of their own width, so a slot that has just been widened is
//!   never partial. The packet that opens a slot counts in that slot. Slots
//!   in which nothing was sent change nothing. Slot widths are bounded (see
//!   [`MIN_SLOT_SHIFT`], [`MAX_SLOT_SHIFT`]) and the budget never drops below
//!   one packet per slot.
//!
//! The seed's per-slot arithmetic did not hold a short queue or share a
//! bottleneck at 100 Mbit/s and 2 ms RTT (the mbecn benchmark rows): a slot there
//! is 2^22 ns (≈36 packets), so +64 KiB per 2^24 ns, scaled with the width,
//! added 31 Mbit/s per 4 ms, while a queue just over 16 packets (ECE ≤ 32)
//! cut only 32/8192 = 0.4 % per slot. Two flows seeing the same marks close
//! their gap by that factor per slot: from 96/31 to within 10 % took ~500
//! slots, seconds. braid keeps the terms and changes their scale:
//! - Additive step: 64 KiB per 2^24 ns slot, scaled with the square of the
//!   width, so the rate grows by 3.9 MB/s per 2^24 ns whatever the slot (the
//!   prototype's comment calls it "~4MiB/s^2"). With the linear scaling a
//!   fast sender, in narrow slots, accelerated faster than a slow one.
//! - Decrease: ECE · 2^G / 2^(N+8) per 2^24 ns (G = 7), in proportion to the
//!   slot width, at most half per slot: a whole 2^N-packet window of level-1
//!   marks halves per 2^24 ns, like DCTCP's α/2. Per unit time, so flows in
//!   slots of different widths cut alike. The ECE used is the mean over the
//!   slot's packets, not the last report, and the additive step is earned
//!   by the packets sent while the ECE was 0, so a wide slot with a short
//!   congestion episode still both cuts and grows in proportion.
//! - The cut starts from what the slot delivered (its acknowledged bytes,
//!   once ACKs flow through a whole slot) and never raises the budget. The
//!   ECE keeps reporting a queue while it drains, and cutting a budget that
//!   is already below the delivery rate each slot drove the rate far below
//!   the link (a limit cycle between 31 and 124 Mbit/s in braid-sim).
//! - Loss: see `on_congestion`; the seed has no loss response, and on paths
//!   that do not mark the sender flooded them (98 % loss). The window is
//!   also bounded by twice the delivered rate times the minimum RTT.
//!
//! `receiver.rs` holds the receiver's ECE, `sender.rs` the sender's slots
//! and budget.
//!
//! [`Controller::pacing_rate`]: super::Controller::pacing_rate
//! [`MIN_SLOT_SHIFT`]: sender::MIN_SLOT_SHIFT
//! [`MAX_SLOT_SHIFT`]: sender::MAX_SLOT_SHIFT

mod receiver;
mod sender;

pub use receiver::EceReceiver;
pub use sender::MbEcn;

/// N: the receiver's floating sum spans 2^N = 32 packets (seed 004: N = 5;
/// prototype `CA_SHFT`).
const ECE_SHIFT: u32 = 5;
/// Largest ECE: 2^(8+N) − 1, i.e. 32 packets carrying the largest 8-bit mark
/// (seed 004). Values from the peer are clamped to it.
pub const ECE_MAX: u16 = (1 << (8 + ECE_SHIFT)) - 1;

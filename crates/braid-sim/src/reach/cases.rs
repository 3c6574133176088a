//! The cases of `braid bench reach`'s NAT lab, run in virtual time: the
//! same NATs, links, relays and events, so the simulator's figures can be
//! set beside the lab's; and two hosts on one LAN (1 Gbit/s), which the
//! lab does not build yet.

use braid_link::NatKind::{self, *};

use super::{run_reach, Happening, ReachOutcome, ReachSetup, When};

/// When the lab's failover events happen: once this share has arrived.
pub const EVENT_AT: f64 = 0.3;

/// A lab case: its name (the lab's), and its setup.
pub fn lab_cases(bytes: u64) -> Vec<(&'static str, ReachSetup)> {
    let case = |nats: [NatKind; 2], relays: usize, event: Option<Happening>| ReachSetup {
        relays,
        event: event.map(|e| (e, When::Received(EVENT_AT))),
        ..ReachSetup::transfer(nats, bytes)
    };
    vec![
        ("cone–cone", case([Cone, Cone], 2, None)),
        ("cone–symmetric", case([Cone, Symmetric], 2, None)),
        (
            "restricted–restricted",
            case([Restricted, Restricted], 2, None),
        ),
        (
            "restricted–symmetric",
            case([Restricted, Symmetric], 2, None),
        ),
        ("symmetric–symmetric", case([Symmetric, Symmetric], 2, None)),
        ("firewall–cone", case([Firewall, Cone], 2, None)),
        ("one relay", case([Symmetric, Symmetric], 1, None)),
        ("two relays", case([Symmetric, Symmetric], 2, None)),
        ("direct + relay", case([Cone, Cone], 1, None)),
        (
            "same LAN, behind one restricted NAT",
            ReachSetup {
                same_lan: true,
                ..case([Restricted, Restricted], 2, None)
            },
        ),
        (
            "relay A killed, relay B left",
            case([Symmetric, Symmetric], 2, Some(Happening::RelayDies)),
        ),
        (
            "relay killed, direct path left",
            case([Cone, Cone], 1, Some(Happening::RelayDies)),
        ),
        (
            "direct path cut, relay left",
            case([Cone, Cone], 1, Some(Happening::DirectCut)),
        ),
        (
            "site A's NAT rebinds",
            case([Restricted, Restricted], 1, Some(Happening::Rebinds(0))),
        ),
        (
            "site B's NAT rebinds",
            case([Restricted, Restricted], 1, Some(Happening::Rebinds(1))),
        ),
    ]
}

/// Every lab case run once with `seed`.
pub fn run_lab_cases(bytes: u64, seed: u64) -> Vec<(&'static str, ReachOutcome)> {
    lab_cases(bytes)
        .into_iter()
        .map(|(name, setup)| (name, run_reach(&ReachSetup { seed, ..setup })))
        .collect()
}

/// The lab cases' figures as a markdown table.
pub fn markdown(rows: &[(&'static str, ReachOutcome)]) -> String {
    let f = |v: Option<f64>, digits: usize| v.map_or("—".into(), |v| format!("{v:.digits$}"));
    let mut out = String::from(
        "| case | verified | direct validated (ms after pairing) | to data s | share direct | goodput Mbit/s | event at s | direct again (ms after the event) |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (name, o) in rows {
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |\n",
            if o.verified { "yes" } else { "no" },
            f(o.validated_ms, 0),
            f(o.to_data_s, 2),
            o.share_direct
                .map_or("—".into(), |s| format!("{:.0} %", s * 100.0)),
            f(o.goodput_mbps, 1),
            f(o.event_s, 2),
            f(o.direct_again_ms, 0),
        ));
    }
    out
}

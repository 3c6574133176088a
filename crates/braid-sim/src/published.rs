//! A scenario's `[published]` table: the figures a seed document published
//! for the same experiment, and the targets `braid bench` checks braid
//! against (docs/scenarios.md). The simulator itself ignores it.
//!
//! Unknown keys are errors, as everywhere in a scenario file: a misspelt
//! target would otherwise be a check that silently never runs.

use serde::Deserialize;

/// The `[published]` table. Figures are in `unit` unless their name says
/// otherwise; every key is optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    /// Where the figures come from.
    pub source: Option<String>,
    /// Unit of `seed_tcp` and `seed_system`: "Mbit/s", "MB/s",
    /// "MB/s (mockconn, 2^20 bytes)", …; none is Mbit/s.
    pub unit: Option<String>,
    /// The seed's TCP (iperf3) figure, and what it was.
    pub seed_tcp: Option<f64>,
    pub seed_tcp_name: Option<String>,
    /// The seed's own system's figure (catchunks, NCP, Rapid, …), what it
    /// was, and a caveat to print beside it.
    pub seed_system: Option<f64>,
    pub seed_system_name: Option<String>,
    pub seed_system_note: Option<String>,
    /// The seed's system per flow, where it gives them.
    pub seed_system_per_flow: Option<Vec<f64>>,
    /// Seconds the seed's flows took to converge, where it says.
    pub seed_convergence_s: Option<f64>,
    /// The seed's window decreases and spurious retransmissions (the
    /// catchunks CUBIC/AIMD table).
    pub seed_window_decreases: Option<u64>,
    pub seed_spurious: Option<u64>,
    /// NKP-0024's table has two columns: NCP before it and with it
    /// (`seed_system` repeats `current`).
    pub prev: Option<f64>,
    pub current: Option<f64>,
    /// The requirements' Linux TCP figures, always Mbit/s.
    pub linux_cubic: Option<f64>,
    pub linux_bbr: Option<f64>,
    /// The controller is part of the row: reports run only this one.
    pub report_cc: Option<String>,
    /// Goodput ≥ this × capacity × (1 − loss), before header overhead.
    pub target_fraction_of_ideal: Option<f64>,
    /// Goodput ≥ this many Mbit/s.
    pub target_mbps: Option<f64>,
    /// Goodput ≥ `seed_tcp`, compared at equal header overhead.
    pub target_at_least_seed_tcp: Option<bool>,
    /// Goodput ≥ the best Linux figure, compared at equal header overhead.
    pub target_at_least_linux: Option<bool>,
    /// Spurious retransmissions at most this many, worst seed.
    pub target_spurious_max: Option<f64>,
    /// Spurious retransmissions below this fraction of segments.
    pub target_spurious_fraction_max: Option<f64>,
    /// Every byte delivered and verified.
    pub target_complete: Option<bool>,
    /// Full duplex: each direction ≥ this × the goodput of `alone_row` (a
    /// row of the same suite, one way, same controller).
    pub target_fraction_of_alone: Option<f64>,
    pub alone_row: Option<String>,
    /// Standing queue at most this many packets (from mean − min RTT).
    pub target_queue_max_packets: Option<f64>,
    /// Jain's index of the flows' throughputs (100 ms means) reaches this,
    /// within `target_jain_within_s` after `jain_from_s`, and stays.
    pub target_jain: Option<f64>,
    pub target_jain_within_s: Option<f64>,
    pub jain_from_s: Option<f64>,
    /// Per-connection window shares within `share_tolerance` (relative)
    /// of the paths' rate shares, this long after `converge_from_s`, and
    /// staying there.
    pub target_converge_within_s: Option<f64>,
    pub share_tolerance: Option<f64>,
    pub converge_from_s: Option<f64>,
    /// The row needs something the format lacks; reports flag it.
    pub missing_feature: Option<String>,
}

impl Published {
    /// Whether any `target_*` key is given.
    pub fn has_targets(&self) -> bool {
        let numbers = [
            self.target_fraction_of_ideal,
            self.target_mbps,
            self.target_spurious_max,
            self.target_spurious_fraction_max,
            self.target_fraction_of_alone,
            self.target_queue_max_packets,
            self.target_jain,
            self.target_jain_within_s,
            self.target_converge_within_s,
        ];
        let flags = [
            self.target_at_least_seed_tcp,
            self.target_at_least_linux,
            self.target_complete,
        ];
        numbers.iter().any(Option::is_some) || flags.iter().any(Option::is_some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspelt_keys_are_refused() {
        let p: Published = toml::from_str("target_mbps = 36\nunit = \"Mbit/s\"").unwrap();
        assert_eq!(p.target_mbps, Some(36.0));
        assert!(p.has_targets());
        assert!(!Published::default().has_targets());
        let e = toml::from_str::<Published>("target_mpbs = 36").unwrap_err();
        assert!(e.to_string().contains("target_mpbs"), "{e}");
    }
}

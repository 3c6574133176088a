//! The end of a real transfer in the simulator's two shapes: the
//! catchunks-style summary and the JSON of `braid sim --json` (one flow,
//! `virtual_s` and `wall_s` both the transfer's duration).

use braid_proto::SessionStats;
use braid_sim::{write_delivery, Delivery, FlowError, FlowResult, RunResult};
use std::fmt::Write as _;

/// What one side knows at the end.
pub struct Ended<'a> {
    /// "braid send" or "braid recv".
    pub role: &'a str,
    pub cc: String,
    pub stats: SessionStats,
    pub segment_size: u16,
    /// Content bytes announced (or transferred, when unknown).
    pub bytes: u64,
    /// Content bytes that arrived verified.
    pub delivered: u64,
    pub verified: bool,
    pub duration_s: f64,
    pub error: Option<String>,
}

impl Ended<'_> {
    fn delivery(&self) -> Delivery {
        let mut d = Delivery::from_stats(
            &self.stats,
            self.segment_size,
            self.bytes,
            self.delivered,
            self.verified,
            self.verified && self.error.is_none(),
            self.duration_s,
        );
        if self.role == "braid recv" {
            // The receiver's own sending is only its verdict; show what it
            // received per connection instead.
            let total: u64 = self
                .stats
                .paths
                .iter()
                .map(|(_, p)| p.packets_received)
                .sum();
            for (p, (_, s)) in d.paths.iter_mut().zip(&self.stats.paths) {
                let share = if total > 0 {
                    s.packets_received as f64 / total as f64
                } else {
                    0.0
                };
                p.goodput_mbps = d.goodput_mbps * share;
                p.packets_sent = s.packets_received;
            }
            d.segments = total;
        }
        d
    }

    /// The JSON of a real transfer: [`Ended::run_result`]'s, with the
    /// flow's `forged_dropped` (datagrams that did not authenticate), which
    /// the simulator does not report.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = self.run_result().to_json(false);
        if let Some(flow) = v["flows"][0].as_object_mut() {
            flow.insert("forged_dropped".into(), self.stats.forged_dropped.into());
        }
        v
    }

    /// The shape of `braid sim --json`.
    pub fn run_result(&self) -> RunResult {
        let d = self.delivery();
        RunResult {
            scenario: self.role.to_owned(),
            seed: 0,
            virtual_s: self.duration_s,
            wall_s: self.duration_s,
            jain_fairness: 1.0,
            datagrams: self
                .stats
                .paths
                .iter()
                .map(|(_, p)| p.packets_sent + p.packets_received)
                .sum(),
            flows: vec![FlowResult {
                flow: 0,
                cc: self.cc.clone(),
                forward: d,
                error: self.error.clone().map(FlowError::Transfer),
                reverse: None,
                series: Vec::new(),
            }],
        }
    }

    /// The human summary.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let d = self.delivery();
        let label = if self.role == "braid recv" {
            format!("received ({}, {} connections)", self.cc, d.paths.len())
        } else {
            format!("sent ({}, {} connections)", self.cc, d.paths.len())
        };
        write_delivery(&mut out, &label, &d);
        if self.role == "braid recv" {
            let _ = writeln!(
                out,
                "  (per path: share of the packets received; duplicates {} packets)",
                self.stats.duplicate_packets
            );
        }
        if self.stats.forged_dropped > 0 {
            let n = self.stats.forged_dropped;
            let _ = writeln!(
                out,
                "  dropped {n} datagram{} that did not authenticate (forged, corrupted, or a wrong key or code)",
                if n == 1 { "" } else { "s" }
            );
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "  error: {e}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(forged: u64) -> Ended<'static> {
        let mut stats = SessionStats::default();
        stats.forged_dropped = forged;
        Ended {
            role: "braid recv",
            cc: "ncp".into(),
            stats,
            segment_size: 1200,
            bytes: 10,
            delivered: 10,
            verified: true,
            duration_s: 1.0,
            error: None,
        }
    }

    #[test]
    fn datagrams_that_did_not_authenticate_are_shown() {
        assert_eq!(ended(0).to_json()["flows"][0]["forged_dropped"], 0);
        assert!(!ended(0).summary().contains("authenticate"));
        assert_eq!(ended(12).to_json()["flows"][0]["forged_dropped"], 12);
        assert!(ended(12)
            .summary()
            .contains("dropped 12 datagrams that did not authenticate"));
        assert!(ended(1).summary().contains("dropped 1 datagram that"));
    }
}

//! Results of a run: the JSON contract of `braid sim --json` and the
//! catchunks-style human summary.

use crate::content::Transfer;
use crate::flow_error::FlowError;
use crate::scenario::{FlowSpec, Scenario};
use braid_proto::{Instant, PathId, PathSample, PathStats, Session, SessionStats};
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Duration;

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub scenario: String,
    pub seed: u64,
    /// Virtual seconds simulated.
    pub virtual_s: f64,
    /// Wall-clock seconds the simulation took (the only non-deterministic field).
    pub wall_s: f64,
    /// Jain's fairness index over the flows' forward goodputs (1 = equal shares).
    pub jain_fairness: f64,
    /// Datagrams delivered by the simulated links.
    pub datagrams: u64,
    pub flows: Vec<FlowResult>,
}

/// One direction of a flow's delivery.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub bytes: u64,
    pub delivered: u64,
    pub verified: bool,
    pub completed: bool,
    /// From the handshake's completion (the first data byte's send) to the last byte read.
    pub duration_s: f64,
    pub goodput_mbps: f64,
    pub segments: u64,
    pub retransmitted: u64,
    pub timeouts: u64,
    /// Of those, timeouts an ACK of a packet sent before them proved
    /// spurious (the packets were delayed), and undid.
    pub spurious_timeouts: u64,
    pub spurious_retransmits: u64,
    pub window_decreases: u64,
    pub timeout_decreases: u64,
    pub loss_decreases: u64,
    pub lost_packets: u64,
    pub ecn_marks: u64,
    pub ecn_decreases: u64,
    pub rtt_ms: RttMs,
    pub paths: Vec<PathResult>,
    /// 95th percentile of the one-way delay (send to arrival) of this
    /// direction's datagrams, milliseconds; simulator only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd_p95_ms: Option<f64>,
    /// 95th percentile of the time those datagrams waited in link queues
    /// (serialisation excluded), milliseconds; simulator only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_delay_p95_ms: Option<f64>,
    /// Datagrams of this direction the sender offered to its links; simulator only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datagrams_offered: Option<u64>,
    /// Of those, the ones the links dropped (queue overflow, loss, link down); simulator only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datagrams_dropped: Option<u64>,
}

/// What the links saw of one direction of a flow.
#[derive(Debug, Clone, Default)]
pub(crate) struct LinkLog {
    /// One-way delay of each datagram scheduled for delivery, microseconds.
    pub owd_us: Vec<u32>,
    /// Queueing delay of each of them, microseconds.
    pub queue_us: Vec<u32>,
    pub offered: u64,
    pub dropped: u64,
}

impl LinkLog {
    pub fn record(&mut self, owd: Duration, queue: Duration) {
        let us = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
        self.owd_us.push(us(owd));
        self.queue_us.push(us(queue));
    }

    fn apply(&self, d: &mut Delivery) {
        d.owd_p95_ms = p95_ms(&self.owd_us);
        d.queue_delay_p95_ms = p95_ms(&self.queue_us);
        d.datagrams_offered = Some(self.offered);
        d.datagrams_dropped = Some(self.dropped);
    }
}

/// Nearest-rank 95th percentile of microsecond samples, in milliseconds.
fn p95_ms(us: &[u32]) -> Option<f64> {
    if us.is_empty() {
        return None;
    }
    let mut v = us.to_vec();
    let rank = (us.len() * 95).div_ceil(100).max(1) - 1;
    let (_, x, _) = v.select_nth_unstable(rank);
    Some(f64::from(*x) / 1e3)
}

/// One flow.
#[derive(Debug, Clone, Serialize)]
pub struct FlowResult {
    pub flow: usize,
    pub cc: String,
    #[serde(flatten)]
    pub forward: Delivery,
    /// Why the flow failed, if it did (in JSON, the message).
    pub error: Option<FlowError>,
    pub reverse: Option<Delivery>,
    /// Per-connection time series of the client (the forward sender).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesPoint>,
}

/// RTT summary in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RttMs {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    /// 95th percentile of the raw samples (within ±2.2 %); with several
    /// connections, the highest of theirs.
    pub p95: f64,
}

/// One connection's share of a direction.
#[derive(Debug, Clone, Serialize)]
pub struct PathResult {
    pub path: u8,
    pub goodput_mbps: f64,
    pub packets_sent: u64,
    pub retransmitted: u64,
    /// Congestion window at the end, packets of the negotiated segment size.
    pub final_window: f64,
    /// The controller's slow-start threshold at the end, packets; `None`
    /// for controllers without one.
    pub final_ssthresh: Option<f64>,
    /// The controller's pacing rate at the end, Mbit/s; `None` when it
    /// leaves pacing to the connection.
    pub final_pacing_mbps: Option<f64>,
    pub timeouts: u64,
    pub spurious_timeouts: u64,
    pub lost_packets: u64,
    pub srtt_ms: f64,
    /// Largest datagram (UDP payload, bytes) path MTU discovery found.
    pub max_datagram: u16,
    /// Times discovery fell back to the base size (a black hole).
    pub pmtu_black_holes: u32,
}

/// One point of a connection's time series.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SeriesPoint {
    pub t: f64,
    pub path: u8,
    /// Congestion window, packets (the controller's window, not the rate;
    /// the window-convergence rows compare its shares with the paths').
    pub window: f64,
    pub srtt_ms: f64,
    pub rto_ms: f64,
    pub in_flight: f64,
    pub throughput_mbps: f64,
}

/// Everything the simulator knows about a flow at the end.
pub(crate) struct FlowOutcome<'a> {
    pub index: usize,
    pub spec: &'a FlowSpec,
    pub client: Option<&'a Session>,
    pub server: Option<&'a Session>,
    pub forward: &'a Transfer,
    pub reverse: &'a Transfer,
    pub started_at: Option<Instant>,
    pub connected_at: Option<Instant>,
    pub forward_done_at: Option<Instant>,
    pub reverse_done_at: Option<Instant>,
    /// Why the flow never started or was cut short, if it was.
    pub error: Option<FlowError>,
    pub samples: &'a [PathSample],
    pub now: Instant,
    /// Per direction: [client→server, server→client].
    pub links: &'a [LinkLog; 2],
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn delivery(
    o: &FlowOutcome<'_>,
    sender: Option<&Session>,
    t: &Transfer,
    done: Option<Instant>,
) -> Delivery {
    let start = o.connected_at.or(o.started_at).unwrap_or(Instant::ZERO);
    let end = done.unwrap_or(o.now);
    let stats = sender.map(Session::stats).unwrap_or_default();
    let segment_size = sender.map_or(1, |s| s.config().segment_size);
    let verified = t.verified();
    Delivery::from_stats(
        &stats,
        segment_size,
        t.total,
        t.read,
        verified,
        done.is_some() && verified,
        (end - start).as_secs_f64(),
    )
}

/// Mbit/s of `bytes` over `duration_s` seconds (0 over no time).
fn mbps(bytes: u64, duration_s: f64) -> f64 {
    if duration_s > 0.0 {
        bytes as f64 * 8.0 / 1e6 / duration_s
    } else {
        0.0
    }
}

impl Delivery {
    /// One direction's figures from its sender's statistics: `bytes` to
    /// send, `delivered` read by the receiver in `duration_s` seconds.
    pub fn from_stats(
        stats: &SessionStats,
        segment_size: u16,
        bytes: u64,
        delivered: u64,
        verified: bool,
        completed: bool,
        duration_s: f64,
    ) -> Delivery {
        let segment_size = f64::from(segment_size.max(1));
        let mut d = Delivery {
            bytes,
            delivered,
            verified,
            completed,
            duration_s,
            goodput_mbps: mbps(delivered, duration_s),
            segments: stats.segments_sent,
            retransmitted: stats.retransmitted,
            timeouts: stats.timeouts,
            spurious_timeouts: 0,
            spurious_retransmits: stats.spurious_retransmits,
            window_decreases: stats.window_decreases,
            timeout_decreases: 0,
            loss_decreases: 0,
            lost_packets: 0,
            ecn_marks: stats.ecn_marks,
            ecn_decreases: 0,
            rtt_ms: RttMs::over(&stats.paths),
            paths: Vec::new(),
            owd_p95_ms: None,
            queue_delay_p95_ms: None,
            datagrams_offered: None,
            datagrams_dropped: None,
        };
        for &(id, p) in &stats.paths {
            d.timeout_decreases += p.timeout_decreases;
            d.spurious_timeouts += p.spurious_timeouts;
            d.loss_decreases += p.loss_decreases;
            d.ecn_decreases += p.ecn_decreases;
            d.lost_packets += p.lost_packets;
            d.paths
                .push(PathResult::from_stats(id, &p, segment_size, duration_s));
        }
        d
    }
}

impl RttMs {
    /// Over every connection that took a sample: the extremes, the
    /// highest p95 and the mean weighted by samples; all zero without any.
    fn over(paths: &[(PathId, PathStats)]) -> RttMs {
        let mut rtt = RttMs {
            min: f64::INFINITY,
            avg: 0.0,
            max: 0.0,
            p95: 0.0,
        };
        let mut samples = 0u64;
        for (_, p) in paths.iter().filter(|(_, p)| p.rtt_samples > 0) {
            rtt.min = rtt.min.min(ms(p.rtt_min));
            rtt.max = rtt.max.max(ms(p.rtt_max));
            rtt.p95 = rtt.p95.max(ms(p.rtt_p95));
            rtt.avg += ms(p.rtt_avg) * p.rtt_samples as f64;
            samples += p.rtt_samples;
        }
        if samples == 0 {
            return RttMs::default();
        }
        rtt.avg /= samples as f64;
        rtt
    }
}

impl PathResult {
    /// One connection's figures; windows in packets of `segment_size` bytes.
    fn from_stats(id: PathId, p: &PathStats, segment_size: f64, duration_s: f64) -> PathResult {
        PathResult {
            path: id.0,
            goodput_mbps: mbps(p.stream_bytes_acked, duration_s),
            packets_sent: p.packets_sent,
            retransmitted: p.retransmitted,
            final_window: p.window as f64 / segment_size,
            final_ssthresh: p.ssthresh.map(|b| b as f64 / segment_size),
            final_pacing_mbps: p.pacing_rate.map(|r| r * 8e-6),
            timeouts: p.timeouts,
            spurious_timeouts: p.spurious_timeouts,
            lost_packets: p.lost_packets,
            srtt_ms: ms(p.srtt),
            max_datagram: p.max_datagram,
            pmtu_black_holes: p.pmtu_black_holes,
        }
    }
}

impl RunResult {
    pub(crate) fn new(
        scenario: &Scenario,
        seed: u64,
        now: Instant,
        wall: Duration,
        datagrams: u64,
        flows: &[FlowOutcome<'_>],
    ) -> RunResult {
        let flows: Vec<FlowResult> = flows
            .iter()
            .map(|o| {
                let cc = o
                    .client
                    .map_or_else(|| o.spec.session.cc, |s| s.config().cc)
                    .name()
                    .to_owned();
                let mut forward = delivery(o, o.client, o.forward, o.forward_done_at);
                o.links[0].apply(&mut forward);
                let reverse = (o.spec.reverse_bytes > 0).then(|| {
                    let mut d = delivery(o, o.server, o.reverse, o.reverse_done_at);
                    o.links[1].apply(&mut d);
                    d
                });
                let error = o.error.clone().or_else(|| {
                    let err = |s: Option<&Session>| s.and_then(|s| s.error()).cloned();
                    err(o.client)
                        .or_else(|| err(o.server))
                        .map(FlowError::Session)
                });
                let segment_size = o.client.map_or(1.0, |s| f64::from(s.config().segment_size));
                let series = o
                    .samples
                    .iter()
                    .map(|s| SeriesPoint {
                        t: s.at_s,
                        path: s.path.0,
                        window: s.window as f64 / segment_size,
                        srtt_ms: ms(s.srtt),
                        rto_ms: ms(s.rto),
                        in_flight: s.in_flight as f64 / segment_size,
                        throughput_mbps: s.throughput_bps / 1e6,
                    })
                    .collect();
                FlowResult {
                    flow: o.index,
                    cc,
                    forward,
                    error,
                    reverse,
                    series,
                }
            })
            .collect();
        let goodputs: Vec<f64> = flows.iter().map(|f| f.forward.goodput_mbps).collect();
        RunResult {
            scenario: scenario.name.clone().unwrap_or_else(|| "unnamed".into()),
            seed,
            virtual_s: now.as_secs_f64(),
            wall_s: wall.as_secs_f64(),
            jain_fairness: jain(&goodputs),
            datagrams,
            flows,
        }
    }

    /// The JSON object of `braid sim --json`; time series only if asked for.
    pub fn to_json(&self, with_series: bool) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("results serialise");
        if !with_series {
            for f in v["flows"].as_array_mut().into_iter().flatten() {
                if let Some(obj) = f.as_object_mut() {
                    obj.remove("series");
                }
            }
        }
        v
    }

    /// The catchunks-style summary of every flow.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "scenario {:?}, seed {}: {:.3} s simulated in {:.3} s wall ({} datagrams, {:.0} per wall second)",
            self.scenario,
            self.seed,
            self.virtual_s,
            self.wall_s,
            self.datagrams,
            self.datagrams as f64 / self.wall_s.max(1e-9)
        );

        for f in &self.flows {
            let _ = writeln!(
                out,
                "\nflow {} ({}, {} path{})",
                f.flow,
                f.cc,
                f.forward.paths.len(),
                if f.forward.paths.len() == 1 { "" } else { "s" }
            );
            write_delivery(&mut out, "client -> server", &f.forward);
            if let Some(r) = &f.reverse {
                write_delivery(&mut out, "server -> client", r);
            }
            if let Some(e) = &f.error {
                let _ = writeln!(out, "  error: {e}");
            }
        }
        if self.flows.len() > 1 {
            let _ = writeln!(out, "\nJain's fairness index: {:.4}", self.jain_fairness);
        }
        out
    }
}

/// The catchunks-style summary of one direction, under `label`.
pub fn write_delivery(out: &mut String, label: &str, d: &Delivery) {
    let status = match (d.completed, d.verified) {
        (true, true) => "all bytes received and verified byte for byte",
        (false, _) if d.delivered < d.bytes => "INCOMPLETE",
        _ => "NOT VERIFIED",
    };
    let pct = |n: u64, of: u64| {
        if of > 0 {
            n as f64 * 100.0 / of as f64
        } else {
            0.0
        }
    };
    let _ = writeln!(out, "  {label}: {status}");
    let _ = writeln!(out, "  Duration: {:.3} s of simulated time", d.duration_s);
    let _ = writeln!(
        out,
        "  Total size: {:.1} kB, {} segments",
        d.delivered as f64 / 1e3,
        d.segments
    );
    let _ = writeln!(out, "  Goodput: {:.6} Mbit/s", d.goodput_mbps);
    let _ = writeln!(
        out,
        "  Retransmitted segments: {} ({:.3}%), spurious: {}",
        d.retransmitted,
        pct(d.retransmitted, d.segments),
        d.spurious_retransmits
    );
    // Each congestion signal and the window decreases it caused.
    let mut caused = |signal: &str, n: u64, decreases: u64, more: &str| {
        let _ = writeln!(
            out,
            "  {signal}: {n} (caused {decreases} window decreases{more})"
        );
    };
    caused("Lost packets", d.lost_packets, d.loss_decreases, "");
    let spurious = format!("; {} spurious, undone", d.spurious_timeouts);
    caused("RTO timeouts", d.timeouts, d.timeout_decreases, &spurious);
    caused("Congestion marks", d.ecn_marks, d.ecn_decreases, "");
    let _ = writeln!(
        out,
        "  RTT min/avg/max = {:.3}/{:.3}/{:.3} ms",
        d.rtt_ms.min, d.rtt_ms.avg, d.rtt_ms.max
    );
    // Beside goodput and retransmissions: how long the queue grew.
    let p95 = |v: Option<f64>| v.map_or("-".to_owned(), |ms| format!("{ms:.1} ms"));
    let _ = writeln!(
        out,
        "  p95: RTT {:.1} ms (raw samples), one-way delay {}, queueing delay {}",
        d.rtt_ms.p95,
        p95(d.owd_p95_ms),
        p95(d.queue_delay_p95_ms)
    );
    let total: f64 = d.paths.iter().map(|p| p.goodput_mbps).sum();
    for p in &d.paths {
        let _ = writeln!(
            out,
            "    path {}: {:.3} Mbit/s ({:.1}%), {} packets, {} retransmitted, {} timeouts, window {:.1} packets, sRTT {:.1} ms",
            p.path,
            p.goodput_mbps,
            if total > 0.0 { p.goodput_mbps * 100.0 / total } else { 0.0 },
            p.packets_sent,
            p.retransmitted,
            p.timeouts,
            p.final_window,
            p.srtt_ms
        );
    }
}

/// Jain's fairness index (Jain, Chiu, Hawe 1984): (Σx)² / (n·Σx²).
pub fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || sq == 0.0 {
        1.0
    } else {
        sum * sum / (xs.len() as f64 * sq)
    }
}

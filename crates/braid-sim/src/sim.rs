//! The discrete-event loop: links carry datagrams between the two
//! endpoints of each flow, in virtual time, deterministically from a seed.

use crate::content::Transfer;
use crate::flow_error::FlowError;
use crate::qlog_files::QlogFiles;
use crate::queue::EventQueue;
use crate::report::{FlowOutcome, LinkLog, RunResult};
use crate::scenario::{FlowSpec, Scenario};
use braid_link::seeds::{self, Side};
use braid_link::{state_changes, Link, LinkState, Offer, IP_UDP_OVERHEAD};
use braid_proto::{
    wire, Datagram, Ecn, Event, Instant, Keypair, PathId, PathSample, Security, Session,
    SessionConfig, Transmit,
};
use std::time::Duration;

#[derive(Debug)]
enum Action {
    Start {
        flow: usize,
    },
    Wake {
        flow: usize,
        side: Side,
    },
    Deliver {
        flow: usize,
        to: Side,
        conn: PathId,
        scenario_path: usize,
        ecn: Ecn,
        datagram: Vec<u8>,
    },
    SetLink {
        path: usize,
        state: LinkState,
    },
}

/// One endpoint: its session (the server's appears with the first datagram) and wake-up.
#[derive(Debug, Default)]
struct Endpoint {
    session: Option<Session>,
    wake: Option<Instant>,
}

#[derive(Debug)]
struct FlowState {
    spec: FlowSpec,
    client: Endpoint,
    server: Endpoint,
    forward: Transfer,
    reverse: Transfer,
    started_at: Option<Instant>,
    connected_at: Option<Instant>,
    forward_done_at: Option<Instant>,
    reverse_done_at: Option<Instant>,
    done: bool,
    /// Why the flow could not even start, or was cut short by the run.
    error: Option<FlowError>,
    samples: Vec<PathSample>,
    /// What the links did to each direction's datagrams: [client→server, server→client].
    links: [LinkLog; 2],
}

impl FlowState {
    fn endpoint(&mut self, side: Side) -> &mut Endpoint {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }
}

/// A run in progress.
pub struct Sim {
    scenario: Scenario,
    seed: u64,
    now: Instant,
    queue: EventQueue<Action>,
    /// Per scenario path: [client→server, server→client].
    links: Vec<[Link; 2]>,
    flows: Vec<FlowState>,
    /// Buffers of delivered datagrams, for the next ones to travel in.
    spare: Vec<Vec<u8>>,
    /// What one `service` call sends, reused.
    out: Vec<(Instant, Action)>,
    /// Datagrams the simulator delivered, for the speed report.
    delivered_datagrams: u64,
    events: u64,
    /// The sessions' qlog files, when asked for.
    qlog: Option<QlogFiles>,
}

/// Datagram buffers kept for reuse, at most.
const MAX_SPARE: usize = 4096;

/// Events one run may process before it is declared a livelock.
const MAX_EVENTS: u64 = 200_000_000;

/// The configuration of a flow's sessions: the file's, with one connection
/// per path of the flow, sampled at the scenario's interval.
fn session_config(spec: &FlowSpec, sample_interval: Duration, trace: bool) -> SessionConfig {
    let mut cfg = spec.session.clone();
    cfg.sample_interval = Some(sample_interval);
    cfg.trace = trace;
    cfg.paths = spec.paths.len().min(255) as u8;
    cfg.max_paths = cfg.max_paths.max(cfg.paths);
    cfg
}

/// A new session that sends `writer`'s content, read straight into its
/// packets rather than copied in and out of a send buffer.
/// A new session of a flow, ready to run: its bytes come from `writer`'s
/// generator, and every connection offers short headers, since each has
/// links of its own that tell its datagrams apart.
fn prepared(mut session: Session, writer: &Transfer) -> Session {
    let taken = session.use_generated_content(writer.content());
    debug_assert!(taken, "a new session has written nothing");
    session.accept_short_headers_everywhere();
    session
}

/// A sealed flow's server key pair (the client pins its public half).
fn flow_identity(seed: u64, flow: usize) -> Keypair {
    Keypair::generate(seeds::server_key(seed, flow))
}

impl Sim {
    /// Prepares `scenario` with `seed` (which overrides the file's).
    pub fn new(scenario: Scenario, seed: u64) -> Sim {
        let links = scenario
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let [forward, reverse] = seeds::links(seed, i);
                [
                    Link::new(p.forward.clone(), forward),
                    Link::new(p.reverse.clone(), reverse),
                ]
            })
            .collect();
        let flows = scenario
            .flows
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let [forward, reverse] = seeds::content(seed, i);
                FlowState {
                    spec: spec.clone(),
                    client: Endpoint::default(),
                    server: Endpoint::default(),
                    forward: Transfer::new(forward, spec.bytes),
                    reverse: Transfer::new(reverse, spec.reverse_bytes),
                    started_at: None,
                    connected_at: None,
                    forward_done_at: None,
                    reverse_done_at: None,
                    done: false,
                    error: None,
                    samples: Vec::new(),
                    links: Default::default(),
                }
            })
            .collect();
        let mut sim = Sim {
            scenario,
            seed,
            now: Instant::ZERO,
            queue: EventQueue::new(),
            links,
            flows,
            spare: Vec::new(),
            out: Vec::new(),
            delivered_datagrams: 0,
            events: 0,
            qlog: None,
        };
        for i in 0..sim.flows.len() {
            let at = Instant::ZERO + sim.flows[i].spec.start;
            sim.push(at, Action::Start { flow: i });
        }
        let events: Vec<_> = sim
            .scenario
            .paths
            .iter()
            .map(|p| p.forward.events.clone())
            .collect();
        for (i, path_events) in events.into_iter().enumerate() {
            // Both directions share the path's events.
            for (at, state) in state_changes(&path_events) {
                sim.push(Instant::ZERO + at, Action::SetLink { path: i, state });
            }
        }
        sim
    }

    fn push(&mut self, at: Instant, action: Action) {
        match action {
            // A link's deliveries come in the order it sent them (but for
            // reordering and duplicates, which the queue sorts in).
            Action::Deliver {
                scenario_path, to, ..
            } => {
                let lane = 2 * scenario_path + usize::from(to == Side::Client);
                self.queue.push_in_lane(lane, at, action);
            }
            // An endpoint's wake-ups mostly come later and later (a timer
            // re-armed by each ACK), and each leaves the one it superseded
            // behind: in a lane of their own, those hundreds stay out of
            // the heap.
            Action::Wake { flow, side } => {
                let lane = 2 * self.links.len() + 2 * flow + usize::from(side == Side::Server);
                self.queue.push_in_lane(lane, at, action);
            }
            _ => self.queue.push(at, action),
        }
    }

    /// Also writes each session's qlog into `dir` (see
    /// [`Sim::run_with_qlog`]).
    pub fn with_qlog(mut self, dir: &std::path::Path) -> std::io::Result<Sim> {
        let name = self
            .scenario
            .name
            .clone()
            .unwrap_or_else(|| "scenario".into());
        self.qlog = Some(QlogFiles::new(dir, &name)?);
        Ok(self)
    }

    /// Runs as [`Sim::run`], and returns the qlog files written (none
    /// without [`Sim::with_qlog`]) or the first error writing them.
    pub fn run_with_qlog(mut self) -> (RunResult, std::io::Result<Vec<std::path::PathBuf>>) {
        let wall = std::time::Instant::now();
        self.run_events();
        let files = match self.qlog.take() {
            Some(mut q) => {
                for (i, f) in self.flows.iter_mut().enumerate() {
                    if let Some(s) = f.client.session.as_mut() {
                        q.drain(i, Side::Client, s);
                    }
                    if let Some(s) = f.server.session.as_mut() {
                        q.drain(i, Side::Server, s);
                    }
                }
                q.finish()
            }
            None => Ok(Vec::new()),
        };
        (self.finish(wall.elapsed()), files)
    }

    /// Runs to completion or the time limit and reports.
    pub fn run(mut self) -> RunResult {
        let wall = std::time::Instant::now();
        self.run_events();
        self.finish(wall.elapsed())
    }

    fn run_events(&mut self) {
        let limit = Instant::ZERO + self.scenario.time_limit;
        while let Some((at, action)) = self.queue.pop() {
            if at > limit {
                self.now = limit;
                break;
            }
            self.now = at;
            self.events += 1;
            if self.events > MAX_EVENTS {
                for f in self.flows.iter_mut().filter(|f| !f.done) {
                    f.error = Some(FlowError::Livelock);
                    f.done = true;
                }
                break;
            }
            self.dispatch(action);
            if self.flows.iter().all(|f| f.done) {
                break;
            }
        }
    }

    fn dispatch(&mut self, action: Action) {
        match action {
            Action::Start { flow } => self.start_flow(flow),
            Action::Wake { flow, side } => {
                let ep = self.flows[flow].endpoint(side);
                if ep.wake != Some(self.now) {
                    return; // superseded by an earlier or later wake-up
                }
                ep.wake = None;
                if let Some(s) = ep.session.as_mut() {
                    s.handle_timeout(self.now);
                }
                self.service(flow, side);
            }
            Action::Deliver {
                flow,
                to,
                conn,
                scenario_path,
                ecn,
                mut datagram,
            } => {
                let dir = usize::from(to == Side::Client);
                if !self.links[scenario_path][dir].is_up() {
                    self.flows[flow].links[dir].dropped += 1;
                    return;
                }
                self.delivered_datagrams += 1;
                let now = self.now;
                let f = &mut self.flows[flow];
                if f.done {
                    return;
                }
                match (to, f.endpoint(to).session.as_mut()) {
                    (_, Some(s)) => {
                        let datagram = Datagram {
                            path: conn,
                            ecn,
                            received_at: now,
                            bytes: &mut datagram,
                        };
                        s.handle_datagram(now, datagram);
                    }
                    (Side::Server, None) => {
                        let mut cfg = session_config(
                            &f.spec,
                            self.scenario.sample_interval,
                            self.qlog.is_some(),
                        );
                        if f.spec.sealed {
                            cfg.security = Security::server(flow_identity(self.seed, flow));
                        }
                        let seed = seeds::session_rng(self.seed, flow, Side::Server);
                        match Session::accept(cfg, now, conn, &datagram, seed) {
                            Ok(s) => f.server.session = Some(prepared(s, &f.reverse)),
                            Err(_) => return,
                        }
                    }
                    (Side::Client, None) => return,
                }
                self.service(flow, to);
                if self.spare.len() < MAX_SPARE {
                    self.spare.push(datagram);
                }
            }
            Action::SetLink { path, state } => {
                for link in &mut self.links[path] {
                    link.set_state(self.now, state);
                }
            }
        }
    }

    fn start_flow(&mut self, flow: usize) {
        let session_id = seeds::session_id(self.seed, flow);
        let f = &mut self.flows[flow];
        f.started_at = Some(self.now);
        let mut cfg = session_config(&f.spec, self.scenario.sample_interval, self.qlog.is_some());
        if f.spec.sealed {
            cfg.security = Security::pinned(flow_identity(self.seed, flow).public());
        }
        let seed = seeds::session_rng(self.seed, flow, Side::Client);
        match Session::connect(cfg, session_id, self.now, seed) {
            Ok(s) => f.client.session = Some(prepared(s, &f.forward)),
            Err(e) => {
                // An invalid configuration is the scenario's fault: report it on the flow.
                f.done = true;
                f.error = Some(FlowError::Config(e));
                return;
            }
        }
        self.service(flow, Side::Client);
    }
}

impl Sim {
    /// Lets an endpoint's application write and read, sends what its session
    /// wants to send, and schedules its next wake-up.
    fn service(&mut self, flow: usize, side: Side) {
        let now = self.now;
        let f = &mut self.flows[flow];
        if f.done {
            return;
        }
        let FlowState {
            client,
            server,
            forward,
            reverse,
            spec,
            links,
            samples,
            ..
        } = f;
        let (ep, writer, reader) = match side {
            Side::Client => (client, forward, reverse),
            Side::Server => (server, reverse, forward),
        };
        let Some(s) = ep.session.as_mut() else { return };
        if !s.is_closed() {
            // A verdict is written once the forward bytes have all been read.
            let holds_answer = spec.verdict && side == Side::Server;
            run_application(now, s, writer, reader, holds_answer);
        }
        let mut out = std::mem::take(&mut self.out);
        let mut sending = Sending {
            now,
            flow,
            side,
            scenario_paths: &spec.paths,
            links: &mut self.links,
            logs: links,
            spare: &mut self.spare,
            out: &mut out,
        };
        sending.transmit_all(s);
        let mut connected = false;
        while let Some(ev) = s.poll_event() {
            connected |= ev == Event::Connected;
        }
        if let Some(q) = self.qlog.as_mut() {
            q.drain(flow, side, s);
        }
        if side == Side::Client || spec.bytes == 0 {
            samples.extend(s.drain_samples());
        }
        if side == Side::Server {
            s.drain_samples().for_each(drop);
        }
        let wake = s
            .poll_timeout()
            .map(|t| t.max(now + Duration::from_micros(1)));
        let schedule = wake.filter(|&t| ep.wake.is_none_or(|w| w != t));
        if let Some(t) = schedule {
            ep.wake = Some(t);
        }
        if connected && side == Side::Client {
            f.connected_at.get_or_insert(now);
        }
        self.check_done(flow);
        for (at, action) in out.drain(..) {
            self.push(at, action);
        }
        self.out = out;
        if let Some(t) = schedule {
            self.push(t, Action::Wake { flow, side });
        }
    }

    fn check_done(&mut self, flow: usize) {
        let now = self.now;
        let f = &mut self.flows[flow];
        // A half-open server session that expires is forgotten, as an
        // endpoint forgets it: the client's next HELLO opens a new one,
        // and the server's application starts over with it (what it wrote
        // into the old one never reached the client, which would not be
        // opening again otherwise; the client sends its first flight again).
        if f.server
            .session
            .as_ref()
            .is_some_and(|s| s.error().is_some() && !s.is_peer_confirmed())
        {
            f.server.session = None;
            f.server.wake = None;
            f.reverse.restart_writing();
            f.forward.restart_reading();
            f.forward_done_at = None;
        }
        let finished = |ep: &Endpoint| {
            ep.session
                .as_ref()
                .map(|s| (s.is_send_finished(), s.is_recv_finished()))
        };
        let failed = |ep: &Endpoint| ep.session.as_ref().is_some_and(|s| s.error().is_some());
        let client = finished(&f.client);
        let server = finished(&f.server);
        if f.forward_done_at.is_none() && server.is_some_and(|(_, recv)| recv) {
            f.forward_done_at = Some(now);
        }
        if f.reverse_done_at.is_none() && client.is_some_and(|(_, recv)| recv) {
            f.reverse_done_at = Some(now);
        }
        let all = client == Some((true, true)) && server == Some((true, true));
        if all || failed(&f.client) || failed(&f.server) {
            f.done = true;
        }
    }

    fn finish(self, wall: Duration) -> RunResult {
        let flows = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| FlowOutcome {
                index: i,
                spec: &f.spec,
                client: f.client.session.as_ref(),
                server: f.server.session.as_ref(),
                forward: &f.forward,
                reverse: &f.reverse,
                started_at: f.started_at,
                connected_at: f.connected_at,
                forward_done_at: f.forward_done_at,
                reverse_done_at: f.reverse_done_at,
                error: f.error.clone(),
                samples: &f.samples,
                now: self.now,
                links: &f.links,
            })
            .collect::<Vec<_>>();
        RunResult::new(
            &self.scenario,
            self.seed,
            self.now,
            wall,
            self.delivered_datagrams,
            &flows,
        )
    }
}

/// The application at one end: writes what the session takes and reads
/// (and checks) what arrived. An end that `holds_answer` writes only once
/// it has read the whole forward stream.
fn run_application(
    now: Instant,
    s: &mut Session,
    writer: &mut Transfer,
    reader: &mut Transfer,
    holds_answer: bool,
) {
    let pump = |s: &mut Session, writer: &mut Transfer| {
        writer.pump(s.writable(), |n| s.write_generated(n));
        if writer.is_written() {
            s.finish();
        }
    };
    if !holds_answer {
        pump(s, writer);
    }
    s.read_with(now, |d| reader.on_read(d));
    if holds_answer && s.is_recv_finished() && reader.read == reader.total {
        pump(s, writer);
    }
}

/// One end's datagrams on their way into the links, for one wake-up.
struct Sending<'a> {
    now: Instant,
    flow: usize,
    side: Side,
    /// The scenario path each of the flow's connections runs over.
    scenario_paths: &'a [usize],
    links: &'a mut [[Link; 2]],
    logs: &'a mut [LinkLog; 2],
    spare: &'a mut Vec<Vec<u8>>,
    /// What arrives when, for the event queue.
    out: &'a mut Vec<(Instant, Action)>,
}

impl Sending<'_> {
    /// Offers everything the session sends now to its connection's link,
    /// each datagram written straight into the buffer it travels in.
    fn transmit_all(&mut self, s: &mut Session) {
        loop {
            let mut buf = self.spare.pop().unwrap_or_default();
            let Some(t) = s.poll_transmit(self.now, 1, &mut buf) else {
                self.spare.push(buf);
                break;
            };
            buf.truncate(t.size);
            match self.scenario_paths.get(t.path.index()) {
                Some(&scenario_path) => self.offer(scenario_path, &t, buf),
                None => self.spare.push(buf),
            }
        }
    }

    fn offer(&mut self, scenario_path: usize, t: &Transmit, mut buf: Vec<u8>) {
        let (now, dir) = (self.now, usize::from(self.side == Side::Server));
        let to = match self.side {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        };
        let size = t.size as u32 + IP_UDP_OVERHEAD;
        let level = buf.get(wire::MBECN_OFFSET).copied().unwrap_or(0);
        let offer = self.links[scenario_path][dir].offer(now, size, t.ecn, level);
        let log = &mut self.logs[dir];
        log.offered += 1;
        let Offer::Deliver {
            at,
            ecn,
            mbecn,
            duplicate_at,
            queue_delay,
        } = offer
        else {
            if matches!(offer, Offer::Dropped(_)) {
                log.dropped += 1;
            }
            self.spare.push(buf);
            return;
        };
        log.record(at - now, queue_delay);
        wire::mark_mbecn(&mut buf, mbecn);
        let (flow, conn) = (self.flow, t.path);
        let deliver = |datagram: Vec<u8>| Action::Deliver {
            flow,
            to,
            conn,
            scenario_path,
            ecn,
            datagram,
        };
        if let Some(dup) = duplicate_at {
            let mut copy = self.spare.pop().unwrap_or_default();
            copy.clear();
            copy.extend_from_slice(&buf);
            self.out.push((dup, deliver(copy)));
        }
        self.out.push((at, deliver(buf)));
    }
}

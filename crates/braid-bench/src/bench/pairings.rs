//! `braid bench pairings`: what a rendezvous relay costs. A `braid relay
//! --serve` on loopback, as an operator runs it, is given N concurrent
//! pairs (2N client sockets in this process, each going through the
//! cookie and the pairing as braid does), every pair's forwarding is
//! checked both ways, and then a few pairs are flooded with GSO batches of
//! full-size datagrams. Printed: the relay's memory per pair (resident
//! memory before and after), its CPU seconds per GB forwarded and its
//! forwarding rate.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use braid_proto::rendezvous::{Client, Event, Role};
use clap::Args;

use super::reach::procs::usage;

#[derive(Args)]
pub struct PairingsArgs {
    /// Concurrent pairs to make on one relay.
    #[arg(long, default_value_t = 1000)]
    pairs: usize,
    /// Pairs flooded at once to measure forwarding.
    #[arg(long, default_value_t = 2)]
    flooded: usize,
    /// How long the flood lasts.
    #[arg(long, default_value = "3s", value_parser = braid::text::parse_timeout)]
    flood_for: Duration,
    /// Write pairings.md here too.
    #[arg(long)]
    out: Option<PathBuf>,
}

const MIB: f64 = 1024.0 * 1024.0;

/// Payload of a flooded datagram: what a sealed braid data datagram of the
/// default segment is (its header with a 2-byte packet number, as while
/// data flows, the STREAM frame's 5 bytes, the tag).
const DATAGRAM: usize = 1380 + braid_proto::wire::data_datagram_overhead(true) + 5;

/// The relay child; killed on drop.
struct RelayChild(Child);

impl Drop for RelayChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(args: PairingsArgs) -> anyhow::Result<ExitCode> {
    let port = UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port();
    let relay_addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut child = Command::new(crate::braid_exe()?)
        .args(["relay", "--serve", &relay_addr.to_string()])
        .args(["--max-pairs", &(args.pairs + 10).to_string()])
        .args(["--max-registrations", &(args.pairs + 10).to_string()])
        // Every pair comes from this one host.
        .args(["--max-per-host", &(args.pairs + 10).to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start braid relay --serve")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let relay = RelayChild(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    if !line.starts_with("relay serving on") {
        bail!("the relay did not start: {line:?}");
    }
    let pid = relay.0.id();
    let idle_rss = usage(pid)?.rss;

    let started = Instant::now();
    let mut pairs = Vec::with_capacity(args.pairs);
    for i in 0..args.pairs {
        pairs.push(pair(relay_addr, i).with_context(|| format!("pair {i}"))?);
    }
    let paired_in = started.elapsed();
    for (i, (recv, send)) in pairs.iter().enumerate() {
        check_forwarding(relay_addr, recv, send, i)
            .with_context(|| format!("pair {i} forwards"))?;
    }
    let pairs_rss = usage(pid)?.rss;
    let per_pair = pairs_rss.saturating_sub(idle_rss) as f64 / args.pairs as f64;

    let cpu_before = usage(pid)?.cpu_s;
    let flooded: Vec<_> = pairs.into_iter().take(args.flooded).collect();
    let forwarded = flood(relay_addr, flooded, args.flood_for)?;
    let cpu = usage(pid)?.cpu_s - cpu_before;
    let gb = forwarded as f64 / 1e9;
    let text = format!(
        "# Rendezvous relay cost\n\n\
         `braid bench pairings --pairs {n} --flooded {f}` on loopback: one `braid relay --serve`, \
         {n} concurrent pairs made through the cookie and the pairing, each checked to forward \
         both ways and only to its own peer; then {f} pairs flooded with GSO batches of \
         {DATAGRAM}-byte datagrams for {s} s.\n\n\
         | figure | value |\n|---|---|\n\
         | pairs made and checked | {n} in {paired:.2} s |\n\
         | relay memory, idle | {idle:.1} MiB |\n\
         | relay memory with {n} pairs | {with:.1} MiB |\n\
         | memory per pair | {per:.0} bytes |\n\
         | forwarded in the flood | {mb:.0} MB at {rate:.0} Mbit/s |\n\
         | relay CPU per GB forwarded | {cpg:.2} s |\n",
        n = args.pairs,
        f = args.flooded,
        s = args.flood_for.as_secs_f64(),
        paired = paired_in.as_secs_f64(),
        idle = idle_rss as f64 / MIB,
        with = pairs_rss as f64 / MIB,
        per = per_pair,
        mb = forwarded as f64 / 1e6,
        rate = forwarded as f64 * 8.0 / args.flood_for.as_secs_f64() / 1e6,
        cpg = if gb > 0.0 { cpu / gb } else { f64::NAN },
    );
    print!("{text}");
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("pairings.md"), &text)?;
    }
    drop(relay);
    Ok(ExitCode::SUCCESS)
}

/// Meets at the relay from `sock` as braid does (the core's meeting,
/// driven by this blocking socket) until an event that `want` takes.
fn meet(
    sock: &UdpSocket,
    client: &mut Client,
    clock: Instant,
    want: impl Fn(&Event) -> bool,
) -> anyhow::Result<()> {
    let now = || braid_proto::Instant::from_nanos(clock.elapsed().as_nanos() as u64);
    let mut buf = [0u8; 2048];
    let give_up = Instant::now() + Duration::from_secs(10);
    while Instant::now() < give_up {
        while let Some((to, bytes)) = client.poll_transmit(now()) {
            sock.send_to(&bytes, to)?;
        }
        while let Some(e) = client.poll_event() {
            if want(&e) {
                return Ok(());
            }
            if let Event::Refused { why, .. } = e {
                bail!("the relay refused: {why}");
            }
        }
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            client.handle(now(), from, &buf[..n]);
        }
    }
    bail!("no answer from the relay")
}

fn socket() -> anyhow::Result<UdpSocket> {
    let s = UdpSocket::bind("127.0.0.1:0")?;
    s.set_read_timeout(Some(Duration::from_millis(20)))?;
    Ok(s)
}

/// A receiver registered and a sender joined under handle `i`.
fn pair(relay: SocketAddr, i: usize) -> anyhow::Result<(UdpSocket, UdpSocket)> {
    let mut handle = [0u8; 32];
    handle[..8].copy_from_slice(&(i as u64).to_be_bytes());
    let clock = Instant::now();
    let t0 = braid_proto::Instant::ZERO;
    let mut seed = [1u8; 32];
    seed[..8].copy_from_slice(&(i as u64).to_be_bytes());
    let mut r = Client::new(t0, Role::Register, handle, &[relay], false, seed);
    seed[8] = 2;
    let mut s = Client::new(t0, Role::Join, handle, &[relay], false, seed);
    let (recv, send) = (socket()?, socket()?);
    meet(&recv, &mut r, clock, |e| {
        matches!(e, Event::Registered { .. })
    })?;
    meet(&send, &mut s, clock, |e| matches!(e, Event::Paired { .. }))?;
    // The receiver's notice of the pairing.
    meet(&recv, &mut r, clock, |e| matches!(e, Event::Paired { .. }))
        .context("the receiver was not told of its pair")?;
    Ok((recv, send))
}

/// A datagram each way, carrying the pair's number.
fn check_forwarding(
    relay: SocketAddr,
    recv: &UdpSocket,
    send: &UdpSocket,
    i: usize,
) -> anyhow::Result<()> {
    let mut buf = [0u8; 512];
    let msg = (i as u64).to_be_bytes();
    for (from, to) in [(send, recv), (recv, send)] {
        from.send_to(&msg, relay)?;
        // Answers to the meeting's last requests may still be queued.
        let mut n = to.recv(&mut buf)?;
        while braid_proto::rendezvous::is_rendezvous(&buf[..n]) {
            n = to.recv(&mut buf)?;
        }
        if buf[..n] != msg {
            bail!("got another pair's datagram");
        }
    }
    Ok(())
}

/// Floods each pair, sender to receiver, for `how_long`, with GSO batches
/// of full-size datagrams, as braid sends; returns the bytes the
/// receivers got. The pairs' sockets are closed and bound again with GSO
/// and GRO, at the same addresses (the relay knows them by address).
fn flood(
    relay: SocketAddr,
    pairs: Vec<(UdpSocket, UdpSocket)>,
    how_long: Duration,
) -> anyhow::Result<u64> {
    let addrs: Vec<(SocketAddr, SocketAddr)> = pairs
        .iter()
        .map(|(r, s)| Ok((r.local_addr()?, s.local_addr()?)))
        .collect::<std::io::Result<_>>()?;
    drop(pairs);
    let received = Arc::new(AtomicU64::new(0));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let until = tokio::time::Instant::now() + how_long;
        let mut tasks = tokio::task::JoinSet::new();
        for (recv, send) in addrs {
            let buffer = braid::udp::DEFAULT_SOCKET_BUFFER;
            let recv = braid::udp::UdpIo::bind(recv, buffer)?;
            let send = braid::udp::UdpIo::bind(send, buffer)?;
            let got = received.clone();
            tasks.spawn(async move {
                let mut storage = vec![0u8; 16 * 65536];
                let mut meta = [quinn_udp::RecvMeta::default(); 16];
                let drain = until + Duration::from_millis(300);
                loop {
                    let mut bufs: Vec<std::io::IoSliceMut<'_>> = storage
                        .chunks_mut(65536)
                        .map(std::io::IoSliceMut::new)
                        .collect();
                    match tokio::time::timeout_at(drain, recv.recv(&mut bufs, &mut meta)).await {
                        Ok(Ok(n)) => {
                            let bytes: usize = meta[..n].iter().map(|m| m.len).sum();
                            got.fetch_add(bytes as u64, Ordering::Relaxed);
                        }
                        Ok(Err(_)) => {}
                        Err(_) => return,
                    }
                }
            });
            tasks.spawn(async move {
                let batch = vec![0x5au8; DATAGRAM * 40];
                while tokio::time::Instant::now() < until {
                    let _ = send
                        .send(relay, braid_proto::Ecn::NotEct, &batch, Some(DATAGRAM))
                        .await;
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        anyhow::Ok(())
    })?;
    Ok(received.load(Ordering::Relaxed))
}

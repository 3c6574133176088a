//! The receive stream feeding an application's sink ([`ReceivedContent`]).

use super::*;
use std::sync::{Arc, Mutex};

const MS: Duration = Duration::from_millis(1);

/// A sink of `capacity` bytes; the test releases what it took.
#[derive(Debug, Default)]
struct Taken {
    bytes: Vec<u8>,
    capacity: usize,
    /// Bytes taken and not released.
    held: usize,
    /// Released, not yet reported to the stream.
    released: u64,
    /// Calls to `append`.
    appends: usize,
}

#[derive(Debug, Clone)]
struct Sink(Arc<Mutex<Taken>>);

impl Sink {
    fn new(capacity: usize) -> Sink {
        Sink(Arc::new(Mutex::new(Taken {
            capacity,
            ..Taken::default()
        })))
    }

    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().bytes.clone()
    }

    fn release(&self, n: usize) {
        let mut t = self.0.lock().unwrap();
        t.held -= n;
        t.released += n as u64;
    }

    /// Reports releasing more than was ever taken, as a faulty sink could.
    fn overreport(&self, n: u64) {
        self.0.lock().unwrap().released += n;
    }
}

impl ReceivedContent for Sink {
    fn append(&mut self, data: &[u8]) -> usize {
        let mut t = self.0.lock().unwrap();
        t.appends += 1;
        let n = data.len().min(t.capacity - t.held);
        t.bytes.extend_from_slice(&data[..n]);
        t.held += n;
        n
    }

    fn take_released(&mut self) -> u64 {
        std::mem::take(&mut self.0.lock().unwrap().released)
    }
}

/// Stream bytes the stream itself holds.
fn held(r: &RecvStream) -> usize {
    r.buf.len() + r.pending.values().map(VecDeque::len).sum::<usize>()
}

fn with_sink(window: u64, capacity: usize) -> (RecvStream, Sink) {
    let mut r = RecvStream::new(window);
    let sink = Sink::new(capacity);
    assert!(r.use_sink(Box::new(sink.clone())));
    assert!(!r.use_sink(Box::new(Sink::new(1))), "one sink only");
    (r, sink)
}

#[test]
fn in_order_bytes_go_straight_to_the_sink() {
    let (mut r, sink) = with_sink(100, 100);
    r.insert(0, b"abcd", false).unwrap();
    r.insert(4, b"efgh", true).unwrap();
    assert_eq!(sink.bytes(), b"abcdefgh");
    assert_eq!(held(&r), 0, "nothing copied into the stream's buffer");
    assert_eq!(sink.0.lock().unwrap().appends, 2, "one append per packet");
    let mut out = [0u8; 8];
    assert_eq!(r.read(&mut out), 0, "the bytes are the sink's");
    assert!(r.is_fin_received() && r.is_finished());
}

#[test]
fn bytes_read_before_the_sink_stay_read_and_waiting_ones_move_in() {
    let mut r = RecvStream::new(100);
    r.insert(0, b"headbody", false).unwrap();
    let mut head = [0u8; 4];
    assert_eq!(r.read(&mut head), 4);
    let sink = Sink::new(100);
    assert!(r.use_sink(Box::new(sink.clone())));
    assert_eq!(sink.bytes(), b"body");
    r.insert(8, b"!", false).unwrap();
    assert_eq!(sink.bytes(), b"body!");
    assert_eq!(r.max_data(), 104, "taken is not released");
}

#[test]
fn out_of_order_bytes_wait_then_flush_into_the_sink() {
    let (mut r, sink) = with_sink(100, 100);
    r.insert(0, b"ab", false).unwrap();
    r.insert(6, b"gh", false).unwrap();
    r.insert(4, b"ef", false).unwrap();
    assert_eq!(sink.bytes(), b"ab", "nothing past the hole");
    assert_eq!(held(&r), 4);
    r.insert(2, b"cd", false).unwrap();
    assert_eq!(sink.bytes(), b"abcdefgh");
    assert_eq!(held(&r), 0);
    assert_eq!(r.cumulative(), 8);
}

/// The sink's bytes count against the window until released: a full sink
/// leaves the rest of the window to the stream's buffer, and the limit
/// moves only with what the application releases.
#[test]
fn the_window_advances_only_with_released_bytes() {
    let (mut r, sink) = with_sink(10, 6);
    r.insert(0, b"0123456789", false).unwrap();
    assert_eq!(sink.bytes(), b"012345");
    assert_eq!((held(&r), r.max_data()), (4, 10));
    assert_eq!(r.insert(10, b"x", false), Err(RecvError::FlowControl));
    assert!(!r.on_sink_released(), "nothing released yet");
    sink.release(3);
    assert!(r.on_sink_released());
    assert_eq!(r.max_data(), 13);
    assert_eq!(sink.bytes(), b"012345678", "waiting bytes fill the room");
    assert_eq!(held(&r), 1);
    r.insert(10, b"abc", false).unwrap();
    assert_eq!(r.insert(13, b"d", false), Err(RecvError::FlowControl));
    // What the stream and the sink hold together never exceeds the window.
    assert_eq!(held(&r) + sink.0.lock().unwrap().held, 10);
    sink.release(6);
    r.on_sink_released();
    assert_eq!(sink.bytes(), b"0123456789abc");
    assert_eq!((held(&r), r.max_data()), (0, 19));
}

/// A sink that never releases keeps the window shut however the peer
/// pushes, reports or scatters, and a sink reporting more than it took
/// opens it no further than what it took.
#[test]
fn a_peer_cannot_grow_the_window_past_an_unreleased_sink() {
    let rtt = 10 * MS;
    let (mut r, sink) = with_sink(100, 1 << 20);
    r.set_max_window(1 << 30);
    r.insert(0, &[7; 100], false).unwrap();
    for i in 0..1000u32 {
        let now = Instant::ZERO + MS * i;
        assert_eq!(r.on_peer_blocked(r.max_data(), now, rtt), Ok(false));
        assert!(!r.on_data(100, now, rtt));
        assert_eq!(r.insert(100, &[7; 1], false), Err(RecvError::FlowControl));
        assert_eq!(r.insert(u64::from(i) % 100, &[7; 1], false), Ok(()));
    }
    assert_eq!((r.window(), r.max_data()), (100, 100));
    sink.overreport(1 << 40);
    assert!(r.on_sink_released());
    assert_eq!(r.max_data(), 200, "no further than the bytes taken");
    assert_eq!(sink.bytes().len(), 100);
    // Released for real, the window grows as without a sink.
    r.insert(100, &[7; 100], false).unwrap();
    sink.release(100);
    assert!(r.on_sink_released());
    let limit = r.max_data();
    assert_eq!(
        r.on_peer_blocked(limit, Instant::ZERO + MS * 2000, rtt),
        Ok(true)
    );
    assert_eq!(r.window(), 200);
}

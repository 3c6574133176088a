//! The receive stream's unit tests.

use super::*;

const MS: Duration = Duration::from_millis(1);

fn at(ms: u64) -> Instant {
    Instant::ZERO + MS * ms as u32
}

fn read_all(r: &mut RecvStream) -> Vec<u8> {
    let mut v = Vec::new();
    r.read_with(|c| v.extend_from_slice(c));
    v
}

/// Stream bytes held, without spare capacity.
fn held(r: &RecvStream) -> u64 {
    (r.buf.len() + r.pending.values().map(VecDeque::len).sum::<usize>()) as u64
}

#[test]
fn reassembles_out_of_order_and_duplicates() {
    let mut r = RecvStream::new(100);
    r.insert(4, b"efgh", false).unwrap();
    r.insert(8, b"ij", true).unwrap();
    assert_eq!(r.readable(), 0);
    assert_eq!(r.insert(6, b"gh", true), Err(RecvError::FinalSize));
    r.insert(0, b"abcd", false).unwrap();
    r.insert(4, b"efgh", false).unwrap();
    assert_eq!(read_all(&mut r), b"abcdefghij");
    assert!(r.is_fin_received() && r.is_finished());
    assert_eq!(r.duplicate_bytes, 4);
}

#[test]
fn overlapping_pieces_are_trimmed() {
    let mut r = RecvStream::new(100);
    r.insert(2, b"cdef", false).unwrap();
    r.insert(0, b"abcd", false).unwrap();
    assert_eq!(read_all(&mut r), b"abcdef");
}

#[test]
fn enforces_the_window_and_final_size() {
    let mut r = RecvStream::new(10);
    assert_eq!(r.insert(8, b"xyz", false), Err(RecvError::FlowControl));
    r.insert(0, b"0123456789", false).unwrap();
    assert_eq!(r.max_data(), 10);
    let mut buf = [0; 6];
    assert_eq!(r.read(&mut buf), 6);
    assert_eq!(r.max_data(), 16);
    assert!(r.needs_window_update());
    r.on_advertised();
    r.insert(10, b"ab", true).unwrap();
    assert_eq!(r.insert(12, b"c", false), Err(RecvError::FinalSize));
    assert_eq!(r.insert(10, b"a", true), Err(RecvError::FinalSize));
}

#[test]
fn overlapping_and_nested_pieces_merge() {
    let mut r = RecvStream::new(100);
    r.insert(10, b"klmn", false).unwrap();
    r.insert(20, b"uv", false).unwrap();
    r.insert(8, b"ijklmnopqrstu", false).unwrap();
    assert_eq!(r.pending.len(), 1, "{:?}", r.pending);
    assert_eq!(r.duplicate_bytes, 5);
    r.insert(12, b"mn", false).unwrap();
    assert_eq!(r.duplicate_bytes, 7);
    assert_eq!(held(&r), 14);
    r.insert(0, b"abcdefgh", true).unwrap_err();
    r.insert(0, b"abcdefgh", false).unwrap();
    assert_eq!(read_all(&mut r), b"abcdefghijklmnopqrstuv");
    assert!(r.pending.is_empty());
}

/// Pieces of random sizes, overlapping, in random order within the
/// window, read in random amounts: the stream comes out exact, through
/// every wrap of the ring buffer, and no byte is held twice.
#[test]
fn random_pieces_reassemble_exactly() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let content: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let window = 8192u64;
    let mut r = RecvStream::new(window);
    let mut out = Vec::new();
    let mut buf = [0u8; 700];
    while out.len() < content.len() {
        let base = r.cumulative();
        let limit = r.max_data().min(content.len() as u64);
        for _ in 0..20 {
            let start = rng.gen_range(base..limit.max(base + 1)).min(limit);
            let end = (start + rng.gen_range(1..400)).min(limit);
            let fin = end == content.len() as u64;
            let piece = &content[start as usize..end as usize];
            r.insert(start, piece, fin).unwrap();
            let spans: u64 = r.pending.values().map(|p| p.len() as u64).sum();
            assert_eq!(held(&r), r.readable() as u64 + spans);
        }
        // Fill the hole at the in-order point, so it always advances.
        let end = (base + 300).min(limit);
        let fin = end == content.len() as u64;
        r.insert(base, &content[base as usize..end as usize], fin)
            .unwrap();
        let want = rng.gen_range(0..buf.len());
        let n = r.read(&mut buf[..want]);
        out.extend_from_slice(&buf[..n]);
        assert!(held(&r) <= window);
        assert!(r.buffered() <= 4 * window, "{}", r.buffered());
    }
    assert!(out == content);
    assert!(r.is_finished());
}

/// A peer scattering one-byte pieces over the window: memory follows
/// the bytes sent, the ranges stay bounded, and past an honest sender's
/// worst case it is a protocol violation.
#[test]
fn a_flood_of_tiny_pieces_is_bounded() {
    let window = 1 << 20;
    let mut r = RecvStream::new(window);
    let mut refused = None;
    for i in 0..window / 2 {
        match r.insert(1 + 2 * i, b"x", false) {
            Ok(()) => {}
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
        assert!(
            r.buffered() <= i + 1,
            "{} bytes for {}",
            r.buffered(),
            i + 1
        );
    }
    let (at, e) = refused.expect("the flood is refused");
    assert_eq!(e, RecvError::Fragmented);
    assert_eq!(at as usize, (window / MIN_PIECE) as usize + MIN_RANGES);
    // The same bytes again, or overlapping them, add nothing.
    let before = (r.pending.len(), r.buffered());
    for i in 0..1000 {
        r.insert(1 + 2 * i, b"x", false).unwrap();
    }
    assert_eq!((r.pending.len(), r.buffered()), before);
}

/// One byte at the far end of a 64 MiB window costs a byte, not the
/// window.
#[test]
fn one_byte_at_the_window_end_holds_one_byte() {
    let window = 64 << 20;
    let mut r = RecvStream::new(window);
    r.insert(window - 1, b"x", false).unwrap();
    assert!(r.buffered() <= 16, "{} bytes held", r.buffered());
    assert_eq!(r.readable(), 0);
}

/// Packet-sized pieces scattered over the window hold their bytes;
/// pieces that arrive back to front merge into one as they touch.
#[test]
fn scattered_pieces_hold_what_arrived() {
    let window = 1 << 20;
    let mut r = RecvStream::new(window);
    for i in 1..=500u64 {
        r.insert(i * 2000, &[i as u8; 1000], false).unwrap();
    }
    assert_eq!(r.pending.len(), 500);
    assert!(r.buffered() <= 500 * 1000, "{} bytes held", r.buffered());
    // Fill the holes back to front: each piece touches the one above.
    for i in (0..500u64).rev() {
        r.insert(i * 2000 + 1000, &[0xee; 1000], false).unwrap();
        assert_eq!(r.pending.len(), (i as usize).max(1));
        assert!(r.buffered() <= 2 * held(&r) + 2000);
    }
    r.insert(0, &[0xee; 1000], false).unwrap();
    assert!(r.pending.is_empty());
    let all = read_all(&mut r);
    assert_eq!(all.len(), 1_001_000);
    for i in 1..=500usize {
        assert!(all[i * 2000..i * 2000 + 1000].iter().all(|&b| b == i as u8));
        assert!(all[i * 2000 - 1000..i * 2000].iter().all(|&b| b == 0xee));
    }
    assert_eq!(r.duplicate_bytes, 0);
}

/// However many BLOCKED reports arrive, at our limit or beyond it, the
/// window grows only with data the application read, once per RTT.
#[test]
fn blocked_reports_alone_do_not_grow_the_window() {
    let rtt = 50 * MS;
    let mut r = RecvStream::new(100);
    r.set_max_window(1 << 30);
    for i in 0..10_000 {
        let limit = r.max_data();
        assert_eq!(r.on_peer_blocked(limit, at(i), rtt), Ok(false));
        assert_eq!(
            r.on_peer_blocked(limit + 1, at(i), rtt),
            Err(RecvError::FlowControl)
        );
        assert_eq!(
            r.on_peer_blocked(u64::MAX, at(i), rtt),
            Err(RecvError::FlowControl)
        );
    }
    assert_eq!(r.window(), 100);
    // Half the window delivered and read: one growth, however many reports.
    r.insert(0, &[0; 50], false).unwrap();
    assert_eq!(read_all(&mut r).len(), 50);
    assert_eq!(r.on_peer_blocked(150, at(0), rtt), Ok(true));
    for _ in 0..10_000 {
        assert_eq!(r.on_peer_blocked(r.max_data(), at(0), rtt), Ok(false));
    }
    assert_eq!((r.window(), r.max_data()), (200, 250));
    // Another half window read, but within the round trip: no growth yet.
    r.insert(50, &[0; 100], false).unwrap();
    assert_eq!(read_all(&mut r).len(), 100);
    assert_eq!(r.on_peer_blocked(350, at(49), rtt), Ok(false));
    assert_eq!(r.on_peer_blocked(350, at(50), rtt), Ok(true));
    assert_eq!(r.window(), 400);
    // A report about the limit before that growth is stale.
    r.insert(150, &[0; 200], false).unwrap();
    assert_eq!(read_all(&mut r).len(), 200);
    assert_eq!(r.on_peer_blocked(349, at(200), rtt), Ok(false));
    assert_eq!(r.window(), 400);
}

/// A listener's session grows its window only while the listener's
/// memory budget has room, and holds nothing before it is established.
#[test]
fn the_window_grows_only_as_far_as_the_memory_budget() {
    use crate::endpoint::{MemoryBudget, Reservation};
    let rtt = 50 * MS;
    let budget = MemoryBudget::new(300);
    let mut r = RecvStream::new(100);
    r.set_max_window(1000);
    r.use_memory(Reservation::empty(&budget));
    assert_eq!(budget.used(), 0);
    assert!(r.hold_window());
    assert_eq!(budget.used(), 100);
    r.insert(0, &[0; 50], false).unwrap();
    read_all(&mut r);
    assert_eq!(r.on_peer_blocked(150, at(0), rtt), Ok(true));
    assert_eq!((r.window(), budget.used()), (200, 200));
    r.insert(50, &[0; 100], false).unwrap();
    read_all(&mut r);
    // 400 would pass the budget: the window stays.
    assert_eq!(r.on_peer_blocked(350, at(100), rtt), Ok(false));
    assert_eq!((r.window(), budget.used()), (200, 200));
    drop(r);
    assert_eq!(budget.used(), 0);
}

#[test]
fn data_held_behind_a_hole_grows_the_window() {
    let rtt = 50 * MS;
    let mut r = RecvStream::new(100);
    r.set_max_window(1000);
    r.insert(0, &[0; 50], false).unwrap();
    assert!(!r.on_data(50, at(0), rtt), "in order, unread");
    assert_eq!(read_all(&mut r).len(), 50);
    // Bytes 50..60 are lost; what follows waits behind the hole.
    r.insert(60, &[0; 39], false).unwrap();
    assert!(
        !r.on_data(99, at(1), rtt),
        "under half the window above the read point"
    );
    r.insert(99, &[0; 1], false).unwrap();
    assert!(r.on_data(100, at(1), rtt));
    assert_eq!((r.window(), r.max_data()), (200, 250));
    assert!(!r.on_data(100, at(1), rtt), "once per half window read");
    // The hole is repaired and everything read: 100 bytes since the
    // growth, half the new window.
    r.insert(50, &[0; 10], false).unwrap();
    assert_eq!(read_all(&mut r).len(), 50);
    r.insert(100, &[0; 50], false).unwrap();
    assert_eq!(read_all(&mut r).len(), 50);
    r.insert(160, &[0; 89], false).unwrap();
    assert!(
        !r.on_data(249, at(40), rtt),
        "half of the new window is 100"
    );
    r.insert(249, &[0; 1], false).unwrap();
    assert!(
        !r.on_data(250, at(40), rtt),
        "within a round trip of the growth"
    );
    assert!(r.on_data(250, at(51), rtt));
    assert_eq!(r.window(), 400);
    // An application that does not read keeps the window as it is.
    let mut slow = RecvStream::new(100);
    slow.set_max_window(1000);
    slow.insert(0, &[0; 60], false).unwrap();
    assert!(!slow.on_data(60, at(0), rtt));
    assert_eq!(slow.window(), 100);
    // Nor does data a peer scatters beyond a hole without delivering
    // (and us reading) half a window in order first.
    let mut held_back = RecvStream::new(100);
    held_back.set_max_window(1000);
    held_back.insert(1, &[0; 99], false).unwrap();
    assert!(!held_back.on_data(100, at(0), rtt));
    assert_eq!(held_back.window(), 100);
}

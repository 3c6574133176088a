//! The view on terminals of a few sizes, read back as text.

use super::super::model::{PathReading, Reading};
use super::*;
use braid_proto::PathId;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::Duration;

/// Per tick: path i carries `per_tick[i]` bytes and loses `lost[i]` packets.
fn model(side: Side, labels: &[&str], per_tick: &[u64], lost: &[u64], ticks: u64) -> Model {
    let mut m = Model::new(side, "braid send data.bin", Some(20_000_000));
    for t in 0..ticks {
        let paths = labels
            .iter()
            .enumerate()
            .map(|(i, l)| PathReading {
                id: PathId(i as u8),
                label: (*l).to_owned(),
                carried: per_tick[i] * t,
                window: 64_000 / (i as u64 + 1),
                srtt: Duration::from_millis(21 + 62 * i as u64),
                lost: lost[i] * t,
                ..PathReading::default()
            })
            .collect();
        m.record(Reading {
            at: Duration::from_millis(250 * t),
            content: 1_000_000 * t,
            stream: per_tick.iter().sum::<u64>() * t,
            paths,
        });
    }
    m
}

/// The screen as lines of text, as a terminal of `w`×`h` shows `m`.
fn screen(m: &Model, w: u16, h: u16) -> Vec<String> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw(m, f.area(), f.buffer_mut())).unwrap();
    let buf = t.backend().buffer();
    (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect())
        .collect()
}

fn row_with<'a>(lines: &'a [String], text: &str) -> (usize, &'a str) {
    lines
        .iter()
        .enumerate()
        .find(|(_, l)| l.contains(text))
        .map(|(i, l)| (i, l.as_str()))
        .unwrap_or_else(|| panic!("{text:?} not on screen:\n{}", lines.join("\n")))
}

/// Box `i`'s top and bottom rows: full width, corners at both edges.
fn boxes(lines: &[String]) -> Vec<(usize, usize)> {
    let tops: Vec<usize> = (0..lines.len())
        .filter(|&y| lines[y].starts_with('┌'))
        .collect();
    tops.iter()
        .map(|&top| {
            assert!(lines[top].ends_with('┐'), "{}", lines[top]);
            let bottom = (top..lines.len())
                .find(|&y| lines[y].starts_with('└'))
                .unwrap();
            assert!(lines[bottom].ends_with('┘'), "{}", lines[bottom]);
            for l in &lines[top + 1..bottom] {
                assert!(l.starts_with('│') && l.ends_with('│'), "cut: {l}");
            }
            (top, bottom)
        })
        .collect()
}

#[test]
fn two_connections_on_80_by_24() {
    let labels = ["127.0.0.1:7000", "[2001:db8:4a:f00d::17]:7000 (relay)"];
    let m = model(Side::Send, &labels, &[750_000, 250_000], &[0, 1], 10);
    let lines = screen(&m, 80, 24);
    let text = lines.join("\n");
    // 9 MB of 20 MB at 32 Mbit/s: 11 MB left takes 2.75 s.
    let (y, head) = row_with(&lines, "braid send data.bin");
    assert_eq!(y, 0);
    for part in [
        "9.00 MB of 20.0 MB",
        "32.0 Mbit/s",
        "elapsed 2.25 s",
        "ETA 2.75 s",
    ] {
        assert!(head.contains(part), "{part:?} in {head:?}");
    }
    assert!(lines[1].contains("45 %"), "{}", lines[1]);
    let b = boxes(&lines);
    assert_eq!(b.len(), 2, "{text}");
    for (label, (top, _)) in labels.iter().zip(&b) {
        assert!(lines[*top].contains(label), "{}", lines[*top]);
    }
    assert!(
        lines[b[0].0].contains(" 75 % of bytes ┐"),
        "{}",
        lines[b[0].0]
    );
    assert!(
        lines[b[1].0].contains(" 25 % of bytes ┐"),
        "{}",
        lines[b[1].0]
    );
    // Each figure whole, at the right edge of its own box.
    let figure = |i: usize, name: &str, value: &str| {
        let (top, bottom) = b[i];
        let found = lines[top..bottom]
            .iter()
            .any(|l| l.starts_with(&format!("│{name}")) && l.ends_with(&format!(" {value}│")));
        assert!(found, "path {i}: {name} {value}:\n{text}");
    };
    figure(0, "rate", "24.0 Mbit/s");
    figure(1, "rate", "8.00 Mbit/s");
    figure(0, "window", "64.0 kB");
    figure(1, "window", "32.0 kB");
    figure(0, "sRTT", "21.0 ms");
    figure(1, "sRTT", "83.0 ms");
    figure(0, "lost", "0 (0/s)");
    figure(1, "lost", "9 (4.0/s)");
    // Two rows a chart: the boxes use the screen; the footer is last.
    assert!(b[1].1 - b[1].0 > 6, "{text}");
    let foot = &lines[23];
    assert!(
        foot.starts_with("charts: last 2.50 s · tops: 24.0 Mbit/s, 64.0 kB, 83.0 ms, 4.0/s"),
        "{foot}"
    );
}

#[test]
fn three_connections_still_fit_in_boxes() {
    let labels = ["10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"];
    let m = model(
        Side::Send,
        &labels,
        &[500_000, 300_000, 200_000],
        &[0, 0, 2],
        80,
    );
    let lines = screen(&m, 80, 24);
    let b = boxes(&lines);
    assert_eq!(b.len(), 3, "{}", lines.join("\n"));
    // The spare row of each box goes to its rate chart: no row wasted.
    assert_eq!(
        b.iter().map(|(t, b)| b - t + 1).collect::<Vec<_>>(),
        [7, 7, 7]
    );
    assert_eq!(b[2].1, 22);
    for name in ["rate", "window", "sRTT", "lost"] {
        let rows = lines
            .iter()
            .filter(|l| l.starts_with(&format!("│{name}")))
            .count();
        assert_eq!(rows, 3, "{name}");
    }
    // 58 columns of chart: 14.5 s at four ticks a second.
    assert!(
        lines[23].starts_with("charts: last 14.5 s"),
        "{}",
        lines[23]
    );
}

#[test]
fn the_newest_tick_is_on_the_right() {
    let mut m = model(Side::Send, &["a"], &[0], &[0], 5);
    m.record(Reading {
        at: Duration::from_millis(1250),
        paths: vec![PathReading {
            id: PathId(0),
            label: "a".into(),
            carried: 1_000_000,
            ..PathReading::default()
        }],
        ..Reading::default()
    });
    let lines = screen(&m, 80, 24);
    let (_, rate) = row_with(&lines, "│rate");
    let chart: Vec<char> = rate.chars().skip(1 + NAME_W as usize).take(58).collect();
    assert_eq!(chart[57], '█', "{rate}");
    assert!(chart[..57].iter().all(|&c| c == ' '), "{rate}");
}

#[test]
fn many_connections_lose_their_borders_then_take_a_line_each() {
    let labels: Vec<String> = (0..30)
        .map(|i| format!("10.0.0.{}:7000", 100 + i))
        .collect();
    let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
    let four = model(Side::Send, &refs[..4], &[1000; 4], &[0; 4], 8);
    let lines = screen(&four, 80, 24);
    assert!(boxes(&lines).is_empty());
    for l in &labels[..4] {
        let (_, row) = row_with(&lines, l);
        assert!(row.trim_end().ends_with("25 % of bytes"), "{row}");
    }
    assert_eq!(lines.iter().filter(|l| l.starts_with("sRTT")).count(), 4);

    let ten = model(Side::Send, &refs[..10], &[1000; 10], &[0; 10], 8);
    let lines = screen(&ten, 80, 24);
    for l in &labels[..10] {
        let (_, row) = row_with(&lines, l);
        assert!(row.contains(" 10% ") && row.ends_with(" 0 lost"), "{row}");
    }
    let all = model(Side::Send, &refs, &[1000; 30], &[0; 30], 8);
    let lines = screen(&all, 80, 24);
    row_with(&lines, "… and 10 more connections");
}

#[test]
fn the_receiver_charts_only_what_it_measures() {
    let mut m = model(
        Side::Recv,
        &["192.0.2.1:40000", "192.0.2.2:40001"],
        &[30, 10],
        &[0, 0],
        10,
    );
    m.title = "braid recv".into();
    m.total = None;
    let lines = screen(&m, 80, 24);
    let text = lines.join("\n");
    for absent in ["│window", "│sRTT", "│lost", "ETA"] {
        assert!(!text.contains(absent), "{absent}:\n{text}");
    }
    assert!(
        lines[0].starts_with("braid recv  9.00 MB  32.0 Mbit/s"),
        "{}",
        lines[0]
    );
    let b = boxes(&lines);
    assert_eq!(b.len(), 2, "{text}");
    assert!(lines[b[0].0].contains("75 % of bytes received"));
    row_with(&lines, "on the sender");
}

#[test]
fn a_bigger_terminal_shows_more_time_and_taller_charts() {
    let labels = ["10.0.0.1:7000", "10.0.0.2:7000"];
    let m = model(Side::Send, &labels, &[500_000, 300_000], &[1, 0], 200);
    let small = screen(&m, 80, 24);
    let big = screen(&m, 160, 50);
    let height = |lines: &[String]| boxes(lines).iter().map(|(t, b)| b - t).max().unwrap();
    assert!(height(&big) > height(&small));
    let foot = big.last().unwrap();
    // 160 - 2 - 7 - 13 columns.
    assert!(foot.starts_with("charts: last 34.5 s"), "{foot}");
}

#[test]
fn before_any_reading_it_says_it_waits() {
    let m = Model::new(Side::Send, "braid demo", Some(1000));
    let lines = screen(&m, 80, 24);
    row_with(&lines, "waiting for the session's first figures");
    // Tiny terminals draw what fits and do not panic.
    let m = model(Side::Send, &["a", "b"], &[1, 1], &[0, 0], 3);
    for (w, h) in [(1, 1), (10, 3), (30, 2), (0, 0)] {
        let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
        draw(&m, buf.area, &mut buf);
    }
}

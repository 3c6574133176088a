//! The live view in a real terminal: the `braid` binary runs in a
//! pseudo-terminal of 80×24 and a terminal emulator (vt100) turns what it
//! writes into the screen a person would see. Without a terminal, `--live`
//! changes nothing: today's lines, no escape codes.

use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const COLS: u16 = 80;
const ROWS: u16 = 24;

/// A `braid` run in a pseudo-terminal, and the screen it drew so far.
struct Run {
    child: Child,
    master: OwnedFd,
    /// Kept open so that the terminal's settings can be read after the exit.
    slave: OwnedFd,
    term: vt100::Parser,
}

impl Run {
    fn start(args: &[&str]) -> Run {
        let ws = libc::winsize {
            ws_row: ROWS,
            ws_col: COLS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: out-pointers to two ints and a winsize; no name or termios.
        let r = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &ws,
            )
        };
        assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: openpty returned two open descriptors that nothing else owns.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let stdio = || Stdio::from(slave.try_clone().unwrap());
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_braid"));
        cmd.args(args)
            .env("TERM", "xterm-256color")
            .stdin(stdio())
            .stdout(stdio())
            .stderr(stdio());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // A session of its own, with the terminal as its controlling
                // one: Ctrl-C typed there reaches it as SIGINT.
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("braid runs");
        Run {
            child,
            master,
            slave,
            term: vt100::Parser::new(ROWS, COLS, 0),
        }
    }

    /// Feeds what the program wrote within `wait` to the emulator.
    fn pump(&mut self, wait: Duration) {
        let mut pfd = libc::pollfd {
            fd: self.master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = wait.as_millis() as libc::c_int;
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
            return;
        }
        let mut buf = [0u8; 1 << 16];
        // SAFETY: reads into a buffer of its length.
        let n = unsafe { libc::read(pfd.fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            self.term.process(&buf[..n as usize]);
        }
    }

    /// Reads the output until `f` accepts a screen, for at most `limit`;
    /// returns what `f` returned then.
    fn until<T>(
        &mut self,
        limit: Duration,
        mut f: impl FnMut(&vt100::Screen) -> Option<T>,
    ) -> Option<T> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            self.pump(Duration::from_millis(50));
            if let Some(t) = f(self.term.screen()) {
                return Some(t);
            }
            if self.child.try_wait().unwrap().is_some() {
                self.pump(Duration::ZERO);
                return f(self.term.screen());
            }
        }
        None
    }

    /// Reads until the program exits (killed after `limit`), then the rest.
    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let end = Instant::now() + limit;
        let status = loop {
            self.pump(Duration::from_millis(50));
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                panic!("braid still running after {limit:?}:\n{}", self.text());
            }
        };
        for _ in 0..20 {
            self.pump(Duration::from_millis(10));
        }
        status
    }

    fn type_keys(&self, keys: &[u8]) {
        // SAFETY: writes a buffer of its length.
        let n = unsafe { libc::write(self.master.as_raw_fd(), keys.as_ptr().cast(), keys.len()) };
        assert_eq!(n, keys.len() as isize);
    }

    fn text(&self) -> String {
        self.term.screen().contents()
    }

    /// Whether the terminal echoes typed keys again.
    fn echoes(&self) -> bool {
        // SAFETY: termios is plain data, filled by tcgetattr.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        assert_eq!(
            unsafe { libc::tcgetattr(self.slave.as_raw_fd(), &mut t) },
            0
        );
        t.c_lflag & libc::ECHO != 0
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines(s: &vt100::Screen) -> Vec<String> {
    s.rows(0, COLS).collect()
}

/// One connection's box as drawn: its share and the figures right of its
/// rate and sRTT charts.
#[derive(Debug)]
struct Drawn {
    share_pct: f64,
    rate_mbps: f64,
    srtt_ms: f64,
}

/// Reads the box titled `title` off the screen, if it is there whole.
fn read_box(lines: &[String], title: &str) -> Option<Drawn> {
    let top = lines
        .iter()
        .position(|l| l.starts_with('┌') && l.contains(title) && l.ends_with('┐'))?;
    let bottom = top + lines[top..].iter().position(|l| l.starts_with('└'))?;
    let share = lines[top]
        .rsplit_once(" % of bytes")?
        .0
        .rsplit(' ')
        .next()?;
    let figure = |name: &str| -> Option<(f64, String)> {
        let row = lines[top..bottom]
            .iter()
            .find(|l| l.starts_with(&format!("│{name} ")))?;
        let mut words = row.trim_end_matches('│').split_whitespace().rev();
        let unit = words.next()?.to_owned();
        Some((words.next()?.parse().ok()?, unit))
    };
    let (rate, unit) = figure("rate")?;
    let rate_mbps = match unit.as_str() {
        "Mbit/s" => rate,
        "kbit/s" => rate / 1e3,
        "Gbit/s" => rate * 1e3,
        _ => return None,
    };
    let (srtt_ms, ms) = figure("sRTT")?;
    (ms == "ms").then_some(())?;
    Some(Drawn {
        share_pct: share.parse().ok()?,
        rate_mbps,
        srtt_ms,
    })
}

/// The demo's two default paths as the view draws them, once both carry
/// data and the header shows the totals and an ETA.
fn both_paths(s: &vt100::Screen) -> Option<(Drawn, Drawn, String)> {
    if !s.alternate_screen() || !s.hide_cursor() {
        return None;
    }
    let lines = lines(s);
    let head = &lines[0];
    if !(head.starts_with("braid demo") && head.contains(" of 20.0 MB") && head.contains("ETA ")) {
        return None;
    }
    let fast = read_box(&lines, "path 0 · 40Mbit 20ms RTT")?;
    let slow = read_box(&lines, "path 1 · 10Mbit 80ms RTT 1% loss")?;
    let moving = fast.rate_mbps > 0.5 && slow.rate_mbps > 0.5;
    let measured = fast.srtt_ms > 0.0 && slow.srtt_ms > 0.0;
    let footer = lines[usize::from(ROWS) - 1].starts_with("charts: last ");
    (moving && measured && footer).then(|| (fast, slow, lines.join("\n")))
}

#[test]
fn the_demo_draws_each_connection_then_gives_the_terminal_back() {
    let mut run = Run::start(&["demo", "--size", "20MB", "--live"]);
    let seen = run.until(Duration::from_secs(20), both_paths);
    let Some((fast, slow, screen)) = seen else {
        panic!("never saw both connections with figures:\n{}", run.text());
    };
    // The screen as a person saw it (docs/observability.md shows one).
    eprintln!("{screen}");
    // Each figure within what its emulated path allows.
    assert!(
        fast.rate_mbps <= 60.0 && slow.rate_mbps <= 20.0,
        "{fast:?} {slow:?}"
    );
    assert!((15.0..1000.0).contains(&fast.srtt_ms), "{fast:?}");
    assert!((75.0..1000.0).contains(&slow.srtt_ms), "{slow:?}");
    let shares = fast.share_pct + slow.share_pct;
    assert!((99.0..=101.0).contains(&shares), "{fast:?} {slow:?}");
    assert!(fast.share_pct > 0.0 && slow.share_pct > 0.0);

    let status = run.wait(Duration::from_secs(30));
    let s = run.term.screen();
    let after = run.text();
    assert!(status.success(), "{status}:\n{after}");
    assert!(
        !s.alternate_screen() && !s.hide_cursor(),
        "terminal not restored:\n{after}"
    );
    assert!(run.echoes(), "echo left off");
    // The usual summary, on the normal screen, and no chart left there.
    assert!(after.contains("sent: 20.0 MB in "), "{after}");
    assert!(after.contains("demo: 20MB in "), "{after}");
    assert!(after.contains("verified"), "{after}");
    assert!(
        !after.contains("% of bytes") && !after.contains("charts: last"),
        "{after}"
    );
}

#[test]
fn ctrl_c_gives_the_terminal_back() {
    // The live view is the demo's default on a terminal.
    let mut run = Run::start(&["demo", "--size", "5GB"]);
    let up = run.until(Duration::from_secs(15), |s| {
        (s.alternate_screen() && s.contents().contains("path 1 · ")).then_some(())
    });
    assert!(up.is_some(), "no live view:\n{}", run.text());
    run.type_keys(b"\x03");
    let status = run.wait(Duration::from_secs(10));
    let s = run.term.screen();
    let after = run.text();
    assert_eq!(status.code(), Some(130), "{after}");
    assert!(
        !s.alternate_screen() && !s.hide_cursor(),
        "terminal not restored:\n{after}"
    );
    assert!(run.echoes(), "echo left off");
    assert!(
        after.contains("braid: demo interrupted (SIGINT)"),
        "{after}"
    );
}

fn no_escapes(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    assert!(!bytes.contains(&0x1b), "escape code in {what}: {text:?}");
}

#[test]
fn without_a_terminal_live_prints_today_s_lines() {
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["demo", "--size", "2MB", "--live"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    no_escapes("demo's stderr", &out.stderr);
    no_escapes("demo's stdout", &out.stdout);
    assert!(
        err.starts_with("braid demo: 2MB over 2 emulated paths"),
        "{err}"
    );
    assert!(err.contains("\nsent: 2.00 MB in "), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("demo: 2MB in "));

    // A real pair on loopback, both with --live.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    std::fs::write(&file, vec![7u8; 1_000_000]).unwrap();
    let out_dir = dir.path().join("out/");
    let mut recv = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args([
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--insecure",
            "--live",
            "-o",
        ])
        .arg(&out_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut recv_err = BufReader::new(recv.stderr.take().unwrap());
    let mut recv_text = String::new();
    let addr = loop {
        let mut line = String::new();
        assert!(recv_err.read_line(&mut line).unwrap() > 0, "{recv_text}");
        recv_text += &line;
        if let Some(a) = line.strip_prefix("listening on ") {
            break a.trim().to_owned();
        }
    };
    let send = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["send", "--insecure", "--live", "--to", &addr])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let send_err = String::from_utf8_lossy(&send.stderr);
    assert!(send.status.success(), "{send_err}");
    no_escapes("send's stderr", &send.stderr);
    no_escapes("send's stdout", &send.stdout);
    assert!(
        send_err.contains("sent data.bin: 1.00 MB in "),
        "{send_err}"
    );
    let recv_out = recv.wait_with_output().unwrap();
    std::io::Read::read_to_string(&mut recv_err, &mut recv_text).unwrap();
    assert!(recv_out.status.success(), "{recv_text}");
    no_escapes("recv's stderr", recv_text.as_bytes());
    no_escapes("recv's stdout", &recv_out.stdout);
    assert!(
        recv_text.contains("received data.bin: 1.00 MB in "),
        "{recv_text}"
    );
}

//! What the CLI's tests share: running `braid`, a `braid recv` in the
//! background read line by line, ports with and without a listener.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

pub fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

pub fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    braid().args(args).output().expect("braid runs")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `braid args` and checks that it fails with exit status `status`,
/// saying `needle` on stderr; returns its output.
pub fn fails<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(
    args: &[S],
    status: i32,
    needle: &str,
) -> Output {
    let o = run(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(status), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    o
}

/// Checks that a transfer went through: the sender's run `sent`
/// succeeded, the receiver exited successfully (within 20 s), and `got`
/// holds `data`.
pub fn delivered(sent: &Output, recv: Recv, got: &Path, data: &[u8]) {
    assert!(sent.status.success(), "{}", stderr(sent));
    assert!(wait(recv.child, Duration::from_secs(20)).success());
    assert!(std::fs::read(got).unwrap() == data);
}

/// A key pair made by `braid keygen` in `dir`: the secret key's path
/// (the public half is beside it, in NAME.pub).
pub fn keygen(dir: &Path, name: &str) -> std::path::PathBuf {
    let key = dir.join(name);
    let o = run(&["keygen", "-o", key.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    key
}

/// A port that was just free: nobody listens there, and the host says so.
pub fn free_port() -> String {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap().to_string()
}

/// A socket that never reads: datagrams to it get no answer and no
/// "port unreachable" either. Keep it alive while it is used.
pub fn silent_port() -> (UdpSocket, String) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let a = s.local_addr().unwrap().to_string();
    (s, a)
}

/// `len` bytes of a fixed pattern, written to `path`.
pub fn write_data(path: &Path, len: usize) -> Vec<u8> {
    let data: Vec<u8> = (0..len as u64)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    std::fs::write(path, &data).unwrap();
    data
}

/// Waits for `child` at most `limit`, and kills it past that.
pub fn wait(mut child: Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("process did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lines `r` gives, as they come, on a thread of their own.
pub fn lines(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A running `braid recv` on a free port: its address, the options a
/// sender needs, and its stderr after them, line by line (drained, so it
/// never blocks on a full pipe). Its stdout stays with `child` unless
/// [`Recv::with_records`] reads it.
pub struct Recv {
    pub child: Child,
    pub addr: String,
    /// What the sender must add: `--code C`, `--peer K` or `--insecure`.
    pub auth: Vec<String>,
    pub err: Receiver<String>,
    out: Option<Receiver<String>>,
}

/// Starts `cmd` with its stdout piped, and its stderr read line by line.
pub fn spawn_piped(cmd: &mut Command) -> (Child, Receiver<String>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines(child.stderr.take().unwrap());
    (child, err)
}

pub fn start_recv(extra: &[&str]) -> Recv {
    let (child, err) = spawn_piped(
        braid()
            .args(["recv", "--listen", "127.0.0.1:0", "--quiet"])
            .args(extra),
    );
    let mut addr = None;
    let auth = loop {
        let line = err
            .recv_timeout(Duration::from_secs(10))
            .expect("recv prints its address");
        if let Some(a) = line.strip_prefix("listening on ") {
            addr = Some(a.to_owned());
        } else if let Some((_, option)) = line.split_once(" --to ") {
            let (_, auth) = option.split_once(' ').unwrap();
            break auth.split(' ').map(str::to_owned).collect();
        }
    };
    Recv {
        child,
        addr: addr.unwrap(),
        auth,
        err,
        out: None,
    }
}

impl Recv {
    /// `braid send` arguments for this receiver: FILE --to ADDR and its auth.
    pub fn send_args<'a>(&'a self, file: &'a str) -> Vec<&'a str> {
        let mut a = vec!["send", file, "--to", &self.addr];
        a.extend(self.auth.iter().map(String::as_str));
        a
    }

    /// Reads its stdout line by line, for [`Recv::record`].
    pub fn with_records(mut self) -> Recv {
        self.out = Some(lines(self.child.stdout.take().unwrap()));
        self
    }

    /// The next line on stdout, a JSON record, within `limit`.
    pub fn record(&self, limit: Duration) -> Value {
        let out = self.out.as_ref().expect("with_records");
        let line = out.recv_timeout(limit).expect("a JSON line from recv");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Waits until stderr has a line containing `needle`.
    pub fn said(&self, needle: &str, limit: Duration) -> String {
        let start = Instant::now();
        let mut seen = String::new();
        while let Some(left) = limit.checked_sub(start.elapsed()) {
            match self.err.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => seen += &(line + "\n"),
                Err(_) => break,
            }
        }
        panic!("recv never said {needle:?}; it said:\n{seen}");
    }

    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! The programs of one run (relays, receiver, sender, croc, magic-wormhole):
//! read line by line as it comes, with the time each line arrived, and all
//! of them killed and reaped if the run ends early.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

pub use braid::process::usage;

/// A line a program printed, and when it arrived.
#[derive(Clone, Debug)]
pub struct Line {
    pub at: Instant,
    pub stderr: bool,
    pub text: String,
}

/// A running program.
pub struct Proc {
    pub name: String,
    pub child: Child,
    lines: Receiver<Line>,
    /// Every line read so far.
    pub seen: Vec<Line>,
}

impl Proc {
    fn spawn(name: &str, mut cmd: Command) -> anyhow::Result<Proc> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {name}"))?;
        let (tx, lines) = channel();
        for (stream, stderr) in [
            (
                child
                    .stdout
                    .take()
                    .map(|s| Box::new(s) as Box<dyn Read + Send>),
                false,
            ),
            (
                child
                    .stderr
                    .take()
                    .map(|s| Box::new(s) as Box<dyn Read + Send>),
                true,
            ),
        ] {
            let (Some(stream), tx) = (stream, tx.clone()) else {
                continue;
            };
            std::thread::spawn(move || {
                for text in BufReader::new(stream).lines().map_while(Result::ok) {
                    let line = Line {
                        at: Instant::now(),
                        stderr,
                        text,
                    };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(Proc {
            name: name.to_owned(),
            child,
            lines,
            seen: Vec::new(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `limit` for a line that `wanted`; fails with the last
    /// lines it printed if it ends or says nothing of the kind.
    pub fn wait_for(
        &mut self,
        limit: Duration,
        wanted: impl Fn(&Line) -> bool,
    ) -> anyhow::Result<Line> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return Ok(line);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    bail!(
                        "{} said nothing expected within {} s: {}",
                        self.name,
                        limit.as_secs(),
                        self.said()
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    bail!("{} ended ({status}): {}", self.name, self.said())
                }
            }
        }
    }

    /// Reads what has arrived, without waiting.
    pub fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
    }

    /// Whether it has exited (reaped then).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits for it to exit and its output to end, at most `limit`.
    pub fn finish(&mut self, limit: Duration) -> anyhow::Result<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.child.try_wait()? {
                // The readers end with the pipes (a grandchild could hold
                // them: give up on its output after a moment).
                let end = Instant::now() + Duration::from_millis(500);
                while let Ok(line) = self
                    .lines
                    .recv_timeout(end.saturating_duration_since(Instant::now()))
                {
                    self.seen.push(line);
                }
                return Ok(st);
            }
            if Instant::now() >= deadline {
                bail!("{} did not end within {} s", self.name, limit.as_secs());
            }
            self.drain();
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The first line of its standard output that is a JSON object, and
    /// when it arrived.
    pub fn json(&self) -> Option<(Instant, serde_json::Value)> {
        self.seen.iter().filter(|l| !l.stderr).find_map(|l| {
            serde_json::from_str::<serde_json::Value>(&l.text)
                .ok()
                .filter(serde_json::Value::is_object)
                .map(|v| (l.at, v))
        })
    }

    /// Its last lines, for an error message.
    pub fn said(&self) -> String {
        let tail: Vec<&str> = self
            .seen
            .iter()
            .rev()
            .take(6)
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if tail.is_empty() {
            "nothing".into()
        } else {
            braid::text::escape(&tail.join(" | "))
        }
    }

    /// Sends `sig`, unless it has been reaped.
    pub fn signal(&mut self, sig: libc::c_int) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: the pid of our child, not yet reaped.
            unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        }
    }
}

/// A run's programs: killed and reaped on drop, whatever ended the run.
#[derive(Default)]
pub struct Procs(pub Vec<Proc>);

impl Procs {
    pub fn start(&mut self, name: &str, cmd: Command) -> anyhow::Result<&mut Proc> {
        self.0.push(Proc::spawn(name, cmd)?);
        Ok(self.0.last_mut().expect("just pushed"))
    }

    /// Starts a `braid recv` and waits until it says it is listening.
    pub fn start_receiver(&mut self, recv: Command) -> anyhow::Result<()> {
        self.start("braid recv", recv)?
            .wait_for(super::READY_LIMIT, |l| l.text.contains("listening"))?;
        Ok(())
    }

    pub fn get(&mut self, name: &str) -> Option<&mut Proc> {
        self.0.iter_mut().find(|p| p.name == name)
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for p in &mut self.0 {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_programs_lines_arrive_in_order_and_its_json_is_found() {
        let mut procs = Procs::default();
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo listening >&2; echo '{\"outcome\":\"verified\"}'; echo after",
        ]);
        let p = procs.start("sh", cmd).unwrap();
        p.wait_for(Duration::from_secs(5), |l| {
            l.stderr && l.text == "listening"
        })
        .unwrap();
        p.finish(Duration::from_secs(5)).unwrap();
        assert_eq!(p.json().unwrap().1["outcome"], "verified");
        let err = p
            .wait_for(Duration::from_secs(1), |l| l.text == "never")
            .unwrap_err();
        assert!(err.to_string().contains("ended"), "{err}");
    }
}

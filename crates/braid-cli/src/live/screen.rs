//! The terminal while the live view is up: the alternate screen on stderr
//! (stdout may be the received file), the cursor hidden and typed keys not
//! echoed over the charts. Whatever ends the view (its end, an error, a
//! signal handled by the command, a panic) puts the terminal back, once.
//! Keys are not read: Ctrl-C stays a signal the commands already handle.

use super::draw;
use super::model::Model;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::io::{self, BufWriter, Stderr, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

/// Whether the alternate screen is up, so that it is left exactly once.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The terminal's settings before echo was turned off.
static SAVED: Mutex<Option<libc::termios>> = Mutex::new(None);

pub struct Screen {
    // Buffered: a frame is thousands of small writes, stderr has no buffer.
    terminal: Terminal<CrosstermBackend<BufWriter<Stderr>>>,
    area: Rect,
}

impl Screen {
    /// Switches stderr's terminal to the alternate screen.
    pub fn enter() -> io::Result<Screen> {
        let area = size()?;
        install_panic_hook();
        echo_off();
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = BufWriter::with_capacity(1 << 16, io::stderr());
        let entered = execute!(out, terminal::EnterAlternateScreen, cursor::Hide);
        let terminal = entered.and_then(|()| {
            let backend = CrosstermBackend::new(out);
            let viewport = Viewport::Fixed(area);
            Terminal::with_options(backend, TerminalOptions { viewport })
        });
        match terminal {
            Ok(terminal) => Ok(Screen { terminal, area }),
            Err(e) => {
                leave();
                Err(e)
            }
        }
    }

    /// Draws `model`, at the terminal's current size.
    pub fn draw(&mut self, model: &Model) -> io::Result<()> {
        let area = size()?;
        if area != self.area {
            self.terminal.resize(area)?;
            self.area = area;
        }
        self.terminal
            .draw(|f| draw::draw(model, f.area(), f.buffer_mut()))?;
        Ok(())
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.terminal.backend_mut().flush();
        leave();
    }
}

/// Back to the normal screen, cursor and echo; does nothing the second time.
fn leave() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut err = io::stderr();
    let _ = execute!(err, cursor::Show, terminal::LeaveAlternateScreen);
    let saved = SAVED.lock().map(|mut s| s.take()).unwrap_or(None);
    if let Some(t) = saved {
        // SAFETY: `t` came from tcgetattr on the same descriptor.
        unsafe { libc::tcsetattr(libc::STDERR_FILENO, libc::TCSANOW, &t) };
    }
}

/// A panic's message would be lost on the alternate screen, and the shell
/// left without a cursor: restore first, then let the usual hook print.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            leave();
            previous(info);
        }));
    });
}

/// Stops the terminal echoing keys; line editing and signals stay as they are.
fn echo_off() {
    // SAFETY: termios is plain data; tcgetattr fills it or fails.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    if unsafe { libc::tcgetattr(libc::STDERR_FILENO, &mut t) } != 0 {
        return;
    }
    if let Ok(mut saved) = SAVED.lock() {
        *saved = Some(t);
    }
    t.c_lflag &= !libc::ECHO;
    // SAFETY: a valid termios for the same descriptor.
    unsafe { libc::tcsetattr(libc::STDERR_FILENO, libc::TCSANOW, &t) };
}

/// stderr's terminal size; asked of stderr itself, not of /dev/tty or
/// stdout, which may be something else.
fn size() -> io::Result<Rect> {
    // SAFETY: winsize is plain data; TIOCGWINSZ fills it or fails.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    if unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if ws.ws_col == 0 || ws.ws_row == 0 {
        return Err(io::Error::other("the terminal reports no size"));
    }
    Ok(Rect::new(0, 0, ws.ws_col, ws.ws_row))
}

//! A server session that carries nothing ends: without this deadline, a
//! client that completes the handshake and then stays silent (or only
//! answers probes) would hold a listener's room, and its share of the
//! memory budget, until the idle timeout, which keep-alives never reach.
//! A session counts as carrying something once either side has written
//! stream data, so a server that speaks first is not idle either. The
//! time runs from the client's confirmation: until then the session is
//! half-open, with bounds of its own.

use super::{Session, State};
use crate::session::close::CloseCode;
use crate::{Instant, Role};

impl Session {
    /// When a server session that has carried no stream data is closed.
    pub(super) fn first_data_deadline(&self) -> Option<Instant> {
        let limit = self.cfg.first_data_timeout?;
        let confirmed = self.handshake.confirmed_at()?;
        let quiet = !self.streams.send.is_touched() && !self.streams.recv.has_any();
        (self.role == Role::Server && quiet && matches!(self.state, State::Established))
            .then_some(confirmed + limit)
    }

    /// The deadline passed: the client hears why, in a sealed CLOSE.
    pub(super) fn on_first_data_timeout(&mut self) {
        let limit = self.cfg.first_data_timeout.unwrap_or_default();
        tracing::info!(session = %crate::ids::Hex(self.session_id), "no data: closing");
        self.abort(
            CloseCode::NoData.value(),
            &format!("no data in the first {} s", limit.as_secs_f64()),
        );
    }
}

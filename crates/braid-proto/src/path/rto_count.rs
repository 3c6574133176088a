//! A connection's retransmission timeouts, as the session's two give-up
//! rules count them: since the transfer last made progress (the retry
//! limit), and since anything authentic last arrived from the peer (the
//! silence limit, see `SessionConfig::silent_limit`). Either rule ends the
//! session only when every usable connection has reached it, so one dead
//! connection among live ones, or an outage the probes outlast, never adds
//! up to it.

use super::loss_tally::LossTally;

/// See the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RtoCount {
    /// Timeouts since new stream data was last acknowledged, or data
    /// became outstanding.
    without_progress: u32,
    /// Timeouts in the current silence and its limit, if any fired.
    in_silence: Option<SilentRtos>,
    /// Packets lost both ways, which fix how many timeouts make a silence.
    losses: LossTally,
}

/// Timeouts in the current silence and its limit, fixed at the first of
/// them: the probes a silence loses must not make it longer.
#[derive(Debug, Clone, Copy)]
struct SilentRtos {
    rtos: u32,
    limit: u32,
}

impl RtoCount {
    /// What the packets sent and received here showed of loss.
    pub fn losses_mut(&mut self) -> &mut LossTally {
        &mut self.losses
    }

    /// A timeout fired. The first of a silence fixes how many make the
    /// peer silent: at least `floor`, more the more this path has lost,
    /// or the less it has shown.
    pub fn on_rto_after_losses(&mut self, floor: u32) {
        let losses = self.losses;
        self.on_rto(|| losses.silent_limit(floor));
    }

    /// A timeout fired; `limit` says how many make the peer silent, asked
    /// at the first timeout of a silence only.
    fn on_rto(&mut self, limit: impl FnOnce() -> u32) {
        self.without_progress = self.without_progress.saturating_add(1);
        self.in_silence
            .get_or_insert_with(|| SilentRtos {
                rtos: 0,
                limit: limit(),
            })
            .rtos += 1;
    }

    /// The transfer made progress: the retry limit counts afresh.
    pub fn on_progress(&mut self) {
        self.without_progress = 0;
    }

    /// The peer was heard: the silence is over.
    pub fn on_heard(&mut self) {
        self.in_silence = None;
    }

    /// Whether a timeout fired since the peer was last heard.
    pub fn is_in_silence(&self) -> bool {
        self.in_silence.is_some()
    }

    /// Timeouts since the transfer last made progress.
    pub fn without_progress(&self) -> u32 {
        self.without_progress
    }

    /// The silence's limit, if this connection's timeouts reached it.
    pub fn silent_limit_reached(&self) -> Option<u32> {
        let s = self.in_silence?;
        (s.rtos >= s.limit).then_some(s.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_silence_limit_is_fixed_at_its_first_timeout() {
        let mut c = RtoCount::default();
        assert_eq!(c.silent_limit_reached(), None);
        c.on_rto(|| 2);
        assert_eq!(c.silent_limit_reached(), None);
        c.on_rto(|| unreachable!("asked once per silence"));
        assert_eq!(c.silent_limit_reached(), Some(2));
        assert_eq!(c.without_progress(), 2);
        c.on_heard();
        assert_eq!(c.silent_limit_reached(), None);
        assert_eq!(c.without_progress(), 2, "silence and progress are apart");
        c.on_rto(|| 5);
        assert_eq!(c.silent_limit_reached(), None);
        c.on_progress();
        assert_eq!(c.without_progress(), 0);
    }
}

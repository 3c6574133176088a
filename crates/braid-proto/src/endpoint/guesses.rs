//! One-time-code guesses: every handshake a code listener answers lets
//! whoever sent it test one guess at the code offline (SPAKE2 gives one
//! guess per answer), so each answer is counted when it is sent, and none
//! is sent once the answers not yet confirmed by their client could
//! exhaust the limit.

/// The tally of a code listener's answers.
#[derive(Debug, Clone, Copy)]
pub(super) struct CodeGuesses {
    limit: u32,
    answered: u32,
    confirmed: u32,
}

impl CodeGuesses {
    pub fn new(limit: u32) -> CodeGuesses {
        CodeGuesses {
            limit,
            answered: 0,
            confirmed: 0,
        }
    }

    /// Whether another answer keeps the wrong guesses within the limit,
    /// even if every answer still unconfirmed turns out wrong.
    pub fn may_answer(&self) -> bool {
        self.answered - self.confirmed < self.limit
    }

    /// An answer went out.
    pub fn on_answered(&mut self) {
        self.answered += 1;
    }

    /// Its client proved it knew the code.
    pub fn on_confirmed(&mut self) {
        self.confirmed += 1;
    }

    /// Answers whose client never proved it knew the code, so far
    /// (including those still in flight).
    pub fn unconfirmed(&self) -> u32 {
        self.answered - self.confirmed
    }

    pub fn answered(&self) -> u32 {
        self.answered
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_flight_count_before_they_fail() {
        let mut g = CodeGuesses::new(2);
        assert!(g.may_answer());
        g.on_answered();
        g.on_answered();
        assert!(!g.may_answer(), "two in flight may both be wrong");
        g.on_confirmed();
        assert!(g.may_answer(), "a confirmed answer spent no wrong guess");
        assert_eq!((g.answered(), g.unconfirmed()), (2, 1));
    }
}

//! What the application hears: the events it has not polled yet, and why
//! the session failed, if it did.

use super::Event;
use crate::error::SessionError;
use std::collections::VecDeque;

#[derive(Debug, Default)]
pub(super) struct Notices {
    queue: VecDeque<Event>,
    error: Option<SessionError>,
}

impl Notices {
    /// Queues `event` for [`Session::poll_event`](super::Session::poll_event).
    pub fn push(&mut self, event: Event) {
        self.queue.push_back(event);
    }

    /// The oldest event not polled yet.
    pub fn pop(&mut self) -> Option<Event> {
        self.queue.pop_front()
    }

    /// Why the session failed, if it did.
    pub fn error(&self) -> Option<&SessionError> {
        self.error.as_ref()
    }

    /// The session failed with `err`: kept, and told as an event.
    pub fn fail(&mut self, err: SessionError) {
        self.error = Some(err.clone());
        self.queue.push_back(Event::Failed(err));
    }
}

//! The error of a command line that parsed but cannot work.

/// A command line that cannot work, found after parsing (exit status 2).
#[derive(Debug)]
pub struct UsageError(String);

impl UsageError {
    pub fn new(message: impl Into<String>) -> UsageError {
        UsageError(message.into())
    }
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

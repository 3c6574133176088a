//! Windows counted in segments, for the controllers that count that way
//! (AIMD, CUBIC, NCP): the conversions to and from bytes in one place.

use super::ControllerMetrics;

/// The unit of a window counted in segments of the session's segment size,
/// and the largest such window the session allows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segments {
    /// Bytes per segment, at least 1.
    size: u64,
    /// Largest window, segments, at least 1.
    max: f64,
}

impl Segments {
    /// Segments of `segment_size` bytes, windows up to `max_segments`
    /// (each taken as at least 1).
    pub(crate) fn new(segment_size: u64, max_segments: u64) -> Self {
        Segments {
            size: segment_size.max(1),
            max: max_segments.max(1) as f64,
        }
    }

    /// Bytes per segment.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Largest window, segments.
    pub(crate) fn max(&self) -> f64 {
        self.max
    }

    /// `bytes` as a window in segments, from `min` up to the largest.
    pub(crate) fn window_of(&self, bytes: u64, min: f64) -> f64 {
        (bytes as f64 / self.size as f64).clamp(min, self.max)
    }

    /// A window of `segments` in whole bytes.
    pub(crate) fn bytes_of(&self, segments: f64) -> u64 {
        (segments * self.size as f64) as u64
    }

    /// Metrics of a window and slow-start threshold counted in segments.
    pub(crate) fn metrics(&self, cwnd: f64, ssthresh: f64) -> ControllerMetrics {
        ControllerMetrics::from_segments(cwnd, ssthresh, self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_convert_to_whole_bytes_and_clamp_from_bytes() {
        let s = Segments::new(1000, 50);
        assert_eq!(s.bytes_of(2.5), 2500);
        assert_eq!(s.bytes_of(0.0015), 1);
        assert_eq!(s.window_of(4500, 1.0), 4.5);
        assert_eq!(s.window_of(0, 2.0), 2.0);
        assert_eq!(s.window_of(1 << 40, 1.0), 50.0);
        // Zero sizes count as one.
        let one = Segments::new(0, 0);
        assert_eq!((one.size(), one.max()), (1, 1.0));
    }
}

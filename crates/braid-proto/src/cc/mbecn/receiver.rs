//! The receiver side of MB-ECN: the ECE, a floating sum of the packets'
//! congestion field, and when to report it.

use super::{ECE_MAX, ECE_SHIFT};

/// M: while congestion holds steady or eases, the receiver updates every M
/// packets (seed 004: M = 8; prototype `CA_UPD`).
const UPDATE_PACKETS: u32 = 8;

/// Receiver side of MB-ECN: folds each packet's 8-bit field into the ECE and
/// says when to send it (in a FLOW_UPDATE / ECE frame).
#[derive(Debug, Clone, Default)]
pub struct EceReceiver {
    /// Floating sum of the field over about 2^N packets, 0..=[`ECE_MAX`].
    ece: u16,
    /// Packets since the last update, while congested.
    since_update: u32,
}

impl EceReceiver {
    /// A packet arrived with MB-ECN field `mbecn`. Returns the ECE to send to
    /// the sender now, if an update is due: at the start of congestion (0 to
    /// > 0), on every rise, every M packets otherwise, and 0 at the end.
    pub fn on_packet(&mut self, mbecn: u8) -> Option<u16> {
        let mark = u16::from(mbecn);
        let old = self.ece;
        if old == 0 {
            if mark == 0 {
                return None;
            }
            // Start of congestion.
            self.ece = mark;
            return self.update();
        }
        self.ece = if mark == 0 {
            old >> 1
        } else {
            // The floating sum: drop 1/2^N of it, add the new mark. It stays
            // ≤ 2^N · 255 + 2^N − 1 = ECE_MAX; the min only guards that.
            (old - (old >> ECE_SHIFT) + mark).min(ECE_MAX)
        };
        if self.ece == 0 || self.ece > old {
            return self.update();
        }
        self.since_update += 1;
        if self.since_update >= UPDATE_PACKETS {
            self.update()
        } else {
            None
        }
    }

    fn update(&mut self) -> Option<u16> {
        self.since_update = 0;
        Some(self.ece)
    }

    #[cfg(test)]
    /// The current ECE.
    pub fn ece(&self) -> u16 {
        self.ece
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_sums_marks_over_32_packets_and_halves_on_a_zero_mark() {
        let mut r = EceReceiver::default();
        for k in 1..=32 {
            r.on_packet(1);
            assert_eq!(r.ece(), k, "a floating sum builds up one mark per packet");
        }
        for _ in 0..100 {
            r.on_packet(1);
        }
        assert_eq!(r.ece(), 32, "settles at 32 packets' worth of marks");
        r.on_packet(0);
        assert_eq!(r.ece(), 16, "an unmarked packet halves it");
        for _ in 0..1000 {
            r.on_packet(u8::MAX);
            assert!(r.ece() <= ECE_MAX);
        }
        assert_eq!(r.ece(), 32 * 255, "full marks sum to 2^13 - 32 < 2^13 - 1");
    }

    #[test]
    fn receiver_updates_on_start_rise_every_8_and_end() {
        let mut r = EceReceiver::default();
        assert_eq!(r.on_packet(0), None, "no congestion, nothing to say");
        assert_eq!(r.on_packet(1), Some(1), "start of congestion");
        for k in 2..=32 {
            assert_eq!(r.on_packet(1), Some(k), "every rise at once");
        }
        for _ in 0..7 {
            assert_eq!(r.on_packet(1), None, "steady: quiet for 7 packets");
        }
        assert_eq!(r.on_packet(1), Some(32), "then the 8th packet updates");
        assert_eq!(r.on_packet(0), None, "16: easing waits for the 8th");
        assert_eq!(r.on_packet(1), Some(17), "a rise is reported at once");
        for expect in [8, 4, 2, 1] {
            assert_eq!(r.on_packet(0), None);
            assert_eq!(r.ece(), expect);
        }
        assert_eq!(r.on_packet(0), Some(0), "the end of congestion at once");
        assert_eq!(r.on_packet(0), None);
    }
}

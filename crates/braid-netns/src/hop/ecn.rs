//! The ECN codepoint of an IP packet, read and rewritten, so a hop's link
//! can mark CE on the packets it carries.

use braid_proto::Ecn;

/// The ECN codepoint of an IPv4 or IPv6 packet.
pub(super) fn ip_ecn(packet: &[u8]) -> Ecn {
    match (packet.first().map(|b| b >> 4), packet.get(1)) {
        (Some(4), Some(&tos)) => Ecn::from_bits(tos),
        (Some(6), Some(&b)) => Ecn::from_bits(b >> 4),
        _ => Ecn::NotEct,
    }
}

/// Sets the ECN codepoint of an IPv4 (with its header checksum) or IPv6 packet.
pub(super) fn set_ip_ecn(packet: &mut [u8], ecn: Ecn) {
    if ip_ecn(packet) == ecn {
        return;
    }
    let bits = ecn.to_bits();
    match packet.first().map(|b| b >> 4) {
        Some(4) => {
            let ihl = usize::from(packet[0] & 0x0f) * 4;
            if ihl < 20 || packet.len() < ihl {
                return;
            }
            packet[1] = (packet[1] & !0b11) | bits;
            packet[10] = 0;
            packet[11] = 0;
            let sum = packet[..ihl]
                .chunks_exact(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum::<u32>();
            let folded = (sum & 0xffff) + (sum >> 16);
            let folded = (folded & 0xffff) + (folded >> 16);
            packet[10..12].copy_from_slice(&(!(folded as u16)).to_be_bytes());
        }
        Some(6) if packet.len() > 1 => packet[1] = (packet[1] & 0xcf) | (bits << 4),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 20-byte IPv4 header with a valid checksum (RFC 1071's example host).
    fn ipv4() -> Vec<u8> {
        let mut p = vec![
            0x45, 0x02, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0, 0, 100, 64, 0, 2, 100,
            64, 0, 1,
        ];
        set_ip_ecn(&mut p, Ecn::NotEct);
        set_ip_ecn(&mut p, Ecn::Ect0);
        p
    }

    fn checksum_ok(h: &[u8]) -> bool {
        let sum: u32 = h
            .chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        (folded & 0xffff) + (folded >> 16) == 0xffff
    }

    #[test]
    fn ce_marks_keep_ipv4_headers_valid() {
        let mut p = ipv4();
        assert!(checksum_ok(&p));
        assert_eq!(ip_ecn(&p), Ecn::Ect0);
        set_ip_ecn(&mut p, Ecn::Ce);
        assert_eq!(ip_ecn(&p), Ecn::Ce);
        assert_eq!(p[1] >> 2, 0, "DSCP untouched");
        assert!(checksum_ok(&p));
    }

    #[test]
    fn ce_marks_ipv6_traffic_class() {
        let mut p = vec![0x6a, 0x80, 0, 0, 0, 8, 17, 64];
        assert_eq!(ip_ecn(&p), Ecn::NotEct);
        p[1] |= 0b10 << 4;
        assert_eq!(ip_ecn(&p), Ecn::Ect0);
        set_ip_ecn(&mut p, Ecn::Ce);
        assert_eq!(ip_ecn(&p), Ecn::Ce);
        assert_eq!(
            (p[0], p[1] & 0xcf),
            (0x6a, 0x80),
            "version, DSCP and flow label untouched"
        );
    }
}

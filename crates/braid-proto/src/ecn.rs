//! ECN codepoints (RFC 3168) as the driver reports them for each datagram.

/// The two ECN bits of the IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Ecn {
    /// Not ECN-capable transport.
    #[default]
    NotEct,
    /// ECN-capable, codepoint ECT(0).
    Ect0,
    /// ECN-capable, codepoint ECT(1).
    Ect1,
    /// Congestion experienced: a router marked the packet.
    Ce,
}

impl Ecn {
    /// From the two low bits of the IP TOS / traffic-class byte.
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b10 => Ecn::Ect0,
            0b01 => Ecn::Ect1,
            _ => Ecn::Ce,
        }
    }

    /// The two low bits of the IP TOS / traffic-class byte.
    pub fn to_bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect0 => 0b10,
            Ecn::Ect1 => 0b01,
            Ecn::Ce => 0b11,
        }
    }

    /// Whether a router may mark this packet instead of dropping it.
    pub fn is_capable(self) -> bool {
        self != Ecn::NotEct
    }
}

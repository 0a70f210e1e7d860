//! Process identifiers.

use core::fmt;

/// A process identifier: a slab index and the slot's generation when the
/// process was spawned. Pids are never reused: when a slot is reclaimed its
/// generation moves on, and every use of a pid checks the generation
/// atomically with the transition it makes, so a stale pid can only ever
/// see `NoProc`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pid {
    /// `(index << 32) | generation`: one word, so that a pid is written
    /// and read in one access wherever it is copied (a pid written as two
    /// halves and read back whole stalls the load until the writes
    /// retire), and ordered by index, then generation.
    bits: u64,
}

impl Pid {
    /// Builds a pid from its parts (for hosts and tests; a made-up pid is
    /// simply a stale one).
    pub const fn from_parts(index: u32, generation: u32) -> Pid {
        Pid { bits: ((index as u64) << 32) | generation as u64 }
    }
    /// Slab index.
    #[inline]
    pub const fn index(self) -> u32 {
        (self.bits >> 32) as u32
    }
    /// Slot generation at spawn.
    #[inline]
    pub const fn generation(self) -> u32 {
        self.bits as u32
    }
    /// `(generation << 32) | index`: the tag given to the platform's
    /// overflow reporter.
    pub const fn to_bits(self) -> u64 {
        ((self.generation() as u64) << 32) | self.index() as u64
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}.{}>", self.index(), self.generation())
    }
}

impl fmt::Debug for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

//! Points on the platform's monotonic clock.

use core::ops::{Add, Sub};
use core::time::Duration;

use smarm_platform::Nanos;

/// A point on the runtime's monotonic clock (nanoseconds, arbitrary
/// origin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(Nanos);

impl Instant {
    /// From nanoseconds on the platform clock.
    pub const fn from_nanos(nanos: Nanos) -> Instant {
        Instant(nanos)
    }
    /// Nanoseconds on the platform clock.
    pub const fn as_nanos(self) -> Nanos {
        self.0
    }
    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl Sub for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

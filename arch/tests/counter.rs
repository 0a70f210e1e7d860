//! The timestamp counter, its frequency, the spin hint and the constants.

use smarm_arch::{Arch, Native};

#[test]
fn timestamp_never_goes_backwards() {
    let mut previous = Native::timestamp();
    for _ in 0..10_000 {
        Native::spin_hint();
        let now = Native::timestamp();
        assert!(now >= previous, "timestamp went from {previous} to {now}");
        previous = now;
    }
}

#[test]
fn timestamp_advances_over_a_millisecond() {
    let before = Native::timestamp();
    std::thread::sleep(std::time::Duration::from_millis(1));
    assert!(Native::timestamp() > before);
}

#[test]
fn timestamp_frequency_is_plausible_when_reported() {
    if let Some(hertz) = Native::timestamp_frequency() {
        // From a 1 MHz system counter to a 10 GHz TSC.
        assert!((1_000_000..=10_000_000_000).contains(&hertz), "{hertz} Hz");
    }
    #[cfg(target_arch = "aarch64")]
    assert!(Native::timestamp_frequency().is_some(), "CNTFRQ_EL0 is programmed on Linux");
}

#[test]
fn constants_describe_this_architecture() {
    #[cfg(target_arch = "x86_64")]
    assert_eq!(Native::NAME, "x86_64");
    #[cfg(target_arch = "aarch64")]
    assert_eq!(Native::NAME, "aarch64");
    const {
        assert!(Native::STACK_ALIGN == 16);
        assert!(Native::INIT_FRAME_SIZE > 0);
        assert!(Native::INIT_FRAME_SIZE.is_multiple_of(Native::STACK_ALIGN));
    }
}

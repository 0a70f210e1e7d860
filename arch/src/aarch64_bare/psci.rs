//! PSCI, the firmware interface that powers cores on: the calls, through the
//! conduit the platform expects.
//!
//! Invariant kept: a PSCI call goes through the conduit QEMU `virt`
//! advertises in its device tree (`/psci method`) for a guest without
//! firmware — `HVC` when the machine booted the image at EL1 (the default),
//! `SMC` when it booted it at EL2 (`virtualization=on`; the image has dropped
//! to EL1 since, and QEMU takes the `SMC` from EL1 as its PSCI call). The
//! boot code records which, before any Rust runs.
//!
//! The calls themselves are the `smccc` crate's (SMC64 calling convention;
//! its `asm!` is not `nomem`, so every store before a call is emitted before
//! it, which a started core relies on).

use smccc::psci;
use smccc::{Hvc, Smc};

use super::boot;

/// Why PSCI refused to start a core (the PSCI return codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PsciError {
    /// `NOT_SUPPORTED`: the firmware (here: QEMU) has no `CPU_ON`.
    NotSupported,
    /// `INVALID_PARAMETERS`: no core has that MPIDR (fewer cores than
    /// asked for: run QEMU with `-smp 4`).
    InvalidParameters,
    /// `DENIED`.
    Denied,
    /// `ALREADY_ON`: the core runs already (a loader started every core).
    AlreadyOn,
    /// `ON_PENDING`: a `CPU_ON` for the core is in progress.
    OnPending,
    /// `INTERNAL_FAILURE`.
    InternalFailure,
    /// `NOT_PRESENT`: no trusted OS is present on the core.
    NotPresent,
    /// `DISABLED`: the core is disabled.
    Disabled,
    /// `INVALID_ADDRESS`: the entry point was refused.
    InvalidAddress,
    /// Any other code.
    Other(i64),
}

impl core::fmt::Display for PsciError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PsciError::NotSupported => f.write_str("PSCI CPU_ON is not supported by the firmware"),
            PsciError::InvalidParameters => {
                f.write_str("no such core (PSCI INVALID_PARAMETERS): start QEMU with -smp 4")
            }
            PsciError::Denied => f.write_str("PSCI denied CPU_ON"),
            PsciError::AlreadyOn => f.write_str("the core is already on (started by the loader?)"),
            PsciError::OnPending => f.write_str("a CPU_ON for the core is already pending"),
            PsciError::InternalFailure => f.write_str("PSCI internal failure"),
            PsciError::NotPresent => f.write_str("PSCI NOT_PRESENT: no trusted OS on the core"),
            PsciError::Disabled => f.write_str("the core is disabled (PSCI DISABLED)"),
            PsciError::InvalidAddress => f.write_str("PSCI refused the entry point address"),
            PsciError::Other(code) => write!(f, "PSCI CPU_ON returned {code}"),
        }
    }
}

impl core::error::Error for PsciError {}

impl From<psci::error::Error> for PsciError {
    fn from(error: psci::error::Error) -> Self {
        use psci::error::Error;
        match error {
            Error::NotSupported => PsciError::NotSupported,
            Error::InvalidParameters => PsciError::InvalidParameters,
            Error::Denied => PsciError::Denied,
            Error::AlreadyOn => PsciError::AlreadyOn,
            Error::OnPending => PsciError::OnPending,
            Error::InternalFailure => PsciError::InternalFailure,
            Error::NotPresent => PsciError::NotPresent,
            Error::Disabled => PsciError::Disabled,
            Error::InvalidAddress => PsciError::InvalidAddress,
            Error::Unknown(code) => PsciError::Other(code),
        }
    }
}

/// PSCI `CPU_ON` (SMC64): starts the core whose `MPIDR_EL1` affinity fields
/// are `target_mpidr` at `entry` (a physical address: the identity map makes
/// it the virtual one too), with `context` in its x0.
///
/// # Safety
///
/// The new core runs whatever is at `entry`, with the MMU off, on no stack:
/// `entry` must be code written for that (the boot module's secondary
/// entry), and `context` what it expects. The platform must implement PSCI
/// over HVC for a guest booted at EL1 and over SMC for one booted at EL2
/// (QEMU `virt` without `secure=on`); elsewhere the call is undefined or
/// reaches firmware or a hypervisor that does something else.
pub(super) unsafe fn cpu_on(target_mpidr: u64, entry: u64, context: u64) -> Result<(), PsciError> {
    let result = if boot::entered_at_el2() {
        psci::cpu_on::<Smc>(target_mpidr, entry, context)
    } else {
        psci::cpu_on::<Hvc>(target_mpidr, entry, context)
    };
    result.map_err(PsciError::from)
}

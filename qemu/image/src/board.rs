//! The QEMU `virt` board: a PL011 console, the generic-timer clock, a
//! timer-backed idle wait that another core can end, and a semihosting
//! exit, behind [`smarm_platform::bare::Board`].
//!
//! Idle waits sleep, they do not spin: [`Board::wait_for_event`] arms the
//! calling core's EL1 virtual timer at its idle deadline (see
//! [`VirtBoard::set_idle_deadline`]), capped at [`MAX_IDLE_WAIT`] from now,
//! and executes WFI. The GICv2 forwards the timer's PPI to the core, which
//! wakes WFI although `PSTATE.I` keeps the interrupt masked (nothing is ever
//! taken: the image has no interrupt handlers). After the wake the timer is
//! disarmed and the PPI's pending state cleared, so the next WFI sleeps again.
//!
//! Cross-core wakes: [`VirtBoard::wake_core`] raises software-generated
//! interrupt [`WAKE_SGI`] at one core, which ends (or pre-empts) its WFI the
//! same way; the sleeper clears it after waking. A wake is never lost: the
//! waker publishes its wake in RAM *before* raising the SGI (a `DSB` in
//! between), and the sleeper clears the SGI *before* re-reading RAM (a `DSB`
//! after). An SGI raised after the clear stays pending and ends the next WFI
//! at once; one raised before the clear was preceded by its wake, which the
//! re-read then sees. (`SEV` is sent too, for waits built on WFE; QEMU's TCG
//! treats WFE as a yield, which is why the wait here is WFI.)
//!
//! Per-core state: the GIC's SGI/PPI registers and the CPU interface are
//! banked per core, so every core runs [`VirtBoard::init_core`]; the idle
//! deadline is one per core ([`this_core`]).
//!
//! Invariants kept here: the UART and GIC registers are only touched through
//! volatile accesses at the fixed addresses of QEMU's `virt` machine; the
//! UART only after [`VirtBoard::init`] has programmed the line (writes before
//! it still work on QEMU, which ignores the line settings, but not on a real
//! PL011); each core's virtual timer is armed only inside its own
//! `wait_for_event` and is disarmed again before it returns; the GIC's
//! banked (per-core) registers are written only by the core they belong to.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use smarm_arch::aarch64_bare::core_index;

use smarm_arch::aarch64_bare;
use smarm_arch::{Arch, Native};
use smarm_platform::bare::Board;
use smarm_platform::Nanos;

/// Base address of the PL011 UART on QEMU `virt`.
const PL011_BASE: usize = 0x0900_0000;
/// Data register: a write queues one byte for transmission.
const UARTDR: usize = 0x000;
/// Flag register.
const UARTFR: usize = 0x018;
/// Integer part of the baud-rate divisor.
const UARTIBRD: usize = 0x024;
/// Fractional part of the baud-rate divisor (in 64ths).
const UARTFBRD: usize = 0x028;
/// Line control register.
const UARTLCR_H: usize = 0x02c;
/// Control register.
const UARTCR: usize = 0x030;

/// `UARTFR.TXFF`: the transmit FIFO is full; wait before writing `UARTDR`.
const FR_TXFF: u32 = 1 << 5;
/// `UARTFR.BUSY`: the UART is still shifting bits out.
const FR_BUSY: u32 = 1 << 3;
/// `UARTLCR_H.WLEN` = 0b11: 8-bit words (no parity, one stop bit: 8N1).
const LCR_H_WLEN_8: u32 = 0b11 << 5;
/// `UARTLCR_H.FEN`: FIFOs enabled.
const LCR_H_FEN: u32 = 1 << 4;
/// `UARTCR.UARTEN`: the UART is enabled.
const CR_UARTEN: u32 = 1 << 0;
/// `UARTCR.TXE`: transmit enabled.
const CR_TXE: u32 = 1 << 8;
/// `UARTCR.RXE`: receive enabled.
const CR_RXE: u32 = 1 << 9;
/// 115200 baud from the 24 MHz UART clock QEMU `virt` gives the PL011:
/// 24_000_000 / (16 * 115_200) = 13.0208…, i.e. 13 + 1/64.
const BAUD_INTEGER: u32 = 13;
/// See [`BAUD_INTEGER`].
const BAUD_FRACTION: u32 = 1;

/// Base of the GICv2 distributor on QEMU `virt` (the default `gic-version=2`).
const GICD_BASE: usize = 0x0800_0000;
/// Base of the GICv2 CPU interface on QEMU `virt`.
const GICC_BASE: usize = 0x0801_0000;
/// `GICD_CTLR`: bit 0 enables forwarding of pending interrupts to the CPU
/// interfaces.
const GICD_CTLR: usize = 0x000;
/// `GICD_ISENABLER0`: set-enable bits of interrupts 0..=31 (SGIs, PPIs).
const GICD_ISENABLER0: usize = 0x100;
/// `GICD_ICPENDR0`: clear-pending bits of interrupts 0..=31.
const GICD_ICPENDR0: usize = 0x280;
/// `GICD_SGIR`: writing it raises an SGI at the cores in its target list.
const GICD_SGIR: usize = 0xf00;
/// `GICD_SGIR.CPUTargetList` starts at bit 16 (one bit per CPU interface).
const SGIR_TARGET_SHIFT: usize = 16;
/// `GICD_CPENDSGIR0`: one byte per SGI 0..=3, one bit per source core;
/// writing ones clears the calling core's pending state from those sources.
const GICD_CPENDSGIR0: usize = 0xf10;
/// Every source core, in one SGI's byte of `GICD_CPENDSGIR`.
const SGI_ALL_SOURCES: u32 = 0xff;
/// `GICD_IPRIORITYR`: one priority byte per interrupt, from this offset.
const GICD_IPRIORITYR: usize = 0x400;
/// `GICC_CTLR`: bit 0 enables signalling of interrupts to the core.
const GICC_CTLR: usize = 0x000;
/// `GICC_PMR`: only interrupts of a higher priority (lower value) than this
/// are signalled.
const GICC_PMR: usize = 0x004;
/// The EL1 virtual timer's interrupt: PPI 11, i.e. interrupt id 27, on every
/// Arm GIC system (the `virt` device tree says the same).
const VIRTUAL_TIMER_INTERRUPT: usize = 27;
/// The software-generated interrupt one core raises at another to end its
/// idle wait ([`VirtBoard::wake_core`]).
pub const WAKE_SGI: usize = 0;
/// The priority of both wake-up interrupts (the timer's PPI, [`WAKE_SGI`]):
/// any value below [`PRIORITY_MASK_ALL`] works.
const WAKE_PRIORITY: u32 = 0x80;
/// Priority mask letting every priority through.
const PRIORITY_MASK_ALL: u32 = 0xff;

/// Longest single idle wait. The `Board` contract asks that a wait not
/// sleep past a few milliseconds unless an event ends it; the platform's
/// park loop re-checks its token and deadline after each one.
pub const MAX_IDLE_WAIT: Nanos = 2_000_000;

/// Cores the image runs on: the boot core and the three it starts with PSCI
/// (`qemu/run-bare.sh` runs QEMU with `-smp 4`; the linker script reserves
/// stacks for three secondaries). Core numbers are `MPIDR_EL1.Aff0`, which
/// on QEMU `virt` is also the core's GIC CPU interface number.
pub const CORES: usize = 4;

/// The calling core's number (`MPIDR_EL1.Aff0`), below [`CORES`]. The boot
/// code parks any core beyond that, so a larger one never runs Rust.
pub fn this_core() -> usize {
    let core = core_index();
    debug_assert!(core < CORES, "core {core} runs, but the image knows {CORES} cores");
    core
}

/// Marks "no idle deadline" in [`VirtBoard::idle_deadline`].
const NO_DEADLINE: u64 = u64::MAX;

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// The board. One instance lives in a `static`; it holds the counter
/// frequency it read at [`VirtBoard::init`], each core's idle deadline of
/// the park in progress there, and idle statistics.
#[derive(Debug)]
pub struct VirtBoard {
    /// Ticks per second of [`Arch::timestamp`]; 0 until `init`.
    counter_frequency: AtomicU64,
    /// Per core: the deadline (platform nanoseconds) of the park in
    /// progress, or [`NO_DEADLINE`]; read by `wait_for_event` on the same
    /// core to arm that core's timer.
    idle_deadline: [AtomicU64; CORES],
    /// WFI sleeps taken by `wait_for_event`, on every core.
    idle_waits: AtomicU64,
    /// Counter ticks spent inside those sleeps.
    idle_ticks: AtomicU64,
    /// Wake SGIs raised by `wake_core`.
    wakes_sent: AtomicU64,
}

/// What [`VirtBoard::idle_stats`] reports: how often and how long the cores
/// slept in WFI, and how often one woke another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleStats {
    /// WFI sleeps taken.
    pub waits: u64,
    /// Counter ticks spent asleep.
    pub ticks: u64,
    /// Wake SGIs one core raised at another.
    pub wakes_sent: u64,
}

/// Why the board could not be brought up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoardError {
    /// The arch backend knows no frequency for its counter (`CNTFRQ_EL0`
    /// read as zero): firmware should have set it.
    NoCounterFrequency,
}

impl fmt::Display for BoardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoardError::NoCounterFrequency => {
                f.write_str("the generic timer frequency (CNTFRQ_EL0) is unknown: the firmware must set it")
            }
        }
    }
}

impl VirtBoard {
    /// A board whose UART is not programmed yet.
    pub const fn new() -> Self {
        VirtBoard {
            counter_frequency: AtomicU64::new(0),
            idle_deadline: [const { AtomicU64::new(NO_DEADLINE) }; CORES],
            idle_waits: AtomicU64::new(0),
            idle_ticks: AtomicU64::new(0),
            wakes_sent: AtomicU64::new(0),
        }
    }

    /// Programs the UART for 115200 8N1, reads the counter frequency, and
    /// sets the GIC up to forward the wake-up interrupts (the virtual
    /// timer's PPI, [`WAKE_SGI`]) to the boot core. Boot core, once.
    pub fn init(&self) -> Result<(), BoardError> {
        // Disable, wait for the last byte to leave, program the line, enable:
        // the order the PL011 manual asks for.
        uart_write(UARTCR, 0);
        while uart_read(UARTFR) & FR_BUSY != 0 {
            core::hint::spin_loop();
        }
        uart_write(UARTIBRD, BAUD_INTEGER);
        uart_write(UARTFBRD, BAUD_FRACTION);
        uart_write(UARTLCR_H, LCR_H_WLEN_8 | LCR_H_FEN);
        uart_write(UARTCR, CR_UARTEN | CR_TXE | CR_RXE);

        gicd_write(GICD_CTLR, 1);
        self.init_core();

        match Native::timestamp_frequency() {
            Some(frequency) if frequency != 0 => {
                // Relaxed: a single core sets it once before anything reads
                // it; the value carries no other data with it.
                self.counter_frequency.store(frequency, Ordering::Relaxed);
                Ok(())
            }
            _ => Err(BoardError::NoCounterFrequency),
        }
    }

    /// Sets up the calling core's banked GIC state (the wake-up interrupts'
    /// priority and enable bits, its CPU interface): every core once, before
    /// its first idle wait ([`VirtBoard::init`] does it for the boot core).
    pub fn init_core(&self) {
        init_gic_core();
    }

    /// Ends the idle wait of core `core` (or the next one, if it is not
    /// waiting): raises [`WAKE_SGI`] there. Call it *after* publishing what
    /// the core should find when it wakes; the `DSB` here makes that
    /// publication complete before the interrupt is raised.
    pub fn wake_core(&self, core: usize) {
        debug_assert!(core < CORES, "wake of core {core}, beyond {CORES}");
        aarch64_bare::data_synchronization_barrier();
        gicd_write(GICD_SGIR, (1 << (SGIR_TARGET_SHIFT + core)) | WAKE_SGI as u32);
        // Relaxed: statistics.
        self.wakes_sent.fetch_add(1, Ordering::Relaxed);
    }

    /// Ticks per second of the counter behind [`Board::now`] (and of
    /// [`Arch::timestamp`]); 0 before [`VirtBoard::init`].
    pub fn counter_frequency(&self) -> u64 {
        // Relaxed: see `init`.
        self.counter_frequency.load(Ordering::Relaxed)
    }

    /// Converts a counter delta to nanoseconds (0 before `init`).
    pub fn ticks_to_nanos(&self, ticks: u64) -> Nanos {
        match self.counter_frequency() {
            0 => 0,
            frequency => (ticks as u128 * NANOS_PER_SECOND / frequency as u128) as Nanos,
        }
    }

    /// Converts nanoseconds to counter ticks, rounding up (so a timer armed
    /// at the result never fires before the deadline).
    pub fn nanos_to_ticks(&self, nanos: Nanos) -> u64 {
        let frequency = self.counter_frequency() as u128;
        let ticks = (nanos as u128 * frequency).div_ceil(NANOS_PER_SECOND);
        ticks.min(u64::MAX as u128) as u64
    }

    /// Sets (or clears) the deadline the calling core's next idle waits
    /// sleep until; the bare host's `park` brackets the platform's park
    /// with it.
    pub fn set_idle_deadline(&self, deadline: Option<Nanos>) {
        // Relaxed: each core sets and reads only its own, in program order.
        self.idle_deadline[this_core()].store(deadline.unwrap_or(NO_DEADLINE), Ordering::Relaxed);
    }

    /// Idle statistics since boot.
    pub fn idle_stats(&self) -> IdleStats {
        // Relaxed: statistics; no other data hangs on them.
        IdleStats {
            waits: self.idle_waits.load(Ordering::Relaxed),
            ticks: self.idle_ticks.load(Ordering::Relaxed),
            wakes_sent: self.wakes_sent.load(Ordering::Relaxed),
        }
    }

    /// A `core::fmt::Write` handle on the console.
    pub fn console(&self) -> Console<'_> {
        Console { board: self }
    }
}

impl Default for VirtBoard {
    fn default() -> Self {
        Self::new()
    }
}

impl Board for VirtBoard {
    fn now(&self) -> Nanos {
        self.ticks_to_nanos(Native::timestamp())
    }

    fn write(&self, bytes: &[u8]) {
        for &byte in bytes {
            while uart_read(UARTFR) & FR_TXFF != 0 {
                core::hint::spin_loop();
            }
            uart_write(UARTDR, u32::from(byte));
        }
    }

    fn exit(&self, status: i32) -> ! {
        // Let the last bytes leave the FIFO before QEMU goes away.
        while uart_read(UARTFR) & FR_BUSY != 0 {
            core::hint::spin_loop();
        }
        aarch64_bare::semihosting_exit(status)
    }

    /// Sleeps in WFI until the calling core's idle deadline,
    /// [`MAX_IDLE_WAIT`] from now, or a [`VirtBoard::wake_core`] from
    /// another core, whichever is first (see the module doc).
    fn wait_for_event(&self) {
        let start = Native::timestamp();
        let cap = start.saturating_add(self.nanos_to_ticks(MAX_IDLE_WAIT));
        // Relaxed: see `set_idle_deadline`.
        let wake = match self.idle_deadline[this_core()].load(Ordering::Relaxed) {
            NO_DEADLINE => cap,
            deadline => self.nanos_to_ticks(deadline).min(cap),
        };
        if wake <= start {
            return;
        }
        aarch64_bare::virtual_timer_arm(wake);
        // The timer line may already be high (the deadline passed while
        // arming): then WFI returns at once, which is what we want.
        aarch64_bare::wait_for_interrupt();
        aarch64_bare::virtual_timer_disarm();
        // The line is low again; clear the latched pending state so the next
        // WFI is not woken by this expiry. Clear a wake from another core
        // too: the caller re-reads its condition next, and the barrier makes
        // the clear complete before that read (see the module doc).
        gicd_write(GICD_ICPENDR0, 1 << VIRTUAL_TIMER_INTERRUPT);
        gicd_write(GICD_CPENDSGIR0, SGI_ALL_SOURCES << (8 * WAKE_SGI));
        aarch64_bare::data_synchronization_barrier();
        let slept = Native::timestamp().saturating_sub(start);
        // Relaxed: statistics.
        self.idle_waits.fetch_add(1, Ordering::Relaxed);
        self.idle_ticks.fetch_add(slept, Ordering::Relaxed);
    }

    /// SEV, for cores waiting in WFE. This board's own waits are WFI, which
    /// SEV does not end: a wake that must reach another core's
    /// `wait_for_event` goes through [`VirtBoard::wake_core`] (the bare
    /// host's `unpark` does that for the core parked on the token).
    fn send_event(&self) {
        aarch64_bare::send_event();
    }
}

/// The console as a [`fmt::Write`], for the `print!` / `println!` macros.
#[derive(Debug)]
pub struct Console<'a> {
    board: &'a VirtBoard,
}

impl fmt::Write for Console<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.board.write(text.as_bytes());
        Ok(())
    }
}

/// Enables the calling core's banked GICv2 state: the virtual timer's PPI
/// and [`WAKE_SGI`], at a priority its CPU interface lets through, and the
/// CPU interface itself (the distributor is enabled once, by `init`).
/// Interrupts stay masked in `PSTATE`: the GIC's only job is to raise the
/// core's IRQ line so that WFI wakes.
fn init_gic_core() {
    for interrupt in [VIRTUAL_TIMER_INTERRUPT, WAKE_SGI] {
        // Priority bytes are packed four to a word; the distributor accepts
        // byte accesses but a word read-modify-write is portable to every
        // GICv2.
        let word = GICD_IPRIORITYR + (interrupt / 4) * 4;
        let shift = (interrupt % 4) * 8;
        let priorities = gicd_read(word) & !(0xff << shift);
        gicd_write(word, priorities | (WAKE_PRIORITY << shift));
    }
    gicd_write(GICD_ICPENDR0, 1 << VIRTUAL_TIMER_INTERRUPT);
    gicd_write(GICD_CPENDSGIR0, SGI_ALL_SOURCES << (8 * WAKE_SGI));
    gicd_write(GICD_ISENABLER0, (1 << VIRTUAL_TIMER_INTERRUPT) | (1 << WAKE_SGI));
    gicc_write(GICC_PMR, PRIORITY_MASK_ALL);
    gicc_write(GICC_CTLR, 1);
}

fn gicd_read(offset: usize) -> u32 {
    // SAFETY: `offset` is one of the GICv2 distributor register offsets
    // above; each is a 32-bit, 4-aligned MMIO register present on QEMU
    // `virt` (gic-version 2, its default), and reading it has no effect.
    unsafe { ((GICD_BASE + offset) as *const u32).read_volatile() }
}

fn gicd_write(offset: usize, value: u32) {
    // SAFETY: as in `gicd_read`; the GIC is owned by this module (the image
    // has no other interrupt code), and the writes only enable, prioritise,
    // raise or clear the two wake-up interrupts.
    unsafe { ((GICD_BASE + offset) as *mut u32).write_volatile(value) }
}

fn gicc_write(offset: usize, value: u32) {
    // SAFETY: `offset` is a GICv2 CPU-interface register offset (CTLR or
    // PMR), a 32-bit, 4-aligned MMIO register present on QEMU `virt`; owned
    // by this module as in `gicd_write`.
    unsafe { ((GICC_BASE + offset) as *mut u32).write_volatile(value) }
}

fn uart_register(offset: usize) -> *mut u32 {
    (PL011_BASE + offset) as *mut u32
}

fn uart_read(offset: usize) -> u32 {
    // SAFETY: `offset` is one of the PL011 register offsets above; the
    // register is a 32-bit, 4-aligned MMIO location that exists on every
    // QEMU `virt` machine, and reading it has no effect beyond the read
    // (the image never reads UARTDR, whose read pops the RX FIFO).
    unsafe { uart_register(offset).read_volatile() }
}

fn uart_write(offset: usize, value: u32) {
    // SAFETY: as in `uart_read`; the PL011 is owned by this module (nothing
    // else in the image maps or drives it).
    unsafe { uart_register(offset).write_volatile(value) }
}

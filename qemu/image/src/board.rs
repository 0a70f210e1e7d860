//! The QEMU `virt` board: a PL011 console, the generic-timer clock, a
//! timer-backed idle wait and a semihosting exit, behind
//! [`smarm_platform::bare::Board`].
//!
//! Idle waits sleep, they do not spin: [`Board::wait_for_event`] arms the
//! EL1 virtual timer at the idle deadline (see
//! [`VirtBoard::set_idle_deadline`]), capped at [`MAX_IDLE_WAIT`] from now,
//! and executes WFI. The GICv2 forwards the timer's PPI to the core, which
//! wakes WFI although `PSTATE.I` keeps the interrupt masked (nothing is ever
//! taken: the image has no interrupt handlers). After the wake the timer is
//! disarmed and the PPI's pending state cleared, so the next WFI sleeps again.
//!
//! Invariants kept here: the UART and GIC registers are only touched through
//! volatile accesses at the fixed addresses of QEMU's `virt` machine; the
//! UART only after [`VirtBoard::init`] has programmed the line (writes before
//! it still work on QEMU, which ignores the line settings, but not on a real
//! PL011); the virtual timer is armed only inside `wait_for_event` and is
//! disarmed again before it returns.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

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
/// The timer's priority: any value below [`PRIORITY_MASK_ALL`] works.
const VIRTUAL_TIMER_PRIORITY: u32 = 0x80;
/// Priority mask letting every priority through.
const PRIORITY_MASK_ALL: u32 = 0xff;

/// Longest single idle wait. The `Board` contract asks that a wait not
/// sleep past a few milliseconds unless an event ends it; the platform's
/// park loop re-checks its token and deadline after each one.
pub const MAX_IDLE_WAIT: Nanos = 2_000_000;

/// Marks "no idle deadline" in [`VirtBoard::idle_deadline`].
const NO_DEADLINE: u64 = u64::MAX;

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// The board. One instance lives in a `static`; it holds the counter
/// frequency it read at [`VirtBoard::init`], the idle deadline of the
/// current park, and idle statistics.
#[derive(Debug)]
pub struct VirtBoard {
    /// Ticks per second of [`Arch::timestamp`]; 0 until `init`.
    counter_frequency: AtomicU64,
    /// The deadline (platform nanoseconds) of the park in progress, or
    /// [`NO_DEADLINE`]; read by `wait_for_event` to arm the timer.
    idle_deadline: AtomicU64,
    /// WFI sleeps taken by `wait_for_event`.
    idle_waits: AtomicU64,
    /// Counter ticks spent inside those sleeps.
    idle_ticks: AtomicU64,
}

/// What [`VirtBoard::idle_stats`] reports: how often and how long the core
/// slept in WFI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleStats {
    /// WFI sleeps taken.
    pub waits: u64,
    /// Counter ticks spent asleep.
    pub ticks: u64,
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
            idle_deadline: AtomicU64::new(NO_DEADLINE),
            idle_waits: AtomicU64::new(0),
            idle_ticks: AtomicU64::new(0),
        }
    }

    /// Programs the UART for 115200 8N1, reads the counter frequency, and
    /// sets the GIC up to forward the virtual timer's PPI (the idle wake-up).
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

        init_gic();

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

    /// Sets (or clears) the deadline the next idle waits sleep until; the
    /// bare host's `park` brackets the platform's park with it.
    pub fn set_idle_deadline(&self, deadline: Option<Nanos>) {
        // Relaxed: one core sets and reads it, in program order.
        self.idle_deadline.store(deadline.unwrap_or(NO_DEADLINE), Ordering::Relaxed);
    }

    /// Idle statistics since boot.
    pub fn idle_stats(&self) -> IdleStats {
        // Relaxed: statistics, written and read by one core.
        IdleStats {
            waits: self.idle_waits.load(Ordering::Relaxed),
            ticks: self.idle_ticks.load(Ordering::Relaxed),
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

    /// Sleeps in WFI until the idle deadline or [`MAX_IDLE_WAIT`] from now,
    /// whichever is first (see the module doc). Single core: no other core
    /// can `send_event`, so the timer is the only wake-up there is.
    fn wait_for_event(&self) {
        let start = Native::timestamp();
        let cap = start.saturating_add(self.nanos_to_ticks(MAX_IDLE_WAIT));
        // Relaxed: see `set_idle_deadline`.
        let wake = match self.idle_deadline.load(Ordering::Relaxed) {
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
        // WFI is not woken by this expiry.
        gicd_write(GICD_ICPENDR0, 1 << VIRTUAL_TIMER_INTERRUPT);
        let slept = Native::timestamp().saturating_sub(start);
        // Relaxed: statistics.
        self.idle_waits.fetch_add(1, Ordering::Relaxed);
        self.idle_ticks.fetch_add(slept, Ordering::Relaxed);
    }

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

/// Enables the GICv2 distributor and CPU interface with only the virtual
/// timer's PPI enabled, at a priority the CPU interface lets through.
/// Interrupts stay masked in `PSTATE`: the GIC's only job is to raise the
/// core's IRQ line so that WFI wakes.
fn init_gic() {
    // Priority bytes are packed four to a word; the distributor accepts
    // byte accesses but a word read-modify-write is portable to every GICv2.
    let word = GICD_IPRIORITYR + (VIRTUAL_TIMER_INTERRUPT / 4) * 4;
    let shift = (VIRTUAL_TIMER_INTERRUPT % 4) * 8;
    let priorities = gicd_read(word) & !(0xff << shift);
    gicd_write(word, priorities | (VIRTUAL_TIMER_PRIORITY << shift));
    gicd_write(GICD_ICPENDR0, 1 << VIRTUAL_TIMER_INTERRUPT);
    gicd_write(GICD_ISENABLER0, 1 << VIRTUAL_TIMER_INTERRUPT);
    gicd_write(GICD_CTLR, 1);
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
    // has no other interrupt code), and the writes only enable, prioritise
    // or clear the virtual timer's PPI.
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

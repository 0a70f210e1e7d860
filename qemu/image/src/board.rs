//! The QEMU `virt` board: a PL011 console, the generic-timer clock and a
//! semihosting exit, behind [`smarm_platform::bare::Board`].
//!
//! Invariant kept here: the UART registers are only touched through volatile
//! accesses at the fixed addresses of QEMU's `virt` machine, and only after
//! [`VirtBoard::init`] has programmed the line (writes before it still work
//! on QEMU, which ignores the line settings, but not on a real PL011).

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

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// The board. One instance lives in a `static`; it holds no more than the
/// counter frequency it read at [`VirtBoard::init`].
#[derive(Debug)]
pub struct VirtBoard {
    /// Ticks per second of [`Arch::timestamp`]; 0 until `init`.
    counter_frequency: AtomicU64,
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
        VirtBoard { counter_frequency: AtomicU64::new(0) }
    }

    /// Programs the UART for 115200 8N1 and reads the counter frequency.
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

    fn wait_for_event(&self) {
        aarch64_bare::wait_for_event();
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

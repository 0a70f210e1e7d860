//! Thin, typed wrappers over the few libc calls the Linux backend shares.

use core::fmt;

use crate::sync::{AtomicUsize, Ordering};

/// An operating-system error number from a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsError(pub i32);

impl fmt::Display for OsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "os error {}", self.0)
    }
}
impl core::error::Error for OsError {}

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    // SAFETY: `__errno_location` always returns a valid pointer to the
    // calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Page size, asked once (0 = not asked yet). Read by the signal handler,
/// hence an atomic rather than a lazy cell.
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The system page size (4096 if the system will not say).
pub(crate) fn page_size() -> usize {
    let cached = PAGE_SIZE.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let asked = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let size = if asked > 0 && (asked as usize).is_power_of_two() { asked as usize } else { 4096 };
    // Racing first callers store the same value; Relaxed is enough.
    PAGE_SIZE.store(size, Ordering::Relaxed);
    size
}

/// The page size as last cached, for the signal handler (no system call).
pub(crate) fn cached_page_size() -> usize {
    match PAGE_SIZE.load(Ordering::Relaxed) {
        0 => 4096,
        size => size,
    }
}

/// `value` rounded up to a multiple of `align` (a power of two), or `None`
/// on overflow.
pub(crate) fn round_up(value: usize, align: usize) -> Option<usize> {
    debug_assert!(align.is_power_of_two());
    Some(value.checked_add(align - 1)? & !(align - 1))
}

/// Writes all of `bytes` to file descriptor `fd`, retrying on EINTR and
/// giving up silently on any other error. Async-signal-safe.
pub(crate) fn write_all(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live slice; write reads at most `len` bytes.
        let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if written < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return;
        }
        if written == 0 {
            return;
        }
        bytes = bytes.get(written as usize..).unwrap_or(&[]);
    }
}

/// Reads a small decimal number from a file such as
/// `/proc/sys/vm/max_map_count`, with libc only. `path` must end in NUL.
pub(crate) fn read_decimal_file(path: &[u8]) -> Option<u64> {
    let mut buffer = [0u8; 32];
    let filled = read_file(path, &mut buffer)?;
    let mut value: u64 = 0;
    let mut digits = 0;
    for &byte in &buffer[..filled] {
        match byte {
            b'0'..=b'9' => {
                value = value.checked_mul(10)?.checked_add(u64::from(byte - b'0'))?;
                digits += 1;
            }
            b' ' | b'\t' if digits == 0 => {}
            _ => break,
        }
    }
    (digits > 0).then_some(value)
}

/// The threads of this process now: field 20 (`num_threads`) of
/// `/proc/self/stat`, with libc only. `None` if it cannot be read, and if
/// it reads 0 — no process has no thread; an emulator that does not fill
/// the field in (qemu-user 7) writes 0 there.
pub(crate) fn thread_count() -> Option<usize> {
    let mut buffer = [0u8; 1024];
    let filled = read_file(b"/proc/self/stat\0", &mut buffer)?;
    let text = &buffer[..filled];
    // Field 2 (the command) is in parentheses and may hold anything, a
    // parenthesis or a space included: count fields after the last ')'.
    let close = text.iter().rposition(|&byte| byte == b')')?;
    // After it come field 3 (the state) onwards; field 20 is the 18th.
    let field = text[close + 1..].split(|&byte| byte == b' ').filter(|f| !f.is_empty()).nth(17)?;
    let mut value: usize = 0;
    for &byte in field {
        if !byte.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(usize::from(byte - b'0'))?;
    }
    (!field.is_empty() && value > 0).then_some(value)
}

/// Reads the start of a file into `buffer` (as much as fits), with libc
/// only; how many bytes. `path` must end in NUL.
fn read_file(path: &[u8], buffer: &mut [u8]) -> Option<usize> {
    if path.last() != Some(&0) {
        return None;
    }
    // SAFETY: `path` is NUL-terminated (checked above) and lives across the
    // call.
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut filled = 0usize;
    while filled < buffer.len() {
        let rest = &mut buffer[filled..];
        // SAFETY: `rest` is a live, writable slice of `rest.len()` bytes.
        let got = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if got < 0 && errno() == libc::EINTR {
            continue;
        }
        if got <= 0 {
            break;
        }
        filled += got as usize;
    }
    // SAFETY: `fd` was opened above and is closed exactly once.
    unsafe { libc::close(fd) };
    Some(filled)
}

/// A fixed buffer that formats text (through [`fmt::Write`]) without
/// allocating, for the signal handler. Text that does not fit is cut off.
pub(crate) struct MessageBuffer {
    bytes: [u8; 256],
    len: usize,
}

impl MessageBuffer {
    pub(crate) const fn new() -> Self {
        MessageBuffer { bytes: [0; 256], len: 0 }
    }

    pub(crate) fn push_bytes(&mut self, text: &[u8]) {
        for &byte in text {
            match self.bytes.get_mut(self.len) {
                Some(slot) => {
                    *slot = byte;
                    self.len += 1;
                }
                None => return,
            }
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

impl fmt::Write for MessageBuffer {
    /// Never fails: text beyond the buffer is cut off.
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.push_bytes(text.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        use core::fmt::Write;
        let mut buffer = MessageBuffer::new();
        write!(buffer, "{} {} {:#x} {:#x}", 0, u64::MAX, 0, 0xdead_beef_usize).unwrap();
        assert_eq!(buffer.as_bytes(), b"0 18446744073709551615 0x0 0xdeadbeef");
    }

    #[test]
    fn truncates_instead_of_panicking() {
        let mut buffer = MessageBuffer::new();
        for _ in 0..100 {
            buffer.push_bytes(b"0123456789");
        }
        assert_eq!(buffer.as_bytes().len(), 256);
    }

    #[test]
    fn rounds_up() {
        assert_eq!(round_up(1, 4096), Some(4096));
        assert_eq!(round_up(4096, 4096), Some(4096));
        assert_eq!(round_up(usize::MAX, 4096), None);
    }

    #[test]
    fn reads_max_map_count() {
        assert!(read_decimal_file(b"/proc/sys/vm/max_map_count\0").is_some_and(|n| n > 0));
        assert_eq!(read_decimal_file(b"/nonexistent/file\0"), None);
        assert_eq!(read_decimal_file(b"/proc/sys/vm/max_map_count"), None);
    }

    #[test]
    fn counts_threads_as_they_come_and_go() {
        // An emulator that leaves the field 0 (qemu-user 7) reads as
        // unknown, and there is nothing more to see.
        let Some(before) = thread_count() else {
            assert!(
                read_file(b"/proc/self/stat\0", &mut [0u8; 1024]).is_some(),
                "/proc/self/stat is readable"
            );
            return;
        };
        assert!(before >= 1);
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            started_tx.send(()).unwrap();
            let _ = stop_rx.recv();
        });
        started_rx.recv().unwrap();
        // Other tests of this binary may start or end threads meanwhile;
        // ours is one more than none at all.
        assert!(thread_count().is_some_and(|now| now >= 2));
        drop(stop_tx);
        thread.join().unwrap();
    }
}

//! Forked children for tests whose scenario ends the whole program (a
//! stack overflow) or needs process-global settings (environment
//! variables): the child runs the scenario with its stderr in a pipe, the
//! parent gets the text and the wait status.
//!
//! Forked rather than re-executed so that it also runs under qemu-user,
//! where a re-exec of the test binary would need binfmt_misc. A test binary
//! that forks must hold one test only: a fork while another test thread is
//! inside the runtime, the allocator or the panic machinery (or, under
//! qemu-user, still starting up) can copy one of their locks into the
//! child, held forever.

use std::io::Read;
use std::os::unix::io::FromRawFd;
use std::time::{Duration, Instant};

/// Writes straight to fd 2 (the pipe): the test harness captures
/// `eprintln!` (in the child's threads too), and the overflow report goes
/// to fd 2.
pub fn say(message: &str) {
    // SAFETY: writing a valid buffer to fd 2, which the child owns.
    unsafe { libc::write(2, message.as_ptr().cast(), message.len()) };
}

/// Ends a forked child with `status`, without running the parent's atexit
/// handlers or the test harness.
pub fn exit_child(status: i32) -> ! {
    // SAFETY: _exit has no preconditions.
    unsafe { libc::_exit(status) }
}

/// How long a child may run before it is killed: a child that neither
/// reports nor dies (a trampled stack can deadlock it) fails its test
/// instead of hanging it.
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(120);

/// Forks, runs `child(argument)` with stderr into a pipe, returns the
/// child's stderr and its wait status (SIGKILL after [`CHILD_TIMEOUT`]).
pub fn run_child(child: fn(usize) -> !, argument: usize) -> (String, libc::c_int) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (read_end, write_end) = (fds[0], fds[1]);
    // SAFETY: the child only sets up fds and runs `child`, which never
    // returns; the binary runs one test (see the module doc), so no other
    // thread of ours holds a lock the child needs.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: plain fd and rlimit calls on descriptors we own.
        unsafe {
            libc::close(read_end);
            libc::dup2(write_end, 2);
            libc::close(write_end);
            // No core file for an expected crash.
            let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
        }
        child(argument);
    }
    // SAFETY: closing our copy of the write end, which we own.
    unsafe { libc::close(write_end) };
    // SAFETY: `read_end` is a pipe fd we own; the File closes it.
    let mut pipe = unsafe { std::fs::File::from_raw_fd(read_end) };
    let deadline = Instant::now() + CHILD_TIMEOUT;
    let mut output = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut poll = libc::pollfd { fd: read_end, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { libc::poll(&mut poll, 1, left.as_millis().max(1) as libc::c_int) };
        if ready == 0 && left.is_zero() {
            // SAFETY: killing our own child, which has not been reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            output.extend_from_slice(b"PARENT killed the child: timeout\n");
            break;
        }
        if ready <= 0 {
            continue;
        }
        match pipe.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => output.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("reading the child's stderr: {e}"),
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    (String::from_utf8_lossy(&output).into_owned(), status)
}

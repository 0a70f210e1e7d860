//! io from processes: blocking jobs on io threads, fd readiness through the
//! runtime's epoll, fd hygiene when a waiting process is stopped, and a TCP
//! echo server with many clients on loopback.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smarm::io::{self, IoError};
use smarm::{Engine, ExitReason, JoinError};

fn engine(workers: usize) -> Engine {
    Engine::builder().workers(workers).build().expect("engine starts")
}

#[test]
fn block_on_io_runs_off_the_worker_and_returns_the_value() {
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let (name, ticks_during) = engine(1)
        .block_on(move || {
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            let t2 = t.clone();
            // Same worker: it only runs if the io wait parks the root rather
            // than blocking the worker thread.
            let ticker = smarm::spawn(move || {
                while !s.load(Ordering::SeqCst) {
                    t2.fetch_add(1, Ordering::SeqCst);
                    smarm::sleep(Duration::from_millis(1));
                }
            })
            .unwrap();
            // The io call waits for the ticker to tick five times: it can
            // only if the worker runs while the root waits (bounded, so a
            // blocked worker fails the test rather than hanging it).
            let seen = t.clone();
            let name = io::block_on_io(move || {
                let started = std::time::Instant::now();
                while seen.load(Ordering::SeqCst) < 5 && started.elapsed() < Duration::from_secs(30) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::thread::current().name().map(str::to_owned)
            })
            .unwrap();
            let during = t.load(Ordering::SeqCst);
            stop.store(true, Ordering::SeqCst);
            ticker.join().unwrap();
            (name, during)
        })
        .unwrap();
    assert_eq!(name.as_deref(), Some("smarm-io"));
    assert!(ticks_during >= 5, "the worker was blocked during io: {ticks_during} ticks");
    assert!(ticks.load(Ordering::SeqCst) >= ticks_during);
}

#[test]
fn block_on_io_many_at_once_and_outside_a_process() {
    // Outside a process it runs inline.
    assert_eq!(io::block_on_io(|| 7).unwrap(), 7);
    let total = engine(2)
        .block_on(|| {
            let rt = smarm::current_runtime().unwrap();
            let handles: Vec<_> = (0..200u64)
                .map(|i| {
                    rt.spawn(move || {
                        let v = io::block_on_io(move || {
                            std::thread::sleep(Duration::from_millis(1));
                            i * 2
                        })
                        .unwrap();
                        assert_eq!(v, i * 2);
                    })
                    .unwrap()
                })
                .collect();
            handles.into_iter().map(|h| h.join()).filter(Result::is_ok).count()
        })
        .unwrap();
    assert_eq!(total, 200);
}

#[test]
fn a_panic_in_a_blocking_job_resumes_in_its_process() {
    let r = engine(1)
        .block_on(|| {
            smarm::spawn(|| {
                let _: u32 = io::block_on_io(|| panic!("disk on fire")).unwrap();
            })
            .unwrap()
            .join()
        })
        .unwrap();
    assert_eq!(r, Err(JoinError::Exited(ExitReason::Panicked("disk on fire".into()))));
}

#[test]
fn outstanding_io_holds_the_runtime_open_after_its_process_is_stopped() {
    let finished = Arc::new(AtomicBool::new(false));
    let f = finished.clone();
    let start = Instant::now();
    engine(2)
        .block_on(move || {
            let rt = smarm::current_runtime().unwrap();
            let h = rt
                .spawn(move || {
                    let _ = io::block_on_io(move || {
                        std::thread::sleep(Duration::from_millis(100));
                        f.store(true, Ordering::SeqCst);
                    });
                    unreachable!("a stopped process resumed");
                })
                .unwrap();
            smarm::sleep(Duration::from_millis(10));
            rt.request_stop(h.pid()).unwrap();
            assert!(h.join().unwrap_err().is_stopped());
            assert_eq!(rt.external(), 1, "the job still runs");
        })
        .unwrap();
    // block_on returned only once the job was done.
    assert!(finished.load(Ordering::SeqCst));
    assert!(start.elapsed() >= Duration::from_millis(100));
}

#[test]
fn wait_readable_wakes_on_data() {
    for workers in [1, 4] {
        engine(workers)
            .block_on(|| {
                let (mut a, b) = UnixStream::pair().unwrap();
                b.set_nonblocking(true).unwrap();
                let reader = smarm::spawn_on(0, move || {
                    let mut b = b;
                    let mut buf = [0u8; 16];
                    let n = io::read(&mut b, &mut buf).unwrap();
                    assert_eq!(&buf[..n], b"hello");
                });
                let reader = reader.unwrap();
                smarm::sleep(Duration::from_millis(5));
                a.write_all(b"hello").unwrap();
                reader.join().unwrap();
            })
            .unwrap();
    }
}

#[test]
fn a_process_stopped_while_waiting_on_an_fd_leaves_nothing_behind() {
    let check = |workers: usize| {
        engine(workers)
            .block_on(move || {
                let rt = smarm::current_runtime().unwrap();
                let (mut a, b) = UnixStream::pair().unwrap();
                b.set_nonblocking(true).unwrap();
                let b = Arc::new(b);
                let fd = b.as_raw_fd();

                // Parked on the fd, then stopped.
                let b1 = b.clone();
                let waiter = rt
                    .spawn(move || {
                        let _keep = b1;
                        io::wait_readable(fd).unwrap();
                        unreachable!("woken without data");
                    })
                    .unwrap();
                while io::waited_fds() != Some(1) {
                    smarm::sleep(Duration::from_millis(1));
                }
                rt.request_stop(waiter.pid()).unwrap();
                assert!(waiter.join().unwrap_err().is_stopped());
                // No waiter entry (and with it no kernel registration) left.
                assert_eq!(io::waited_fds(), Some(0));

                // Another process waits on the same fd and succeeds.
                let b2 = b.clone();
                let second = rt
                    .spawn(move || {
                        io::wait_readable(fd).unwrap();
                        let mut buf = [0u8; 8];
                        let n = (&*b2).read(&mut buf).unwrap();
                        assert_eq!(&buf[..n], b"ok");
                    })
                    .unwrap();
                while io::waited_fds() != Some(1) {
                    smarm::sleep(Duration::from_millis(1));
                }
                a.write_all(b"ok").unwrap();
                second.join().unwrap();
                assert_eq!(io::waited_fds(), Some(0));
            })
            .unwrap();
    };
    check(1);
    check(3);
    // The single-thread host has the same io services.
    smarm::run(|| {
        let (_a, b) = UnixStream::pair().unwrap();
        let fd = b.as_raw_fd();
        let rt = smarm::current_runtime().unwrap();
        let w = smarm::spawn(move || {
            let _keep = b;
            let _ = io::wait_readable(fd);
        })
        .unwrap();
        smarm::yield_now();
        assert_eq!(io::waited_fds(), Some(1));
        rt.request_stop(w.pid()).unwrap();
        assert!(w.join().unwrap_err().is_stopped());
        assert_eq!(io::waited_fds(), Some(0));
    });
}

#[test]
fn io_errors_are_typed() {
    assert!(matches!(io::wait_readable(0), Err(IoError::NotInProcess)));
    engine(2)
        .block_on(|| {
            let (_a, b) = UnixStream::pair().unwrap();
            let fd = b.as_raw_fd();
            let first = smarm::spawn(move || {
                let _keep = b;
                let _ = io::wait_readable(fd);
            })
            .unwrap();
            smarm::yield_now();
            while io::waited_fds() != Some(1) {
                smarm::sleep(Duration::from_millis(1));
            }
            // One reader per fd.
            assert!(matches!(io::wait_readable(fd), Err(IoError::Busy(f)) if f == fd));
            smarm::request_stop(first.pid()).unwrap();
            assert!(first.join().unwrap_err().is_stopped());
            // epoll refuses regular files.
            let file = std::fs::File::open("/proc/self/exe").unwrap();
            let err = io::wait_readable(file.as_raw_fd()).unwrap_err();
            assert!(matches!(err, IoError::Poll(_)), "{err}");
            let as_io: std::io::Error = err.into();
            assert_eq!(as_io.raw_os_error(), Some(1)); // EPERM
        })
        .unwrap();
}

/// Clients, and messages per client: scaled down under qemu-user, where
/// every system call is emulated.
fn echo_scale() -> (usize, usize) {
    if cfg!(target_arch = "aarch64") {
        (200, 20)
    } else {
        (1_000, 100)
    }
}

fn serve(listener: TcpListener, connections: usize) {
    listener.set_nonblocking(true).unwrap();
    let mut served = Vec::with_capacity(connections);
    while served.len() < connections {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(true).unwrap();
                stream.set_nodelay(true).unwrap();
                served.push(
                    smarm::spawn(move || {
                        let mut stream = stream;
                        let mut buf = [0u8; 4096];
                        loop {
                            let n = io::read(&mut stream, &mut buf).unwrap();
                            if n == 0 {
                                break;
                            }
                            io::write_all(&mut stream, &buf[..n]).unwrap();
                        }
                    })
                    .unwrap(),
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                io::wait_readable(listener.as_raw_fd()).unwrap();
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
    for h in served {
        h.join().unwrap();
    }
}

fn client(addr: std::net::SocketAddr, id: usize, messages: usize) -> usize {
    // connect(2) blocks: it runs on an io thread.
    let stream = io::block_on_io(move || TcpStream::connect(addr)).unwrap().unwrap();
    stream.set_nonblocking(true).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut stream = stream;
    let mut echoed = 0;
    for m in 0..messages {
        let message = format!("client {id} message {m}\n");
        io::write_all(&mut stream, message.as_bytes()).unwrap();
        let mut got = vec![0u8; message.len()];
        let mut filled = 0;
        while filled < got.len() {
            let n = io::read(&mut stream, &mut got[filled..]).unwrap();
            assert!(n > 0, "client {id}: server closed early");
            filled += n;
        }
        assert_eq!(got, message.as_bytes(), "client {id} message {m}");
        echoed += 1;
    }
    echoed
}

#[test]
fn tcp_echo_server_with_many_clients_on_4_workers() {
    let (clients, messages) = echo_scale();
    let start = Instant::now();
    let echoed = engine(4)
        .block_on(move || {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let server = smarm::spawn(move || serve(listener, clients)).unwrap();
            let rt = smarm::current_runtime().unwrap();
            let echoed = Arc::new(AtomicUsize::new(0));
            // In waves, so a default `ulimit -n` of 1,024 holds both ends of
            // every open connection.
            let wave = 250;
            for first in (0..clients).step_by(wave) {
                let handles: Vec<_> = (first..(first + wave).min(clients))
                    .map(|id| {
                        let e = echoed.clone();
                        rt.spawn(move || {
                            e.fetch_add(client(addr, id, messages), Ordering::Relaxed);
                        })
                        .unwrap()
                    })
                    .collect();
                for h in handles {
                    h.join().unwrap();
                }
            }
            server.join().unwrap();
            echoed.load(Ordering::Relaxed)
        })
        .unwrap();
    assert_eq!(echoed, clients * messages);
    let limit = if cfg!(target_arch = "aarch64") { 240 } else { 60 };
    assert!(start.elapsed() < Duration::from_secs(limit), "echo took {:?}", start.elapsed());
}

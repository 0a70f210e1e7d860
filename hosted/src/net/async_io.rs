//! The async io traits on the stream sockets (see the module's "Async io"
//! section), with an example of tokio's traits in a process:
//!
//! ```
//! # #[cfg(feature = "tokio-io")]
//! # {
//! use std::future::poll_fn;
//! use std::pin::Pin;
//! use smarm::net::{TcpListener, TcpStream};
//! use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
//!
//! let echoed = smarm::run(|| {
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
//!     let (mut server, _) = listener.accept().unwrap();
//!     smarm::block_on(async move {
//!         poll_fn(|cx| Pin::new(&mut client).poll_write(cx, b"ping")).await.unwrap();
//!         let mut bytes = [0u8; 4];
//!         let mut buffer = ReadBuf::new(&mut bytes);
//!         while buffer.filled().len() < 4 {
//!             poll_fn(|cx| Pin::new(&mut server).poll_read(cx, &mut buffer)).await.unwrap();
//!         }
//!         bytes
//!     })
//!     .unwrap()
//! });
//! assert_eq!(&echoed, b"ping");
//! # }
//! ```

#[cfg(any(feature = "futures-io", feature = "tokio-io"))]
#[allow(unsafe_code)]
mod imp {
    #[cfg(feature = "futures-io")]
    use std::io::Read;
    use std::io::{self, Write};
    use std::net::Shutdown;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use crate::io::edge::Direction;

    #[cfg(feature = "tokio-io")]
    use std::os::fd::AsRawFd;

    use super::super::source::short;
    #[cfg(feature = "tokio-io")]
    use super::super::sys;
    use super::super::{TcpStream, UnixStream};

    /// What both stream types share for the traits.
    macro_rules! stream_io {
        ($stream:ty) => {
            impl $stream {
                #[cfg(feature = "futures-io")]
                fn poll_read_bytes(
                    &self,
                    cx: &mut Context<'_>,
                    buffer: &mut [u8],
                ) -> Poll<io::Result<usize>> {
                    if buffer.is_empty() {
                        return Poll::Ready(Ok(0));
                    }
                    self.source
                        .poll_call(cx, Direction::Read, buffer.len(), short, |mut socket| socket.read(buffer))
                }

                fn poll_write_bytes(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
                    if data.is_empty() {
                        return Poll::Ready(Ok(0));
                    }
                    self.source
                        .poll_call(cx, Direction::Write, data.len(), short, |mut socket| socket.write(data))
                }

                fn poll_close_write(&self) -> Poll<io::Result<()>> {
                    Poll::Ready(match self.shutdown(Shutdown::Write) {
                        Err(error) if error.kind() == io::ErrorKind::NotConnected => Ok(()),
                        other => other,
                    })
                }
            }

            #[cfg(feature = "futures-io")]
            impl futures_io::AsyncRead for $stream {
                fn poll_read(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buffer: &mut [u8],
                ) -> Poll<io::Result<usize>> {
                    self.get_mut().poll_read_bytes(cx, buffer)
                }
            }

            #[cfg(feature = "futures-io")]
            impl futures_io::AsyncRead for &$stream {
                fn poll_read(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buffer: &mut [u8],
                ) -> Poll<io::Result<usize>> {
                    self.get_mut().poll_read_bytes(cx, buffer)
                }
            }

            #[cfg(feature = "futures-io")]
            impl futures_io::AsyncWrite for $stream {
                fn poll_write(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    data: &[u8],
                ) -> Poll<io::Result<usize>> {
                    self.get_mut().poll_write_bytes(cx, data)
                }
                fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(Ok(()))
                }
                fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    self.get_mut().poll_close_write()
                }
            }

            #[cfg(feature = "futures-io")]
            impl futures_io::AsyncWrite for &$stream {
                fn poll_write(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    data: &[u8],
                ) -> Poll<io::Result<usize>> {
                    self.get_mut().poll_write_bytes(cx, data)
                }
                fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(Ok(()))
                }
                fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    self.get_mut().poll_close_write()
                }
            }

            #[cfg(feature = "tokio-io")]
            impl tokio::io::AsyncRead for $stream {
                fn poll_read(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buffer: &mut tokio::io::ReadBuf<'_>,
                ) -> Poll<io::Result<()>> {
                    if buffer.remaining() == 0 {
                        return Poll::Ready(Ok(()));
                    }
                    // Read straight into the unfilled part, initialized or
                    // not: zeroing it first would cost a memset per read.
                    // SAFETY: only `read_uninit` writes through `unfilled`,
                    // and it never de-initializes a byte.
                    let unfilled = unsafe { buffer.unfilled_mut() };
                    let asked = unfilled.len();
                    let read = std::task::ready!(self.source.poll_call(
                        cx,
                        Direction::Read,
                        asked,
                        short,
                        |socket| { sys::read_uninit(socket.as_raw_fd(), unfilled) }
                    ))?;
                    // SAFETY: the kernel wrote `read` bytes at the start of
                    // the unfilled part.
                    unsafe { buffer.assume_init(read) };
                    buffer.advance(read);
                    Poll::Ready(Ok(()))
                }
            }

            #[cfg(feature = "tokio-io")]
            impl tokio::io::AsyncWrite for $stream {
                fn poll_write(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    data: &[u8],
                ) -> Poll<io::Result<usize>> {
                    self.get_mut().poll_write_bytes(cx, data)
                }
                fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(Ok(()))
                }
                fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    self.get_mut().poll_close_write()
                }
            }
        };
    }

    stream_io!(TcpStream);
    stream_io!(UnixStream);
}

//! The connections the daemon serves HTTP on: accepted TCP sockets, with `TCP_NODELAY` (answers and
//! stream frames are small, and must not wait for the peer's delayed acknowledgement), whose socket
//! a response may borrow once hyper has written all it had.
//!
//! The live stream's SSE subscribers borrow it ([`crate::stream`]): hyper writes the response's head,
//! then the fan-out writes each live event's chunk to the socket itself, as it does for WebSocket
//! subscribers, and hyper writes the body's last chunk when the stream ends.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// A TCP listener whose connections can lend their socket: serve it with
/// `router.into_make_service_with_connect_info::<Lender>()`.
pub struct Listener(TcpListener);

impl Listener {
    pub fn new(listener: TcpListener) -> Listener {
        Listener(listener)
    }
}

impl axum::serve::Listener for Listener {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        // axum's own accept: it retries, and waits out a shortage of file descriptors.
        let (tcp, addr) = axum::serve::Listener::accept(&mut self.0).await;
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on an accepted socket");
        }
        (Conn(Tcp::new(tcp)), addr)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// An accepted connection, as hyper reads and writes it.
pub struct Conn(Tcp);

impl Conn {
    /// The socket, of a connection hyper has handed over (a WebSocket upgrade).
    pub(crate) fn into_tcp(self) -> Tcp {
        self.0
    }
}

/// A connection's socket, shared by hyper and the response that borrows it.
#[derive(Clone)]
pub(crate) struct Tcp(Arc<Shared>);

struct Shared {
    tcp: TcpStream,
    /// A borrower waits: the next flush with nothing buffered lends the socket.
    wanted: AtomicBool,
    borrower: Mutex<Option<oneshot::Sender<()>>>,
}

impl Tcp {
    pub(crate) fn new(tcp: TcpStream) -> Tcp {
        Tcp(Arc::new(Shared { tcp, wanted: AtomicBool::new(false), borrower: Mutex::new(None) }))
    }
}

impl std::ops::Deref for Tcp {
    type Target = TcpStream;

    fn deref(&self) -> &TcpStream {
        &self.0.tcp
    }
}

/// A handler's way to borrow its connection's socket, from the request's `ConnectInfo`.
#[derive(Clone)]
pub struct Lender(Tcp);

impl Connected<IncomingStream<'_, Listener>> for Lender {
    fn connect_info(stream: IncomingStream<'_, Listener>) -> Lender {
        Lender(stream.io().0.clone())
    }
}

impl Lender {
    /// The socket, once hyper has written all it had. Call it from the first poll of an HTTP/1.1
    /// response's body and keep that body pending while writing: hyper then writes nothing more until
    /// the body yields or ends. The borrower writes whole body chunks (the response is chunked), and
    /// ends the body with an error, so that hyper closes the connection, if it leaves one cut short.
    /// `None` when the connection closed first.
    pub(crate) async fn borrow(&self) -> Option<Tcp> {
        let shared = &self.0.0;
        let (lent, borrowed) = oneshot::channel();
        *shared.borrower.lock().unwrap_or_else(|p| p.into_inner()) = Some(lent);
        shared.wanted.store(true, Ordering::Release);
        borrowed.await.ok()?;
        Some(self.0.clone())
    }
}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.0.poll_read_ready(cx))?;
            match self.0.try_read_buf(buf) {
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write(bytes) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                written => return Poll::Ready(written),
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write_vectored(bytes) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                written => return Poll::Ready(written),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// hyper flushes once its buffer is written: a borrower waiting gets the socket then.
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let shared = &self.0.0;
        if shared.wanted.load(Ordering::Acquire) && shared.wanted.swap(false, Ordering::AcqRel) {
            let borrower = shared.borrower.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(borrower) = borrower {
                let _ = borrower.send(());
            }
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(socket2::SockRef::from(&*self.0).shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A connection accepted the way the daemon accepts them, and the client's end.
    async fn accepted() -> (Conn, TcpStream) {
        let mut listener = Listener::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let addr = axum::serve::Listener::local_addr(&listener).unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (conn, _) = axum::serve::Listener::accept(&mut listener).await;
        (conn, client)
    }

    #[tokio::test]
    async fn accepted_sockets_set_nodelay() {
        let (conn, _client) = accepted().await;
        assert!(conn.0.nodelay().unwrap());
    }

    #[tokio::test]
    async fn a_borrower_gets_the_socket_at_the_next_flush_and_both_write_to_it() {
        let (mut conn, mut client) = accepted().await;
        let lender = Lender(conn.0.clone());
        let mut borrowed = Box::pin(lender.borrow());
        conn.write_all(b"head ").await.unwrap();
        assert!(futures_util::poll!(&mut borrowed).is_pending(), "not lent before hyper flushes");
        conn.flush().await.unwrap();
        let tcp = borrowed.await.expect("lent at the flush");
        tcp.try_write(b"lent ").unwrap();
        conn.write_all(b"back").await.unwrap();
        conn.shutdown().await.unwrap();
        let mut read = String::new();
        client.read_to_string(&mut read).await.unwrap();
        assert_eq!(read, "head lent back");
    }
}

//! A TCP proxy that adds a fixed latency to every request, to measure what an object store's
//! distance costs (S3 Express answers in single milliseconds, S3 Standard in tens) with a
//! server on 127.0.0.1.
//!
//! The proxy knows nothing of HTTP. On each connection it delays the first bytes the server
//! sends after the client has sent something: one delay per request-response exchange, as
//! HTTP/1.1 without pipelining (what `object_store`'s client speaks) sends a request, waits for
//! its response, then sends the next. A request body in many segments, or a response in many,
//! is still delayed once. Connecting is not delayed.
//!
//! The proxy acknowledges every segment the server sends at once (`TCP_QUICKACK`, re-armed
//! after each read, as Linux clears it). A server that writes a response's headers and body
//! separately without `TCP_NODELAY` (s3s-fs does) otherwise holds the body back under Nagle's
//! algorithm until the headers are acknowledged, and Linux delays that acknowledgement by up to
//! 40 ms: every request would pay about 20 ms that no real object store costs, and the delay
//! measured would not be the one injected.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A running proxy; stopped when dropped.
pub struct LatencyProxy {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl LatencyProxy {
    /// Listens on `listen` (port 0 picks one) and forwards every connection to `target`,
    /// delaying each response by `delay`.
    pub fn start(listen: SocketAddr, target: SocketAddr, delay: Duration) -> io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sluice-proxy")
            .enable_all()
            .build()?;
        let listener = runtime.block_on(TcpListener::bind(listen))?;
        let addr = listener.local_addr()?;
        runtime.spawn(async move {
            loop {
                let client = match listener.accept().await {
                    Ok((client, _)) => client,
                    // Out of descriptors, or a connection reset before it was accepted: the
                    // listener itself is fine, so keep serving.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        relay(client, server, delay).await;
                    }
                });
            }
        });
        Ok(LatencyProxy {
            addr,
            runtime: Some(runtime),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Copies both ways until either side closes; the first server bytes after client bytes wait
/// `delay`.
async fn relay(client: TcpStream, server: TcpStream, delay: Duration) {
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // Set when the client sent something the server has not answered yet.
    let asked = Arc::new(AtomicBool::new(false));
    let asking = Arc::clone(&asked);
    let upstream = async move {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    asking.store(true, Ordering::SeqCst);
                    if server_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    quick_ack(&server_write);
                }
            }
        }
        let _ = server_write.shutdown().await;
    };
    let downstream = async move {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    quick_ack(&server_read);
                    if asked.swap(false, Ordering::SeqCst) {
                        tokio::time::sleep(delay).await;
                    }
                    if client_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

/// Acknowledges what `socket` has received at once, and the next segments too, until the
/// kernel leaves quick-ack mode again (hence once per read). Best effort: a socket that refuses
/// is only slower.
fn quick_ack(socket: &impl AsRef<TcpStream>) {
    let _ = socket2::SockRef::from(socket.as_ref()).set_tcp_quickack(true);
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::time::Instant;

    use super::*;

    /// An echo server on 127.0.0.1: answers each message with itself.
    fn echo_server() -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { break };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 || stream.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    #[test]
    fn each_exchange_waits_the_delay_once_and_bytes_pass_unchanged() {
        let delay = Duration::from_millis(40);
        let proxy =
            LatencyProxy::start("127.0.0.1:0".parse().unwrap(), echo_server(), delay).unwrap();
        let mut conn = std::net::TcpStream::connect(proxy.addr()).unwrap();
        for message in [&b"ping"[..], b"a longer message"] {
            let start = Instant::now();
            conn.write_all(message).unwrap();
            let mut back = vec![0u8; message.len()];
            conn.read_exact(&mut back).unwrap();
            assert_eq!(back, message);
            assert!(start.elapsed() >= delay, "{:?}", start.elapsed());
        }
    }
}

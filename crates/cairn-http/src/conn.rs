//! A connection's socket as the server serves it:
//! - **Writes may stall only so long.** A client that stops reading (or reads a byte now and
//!   then) fills its socket's buffers, and a write then waits on it. Past the bound the write
//!   fails, the connection closes and its slot is free again, so clients that never read their
//!   answers cannot hold the server's connections.
//! - **hyper's own answers carry the API's JSON error.** A request hyper cannot parse (a bad
//!   request line, NUL or invalid UTF-8 in the path, a negative or doubled `Content-Length`, a
//!   URL or a head too long) never reaches a handler: hyper answers it itself with an empty
//!   body and closes. Such an answer is the only `4xx` with `content-length: 0` this server
//!   writes (every handler's error has a body), so it is recognised here and given the body
//!   every other error has.

use crate::error::ApiError;
use axum::http::StatusCode;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `inner`, with writes that fail (`TimedOut`) once they made no progress for `bound`, and
/// hyper's own error answers rewritten with a JSON body.
pub(crate) struct Socket<T> {
    inner: T,
    bound: Duration,
    /// Set while a write waits: when it gives up.
    deadline: Option<Pin<Box<Sleep>>>,
    /// A rewritten answer being written: its bytes, how many went out, and how many bytes of
    /// hyper's own answer it stands for (reported written once it is all out).
    rewritten: Option<(Vec<u8>, usize, usize)>,
}

impl<T> Socket<T> {
    pub(crate) fn new(inner: T, bound: Duration) -> Self {
        Socket { inner, bound, deadline: None, rewritten: None }
    }

    /// What a write that is `Pending` does: starts the clock, or fails once it ran out.
    fn stalled<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let bound = self.bound;
        let deadline = self.deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + bound)));
        ready!(deadline.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, format!("the client read nothing for {bound:?}"))))
    }

    /// A write that went through (or failed): the clock stops.
    fn moved<R>(&mut self, result: io::Result<R>) -> Poll<io::Result<R>> {
        self.deadline = None;
        Poll::Ready(result)
    }
}

impl<T: AsyncWrite + Unpin> Socket<T> {
    /// Writes the rewritten answer on; `buf.len()` of hyper's bytes once it is all out.
    fn write_rewritten(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some((bytes, sent, stands_for)) = self.rewritten.as_mut() {
            if *sent == bytes.len() {
                let stands_for = *stands_for;
                self.rewritten = None;
                return Poll::Ready(Ok(stands_for));
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*sent..]) {
                Poll::Ready(Ok(0)) => return self.moved(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    *sent += n;
                    self.deadline = None;
                }
                Poll::Ready(Err(error)) => return self.moved(Err(error)),
                Poll::Pending => return self.stalled(cx),
            }
        }
        Poll::Ready(Ok(0))
    }
}

/// hyper's own answer to a request it could not parse, rewritten with the JSON error body; `None`
/// for any other bytes.
fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    // Most writes are answers the handlers made or bodies: told apart by their first bytes.
    if head.len() > 512 || !head.starts_with(b"HTTP/1.1 ") || !matches!(head.get(9), Some(b'4' | b'5')) {
        return None;
    }
    let text = std::str::from_utf8(head).ok()?;
    let status = text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse::<u16>().ok()?;
    let empty = text.ends_with("\r\n\r\n") && text.to_ascii_lowercase().contains("\r\ncontent-length: 0\r\n");
    if !(400..600).contains(&status) || !empty {
        return None;
    }
    let (code, message) = match status {
        414 => ("uri_too_long", "the request's URL is too long"),
        431 => ("headers_too_large", "the request's head is too large, or has too many header fields"),
        505 => ("unsupported_version", "this server speaks HTTP/1.1 (and 1.0)"),
        _ => (
            "bad_request",
            "the request could not be read: a malformed request line, path or header (a Content-Length must be one \
             non-negative number)",
        ),
    };
    Some(ApiError::new(StatusCode::from_u16(status).ok()?, code, message).closing_answer(""))
}

impl<T: AsyncRead + Unpin> AsyncRead for Socket<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Socket<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.rewritten.is_none()
            && let Some(bytes) = rewrite(buf)
        {
            self.rewritten = Some((bytes, 0, buf.len()));
        }
        if self.rewritten.is_some() {
            return self.write_rewritten(cx);
        }
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(result) => self.moved(result),
            Poll::Pending => self.stalled(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // hyper's own answer is a head alone, written as one piece.
        let mut pieces = bufs.iter().filter(|piece| !piece.is_empty());
        if let (Some(head), None) = (pieces.next(), pieces.next())
            && (self.rewritten.is_some() || rewrite(head).is_some())
        {
            return self.poll_write(cx, head);
        }
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => self.moved(result),
            Poll::Pending => self.stalled(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(result) => self.moved(result),
            Poll::Pending => self.stalled(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_shutdown(cx) {
            Poll::Ready(result) => self.moved(result),
            Poll::Pending => self.stalled(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Socket, rewrite};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_write_that_waits_past_its_bound_fails_and_one_that_moves_does_not() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut socket = Socket::new(ours, Duration::from_secs(10));
        // Moving along: each write finds room once the other side reads.
        for _ in 0..4 {
            socket.write_all(&[7; 64]).await.unwrap();
            let mut read = [0; 64];
            theirs.read_exact(&mut read).await.unwrap();
        }
        // The other side stops reading: the buffer fills, and the write gives up at the bound.
        let started = tokio::time::Instant::now();
        let error = socket.write_all(&[7; 256]).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test]
    async fn hypers_own_empty_error_answers_get_the_json_body() {
        let (ours, mut theirs) = tokio::io::duplex(4096);
        let mut socket = Socket::new(ours, Duration::from_secs(10));
        let own = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        socket.write_all(own).await.unwrap();
        drop(socket);
        let mut written = String::new();
        theirs.read_to_string(&mut written).await.unwrap();
        let (head, body) = written.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 ") && head.contains("content-type: application/json"), "{head}");
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "headers_too_large");
    }

    #[test]
    fn only_empty_error_answers_are_rewritten() {
        assert!(rewrite(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").is_some());
        assert!(rewrite(b"HTTP/1.1 414 URI Too Long\r\nContent-Length: 0\r\ndate: x\r\n\r\n").is_some());
        for other in [
            &b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 42\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}",
            b"{\"error\": 1}",
        ] {
            assert!(rewrite(other).is_none(), "{}", String::from_utf8_lossy(other));
        }
    }
}

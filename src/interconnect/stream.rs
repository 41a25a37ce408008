//! [`IcStream`]: a session's connection, plain TCP or TLS over it (feature `tls`).
//!
//! The session reads it on one thread (the reader) and writes it on another (the driver),
//! both through `&IcStream`. A plain stream is the socket itself, with no cost over it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

#[cfg(feature = "tls")]
use super::tls::TlsStream;

/// A session's connection.
pub(crate) enum IcStream {
    Plain(TcpStream),
    /// Boxed: a rustls connection is large, a plain stream is an fd.
    #[cfg(feature = "tls")]
    Tls(Box<TlsStream>),
}

impl IcStream {
    /// The TCP socket under the stream.
    pub(crate) fn socket(&self) -> &TcpStream {
        match self {
            IcStream::Plain(s) => s,
            #[cfg(feature = "tls")]
            IcStream::Tls(t) => t.socket(),
        }
    }

    /// Whether the connection runs TLS (YDB then neither writes nor checks packet
    /// checksums).
    pub(crate) fn is_tls(&self) -> bool {
        !matches!(self, IcStream::Plain(_))
    }

    pub(crate) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.socket().shutdown(how)
    }

    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.socket().set_write_timeout(t)
    }

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.socket().set_read_timeout(t)
    }

    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket().local_addr()
    }
}

impl Read for &IcStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match *self {
            IcStream::Plain(s) => (&*s).read(buf),
            #[cfg(feature = "tls")]
            IcStream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for &IcStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match *self {
            IcStream::Plain(s) => (&*s).write(buf),
            #[cfg(feature = "tls")]
            IcStream::Tls(t) => t.write_all(buf).map(|()| buf.len()),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match *self {
            IcStream::Plain(s) => (&*s).write_all(buf),
            #[cfg(feature = "tls")]
            IcStream::Tls(t) => t.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

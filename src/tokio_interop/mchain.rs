//! An mchain read from async code: one message as a future, or all of them as a `Stream`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use crate::mchain::MChain;
use crate::message::Message;

impl MChain {
    /// A future of the chain's next message (feature `tokio`); `None` once the chain is
    /// closed and empty.
    ///
    /// Messages come out in the order [`receive`](crate::mchain::receive) would give
    /// them, as [`Message`]s: read one with [`Message::downcast_ref`] (after
    /// [`Message::reveal`] for an enveloped one). The future waits without blocking a
    /// thread: a send, or the close, wakes the task. Dropping it before it resolves takes
    /// nothing out of the chain and leaves nothing in it (the task's waker goes with
    /// it). It needs no particular runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::mchain::{CloseMode, MChainParams};
    /// use agentbox::prelude::*;
    ///
    /// let wrapped = agentbox::WrappedEnv::new(|_| {}).unwrap();
    /// let chain = wrapped.environment().create_mchain(MChainParams::unbounded());
    /// send(&chain.as_mbox(), 42u32).unwrap();
    /// chain.close(CloseMode::RetainContent);
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// rt.block_on(async {
    ///     let first = chain.recv_async().await.unwrap();
    ///     assert_eq!(first.downcast_ref::<u32>(), Some(&42));
    ///     assert!(chain.recv_async().await.is_none()); // closed and empty
    /// });
    /// ```
    pub fn recv_async(&self) -> Recv {
        Recv {
            chain: self.clone(),
            key: None,
        }
    }

    /// The chain's messages as a [`Stream`] (feature `tokio`), in order, ending when the
    /// chain is closed and empty.
    ///
    /// Several streams and futures may read one chain: each message goes to one of them.
    /// Dropping the stream leaves nothing in the chain (its task's waker goes with it).
    /// See [`recv_async`](Self::recv_async) for how to read a [`Message`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::pin::Pin;
    /// use futures_core::Stream;
    /// use agentbox::mchain::{CloseMode, MChainParams};
    /// use agentbox::prelude::*;
    ///
    /// let wrapped = agentbox::WrappedEnv::new(|_| {}).unwrap();
    /// let chain = wrapped.environment().create_mchain(MChainParams::unbounded());
    /// for n in 0..3u32 {
    ///     send(&chain.as_mbox(), n).unwrap();
    /// }
    /// chain.close(CloseMode::RetainContent);
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let got = rt.block_on(async {
    ///     let mut stream = chain.stream();
    ///     let mut got = Vec::new();
    ///     // (futures' `StreamExt::next` does the same.)
    ///     while let Some(m) =
    ///         std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await
    ///     {
    ///         got.push(*m.downcast_ref::<u32>().unwrap());
    ///     }
    ///     got
    /// });
    /// assert_eq!(got, [0, 1, 2]);
    /// ```
    pub fn stream(&self) -> MChainStream {
        MChainStream {
            chain: self.clone(),
            key: None,
        }
    }
}

/// The future of [`MChain::recv_async`]: the next message, or `None` when the chain is
/// closed and empty.
#[must_use = "a future does nothing unless awaited"]
pub struct Recv {
    chain: MChain,
    /// This reader's entry among the chain's waiting readers, once it has waited.
    key: Option<u64>,
}

impl Future for Recv {
    type Output = Option<Message>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        let this = self.get_mut();
        this.chain.0.poll_pop(&mut this.key, cx.waker())
    }
}

impl Drop for Recv {
    fn drop(&mut self) {
        if let Some(k) = self.key {
            self.chain.0.cancel_poll(k);
        }
    }
}

impl fmt::Debug for Recv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Recv").field(&self.chain).finish()
    }
}

/// The [`Stream`] of [`MChain::stream`]: the chain's messages in order, ending when the
/// chain is closed and empty.
#[must_use = "streams do nothing unless polled"]
pub struct MChainStream {
    chain: MChain,
    /// This reader's entry among the chain's waiting readers, once it has waited.
    key: Option<u64>,
}

impl MChainStream {
    /// The chain this stream reads.
    pub fn chain(&self) -> &MChain {
        &self.chain
    }
}

impl Stream for MChainStream {
    type Item = Message;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        let this = self.get_mut();
        this.chain.0.poll_pop(&mut this.key, cx.waker())
    }
}

impl Drop for MChainStream {
    fn drop(&mut self) {
        if let Some(k) = self.key {
            self.chain.0.cancel_poll(k);
        }
    }
}

impl fmt::Debug for MChainStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MChainStream").field(&self.chain).finish()
    }
}

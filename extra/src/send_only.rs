//! The shared skeleton of mboxes that only forward (broadcast, collecting, composite):
//! agents cannot subscribe to them or filter them; each message is handed to a [`Forward`].

use std::sync::Arc;

use agentbox::{
    DeliveryFilter, DeliveryMode, Environment, Mbox, MboxId, MboxImpl, MboxKind, Message,
    MessageType, RedirectionDepth, SendError, Sink, SubscribeError, WeakEnv,
};

/// What a send-only mbox does with what is sent to it.
pub(crate) trait Forward: Send + Sync + 'static {
    /// Single-consumer only if everything it forwards to is.
    fn kind(&self) -> MboxKind;
    /// Handles one message; `name` is the mbox's, for errors.
    fn forward(
        &self,
        name: &str,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError>;
}

struct SendOnly<F> {
    id: MboxId,
    env: WeakEnv,
    label: &'static str,
    fwd: F,
}

/// A send-only mbox of `env`, named `<label>:<id>`.
pub(crate) fn create<F: Forward>(env: &Environment, label: &'static str, fwd: F) -> Mbox {
    Mbox::custom(Arc::new(SendOnly {
        id: MboxId::next(),
        env: env.downgrade(),
        label,
        fwd,
    }))
}

impl<F: Forward> MboxImpl for SendOnly<F> {
    fn id(&self) -> MboxId {
        self.id
    }

    fn kind(&self) -> MboxKind {
        self.fwd.kind()
    }

    fn subscribe(&self, _ty: MessageType, _who: &Sink) -> Result<(), SubscribeError> {
        Err(SubscribeError::NotSubscribable { mbox: self.name() })
    }

    fn unsubscribe(&self, _ty: MessageType, _who: &Sink) {}

    fn deliver(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        let ty = msg.message_type();
        if ty.is_mutable() && self.kind() == MboxKind::MultiConsumer {
            return Err(SendError::MutableToMultiConsumer {
                type_name: ty.name(),
                mbox: self.name(),
            });
        }
        self.fwd.forward(&self.name(), msg, depth, mode)
    }

    fn set_delivery_filter(
        &self,
        _ty: MessageType,
        _filter: DeliveryFilter,
        _who: &Sink,
    ) -> Result<(), SubscribeError> {
        Err(SubscribeError::NotSubscribable { mbox: self.name() })
    }

    fn drop_delivery_filter(&self, _ty: MessageType, _who: &Sink) {}

    fn name(&self) -> String {
        format!("{}:{}", self.label, self.id.as_u64())
    }

    fn environment(&self) -> Option<Environment> {
        self.env.upgrade()
    }
}

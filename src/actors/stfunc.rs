//! [`stfunc!`](crate::stfunc): a state function written as YDB writes one (`STFUNC` with
//! `hFunc`/`cFunc`/`IgnoreFunc` arms), dispatching an [`EventHandle`](super::EventHandle)
//! by event type to methods.

/// Dispatches an [`EventHandle`](crate::actors::EventHandle) by event type to methods, as
/// YDB's `STFUNC` with `hFunc`, `cFunc` and `IgnoreFunc` does; an event no arm takes falls
/// through to [`unhandled`](crate::actors::EventHandle::unhandled) (a
/// [`Poison`](crate::actors::Poison) then passes the actor away, anything else becomes a
/// dead letter). The macro is the state function's body and its value, a
/// [`Handled`](crate::actors::Handled).
///
/// ```text
/// agentbox::stfunc!(self, ctx, ev => {
///     hfunc(Request, Self::handle_request), // fn(&mut self, &mut ActorContext<Self>, EventHandle)
///     efunc(Reply, Self::on_reply),         // fn(&mut self, &mut ActorContext<Self>, Reply, &EventHandle)
///     cfunc(Wakeup, Self::on_timeout),      // fn(&mut self, &mut ActorContext<Self>)
///     ignore(Gone),                         // handled, nothing runs
/// })
/// ```
///
/// | arm | YDB | the method gets |
/// |---|---|---|
/// | `hfunc(T, f)` | `hFunc(T, f)` / `HFunc` | `(self, ctx, ev)`: the whole handle, the event still in it ([`get`](crate::actors::EventHandle::get), [`take`](crate::actors::EventHandle::take)) |
/// | `efunc(T, f)` | (none) | `(self, ctx, event, &ev)`: the event taken out by value, and the handle for sender, cookie, flags |
/// | `cfunc(T, f)` | `cFunc(T, f)` / `CFunc` | `(self, ctx)` |
/// | `ignore(T)` | `IgnoreFunc(T)` | nothing runs; the event is handled |
///
/// Arms are tried in order; an arm matches when the handle carries a `T`
/// ([`is::<T>`](crate::actors::EventHandle::is): a local `T`, or one from another node that
/// decodes). A method returns `()`: the macro answers `Handled::Yes` for it. A state
/// function that wants to give an event back after looking at it writes that arm by hand
/// (an `if` before the macro).
///
/// # Examples
///
/// ```
/// use agentbox::actors::*;
/// use agentbox::{ActorId, Environment};
///
/// const EVENTS: u32 = event_space_begin(ES_USERSPACE + 1);
/// struct Add(u64);
/// impl Event for Add { const EVENT_TYPE: u32 = EVENTS + 1; }
/// struct Report;
/// impl Event for Report { const EVENT_TYPE: u32 = EVENTS + 2; }
/// struct Total(u64);
/// impl Event for Total { const EVENT_TYPE: u32 = EVENTS + 3; }
///
/// #[derive(Default)]
/// struct Counter { sum: u64 }
/// impl Actor for Counter {
///     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
///         ctx.become_state(Self::counting);
///     }
/// }
/// impl Counter {
///     fn counting(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
///         agentbox::stfunc!(self, ctx, ev => {
///             efunc(Add, Self::add),
///             hfunc(Report, Self::report),
///             ignore(Wakeup),
///         })
///     }
///     fn add(&mut self, _ctx: &mut ActorContext<Self>, Add(n): Add, _ev: &EventHandle) {
///         self.sum += n;
///     }
///     fn report(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) {
///         ctx.send(ev.sender(), Total(self.sum));
///         ctx.pass_away().unwrap();
///     }
/// }
///
/// /// Sends three numbers, asks for the total, checks it and ends.
/// struct Client { counter: ActorId }
/// impl Actor for Client {
///     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
///         for n in [1, 2, 3] {
///             ctx.send(self.counter, Add(n));
///         }
///         ctx.send(self.counter, Wakeup { tag: 0 }); // ignored
///         ctx.send(self.counter, Report);
///         ctx.become_state(Self::waiting);
///     }
/// }
/// impl Client {
///     fn waiting(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
///         agentbox::stfunc!(self, ctx, ev => { hfunc(Total, Self::total) })
///     }
///     fn total(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) {
///         assert_eq!(ev.get::<Total>().map(|t| t.0), Some(6));
///         ctx.pass_away().unwrap();
///     }
/// }
///
/// Environment::launch(|env| {
///     let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
///     let counter = system.register(Counter::default()).unwrap();
///     system.register(Client { counter }).unwrap();
/// })
/// .unwrap(); // ends when both actors have passed away
/// ```
#[macro_export]
macro_rules! stfunc {
    ($this:expr, $ctx:expr, $ev:expr => { $($kind:ident ( $($arg:tt)* )),* $(,)? }) => {{
        let ev: $crate::actors::EventHandle = $ev;
        'stfunc: {
            $( $crate::stfunc!(@arm 'stfunc, $this, $ctx, ev, $kind($($arg)*)); )*
            ev.unhandled()
        }
    }};
    (@arm $l:lifetime, $this:expr, $ctx:expr, $ev:ident, hfunc($t:ty, $f:expr $(,)?)) => {
        if $ev.is::<$t>() {
            $f($this, $ctx, $ev);
            break $l $crate::actors::Handled::Yes;
        }
    };
    (@arm $l:lifetime, $this:expr, $ctx:expr, $ev:ident, efunc($t:ty, $f:expr $(,)?)) => {
        #[allow(unused_mut)]
        let mut $ev = $ev;
        if let Some(event) = $ev.take::<$t>() {
            $f($this, $ctx, event, &$ev);
            break $l $crate::actors::Handled::Yes;
        }
    };
    (@arm $l:lifetime, $this:expr, $ctx:expr, $ev:ident, cfunc($t:ty, $f:expr $(,)?)) => {
        if $ev.is::<$t>() {
            $f($this, $ctx);
            break $l $crate::actors::Handled::Yes;
        }
    };
    (@arm $l:lifetime, $this:expr, $ctx:expr, $ev:ident, ignore($t:ty $(,)?)) => {
        if $ev.is::<$t>() {
            break $l $crate::actors::Handled::Yes;
        }
    };
}

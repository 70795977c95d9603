//! Aborting a call: the `{ signal }` option of every call that goes to the database.
//!
//! `index.js` owns the `AbortSignal`: for a call given one, it makes a token
//! ([`abort_token`]), arms it ([`arm`]) just before it calls the method and disarms it right
//! after ([`disarm`]), all on the JavaScript thread, so the Promise the method makes
//! ([`promise!`](crate::promise)) takes exactly that token. When the signal aborts, `index.js`
//! rejects the call's Promise at once and calls [`abort`], which drops the core's future — as a cancelled Rust
//! future or a cancelled `asyncio` call of the Python package is dropped — and says whether
//! the call had started (then a write may have been sent: `written` is `unknown`).
// napi-rs registers the functions below with the addon, outside `cfg(test)` only.
#![cfg_attr(test, allow(dead_code))]

use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

use futures::future::{AbortHandle, AbortRegistration, Abortable};
use napi::bindgen_prelude::{External, FromNapiValue, ToNapiValue, TypeName, ValidateNapiValue};
use napi::{ValueType, sys};
use napi_derive::napi;

use crate::promise::{Answer, Rejected};

/// Not yet polled: nothing was sent.
const IDLE: u8 = 0;
/// Polled: the core's call runs, and may have sent its write.
const STARTED: u8 = 1;
/// Aborted: the core's future is dropped (or never runs).
const ABORTED: u8 = 2;

/// One call's abort: its state, and the handle that drops its future.
pub struct Token {
    state: AtomicU8,
    handle: AbortHandle,
    registration: Mutex<Option<AbortRegistration>>,
}

thread_local! {
    /// The token of the call being made on this JavaScript thread (the main thread or a
    /// worker's), between `arm` and `disarm`.
    static ARMED: RefCell<Option<Arc<Token>>> = const { RefCell::new(None) };
}

/// A token for one call (`index.js`: `native._abortToken()`).
#[napi(skip_typescript, js_name = "_abortToken")]
pub fn abort_token() -> External<Arc<Token>> {
    let (handle, registration) = AbortHandle::new_pair();
    External::new(Arc::new(Token {
        state: AtomicU8::new(IDLE),
        handle,
        registration: Mutex::new(Some(registration)),
    }))
}

/// The next Promise a method makes on this thread is aborted by `token`.
#[napi(skip_typescript, js_name = "_armAbort")]
pub fn arm(token: &External<Arc<Token>>) {
    let token = Arc::clone(token);
    ARMED.with(|a| *a.borrow_mut() = Some(token));
}

/// No Promise takes a token any more (the method was called, or threw).
#[napi(skip_typescript, js_name = "_disarmAbort")]
pub fn disarm() {
    ARMED.with(|a| *a.borrow_mut() = None);
}

/// Drops the call's future; true when it had started (its write may have been sent).
#[napi(skip_typescript, js_name = "_abort")]
pub fn abort(token: &External<Arc<Token>>) -> bool {
    let before = token.state.swap(ABORTED, Ordering::SeqCst);
    token.handle.abort();
    before == STARTED
}

/// The token armed for the call being made on this thread, if any (taken: one call only).
pub fn armed() -> Option<Armed> {
    ARMED.with(|a| a.borrow_mut().take()).map(Armed)
}

/// A call's token, as its Promise holds it.
pub struct Armed(Arc<Token>);

/// `work`, which `token` (when there is one) may abort: not run at all when aborted before it
/// started, dropped where it waits when aborted while it runs. An aborted call's Promise is
/// rejected by `index.js` already; the rejection here is what a caller of the addon itself
/// sees.
///
/// # Cancel safety
///
/// Dropping it drops `work` where it waits, as an abort does: what that leaves is what
/// dropping the core's call leaves (see each call's own section).
pub async fn abortable<T, W>(token: Option<Armed>, work: W) -> Answer<T>
where
    W: Future<Output = Answer<T>>,
{
    let Some(token) = token else {
        return work.await;
    };
    let token = &token.0;
    let registration = token
        .registration
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let started = token
        .state
        .compare_exchange(IDLE, STARTED, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    let Some(registration) = registration.filter(|_| started) else {
        return Err(aborted(dispenser::error::Written::Nothing));
    };
    match Abortable::new(work, registration).await {
        Ok(answer) => answer,
        Err(_) => Err(aborted(dispenser::error::Written::Unknown)),
    }
}

fn aborted(written: dispenser::error::Written) -> Rejected {
    Rejected::from(napi::Error::from_reason(format!(
        "[dispenser:aborted:aborted:{}] the call was aborted",
        written.as_str()
    )))
}

/// The `signal` option: an `AbortSignal`, which `index.js` reads; the addon takes any value
/// there and leaves it alone.
pub struct Signal;

impl TypeName for Signal {
    fn type_name() -> &'static str {
        "AbortSignal"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ValidateNapiValue for Signal {
    unsafe fn validate(
        _env: sys::napi_env,
        _napi_val: sys::napi_value,
    ) -> napi::Result<sys::napi_value> {
        Ok(std::ptr::null_mut())
    }
}

impl FromNapiValue for Signal {
    unsafe fn from_napi_value(
        _env: sys::napi_env,
        _napi_val: sys::napi_value,
    ) -> napi::Result<Self> {
        Ok(Signal)
    }
}

impl ToNapiValue for Signal {
    unsafe fn to_napi_value(env: sys::napi_env, _val: Self) -> napi::Result<sys::napi_value> {
        // SAFETY: called by napi on the JavaScript thread with its env.
        unsafe { ToNapiValue::to_napi_value(env, ()) }
    }
}

/// The options of a call that has no other: `signal`, to abort it.
#[napi(object)]
pub struct SignalOptions {
    /// Aborts the call: its Promise rejects at once with an `AbortError` whose `written` says
    /// whether its write may have been sent.
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
}

//! The one way a method returns a Promise: [`promise`] runs the core's call on a clone of its
//! handle and settles the Promise with the call's value, or rejects it with the core's error
//! (or an argument refused on the way) as a JavaScript error. A call given a `signal` can be
//! aborted (see `abort`).

use std::future::Future;

use napi::Env;
use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};

use crate::abort;
use crate::convert::js;

/// Why a Promise is rejected: the core's error (as [`js`] writes it) or an argument the
/// binding refused while converting it. `?` turns either into it.
pub struct Rejected(napi::Error);

impl From<dispenser::Error> for Rejected {
    fn from(e: dispenser::Error) -> Self {
        Rejected(js(e))
    }
}

impl From<napi::Error> for Rejected {
    fn from(e: napi::Error) -> Self {
        Rejected(e)
    }
}

/// What the body of a Promise-returning method answers.
pub type Answer<T> = Result<T, Rejected>;

/// A Promise of what `work` answers: `work` runs on napi's runtime; its error rejects the
/// Promise. Used through [`promise!`](crate::promise::promise).
///
/// # Cancel safety
///
/// `work` runs to its end unless the call's `signal` aborts it (`index.js` armed its token on
/// this thread: [`abort::armed`]), which drops it where it waits. A worker or process that
/// exits meanwhile drops it too. Either leaves what dropping the core's call leaves.
pub fn settle<'env, T, W>(env: &'env Env, work: W) -> napi::Result<PromiseRaw<'env, T>>
where
    W: Future<Output = Answer<T>> + Send + 'static,
    T: ToNapiValue + Send + 'static,
{
    let token = abort::armed();
    env.spawn_future(async move { abort::abortable(token, work).await.map_err(|Rejected(e)| e) })
}

/// `promise!(env, self.inner, |h| body)`: a Promise of `body` (an [`Answer`], `?` on the
/// core's errors and on refused arguments alike), run with `h` a clone of the core's handle.
/// The clone (cheap: the core's handles share their state) moves into the future, which never
/// borrows `&self`: a worker that is terminated frees its objects while the future may still
/// run (see the crate docs). Arguments are converted inside `body`, so a refused one rejects
/// the Promise as the core's refusal would.
macro_rules! promise {
    ($env:expr, $handle:expr, |$h:ident| $body:expr) => {{
        let $h = $handle.clone();
        $crate::promise::settle($env, async move { $body })
    }};
}
pub(crate) use promise;

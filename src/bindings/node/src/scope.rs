//! Scoped and daily sequences: a sequence per key (tenant, day, …) made from a template.

use dispenser::jiff::civil::Date;
use dispenser::jiff::tz::TimeZone;
use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi::bindgen_prelude::i64n;
use napi_derive::napi;

use crate::abort::SignalOptions;
use crate::convert::{Json, invalid, js};
use crate::dispenser::Dispenser;
use crate::promise::promise;
use crate::sequence::{Sequence, stats_json};

#[napi]
impl Dispenser {
    /// Opens the scope `scope` of `template` (`template@scope`), creating it from the
    /// template's shape when missing.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn ensure_scope<'env>(
        &self,
        env: &'env Env,
        template: String,
        scope: String,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, Sequence>> {
        promise!(env, self.inner, |inner| {
            let s = inner.ensure_scope(&template, &scope).await?;
            Ok(Sequence::from(s))
        })
    }

    /// Creates the scope `scope` of `template`; fails `AlreadyExists` when it exists.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn create_scope<'env>(
        &self,
        env: &'env Env,
        template: String,
        scope: String,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, Sequence>> {
        promise!(env, self.inner, |inner| {
            let s = inner.create_scope(&template, &scope).await?;
            Ok(Sequence::from(s))
        })
    }

    /// Opens the existing scope `scope` of `template`.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn open_scope<'env>(
        &self,
        env: &'env Env,
        template: String,
        scope: String,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, Sequence>> {
        promise!(env, self.inner, |inner| {
            let s = inner.open_scope(&template, &scope).await?;
            Ok(Sequence::from(s))
        })
    }

    /// Deletes the scopes of `template` whose key sorts before `before`; returns how many.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn delete_scopes_before<'env>(
        &self,
        env: &'env Env,
        template: String,
        before: String,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, u64>> {
        promise!(env, self.inner, |inner| {
            Ok(inner.delete_scopes_before(&template, &before).await?)
        })
    }

    /// A sequence whose numbering restarts every day in the IANA time zone `timeZone`.
    #[napi]
    pub fn open_daily(&self, template: String, time_zone: String) -> napi::Result<DailySequence> {
        let tz = TimeZone::get(&time_zone)
            .map_err(|e| invalid("time zone", format!("{time_zone:?}: {e}")))?;
        let inner = self.inner.open_daily(&template, tz).map_err(js)?;
        Ok(DailySequence { inner })
    }
}

/// A number and the scope (for a daily sequence, the date `YYYY-MM-DD`) it was drawn in.
#[napi(object, object_from_js = false)]
pub struct ScopedNumber {
    /// The scope key.
    pub scope: String,
    /// The number, unique within its scope.
    pub number: i64n,
}

/// A sequence whose numbering restarts every day.
#[napi]
pub struct DailySequence {
    inner: dispenser::scope::DailySequence,
}

#[napi]
impl DailySequence {
    /// The template's name.
    #[napi(getter)]
    pub fn template(&self) -> String {
        self.inner.template().to_owned()
    }

    /// Today's date in the sequence's time zone (`YYYY-MM-DD`).
    #[napi]
    pub fn today(&self) -> String {
        self.inner.today().to_string()
    }

    /// Issues the next number of today's scope.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn next<'env>(
        &self,
        env: &'env Env,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, ScopedNumber>> {
        promise!(env, self.inner, |inner| {
            let n = inner.next().await?;
            Ok(ScopedNumber {
                scope: n.scope,
                number: i64n(n.number),
            })
        })
    }

    /// Deletes the days before `before` (`YYYY-MM-DD`), never today or later; returns how many.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn delete_scopes_before<'env>(
        &self,
        env: &'env Env,
        before: String,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, u64>> {
        promise!(env, self.inner, |inner| {
            let d: Date = before
                .parse()
                .map_err(|e| invalid("date", format!("{before:?}: {e}")))?;
            Ok(inner.delete_scopes_before(d).await?)
        })
    }

    /// What this sequence did so far, over every day.
    #[napi(ts_return_type = "Stats")]
    pub fn stats(&self) -> Json {
        Json(stats_json(&self.inner.stats()))
    }
}

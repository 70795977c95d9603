//! One trait for every source of numbers, so that an application can switch between a plain
//! sequence, blocks, stripes and daily scopes without changing the code that draws.
//!
//! * [`NumberSource`] is the trait to write generic code against (`async fn`-style methods,
//!   no allocation per call).
//! * [`DynNumberSource`] is its object-safe form: every `NumberSource` is one, and
//!   [`BoxNumberSource`] (`Box<dyn DynNumberSource>`) is itself a `NumberSource`, so a source
//!   picked from configuration at run time (see [`Dispenser::open_source`]) is used exactly
//!   like a concrete one.

use std::future::Future;
use std::pin::Pin;

use crate::arith::Run;
use crate::block::{BlockOptions, BlockSequence, CloseReport};
use crate::dispenser::{Dispenser, Sequence};
use crate::error::{Error, Result};
use crate::scope::DailySequence;
use crate::stats::Stats;
use crate::stripe::StripedSequence;

/// A boxed future, as the object-safe [`DynNumberSource`] returns them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A source of unique numbers: a plain [`Sequence`], a [`BlockSequence`], a
/// [`StripedSequence`] or a [`DailySequence`].
///
/// What every source promises: no number is returned twice (within an era; see the guide's
/// Guarantees). What differs is order: a plain sequence returns numbers in the order of its
/// writes (linearizable), blocks, stripes and runs trade global order for throughput, and a
/// daily sequence restarts every day (its numbers are unique within a day).
///
/// # Example: code that works with any source
///
/// ```no_run
/// use dispenser::{Result, source::NumberSource};
///
/// async fn label_orders(source: &impl NumberSource, count: usize) -> Result<Vec<String>> {
///     let mut out = Vec::with_capacity(count);
///     for _ in 0..count {
///         out.push(format!("{}-{}", source.name(), source.next().await?));
///     }
///     Ok(out)
/// }
/// ```
pub trait NumberSource: Send + Sync {
    /// The name of the sequence (the template of a daily sequence, the base name of a
    /// striped one).
    fn name(&self) -> &str;

    /// Issues the next number.
    ///
    /// # Errors
    ///
    /// Those of the source's own `next` ([`Sequence::next`], [`BlockSequence::next`], …).
    ///
    /// # Cancel safety
    ///
    /// As the source's own `next`: cancel-safe for blocks; for the others a write that was
    /// sent may have reserved the number, which is then a gap (never a duplicate).
    fn next(&self) -> impl Future<Output = Result<i64>> + Send;

    /// Issues a run of up to `n` consecutive numbers of this source, at least one. A plain
    /// sequence issues all `n` in one write (fewer only at a cyclic wrap; without `cycle`,
    /// fewer than `n` left is [`Error::Exhausted`]); the other sources may return fewer
    /// (by default exactly one): call again for the rest.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for `n == 0`, plus those of [`NumberSource::next`].
    ///
    /// # Cancel safety
    ///
    /// As [`NumberSource::next`].
    fn next_n(&self, n: u64) -> impl Future<Output = Result<Run>> + Send {
        async move {
            if n == 0 {
                return Err(zero(self.name()));
            }
            let first = self.next().await?;
            Ok(Run::new(first, 1, 1))
        }
    }

    /// What this source did so far.
    fn stats(&self) -> Stats;

    /// Closes the source: block clients give their unused numbers back (see
    /// [`BlockSequence::close`]); sources that hold nothing return an empty report. After
    /// `close`, a block client fails with [`Error::Closed`].
    ///
    /// # Errors
    ///
    /// Those of [`BlockSequence::close`].
    ///
    /// # Cancel safety
    ///
    /// As [`BlockSequence::close`]: dropping it may leave numbers a gap, never issued twice.
    fn close(&self) -> impl Future<Output = Result<CloseReport>> + Send;
}

fn zero(name: &str) -> Error {
    Error::InvalidArgument {
        what: "count".to_owned(),
        reason: format!("0 numbers requested from sequence {name:?}; ask for at least 1"),
    }
}

/// The object-safe form of [`NumberSource`]: implemented for every `NumberSource`; use it as
/// `Box<dyn DynNumberSource>` ([`BoxNumberSource`]), which is a `NumberSource` again. Its
/// methods are the trait's, boxed; call the [`NumberSource`] ones.
///
/// # Example
///
/// ```no_run
/// use dispenser::{source::{BoxNumberSource, NumberSource}};
///
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let plain: BoxNumberSource = Box::new(d.open("orders").await?);
/// let blocks: BoxNumberSource = Box::new(d.open_blocks("orders").await?);
/// for source in [plain, blocks] {
///     println!("{}", source.next().await?);
///     source.close().await?;
/// }
/// # Ok(()) }
/// ```
pub trait DynNumberSource: Send + Sync {
    /// [`NumberSource::name`].
    fn dyn_name(&self) -> &str;
    /// [`NumberSource::next`], boxed.
    ///
    /// # Cancel safety
    ///
    /// As [`NumberSource::next`].
    fn dyn_next(&self) -> BoxFuture<'_, Result<i64>>;
    /// [`NumberSource::next_n`], boxed.
    ///
    /// # Cancel safety
    ///
    /// As [`NumberSource::next_n`].
    fn dyn_next_n(&self, n: u64) -> BoxFuture<'_, Result<Run>>;
    /// [`NumberSource::stats`].
    fn dyn_stats(&self) -> Stats;
    /// [`NumberSource::close`], boxed.
    ///
    /// # Cancel safety
    ///
    /// As [`NumberSource::close`].
    fn dyn_close(&self) -> BoxFuture<'_, Result<CloseReport>>;
}

impl<S: NumberSource> DynNumberSource for S {
    fn dyn_name(&self) -> &str {
        self.name()
    }
    fn dyn_next(&self) -> BoxFuture<'_, Result<i64>> {
        Box::pin(self.next())
    }
    fn dyn_next_n(&self, n: u64) -> BoxFuture<'_, Result<Run>> {
        Box::pin(self.next_n(n))
    }
    fn dyn_stats(&self) -> Stats {
        self.stats()
    }
    fn dyn_close(&self) -> BoxFuture<'_, Result<CloseReport>> {
        Box::pin(self.close())
    }
}

/// A source chosen at run time.
pub type BoxNumberSource = Box<dyn DynNumberSource>;

impl NumberSource for BoxNumberSource {
    fn name(&self) -> &str {
        (**self).dyn_name()
    }
    fn next(&self) -> impl Future<Output = Result<i64>> + Send {
        (**self).dyn_next()
    }
    fn next_n(&self, n: u64) -> impl Future<Output = Result<Run>> + Send {
        (**self).dyn_next_n(n)
    }
    fn stats(&self) -> Stats {
        (**self).dyn_stats()
    }
    fn close(&self) -> impl Future<Output = Result<CloseReport>> + Send {
        (**self).dyn_close()
    }
}

impl NumberSource for Sequence {
    fn name(&self) -> &str {
        Sequence::name(self)
    }
    fn next(&self) -> impl Future<Output = Result<i64>> + Send {
        Sequence::next(self)
    }
    fn next_n(&self, n: u64) -> impl Future<Output = Result<Run>> + Send {
        Sequence::next_n(self, n)
    }
    fn stats(&self) -> Stats {
        Sequence::stats(self)
    }
    async fn close(&self) -> Result<CloseReport> {
        Ok(CloseReport::default())
    }
}

impl NumberSource for BlockSequence {
    fn name(&self) -> &str {
        BlockSequence::name(self)
    }
    fn next(&self) -> impl Future<Output = Result<i64>> + Send {
        BlockSequence::next(self)
    }
    fn stats(&self) -> Stats {
        BlockSequence::stats(self)
    }
    fn close(&self) -> impl Future<Output = Result<CloseReport>> + Send {
        BlockSequence::close(self)
    }
}

impl NumberSource for StripedSequence {
    fn name(&self) -> &str {
        StripedSequence::name(self)
    }
    fn next(&self) -> impl Future<Output = Result<i64>> + Send {
        StripedSequence::next(self)
    }
    fn stats(&self) -> Stats {
        StripedSequence::stats(self)
    }
    fn close(&self) -> impl Future<Output = Result<CloseReport>> + Send {
        StripedSequence::close(self)
    }
}

impl NumberSource for DailySequence {
    fn name(&self) -> &str {
        DailySequence::template(self)
    }
    async fn next(&self) -> Result<i64> {
        Ok(DailySequence::next(self).await?.number)
    }
    fn stats(&self) -> Stats {
        DailySequence::stats(self)
    }
    async fn close(&self) -> Result<CloseReport> {
        Ok(CloseReport::default())
    }
}

/// Which kind of source [`Dispenser::open_source`] opens, e.g. from a configuration file
/// (a setting such as `blocks:1000` picks the kind without a code change).
///
/// # Example
///
/// ```
/// use dispenser::source::SourceKind;
/// use dispenser::block::BlockOptions;
///
/// let kind: SourceKind = "blocks:1000".parse()?;
/// assert_eq!(kind, SourceKind::Blocks(BlockOptions::default().with_size(1000)));
/// let paris = dispenser::jiff::tz::TimeZone::get("Europe/Paris").expect("a known zone");
/// assert_eq!("daily:Europe/Paris".parse::<SourceKind>()?, SourceKind::Daily(paris));
/// # Ok::<(), dispenser::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SourceKind {
    /// A plain [`Sequence`]: `plain`.
    Plain,
    /// A [`BlockSequence`] with these options: `blocks` or `blocks:SIZE`.
    Blocks(BlockOptions),
    /// A [`StripedSequence`] over the existing stripes of the name: `striped`.
    Striped,
    /// The same with blocks per stripe: `striped-blocks` or `striped-blocks:SIZE`.
    StripedBlocks(BlockOptions),
    /// A [`DailySequence`] of the template in this time zone: `daily:ZONE` (an IANA name,
    /// checked when parsed).
    Daily(jiff::tz::TimeZone),
}

impl std::str::FromStr for SourceKind {
    type Err = Error;

    /// Parses `plain`, `blocks[:SIZE]`, `striped`, `striped-blocks[:SIZE]`, `daily:ZONE`.
    fn from_str(s: &str) -> Result<Self> {
        let bad = |why: String| Error::InvalidArgument {
            what: "source kind".to_owned(),
            reason: format!(
                "{s:?}: {why}; use plain, blocks[:SIZE], striped, striped-blocks[:SIZE] or daily:ZONE"
            ),
        };
        let (kind, arg) = match s.split_once(':') {
            Some((k, a)) => (k, Some(a)),
            None => (s, None),
        };
        let blocks = |arg: Option<&str>| -> Result<BlockOptions> {
            let options = match arg {
                None => BlockOptions::default(),
                Some(a) => BlockOptions::default().with_size(
                    a.parse()
                        .map_err(|_| bad(format!("block size {a:?} is not a whole number")))?,
                ),
            };
            options.validate()?;
            Ok(options)
        };
        match (kind, arg) {
            ("plain", None) => Ok(SourceKind::Plain),
            ("blocks", a) => Ok(SourceKind::Blocks(blocks(a)?)),
            ("striped", None) => Ok(SourceKind::Striped),
            ("striped-blocks", a) => Ok(SourceKind::StripedBlocks(blocks(a)?)),
            ("daily", Some(zone)) if !zone.is_empty() => jiff::tz::TimeZone::get(zone)
                .map(SourceKind::Daily)
                .map_err(|e| bad(format!("time zone {zone:?}: {e}"))),
            ("daily", _) => Err(bad("daily needs a time zone, e.g. daily:UTC".to_owned())),
            _ => Err(bad("unknown kind".to_owned())),
        }
    }
}

impl Dispenser {
    /// Opens the existing sequence `name` as the kind of source `kind` says, boxed so that
    /// the kind can come from configuration.
    ///
    /// # Errors
    ///
    /// Those of [`Dispenser::open`], [`Dispenser::open_blocks`], [`Dispenser::open_striped`]
    /// and [`Dispenser::open_daily`].
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: opening writes nothing.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use dispenser::source::NumberSource;
    ///
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let kind = std::env::var("ORDER_IDS").unwrap_or_else(|_| "blocks:1000".into());
    /// let ids = d.open_source("orders", &kind.parse()?).await?;
    /// let id = ids.next().await?;
    /// ids.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_source(&self, name: &str, kind: &SourceKind) -> Result<BoxNumberSource> {
        Ok(match kind {
            SourceKind::Plain => Box::new(self.open(name).await?),
            SourceKind::Blocks(o) => Box::new(self.open_blocks(name).options(*o).await?),
            SourceKind::Striped => Box::new(self.open_striped(name).await?),
            SourceKind::StripedBlocks(o) => {
                Box::new(self.open_striped(name).await?.with_blocks(*o)?)
            }
            SourceKind::Daily(zone) => Box::new(self.open_daily(name, zone.clone())?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_bad_ones_say_why() {
        assert_eq!("plain".parse::<SourceKind>().unwrap(), SourceKind::Plain);
        assert_eq!(
            "striped-blocks".parse::<SourceKind>().unwrap(),
            SourceKind::StripedBlocks(BlockOptions::default())
        );
        for (bad, needle) in [
            ("blocks:many", "not a whole number"),
            ("blocks:0", "size"),
            ("daily", "time zone"),
            ("ring", "unknown kind"),
            ("plain:1", "unknown kind"),
        ] {
            let err = bad.parse::<SourceKind>().unwrap_err().to_string();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }

    fn assert_object_safe(_: &dyn DynNumberSource) {}

    #[test]
    fn every_source_is_a_number_source() {
        fn is_source<T: NumberSource>() {}
        is_source::<Sequence>();
        is_source::<BlockSequence>();
        is_source::<StripedSequence>();
        is_source::<DailySequence>();
        is_source::<BoxNumberSource>();
        let _ = assert_object_safe;
    }
}

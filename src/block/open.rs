//! [`Dispenser::open_blocks`] as an awaited builder, [`OpenBlocks`]: the options are set on
//! it whole with [`OpenBlocks::options`], then it is `.await`ed.

use std::future::{Future, IntoFuture};
use std::pin::Pin;

use super::{BlockOptions, BlockSequence};
use crate::dispenser::Dispenser;
use crate::error::Result;

/// The future the `.await` runs (a local alias: `crate::action` sits above the stripes,
/// which use blocks).
type Action<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// The opening of a block client ([`Dispenser::open_blocks`]): with the default
/// [`BlockOptions`] unless [`OpenBlocks::options`]. `.await` it for the [`BlockSequence`].
///
/// Nothing is read before the `.await`; a builder dropped unawaited does nothing.
#[must_use = "opening a block client does nothing until it is awaited"]
#[derive(Debug)]
pub struct OpenBlocks<'a> {
    dispenser: &'a Dispenser,
    name: &'a str,
    options: BlockOptions,
}

impl<'a> OpenBlocks<'a> {
    /// The block size, prefetch and growth of the client (see [`BlockOptions`]), checked at
    /// the `.await` before anything is read. Defaults to [`BlockOptions::default`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::block::BlockOptions;
    /// let options = BlockOptions::default().with_size(1000);
    /// let blocks = d.open_blocks("orders").options(options).await?;
    /// # Ok(()) }
    /// ```
    pub fn options(mut self, options: BlockOptions) -> Self {
        self.options = options;
        self
    }
}

impl<'a> IntoFuture for OpenBlocks<'a> {
    type Output = Result<BlockSequence>;
    type IntoFuture = Action<'a, BlockSequence>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            self.options.validate()?;
            self.dispenser
                .open(self.name)
                .await?
                .into_blocks(self.options)
        })
    }
}

impl Dispenser {
    /// Opens an existing sequence as a new block client (see [`BlockSequence`]), with the
    /// default [`BlockOptions`] unless [`OpenBlocks::options`]. Every call makes a new,
    /// independent client; use a [`Pool`](super::Pool) for one per sequence and process.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for invalid options (nothing
    /// is read), plus those of [`Dispenser::open`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads the sequence; dropped before it completes, no client was
    /// made and nothing was reserved.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let blocks = d.open_blocks("orders").await?;
    /// let id = blocks.next().await?;
    /// # Ok(()) }
    /// ```
    pub fn open_blocks<'a>(&'a self, name: &'a str) -> OpenBlocks<'a> {
        OpenBlocks {
            dispenser: self,
            name,
            options: BlockOptions::default(),
        }
    }
}

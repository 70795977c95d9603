//! One block client per sequence and dispenser: [`Dispenser::shared_blocks`].

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use super::{BlockOptions, BlockSequence, Shared};
use crate::dispenser::Dispenser;
use crate::error::{Error, Result};
use crate::spec::validate_name;

impl Dispenser {
    /// The block client of sequence `name` for this dispenser and its clones: the first call
    /// opens it, later calls return the same client (see [`BlockSequence::same_as`]) as long
    /// as it is alive (some handle to it exists) and not closed. One block client per process
    /// wastes the fewest numbers: create one `Dispenser` per process and share it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (`block options`) when the live client was opened with
    /// different options (nothing is changed: close it first), plus those of
    /// [`Dispenser::open_blocks`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it completes, nothing was reserved, and no client was
    /// registered (or the one registered meanwhile by another caller stays).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::block::BlockOptions;
    /// let a = d.shared_blocks("orders", BlockOptions::default()).await?;
    /// let b = d.clone().shared_blocks("orders", BlockOptions::default()).await?;
    /// assert!(a.same_as(&b));
    /// # Ok(()) }
    /// ```
    pub async fn shared_blocks(&self, name: &str, options: BlockOptions) -> Result<BlockSequence> {
        validate_name(name)?;
        options.validate()?;
        if let Some(live) = self.registry().live(name, &options)? {
            return Ok(live);
        }
        let fresh = self.open_blocks(name, options).await?;
        self.registry().insert(name, fresh)
    }
}

/// The live shared block clients of a [`Dispenser`] and its clones, by sequence name (a
/// dispenser is one database and collection).
#[derive(Clone, Default)]
pub(crate) struct Registry(Arc<Mutex<HashMap<String, Weak<Shared>>>>);

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.lock().len();
        f.debug_struct("Registry").field("entries", &n).finish()
    }
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Weak<Shared>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live, open client of `name` in `map`, if any (dead or closed entries are removed).
    fn find(
        map: &mut HashMap<String, Weak<Shared>>,
        name: &str,
        options: &BlockOptions,
    ) -> Result<Option<BlockSequence>> {
        let Some(shared) = map.get(name).and_then(Weak::upgrade) else {
            map.remove(name);
            return Ok(None);
        };
        if shared.lock().closed {
            map.remove(name);
            return Ok(None);
        }
        if shared.options != *options {
            return Err(Error::invalid_argument(
                "block options",
                format!(
                    "sequence {name:?} already has a shared block client with {:?}, not {options:?}; \
                     close it first or ask with the same options",
                    shared.options
                ),
            ));
        }
        Ok(Some(BlockSequence { shared }))
    }

    fn live(&self, name: &str, options: &BlockOptions) -> Result<Option<BlockSequence>> {
        Self::find(&mut self.lock(), name, options)
    }

    /// Registers `fresh` unless another task registered a client meanwhile (then that one is
    /// returned and `fresh`, which holds no numbers, is dropped).
    fn insert(&self, name: &str, fresh: BlockSequence) -> Result<BlockSequence> {
        let mut map = self.lock();
        if let Some(live) = Self::find(&mut map, name, &fresh.shared.options)? {
            return Ok(live);
        }
        map.insert(name.to_owned(), Arc::downgrade(&fresh.shared));
        Ok(fresh)
    }
}

//! What a sequence reports and how it changes: its stored state ([`SequenceState`]), usage
//! forecasts ([`Usage`]), a handle's statistics ([`Stats`]), live changes ([`Alter`]), the
//! switch-over from another numbering ([`AdoptSource`], [`Dispenser::adopt`](crate::Dispenser::adopt)), the
//! iterator over a [`Run`](crate::Run), and the rules every sequence name follows.
//!
//! The handle that draws is [`Sequence`](crate::Sequence); the shape a sequence is created
//! with is [`Spec`](crate::Spec).

pub use crate::action::{
    AlterSequence, AlterStriped, CreateSequence, EnsureSequence, ResetSequence, ResetStriped,
};
pub use crate::adopt::{Adopt, AdoptKind, AdoptSource, Adopted, scope_key};
pub use crate::alter::Alter;
pub use crate::arith::RunIter;
pub use crate::document::SequenceState;
pub use crate::error::Altered;
pub use crate::listing::ListSequences;
pub use crate::spec::{MAX_NAME_BYTES, validate_name, validate_plain_name};
pub use crate::stats::{CasModeUsed, Stats};
pub use crate::usage::{KEPT_DAYS, Usage};

from ._dispenser import (
    BlockSequence as BlockSequence,
    DailySequence as DailySequence,
    Dispenser as Dispenser,
    Gapless as Gapless,
    Issued as Issued,
    Queue as Queue,
    Sequence as Sequence,
    StripedSequence as StripedSequence,
    __version__ as __version__,
)
from ._errors import (
    AlreadyExistsError as AlreadyExistsError,
    BusinessWriteError as BusinessWriteError,
    ConflictError as ConflictError,
    ContentionError as ContentionError,
    CorruptError as CorruptError,
    DispenserError as DispenserError,
    ExhaustedError as ExhaustedError,
    InvalidInputError as InvalidInputError,
    NotFoundError as NotFoundError,
    QueueRefusedError as QueueRefusedError,
    UnavailableError as UnavailableError,
)

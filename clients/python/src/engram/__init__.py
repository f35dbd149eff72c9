"""Engram's Python client: durable memory for LLM agents over Connect JSON.

    import engram
    c = engram.Client("http://127.0.0.1:8080", os.environ["ENGRAM_API_KEY"])
    res = c.remember("预算不超过8000元", user_id="u1", schema="travel")  # waits for the write
    rec = c.recall("预算是多少", user_id="u1", schema="travel")           # rec.context, rec.items

Standard library only; Python 3.9 or later.
"""

from .client import MAX_BATCH, Client, new_idempotency_key
from .errors import (
    Aborted,
    AlreadyExists,
    Canceled,
    DataLoss,
    DeadlineExceeded,
    EngramError,
    FailedPrecondition,
    FieldViolation,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)
from .types import *  # noqa: F401,F403
from .types import __all__ as _types_all

__version__ = "0.1.0"

__all__ = [
    "MAX_BATCH", "Client", "new_idempotency_key",
    "Aborted", "AlreadyExists", "Canceled", "DataLoss", "DeadlineExceeded", "EngramError",
    "FailedPrecondition", "FieldViolation", "Internal", "InvalidArgument", "NotFound", "OutOfRange",
    "PermissionDenied", "ResourceExhausted", "Unauthenticated", "Unavailable", "Unimplemented", "Unknown",
    *_types_all,
]

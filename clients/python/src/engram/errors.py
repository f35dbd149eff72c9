"""Errors as exceptions carrying the Connect code, the HTTP status and, for
INVALID_ARGUMENT, the fields the server named (``err.field``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Type

from . import _wire


@dataclass(frozen=True)
class FieldViolation:
    """One bad field of a request, as the server named it ("event.content")."""

    field: str
    description: str


class EngramError(Exception):
    """An error answered by the server (or met on the way to it).

    ``code`` is the Connect code ("invalid_argument", "not_found", …),
    ``message`` the server's text, ``violations`` the google.rpc.BadRequest field
    violations, ``retry_after`` the seconds the server asked the client to wait.
    """

    code = "unknown"

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        http_status: int = 0,
        violations: Optional[List[FieldViolation]] = None,
        retry_after: Optional[float] = None,
        details: Optional[List[Dict[str, Any]]] = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.http_status = http_status
        self.violations: List[FieldViolation] = list(violations or [])
        self.retry_after = retry_after
        self.details: List[Dict[str, Any]] = list(details or [])

    @property
    def field(self) -> Optional[str]:
        """The first field the server named, or None."""
        return self.violations[0].field if self.violations else None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class Canceled(EngramError):
    code = "canceled"


class Unknown(EngramError):
    code = "unknown"


class InvalidArgument(EngramError):
    """Bad input; ``field`` names the field ("k", "event.content")."""

    code = "invalid_argument"


class DeadlineExceeded(EngramError):
    """The call's timeout passed (on the client or on the server)."""

    code = "deadline_exceeded"


class NotFound(EngramError):
    code = "not_found"


class AlreadyExists(EngramError):
    """E.g. an idempotency key reused with other content."""

    code = "already_exists"


class PermissionDenied(EngramError):
    code = "permission_denied"


class ResourceExhausted(EngramError):
    """Over a rate limit (retried after its Retry-After), or a limit that waiting
    does not lift (no Retry-After; not retried)."""

    code = "resource_exhausted"


class FailedPrecondition(EngramError):
    """The object is in the wrong state (a step before confirmation, a decided review)."""

    code = "failed_precondition"


class Aborted(EngramError):
    code = "aborted"


class OutOfRange(EngramError):
    code = "out_of_range"


class Unimplemented(EngramError):
    code = "unimplemented"


class Internal(EngramError):
    code = "internal"


class Unavailable(EngramError):
    """Postgres, Temporal or the server cannot serve now; retried with backoff."""

    code = "unavailable"


class DataLoss(EngramError):
    code = "data_loss"


class Unauthenticated(EngramError):
    """No API key, or one the server does not know."""

    code = "unauthenticated"


_BY_CODE: Dict[str, Type[EngramError]] = {
    c.code: c
    for c in (
        Canceled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
        PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
        Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated,
    )
}

# The Connect protocol's codes for an HTTP status without a Connect error body
# (a proxy's answer, a plain-text 429).
_BY_HTTP_STATUS = {
    400: "internal", 401: "unauthenticated", 403: "permission_denied", 404: "unimplemented",
    429: "unavailable", 502: "unavailable", 503: "unavailable", 504: "unavailable",
}


def error_class(code: str) -> Type[EngramError]:
    return _BY_CODE.get(code, Unknown)


def from_response(status: int, body: bytes, retry_after: Optional[float]) -> EngramError:
    """The exception for a non-200 Connect unary response.

    Field violations come from each google.rpc.BadRequest detail's protobuf bytes
    ("value"), decoded by hand; the "debug" JSON beside them is optional in the
    protocol and only read when the bytes cannot be.
    """
    import json

    try:
        obj = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        obj = None
    if not isinstance(obj, dict) or not isinstance(obj.get("code"), str):
        code = _BY_HTTP_STATUS.get(status, "unknown")
        text = body.decode("utf-8", "replace").strip() or f"HTTP {status}"
        return error_class(code)(text, code=code, http_status=status, retry_after=retry_after)
    code = obj["code"]
    details = [d for d in obj.get("details") or [] if isinstance(d, dict)]
    violations: List[FieldViolation] = []
    for d in details:
        if d.get("type") != _wire.BAD_REQUEST:
            continue
        try:
            pairs = _wire.bad_request_violations(str(d.get("value", "")))
        except (ValueError, UnicodeDecodeError):
            debug = d.get("debug") or {}
            pairs = [(str(v.get("field", "")), str(v.get("description", ""))) for v in debug.get("fieldViolations") or []]
        violations.extend(FieldViolation(f, desc) for f, desc in pairs)
    return error_class(code)(
        str(obj.get("message", "")), code=code, http_status=status, violations=violations,
        retry_after=retry_after, details=details,
    )

"""Connect JSON encoding: proto3 JSON mapping without protobuf.

Field names are the proto fields' lowerCamelCase JSON names; int64 travels as a
string; Timestamps are RFC 3339 strings; Durations are "1.5s"; enums are their
names. Dataclasses in :mod:`engram.types` describe the messages; this module turns
them into JSON objects and back, driven by their type hints.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import re
import typing
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Tuple, Type, TypeVar

T = TypeVar("T")

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$"
)


def camel(name: str) -> str:
    """The proto3 JSON name of a snake_case field: valid_from -> validFrom."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def json_name(f: "dataclasses.Field[Any]") -> str:
    return str(f.metadata.get("json") or camel(f.name))


def parse_timestamp(s: str) -> datetime:
    """An RFC 3339 timestamp as an aware datetime (nanoseconds truncated to
    microseconds; datetime.fromisoformat before 3.11 reads neither "Z" nor nine
    fraction digits)."""
    m = _RFC3339.match(s)
    if not m:
        raise ValueError(f"{s!r} is not an RFC 3339 timestamp")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    frac = (m.group(7) or "")[:6].ljust(6, "0")
    zone = m.group(8)
    if zone in ("Z", "z"):
        tz = timezone.utc
    else:
        sign = -1 if zone[0] == "-" else 1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    return datetime(year, month, day, hour, minute, second, int(frac), tzinfo=tz)


def format_timestamp(t: datetime) -> str:
    """RFC 3339 in UTC; a naive datetime is taken as UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    t = t.astimezone(timezone.utc)
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        s += f".{t.microsecond:06d}"
    return s + "Z"


def seconds(d: "float | timedelta") -> float:
    return d.total_seconds() if isinstance(d, timedelta) else float(d)


def format_duration(d: "float | timedelta") -> str:
    """A protobuf Duration in JSON: "1.5s", "-0.000001s"."""
    if not isinstance(d, timedelta):
        d = timedelta(seconds=float(d))
    us = (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
    sign = "-" if us < 0 else ""
    whole, frac = divmod(abs(us), 1_000_000)
    return f"{sign}{whole}.{frac:06d}".rstrip("0").rstrip(".") + "s"


def parse_duration(s: str) -> timedelta:
    if not s.endswith("s"):
        raise ValueError(f"{s!r} is not a protobuf Duration")
    return timedelta(seconds=float(s[:-1]))


def encode(value: Any) -> Any:
    """A dataclass, enum, datetime, timedelta, list or dict as JSON values; fields
    left at their zero value are omitted, as protojson does."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: Dict[str, Any] = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if is_zero(v):
                continue
            out[json_name(f)] = encode(v)
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    return value


def is_zero(v: Any) -> bool:
    if isinstance(v, enum.Enum):
        return str(v.value).endswith("_UNSPECIFIED")
    if isinstance(v, (bool, int, float)):
        return not v
    return v is None or (isinstance(v, (str, list, tuple, dict)) and len(v) == 0)


_hints: Dict[type, Dict[str, Any]] = {}


def _type_hints(cls: type) -> Dict[str, Any]:
    h = _hints.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        _hints[cls] = h
    return h


def decode(cls: Type[T], obj: Any) -> T:
    """A JSON object as the dataclass cls; fields it does not name keep their
    defaults, names cls does not know (a newer server's fields) are ignored."""
    if not isinstance(obj, dict):
        raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(obj).__name__}")
    hints = _type_hints(cls)
    kwargs: Dict[str, Any] = {}
    for f in dataclasses.fields(typing.cast(Any, cls)):
        name = json_name(f)
        if name in obj:
            raw = obj[name]
        elif f.name in obj:  # the proto name, which protojson also accepts
            raw = obj[f.name]
        else:
            continue
        kwargs[f.name] = _value(hints[f.name], raw)
    return cls(**kwargs)


def _value(tp: Any, raw: Any) -> Any:
    if raw is None:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union:  # Optional[X]
        inner = [a for a in args if a is not type(None)]
        return _value(inner[0], raw) if len(inner) == 1 else raw
    if origin in (list, List):
        return [_value(args[0], v) for v in raw]
    if origin in (dict, Dict) or tp is Any:
        return raw
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            return decode(tp, raw)
        if issubclass(tp, enum.Enum):
            return tp(raw)
        if tp is datetime:
            return parse_timestamp(raw)
        if tp is timedelta:
            return parse_duration(raw)
        if tp is bool:
            return bool(raw)
        if tp is int:
            return int(raw)  # int64 arrives as a string
        if tp is float:
            return float(raw)  # also "NaN", "Infinity"
        if tp is str:
            return str(raw)
    return raw


# google.rpc.BadRequest, read from its protobuf bytes: the Connect error detail's
# "value" is the only part of it the protocol defines ("debug" is optional and
# meant for people), so the client decodes the few bytes it needs by hand.
#
#   message BadRequest { repeated FieldViolation field_violations = 1; }
#   message FieldViolation { string field = 1; string description = 2; ... }

BAD_REQUEST = "google.rpc.BadRequest"


def _varint(b: bytes, i: int) -> Tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        if not c & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(b: bytes) -> List[Tuple[int, Any]]:
    """(field number, value) of one message: varints as int, length-delimited as
    bytes; fixed-width values are skipped over."""
    out: List[Tuple[int, Any]] = []
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
            out.append((num, v))
        elif wire == 2:
            n, i = _varint(b, i)
            if i + n > len(b):
                raise ValueError("truncated field")
            out.append((num, b[i : i + n]))
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wire} is not supported")
    return out


def bad_request_violations(value_b64: str) -> List[Tuple[str, str]]:
    """(field, description) of each violation in a base64 BadRequest."""
    std = value_b64.replace("-", "+").replace("_", "/")  # either alphabet, padded or not
    data = base64.b64decode(std + "=" * (-len(std) % 4))
    out = []
    for num, v in _fields(data):
        if num != 1 or not isinstance(v, bytes):
            continue
        field = description = ""
        for n, x in _fields(v):
            if n == 1 and isinstance(x, bytes):
                field = x.decode("utf-8")
            elif n == 2 and isinstance(x, bytes):
                description = x.decode("utf-8")
        out.append((field, description))
    return out

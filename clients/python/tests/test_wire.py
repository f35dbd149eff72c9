"""The JSON mapping and error decoding, without a server."""

from __future__ import annotations

import base64
import unittest
from datetime import datetime, timedelta, timezone

import engram
from engram import _wire, errors
from engram.types import Fact, FactStatus, Scope, TaskTransition, TaskState


def _field(num: int, data: bytes) -> bytes:
    assert len(data) < 128
    return bytes([num << 3 | 2, len(data)]) + data


class WireTest(unittest.TestCase):
    def test_timestamps(self) -> None:
        t = _wire.parse_timestamp("2026-12-02T05:53:04.370853073Z")
        self.assertEqual(t, datetime(2026, 12, 2, 5, 53, 4, 370853, tzinfo=timezone.utc))
        self.assertEqual(_wire.parse_timestamp("2026-01-02T10:00:00+08:00"), datetime(2026, 1, 2, 2, 0, tzinfo=timezone.utc))
        self.assertEqual(_wire.parse_timestamp("2026-01-02T10:00:00.5Z").microsecond, 500000)
        self.assertEqual(_wire.format_timestamp(datetime(2026, 1, 2, 10, 0)), "2026-01-02T10:00:00Z", "naive is UTC")
        self.assertEqual(_wire.format_timestamp(datetime(2026, 1, 2, 18, 0, 0, 1500, tzinfo=timezone(timedelta(hours=8)))),
                         "2026-01-02T10:00:00.001500Z")
        with self.assertRaises(ValueError):
            _wire.parse_timestamp("2026-01-02 10:00")

    def test_durations(self) -> None:
        self.assertEqual(_wire.format_duration(1.5), "1.5s")
        self.assertEqual(_wire.format_duration(timedelta(minutes=5)), "300s")
        self.assertEqual(_wire.format_duration(timedelta(microseconds=-1)), "-0.000001s")
        self.assertEqual(_wire.parse_duration("3600s"), timedelta(hours=1))

    def test_decode_ignores_unknown_fields_and_keeps_unknown_enums(self) -> None:
        f = _wire.decode(Fact, {"id": "f1", "revision": 2, "status": "FACT_STATUS_NEW_ONE", "scope": {"scope": 3},
                                "validFrom": "2026-01-02T10:00:00Z", "fieldFromTheFuture": {"x": 1}, "memory_key": "k"})
        self.assertEqual((f.id, f.revision, f.memory_key), ("f1", 2, "k"))
        self.assertEqual(f.status.value, "FACT_STATUS_NEW_ONE")
        self.assertIsInstance(f.status, FactStatus)
        self.assertEqual(f.scope.scope.value if f.scope else None, "3")
        self.assertEqual(_wire.decode(TaskTransition, {"seq": "42", "from": "TASK_STATE_CREATED"}).seq, 42, "int64 as a string")
        self.assertEqual(_wire.decode(TaskTransition, {"from": "TASK_STATE_CREATED"}).from_state, TaskState.CREATED)

    def test_encode_leaves_zero_values_out(self) -> None:
        ev = engram.Event(content="hi", occurred_at=datetime(2026, 1, 2, tzinfo=timezone.utc), payload={"a": [1]})
        self.assertEqual(_wire.encode(ev), {"content": "hi", "occurredAt": "2026-01-02T00:00:00Z", "payload": {"a": [1]}})
        self.assertEqual(_wire.encode(engram.ScopeRef(scope=Scope.UNSPECIFIED, user_id="u1")), {"userId": "u1"})


class ErrorTest(unittest.TestCase):
    def test_bad_request_with_two_violations(self) -> None:
        v1 = _field(1, b"event.content") + _field(2, b"is empty")
        v2 = _field(1, b"k") + _field(2, "超出".encode())
        value = base64.b64encode(_field(1, v1) + _field(1, v2)).decode().rstrip("=")
        body = ('{"code":"invalid_argument","message":"event.content: is empty","details":'
                '[{"type":"google.rpc.BadRequest","value":"%s"}]}' % value).encode()
        e = errors.from_response(400, body, None)
        self.assertIsInstance(e, engram.InvalidArgument)
        self.assertEqual(e.field, "event.content")
        self.assertEqual(e.violations, [errors.FieldViolation("event.content", "is empty"), errors.FieldViolation("k", "超出")])
        self.assertEqual(str(e), "invalid_argument: event.content: is empty")

    def test_undecodable_detail_falls_back_to_debug(self) -> None:
        body = (b'{"code":"invalid_argument","message":"k: bad","details":[{"type":"google.rpc.BadRequest",'
                b'"value":"/w","debug":{"fieldViolations":[{"field":"k","description":"bad"}]}}]}')
        self.assertEqual(errors.from_response(400, body, None).field, "k")

    def test_a_response_without_a_connect_body(self) -> None:
        e = errors.from_response(429, b"slow down, retry in 2s\n", 2.0)
        self.assertIsInstance(e, engram.Unavailable, "the Connect protocol's code for HTTP 429")
        self.assertEqual((e.retry_after, e.message, e.http_status), (2.0, "slow down, retry in 2s", 429))
        self.assertIsInstance(errors.from_response(503, b"", None), engram.Unavailable)
        self.assertIsInstance(errors.from_response(418, b"", None), engram.Unknown)
        self.assertIsInstance(errors.from_response(404, b'{"code":"not_found","message":"no fact"}', None), engram.NotFound)


if __name__ == "__main__":
    unittest.main()

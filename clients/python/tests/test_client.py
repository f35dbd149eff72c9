"""The Python client against a real `engram serve` (tests/python starts it, with
Postgres and Temporal, and installs this package into a fresh virtual environment).

Environment: ENGRAM_URL; ENGRAM_API_KEY (an agent key of tenant A bound to user u1,
allowed u2, u3 and u-erase); ENGRAM_REVIEWER_KEY and ENGRAM_ADMIN_KEY (tenant A);
ENGRAM_OTHER_TENANT_KEY (an agent key of tenant B bound to u1); ENGRAM_RECALL_OUT
(a file this suite writes one recall to, which the Go test repeats with the Go
client). Faults (a lost answer, 429 with Retry-After, a stall) come from a proxy in
front of the real server; the server itself is never faked.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import threading
import time
import unittest
import urllib.parse
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

import engram
from engram import Decision, Event, FactStatus, Scope, TaskState, TaskStep, WriteStatus

URL = os.environ.get("ENGRAM_URL", "")
AGENT = os.environ.get("ENGRAM_API_KEY", "")
REVIEWER = os.environ.get("ENGRAM_REVIEWER_KEY", "")
ADMIN = os.environ.get("ENGRAM_ADMIN_KEY", "")
OTHER = os.environ.get("ENGRAM_OTHER_TENANT_KEY", "")
RECALL_OUT = os.environ.get("ENGRAM_RECALL_OUT", "")

if not (URL and AGENT and REVIEWER and ADMIN and OTHER):
    raise RuntimeError("set ENGRAM_URL, ENGRAM_API_KEY, ENGRAM_REVIEWER_KEY, ENGRAM_ADMIN_KEY and "
                       "ENGRAM_OTHER_TENANT_KEY (go test ./tests/python does)")


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Proxy:
    """An HTTP proxy in front of the server that plays a script per RPC method:
    "lose" forwards the call and answers 503 instead of the server's answer,
    "unavailable" answers 503 without forwarding, "slow_down" answers 429 with
    Retry-After: 1, "exhausted" answers 429 without Retry-After, "stall" waits 3 s
    before forwarding. Unscripted calls pass."""

    def __init__(self, upstream: str) -> None:
        self.script: Dict[str, List[str]] = {}
        self.seen: Dict[str, List[Dict[str, Any]]] = {}
        self.lost: List[Dict[str, Any]] = []
        up = urllib.parse.urlsplit(upstream)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                method = self.path.rsplit("/", 1)[-1]
                proxy.seen.setdefault(method, []).append(json.loads(body or b"{}"))
                plan = proxy.script.get(method) or []
                act = plan.pop(0) if plan else "pass"
                if act == "unavailable":
                    return self.answer(503, {"code": "unavailable", "message": "proxy: try again"})
                if act == "slow_down":
                    return self.answer(429, {"code": "resource_exhausted", "message": "proxy: slow down"}, {"Retry-After": "1"})
                if act == "exhausted":
                    return self.answer(429, {"code": "resource_exhausted", "message": "proxy: a limit no wait lifts"})
                if act == "stall":
                    time.sleep(3)
                conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                conn.request("POST", self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                if act == "lose":
                    proxy.lost.append(json.loads(data))
                    return self.answer(503, {"code": "unavailable", "message": "proxy: the answer was lost"})
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def answer(self, status: int, obj: Dict[str, Any], extra: Optional[Dict[str, str]] = None) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def wait_until(cond: Callable[[], bool], seconds: float = 60.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.5)
    return cond()


class MemoryTest(unittest.TestCase):
    agent: engram.Client
    budget: engram.IngestResult
    started: datetime

    @classmethod
    def setUpClass(cls) -> None:
        cls.agent = engram.Client(URL, AGENT)
        cls.started = datetime.now(timezone.utc)
        time.sleep(0.05)
        cls.budget = cls.agent.remember("预算不超过8000元", schema="travel")

    def test_remember_waits_and_get_fact(self) -> None:
        r = self.budget
        self.assertEqual(r.status, WriteStatus.COMMITTED, r.reason)
        self.assertTrue(r.idempotency_key.startswith("py-"), "a key was generated")
        self.assertEqual(len(r.fact_ids), 1)
        f = self.agent.get_fact(r.fact_ids[0])
        self.assertEqual(f.object, "8000 CNY")
        self.assertEqual(f.status, FactStatus.ACTIVE)
        self.assertEqual(f.scope.scope if f.scope else None, Scope.USER)
        self.assertIsInstance(f.valid_from, datetime)
        self.assertIsNotNone(f.valid_from.tzinfo if f.valid_from else None)
        self.assertGreaterEqual(f.recorded_at or datetime.min.replace(tzinfo=timezone.utc), self.started)
        self.assertIn(r.evidence_id, f.evidence_ids)

    def test_list_facts_and_history(self) -> None:
        facts = self.agent.list_facts(user_id="u1", predicate="budget", statuses=[FactStatus.ACTIVE], scope=Scope.USER)
        self.assertEqual([f.id for f in facts], self.budget.fact_ids)
        history = self.agent.fact_history(facts[0].memory_key)
        self.assertEqual([h.revision for h in history], [1])
        self.assertEqual(self.agent.list_facts(user_id="u1", predicate="no_such_predicate"), [])

    def test_recall_context_items_as_of_scopes_task_and_session(self) -> None:
        trip = uid("trip")
        r = self.agent.remember("这次旅行预算调整到10000元", schema="travel", task_id=trip)
        self.assertEqual(r.status, WriteStatus.COMMITTED, r.reason)
        rec = self.agent.recall("这次旅行的预算是多少", schema="travel", task_id=trip, k=5, purpose="test")
        self.assertIn("10000", rec.context)
        self.assertLessEqual(len(rec.items), 5)
        self.assertEqual(rec.items[0].object, "10000 CNY", "this trip's budget leads")
        self.assertEqual(rec.items[0].scope.task_id if rec.items[0].scope else "", trip)
        self.assertGreater(rec.tokens, 0)
        self.assertIsInstance(rec.as_of, datetime)
        self.assertTrue(any(s.title == "constraints" for s in rec.sections))
        self.assertTrue(all(i.retrievers and i.why for i in rec.items))

        # Only USER scope: the trip's budget is left out, the user's stays.
        user_only = self.agent.recall("这次旅行的预算是多少", schema="travel", task_id=trip, scopes=[Scope.USER])
        objects = [i.object for i in user_only.items if i.kind == "fact"]
        self.assertIn("8000 CNY", objects)
        self.assertNotIn("10000 CNY", objects)

        # Before anything was written, nothing was known.
        before = self.agent.recall("预算", schema="travel", as_of=self.started - timedelta(seconds=1))
        self.assertEqual([i for i in before.items if i.kind == "fact"], [])
        self.assertEqual(before.as_of, self.started - timedelta(seconds=1))

        # A session's recent turns come back with its session.
        session = uid("s")
        self.agent.remember("我的订单12345没收到", schema="customer_service", session_id=session)
        srec = self.agent.recall("我那个没到的订单怎么样了", schema="customer_service", session_id=session)
        self.assertIn("12345", srec.context)

    def test_bad_argument_names_the_field(self) -> None:
        with self.assertRaises(engram.InvalidArgument) as cm:
            self.agent.recall("x", k=1000)
        self.assertEqual(cm.exception.field, "k")
        self.assertEqual(cm.exception.code, "invalid_argument")
        self.assertEqual(cm.exception.http_status, 400)
        self.assertIn("1000", cm.exception.violations[0].description)
        with self.assertRaises(engram.InvalidArgument) as cm:
            self.agent.ingest(Event(content="", schema="travel"))
        self.assertEqual(cm.exception.field, "event.content")
        with self.assertRaises(engram.PermissionDenied):
            self.agent.remember("hi", user_id="someone-else")

    def test_missing_or_wrong_key_is_refused(self) -> None:
        for key in ("", "egk_wrong"):
            with self.assertRaises(engram.Unauthenticated) as cm:
                engram.Client(URL, key).recall("预算", user_id="u1")
            self.assertEqual(cm.exception.http_status, 401)

    def test_another_tenants_fact_is_not_found(self) -> None:
        other = engram.Client(URL, OTHER)
        fact_id = self.budget.fact_ids[0]
        with self.assertRaises(engram.NotFound):
            other.get_fact(fact_id)
        with self.assertRaises(engram.NotFound):
            other.fact_history(self.agent.get_fact(fact_id).memory_key)
        self.assertEqual(other.list_facts(), [])
        self.assertNotIn("8000", other.recall("预算", schema="travel").context)

    def test_retried_ingest_writes_once(self) -> None:
        proxy = Proxy(URL)
        self.addCleanup(proxy.close)
        c = engram.Client(proxy.url, AGENT, backoff=0.05)
        proxy.script["Ingest"] = ["lose"]
        ev = Event(content="我以后尽量都坐直飞", schema="travel")
        r = c.ingest(ev, wait=True)
        self.assertEqual(r.status, WriteStatus.COMMITTED, r.reason)
        sent = proxy.seen["Ingest"]
        self.assertEqual(len(sent), 2, "the lost answer was retried")
        self.assertEqual(sent[0]["event"]["idempotencyKey"], sent[1]["event"]["idempotencyKey"])
        self.assertEqual(ev.idempotency_key, r.idempotency_key)
        self.assertEqual(proxy.lost[0]["results"][0]["eventId"], r.event_id, "the retry is the same event")
        facts = self.agent.list_facts(user_id="u1", predicate="flight_type")
        self.assertEqual(len(facts), 1, [f.object for f in facts])
        self.assertEqual(len(self.agent.fact_history(facts[0].memory_key)), 1)

        # Sending it again is the same write; the key with other content is refused.
        again = self.agent.ingest(ev, wait=True)
        self.assertEqual(again.event_id, r.event_id)
        with self.assertRaises(engram.AlreadyExists):
            self.agent.ingest(Event(content="我以后尽量都坐转机", schema="travel", idempotency_key=ev.idempotency_key))

    def test_retry_after_is_honoured_and_unsafe_calls_are_not_retried(self) -> None:
        proxy = Proxy(URL)
        self.addCleanup(proxy.close)
        c = engram.Client(proxy.url, AGENT, backoff=0.05)
        proxy.script["Recall"] = ["slow_down"]
        t0 = time.monotonic()
        rec = c.recall("预算", schema="travel")
        self.assertGreaterEqual(time.monotonic() - t0, 1.0, "waited the Retry-After second")
        self.assertIn("8000", rec.context)
        self.assertEqual(len(proxy.seen["Recall"]), 2)

        proxy.script["StartTask"] = ["unavailable"]
        with self.assertRaises(engram.Unavailable):
            c.start_task(uid("task"))
        self.assertEqual(len(proxy.seen["StartTask"]), 1, "a start is not repeated blindly")

        proxy.script["GetFact"] = ["unavailable"] * 5
        with self.assertRaises(engram.Unavailable):
            c.get_fact(self.budget.fact_ids[0])
        self.assertEqual(len(proxy.seen["GetFact"]), 5, "five attempts, then the error")

    def test_what_cannot_succeed_later_is_not_retried(self) -> None:
        proxy = Proxy(URL)
        self.addCleanup(proxy.close)
        c = engram.Client(proxy.url, AGENT, backoff=0.05)
        # Over the server's 1 MiB request limit (issue 50: answered 429 and retried
        # five times): the real server's 413 invalid_argument, sent once.
        t0 = time.monotonic()
        with self.assertRaises(engram.InvalidArgument) as cm:
            c.ingest(Event(content="预" * 400_000, schema="travel"))
        self.assertLess(time.monotonic() - t0, 1.0, "no backoff")
        self.assertEqual(cm.exception.http_status, 413)
        self.assertEqual(cm.exception.field, "body")
        self.assertIn("1048576 bytes (1 MiB)", str(cm.exception))
        self.assertIn("64 KiB", str(cm.exception))
        self.assertEqual(len(proxy.seen["Ingest"]), 1, "an oversize request is sent once")

        # RESOURCE_EXHAUSTED without Retry-After is not the rate limiter: not retried.
        proxy.script["Recall"] = ["exhausted"]
        with self.assertRaises(engram.ResourceExhausted):
            c.recall("预算", schema="travel")
        self.assertEqual(len(proxy.seen["Recall"]), 1)

    def test_timeout_per_call(self) -> None:
        proxy = Proxy(URL)
        self.addCleanup(proxy.close)
        c = engram.Client(proxy.url, AGENT)
        proxy.script["Recall"] = ["stall"]
        t0 = time.monotonic()
        with self.assertRaises(engram.DeadlineExceeded):
            c.recall("预算", schema="travel", timeout=0.5)
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertIn("8000", c.recall("预算", schema="travel", timeout=10).context)

    def test_batch_with_progress(self) -> None:
        session = uid("hist")
        turns = ["我喜欢靠过道的座位", "周末想去杭州", "下个月出差去上海", "好的", "谢谢"]
        events = [Event(content=t, user_id="u3", schema="travel", session_id=session,
                        occurred_at=datetime(2026, 1, 2, 10, i, tzinfo=timezone.utc)) for i, t in enumerate(turns)]
        seen: List[Tuple[int, int]] = []
        results = self.agent.ingest_batch(events, wait=True, batch_size=2, progress=lambda d, n: seen.append((d, n)))
        self.assertEqual(seen, [(2, 5), (4, 5), (5, 5)])
        self.assertEqual(len(results), 5)
        self.assertEqual([r.idempotency_key for r in results], [e.idempotency_key for e in events])
        for r in results:
            self.assertIn(r.status, (WriteStatus.COMMITTED, WriteStatus.NO_MEMORY), r.reason)
        seat = self.agent.list_facts(user_id="u3", predicate="seat")
        self.assertEqual([f.object for f in seat], ["aisle"])
        self.assertEqual(seat[0].valid_from, events[0].occurred_at, "the event's own time")
        again = self.agent.ingest_batch(events, wait=True, batch_size=5)
        self.assertEqual([r.event_id for r in again], [r.event_id for r in results], "a second import writes nothing new")
        with self.assertRaises(ValueError):
            self.agent.ingest_batch(events, batch_size=501)


class ReviewTest(unittest.TestCase):
    def test_pending_decide_then_invalidate(self) -> None:
        agent, reviewer = engram.Client(URL, AGENT), engram.Client(URL, REVIEWER)
        r = agent.remember("我上次坐了靠窗的位置，挺好", schema="travel")
        self.assertEqual(r.status, WriteStatus.PENDING_REVIEW, r.reason)
        self.assertEqual(len(r.pending), 1)
        pending = reviewer.list_pending("u1")
        self.assertIn(r.pending[0].candidate_id, [p.candidate_id for p in pending])
        p = next(p for p in pending if p.candidate_id == r.pending[0].candidate_id)
        self.assertEqual(p.object, "window")
        self.assertIsInstance(p.created_at, datetime)
        d = reviewer.decide(p.candidate_id, Decision.CONFIRM, note="seen it", wait=True)
        self.assertTrue(d.committed, d.reason)
        f = agent.get_fact(d.fact_id)
        self.assertEqual((f.object, f.status), ("window", FactStatus.ACTIVE))
        with self.assertRaises(engram.FailedPrecondition) as decided:
            reviewer.decide(p.candidate_id, Decision.REJECT)
        self.assertIn("not awaiting review", decided.exception.message)

        closed = reviewer.invalidate_fact(f.id, "the user changed their mind")
        self.assertEqual(closed.status, FactStatus.INVALIDATED)
        self.assertIsNotNone(closed.valid_until)
        with self.assertRaises(engram.InvalidArgument) as cm:
            reviewer.invalidate_fact(f.id, "")
        self.assertEqual(cm.exception.field, "reason")


class ForgetTest(unittest.TestCase):
    def test_forget_erases_the_user(self) -> None:
        agent, admin = engram.Client(URL, AGENT), engram.Client(URL, ADMIN)
        r = agent.remember("预算不超过3000元", user_id="u-erase", schema="travel")
        self.assertEqual(r.status, WriteStatus.COMMITTED, r.reason)
        self.assertEqual(len(admin.list_facts(user_id="u-erase")), 1)
        wf = admin.forget("u-erase", "the user asked")
        self.assertTrue(wf.startswith("erase/"), wf)
        self.assertTrue(wait_until(lambda: admin.list_facts(user_id="u-erase") == []), "erased within a minute")
        with self.assertRaises(engram.PermissionDenied):
            agent.erase("u1")


class TaskTest(unittest.TestCase):
    def test_start_plan_confirm_step_get_complete_cancel(self) -> None:
        agent = engram.Client(URL, AGENT)
        tid = uid("py-trip")
        t = agent.start_task(tid, confirmation_timeout=timedelta(hours=1))
        self.assertEqual((t.task_id, t.state, t.user_id), (tid, TaskState.CREATED, "u1"))
        with self.assertRaises(engram.AlreadyExists):
            agent.start_task(tid)
        t = agent.plan_task(tid, "Lisbon", [TaskStep("hotel", "book_hotel", {"city": "Lisbon"}), TaskStep("car", "rent_car")])
        self.assertEqual((t.state, t.goal, t.todo), (TaskState.PLANNING, "Lisbon", ["hotel", "car"]))
        t = agent.request_confirmation(tid, "books a hotel")
        self.assertEqual(t.state, TaskState.WAITING_CONFIRMATION)
        self.assertIsInstance(t.confirm_deadline, datetime)
        with self.assertRaises(engram.FailedPrecondition):
            agent.run_step(tid)
        t = agent.confirm_task(tid, "ok")
        self.assertEqual(t.state, TaskState.EXECUTING)
        t = agent.run_step(tid)
        self.assertEqual(t.done, ["hotel"])
        self.assertEqual(t.steps[0].status, "DONE")
        self.assertEqual(t.steps[0].sends, 1)
        t = agent.run_step(tid, "car")
        got = agent.get_task(tid)
        self.assertEqual(got.done, ["hotel", "car"])
        self.assertIsInstance(got.seq, int)
        self.assertGreater(got.seq, 0)
        self.assertTrue(got.transitions and all(isinstance(x.at, datetime) for x in got.transitions))
        self.assertEqual(got.transitions[-1].to_state, TaskState.EXECUTING)
        rec = agent.recall("酒店", task_id=tid)
        self.assertEqual(rec.task.state if rec.task else None, TaskState.EXECUTING)
        self.assertEqual(agent.complete_task(tid, "booked").state, TaskState.COMPLETED)

        other = uid("py-trip")
        agent.start_task(other)
        self.assertEqual(agent.cancel_task(other, "changed plans").state, TaskState.CANCELLED)
        with self.assertRaises(engram.NotFound):
            engram.Client(URL, OTHER).get_task(tid)


class RecallForGoTest(unittest.TestCase):
    """One recall the Go test repeats with the Go client (same question, same as_of)."""

    def test_recall_for_go(self) -> None:
        agent = engram.Client(URL, AGENT)
        for text in ("预算不超过9000元", "我以后尽量都坐直飞", "我喜欢靠过道的座位"):
            self.assertEqual(agent.remember(text, user_id="u2", schema="travel").status, WriteStatus.COMMITTED)
        as_of = datetime.now(timezone.utc)
        q: Dict[str, Any] = {"user_id": "u2", "query": "预算和座位偏好", "schema": "travel", "k": 8}
        rec = agent.recall("预算和座位偏好", user_id="u2", schema="travel", k=8, as_of=as_of)
        self.assertIn("9000", rec.context)
        if RECALL_OUT:
            with open(RECALL_OUT, "w", encoding="utf-8") as f:
                json.dump({**q, "as_of": engram._wire.format_timestamp(as_of), "context": rec.context, "tokens": rec.tokens,
                           "ids": [i.id for i in rec.items], "scores": [i.score for i in rec.items]}, f, ensure_ascii=False)


if __name__ == "__main__":
    unittest.main()

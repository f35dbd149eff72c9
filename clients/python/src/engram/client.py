"""The Python client of Engram's API: Connect's JSON protocol over the standard
library's HTTP, with the Go client's calls (client/client.go)."""

from __future__ import annotations

import http.client
import json
import random
import socket
import ssl
import time
import urllib.parse
import uuid
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Type, TypeVar, Union

from . import _wire
from . import errors
from .types import (
    DecideResponse,
    Decision,
    Event,
    Fact,
    FactStatus,
    IngestResponse,
    IngestResult,
    PendingReview,
    RecallResponse,
    Scope,
    Task,
    TaskStep,
)

T = TypeVar("T")
Seconds = Union[float, timedelta]

_MEMORY = "engram.v1.MemoryService"
_REVIEW = "engram.v1.ReviewService"
_TASK = "engram.v1.TaskService"

#: The most events the server takes in one Ingest (IngestRequest.events).
MAX_BATCH = 500


def new_idempotency_key() -> str:
    """A fresh idempotency key."""
    return "py-" + str(uuid.uuid4())


class Client:
    """Calls one Engram server with an API key. Safe to share between threads
    (every call opens its own connection).

    ``timeout`` is the default per-call timeout in seconds (every method also takes
    ``timeout=``), covering all attempts of a call. Calls that are safe to repeat
    (reads, Ingest with its idempotency key, InvalidateFact, Forget) are retried
    up to ``attempts`` times while the server answers UNAVAILABLE, with backoff
    from ``backoff`` seconds doubling to ``max_backoff``; every call is retried
    after the server's Retry-After while its rate limiter refuses it
    (RESOURCE_EXHAUSTED with Retry-After, answered before the server does
    anything). Nothing else is retried: bad input, an oversize request included,
    fails at once.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: Seconds = 60.0,
        attempts: int = 5,
        backoff: Seconds = 0.2,
        max_backoff: Seconds = 5.0,
        user_agent: str = "engram-python",
    ) -> None:
        u = urllib.parse.urlsplit(base_url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url: {base_url!r} is not an http:// or https:// URL")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path
        self._key = api_key
        self._timeout = _wire.seconds(timeout)
        self._attempts = max(1, attempts)
        self._backoff = _wire.seconds(backoff)
        self._max_backoff = _wire.seconds(max_backoff)
        self._user_agent = user_agent
        self._ssl = ssl.create_default_context() if self._https else None

    # -- transport -----------------------------------------------------------

    def _post(self, path: str, body: bytes, remaining: float) -> Dict[str, Any]:
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=remaining, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=remaining)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Connect-Protocol-Version": "1",
            "Connect-Timeout-Ms": str(max(1, int(remaining * 1000))),
            "User-Agent": self._user_agent,
        }
        if self._key:
            headers["Authorization"] = "Bearer " + self._key
        try:
            try:
                conn.request("POST", self._prefix + path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except socket.timeout as e:
                raise errors.DeadlineExceeded(f"no answer from the server within {remaining:.3g}s") from e
            except (OSError, http.client.HTTPException) as e:
                raise errors.Unavailable(f"cannot reach the server: {e}") from e
        finally:
            conn.close()
        if resp.status != 200:
            raise errors.from_response(resp.status, data, _retry_after(resp.getheader("Retry-After")))
        try:
            out = json.loads(data.decode("utf-8"))
        except ValueError as e:
            raise errors.Internal(f"the server answered with invalid JSON: {e}", http_status=resp.status) from e
        if not isinstance(out, dict):
            raise errors.Internal("the server answered with a JSON value that is not an object")
        return out

    def _call(self, service: str, method: str, req: Dict[str, Any], *, safe: bool, timeout: Optional[Seconds]) -> Dict[str, Any]:
        """One unary call with retries, within the call's timeout."""
        limit = self._timeout if timeout is None else _wire.seconds(timeout)
        deadline = time.monotonic() + limit
        body = json.dumps(req, ensure_ascii=False).encode("utf-8")
        wait = self._backoff
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.DeadlineExceeded(f"{method}: the call's timeout ({limit:.3g}s) passed")
            try:
                return self._post(f"/{service}/{method}", body, remaining)
            except errors.EngramError as e:
                rate_limited = isinstance(e, errors.ResourceExhausted) and e.retry_after is not None
                retryable = rate_limited or (safe and isinstance(e, errors.Unavailable))
                if not retryable or attempt >= self._attempts:
                    raise
                pause = e.retry_after if e.retry_after is not None else wait / 2 + random.uniform(0, wait / 2)
                if time.monotonic() + pause >= deadline:
                    raise
                time.sleep(pause)
                wait = min(wait * 2, self._max_backoff)

    def _msg(self, cls: Type[T], service: str, method: str, req: Dict[str, Any], *, safe: bool, timeout: Optional[Seconds]) -> T:
        return _wire.decode(cls, self._call(service, method, req, safe=safe, timeout=timeout))

    # -- writing memory --------------------------------------------------------

    def ingest(
        self,
        event: Event,
        *,
        wait: bool = False,
        wait_timeout: Optional[Seconds] = None,
        timeout: Optional[Seconds] = None,
    ) -> IngestResult:
        """Sends one event. An empty ``event.idempotency_key`` is replaced by a
        generated one (set on ``event``) before the first attempt, so retries are the
        same write. With ``wait``, returns once the write committed or waits for
        review (or ``wait_timeout`` passed: status RUNNING)."""
        if not event.idempotency_key:
            event.idempotency_key = new_idempotency_key()
        req = _ingest_request(wait, wait_timeout)
        req["event"] = _wire.encode(event)
        res = self._msg(IngestResponse, _MEMORY, "Ingest", req, safe=True, timeout=_wait_timeout(self, timeout, wait, wait_timeout))
        if len(res.results) != 1:
            raise errors.Internal("Ingest answered without a result")
        return res.results[0]

    def remember(
        self,
        content: str,
        *,
        user_id: str = "",
        schema: str = "",
        session_id: str = "",
        task_id: str = "",
        idempotency_key: str = "",
        wait: bool = True,
        wait_timeout: Optional[Seconds] = None,
        timeout: Optional[Seconds] = None,
        **event_fields: Any,
    ) -> IngestResult:
        """Ingests one message and, by default, waits for its write: a shorthand for
        ``ingest(Event(content=..., ...), wait=True)``. Further Event fields
        (actor_type, occurred_at, …) are keyword arguments."""
        ev = Event(content=content, user_id=user_id, schema=schema, session_id=session_id, task_id=task_id,
                   idempotency_key=idempotency_key, **event_fields)
        return self.ingest(ev, wait=wait, wait_timeout=wait_timeout, timeout=timeout)

    def ingest_batch(
        self,
        events: Iterable[Event],
        *,
        wait: bool = False,
        wait_timeout: Optional[Seconds] = None,
        batch_size: int = 100,
        batch_key: str = "",
        progress: Optional[Callable[[int, int], None]] = None,
        timeout: Optional[Seconds] = None,
    ) -> List[IngestResult]:
        """Sends a history in batches of ``batch_size`` events (at most 500), one
        batch workflow each, and returns one result per event in order. Missing keys
        are generated first, so sending the same list again writes nothing twice.
        ``progress(done, total)`` is called after each batch; ``batch_key``, when
        set, keys batch i as ``f"{batch_key}/{i}"``; ``timeout`` applies per batch."""
        evs = list(events)
        if not 1 <= batch_size <= MAX_BATCH:
            raise ValueError(f"batch_size: {batch_size} is outside [1, {MAX_BATCH}]")
        for ev in evs:
            if not ev.idempotency_key:
                ev.idempotency_key = new_idempotency_key()
        out: List[IngestResult] = []
        for i, start in enumerate(range(0, len(evs), batch_size)):
            chunk = evs[start : start + batch_size]
            req = _ingest_request(wait, wait_timeout)
            req["events"] = [_wire.encode(ev) for ev in chunk]
            if batch_key:
                req["batchKey"] = f"{batch_key}/{i}"
            res = self._msg(IngestResponse, _MEMORY, "Ingest", req, safe=True, timeout=_wait_timeout(self, timeout, wait, wait_timeout))
            if len(res.results) != len(chunk):
                raise errors.Internal(f"Ingest answered {len(res.results)} results for {len(chunk)} events")
            out.extend(res.results)
            if progress is not None:
                progress(len(out), len(evs))
        return out

    # -- reading memory ------------------------------------------------------------

    def recall(
        self,
        query: str = "",
        *,
        user_id: str = "",
        session_id: str = "",
        task_id: str = "",
        as_of: Optional[datetime] = None,
        k: int = 0,
        token_budget: int = 0,
        schema: str = "",
        purpose: str = "",
        scopes: Sequence[Scope] = (),
        known_at: Optional[datetime] = None,
        timeout: Optional[Seconds] = None,
    ) -> RecallResponse:
        """The context to remember for a user now (or at ``as_of``: what was true
        then), and the ranked items. ``known_at`` answers as the memory knew it then
        (only what it had learned by then). ``scopes`` narrows the visible scopes
        (never widens them)."""
        req = _req(user_id=user_id, query=query, session_id=session_id, task_id=task_id, as_of=as_of,
                   k=k, token_budget=token_budget, schema=schema, purpose=purpose, scopes=list(scopes),
                   known_at=known_at)
        return self._msg(RecallResponse, _MEMORY, "Recall", req, safe=True, timeout=timeout)

    def get_fact(self, fact_id: str, *, timeout: Optional[Seconds] = None) -> Fact:
        """One fact revision of the caller's tenant, with its evidence ids."""
        return self._fact("GetFact", {"factId": fact_id}, timeout)

    def list_facts(
        self,
        *,
        user_id: str = "",
        task_id: str = "",
        memory_key: str = "",
        predicate: str = "",
        scope: Scope = Scope.UNSPECIFIED,
        statuses: Sequence[FactStatus] = (),
        limit: int = 0,
        as_of: Optional[datetime] = None,
        known_at: Optional[datetime] = None,
        timeout: Optional[Seconds] = None,
    ) -> List[Fact]:
        """Fact revisions, newest first; empty arguments do not filter. ``as_of``
        keeps the revisions valid then; ``known_at`` shows them as the memory held
        them then."""
        req = _req(user_id=user_id, task_id=task_id, memory_key=memory_key, predicate=predicate,
                   scope=scope, statuses=list(statuses), limit=limit, as_of=as_of, known_at=known_at)
        res = self._call(_MEMORY, "ListFacts", req, safe=True, timeout=timeout)
        return [_wire.decode(Fact, f) for f in res.get("facts") or []]

    def fact_history(
        self, memory_key: str, *, known_at: Optional[datetime] = None, timeout: Optional[Seconds] = None
    ) -> List[Fact]:
        """Every revision of a memory key, oldest first (as the memory held them at
        ``known_at``, when given)."""
        res = self._call(_MEMORY, "FactHistory", _req(memory_key=memory_key, known_at=known_at), safe=True, timeout=timeout)
        return [_wire.decode(Fact, f) for f in res.get("revisions") or []]

    def invalidate_fact(self, fact_id: str, reason: str, *, timeout: Optional[Seconds] = None) -> Fact:
        """Closes a fact's ACTIVE revision (reviewer or admin keys)."""
        return self._fact("InvalidateFact", {"factId": fact_id, "reason": reason}, timeout)

    def forget(self, user_id: str, reason: str = "", *, timeout: Optional[Seconds] = None) -> str:
        """Starts the erasure of a user (admin keys) and returns its workflow id;
        asking again while it runs joins it."""
        res = self._call(_MEMORY, "Forget", _req(user_id=user_id, reason=reason), safe=True, timeout=timeout)
        return str(res.get("workflowId", ""))

    erase = forget

    def _fact(self, method: str, req: Dict[str, Any], timeout: Optional[Seconds]) -> Fact:
        res = self._call(_MEMORY, method, req, safe=True, timeout=timeout)
        return _wire.decode(Fact, res.get("fact") or {})

    # -- reviews ---------------------------------------------------------------------

    def list_pending(self, user_id: str = "", limit: int = 0, *, timeout: Optional[Seconds] = None) -> List[PendingReview]:
        """Candidates awaiting review (reviewer keys); an empty user lists all."""
        res = self._call(_REVIEW, "ListPending", _req(user_id=user_id, limit=limit), safe=True, timeout=timeout)
        return [_wire.decode(PendingReview, p) for p in res.get("pending") or []]

    def decide(
        self,
        candidate_id: str,
        decision: Decision,
        *,
        edited_value: str = "",
        note: str = "",
        wait: bool = False,
        wait_timeout: Optional[Seconds] = None,
        timeout: Optional[Seconds] = None,
    ) -> DecideResponse:
        """Sends a review decision. Not retried on UNAVAILABLE: a repeated decision
        is refused as already reviewed."""
        req = _req(candidate_id=candidate_id, decision=Decision(decision), edited_value=edited_value,
                   note=note, wait=wait, wait_timeout=wait_timeout)
        return self._msg(DecideResponse, _REVIEW, "Decide", req, safe=False, timeout=_wait_timeout(self, timeout, wait, wait_timeout))

    # -- tasks -------------------------------------------------------------------------

    def start_task(
        self,
        task_id: str,
        *,
        user_id: str = "",
        session_id: str = "",
        agent_id: str = "",
        confirmation_timeout: Optional[Seconds] = None,
        confirmation_default: str = "",
        timeout: Optional[Seconds] = None,
    ) -> Task:
        """Creates a task (state CREATED). Not retried on UNAVAILABLE: a start that
        went through answers ALREADY_EXISTS when repeated."""
        req = _req(task_id=task_id, user_id=user_id, session_id=session_id, agent_id=agent_id,
                   confirmation_timeout=_duration(confirmation_timeout), confirmation_default=confirmation_default)
        return self._task("StartTask", req, False, timeout)

    def plan_task(self, task_id: str, goal: str, steps: Sequence[TaskStep], *, timeout: Optional[Seconds] = None) -> Task:
        """Sets the goal and the steps (UpdateTask plan)."""
        return self.update_task(task_id, "plan", {"goal": goal, "steps": [_wire.encode(s) for s in steps]}, timeout=timeout)

    def request_confirmation(self, task_id: str, reason: str = "", *, timeout: Optional[Seconds] = None) -> Task:
        return self.update_task(task_id, "requestConfirmation", {"reason": reason}, timeout=timeout)

    def confirm_task(self, task_id: str, reason: str = "", *, reject: bool = False, timeout: Optional[Seconds] = None) -> Task:
        """Confirms the plan (or rejects it with ``reject=True``)."""
        return self.update_task(task_id, "confirm", _req(reject=reject, reason=reason), timeout=timeout)

    def complete_task(self, task_id: str, reason: str = "", *, timeout: Optional[Seconds] = None) -> Task:
        return self.update_task(task_id, "complete", {"reason": reason}, timeout=timeout)

    def cancel_task(self, task_id: str, reason: str = "", *, timeout: Optional[Seconds] = None) -> Task:
        return self.update_task(task_id, "cancel", {"reason": reason}, timeout=timeout)

    def update_task(self, task_id: str, op: str, args: Dict[str, Any], *, timeout: Optional[Seconds] = None) -> Task:
        """Applies one UpdateTask operation by its JSON name (plan,
        requestConfirmation, confirm, complete, cancel). Not retried on UNAVAILABLE."""
        return self._task("UpdateTask", {"taskId": task_id, op: {k: v for k, v in args.items() if v not in ("", None)}}, False, timeout)

    def run_step(self, task_id: str, step: str = "", *, timeout: Optional[Seconds] = None) -> Task:
        """Runs the named step, or the next one. Not retried: a lost answer is read
        back with get_task (the step is idempotent at the action endpoint by its key)."""
        return self._task("RunStep", _req(task_id=task_id, step=step), False, timeout)

    def get_task(self, task_id: str, *, timeout: Optional[Seconds] = None) -> Task:
        return self._task("GetTask", {"taskId": task_id}, True, timeout)

    def _task(self, method: str, req: Dict[str, Any], safe: bool, timeout: Optional[Seconds]) -> Task:
        res = self._call(_TASK, method, req, safe=safe, timeout=timeout)
        return _wire.decode(Task, res.get("task") or {})


def _req(**fields: Any) -> Dict[str, Any]:
    """Keyword arguments as a request object: JSON names, zero values left out
    (as protojson does)."""
    return {_wire.camel(k): _wire.encode(v) for k, v in fields.items() if not _wire.is_zero(v)}


def _duration(d: Optional[Seconds]) -> Optional[timedelta]:
    return None if d is None else d if isinstance(d, timedelta) else timedelta(seconds=float(d))


def _ingest_request(wait: bool, wait_timeout: Optional[Seconds]) -> Dict[str, Any]:
    req: Dict[str, Any] = {}
    if wait:
        req["wait"] = True
    if wait_timeout is not None:
        req["waitTimeout"] = _wire.format_duration(wait_timeout)
    return req


def _wait_timeout(c: Client, timeout: Optional[Seconds], wait: bool, wait_timeout: Optional[Seconds]) -> float:
    """A waiting call's timeout: at least what the server may wait (default 30s)
    and ten seconds more."""
    t = c._timeout if timeout is None else _wire.seconds(timeout)
    if wait and timeout is None:
        t = max(t, (30.0 if wait_timeout is None else _wire.seconds(wait_timeout)) + 10.0)
    return t


def _retry_after(v: Optional[str]) -> Optional[float]:
    """Retry-After in seconds (delta-seconds or an HTTP date)."""
    if not v:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(v).timestamp() - time.time())
    except (TypeError, ValueError):
        return None

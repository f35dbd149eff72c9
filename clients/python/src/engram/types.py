"""The API's messages as dataclasses and its enums as str enums (proto/engram/v1).

Enum members are named without their proto prefix and valued with the proto name
(``Scope.USER.value == "SCOPE_USER"``), so they compare equal to what the JSON
says. A name this version does not know (a newer server's), or a number, still
decodes: it becomes a member of its own with that name.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional


class _ProtoEnum(str, enum.Enum):
    @classmethod
    def _missing_(cls, value: object) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # protojson writes a value it has no name for as its number
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = value
        member._value_ = value
        return member

    def __str__(self) -> str:
        return str(self.value)


class Scope(_ProtoEnum):
    """Who a memory belongs to, from the broadest to the narrowest."""

    UNSPECIFIED = "SCOPE_UNSPECIFIED"
    TENANT = "SCOPE_TENANT"
    DEPARTMENT = "SCOPE_DEPARTMENT"
    USER = "SCOPE_USER"
    AGENT = "SCOPE_AGENT"
    SESSION = "SCOPE_SESSION"
    TASK = "SCOPE_TASK"


class MemoryType(_ProtoEnum):
    UNSPECIFIED = "MEMORY_TYPE_UNSPECIFIED"
    FACT = "MEMORY_TYPE_FACT"
    PREFERENCE = "MEMORY_TYPE_PREFERENCE"
    CONSTRAINT = "MEMORY_TYPE_CONSTRAINT"
    DECISION = "MEMORY_TYPE_DECISION"
    EXPERIENCE = "MEMORY_TYPE_EXPERIENCE"
    EVENT = "MEMORY_TYPE_EVENT"


class FactStatus(_ProtoEnum):
    UNSPECIFIED = "FACT_STATUS_UNSPECIFIED"
    ACTIVE = "FACT_STATUS_ACTIVE"
    SUPERSEDED = "FACT_STATUS_SUPERSEDED"
    EXPIRED = "FACT_STATUS_EXPIRED"
    INVALIDATED = "FACT_STATUS_INVALIDATED"


class CandidateStatus(_ProtoEnum):
    UNSPECIFIED = "CANDIDATE_STATUS_UNSPECIFIED"
    PENDING = "CANDIDATE_STATUS_PENDING"
    ACCEPTED = "CANDIDATE_STATUS_ACCEPTED"
    REJECTED = "CANDIDATE_STATUS_REJECTED"
    NEEDS_CONFIRMATION = "CANDIDATE_STATUS_NEEDS_CONFIRMATION"
    SUPERSEDED = "CANDIDATE_STATUS_SUPERSEDED"


class Origin(_ProtoEnum):
    UNSPECIFIED = "ORIGIN_UNSPECIFIED"
    STATED = "ORIGIN_STATED"
    INFERRED = "ORIGIN_INFERRED"


class ActorType(_ProtoEnum):
    UNSPECIFIED = "ACTOR_TYPE_UNSPECIFIED"
    USER = "ACTOR_TYPE_USER"
    AGENT = "ACTOR_TYPE_AGENT"
    SYSTEM = "ACTOR_TYPE_SYSTEM"
    TOOL = "ACTOR_TYPE_TOOL"


class EventType(_ProtoEnum):
    UNSPECIFIED = "EVENT_TYPE_UNSPECIFIED"
    MESSAGE = "EVENT_TYPE_MESSAGE"
    TOOL_RESULT = "EVENT_TYPE_TOOL_RESULT"
    SYSTEM_EVENT = "EVENT_TYPE_SYSTEM_EVENT"
    DOCUMENT = "EVENT_TYPE_DOCUMENT"


class WriteStatus(_ProtoEnum):
    UNSPECIFIED = "WRITE_STATUS_UNSPECIFIED"
    RUNNING = "WRITE_STATUS_RUNNING"
    COMMITTED = "WRITE_STATUS_COMMITTED"
    PENDING_REVIEW = "WRITE_STATUS_PENDING_REVIEW"
    NO_MEMORY = "WRITE_STATUS_NO_MEMORY"
    UNPARSED = "WRITE_STATUS_UNPARSED"
    FAILED = "WRITE_STATUS_FAILED"


class TaskState(_ProtoEnum):
    UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
    CREATED = "TASK_STATE_CREATED"
    PLANNING = "TASK_STATE_PLANNING"
    WAITING_CONFIRMATION = "TASK_STATE_WAITING_CONFIRMATION"
    EXECUTING = "TASK_STATE_EXECUTING"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELLED = "TASK_STATE_CANCELLED"
    OUTCOME_UNKNOWN = "TASK_STATE_OUTCOME_UNKNOWN"


class Decision(_ProtoEnum):
    UNSPECIFIED = "DECISION_UNSPECIFIED"
    CONFIRM = "DECISION_CONFIRM"
    REJECT = "DECISION_REJECT"
    EDIT = "DECISION_EDIT"


@dataclass
class ScopeRef:
    """A scope with the id it needs."""

    scope: Scope = Scope.UNSPECIFIED
    department_id: str = ""
    user_id: str = ""
    agent_id: str = ""
    session_id: str = ""
    task_id: str = ""


@dataclass
class Event:
    """What happened: one message, tool result, system event or document.

    ``idempotency_key`` left empty is filled in by :meth:`Client.ingest` before the
    first attempt, so every retry is the same write.
    """

    content: str = ""
    user_id: str = ""
    schema: str = ""
    session_id: str = ""
    task_id: str = ""
    department_id: str = ""
    agent_id: str = ""
    actor_type: ActorType = ActorType.UNSPECIFIED
    actor_id: str = ""
    event_type: EventType = EventType.UNSPECIFIED
    source: str = ""
    payload: Dict[str, Any] = field(default_factory=dict)
    locator: str = ""
    occurred_at: Optional[datetime] = None
    idempotency_key: str = ""


@dataclass
class Fact:
    """One revision of a governed memory."""

    id: str = ""
    memory_key: str = ""
    revision: int = 0
    scope: Optional[ScopeRef] = None
    memory_type: MemoryType = MemoryType.UNSPECIFIED
    subject: str = ""
    predicate: str = ""
    object: str = ""
    content: str = ""
    attributes: Dict[str, Any] = field(default_factory=dict)
    entity_type: str = ""
    entity_id: str = ""
    status: FactStatus = FactStatus.UNSPECIFIED
    origin: Origin = Origin.UNSPECIFIED
    confidence: float = 0.0
    importance: float = 0.0
    valid_from: Optional[datetime] = None
    valid_until: Optional[datetime] = None
    supersedes_id: str = ""
    source_candidate_id: str = ""
    reason: str = ""
    schema_name: str = ""
    schema_version: int = 0
    recorded_at: Optional[datetime] = None
    evidence_ids: List[str] = field(default_factory=list)
    retired_at: Optional[datetime] = None
    stated_at: List[datetime] = field(default_factory=list)


@dataclass
class CandidateOutcome:
    candidate_id: str = ""
    status: CandidateStatus = CandidateStatus.UNSPECIFIED
    action: str = ""
    fact_id: str = ""
    memory_key: str = ""
    reason: str = ""
    reviewer: str = ""


@dataclass
class PendingReview:
    """A candidate awaiting a reviewer's decision (:meth:`Client.decide`)."""

    candidate_id: str = ""
    workflow_id: str = ""
    user_id: str = ""
    memory_key: str = ""
    content: str = ""
    predicate: str = ""
    object: str = ""
    scope: Optional[ScopeRef] = None
    memory_type: MemoryType = MemoryType.UNSPECIFIED
    origin: Origin = Origin.UNSPECIFIED
    confidence: float = 0.0
    reason: str = ""
    created_at: Optional[datetime] = None
    evidence_ids: List[str] = field(default_factory=list)
    #: Other candidates awaiting review for the same user, key and value: one
    #: review item; deciding this one decides them too.
    identical_candidate_ids: List[str] = field(default_factory=list)


@dataclass
class IngestResult:
    """The outcome of one event."""

    idempotency_key: str = ""
    workflow_id: str = ""
    run_id: str = ""
    status: WriteStatus = WriteStatus.UNSPECIFIED
    event_id: str = ""
    evidence_id: str = ""
    outcomes: List[CandidateOutcome] = field(default_factory=list)
    pending: List[PendingReview] = field(default_factory=list)
    reason: str = ""

    @property
    def fact_ids(self) -> List[str]:
        """The facts the write produced or touched."""
        return [o.fact_id for o in self.outcomes if o.fact_id]


@dataclass
class IngestResponse:
    results: List[IngestResult] = field(default_factory=list)
    batch_workflow_id: str = ""


@dataclass
class RecallItem:
    """One ranked memory with why it was chosen."""

    kind: str = ""
    id: str = ""
    content: str = ""
    memory_type: MemoryType = MemoryType.UNSPECIFIED
    scope: Optional[ScopeRef] = None
    status: FactStatus = FactStatus.UNSPECIFIED
    memory_key: str = ""
    predicate: str = ""
    object: str = ""
    revision: int = 0
    valid_from: Optional[datetime] = None
    valid_until: Optional[datetime] = None
    confidence: float = 0.0
    score: float = 0.0
    retrievers: List[str] = field(default_factory=list)
    evidence_ids: List[str] = field(default_factory=list)
    occurred_at: Optional[datetime] = None
    why: str = ""


@dataclass
class ContextSection:
    title: str = ""
    lines: List[str] = field(default_factory=list)


@dataclass
class RecallTask:
    task_id: str = ""
    goal: str = ""
    state: TaskState = TaskState.UNSPECIFIED
    done: List[str] = field(default_factory=list)
    todo: List[str] = field(default_factory=list)
    next_step: str = ""
    last_error: str = ""


@dataclass
class RecallResponse:
    """The context an agent puts in its prompt, and the ranked items."""

    context: str = ""
    sections: List[ContextSection] = field(default_factory=list)
    items: List[RecallItem] = field(default_factory=list)
    task: Optional[RecallTask] = None
    tokens: int = 0
    as_of: Optional[datetime] = None


@dataclass
class TaskStep:
    """One step of a plan: a name and the action the endpoint runs."""

    name: str = ""
    action: str = ""
    input: Dict[str, Any] = field(default_factory=dict)


@dataclass
class TaskStepState:
    step: Optional[TaskStep] = None
    status: str = ""
    idempotency_key: str = ""
    sends: int = 0
    result: Any = None
    error: str = ""


@dataclass
class TaskTransition:
    seq: int = 0
    from_state: TaskState = field(default=TaskState.UNSPECIFIED, metadata={"json": "from"})
    to_state: TaskState = field(default=TaskState.UNSPECIFIED, metadata={"json": "to"})
    actor: str = ""
    reason: str = ""
    step: str = ""
    at: Optional[datetime] = None


@dataclass
class Task:
    task_id: str = ""
    user_id: str = ""
    session_id: str = ""
    goal: str = ""
    state: TaskState = TaskState.UNSPECIFIED
    done: List[str] = field(default_factory=list)
    todo: List[str] = field(default_factory=list)
    next_step: str = ""
    last_error: str = ""
    steps: List[TaskStepState] = field(default_factory=list)
    seq: int = 0
    confirm_deadline: Optional[datetime] = None
    in_flight: str = ""
    transitions: List[TaskTransition] = field(default_factory=list)


@dataclass
class DecideResponse:
    status: CandidateStatus = CandidateStatus.UNSPECIFIED
    committed: bool = False
    fact_id: str = ""
    reason: str = ""
    others_pending: int = 0
    #: The identical candidates decided with this one.
    also_decided: List[str] = field(default_factory=list)


__all__ = [
    "ActorType",
    "CandidateOutcome",
    "CandidateStatus",
    "ContextSection",
    "Decision",
    "DecideResponse",
    "Event",
    "EventType",
    "Fact",
    "FactStatus",
    "IngestResponse",
    "IngestResult",
    "MemoryType",
    "Origin",
    "PendingReview",
    "RecallItem",
    "RecallResponse",
    "RecallTask",
    "Scope",
    "ScopeRef",
    "Task",
    "TaskState",
    "TaskStep",
    "TaskStepState",
    "TaskTransition",
    "WriteStatus",
]

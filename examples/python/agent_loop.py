#!/usr/bin/env python3
"""An agent loop with Engram as its memory, without an LLM.

Before each reply the agent recalls what it should remember for this turn; after
it, both the user's turn and the reply are remembered. The "model" is a few lines
that answer from the recalled facts, so the loop runs anywhere `make dev` runs.

The reply is sent as the agent's (actor_type AGENT): Engram keeps it as a turn,
recalled like any other, but what the agent says is no source of the user's facts
(it repeats what it remembers, or guesses). At the end the user's memory is
listed, every revision with the turn it came from: each one is the user's.

    make dev                                    # in one shell; prints the key
    pip install ./clients/python                # or the offline way (README)
    ENGRAM_ADDR=http://127.0.0.1:8080 ENGRAM_API_KEY=egk_… python3 examples/python/agent_loop.py
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import List

import engram
from engram import ActorType, CandidateStatus, RecallResponse

TURNS = [
    "你好，我想下个月去里斯本玩几天",
    "预算不超过8000元",
    "我以后尽量都坐直飞",
    "这次旅行预算调整到10000元",
    "帮我看看订什么航班合适",
]


def reply(turn: str, memory: RecallResponse) -> str:
    """The stand-in for a model: answers from the facts recalled for this turn."""
    facts = [i for i in memory.items if i.kind == "fact"]
    if not facts:
        return "Noted. Tell me more about the trip."
    known = "; ".join(f"{i.predicate} = {i.object} ({i.scope.scope.name.lower() if i.scope else '?'} scope)" for i in facts)
    if "航班" in turn:
        return f"Searching flights with what I remember: {known}."
    return f"Got it. I remember: {known}."


def main() -> int:
    addr = os.environ.get("ENGRAM_ADDR", "http://127.0.0.1:8080")
    key = os.environ.get("ENGRAM_API_KEY", "")
    if not key:
        print("set ENGRAM_API_KEY (make dev prints one)", file=sys.stderr)
        return 2
    user = os.environ.get("ENGRAM_USER", "u-python-demo")
    c = engram.Client(addr, key)
    session = "s-" + uuid.uuid4().hex[:8]
    trip = "lisbon-" + uuid.uuid4().hex[:6]
    print(f"user {user}, session {session}, task {trip}")
    turns = {}  # evidence id -> who said what, to show where each memory came from
    for n, turn in enumerate(TURNS, 1):
        memory = c.recall(turn, user_id=user, session_id=session, task_id=trip, schema="travel", k=5)
        answer = reply(turn, memory)
        # Every turn is in the trip's task: the schema's cues decide the scope
        # ("这次" is this trip, "以后" is the user's for good, a budget is the user's).
        # Wait for each write, so the next recall sees it.
        said = c.remember(turn, user_id=user, session_id=session, task_id=trip, schema="travel")
        kept = c.remember(answer, user_id=user, session_id=session, task_id=trip, schema="travel", actor_type=ActorType.AGENT)
        turns[said.evidence_id], turns[kept.evidence_id] = f"user: {turn}", f"agent: {answer}"
        learned = ", ".join(f"{o.action} {o.memory_key}" for o in said.outcomes) or "-"
        refused = sum(1 for o in kept.outcomes if o.status == CandidateStatus.REJECTED)
        print(f"\n[{n}] user:  {turn}")
        print(f"    agent: {answer}")
        print(f"    recalled {len(memory.items)} item(s), {memory.tokens} tokens; wrote {said.status.name}: {learned}")
        print(f"    the reply is kept as a turn ({kept.status.name}); {refused} of its claims refused as the user's facts")
    final = c.recall("预算和航班偏好", user_id=user, session_id=session, task_id=trip, schema="travel")
    print("\ncontext for the next turn:\n" + final.context.rstrip())
    print("\nthe user's memory, every revision, with the turn it came from:")
    for f in c.list_facts(user_id=user):
        if f.scope and f.scope.task_id not in ("", trip):
            continue  # another run's trip
        source = "; ".join(turns.get(e, "an earlier run") for e in c.get_fact(f.id).evidence_ids)
        print(f"- {f.memory_key} rev {f.revision} {f.status.name}: {f.object} <- {source}")
    return 0

if __name__ == "__main__":
    sys.exit(main())

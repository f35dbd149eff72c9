// Runs the TypeScript client against a real `engram serve` (tests/mcp/mcp_test.go
// starts it). Env: ENGRAM_URL, ENGRAM_API_KEY (an agent key bound to user u1).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Code, ConnectError, Engram, WriteStatus } from "../src/index.js";

const url = process.env.ENGRAM_URL;
const key = process.env.ENGRAM_API_KEY;

test("ingest then recall", async () => {
  const engram = new Engram(url, key);
  const res = await engram.ingest({ userId: "u1", schema: "travel", content: "预算不超过8000元", idempotencyKey: "ts-client-1" });
  assert.equal(res.status, WriteStatus.COMMITTED, res.reason);
  const factId = res.outcomes.find((o) => o.factId)?.factId;
  assert.ok(factId, "the write produced a fact");

  const rec = await engram.recall({ userId: "u1", query: "预算是多少", schema: "travel" });
  assert.match(rec.context, /8000/);
  const item = rec.items.find((i) => i.id === factId);
  assert.ok(item, "the fact is recalled");
  assert.ok(item.evidenceIds.length > 0, "with its evidence");

  const fact = await engram.memory.getFact({ factId });
  assert.match(fact.fact.object, /^8000/);
});

test("bad input names the field", async () => {
  const engram = new Engram(url, key);
  await assert.rejects(engram.recall({ userId: "u1", query: "x", k: 1000 }), (err) => {
    assert.ok(err instanceof ConnectError);
    assert.equal(err.code, Code.InvalidArgument);
    assert.match(err.rawMessage, /^k: /);
    return true;
  });
});

test("a wrong key is refused", async () => {
  const engram = new Engram(url, "egk_wrong");
  await assert.rejects(engram.recall("anything"), (err) => err instanceof ConnectError && err.code === Code.Unauthenticated);
});

// Issue 50: occurredAt as a string failed inside serialization with code 13
// ("cannot use field google.protobuf.Timestamp.seconds"). A Date or an RFC 3339
// string is converted; anything else is InvalidArgument naming the field, and
// nothing is sent (counted on the real transport).
test("a time may be a Date or an RFC 3339 string; anything else is refused before sending", async () => {
  let sent = 0;
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "1.1",
    interceptors: [
      (next) => async (req) => {
        sent++;
        req.header.set("Authorization", `Bearer ${key}`);
        return next(req);
      },
    ],
  });
  const engram = new Engram(url, key, { transport });
  const res = await engram.ingest({ userId: "u1", schema: "travel", content: "我以后尽量都坐直飞", occurredAt: "2024-01-01T08:00:00+08:00", idempotencyKey: "ts-time-1" });
  assert.equal(res.status, WriteStatus.COMMITTED, res.reason);
  const factId = res.outcomes.find((o) => o.factId)?.factId;
  const fact = await engram.memory.getFact({ factId });
  assert.equal(fact.fact.validFrom.seconds, BigInt(Date.UTC(2024, 0, 1) / 1000), "the string's time, not now");
  const asOf = await engram.memory.listFacts({ asOf: new Date("2024-06-01T00:00:00Z"), predicate: "flight_type" });
  assert.ok(asOf.facts.some((f) => f.id === factId), "a Date on a generated client's call");
  assert.equal(sent, 3);

  for (const bad of ["2099-01-01T00:00:00", "yesterday", 20990101, new Date("not a date")]) {
    await assert.rejects(engram.ingest({ userId: "u1", content: "x", occurredAt: bad }), (err) => {
      assert.ok(err instanceof ConnectError);
      assert.equal(err.code, Code.InvalidArgument);
      assert.match(err.rawMessage, /^event\.occurredAt: .* is not a time: pass a Date, an RFC 3339 string/);
      return true;
    });
  }
  assert.equal(sent, 3, "nothing sent for a time that is not one");

  // The "2099-01-01" is a time, in the future: the server names the field.
  await assert.rejects(engram.ingest({ userId: "u1", content: "x", occurredAt: "2099-01-01" }), (err) => {
    assert.equal(err.code, Code.InvalidArgument);
    assert.match(err.rawMessage, /^event\.occurred_at: /);
    return true;
  });
});

// Runs the TypeScript client against a real `engram serve` (tests/mcp/mcp_test.go
// starts it). Env: ENGRAM_URL, ENGRAM_API_KEY (an agent key bound to user u1).
import { test } from "node:test";
import assert from "node:assert/strict";
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

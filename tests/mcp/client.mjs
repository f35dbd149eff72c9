// Drives Engram's MCP server with the MCP TypeScript SDK's client, over Streamable
// HTTP (URL/mcp with a bearer key) and over stdio (`engram mcp`, ENGRAM_API_KEY),
// and prints one JSON line with what it saw; mcp_test.go checks it.
//
// Env: URL (the engram serve base URL), KEY and KEY_B (agent keys of two tenants),
// ENGRAM_BIN (the engram binary, for stdio; the rest of the environment reaches it).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const { URL: base, KEY, KEY_B, ENGRAM_BIN } = process.env;
const out = { steps: [] };
const step = (s) => out.steps.push(s);

function text(res) {
  return (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

async function connectHTTP(key) {
  const c = new Client({ name: "engram-ts-test", version: "1.0.0" });
  const t = new StreamableHTTPClientTransport(new URL("/mcp", base), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await c.connect(t);
  return c;
}

async function exercise(c, transport, factCheck) {
  const tools = await c.listTools();
  out[`${transport}Tools`] = tools.tools.map((t) => t.name).sort();
  step(`${transport}: listed ${tools.tools.length} tools`);
  const rem = await c.callTool({
    name: "remember",
    arguments: { content: "我以后尽量都坐直飞", schema: "travel", idempotency_key: `ts-${transport}` },
  });
  if (rem.isError) throw new Error(`${transport} remember: ${text(rem)}`);
  out[`${transport}Remember`] = rem.structuredContent.status;
  step(`${transport}: remembered (${rem.structuredContent.status})`);
  const rec = await c.callTool({ name: "recall", arguments: { query: "坐飞机有什么偏好", schema: "travel" } });
  if (rec.isError) throw new Error(`${transport} recall: ${text(rec)}`);
  out[`${transport}RecallIds`] = (rec.structuredContent.items ?? []).map((i) => i.id);
  out[`${transport}Context`] = rec.structuredContent.context;
  step(`${transport}: recalled ${out[`${transport}RecallIds`].length} items`);
  const bad = await c.callTool({ name: "recall", arguments: { query: "x", k: 1000 } });
  out[`${transport}BadArg`] = { isError: !!bad.isError, text: text(bad) };
  step(`${transport}: a bad argument is a tool error`);
  if (factCheck) await factCheck(rem.structuredContent);
}

try {
  // No key: refused before any MCP message.
  const noKey = await fetch(new URL("/mcp", base), {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } }),
  });
  out.noKeyStatus = noKey.status;
  step(`no key: HTTP ${noKey.status}`);
  let refused = false;
  try {
    await connectHTTP("egk_wrong");
  } catch {
    refused = true;
  }
  out.wrongKeyRefused = refused;

  const c = await connectHTTP(KEY);
  await exercise(c, "http", async (written) => {
    const factId = (written.outcomes ?? []).find((o) => o.factId)?.factId;
    out.factId = factId;
    const own = await c.callTool({ name: "get_fact", arguments: { fact_id: factId } });
    out.ownFact = own.isError ? `error: ${text(own)}` : own.structuredContent.fact.status;
    const cb = await connectHTTP(KEY_B);
    const other = await cb.callTool({ name: "get_fact", arguments: { fact_id: factId } });
    out.otherTenant = { isError: !!other.isError, text: text(other) };
    step("another tenant's key: get_fact is not found");
    await cb.close();
  });
  await c.close();

  const s = new Client({ name: "engram-ts-test", version: "1.0.0" });
  await s.connect(new StdioClientTransport({
    command: ENGRAM_BIN,
    args: ["mcp", "--no-worker"],
    env: { ...process.env, ENGRAM_API_KEY: KEY },
    stderr: "ignore",
  }));
  await exercise(s, "stdio");
  await s.close();
  out.ok = true;
} catch (e) {
  out.ok = false;
  out.error = String(e?.stack ?? e);
}
console.log(JSON.stringify(out));

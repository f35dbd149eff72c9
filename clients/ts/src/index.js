// Engram's TypeScript client: the generated Connect services (../gen, from proto/
// with buf and protoc-gen-es) behind a thin wrapper with the Go client's two calls,
// ingest and recall. The API key goes in `Authorization: Bearer <key>`; the tenant
// always comes from the key.
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { MemoryService } from "../gen/engram/v1/memory_pb.js";
import { ReviewService } from "../gen/engram/v1/review_pb.js";
import { TaskService } from "../gen/engram/v1/task_pb.js";
import { SchemaService } from "../gen/engram/v1/schema_pb.js";

export { Code, ConnectError };
export * from "../gen/engram/v1/types_pb.js";
export * from "../gen/engram/v1/memory_pb.js";
export * from "../gen/engram/v1/review_pb.js";
export * from "../gen/engram/v1/task_pb.js";
export * from "../gen/engram/v1/schema_pb.js";

export class Engram {
  /**
   * @param {string} baseUrl where `engram serve` listens, e.g. http://127.0.0.1:8080
   * @param {string} apiKey an API key (`engram keys create`)
   * @param {{ transport?: import("@connectrpc/connect").Transport, timeoutMs?: number }} [options]
   */
  constructor(baseUrl, apiKey, options = {}) {
    if (!baseUrl) throw new Error("baseUrl is empty: pass where engram serve listens (ENGRAM_ADDR)");
    if (!apiKey) throw new Error("apiKey is empty: create one with `engram keys create`");
    const auth = (next) => async (req) => {
      req.header.set("Authorization", `Bearer ${apiKey}`);
      return next(req);
    };
    const transport = withTimes(
      options.transport ??
        createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [auth], defaultTimeoutMs: options.timeoutMs ?? 5 * 60_000 }),
    );
    /** The generated clients, for every other call. */
    this.memory = createClient(MemoryService, transport);
    this.review = createClient(ReviewService, transport);
    this.task = createClient(TaskService, transport);
    this.schema = createClient(SchemaService, transport);
  }

  /**
   * Records one event and, unless wait is false, waits for its write to finish
   * (committed, waiting for review, or nothing to remember) and returns its result.
   */
  async ingest(event, { wait = true, waitTimeoutMs } = {}) {
    const req = { event, wait };
    if (waitTimeoutMs !== undefined) {
      req.waitTimeout = { seconds: BigInt(Math.floor(waitTimeoutMs / 1000)), nanos: (waitTimeoutMs % 1000) * 1e6 };
    }
    const res = await this.memory.ingest(req);
    return res.results[0];
  }

  /** Answers a question from memory: the context text and the ranked items. */
  async recall(request) {
    return this.memory.recall(typeof request === "string" ? { query: request } : request);
  }
}

// An RFC 3339 time with its offset ("2024-01-01T09:30:00Z", "…+08:00"), or a date
// alone ("2024-01-01", midnight UTC).
const RFC3339 = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2}))?$/;

/**
 * Turns a time given as a Date or an RFC 3339 string into a
 * google.protobuf.Timestamp; anything else that is not a Timestamp is an
 * InvalidArgument error naming the field, raised before anything is sent (a
 * string used to fail inside serialization, as code 13 "cannot use field
 * google.protobuf.Timestamp.seconds").
 */
function toTimestamp(v, path) {
  if (v instanceof Date && !Number.isNaN(v.getTime())) return timestampFromDate(v);
  if (typeof v === "string" && RFC3339.test(v.trim())) {
    const d = new Date(v.trim());
    if (!Number.isNaN(d.getTime())) return timestampFromDate(d);
  }
  if (v !== null && typeof v === "object" && !(v instanceof Date) && !Array.isArray(v)) return v; // a Timestamp
  throw new ConnectError(
    `${path}: ${v instanceof Date ? "an invalid Date" : JSON.stringify(v)} is not a time: pass a Date, an RFC 3339 string ` +
      `("2024-01-01T09:30:00Z", or "2024-01-01" for midnight UTC) or a Timestamp ({ seconds, nanos })`,
    Code.InvalidArgument,
  );
}

/** A copy of message (of desc, at path) with its times converted by toTimestamp. */
function convertTimes(desc, message, path) {
  if (message === null || typeof message !== "object") return message;
  const out = { ...message };
  for (const field of desc.fields) {
    const at = path ? `${path}.${field.localName}` : field.localName;
    if (field.oneof) {
      const held = out[field.oneof.localName];
      if (held && held.case === field.localName && held.value != null) {
        out[field.oneof.localName] = { ...held, value: convertField(field, held.value, at) };
      }
    } else if (out[field.localName] != null) {
      out[field.localName] = convertField(field, out[field.localName], at);
    }
  }
  return out;
}

function convertField(field, v, at) {
  const convertOne = (m, x, p) => (m.typeName === "google.protobuf.Timestamp" ? toTimestamp(x, p) : m.typeName.startsWith("google.protobuf.") ? x : convertTimes(m, x, p));
  if (field.fieldKind === "message") return convertOne(field.message, v, at);
  if (field.fieldKind === "list" && field.listKind === "message" && Array.isArray(v)) return v.map((x, i) => convertOne(field.message, x, `${at}[${i}]`));
  return v;
}

/** A transport that converts every request's times (see toTimestamp) before sending it. */
function withTimes(transport) {
  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      return transport.unary(method, signal, timeoutMs, header, convertTimes(method.input, input, ""), contextValues);
    },
    stream(...args) {
      return transport.stream(...args);
    },
  };
}

// Engram's TypeScript client: the generated Connect services (../gen, from proto/
// with buf and protoc-gen-es) behind a thin wrapper with the Go client's two calls,
// ingest and recall. The API key goes in `Authorization: Bearer <key>`; the tenant
// always comes from the key.
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
    const transport =
      options.transport ??
      createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [auth], defaultTimeoutMs: options.timeoutMs ?? 5 * 60_000 });
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

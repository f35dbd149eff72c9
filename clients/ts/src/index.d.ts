import type { Client, Transport } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { TimestampSchema } from "@bufbuild/protobuf/wkt";
import { MemoryService, EventSchema, IngestResult, RecallRequestSchema, RecallResponse } from "../gen/engram/v1/memory_pb.js";
import { ReviewService } from "../gen/engram/v1/review_pb.js";
import { TaskService } from "../gen/engram/v1/task_pb.js";
import { SchemaService } from "../gen/engram/v1/schema_pb.js";

export { Code, ConnectError } from "@connectrpc/connect";
export * from "../gen/engram/v1/types_pb.js";
export * from "../gen/engram/v1/memory_pb.js";
export * from "../gen/engram/v1/review_pb.js";
export * from "../gen/engram/v1/task_pb.js";
export * from "../gen/engram/v1/schema_pb.js";

export interface EngramOptions {
  /** A transport of your own (the default: Connect over HTTP/1.1 with the key). */
  transport?: Transport;
  /** Default deadline of a call (5 minutes). */
  timeoutMs?: number;
}

/**
 * A time: a Date, an RFC 3339 string with its offset ("2024-01-01T09:30:00Z") or a
 * date alone ("2024-01-01", midnight UTC), or a Timestamp. Every call converts the
 * Timestamp fields of its request this way (the generated clients' too); anything
 * else is an InvalidArgument error naming the field, raised before sending.
 */
export type TimeInit = Date | string | MessageInitShape<typeof TimestampSchema>;

/** An event to ingest, its time given as a TimeInit. */
export type EventInit = Omit<MessageInitShape<typeof EventSchema>, "occurredAt"> & { occurredAt?: TimeInit };

export interface IngestOptions {
  /** Wait for the write to finish (default true). */
  wait?: boolean;
  /** How long the server waits (default 30 s, at most 5 min). */
  waitTimeoutMs?: number;
}

export declare class Engram {
  constructor(baseUrl: string, apiKey: string, options?: EngramOptions);
  readonly memory: Client<typeof MemoryService>;
  readonly review: Client<typeof ReviewService>;
  readonly task: Client<typeof TaskService>;
  readonly schema: Client<typeof SchemaService>;
  /** Records one event; with wait (the default), returns when its write finished. */
  ingest(event: EventInit, options?: IngestOptions): Promise<IngestResult>;
  /** Answers a question from memory: the context text and the ranked items. */
  recall(request: string | MessageInitShape<typeof RecallRequestSchema>): Promise<RecallResponse>;
}

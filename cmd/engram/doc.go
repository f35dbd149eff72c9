// Command engram is Engram's one binary: serve (the API, MCP at /mcp and, unless
// --no-worker, the worker), worker, mcp (stdio), dev (the local stack and serve),
// migrate, keys, ingest, recall, facts, review, task, erase, audit, schema,
// maintenance, eval and bench. Commands build what they run with app.Build; the
// environment is read by config (and, for the CLI's own address and key, here).
package main

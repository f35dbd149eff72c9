// Package write is the memory write path, grouped as one feature: the MemoryWrite
// workflow (record → extract → validate → retry → govern → review → commit →
// index) and the batch workflow, the review update and signal reviewers send from
// the API or the Temporal Web UI, their activities (MemoryActivities), the
// workflow ids (tenant + idempotency key), the start options and Register, which
// puts all of it on a worker; and the intake of writes (Ingestor: record the event,
// then start, enqueue or wait for its write), which the API calls.
//
// A write of the current revision (3) is workflow.go over fastpath.go: the Write
// local activity calls the steps in order in the worker's process and returns the
// workflow's result; what it leaves runs as those steps' own activities. Writes
// and batches an older binary started replay through legacy.go.
//
// It may import memory, schema, governance, storage, llm, embedding and
// internal/outage; it never imports server, recall or the other feature packages
// (task, lifecycle).
package write

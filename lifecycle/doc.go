// Package lifecycle is what happens to memory after it is written: erasure (the
// EraseSubject workflow: right to be forgotten, across Postgres, the keyword index
// and Temporal's histories), key rotation, and the scheduled maintenance workflows
// (expiry, decay and pruning, consolidation into summaries, the schema report)
// with the Temporal schedules that run them (ConfigFrom, EnsureSchedules), and
// Register, which puts all of it on a worker.
//
// It may import memory, config (the schedule settings), schema, storage, llm
// (the summariser) and embedding; never server, recall, write or task.
package lifecycle

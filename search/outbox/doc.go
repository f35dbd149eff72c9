// Package outbox feeds the external keyword index (Typesense) from Postgres'
// outbox table: the long-running OutboxIndexer workflow that drains it in
// batches with backoff, the TypesenseReindex workflow that rebuilds the
// collection, and their activities. Rows are queued in the writer's own
// transaction by storage.EnqueueFact, so the index never misses a committed fact.
//
// It may import memory, storage, recall (the KeywordIndex interface) and
// search/typesense.
package outbox

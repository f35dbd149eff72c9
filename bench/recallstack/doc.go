// Package recallstack holds the recall benchmarks that run the whole system as
// `engram serve` does (app.Build: the API, the worker, Temporal, the configured
// recall engine) rather than the recall package alone: the history bench (one
// user's history grown through the real write path) and the unanalysed bench
// (recall before and after ANALYZE). The synthetic world and the measuring
// runner they share live below the app, in recall/recallbench.
//
// Harnesses that import app or server live under bench/, so that no feature
// package imports a layer above it (TestLayers in package app checks this).
package recallstack

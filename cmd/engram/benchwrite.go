package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/engramhq/engram/bench/writebench"
)

// benchWriteCmd is the flag wiring of bench/writebench.
func benchWriteCmd() *cobra.Command {
	var (
		concurrency, dbURL string
		writes, acks       int
		batchTurns, batch  int
		users              int
		rounds             int
		asJSON, keep       bool
		cpuProfile         string
	)
	cmd := &cobra.Command{
		Use:   "write",
		Short: "Measure the write path end to end through the API: Ingest with wait, the acknowledgement, and a batch import",
		Long: `Starts an in-process API server and worker (app.Build, on a task queue of its own, against
a fresh database "engram_bench_write" next to ENGRAM_DATABASE_URL's, or --database-url) with
the configured extractor and embedder (the rule extractor and the composite embedder unless
ENGRAM_LLM_BASE_URL or ENGRAM_EMBEDDER say otherwise), and calls it as an agent does:

  - Ingest with wait (until committed) at each --concurrency: --writes writes per level
    (at least 8 per caller in each round, so the rate is that of all callers busy);
  - Ingest without wait: the acknowledgement (the write is durable once the call returns);
  - a batch import of --batch-turns turns of conversation, --batch-size events per call.

It prints p50/p95/p99 latency, writes/s and errors per measurement (--json: the same as
JSON), with the CPU each call burnt in this process, the temporal server and
postgres; beside each, "bare temporal": the same eager start of an empty workflow
on the same server, answered by its result (or, beside the acknowledgement, not
waited for), which is the floor under the write figures, measured in --rounds rounds
alternating with the writes' so a machine whose speed drifts affects both alike; and where a single caller's write spends its time: each step of the write path
(time inside the activity, local or not), the embedder, and what is left, which is the
API, the Temporal server's round trips and the worker's scheduling. It also reads the
history of a few writes and counts their workflow tasks and activities.

TEMPORAL_ADDRESS names the Temporal server; a dev server of its own keeps the benchmark
from loading (or being loaded by) others.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			concs, err := parseConcurrency(concurrency)
			if err != nil {
				return err
			}
			if writes < 0 || acks < 0 || batchTurns < 0 || batch <= 0 || batch > 500 || users <= 0 {
				return fmt.Errorf("--writes, --acks and --batch-turns must not be negative, --batch-size is 1 to 500, --users positive")
			}
			if rounds < 1 {
				return fmt.Errorf("--rounds must be at least 1, not %d", rounds)
			}
			msgs := cmd.OutOrStdout()
			if asJSON {
				msgs = os.Stderr
			}
			b, stop, err := writebench.Start(cmd.Context(), writebench.Options{Users: users, Rounds: rounds, DatabaseURL: dbURL, Keep: keep}, msgs)
			if err != nil {
				return err
			}
			defer stop()
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			rep, err := b.Run(cmd.Context(), msgs, writebench.RunOptions{Concurrency: concs, Writes: writes, Acks: acks, BatchTurns: batchTurns, BatchSize: batch})
			if err != nil {
				return err
			}
			if asJSON {
				return printValue(cmd.OutOrStdout(), rep)
			}
			writebench.Print(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&concurrency, "concurrency", "1,8,32", "concurrent callers of Ingest with wait, comma separated")
	f.IntVar(&writes, "writes", 200, "writes per concurrency level, raised so that each round gives every caller at least 8 (32 callers, 4 rounds: 1,024)")
	f.IntVar(&rounds, "rounds", 4, "rounds each concurrency level's writes (and as many bare-Temporal calls) are split into, alternating write and bare rounds so both see the same machine")
	f.IntVar(&acks, "acks", 200, "Ingest calls without wait (0: skip)")
	f.IntVar(&batchTurns, "batch-turns", 6000, "turns of conversation in the batch import (0: skip)")
	f.IntVar(&batch, "batch-size", 500, "events per batch Ingest call")
	f.IntVar(&users, "users", 16, "users the writes are spread over")
	f.StringVar(&dbURL, "database-url", "", "database to use (default: "+writebench.DefaultDatabase+" next to ENGRAM_DATABASE_URL, dropped and created afresh)")
	f.BoolVar(&keep, "keep", false, "keep the database's content instead of starting from an empty one")
	f.BoolVar(&asJSON, "json", false, "write the figures as JSON")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile of the measurements (API, worker and embedder: one process) to this file (go tool pprof)")
	return cmd
}

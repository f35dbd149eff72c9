// Package replay replays recorded workflow histories against today's workflow code,
// so a change that would break a workflow already running in production (a write
// waiting three days for review, a task whose step outcome is unknown, an erasure
// half done) fails here instead of in a worker's replay.
//
// The histories in testdata were recorded on the real stack by TestRecord. Record
// them again only when an intended, versioned change (workflow.GetVersion) makes a
// new history worth keeping beside the old ones; never to make a failing replay
// pass. To record (the stack must run: eval "$(scripts/stack env)"):
//
//	go test ./tests/replay/ -run TestRecord -record
//
// which overwrites testdata/<name>.json. Keep the old file under another name when
// the old history must still replay.
package replay

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/task"
	"github.com/engramhq/engram/write"
)

// histories are the recorded histories, by file name under testdata.
var histories = []string{
	"memorywrite_review_v0.json",   // before the fast path (activities, no version markers)
	"memorywrite_review_rev0.json", // the fast path, versioned by GetVersion markers (Revision 0)
	"memorywrite_fast_rev0.json",
	"memorywrite_review_rev1.json", // Revision 1: no version markers, no search attributes at start
	"memorywrite_fast_rev1.json",
	"memorywrite_review_rev2.json", // Revision 2: an in-process extraction's write is one local activity
	"memorywrite_fast_rev2.json",
	"memorywrite_review.json", // Revision 3: one shape (Write, then what it left as steps)
	"memorywrite_fast.json",
	"memorywrite_review_late.json",        // issue 28: a late statement's split (Trim, Reopen) waits for review
	"memorywritebatch_fast_unsliced.json", // before batch-slices: the whole batch in one workflow task
	"memorywritebatch_fast_sliced.json",   // batch-slices: SliceEvents per workflow task, regular Index steps
	"memorywritebatch_fast_runs.json",     // batch-runs: each user's events in WriteRun local activities
	"memorywritebatch_fast.json",          // Revision 3: runs of WriteEvents, what they leave as the single write's steps
	"task_outcome_unknown.json",
	"erase_subject.json",
}

func TestReplay(t *testing.T) {
	for _, name := range histories {
		t.Run(name, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			write.RegisterWorkflows(r)
			task.RegisterWorkflows(r)
			lifecycle.RegisterWorkflows(r)
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("testdata", name)))
		})
	}
}

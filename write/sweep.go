package write

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/storage"
)

// SweepOrphans finds events accepted more than olderThan ago that are still
// RECEIVED or PROCESSING and whose workflow does not exist (the start failed after
// the event was stored: Temporal was restarting, the caller went away), and marks
// them FAILED with the reason, so no write is left PROCESSING without anything
// running it. An event whose workflow exists, or whose workflow Temporal cannot
// answer for now, is left alone. It returns how many events it marked; running it
// twice, or in several workers at once, is harmless.
func SweepOrphans(ctx context.Context, c client.Client, st *storage.Store, olderThan time.Duration, limit int) (int, error) {
	evs, err := st.OrphanCandidates(ctx, time.Now().Add(-olderThan), limit)
	if err != nil {
		return 0, err
	}
	marked := 0
	for _, e := range evs {
		_, err := c.DescribeWorkflowExecution(ctx, e.WorkflowID, "")
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			continue // it runs (or ran), or Temporal cannot say: never mark on a guess
		}
		n, err := st.FailEvents(ctx, e.TenantID, []string{e.ID}, nil,
			fmt.Sprintf("the write's workflow %s never started (received %s); send the event again with the same idempotency key", e.WorkflowID, e.ReceivedAt.UTC().Format(time.RFC3339)))
		if err != nil {
			return marked, err
		}
		marked += n
	}
	return marked, nil
}

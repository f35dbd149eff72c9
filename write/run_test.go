package write

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
)

// fakeRun records what a run did with its transactions.
type fakeRun struct {
	erasing bool     // refuse fails from now on
	ends    []string // "commit" or "rollback", in order
	records []string // keys recorded
	governs []string // keys governed
}

func (f *fakeRun) steps() runSteps {
	return runSteps{parts: parts{
		record: func(_ context.Context, in RecordInput) (RecordResult, error) {
			f.records = append(f.records, in.Event.IdempotencyKey)
			return RecordResult{EventID: "ev-" + in.Event.IdempotencyKey, EvidenceID: "evd-" + in.Event.IdempotencyKey, LocalExtract: true}, nil
		},
		// The in-process extractor finds a candidate in a turn that says "fact".
		extract: func(_ context.Context, in ExtractInput) (llm.ExtractOutput, error) {
			return llm.ExtractOutput{Raw: in.Event.Content}, nil
		},
		validate: func(_ context.Context, in ValidateInput) (ValidateResult, error) {
			if in.Raw == "fact" {
				return ValidateResult{Candidates: []memory.Candidate{{Predicate: "seat"}}}, nil
			}
			return ValidateResult{}, nil
		},
		governCommit: func(_ context.Context, in GovernInput) (GovernCommitResult, error) {
			f.governs = append(f.governs, in.Event.IdempotencyKey)
			return GovernCommitResult{}, nil
		},
		mark: func(context.Context, MarkEventInput) error { return nil }},
		refuse: func(_ context.Context, tenant, user string) error {
			if f.erasing {
				return temporal.NewNonRetryableApplicationError("being erased", ErrTypeErasureInProgress, nil)
			}
			return nil
		},
		begin: func(ctx context.Context) (context.Context, func(bool) error, error) {
			return ctx, func(commit bool) error {
				if commit {
					f.ends = append(f.ends, "commit")
				} else {
					f.ends = append(f.ends, "rollback")
				}
				return nil
			}, nil
		},
	}
}

func runOf(contents ...string) WriteRunInput {
	in := WriteRunInput{ExtractAttempts: 1}
	for i, c := range contents {
		in.Records = append(in.Records, RecordInput{Event: memory.IngestEvent{TenantID: "t", UserID: "u", IdempotencyKey: string(rune('a' + i)), Content: c}})
	}
	return in
}

// A run commits once at its end, and before each governance step.
func TestWriteRunCommits(t *testing.T) {
	f := &fakeRun{}
	out, err := writeRun(context.Background(), runOf("x", "fact", "y", "z"), f.steps())
	require.NoError(t, err)
	require.Len(t, out.Results, 4)
	assert.Equal(t, []string{"commit", "commit"}, f.ends)
	assert.Equal(t, []string{"b"}, f.governs)
	for _, r := range out.Results {
		assert.True(t, r.Done)
	}
}

// An erasure of the user that began while the run wrote: the run's open
// transaction is rolled back, not committed, and its events are left to their own
// writes (which refuse them); what was committed before stays answered.
func TestWriteRunRollsBackWhenTheUserIsErased(t *testing.T) {
	f := &fakeRun{}
	steps := f.steps()
	gov := steps.governCommit
	steps.governCommit = func(ctx context.Context, in GovernInput) (GovernCommitResult, error) {
		out, err := gov(ctx, in)
		f.erasing = true // the erasure begins after the first commit
		return out, err
	}
	out, err := writeRun(context.Background(), runOf("x", "fact", "y", "z"), steps)
	require.NoError(t, err)
	require.Len(t, out.Results, 2, "the events up to the governed one were committed")
	assert.Equal(t, "commit", f.ends[0])
	assert.NotContains(t, f.ends[1:], "commit", "nothing committed once the user is being erased")

	f = &fakeRun{erasing: true}
	out, err = writeRun(context.Background(), runOf("x", "y"), f.steps())
	require.NoError(t, err)
	assert.Empty(t, out.Results)
	assert.NotContains(t, f.ends, "commit")
}

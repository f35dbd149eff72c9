package write

import (
	"context"
	"fmt"

	"github.com/engramhq/engram/storage"
	"go.temporal.io/sdk/temporal"
)

// ErrTypeErasureInProgress is the error type of a write refused because its subject
// is being erased. It is non-retryable: the write workflow fails at once.
const ErrTypeErasureInProgress = "ErasureInProgress"

// RefuseDuringErasure returns a non-retryable error when the user (or the whole
// tenant) is being erased. Record calls it before storing anything.
func RefuseDuringErasure(ctx context.Context, st *storage.Store, tenantID, userID string) error {
	busy, err := st.ErasureInProgress(ctx, tenantID, userID)
	if err != nil {
		return err
	}
	if busy {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("user %q of tenant %q is being erased: %v", userID, tenantID, storage.ErrErasureInProgress),
			ErrTypeErasureInProgress, storage.ErrErasureInProgress)
	}
	return nil
}

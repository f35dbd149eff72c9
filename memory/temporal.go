package memory

import "go.temporal.io/sdk/temporal"

// Search attributes every Engram workflow upserts, so operators can list one
// tenant's work of one kind in the Temporal Web UI. They are registered on the
// server as Keyword by scripts/stack; the feature packages add their own
// (write: EngramReview, EngramSubject; task: EngramTaskState).
var (
	SearchAttrTenant = temporal.NewSearchAttributeKeyKeyword("EngramTenant")
	SearchAttrKind   = temporal.NewSearchAttributeKeyKeyword("EngramKind")
)

package recall

import "context"

// PeakStatements is the most recall statements this engine has had running at once.
func (e *Engine) PeakStatements() int { return int(e.peak.Load()) }

// AcquireStatement takes a statement slot as a recall does (Options.MaxStatements).
func (e *Engine) AcquireStatement(ctx context.Context) (func(), error) { return e.acquire(ctx) }

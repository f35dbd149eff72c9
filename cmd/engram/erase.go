package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/storage"
)

// eraseSteps are an erasure's steps in the order the EraseSubject workflow runs them.
var eraseSteps = slices.Concat([]string{lifecycle.EraseStepTemporal}, storage.ErasureSteps,
	[]string{lifecycle.EraseStepKeywordIndex, lifecycle.EraseStepTemporalSweep})

// eraseOutput is what erase --json prints.
type eraseOutput struct {
	WorkflowID  string           `json:"workflow_id"`
	RunID       string           `json:"run_id"`
	Status      string           `json:"status"`
	TombstoneID int64            `json:"tombstone_id,omitempty"`
	Counts      map[string]int64 `json:"counts,omitempty"`
	RequestedAt *time.Time       `json:"requested_at,omitempty"`
	FinishedAt  *time.Time       `json:"finished_at,omitempty"`
}

// eraseCmd is `engram erase`: the right to be forgotten for a user (or a tenant).
func eraseCmd() *cobra.Command {
	var in lifecycle.EraseSubjectInput
	var wait, wholeTenant, asJSON bool
	var waitTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "erase --tenant T --user U --requested-by WHO [--reason WHY]",
		Short: "Erase every memory of a user (or, with --whole-tenant, of a tenant) and leave a tombstone",
		Long: `Starts the EraseSubject workflow: new writes of the subject are refused while it runs; its
events, evidence, candidates, facts (every revision), embeddings, entities and edges, session
buffers, tasks, outbox and access-log rows, API keys bound to the user, keyword-index documents
and Temporal write/task histories are deleted; a tombstone records who asked, when and the
counts ('engram audit --tenant T --erasures'). Asking again while it runs attaches to it.
With --wait, each step is reported on stderr as it starts, until the erasure ends or
--wait-timeout passes (the erasure then goes on; exit 1).`,
		Args: positional(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case strings.TrimSpace(in.TenantID) == "":
				return badFlag("tenant", "is required")
			case in.UserID == "" && !wholeTenant:
				return badFlag("user", "is required (or --whole-tenant to erase the whole tenant)")
			case in.UserID != "" && wholeTenant:
				return badFlag("whole-tenant", "--user and --whole-tenant exclude each other")
			case strings.TrimSpace(in.RequestedBy) == "":
				return badFlag("requested-by", "is required: the tombstone records who asked")
			case waitTimeout <= 0:
				return badFlag("wait-timeout", "%s is not a positive duration", waitTimeout)
			case cmd.Flags().Changed("wait-timeout") && !wait:
				return badFlag("wait-timeout", "only makes sense with --wait")
			}
			cfg, c, err := temporalClient()
			if err != nil {
				return err
			}
			defer c.Close()
			opts := lifecycle.EraseSubjectStartOptions(cfg.TaskQueue, in)
			run, err := c.ExecuteWorkflow(cmd.Context(), opts, lifecycle.EraseSubjectWorkflowName, in)
			if err != nil {
				return err
			}
			res := eraseOutput{WorkflowID: run.GetID(), RunID: run.GetRunID(), Status: "RUNNING"}
			out := cmd.OutOrStdout()
			if !wait {
				if asJSON {
					return printValue(out, res)
				}
				fmt.Fprintf(out, "erasure running: workflow %s\n", run.GetID())
				return nil
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "erasure running: workflow %s (waiting at most %s)\n", run.GetID(), waitTimeout)
			done, err := waitErasure(cmd.Context(), c, run, waitTimeout, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			res.Status, res.TombstoneID, res.Counts = done.Status, done.TombstoneID, done.Counts
			res.RequestedAt, res.FinishedAt = &done.RequestedAt, done.FinishedAt
			if asJSON {
				return printValue(out, res)
			}
			fmt.Fprintf(out, "erased (tombstone %d): %s\n", done.TombstoneID, storage.MarshalCounts(done.Counts))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.TenantID, "tenant", "", "tenant (required)")
	f.StringVar(&in.UserID, "user", "", "user to erase")
	f.BoolVar(&wholeTenant, "whole-tenant", false, "erase the whole tenant")
	f.StringVar(&in.RequestedBy, "requested-by", "", "who asked (recorded on the tombstone)")
	f.StringVar(&in.Reason, "reason", "", "why (e.g. the request's reference)")
	f.BoolVar(&wait, "wait", false, "wait for the erasure to finish, reporting each step on stderr")
	f.DurationVar(&waitTimeout, "wait-timeout", 30*time.Minute, "how long --wait waits; the erasure goes on after it")
	f.BoolVar(&asJSON, "json", false, "print the workflow (and, with --wait, the tombstone) as JSON")
	return cmd
}

// waitErasure waits for an erasure's result, printing a line on progress each
// time the workflow starts a step (its current details, read by the workflow
// metadata query a few times a second).
func waitErasure(ctx context.Context, c client.Client, run client.WorkflowRun, timeout time.Duration, progress io.Writer) (lifecycle.EraseSubjectResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		res lifecycle.EraseSubjectResult
		err error
	}
	got := make(chan result, 1)
	go func() {
		var r result
		r.err = run.Get(ctx, &r.res)
		got <- r
	}()
	start, last := time.Now(), ""
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-got:
			if r.err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return r.res, &exitError{code: exitFailure, err: fmt.Errorf("--wait-timeout: the erasure %s is still running after %s (last step: %s); it goes on: follow it with engram audit --tenant T --erasures, or in the Temporal Web UI",
					run.GetID(), timeout, dash(last))}
			}
			if r.err == nil {
				fmt.Fprintf(progress, "erase: done in %s\n", time.Since(start).Round(time.Millisecond))
			}
			return r.res, r.err
		case <-tick.C:
			step := erasureStep(ctx, c, run)
			if step != "" && step != last {
				last = step
				fmt.Fprintf(progress, "erase: step %d/%d %s (%s)\n", slices.Index(eraseSteps, step)+1, len(eraseSteps), step, time.Since(start).Round(time.Second))
			}
		}
	}
}

// erasureStep is the step the erasure runs now, from the details the workflow
// shows ("… step **facts**"), or "" when it cannot be read.
func erasureStep(ctx context.Context, c client.Client, run client.WorkflowRun) string {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(qctx, run.GetID(), run.GetRunID(), "__temporal_workflow_metadata")
	if err != nil {
		return ""
	}
	var meta sdkpb.WorkflowMetadata
	if err := v.Get(&meta); err != nil {
		return ""
	}
	_, rest, ok := strings.Cut(meta.GetCurrentDetails(), "**")
	step, _, ok2 := strings.Cut(rest, "**")
	if !ok || !ok2 || !slices.Contains(eraseSteps, step) {
		return ""
	}
	return step
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/activities"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/workflows"
)

func ingestCmd() *cobra.Command {
	var ev activities.IngestEvent
	var at string
	var wait, asJSON bool
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Send one event through the MemoryWrite workflow",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromEnv()
			if err != nil {
				return err
			}
			if ev.TenantID == "" {
				return errors.New("--tenant: is required")
			}
			ev.OccurredAt = time.Now().UTC()
			if at != "" {
				if ev.OccurredAt, err = time.Parse(time.RFC3339, at); err != nil {
					return fmt.Errorf("--at: %q is not an RFC 3339 time (e.g. 2026-03-01T10:00:00Z)", at)
				}
			}
			if ev.IdempotencyKey == "" {
				ev.IdempotencyKey = uuid.NewString()
			}
			if err := ev.Validate(); err != nil {
				return fmt.Errorf("--%s", strings.ReplaceAll(err.Error(), "_", "-"))
			}
			c, err := dialTemporal(cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			run, err := c.ExecuteWorkflow(cmd.Context(), client.StartWorkflowOptions{
				ID: workflows.MemoryWriteWorkflowID(ev.TenantID, ev.IdempotencyKey), TaskQueue: cfg.TaskQueue,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
				WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			}, workflows.MemoryWriteWorkflowName, workflows.MemoryWriteInput{Event: ev, ExtractAttempts: cfg.ExtractAttempts, ReviewTimeout: cfg.ReviewTimeout})
			if err != nil {
				return fmt.Errorf("start write: %w", err)
			}
			out := cmd.OutOrStdout()
			if !wait {
				fmt.Fprintf(out, "workflow %s started (idempotency key %s)\n", run.GetID(), ev.IdempotencyKey)
				return nil
			}
			var res workflows.MemoryWriteResult
			if err := run.Get(cmd.Context(), &res); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(out).Encode(res)
			}
			fmt.Fprintf(out, "event %s: %s after %d extraction attempt(s) %s\n", res.EventID, res.Status, res.Attempts, res.Reason)
			tw := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "CANDIDATE\tSTATUS\tACTION\tFACT\tREASON")
			for _, r := range res.Results {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.CandidateID[:8], r.Status, r.Action, short(r.FactID), r.Reason)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&ev.TenantID, "tenant", "", "tenant id (required)")
	f.StringVar(&ev.UserID, "user", "", "user the event belongs to (required)")
	f.StringVar(&ev.Content, "text", "", "the message text (required)")
	f.StringVar(&ev.SessionID, "session", "", "session id")
	f.StringVar(&ev.TaskID, "task", "", "task id")
	f.StringVar(&ev.DepartmentID, "department", "", "department id")
	f.StringVar(&ev.AgentID, "agent", "", "agent id")
	f.StringVar(&ev.Schema, "schema", "general", "domain schema: general, customer_service, travel")
	f.StringVar(&ev.IdempotencyKey, "idempotency-key", "", "idempotency key (default: a new UUID)")
	f.StringVar(&at, "at", "", "when it happened, RFC 3339 (default: now)")
	f.BoolVar(&wait, "wait", false, "wait until the write is committed (or awaits review)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func factsCmd() *cobra.Command {
	var tenant, user, key string
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "facts",
		Short: "List a user's facts, or the history of one memory key (--key)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromEnv()
			if err != nil {
				return err
			}
			if tenant == "" {
				return errors.New("--tenant: is required")
			}
			st, err := storage.Open(cmd.Context(), cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer st.Close()
			var facts []storage.Fact
			if key != "" {
				facts, err = st.FactHistory(cmd.Context(), tenant, key)
			} else {
				ff := storage.FactFilter{UserID: user}
				if !all {
					ff.Statuses = []memory.FactStatus{memory.FactActive}
				}
				facts, err = st.ListFacts(cmd.Context(), tenant, ff)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(facts)
			}
			tw := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "FACT\tREV\tSTATUS\tSCOPE\tTYPE\tCONTENT\tVALID FROM\tVALID UNTIL\tCONF")
			for _, f := range facts {
				until := "-"
				if f.ValidUntil != nil {
					until = f.ValidUntil.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\n", short(f.ID), f.Revision, f.Status, f.ScopeRef().Key(), f.MemoryType, f.Content, f.ValidFrom.Format(time.RFC3339), until, f.Confidence)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant id (required)")
	cmd.Flags().StringVar(&user, "user", "", "only this user's facts")
	cmd.Flags().StringVar(&key, "key", "", "show every revision of this memory key")
	cmd.Flags().BoolVar(&all, "all", false, "include SUPERSEDED, EXPIRED and INVALIDATED revisions")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

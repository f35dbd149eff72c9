package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
)

var factsFields = fieldFlags{
	"user_id": "user", "task_id": "task", "memory_key": "key", "predicate": "predicate", "scope": "scope",
	"statuses": "status", "limit": "limit", "fact_id": "FACT_ID", "as_of": "as-of", "known_at": "known-at",
}

func factsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "facts",
		Short: "Read governed facts: list them, or the history of one memory key",
	}
	cmd.AddCommand(factsListCmd(), factsHistoryCmd(), factsGetCmd())
	return cmd
}

func factsListCmd() *cobra.Command {
	var o apiOpts
	var req engramv1.ListFactsRequest
	var scope string
	var statuses []string
	var all bool
	var limit int
	var asOf, knownAt string
	cmd := &cobra.Command{
		Use:   "list [--user U] [--task T] [--predicate P] [flags]",
		Short: "List facts, newest first (ACTIVE ones unless --all or --status)",
		Example: `  engram facts list --user u1
  engram facts list --user u1 --predicate budget --all
  engram facts list --user u1 --predicate budget --all --as-of 2026-03-01T12:00:00Z --known-at 2026-03-02T09:00:00Z
  engram facts list --task trip-1 --json`,
		Args: positional(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRange(cmd, "limit", limit, 1, 1000, ""); err != nil {
				return err
			}
			var err error
			if req.AsOf, err = parseTime("as-of", asOf); err != nil {
				return err
			}
			if req.KnownAt, err = parseTime("known-at", knownAt); err != nil {
				return err
			}
			req.Limit = int32(limit)
			if scope != "" {
				n, err := parseEnum("scope", scope, "SCOPE_", engramv1.Scope_value)
				if err != nil {
					return err
				}
				req.Scope = engramv1.Scope(n)
			}
			if all && len(statuses) > 0 {
				return badFlag("all", "give either --all or --status, not both")
			}
			for _, s := range statuses {
				n, err := parseEnum("status", s, "FACT_STATUS_", engramv1.FactStatus_value)
				if err != nil {
					return err
				}
				req.Statuses = append(req.Statuses, engramv1.FactStatus(n))
			}
			if !all && len(req.Statuses) == 0 {
				req.Statuses = []engramv1.FactStatus{engramv1.FactStatus_FACT_STATUS_ACTIVE}
			}
			facts, err := call(cmd, &o, factsFields, func(ctx context.Context, c *conn) ([]*engramv1.Fact, error) {
				return c.ListFacts(ctx, &req)
			})
			if err != nil {
				return err
			}
			return o.show(cmd, &engramv1.ListFactsResponse{Facts: facts}, func(out io.Writer) error { return printFacts(out, facts) })
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.StringVar(&req.UserId, "user", "", "only facts of this user")
	f.StringVar(&req.TaskId, "task", "", "only facts of this task")
	f.StringVar(&req.MemoryKey, "key", "", "only revisions of this memory key")
	f.StringVar(&req.Predicate, "predicate", "", "only this predicate, e.g. budget")
	f.StringVar(&scope, "scope", "", "only this scope: tenant, department, user, agent, session, task")
	f.StringSliceVar(&statuses, "status", nil, "only these statuses: active, superseded, expired, invalidated (repeat or comma-separate)")
	f.BoolVar(&all, "all", false, "every status, not only ACTIVE")
	f.IntVar(&limit, "limit", 0, "at most this many, 1 to 1000 (default 100)")
	f.StringVar(&asOf, "as-of", "", "only revisions valid at this RFC 3339 time (valid time: when the value was true)")
	f.StringVar(&knownAt, "known-at", "", "the revisions as the memory held them at this RFC 3339 time (transaction time)")
	return cmd
}

func factsHistoryCmd() *cobra.Command {
	var o apiOpts
	var knownAt string
	cmd := &cobra.Command{
		Use:   "history MEMORY_KEY",
		Short: "Every revision of one memory key, oldest first",
		Example: `  engram facts history "$(engram facts list --user u1 --predicate budget --json | jq -r '.facts[0].memoryKey')"
  engram facts history 'USER:u1|user|budget' --known-at 2026-03-02T09:00:00Z`,
		Args: positional(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(args[0]) == "" {
				return badArg("MEMORY_KEY is empty")
			}
			req := &engramv1.FactHistoryRequest{MemoryKey: args[0]}
			var err error
			if req.KnownAt, err = parseTime("known-at", knownAt); err != nil {
				return err
			}
			revs, err := call(cmd, &o, fieldFlags{"memory_key": "MEMORY_KEY", "known_at": "known-at"}, func(ctx context.Context, c *conn) ([]*engramv1.Fact, error) {
				return c.FactHistoryOf(ctx, req)
			})
			if err != nil {
				return err
			}
			return o.show(cmd, &engramv1.FactHistoryResponse{Revisions: revs}, func(out io.Writer) error {
				if len(revs) == 0 {
					return &exitError{code: exitNotFound, err: fmt.Errorf("no revisions of memory key %q", args[0])}
				}
				return printFacts(out, revs)
			})
		},
	}
	o.register(cmd.Flags())
	cmd.Flags().StringVar(&knownAt, "known-at", "", "the history as the memory held it at this RFC 3339 time (transaction time)")
	return cmd
}

func factsGetCmd() *cobra.Command {
	var o apiOpts
	cmd := &cobra.Command{
		Use:   "get FACT_ID",
		Short: "One fact revision with its evidence ids",
		Args:  positional(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := call(cmd, &o, factsFields, func(ctx context.Context, c *conn) (*engramv1.Fact, error) {
				return c.GetFact(ctx, args[0])
			})
			if err != nil {
				return err
			}
			return o.show(cmd, f, func(out io.Writer) error {
				if err := printFacts(out, []*engramv1.Fact{f}); err != nil {
					return err
				}
				fmt.Fprintf(out, "memory key: %s\nevidence: %s\nreason: %s\n", f.MemoryKey, dash(strings.Join(f.EvidenceIds, ", ")), dash(f.Reason))
				return nil
			})
		},
	}
	o.register(cmd.Flags())
	return cmd
}

func printFacts(out io.Writer, facts []*engramv1.Fact) error {
	if len(facts) == 0 {
		fmt.Fprintln(out, "no facts")
		return nil
	}
	return writeTable(out, "FACT\tREV\tSTATUS\tSCOPE\tTYPE\tPREDICATE\tVALUE\tCONTENT\tVALID FROM\tVALID UNTIL\tRECORDED\tRETIRED\tCONF\tMEMORY KEY", func(tw io.Writer) {
		for _, f := range facts {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\n", f.Id, f.Revision,
				enumName(f.Status.String(), "FACT_STATUS_"), scopeText(f.Scope), strings.ToLower(enumName(f.MemoryType.String(), "MEMORY_TYPE_")),
				dash(f.Predicate), clip(dash(f.Object), 24), clip(f.Content, 40), tsText(f.ValidFrom), tsText(f.ValidUntil),
				tsText(f.RecordedAt), tsText(f.RetiredAt), f.Confidence, f.MemoryKey)
		}
	})
}

package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
)

var recallFields = fieldFlags{
	"user_id": "user", "query": "query", "session_id": "session", "task_id": "task", "as_of": "as-of", "known_at": "known-at",
	"k": "k", "token_budget": "budget", "schema": "schema", "purpose": "purpose",
}

func recallCmd() *cobra.Command {
	var o apiOpts
	var req engramv1.RecallRequest
	var asOf, knownAt string
	var k, budget int
	cmd := &cobra.Command{
		Use:   "recall [--query Q] [--user U] [--task T] [flags]",
		Short: "What should the agent remember right now? Prints the context and the ranked memories",
		Example: `  engram recall --user u1                  # no question: the user's current facts
  engram recall --user u1 --schema travel --query "预算"
  engram recall --user u1 --schema travel --task trip-1 --query "这次旅行的预算" --budget 500
  engram recall --user u1 --as-of 2026-03-01T00:00:00Z --query budget --json
  engram recall --user u1 --known-at 2026-03-02T09:00:00Z --query budget`,
		Args: positional(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRange(cmd, "k", k, 1, 100, ""); err != nil {
				return err
			}
			if err := checkRange(cmd, "budget", budget, 1, 8000, " tokens"); err != nil {
				return err
			}
			if len(req.Query) > 8<<10 {
				return badFlag("query", "is longer than 8 KiB")
			}
			var err error
			if req.AsOf, err = parseTime("as-of", asOf); err != nil {
				return err
			}
			if req.KnownAt, err = parseTime("known-at", knownAt); err != nil {
				return err
			}
			req.K, req.TokenBudget = int32(k), int32(budget)
			res, err := call(cmd, &o, recallFields, func(ctx context.Context, c *conn) (*engramv1.RecallResponse, error) {
				return c.Recall(ctx, &req)
			})
			if err != nil {
				return err
			}
			return o.show(cmd, res, func(out io.Writer) error { return printRecall(out, res) })
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.StringVar(&req.Query, "query", "", "the question or the current turn (none: the user's current facts)")
	f.StringVar(&req.UserId, "user", "", "the user (required unless the API key is bound to one)")
	f.StringVar(&req.SessionId, "session", "", "current session (session memory, recent turns)")
	f.StringVar(&req.TaskId, "task", "", "current task (task state and task-scoped memory)")
	f.StringVar(&asOf, "as-of", "", "answer as of this RFC 3339 time (default now, or --known-at)")
	f.StringVar(&knownAt, "known-at", "", "answer as the memory knew it at this RFC 3339 time (transaction time; default now)")
	f.IntVar(&k, "k", 0, "ranked items to return, 1 to 100 (default 10)")
	f.IntVar(&budget, "budget", 0, "token budget of the context, 1 to 8000 (default 1000)")
	f.StringVar(&req.Schema, "schema", "", "schema used to parse the query (default general)")
	f.StringVar(&req.Purpose, "purpose", "cli", "why you read (recorded in the access log)")
	return cmd
}

// printRecall prints the context sections, then the ranked table.
func printRecall(out io.Writer, res *engramv1.RecallResponse) error {
	fmt.Fprintf(out, "context as of %s (%d tokens)\n", tsText(res.AsOf), res.Tokens)
	if len(res.Sections) == 0 {
		fmt.Fprintln(out, "\n(nothing to remember)")
	}
	for _, s := range res.Sections {
		fmt.Fprintf(out, "\n## %s\n", s.Title)
		for _, l := range s.Lines {
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
	if len(res.Items) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	return writeTable(out, "#\tKIND\tSCORE\tSCOPE\tTYPE\tCONTENT\tRETRIEVERS\tWHY", func(tw io.Writer) {
		for i, it := range res.Items {
			typ := "-"
			if it.MemoryType != engramv1.MemoryType_MEMORY_TYPE_UNSPECIFIED {
				typ = strings.ToLower(enumName(it.MemoryType.String(), "MEMORY_TYPE_"))
			}
			fmt.Fprintf(tw, "%d\t%s\t%.4f\t%s\t%s\t%s\t%s\t%s\n", i+1, it.Kind, it.Score, scopeText(it.Scope), typ,
				clip(it.Content, 48), strings.Join(it.Retrievers, ","), clip(it.Why, 60))
		}
	})
}

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
)

var reviewFields = fieldFlags{
	"user_id": "user", "limit": "limit", "candidate_id": "CANDIDATE_ID", "edited_value": "value",
	"note": "note", "wait_timeout": "wait-timeout",
}

func reviewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "review",
		Short: "Review memory candidates governance would not accept alone (reviewer keys)",
		Long: `Inferred, low-confidence or sensitive candidates wait in their write workflow for a
reviewer. List them, then confirm, reject or edit each one. The same decision can be
sent from the Temporal Web UI: filter workflows by EngramReview="PENDING", open one and
send the "review" signal (More Actions → Send a Signal) with the JSON its details show.`,
	}
	cmd.AddCommand(reviewListCmd(), decideCmd("confirm", engramv1.Decision_DECISION_CONFIRM),
		decideCmd("reject", engramv1.Decision_DECISION_REJECT), decideCmd("edit", engramv1.Decision_DECISION_EDIT))
	return cmd
}

func reviewListCmd() *cobra.Command {
	var o apiOpts
	var user string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--user U]",
		Short: "Candidates awaiting review, oldest first",
		Args:  positional(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRange(cmd, "limit", limit, 1, 1000, ""); err != nil {
				return err
			}
			pending, err := call(cmd, &o, reviewFields, func(ctx context.Context, c *conn) ([]*engramv1.PendingReview, error) {
				return c.ListPending(ctx, user, limit)
			})
			if err != nil {
				return err
			}
			return o.show(cmd, &engramv1.ListPendingResponse{Pending: pending}, func(out io.Writer) error {
				return printPendingTable(out, pending)
			})
		},
	}
	o.register(cmd.Flags())
	cmd.Flags().StringVar(&user, "user", "", "only candidates about this user")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (default 100, at most 1000)")
	return cmd
}

func printPendingTable(out io.Writer, pending []*engramv1.PendingReview) error {
	if len(pending) == 0 {
		fmt.Fprintln(out, "nothing awaits review")
		return nil
	}
	return writeTable(out, "CANDIDATE\tUSER\tSCOPE\tTYPE\tORIGIN\tCONF\tSAID\tCONTENT\tWHY REVIEW\tSINCE", func(tw io.Writer) {
		for _, p := range pending {
			// SAID: how many times the same thing awaits review (one item; deciding it
			// decides them all).
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%d\t%s\t%s\t%s\n", p.CandidateId, p.UserId, scopeText(p.Scope),
				strings.ToLower(enumName(p.MemoryType.String(), "MEMORY_TYPE_")), strings.ToLower(enumName(p.Origin.String(), "ORIGIN_")),
				p.Confidence, 1+len(p.IdenticalCandidateIds), clip(p.Content, 40), clip(p.Reason, 50), tsText(p.CreatedAt))
		}
	})
}

func decideCmd(verb string, d engramv1.Decision) *cobra.Command {
	var o apiOpts
	var value, note string
	var wait bool
	var waitTimeout time.Duration
	use := verb + " CANDIDATE_ID"
	short := map[string]string{
		"confirm": "Accept a candidate as proposed",
		"reject":  "Reject a candidate; memory does not change",
		"edit":    "Accept a candidate with a corrected value (--value)",
	}[verb]
	if d == engramv1.Decision_DECISION_EDIT {
		use += " --value V"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  positional(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := strings.TrimSpace(args[0])
			if id == "" {
				return badArg("CANDIDATE_ID is empty")
			}
			if d == engramv1.Decision_DECISION_EDIT && strings.TrimSpace(value) == "" {
				return badFlag("value", "is required: the corrected value")
			}
			if waitTimeout < 0 || waitTimeout > maxWait {
				return badFlag("wait-timeout", "%s is outside [0, %s]", waitTimeout, maxWait)
			}
			req := &engramv1.DecideRequest{CandidateId: id, Decision: d, EditedValue: value, Note: note, Wait: wait, WaitTimeout: durationOrNil(waitTimeout)}
			res, err := call(cmd, &o, reviewFields, func(ctx context.Context, c *conn) (*engramv1.DecideResponse, error) {
				return c.Decide(ctx, req)
			})
			if err != nil {
				return err
			}
			return o.show(cmd, res, func(out io.Writer) error {
				printDecided(out, verb, id, res)
				return nil
			})
		},
	}
	f := cmd.Flags()
	o.register(f)
	if d == engramv1.Decision_DECISION_EDIT {
		f.StringVar(&value, "value", "", "the corrected value (required)")
	}
	f.StringVar(&note, "note", "", "a note kept with the decision")
	f.BoolVar(&wait, "wait", true, "wait until the decision is committed")
	f.DurationVar(&waitTimeout, "wait-timeout", 0, "how long --wait may block (default 30s, at least 10ms, at most 5m)")
	return cmd
}

// printDecided says what a decision did: the candidate's status, whether it committed.
func printDecided(out io.Writer, verb, id string, res *engramv1.DecideResponse) {
	fmt.Fprintf(out, "%s %s: %s", verb, id, enumName(res.Status.String(), "CANDIDATE_STATUS_"))
	switch {
	case res.Committed:
		fmt.Fprintf(out, ", committed")
		if res.FactId != "" {
			fmt.Fprintf(out, " (fact %s)", res.FactId)
		}
	case res.OthersPending > 0:
		fmt.Fprintf(out, "; commits once %d other candidate(s) of the same write are decided", res.OthersPending)
	default:
		fmt.Fprintf(out, ", not committed yet")
	}
	if len(res.AlsoDecided) > 0 {
		fmt.Fprintf(out, "; also decided %d identical candidate(s)", len(res.AlsoDecided))
	}
	fmt.Fprintln(out)
	if res.Reason != "" {
		fmt.Fprintf(out, "reason: %s\n", res.Reason)
	}
}

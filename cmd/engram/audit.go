package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/engramhq/engram/storage"
)

// auditCmd is `engram audit`: who read a user's memories (the access log), and the
// erasures of the tenant.
func auditCmd() *cobra.Command {
	var tenant, user, principal, since string
	var limit int
	var asJSON, erasures bool
	cmd := &cobra.Command{
		Use:   "audit --tenant T [--user U]",
		Short: "List who read a user's memories (principal, purpose, query, facts and evidence returned)",
		Long: `Every recall and read records an access-log row: the principal (API key owner), the
purpose it gave, the user whose memory was read, the query and the ids returned.
--erasures lists the tenant's erasure requests instead, every one (who asked, when,
why, when it finished, counts).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(tenant) == "" {
				return badFlag("tenant", "is required")
			}
			f := storage.AccessFilter{UserID: user, Principal: principal, Limit: limit}
			if since != "" && !erasures {
				d, err := time.ParseDuration(since)
				if err != nil {
					return fmt.Errorf("--since: %q is not a duration such as 24h or 720h", since)
				}
				f.Since = time.Now().Add(-d)
			}
			return withStore(cmd, func(st *storage.Store) error {
				if erasures {
					return printErasures(cmd.Context(), cmd.OutOrStdout(), st, tenant, asJSON)
				}
				return printAccess(cmd.Context(), cmd.OutOrStdout(), st, tenant, f, asJSON)
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant (required)")
	cmd.Flags().StringVar(&user, "user", "", "only reads of this user's memories")
	cmd.Flags().StringVar(&principal, "principal", "", "only reads by this principal")
	cmd.Flags().StringVar(&since, "since", "", "only reads within this duration (e.g. 720h)")
	cmd.Flags().IntVar(&limit, "limit", 1000, "rows at most")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with every fact and evidence id)")
	cmd.Flags().BoolVar(&erasures, "erasures", false, "list the tenant's erasure requests instead (who asked, when, why)")
	return cmd
}

// printErasures lists the tenant's erasure requests.
func printErasures(ctx context.Context, out io.Writer, st *storage.Store, tenant string, asJSON bool) error {
	ts, err := st.ListErasureRequests(ctx, tenant)
	if err != nil {
		return err
	}
	return printRecords(out, asJSON, ts, "REQUESTED\tSUBJECT\tSTATUS\tREQUESTED BY\tREASON\tFINISHED\tCOUNTS", func(tw io.Writer) {
		for _, t := range ts {
			fin := ""
			if t.FinishedAt != nil {
				fin = t.FinishedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\t%s\t%s\n", t.RequestedAt.UTC().Format(time.RFC3339), t.SubjectType, t.SubjectID, t.Status, t.RequestedBy, t.Reason, fin, storage.MarshalCounts(t.Counts))
		}
	})
}

// printAccess lists the access log's rows f selects, and how many.
func printAccess(ctx context.Context, out io.Writer, st *storage.Store, tenant string, f storage.AccessFilter, asJSON bool) error {
	rows, err := st.ListAccess(ctx, tenant, f)
	if err != nil {
		return err
	}
	err = printRecords(out, asJSON, rows, "AT\tPRINCIPAL\tPURPOSE\tUSER\tFACTS\tEVIDENCE\tQUERY", func(tw io.Writer) {
		for _, r := range rows {
			q := r.Query
			if len([]rune(q)) > 60 {
				q = string([]rune(q)[:59]) + "…"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.At.UTC().Format(time.RFC3339), r.Principal, r.Purpose, r.UserID, len(r.FactIDs), len(r.EvidenceIDs), q)
		}
	})
	if err != nil || asJSON {
		return err
	}
	fmt.Fprintf(out, "%d read(s)\n", len(rows))
	return nil
}

package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
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
			st, err := openStore(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			out := cmd.OutOrStdout()
			if erasures {
				ts, err := st.ListErasureRequests(cmd.Context(), tenant)
				if err != nil {
					return err
				}
				if asJSON {
					return printValue(out, ts)
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "REQUESTED\tSUBJECT\tSTATUS\tREQUESTED BY\tREASON\tFINISHED\tCOUNTS")
				for _, t := range ts {
					fin := ""
					if t.FinishedAt != nil {
						fin = t.FinishedAt.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\t%s\t%s\n", t.RequestedAt.UTC().Format(time.RFC3339), t.SubjectType, t.SubjectID, t.Status, t.RequestedBy, t.Reason, fin, storage.MarshalCounts(t.Counts))
				}
				return tw.Flush()
			}
			f := storage.AccessFilter{UserID: user, Principal: principal, Limit: limit}
			if since != "" {
				d, err := time.ParseDuration(since)
				if err != nil {
					return fmt.Errorf("--since: %q is not a duration such as 24h or 720h", since)
				}
				f.Since = time.Now().Add(-d)
			}
			rows, err := st.ListAccess(cmd.Context(), tenant, f)
			if err != nil {
				return err
			}
			if asJSON {
				return printValue(out, rows)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AT\tPRINCIPAL\tPURPOSE\tUSER\tFACTS\tEVIDENCE\tQUERY")
			for _, r := range rows {
				q := r.Query
				if len([]rune(q)) > 60 {
					q = string([]rune(q)[:59]) + "…"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.At.UTC().Format(time.RFC3339), r.Principal, r.Purpose, r.UserID, len(r.FactIDs), len(r.EvidenceIDs), q)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(out, "%d read(s)\n", len(rows))
			return nil
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

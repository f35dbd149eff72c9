package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
)

// TestTrueStatuses: what the CLI reports is what happened (issue 50): each event of a
// batch its own status, a decided candidate off the pending list, every erasure
// request in the audit.
func TestTrueStatuses(t *testing.T) {
	s := startServe(t)
	tenant := "status-" + testenv.RandomID(6)
	agent := s.key(tenant, "travel-agent", "agent")
	reviewer := s.key(tenant, "alice", "reviewer")

	t.Run("a batch waiting for review reports each event's own status", func(t *testing.T) {
		// 20 stated budgets commit at once; 4 inferred seat preferences (one user
		// each) wait for a reviewer.
		var lines []string
		review := map[int]bool{}
		at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
		for i := range 24 {
			ts := at.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)
			if i%6 == 5 {
				review[i] = true
				lines = append(lines, fmt.Sprintf(`{"content": "我上次坐了靠窗的位置，挺好", "user_id": "r%d", "occurred_at": "%s"}`, i, ts))
				continue
			}
			lines = append(lines, fmt.Sprintf(`{"content": "预算不超过%d元", "user_id": "u%d", "occurred_at": "%s"}`, 5000+100*i, i%5, ts))
		}
		file := filepath.Join(t.TempDir(), "history.jsonl")
		require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644))

		out := s.as(agent, "ingest", "--schema", "travel", "--file", file, "--wait", "--no-progress").ok(t, "ingest --file --wait")
		assert.Contains(t, out, "24 event(s) in 1 batch(es): COMMITTED 20 PENDING_REVIEW 4")
		assert.NotContains(t, out, "RUNNING")
		row := regexp.MustCompile(`(?m)^(\d+)\s+([A-Z_]+)\s+jsonl-`)
		rows := 0
		for _, m := range row.FindAllStringSubmatch(out, -1) {
			var n int
			fmt.Sscan(m[1], &n)
			if n < 1 || n > 24 {
				continue
			}
			rows++
			want := "COMMITTED"
			if review[n-1] {
				want = "PENDING_REVIEW"
			}
			assert.Equal(t, want, m[2], "row %d", n)
		}
		assert.Equal(t, 24, rows, out)
		assert.Contains(t, out, "4 candidate(s) await review")

		// The same file again joins the same batch, still waiting: --json says the same.
		m := decode(t, s.as(agent, "ingest", "--schema", "travel", "--file", file, "--wait", "--json"), "ingest --file --wait --json")
		results := testenv.Dig(m, "results").([]any)
		require.Len(t, results, 24)
		for i := range results {
			want := "WRITE_STATUS_COMMITTED"
			if review[i] {
				want = "WRITE_STATUS_PENDING_REVIEW"
			}
			assert.Equal(t, want, str(m, "results", i, "status"), "event %d", i)
		}

		// A confirmed candidate leaves review list at once, though the batch
		// commits it only with the other three.
		pending := regexp.MustCompile(`(?m)^([0-9a-f-]{36})\s`).FindAllStringSubmatch(out, -1)
		require.Len(t, pending, 4, out)
		first, second := pending[0][1], pending[1][1]
		list := s.as(reviewer, "review", "list").ok(t, "review list")
		assert.Contains(t, list, first)
		done := s.as(reviewer, "review", "confirm", first, "--note", "asked the user").ok(t, "review confirm")
		assert.Contains(t, done, "commits once 3 other candidate(s) of the same write are decided")
		list = s.as(reviewer, "review", "list").ok(t, "review list after confirm")
		assert.NotContains(t, list, first, "a confirmed candidate leaves review list")
		assert.Contains(t, list, second)
		r := s.as(reviewer, "review", "reject", first)
		assert.NotEqual(t, 0, r.code)
		assert.Contains(t, r.stderr, "already decided by alice")
	})

	t.Run("every erasure request is kept and listed", func(t *testing.T) {
		for _, req := range [][2]string{{"dpo@example.com", "ticket 42"}, {"support-lead", "ticket 43"}} {
			s.as(agent, "ingest", "--user", "gone", "--schema", "travel", "--text", "预算不超过8000元", "--wait").ok(t, "ingest before erasure")
			s.engram(nil, "erase", "--tenant", tenant, "--user", "gone", "--requested-by", req[0], "--reason", req[1], "--wait").ok(t, "erase")
		}
		out := s.engram(nil, "audit", "--tenant", tenant, "--erasures").ok(t, "audit --erasures")
		for _, want := range []string{"dpo@example.com", "ticket 42", "support-lead", "ticket 43"} {
			assert.Contains(t, out, want)
		}
		assert.Equal(t, 2, strings.Count(out, "USER gone"), out)
		var rows []map[string]any
		require.NoError(t, json.Unmarshal([]byte(s.engram(nil, "audit", "--tenant", tenant, "--erasures", "--json").ok(t, "audit --erasures --json")), &rows))
		require.Len(t, rows, 2)
		assert.Equal(t, "support-lead", rows[0]["requestedBy"], "newest first")
		assert.Equal(t, "dpo@example.com", rows[1]["requestedBy"])
		assert.Equal(t, "ticket 42", rows[1]["reason"])
	})
}

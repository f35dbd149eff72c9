package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/server"
)

// ingestFields maps Event fields to the ingest flags that set them.
var ingestFields = fieldFlags{
	"user_id": "user", "session_id": "session", "task_id": "task", "department_id": "department",
	"agent_id": "agent", "schema": "schema", "content": "text", "idempotency_key": "idempotency-key",
	"occurred_at": "at", "wait_timeout": "wait-timeout", "source": "source",
}

const (
	maxContentBytes = 64 << 10
	maxKeyChars     = 200
	maxBatch        = 500
	maxWait         = 5 * time.Minute
)

func ingestCmd() *cobra.Command {
	var o apiOpts
	var ev engramv1.Event
	var text, file, at string
	var wait, noProgress bool
	var waitTimeout time.Duration
	var batchSize int
	cmd := &cobra.Command{
		Use:   "ingest (--text TEXT | --file EVENTS.jsonl) [--user U] [flags]",
		Short: "Send events through the write path (one --text, or a JSONL --file in batches)",
		Long: `Send an event (--text) or a file of events (--file, one JSON Event per line) through
Engram's write path: record → extract → validate → govern → commit.

A JSONL line is an engram.v1.Event in the API's JSON encoding, e.g.
  {"content": "预算不超过8000元", "user_id": "u1", "occurred_at": "2026-03-01T10:00:00Z"}
Fields a line leaves empty take the flags' values (--user, --session, --task, --schema …).
Lines without an idempotency_key get one derived from --idempotency-key (or the file's
hash) and the line number, so importing the same file twice writes nothing twice.
The file is read and checked completely before anything is sent.`,
		Example: `  engram ingest --user u1 --schema travel --text "预算不超过8000元" --wait
  engram ingest --user u1 --task trip-1 --schema travel --text "这次旅行预算调整到10000元" --wait
  engram ingest --user u1 --schema travel --file history.jsonl --wait`,
		Args: positional(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			switch {
			case f.Changed("text") && file != "":
				return badFlag("text", "give either --text or --file, not both")
			case !f.Changed("text") && file == "":
				return badFlag("text", "is required (or --file with JSONL events)")
			}
			if waitTimeout < 0 || waitTimeout > maxWait {
				return badFlag("wait-timeout", "%s is outside [0, %s]", waitTimeout, maxWait)
			}
			if f.Changed("wait-timeout") && !wait {
				return badFlag("wait-timeout", "only makes sense with --wait")
			}
			var err error
			if ev.OccurredAt, err = parseTime("at", at); err != nil {
				return err
			}
			if len(ev.IdempotencyKey) > maxKeyChars {
				return badFlag("idempotency-key", "is %d characters, the limit is %d", len(ev.IdempotencyKey), maxKeyChars)
			}
			var opts []client.IngestOption
			if wait {
				opts = append(opts, client.Wait())
				if waitTimeout > 0 {
					opts = append(opts, client.WaitFor(waitTimeout))
				}
			}
			if file != "" {
				if batchSize < 1 || batchSize > maxBatch {
					return badFlag("batch-size", "%d is outside [1, %d]", batchSize, maxBatch)
				}
				events, err := readEvents(file, &ev)
				if err != nil {
					return err
				}
				c, err := o.dial()
				if err != nil {
					return err
				}
				return ingestFile(cmd, &o, c, events, batchSize, opts, noProgress || o.asJSON)
			}
			ev.Content = text
			if strings.TrimSpace(text) == "" {
				return badFlag("text", "is empty")
			}
			if len(text) > maxContentBytes {
				return badFlag("text", "is %d bytes, the limit is %d", len(text), maxContentBytes)
			}
			res, err := call(cmd, &o, ingestFields, func(ctx context.Context, c *conn) (*engramv1.IngestResult, error) {
				return c.Ingest(ctx, &ev, opts...)
			})
			if err != nil {
				return err
			}
			return o.show(cmd, res, func(out io.Writer) error { return printIngestResult(out, res) })
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.StringVar(&text, "text", "", "the event's text (one event)")
	f.StringVar(&file, "file", "", "a JSONL file of events, one engram.v1.Event per line ('-' reads stdin)")
	f.StringVar(&ev.UserId, "user", "", "user the event belongs to (required unless the API key is bound to one)")
	f.StringVar(&ev.SessionId, "session", "", "conversation session id")
	f.StringVar(&ev.TaskId, "task", "", "task id (task-scoped memory: this trip's budget)")
	f.StringVar(&ev.DepartmentId, "department", "", "department id (default: the key's)")
	f.StringVar(&ev.AgentId, "agent", "", "agent id (default: the key's)")
	f.StringVar(&ev.Schema, "schema", "", "domain schema: general (default), customer_service, travel, or a stored one")
	f.StringVar(&ev.Source, "source", "cli", "where the event came from")
	f.StringVar(&at, "at", "", "when it happened, RFC 3339 (default: now)")
	f.StringVar(&ev.IdempotencyKey, "idempotency-key", "", "idempotency key (default: generated); with --file, the prefix of the lines' keys")
	f.BoolVar(&wait, "wait", false, "wait until the write is committed or awaits review")
	f.DurationVar(&waitTimeout, "wait-timeout", 0, "how long --wait may block (default 30s, at least 10ms, at most 5m)")
	f.IntVar(&batchSize, "batch-size", 100, "events per IngestBatch call with --file (at most 500)")
	f.BoolVar(&noProgress, "no-progress", false, "no progress bar with --file")
	return cmd
}

// readEvents reads and checks a JSONL file completely; defaults fill what a line
// leaves empty.
func readEvents(path string, def *engramv1.Event) ([]*engramv1.Event, error) {
	var r io.Reader
	if path == "-" {
		r = os.Stdin
	} else {
		fh, err := os.Open(path)
		if err != nil {
			return nil, badFlag("file", "%v", err)
		}
		defer fh.Close()
		r = fh
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, badFlag("file", "read %s: %v", path, err)
	}
	prefix := def.IdempotencyKey
	if prefix == "" {
		sum := sha256.Sum256(data)
		prefix = "jsonl-" + hex.EncodeToString(sum[:8])
	}
	var events []*engramv1.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 4*maxContentBytes)
	line := 0
	keys := map[string]int{}
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 || raw[0] == '#' {
			continue
		}
		where := fmt.Sprintf("%s:%d", path, line)
		ev := &engramv1.Event{}
		// As strict as the API: an unknown key names the closest field.
		if err := server.UnmarshalJSON(raw, ev); err != nil {
			return nil, badFlag("file", "%s: not an engram.v1.Event: %v", where, err)
		}
		fill := func(dst *string, v string) {
			if *dst == "" {
				*dst = v
			}
		}
		fill(&ev.UserId, def.UserId)
		fill(&ev.SessionId, def.SessionId)
		fill(&ev.TaskId, def.TaskId)
		fill(&ev.DepartmentId, def.DepartmentId)
		fill(&ev.AgentId, def.AgentId)
		fill(&ev.Schema, def.Schema)
		fill(&ev.Source, def.Source)
		if ev.OccurredAt == nil && def.OccurredAt != nil {
			ev.OccurredAt = proto.Clone(def.OccurredAt).(*timestamppb.Timestamp)
		}
		fill(&ev.IdempotencyKey, fmt.Sprintf("%s-%d", prefix, line))
		switch {
		case strings.TrimSpace(ev.Content) == "":
			return nil, badFlag("file", "%s: content is empty", where)
		case len(ev.Content) > maxContentBytes:
			return nil, badFlag("file", "%s: content is %d bytes, the limit is %d", where, len(ev.Content), maxContentBytes)
		case len(ev.IdempotencyKey) > maxKeyChars:
			return nil, badFlag("file", "%s: idempotency_key is %d characters, the limit is %d", where, len(ev.IdempotencyKey), maxKeyChars)
		}
		if ev.OccurredAt != nil && !ev.OccurredAt.IsValid() {
			return nil, badFlag("file", "%s: occurred_at is not a valid time", where)
		}
		if prev, dup := keys[ev.IdempotencyKey]; dup {
			return nil, badFlag("file", "%s: idempotency_key %q repeats line %d", where, ev.IdempotencyKey, prev)
		}
		keys[ev.IdempotencyKey] = line
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, badFlag("file", "%s:%d: %v", path, line+1, err)
	}
	if len(events) == 0 {
		return nil, badFlag("file", "%s holds no events", path)
	}
	return events, nil
}

func ingestFile(cmd *cobra.Command, o *apiOpts, c *conn, events []*engramv1.Event, size int, opts []client.IngestOption, quiet bool) error {
	ctx, cancel := o.context(cmd)
	defer cancel()
	var bar *progressbar.ProgressBar
	if !quiet {
		bar = progressbar.NewOptions(len(events),
			progressbar.OptionSetWriter(cmd.ErrOrStderr()),
			progressbar.OptionSetDescription("ingest"),
			progressbar.OptionShowCount(), progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(cmd.ErrOrStderr()) }))
	}
	all := &engramv1.IngestResponse{}
	var batches []string
	for start := 0; start < len(events); start += size {
		end := min(start+size, len(events))
		res, err := c.IngestBatch(ctx, events[start:end], opts...)
		if err != nil {
			err = c.apiErr(err, ingestFields)
			if start > 0 {
				return fmt.Errorf("events %d-%d (lines after the first %d events were not sent): %w", start+1, end, start, err)
			}
			return err
		}
		all.Results = append(all.Results, res.Results...)
		if res.BatchWorkflowId != "" {
			batches = append(batches, res.BatchWorkflowId)
		}
		if bar != nil {
			_ = bar.Add(end - start)
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	out := cmd.OutOrStdout()
	if o.asJSON {
		all.BatchWorkflowId = strings.Join(batches, ",")
		return printJSON(out, all)
	}
	counts := map[engramv1.WriteStatus]int{}
	var pending []*engramv1.PendingReview
	for _, r := range all.Results {
		counts[r.Status]++
		pending = append(pending, r.Pending...)
	}
	fmt.Fprintf(out, "%d event(s) in %d batch(es):", len(all.Results), len(batches))
	for s := engramv1.WriteStatus_WRITE_STATUS_RUNNING; s <= engramv1.WriteStatus_WRITE_STATUS_FAILED; s++ {
		if counts[s] > 0 {
			fmt.Fprintf(out, " %s %d", enumName(s.String(), "WRITE_STATUS_"), counts[s])
		}
	}
	fmt.Fprintln(out)
	if err := writeTable(out, "#\tSTATUS\tKEY\tEVENT\tOUTCOMES\tREASON", func(tw io.Writer) {
		for i, r := range all.Results {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", i+1, enumName(r.Status.String(), "WRITE_STATUS_"), clip(r.IdempotencyKey, 40), dash(short(r.EventId)), len(r.Outcomes), clip(r.Reason, 60))
		}
	}); err != nil {
		return err
	}
	printPending(out, pending)
	return nil
}

func printIngestResult(out io.Writer, r *engramv1.IngestResult) error {
	fmt.Fprintf(out, "%s  workflow %s  key %s", enumName(r.Status.String(), "WRITE_STATUS_"), r.WorkflowId, r.IdempotencyKey)
	if r.EventId != "" {
		fmt.Fprintf(out, "  event %s", r.EventId)
	}
	fmt.Fprintln(out)
	if r.Reason != "" {
		fmt.Fprintf(out, "reason: %s\n", r.Reason)
	}
	if len(r.Outcomes) > 0 {
		if err := writeTable(out, "CANDIDATE\tSTATUS\tACTION\tFACT\tMEMORY KEY\tREASON", func(tw io.Writer) {
			for _, oc := range r.Outcomes {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", oc.CandidateId, enumName(oc.Status.String(), "CANDIDATE_STATUS_"), dash(oc.Action), dash(oc.FactId), dash(oc.MemoryKey), clip(oc.Reason, 70))
			}
		}); err != nil {
			return err
		}
	}
	printPending(out, r.Pending)
	return nil
}

func printPending(out io.Writer, pending []*engramv1.PendingReview) {
	if len(pending) == 0 {
		return
	}
	fmt.Fprintf(out, "\n%d candidate(s) await review:\n", len(pending))
	_ = writeTable(out, "CANDIDATE\tCONTENT\tWHY REVIEW", func(tw io.Writer) {
		for _, p := range pending {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.CandidateId, clip(p.Content, 50), clip(p.Reason, 60))
		}
	})
	fmt.Fprintf(out, "decide with: engram review confirm|reject %s   (or edit --value V)\n", pending[0].CandidateId)
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func durationOrNil(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}

package storage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Task is the current state of a task, mirrored from its workflow so recall can
// read it without Temporal.
type Task struct {
	bun.BaseModel `bun:"table:tasks"`

	TenantID   string           `bun:"tenant_id,pk"`
	ID         string           `bun:"id,pk"`
	UserID     string           `bun:"user_id,notnull"`
	SessionID  string           `bun:"session_id,notnull"`
	AgentID    string           `bun:"agent_id,notnull"`
	Goal       string           `bun:"goal,notnull"`
	State      memory.TaskState `bun:"state,notnull"`
	Done       []string         `bun:"done,type:jsonb,notnull"`
	Todo       []string         `bun:"todo,type:jsonb,notnull"`
	NextStep   string           `bun:"next_step,notnull"`
	LastError  string           `bun:"last_error,notnull"`
	WorkflowID string           `bun:"workflow_id,notnull"`
	Seq        int64            `bun:"seq,notnull"`
	CreatedAt  time.Time        `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt  time.Time        `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
}

// TaskTransition is one change of a task's state: who, when, from, to, why.
type TaskTransition struct {
	bun.BaseModel `bun:"table:task_transitions"`

	ID        int64            `bun:"id,pk,autoincrement"`
	TenantID  string           `bun:"tenant_id,notnull"`
	TaskID    string           `bun:"task_id,notnull"`
	Seq       int64            `bun:"seq,notnull"`
	FromState memory.TaskState `bun:"from_state,notnull"`
	ToState   memory.TaskState `bun:"to_state,notnull"`
	Actor     string           `bun:"actor,notnull"`
	Reason    string           `bun:"reason,notnull"`
	Step      string           `bun:"step,notnull"`
	At        time.Time        `bun:"at,notnull"`
}

// RecordTaskTransition upserts the task row and appends the transition in one
// transaction. It is idempotent on (tenant, task, seq): a retried write changes
// nothing, and an older seq never overwrites a newer task row.
func (s *Store) RecordTaskTransition(ctx context.Context, tenantID string, t *Task, tr *TaskTransition) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	if strings.TrimSpace(t.ID) == "" {
		return memory.FieldError{Field: "task_id", Problem: "is empty"}
	}
	if !t.State.Valid() {
		return memory.FieldError{Field: "state", Problem: fmt.Sprintf("unknown task state %q", t.State)}
	}
	if !tr.ToState.Valid() {
		return memory.FieldError{Field: "to_state", Problem: fmt.Sprintf("unknown task state %q", tr.ToState)}
	}
	if tr.FromState != "" && !tr.FromState.Valid() {
		return memory.FieldError{Field: "from_state", Problem: fmt.Sprintf("unknown task state %q", tr.FromState)}
	}
	if tr.Seq <= 0 {
		return memory.FieldError{Field: "seq", Problem: "must be positive"}
	}
	t.TenantID, tr.TenantID, tr.TaskID, t.Seq = tenantID, tenantID, t.ID, tr.Seq
	if t.Done == nil {
		t.Done = []string{}
	}
	if t.Todo == nil {
		t.Todo = []string{}
	}
	if tr.At.IsZero() {
		tr.At = time.Now().UTC()
	}
	return s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		_, err := tx.NewInsert().Model(t).
			On("CONFLICT (tenant_id, id) DO UPDATE").
			Set("user_id = EXCLUDED.user_id, session_id = EXCLUDED.session_id, agent_id = EXCLUDED.agent_id").
			Set("goal = EXCLUDED.goal, state = EXCLUDED.state, done = EXCLUDED.done, todo = EXCLUDED.todo").
			Set("next_step = EXCLUDED.next_step, last_error = EXCLUDED.last_error, workflow_id = EXCLUDED.workflow_id").
			Set("seq = EXCLUDED.seq, updated_at = now()").
			Where("task.seq < EXCLUDED.seq").
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("upsert task: %w", err)
		}
		_, err = tx.NewInsert().Model(tr).On("CONFLICT (tenant_id, task_id, seq) DO NOTHING").Exec(ctx)
		if err != nil {
			return fmt.Errorf("insert task transition: %w", err)
		}
		return nil
	})
}

// GetTask loads a task of the tenant.
func (s *Store) GetTask(ctx context.Context, tenantID, taskID string) (*Task, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	t := new(Task)
	err := s.conn(ctx).NewSelect().Model(t).Where("tenant_id = ? AND id = ?", tenantID, taskID).Scan(ctx)
	return t, notFound(err)
}

// ListTaskTransitions returns a task's transitions in order.
func (s *Store) ListTaskTransitions(ctx context.Context, tenantID, taskID string) ([]TaskTransition, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []TaskTransition
	err := s.conn(ctx).NewSelect().Model(&out).Where("tenant_id = ? AND task_id = ?", tenantID, taskID).Order("seq").Scan(ctx)
	return out, err
}

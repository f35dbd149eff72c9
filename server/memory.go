package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/uptrace/bun"
	enumspb "go.temporal.io/api/enums/v1"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

type memoryServer struct{ Deps }

func validUUID(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return fieldErr(field, "is empty")
	}
	if _, err := uuid.Parse(v); err != nil {
		return fieldErr(field, fmt.Sprintf("%q is not a UUID", v))
	}
	return nil
}

// ---- reads ----

// restrictTo narrows fact queries (already filtered by tenant in storage) to what a
// restricted key may read: its users' facts and the shared facts of its tenant,
// department or agent. nil when the key may read the whole tenant.
func restrictTo(p *Principal) func(*bun.SelectQuery) *bun.SelectQuery {
	if !p.Restricted() {
		return nil
	}
	return storage.VisibleTo(p.Users(), p.DepartmentID, p.AgentID)
}

func (s *memoryServer) logAccess(ctx context.Context, p *Principal, purpose, user, query string, facts []storage.Fact) {
	if len(facts) == 0 {
		return
	}
	ids := make([]string, 0, len(facts))
	for _, f := range facts {
		ids = append(ids, f.ID)
	}
	if err := s.Store.LogAccess(ctx, p.TenantID, p.Name, purpose, user, query, ids, nil); err != nil {
		s.Logger.WarnContext(ctx, "access log write failed", "tenant", p.TenantID, "error", err)
	}
}

func (s *memoryServer) GetFact(ctx context.Context, req *connect.Request[engramv1.GetFactRequest]) (*connect.Response[engramv1.GetFactResponse], error) {
	p, err := require(ctx, "GetFact", "agent", "reviewer")
	if err != nil {
		return nil, err
	}
	if err := validUUID("fact_id", req.Msg.FactId); err != nil {
		return nil, err
	}
	var found []storage.Fact
	var ev []string
	err = s.read(ctx, "get fact", func(ctx context.Context, st *storage.Store) error {
		var err error
		if found, err = st.ListFacts(ctx, p.TenantID, storage.FactFilter{ID: req.Msg.FactId, Restrict: restrictTo(p), Limit: 1}); err != nil {
			return fmt.Errorf("load fact: %w", err)
		}
		if len(found) == 0 {
			return nil
		}
		if ev, err = st.FactEvidenceIDs(ctx, p.TenantID, found[0].ID); err != nil {
			return fmt.Errorf("load fact evidence: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, toConnect(ctx, err)
	}
	if len(found) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("fact_id: no fact %s", req.Msg.FactId))
	}
	f := found[0]
	s.logAccess(ctx, p, "api:GetFact", f.UserID, "", []storage.Fact{f})
	out := factOut(&f)
	out.EvidenceIds = ev
	return connect.NewResponse(&engramv1.GetFactResponse{Fact: out}), nil
}

func (s *memoryServer) ListFacts(ctx context.Context, req *connect.Request[engramv1.ListFactsRequest]) (*connect.Response[engramv1.ListFactsResponse], error) {
	p, err := require(ctx, "ListFacts", "agent", "reviewer")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	limit := int(m.Limit)
	switch {
	case limit < 0:
		return nil, fieldErr("limit", "is negative")
	case limit == 0:
		limit = 100
	case limit > 1000:
		return nil, fieldErr("limit", fmt.Sprintf("%d exceeds the limit of 1000", limit))
	}
	if m.UserId != "" && !p.MayActFor(m.UserId) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("user_id: the key of %q may not read user %q", p.Name, m.UserId))
	}
	ff := storage.FactFilter{UserID: m.UserId, TaskID: m.TaskId, MemoryKey: m.MemoryKey, Predicate: m.Predicate, Limit: limit, Restrict: restrictTo(p)}
	if m.Scope != 0 {
		ff.Scope = scopeIn(m.Scope)
		if !ff.Scope.Valid() {
			return nil, fieldErr("scope", fmt.Sprintf("unknown value %d", m.Scope))
		}
	}
	for i, st := range m.Statuses {
		fs := factStatusIn(st)
		if !fs.Valid() {
			return nil, fieldErr(fmt.Sprintf("statuses[%d]", i), fmt.Sprintf("unknown value %d", st))
		}
		ff.Statuses = append(ff.Statuses, fs)
	}
	if ff.KnownAt, err = timeIn("known_at", m.KnownAt); err != nil {
		return nil, err
	}
	asOf, err := timeIn("as_of", m.AsOf)
	if err != nil {
		return nil, err
	}
	var facts []storage.Fact
	err = s.read(ctx, "list facts", func(ctx context.Context, st *storage.Store) (err error) {
		if asOf.IsZero() {
			facts, err = st.ListFacts(ctx, p.TenantID, ff)
		} else {
			facts, err = st.FactsAsOf(ctx, p.TenantID, asOf, ff)
		}
		return err
	})
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("list facts: %w", err))
	}
	s.logAccess(ctx, p, "api:ListFacts", m.UserId, "", facts)
	out := &engramv1.ListFactsResponse{Facts: make([]*engramv1.Fact, len(facts))}
	for i := range facts {
		out.Facts[i] = factOut(&facts[i])
	}
	return connect.NewResponse(out), nil
}

func (s *memoryServer) FactHistory(ctx context.Context, req *connect.Request[engramv1.FactHistoryRequest]) (*connect.Response[engramv1.FactHistoryResponse], error) {
	p, err := require(ctx, "FactHistory", "agent", "reviewer")
	if err != nil {
		return nil, err
	}
	key := strings.TrimSpace(req.Msg.MemoryKey)
	if key == "" {
		return nil, fieldErr("memory_key", "is empty")
	}
	knownAt, err := timeIn("known_at", req.Msg.KnownAt)
	if err != nil {
		return nil, err
	}
	var facts []storage.Fact
	err = s.read(ctx, "fact history", func(ctx context.Context, st *storage.Store) (err error) {
		facts, err = st.FactHistoryKnownAt(ctx, p.TenantID, key, knownAt, restrictTo(p))
		return err
	})
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("fact history: %w", err))
	}
	if len(facts) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("memory_key: no facts with key %q", key))
	}
	s.logAccess(ctx, p, "api:FactHistory", facts[0].UserID, "", facts)
	out := &engramv1.FactHistoryResponse{}
	for i := range facts {
		out.Revisions = append(out.Revisions, factOut(&facts[i]))
	}
	return connect.NewResponse(out), nil
}

func (s *memoryServer) InvalidateFact(ctx context.Context, req *connect.Request[engramv1.InvalidateFactRequest]) (*connect.Response[engramv1.InvalidateFactResponse], error) {
	p, err := require(ctx, "InvalidateFact", "reviewer")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := validUUID("fact_id", m.FactId); err != nil {
		return nil, err
	}
	reason := strings.TrimSpace(m.Reason)
	if reason == "" {
		return nil, fieldErr("reason", "is empty: say why the fact is invalid")
	}
	f, err := s.Store.InvalidateFact(ctx, p.TenantID, m.FactId, fmt.Sprintf("invalidated by %s: %s", p.Name, reason))
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("fact_id: no fact %s", m.FactId))
	case errors.Is(err, storage.ErrFactNotActive):
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("fact_id: revision %d of %q is %s; only the ACTIVE revision can be invalidated", f.Revision, f.MemoryKey, f.Status))
	case err != nil:
		return nil, toConnect(ctx, err)
	}
	s.Logger.InfoContext(ctx, "fact invalidated", "tenant", p.TenantID, "fact_id", f.ID, "principal", p.Name)
	return connect.NewResponse(&engramv1.InvalidateFactResponse{Fact: factOut(f)}), nil
}

func (s *memoryServer) Forget(ctx context.Context, req *connect.Request[engramv1.ForgetRequest]) (*connect.Response[engramv1.ForgetResponse], error) {
	p, err := require(ctx, "Forget", "admin")
	if err != nil {
		return nil, err
	}
	user := strings.TrimSpace(req.Msg.UserId)
	if user == "" {
		return nil, fieldErr("user_id", "is empty: name the user to erase")
	}
	in := lifecycle.EraseSubjectInput{TenantID: p.TenantID, UserID: user, RequestedBy: p.Name, Reason: req.Msg.Reason}
	opts := lifecycle.EraseSubjectStartOptions(s.Config.TaskQueue, in)
	// Asking twice while an erasure runs joins it.
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	run, err := s.Temporal.ExecuteWorkflow(ctx, opts, lifecycle.EraseSubjectWorkflowName, in)
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("start erasure: %w", err))
	}
	s.Logger.InfoContext(ctx, "erasure started", "tenant", p.TenantID, "workflow_id", run.GetID(), "principal", p.Name)
	return connect.NewResponse(&engramv1.ForgetResponse{WorkflowId: run.GetID()}), nil
}

func (s *memoryServer) Recall(ctx context.Context, req *connect.Request[engramv1.RecallRequest]) (*connect.Response[engramv1.RecallResponse], error) {
	p, err := require(ctx, "Recall", "agent")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	user, err := userFor(p, "user_id", m.UserId)
	if err != nil {
		return nil, err
	}
	switch {
	case m.K < 0 || m.K > 100:
		return nil, fieldErr("k", fmt.Sprintf("%d is outside [0, 100]", m.K))
	case m.TokenBudget < 0 || m.TokenBudget > 8000:
		return nil, fieldErr("token_budget", fmt.Sprintf("%d is outside [0, 8000]", m.TokenBudget))
	case len(m.Query) > 8<<10:
		return nil, fieldErr("query", "longer than 8 KiB")
	}
	rq := recall.Request{
		Principal: recall.Principal{TenantID: p.TenantID, ID: p.Name, UserID: user, DepartmentID: p.DepartmentID, AgentID: p.AgentID},
		Query:     m.Query, SessionID: m.SessionId, TaskID: m.TaskId, K: int(m.K), TokenBudget: int(m.TokenBudget),
		Schema: m.Schema, Purpose: m.Purpose,
	}
	if m.AsOf != nil {
		if err := m.AsOf.CheckValid(); err != nil {
			return nil, fieldErr("as_of", err.Error())
		}
		rq.AsOf = m.AsOf.AsTime()
	}
	if rq.KnownAt, err = timeIn("known_at", m.KnownAt); err != nil {
		return nil, err
	}
	// rq.Schema may name a tenant's stored schema: the engine resolves it for the
	// caller's tenant and answers an unknown name as a schema field error.
	for i, sc := range m.Scopes {
		v := scopeIn(sc)
		if !v.Valid() {
			return nil, fieldErr(fmt.Sprintf("scopes[%d]", i), fmt.Sprintf("unknown value %d", sc))
		}
		rq.Scopes = append(rq.Scopes, v)
	}
	if s.Recaller == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("recall is not configured on this server"))
	}
	resp, err := s.Recaller.Recall(ctx, rq)
	if err != nil {
		return nil, toConnect(ctx, err)
	}
	return connect.NewResponse(recallOut(resp)), nil
}

func recallOut(r recall.Response) *engramv1.RecallResponse {
	out := &engramv1.RecallResponse{Context: r.Context, Tokens: int32(r.Tokens), AsOf: ts(r.AsOf)}
	for _, sec := range r.Sections {
		out.Sections = append(out.Sections, &engramv1.ContextSection{Title: sec.Title, Lines: sec.Lines})
	}
	for _, it := range r.Items {
		out.Items = append(out.Items, &engramv1.RecallItem{
			Kind: string(it.Kind), Id: it.ID, Content: it.Content, MemoryType: memoryTypeOut(it.MemoryType),
			Scope: scopeRefOut(it.Scope), Status: factStatusOut(it.Status), MemoryKey: it.MemoryKey, Predicate: it.Predicate,
			Object: it.Object, Revision: int32(it.Revision), ValidFrom: ts(it.ValidFrom), ValidUntil: tsp(it.ValidUntil),
			Confidence: it.Confidence, Score: it.Score, Retrievers: it.Retrievers, EvidenceIds: it.EvidenceIDs,
			OccurredAt: ts(it.OccurredAt), Why: it.Why,
		})
	}
	if t := r.Task; t != nil {
		out.Task = &engramv1.RecallTask{TaskId: t.TaskID, Goal: t.Goal, State: taskStateOut(t.State), Done: t.Done, Todo: t.Todo, NextStep: t.NextStep, LastError: t.LastError}
	}
	return out
}

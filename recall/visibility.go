package recall

import (
	"slices"
	"strings"
	"time"

	"github.com/engramhq/engram/memory"
)

// frag is a piece of SQL with bun "?" placeholders and its arguments.
type frag struct {
	sql  string
	args []any
}

func (f frag) and(o frag) frag {
	return frag{sql: "(" + f.sql + ") AND (" + o.sql + ")", args: append(slices.Clone(f.args), o.args...)}
}

// allows reports whether the visibility lets scope sc through: every scope unless
// Scopes restricts them.
func (v Visibility) allows(sc memory.Scope) bool {
	return len(v.Scopes) == 0 || slices.Contains(v.Scopes, sc)
}

// factBranches splits the facts a principal may see into branches that each have
// their own index: facts the user owns (USER, and the named SESSION and TASK) and
// shared facts (TENANT, the principal's DEPARTMENT and AGENT). Every branch carries
// the tenant. A retriever runs one sub-query per branch, so each is planned against
// its own, much smaller, set of rows. No branch: nothing is visible.
func factBranches(v Visibility, alias string) []frag {
	a := alias + "."
	var out []frag
	var own []string
	var ownArgs []any
	if v.allows(memory.ScopeUser) {
		own = append(own, a+"scope = 'USER'")
	}
	if v.SessionID != "" && v.allows(memory.ScopeSession) {
		own = append(own, "("+a+"scope = 'SESSION' AND "+a+"session_id = ?)")
		ownArgs = append(ownArgs, v.SessionID)
	}
	if v.TaskID != "" && v.allows(memory.ScopeTask) {
		own = append(own, "("+a+"scope = 'TASK' AND "+a+"task_id = ?)")
		ownArgs = append(ownArgs, v.TaskID)
	}
	if len(own) > 0 {
		out = append(out, frag{
			sql:  a + "tenant_id = ? AND " + a + "user_id = ? AND (" + strings.Join(own, " OR ") + ")",
			args: append([]any{v.TenantID, v.UserID}, ownArgs...),
		})
	}
	var shared []string
	var sharedArgs []any
	if v.allows(memory.ScopeTenant) {
		shared = append(shared, a+"scope = 'TENANT'")
	}
	if v.DepartmentID != "" && v.allows(memory.ScopeDepartment) {
		shared = append(shared, "("+a+"scope = 'DEPARTMENT' AND "+a+"department_id = ?)")
		sharedArgs = append(sharedArgs, v.DepartmentID)
	}
	if v.AgentID != "" && v.allows(memory.ScopeAgent) {
		shared = append(shared, "("+a+"scope = 'AGENT' AND "+a+"agent_id = ?)")
		sharedArgs = append(sharedArgs, v.AgentID)
	}
	if len(shared) > 0 {
		out = append(out, frag{
			sql:  a + "tenant_id = ? AND " + a + "scope IN ('TENANT', 'DEPARTMENT', 'AGENT') AND (" + strings.Join(shared, " OR ") + ")",
			args: append([]any{v.TenantID}, sharedArgs...),
		})
	}
	return out
}

// factVisible is the whole visibility predicate as one condition (used where a
// query names rows by id, e.g. hydrating hits of an external keyword index).
func factVisible(v Visibility, alias string) frag {
	bs := factBranches(v, alias)
	if len(bs) == 0 {
		return frag{sql: "false"}
	}
	var parts []string
	var args []any
	for _, b := range bs {
		parts = append(parts, "("+b.sql+")")
		args = append(args, b.args...)
	}
	return frag{sql: strings.Join(parts, " OR "), args: args}
}

// factTime keeps the revisions that hold at v.AsOf. Current recall reads ACTIVE
// facts whose window covers now; a recall as of a past time reads the revisions
// valid then, whatever became of them later, except a retraction made before it.
func factTime(v Visibility, alias string, current bool) frag {
	a := alias + "."
	if current {
		return frag{
			sql:  a + "status = 'ACTIVE' AND " + a + "valid_from <= ? AND (" + a + "valid_until IS NULL OR " + a + "valid_until > ?)",
			args: []any{v.AsOf, v.AsOf},
		}
	}
	return frag{
		sql: a + "valid_from <= ? AND (" + a + "valid_until IS NULL OR " + a + "valid_until > ?)" +
			" AND NOT (" + a + "status = 'INVALIDATED' AND " + a + "closed_at IS NOT NULL AND " + a + "closed_at <= ?)",
		args: []any{v.AsOf, v.AsOf, v.AsOf},
	}
}

// evidenceVisible: raw evidence (turns, documents, tool results) is personal. A
// principal sees its own user's evidence up to as_of; when Scopes leaves USER out,
// only the evidence of the named session or task.
func evidenceVisible(v Visibility, alias string) (frag, bool) {
	a := alias + "."
	base := frag{sql: a + "tenant_id = ? AND " + a + "user_id = ? AND " + a + "occurred_at <= ?", args: []any{v.TenantID, v.UserID, v.AsOf}}
	if v.allows(memory.ScopeUser) {
		return base, true
	}
	var parts []string
	var args []any
	if v.SessionID != "" && v.allows(memory.ScopeSession) {
		parts = append(parts, a+"session_id = ?")
		args = append(args, v.SessionID)
	}
	if v.TaskID != "" && v.allows(memory.ScopeTask) {
		parts = append(parts, a+"task_id = ?")
		args = append(args, v.TaskID)
	}
	if len(parts) == 0 {
		return frag{}, false
	}
	return base.and(frag{sql: strings.Join(parts, " OR "), args: args}), true
}

// VisibleFact reports whether a fact with these columns is visible to v: the same
// rule as the SQL, for tests and for callers that hold rows already.
func (v Visibility) VisibleFact(tenantID string, ref memory.ScopeRef, ownerUserID string, status memory.FactStatus, validFrom time.Time, validUntil, closedAt *time.Time, current bool) bool {
	if tenantID != v.TenantID || !v.allows(ref.Scope) {
		return false
	}
	switch ref.Scope {
	case memory.ScopeTenant:
	case memory.ScopeDepartment:
		if v.DepartmentID == "" || ref.DepartmentID != v.DepartmentID {
			return false
		}
	case memory.ScopeAgent:
		if v.AgentID == "" || ref.AgentID != v.AgentID {
			return false
		}
	case memory.ScopeUser:
		if ownerUserID != v.UserID {
			return false
		}
	case memory.ScopeSession:
		if ownerUserID != v.UserID || v.SessionID == "" || ref.SessionID != v.SessionID {
			return false
		}
	case memory.ScopeTask:
		if ownerUserID != v.UserID || v.TaskID == "" || ref.TaskID != v.TaskID {
			return false
		}
	default:
		return false
	}
	if validFrom.After(v.AsOf) || (validUntil != nil && !validUntil.After(v.AsOf)) {
		return false
	}
	if current {
		return status == memory.FactActive
	}
	return !(status == memory.FactInvalidated && closedAt != nil && !closedAt.After(v.AsOf))
}

// VisibleEvidence reports whether an evidence row is visible to v.
func (v Visibility) VisibleEvidence(tenantID, userID, sessionID, taskID string, occurredAt time.Time) bool {
	if tenantID != v.TenantID || userID != v.UserID || occurredAt.After(v.AsOf) {
		return false
	}
	if v.allows(memory.ScopeUser) {
		return true
	}
	return (v.SessionID != "" && v.allows(memory.ScopeSession) && sessionID == v.SessionID) ||
		(v.TaskID != "" && v.allows(memory.ScopeTask) && taskID == v.TaskID)
}

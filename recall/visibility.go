package recall

import (
	"reflect"
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

// allows reports whether the visibility lets scope sc through: every scope unless
// Scopes restricts them.
func (v Visibility) allows(sc memory.Scope) bool {
	return len(v.Scopes) == 0 || slices.Contains(v.Scopes, sc)
}

// The visibility rule is written once, as SQL over named parameters: the arms
// of facts (factArms), their time (factTimeSQL) and the visible turns
// (evidenceVisibleSQL). The recall statement binds the names as $n (bindNames);
// the queries built with bun (the external keyword index's search and
// hydration) bind them as "?" with the same values (bindQ, visibilityParams).

// visibilityParams are the parameters the visibility rule reads: the scopes v
// lets through, the named session and task, the principal's department and
// agent, and as_of.
func visibilityParams(v Visibility) stmtParams {
	sp := stmtParams{Tenant: v.TenantID, User: v.UserID, UserVisible: v.allows(memory.ScopeUser), TenantVisible: v.allows(memory.ScopeTenant), AsOf: v.AsOf.UTC()}
	if v.SessionID != "" && v.allows(memory.ScopeSession) {
		sp.Session = v.SessionID
	}
	if v.TaskID != "" && v.allows(memory.ScopeTask) {
		sp.Task = v.TaskID
	}
	if v.DepartmentID != "" && v.allows(memory.ScopeDepartment) {
		sp.Department = v.DepartmentID
	}
	if v.AgentID != "" && v.allows(memory.ScopeAgent) {
		sp.Agent = v.AgentID
	}
	return sp
}

// bindQ is sql with each @name as bun's "?" and sp's value for it.
func bindQ(sql string, sp stmtParams) frag {
	var args []any
	rv := reflect.ValueOf(sp)
	out := paramRe.ReplaceAllStringFunc(sql, func(m string) string {
		if m == "@@" {
			return m
		}
		i, ok := stmtParamIndex[m[1:]]
		if !ok {
			panic("recall: unknown parameter " + m)
		}
		args = append(args, rv.Field(i).Interface())
		return "?"
	})
	return frag{sql: out, args: args}
}

// factBranches are the arms of factArms that can let a fact through for v
// (alias f), each with its own index; none: nothing is visible.
func factBranches(v Visibility) []frag {
	sp := visibilityParams(v)
	on := []bool{sp.UserVisible || sp.Session != "" || sp.Task != "", sp.TenantVisible, sp.Department != "", sp.Agent != ""}
	var out []frag
	for i, arm := range factArms {
		if on[i] {
			out = append(out, bindQ(arm, sp))
		}
	}
	return out
}

// factVisible is the whole visibility predicate as one condition (used where a
// query names rows by id, e.g. hydrating hits of an external keyword index).
func factVisible(v Visibility) frag {
	bs := factBranches(v)
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

// factTime keeps the revisions that hold at v.AsOf (factTimeSQL; alias f).
func factTime(v Visibility, current bool) frag {
	return bindQ(factTimeSQL(current), visibilityParams(v))
}

// evidenceVisible: raw evidence (turns, documents, tool results) is personal. A
// principal sees its own user's evidence up to as_of; when Scopes leaves USER out,
// only the evidence of the named session or task (evidenceVisibleSQL; alias e).
func evidenceVisible(v Visibility) (frag, bool) {
	sp := visibilityParams(v)
	if !sp.UserVisible && sp.Session == "" && sp.Task == "" {
		return frag{}, false
	}
	return bindQ(evidenceVisibleSQL, sp), true
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

package typesense

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
)

// checkValue refuses values a filter cannot quote: Typesense quotes with
// backticks and has no escape for a backtick inside them.
func checkValue(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return memory.FieldError{Field: field, Problem: "is empty"}
	}
	if strings.ContainsRune(v, '`') {
		return memory.FieldError{Field: field, Problem: "contains a backtick"}
	}
	return nil
}

func eq(field, v string) string { return field + ":=`" + v + "`" }

// VisibilityFilter is the filter_by of a search. It is the rule recall applies in
// Postgres (recall/visibility.go), written for Typesense:
//
//	facts: the tenant; the user's own USER facts and those of the named SESSION
//	and TASK (user_id must match); shared TENANT facts, the principal's
//	DEPARTMENT and AGENT facts; Visibility.Scopes narrows these further. At
//	as_of a revision counts when valid_from <= as_of < valid_until, a closed
//	revision only through its closed window (so one closed without an end never
//	passes for current), and never after its retraction.
//	evidence: the user's own, occurred by as_of; when Scopes leaves USER out,
//	only that of the named session or task.
//
// ok is false when nothing at all is visible (no query should be sent).
func VisibilityFilter(v recall.Visibility, kinds []recall.Kind) (filter string, ok bool, err error) {
	if err := checkValue("tenant_id", v.TenantID); err != nil {
		return "", false, err
	}
	for _, c := range []struct{ field, v string }{
		{FieldUser, v.UserID}, {FieldDepartment, v.DepartmentID}, {FieldAgent, v.AgentID}, {FieldSession, v.SessionID}, {FieldTask, v.TaskID},
	} {
		if c.v != "" {
			if err := checkValue(c.field, c.v); err != nil {
				return "", false, err
			}
		}
	}
	wantFacts, wantEvidence := len(kinds) == 0, len(kinds) == 0
	for _, k := range kinds {
		switch k {
		case recall.KindFact:
			wantFacts = true
		case recall.KindEvidence:
			wantEvidence = true
		default:
			return "", false, memory.FieldError{Field: "kinds", Problem: fmt.Sprintf("unknown kind %q", k)}
		}
	}
	allows := func(s memory.Scope) bool { return len(v.Scopes) == 0 || slices.Contains(v.Scopes, s) }
	at := v.AsOf
	if at.IsZero() {
		at = time.Now()
	}
	t := at.Unix()
	var branches []string
	if wantFacts {
		var scopes []string
		if v.UserID != "" {
			var own []string
			if allows(memory.ScopeUser) {
				own = append(own, eq(FieldScope, string(memory.ScopeUser)))
			}
			if v.SessionID != "" && allows(memory.ScopeSession) {
				own = append(own, inScope(memory.ScopeSession, FieldSession, v.SessionID))
			}
			if v.TaskID != "" && allows(memory.ScopeTask) {
				own = append(own, inScope(memory.ScopeTask, FieldTask, v.TaskID))
			}
			if len(own) > 0 {
				scopes = append(scopes, "("+eq(FieldUser, v.UserID)+" && ("+strings.Join(own, " || ")+"))")
			}
		}
		if allows(memory.ScopeTenant) {
			scopes = append(scopes, eq(FieldScope, string(memory.ScopeTenant)))
		}
		if v.DepartmentID != "" && allows(memory.ScopeDepartment) {
			scopes = append(scopes, inScope(memory.ScopeDepartment, FieldDepartment, v.DepartmentID))
		}
		if v.AgentID != "" && allows(memory.ScopeAgent) {
			scopes = append(scopes, inScope(memory.ScopeAgent, FieldAgent, v.AgentID))
		}
		if len(scopes) > 0 {
			branches = append(branches, "("+strings.Join([]string{
				eq(FieldKind, string(recall.KindFact)),
				fmt.Sprintf("%s:<=%d", FieldValidFrom, t),
				fmt.Sprintf("%s:>%d", FieldValidUntil, t),
				fmt.Sprintf("(%s || %s:<%d)", eq(FieldStatus, string(memory.FactActive)), FieldValidUntil, OpenUntil),
				fmt.Sprintf("(%s:!=`%s` || %s:>%d)", FieldStatus, memory.FactInvalidated, FieldClosedAt, t),
				"(" + strings.Join(scopes, " || ") + ")",
			}, " && ")+")")
		}
	}
	if wantEvidence && v.UserID != "" {
		parts := []string{eq(FieldKind, string(recall.KindEvidence)), eq(FieldUser, v.UserID), fmt.Sprintf("%s:<=%d", FieldOccurredAt, t)}
		narrow := []string{}
		if !allows(memory.ScopeUser) {
			if v.SessionID != "" && allows(memory.ScopeSession) {
				narrow = append(narrow, eq(FieldSession, v.SessionID))
			}
			if v.TaskID != "" && allows(memory.ScopeTask) {
				narrow = append(narrow, eq(FieldTask, v.TaskID))
			}
		}
		if allows(memory.ScopeUser) || len(narrow) > 0 {
			if len(narrow) > 0 {
				parts = append(parts, "("+strings.Join(narrow, " || ")+")")
			}
			branches = append(branches, "("+strings.Join(parts, " && ")+")")
		}
	}
	if len(branches) == 0 {
		return "", false, nil
	}
	return eq(FieldTenant, v.TenantID) + " && (" + strings.Join(branches, " || ") + ")", true, nil
}

func deleteFilter(tenantID string, f Filter) (string, error) {
	if err := checkValue("tenant_id", tenantID); err != nil {
		return "", err
	}
	parts := []string{eq(FieldTenant, tenantID)}
	if f.Kind != "" {
		if f.Kind != recall.KindFact && f.Kind != recall.KindEvidence {
			return "", memory.FieldError{Field: "kind", Problem: fmt.Sprintf("unknown kind %q", f.Kind)}
		}
		parts = append(parts, eq(FieldKind, string(f.Kind)))
	}
	for _, c := range []struct{ field, v string }{
		{FieldUser, f.UserID}, {FieldSession, f.SessionID}, {FieldTask, f.TaskID}, {FieldMemoryKey, f.MemoryKey},
	} {
		if c.v == "" {
			continue
		}
		if err := checkValue(c.field, c.v); err != nil {
			return "", err
		}
		parts = append(parts, eq(c.field, c.v))
	}
	if f.IndexedBefore > 0 {
		parts = append(parts, fmt.Sprintf("%s:<%d", FieldIndexedAt, f.IndexedBefore))
	}
	if len(parts) == 1 && !f.All {
		return "", memory.FieldError{Field: "filter", Problem: "selects the whole tenant; set All to mean it"}
	}
	return strings.Join(parts, " && "), nil
}

// inScope matches the documents of one scope that belong to id (a session, task,
// department or agent) by their field.
func inScope(scope memory.Scope, field, id string) string {
	return "(" + eq(FieldScope, string(scope)) + " && " + eq(field, id) + ")"
}

package suggest

import "testing"

func TestClosest(t *testing.T) {
	event := []string{"userId", "taskId", "sessionId", "occurredAt", "content", "actorType", "user_id", "task_id", "session_id", "occurred_at", "actor_type"}
	recall := []string{"query", "userId", "k", "tokenBudget", "asOf", "knownAt", "token_budget", "as_of", "known_at", "user_id"}
	cases := []struct {
		name  string
		known []string
		want  string
	}{
		{"taskID", event, "taskId"},             // case
		{"TASKID", event, "taskId"},             // case
		{"task_ID", event, "task_id"},           // case, the client's snake_case
		{"occured_at", event, "occurred_at"},    // a dropped letter, snake_case
		{"occuredAt", event, "occurredAt"},      // a dropped letter
		{"ocucrredAt", event, "occurredAt"},     // two letters swapped
		{"contnet", event, "content"},           // two letters swapped
		{"actortype", event, "actorType"},       // case
		{"budgetTokens", recall, "tokenBudget"}, // the words in another order
		{"budget_tokens", recall, "token_budget"},
		{"K", recall, "k"},
		{"colour", event, ""},
		{"colour", recall, ""},
		{"", event, ""},
	}
	for _, tc := range cases {
		if got := Closest(tc.name, tc.known); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "abc", 0}, {"", "abc", 3}, {"abc", "", 3},
		{"abc", "acb", 1}, {"abc", "ab", 1}, {"abc", "abd", 1}, {"kitten", "sitting", 3},
		{"ca", "abc", 3}, // optimal string alignment: no edit of a swapped pair
		{"预算", "算预", 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

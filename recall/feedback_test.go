package recall_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engramhq/engram/recall"
)

// The feedback pass lifts a found turn like the best turn above one merely like
// the question, keeps the best turn first, and reads no other tenant's turns.
func TestFeedbackLiftsTurnsLikeTheLeaders(t *testing.T) {
	ctx := context.Background()
	c := newConvo(t, time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC))
	const tenant, other = "acme", "globex"
	lead := c.say(tenant, "dave", "s1", "I rebuilt the Mustang engine: new carburetor, pistons and gaskets, restored last spring")
	c.say(tenant, "dave", "s1", "How was your week?")
	boat := c.say(tenant, "dave", "s1", "My brother says his boat needs a new engine")
	c.say(tenant, "dave", "s1", "The weather was lovely")
	like := c.say(tenant, "dave", "s1", "Its carburetor, pistons and gaskets were rebuilt and the engine restored by spring")
	theirs := c.say(other, "dave", "s1", "Its carburetor, pistons and gaskets were rebuilt and the engine restored by spring")
	recallWith := func(feedback float64) recall.Response {
		t.Helper()
		f := recall.DefaultFusion()
		f.Adjacent, f.Feedback, f.FeedbackFrom = 0, feedback, 1
		eng := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff, Fusion: f})
		defer eng.Close()
		resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: "dave"}, Query: "What happened to the Mustang engine?", K: 10, AsOf: c.at})
		if err != nil {
			t.Fatal(err)
		}
		if rankOf(resp.Items, theirs.ID) != 0 {
			t.Fatal("another tenant's turn was returned")
		}
		if r := rankOf(resp.Items, lead.ID); r != 1 {
			t.Fatalf("the Mustang turn ranked %d with feedback %g, want 1 (%+v)", r, feedback, resp.Items)
		}
		return resp
	}
	off := recallWith(0)
	if rankOf(off.Items, like.ID) < rankOf(off.Items, boat.ID) {
		t.Fatalf("without feedback the turn like the leader already ranks above the boat's (%d, %d): the test needs it below",
			rankOf(off.Items, like.ID), rankOf(off.Items, boat.ID))
	}
	on := recallWith(2)
	r := rankOf(on.Items, like.ID)
	if r == 0 || r > rankOf(on.Items, boat.ID) {
		t.Fatalf("with feedback the turn like the leader ranks %d, the boat's %d: want it above (%s)", r, rankOf(on.Items, boat.ID), whys(on.Items))
	}
	if it := on.Items[r-1]; !strings.Contains(it.Why, "feedback #") {
		t.Fatalf("the turn like the leader says why %q, want the feedback pass named", it.Why)
	}
}

// whys lists items' content, score and why, for a failure's message.
func whys(items []recall.Item) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(fmt.Sprintf("\n  %.3f %q: %s", it.Score, it.Content, it.Why))
	}
	return b.String()
}

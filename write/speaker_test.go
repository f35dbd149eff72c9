package write

import (
	"testing"

	"github.com/engramhq/engram/memory"
)

// What a named speaker says is about that speaker, whichever extractor proposed
// it; an event of the user itself (or without an actor id) keeps "user", and an
// entity subject is never renamed.
func TestSpeakerSubject(t *testing.T) {
	named := memory.IngestEvent{UserID: "conv-1", ActorType: "USER", ActorID: "Maya"}
	self := memory.IngestEvent{UserID: "u1", ActorType: "USER", ActorID: "u1"}
	agent := memory.IngestEvent{UserID: "u1", ActorType: "AGENT", ActorID: "bot"}
	for _, tc := range []struct {
		ev      memory.IngestEvent
		subject string
		want    string
	}{
		{named, "user", "Maya"},
		{named, "", "Maya"},
		{named, "maya", "Maya"},
		{named, "Order:12345", "Order:12345"},
		{named, "department", "department"},
		{self, "user", "user"},
		{agent, "user", "user"},
	} {
		got := speakerSubject(memory.Candidate{Subject: tc.subject, Content: tc.subject + " prefers: tea"}, tc.ev)
		if got.Subject != tc.want {
			t.Errorf("%+v subject %q: got %q, want %q", tc.ev, tc.subject, got.Subject, tc.want)
		}
	}
	if s := SpeakerOf(named); s != "Maya" {
		t.Errorf("SpeakerOf = %q", s)
	}
}

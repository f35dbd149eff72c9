package recall

import (
	"strings"
	"testing"
)

// Names for the second hop come from inside sentences; a capitalised word that only
// opens a sentence is not one, nor a speaker, nor a word of the question.
func TestExpansionNames(t *testing.T) {
	top := []Item{
		{Kind: KindEvidence, Content: "Actually, contact me via sms from now on. Domino started limping on Tuesday.", Speaker: "Daniel"},
		{Kind: KindEvidence, Content: "The vet says Domino is fine, and Chioma agrees. Daniel laughed.", Speaker: "Priya"},
	}
	got := expansionNames("How is Daniel's dog?", top, 4)
	want := []string{"Domino", "Chioma"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %v, want %v", got, want)
	}
}

package server

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
)

// wait_timeout: unset or zero is the default, below the minimum is raised to it
// (a 1 ms wait is a 10 ms one), above the limit or negative is refused by name.
func TestWaitTimeout(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0: defaultWait, time.Nanosecond: minWait, time.Millisecond: minWait, minWait: minWait,
		100 * time.Millisecond: 100 * time.Millisecond, maxWait: maxWait,
	} {
		got, err := waitTimeout("wait_timeout", durationpb.New(in), false)
		if err != nil || got != want {
			t.Errorf("wait_timeout %s: %s, %v; want %s", in, got, err, want)
		}
	}
	if got, err := waitTimeout("wait_timeout", (*durationpb.Duration)(nil), true); err != nil || got != defaultWait {
		t.Errorf("unset: %s, %v", got, err)
	}
	for _, in := range []time.Duration{-time.Millisecond, maxWait + time.Second} {
		_, err := waitTimeout("wait_timeout", durationpb.New(in), false)
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("wait_timeout %s: %v, want invalid_argument", in, err)
		}
	}
}

package cpustat

import (
	"runtime"
	"testing"
	"time"
)

func TestReadMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/stat is Linux's")
	}
	a, ok := ReadMachine()
	if !ok || a.Total <= 0 || a.Steal < 0 || a.Steal > a.Total {
		t.Fatalf("ReadMachine = %+v, %v", a, ok)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	b, _ := ReadMachine()
	if b.Total < a.Total {
		t.Fatalf("machine CPU time went back: %v → %v", a.Total, b.Total)
	}
	if p := StealPercent(a, b); p < 0 || p > 100 {
		t.Fatalf("steal %.1f%%", p)
	}
	if p := StealPercent(b, b); p != 0 {
		t.Fatalf("steal over no time = %.1f%%", p)
	}
	if p := StealPercent(Machine{Total: time.Second}, Machine{Total: 3 * time.Second, Steal: time.Second}); p != 50 {
		t.Fatalf("steal = %.1f%%, want 50", p)
	}
}

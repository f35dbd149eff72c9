package memory

import (
	"crypto/sha256"
	"encoding/hex"
)

// TemporalIDPart is s as a part of a workflow id: unchanged when it is printable
// ASCII of at most 200 bytes (every id that ever worked keeps its workflow), else
// "h-" and a hash of it. A workflow id travels in a gRPC header
// (temporal-resource-id), which refuses anything but printable ASCII, and Temporal
// refuses ids over 1,000 bytes: a user named 张三, or one with a 1,000-character id,
// could otherwise never be erased.
func TemporalIDPart(s string) string {
	ok := len(s) <= 200
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] >= 0x20 && s[i] < 0x7f
	}
	if ok {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return "h-" + hex.EncodeToString(h[:16])
}

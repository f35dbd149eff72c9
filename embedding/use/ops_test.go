package use

import (
	"slices"
	"testing"
)

// TestBcast checks the broadcasting paths (same shape, scalar, row, column, mixed)
// against element-by-element index arithmetic.
func TestBcast(t *testing.T) {
	for _, s := range [][2][]int{
		{{2, 3}, {2, 3}}, {{2, 3}, {}}, {{}, {2, 3}}, {{1, 4, 5}, {5}}, {{1, 4, 5}, {1, 4, 1}},
		{{5}, {1, 4, 1}}, {{2, 3, 4, 5}, {2, 1, 1, 5}}, {{3, 1}, {1, 4}}, {{1}, {1}}, {{0, 3}, {3}},
	} {
		as, bs := s[0], s[1]
		a, b := randFloats(numElements(as)), randFloats(numElements(bs))
		got, shape, err := bcast(a, as, b, bs, makeSlice[float32], func(d, x, y []float32) { arithRow(binSub, d, x, y) })
		if err != nil {
			t.Fatal(err)
		}
		want, _ := broadcastShape(as, bs)
		if !slices.Equal(shape, want) {
			t.Fatalf("%v, %v: shape %v, want %v", as, bs, shape, want)
		}
		sa, sb := bstrides(as, shape), bstrides(bs, shape)
		ss := strides(shape)
		for e := range got {
			pa, pb := 0, 0
			for k := range shape {
				i := e / ss[k] % shape[k]
				pa += i * sa[k]
				pb += i * sb[k]
			}
			if got[e] != a[pa]-b[pb] {
				t.Fatalf("%v, %v: element %d = %v, want %v", as, bs, e, got[e], a[pa]-b[pb])
			}
		}
	}
}

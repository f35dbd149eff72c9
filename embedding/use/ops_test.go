package use

import (
	"math"
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

// TestReduction checks Sum, Max and Mean over several axes, none, and with
// keep_dims against direct sums.
func TestReduction(t *testing.T) {
	shape := []int{2, 3, 4}
	x := floatTensor(shape, randFloats(24))
	at := func(i, j, k int) float64 { return float64(x.f[i*12+j*4+k]) }
	for _, c := range []struct {
		kind  reduceKind
		axes  []int32
		keep  bool
		shape []int
		want  func(o []int) float64 // o indexes the reduced result as [i, j, k] with reduced axes 0
	}{
		{reduceSum, []int32{0, 2}, false, []int{3}, func(o []int) (s float64) {
			for i := range 2 {
				for k := range 4 {
					s += at(i, o[1], k)
				}
			}
			return s
		}},
		{reduceMax, []int32{-1}, true, []int{2, 3, 1}, func(o []int) float64 {
			m := math.Inf(-1)
			for k := range 4 {
				m = max(m, at(o[0], o[1], k))
			}
			return m
		}},
		{reduceMean, []int32{1}, false, []int{2, 4}, func(o []int) (s float64) {
			for j := range 3 {
				s += at(o[0], j, o[2])
			}
			return s / 3
		}},
		{reduceSum, []int32{}, false, []int{2, 3, 4}, func(o []int) float64 { return at(o[0], o[1], o[2]) }},
	} {
		n := &node{attrB: map[string]bool{"keep_dims": c.keep}}
		out, err := reduction(c.kind)(newRunState(), n, []*tensor{x, intTensor([]int{len(c.axes)}, c.axes)})
		if err != nil {
			t.Fatal(err)
		}
		got := out[0]
		if !slices.Equal(got.shape, c.shape) {
			t.Fatalf("axes %v: shape %v, want %v", c.axes, got.shape, c.shape)
		}
		reduced := map[int]bool{}
		for _, a := range c.axes {
			reduced[(int(a)+3)%3] = true
		}
		e := 0
		for i := range 2 {
			for j := range 3 {
				for k := range 4 {
					o := []int{i, j, k}
					first := true
					for a, v := range o {
						if reduced[a] && v != 0 {
							first = false
						}
					}
					if !first {
						continue
					}
					for a := range o {
						if reduced[a] {
							o[a] = 0
						}
					}
					if d := float64(got.f[e]) - c.want(o); math.Abs(d) > 1e-5 {
						t.Fatalf("axes %v: element %d = %v, want %v", c.axes, e, got.f[e], c.want(o))
					}
					e++
				}
			}
		}
	}
}

// TestArithRow checks that the SIMD rows give the portable loops' results, bit for
// bit, at every length around the vector width, in place too.
func TestArithRow(t *testing.T) {
	simd := useSIMD
	defer func() { useSIMD = simd }()
	for _, op := range []binOp{binAdd, binSub, binMul, binDiv, binMax} {
		for n := range 40 {
			x, y := randFloats(n), randFloats(n)
			want, got := make([]float32, n), make([]float32, n)
			useSIMD = false
			arithRow(op, want, x, y)
			useSIMD = simd
			arithRow(op, got, x, y)
			if !slices.Equal(got, want) {
				t.Fatalf("op %d, n %d: %v, want %v", op, n, got, want)
			}
			arithRow(op, x, x, y)
			if !slices.Equal(x, want) {
				t.Fatalf("op %d, n %d in place: %v, want %v", op, n, x, want)
			}
		}
	}
}

package use

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func randFloats(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = rand.Float32() - 0.5
	}
	return x
}

func TestMatmulNT(t *testing.T) {
	simd := useSIMD
	defer func() { useSIMD = simd }()
	for _, useSIMD = range []bool{false, simd} {
		testMatmulNT(t)
	}
}

func testMatmulNT(t *testing.T) {
	t.Helper()
	for _, s := range [][3]int{{1, 1, 1}, {3, 5, 7}, {4, 2, 3}, {9, 33, 17}, {17, 70, 64}, {40, 96, 300}, {5, 3, 8}, {7, 9, 16}, {6, 5, 513}, {3, 7, 24}, {1, 9, 40}, {2, 6, 1536}, {15, 130, 15}} {
		m, n, k := s[0], s[1], s[2]
		a, bt := randFloats(m*k), randFloats(n*k)
		c := make([]float32, m*n)
		matmulNT(m, n, k, a, bt, c)
		checkProduct(t, fmt.Sprint(s, " single"), m, n, k, a, bt, c)
		// Half-precision b: the product of the values it holds.
		bh := make([]uint16, len(bt))
		for i, v := range bt {
			bh[i] = floatToHalf(v)
			bt[i] = halfToFloat(bh[i])
		}
		matmulNT(m, n, k, a, bh, c)
		checkProduct(t, fmt.Sprint(s, " half"), m, n, k, a, bt, c)
	}
}

func checkProduct(t *testing.T, what string, m, n, k int, a, bt, c []float32) {
	t.Helper()
	for i := range m {
		for j := range n {
			var want float64
			for p := range k {
				want += float64(a[i*k+p]) * float64(bt[j*k+p])
			}
			if d := float64(c[i*n+j]) - want; d > 1e-4 || d < -1e-4 {
				t.Fatalf("simd %v, %s: c[%d,%d] = %v, want %v", useSIMD, what, i, j, c[i*n+j], want)
			}
		}
	}
}

// TestFloatToHalf checks that every half survives the round trip and that values
// between two halves round to the nearer, ties to the even one.
func TestFloatToHalf(t *testing.T) {
	for h := range 0x7c00 { // the finite positive halves
		for _, sign := range []uint16{0, 0x8000} {
			if got := floatToHalf(halfToFloat(uint16(h) | sign)); got != uint16(h)|sign {
				t.Fatalf("half %#04x: round trip gives %#04x", uint16(h)|sign, got)
			}
		}
		if h == 0x7bff {
			break
		}
		lo, hi := float64(halfToFloat(uint16(h))), float64(halfToFloat(uint16(h+1)))
		mid := float32((lo + hi) / 2)
		want := uint16(h)
		if h&1 == 1 {
			want++
		}
		if got := floatToHalf(mid); got != want {
			t.Fatalf("midpoint of %#04x and %#04x gives %#04x, want %#04x", h, h+1, got, want)
		}
		above := math.Nextafter32(mid, float32(hi))
		if got := floatToHalf(above); got != uint16(h+1) {
			t.Fatalf("just above the midpoint of %#04x and %#04x gives %#04x", h, h+1, got)
		}
	}
	if floatToHalf(70000) != 0x7c00 || floatToHalf(float32(math.Inf(-1))) != 0xfc00 {
		t.Fatal("out of range values are not ±Inf")
	}
}

func BenchmarkMatmulNT(b *testing.B) {
	for _, s := range [][3]int{{15, 1536, 512}, {1, 512, 512}, {448, 1536, 512}} {
		m, n, k := s[0], s[1], s[2]
		b.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(b *testing.B) {
			a, bt, c := randFloats(m*k), randFloats(n*k), make([]float32, m*n)
			for b.Loop() {
				matmulNT(m, n, k, a, bt, c)
			}
			b.ReportMetric(float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

// TestPackK checks the padded and transposed layouts against their definitions.
func TestPackK(t *testing.T) {
	for _, s := range [][3]int{{3, 5, 8}, {40, 33, 40}, {1, 7, 7}, {70, 1, 8}} {
		rows, k, kp := s[0], s[1], s[2]
		x := randFloats(rows * k)
		for _, transposed := range []bool{false, true} {
			dst := randFloats(rows * kp) // packK overwrites everything
			packK(dst, x, rows, k, kp, transposed)
			for i := range rows {
				for p := range kp {
					var want float32
					switch {
					case p >= k:
					case transposed:
						want = x[p*rows+i]
					default:
						want = x[i*k+p]
					}
					if dst[i*kp+p] != want {
						t.Fatalf("%v transposed %v: [%d,%d] = %v, want %v", s, transposed, i, p, dst[i*kp+p], want)
					}
				}
			}
		}
	}
}

// BenchmarkMatmulNTPrecision compares the weights in half and in single precision
// (the same values: a half converts to single exactly) at the shapes of one
// sentence's tokens and of a batch of them.
func BenchmarkMatmulNTPrecision(b *testing.B) {
	for _, s := range [][3]int{{1, 1536, 512}, {15, 1536, 512}, {64, 1536, 512}, {448, 1536, 512}} {
		m, n, k := s[0], s[1], s[2]
		a, c := randFloats(m*k), make([]float32, m*n)
		h := make([]uint16, n*k)
		f := make([]float32, n*k)
		for i, v := range randFloats(n * k) {
			h[i] = floatToHalf(v)
			f[i] = halfToFloat(h[i])
		}
		b.Run(fmt.Sprintf("half/%dx%dx%d", m, n, k), func(b *testing.B) {
			for b.Loop() {
				matmulNT(m, n, k, a, h, c)
			}
			b.ReportMetric(float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
		b.Run(fmt.Sprintf("single/%dx%dx%d", m, n, k), func(b *testing.B) {
			for b.Loop() {
				matmulNT(m, n, k, a, f, c)
			}
			b.ReportMetric(float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

package use

import (
	"fmt"
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
		for i := range m {
			for j := range n {
				var want float64
				for p := range k {
					want += float64(a[i*k+p]) * float64(bt[j*k+p])
				}
				if d := float64(c[i*n+j]) - want; d > 1e-4 || d < -1e-4 {
					t.Fatalf("simd %v, %v: c[%d,%d] = %v, want %v", useSIMD, s, i, j, c[i*n+j], want)
				}
			}
		}
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

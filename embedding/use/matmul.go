package use

import (
	"runtime"
	"sync"
)

// matmulNT computes c = a·btᵀ for row-major a (m×k), bt (n×k) and c (m×n), overwriting
// c. Taking the right operand transposed makes every inner loop a dot product of two
// contiguous rows; weights are transposed once at load. bt is single precision, or
// half precision for weights (see graph.pretranspose); a and c are always single.
//
// Columns are processed in tiles so a tile of bt stays in cache while every row block
// of a passes over it; large products split their tiles across GOMAXPROCS goroutines.
func matmulNT[B float32 | uint16](m, n, k int, a []float32, bt []B, c []float32) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		clear(c[:m*n])
		return
	}
	// The assembly kernels read whole rows: check the extents once.
	if len(a) < m*k || len(bt) < n*k || len(c) < m*n {
		panic("use: matmul operands shorter than their shapes")
	}
	// The SIMD kernels take k in steps of 8: zero columns make up the rest (attention
	// over a sentence multiplies by k = its token count).
	if kp := padded(k); kp != k {
		pa, pb := make([]float32, m*kp), make([]B, n*kp)
		packK(pa, a, m, k, kp, false)
		packK(pb, bt, n, k, kp, false)
		a, bt, k = pa, pb, kp
	}
	const tile = 48 // a multiple of the 4×3 kernel's three columns
	tiles := (n + tile - 1) / tile
	workers := runtime.GOMAXPROCS(0)
	if work := m * n * k; work < 1<<18 || tiles < 2 {
		workers = 1
	}
	workers = min(workers, tiles)
	// Rows go in blocks small enough to stay in cache while the tiles of bt pass.
	rowBlock := max(4, (32<<10)/(4*k)&^3)
	run := func(t0, t1 int) {
		var scratch []float32
		for i0 := 0; i0 < m; i0 += rowBlock {
			i1 := min(i0+rowBlock, m)
			for t := t0; t < t1; t++ {
				j0 := t * tile
				scratch = matmulBlock(i1-i0, n, k, a[i0*k:], bt, c[i0*n:], j0, min(j0+tile, n), scratch)
			}
		}
	}
	if workers <= 1 {
		run(0, tiles)
		return
	}
	var wg sync.WaitGroup
	per := (tiles + workers - 1) / workers
	for w := 0; w < workers; w++ {
		t0, t1 := w*per, min((w+1)*per, tiles)
		if t0 >= t1 {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(t0, t1)
		}()
	}
	wg.Wait()
}

// padded is the k the kernels take for k: a multiple of 8 for the SIMD ones.
func padded(k int) int {
	if useSIMD {
		return (k + 7) &^ 7
	}
	return k
}

// matmulBlock computes columns [j0, j1) of c = a·btᵀ: with the SIMD kernels, or with
// the portable one on those rows of bt in single precision (converted into scratch,
// which it returns for the next block).
func matmulBlock[B float32 | uint16](m, n, k int, a []float32, bt []B, c []float32, j0, j1 int, scratch []float32) []float32 {
	if useSIMD {
		matmulBlockSIMD(m, n, k, a, bt, c, j0, j1)
		return scratch
	}
	rows, scratch := singleRows(bt[j0*k:j1*k], scratch)
	matmulBlockGo(m, n, k, a, rows, c[j0:], 0, j1-j0)
	return scratch
}

// singleRows returns x in single precision: x itself, or x converted into scratch
// (grown as needed, and returned for reuse).
func singleRows[B float32 | uint16](x []B, scratch []float32) (rows, grown []float32) {
	switch x := any(x).(type) {
	case []float32:
		return x, scratch
	case []uint16:
		if cap(scratch) < len(x) {
			scratch = make([]float32, len(x))
		}
		rows = scratch[:len(x)]
		for i, h := range x {
			rows[i] = halfToFloat(h)
		}
		return rows, scratch
	}
	panic("unreachable")
}

// matmulBlockGo is the portable kernel: columns [j0, j1) of c = a·btᵀ in 4×2 blocks
// with eight scalar accumulators, which keeps the operands in registers on amd64
// without assembly.
func matmulBlockGo(m, n, k int, a, bt, c []float32, j0, j1 int) {
	i := 0
	for ; i+4 <= m; i += 4 {
		a0 := a[i*k : i*k+k]
		a1 := a[(i+1)*k : (i+1)*k+k][:len(a0)]
		a2 := a[(i+2)*k : (i+2)*k+k][:len(a0)]
		a3 := a[(i+3)*k : (i+3)*k+k][:len(a0)]
		j := j0
		for ; j+2 <= j1; j += 2 {
			b0 := bt[j*k : j*k+k][:len(a0)]
			b1 := bt[(j+1)*k : (j+1)*k+k][:len(a0)]
			var s00, s01, s10, s11, s20, s21, s30, s31 float32
			for p, x0 := range a0 {
				y0, y1 := b0[p], b1[p]
				x1, x2, x3 := a1[p], a2[p], a3[p]
				s00 += x0 * y0
				s01 += x0 * y1
				s10 += x1 * y0
				s11 += x1 * y1
				s20 += x2 * y0
				s21 += x2 * y1
				s30 += x3 * y0
				s31 += x3 * y1
			}
			c[i*n+j], c[i*n+j+1] = s00, s01
			c[(i+1)*n+j], c[(i+1)*n+j+1] = s10, s11
			c[(i+2)*n+j], c[(i+2)*n+j+1] = s20, s21
			c[(i+3)*n+j], c[(i+3)*n+j+1] = s30, s31
		}
		for ; j < j1; j++ {
			b0 := bt[j*k : j*k+k][:len(a0)]
			var s0, s1, s2, s3 float32
			for p, y := range b0 {
				s0 += a0[p] * y
				s1 += a1[p] * y
				s2 += a2[p] * y
				s3 += a3[p] * y
			}
			c[i*n+j], c[(i+1)*n+j], c[(i+2)*n+j], c[(i+3)*n+j] = s0, s1, s2, s3
		}
	}
	for ; i < m; i++ {
		a0 := a[i*k : i*k+k]
		j := j0
		for ; j+2 <= j1; j += 2 {
			b0 := bt[j*k : j*k+k][:len(a0)]
			b1 := bt[(j+1)*k : (j+1)*k+k][:len(a0)]
			var s0, s1 float32
			for p, x := range a0 {
				s0 += x * b0[p]
				s1 += x * b1[p]
			}
			c[i*n+j], c[i*n+j+1] = s0, s1
		}
		for ; j < j1; j++ {
			b0 := bt[j*k : j*k+k][:len(a0)]
			var s float32
			for p, x := range a0 {
				s += x * b0[p]
			}
			c[i*n+j] = s
		}
	}
}

// transpose2D returns the transpose of the row-major r×c matrix x.
func transpose2D(r, c int, x []float32) []float32 {
	out := make([]float32, r*c)
	packK(out, x, c, r, r, true)
	return out
}

// packK writes into dst the rows×k matrix x with its rows widened to kp ≥ k by
// zeros, or, when transposed, the same of the transpose of the k×rows matrix x: the
// layout the kernels take (rows of k contiguous, k a multiple of 8 for the SIMD ones).
func packK[T float32 | uint16](dst, x []T, rows, k, kp int, transposed bool) {
	for i := range rows {
		row := dst[i*kp : i*kp+kp]
		if !transposed {
			copy(row, x[i*k:i*k+k])
		}
		clear(row[k:])
	}
	if !transposed {
		return
	}
	const blk = 32 // blocks of both sides stay in cache
	for p0 := 0; p0 < k; p0 += blk {
		for i0 := 0; i0 < rows; i0 += blk {
			for p := p0; p < min(p0+blk, k); p++ {
				src := x[p*rows : p*rows+rows]
				for i := i0; i < min(i0+blk, rows); i++ {
					dst[i*kp+p] = src[i]
				}
			}
		}
	}
}

// matmulBlockSIMD is matmulBlock with the AVX2/FMA kernels; k is a multiple of 8
// (matmulNT pads it). Rows go four at a time against three columns; the rows left
// over (a single sentence has few tokens, so they are a large share) go one at a time
// against four columns. Where the columns run out, the kernels are handed the last
// one again and its extra results are dropped.
func matmulBlockSIMD[B float32 | uint16](m, n, k int, a []float32, bt []B, c []float32, j0, j1 int) {
	col := func(j int) *B { return &bt[min(j, j1-1)*k] }
	var out [12]float32
	i := 0
	for ; i+4 <= m; i += 4 {
		for j := j0; j < j1; j += 3 {
			dot4x3(&a[i*k], k, col(j), col(j+1), col(j+2), k, &out)
			for q := range min(3, j1-j) {
				for r := range 4 {
					c[(i+r)*n+j+q] = out[3*r+q]
				}
			}
		}
	}
	out4 := (*[4]float32)(out[:4])
	for ; i < m; i++ {
		for j := j0; j < j1; j += 4 {
			dot1x4(&a[i*k], col(j), col(j+1), col(j+2), col(j+3), k, out4)
			copy(c[i*n+j:i*n+min(j+4, j1)], out4[:])
		}
	}
}

// dot4x3 and dot1x4 pick the kernel for the precision of b.
func dot4x3[B float32 | uint16](a *float32, lda int, b0, b1, b2 *B, k int, out *[12]float32) {
	switch b0 := any(b0).(type) {
	case *float32:
		dot4x3AVX(a, lda, b0, any(b1).(*float32), any(b2).(*float32), k, out)
	case *uint16:
		dot4x3F16(a, lda, b0, any(b1).(*uint16), any(b2).(*uint16), k, out)
	}
}

func dot1x4[B float32 | uint16](a *float32, b0, b1, b2, b3 *B, k int, out *[4]float32) {
	switch b0 := any(b0).(type) {
	case *float32:
		dot1x4AVX(a, b0, any(b1).(*float32), any(b2).(*float32), any(b3).(*float32), k, out)
	case *uint16:
		dot1x4F16(a, b0, any(b1).(*uint16), any(b2).(*uint16), any(b3).(*uint16), k, out)
	}
}

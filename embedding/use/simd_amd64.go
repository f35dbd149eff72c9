//go:build amd64 && !purego

package use

import "golang.org/x/sys/cpu"

// useSIMD selects the AVX2/FMA/F16C kernels (simd_amd64.s)
// where the CPU has them.
var useSIMD = cpu.X86.HasAVX2 && cpu.X86.HasFMA && hasF16C()

func hasF16C() bool

//go:noescape
func dot4x3AVX(a *float32, lda int, b0, b1, b2 *float32, k int, out *[12]float32)

//go:noescape
func dot4x3F16(a *float32, lda int, b0, b1, b2 *uint16, k int, out *[12]float32)

//go:noescape
func dot1x4AVX(a *float32, b0, b1, b2, b3 *float32, k int, out *[4]float32)

//go:noescape
func dot1x4F16(a *float32, b0, b1, b2, b3 *uint16, k int, out *[4]float32)

//go:noescape
func addAVX(dst, x, y *float32, n int)

//go:noescape
func subAVX(dst, x, y *float32, n int)

//go:noescape
func mulAVX(dst, x, y *float32, n int)

//go:noescape
func divAVX(dst, x, y *float32, n int)

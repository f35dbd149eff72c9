//go:build !amd64 || purego

package use

// useSIMD is false: the portable kernel runs everywhere else.
var useSIMD = false

const noSIMD = "use: no SIMD kernel on this platform"

func dot4x3AVX(a *float32, lda int, b0, b1, b2 *float32, k int, out *[12]float32) { panic(noSIMD) }
func dot4x3F16(a *float32, lda int, b0, b1, b2 *uint16, k int, out *[12]float32)  { panic(noSIMD) }
func dot1x4AVX(a *float32, b0, b1, b2, b3 *float32, k int, out *[4]float32)       { panic(noSIMD) }
func dot1x4F16(a *float32, b0, b1, b2, b3 *uint16, k int, out *[4]float32)        { panic(noSIMD) }

func addAVX(dst, x, y *float32, n int) { panic(noSIMD) }
func subAVX(dst, x, y *float32, n int) { panic(noSIMD) }
func mulAVX(dst, x, y *float32, n int) { panic(noSIMD) }
func divAVX(dst, x, y *float32, n int) { panic(noSIMD) }

//go:build !amd64 || purego

package use

// useSIMD is false: the portable kernel runs everywhere else.
var useSIMD = false

const noSIMD = "use: no SIMD kernel on this platform"

func dot4x2AVX(a *float32, lda int, b *float32, ldb int, k int, out *[8]float32) { panic(noSIMD) }
func dot4x2F16(a *float32, lda int, b *uint16, ldb int, k int, out *[8]float32)  { panic(noSIMD) }
func dot1x4AVX(a *float32, b *float32, ldb int, k int, out *[4]float32)          { panic(noSIMD) }
func dot1x4F16(a *float32, b *uint16, ldb int, k int, out *[4]float32)           { panic(noSIMD) }
func dot1AVX(a, b *float32, k int) float32                                       { panic(noSIMD) }
func addAVX(dst, x, y *float32, n int)                                           { panic(noSIMD) }
func subAVX(dst, x, y *float32, n int)                                           { panic(noSIMD) }
func mulAVX(dst, x, y *float32, n int)                                           { panic(noSIMD) }
func divAVX(dst, x, y *float32, n int)                                           { panic(noSIMD) }

//go:build amd64 && !purego

#include "textflag.h"

// HSUM stores the sum of the eight lanes of accumulator Y (X is its lower half) at
// dst. Clobbers X14.
#define HSUM(Y, X, dst) \
	VEXTRACTF128 $1, Y, X14; \
	VADDPS       X14, X, X;  \
	VHADDPS      X, X, X;    \
	VHADDPS      X, X, X;    \
	VMOVSS       X, dst

// ZERO8 clears the accumulators Y0-Y7.
#define ZERO8 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

// func dot4x2AVX(a *float32, lda int, b *float32, ldb int, k int, out *[8]float32)
//
// out[2*r+c] = Σ_{p<k} a[r*lda+p] * b[c*ldb+p] for r < 4, c < 2. k is a multiple of 8;
// lda and ldb are in elements. Needs AVX2 and FMA.
TEXT ·dot4x2AVX(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), R8
	SHLQ $2, R8
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R9
	SHLQ $2, R9
	MOVQ k+32(FP), CX
	SHLQ $2, CX
	MOVQ out+40(FP), DX

	LEAQ (SI)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (DI)(R9*1), R13

	ZERO8
	XORQ AX, AX

loop:
	CMPQ AX, CX
	JGE  reduce
	VMOVUPS (DI)(AX*1), Y12
	VMOVUPS (R13)(AX*1), Y13
	VMOVUPS (SI)(AX*1), Y8
	VFMADD231PS Y12, Y8, Y0
	VFMADD231PS Y13, Y8, Y1
	VMOVUPS (R10)(AX*1), Y9
	VFMADD231PS Y12, Y9, Y2
	VFMADD231PS Y13, Y9, Y3
	VMOVUPS (R11)(AX*1), Y10
	VFMADD231PS Y12, Y10, Y4
	VFMADD231PS Y13, Y10, Y5
	VMOVUPS (R12)(AX*1), Y11
	VFMADD231PS Y12, Y11, Y6
	VFMADD231PS Y13, Y11, Y7
	ADDQ $32, AX
	JMP  loop

reduce:
	// Sum the eight lanes of each accumulator into out[i].
	HSUM(Y0, X0, 0(DX))
	HSUM(Y1, X1, 4(DX))
	HSUM(Y2, X2, 8(DX))
	HSUM(Y3, X3, 12(DX))
	HSUM(Y4, X4, 16(DX))
	HSUM(Y5, X5, 20(DX))
	HSUM(Y6, X6, 24(DX))
	HSUM(Y7, X7, 28(DX))
	VZEROUPPER
	RET

// func dot1x4AVX(a *float32, b *float32, ldb int, k int, out *[4]float32)
//
// out[c] = Σ_{p<k} a[p] * b[c*ldb+p] for c < 4: one row against four, for the rows a
// 4×2 block leaves over (a single sentence has few tokens, so they are a large share).
// k is a multiple of 8; ldb is in elements. Eight accumulators, two per column over
// alternate 8-wide chunks of k, keep both FMA pipes busy despite the FMA latency.
// Needs AVX2 and FMA.
TEXT ·dot1x4AVX(SB), NOSPLIT, $0-40
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ ldb+16(FP), R9
	SHLQ $2, R9
	MOVQ k+24(FP), CX
	SHLQ $2, CX
	MOVQ out+32(FP), DX

	LEAQ (DI)(R9*1), R10
	LEAQ (R10)(R9*1), R11
	LEAQ (R11)(R9*1), R12

	ZERO8
	XORQ   AX, AX
	MOVQ   CX, BX
	SUBQ   $64, BX // the last offset where a 16-wide step still fits

loop16:
	CMPQ AX, BX
	JGT  tail8
	VMOVUPS     (SI)(AX*1), Y8
	VMOVUPS     32(SI)(AX*1), Y9
	VFMADD231PS (DI)(AX*1), Y8, Y0
	VFMADD231PS (R10)(AX*1), Y8, Y1
	VFMADD231PS (R11)(AX*1), Y8, Y2
	VFMADD231PS (R12)(AX*1), Y8, Y3
	VFMADD231PS 32(DI)(AX*1), Y9, Y4
	VFMADD231PS 32(R10)(AX*1), Y9, Y5
	VFMADD231PS 32(R11)(AX*1), Y9, Y6
	VFMADD231PS 32(R12)(AX*1), Y9, Y7
	ADDQ        $64, AX
	JMP         loop16

tail8:
	CMPQ AX, CX
	JGE  reduce4
	VMOVUPS     (SI)(AX*1), Y8
	VFMADD231PS (DI)(AX*1), Y8, Y0
	VFMADD231PS (R10)(AX*1), Y8, Y1
	VFMADD231PS (R11)(AX*1), Y8, Y2
	VFMADD231PS (R12)(AX*1), Y8, Y3

reduce4:
	VADDPS       Y4, Y0, Y0
	VADDPS       Y5, Y1, Y1
	VADDPS       Y6, Y2, Y2
	VADDPS       Y7, Y3, Y3
	HSUM(Y0, X0, 0(DX))
	HSUM(Y1, X1, 4(DX))
	HSUM(Y2, X2, 8(DX))
	HSUM(Y3, X3, 12(DX))
	VZEROUPPER
	RET

// func dot1AVX(a, b *float32, k int) float32
//
// Σ_{p<k} a[p]*b[p]; k is a multiple of 8. Needs AVX2 and FMA.
TEXT ·dot1AVX(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ k+16(FP), CX
	SHLQ $2, CX
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX

loop1:
	CMPQ AX, CX
	JGE  reduce1
	VMOVUPS     (SI)(AX*1), Y1
	VFMADD231PS (DI)(AX*1), Y1, Y0
	ADDQ        $32, AX
	JMP         loop1

reduce1:
	HSUM(Y0, X0, ret+24(FP))
	VZEROUPPER
	RET

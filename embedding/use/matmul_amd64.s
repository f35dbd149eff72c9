//go:build amd64 && !purego

#include "textflag.h"

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

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
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
	VEXTRACTF128 $1, Y0, X14
	VADDPS       X14, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, 0(DX)
	VEXTRACTF128 $1, Y1, X14
	VADDPS       X14, X1, X1
	VHADDPS      X1, X1, X1
	VHADDPS      X1, X1, X1
	VMOVSS       X1, 4(DX)
	VEXTRACTF128 $1, Y2, X14
	VADDPS       X14, X2, X2
	VHADDPS      X2, X2, X2
	VHADDPS      X2, X2, X2
	VMOVSS       X2, 8(DX)
	VEXTRACTF128 $1, Y3, X14
	VADDPS       X14, X3, X3
	VHADDPS      X3, X3, X3
	VHADDPS      X3, X3, X3
	VMOVSS       X3, 12(DX)
	VEXTRACTF128 $1, Y4, X14
	VADDPS       X14, X4, X4
	VHADDPS      X4, X4, X4
	VHADDPS      X4, X4, X4
	VMOVSS       X4, 16(DX)
	VEXTRACTF128 $1, Y5, X14
	VADDPS       X14, X5, X5
	VHADDPS      X5, X5, X5
	VHADDPS      X5, X5, X5
	VMOVSS       X5, 20(DX)
	VEXTRACTF128 $1, Y6, X14
	VADDPS       X14, X6, X6
	VHADDPS      X6, X6, X6
	VHADDPS      X6, X6, X6
	VMOVSS       X6, 24(DX)
	VEXTRACTF128 $1, Y7, X14
	VADDPS       X14, X7, X7
	VHADDPS      X7, X7, X7
	VHADDPS      X7, X7, X7
	VMOVSS       X7, 28(DX)
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
	VEXTRACTF128 $1, Y0, X14
	VADDPS       X14, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

//go:build amd64 && !purego

#include "textflag.h"

// The matrix kernels come in two kinds that differ only in how they load the right operand
// b: single precision (VMOVUPS) or half precision (VCVTPH2PS, for the weights, which
// halves the bytes streamed from memory: a single sentence's products are bound by
// that, not by arithmetic). Each body is a macro over LOADB and the byte size of eight
// b elements. AX counts elements of k, so a is addressed (AX*4) and b (AX*BSCALE).

// PFD is how far ahead (bytes of b) the 4×3 kernel prefetches: past the end of a
// 512-wide row, into the rows the next call reads.
#define PFD 2048

// LOADF32 and LOADF16 load eight elements of b at element AX of base+off into Y.
#define LOADF32(off, base, Y) VMOVUPS off(base)(AX*4), Y
#define LOADF16(off, base, Y) VCVTPH2PS off(base)(AX*2), Y

// HSUM stores the sum of the eight lanes of accumulator Y (X is its lower half) at
// dst. Clobbers X14.
#define HSUM(Y, X, dst) \
	VEXTRACTF128 $1, Y, X14; \
	VADDPS       X14, X, X;  \
	VHADDPS      X, X, X;    \
	VHADDPS      X, X, X;    \
	VMOVSS       X, dst

// HSUM0TO3 and HSUM4TO7 store the sums of accumulators Y0-Y3 and Y4-Y7 at out[0:4]
// and out[4:8] (DX).
#define HSUM0TO3 \
	HSUM(Y0, X0, 0(DX));  \
	HSUM(Y1, X1, 4(DX));  \
	HSUM(Y2, X2, 8(DX));  \
	HSUM(Y3, X3, 12(DX))

#define HSUM4TO7 \
	HSUM(Y4, X4, 16(DX)); \
	HSUM(Y5, X5, 20(DX)); \
	HSUM(Y6, X6, 24(DX)); \
	HSUM(Y7, X7, 28(DX))

// ROWS3 sets r1, r2, r3 to the three rows after the one at base, stride bytes apart.
#define ROWS3(base, stride, r1, r2, r3) \
	LEAQ (base)(stride*1), r1; \
	LEAQ (r1)(stride*1), r2;   \
	LEAQ (r2)(stride*1), r3

// COL4 adds A times the eight b elements at byte offset off of each of the four rows
// DI, R10, R11, R12 into accumulators C0-C3.
#define COL4(LOADB, off, A, C0, C1, C2, C3) \
	LOADB(off, DI, Y10);  \
	LOADB(off, R10, Y11); \
	LOADB(off, R11, Y12); \
	LOADB(off, R12, Y13); \
	VFMADD231PS Y10, A, C0; \
	VFMADD231PS Y11, A, C1; \
	VFMADD231PS Y12, A, C2; \
	VFMADD231PS Y13, A, C3

// STEPS16 starts a loop over k (CX) by AX in steps of 16 elements, then one of 8:
// FITS16(tail) jumps to tail when no step of 16 is left.
#define STEPS16 \
	XORQ AX, AX;  \
	MOVQ CX, BX;  \
	SUBQ $16, BX
#define FITS16(tail) \
	CMPQ AX, BX; \
	JGT  tail

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

// ROW3 adds the eight a elements at element AX of row base times the b chunks in
// Y12-Y14 into accumulators C0-C2.
#define ROW3(base, C0, C1, C2) \
	VMOVUPS (base)(AX*4), Y15; \
	VFMADD231PS Y12, Y15, C0; \
	VFMADD231PS Y13, Y15, C1; \
	VFMADD231PS Y14, Y15, C2

// DOT4X3 is the body of dot4x3: out[3*r+c] = Σ_{p<k} a[r*lda+p] * bc[p] for r < 4,
// c < 3, where bc is b0, b1, b2. k is a multiple of 8; lda is in elements. Twelve
// accumulators leave the FMA pipes slack over the FMA latency (eight were just
// enough, and stalled); three loads of b serve twelve FMAs.
#define DOT4X3(LOADB, BSCALE) \
	MOVQ a+0(FP), SI; \
	MOVQ lda+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ b0+16(FP), DI; \
	MOVQ b1+24(FP), R13; \
	MOVQ b2+32(FP), BX; \
	MOVQ k+40(FP), CX; \
	MOVQ out+48(FP), DX; \
	ROWS3(SI, R8, R10, R11, R12); \
	ZERO8; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
	XORQ AX, AX; \
loop: \
	CMPQ AX, CX; \
	JGE  reduce; \
	PREFETCHT0 PFD(DI)(AX*BSCALE); \
	PREFETCHT0 PFD(R13)(AX*BSCALE); \
	PREFETCHT0 PFD(BX)(AX*BSCALE); \
	LOADB(0, DI, Y12); \
	LOADB(0, R13, Y13); \
	LOADB(0, BX, Y14); \
	ROW3(SI, Y0, Y1, Y2); \
	ROW3(R10, Y3, Y4, Y5); \
	ROW3(R11, Y6, Y7, Y8); \
	ROW3(R12, Y9, Y10, Y11); \
	ADDQ $8, AX; \
	JMP  loop; \
reduce: \
	HSUM0TO3; \
	HSUM4TO7; \
	HSUM(Y8, X8, 32(DX)); \
	HSUM(Y9, X9, 36(DX)); \
	HSUM(Y10, X10, 40(DX)); \
	HSUM(Y11, X11, 44(DX)); \
	VZEROUPPER; \
	RET

// DOT1X4 is the body of dot1x4: out[c] = Σ_{p<k} a[p] * bc[p] for c < 4, where bc is
// b0..b3: one row against four, for the rows the 4×3 blocks leave over (a single
// sentence has few tokens, so they are a large share). k is a multiple of 8. Eight
// accumulators, two per column over alternate 8-wide chunks of k, keep both FMA pipes
// busy despite the FMA latency. B8 is the byte size of eight b elements.
#define DOT1X4(LOADB, B8) \
	MOVQ a+0(FP), SI; \
	MOVQ b0+8(FP), DI; \
	MOVQ b1+16(FP), R10; \
	MOVQ b2+24(FP), R11; \
	MOVQ b3+32(FP), R12; \
	MOVQ k+40(FP), CX; \
	MOVQ out+48(FP), DX; \
	ZERO8; \
	STEPS16; \
loop16: \
	FITS16(tail8); \
	VMOVUPS (SI)(AX*4), Y8; \
	VMOVUPS 32(SI)(AX*4), Y9; \
	COL4(LOADB, 0, Y8, Y0, Y1, Y2, Y3); \
	COL4(LOADB, B8, Y9, Y4, Y5, Y6, Y7); \
	ADDQ $16, AX; \
	JMP  loop16; \
tail8: \
	CMPQ AX, CX; \
	JGE  reduce4; \
	VMOVUPS (SI)(AX*4), Y8; \
	COL4(LOADB, 0, Y8, Y0, Y1, Y2, Y3); \
reduce4: \
	VADDPS Y4, Y0, Y0; \
	VADDPS Y5, Y1, Y1; \
	VADDPS Y6, Y2, Y2; \
	VADDPS Y7, Y3, Y3; \
	HSUM0TO3; \
	VZEROUPPER; \
	RET

// VROW is the body of an elementwise kernel: dst[i] = x[i] OP y[i] for i < n, n a
// multiple of 8, sixteen elements a step while they last. Go's compiler does not
// vectorize, and these rows (layer norms, biases, residuals) are a good part of what
// is not a matrix product.
#define VROW(OP) \
	MOVQ dst+0(FP), DI; \
	MOVQ x+8(FP), SI; \
	MOVQ y+16(FP), DX; \
	MOVQ n+24(FP), CX; \
	STEPS16; \
loop16: \
	FITS16(tail8); \
	VMOVUPS (SI)(AX*4), Y0; \
	VMOVUPS 32(SI)(AX*4), Y1; \
	OP (DX)(AX*4), Y0, Y0; \
	OP 32(DX)(AX*4), Y1, Y1; \
	VMOVUPS Y0, (DI)(AX*4); \
	VMOVUPS Y1, 32(DI)(AX*4); \
	ADDQ $16, AX; \
	JMP  loop16; \
tail8: \
	CMPQ AX, CX; \
	JGE  done; \
	VMOVUPS (SI)(AX*4), Y0; \
	OP (DX)(AX*4), Y0, Y0; \
	VMOVUPS Y0, (DI)(AX*4); \
done: \
	VZEROUPPER; \
	RET

// func dot4x3AVX(a *float32, lda int, b0, b1, b2 *float32, k int, out *[12]float32)
TEXT ·dot4x3AVX(SB), NOSPLIT, $0-56
	DOT4X3(LOADF32, 4)

// func dot4x3F16(a *float32, lda int, b0, b1, b2 *uint16, k int, out *[12]float32)
TEXT ·dot4x3F16(SB), NOSPLIT, $0-56
	DOT4X3(LOADF16, 2)

// func dot1x4AVX(a *float32, b0, b1, b2, b3 *float32, k int, out *[4]float32)
TEXT ·dot1x4AVX(SB), NOSPLIT, $0-56
	DOT1X4(LOADF32, 32)

// func dot1x4F16(a *float32, b0, b1, b2, b3 *uint16, k int, out *[4]float32)
TEXT ·dot1x4F16(SB), NOSPLIT, $0-56
	DOT1X4(LOADF16, 16)

// func addAVX(dst, x, y *float32, n int)
TEXT ·addAVX(SB), NOSPLIT, $0-32
	VROW(VADDPS)

// func subAVX(dst, x, y *float32, n int)
TEXT ·subAVX(SB), NOSPLIT, $0-32
	VROW(VSUBPS)

// func mulAVX(dst, x, y *float32, n int)
TEXT ·mulAVX(SB), NOSPLIT, $0-32
	VROW(VMULPS)

// func divAVX(dst, x, y *float32, n int)
TEXT ·divAVX(SB), NOSPLIT, $0-32
	VROW(VDIVPS)

// func hasF16C() bool
//
// Reports CPUID.1:ECX.F16C[bit 29], which golang.org/x/sys/cpu does not expose.
TEXT ·hasF16C(SB), NOSPLIT, $0-1
	MOVL $1, AX
	XORL CX, CX
	CPUID
	SHRL $29, CX
	ANDL $1, CX
	MOVB CX, ret+0(FP)
	RET

#include "textflag.h"

// AVX-512 dot products of one row of A with four rows of B: see
// dot_avx512_amd64.go.

// Reduce the 16 lanes of Z to its lowest float (Y/X name the same register).
#define HSUM(z, y, x) \
	VEXTRACTF64X4 $1, z, Y14; \
	VADDPS        Y14, y, y;  \
	VEXTRACTF128  $1, y, X14; \
	VADDPS        X14, x, x;  \
	VHADDPS       x, x, x;    \
	VHADDPS       x, x, x

// Clear the eight partial sums: Z0–Z3 for the four rows' first 16 lanes,
// Z5–Z8 for their second.
#define DOT4_CLEAR \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8

// One step of 32 floats: x[SI:] against the four rows at BX, BX+ldw,
// BX+2·ldw and R9 = BX+3·ldw (R8 = ldw in bytes); the pointers advance.
#define DOT4_STEP \
	VMOVUPS     (SI), Z4; \
	VMOVUPS     64(SI), Z9; \
	VFMADD231PS (BX), Z4, Z0; \
	VFMADD231PS (BX)(R8*1), Z4, Z1; \
	VFMADD231PS (BX)(R8*2), Z4, Z2; \
	VFMADD231PS (R9), Z4, Z3; \
	VFMADD231PS 64(BX), Z9, Z5; \
	VFMADD231PS 64(BX)(R8*1), Z9, Z6; \
	VFMADD231PS 64(BX)(R8*2), Z9, Z7; \
	VFMADD231PS 64(R9), Z9, Z8; \
	ADDQ        $128, SI; \
	ADDQ        $128, BX; \
	ADDQ        $128, R9

// Fold each row's two partial sums and reduce them to X0–X3.
#define DOT4_SUMS \
	VADDPS Z5, Z0, Z0; \
	VADDPS Z6, Z1, Z1; \
	VADDPS Z7, Z2, Z2; \
	VADDPS Z8, Z3, Z3; \
	HSUM(Z0, Y0, X0); \
	HSUM(Z1, Y1, X1); \
	HSUM(Z2, Y2, X2); \
	HSUM(Z3, Y3, X3)

// func dot4AVX512(k32 int, x *float32, w *float32, ldw int, out *float32)
TEXT ·dot4AVX512(SB), NOSPLIT, $0-40
	MOVQ k32+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), BX
	MOVQ ldw+24(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9
	ADDQ BX, R9
	MOVQ out+32(FP), DX

	DOT4_CLEAR

	SHRQ $5, CX
	JZ   reduce

loop:
	DOT4_STEP
	DECQ        CX
	JNZ         loop

reduce:
	DOT4_SUMS
	VMOVSS X0, (DX)
	VMOVSS X1, 4(DX)
	VMOVSS X2, 8(DX)
	VMOVSS X3, 12(DX)
	VZEROUPPER
	RET

// func dotRowsAVX512(groups int, k32 int, x *float32, w *float32, ldw int, scale float32, out *float32)
TEXT ·dotRowsAVX512(SB), NOSPLIT, $0-56
	MOVQ   groups+0(FP), R10
	MOVQ   k32+8(FP), R11
	SHRQ   $5, R11
	MOVQ   x+16(FP), R12
	MOVQ   w+24(FP), BX
	MOVQ   ldw+32(FP), R8
	SHLQ   $2, R8
	VMOVSS scale+40(FP), X15
	MOVQ   out+48(FP), DX
	LEAQ   (R8)(R8*2), R13
	TESTQ  R10, R10
	JZ     rowsdone

rowsgroup:
	MOVQ   R12, SI
	MOVQ   BX, DI
	LEAQ   (BX)(R13*1), R9
	DOT4_CLEAR
	MOVQ   R11, CX
	TESTQ  CX, CX
	JZ     rowsreduce

rowsloop:
	DOT4_STEP
	DECQ        CX
	JNZ         rowsloop

rowsreduce:
	DOT4_SUMS
	VMULSS X15, X0, X0
	VMULSS X15, X1, X1
	VMULSS X15, X2, X2
	VMULSS X15, X3, X3
	VMOVSS X0, (DX)
	VMOVSS X1, 4(DX)
	VMOVSS X2, 8(DX)
	VMOVSS X3, 12(DX)
	ADDQ   $16, DX
	LEAQ   (DI)(R8*4), BX
	DECQ   R10
	JNZ    rowsgroup

rowsdone:
	VZEROUPPER
	RET

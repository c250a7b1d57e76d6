#include "textflag.h"

// AVX2 + FMA kernels. See kernel_avx2_amd64.go for what each computes.

// One step p of the 6×16 tile: load row p of B (16 floats, two registers),
// broadcast A's 6 values of column p and multiply-add each into its row's
// two accumulators. 12 FMAs against 2 loads and 6 broadcasts: the two FMA
// pipes, not memory, set the pace. A's rows are at AX, AX+R10, AX+2·R10,
// SI, SI+R10, SI+2·R10 (SI = AX + 3·R10); R11 steps A to the next column,
// R12 steps B to the next row.
#define STEP6x16 \
	VMOVUPS      (BX), Y12;          \
	VMOVUPS      32(BX), Y13;        \
	VBROADCASTSS (AX), Y14;          \
	VFMADD231PS  Y12, Y14, Y0;       \
	VFMADD231PS  Y13, Y14, Y1;       \
	VBROADCASTSS (AX)(R10*1), Y15;   \
	VFMADD231PS  Y12, Y15, Y2;       \
	VFMADD231PS  Y13, Y15, Y3;       \
	VBROADCASTSS (AX)(R10*2), Y14;   \
	VFMADD231PS  Y12, Y14, Y4;       \
	VFMADD231PS  Y13, Y14, Y5;       \
	VBROADCASTSS (SI), Y15;          \
	VFMADD231PS  Y12, Y15, Y6;       \
	VFMADD231PS  Y13, Y15, Y7;       \
	VBROADCASTSS (SI)(R10*1), Y14;   \
	VFMADD231PS  Y12, Y14, Y8;       \
	VFMADD231PS  Y13, Y14, Y9;       \
	VBROADCASTSS (SI)(R10*2), Y15;   \
	VFMADD231PS  Y12, Y15, Y10;      \
	VFMADD231PS  Y13, Y15, Y11;      \
	ADDQ         R11, AX;            \
	ADDQ         R11, SI;            \
	ADDQ         R12, BX

// Store one row of the tile: C = alpha·acc + beta·C (Y14 = alpha, Y15 =
// beta), or alpha·acc without reading C.
#define STOREROW_BETA(lo, hi) \
	VMULPS      (DX), Y15, Y12;   \
	VMULPS      32(DX), Y15, Y13; \
	VFMADD231PS lo, Y14, Y12;     \
	VFMADD231PS hi, Y14, Y13;     \
	VMOVUPS     Y12, (DX);        \
	VMOVUPS     Y13, 32(DX);      \
	ADDQ        R8, DX

#define STOREROW(lo, hi) \
	VMULPS  lo, Y14, Y12;  \
	VMULPS  hi, Y14, Y13;  \
	VMOVUPS Y12, (DX);     \
	VMOVUPS Y13, 32(DX);   \
	ADDQ    R8, DX

// func tileAVX2(kc int, a *float32, aRow, aCol int, b *float32, bRow int, c *float32, ldc int, alpha, beta float32)
TEXT ·tileAVX2(SB), NOSPLIT, $0-72
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ aRow+16(FP), R10
	SHLQ $2, R10
	MOVQ aCol+24(FP), R11
	SHLQ $2, R11
	MOVQ b+32(FP), BX
	MOVQ bRow+40(FP), R12
	SHLQ $2, R12
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R8
	SHLQ $2, R8
	LEAQ (R10)(R10*2), SI
	ADDQ AX, SI

	// Touch the six rows of C now so they are in cache by the store.
	MOVQ       DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	ADDQ       R8, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	ADDQ       R8, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	ADDQ       R8, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	ADDQ       R8, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	ADDQ       R8, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

	MOVQ CX, R9
	SHRQ $2, R9
	JZ   tail

loop4:
	STEP6x16
	STEP6x16
	STEP6x16
	STEP6x16
	DECQ R9
	JNZ  loop4

tail:
	ANDQ $3, CX
	JZ   store

loop1:
	STEP6x16
	DECQ CX
	JNZ  loop1

store:
	VBROADCASTSS alpha+64(FP), Y14
	VBROADCASTSS beta+68(FP), Y15
	VXORPS       X12, X12, X12
	VUCOMISS     beta+68(FP), X12
	JNE          storebeta
	JP           storebeta
	STOREROW(Y0, Y1)
	STOREROW(Y2, Y3)
	STOREROW(Y4, Y5)
	STOREROW(Y6, Y7)
	STOREROW(Y8, Y9)
	STOREROW(Y10, Y11)
	VZEROUPPER
	RET

storebeta:
	STOREROW_BETA(Y0, Y1)
	STOREROW_BETA(Y2, Y3)
	STOREROW_BETA(Y4, Y5)
	STOREROW_BETA(Y6, Y7)
	STOREROW_BETA(Y8, Y9)
	STOREROW_BETA(Y10, Y11)
	VZEROUPPER
	RET

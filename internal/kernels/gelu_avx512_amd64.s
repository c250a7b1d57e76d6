#include "textflag.h"

// AVX-512 erf and exact GELU: see gelu_amd64.go. Sixteen float32 values
// per step through erf32's operations lane by lane (same operations, same
// order, no fused multiply-add), so every lane gives erf32's bits.

// ERF16 sets Z10 to erf32 of the sixteen values in Z0 (Z1–Z9 and K1–K3
// are scratch). Registers: Z16 the magnitude mask, Z17 erfOdd (= ½),
// Z18 erfLimit (= erfPieces/erfLimit = 4), Z19 1.0, Z20–Z25 rows 0–5 of
// erfTable (R's coefficients), Z26 its hi row, Z27 its lo row. Every lane
// takes a = |x|, its column i = int(4a), t = 4a − i − ½ and z = a·a, and
// evaluates column i's R by Horner's rule (products and sums rounded
// apart), each power's coefficient permuted out of its row by i (the low
// four bits; a lane from erfLimit on or NaN reads some column and is not
// picked), at v = t, then (t·R + lo) + hi; the lanes below erfOdd (K1)
// take v = z and (a·R + lo) + a instead (lo is 0 in their columns). The
// result takes x's sign by XOR; lanes from erfLimit on (K3) take 1.0 OR
// that sign, NaN lanes (neither K2 nor K3) x itself.
#define ERF16 \
	VPANDD     Z16, Z0, Z1;      \
	VCMPPS     $1, Z17, Z1, K1;  \
	VCMPPS     $1, Z18, Z1, K2;  \
	VCMPPS     $13, Z18, Z1, K3; \
	VMULPS     Z18, Z1, Z2;      \
	VCVTTPS2DQ Z2, Z3;           \
	VCVTDQ2PS  Z3, Z4;           \
	VSUBPS     Z4, Z2, Z4;       \
	VSUBPS     Z17, Z4, Z4;      \
	VMULPS     Z1, Z1, Z5;       \
	VMOVAPS    Z4, Z6;           \
	VMOVAPS    Z5, K1, Z6;       \
	VMOVAPS    Z1, K1, Z4;       \
	VPERMPS    Z25, Z3, Z7;      \
	VMULPS     Z6, Z7, Z7;       \
	VPERMPS    Z24, Z3, Z8;      \
	VADDPS     Z8, Z7, Z7;       \
	VMULPS     Z6, Z7, Z7;       \
	VPERMPS    Z23, Z3, Z8;      \
	VADDPS     Z8, Z7, Z7;       \
	VMULPS     Z6, Z7, Z7;       \
	VPERMPS    Z22, Z3, Z8;      \
	VADDPS     Z8, Z7, Z7;       \
	VMULPS     Z6, Z7, Z7;       \
	VPERMPS    Z21, Z3, Z8;      \
	VADDPS     Z8, Z7, Z7;       \
	VMULPS     Z6, Z7, Z7;       \
	VPERMPS    Z20, Z3, Z8;      \
	VADDPS     Z8, Z7, Z7;       \
	VMULPS     Z4, Z7, Z7;       \
	VPERMPS    Z27, Z3, Z8;      \
	VADDPS     Z8, Z7, Z7;       \
	VPERMPS    Z26, Z3, Z8;      \
	VMOVAPS    Z1, K1, Z8;       \
	VADDPS     Z8, Z7, Z7;       \
	VPXORD     Z1, Z0, Z9;       \
	VPXORD     Z9, Z7, Z7;       \
	VPORD      Z19, Z9, Z9;      \
	VMOVAPS    Z0, Z10;          \
	VMOVAPS    Z7, K2, Z10;      \
	VMOVAPS    Z9, K3, Z10

// ERFCONSTS loads the registers ERF16 reads; table is the address of
// erfTable.
#define ERFCONSTS(table) \
	MOVQ         table, R8;   \
	MOVL         $0x7fffffff, AX; \
	VPBROADCASTD AX, Z16;     \
	MOVL         $0x3f000000, AX; \
	VPBROADCASTD AX, Z17;     \
	MOVL         $0x40800000, AX; \
	VPBROADCASTD AX, Z18;     \
	MOVL         $0x3f800000, AX; \
	VPBROADCASTD AX, Z19;     \
	VMOVUPS      (R8), Z20;   \
	VMOVUPS      64(R8), Z21; \
	VMOVUPS      128(R8), Z22; \
	VMOVUPS      192(R8), Z23; \
	VMOVUPS      256(R8), Z24; \
	VMOVUPS      320(R8), Z25; \
	VMOVUPS      384(R8), Z26; \
	VMOVUPS      448(R8), Z27

// func erfAVX512(dst, src *float32, n int, table *float32)
TEXT ·erfAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	ERFCONSTS(table+24(FP))
	SHRQ $4, CX
	JZ   done

loop:
	VMOVUPS (SI), Z0
	ERF16
	VMOVUPS Z10, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     loop

done:
	VZEROUPPER
	RET

// func geluAVX512(dst, src *float32, n int, table *float32, c, a, s float32)
// dst[i] = ((x·(erf(x/c) + a))·s) in float32 for x = src[i], each
// operation rounded as geluRange rounds it.
TEXT ·geluAVX512(SB), NOSPLIT, $0-44
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	ERFCONSTS(table+24(FP))
	VBROADCASTSS c+32(FP), Z13
	VBROADCASTSS a+36(FP), Z14
	VBROADCASTSS s+40(FP), Z15
	SHRQ         $4, CX
	JZ           done

loop:
	VMOVUPS (SI), Z11
	VDIVPS  Z13, Z11, Z0  // d = x/c
	ERF16
	VADDPS  Z14, Z10, Z10 // e + a
	VMULPS  Z10, Z11, Z10 // x·(e + a)
	VMULPS  Z15, Z10, Z10 // ·s
	VMOVUPS Z10, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     loop

done:
	VZEROUPPER
	RET

#include "textflag.h"

// AVX-512 erf and exact GELU: see gelu_amd64.go. Sixteen float32 values
// per vector through erf32's operations lane by lane (same operations,
// same order, no fused multiply-add), so every lane gives erf32's bits.
// The loops take two vectors at a time with their instructions
// interleaved: one vector's Horner chain is a long run of dependent
// operations, and the other's fills the gaps (a tenth faster on a Zen 4).
//
// Every lane takes a = |x|, its column i = int(4a), t = 4a − i − ½ and
// z = a·a, and evaluates column i's polynomial R by Horner's rule
// (products and sums rounded apart), each power's coefficient permuted
// out of its row of erfTable by i (the low four bits: a lane from
// erfLimit on or NaN reads some column and is not picked), at v = t, then
// (t·R + lo) + hi; the lanes below erfOdd take v = z and (a·R + lo) + a
// instead (lo is 0 in their columns). Lanes from erfLimit on take 1.0;
// the result takes x's sign by XOR, and NaN lanes (neither below erfLimit
// nor from it on) x itself.
//
// Registers: R8 erfTable (row k of R's coefficients at 64·k, hi at 384,
// lo at 448), Z28 the magnitude mask, Z29 erfOdd (= ½), Z30 erfLimit
// (= erfPieces/erfLimit = 4), Z31 1.0. A vector's registers are passed to
// the macros below: x, then scratch a, u, i, t, z, v, y, tmp, sign, and
// the masks odd (a < erfOdd), below (a < erfLimit) and above (a ≥
// erfLimit).

// ERF_SPLIT sets a, the masks, the column i, t and z.
#define ERF_SPLIT(x, a, u, i, t, z, odd, below, above) \
	VPANDD     Z28, x, a;          \
	VCMPPS     $1, Z29, a, odd;    \
	VCMPPS     $1, Z30, a, below;  \
	VCMPPS     $13, Z30, a, above; \
	VMULPS     Z30, a, u;          \
	VCVTTPS2DQ u, i;               \
	VCVTDQ2PS  i, t;               \
	VSUBPS     t, u, t;            \
	VSUBPS     Z29, t, t;          \
	VMULPS     a, a, z

// ERF_VARS sets v, the variable of R (z or t), and turns t into R's
// multiplier (a or t).
#define ERF_VARS(a, t, z, v, odd) \
	VBLENDMPS z, t, odd, v; \
	VMOVAPS   a, odd, t

// ERF_HORNER is one step of Horner's rule: y = y·v + the coefficient at
// offset row of erfTable.
#define ERF_HORNER(row, i, v, y, tmp) \
	VMULPS  v, y, y;         \
	VPERMPS row(R8), i, tmp; \
	VADDPS  tmp, y, y

// ERF_FINISH sets out to erf(x) from R's value y and its multiplier m.
#define ERF_FINISH(x, a, i, m, y, tmp, sign, out, odd, below, above) \
	VMULPS    m, y, y;             \
	VPERMPS   448(R8), i, tmp;     \
	VADDPS    tmp, y, y;           \
	VPERMPS   384(R8), i, tmp;     \
	VMOVAPS   a, odd, tmp;         \
	VADDPS    tmp, y, y;           \
	VMOVAPS   Z31, above, y;       \
	VPXORD    a, x, sign;          \
	VPXORD    sign, y, y;          \
	KORW      below, above, below; \
	VBLENDMPS y, x, below, out

// ERF_ONE sets Z10 to erf of Z0.
#define ERF_ONE \
	ERF_SPLIT(Z0, Z1, Z2, Z3, Z4, Z5, K1, K2, K3); \
	ERF_VARS(Z1, Z4, Z5, Z6, K1);                  \
	VPERMPS 320(R8), Z3, Z7;                       \
	ERF_HORNER(256, Z3, Z6, Z7, Z8);               \
	ERF_HORNER(192, Z3, Z6, Z7, Z8);               \
	ERF_HORNER(128, Z3, Z6, Z7, Z8);               \
	ERF_HORNER(64, Z3, Z6, Z7, Z8);                \
	ERF_HORNER(0, Z3, Z6, Z7, Z8);                 \
	ERF_FINISH(Z0, Z1, Z3, Z4, Z7, Z8, Z9, Z10, K1, K2, K3)

// ERF_TWO sets Z10 to erf of Z0 and Z21 to erf of Z11, interleaved.
#define ERF_TWO \
	ERF_SPLIT(Z0, Z1, Z2, Z3, Z4, Z5, K1, K2, K3);                  \
	ERF_SPLIT(Z11, Z12, Z13, Z14, Z15, Z16, K4, K5, K6);            \
	ERF_VARS(Z1, Z4, Z5, Z6, K1);                                   \
	ERF_VARS(Z12, Z15, Z16, Z17, K4);                               \
	VPERMPS 320(R8), Z3, Z7;                                        \
	VPERMPS 320(R8), Z14, Z18;                                      \
	ERF_HORNER(256, Z3, Z6, Z7, Z8);                                \
	ERF_HORNER(256, Z14, Z17, Z18, Z19);                            \
	ERF_HORNER(192, Z3, Z6, Z7, Z8);                                \
	ERF_HORNER(192, Z14, Z17, Z18, Z19);                            \
	ERF_HORNER(128, Z3, Z6, Z7, Z8);                                \
	ERF_HORNER(128, Z14, Z17, Z18, Z19);                            \
	ERF_HORNER(64, Z3, Z6, Z7, Z8);                                 \
	ERF_HORNER(64, Z14, Z17, Z18, Z19);                             \
	ERF_HORNER(0, Z3, Z6, Z7, Z8);                                  \
	ERF_HORNER(0, Z14, Z17, Z18, Z19);                              \
	ERF_FINISH(Z0, Z1, Z3, Z4, Z7, Z8, Z9, Z10, K1, K2, K3);        \
	ERF_FINISH(Z11, Z12, Z14, Z15, Z18, Z19, Z20, Z21, K4, K5, K6)

// ERFCONSTS loads the registers the macros read; table is the address of
// erfTable.
#define ERFCONSTS(table) \
	MOVQ         table, R8;       \
	MOVL         $0x7fffffff, AX; \
	VPBROADCASTD AX, Z28;         \
	MOVL         $0x3f000000, AX; \
	VPBROADCASTD AX, Z29;         \
	MOVL         $0x40800000, AX; \
	VPBROADCASTD AX, Z30;         \
	MOVL         $0x3f800000, AX; \
	VPBROADCASTD AX, Z31

// func erfAVX512(dst, src *float32, n int, table *float32)
TEXT ·erfAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	ERFCONSTS(table+24(FP))
	SHRQ $4, CX

two:
	CMPQ    CX, $2
	JLT     one
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z11
	ERF_TWO
	VMOVUPS Z10, (DI)
	VMOVUPS Z21, 64(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $2, CX
	JMP     two

one:
	TESTQ   CX, CX
	JZ      done
	VMOVUPS (SI), Z0
	ERF_ONE
	VMOVUPS Z10, (DI)

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
	VBROADCASTSS c+32(FP), Z25
	VBROADCASTSS a+36(FP), Z26
	VBROADCASTSS s+40(FP), Z27
	SHRQ         $4, CX

two:
	CMPQ    CX, $2
	JLT     one
	VMOVUPS (SI), Z22
	VMOVUPS 64(SI), Z23
	VDIVPS  Z25, Z22, Z0  // x/c
	VDIVPS  Z25, Z23, Z11
	ERF_TWO
	VADDPS  Z26, Z10, Z10 // e + a
	VADDPS  Z26, Z21, Z21
	VMULPS  Z10, Z22, Z10 // x·(e + a)
	VMULPS  Z21, Z23, Z21
	VMULPS  Z27, Z10, Z10 // ·s
	VMULPS  Z27, Z21, Z21
	VMOVUPS Z10, (DI)
	VMOVUPS Z21, 64(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $2, CX
	JMP     two

one:
	TESTQ   CX, CX
	JZ      done
	VMOVUPS (SI), Z22
	VDIVPS  Z25, Z22, Z0
	ERF_ONE
	VADDPS  Z26, Z10, Z10
	VMULPS  Z10, Z22, Z10
	VMULPS  Z27, Z10, Z10
	VMOVUPS Z10, (DI)

done:
	VZEROUPPER
	RET

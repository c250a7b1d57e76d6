#include "textflag.h"

// AVX-512 erf and exact GELU: see gelu_amd64.go. Eight float32 values per
// step, widened to float64 and run through erf64's steps lane by lane
// (same operations, same order, no fused multiply-add), so every lane
// gives erf64's bits.

// Broadcast a 64-bit constant into a ZMM register.
#define BCASTQ(imm, Z) \
	MOVQ         imm, AX; \
	VMOVQ        AX, X31; \
	VPBROADCASTQ X31, Z

// ERF8 sets Z10 to erf64 of the eight float64 values in Z0 (Z1–Z9 and
// K1–K4 are scratch). Registers: R8 the table erfPoly, Z16 the sign bit,
// Z17 the magnitude mask, Z18 erfSeries, Z19 erfLimit, Z20
// erfPieces/erfLimit, Z21 1.0, Z22 0.5, Z24–Z30 erfTaylor[0..6]. Every
// branch of erf64 is computed and the lanes pick theirs: the series below
// erfSeries (K1), the polynomial pieces below erfLimit (K4), ±1 from
// erfLimit on (K3), x itself (NaN) otherwise. The series is Horner's rule
// on z = x·x (multiplications and additions rounded apart), times x. The
// pieces' lanes take u = a·2, i = int(u) and t = u − i − ½, and evaluate
// piece i's polynomial by Horner's rule with fused multiply-adds, each
// power's coefficients permuted out of its row of erfPoly by i (the low
// three bits of each index; a lane outside the pieces reads some row and
// is not picked); the result takes x's sign by XOR, and ±1 is 1.0 OR x's
// sign.
#define ERF8 \
	VPANDQ      Z17, Z0, Z1;      \
	VCMPPD      $1, Z18, Z1, K1;  \
	VCMPPD      $1, Z19, Z1, K2;  \
	VCMPPD      $13, Z19, Z1, K3; \
	KANDNW      K2, K1, K4;       \
	VMULPD      Z0, Z0, Z2;       \
	VMULPD      Z30, Z2, Z3;      \
	VADDPD      Z29, Z3, Z3;      \
	VMULPD      Z3, Z2, Z3;       \
	VADDPD      Z28, Z3, Z3;      \
	VMULPD      Z3, Z2, Z3;       \
	VADDPD      Z27, Z3, Z3;      \
	VMULPD      Z3, Z2, Z3;       \
	VADDPD      Z26, Z3, Z3;      \
	VMULPD      Z3, Z2, Z3;       \
	VADDPD      Z25, Z3, Z3;      \
	VMULPD      Z3, Z2, Z3;       \
	VADDPD      Z24, Z3, Z3;      \
	VMULPD      Z3, Z0, Z3;       \
	VMULPD      Z20, Z1, Z4;      \
	VCVTTPD2DQ  Z4, Y5;           \
	VCVTDQ2PD   Y5, Z6;           \
	VSUBPD      Z6, Z4, Z6;       \
	VSUBPD      Z22, Z6, Z6;      \
	VPMOVZXDQ   Y5, Z5;           \
	VPERMPD     704(R8), Z5, Z7;  \
	VPERMPD     640(R8), Z5, Z8;  \
	VFMADD213PD Z8, Z6, Z7;       \
	VPERMPD     576(R8), Z5, Z8;  \
	VFMADD213PD Z8, Z6, Z7;       \
	VPERMPD     512(R8), Z5, Z8;  \
	VFMADD213PD Z8, Z6, Z7;       \
	VPERMPD     448(R8), Z5, Z8;  \
	VFMADD213PD Z8, Z6, Z7;       \
	VPERMPD     384(R8), Z5, Z8;  \
	VFMADD213PD Z8, Z6, Z7;       \
	VPERMPD     320(R8), Z5, Z8;  \
	VFMADD213PD Z8, Z6, Z7;       \
	VPERMPD     256(R8), Z5, Z8;  \
	VFMADD213PD Z8, Z6, Z7;       \
	VPERMPD     192(R8), Z5, Z8;  \
	VFMADD213PD Z8, Z6, Z7;       \
	VPERMPD     128(R8), Z5, Z8;  \
	VFMADD213PD Z8, Z6, Z7;       \
	VPERMPD     64(R8), Z5, Z8;   \
	VFMADD213PD Z8, Z6, Z7;       \
	VPERMPD     (R8), Z5, Z8;     \
	VFMADD213PD Z8, Z6, Z7;       \
	VPANDQ      Z16, Z0, Z2;      \
	VPXORQ      Z2, Z7, Z7;       \
	VPORQ       Z21, Z2, Z2;      \
	VMOVAPD     Z0, Z10;          \
	VMOVAPD     Z7, K4, Z10;      \
	VMOVAPD     Z2, K3, Z10;      \
	VMOVAPD     Z3, K1, Z10

// ERFCONSTS loads the constants ERF8 reads; table is the address of
// erfPoly, taylor of erfTaylor.
#define ERFCONSTS(table, taylor) \
	MOVQ         table, R8;                  \
	MOVQ         taylor, R9;                 \
	BCASTQ($0x8000000000000000, Z16);        \
	BCASTQ($0x7fffffffffffffff, Z17);        \
	BCASTQ($0x3fc0000000000000, Z18);        \
	BCASTQ($0x4010000000000000, Z19);        \
	BCASTQ($0x4000000000000000, Z20);        \
	BCASTQ($0x3ff0000000000000, Z21);        \
	BCASTQ($0x3fe0000000000000, Z22);        \
	VBROADCASTSD (R9), Z24;                  \
	VBROADCASTSD 8(R9), Z25;                 \
	VBROADCASTSD 16(R9), Z26;                \
	VBROADCASTSD 24(R9), Z27;                \
	VBROADCASTSD 32(R9), Z28;                \
	VBROADCASTSD 40(R9), Z29;                \
	VBROADCASTSD 48(R9), Z30

// func erfAVX512(dst, src *float32, n int, table *float64, taylor *float64)
TEXT ·erfAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	ERFCONSTS(table+24(FP), taylor+32(FP))
	SHRQ $3, CX
	JZ   done

loop:
	VCVTPS2PD (SI), Z0
	ERF8
	VCVTPD2PS Z10, Y11
	VMOVUPS   Y11, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop

done:
	VZEROUPPER
	RET

// func geluAVX512(dst, src *float32, n int, table *float64, taylor *float64, c, a, s float32)
// dst[i] = ((x·(erf(x/c) + a))·s) in float32 for x = src[i], each
// operation rounded as geluRange rounds it.
TEXT ·geluAVX512(SB), NOSPLIT, $0-52
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	ERFCONSTS(table+24(FP), taylor+32(FP))
	VBROADCASTSS c+40(FP), Y13
	VBROADCASTSS a+44(FP), Y14
	VBROADCASTSS s+48(FP), Y15
	SHRQ         $3, CX
	JZ           done

loop:
	VMOVUPS   (SI), Y11
	VDIVPS    Y13, Y11, Y12 // x/c
	VCVTPS2PD Y12, Z0
	ERF8
	VCVTPD2PS Z10, Y12      // e = float32(erf)
	VADDPS    Y14, Y12, Y12 // e + a
	VMULPS    Y12, Y11, Y12 // x·(e + a)
	VMULPS    Y15, Y12, Y12 // ·s
	VMOVUPS   Y12, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop

done:
	VZEROUPPER
	RET

#include "textflag.h"

// AVX-512 rows of LayerNorm32: see layernorm_amd64.go. Eight values at a
// time, widened to float64; the last n%8 under a mask (AVX-512F's masked
// loads read nothing beyond the row, and masked stores write nothing).

// HSUM8 sets X0 to the sum of the eight float64 lanes of Z (Y1 scratch).
#define HSUM8(Z) \
	VEXTRACTF64X4 $1, Z, Y1; \
	VADDPD        Y1, Y0, Y0; \
	VEXTRACTF128  $1, Y0, X1; \
	VADDPD        X1, X0, X0; \
	VUNPCKHPD     X0, X0, X1; \
	VADDSD        X1, X0, X0

// func layerNormRowAVX512(dst, x, res *float32, n int, scale, bias *float32, eps float64)
// res and bias may be nil. n > 0.
TEXT ·layerNormRowAVX512(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ res+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ scale+32(FP), R8
	MOVQ bias+40(FP), R9

	// K1: the tail's lanes (n%8 of them), R11 their number; BX: the bytes
	// of the whole chunks of 8; AX: the byte offset in the row.
	MOVQ  CX, R12 // n
	MOVQ  CX, BX
	SHRQ  $3, BX
	SHLQ  $5, BX  // bytes of the whole chunks
	ANDQ  $7, CX
	MOVQ  CX, R11
	MOVL  $1, R10
	SHLL  CX, R10
	DECL  R10
	KMOVW R10, K1

	// Pass 1: the row (x, or x + res rounded to float32 and written to
	// dst) summed in two float64 accumulators.
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	XORQ   AX, AX
	TESTQ  DX, DX
	JZ     sumx

sumres:
	CMPQ      AX, BX
	JEQ       sumrestail
	VMOVUPS   (SI)(AX*1), Y4
	VADDPS    (DX)(AX*1), Y4, Y4
	VMOVUPS   Y4, (DI)(AX*1)
	VCVTPS2PD Y4, Z4
	VADDPD    Z4, Z2, Z2
	ADDQ      $32, AX
	JMP       sumres

sumrestail:
	TESTQ     R11, R11
	JZ        sumdone
	MOVQ      AX, R10
	VMOVUPS.Z (SI)(R10*1), K1, Z4
	VMOVUPS.Z (DX)(R10*1), K1, Z5
	VADDPS    Z5, Z4, Z4
	VMOVUPS   Z4, K1, (DI)(R10*1)
	VCVTPS2PD Y4, Z4
	VADDPD    Z4, Z3, Z3
	JMP       sumdone

sumx:
	CMPQ      AX, BX
	JEQ       sumxtail
	VCVTPS2PD (SI)(AX*1), Z4
	VADDPD    Z4, Z2, Z2
	ADDQ      $32, AX
	JMP       sumx

sumxtail:
	TESTQ       R11, R11
	JZ          sumdone
	MOVQ        AX, R10
	VCVTPS2PD.Z (SI)(R10*1), K1, Z4
	VADDPD      Z4, Z3, Z3

sumdone:
	TESTQ DX, DX
	JZ    mean
	MOVQ  DI, SI // the later passes read the sum

mean:
	VADDPD       Z3, Z2, Z0
	HSUM8(Z0)
	CVTSQ2SD     R12, X6   // n
	VDIVSD       X6, X0, X0
	VBROADCASTSD X0, Z7    // mean

	// Pass 2: the squared deviations.
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	XORQ   AX, AX

dev:
	CMPQ        AX, BX
	JEQ         devtail
	VCVTPS2PD   (SI)(AX*1), Z4
	VSUBPD      Z7, Z4, Z4
	VFMADD231PD Z4, Z4, Z2
	ADDQ        $32, AX
	JMP         dev

devtail:
	TESTQ       R11, R11
	JZ          variance
	MOVQ        AX, R10
	VCVTPS2PD.Z (SI)(R10*1), K1, Z4
	VSUBPD.Z    Z7, Z4, K1, Z4
	VFMADD231PD Z4, Z4, Z3

variance:
	VADDPD       Z3, Z2, Z0
	HSUM8(Z0)
	VDIVSD       X6, X0, X0
	VADDSD       eps+48(FP), X0, X0
	VSQRTSD      X0, X0, X0
	MOVQ         $0x3ff0000000000000, AX
	VMOVQ        AX, X1
	VDIVSD       X0, X1, X0
	VBROADCASTSD X0, Z8     // inv

	// Pass 3: ((v − mean)·inv)·scale + bias, rounded to float32.
	XORQ AX, AX

norm:
	CMPQ      AX, BX
	JEQ       normtail
	VCVTPS2PD (SI)(AX*1), Z4
	VSUBPD    Z7, Z4, Z4
	VMULPD    Z8, Z4, Z4
	VCVTPS2PD (R8)(AX*1), Z5
	VMULPD    Z5, Z4, Z4
	TESTQ     R9, R9
	JZ        normstore
	VCVTPS2PD (R9)(AX*1), Z5
	VADDPD    Z5, Z4, Z4

normstore:
	VCVTPD2PS Z4, Y4
	VMOVUPS   Y4, (DI)(AX*1)
	ADDQ      $32, AX
	JMP       norm

normtail:
	TESTQ       R11, R11
	JZ          done
	VCVTPS2PD.Z (SI)(AX*1), K1, Z4
	VSUBPD      Z7, Z4, Z4
	VMULPD      Z8, Z4, Z4
	VCVTPS2PD.Z (R8)(AX*1), K1, Z5
	VMULPD      Z5, Z4, Z4
	TESTQ       R9, R9
	JZ          tailstore
	VCVTPS2PD.Z (R9)(AX*1), K1, Z5
	VADDPD      Z5, Z4, Z4

tailstore:
	VCVTPD2PS Z4, Y4
	VMOVUPS   Z4, K1, (DI)(AX*1)

done:
	VZEROUPPER
	RET

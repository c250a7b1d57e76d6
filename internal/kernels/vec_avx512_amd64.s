#include "textflag.h"

// AVX-512 vector helpers for the softmax: see vec_avx512_amd64.go.

// Broadcast a 32-bit constant into a ZMM register.
#define BCAST(imm, Z) \
	MOVL         imm, AX; \
	VMOVD        AX, X31; \
	VPBROADCASTD X31, Z

// EXP16 computes exp(x − shift) for the 16 floats in X, leaving the result
// in P (N is scratch, K1 holds the lanes that are not below expMin). Same
// steps as exp32 in exp.go, except that VSCALEFPS multiplies by 2ⁿ.
// Registers: Z8 shift, Z9 expMin, Z10 expMax, Z11 log2e, Z12 ln2Hi,
// Z13 ln2Lo, Z14 1.0, Z16–Z21 the polynomial P0–P5.
#define EXP16(X, N, P) \
	VSUBPS       Z8, X, X;    \
	VCMPPS       $13, Z9, X, K1; \
	VMAXPS       Z9, X, X;    \
	VMINPS       Z10, X, X;   \
	VMULPS       Z11, X, N;   \
	VRNDSCALEPS  $8, N, N;    \
	VFNMADD231PS Z12, N, X;   \
	VFNMADD231PS Z13, N, X;   \
	VMOVAPS      Z16, P;      \
	VFMADD213PS  Z17, X, P;   \
	VFMADD213PS  Z18, X, P;   \
	VFMADD213PS  Z19, X, P;   \
	VFMADD213PS  Z20, X, P;   \
	VFMADD213PS  Z21, X, P;   \
	VMULPS       X, P, P;     \
	VFMADD213PS  X, X, P;     \
	VADDPS       Z14, P, P;   \
	VSCALEFPS    N, P, P;     \
	VMOVUPS.Z    P, K1, P

// func expShiftAVX512(x *float32, n int, shift float32) (sum float32)
// n must be a multiple of 16.
TEXT ·expShiftAVX512(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS shift+16(FP), Z8
	BCAST($0xc2aeac4f, Z9)
	BCAST($0x42b00000, Z10)
	BCAST($0x3fb8aa3b, Z11)
	BCAST($0x3f318000, Z12)
	BCAST($0xb95e8083, Z13)
	BCAST($0x3f800000, Z14)
	BCAST($0x39506967, Z16)
	BCAST($0x3ab743ce, Z17)
	BCAST($0x3c088908, Z18)
	BCAST($0x3d2aa9c1, Z19)
	BCAST($0x3e2aaaaa, Z20)
	BCAST($0x3f000000, Z21)
	VPXORD       Z15, Z15, Z15
	SHRQ         $4, CX
	JZ           done

loop:
	VMOVUPS (SI), Z0
	EXP16(Z0, Z1, Z2)
	VMOVUPS Z2, (SI)
	VADDPS  Z2, Z15, Z15
	ADDQ    $64, SI
	DECQ    CX
	JNZ     loop

done:
	VEXTRACTF32X8 $1, Z15, Y0
	VADDPS        Y0, Y15, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VADDPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VADDSS        X1, X0, X0
	VMOVSS        X0, sum+24(FP)
	VZEROUPPER
	RET

// func maxOfAVX512(x *float32, n int) float32
// n must be a positive multiple of 32.
TEXT ·maxOfAVX512(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	ADDQ    $128, SI
	SHRQ    $5, CX
	DECQ    CX
	JZ      reduce

loop:
	VMAXPS (SI), Z0, Z0
	VMAXPS 64(SI), Z1, Z1
	ADDQ   $128, SI
	DECQ   CX
	JNZ    loop

reduce:
	VMAXPS        Z1, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VMAXSS        X1, X0, X0
	VMOVSS        X0, ret+16(FP)
	VZEROUPPER
	RET

// func scaleAVX512(x *float32, n int, alpha float32)
// n must be a multiple of 16.
TEXT ·scaleAVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS alpha+16(FP), Z1
	SHRQ         $4, CX
	JZ           end

loop:
	VMULPS  (SI), Z1, Z0
	VMOVUPS Z0, (SI)
	ADDQ    $64, SI
	DECQ    CX
	JNZ     loop

end:
	VZEROUPPER
	RET

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
// Z13 ln2Lo, Z14 1.0, Z16–Z21 the polynomial P0–P5. A NaN stays NaN: the
// comparison is "not less than" (true for NaN), and VMAXPS and VMINPS
// return their second source (Intel order; the first operand here) when
// either is NaN.
#define EXP16(X, N, P) \
	VSUBPS       Z8, X, X;    \
	VCMPPS       $5, Z9, X, K1; \
	VMAXPS       X, Z9, X;    \
	VMINPS       X, Z10, X;   \
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

// TAILMASK sets K2 to the low CX&15 lanes, leaves CX&15 in CX and sets
// the flags from it (JZ: no tail).
#define TAILMASK \
	ANDQ  $15, CX; \
	MOVL  $1, AX;  \
	SHLL  CX, AX;  \
	DECL  AX;      \
	KMOVW AX, K2;  \
	TESTQ CX, CX

// func expShiftAVX512(x *float32, n int, shift float32) (sum float32)
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
	MOVQ         CX, DX
	SHRQ         $4, DX
	JZ           tail

loop:
	VMOVUPS (SI), Z0
	EXP16(Z0, Z1, Z2)
	VMOVUPS Z2, (SI)
	VADDPS  Z2, Z15, Z15
	ADDQ    $64, SI
	DECQ    DX
	JNZ     loop

tail:
	// The last n%16 floats under a mask: masked-off lanes are neither read
	// (no fault past the slice) nor written, and are zeroed before the sum.
	TAILMASK
	JZ        done
	VMOVUPS.Z (SI), K2, Z0
	EXP16(Z0, Z1, Z2)
	VMOVUPS.Z Z2, K2, Z2
	VMOVUPS   Z2, K2, (SI)
	VADDPS    Z2, Z15, Z15

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
// VMAXPS drops a NaN in one of its operands, so NaN lanes are collected in
// K3 apart (an unordered self-comparison) and make the result NaN.
TEXT ·maxOfAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	BCAST($0xff800000, Z0) // −Inf
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	KXORW   K3, K3, K3     // NaN lanes seen
	MOVQ    CX, DX
	SHRQ    $5, DX
	JZ      half

loop:
	VMOVUPS (SI), Z3
	VMOVUPS 64(SI), Z4
	VMAXPS  Z3, Z0, Z0
	VMAXPS  Z4, Z1, Z1
	VCMPPS  $3, Z3, Z3, K4
	VCMPPS  $3, Z4, Z4, K5
	KORW    K4, K3, K3
	KORW    K5, K3, K3
	ADDQ    $128, SI
	DECQ    DX
	JNZ     loop

half:
	TESTQ   $16, CX
	JZ      tail
	VMOVUPS (SI), Z3
	VMAXPS  Z3, Z0, Z0
	VCMPPS  $3, Z3, Z3, K4
	KORW    K4, K3, K3
	ADDQ    $64, SI

tail:
	// Masked-off lanes keep −Inf (merge masking) and are not read.
	TAILMASK
	JZ      reduce
	VMOVUPS (SI), K2, Z2
	VMAXPS  Z2, Z1, Z1
	VCMPPS  $3, Z2, Z2, K4
	KORW    K4, K3, K3

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
	KORTESTW      K3, K3
	JZ            done
	MOVL          $0x7fc00000, AX // NaN
	MOVL          AX, ret+16(FP)

done:
	VZEROUPPER
	RET

// func scaleAVX512(x *float32, n int, alpha float32)
TEXT ·scaleAVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS alpha+16(FP), Z1
	MOVQ         CX, DX
	SHRQ         $4, DX
	JZ           tail

loop:
	VMULPS  (SI), Z1, Z0
	VMOVUPS Z0, (SI)
	ADDQ    $64, SI
	DECQ    DX
	JNZ     loop

tail:
	TAILMASK
	JZ        end
	VMOVUPS.Z (SI), K2, Z0
	VMULPS    Z1, Z0, Z0
	VMOVUPS   Z0, K2, (SI)

end:
	VZEROUPPER
	RET

// func addAVX512(x, y *float32, n int)
// x[i] += y[i] for i < n; the last n%16 under a mask.
TEXT ·addAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ CX, DX
	SHRQ $4, DX
	JZ   tail

loop:
	VMOVUPS (SI), Z0
	VADDPS  (DI), Z0, Z0
	VMOVUPS Z0, (SI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    DX
	JNZ     loop

tail:
	TAILMASK
	JZ        end
	VMOVUPS.Z (SI), K2, Z0
	VMOVUPS.Z (DI), K2, Z1
	VADDPS    Z1, Z0, Z0
	VMOVUPS   Z0, K2, (SI)

end:
	VZEROUPPER
	RET

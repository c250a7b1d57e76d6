#include "textflag.h"

// AVX2 vector helpers for the softmax: see vec_avx2_amd64.go.

// Eight copies of each constant of the exponential that does not fit in a
// register (the polynomial's coefficients and the float32 exponent bias),
// so the arithmetic can take them as 256-bit memory operands.
DATA expTable<>+0(SB)/4, $0x39506967
DATA expTable<>+4(SB)/4, $0x39506967
DATA expTable<>+8(SB)/4, $0x39506967
DATA expTable<>+12(SB)/4, $0x39506967
DATA expTable<>+16(SB)/4, $0x39506967
DATA expTable<>+20(SB)/4, $0x39506967
DATA expTable<>+24(SB)/4, $0x39506967
DATA expTable<>+28(SB)/4, $0x39506967
DATA expTable<>+32(SB)/4, $0x3ab743ce
DATA expTable<>+36(SB)/4, $0x3ab743ce
DATA expTable<>+40(SB)/4, $0x3ab743ce
DATA expTable<>+44(SB)/4, $0x3ab743ce
DATA expTable<>+48(SB)/4, $0x3ab743ce
DATA expTable<>+52(SB)/4, $0x3ab743ce
DATA expTable<>+56(SB)/4, $0x3ab743ce
DATA expTable<>+60(SB)/4, $0x3ab743ce
DATA expTable<>+64(SB)/4, $0x3c088908
DATA expTable<>+68(SB)/4, $0x3c088908
DATA expTable<>+72(SB)/4, $0x3c088908
DATA expTable<>+76(SB)/4, $0x3c088908
DATA expTable<>+80(SB)/4, $0x3c088908
DATA expTable<>+84(SB)/4, $0x3c088908
DATA expTable<>+88(SB)/4, $0x3c088908
DATA expTable<>+92(SB)/4, $0x3c088908
DATA expTable<>+96(SB)/4, $0x3d2aa9c1
DATA expTable<>+100(SB)/4, $0x3d2aa9c1
DATA expTable<>+104(SB)/4, $0x3d2aa9c1
DATA expTable<>+108(SB)/4, $0x3d2aa9c1
DATA expTable<>+112(SB)/4, $0x3d2aa9c1
DATA expTable<>+116(SB)/4, $0x3d2aa9c1
DATA expTable<>+120(SB)/4, $0x3d2aa9c1
DATA expTable<>+124(SB)/4, $0x3d2aa9c1
DATA expTable<>+128(SB)/4, $0x3e2aaaaa
DATA expTable<>+132(SB)/4, $0x3e2aaaaa
DATA expTable<>+136(SB)/4, $0x3e2aaaaa
DATA expTable<>+140(SB)/4, $0x3e2aaaaa
DATA expTable<>+144(SB)/4, $0x3e2aaaaa
DATA expTable<>+148(SB)/4, $0x3e2aaaaa
DATA expTable<>+152(SB)/4, $0x3e2aaaaa
DATA expTable<>+156(SB)/4, $0x3e2aaaaa
DATA expTable<>+160(SB)/4, $0x3f000000
DATA expTable<>+164(SB)/4, $0x3f000000
DATA expTable<>+168(SB)/4, $0x3f000000
DATA expTable<>+172(SB)/4, $0x3f000000
DATA expTable<>+176(SB)/4, $0x3f000000
DATA expTable<>+180(SB)/4, $0x3f000000
DATA expTable<>+184(SB)/4, $0x3f000000
DATA expTable<>+188(SB)/4, $0x3f000000
DATA expTable<>+192(SB)/4, $0x7f
DATA expTable<>+196(SB)/4, $0x7f
DATA expTable<>+200(SB)/4, $0x7f
DATA expTable<>+204(SB)/4, $0x7f
DATA expTable<>+208(SB)/4, $0x7f
DATA expTable<>+212(SB)/4, $0x7f
DATA expTable<>+216(SB)/4, $0x7f
DATA expTable<>+220(SB)/4, $0x7f
GLOBL expTable<>(SB), RODATA|NOPTR, $224

// EXP8 computes exp(x − shift) for the 8 floats in X, leaving the result
// in P (N and M are scratch). Registers hold: Y8 shift, Y9 expMin, Y10
// expMax, Y11 log2e, Y12 ln2Hi, Y13 ln2Lo, Y14 1.0. Same steps as exp32
// in exp.go: n = round(x·log2e), r = x − n·ln2, 2ⁿ·(1 + r + r²·p(r)),
// and 0 where x < expMin. A NaN stays NaN: VMAXPS and VMINPS return their
// second source (Intel order; the first operand here) when either is NaN,
// so x goes there, and the comparison with expMin is false for NaN.
#define EXP8(X, N, P, M) \
	VSUBPS       Y8, X, X;                    \
	VCMPPS       $1, Y9, X, M;                \
	VMAXPS       X, Y9, X;                    \
	VMINPS       X, Y10, X;                   \
	VMULPS       Y11, X, N;                   \
	VROUNDPS     $0, N, N;                    \
	VFNMADD231PS Y12, N, X;                   \
	VFNMADD231PS Y13, N, X;                   \
	VMOVUPS      expTable<>+0(SB), P;        \
	VFMADD213PS  expTable<>+32(SB), X, P;     \
	VFMADD213PS  expTable<>+64(SB), X, P;     \
	VFMADD213PS  expTable<>+96(SB), X, P;     \
	VFMADD213PS  expTable<>+128(SB), X, P;     \
	VFMADD213PS  expTable<>+160(SB), X, P;     \
	VMULPS       X, P, P;                     \
	VFMADD213PS  X, X, P;                     \
	VADDPS       Y14, P, P;                   \
	VCVTPS2DQ    N, N;                        \
	VPADDD       expTable<>+192(SB), N, N;   \
	VPSLLD       $23, N, N;                   \
	VMULPS       N, P, P;                     \
	VANDNPS      P, M, P

// Broadcast a 32-bit constant into a YMM register.
#define BCAST(imm, Y) \
	MOVL         imm, AX; \
	VMOVD        AX, X15; \
	VPBROADCASTD X15, Y

// Eight all-ones lanes then eight zero lanes: the 8 floats loaded from
// tailMask<>+32−4·r have exactly their first r lanes set, the mask for a
// tail of r floats.
DATA tailMask<>+0(SB)/4, $0xffffffff
DATA tailMask<>+4(SB)/4, $0xffffffff
DATA tailMask<>+8(SB)/4, $0xffffffff
DATA tailMask<>+12(SB)/4, $0xffffffff
DATA tailMask<>+16(SB)/4, $0xffffffff
DATA tailMask<>+20(SB)/4, $0xffffffff
DATA tailMask<>+24(SB)/4, $0xffffffff
DATA tailMask<>+28(SB)/4, $0xffffffff
DATA tailMask<>+32(SB)/4, $0
DATA tailMask<>+36(SB)/4, $0
DATA tailMask<>+40(SB)/4, $0
DATA tailMask<>+44(SB)/4, $0
DATA tailMask<>+48(SB)/4, $0
DATA tailMask<>+52(SB)/4, $0
DATA tailMask<>+56(SB)/4, $0
DATA tailMask<>+60(SB)/4, $0
GLOBL tailMask<>(SB), RODATA|NOPTR, $64

// TAILMASK sets Y7 to the mask of the low CX&7 lanes, leaves CX&7 in CX
// and sets the flags from it (JZ: no tail).
#define TAILMASK \
	ANDQ    $7, CX;                  \
	LEAQ    tailMask<>+32(SB), AX;   \
	MOVQ    CX, DX;                  \
	SHLQ    $2, DX;                  \
	SUBQ    DX, AX;                  \
	VMOVDQU (AX), Y7;                \
	TESTQ   CX, CX

// func expShiftAVX2(x *float32, n int, shift float32) (sum float32)
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS shift+16(FP), Y8
	BCAST($0xc2aeac4f, Y9)
	BCAST($0x42b00000, Y10)
	BCAST($0x3fb8aa3b, Y11)
	BCAST($0x3f318000, Y12)
	BCAST($0xb95e8083, Y13)
	BCAST($0x3f800000, Y14)
	VXORPS       Y15, Y15, Y15
	MOVQ         CX, R8
	SHRQ         $3, R8
	JZ           tail

	// Two vectors per iteration when possible: their chains are independent.
	CMPQ R8, $2
	JLT  one

loop2:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y4
	EXP8(Y0, Y1, Y2, Y3)
	EXP8(Y4, Y5, Y6, Y7)
	VMOVUPS Y2, (SI)
	VMOVUPS Y6, 32(SI)
	VADDPS  Y2, Y15, Y15
	VADDPS  Y6, Y15, Y15
	ADDQ    $64, SI
	SUBQ    $2, R8
	CMPQ    R8, $2
	JGE     loop2
	TESTQ   R8, R8
	JZ      tail

one:
	VMOVUPS (SI), Y0
	EXP8(Y0, Y1, Y2, Y3)
	VMOVUPS Y2, (SI)
	VADDPS  Y2, Y15, Y15
	ADDQ    $32, SI

tail:
	// The last n%8 floats under a mask: masked-off lanes are neither read
	// (no fault past the slice) nor written, and are zeroed before the sum.
	TAILMASK
	JZ         done
	VMASKMOVPS (SI), Y7, Y0
	EXP8(Y0, Y1, Y2, Y3)
	VANDPS     Y7, Y2, Y2
	VMASKMOVPS Y2, Y7, (SI)
	VADDPS     Y2, Y15, Y15

done:
	VEXTRACTF128 $1, Y15, X0
	VADDPS       X0, X15, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, sum+24(FP)
	VZEROUPPER
	RET

// func maxOfAVX2(x *float32, n int) float32
// VMAXPS drops a NaN in one of its operands, so NaN lanes are collected
// apart (an unordered self-comparison) and make the result NaN.
TEXT ·maxOfAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	BCAST($0xff800000, Y6) // −Inf
	VMOVAPS Y6, Y0
	VMOVAPS Y6, Y1
	VXORPS  Y5, Y5, Y5     // NaN lanes seen
	MOVQ    CX, R8
	SHRQ    $4, R8
	JZ      half

loop:
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VMAXPS  Y2, Y0, Y0
	VMAXPS  Y3, Y1, Y1
	VCMPPS  $3, Y2, Y2, Y2
	VCMPPS  $3, Y3, Y3, Y3
	VORPS   Y2, Y5, Y5
	VORPS   Y3, Y5, Y5
	ADDQ    $64, SI
	DECQ    R8
	JNZ     loop

half:
	TESTQ   $8, CX
	JZ      tail
	VMOVUPS (SI), Y2
	VMAXPS  Y2, Y0, Y0
	VCMPPS  $3, Y2, Y2, Y2
	VORPS   Y2, Y5, Y5
	ADDQ    $32, SI

tail:
	// Masked-off lanes load as 0: replace them by −Inf before the max.
	TAILMASK
	JZ         reduce
	VMASKMOVPS (SI), Y7, Y2
	VBLENDVPS  Y7, Y2, Y6, Y2
	VMAXPS     Y2, Y1, Y1
	VCMPPS     $3, Y2, Y2, Y2
	VORPS      Y2, Y5, Y5

reduce:
	VMAXPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	VMOVSS       X0, ret+16(FP)
	VMOVMSKPS    Y5, AX
	TESTL        AX, AX
	JZ           done
	MOVL         $0x7fc00000, AX // NaN
	MOVL         AX, ret+16(FP)

done:
	VZEROUPPER
	RET

// func scaleAVX2(x *float32, n int, alpha float32)
TEXT ·scaleAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS alpha+16(FP), Y1
	MOVQ         CX, R8
	SHRQ         $3, R8
	JZ           tail

loop:
	VMULPS  (SI), Y1, Y0
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	DECQ    R8
	JNZ     loop

tail:
	TAILMASK
	JZ         end
	VMASKMOVPS (SI), Y7, Y0
	VMULPS     Y1, Y0, Y0
	VMASKMOVPS Y0, Y7, (SI)

end:
	VZEROUPPER
	RET

// func interleave4AVX2(dst *float32, ldd int, src *float32, lds int, n int)
// For p < n (a multiple of 8) and r < 4: dst[p·ldd + r] = src[r·lds + p].
// Eight columns of four rows at a time: four loads, a 4×4 transpose in
// each 128-bit lane, eight 16-byte stores.
TEXT ·interleave4AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	SHLQ $2, R9
	MOVQ n+32(FP), CX
	SHRQ $3, CX
	JZ   done4
	LEAQ (R9)(R9*2), R10 // 3 rows of src
	LEAQ (R8)(R8*2), R11 // 3 rows of dst

loop4:
	VMOVUPS   (SI), Y0
	VMOVUPS   (SI)(R9*1), Y1
	VMOVUPS   (SI)(R9*2), Y2
	VMOVUPS   (SI)(R10*1), Y3
	VUNPCKLPS Y1, Y0, Y4         // a0 b0 a1 b1 | a4 b4 a5 b5
	VUNPCKHPS Y1, Y0, Y5         // a2 b2 a3 b3 | a6 b6 a7 b7
	VUNPCKLPS Y3, Y2, Y6         // c0 d0 c1 d1 | c4 d4 c5 d5
	VUNPCKHPS Y3, Y2, Y7         // c2 d2 c3 d3 | c6 d6 c7 d7
	VSHUFPS   $0x44, Y6, Y4, Y0  // a0 b0 c0 d0 | a4 b4 c4 d4
	VSHUFPS   $0xee, Y6, Y4, Y1  // a1 b1 c1 d1 | a5 b5 c5 d5
	VSHUFPS   $0x44, Y7, Y5, Y2  // a2 b2 c2 d2 | a6 b6 c6 d6
	VSHUFPS   $0xee, Y7, Y5, Y3  // a3 b3 c3 d3 | a7 b7 c7 d7
	VMOVUPS   X0, (DI)
	VMOVUPS   X1, (DI)(R8*1)
	VMOVUPS   X2, (DI)(R8*2)
	VMOVUPS   X3, (DI)(R11*1)
	LEAQ      (DI)(R8*4), DX
	VEXTRACTF128 $1, Y0, (DX)
	VEXTRACTF128 $1, Y1, (DX)(R8*1)
	VEXTRACTF128 $1, Y2, (DX)(R8*2)
	VEXTRACTF128 $1, Y3, (DX)(R11*1)
	LEAQ      (DX)(R8*4), DI
	ADDQ      $32, SI
	DECQ      CX
	JNZ       loop4

done4:
	VZEROUPPER
	RET

// func interleave2AVX2(dst *float32, ldd int, src *float32, lds int, n int)
// For p < n (a multiple of 8) and r < 2: dst[p·ldd + r] = src[r·lds + p].
TEXT ·interleave2AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	SHLQ $2, R9
	MOVQ n+32(FP), CX
	SHRQ $3, CX
	JZ   done2
	LEAQ (R8)(R8*2), R11

loop2:
	VMOVUPS      (SI), Y0
	VMOVUPS      (SI)(R9*1), Y1
	VUNPCKLPS    Y1, Y0, Y4 // a0 b0 a1 b1 | a4 b4 a5 b5
	VUNPCKHPS    Y1, Y0, Y5 // a2 b2 a3 b3 | a6 b6 a7 b7
	VMOVLPS      X4, (DI)
	VMOVHPS      X4, (DI)(R8*1)
	VMOVLPS      X5, (DI)(R8*2)
	VMOVHPS      X5, (DI)(R11*1)
	LEAQ         (DI)(R8*4), DX
	VEXTRACTF128 $1, Y4, X4
	VEXTRACTF128 $1, Y5, X5
	VMOVLPS      X4, (DX)
	VMOVHPS      X4, (DX)(R8*1)
	VMOVLPS      X5, (DX)(R8*2)
	VMOVHPS      X5, (DX)(R11*1)
	LEAQ         (DX)(R8*4), DI
	ADDQ         $32, SI
	DECQ         CX
	JNZ          loop2

done2:
	VZEROUPPER
	RET

// func addAVX2(x, y *float32, n int)
// x[i] += y[i] for i < n; the last n%8 under a mask.
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ CX, R8
	SHRQ $3, R8
	JZ   tail

loop:
	VMOVUPS (SI), Y0
	VADDPS  (DI), Y0, Y0
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    R8
	JNZ     loop

tail:
	TAILMASK
	JZ         end
	VMASKMOVPS (SI), Y7, Y0
	VMASKMOVPS (DI), Y7, Y1
	VADDPS     Y1, Y0, Y0
	VMASKMOVPS Y0, Y7, (SI)

end:
	VZEROUPPER
	RET

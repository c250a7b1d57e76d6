#include "textflag.h"

// Packing helpers for the AVX-512 kernel: see pack_avx512_amd64.go.

// func copyRows32AVX512(dst, src *float32, lds, rows int)
// For p < rows and c < 32: dst[p·32 + c] = src[p·lds + c], two rows per
// iteration. (Software prefetches of the rows ahead made no difference,
// from L3 or from memory.)
TEXT ·copyRows32AVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R8
	SHLQ $2, R8
	MOVQ rows+24(FP), CX
	LEAQ (R8)(R8*1), R9 // two rows of src
	MOVQ CX, DX
	SHRQ $1, DX
	JZ   one

two:
	VMOVUPS    (SI), Z0
	VMOVUPS    64(SI), Z1
	VMOVUPS    (SI)(R8*1), Z2
	VMOVUPS    64(SI)(R8*1), Z3
	VMOVUPS    Z0, (DI)
	VMOVUPS    Z1, 64(DI)
	VMOVUPS    Z2, 128(DI)
	VMOVUPS    Z3, 192(DI)
	ADDQ       R9, SI
	ADDQ       $256, DI
	DECQ       DX
	JNZ        two

one:
	ANDQ $1, CX
	JZ   done
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)

done:
	VZEROUPPER
	RET

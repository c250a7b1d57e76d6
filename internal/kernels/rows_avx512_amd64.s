#include "textflag.h"

// AVX-512 few-rows kernel: see rows_avx512_amd64.go.

// One step p: load row p of the B panel (32 floats), broadcast A's value
// of column p for each row and multiply-add it into that row's two
// accumulators. A's rows are at AX, AX+R10, AX+2·R10 and SI = AX+3·R10;
// R11 steps A to the next column, R12 steps B to the next row.
#define LOADB \
	VMOVUPS (BX), Z28; \
	VMOVUPS 64(BX), Z29

#define ROWFMA(addr, lo, hi, t) \
	VBROADCASTSS addr, t; \
	VFMADD231PS  Z28, t, lo; \
	VFMADD231PS  Z29, t, hi

#define NEXT \
	ADDQ R11, AX; \
	ADDQ R11, SI; \
	ADDQ R12, BX

// Store one row as the 12×32 kernel does: C = alpha·acc + beta·C (Z30 =
// alpha, Z31 = beta), or alpha·acc without reading C.
#define STOREROW_BETA(lo, hi) \
	VMULPS      (DX), Z31, Z28;   \
	VMULPS      64(DX), Z31, Z29; \
	VFMADD231PS lo, Z30, Z28;     \
	VFMADD231PS hi, Z30, Z29;     \
	VMOVUPS     Z28, (DX);        \
	VMOVUPS     Z29, 64(DX);      \
	ADDQ        R8, DX

#define STOREROW(lo, hi) \
	VMULPS  lo, Z30, Z28; \
	VMULPS  hi, Z30, Z29; \
	VMOVUPS Z28, (DX);    \
	VMOVUPS Z29, 64(DX);  \
	ADDQ    R8, DX

// func tileRowsAVX512(rows, kc int, a *float32, aRow, aCol int, b *float32, bRow int, c *float32, ldc int, alpha, beta float32)
TEXT ·tileRowsAVX512(SB), NOSPLIT, $0-80
	MOVQ rows+0(FP), DI
	MOVQ kc+8(FP), CX
	MOVQ a+16(FP), AX
	MOVQ aRow+24(FP), R10
	SHLQ $2, R10
	MOVQ aCol+32(FP), R11
	SHLQ $2, R11
	MOVQ b+40(FP), BX
	MOVQ bRow+48(FP), R12
	SHLQ $2, R12
	MOVQ c+56(FP), DX
	MOVQ ldc+64(FP), R8
	SHLQ $2, R8
	LEAQ (R10)(R10*2), R9
	LEAQ (AX)(R9*1), SI

	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

	TESTQ CX, CX
	JZ    store
	CMPQ  DI, $2
	JB    loop1
	JE    loop2
	CMPQ  DI, $3
	JE    loop3

loop4:
	LOADB
	ROWFMA((AX), Z0, Z1, Z30)
	ROWFMA((AX)(R10*1), Z2, Z3, Z31)
	ROWFMA((AX)(R10*2), Z4, Z5, Z30)
	ROWFMA((SI), Z6, Z7, Z31)
	NEXT
	DECQ CX
	JNZ  loop4
	JMP  store

loop3:
	LOADB
	ROWFMA((AX), Z0, Z1, Z30)
	ROWFMA((AX)(R10*1), Z2, Z3, Z31)
	ROWFMA((AX)(R10*2), Z4, Z5, Z30)
	NEXT
	DECQ CX
	JNZ  loop3
	JMP  store

loop2:
	LOADB
	ROWFMA((AX), Z0, Z1, Z30)
	ROWFMA((AX)(R10*1), Z2, Z3, Z31)
	NEXT
	DECQ CX
	JNZ  loop2
	JMP  store

loop1:
	LOADB
	ROWFMA((AX), Z0, Z1, Z30)
	NEXT
	DECQ CX
	JNZ  loop1

store:
	VBROADCASTSS alpha+72(FP), Z30
	VBROADCASTSS beta+76(FP), Z31
	VXORPS       X28, X28, X28
	VUCOMISS     beta+76(FP), X28
	JNE          storebeta
	JP           storebeta
	STOREROW(Z0, Z1)
	CMPQ DI, $1
	JE   done
	STOREROW(Z2, Z3)
	CMPQ DI, $2
	JE   done
	STOREROW(Z4, Z5)
	CMPQ DI, $3
	JE   done
	STOREROW(Z6, Z7)
	JMP  done

storebeta:
	STOREROW_BETA(Z0, Z1)
	CMPQ DI, $1
	JE   done
	STOREROW_BETA(Z2, Z3)
	CMPQ DI, $2
	JE   done
	STOREROW_BETA(Z4, Z5)
	CMPQ DI, $3
	JE   done
	STOREROW_BETA(Z6, Z7)

done:
	VZEROUPPER
	RET

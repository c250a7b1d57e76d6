#include "textflag.h"

// AVX-512 few-rows kernel: see rows_avx512_amd64.go.

// One step p: load row p of the B panel (32 floats), broadcast A's value
// of column p for each row and multiply-add it into that row's two
// accumulators (row r in Z2r, Z2r+1). A's rows are at AX, AX+R10,
// AX+2·R10, SI = AX+3·R10, SI+R10, SI+2·R10, DI = AX+6·R10 and DI+R10;
// R11 steps A to the next column, R12 steps B to the next row.
#define LOADB \
	VMOVUPS (BX), Z28; \
	VMOVUPS 64(BX), Z29

#define ROWFMA(addr, lo, hi, t) \
	VBROADCASTSS addr, t; \
	VFMADD231PS  Z28, t, lo; \
	VFMADD231PS  Z29, t, hi

#define ROWS1 ROWFMA((AX), Z0, Z1, Z30)
#define ROWS2 ROWS1; ROWFMA((AX)(R10*1), Z2, Z3, Z31)
#define ROWS3 ROWS2; ROWFMA((AX)(R10*2), Z4, Z5, Z30)
#define ROWS4 ROWS3; ROWFMA((SI), Z6, Z7, Z31)
#define ROWS5 ROWS4; ROWFMA((SI)(R10*1), Z8, Z9, Z30)
#define ROWS6 ROWS5; ROWFMA((SI)(R10*2), Z10, Z11, Z31)
#define ROWS7 ROWS6; ROWFMA((DI), Z12, Z13, Z30)
#define ROWS8 ROWS7; ROWFMA((DI)(R10*1), Z14, Z15, Z31)

#define NEXT \
	ADDQ R11, AX; \
	ADDQ R11, SI; \
	ADDQ R11, DI; \
	ADDQ R12, BX

// LOOP(label, body): the k loop of one row count, then the store.
#define LOOP(label, body) \
label: \
	LOADB; \
	body; \
	NEXT; \
	DECQ CX; \
	JNZ  label; \
	JMP  store

// Store one row as the 12×32 kernel does: C = alpha·acc + beta·S (Z30 =
// alpha, Z31 = beta; S's row at AX, R11 bytes on to the next), or
// alpha·acc without reading S.
#define STOREROW_BETA(lo, hi) \
	VMULPS      (AX), Z31, Z28;   \
	VMULPS      64(AX), Z31, Z29; \
	VFMADD231PS lo, Z30, Z28;     \
	VFMADD231PS hi, Z30, Z29;     \
	VMOVUPS     Z28, (DX);        \
	VMOVUPS     Z29, 64(DX);      \
	ADDQ        R11, AX;          \
	ADDQ        R8, DX

#define STOREROW(lo, hi) \
	VMULPS  lo, Z30, Z28; \
	VMULPS  hi, Z30, Z29; \
	VMOVUPS Z28, (DX);    \
	VMOVUPS Z29, 64(DX);  \
	ADDQ    R8, DX

// Store row n (1-based) with op, and stop after it if it is the last.
#define STORE(op, n, lo, hi) \
	op(lo, hi); \
	CMPQ R13, $n; \
	JE   done

// func tileRowsAVX512(rows, kc int, a *float32, aRow, aCol int, b *float32, bRow int, c *float32, ldc int, alpha, beta float32, s *float32, lds int)
TEXT ·tileRowsAVX512(SB), NOSPLIT, $0-96
	MOVQ rows+0(FP), R13
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
	LEAQ (SI)(R9*1), DI

	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

	TESTQ CX, CX
	JZ    store
	CMPQ  R13, $4
	JA    above4
	JE    loop4
	CMPQ  R13, $2
	JB    loop1
	JE    loop2
	JMP   loop3

above4:
	CMPQ R13, $6
	JB   loop5
	JE   loop6
	CMPQ R13, $7
	JE   loop7
	JMP  loop8

	LOOP(loop1, ROWS1)
	LOOP(loop2, ROWS2)
	LOOP(loop3, ROWS3)
	LOOP(loop4, ROWS4)
	LOOP(loop5, ROWS5)
	LOOP(loop6, ROWS6)
	LOOP(loop7, ROWS7)
	LOOP(loop8, ROWS8)

store:
	VBROADCASTSS alpha+72(FP), Z30
	VBROADCASTSS beta+76(FP), Z31
	VXORPS       X28, X28, X28
	VUCOMISS     beta+76(FP), X28
	JNE          storebeta
	JP           storebeta
	STORE(STOREROW, 1, Z0, Z1)
	STORE(STOREROW, 2, Z2, Z3)
	STORE(STOREROW, 3, Z4, Z5)
	STORE(STOREROW, 4, Z6, Z7)
	STORE(STOREROW, 5, Z8, Z9)
	STORE(STOREROW, 6, Z10, Z11)
	STORE(STOREROW, 7, Z12, Z13)
	STOREROW(Z14, Z15)
	JMP  done

storebeta:
	MOVQ s+80(FP), AX
	MOVQ lds+88(FP), R11
	SHLQ $2, R11
	STORE(STOREROW_BETA, 1, Z0, Z1)
	STORE(STOREROW_BETA, 2, Z2, Z3)
	STORE(STOREROW_BETA, 3, Z4, Z5)
	STORE(STOREROW_BETA, 4, Z6, Z7)
	STORE(STOREROW_BETA, 5, Z8, Z9)
	STORE(STOREROW_BETA, 6, Z10, Z11)
	STORE(STOREROW_BETA, 7, Z12, Z13)
	STOREROW_BETA(Z14, Z15)

done:
	VZEROUPPER
	RET

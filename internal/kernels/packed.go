package kernels

import (
	"context"
	"fmt"
	"time"
)

// PackedB is the right operand op(B) of products, k×n, packed once into
// the blocks and panels the GEMM driver reads (pack.go), so that products
// with the same B — a layer's weight, run after run — skip packing it.
// Packing costs about as much as a product with a handful of rows, so for
// short products (one token, a short sentence) it is most of the work.
//
// A PackedB is immutable and may be used by many goroutines at once. It
// keeps a reference to the B it was packed from (not a copy), which must
// not change while the PackedB is in use: products fall back to it when
// the kernels in use are not the ones it was packed for (UseISA) or when
// a BLAS backend computes them.
type PackedB struct {
	transB       bool
	k, n         int
	b            []float32
	ldb          int
	set          *isa
	kcBlk, ncBlk int
	blocks       [][]float32 // by block of columns, then block of depth
}

// PackB packs op(B), k×n, for GemmPacked: B itself (k×n, row stride ldb)
// or, with transB, Bᵀ where B is stored n×k, as nn.Linear stores its
// weight. It panics if b cannot hold the matrix.
func PackB(transB bool, k, n int, b []float32, ldb int) *PackedB {
	if k < 0 || n < 0 {
		panic(fmt.Sprintf("kernels: PackB: negative size k=%d n=%d", k, n))
	}
	rows, cols := k, n
	if transB {
		rows, cols = n, k
	}
	checkMatrix("PackB", "B", b, rows, cols, ldb, 1, 0)
	set := currentISA()
	kern := set.gemm
	p := &PackedB{transB: transB, k: k, n: n, b: b, ldb: ldb, set: set}
	if k == 0 || n == 0 {
		return p
	}
	p.ncBlk = balancedBlock(n, kern.nc, kern.nr)
	p.kcBlk = balancedBlock(k, kern.kc, 1)
	for jc := 0; jc < n; jc += p.ncBlk {
		nc := min(p.ncBlk, n-jc)
		for pc := 0; pc < k; pc += p.kcBlk {
			kc := min(p.kcBlk, k-pc)
			blk := make([]float32, roundUp(nc, kern.nr)*kc)
			packB(set, blk, b, ldb, transB, pc, kc, jc, nc, kern.nr)
			p.blocks = append(p.blocks, blk)
		}
	}
	return p
}

// Dims returns the sizes of op(B): k rows, n columns.
func (p *PackedB) Dims() (k, n int) { return p.k, p.n }

// block returns the packed block of columns jc and depth pc (offsets).
func (p *PackedB) block(jc, pc int) []float32 {
	kBlocks := ceilDiv(p.k, p.kcBlk)
	return p.blocks[(jc/p.ncBlk)*kBlocks+pc/p.kcBlk]
}

// GemmPacked computes C = alpha·op(A)·op(B) + beta·C as Gemm does, with
// op(B) packed by PackB: op(A) is m×k (A stored m×k with row stride lda,
// or k×m with transA), C is m×n with row stride ldc. The result is the
// one Gemm gives, bit for bit.
func GemmPacked(transA bool, m int, alpha float32, a []float32, lda int, p *PackedB, beta float32, c []float32, ldc int) {
	g := p.call(transA, m, alpha, a, lda, beta, c, ldc)
	g.check("GemmPacked", 1, 0, 0, 0)
	runPacked(context.Background(), &g, p, nil, maxThreads())
}

// GemmPackedContext is GemmPacked that gives up when ctx is done, as
// GemmContext does.
func GemmPackedContext(ctx context.Context, transA bool, m int, alpha float32, a []float32, lda int, p *PackedB, beta float32, c []float32, ldc int) error {
	g := p.call(transA, m, alpha, a, lda, beta, c, ldc)
	g.check("GemmPackedContext", 1, 0, 0, 0)
	runPacked(ctx, &g, p, nil, maxThreads())
	return ctx.Err()
}

// GemmPackedBias computes C = alpha·op(A)·op(B) + beta·bias, where the
// row bias (n values) is added to every row of C: the bits GemmPacked
// gives on a C whose every row holds bias. A linear layer starts its
// output from its bias this way. Here the kernel reads the bias where it
// would read C when it stores a tile's first block of depth, so C is not
// written before the product: filling it row by row first was a
// single-threaded pass over the output, 6% of a BERT-sized forward pass
// at 4096 rows.
func GemmPackedBias(transA bool, m int, alpha float32, a []float32, lda int, p *PackedB, beta float32, bias, c []float32, ldc int) {
	_ = GemmPackedBiasContext(context.Background(), transA, m, alpha, a, lda, p, beta, bias, c, ldc)
}

// GemmPackedBiasContext is GemmPackedBias that gives up when ctx is done,
// as GemmContext does.
func GemmPackedBiasContext(ctx context.Context, transA bool, m int, alpha float32, a []float32, lda int, p *PackedB, beta float32, bias, c []float32, ldc int) error {
	g := p.call(transA, m, alpha, a, lda, beta, c, ldc)
	g.check("GemmPackedBiasContext", 1, 0, 0, 0)
	if len(bias) < p.n {
		panic(fmt.Sprintf("kernels: GemmPackedBiasContext: the bias has %d values for %d columns", len(bias), p.n))
	}
	runPacked(ctx, &g, p, bias[:p.n], maxThreads())
	return ctx.Err()
}

// FillRows sets each of the first rows rows of C (row stride ldc) to row:
// the start of a product that adds to a row of bias (beta = 1) when the
// weight is not packed (GemmPackedBias takes the bias in its kernels).
func FillRows(c []float32, ldc, rows int, row []float32) {
	for r := range rows {
		copy(c[r*ldc:r*ldc+len(row)], row)
	}
}

// call is the product as Gemm would take it.
func (p *PackedB) call(transA bool, m int, alpha float32, a []float32, lda int, beta float32, c []float32, ldc int) gemmCall {
	return gemmCall{transA, p.transB, m, p.n, p.k, alpha, beta, a, lda, p.b, p.ldb, c, ldc}
}

// runPacked computes g, whose B p holds packed, on up to threads
// goroutines: with A read in place on kernels with a few-rows kernel, on
// the GEMM driver without its packing of B on others, and on the unpacked
// B when p was packed for other kernels or a backend computes every
// product. A row bias, when given, stands in for C's rows (GemmPackedBias):
// the in-place kernels read it where they would read C, the other paths
// start from C filled with it.
func runPacked(ctx context.Context, g *gemmCall, p *PackedB, bias []float32, threads int) {
	set := currentISA()
	inPlace := gemmBackend == nil && set == p.set && set.gemm.rows != nil && g.k > 0 && g.alpha != 0
	if bias != nil && !inPlace {
		FillRows(g.c, g.ldc, g.m, bias)
	}
	switch {
	case gemmBackend != nil || set != p.set:
		runGemmContext(ctx, g, threads)
	case g.m == 0 || g.n == 0:
	case g.k == 0 || g.alpha == 0:
		scaleMatrix(g.c, g.ldc, g.m, g.n, g.beta)
	case inPlace:
		runInPlace(ctx, g, p, bias, threads)
	default:
		runJob(ctx, g, set, p, threads)
	}
}

// inPlaceBlockRows is the most rows of A a part of a product on a packed
// weight reads, in place (not packed): a block of depth of them (256 rows
// of 256 floats, 256 KiB) stays in L2 while the panels of B stream past
// it. Full tiles and then the few-rows kernel take the rows (no
// multiply-adds on padding rows). The GEMM driver, which packs A (again
// for every part that shares its rows), was 5 to 16% slower from 512 to
// 4096 rows by weights of 384 to 2304, and up to 15% at 128 rows; few
// rows were always read in place.
const inPlaceBlockRows = 256

// shortMinFlops is the smallest short product (2·m·n·k) worth splitting
// across threads; dot products (dots.go) use it too. A short product
// reads B once and does little else. With workers that spin between runs
// (parallel.go) a second thread joins within a microsecond, and a 768×768
// weight (1.2 MFLOP for one row) streams from L3 faster on two cores than
// on one: 22 against 28 µs, on the machine of docs/performance.md with the
// other jobs held off (round 4 there). When a worker had to be woken for
// every product, the bound was 2 MFLOP, and 8 before that.
var shortMinFlops = 1 << 20

// busyShortMinFlops is shortMinFlops while the machine is busy
// (parallel.go): the bound that held when every helper had to be woken.
const busyShortMinFlops = 2 << 20

// worthSplitting reports whether a short product of flops (2·m·n·k) is
// worth splitting across threads.
func worthSplitting(flops int) bool {
	if flops < shortMinFlops {
		return false
	}
	return flops >= busyShortMinFlops || !machineBusy(time.Now())
}

// inPlaceJob is a product on a packed weight in progress: its parts are
// blocks of rows of A by ranges of B's column panels, each computed over
// the whole depth, rows in tiles of shortTileRows.
type inPlaceJob struct {
	g    gemmCall
	p    *PackedB
	kern *microKernel
	ctx  context.Context
	// bias, when set, is the row every tile of C starts from, read in
	// place of C by its first block of depth (GemmPackedBias).
	bias     []float32
	jc, nc   int // the current block of columns
	rowBlock int // rows of A per part, a multiple of the kernel's mr
	colParts int // parts the panels are split into per block of rows
	parts    int
}

// freeInPlaceJobs recycles inPlaceJobs.
var freeInPlaceJobs = make(chan *inPlaceJob, 16)

// runInPlace computes a product on a packed weight reading A in place,
// every tile of C starting from the row bias if one is given.
func runInPlace(ctx context.Context, g *gemmCall, p *PackedB, bias []float32, threads int) {
	var j *inPlaceJob
	select {
	case j = <-freeInPlaceJobs:
	default:
		j = new(inPlaceJob)
	}
	j.g, j.p, j.kern, j.ctx, j.bias = *g, p, p.set.gemm, ctx, bias
	if !worthSplitting(2 * g.m * g.n * g.k) {
		threads = 1
	}
	rowBlocks := ceilDiv(g.m, inPlaceBlockRows)
	j.rowBlock = roundUp(ceilDiv(g.m, rowBlocks), j.kern.mr)
	rowBlocks = ceilDiv(g.m, j.rowBlock)
	for j.jc = 0; j.jc < g.n && ctx.Err() == nil; j.jc += p.ncBlk {
		j.nc = min(p.ncBlk, g.n-j.jc)
		panels := ceilDiv(j.nc, j.kern.nr)
		j.colParts = 1
		if threads > 1 {
			j.colParts = min(panels, ceilDiv(partsPerThread*threads, rowBlocks))
		}
		j.parts = rowBlocks * j.colParts
		parallelFor(j.parts, threads, j)
	}
	j.g, j.p, j.ctx, j.bias = gemmCall{}, nil, nil, nil
	select {
	case freeInPlaceJobs <- j:
	default:
	}
}

// runPart computes one block of rows by one range of panels, unless the
// context is done.
func (j *inPlaceJob) runPart(part int) {
	if j.ctx.Err() != nil {
		return
	}
	g, p, kern := &j.g, j.p, j.kern
	nr := kern.nr
	rb, cp := part/j.colParts, part%j.colParts
	i0 := rb * j.rowBlock
	i1 := min(i0+j.rowBlock, g.m)
	p0, p1 := splitRange(ceilDiv(j.nc, nr), j.colParts, cp)
	aRow, aCol := g.lda, 1
	if g.transA {
		aRow, aCol = 1, g.lda
	}
	var ws *workspace // for a ragged panel, computed aside
	// The context is checked per block of depth too: a part of a long
	// product runs every one of them.
	for pc := 0; pc < g.k && j.ctx.Err() == nil; pc += p.kcBlk {
		kc := min(p.kcBlk, g.k-pc)
		beta := g.beta
		if pc > 0 {
			beta = 1 // later blocks of k add to what the first wrote
		}
		blk := p.block(j.jc, pc)
		for jp := p0; jp < p1; jp++ {
			jr := jp * nr
			cols := min(nr, j.nc-jr)
			bp := blk[jp*nr*kc : (jp+1)*nr*kc]
			for i, rows := i0, 0; i < i1; i += rows {
				rows = shortTileRows(i1-i, kern.mr)
				a := g.a[i*aRow+pc*aCol:]
				c := g.c[i*g.ldc+j.jc+jr:]
				if pc == 0 && j.bias != nil {
					row := j.bias[j.jc+jr : j.jc+jr+cols]
					if cols == nr && kern.fromRow != nil {
						kern.fromRow(rows, kc, a, aRow, aCol, bp, nr, c, g.ldc, g.alpha, beta, row)
						continue
					}
					FillRows(c, g.ldc, rows, row)
				}
				if cols == nr {
					kern.shortTile(rows, kc, a, aRow, aCol, bp, nr, c, g.ldc, g.alpha, beta)
					continue
				}
				if ws == nil {
					ws = freeWorkspaces.get()
					ws.tile = grow(ws.tile, kern.mr*nr)
				}
				kern.shortTile(rows, kc, a, aRow, aCol, bp, nr, ws.tile, nr, 1, 0)
				mergeTile(c, g.ldc, ws.tile, nr, rows, cols, g.alpha, beta)
			}
		}
	}
	if ws != nil {
		freeWorkspaces.put(ws)
	}
}

// shortTileRows returns how many of the rest rows of a short product the
// next tile takes, A read in place: a full tile of the kernel's mr rows
// while one fits, then tiles of the few-rows kernel. Every tile reads the
// B panel once more (from L2), so fewer, taller tiles are better.
func shortTileRows(rest, mr int) int {
	if rest >= mr {
		return mr
	}
	return min(rest, maxTileRows)
}

// shortTile computes a tile of rows rows (1 to maxTileRows, or mr) of C
// with operands as tile takes them: on the full tile kernel or the
// few-rows one, which give a row the same bits.
func (k *microKernel) shortTile(rows, kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32) {
	if rows == k.mr {
		k.tile(kc, a, aRow, aCol, b, bRow, c, ldc, alpha, beta)
		return
	}
	k.rows(rows, kc, a, aRow, aCol, b, bRow, c, ldc, alpha, beta)
}

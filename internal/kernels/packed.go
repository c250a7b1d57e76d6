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

// SharedProduct is one of the products GemmPackedSharedContext computes
// on a common A: the packed op(B), k×n; the row bias (n values) C starts
// from, or nil to start from C itself; beta, which scales that start;
// and C, m×n with row stride Ldc.
type SharedProduct struct {
	B    *PackedB
	Bias []float32
	Beta float32
	C    []float32
	Ldc  int
}

// GemmPackedSharedContext computes every product on the same op(A), m×k:
// C = alpha·op(A)·op(B) + Beta·Bias, or + Beta·C without a bias, the bits
// GemmPackedBias or GemmPacked gives for it alone. On the in-place path
// the products' parts run as one set, so the threads meet once instead of
// once per product: the query, key and value projections of attention
// read the same rows, and for a short input the meetings are a good part
// of their cost. Every product's B must have depth k. It gives up when
// ctx is done, as GemmContext does, and panics on an operand too small.
func GemmPackedSharedContext(ctx context.Context, transA bool, m int, alpha float32, a []float32, lda int, products []SharedProduct) error {
	if len(products) == 0 {
		return ctx.Err()
	}
	k, _ := products[0].B.Dims()
	set, threads := currentISA(), maxThreads()
	together := true
	for i := range products {
		pr := &products[i]
		g := pr.call(transA, m, alpha, a, lda)
		g.check("GemmPackedSharedContext", 1, 0, 0, 0)
		if g.k != k {
			panic(fmt.Sprintf("kernels: GemmPackedSharedContext: product %d has depth %d, product 0 %d", i, g.k, k))
		}
		if pr.Bias != nil && len(pr.Bias) < g.n {
			panic(fmt.Sprintf("kernels: GemmPackedSharedContext: product %d's bias has %d values for %d columns", i, len(pr.Bias), g.n))
		}
		together = together && readsInPlace(set, &g, pr.B)
	}
	var j *inPlaceJob // nil: each product on its own path
	if together {
		j = newInPlaceJob(ctx)
	}
	for i := range products {
		pr := &products[i]
		g := pr.call(transA, m, alpha, a, lda)
		if j == nil {
			runPacked(ctx, &g, pr.B, pr.rowBias(), threads)
			continue
		}
		j.add(&g, pr.B, pr.rowBias())
	}
	if j != nil {
		j.run(threads)
	}
	return ctx.Err()
}

// call is the shared product as Gemm would take it.
func (pr *SharedProduct) call(transA bool, m int, alpha float32, a []float32, lda int) gemmCall {
	return pr.B.call(transA, m, alpha, a, lda, pr.Beta, pr.C, pr.Ldc)
}

// rowBias is the product's bias cut to its columns, or nil.
func (pr *SharedProduct) rowBias() []float32 {
	if pr.Bias == nil {
		return nil
	}
	return pr.Bias[:pr.B.n]
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
	inPlace := readsInPlace(set, g, p)
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
		j := newInPlaceJob(ctx)
		j.add(g, p, bias)
		j.run(threads)
	default:
		runJob(ctx, g, set, p, threads)
	}
}

// readsInPlace reports whether g, on the weight p packed for the kernels
// set, runs on the in-place path: no backend, p packed for set, a
// few-rows kernel, and a product to compute.
func readsInPlace(set *isa, g *gemmCall, p *PackedB) bool {
	return gemmBackend == nil && set == p.set && set.gemm.rows != nil && g.k > 0 && g.alpha != 0
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

// inPlaceJob is one or more products on packed weights in progress, A
// read in place, run as one set of parts so that the threads meet once
// (GemmPackedSharedContext). Each product is cut into segments, one per
// block of B's columns; a segment's parts are blocks of rows of A by
// ranges of the block's panels, each computed over the whole depth, rows
// in tiles of shortTileRows.
type inPlaceJob struct {
	ctx   context.Context
	segs  []inPlaceSegment
	parts int
}

// inPlaceSegment is one block of columns of one product of an inPlaceJob.
type inPlaceSegment struct {
	g    gemmCall
	p    *PackedB
	kern *microKernel
	// bias, when set, is the row every tile of C starts from, read in
	// place of C by its first block of depth (GemmPackedBias).
	bias     []float32
	jc, nc   int // the block of columns
	rowBlock int // rows of A per part, a multiple of the kernel's mr
	colParts int // parts the panels are split into per block of rows
	first    int // the job's number of the segment's first part
}

// freeInPlaceJobs recycles inPlaceJobs with their segments.
var freeInPlaceJobs = make(chan *inPlaceJob, 16)

// newInPlaceJob returns an empty job, recycled if one is free.
func newInPlaceJob(ctx context.Context) *inPlaceJob {
	var j *inPlaceJob
	select {
	case j = <-freeInPlaceJobs:
	default:
		j = new(inPlaceJob)
	}
	j.ctx = ctx
	return j
}

// add queues the product g on the packed weight p, every tile of C
// starting from the row bias if one is given.
func (j *inPlaceJob) add(g *gemmCall, p *PackedB, bias []float32) {
	if g.m == 0 {
		return
	}
	kern := p.set.gemm
	rowBlock := roundUp(ceilDiv(g.m, ceilDiv(g.m, inPlaceBlockRows)), kern.mr)
	for jc := 0; jc < g.n; jc += p.ncBlk {
		j.segs = append(j.segs, inPlaceSegment{
			g: *g, p: p, kern: kern, bias: bias,
			jc: jc, nc: min(p.ncBlk, g.n-jc), rowBlock: rowBlock,
		})
	}
}

// run computes the queued products on up to threads goroutines and
// recycles the job.
func (j *inPlaceJob) run(threads int) {
	flops := 0
	for i := range j.segs {
		flops += 2 * j.segs[i].g.m * j.segs[i].nc * j.segs[i].g.k
	}
	if !worthSplitting(flops) {
		threads = 1
	}
	for i := range j.segs {
		s := &j.segs[i]
		rowBlocks := ceilDiv(s.g.m, s.rowBlock)
		s.colParts = 1
		if threads > 1 {
			s.colParts = min(ceilDiv(s.nc, s.kern.nr), ceilDiv(partsPerThread*threads, rowBlocks))
		}
		s.first = j.parts
		j.parts += rowBlocks * s.colParts
	}
	parallelFor(j.parts, threads, j)
	clear(j.segs) // drop the references to the operands
	j.segs, j.parts, j.ctx = j.segs[:0], 0, nil
	select {
	case freeInPlaceJobs <- j:
	default:
	}
}

// runPart computes the job's part by its segment, unless the context is
// done.
func (j *inPlaceJob) runPart(part int) {
	if j.ctx.Err() != nil {
		return
	}
	s := len(j.segs) - 1
	for j.segs[s].first > part {
		s--
	}
	j.segs[s].runPart(j.ctx, part-j.segs[s].first)
}

// runPart computes the segment's part: one block of rows by one range of
// panels.
func (s *inPlaceSegment) runPart(ctx context.Context, part int) {
	g, p, kern := &s.g, s.p, s.kern
	nr := kern.nr
	rb, cp := part/s.colParts, part%s.colParts
	i0 := rb * s.rowBlock
	i1 := min(i0+s.rowBlock, g.m)
	p0, p1 := splitRange(ceilDiv(s.nc, nr), s.colParts, cp)
	aRow, aCol := g.lda, 1
	if g.transA {
		aRow, aCol = 1, g.lda
	}
	var ws *workspace // for a ragged panel, computed aside
	// The context is checked per block of depth too: a part of a long
	// product runs every one of them.
	for pc := 0; pc < g.k && ctx.Err() == nil; pc += p.kcBlk {
		kc := min(p.kcBlk, g.k-pc)
		beta := g.beta
		if pc > 0 {
			beta = 1 // later blocks of k add to what the first wrote
		}
		blk := p.block(s.jc, pc)
		for jp := p0; jp < p1; jp++ {
			jr := jp * nr
			cols := min(nr, s.nc-jr)
			bp := blk[jp*nr*kc : (jp+1)*nr*kc]
			for i, rows := i0, 0; i < i1; i += rows {
				rows = shortTileRows(i1-i, kern.mr)
				a := g.a[i*aRow+pc*aCol:]
				c := g.c[i*g.ldc+s.jc+jr:]
				if pc == 0 && s.bias != nil {
					row := s.bias[s.jc+jr : s.jc+jr+cols]
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

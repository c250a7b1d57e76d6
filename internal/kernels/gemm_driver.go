package kernels

import "context"

// gemmCall is one product C = alpha·op(A)·op(B) + beta·C, as Gemm takes it.
type gemmCall struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a              []float32
	lda            int
	b              []float32
	ldb            int
	c              []float32
	ldc            int
}

// parallelMinFlops is the smallest product (2·m·n·k floating-point
// operations) worth splitting across threads. Waking a worker costs a few
// microseconds, so below about a tenth of a millisecond of work one core
// is as fast as two. A variable so tests can send small products down the
// parallel path.
var parallelMinFlops = 8 << 20

// gemmJob is a GEMM in progress. For each kc×nc block of B it runs two
// phases: pack the block of B (split by panels over the threads), then
// multiply it by every mc×kc block of A (split by A blocks, and by B
// panels when A has too few blocks to keep every thread busy). All threads
// share the packed B, each packs its own A blocks. With B packed already
// (PackB), each part runs every block of depth for its block of A and
// range of panels, in one dispatch per block of columns.
type gemmJob struct {
	g       gemmCall
	set     *isa
	kern    *microKernel
	threads int
	// ctx stops the product early: every part checks it first, so a
	// cancelled product ends within a part's work (an A block times a
	// range of B panels, a few milliseconds at most).
	ctx context.Context

	packedB []float32 // the current kc×nc block of B, packed
	// pre, when set, holds B packed already (PackB): its blocks are used
	// as they are and the packing phase is skipped.
	pre *PackedB

	// The current block and how its work is split.
	jc, nc, pc, kc int
	beta           float32
	kcBlk          int  // depth of a full block, whose sums are rounded into C
	kcPack         int  // depth packed at once, a multiple of kcBlk
	mPanels        int  // mr-row panels in m
	mBlocks        int  // A blocks in m, each a range of panels
	nSplit         int  // parts the B panels are split into per A block
	nPanels        int  // B panels in nc
	packParts      int  // parts of the packing phase
	packing        bool // phase: packing B, or computing
}

// freeGemmJobs recycles gemmJobs (and their packed-B buffers).
var freeGemmJobs = make(freeList[gemmJob], 64)

// gemmBackend, when set, computes every product in place of the Go kernels:
// the openblas build tag sets it to OpenBLAS's cblas_sgemm, so that whole
// models can be timed on a reference BLAS. The default build leaves it nil.
var gemmBackend func(g gemmCall)

// runGemm computes g on the backend if one is set, else with the active Go
// kernel on up to threads goroutines.
func runGemm(g *gemmCall, threads int) {
	if gemmBackend != nil {
		gemmBackend(*g) // by value: a pointer would escape and allocate
		return
	}
	runGemmGo(g, threads)
}

// runGemmContext is runGemm that stops early when ctx is done (the Go
// kernels do; a backend runs to the end).
func runGemmContext(ctx context.Context, g *gemmCall, threads int) {
	if gemmBackend != nil {
		gemmBackend(*g)
		return
	}
	runGemmGoContext(ctx, g, threads)
}

// runGemmGo computes g with the active Go kernel on up to threads goroutines.
func runGemmGo(g *gemmCall, threads int) { runGemmGoContext(context.Background(), g, threads) }

// runGemmGoContext is runGemmGo that stops early when ctx is done.
func runGemmGoContext(ctx context.Context, g *gemmCall, threads int) {
	if g.m == 0 || g.n == 0 {
		return
	}
	if g.k == 0 || g.alpha == 0 {
		scaleMatrix(g.c, g.ldc, g.m, g.n, g.beta)
		return
	}
	if set := currentISA(); set.dot4 != nil && g.transB && !g.transA && g.m <= maxDotRows && g.k >= 32 {
		runDots(g, set.dot4, threads)
		return
	}
	runJob(ctx, g, currentISA(), nil, threads)
}

// runJob runs the blocked product on a recycled job: with the packed
// weight pre, when the caller has one.
func runJob(ctx context.Context, g *gemmCall, set *isa, pre *PackedB, threads int) {
	if 2*g.m*g.n*g.k < parallelMinFlops {
		threads = 1
	}
	j := freeGemmJobs.get()
	j.set = set
	j.g, j.kern, j.threads, j.ctx, j.pre = *g, set.gemm, threads, ctx, pre
	j.run()
	j.g, j.ctx, j.pre = gemmCall{}, nil, nil // drop references to the caller's slices and context
	freeGemmJobs.put(j)
}

// run walks the blocks of B and runs the two phases for each.
func (j *gemmJob) run() {
	g, kern := &j.g, j.kern
	ncBlk := balancedBlock(g.n, kern.nc, kern.nr)
	j.kcBlk = balancedBlock(g.k, kern.kc, 1)
	j.kcPack = j.kcBlk
	if j.pre == nil {
		j.kcPack *= max(1, kern.kcPack/j.kcBlk)
	}
	j.mPanels = ceilDiv(g.m, kern.mr)
	// An A block holds up to mc·kc floats (kernel.go): at a deeper
	// packing, proportionally fewer rows.
	blockRows := max(kern.mc*kern.kc/max(min(j.kcPack, g.k), kern.kc), kern.mr)
	j.mBlocks = ceilDiv(g.m, blockRows)
	if j.threads > 1 {
		// Every thread gets the same number of equal A blocks.
		j.mBlocks = roundUp(j.mBlocks, j.threads)
	}
	j.mBlocks = min(j.mBlocks, j.mPanels)
	for j.jc = 0; j.jc < g.n && j.ctx.Err() == nil; j.jc += ncBlk {
		j.nc = min(ncBlk, g.n-j.jc)
		j.nPanels = ceilDiv(j.nc, kern.nr)
		j.nSplit, j.packParts = 1, 1
		if j.threads > 1 {
			// Too few A blocks to go round (a short, wide product): split
			// the B panels as well.
			if j.mBlocks < 2*j.threads {
				j.nSplit = min(j.nPanels, ceilDiv(2*j.threads, j.mBlocks))
			}
			j.packParts = min(j.nPanels, 2*j.threads)
		}
		if j.pre != nil {
			// B is packed already: each part runs every block of depth
			// on its rows and columns, so the threads meet once per
			// product, not once per block of depth.
			parallelFor(j.mBlocks*j.nSplit, j.threads, j)
			continue
		}
		for j.pc = 0; j.pc < g.k && j.ctx.Err() == nil; j.pc += j.kcPack {
			j.kc = min(j.kcPack, g.k-j.pc)
			j.beta = g.beta
			if j.pc > 0 {
				j.beta = 1 // later blocks of k add to what the first wrote
			}
			j.packedB = grow(j.packedB, roundUp(ncBlk, kern.nr)*j.kcPack)
			j.packing = true
			parallelFor(j.packParts, j.threads, j)
			j.packing = false
			parallelFor(j.mBlocks*j.nSplit, j.threads, j)
		}
	}
}

// runPart runs one part of the current phase, unless the product's
// context is done.
func (j *gemmJob) runPart(part int) {
	if j.ctx.Err() != nil {
		return
	}
	switch {
	case j.packing:
		j.packBPart(part)
	case j.pre != nil:
		g := &j.g
		for pc := 0; pc < g.k && j.ctx.Err() == nil; pc += j.kcBlk {
			beta := g.beta
			if pc > 0 {
				beta = 1 // later blocks of k add to what the first wrote
			}
			j.computePart(part, pc, min(j.kcBlk, g.k-pc), beta, j.pre.block(j.jc, pc))
		}
	default:
		j.computePart(part, j.pc, j.kc, j.beta, j.packedB)
	}
}

// packBPart packs one contiguous range of B panels.
func (j *gemmJob) packBPart(part int) {
	nr := j.kern.nr
	p0, p1 := splitRange(j.nPanels, j.packParts, part)
	if p0 == p1 {
		return
	}
	j0 := p0 * nr
	cols := min(p1*nr, j.nc) - j0
	packB(j.set, j.packedB[p0*nr*j.kc:], j.g.b, j.g.ldb, j.g.transB, j.pc, j.kc, j.jc+j0, cols, nr)
}

// computePart packs one block of A, depth pc to pc+kc, and multiplies it
// by a range of the panels of packedB, the block of B at that depth:
// C = alpha·A·B + beta·C there.
func (j *gemmJob) computePart(part, pc, kc int, beta float32, packedB []float32) {
	g, kern := &j.g, j.kern
	mr, nr := kern.mr, kern.nr
	ib, s := part/j.nSplit, part%j.nSplit
	q0, q1 := splitRange(j.mPanels, j.mBlocks, ib)
	i0 := q0 * mr
	mc := min(q1*mr, g.m) - i0
	p0, p1 := splitRange(j.nPanels, j.nSplit, s)
	if p0 == p1 {
		return
	}

	// Buffers are grown to a full block even for a ragged one, so that
	// each workspace reaches its final size on first use.
	ws := freeWorkspaces.get()
	ws.packA = grow(ws.packA, ceilDiv(j.mPanels, j.mBlocks)*mr*j.kcPack)
	ws.tile = grow(ws.tile, mr*nr)
	packA(j.set, ws.packA, g.a, g.lda, g.transA, i0, mc, pc, kc, mr)

	// Loop order: the B panel (kc·nr) is reused across all A panels of the
	// block, so it stays in L1 while the A block streams from L2.
	for jp := p0; jp < p1; jp++ {
		jr := jp * nr
		cols := min(nr, j.nc-jr)
		bp := packedB[jp*nr*kc : (jp+1)*nr*kc]
		for ir := 0; ir < mc; ir += mr {
			rows := min(mr, mc-ir)
			ap := ws.packA[ir*kc : (ir+mr)*kc]
			c := g.c[(i0+ir)*g.ldc+j.jc+jr:]
			// A packed block may hold several blocks of depth: each is
			// rounded into C in turn, as if it had been packed alone,
			// so the bits do not depend on how deep the packing goes.
			b := beta
			for off := 0; off < kc; off += j.kcBlk {
				ks := min(j.kcBlk, kc-off)
				j.tile(rows, cols, ks, ap[off*mr:], bp[off*nr:], c, b, ws.tile)
				b = 1 // later blocks of k add to what the first wrote
			}
		}
	}
	freeWorkspaces.put(ws)
}

// tile computes C = alpha·A·B + beta·C for one rows×cols tile of C (at
// most mr×nr) from a panel of A and one of B, kc deep; aside is scratch
// for a full tile.
func (j *gemmJob) tile(rows, cols, kc int, ap, bp, c []float32, beta float32, aside []float32) {
	g, kern := &j.g, j.kern
	mr, nr := kern.mr, kern.nr
	switch {
	case rows == mr && cols == nr:
		kern.tile(kc, ap, 1, mr, bp, nr, c, g.ldc, g.alpha, beta)
	case cols == nr && kern.rows != nil && rows <= maxTileRows:
		// The last rows (128 = 10·12 + 8): the few-rows kernel, with the
		// same bits, without the padding rows' work.
		kern.rows(rows, kc, ap, 1, mr, bp, nr, c, g.ldc, g.alpha, beta)
	default:
		// A ragged edge: compute the full tile aside, keep the part that
		// exists.
		kern.tile(kc, ap, 1, mr, bp, nr, aside, nr, 1, 0)
		mergeTile(c, g.ldc, aside, nr, rows, cols, g.alpha, beta)
	}
}

// splitRange returns the bounds of part p when n items are cut into parts
// nearly equal ranges.
func splitRange(n, parts, p int) (lo, hi int) {
	return n * p / parts, n * (p + 1) / parts
}

// mergeTile sets the rows×cols corner of C to alpha·T + beta·C, where T
// has row stride ldt; C is not read when beta is 0.
func mergeTile(c []float32, ldc int, t []float32, ldt, rows, cols int, alpha, beta float32) {
	for r := range rows {
		cr := c[r*ldc : r*ldc+cols]
		tr := t[r*ldt : r*ldt+cols]
		if beta == 0 {
			for i, v := range tr {
				cr[i] = alpha * v
			}
			continue
		}
		for i, v := range tr {
			cr[i] = alpha*v + beta*cr[i]
		}
	}
}

// scaleMatrix sets the m×n matrix C to beta·C (to zero if beta is 0,
// whatever C held, NaNs included).
func scaleMatrix(c []float32, ldc, m, n int, beta float32) {
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		switch beta {
		case 0:
			clear(row)
		case 1:
		default:
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

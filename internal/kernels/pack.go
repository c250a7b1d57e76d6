package kernels

// Packing copies a block of an operand into the order the micro-kernel
// reads it, so that the kernel's inner loop walks memory strictly forward:
//
//   - A blocks (mc×kc) become row panels of mr rows; inside a panel the mr
//     values of one column p are adjacent: panel[p*mr + r] = A[i+r][p].
//   - B blocks (kc×nc) become column panels of nr columns; inside a panel
//     the nr values of one row p are adjacent: panel[p*nr + c] = B[p][j+c].
//
// A panel is then kc·mr (or kc·nr) contiguous floats, read once per
// micro-kernel call from L1/L2 with no TLB misses and no stride. Ragged
// edges are padded with zeros, so the kernel always computes full tiles
// and the padding contributes nothing. Transposed operands are handled
// here, once per block, so the kernel never sees a transpose.

// packA packs the mc×kc block of op(A) starting at row i0, column p0 into
// dst, as ceil(mc/mr) panels of kc·mr floats. op(A) is A, or Aᵀ if trans
// (A is then stored k×m).
func packA(set *isa, dst, a []float32, lda int, trans bool, i0, mc, p0, kc, mr int) {
	eachPanel(dst, mc, kc, mr, func(panel []float32, ip, rows int) {
		if trans {
			// Row p of the stored matrix holds column p of op(A): copy
			// `rows` adjacent floats per p (a loop: too few for memmove).
			for p := range kc {
				off := (p0+p)*lda + i0 + ip
				src := a[off : off+rows]
				d := panel[p*mr : p*mr+rows]
				//lint:ignore S1001 a loop beats memmove for the few floats of a panel row
				for r, v := range src {
					d[r] = v
				}
			}
			return
		}
		// Each stored row is one panel row: a transpose into groups of mr.
		set.interleave(panel, mr, a[(i0+ip)*lda+p0:], lda, rows, kc)
	})
}

// packB packs the kc×nc block of op(B) starting at row p0, column j0 into
// dst, as ceil(nc/nr) panels of kc·nr floats. op(B) is B, or Bᵀ if trans
// (B is then stored n×k, as nn.Linear weights are).
func packB(set *isa, dst, b []float32, ldb int, trans bool, p0, kc, j0, nc, nr int) {
	eachPanel(dst, nc, kc, nr, func(panel []float32, jp, cols int) {
		if trans {
			// Each stored row is one panel column: a transpose into
			// groups of nr.
			set.interleave(panel, nr, b[(j0+jp)*ldb+p0:], ldb, cols, kc)
			return
		}
		set.copyPanel(panel, nr, b[p0*ldb+j0+jp:], ldb, kc, cols)
	})
}

// copyPanelGo is isa.copyPanel in Go: a copy per row.
func copyPanelGo(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	for p := range rows {
		copy(dst[p*ldd:p*ldd+cols], src[p*lds:p*lds+cols])
	}
}

// eachPanel calls f for each panel of kc·w floats of dst that packs w of
// the n rows of an A block (or columns of a B block), with the first of
// them and how many of them there are; a panel with fewer than w, at the
// ragged edge, is zeroed first.
func eachPanel(dst []float32, n, kc, w int, f func(panel []float32, first, count int)) {
	for first := 0; first < n; first += w {
		count := min(w, n-first)
		panel := dst[(first/w)*kc*w : (first/w+1)*kc*w]
		if count < w {
			clear(panel)
		}
		f(panel, first, count)
	}
}

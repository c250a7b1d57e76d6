package kernels

import "math"

// attendWithWeights is Attend for callers that want the weights: it writes
// the Tq×Tk scores into w, turns each row into weights in place (mask,
// softmax, dropout) and multiplies w by V. The O(Tq·Tk) memory is the
// caller's, and two large GEMMs carry the work. The product runs over all
// Tk keys, so zero weights meet non-finite values as Attend says.
func attendWithWeights(h *Head, opt *AttentionOptions, w []float32, threads int) {
	set := currentISA()
	tq, tk := h.Tq, h.Tk
	w = w[:tq*tk]
	scores := gemmCall{transB: true, m: tq, n: tk, k: h.D, alpha: opt.Scale,
		a: h.Q, lda: h.LdQ, b: h.K, ldb: h.LdK, c: w, ldc: tk}
	runGemm(&scores, threads)

	keep := 1 / (1 - opt.Dropout)
	for i := range tq {
		row := w[i*tk : (i+1)*tk]
		n := visibleKeys(i, tq, tk, opt.Causal)
		empty := h.seesNoKey(i, opt.Causal)
		switch {
		case h.sinkPoisons() || (empty && opt.EmptyRowsNaN && !h.sinkFinite()):
			fillNaN(row)
		case empty:
			clear(row)
		default:
			if m := h.maskRow(i); m != nil {
				set.add(row[:n], m)
			}
			if h.Sink != nil {
				softmaxRowSink(set, row[:n], *h.Sink)
			} else {
				softmaxRow(set, row[:n])
			}
			if math.IsNaN(float64(row[0])) {
				fillNaN(row) // hidden keys' weights too, as softmax gives e^(−Inf−NaN)
			} else {
				clear(row[n:])
			}
		}
		if opt.Dropout > 0 {
			for j := range row {
				if opt.RNG.Float32() < opt.Dropout {
					row[j] *= 0 // a NaN weight stays NaN, as PyTorch's dropout multiplies
				} else {
					row[j] *= keep
				}
			}
		}
	}

	out := gemmCall{m: tq, n: h.Dv, k: tk, alpha: 1,
		a: w, lda: tk, b: h.V, ldb: h.LdV, c: h.Out, ldc: h.LdOut}
	runGemm(&out, threads)
}

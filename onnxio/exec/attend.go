package exec

import (
	"math"

	"github.com/attnrun/attnrun/internal/kernels"
)

// attendChunk is the work, in floating-point operations, of one
// kernels.AttendBatch call between two checks of the run's context: some
// tens of milliseconds on one core, so that a deadline is honoured about
// that soon, while each call stays long enough for its set-up not to show.
// A variable so that tests can split small heads.
var attendChunk = 1 << 30

// attendBatch computes kernels.AttendBatch(heads, opt) in calls of about
// attendChunk operations, checking the run's context before each: whole
// heads while they are small, ranges of query rows of a head that is not.
// An attention of ordinary size is one call. opt has no Weights and no
// Dropout (the executor asks for neither), so the calls are independent.
func attendBatch(rc *runCtx, heads []kernels.Head, opt kernels.AttentionOptions) error {
	total := 0
	for i := range heads {
		total = satAdd(total, attendWork(&heads[i]))
	}
	if total <= attendChunk {
		if err := rc.err(); err != nil {
			return err
		}
		kernels.AttendBatch(heads, opt)
		return nil
	}
	var group []kernels.Head
	work := 0
	flush := func() error {
		if err := rc.err(); err != nil {
			return err
		}
		kernels.AttendBatch(group, opt)
		group, work = group[:0], 0
		return nil
	}
	for i := range heads {
		for _, part := range splitQueries(heads[i], opt.Causal) {
			w := attendWork(&part)
			if len(group) > 0 && work+w > attendChunk {
				if err := flush(); err != nil {
					return err
				}
			}
			group = append(group, part)
			work += w
		}
	}
	if len(group) > 0 {
		return flush()
	}
	return nil
}

// attendWork is an upper bound of the operations of one head, saturated
// at math.MaxInt: its two products with every key visible.
func attendWork(h *kernels.Head) int {
	return mulSat(mulSat(2*h.Tq, h.Tk), h.D+h.Dv)
}

// satAdd returns a+b for a, b >= 0, or math.MaxInt when the sum overflows.
func satAdd(a, b int) int {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt
}

// splitQueries cuts a head into ranges of query rows of about attendChunk
// operations each, which the kernel computes exactly as the whole head.
// Under a causal mask, the kernel aligns the diagonal bottom-right (query i
// sees keys j <= i + Tk - Tq), so rows r0..r1 keep their frontier when
// given the first r1 + Tk - Tq keys only; the first range reaches the
// first row that sees a key, so that no range is left with no key at all.
func splitQueries(h kernels.Head, causal bool) []kernels.Head {
	perRow := max(1, attendWork(&h)/max(h.Tq, 1))
	rows := max(64, attendChunk/perRow/64*64) // whole blocks of the kernel's 64 queries
	if rows >= h.Tq {
		return []kernels.Head{h}
	}
	var parts []kernels.Head
	for r0 := 0; r0 < h.Tq; {
		r1 := min(h.Tq, r0+rows)
		if causal && r0 == 0 {
			r1 = min(h.Tq, max(r1, h.Tq-h.Tk+1))
		}
		p := h
		p.Q, p.Out = h.Q[r0*h.LdQ:], h.Out[r0*h.LdOut:]
		if h.Mask != nil {
			p.Mask = h.Mask[r0*h.LdMask:]
		}
		p.Tq = r1 - r0
		if causal {
			p.Tk = r1 + h.Tk - h.Tq
		}
		parts = append(parts, p)
		r0 = r1
	}
	return parts
}

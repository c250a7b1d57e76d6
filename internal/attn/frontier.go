package attn

// Frontier is which keys a query sees by position alone: a causal frontier
// and a sliding window. Positions are absolute, so that one rule serves a
// full pass (queries aligned bottom-right or top-left on the keys) and an
// incremental step (queries after the tokens already cached): the query at
// position q sees the key at position k iff
//
//	k ≤ q          if Causal
//	q − k ≤ Left   if Left ≥ 0 (a window of Left keys before the query)
//	k − q ≤ Right  if Right ≥ 0
//
// A negative Left or Right leaves that side unbounded.
type Frontier struct {
	Causal      bool
	Left, Right int
}

// Unbounded is the frontier that hides nothing.
var Unbounded = Frontier{Left: -1, Right: -1}

// Hides reports whether the frontier hides the key at position k from the
// query at position q.
func (f Frontier) Hides(q, k int) bool {
	return (f.Causal && k > q) || (f.Left >= 0 && q-k > f.Left) || (f.Right >= 0 && k-q > f.Right)
}

// Visible returns the keys [from, to) among n, at positions k0 to k0+n−1,
// that the query at position q sees.
func (f Frontier) Visible(q, k0, n int) (from, to int) {
	from, to = 0, n
	if f.Left >= 0 {
		from = max(from, q-f.Left-k0)
	}
	if f.Causal {
		to = min(to, q-k0+1)
	}
	if f.Right >= 0 {
		to = min(to, q+f.Right-k0+1)
	}
	from = min(n, max(0, from))
	return from, max(from, to)
}

// HideOutside writes −Inf over the entries of row, keys at positions k0
// on, that the query at position q does not see.
func (f Frontier) HideOutside(row []float32, q, k0 int) {
	from, to := f.Visible(q, k0, len(row))
	FillNegInf(row[:from])
	FillNegInf(row[to:])
}

// MayHide reports whether the frontier hides a key from one of nq queries
// at positions q0 on, over nk keys at positions k0 on.
func (f Frontier) MayHide(q0, nq, k0, nk int) bool {
	if nq <= 0 || nk <= 0 {
		return false
	}
	lastQ, lastK := q0+nq-1, k0+nk-1
	return (f.Causal && lastK > q0) || (f.Left >= 0 && lastQ-k0 > f.Left) || (f.Right >= 0 && lastK-q0 > f.Right)
}

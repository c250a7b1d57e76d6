package attn

import "math"

// Bias is what is added to the scores of a head before the softmax: −Inf
// where the frontier hides a key, otherwise the ALiBi term plus the masks,
// in that order (the order of the float additions is part of the numbers).
// Query and key positions are absolute, as in Frontier; the masks' key
// axis is too (the key at position k reads column k), while their query
// axis counts the queries of the call (row i).
type Bias struct {
	Frontier Frontier
	// Slopes, if set, add Slopes[h]·(key − query position): ALiBi.
	Slopes []float32
	// Masks are added, in order.
	Masks []Mask
}

// Row writes the bias of sequence b, head h, query row i at position q
// over the keys at positions k0, k0+1, ... into row.
func (bs *Bias) Row(row []float32, b, h, i, q, k0 int) {
	from, to := bs.Frontier.Visible(q, k0, len(row))
	FillNegInf(row[:from])
	FillNegInf(row[to:])
	seen, k := row[from:to], k0+from
	masks := bs.Masks
	switch {
	case bs.Slopes != nil:
		m := bs.Slopes[h]
		for j := range seen {
			seen[j] = m * float32(k+j-q)
		}
	case len(masks) > 0: // 0 + the first mask is the first mask
		masks[0].Span(seen, b, h, i, k)
		masks = masks[1:]
	default:
		clear(seen)
	}
	for m := range masks {
		for j := range seen {
			seen[j] += masks[m].At(b, h, i, k+j)
		}
	}
}

// Hides reports whether the frontier or a bool mask hides the key at
// position k from query row i at position q of sequence b, head h.
func (bs *Bias) Hides(b, h, i, q, k int) bool {
	if bs.Frontier.Hides(q, k) {
		return true
	}
	for m := range bs.Masks {
		if bs.Masks[m].Hides() && math.IsInf(float64(bs.Masks[m].At(b, h, i, k)), -1) {
			return true
		}
	}
	return false
}

// MayHide reports whether the frontier or a bool mask may hide a key from
// one of nq queries at positions q0 on, over nk keys at positions k0 on.
func (bs *Bias) MayHide(q0, nq, k0, nk int) bool {
	if bs.Frontier.MayHide(q0, nq, k0, nk) {
		return true
	}
	for m := range bs.Masks {
		if bs.Masks[m].Hides() {
			return true
		}
	}
	return false
}

// Varies reports whether the bias differs between sequences and between
// heads; when it does not, one bias serves them all.
func (bs *Bias) Varies() (bySeq, byHead bool) {
	byHead = bs.Slopes != nil
	for m := range bs.Masks {
		s, h := bs.Masks[m].Varies()
		bySeq, byHead = bySeq || s, byHead || h
	}
	return bySeq, byHead
}

package lift

import "fmt"

// elem is where one element of an attention operand comes from: a token
// (row of the token tensor, b·T + t) and a feature column of its source
// (the projection's output, or the token tensor itself).
type elem struct{ row, col int }

// source is what a query, key or value operand is computed from: a token
// tensor, projected by a Linear or used as it is.
type source struct {
	tokens string
	lin    *linear // nil: the operand reads the tokens themselves
	pre    chain   // layout from the tokens to lin.in
}

// sourceOf recognizes the projection an operand's layout chain starts from.
func (a *analysis) sourceOf(base string) source {
	if lin := a.matchLinear(base); lin != nil {
		pre := a.traceBack(lin.in, false)
		return source{tokens: pre.base, lin: lin, pre: pre}
	}
	return source{tokens: base}
}

// width is the number of feature columns of the source's output.
func (s source) width(tok tokens) int {
	if s.lin != nil {
		return s.lin.dOut
	}
	return tok.D
}

// elements traces an operand back to its source at a probe: the shape of
// the operand and, per element, its token and feature column.
func (a *analysis) elements(p *probe, c chain, src source) ([]elem, []int, error) {
	tok, err := a.tokensOf(p, src.tokens)
	if err != nil {
		return nil, nil, err
	}
	shape, idx, err := p.trace(c.base, c.value, c.scales, c.as)
	if err != nil {
		return nil, nil, err
	}
	width := src.width(tok)
	var rowTok []int
	if src.lin != nil {
		if src.lin.dIn != tok.D {
			return nil, nil, fmt.Errorf("projection takes %d features, %q has %d", src.lin.dIn, src.tokens, tok.D)
		}
		if rowTok, err = a.rowsOf(p, src.pre); err != nil {
			return nil, nil, err
		}
	}
	el := make([]elem, len(idx))
	for i, f := range idx {
		r := f / width
		if rowTok != nil {
			r = rowTok[r]
		}
		el[i] = elem{row: r, col: f % width}
	}
	return el, shape, nil
}

// group is one (sequence, head) pair of a batched product: the leading
// axes of (..., T, d) flattened. It reads sequence seq, and feature
// columns col, col+1, ... of its source.
type group struct{ seq, col int }

// groups reads an operand of shape (..., T, d) (or (..., d, T) for the
// transposed keys) as groups that each take d consecutive features of
// every token of one sequence, in token order: what splitting a projection
// into heads produces. T is the sequence length of the source tokens.
func groups(el []elem, shape []int, transposed bool, T int, what string) ([]group, int, error) {
	n := len(shape)
	if n < 2 {
		return nil, 0, fmt.Errorf("%s have shape %s, want (..., tokens, features)", what, fmtShape(shape))
	}
	R, C := shape[n-2], shape[n-1]
	positions, width := R, C
	if transposed {
		positions, width = C, R
	}
	if positions != T {
		return nil, 0, fmt.Errorf("%s span %d positions, the input has %d tokens", what, positions, T)
	}
	G := product(shape[:n-2])
	out := make([]group, G)
	for g := 0; g < G; g++ {
		first := el[g*R*C]
		if first.row%T != 0 {
			return nil, 0, fmt.Errorf("%s do not start at the first token of a sequence", what)
		}
		ref := group{seq: first.row / T, col: first.col}
		for t := 0; t < positions; t++ {
			for j := 0; j < width; j++ {
				i := g*R*C + t*C + j
				if transposed {
					i = g*R*C + j*C + t
				}
				if e := el[i]; e.row != ref.seq*T+t || e.col != ref.col+j {
					return nil, 0, fmt.Errorf("%s are not heads of the projection: position %d, feature %d of group %d comes from token %d, column %d",
						what, t, j, g, e.row, e.col)
				}
			}
		}
		out[g] = ref
	}
	return out, width, nil
}

// heads is how a batched product splits into heads.
type heads struct {
	H, dk, dv        int
	KVH              int   // key and value heads: H, or fewer (grouped-query attention)
	segQ, segK, segV int   // first column of the queries, keys, values in their sources
	head             []int // head index of each group
	seq              []int // sequence of each group
}

// assignHeads checks that queries, keys and values group alike: group g
// reads the same sequence and the same head, head h being columns
// seg + h·d ... of each source, and every (sequence, head) pair occurs once.
// With grouped-query attention (keys and values repeated, as Llama's
// repeat_kv expands them), query head h reads key and value head
// h / (H / KVH) of KVH.
func assignHeads(q, k, v []group, dk, dv, B int) (heads, error) {
	if len(q) != len(k) || len(q) != len(v) {
		return heads{}, fmt.Errorf("queries, keys and values have %d, %d and %d groups", len(q), len(k), len(v))
	}
	if dk != dv {
		return heads{}, fmt.Errorf("keys have %d features per head, values %d; attnrun's layers use one head size", dk, dv)
	}
	hs := heads{dk: dk, dv: dv, segQ: q[0].col, segK: k[0].col, segV: v[0].col}
	for g := range q {
		hs.segQ, hs.segK, hs.segV = min(hs.segQ, q[g].col), min(hs.segK, k[g].col), min(hs.segV, v[g].col)
	}
	seen := map[[2]int]bool{}
	kvHead := make([]int, len(q))
	for g := range q {
		if q[g].seq != k[g].seq || q[g].seq != v[g].seq {
			return heads{}, fmt.Errorf("group %d mixes sequences %d, %d and %d", g, q[g].seq, k[g].seq, v[g].seq)
		}
		hq, hk, hv := (q[g].col-hs.segQ)/dk, (k[g].col-hs.segK)/dk, (v[g].col-hs.segV)/dv
		if (q[g].col-hs.segQ)%dk != 0 || (k[g].col-hs.segK)%dk != 0 || (v[g].col-hs.segV)%dv != 0 || hk != hv {
			return heads{}, fmt.Errorf("group %d takes query columns %d, key columns %d and value columns %d: not the same head",
				g, q[g].col, k[g].col, v[g].col)
		}
		key := [2]int{q[g].seq, hq}
		if seen[key] {
			return heads{}, fmt.Errorf("head %d of sequence %d is computed twice", hq, q[g].seq)
		}
		seen[key] = true
		hs.head = append(hs.head, hq)
		hs.seq = append(hs.seq, q[g].seq)
		hs.H = max(hs.H, hq+1)
		hs.KVH = max(hs.KVH, hk+1)
		kvHead[g] = hk
	}
	if len(seen) != B*hs.H {
		return heads{}, fmt.Errorf("%d groups for %d sequences of %d heads", len(seen), B, hs.H)
	}
	if hs.H%hs.KVH != 0 {
		return heads{}, fmt.Errorf("%d query heads read %d key heads, which does not divide them", hs.H, hs.KVH)
	}
	for g, hq := range hs.head {
		if kvHead[g] != hq/(hs.H/hs.KVH) {
			return heads{}, fmt.Errorf("group %d: query head %d reads key and value head %d; with %d of %d key heads it would read head %d",
				g, hq, kvHead[g], hs.KVH, hs.H, hq/(hs.H/hs.KVH))
		}
	}
	return hs, nil
}

// mergedRows checks the layout that joins the heads' outputs again: every
// row of the merged tensor (shape (..., H·dv)) must be one token with its
// heads side by side, head h at columns h·dv. It returns the token of each
// row. pvShape is the product's shape (..., T, dv).
func mergedRows(idx []int, shape, pvShape []int, hs heads, T int) ([]int, error) {
	n := len(pvShape)
	Tq, dv := pvShape[n-2], pvShape[n-1]
	W := shape[len(shape)-1]
	if len(shape) == 0 || W != hs.H*dv {
		return nil, fmt.Errorf("the heads merge into shape %s, want a last axis of %d·%d features", fmtShape(shape), hs.H, dv)
	}
	rowsTok := make([]int, len(idx)/W)
	for i, f := range idx {
		g, t, j := f/(Tq*dv), (f/dv)%Tq, f%dv
		tok, col := hs.seq[g]*T+t, hs.head[g]*dv+j
		r, c := i/W, i%W
		if c != col {
			return nil, fmt.Errorf("merged column %d holds feature %d of head %d", c, j, hs.head[g])
		}
		if c == 0 {
			rowsTok[r] = tok
		} else if rowsTok[r] != tok {
			return nil, fmt.Errorf("merged row %d mixes tokens %d and %d", r, rowsTok[r], tok)
		}
	}
	return rowsTok, nil
}

// canonical reports whether a value laid out as rowsTok (the token of each
// row) with the given shape is a token tensor shaped like tok: row r is
// token r and the leading axes are (B, T) or (T).
func canonical(rowsTok []int, shape []int, tok tokens, batched bool) bool {
	want := []int{tok.B, tok.T}
	if !batched {
		want = []int{tok.T}
	}
	if len(shape) == 0 || !equalShapes(shape[:len(shape)-1], want) {
		return false
	}
	for r, t := range rowsTok {
		if r != t {
			return false
		}
	}
	return true
}

// sequenceFirst reports whether the output rows hold the tokens
// sequence-first, (T, B), where the input holds them (B, T): row t·B + b
// is token b·T + t.
func sequenceFirst(rowsTok []int, shape []int, tok tokens, batched bool) bool {
	if !batched || len(shape) != 3 || shape[0] != tok.T || shape[1] != tok.B || len(rowsTok) != tok.B*tok.T {
		return false
	}
	for r, tk := range rowsTok {
		if t, b := r/tok.B, r%tok.B; tk != b*tok.T+t {
			return false
		}
	}
	return true
}

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// attnCase is one shape and set of options for Attend.
type attnCase struct {
	tq, tk, d, dv int
	causal        bool
	mask          string // "", "full" (Tq×Tk) or "row" (one row, LdMask 0)
	weights       bool
	dropout       float32
	pad           int  // extra row stride of every operand
	sink          bool // a random sink logit
}

func (c attnCase) String() string {
	return fmt.Sprintf("Tq=%d/Tk=%d/D=%d/Dv=%d/causal=%v/mask=%q/weights=%v/dropout=%g/pad=%d/sink=%v",
		c.tq, c.tk, c.d, c.dv, c.causal, c.mask, c.weights, c.dropout, c.pad, c.sink)
}

// attnCases covers odd sizes (1, 7, 33, 513 and non-multiples of the
// 64×128 tiles and of the kernels' mr and nr), Tq ≠ Tk both ways under a
// causal mask (Tq > Tk leaves the first queries with no key at all), row
// strides wider than a row, masks, weights and dropout.
func attnCases() []attnCase {
	sizes := [][4]int{
		{1, 1, 1, 1}, {7, 7, 8, 8}, {7, 33, 5, 9}, {33, 7, 16, 16},
		{33, 33, 64, 64}, {1, 513, 64, 64}, {513, 513, 64, 64},
		{130, 300, 32, 48}, {67, 200, 65, 17}, {200, 129, 64, 64},
	}
	var cases []attnCase
	for i, s := range sizes {
		for _, causal := range []bool{false, true} {
			for _, weights := range []bool{false, true} {
				c := attnCase{tq: s[0], tk: s[1], d: s[2], dv: s[3], causal: causal, weights: weights, pad: i % 3 * 3}
				cases = append(cases, c)
			}
		}
		// Masks and dropout on a subset of sizes, to keep the run short.
		if i%2 == 1 {
			cases = append(cases,
				attnCase{tq: s[0], tk: s[1], d: s[2], dv: s[3], mask: "full", causal: i%4 == 1, pad: 1},
				attnCase{tq: s[0], tk: s[1], d: s[2], dv: s[3], mask: "row", weights: i%4 == 3},
				attnCase{tq: s[0], tk: s[1], d: s[2], dv: s[3], dropout: 0.3, causal: true},
				attnCase{tq: s[0], tk: s[1], d: s[2], dv: s[3], dropout: 0.3, weights: true, mask: "row"},
				attnCase{tq: s[0], tk: s[1], d: s[2], dv: s[3], sink: true, causal: true},
				attnCase{tq: s[0], tk: s[1], d: s[2], dv: s[3], sink: true, mask: "full", weights: i%4 == 1},
				attnCase{tq: s[0], tk: s[1], d: s[2], dv: s[3], sink: true, causal: true, weights: true, dropout: 0.3},
			)
		}
	}
	// Dropout 1 drops everything: zeros, with no 0·∞ NaN from the 1/(1−p)
	// scaling.
	cases = append(cases,
		attnCase{tq: 7, tk: 9, d: 4, dv: 4, dropout: 1},
		attnCase{tq: 7, tk: 9, d: 4, dv: 4, dropout: 1, weights: true},
	)
	return cases
}

// testHead builds a head for c with random operands inside buffers whose
// row stride is c.pad wider than a row. Out is filled with NaN: every
// element must be written.
func testHead(rng *rand.Rand, c attnCase) Head {
	h := Head{
		Tq: c.tq, Tk: c.tk, D: c.d, Dv: c.dv,
		LdQ: c.d + c.pad, LdK: c.d + 2*c.pad, LdV: c.dv + c.pad, LdOut: c.dv + c.pad,
	}
	h.Q = randSlice(rng, c.tq*h.LdQ)
	h.K = randSlice(rng, c.tk*h.LdK)
	h.V = randSlice(rng, c.tk*h.LdV)
	h.Out = make([]float32, c.tq*h.LdOut)
	for i := range h.Out {
		h.Out[i] = float32(math.NaN())
	}
	switch c.mask {
	case "full":
		h.LdMask = c.tk + c.pad
		h.Mask = randMask(rng, c.tq*h.LdMask)
		// One query that sees nothing: its output must be zeros.
		for j := range c.tk {
			h.Mask[(c.tq/2)*h.LdMask+j] = float32(math.Inf(-1))
		}
	case "row":
		h.Mask = randMask(rng, c.tk)
	}
	if c.sink {
		sink := 4*rng.Float32() - 2 // about as large as the scores, so that it matters
		h.Sink = &sink
	}
	return h
}

// randMask returns additive mask values: mostly small numbers, some −Inf.
func randMask(rng *rand.Rand, n int) []float32 {
	m := make([]float32, n)
	for i := range m {
		if rng.IntN(5) == 0 {
			m[i] = float32(math.Inf(-1))
		} else {
			m[i] = rng.Float32() - 0.5
		}
	}
	return m
}

// outputRows copies the Tq×Dv output out of its strided buffer.
func outputRows(h Head) []float32 {
	out := make([]float32, 0, h.Tq*h.Dv)
	for i := range h.Tq {
		out = append(out, h.Out[i*h.LdOut:i*h.LdOut+h.Dv]...)
	}
	return out
}

// cloneHead returns h with its own Out buffer.
func cloneHead(h Head) Head {
	h.Out = append([]float32(nil), h.Out...)
	return h
}

func TestAttendMatchesReference(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		for _, threshold := range []int{parallelMinFlops, 0} {
			withParallelThreshold(threshold, func() {
				for i, c := range attnCases() {
					if threshold == 0 && (c.dropout > 0 || c.weights) {
						continue // serial or GEMM-driven either way
					}
					checkAttend(t, fmt.Sprintf("%v/par=%v", c, threshold == 0), c, uint64(i))
				}
			})
		}
	})
}

// checkAttend runs case c through Attend and attendRef.
func checkAttend(t *testing.T, name string, c attnCase, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	h := testHead(rng, c)
	opt := AttentionOptions{Scale: float32(1 / math.Sqrt(float64(max(c.d, 1)))), Causal: c.causal, Dropout: c.dropout}

	ref, fast := cloneHead(h), cloneHead(h)
	refOpt, fastOpt := opt, opt
	if c.weights {
		refOpt.Weights = make([]float32, c.tq*c.tk)
		fastOpt.Weights = make([]float32, c.tq*c.tk)
	}
	if c.dropout > 0 {
		refOpt.RNG = rand.New(rand.NewPCG(seed, 99))
		fastOpt.RNG = rand.New(rand.NewPCG(seed, 99))
	}
	outTol, weightTol := attendRef(ref, refOpt)
	Attend(fast, fastOpt)

	requireWithin(t, outputRows(ref), outputRows(fast), outTol, name+": Out")
	if c.weights {
		requireWithin(t, refOpt.Weights, fastOpt.Weights, weightTol, name+": Weights")
	}
	if c.dropout > 0 {
		require.Equal(t, refOpt.RNG.Uint64(), fastOpt.RNG.Uint64(), "%s: RNG streams diverged", name)
	}
	for i := range c.tq {
		for j := c.dv; j < h.LdOut; j++ {
			require.True(t, math.IsNaN(float64(fast.Out[i*h.LdOut+j])), "%s: Out[%d][%d] beyond Dv written", name, i, j)
		}
	}
}

// multiHead builds the B·H heads of a multi-head layer addressed in place
// inside (B·T, H·dh) projections, as layers pass them to AttendBatch.
func multiHead(rng *rand.Rand, bsz, nh, tq, tk, dh int) []Head {
	width := nh * dh
	q, k, v := randSlice(rng, bsz*tq*width), randSlice(rng, bsz*tk*width), randSlice(rng, bsz*tk*width)
	out := make([]float32, bsz*tq*width)
	var heads []Head
	for b := range bsz {
		for h := range nh {
			heads = append(heads, Head{Tq: tq, Tk: tk, D: dh, Dv: dh,
				Q: q[b*tq*width+h*dh:], LdQ: width, K: k[b*tk*width+h*dh:], LdK: width,
				V: v[b*tk*width+h*dh:], LdV: width, Out: out[b*tq*width+h*dh:], LdOut: width})
		}
	}
	return heads
}

// TestAttendBatch checks AttendBatch against attendRef head by head, on
// the parallel path, the weights path (each head's weights after the
// previous heads') and the dropout path (the same RNG stream as Attend in
// a loop).
func TestAttendBatch(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			bsz, nh int
			tq, tk  int
			weights bool
			dropout float32
		}{
			{"whole heads in parallel", 2, 3, 70, 70, false, 0},
			{"whole heads, Tq<Tk", 2, 3, 33, 100, false, 0},
			{"heads split in parallel", 1, 3, 200, 200, false, 0},
			{"weights", 2, 3, 40, 50, true, 0},
			{"dropout", 2, 3, 40, 40, false, 0.25},
		} {
			rng := rand.New(rand.NewPCG(21, 22))
			heads := multiHead(rng, tc.bsz, tc.nh, tc.tq, tc.tk, 16)
			opt := AttentionOptions{Scale: 0.25, Causal: true, Dropout: tc.dropout}
			refOpt := opt
			if tc.weights {
				opt.Weights = make([]float32, len(heads)*tc.tq*tc.tk)
			}
			if tc.dropout > 0 {
				opt.RNG = rand.New(rand.NewPCG(1, 2))
				refOpt.RNG = rand.New(rand.NewPCG(1, 2))
			}
			// Threshold 0: even these small heads take the parallel paths.
			withParallelThreshold(0, func() { AttendBatch(heads, opt) })
			for i, h := range heads {
				got := outputRows(h)
				ref := cloneHead(h)
				if tc.weights {
					refOpt.Weights = make([]float32, tc.tq*tc.tk)
				}
				outTol, weightTol := attendRef(ref, refOpt)
				name := fmt.Sprintf("%s head %d", tc.name, i)
				requireWithin(t, outputRows(ref), got, outTol, name)
				if tc.weights {
					requireWithin(t, refOpt.Weights, opt.Weights[i*tc.tq*tc.tk:(i+1)*tc.tq*tc.tk], weightTol, name+" weights")
				}
			}
		}
	})
}

// TestAttendPanicsOnBadInput checks that inconsistent heads and options
// are refused with a message naming the problem.
func TestAttendPanicsOnBadInput(t *testing.T) {
	h := Head{Tq: 2, Tk: 2, D: 2, Dv: 2, LdQ: 2, LdK: 2, LdV: 2, LdOut: 2,
		Q: make([]float32, 4), K: make([]float32, 4), V: make([]float32, 3), Out: make([]float32, 4)}
	require.PanicsWithValue(t, "kernels: Attend: V holds 3 floats, 2×2 with row stride 2 (batch 1, stride 0) needs 4",
		func() { Attend(h, AttentionOptions{}) })
	h.V = make([]float32, 4)
	require.PanicsWithValue(t, "kernels: Attend: Dropout 0.5 needs an RNG",
		func() { Attend(h, AttentionOptions{Dropout: 0.5}) })
	require.PanicsWithValue(t, "kernels: Attend: Weights holds 3 floats, need 4",
		func() { Attend(h, AttentionOptions{Weights: make([]float32, 3)}) })
}

// TestAttendSinkExamples pins attention sinks on an example worked out by
// hand: Q = K = [1, 1, 1], V = [1, 2, 4], scale 1, so every visible score
// is 1; a sink of 1 is one more score of 1 with no value.
func TestAttendSinkExamples(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		for _, weights := range []bool{false, true} {
			run := func(sink float32, opt AttentionOptions, mask []float32) []float32 {
				h := Head{Tq: 3, Tk: 3, D: 1, Dv: 1, LdQ: 1, LdK: 1, LdV: 1, LdOut: 1,
					Q: []float32{1, 1, 1}, K: []float32{1, 1, 1}, V: []float32{1, 2, 4}, Out: make([]float32, 3), Sink: &sink}
				if mask != nil {
					h.Mask, h.LdMask = mask, 3
				}
				if weights {
					opt.Weights = make([]float32, 9)
				}
				Attend(h, opt)
				return h.Out
			}
			// Causal: query i sees i+1 keys of weight 1/(i+2) each.
			out := run(1, AttentionOptions{Scale: 1, Causal: true}, nil)
			requireWithin(t, []float32{1.0 / 2, 3.0 / 3, 7.0 / 4}, out, []float64{1e-7, 1e-7, 1e-7}, fmt.Sprint("causal, weights=", weights))
			// A query that sees no key gives the sink all its weight: 0,
			// even with EmptyRowsNaN.
			neg := negInf32
			mask := []float32{neg, neg, neg, 0, 0, 0, 0, 0, 0}
			out = run(1, AttentionOptions{Scale: 1, EmptyRowsNaN: true}, mask)
			requireWithin(t, []float32{0, 7.0 / 4, 7.0 / 4}, out, []float64{0, 1e-7, 1e-7}, fmt.Sprint("empty row, weights=", weights))
			// A −Inf sink is no sink.
			out = run(negInf32, AttentionOptions{Scale: 1, EmptyRowsNaN: true}, mask)
			require.True(t, math.IsNaN(float64(out[0])), "weights=%v: %g", weights, out[0])
			requireWithin(t, []float32{7.0 / 3, 7.0 / 3}, out[1:], []float64{1e-6, 1e-6}, fmt.Sprint("−Inf sink, weights=", weights))
			// A NaN sink makes every query NaN.
			out = run(nan32, AttentionOptions{Scale: 1, Causal: true}, nil)
			for i, v := range out {
				require.True(t, math.IsNaN(float64(v)), "weights=%v: NaN sink, query %d: %g", weights, i, v)
			}
		}
	})
	row := []float32{1, negInf32, 1}
	SoftmaxRowsSink(row, 1, 3, 1)
	requireWithin(t, []float32{1.0 / 3, 0, 1.0 / 3}, row, []float64{1e-7, 0, 1e-7}, "SoftmaxRowsSink")
	row = []float32{negInf32, negInf32}
	SoftmaxRowsSink(row, 1, 2, 0)
	require.Equal(t, []float32{0, 0}, row)
}

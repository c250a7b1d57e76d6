package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	nan32    = float32(math.NaN())
	posInf32 = float32(math.Inf(1))
	negInf32 = float32(math.Inf(-1))
)

// TestMaxOfNaN checks that every instruction set's maxOf returns NaN when
// any element is NaN, wherever it sits (first, in the main loop, in the
// tail, last), and that ±Inf are ordinary values.
func TestMaxOfNaN(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(12, 13))
		for _, n := range []int{1, 7, 8, 9, 16, 17, 31, 32, 33, 100} {
			for _, at := range []int{0, n / 2, n - 1} {
				x := randSlice(rng, n)
				x[at] = nan32
				require.True(t, math.IsNaN(float64(currentISA().maxOf(x))), "n=%d NaN at %d", n, at)
				x[at] = posInf32
				require.Equal(t, posInf32, currentISA().maxOf(x), "n=%d +Inf at %d", n, at)
				for i := range x {
					x[i] = negInf32
				}
				require.Equal(t, negInf32, currentISA().maxOf(x), "n=%d all −Inf", n)
			}
		}
	})
}

// TestExpShiftNaN checks that every instruction set's exponential keeps
// NaN (and makes the sum NaN), in the vector body and the masked tail, and
// that a NaN shift makes everything NaN.
func TestExpShiftNaN(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		for _, n := range []int{1, 5, 8, 13, 16, 20, 40} {
			for _, at := range []int{0, n - 1} {
				x := make([]float32, n)
				x[at] = nan32
				sum := currentISA().expShift(x, 1)
				require.True(t, math.IsNaN(float64(x[at])), "n=%d: exp(NaN) at %d = %g", n, at, x[at])
				require.True(t, math.IsNaN(float64(sum)), "n=%d: sum %g", n, sum)
				for i, v := range x {
					if i != at {
						require.InDelta(t, math.Exp(-1), float64(v), 1e-7, "n=%d i=%d", n, i)
					}
				}
			}
			x := make([]float32, n)
			x[0] = negInf32
			currentISA().expShift(x, nan32)
			for i, v := range x {
				require.True(t, math.IsNaN(float64(v)), "n=%d: shift NaN, i=%d gave %g", n, i, v)
			}
		}
	})
}

// nonFiniteCase is an Attend case with one non-finite number injected.
type nonFiniteCase struct {
	attnCase
	operand  string // "Q", "K", "V", "mask" or "sink"
	row, col int
	value    float32
	nanRows  bool
}

func (c nonFiniteCase) String() string {
	return fmt.Sprintf("%v/%s[%d][%d]=%g/nanRows=%v", c.attnCase, c.operand, c.row, c.col, c.value, c.nanRows)
}

// nonFiniteCases puts NaN, +Inf and −Inf into Q, K and V at the first row
// (seen by every query), the last (hidden from all but the last queries by
// a causal mask) and, for the small sizes, one in the middle, and into the
// mask, with and without a causal mask, the weights path, and for the small
// sizes a mask with a fully masked query, EmptyRowsNaN and dropout. The
// large sizes span several query blocks (64) and key tiles (256), so that
// hidden tiles are skipped.
func nonFiniteCases() []nonFiniteCase {
	var cases []nonFiniteCase
	for _, size := range [][4]int{{5, 5, 3, 4}, {6, 9, 4, 3}, {9, 6, 4, 3}, {150, 150, 8, 5}, {70, 300, 5, 8}} {
		tq, tk := size[0], size[1]
		for _, v := range []float32{nan32, posInf32, negInf32} {
			for _, op := range []string{"Q", "K", "V", "mask"} {
				n := tk
				if op == "Q" {
					n = tq
				}
				rows := []int{0, n / 2, n - 1}
				large := tq*tk > 1000
				if large {
					rows = []int{0, n - 1} // the first and last key tiles and query blocks
				}
				for _, row := range rows {
					for k, causal := range []bool{false, true} {
						c := nonFiniteCase{
							attnCase: attnCase{tq: tq, tk: tk, d: size[2], dv: size[3], causal: causal, pad: k},
							operand:  op, row: row, col: row % size[2], value: v,
						}
						if op == "mask" {
							c.mask, c.col = "full", row%tk
							c.row = row % tq
						}
						cases = append(cases, c)
						c.weights = true
						cases = append(cases, c)
						if row == 0 && !large {
							c.mask, c.weights, c.nanRows = "full", false, true
							cases = append(cases, c)
							c.weights, c.dropout = true, 0.2
							cases = append(cases, c)
						}
					}
				}
			}
		}
	}
	// The sink: NaN and +Inf make every query NaN, −Inf is no sink, also
	// for the query a full mask hides from every key.
	for _, size := range [][4]int{{5, 5, 3, 4}, {9, 6, 4, 3}, {150, 150, 8, 5}} {
		for _, v := range []float32{nan32, posInf32, negInf32} {
			for k, causal := range []bool{false, true} {
				c := nonFiniteCase{
					attnCase: attnCase{tq: size[0], tk: size[1], d: size[2], dv: size[3], causal: causal, pad: k, sink: true},
					operand:  "sink", value: v,
				}
				cases = append(cases, c)
				c.weights = true
				cases = append(cases, c)
				c.mask = "full"
				for _, nanRows := range []bool{false, true} {
					c.nanRows = nanRows
					cases = append(cases, c)
				}
			}
		}
	}
	return cases
}

// TestAttendNonFinite checks Attend against attendRef when Q, K, V or the
// mask holds a NaN or an infinity: the NaN and ±Inf of the output and the
// weights must be the reference's exactly, the finite values within its
// tolerance, on every instruction set, serial and parallel.
func TestAttendNonFinite(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		for _, threshold := range []int{parallelMinFlops, 0} {
			withParallelThreshold(threshold, func() {
				for i, c := range nonFiniteCases() {
					checkNonFinite(t, c, uint64(i))
				}
			})
		}
	})
}

// checkNonFinite runs one case through Attend and attendRef.
func checkNonFinite(t *testing.T, c nonFiniteCase, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 17))
	h := testHead(rng, c.attnCase)
	switch c.operand {
	case "Q":
		h.Q[c.row*h.LdQ+c.col] = c.value
	case "K":
		h.K[c.row*h.LdK+c.col] = c.value
	case "V":
		h.V[c.row*h.LdV+c.col%c.dv] = c.value
	case "mask":
		h.Mask[c.row*h.LdMask+c.col] = c.value
	case "sink":
		*h.Sink = c.value
	}
	opt := AttentionOptions{Scale: 0.5, Causal: c.causal, EmptyRowsNaN: c.nanRows, Dropout: c.dropout}
	ref, fast := cloneHead(h), cloneHead(h)
	refOpt, fastOpt := opt, opt
	if c.weights {
		refOpt.Weights = make([]float32, c.tq*c.tk)
		fastOpt.Weights = make([]float32, c.tq*c.tk)
	}
	if c.dropout > 0 {
		refOpt.RNG = rand.New(rand.NewPCG(seed, 5))
		fastOpt.RNG = rand.New(rand.NewPCG(seed, 5))
	}
	outTol, weightTol := attendRef(ref, refOpt)
	Attend(fast, fastOpt)
	name := c.String()
	requireWithin(t, outputRows(ref), outputRows(fast), outTol, name+": Out")
	if c.weights {
		requireWithin(t, refOpt.Weights, fastOpt.Weights, weightTol, name+": Weights")
	}
}

// TestAttendNonFiniteExamples pins the rules on small examples worked out
// by hand, so that the reference cannot drift with the kernel.
func TestAttendNonFiniteExamples(t *testing.T) {
	// Three tokens, D = Dv = 1, scale 1: Q = K = [1, 1, 1], V = [1, 2, x].
	head := func(x float32) Head {
		return Head{Tq: 3, Tk: 3, D: 1, Dv: 1, LdQ: 1, LdK: 1, LdV: 1, LdOut: 1,
			Q: []float32{1, 1, 1}, K: []float32{1, 1, 1}, V: []float32{1, 2, x}, Out: make([]float32, 3)}
	}
	forEachISA(t, func(t *testing.T) {
		for _, weights := range []bool{false, true} {
			run := func(h Head, opt AttentionOptions) []float32 {
				if weights {
					opt.Weights = make([]float32, h.Tq*h.Tk)
				}
				Attend(h, opt)
				return h.Out
			}
			// A NaN value hidden behind the causal frontier still reaches
			// every query: its weight is 0 and 0·NaN is NaN.
			out := run(head(nan32), AttentionOptions{Scale: 1, Causal: true})
			for i, v := range out {
				require.True(t, math.IsNaN(float64(v)), "weights=%v: query %d: %g", weights, i, v)
			}
			// A NaN key behind the frontier is never looked at.
			h := head(3)
			h.K[2] = nan32
			out = run(h, AttentionOptions{Scale: 1, Causal: true})
			require.Equal(t, []float32{1, 1.5}, out[:2], "weights=%v", weights)
			require.True(t, math.IsNaN(float64(out[2])), "weights=%v", weights)
			// A mask adds: NaN + −Inf is NaN, so the row is NaN.
			h = head(3)
			h.K[2] = nan32
			h.Mask, h.LdMask = []float32{0, 0, negInf32}, 0
			out = run(h, AttentionOptions{Scale: 1})
			for i, v := range out {
				require.True(t, math.IsNaN(float64(v)), "weights=%v: masked NaN key, query %d: %g", weights, i, v)
			}
			// A query whose keys are all masked: 0, or NaN with EmptyRowsNaN.
			h = head(3)
			h.Mask, h.LdMask = []float32{negInf32, negInf32, negInf32, 0, 0, 0, 0, 0, 0}, 3
			out = run(h, AttentionOptions{Scale: 1})
			require.Equal(t, float32(0), out[0], "weights=%v", weights)
			require.InDelta(t, 2, out[1], 1e-6, "weights=%v", weights)
			out = run(h, AttentionOptions{Scale: 1, EmptyRowsNaN: true})
			require.True(t, math.IsNaN(float64(out[0])), "weights=%v: %g", weights, out[0])
			require.InDelta(t, 2, out[1], 1e-6, "weights=%v", weights)
			// Visible scores that are all −Inf are a plain softmax of −Inf: NaN.
			h = head(3)
			h.K[0], h.K[1], h.K[2] = negInf32, negInf32, negInf32
			out = run(h, AttentionOptions{Scale: 1, Causal: true})
			for i, v := range out {
				require.True(t, math.IsNaN(float64(v)), "weights=%v: −Inf scores, query %d: %g", weights, i, v)
			}
			// +Inf in the last key: the last query's weights are NaN; the
			// others never look at it.
			h = head(3)
			h.K[2] = posInf32
			out = run(h, AttentionOptions{Scale: 1, Causal: true})
			require.Equal(t, []float32{1, 1.5}, out[:2], "weights=%v", weights)
			require.True(t, math.IsNaN(float64(out[2])), "weights=%v", weights)
		}
	})
}

// TestSkippedTilesPoisonColumns checks the bookkeeping of the causal
// work Attend skips (key tiles a whole query block never loads, and keys
// past the frontier of a tile of queries within a block, with ragged last
// tiles of 8 and 2 rows): a NaN or ±Inf value of any key still makes the
// outputs of every query that does not see it NaN in its column, and
// only there.
func TestSkippedTilesPoisonColumns(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 3))
		const d, dv = 8, 6
		for _, size := range [][2]int{{200, 200}, {82, 82}, {10, 40}} {
			tq, tk := size[0], size[1]
			for _, v := range []float32{nan32, posInf32, negInf32} {
				for key := range tk {
					h := Head{Tq: tq, Tk: tk, D: d, Dv: dv, LdQ: d, LdK: d, LdV: dv, LdOut: dv,
						Q: randSlice(rng, tq*d), K: randSlice(rng, tk*d), V: randSlice(rng, tk*dv), Out: make([]float32, tq*dv)}
					h.V[key*dv+2] = v // column 2
					Attend(h, AttentionOptions{Scale: 1, Causal: true})
					for i := range tq {
						for c := range dv {
							got := h.Out[i*dv+c]
							switch {
							case c != 2:
								require.True(t, isFinite(got), "%dx%d, %g at key %d: out[%d][%d] = %g", tq, tk, v, key, i, c, got)
							case key >= visibleKeys(i, tq, tk, true):
								require.True(t, math.IsNaN(float64(got)), "%dx%d, %g at key %d: out[%d][%d] = %g, want NaN (0·%g)", tq, tk, v, key, i, c, got, v)
							default:
								// The query sees the value with a positive weight.
								require.Equal(t, math.IsNaN(float64(v)), math.IsNaN(float64(got)), "%dx%d, %g at key %d: query %d: %g", tq, tk, v, key, i, got)
								require.False(t, isFinite(got), "%dx%d, %g at key %d: query %d: %g", tq, tk, v, key, i, got)
							}
						}
					}
				}
			}
		}
	})
}

// TestSoftmaxRowsNonFinite pins SoftmaxRows on the rows ONNX Runtime's
// Softmax and torch.softmax were asked about.
func TestSoftmaxRowsNonFinite(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		for _, tc := range []struct {
			in, want []float32
		}{
			{[]float32{nan32, 1}, []float32{nan32, nan32}},
			{[]float32{posInf32, 1}, []float32{nan32, nan32}},
			{[]float32{posInf32, posInf32}, []float32{nan32, nan32}},
			{[]float32{negInf32, 1}, []float32{0, 1}},
			{[]float32{negInf32, negInf32}, []float32{nan32, nan32}},
			{[]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, nan32}, []float32{nan32, nan32, nan32, nan32, nan32, nan32, nan32, nan32, nan32, nan32}},
		} {
			x := append([]float32(nil), tc.in...)
			SoftmaxRows(x, 1, len(x))
			requireWithin(t, tc.want, x, make([]float64, len(x)), fmt.Sprint(tc.in))
		}
	})
}

func TestFiniteScores(t *testing.T) {
	q, k := []float32{1, -2, 3}, []float32{0.5, 4, -1}
	require.True(t, FiniteScores(q, k, 3, 0.125))
	for _, v := range []float32{nan32, posInf32, negInf32} {
		require.False(t, FiniteScores([]float32{1, v, 3}, k, 3, 1), "%g in q", v)
		require.False(t, FiniteScores(q, []float32{v}, 3, 1), "%g in k", v)
	}
	// 2e19·2e19 overflows float32 (3.4e38), even scaled down afterwards.
	require.False(t, FiniteScores([]float32{2e19}, []float32{2e19}, 1, 1e-3))
	require.True(t, FiniteScores([]float32{1e18}, []float32{1e18}, 1, 1))
	// A large scale can overflow a finite product.
	require.False(t, FiniteScores([]float32{1e18}, []float32{1e18}, 1, 1e3))
}

func TestUseISA(t *testing.T) {
	names := ISAs()
	require.Equal(t, "go", names[len(names)-1])
	before := ISA()
	for _, name := range names {
		restore, err := UseISA(name)
		require.NoError(t, err)
		require.Equal(t, name, ISA())
		restore()
		require.Equal(t, before, ISA())
	}
	_, err := UseISA("sse9")
	require.ErrorContains(t, err, `instruction set "sse9" is not available here`)
}

// TestMaxAbs checks the largest magnitude read from the bits: signs,
// negative zero, subnormals, and every kind of non-finite value refused.
func TestMaxAbs(t *testing.T) {
	m, ok := maxAbs([]float32{0.5, -3, float32(math.Copysign(0, -1)), 1e-40, 2.5})
	require.True(t, ok)
	require.Equal(t, float32(3), m)
	m, ok = maxAbs([]float32{float32(math.Copysign(0, -1)), -1e-40})
	require.True(t, ok)
	require.Equal(t, float32(1e-40), m)
	m, ok = maxAbs(nil)
	require.True(t, ok)
	require.Zero(t, m)
	negNaN := math.Float32frombits(0xffc00001)
	for _, v := range []float32{float32(math.NaN()), negNaN, float32(math.Inf(1)), float32(math.Inf(-1))} {
		_, ok := maxAbs([]float32{1, -math.MaxFloat32, v, 2})
		require.False(t, ok, "%v", math.Float32bits(v))
	}
	m, ok = maxAbs([]float32{-math.MaxFloat32})
	require.True(t, ok)
	require.Equal(t, float32(math.MaxFloat32), m)
}

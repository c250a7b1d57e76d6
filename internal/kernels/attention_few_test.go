package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// fewCases are heads of one to four queries over a cache of keys, the
// shapes attendFew takes (Dv a multiple of every kernel's nr; D with and
// without a tail past a multiple of 32), causal with the diagonal offset
// both ways (Tq > Tk leaves the first queries no key), masks, sinks and
// padded strides.
func fewCases() []attnCase {
	var cases []attnCase
	i := 0
	for _, tq := range []int{1, 2, 3, 4} {
		for _, tk := range []int{1, 3, 37, 300} {
			for _, dims := range [][2]int{{8, 32}, {64, 64}, {80, 32}} {
				for _, mask := range []string{"", "full", "row"} {
					i++
					cases = append(cases, attnCase{tq: tq, tk: tk, d: dims[0], dv: dims[1],
						causal: i%2 == 0, mask: mask, pad: i % 3, sink: i%5 == 0})
				}
			}
		}
	}
	return cases
}

// TestAttendFewMatchesReference checks the few-queries path against the
// reference attention on random data, and that the instruction sets with
// dot products do take it.
func TestAttendFewMatchesReference(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		for i, c := range fewCases() {
			if currentISA().dot4 != nil && currentISA().gemm.rows != nil {
				h := Head{Tq: c.tq, Tk: c.tk, Dv: c.dv}
				require.True(t, fewQueries(currentISA(), &h, &AttentionOptions{}), "%v: not on the few-queries path", c)
			}
			checkAttend(t, c.String(), c, uint64(i))
		}
	})
}

// TestAttendFewNonFinite puts NaN and ±Inf into Q, K, V, the mask and the
// sink of few-queries heads, at the first key, the last (hidden from the
// first queries by a causal mask) and one between, with and without
// EmptyRowsNaN: the NaN and ±Inf of the output must be the reference's.
func TestAttendFewNonFinite(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		seed := uint64(0)
		for _, size := range [][2]int{{1, 9}, {3, 9}, {4, 2}, {2, 70}} {
			tq, tk := size[0], size[1]
			for _, v := range []float32{nan32, posInf32, negInf32} {
				for _, op := range []string{"Q", "K", "V", "mask", "sink"} {
					n := tk
					if op == "Q" {
						n = tq
					}
					for _, row := range []int{0, n / 2, n - 1} {
						for k, causal := range []bool{false, true} {
							c := nonFiniteCase{
								attnCase: attnCase{tq: tq, tk: tk, d: 40, dv: 32, causal: causal, pad: k, sink: op == "sink"},
								operand:  op, row: row, col: row % 32, value: v, nanRows: row%2 == 1,
							}
							if op == "mask" {
								c.mask, c.col = "full", row%tk
								c.row = row % tq
							}
							seed++
							checkNonFinite(t, c, seed)
						}
					}
				}
			}
		}
	})
}

// TestAttendBatchFewGQA runs a decoding step of grouped-query attention
// (8 query heads over 2 shared key-value heads, one to three new tokens
// over a cache, causal offset, a key-padding mask) through AttendBatch,
// serial and in parallel, against the reference head by head.
func TestAttendBatchFewGQA(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		for _, tq := range []int{1, 3} {
			for _, threshold := range []int{parallelMinFlops, 0} {
				const nq, nkv, dh, tk = 8, 2, 64, 517
				rng := rand.New(rand.NewPCG(uint64(tq), 31))
				q := randSlice(rng, tq*nq*dh)
				k, v := randSlice(rng, tk*nkv*dh), randSlice(rng, tk*nkv*dh)
				mask := randMask(rng, tk)
				out := make([]float32, tq*nq*dh)
				heads := make([]Head, nq)
				for i := range heads {
					g := i / (nq / nkv)
					heads[i] = Head{Tq: tq, Tk: tk, D: dh, Dv: dh,
						Q: q[i*dh:], LdQ: nq * dh, K: k[g*dh:], LdK: nkv * dh, V: v[g*dh:], LdV: nkv * dh,
						Out: out[i*dh:], LdOut: nq * dh, Mask: mask}
				}
				opt := AttentionOptions{Scale: 0.125, Causal: true}
				withParallelThreshold(threshold, func() { AttendBatch(heads, opt) })
				for i, h := range heads {
					ref := cloneHead(h)
					outTol, _ := attendRef(ref, opt)
					requireWithin(t, outputRows(ref), outputRows(h), outTol, fmt.Sprintf("Tq=%d par=%v head %d", tq, threshold == 0, i))
				}
			}
		}
	})
}

// TestAttendFewEmptyRows pins the rows that see no key: with Tq > Tk under
// a causal mask the first queries see nothing, and get 0 or, with
// EmptyRowsNaN, NaN.
func TestAttendFewEmptyRows(t *testing.T) {
	h := Head{Tq: 3, Tk: 1, D: 32, Dv: 32, LdQ: 32, LdK: 32, LdV: 32, LdOut: 32,
		Q: make([]float32, 3*32), K: make([]float32, 32), V: make([]float32, 32), Out: make([]float32, 3*32)}
	for i := range h.V {
		h.V[i] = 2
	}
	for _, nanRows := range []bool{false, true} {
		Attend(h, AttentionOptions{Scale: 1, Causal: true, EmptyRowsNaN: nanRows})
		for i := range 2 {
			for _, x := range h.Out[i*32 : (i+1)*32] {
				require.Equal(t, nanRows, math.IsNaN(float64(x)), "row %d nanRows=%v: %v", i, nanRows, x)
				if !nanRows {
					require.Zero(t, x)
				}
			}
		}
		for _, x := range h.Out[64:] {
			require.Equal(t, float32(2), x)
		}
	}
}

// BenchmarkAttendDecode times one token of 12 heads (dh 64) over a cache
// of 128 to 2048 keys on one goroutine, on the few-queries path and on
// the fused kernel it replaces.
func BenchmarkAttendDecode(b *testing.B) {
	for _, tk := range []int{128, 512, 2048} {
		rng := rand.New(rand.NewPCG(1, 2))
		heads := multiHead(rng, 1, 12, 1, tk, 64)
		opt := AttentionOptions{Scale: 0.125, Causal: true}
		for _, path := range []string{"few", "fused"} {
			b.Run(fmt.Sprintf("past=%d/%s", tk, path), func(b *testing.B) {
				ws := freeWorkspaces.get()
				defer freeWorkspaces.put(ws)
				for b.Loop() {
					for i := range heads {
						if path == "few" {
							attendFew(&heads[i], &opt, ws)
						} else {
							attendFlash(&heads[i], &opt, 1)
						}
					}
				}
			})
		}
	}
}

// TestDotRowsMatchesDot4 checks that dotRows gives, row for row, the bits
// of dot4 times the scale, over several groups of strided rows.
func TestDotRowsMatchesDot4(t *testing.T) {
	set := availableISAs()[0]
	if set.dotRows == nil {
		t.Skip("no dotRows on this machine")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, k32 := range []int{0, 32, 64, 128} {
		const groups, ldw = 5, 131
		x, w := randSlice(rng, k32), randSlice(rng, 4*groups*ldw)
		got := make([]float32, 4*groups+1)
		got[4*groups] = 7 // past the end: untouched
		set.dotRows(groups, k32, x, w, ldw, 0.3, got[:4*groups])
		for g := range groups {
			var d [4]float32
			set.dot4(k32, x, w[4*g*ldw:], ldw, &d)
			for r := range 4 {
				require.Equal(t, 0.3*d[r], got[4*g+r], "k32=%d row %d", k32, 4*g+r)
			}
		}
		require.Equal(t, float32(7), got[4*groups])
	}
}

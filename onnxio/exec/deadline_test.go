package exec

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// countdown is a context that reports itself cancelled from its n-th Err
// call on, so that a test stops a kernel at a chosen point without timing.
type countdown struct {
	context.Context
	left atomic.Int64
}

func newCountdown(n int64) *countdown {
	c := &countdown{Context: context.Background()}
	c.left.Store(n)
	return c
}

// Err is nil for the first n calls, then context.Canceled.
func (c *countdown) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// squareMatMul is the 171-byte graph of issue 10 (item 5): two n×n
// matrices of ones from ConstantOfShape, multiplied: n³ multiply-adds from
// a file that holds one number. FuzzExecutor starts from it.
func squareMatMul(t testing.TB, n int64) *onnxpb.ModelProto {
	return graphSpec{
		nodes: []*onnxpb.NodeProto{
			filled(t, "a", "shape", dense([]int{1}, float32(1))),
			nodeP("mm", "MatMul", []string{"a", "a"}, []string{"y"}),
		},
		outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
		inits:   []*onnxpb.TensorProto{shapeInit(t, "shape", n, n)},
	}.model()
}

// TestRunDeadline multiplies two 4096×4096 matrices (seconds of work)
// under a 100 ms deadline: the run must stop inside the product, well
// before the product could end. (squareMatMul is the same product from a
// file of a few bytes; here the input is given, so that the deadline
// falls in the product however slow the machine is.)
func TestRunDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 128 MiB")
	}
	const n = 4096
	g, err := New(graphSpec{
		nodes:   []*onnxpb.NodeProto{nodeP("mm", "MatMul", []string{"a", "a"}, []string{"y"})},
		inputs:  []*onnxpb.ValueInfoProto{info("a", onnxio.Float, n, n)},
		outputs: []*onnxpb.ValueInfoProto{info("y", onnxio.Float, n, n)},
	}.model())
	require.NoError(t, err)
	a := dense([]int{n, n}, make([]float32, n*n)...)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = g.RunContext(ctx, map[string]*tensor.Dense{"a": a})
	elapsed := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualError(t, err, `exec: node "mm" (MatMul): context deadline exceeded`)
	assert.Less(t, elapsed, 2*time.Second, "the product went on after the deadline")
}

// TestRunStopsBetweenNodes checks that a run whose context is done runs no
// node.
func TestRunStopsBetweenNodes(t *testing.T) {
	g, err := New(squareMatMul(t, 4096))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = g.RunContext(ctx, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.EqualError(t, err, `exec: stopped before node "a" (ConstantOfShape): context canceled`)
}

// TestMatMulStopsInsideKernel stops MatMul part-way, for float32 (the
// GEMM driver's parts) and for the integer loop (its rows), with a
// context that is done after a few checks.
func TestMatMulStopsInsideKernel(t *testing.T) {
	for _, c := range []struct {
		name string
		a    *value
	}{
		{"float32 batch", valueOf(dims(4, 256, 256), make([]float32, 4*256*256))},
		{"float32 shared weights", valueOf(dims(512, 512), make([]float32, 512*512))},
		{"int32", valueOf(dims(64, 64), make([]int32, 64*64))},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &node{name: "mm", op: "MatMul", spec: ops["MatMul"], out: []int{0}}
			b := c.a
			if c.a.rank() == 3 {
				b = c.a.withShape(dims(4, 256, 256))
			}
			_, err := matmulOp(newRunCtx(newCountdown(3), nil), n, []*value{c.a, b})
			require.ErrorIs(t, err, context.Canceled)
			out, err := matmulOp(newRunCtx(context.Background(), nil), n, []*value{c.a, b})
			require.NoError(t, err)
			assert.Equal(t, c.a.shape, out[0].shape)
		})
	}
}

// TestAttendBatchInChunks checks that computing heads in chunks of rows
// gives what one AttendBatch call gives, causal or not, with more queries
// than keys and fewer, with a mask, and that a done context stops it
// between chunks.
func TestAttendBatchInChunks(t *testing.T) {
	defer func(c int) { attendChunk = c }(attendChunk)
	attendChunk = 1 << 16 // a few blocks of 64 queries
	rng := rand.New(rand.NewPCG(5, 6))
	randFloats := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		return s
	}
	for _, c := range []struct {
		name        string
		tq, tk      int
		causal      bool
		mask, heads int
	}{
		{"square causal", 300, 300, true, 0, 2},
		{"more queries than keys, causal", 500, 130, true, 0, 1},
		{"fewer queries than keys, causal", 200, 333, true, 0, 3},
		{"not causal", 257, 190, false, 0, 2},
		{"masked", 200, 200, false, 1, 2},
		{"masked causal", 260, 300, true, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			const d, dv = 16, 24
			var whole, parts []kernels.Head
			for range c.heads {
				h := kernels.Head{
					Q: randFloats(c.tq * d), LdQ: d, K: randFloats(c.tk * d), LdK: d, V: randFloats(c.tk * dv), LdV: dv,
					Out: make([]float32, c.tq*dv), LdOut: dv, Tq: c.tq, Tk: c.tk, D: d, Dv: dv,
				}
				if c.mask > 0 {
					h.Mask, h.LdMask = randFloats(c.tq*c.tk), c.tk
					for i := range h.Mask {
						if rng.IntN(4) == 0 {
							h.Mask[i] = float32(math.Inf(-1))
						}
					}
				}
				whole = append(whole, h)
				h.Out = make([]float32, c.tq*dv)
				parts = append(parts, h)
			}
			opt := kernels.AttentionOptions{Scale: 0.25, Causal: c.causal}
			require.Greater(t, len(splitQueries(parts[0], c.causal)), 1, "the test must split the heads")
			kernels.AttendBatch(whole, opt)
			require.NoError(t, attendBatch(newRunCtx(context.Background(), nil), parts, opt))
			for i := range whole {
				for j, w := range whole[i].Out {
					g := parts[i].Out[j]
					require.Truef(t, w == g || math.Abs(float64(w-g)) <= 1e-6+1e-5*math.Abs(float64(w)),
						"head %d element %d: %v in chunks, %v whole", i, j, g, w)
				}
			}
			err := attendBatch(newRunCtx(newCountdown(1), nil), parts, opt)
			assert.True(t, errors.Is(err, context.Canceled), "%v", err)
		})
	}
}

// TestAttentionOpHonoursDeadline runs the Attention op with a context done
// after its first chunk.
func TestAttentionOpHonoursDeadline(t *testing.T) {
	defer func(c int) { attendChunk = c }(attendChunk)
	attendChunk = 1 << 16
	x := dense([]int{1, 2, 256, 16}, make([]float32, 2*256*16)...)
	g, err := New(graphSpec{
		opset:   23,
		nodes:   []*onnxpb.NodeProto{nodeP("attn", "Attention", []string{"q", "q", "q"}, []string{"y"})},
		inputs:  []*onnxpb.ValueInfoProto{info("q", onnxio.Float, 1, 2, 256, 16)},
		outputs: []*onnxpb.ValueInfoProto{info("y", onnxio.Float, 1, 2, 256, 16)},
	}.model())
	require.NoError(t, err)
	_, err = g.RunContext(newCountdown(2), map[string]*tensor.Dense{"q": x})
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, `node "attn" (Attention)`)
}

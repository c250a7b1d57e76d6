package exec

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// attentionWeights are the projections of causalAttention, stored (in,
// out) as PyTorch's exporter stores the transposed Linear weights it
// feeds to MatMul.
type attentionWeights struct {
	dIn, dOut, ctx int
	wq, wk, wv     []float32
}

func randomWeights(dIn, dOut, ctx int, seed uint64) attentionWeights {
	r := rand.New(rand.NewPCG(seed, 1))
	fill := func() []float32 {
		w := make([]float32, dIn*dOut)
		for i := range w {
			w[i] = float32(r.NormFloat64()) / float32(math.Sqrt(float64(dIn)))
		}
		return w
	}
	return attentionWeights{dIn: dIn, dOut: dOut, ctx: ctx, wq: fill(), wk: fill(), wv: fill()}
}

// causalAttention is the graph torch.onnx.export writes (opset 17, dynamic
// batch and sequence axes) for the seed notebooks' CausalAttention: Q, K, V
// projections, scores Q·Kᵀ, the (ctx, ctx) triu mask buffer sliced to the
// sequence length with Shape/Gather/Unsqueeze/Concat/Slice, masked_fill as
// Where, division by √d_out, Softmax, and the product with V.
func causalAttention(t testing.TB, w attentionWeights) *onnxpb.ModelProto {
	mask := make([]float32, w.ctx*w.ctx)
	for i := range w.ctx {
		for j := i + 1; j < w.ctx; j++ {
			mask[i*w.ctx+j] = 1
		}
	}
	return graphSpec{
		opset: 17,
		nodes: []*onnxpb.NodeProto{
			nodeP("/W_query/MatMul", "MatMul", []string{"x", "onnx::MatMul_20"}, []string{"q"}),
			nodeP("/W_key/MatMul", "MatMul", []string{"x", "onnx::MatMul_21"}, []string{"k"}),
			nodeP("/W_value/MatMul", "MatMul", []string{"x", "onnx::MatMul_22"}, []string{"v"}),
			nodeP("/Transpose", "Transpose", []string{"k"}, []string{"kt"}, intsAttr("perm", 0, 2, 1)),
			nodeP("/MatMul", "MatMul", []string{"q", "kt"}, []string{"scores"}),
			nodeP("/Shape", "Shape", []string{"x"}, []string{"shape"}),
			nodeP("/Gather", "Gather", []string{"shape", "one"}, []string{"seq"}, intAttr("axis", 0)),
			nodeP("/Unsqueeze", "Unsqueeze", []string{"seq", "zero_axis"}, []string{"seq1"}),
			nodeP("/Concat", "Concat", []string{"seq1", "seq1"}, []string{"ends"}, intAttr("axis", 0)),
			nodeP("/Cast", "Cast", []string{"mask"}, []string{"mask_bool"}, intAttr("to", int64(onnxio.Bool))),
			nodeP("/Slice", "Slice", []string{"mask_bool", "starts", "ends", "axes"}, []string{"mask_t"}),
			nodeP("/Where", "Where", []string{"mask_t", "neg_inf", "scores"}, []string{"masked"}),
			nodeP("/Div", "Div", []string{"masked", "sqrt_d"}, []string{"scaled"}),
			nodeP("/Softmax", "Softmax", []string{"scaled"}, []string{"weights"}, intAttr("axis", -1)),
			nodeP("/MatMul_1", "MatMul", []string{"weights", "v"}, []string{"context"}),
		},
		inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float, "batch", "seq", w.dIn)},
		outputs: []*onnxpb.ValueInfoProto{info("context", onnxio.Float, "batch", "seq", w.dOut)},
		inits: []*onnxpb.TensorProto{
			initializer(t, "onnx::MatMul_20", dense([]int{w.dIn, w.dOut}, w.wq...)),
			initializer(t, "onnx::MatMul_21", dense([]int{w.dIn, w.dOut}, w.wk...)),
			initializer(t, "onnx::MatMul_22", dense([]int{w.dIn, w.dOut}, w.wv...)),
			initializer(t, "mask", dense([]int{w.ctx, w.ctx}, mask...)),
			initializer(t, "one", tensor.New(tensor.FromScalar(int64(1)))),
			initializer(t, "zero_axis", dense([]int{1}, int64(0))),
			initializer(t, "starts", dense([]int{2}, int64(0), 0)),
			initializer(t, "axes", dense([]int{2}, int64(0), 1)),
			initializer(t, "neg_inf", tensor.New(tensor.FromScalar(float32(math.Inf(-1))))),
			initializer(t, "sqrt_d", tensor.New(tensor.FromScalar(float32(math.Sqrt(float64(w.dOut)))))),
		},
	}.model()
}

// attentionRef computes causal attention with plain loops and
// kernels.Attend, independently of the graph.
func attentionRef(w attentionWeights, x []float32, batch, seq int) []float32 {
	project := func(m []float32) []float32 {
		out := make([]float32, batch*seq*w.dOut)
		for r := range batch * seq {
			for j := range w.dOut {
				var s float64
				for k := range w.dIn {
					s += float64(x[r*w.dIn+k]) * float64(m[k*w.dOut+j])
				}
				out[r*w.dOut+j] = float32(s)
			}
		}
		return out
	}
	q, k, v := project(w.wq), project(w.wk), project(w.wv)
	out := make([]float32, batch*seq*w.dOut)
	for b := range batch {
		off := b * seq * w.dOut
		kernels.Attend(kernels.Head{
			Q: q[off:], LdQ: w.dOut, K: k[off:], LdK: w.dOut, V: v[off:], LdV: w.dOut,
			Out: out[off:], LdOut: w.dOut, Tq: seq, Tk: seq, D: w.dOut, Dv: w.dOut,
		}, kernels.AttentionOptions{Scale: float32(1 / math.Sqrt(float64(w.dOut))), Causal: true})
	}
	return out
}

func randomInput(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 2))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func TestCausalAttentionGraph(t *testing.T) {
	w := randomWeights(8, 4, 6, 1)
	g, err := New(causalAttention(t, w))
	require.NoError(t, err)
	for _, shape := range [][2]int{{1, 6}, {3, 4}, {2, 1}} {
		batch, seq := shape[0], shape[1]
		x := randomInput(batch*seq*w.dIn, uint64(seq))
		out, err := g.Run(map[string]*tensor.Dense{"x": dense([]int{batch, seq, w.dIn}, x...)})
		require.NoError(t, err)
		require.Equal(t, tensor.Shape{batch, seq, w.dOut}, out["context"].Shape())
		want := attentionRef(w, x, batch, seq)
		for i, v := range floats(t, out["context"]) {
			assert.InDelta(t, want[i], v, 1e-6+1e-5*math.Abs(float64(want[i])), "batch %d seq %d: context[%d]", batch, seq, i)
		}
	}
	_, err = g.Run(map[string]*tensor.Dense{"x": dense([]int{1, 7, w.dIn}, randomInput(7*w.dIn, 7)...)})
	assert.ErrorContains(t, err, `node "/Where" (Where): shapes (6, 6), () and (1, 7, 7) do not broadcast`,
		"a sequence longer than the mask buffer")
}

func BenchmarkMatMul(b *testing.B) {
	cases := []struct {
		name string
		a, w []int
	}{
		{"linear_8x128x256_by_256x256", []int{8, 128, 256}, []int{256, 256}},
		{"heads_2x8x128x32_by_2x8x32x128", []int{2, 8, 128, 32}, []int{2, 8, 32, 128}},
	}
	for _, c := range cases {
		x := f32(c.a, randomInput(numel(c.a), 1)...)
		y := f32(c.w, randomInput(numel(c.w), 2)...)
		n := &node{op: "MatMul", opset: 17, spec: ops["MatMul"], out: []int{0}}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := matmulOp(testRun, n, []*value{x, y}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCausalAttentionGraph(b *testing.B) {
	w := randomWeights(64, 64, 128, 1)
	g, err := New(causalAttention(b, w))
	if err != nil {
		b.Fatal(err)
	}
	in := map[string]*tensor.Dense{"x": dense([]int{4, 128, 64}, randomInput(4*128*64, 3)...)}
	for b.Loop() {
		if _, err := g.Run(in); err != nil {
			b.Fatal(err)
		}
	}
}

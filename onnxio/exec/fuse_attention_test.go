package exec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// TestAttentionFusionOnPyTorchFixtures checks that the attention chains of
// the PyTorch exports are fused, that the runs take the fused kernel where
// the mask is causal or absent, and that the results equal the
// node-by-node run's (TestPyTorchFixtures compares them with PyTorch's).
func TestAttentionFusionOnPyTorchFixtures(t *testing.T) {
	type expect struct {
		nodes int  // fused nodes
		fast  bool // runs take the fused kernel, not the fallback
	}
	fused := map[string]expect{ // by fixture family
		"causal_attention": {1, true}, "multihead": {1, true}, "multihead_wrapper": {2, true},
		"transformer_block": {1, true}, "self_attention_matrix": {1, true}, "positional_self_attention": {1, true},
		// nn.MultiheadAttention adds a key-padding mask: the kernel adds it.
		"torch_mha_cross": {1, true},
		// No softmax chain; the attention weights are a graph output.
		"causal_average": {0, false}, "torch_mha_causal_self": {0, false},
	}
	models, _ := filepath.Glob(filepath.Join(pytorchFixtures, "*", "model.onnx"))
	if len(models) == 0 {
		t.Skipf("no PyTorch fixtures under %s", pytorchFixtures)
	}
	seen := map[string]bool{}
	for _, path := range models {
		dir := filepath.Dir(path)
		name := filepath.Base(dir)
		family := name[:strings.Index(name, "_opset")]
		want, ok := fused[family]
		if !ok {
			continue
		}
		seen[family] = true
		t.Run(name, func(t *testing.T) {
			m, err := onnxio.ReadModel(path)
			require.NoError(t, err)
			g, err := New(m)
			require.NoError(t, err)
			nodes, _, _ := g.attentionRuns()
			require.Equal(t, want.nodes, nodes, "fused attention nodes")

			plain, err := newGraph(m, false)
			require.NoError(t, err)
			sets, err := onnxio.DataSetDirs(dir)
			require.NoError(t, err)
			require.NotEmpty(t, sets)
			for _, set := range sets {
				ds, err := onnxio.ReadDataSet(set)
				require.NoError(t, err)
				got, err := runDataSet(g, ds)
				require.NoError(t, err)
				ref, err := runDataSet(plain, ds)
				require.NoError(t, err)
				for k := range got {
					require.NoError(t, compareValues(got[k], ref[k], tolerance{rtol: 1e-5, atol: 1e-6}), "output %d against the unfused run", k)
				}
			}
			_, fast, slow := g.attentionRuns()
			runs := int64(want.nodes * len(sets))
			if want.fast {
				require.Equal(t, [2]int64{runs, 0}, [2]int64{fast, slow}, "runs on the fused kernel and on the fallback")
			} else {
				require.Equal(t, [2]int64{0, runs}, [2]int64{fast, slow}, "runs on the fused kernel and on the fallback")
			}
		})
	}
	for family := range fused {
		require.True(t, seen[family], "no fixture of %s", family)
	}
}

// attentionCase builds a rank-4 attention graph: q, k, v inputs of shape
// (b, h, t, d); S = q·kᵀ (kᵀ by Transpose); then the steps; Softmax; ·v.
type attentionCase struct {
	name  string
	steps func(s *attnGraph) // appends the nodes between "scores" and "probs"
	// scoresOut also declares the scores as a graph output.
	scoresOut bool
	// kt feeds k to the product as it is: the input is Kᵀ, (b, h, d, t).
	kt   bool
	axis int64
	// want is the fused node count and which path the run takes.
	nodes    int
	fastPath bool
}

// attnGraph accumulates a test graph.
type attnGraph struct {
	t     testing.TB
	nodes []*onnxpb.NodeProto
	inits []*onnxpb.TensorProto
	cur   string // name of the scores so far
	n     int
}

// next names a new intermediate.
func (g *attnGraph) next() string {
	g.n++
	return "s" + string(rune('0'+g.n))
}

// init adds an initializer.
func (g *attnGraph) init(name string, d *tensor.Dense) string {
	g.inits = append(g.inits, initializer(g.t, name, d))
	return name
}

// op appends node op(ins with "" replaced by the scores), making it the scores.
func (g *attnGraph) op(op string, ins ...string) {
	for i, in := range ins {
		if in == "" {
			ins[i] = g.cur
		}
	}
	out := g.next()
	g.nodes = append(g.nodes, nodeP(out, op, ins, []string{out}))
	g.cur = out
}

const tb, th, tt, td = 2, 3, 5, 4

// causalBool returns a (t, t) bool mask, true above the diagonal (hidden).
func causalBool(t int, flip func(i, j int) bool) *tensor.Dense {
	m := make([]bool, t*t)
	for i := range t {
		for j := range t {
			m[i*t+j] = j > i
			if flip != nil && flip(i, j) {
				m[i*t+j] = !m[i*t+j]
			}
		}
	}
	return dense([]int{t, t}, m...)
}

// causalFloat returns a (1, 1, t, t) additive mask: 0, or hide above the diagonal.
func causalFloat(t int, hide float32) *tensor.Dense {
	m := make([]float32, t*t)
	for i := range t {
		for j := range t {
			if j > i {
				m[i*t+j] = hide
			}
		}
	}
	return dense([]int{1, 1, t, t}, m...)
}

// paddingMask returns a (len(lengths), 1, 1, tt) additive mask, as BERT
// builds from its attention_mask: 0 on each sequence's first lengths[b]
// keys, hide on the rest.
func paddingMask(lengths []int, hide float32) *tensor.Dense {
	m := make([]float32, len(lengths)*tt)
	for b, n := range lengths {
		for j := n; j < tt; j++ {
			m[b*tt+j] = hide
		}
	}
	return dense([]int{len(lengths), 1, 1, tt}, m...)
}

func scalarF(x float32) *tensor.Dense {
	return tensor.New(tensor.WithShape(), tensor.WithBacking([]float32{x}))
}

// model builds the case's graph for inputs of the given (b, h, t, d) shape.
func (c attentionCase) model(t testing.TB, shape ...any) *onnxpb.ModelProto {
	g := &attnGraph{t: t, cur: "scores"}
	kShape := shape
	if c.kt {
		kShape = []any{shape[0], shape[1], shape[3], shape[2]}
		g.nodes = append(g.nodes, nodeP("scores", "MatMul", []string{"q", "k"}, []string{"scores"}))
	} else {
		g.nodes = append(g.nodes,
			nodeP("kt", "Transpose", []string{"k"}, []string{"kt"}, intsAttr("perm", 0, 1, 3, 2)),
			nodeP("scores", "MatMul", []string{"q", "kt"}, []string{"scores"}))
	}
	c.steps(g)
	axis := c.axis
	if axis == 0 {
		axis = -1
	}
	g.nodes = append(g.nodes,
		nodeP("probs", "Softmax", []string{g.cur}, []string{"probs"}, intAttr("axis", axis)),
		nodeP("y", "MatMul", []string{"probs", "v"}, []string{"y"}))
	spec := graphSpec{
		nodes:   g.nodes,
		inits:   g.inits,
		inputs:  []*onnxpb.ValueInfoProto{info("q", onnxio.Float, shape...), info("k", onnxio.Float, kShape...), info("v", onnxio.Float, shape...)},
		outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
	}
	if c.scoresOut {
		spec.outputs = append(spec.outputs, untyped("scores", onnxio.Float))
	}
	return spec.model()
}

// TestAttentionFusion checks which chains are fused, which runs take the
// fused kernel, and that every result equals the node-by-node run's.
func TestAttentionFusion(t *testing.T) {
	inf := float32(math.Inf(-1))
	cases := []attentionCase{
		{name: "causal Where then Div", nodes: 1, fastPath: true, steps: func(g *attnGraph) {
			g.op("Where", g.init("mask", causalBool(tt, nil)), g.init("fill", scalarF(inf)), "")
			g.op("Div", "", g.init("c", scalarF(2)))
		}},
		{name: "Mul then causal Add", nodes: 1, fastPath: true, steps: func(g *attnGraph) {
			g.op("Mul", g.init("c", scalarF(0.5)), "")
			g.op("Add", "", g.init("mask", causalFloat(tt, inf)))
		}},
		{name: "Where keeping where true", nodes: 1, fastPath: true, steps: func(g *attnGraph) {
			keep := causalBool(tt, func(int, int) bool { return true }) // true on and below the diagonal
			g.op("Where", g.init("mask", keep), "", g.init("fill", scalarF(inf)))
		}},
		{name: "mask hiding nothing", nodes: 1, fastPath: true, steps: func(g *attnGraph) {
			g.op("Where", g.init("mask", causalBool(tt, func(i, j int) bool { return j > i })), g.init("fill", scalarF(inf)), "")
		}},
		{name: "no steps", nodes: 1, fastPath: true, steps: func(*attnGraph) {}},
		{name: "K given transposed", kt: true, nodes: 1, fastPath: true, steps: func(g *attnGraph) {
			g.op("Where", g.init("mask", causalBool(tt, nil)), g.init("fill", scalarF(inf)), "")
		}},
		{name: "arbitrary bool mask falls back", nodes: 1, steps: func(g *attnGraph) {
			g.op("Where", g.init("mask", causalBool(tt, func(i, j int) bool { return i == 3 && j == 1 })), g.init("fill", scalarF(inf)), "")
		}},
		{name: "finite additive mask is added by the kernel", nodes: 1, fastPath: true, steps: func(g *attnGraph) {
			g.op("Add", "", g.init("mask", causalFloat(tt, -1e4)))
		}},
		{name: "BERT's padding mask", nodes: 1, fastPath: true, steps: func(g *attnGraph) {
			g.op("Div", "", g.init("c", scalarF(2)))
			g.op("Add", "", g.init("mask", paddingMask([]int{tt, 2}, -math.MaxFloat32)))
		}},
		{name: "padding mask of −inf, a sequence all hidden", nodes: 1, fastPath: true, steps: func(g *attnGraph) {
			g.op("Add", "", g.init("mask", paddingMask([]int{3, 0}, inf)))
		}},
		{name: "padding mask before the scale falls back", nodes: 1, steps: func(g *attnGraph) {
			g.op("Add", "", g.init("mask", paddingMask([]int{tt, 2}, -math.MaxFloat32)))
			g.op("Div", "", g.init("c", scalarF(2)))
		}},
		{name: "mask along the queries falls back", nodes: 1, steps: func(g *attnGraph) {
			m := paddingMask([]int{tt, 2}, -1e4)
			m.Reshape(tb, 1, tt, 1)
			g.op("Add", "", g.init("mask", m))
		}},
		{name: "finite fill falls back", nodes: 1, steps: func(g *attnGraph) {
			g.op("Where", g.init("mask", causalBool(tt, nil)), g.init("fill", scalarF(-1e4)), "")
		}},
		{name: "negative scale falls back", nodes: 1, steps: func(g *attnGraph) {
			g.op("Div", "", g.init("c", scalarF(-2)))
		}},
		{name: "per-element scale falls back", nodes: 1, steps: func(g *attnGraph) {
			g.op("Mul", "", g.init("c", dense([]int{tt}, float32(1), 2, 3, 4, 5)))
		}},
		{name: "softmax over another axis falls back", nodes: 1, axis: 2, steps: func(*attnGraph) {}},
		{name: "scores read elsewhere", scoresOut: true, nodes: 0, steps: func(g *attnGraph) {
			g.op("Div", "", g.init("c", scalarF(2)))
		}},
		{name: "two scales are not fused", nodes: 0, steps: func(g *attnGraph) {
			g.op("Div", "", g.init("c", scalarF(2)))
			g.op("Mul", "", g.init("c2", scalarF(3)))
		}},
		{name: "Div of a constant by the scores is not a scale", nodes: 0, steps: func(g *attnGraph) {
			g.op("Div", g.init("c", scalarF(2)), "")
		}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	in := map[string]*tensor.Dense{}
	for _, name := range []string{"q", "k", "v"} {
		data := make([]float32, tb*th*tt*td)
		for i := range data {
			data[i] = float32(rng.NormFloat64())
		}
		in[name] = dense([]int{tb, th, tt, td}, data...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.model(t, tb, th, tt, td)
			in := in
			if c.kt {
				in = map[string]*tensor.Dense{"q": in["q"], "v": in["v"], "k": randDense(rng, tb, th, td, tt)}
			}
			g, err := New(m)
			require.NoError(t, err)
			plain, err := newGraph(m, false)
			require.NoError(t, err)
			got, err := g.Run(in)
			require.NoError(t, err)
			want, err := plain.Run(in)
			require.NoError(t, err)
			for name, w := range want {
				gv, err := fromDense(got[name])
				require.NoError(t, err)
				wv, err := fromDense(w)
				require.NoError(t, err)
				require.NoError(t, compareValues(gv, wv, tolerance{rtol: 1e-5, atol: 1e-6}), name)
			}
			nodes, fast, slow := g.attentionRuns()
			require.Equal(t, c.nodes, nodes, "fused nodes")
			if c.nodes > 0 {
				require.Equal(t, c.fastPath, fast == 1, "fused kernel taken")
				require.Equal(t, !c.fastPath, slow == 1, "fallback taken")
			}
		})
	}
}

// BenchmarkAttentionFusion times issue 5's attention core (B=4, 12 heads,
// T=512, dₖ=64, causal) as the fused node and node by node.
func BenchmarkAttentionFusion(b *testing.B) {
	const batch, heads, t, d = 4, 12, 512, 64
	c := attentionCase{steps: func(g *attnGraph) {
		g.op("Where", g.init("mask", causalBool(t, nil)), g.init("fill", scalarF(float32(math.Inf(-1)))), "")
		g.op("Div", "", g.init("c", scalarF(8)))
	}}
	m := c.model(b, batch, heads, t, d)
	rng := rand.New(rand.NewPCG(5, 6))
	in := map[string]*tensor.Dense{}
	for _, name := range []string{"q", "k", "v"} {
		in[name] = randDense(rng, batch, heads, t, d)
	}
	for _, fuse := range []bool{true, false} {
		name := map[bool]string{true: "fused", false: "nodes"}[fuse]
		b.Run(name, func(b *testing.B) {
			g, err := newGraph(m, fuse)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Run(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAttentionFusionSizes compares the fused causal attention with the
// node-by-node run at sizes across the kernel's tiles, a single query and
// odd head sizes.
func TestAttentionFusionSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range [][4]int{{1, 2, 70, 16}, {3, 1, 1, 8}, {2, 3, 33, 7}, {1, 1, 257, 64}} {
		b, h, n, d := s[0], s[1], s[2], s[3]
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			c := attentionCase{steps: func(g *attnGraph) {
				g.op("Where", g.init("mask", causalBool(n, nil)), g.init("fill", scalarF(float32(math.Inf(-1)))), "")
				g.op("Div", "", g.init("c", scalarF(float32(math.Sqrt(float64(d))))))
			}}
			m := c.model(t, b, h, n, d)
			in := map[string]*tensor.Dense{"q": randDense(rng, b, h, n, d), "k": randDense(rng, b, h, n, d), "v": randDense(rng, b, h, n, d)}
			g, err := New(m)
			require.NoError(t, err)
			plain, err := newGraph(m, false)
			require.NoError(t, err)
			got, err := g.Run(in)
			require.NoError(t, err)
			want, err := plain.Run(in)
			require.NoError(t, err)
			gv, err := fromDense(got["y"])
			require.NoError(t, err)
			wv, err := fromDense(want["y"])
			require.NoError(t, err)
			require.NoError(t, compareValues(gv, wv, tolerance{rtol: 1e-5, atol: 1e-6}))
			_, fast, slow := g.attentionRuns()
			require.Equal(t, [2]int64{1, 0}, [2]int64{fast, slow})
		})
	}
}

// TestAttentionFusionMaskPatterns checks that a planned run classifies a
// mask the plan fixes (a constant) once, and a mask given as an input on
// every run: a causal mask input on the runs that record and follow the
// plan, then a mask hiding one more score, which must take the fallback
// and give the node-by-node result.
func TestAttentionFusionMaskPatterns(t *testing.T) {
	inf := float32(math.Inf(-1))
	rng := rand.New(rand.NewPCG(7, 8))
	in := map[string]*tensor.Dense{}
	for _, name := range []string{"q", "k", "v"} {
		in[name] = randDense(rng, tb, th, tt, td)
	}
	build := func(maskInput bool) *onnxpb.ModelProto {
		g := &attnGraph{t: t, cur: "scores"}
		g.nodes = append(g.nodes,
			nodeP("kt", "Transpose", []string{"k"}, []string{"kt"}, intsAttr("perm", 0, 1, 3, 2)),
			nodeP("scores", "MatMul", []string{"q", "kt"}, []string{"scores"}))
		mask := "mask"
		if !maskInput {
			mask = g.init("mask", causalBool(tt, nil))
		}
		g.op("Where", mask, g.init("fill", scalarF(inf)), "")
		g.nodes = append(g.nodes,
			nodeP("probs", "Softmax", []string{g.cur}, []string{"probs"}, intAttr("axis", -1)),
			nodeP("y", "MatMul", []string{"probs", "v"}, []string{"y"}))
		inputs := []*onnxpb.ValueInfoProto{info("q", onnxio.Float, tb, th, tt, td), info("k", onnxio.Float, tb, th, tt, td), info("v", onnxio.Float, tb, th, tt, td)}
		if maskInput {
			inputs = append(inputs, info("mask", onnxio.Bool, tt, tt))
		}
		return graphSpec{nodes: g.nodes, inits: g.inits, inputs: inputs, outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)}}.model()
	}
	check := func(t *testing.T, g, plain *Graph, in map[string]*tensor.Dense) {
		t.Helper()
		got, err := g.Run(in)
		require.NoError(t, err)
		want, err := plain.Run(in)
		require.NoError(t, err)
		gv, err := fromDense(got["y"])
		require.NoError(t, err)
		wv, err := fromDense(want["y"])
		require.NoError(t, err)
		require.NoError(t, compareValues(gv, wv, tolerance{rtol: 1e-5, atol: 1e-6}))
	}
	patterns := func(g *Graph) int {
		g.plans.mu.Lock()
		defer g.plans.mu.Unlock()
		n := 0
		for _, p := range g.plans.list {
			n += len(p.patterns)
		}
		return n
	}

	t.Run("constant mask", func(t *testing.T) {
		m := build(false)
		g, err := New(m)
		require.NoError(t, err)
		plain, err := newGraph(m, false)
		require.NoError(t, err)
		for range 4 { // the second run records the plan, the third and fourth follow it
			check(t, g, plain, in)
		}
		require.Equal(t, 1, patterns(g), "patterns the plan keeps")
		_, fast, slow := g.attentionRuns()
		require.Equal(t, [2]int64{4, 0}, [2]int64{fast, slow})
	})
	t.Run("mask input", func(t *testing.T) {
		m := build(true)
		g, err := New(m)
		require.NoError(t, err)
		plain, err := newGraph(m, false)
		require.NoError(t, err)
		causal := map[string]*tensor.Dense{"q": in["q"], "k": in["k"], "v": in["v"], "mask": causalBool(tt, nil)}
		for range 4 {
			check(t, g, plain, causal)
		}
		other := map[string]*tensor.Dense{"q": in["q"], "k": in["k"], "v": in["v"],
			"mask": causalBool(tt, func(i, j int) bool { return j > i || i == 3 && j == 1 })}
		check(t, g, plain, other)
		require.Zero(t, patterns(g), "patterns the plan keeps")
		_, fast, slow := g.attentionRuns()
		require.Equal(t, [2]int64{4, 1}, [2]int64{fast, slow})
	})
}

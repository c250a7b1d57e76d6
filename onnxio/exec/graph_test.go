package exec

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// linearSoftmax is y = Softmax(x·W + b) with x of shape (batch, 3).
func linearSoftmax(t testing.TB) graphSpec {
	return graphSpec{
		opset: 13,
		nodes: []*onnxpb.NodeProto{
			nodeP("/lin/MatMul", "MatMul", []string{"x", "W"}, []string{"xw"}),
			nodeP("/lin/Add", "Add", []string{"xw", "b"}, []string{"logits"}),
			nodeP("/Softmax", "Softmax", []string{"logits"}, []string{"y"}, intAttr("axis", -1)),
		},
		inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float, "batch", 3)},
		outputs: []*onnxpb.ValueInfoProto{info("y", onnxio.Float, "batch", 4)},
		inits: []*onnxpb.TensorProto{
			initializer(t, "W", dense([]int{3, 4}, float32(0.1), 0.2, 0.3, 0.4, -0.5, 0.6, -0.7, 0.8, 0.9, -1.0, 1.1, -1.2)),
			initializer(t, "b", dense([]int{4}, float32(0.01), -0.02, 0.03, -0.04)),
		},
	}
}

// linearSoftmaxRef computes linearSoftmax in float64.
func linearSoftmaxRef(x []float32) []float64 {
	w := []float64{0.1, 0.2, 0.3, 0.4, -0.5, 0.6, -0.7, 0.8, 0.9, -1.0, 1.1, -1.2}
	b := []float64{0.01, -0.02, 0.03, -0.04}
	var y []float64
	for r := 0; r < len(x)/3; r++ {
		row := make([]float64, 4)
		var sum float64
		for j := range row {
			row[j] = b[j]
			for k := range 3 {
				row[j] += float64(x[r*3+k]) * w[k*4+j]
			}
			row[j] = math.Exp(row[j])
			sum += row[j]
		}
		for j := range row {
			y = append(y, row[j]/sum)
		}
	}
	return y
}

func TestRunLinearSoftmax(t *testing.T) {
	g, err := New(linearSoftmax(t).model())
	require.NoError(t, err)
	assert.Equal(t, 13, g.Opset())
	assert.Equal(t, "x float32 [batch 3]", g.Inputs()[0].String())
	assert.Equal(t, []TensorInfo{{Name: "y", DType: Float32, Shape: []onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.FixedDim(4)}}}, g.Outputs())

	x := []float32{1, 2, 3, -1, 0.5, 0}
	out, err := g.Run(map[string]*tensor.Dense{"x": dense([]int{2, 3}, x...)})
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{2, 4}, out["y"].Shape())
	want := linearSoftmaxRef(x)
	for i, v := range floats(t, out["y"]) {
		assert.InDelta(t, want[i], v, 1e-6+1e-5*want[i], "y[%d]", i)
	}
}

func TestNewErrors(t *testing.T) {
	x := []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 2, 3)}
	y := []*onnxpb.ValueInfoProto{info("y", onnxio.Float, 2, 3)}
	unaryGraph := func(op string, opset int64, attrs ...*onnxpb.AttributeProto) graphSpec {
		return graphSpec{opset: opset, inputs: x, outputs: y,
			nodes: []*onnxpb.NodeProto{nodeP("n", op, []string{"x"}, []string{"y"}, attrs...)}}
	}
	foreign := unaryGraph("FusedGelu", 17)
	foreign.nodes[0].Domain = new("com.microsoft")
	noOpset := unaryGraph("Neg", 17).model()
	noOpset.OpsetImport = nil
	complexIn := unaryGraph("Neg", 17)
	complexIn.inputs = []*onnxpb.ValueInfoProto{info("x", onnxpb.TensorProto_COMPLEX64, 2)}

	cases := []struct {
		name string
		m    *onnxpb.ModelProto
		err  string
	}{
		{"nil model", nil, "the model has no graph"},
		{"no default opset", noOpset, "imports no default-domain (ai.onnx) opset"},
		{"opset too new", unaryGraph("Neg", 30).model(), "default-domain opset 30 is not supported (1 to 28)"},
		{"unsupported op", graphSpec{inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{
			nodeP("/attn/MatMul_3", "Foo", []string{"x"}, []string{"y"})}}.model(),
			`exec: node "/attn/MatMul_3": op "Foo" (opset 17) is not supported; supported: Abs, Acos, Acosh, Add, AffineGrid, And,`},
		{"all unsupported ops are listed", graphSpec{inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{
			nodeP("a", "Foo", []string{"x"}, []string{"t"}), nodeP("b", "Bar", []string{"t"}, []string{"y"})}}.model(),
			`node "a": op "Foo" (opset 17) is not supported; node "b": op "Bar" (opset 17) is not supported; supported: Abs, Acos,`},
		{"op newer than the opset", unaryGraph("Trilu", 13).model(), `node "n": op "Trilu" (opset 13) is not supported: it is implemented from opset 14 on`},
		{"legacy op version", graphSpec{opset: 6, inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{
			nodeP("add", "Add", []string{"x", "x"}, []string{"y"})}}.model(), `op "Add" (opset 6) is not supported: it is implemented from opset 7 on`},
		{"foreign domain", foreign.model(), `node "n": op "FusedGelu" is in domain "com.microsoft"; only the default ONNX domain (ai.onnx) is supported`},
		{"attribute that became an input", unaryGraph("Unsqueeze", 13, intsAttr("axes", 0)).model(),
			`op "Unsqueeze" has attribute "axes", which is an input from opset 13 on`},
		{"attribute of the wrong kind", unaryGraph("Softmax", 17, floatAttr("axis", 1)).model(), `attribute "axis" must be INT, is FLOAT`},
		{"too few inputs", unaryGraph("Add", 17).model(), `op "Add" takes 2 inputs, the node has 1`},
		{"empty required input", graphSpec{inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{
			nodeP("g", "Gemm", []string{"", "x"}, []string{"y"})}}.model(), `op "Gemm" needs input 0, which is empty`},
		{"missing input", graphSpec{inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{
			nodeP("/blk/Add", "Add", []string{"x", "ghost"}, []string{"y"})}}.model(),
			`node "/blk/Add" (Add): input "ghost" is not produced by any node, nor a graph input or initializer`},
		{"cycle", graphSpec{inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{
			nodeP("a", "Add", []string{"x", "c"}, []string{"b"}),
			nodeP("n", "Neg", []string{"b"}, []string{"c"}),
			nodeP("out", "Identity", []string{"c"}, []string{"y"})}}.model(),
			`the graph has a cycle: nodes "a" (Add), "n" (Neg), "out" (Identity) wait on each other`},
		{"output nobody produces", graphSpec{inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{
			nodeP("n", "Neg", []string{"x"}, []string{"z"})}}.model(), `output "y" is not produced by any node`},
		{"a node writes a graph input", graphSpec{inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{
			nodeP("a", "Neg", []string{"x"}, []string{"x"}), nodeP("b", "Abs", []string{"x"}, []string{"y"})}}.model(),
			`node "a": op "Neg" writes "x", which is already a graph input or initializer`},
		{"complex64 input", complexIn.model(), `input "x": dtype complex64 is not supported`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.m)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
		})
	}
}

func TestRunBadInput(t *testing.T) {
	two := graphSpec{
		nodes: []*onnxpb.NodeProto{nodeP("/blk/Add_1", "Add", []string{"x", "y"}, []string{"z"})},
		inputs: []*onnxpb.ValueInfoProto{
			info("x", onnxio.Float, "batch", "seq", 3), info("y", onnxio.Float, "batch", "seq", 3)},
		outputs: []*onnxpb.ValueInfoProto{info("z", onnxio.Float, "batch", "seq", 3)},
	}
	loose := graphSpec{
		nodes:   []*onnxpb.NodeProto{nodeP("/blk/Add_1", "Add", []string{"x", "y"}, []string{"z"})},
		inputs:  []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float), untyped("y", onnxio.Float)},
		outputs: []*onnxpb.ValueInfoProto{untyped("z", onnxio.Float)},
	}
	reshape := graphSpec{
		nodes:   []*onnxpb.NodeProto{nodeP("reshape", "Reshape", []string{"x", "shape"}, []string{"z"})},
		inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 2, 3)},
		outputs: []*onnxpb.ValueInfoProto{untyped("z", onnxio.Float)},
		inits:   []*onnxpb.TensorProto{initializer(t, "shape", dense([]int{2}, int64(4), -1))},
	}
	gather := graphSpec{
		nodes:   []*onnxpb.NodeProto{nodeP("gather", "Gather", []string{"table", "ids"}, []string{"z"})},
		inputs:  []*onnxpb.ValueInfoProto{info("ids", onnxio.Int64, "seq")},
		outputs: []*onnxpb.ValueInfoProto{untyped("z", onnxio.Float)},
		inits:   []*onnxpb.TensorProto{initializer(t, "table", dense([]int{3, 2}, float32(1), 2, 3, 4, 5, 6))},
	}
	f := func(shape ...int) *tensor.Dense {
		return tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(shape...))
	}
	cases := []struct {
		name string
		g    graphSpec
		in   map[string]*tensor.Dense
		err  string
	}{
		{"missing input", two, map[string]*tensor.Dense{"x": f(1, 2, 3)}, `exec: missing input "y" (y float32 [batch seq 3])`},
		{"unknown input", two, map[string]*tensor.Dense{"x": f(1, 2, 3), "y": f(1, 2, 3), "w": f(1)},
			`exec: unknown input "w"; the graph's inputs are "x", "y"`},
		{"dtype mismatch", two, map[string]*tensor.Dense{"x": f(1, 2, 3), "y": dense([]int{1, 2, 3}, int64(1), 2, 3, 4, 5, 6)},
			`exec: input "y": dtype int64, the graph declares y float32 [batch seq 3]`},
		{"rank mismatch", two, map[string]*tensor.Dense{"x": f(2, 3), "y": f(1, 2, 3)},
			`exec: input "x": shape (2, 3) has rank 2, the graph declares x float32 [batch seq 3] (rank 3)`},
		{"fixed dimension mismatch", two, map[string]*tensor.Dense{"x": f(1, 2, 4), "y": f(1, 2, 3)},
			`exec: input "x": shape (1, 2, 4): dimension 2 is 4, the graph declares x float32 [batch seq 3]`},
		{"symbolic dimension disagrees", two, map[string]*tensor.Dense{"x": f(1, 2, 3), "y": f(1, 5, 3)},
			`exec: input "y": shape (1, 5, 3): dimension 1 (seq) is 5, but seq is 2 in input "x"`},
		{"nil tensor", two, map[string]*tensor.Dense{"x": nil, "y": f(1, 2, 3)}, `exec: input "x": array: nil *tensor.Dense`},
		{"unsupported Go element type", two, map[string]*tensor.Dense{"x": dense([]int{1}, 1), "y": f(1, 2, 3)},
			`exec: input "x": array: dtype int is not supported`},
		{"shapes do not broadcast", loose, map[string]*tensor.Dense{"x": f(2, 3), "y": f(4)},
			`exec: node "/blk/Add_1" (Add): shapes (2, 3) and (4,) do not broadcast`},
		{"reshape impossible", reshape, map[string]*tensor.Dense{"x": f(2, 3)},
			`exec: node "reshape" (Reshape): cannot reshape (2, 3) (6 elements) to [4 -1]`},
		{"gather index out of range", gather, map[string]*tensor.Dense{"ids": dense([]int{2}, int64(0), 5)},
			`exec: node "gather" (Gather): index 5 is out of range for axis 0 of size 3`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := New(c.g.model())
			require.NoError(t, err)
			_, err = g.Run(c.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
		})
	}
}

// TestRunRecoversPanics checks that a panic inside an op comes back as an
// error naming the node.
func TestRunRecoversPanics(t *testing.T) {
	ops["TestPanic"] = unarySpec(1, func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		var s []float32
		return one(f32(dims(1), s[len(in)]))
	})
	defer delete(ops, "TestPanic")
	g, err := New(graphSpec{
		nodes:   []*onnxpb.NodeProto{nodeP("boom", "TestPanic", []string{"x"}, []string{"y"})},
		inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 1)},
		outputs: []*onnxpb.ValueInfoProto{info("y", onnxio.Float, 1)},
	}.model())
	require.NoError(t, err)
	_, err = g.Run(map[string]*tensor.Dense{"x": dense([]int{1}, float32(1))})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `exec: node "boom" (TestPanic): internal error: runtime error: index out of range`)
}

// TestRunOwnership checks that outputs share no memory with the graph's
// initializers or the caller's inputs.
func TestRunOwnership(t *testing.T) {
	g, err := New(graphSpec{
		nodes: []*onnxpb.NodeProto{
			nodeP("w", "Identity", []string{"W"}, []string{"w_out"}),
			nodeP("x", "Reshape", []string{"x", "shape"}, []string{"x_out"}),
		},
		inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 2, 2)},
		outputs: []*onnxpb.ValueInfoProto{info("w_out", onnxio.Float, 2), info("x_out", onnxio.Float, 4)},
		inits: []*onnxpb.TensorProto{
			initializer(t, "W", dense([]int{2}, float32(1), 2)),
			initializer(t, "shape", dense([]int{1}, int64(4))),
		},
	}.model())
	require.NoError(t, err)
	x := dense([]int{2, 2}, float32(1), 2, 3, 4)
	for range 2 {
		out, err := g.Run(map[string]*tensor.Dense{"x": x})
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 2}, floats(t, out["w_out"]))
		assert.Equal(t, []float32{1, 2, 3, 4}, floats(t, out["x_out"]))
		floats(t, out["w_out"])[0] = 100
		floats(t, out["x_out"])[0] = 100
	}
	assert.Equal(t, []float32{1, 2, 3, 4}, floats(t, x), "the input is untouched")

	// A transposed Dense is read as it looks, not as it is stored.
	xt := dense([]int{2, 2}, float32(1), 2, 3, 4)
	require.NoError(t, xt.T())
	out, err := g.Run(map[string]*tensor.Dense{"x": xt})
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 3, 2, 4}, floats(t, out["x_out"]))
}

// TestSchedule checks dead-node removal, Constant folding and that every
// intermediate is dropped right after its last reader.
func TestSchedule(t *testing.T) {
	g, err := New(graphSpec{
		nodes: []*onnxpb.NodeProto{
			{Name: new("two"), OpType: new("Constant"), Output: []string{"two"}, Attribute: []*onnxpb.AttributeProto{floatAttr("value_float", 2)}},
			nodeP("a", "Mul", []string{"x", "two"}, []string{"a"}),
			nodeP("unused", "Neg", []string{"a"}, []string{"dead"}),
			nodeP("d", "Dropout", []string{"a"}, []string{"b", "mask"}),
			nodeP("c", "Add", []string{"b", "a"}, []string{"c"}),
			nodeP("y", "Neg", []string{"c"}, []string{"y"}),
		},
		inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 2)},
		outputs: []*onnxpb.ValueInfoProto{info("y", onnxio.Float, 2)},
	}.model())
	require.NoError(t, err)
	var names []string
	freed := map[string][]string{}
	slotName := map[int]string{0: "?"}
	for _, n := range g.nodes {
		names = append(names, n.name)
	}
	assert.Equal(t, []string{"a", "d", "c", "y"}, names, "Constant folded, dead Neg dropped")
	// Name the slots from the nodes' own bookkeeping.
	for _, n := range g.nodes {
		for k, s := range n.in {
			slotName[s] = n.inName[k]
		}
	}
	slotName[g.nodes[1].out[1]] = "mask"
	for _, n := range g.nodes {
		for _, s := range n.free {
			freed[n.name] = append(freed[n.name], slotName[s])
		}
	}
	assert.ElementsMatch(t, []string{"x", "two"}, freed["a"], "a run drops even constants from its own environment")
	assert.ElementsMatch(t, []string{"mask"}, freed["d"], "an output nobody reads dies at once")
	assert.ElementsMatch(t, []string{"b", "a"}, freed["c"])
	assert.ElementsMatch(t, []string{"c"}, freed["y"])

	out, err := g.Run(map[string]*tensor.Dense{"x": dense([]int{2}, float32(1), -3)})
	require.NoError(t, err)
	assert.Equal(t, []float32{-4, 12}, floats(t, out["y"]))
}

// TestInitializerDefaults covers IR < 4 models, where initializers are
// also listed as inputs: they are defaults the caller may override.
func TestInitializerDefaults(t *testing.T) {
	spec := graphSpec{
		nodes:   []*onnxpb.NodeProto{nodeP("add", "Add", []string{"x", "bias"}, []string{"y"})},
		inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 2), info("bias", onnxio.Float, 2)},
		outputs: []*onnxpb.ValueInfoProto{info("y", onnxio.Float, 2)},
		inits:   []*onnxpb.TensorProto{initializer(t, "bias", dense([]int{2}, float32(10), 20))},
	}
	g, err := New(spec.model())
	require.NoError(t, err)
	require.Len(t, g.Inputs(), 1)
	assert.Equal(t, "x", g.Inputs()[0].Name)
	x := dense([]int{2}, float32(1), 2)
	out, err := g.Run(map[string]*tensor.Dense{"x": x})
	require.NoError(t, err)
	assert.Equal(t, []float32{11, 22}, floats(t, out["y"]))
	out, err = g.Run(map[string]*tensor.Dense{"x": x, "bias": dense([]int{2}, float32(-1), -2)})
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 0}, floats(t, out["y"]))
}

func TestRunScalarsAndEmpty(t *testing.T) {
	g, err := New(graphSpec{
		nodes: []*onnxpb.NodeProto{
			nodeP("size", "Size", []string{"x"}, []string{"n"}),
			nodeP("slice", "Slice", []string{"x", "start", "start"}, []string{"empty"}),
		},
		inputs:  []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float)},
		outputs: []*onnxpb.ValueInfoProto{info("n", onnxio.Int64), untyped("empty", onnxio.Float)},
		inits:   []*onnxpb.TensorProto{initializer(t, "start", dense([]int{1}, int64(0)))},
	}.model())
	require.NoError(t, err)
	_, err = g.Run(map[string]*tensor.Dense{"x": dense([]int{2}, float32(1), 2)})
	assert.ErrorContains(t, err, `exec: output "empty": tensor has shape (0,) with zero elements, which *tensor.Dense cannot hold`)

	outs, err := g.run(map[string]*value{"x": f32(dims(2), 1, 2)})
	require.NoError(t, err, "the internal run carries empty tensors")
	assertValue(t, i64(dims(), 2), outs[0])
	assertValue(t, f32(dims(0)), outs[1])

	scalar := graphSpec{
		nodes:   []*onnxpb.NodeProto{nodeP("neg", "Neg", []string{"x"}, []string{"y"})},
		inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float)},
		outputs: []*onnxpb.ValueInfoProto{info("y", onnxio.Float)},
	}
	g, err = New(scalar.model())
	require.NoError(t, err)
	out, err := g.Run(map[string]*tensor.Dense{"x": tensor.New(tensor.FromScalar(float32(3)))})
	require.NoError(t, err)
	assert.True(t, out["y"].IsScalar())
	assert.Equal(t, float32(-3), out["y"].Data())
}

func TestConcurrentRun(t *testing.T) {
	g, err := New(linearSoftmax(t).model())
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := []float32{float32(i), 1, -float32(i) / 3}
			out, err := g.Run(map[string]*tensor.Dense{"x": dense([]int{1, 3}, x...)})
			if err != nil {
				errs <- err
				return
			}
			want := linearSoftmaxRef(x)
			for j, v := range out["y"].Data().([]float32) {
				if math.Abs(float64(v)-want[j]) > 1e-6 {
					errs <- fmt.Errorf("goroutine %d: y[%d] = %v, want %v", i, j, v, want[j])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestNewAcceptsWhatOnnxRuntimeAccepts checks the leniencies real files
// need (see ../shared/realworld/README.md): each graph runs as ONNX Runtime
// runs it, and New records a warning for it instead of staying silent.
func TestNewAcceptsWhatOnnxRuntimeAccepts(t *testing.T) {
	x := []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 2, 3)}
	y := []*onnxpb.ValueInfoProto{info("y", onnxio.Float, 2, 3)}
	in := []float32{1, -2, 3, -4, 5, -6}
	one := []float32{1, 1, 1}
	cases := []struct {
		name    string
		spec    graphSpec
		want    []float32
		warning string
	}{
		{"LayerNormalization below opset 17", graphSpec{opset: 11, inputs: x, outputs: y,
			inits: []*onnxpb.TensorProto{initializer(t, "scale", dense([]int{3}, one...))},
			nodes: []*onnxpb.NodeProto{nodeP("ln", "LayerNormalization", []string{"x", "scale"}, []string{"y"}, floatAttr("epsilon", 0))}},
			// (x - mean) / std per row: rows (1,-2,3) and (-4,5,-6).
			layerNormRows(in, 3),
			`node "ln": op "LayerNormalization" at opset 11 runs with its opset-17 semantics, as ONNX Runtime does`},
		{"an unknown attribute", graphSpec{inputs: x, outputs: y,
			nodes: []*onnxpb.NodeProto{nodeP("n", "Neg", []string{"x"}, []string{"y"}, floatAttr("epsion", 1e-5))}},
			[]float32{-1, 2, -3, 4, -5, 6},
			`node "n": op "Neg" has unknown attribute "epsion", ignored as ONNX Runtime ignores it`},
		{"a name produced twice", graphSpec{inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{
			nodeP("a", "Neg", []string{"x"}, []string{"y"}), nodeP("b", "Abs", []string{"x"}, []string{"y"})}},
			[]float32{1, 2, 3, 4, 5, 6},
			`node "b": op "Abs" writes "y", which node "a" (Neg) wrote before; the later producer wins`},
		{"nodes out of topological order", graphSpec{inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{
			nodeP("second", "Neg", []string{"t"}, []string{"y"}), nodeP("first", "Abs", []string{"x"}, []string{"t"})}},
			[]float32{-1, -2, -3, -4, -5, -6},
			`nodes are not in topological order (node "second" (Neg) reads "t" before node "first" (Abs) writes it)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := New(c.spec.model())
			require.NoError(t, err)
			require.Len(t, g.Warnings(), 1)
			assert.Contains(t, g.Warnings()[0], c.warning)
			out, err := g.Run(map[string]*tensor.Dense{"x": dense([]int{2, 3}, in...)})
			require.NoError(t, err)
			assert.InDeltaSlice(t, c.want, floats(t, out["y"]), 1e-6)
		})
	}
	g, err := New(graphSpec{inputs: x, outputs: y, nodes: []*onnxpb.NodeProto{nodeP("n", "Neg", []string{"x"}, []string{"y"})}}.model())
	require.NoError(t, err)
	assert.Empty(t, g.Warnings(), "a standard graph gets no warnings")
}

// layerNormRows normalizes each row of width w to mean 0 and variance 1.
func layerNormRows(x []float32, w int) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < len(x); r += w {
		var mean, variance float64
		for _, v := range x[r : r+w] {
			mean += float64(v) / float64(w)
		}
		for _, v := range x[r : r+w] {
			variance += (float64(v) - mean) * (float64(v) - mean) / float64(w)
		}
		for i, v := range x[r : r+w] {
			out[r+i] = float32((float64(v) - mean) / math.Sqrt(variance))
		}
	}
	return out
}

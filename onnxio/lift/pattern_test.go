package lift_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// The patterns below are registered for the whole test binary, so they
// must decline every graph but their own: the fixtures of the other tests
// are offered to them too.
func init() {
	registry.Register(registry.Info{ID: "test.tied_attention", Summary: "attention with one projection for queries, keys and values",
		New: func() registry.Layer { return &tiedAttention{} }})
	registry.Register(registry.Info{ID: "test.linear_relu", Summary: "relu(x Wᵀ + b)",
		New: func() registry.Layer { return &linearReLU{} }})
	match.RegisterPattern(match.Pattern{Name: "test.tied_attention", Op: "Softmax", Match: matchTied})
	match.RegisterPattern(match.Pattern{Name: "test.linear_relu", Op: "Relu", Match: matchLinearReLU})
	match.RegisterPattern(match.Pattern{Name: "test.misbehaving", Op: "Relu", Match: misbehave})
}

// TestPatternLiftsSoftmaxStructure lifts softmax(mask(scale · q qᵀ)) q
// with q = x Wᵀ, which no built-in layer computes: the graph is an
// attention.self export whose keys and values are rewired to the queries.
// The pattern finds the scale and the causal mask with Graph.Scores, the
// projection with Graph.Linear, and the lifted model reproduces the graph.
func TestPatternLiftsSoftmaxStructure(t *testing.T) {
	m := tiedGraph(t)
	res, err := lift.Lift(m)
	require.NoError(t, err)
	assert.Contains(t, res.Config, "{name: attn, type: test.tied_attention, d_in: 3, d_out: 4, scale: 0.5, causal: true}")
	assert.Equal(t, []lift.Mapping{{Initializer: "attn.W_query.weight", Param: "attn.proj.weight"}}, res.Mapping)
	assert.Equal(t, 2, res.Check.Runs, "a dynamic graph is checked at two sizes")

	x := randomTokens(2, 5, 3)
	want := runGraphOutput(t, m, x)
	got, err := res.Model.Forward(&registry.Run{}, x)
	require.NoError(t, err)
	assertAllClose(t, want, got)
}

// TestPatternAnchoredAtAnotherOp lifts relu(x Wᵀ + b) from a Relu anchor.
// Patterns run before the built-in Linear recognizer, so the MatMul and
// Add are the pattern's, not an nn.linear's.
func TestPatternAnchoredAtAnotherOp(t *testing.T) {
	m := exportWithoutMetadata(t, "name: lin\nlayers:\n  - {name: lin, type: nn.linear, d_in: 3, d_out: 2}\n")
	g := m.GetGraph()
	g.Node = append(g.Node, &onnxpb.NodeProto{OpType: proto.String("Relu"), Name: proto.String("/act/Relu"),
		Input: []string{export.OutputName}, Output: []string{"z"}})
	g.Output[0].Name = proto.String("z")

	res, err := lift.Lift(m)
	require.NoError(t, err)
	assert.Contains(t, res.Config, "type: test.linear_relu, d_in: 3, d_out: 2")
	assert.NotContains(t, res.Config, "nn.linear")
	var params []string
	for _, mp := range res.Mapping {
		params = append(params, mp.Param)
	}
	assert.Len(t, params, 2)
}

// TestPatternReports checks what the report says when a pattern fails,
// refuses or misbehaves, on a graph of one Relu whose node name tells the
// misbehaving pattern what to do (and no other pattern matches it).
func TestPatternReports(t *testing.T) {
	tests := []struct{ name, want string }{
		{"error", "pattern test.misbehaving: not this kind of relu"},
		{"panic", "pattern test.misbehaving: panic in Match: boom"},
		{"unknown type", `pattern test.misbehaving: unknown layer type "test.nope" (forgotten import?)`},
		{"no input", "pattern test.misbehaving: the test.linear_relu layer reads no input"},
		{"foreign input", `pattern test.misbehaving: output "r" depends on graph input "x", which is not among the layer's inputs [y]`},
		{"anchor outside", `pattern test.misbehaving: the test.linear_relu layer from [r] to "y" does not contain the anchor node anchor outside`},
		{"param from data", `parameter "weight" comes from "x", which is not a constant of the graph`},
		{"decline", "op Relu is not part of any attnrun layer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lift.Lift(reluGraph(tt.name))
			var unlifted *lift.UnliftedError
			require.True(t, errors.As(err, &unlifted), "want an UnliftedError, got %v", err)
			i := slices.IndexFunc(unlifted.Nodes, func(u lift.Unlifted) bool { return u.Op == "Relu" })
			require.GreaterOrEqual(t, i, 0, "the Relu is reported")
			assert.Contains(t, unlifted.Nodes[i].Reason, tt.want)
		})
	}
}

// TestBuiltinsComeFirst checks that a Softmax the built-in recognizer
// lifts is not offered to patterns.
func TestBuiltinsComeFirst(t *testing.T) {
	offered.reset()
	res, err := lift.Lift(exportWithoutMetadata(t, tiedConfig))
	require.NoError(t, err)
	assert.Contains(t, res.Config, "type: attention.self")
	assert.Empty(t, offered.get(), "anchors offered to test.tied_attention")
}

// TestRegisterPattern checks the listing and the programming errors
// RegisterPattern refuses at start-up.
func TestRegisterPattern(t *testing.T) {
	names := match.Patterns()
	assert.True(t, slices.IsSorted(names))
	assert.Subset(t, names, []string{"test.linear_relu", "test.misbehaving", "test.tied_attention"})

	none := func(match.Graph, *match.Node) (*match.Layer, error) { return nil, nil }
	assert.PanicsWithValue(t, "match: RegisterPattern with an empty name", func() {
		match.RegisterPattern(match.Pattern{Op: "Softmax", Match: none})
	})
	assert.PanicsWithValue(t, `match: RegisterPattern "x" with an empty anchor op`, func() {
		match.RegisterPattern(match.Pattern{Name: "x", Match: none})
	})
	assert.PanicsWithValue(t, `match: RegisterPattern "x" with a nil Match`, func() {
		match.RegisterPattern(match.Pattern{Name: "x", Op: "Softmax"})
	})
	assert.PanicsWithValue(t, `match: RegisterPattern called twice for "test.tied_attention"`, func() {
		match.RegisterPattern(match.Pattern{Name: "test.tied_attention", Op: "Softmax", Match: none})
	})
}

// tiedConfig is the attention.self model whose export tiedGraph rewires.
const tiedConfig = "name: tied\nlayers:\n  - {name: attn, type: attention.self, d_in: 3, d_out: 4, causal: true, scaled: true}\n"

// tiedGraph exports tiedConfig (seeded weights) without its metadata and
// makes the keys and the values read the queries.
func tiedGraph(t *testing.T) *onnxpb.ModelProto {
	t.Helper()
	m := exportWithoutMetadata(t, tiedConfig)
	nodes := m.GetGraph().GetNode()
	byOutput := map[string]*onnxpb.NodeProto{}
	for _, n := range nodes {
		for _, o := range n.GetOutput() {
			byOutput[o] = n
		}
	}
	var softmax, product *onnxpb.NodeProto
	for _, n := range nodes {
		switch {
		case n.GetOpType() == "Softmax":
			softmax = n
		case n.GetOpType() == "MatMul" && softmax != nil && n.GetInput()[0] == softmax.GetOutput()[0]:
			product = n
		}
	}
	require.NotNil(t, product, "softmax(...) · v")
	// Back from the softmax through Where and Mul to MatMul(q, Transpose(k)).
	v := softmax.GetInput()[0]
	for byOutput[v].GetOpType() != "MatMul" {
		v = byOutput[v].GetInput()[slices.IndexFunc(byOutput[v].GetInput(), func(in string) bool {
			n := byOutput[in]
			return n != nil && (n.GetOpType() == "MatMul" || n.GetOpType() == "Mul")
		})]
	}
	scores := byOutput[v]
	q, keysT := scores.GetInput()[0], byOutput[scores.GetInput()[1]]
	require.Equal(t, "Transpose", keysT.GetOpType())
	keysT.Input[0] = q
	product.Input[1] = q
	return m
}

// exportWithoutMetadata exports a config with seeded weights and drops
// the metadata, so that Lift has the graph alone to go by.
func exportWithoutMetadata(t *testing.T, config string) *onnxpb.ModelProto {
	t.Helper()
	model, err := models.Parse([]byte(config), "test.yaml")
	require.NoError(t, err)
	require.NoError(t, model.Init(7))
	m, err := export.Model(model, export.Options{})
	require.NoError(t, err)
	m.MetadataProps = nil
	return m
}

// reluGraph is y = -Relu(x) for x of shape (2, 3, 4), the Relu node named
// name.
func reluGraph(name string) *onnxpb.ModelProto {
	return &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("relu"),
			Node: []*onnxpb.NodeProto{
				{OpType: proto.String("Relu"), Name: proto.String(name), Input: []string{"x"}, Output: []string{"r"}},
				{OpType: proto.String("Neg"), Name: proto.String("neg"), Input: []string{"r"}, Output: []string{"y"}},
			},
			Input:  []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float, []onnxio.Dim{onnxio.FixedDim(2), onnxio.FixedDim(3), onnxio.FixedDim(4)})},
			Output: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("y", onnxio.Float, nil)},
		},
	}
}

// offered records the anchors test.tied_attention is offered.
var offered anchors

type anchors struct {
	mu    sync.Mutex
	names []string
}

func (a *anchors) add(name string) { a.mu.Lock(); a.names = append(a.names, name); a.mu.Unlock() }
func (a *anchors) reset()          { a.mu.Lock(); a.names = nil; a.mu.Unlock() }
func (a *anchors) get() []string   { a.mu.Lock(); defer a.mu.Unlock(); return slices.Clone(a.names) }

// matchTied recognizes softmax(scale · mask(q qᵀ)) q with q an nn.Linear
// without bias.
func matchTied(g match.Graph, softmax *match.Node) (*match.Layer, error) {
	offered.add(softmax.Name())
	scores, err := g.Scores(softmax)
	if err != nil {
		return nil, nil
	}
	q, kT := scores.Product.Inputs()[0], scores.Product.Inputs()[1]
	transpose := g.Producer(kT)
	if transpose == nil || transpose.Op() != "Transpose" || transpose.Inputs()[0] != q {
		return nil, nil
	}
	readers := g.Readers(softmax.Output())
	if len(readers) != 1 || readers[0].Op() != "MatMul" || readers[0].Inputs()[1] != q {
		return nil, nil
	}
	lin, ok := g.Linear(q)
	if !ok || lin.Bias != nil {
		return nil, errors.New("the tied projection is not an nn.Linear without bias")
	}
	return &match.Layer{
		Type: "test.tied_attention",
		Config: []match.Field{{Key: "d_in", Value: lin.In}, {Key: "d_out", Value: lin.Out},
			{Key: "scale", Value: float32(scores.Scale)}, {Key: "causal", Value: scores.Causal}},
		Inputs: []string{lin.Input},
		Output: readers[0].Output(),
		Params: lin.Params("proj"),
	}, nil
}

// matchLinearReLU recognizes Relu(nn.Linear(x)).
func matchLinearReLU(g match.Graph, relu *match.Node) (*match.Layer, error) {
	lin, ok := g.Linear(relu.Inputs()[0])
	if !ok || lin.Bias == nil {
		return nil, nil
	}
	return &match.Layer{
		Type:   "test.linear_relu",
		Config: []match.Field{{Key: "d_in", Value: lin.In}, {Key: "d_out", Value: lin.Out}},
		Inputs: []string{lin.Input}, Output: relu.Output(), Params: lin.Params("linear"),
	}, nil
}

// misbehave does what its anchor's name says, on reluGraph's graphs only.
func misbehave(g match.Graph, relu *match.Node) (*match.Layer, error) {
	layer := &match.Layer{Type: "test.linear_relu", Inputs: []string{"x"}, Output: "r"}
	switch relu.Name() {
	case "error":
		return nil, errors.New("not this kind of relu")
	case "panic":
		panic("boom")
	case "unknown type":
		layer.Type = "test.nope"
	case "no input":
		layer.Inputs = nil
	case "foreign input": // r = Relu(x) read "from" y: x is not an input
		layer.Inputs = []string{"y"}
	case "anchor outside":
		layer.Inputs, layer.Output = []string{"r"}, "y"
	case "param from data":
		layer.Params = []match.Param{{Name: "weight", Value: tensor.New(tensor.WithShape(1), tensor.WithBacking([]float32{1})), From: "x"}}
	default:
		return nil, nil
	}
	return layer, nil
}

// tiedAttention is test.tied_attention: softmax(scale · mask(q qᵀ)) q with
// q = x Wᵀ, W (d_out, d_in).
type tiedAttention struct {
	DIn    int     `yaml:"d_in"`
	DOut   int     `yaml:"d_out"`
	Scale  float64 `yaml:"scale"`
	Causal bool    `yaml:"causal"`
	proj   *tensor.Dense
}

func (l *tiedAttention) Validate() error {
	l.proj = tensor.New(tensor.WithShape(l.DOut, l.DIn), tensor.WithBacking(make([]float32, l.DOut*l.DIn)))
	return nil
}

func (l *tiedAttention) Params() []registry.Param {
	return []registry.Param{{Name: "proj.weight", Value: l.proj, Init: registry.LinearInit(l.DIn)}}
}

func (l *tiedAttention) Forward(_ *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	x := inputs[0]
	shape := x.Shape()
	B, T := 1, shape[0]
	if len(shape) == 3 {
		B, T = shape[0], shape[1]
	}
	q := project(x.Data().([]float32), l.proj.Data().([]float32), B*T, l.DIn, l.DOut)
	out := make([]float32, B*T*l.DOut)
	for b := 0; b < B; b++ {
		for i := 0; i < T; i++ {
			scores := make([]float64, T)
			largest := math.Inf(-1)
			for j := range scores {
				scores[j] = math.Inf(-1)
				if !l.Causal || j <= i {
					scores[j] = l.Scale * dot64(q[(b*T+i)*l.DOut:], q[(b*T+j)*l.DOut:], l.DOut)
				}
				largest = math.Max(largest, scores[j])
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - largest)
				sum += scores[j]
			}
			for o := 0; o < l.DOut; o++ {
				var acc float64
				for j := range scores {
					acc += scores[j] / sum * float64(q[(b*T+j)*l.DOut+o])
				}
				out[(b*T+i)*l.DOut+o] = float32(acc)
			}
		}
	}
	return tensor.New(tensor.WithShape(append(slices.Clone([]int(shape[:len(shape)-1])), l.DOut)...), tensor.WithBacking(out)), nil
}

// linearReLU is test.linear_relu: relu(x Wᵀ + b).
type linearReLU struct {
	DIn          int `yaml:"d_in"`
	DOut         int `yaml:"d_out"`
	weight, bias *tensor.Dense
}

// TokenWise marks the layer token-wise, so that a decoder lifted with it
// (OPT's fc1 and ReLU) runs incrementally.
func (*linearReLU) TokenWise() {}

func (l *linearReLU) Validate() error {
	l.weight = tensor.New(tensor.WithShape(l.DOut, l.DIn), tensor.WithBacking(make([]float32, l.DOut*l.DIn)))
	l.bias = tensor.New(tensor.WithShape(l.DOut), tensor.WithBacking(make([]float32, l.DOut)))
	return nil
}

func (l *linearReLU) Params() []registry.Param {
	return []registry.Param{{Name: "linear.weight", Value: l.weight}, {Name: "linear.bias", Value: l.bias}}
}

func (l *linearReLU) Forward(_ *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	x := inputs[0]
	rows := x.Shape().TotalSize() / l.DIn
	y := project(x.Data().([]float32), l.weight.Data().([]float32), rows, l.DIn, l.DOut)
	for i, v := range y {
		y[i] = max(0, v+l.bias.Data().([]float32)[i%l.DOut])
	}
	shape := slices.Clone([]int(x.Shape()))
	shape[len(shape)-1] = l.DOut
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(y)), nil
}

// project is x Wᵀ for rows rows of width in, W (out, in).
func project(x, w []float32, rows, in, out int) []float32 {
	y := make([]float32, rows*out)
	for r := 0; r < rows; r++ {
		for o := 0; o < out; o++ {
			y[r*out+o] = float32(dot64(x[r*in:], w[o*in:], in))
		}
	}
	return y
}

func dot64(a, b []float32, n int) float64 {
	var s float64
	for i := 0; i < n; i++ {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// randomTokens is a (b, t, d) tensor of deterministic values in [-1, 1].
func randomTokens(b, t, d int) *tensor.Dense {
	data := make([]float32, b*t*d)
	for i := range data {
		data[i] = float32(math.Sin(float64(i)*12.9898 + 78.233))
	}
	return tensor.New(tensor.WithShape(b, t, d), tensor.WithBacking(data))
}

// runGraphOutput runs a graph on x with the executor and returns output "y".
func runGraphOutput(t *testing.T, m *onnxpb.ModelProto, x *tensor.Dense) *tensor.Dense {
	t.Helper()
	g, err := exec.New(m)
	require.NoError(t, err)
	out, err := g.Run(map[string]*tensor.Dense{"x": x})
	require.NoError(t, err)
	return out[export.OutputName]
}

// assertAllClose compares at attnrun's float32 tolerance against PyTorch.
func assertAllClose(t *testing.T, want, got *tensor.Dense) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape())
	g := got.Data().([]float32)
	for i, w := range want.Data().([]float32) {
		require.InDelta(t, w, g[i], 1e-6+1e-5*math.Abs(float64(w)), fmt.Sprintf("element %d", i))
	}
}

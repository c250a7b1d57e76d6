package export_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// exportDeclared exports m with an Interface, checks that the graph
// declares exactly what was asked (copies, not the caller's protos), and
// prepares it for the executor.
func exportDeclared(t *testing.T, m *models.Model, iface *export.Interface) (*onnxpb.ModelProto, *exec.Graph) {
	t.Helper()
	pb := exportModel(t, m, export.Options{Interface: iface})
	gr := pb.GetGraph()
	require.Len(t, gr.GetInput(), len(iface.Inputs))
	for i, vi := range iface.Inputs {
		assert.True(t, proto.Equal(vi, gr.GetInput()[i]), "input %d: %v, want %v", i, gr.GetInput()[i], vi)
		assert.NotSame(t, vi, gr.GetInput()[i])
	}
	require.Len(t, gr.GetOutput(), 1)
	assert.True(t, proto.Equal(iface.Output, gr.GetOutput()[0]), "output: %v, want %v", gr.GetOutput()[0], iface.Output)
	decoded, err := onnxio.DecodeModel(encode(t, pb), "", onnxio.DefaultLimits)
	require.NoError(t, err)
	g, err := exec.New(decoded)
	require.NoError(t, err)
	return pb, g
}

// Every preset, declared with the fixed shape of its own input, (T, d) as
// the seed notebooks run them or (B, T, d), and of its output, takes that
// input as it is and gives what Forward gives, in Forward's shape.
func TestExportInterfaceFixedShapes(t *testing.T) {
	unbatched := 0
	for _, p := range presets(t) {
		t.Run(p.Name, func(t *testing.T) {
			m, x := presetModel(t, p.Name)
			want := forward(t, m, x)
			if x.Dims() == 2 {
				unbatched++
			}
			iface := &export.Interface{
				Inputs: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float, fixedDims(x.Shape()))},
				Output: onnxio.TensorValueInfo("y", onnxio.Float, fixedDims(want.Shape())),
			}
			_, g := exportDeclared(t, m, iface)
			out, err := g.Run(map[string]*tensor.Dense{"x": x})
			require.NoError(t, err)
			require.Equal(t, want.Shape(), out["y"].Shape())
			assertClose(t, want.Data().([]float32), out["y"].Data().([]float32))
		})
	}
	assert.Greater(t, unbatched, 5, "presets with a (T, d) input")
}

// fixedDims declares a shape with every dimension fixed.
func fixedDims(shape tensor.Shape) []onnxio.Dim {
	dims := make([]onnxio.Dim, len(shape))
	for i, n := range shape {
		dims[i] = onnxio.FixedDim(int64(n))
	}
	return dims
}

// A sequence-first nn.MultiheadAttention on one unbatched sequence: the
// batch axis goes in at position 1 of the query and memory (their layout
// is (seq, batch, d)), at position 0 of the bool key_padding_mask (S),
// which is cast to 0 and 1, and comes out at position 1; names, element
// types and symbolic dimensions are the declared ones, a float64 output
// included.
func TestExportInterfaceSequenceFirstMasked(t *testing.T) {
	m, err := models.Parse([]byte(`
name: cross
inputs: [q, mem, pad]
layers:
  - {name: mha, type: attention.torch_mha, inputs: [q, mem, pad], embed_dim: 4, num_heads: 2, key_padding_mask: bool}
`), "cross.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(3))
	q, mem := randomInput(1, 5, 4, 1), randomInput(1, 6, 4, 2)
	q = tensor.New(tensor.WithShape(5, 4), tensor.WithBacking(q.Data()))
	mem = tensor.New(tensor.WithShape(6, 4), tensor.WithBacking(mem.Data()))
	padBool := []bool{false, false, true, false, true, true}
	padFloat := make([]float32, len(padBool))
	for i, b := range padBool {
		if b {
			padFloat[i] = 1
		}
	}
	want, err := m.Forward(nil, q, mem, tensor.New(tensor.WithShape(6), tensor.WithBacking(padFloat)))
	require.NoError(t, err)
	require.Equal(t, []int{5, 4}, []int(want.Shape()))

	iface := &export.Interface{
		Inputs: []*onnxpb.ValueInfoProto{
			onnxio.TensorValueInfo("query.1", onnxio.Float, []onnxio.Dim{onnxio.SymbolicDim("L"), onnxio.FixedDim(4)}),
			onnxio.TensorValueInfo("memory", onnxio.Float, []onnxio.Dim{onnxio.SymbolicDim("S"), onnxio.FixedDim(4)}),
			onnxio.TensorValueInfo("key_padding_mask", onnxio.Bool, []onnxio.Dim{onnxio.SymbolicDim("S")}),
		},
		Output: onnxio.TensorValueInfo("out", onnxio.Float64, []onnxio.Dim{onnxio.SymbolicDim("L"), {}}),
	}
	pb, g := exportDeclared(t, m, iface)
	axes := map[string][]int64{}
	for _, n := range pb.GetGraph().GetNode() {
		if strings.HasPrefix(n.GetName(), "/interface/") && (n.GetOpType() == "Unsqueeze" || n.GetOpType() == "Squeeze") {
			axes[n.GetInput()[0]] = constInts(t, pb, n.GetInput()[1])
		}
	}
	assert.Equal(t, []int64{1}, axes["query.1"])
	assert.Equal(t, []int64{1}, axes["memory"])
	assert.Len(t, axes, 4, "query, memory, the mask's Cast and the output each get one")

	out, err := g.Run(map[string]*tensor.Dense{
		"query.1": q, "memory": mem,
		"key_padding_mask": tensor.New(tensor.WithShape(6), tensor.WithBacking(padBool)),
	})
	require.NoError(t, err)
	got := out["out"]
	require.NotNil(t, got)
	require.Equal(t, []int{5, 4}, []int(got.Shape()))
	wide := got.Data().([]float64)
	narrow := make([]float32, len(wide))
	for i, v := range wide {
		narrow[i] = float32(v)
	}
	assertClose(t, want.Data().([]float32), narrow)
}

// An attnrun mask of rank 4 (attention.sdpa's (batch, heads, queries,
// keys)) declared (Tq, Tk) gets its two leading axes, as masks broadcast
// from the right.
func TestExportInterfaceMaskBroadcast(t *testing.T) {
	m, err := models.Parse([]byte(`
name: masked
inputs: [x, mask]
layers:
  - {name: attn, type: attention.sdpa, inputs: [x, mask], d: 4, num_heads: 2, mask: bool, mask_polarity: mask}
`), "masked.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(5))
	x := tensor.New(tensor.WithShape(3, 4), tensor.WithBacking(randomInput(1, 3, 4, 4).Data()))
	maskBool := []bool{false, true, true, false, false, true, false, false, false}
	maskFloat := make([]float32, len(maskBool))
	for i, b := range maskBool {
		if b {
			maskFloat[i] = 1
		}
	}
	want, err := m.Forward(nil, x, tensor.New(tensor.WithShape(3, 3), tensor.WithBacking(maskFloat)))
	require.NoError(t, err)
	iface := &export.Interface{
		Inputs: []*onnxpb.ValueInfoProto{
			onnxio.TensorValueInfo("x", onnxio.Float, []onnxio.Dim{onnxio.SymbolicDim("T"), onnxio.FixedDim(4)}),
			onnxio.TensorValueInfo("mask", onnxio.Bool, []onnxio.Dim{onnxio.SymbolicDim("T"), onnxio.SymbolicDim("T")}),
		},
		Output: onnxio.TensorValueInfo("y", onnxio.Float, []onnxio.Dim{onnxio.SymbolicDim("T"), onnxio.FixedDim(4)}),
	}
	pb, g := exportDeclared(t, m, iface)
	for _, n := range pb.GetGraph().GetNode() {
		if strings.HasPrefix(n.GetName(), "/interface/") && n.GetOpType() == "Unsqueeze" && n.GetInput()[0] != "x" {
			assert.Equal(t, []int64{0, 1}, constInts(t, pb, n.GetInput()[1]))
		}
	}
	out, err := g.Run(map[string]*tensor.Dense{"x": x, "mask": tensor.New(tensor.WithShape(3, 3), tensor.WithBacking(maskBool))})
	require.NoError(t, err)
	require.Equal(t, want.Shape(), out["y"].Shape())
	assertClose(t, want.Data().([]float32), out["y"].Data().([]float32))
}

// Declared names may be any string, those of the values the layers'
// nodes would otherwise write included.
func TestExportInterfaceNamesNeverClash(t *testing.T) {
	m, err := models.Parse([]byte(`
name: two
layers:
  - {name: first, type: nn.linear, d_in: 3, d_out: 3}
  - {name: second, type: nn.linear, d_in: 3, d_out: 2}
`), "two.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(2))
	x := randomInput(2, 4, 3, 8)
	iface := &export.Interface{
		Inputs: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("/second/MatMul_output_0", onnxio.Float,
			[]onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.SymbolicDim("seq"), onnxio.FixedDim(3)})},
		Output: onnxio.TensorValueInfo("/first/MatMul_output_0", onnxio.Float,
			[]onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.SymbolicDim("seq"), onnxio.FixedDim(2)}),
	}
	_, g := exportDeclared(t, m, iface)
	out, err := g.Run(map[string]*tensor.Dense{"/second/MatMul_output_0": x})
	require.NoError(t, err)
	assertClose(t, forward(t, m, x).Data().([]float32), out["/first/MatMul_output_0"].Data().([]float32))
}

func TestExportInterfaceErrors(t *testing.T) {
	m, err := models.Parse([]byte(`
name: lin
layers:
  - {name: proj, type: nn.linear, d_in: 3, d_out: 2}
`), "lin.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	tokens := func(name string, rank int) *onnxpb.ValueInfoProto {
		dims := make([]onnxio.Dim, rank)
		for i := range dims {
			dims[i] = onnxio.SymbolicDim("n")
		}
		return onnxio.TensorValueInfo(name, onnxio.Float, dims)
	}
	for _, c := range []struct {
		name  string
		iface export.Interface
		want  string
	}{
		{"two inputs", export.Interface{Inputs: []*onnxpb.ValueInfoProto{tokens("a", 3), tokens("b", 3)}, Output: tokens("y", 3)},
			`interface: 2 input(s) declared, the model has 1 ("x")`},
		{"no output", export.Interface{Inputs: []*onnxpb.ValueInfoProto{tokens("x", 3)}},
			"interface: the output is not declared"},
		{"nil input", export.Interface{Inputs: []*onnxpb.ValueInfoProto{nil}, Output: tokens("y", 3)},
			"interface: input 0 has no name"},
		{"a parameter's name", export.Interface{Inputs: []*onnxpb.ValueInfoProto{tokens("proj.weight", 3)}, Output: tokens("y", 3)},
			`interface: input 0 is named "proj.weight", which is already the name of a parameter`},
		{"output named as the input", export.Interface{Inputs: []*onnxpb.ValueInfoProto{tokens("x", 3)}, Output: tokens("x", 3)},
			`interface: the output is named "x", which is already the name of a declared value`},
		{"strings", export.Interface{Inputs: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxpb.TensorProto_STRING, nil)}, Output: tokens("y", 3)},
			`interface: input 0 "x" has element type STRING, which Cast does not convert to float32`},
		{"rank 1", export.Interface{Inputs: []*onnxpb.ValueInfoProto{tokens("x", 1)}, Output: tokens("y", 3)},
			`interface: input "x" is declared of rank 1; the model reads it as a token stream (batch, seq, d)`},
		{"rank 4", export.Interface{Inputs: []*onnxpb.ValueInfoProto{tokens("x", 4)}, Output: tokens("y", 3)},
			`interface: input "x" is declared of rank 4`},
		{"output rank 1", export.Interface{Inputs: []*onnxpb.ValueInfoProto{tokens("x", 3)}, Output: tokens("y", 1)},
			`interface: output "y" is declared of rank 1; the model computes a token stream (batch, seq, d)`},
	} {
		_, err := export.Model(m, export.Options{Interface: &c.iface})
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), `export model "lin": `+c.want, c.name)
	}
}

// constInts reads the int64 values of a Constant node's output.
func constInts(t *testing.T, pb *onnxpb.ModelProto, value string) []int64 {
	t.Helper()
	for _, n := range pb.GetGraph().GetNode() {
		if n.GetOpType() == "Constant" && n.GetOutput()[0] == value {
			d, err := onnxio.TensorToDense(n.GetAttribute()[0].GetT())
			require.NoError(t, err)
			return d.Data().([]int64)
		}
	}
	t.Fatalf("no Constant writes %q", value)
	return nil
}

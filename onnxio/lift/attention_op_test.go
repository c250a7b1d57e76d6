package lift_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// exportConfigs are attnrun's export round-trip configs.
const exportConfigs = "../../testdata/export"

// TestLiftAttentionOpRoundTrip exports attnrun models at opsets 23 to 25,
// where the sdpa family is the Attention op (with its window attribute at
// 25), strips the metadata that
// would let Lift load them as they are, and lifts them by structure. The
// lifted model must have the expected layers and, exported again, give the
// same initializers (names and values) and the same outputs on the
// executor.
func TestLiftAttentionOpRoundTrip(t *testing.T) {
	for _, c := range []struct {
		config string
		layers []string
	}{
		{"sdpa", []string{"attention.sdpa"}},
		{"sdpa_gqa", []string{"attention.sdpa"}},
		{"sdpa_mqa", []string{"attention.sdpa"}},
		{"sdpa_softcap", []string{"attention.sdpa"}},
		{"sdpa_window", []string{"attention.sdpa"}},
		{"sdpa_window_centred", []string{"attention.sdpa"}},
		{"sdpa_rope", []string{"attention.sdpa", "attention.sdpa"}},
		{"sdpa_alibi", []string{"attention.sdpa"}},
		{"sdpa_qk_norm", []string{"attention.sdpa"}},
		{"gpt2_block", []string{"position.learned", "norm.layer", "attention.sdpa", "nn.add", "norm.layer", "nn.mlp", "nn.add", "norm.layer"}},
		{"llama_block", []string{"norm.rms", "attention.sdpa", "nn.add", "norm.rms", "nn.mlp", "nn.add"}},
		{"mlp", []string{"nn.mlp", "nn.mlp"}},
		{"mlp_gated", []string{"nn.mlp", "nn.mlp"}},
		{"norm_rms", []string{"nn.linear", "norm.rms"}},
		{"multi/sdpa_keep_mask", []string{"attention.sdpa"}},
		{"multi/sdpa_additive", []string{"attention.sdpa"}},
		{"multi/sdpa_cross_bottom_right", []string{"attention.sdpa"}},
		{"multi/sdpa_cross_top_left", []string{"attention.sdpa"}},
		{"multi/sdpa_cross_padding", []string{"attention.sdpa"}},
		{"multi/sdpa_everything", []string{"attention.sdpa"}},
		{"multi/sdpa_alibi_additive", []string{"attention.sdpa"}},
		{"multi/sdpa_cross_window_top_left", []string{"attention.sdpa"}},
		{"multi/sdpa_cross_window_bottom_right", []string{"attention.sdpa"}},
	} {
		for _, opset := range []int{23, 24, 25} {
			t.Run(fmt.Sprintf("%s/opset%d", c.config, opset), func(t *testing.T) {
				m, inputs := roundTripModel(t, c.config)
				first, err := export.Model(m, export.Options{Opset: opset})
				require.NoError(t, err)
				stripped := proto.Clone(first).(*onnxpb.ModelProto)
				stripped.MetadataProps = nil
				require.False(t, lift.IsAttnrun(stripped))

				res, err := lift.Lift(stripped)
				require.NoError(t, err, "%v", res)
				require.NotNil(t, res.Model)
				assert.False(t, res.Attnrun)
				assert.Equal(t, c.layers, layerTypes(res.Config), res.Config)

				second, err := export.Model(res.Model, export.Options{Opset: opset})
				require.NoError(t, err, res.Config)
				assert.Equal(t, initializers(t, first), initializers(t, second), res.Config)
				for seed := range uint64(2) {
					want := runExport(t, first, inputs(seed))
					got := runExport(t, second, inputs(seed))
					assertSameOutput(t, want, got)
				}
			})
		}
	}
}

// A lifted Attention op says what it assumed, and reads the rotary base
// from the caches.
func TestLiftAttentionOpNotes(t *testing.T) {
	m, _ := roundTripModel(t, "sdpa_rope")
	pb, err := export.Model(m, export.Options{Opset: 23})
	require.NoError(t, err)
	pb.MetadataProps = nil
	res, err := lift.Lift(pb)
	require.NoError(t, err)
	assert.Contains(t, res.Notes, "rope_base 10000 read from the cos and sin caches")
	// attn_gptj rotates one pair per head: its base cannot be read (and
	// does not matter); the lift says so.
	assert.Contains(t, res.Notes, "one rotating pair turns by its position whatever the base: rope_base is left at 10000")
	assert.Contains(t, res.Config, "rope: interleaved, rope_rotary_dim: 2")

	m, err = models.Parse([]byte(`
name: rope-base
layers:
  - {name: attn, type: attention.sdpa, d: 12, num_heads: 2, causal: true, rope: half, rope_base: 500, rope_rotary_dim: 4}
`), "rope-base.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(3))
	pb, err = export.Model(m, export.Options{Opset: 23})
	require.NoError(t, err)
	pb.MetadataProps = nil
	res, err = lift.Lift(pb)
	require.NoError(t, err)
	assert.Contains(t, res.Config, "rope: half, rope_base: 500, rope_rotary_dim: 4")
	assert.Contains(t, res.Notes, "rope_base 500 read from the cos and sin caches")
}

// What the Attention op lifter cannot lift it names, rather than lifting
// it wrong.
func TestLiftAttentionOpRefusals(t *testing.T) {
	// A KV cache kept in the graph: the present_key output is returned.
	m, _ := roundTripModel(t, "sdpa")
	pb, err := export.Model(m, export.Options{Opset: 23})
	require.NoError(t, err)
	pb.MetadataProps = nil
	for _, n := range pb.GetGraph().GetNode() {
		if n.GetOpType() == "Attention" {
			n.Output = append(n.Output, "present_key", "present_value")
		}
	}
	pb.Graph.Output = append(pb.Graph.Output, onnxio.TensorValueInfo("present_key", onnxio.Float, nil))
	_, err = lift.Lift(pb)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "its output 1 (present_key) is used; attention.sdpa returns only Y")

	// nn.MultiheadAttention's key padding mask (B, S) is unsqueezed to
	// (B, 1, 1, S) before it reaches the op, where attention.sdpa's mask
	// input broadcasts from the right: refused, not misread.
	m, err = models.Parse([]byte(`
name: kpm
inputs: [x, key_padding_mask]
layers:
  - {name: attn, type: attention.torch_mha, inputs: [x, key_padding_mask], embed_dim: 8, num_heads: 2, batch_first: true, key_padding_mask: float, masked_rows: zeros}
`), "kpm.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(3))
	pb, err = export.Model(m, export.Options{Opset: 23})
	require.NoError(t, err)
	pb.MetadataProps = nil
	_, err = lift.Lift(pb)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `the mask input "key_padding_mask" of shape (2, 5) is reshaped before it masks the scores ((2, 1, 5, 5))`)
}

var (
	singleInputLine = regexp.MustCompile(`(?m)^# input: \[(\d+), (\d+), (\d+)\]$`)
	sizesLine       = regexp.MustCompile(`(?m)^# sizes: (.*)$`)
	namedInputLine  = regexp.MustCompile(`(?m)^# input: (\w+) \[([^\]]*)\](?: (\w+))?$`)
)

// roundTripModel loads an export config with random weights, and a
// function that makes random inputs for it (bool masks as 0 and 1).
func roundTripModel(t *testing.T, config string) (*models.Model, func(seed uint64) map[string]*tensor.Dense) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(exportConfigs, config+".yaml"))
	require.NoError(t, err)
	m, err := models.Parse(data, config+".yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	rng := rand.New(rand.NewPCG(9, 9))
	for _, p := range m.Params() {
		for i, d := 0, p.Value.Data().([]float32); i < len(d); i++ {
			d[i] = float32(0.3 * rng.NormFloat64())
		}
	}
	type spec struct {
		name, kind string
		shape      []int
	}
	var specs []spec
	if s := singleInputLine.FindStringSubmatch(string(data)); s != nil {
		shape := make([]int, 3)
		for i := range shape {
			shape[i], _ = strconv.Atoi(s[i+1])
		}
		specs = append(specs, spec{name: "x", shape: shape})
	} else {
		sizes := map[string]int{}
		for _, kv := range strings.Fields(sizesLine.FindStringSubmatch(string(data))[1]) {
			k, v, _ := strings.Cut(kv, "=")
			sizes[k], _ = strconv.Atoi(v)
		}
		for _, in := range namedInputLine.FindAllStringSubmatch(string(data), -1) {
			var shape []int
			for _, d := range strings.Split(in[2], ", ") {
				n, err := strconv.Atoi(d)
				if err != nil {
					n = sizes[d]
				}
				shape = append(shape, n)
			}
			specs = append(specs, spec{name: in[1], kind: in[3], shape: shape})
		}
	}
	return m, func(seed uint64) map[string]*tensor.Dense {
		rng := rand.New(rand.NewPCG(seed, 5))
		feeds := map[string]*tensor.Dense{}
		for _, s := range specs {
			n := 1
			for _, d := range s.shape {
				n *= d
			}
			v := make([]float32, n)
			for i := range v {
				if s.kind == "bool" {
					if rng.Float64() < 0.5 {
						v[i] = 1
					}
				} else {
					v[i] = float32(rng.NormFloat64())
				}
			}
			feeds[s.name] = tensor.New(tensor.WithShape(s.shape...), tensor.WithBacking(v))
		}
		return feeds
	}
}

// initializers lists a model's initializers as "name shape values".
func initializers(t *testing.T, m *onnxpb.ModelProto) []string {
	t.Helper()
	var out []string
	for _, tp := range m.GetGraph().GetInitializer() {
		d, err := onnxio.TensorToDense(tp)
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%s %v %v", tp.GetName(), d.Shape(), d.Data()))
	}
	slices.Sort(out)
	return out
}

// runExport runs an export on the executor and returns its output y.
func runExport(t *testing.T, m *onnxpb.ModelProto, feeds map[string]*tensor.Dense) *tensor.Dense {
	t.Helper()
	g, err := exec.New(m)
	require.NoError(t, err)
	outs, err := g.Run(feeds)
	require.NoError(t, err)
	return outs[export.OutputName]
}

// assertSameOutput compares two runs at 1e-5 relative, 1e-6 absolute.
func assertSameOutput(t *testing.T, want, got *tensor.Dense) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape())
	w, g := want.Data().([]float32), got.Data().([]float32)
	for i := range w {
		if math.IsNaN(float64(w[i])) && math.IsNaN(float64(g[i])) {
			continue
		}
		require.InDelta(t, w[i], g[i], 1e-6+1e-5*math.Abs(float64(w[i])), "element %d", i)
	}
}

// The 4-D form of the Attention op (heads split by Reshape and Transpose,
// RotaryEmbedding on the heads), as PyTorch 2.x exports
// scaled_dot_product_attention: testdata/attention_op.py writes it with
// NumPy's output. It lifts to attention.sdpa with grouped-query attention,
// RoPE and the scale, and gives NumPy's numbers.
func TestLiftAttentionOp4D(t *testing.T) {
	dir := filepath.Join("testdata", "attention_op_4d")
	m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(m)
	require.NoError(t, err)
	assert.Contains(t, res.Config, "{name: attn, type: attention.sdpa, d: 16, num_heads: 4, num_kv_heads: 2, qkv_bias: true, causal: true, scale: 0.4, rope: half}")
	checkDataSets(t, dir, res)
}

// Opset 25's window attributes in the forms attnrun does not write: a
// right_window_size of 0 is the causal frontier (is_causal dropped), and
// is_causal with a right_window_size is the same window; what
// attention.sdpa cannot say (a window looking ahead, or no causal frontier)
// is refused.
func TestLiftAttentionOpWindowAttributes(t *testing.T) {
	m, inputs := roundTripModel(t, "sdpa_window") // causal, window 3
	first, err := export.Model(m, export.Options{Opset: 25})
	require.NoError(t, err)
	first.MetadataProps = nil
	edited := func(attrs ...*onnxpb.AttributeProto) *onnxpb.ModelProto {
		pb := proto.Clone(first).(*onnxpb.ModelProto)
		for _, n := range pb.GetGraph().GetNode() {
			if n.GetOpType() == "Attention" {
				n.Attribute = slices.DeleteFunc(n.Attribute, func(a *onnxpb.AttributeProto) bool {
					return a.GetName() == "is_causal" || a.GetName() == "left_window_size"
				})
				n.Attribute = append(n.Attribute, attrs...)
			}
		}
		return pb
	}
	intAttr := func(name string, v int64) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
	}
	for _, c := range []struct {
		name  string
		attrs []*onnxpb.AttributeProto
	}{
		{"right 0 for is_causal", []*onnxpb.AttributeProto{intAttr("left_window_size", 2), intAttr("right_window_size", 0)}},
		{"is_causal with right 4", []*onnxpb.AttributeProto{intAttr("is_causal", 1), intAttr("left_window_size", 2), intAttr("right_window_size", 4)}},
	} {
		pb := edited(c.attrs...)
		res, err := lift.Lift(pb)
		require.NoError(t, err, c.name)
		assert.Contains(t, res.Config, "causal: true, window: 3", c.name)
		second, err := export.Model(res.Model, export.Options{Opset: 25})
		require.NoError(t, err)
		assertSameOutput(t, runExport(t, pb, inputs(1)), runExport(t, second, inputs(1)))
	}
	for _, c := range []struct {
		name  string
		attrs []*onnxpb.AttributeProto
		err   string
	}{
		{"looks ahead", []*onnxpb.AttributeProto{intAttr("left_window_size", 2), intAttr("right_window_size", 1)}, "right_window_size 1 lets queries see keys ahead of them"},
		{"not causal", []*onnxpb.AttributeProto{intAttr("left_window_size", 2)}, "left_window_size 2 without a causal frontier"},
	} {
		_, err := lift.Lift(edited(c.attrs...))
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.err, c.name)
	}
}

package layers_test

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
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// modernIDs are the layers of issue 6, each exported by its own
// *_onnx.go file.
var modernIDs = []string{
	"attention.sdpa", "attention.torch_mha", "position.sinusoidal", "position.rope",
	"position.alibi", "norm.layer", "norm.rms", "activation.gelu", "nn.mlp",
	"attention.scaled_dot_product", "position.padded",
}

// multiInputConfigs are the round-trip configs with several inputs (masks,
// memories): lines "# sizes: B=2 T=6 S=4" and one "# input: NAME [dims]
// KIND" per model input, dims numbers or the sizes' letters, KIND tokens
// (the default: normal values), bool (0 or 1), float (normal values) or
// idsN (int64 ids in [0, N), for inputs declared int64).
const multiInputConfigs = "../testdata/export/multi"

func TestModernLayersExport(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range loadModernConfigs(t) {
		for _, l := range c.model.Layers() {
			covered[l.Type] = true
		}
	}
	for _, id := range modernIDs {
		info, err := registry.Lookup(id)
		require.NoError(t, err)
		_, ok := info.New().(registry.Exporter)
		assert.True(t, ok, "%s does not implement registry.Exporter", id)
		assert.True(t, covered[id], "no round-trip config uses %s", id)
		_, err = info.New().(registry.Exporter).ExportONNX(nil, []string{"x"})
		assert.ErrorContains(t, err, "before a successful Validate", id)
	}
}

// Every config that uses a modern layer, with random weights (norms are not
// ones, biases not zeros), exports at every opset and gives on the
// executor what Forward gives, NaN where Forward has NaN, on two sets of
// inputs of different sizes (batch, length, memory length).
func TestModernExportsMatchForward(t *testing.T) {
	for _, c := range loadModernConfigs(t) {
		for opset := export.MinOpset; opset <= export.MaxOpset; opset++ {
			t.Run(fmt.Sprintf("%s/opset%d", c.name, opset), func(t *testing.T) {
				g := exportAndLoad(t, c.model, opset)
				for variant := range 2 {
					inputs := c.inputs(variant, uint64(100*opset+variant))
					want, err := c.model.Forward(nil, inputs...)
					require.NoError(t, err)
					feeds := map[string]*tensor.Dense{}
					for i, in := range c.model.Config().Inputs {
						feeds[in] = inputs[i]
					}
					outs, err := g.Run(feeds)
					require.NoError(t, err)
					assertSameNaN(t, want, outs["y"], fmt.Sprintf("inputs %d", variant))
				}
			})
		}
	}
}

// Mask inputs are declared float32 with the rank their layer reads, named
// after the input; token streams stay (batch, seq, d).
func TestExportDeclaresMaskInputs(t *testing.T) {
	want := map[string]string{
		"sdpa_keep_mask":          "x [batch seq 8], mask [mask_batch mask_heads mask_queries mask_keys]",
		"torch_mha_seq_first":     "query [seq batch 8], memory [seq_memory batch 8], key_padding_mask [key_padding_mask_batch key_padding_mask_keys], attn_mask [attn_mask_queries attn_mask_keys]",
		"torch_mha_kdim_vdim":     "query [batch seq 8], key [batch seq_key 6], value [batch seq_value 3], key_padding_mask [key_padding_mask_batch key_padding_mask_keys], attn_mask [attn_mask_queries attn_mask_keys]",
		"sdpa_cross_padding":      "x [batch seq 8], memory [batch seq_memory 8], padding [padding_batch padding_heads padding_queries padding_keys]",
		"decoder_block":           "x [batch seq 12], memory [batch seq_memory 10], memory_padding [memory_padding_batch memory_padding_keys]",
		"sdpa_alibi_additive":     "x [batch seq 9], bias [bias_batch bias_heads bias_queries bias_keys]",
		"torch_mha_nan_rows":      "x [batch seq 8], key_padding_mask [key_padding_mask_batch key_padding_mask_keys]",
		"sdpa_drop_mask_nan":      "x [batch seq 8], mask [mask_batch mask_heads mask_queries mask_keys]",
		"sdpa_cross_top_left":     "x [batch seq 8], memory [batch seq_memory 6]",
		"torch_mha_zeros":         "x [batch seq 8], key_padding_mask [key_padding_mask_batch key_padding_mask_keys], attn_mask [attn_mask_queries attn_mask_keys]",
		"sdpa_everything":         "x [batch seq 8], keep [keep_batch keep_heads keep_queries keep_keys]",
		"sdpa_additive":           "x [batch seq 8], bias [bias_batch bias_heads bias_queries bias_keys]",
		"sdpa_cross_bottom_right": "x [batch seq 8], memory [batch seq_memory 6]",
	}
	for _, c := range loadModernConfigs(t) {
		w, ok := want[c.name]
		if !ok {
			continue
		}
		delete(want, c.name)
		pb, err := export.Model(c.model, export.Options{})
		require.NoError(t, err)
		var got []string
		for _, vi := range pb.GetGraph().GetInput() {
			assert.Equal(t, onnxio.Float, onnxio.ElemType(vi), c.name)
			got = append(got, vi.GetName()+" "+onnxio.FormatDims(onnxio.Dims(vi)))
		}
		assert.Equal(t, w, strings.Join(got, ", "), c.name)
	}
	assert.Empty(t, want, "configs not found")
}

// From opset 23 on the sdpa family is the Attention op (and RoPE the
// RotaryEmbedding op), except where the op cannot say what the layer does;
// before, neither op appears. LayerNormalization appears from opset 17.
func TestModernExportOps(t *testing.T) {
	for _, c := range []struct {
		config                          string
		attention, rotary, softmax, lns int // at opset 23
	}{
		{"sdpa", 1, 0, 0, 0},
		{"sdpa_gqa", 1, 0, 0, 0},
		{"sdpa_softcap", 1, 0, 0, 0},
		{"sdpa_window", 1, 0, 0, 0},
		{"sdpa_rope", 2, 4, 0, 0},
		{"position_rope", 0, 2, 0, 0},
		{"torch_mha_extras", 1, 0, 0, 0},
		{"gpt2_block", 1, 0, 0, 3},
		{"llama_block", 1, 2, 0, 0},
		{"multi/sdpa_everything", 1, 2, 0, 0},
		{"multi/sdpa_cross_bottom_right", 1, 0, 0, 0},
		{"multi/torch_mha_zeros", 1, 0, 0, 0},
		{"multi/decoder_block", 1, 0, 1, 3}, // nn.MultiheadAttention's NaN rows need the Softmax
		{"multi/sdpa_drop_mask_nan", 0, 0, 1, 0},
		{"multi/torch_mha_nan_rows", 0, 0, 1, 0},
	} {
		m := loadModernConfig(t, filepath.Join(exportConfigs, c.config+".yaml")).model
		ops := opTypes(exportModel(t, m, 23))
		assert.Equal(t, c.attention, countOps(ops, "Attention"), "%s: %v", c.config, ops)
		assert.Equal(t, c.rotary, countOps(ops, "RotaryEmbedding"), "%s: %v", c.config, ops)
		assert.Equal(t, c.softmax, countOps(ops, "Softmax"), "%s: %v", c.config, ops)
		assert.Equal(t, c.lns, countOps(ops, "LayerNormalization"), "%s: %v", c.config, ops)
		for _, opset := range []int{13, 22} {
			ops := opTypes(exportModel(t, m, opset))
			assert.Zero(t, countOps(ops, "Attention")+countOps(ops, "RotaryEmbedding"), "%s opset %d: %v", c.config, opset, ops)
		}
	}
	m := loadModernConfig(t, filepath.Join(exportConfigs, "norm_layer.yaml")).model
	assert.Equal(t, 2, countOps(opTypes(exportModel(t, m, 17)), "LayerNormalization"))
	ops := opTypes(exportModel(t, m, 16))
	assert.Zero(t, countOps(ops, "LayerNormalization"))
	assert.Equal(t, 4, countOps(ops, "ReduceMean"), "%v", ops)
}

// The Attention op's attributes say what the layer does: heads, causal,
// scale only when it is not the default, softcap.
func TestSDPAAttentionOpAttributes(t *testing.T) {
	for _, c := range []struct {
		config string
		attrs  string
	}{
		{"sdpa", "kv_num_heads=2 q_num_heads=2"},
		{"sdpa_gqa", "is_causal=1 kv_num_heads=2 q_num_heads=4"},
		{"sdpa_softcap", "is_causal=1 kv_num_heads=2 q_num_heads=2 scale=0.9 softcap=1.5"},
		{"multi/sdpa_cross_top_left", "is_causal=1 kv_num_heads=2 q_num_heads=2"},
		// Bottom-right alignment is in the mask: ONNX's is_causal is top-left.
		{"multi/sdpa_cross_bottom_right", "kv_num_heads=2 q_num_heads=2"},
	} {
		m := loadModernConfig(t, filepath.Join(exportConfigs, c.config+".yaml")).model
		for _, n := range exportModel(t, m, 24).GetGraph().GetNode() {
			if n.GetOpType() != "Attention" {
				continue
			}
			var attrs []string
			for _, a := range n.GetAttribute() {
				v := strconv.FormatInt(a.GetI(), 10)
				if a.GetType() == onnxpb.AttributeProto_FLOAT {
					v = strconv.FormatFloat(float64(a.GetF()), 'g', -1, 32)
				}
				attrs = append(attrs, a.GetName()+"="+v)
			}
			slices.Sort(attrs)
			assert.Equal(t, c.attrs, strings.Join(attrs, " "), c.config)
		}
	}
}

// Exports write no bool tensor into the file (masks are computed), so
// that they decode in onnx-go, and no double initializer either.
func TestModernExportsStoreFloatsOnly(t *testing.T) {
	for _, c := range loadModernConfigs(t) {
		for _, opset := range []int{13, 23} {
			for _, n := range exportModel(t, c.model, opset).GetGraph().GetNode() {
				for _, a := range n.GetAttribute() {
					if tp := a.GetT(); tp != nil {
						dt := onnxio.DataType(tp.GetDataType())
						assert.Contains(t, []onnxio.DataType{onnxio.Float, onnxio.Int64}, dt, "%s: constant %s", c.name, n.GetName())
					}
				}
			}
		}
	}
}

// A model input read as a mask by one layer and as tokens by another
// cannot be declared, and a width for a mask is refused.
func TestExportMaskInputMisuse(t *testing.T) {
	m, err := models.Parse([]byte(`
name: both
inputs: [x, mask]
layers:
  - {name: attn, type: attention.sdpa, d: 4, num_heads: 1, mask: additive, inputs: [x, mask]}
  - {name: proj, type: nn.linear, d_in: 4, d_out: 4, inputs: [mask]}
`), "both.yaml")
	require.NoError(t, err)
	_, err = export.Model(m, export.Options{})
	assert.ErrorContains(t, err, `input "mask" is a mask (batch, heads, queries, keys) for layer "attn" but a token stream (batch, seq, d) for layer "proj"`)

	c := loadModernConfig(t, filepath.Join(multiInputConfigs, "sdpa_keep_mask.yaml"))
	_, err = export.Model(c.model, export.Options{Widths: map[string]int{"mask": 3}})
	assert.ErrorContains(t, err, `a width is given for "mask", which is an attention mask`)
}

// modernConfig is a round-trip config with the shapes of its inputs.
type modernConfig struct {
	name   string
	model  *models.Model
	inputs func(variant int, seed uint64) []*tensor.Dense
}

var (
	sizesLine      = regexp.MustCompile(`(?m)^# sizes: (.*)$`)
	namedInputLine = regexp.MustCompile(`(?m)^# input: (\w+) \[([^\]]*)\](?: (\w+))?$`)
)

// loadModernConfigs loads every multi-input config and every single-input
// config that uses a modern layer.
func loadModernConfigs(t *testing.T) []modernConfig {
	t.Helper()
	single, err := filepath.Glob(filepath.Join(exportConfigs, "*.yaml"))
	require.NoError(t, err)
	multi, err := filepath.Glob(filepath.Join(multiInputConfigs, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, multi)
	var out []modernConfig
	for _, p := range append(single, multi...) {
		c := loadModernConfig(t, p)
		for _, l := range c.model.Layers() {
			if slices.Contains(modernIDs, l.Type) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// loadModernConfig reads a config, initializes it with random weights and
// reads its input lines: the named form, or a single "# input: [B, T, d]".
func loadModernConfig(t *testing.T, path string) modernConfig {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := models.Parse(data, filepath.Base(path))
	require.NoError(t, err)
	require.NoError(t, m.Init(123))
	randomizeParams(m, 5)

	sizes := map[string]int{}
	type spec struct {
		dims []string
		kind string
	}
	var specs []spec
	if match := inputLine.FindStringSubmatch(string(data)); match != nil {
		sizes["B"], _ = strconv.Atoi(match[1])
		sizes["T"], _ = strconv.Atoi(match[2])
		specs = []spec{{dims: []string{"B", "T", match[3]}, kind: "tokens"}}
	} else {
		s := sizesLine.FindStringSubmatch(string(data))
		require.NotNil(t, s, "%s has neither '# input: [B, T, d]' nor '# sizes:'", path)
		for _, kv := range strings.Fields(s[1]) {
			k, v, ok := strings.Cut(kv, "=")
			require.True(t, ok, "%s: size %q", path, kv)
			sizes[k], err = strconv.Atoi(v)
			require.NoError(t, err, path)
		}
		for _, match := range namedInputLine.FindAllStringSubmatch(string(data), -1) {
			kind := match[3]
			if kind == "" {
				kind = "tokens"
			}
			specs = append(specs, spec{dims: strings.Split(match[2], ", "), kind: kind})
		}
		require.Len(t, specs, len(m.Config().Inputs), "%s: one '# input:' line per model input", path)
	}
	name := strings.TrimSuffix(filepath.Base(path), ".yaml")
	return modernConfig{name: name, model: m, inputs: func(variant int, seed uint64) []*tensor.Dense {
		rng := rand.New(rand.NewPCG(seed, 11))
		xs := make([]*tensor.Dense, len(specs))
		for i, s := range specs {
			shape := make([]int, len(s.dims))
			for j, d := range s.dims {
				if n, err := strconv.Atoi(d); err == nil {
					shape[j] = n
					continue
				}
				shape[j] = sizes[d]
				if variant == 1 { // another batch size and length
					shape[j] = map[string]int{"B": sizes[d] + 1, "T": max(sizes[d]-1, 1), "S": sizes[d] + 2}[d]
				}
			}
			xs[i] = randomValues(rng, shape, s.kind)
		}
		return xs
	}}
}

// randomValues fills a tensor: normal values, 0 and 1 for a bool mask, or
// for kind idsN int64 ids uniform in [0, N) (token ids, an integer mask).
func randomValues(rng *rand.Rand, shape []int, kind string) *tensor.Dense {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if bound, ok := strings.CutPrefix(kind, "ids"); ok {
		high, err := strconv.Atoi(bound)
		if err != nil || high <= 0 {
			panic(fmt.Sprintf("input kind %q: want idsN with N > 0", kind))
		}
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = rng.Int64N(int64(high))
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(ids))
	}
	data := make([]float32, n)
	for i := range data {
		if kind == "bool" {
			if rng.Float64() < 0.5 {
				data[i] = 1
			}
			continue
		}
		data[i] = float32(rng.NormFloat64())
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// randomizeParams draws every parameter from N(0, 0.09), so that norms do
// not scale by ones nor biases add zeros.
func randomizeParams(m *models.Model, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, p := range m.Params() {
		data := p.Value.Data().([]float32)
		for i := range data {
			data[i] = float32(0.3 * rng.NormFloat64())
		}
	}
}

// exportModel exports at an opset.
func exportModel(t *testing.T, m *models.Model, opset int) *onnxpb.ModelProto {
	t.Helper()
	pb, err := export.Model(m, export.Options{Opset: opset})
	require.NoError(t, err)
	return pb
}

// exportAndLoad exports at an opset, encodes, decodes and prepares the
// graph for the executor.
func exportAndLoad(t *testing.T, m *models.Model, opset int) *exec.Graph {
	t.Helper()
	data, err := onnxio.EncodeModel(exportModel(t, m, opset))
	require.NoError(t, err)
	pb, err := onnxio.DecodeModel(data, "", onnxio.DefaultLimits)
	require.NoError(t, err)
	g, err := exec.New(pb)
	require.NoError(t, err)
	return g
}

// assertSameNaN compares at 1e-5 relative and 1e-6 absolute; NaN must be
// where want has NaN.
func assertSameNaN(t *testing.T, want, got *tensor.Dense, what string) {
	t.Helper()
	require.NotNil(t, got, what)
	require.Equal(t, []int(want.Shape()), []int(got.Shape()), what)
	w, g := want.Data().([]float32), got.Data().([]float32)
	for i := range w {
		wn, gn := math.IsNaN(float64(w[i])), math.IsNaN(float64(g[i]))
		if wn || gn {
			require.Equal(t, wn, gn, "%s: element %d is %g, Forward %g", what, i, g[i], w[i])
			continue
		}
		diff := math.Abs(float64(g[i]) - float64(w[i]))
		require.LessOrEqual(t, diff, 1e-6+1e-5*math.Abs(float64(w[i])), "%s: element %d is %g, Forward %g", what, i, g[i], w[i])
	}
}

package lift_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// The fixtures of testdata/export_kvcache.py.
const (
	kvcacheBlock   = "testdata/kvcache_block_dynamic"
	kvcacheDecoder = "testdata/kvcache_decoder_dynamic"
	kvcacheRoPE    = "testdata/kvcache_rope_dynamic"
)

// runCacheOn runs a lifted decoder on a test-data set's inputs: the
// model's inputs, then the past inputs, empty for no past; the new tokens
// all at once (chunk 0) or chunk at a time.
func runCacheOn(t *testing.T, res *lift.Result, inputs []*array.Array, chunk int) []*tensor.Dense {
	t.Helper()
	own := len(res.Model.Config().Inputs)
	var args []*tensor.Dense
	for _, a := range inputs[:own] {
		d, err := a.Dense()
		require.NoError(t, err)
		args = append(args, d)
	}
	past := map[string]*tensor.Dense{}
	for i, name := range lift.CacheInputs(res.Outputs) {
		if a := inputs[own+i]; a.Len() > 0 {
			d, err := a.Dense()
			require.NoError(t, err)
			past[name] = d
		}
	}
	got, err := lift.RunCache(res.Model, res.Outputs, &registry.Run{Context: context.Background()}, args, past, chunk)
	require.NoError(t, err)
	return got
}

// TestLiftKVCache lifts graphs that take their KV cache as
// past_key_values inputs and return it extended as present outputs: a
// decoder block (Hugging Face's RMSNorm, causal attention, Gemma's gated
// tanh-GELU MLP) and a decoder of token ids around it (Gemma's scaled
// embeddings, final norm, LM head and logit softcapping); and Llama's
// attention (rotate_half RoPE from inv_freq, repeat_kv for 2 KV heads of
// 4, no biases), which becomes attention.sdpa with rope: half and
// num_kv_heads: 2, its cache holding the 2 KV heads. The lift reads
// each graph without its past, maps each present output to the keys or
// values of the attention layer, and the lifted model, resumed from the
// past, gives PyTorch's outputs and present caches within 1e-5 relative,
// 1e-6 absolute with a past of 3 tokens and with none, stepping the new
// tokens all at once, one by one and 3 at a time. The written file
// declares the source's interface and loads back with its cache outputs.
func TestLiftKVCache(t *testing.T) {
	for _, c := range []struct {
		dir    string
		layers []string
		output lift.Output
		attn   string
	}{
		{kvcacheBlock, []string{"norm.rms", "attention.multihead", "nn.add", "norm.rms", "nn.mlp", "nn.add"}, lift.Output{Name: "y", Layer: "add_2"}, "attn"},
		{kvcacheDecoder, []string{"nn.embedding", "norm.rms", "attention.multihead", "nn.add", "norm.rms", "nn.mlp", "nn.add", "norm.rms", "nn.linear", "activation.softcap"},
			lift.Output{Name: "logits", Layer: "softcap"}, "block"},
		{kvcacheRoPE, []string{"attention.sdpa"}, lift.Output{Name: "y", Layer: "attn"}, "attn"},
	} {
		t.Run(filepath.Base(c.dir), func(t *testing.T) { liftKVCache(t, c.dir, c.layers, c.output, c.attn) })
	}
}

func liftKVCache(t *testing.T, dir string, layers []string, output lift.Output, attn string) {
	src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(src)
	require.NoError(t, err, "%v", err)
	assert.Equal(t, layers, layerTypes(res.Config), res.Config)
	if dir == kvcacheRoPE {
		assert.Contains(t, res.Config, "num_heads: 4, num_kv_heads: 2, head_dim: 8, qkv_bias: false, out_bias: false, causal: true, rope: half}")
	}
	assert.Equal(t, []lift.Output{
		output,
		{Name: "present.0.key", Layer: attn, Cache: "keys", Past: "past_key_values.0.key"},
		{Name: "present.0.value", Layer: attn, Cache: "values", Past: "past_key_values.0.value"},
	}, res.Outputs)
	assert.Equal(t, []string{"past_key_values.0.key", "past_key_values.0.value"}, lift.CacheInputs(res.Outputs))

	for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
		in, want, err := onnxio.ReadDataSetArrays(filepath.Join(dir, set))
		require.NoError(t, err)
		for _, chunk := range []int{0, 1, 3} {
			got := runCacheOn(t, res, in, chunk)
			require.Len(t, got, len(want))
			for i, w := range want {
				wd, err := w.Dense()
				require.NoError(t, err)
				assertClose(t, wd, got[i], fmt.Sprintf("%s output %d %q (past of %d, chunk %d)", set, i, res.Outputs[i].Name, in[1].Shape[2], chunk))
			}
		}
	}

	// The keys and values told apart: swapped, the output changes.
	in, want, err := onnxio.ReadDataSetArrays(filepath.Join(dir, "test_data_set_0"))
	require.NoError(t, err)
	swapped := *res
	swapped.Outputs = []lift.Output{res.Outputs[0], res.Outputs[1], res.Outputs[2]}
	swapped.Outputs[1].Past, swapped.Outputs[2].Past = res.Outputs[2].Past, res.Outputs[1].Past
	wrong := runCacheOn(t, &swapped, in, 0)
	wd, err := want[0].Dense()
	require.NoError(t, err)
	assert.NotEqual(t, wd.Data(), wrong[0].Data())

	file, note, err := lift.Export(src, res, export.Options{})
	require.NoError(t, err)
	assert.Contains(t, note, "KV cache")
	requireSameInterface(t, src, file)
	m, outputs, err := lift.Load(file)
	require.NoError(t, err)
	assert.Equal(t, res.Outputs, outputs)
	assert.Equal(t, res.Config, string(m.Config().YAML))
}

// requireSameInterface checks that two files declare the same graph
// inputs and outputs: names, element types and dimensions.
func requireSameInterface(t *testing.T, want, got *onnxpb.ModelProto) {
	t.Helper()
	describe := func(vis []*onnxpb.ValueInfoProto) []string {
		var out []string
		for _, vi := range vis {
			out = append(out, fmt.Sprintf("%s %v %s", vi.GetName(), onnxio.ElemType(vi), onnxio.FormatDims(onnxio.Dims(vi))))
		}
		return out
	}
	require.Equal(t, describe(want.GetGraph().GetInput()), describe(got.GetGraph().GetInput()))
	require.Equal(t, describe(want.GetGraph().GetOutput()), describe(got.GetGraph().GetOutput()))
}

// TestLiftKVCacheIncremental decodes 6 tokens one at a time two ways, for
// each KV-cache fixture: the source graph on the executor, its present fed
// back as the next past; and the lifted model in one session
// (models.Model.Step), its attention layer keeping the cache. At every
// step the outputs and the session's cache equal the graph's within 1e-5
// relative, 1e-6 absolute.
func TestLiftKVCacheIncremental(t *testing.T) {
	for _, dir := range []string{kvcacheBlock, kvcacheDecoder, kvcacheRoPE} {
		t.Run(filepath.Base(dir), func(t *testing.T) { liftedStepsLikeGraph(t, dir) })
	}
}

func liftedStepsLikeGraph(t *testing.T, dir string) {
	src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(src)
	require.NoError(t, err)
	g, err := exec.New(src)
	require.NoError(t, err)
	s, err := res.Model.NewState()
	require.NoError(t, err)
	inputs, outputs := g.Inputs(), g.Outputs()
	pk := inputs[1].Shape
	const batch = 2
	k, err := array.New(array.Float32, batch, int(pk[1].Value), 0, int(pk[3].Value))
	require.NoError(t, err)
	v := k
	rng := rand.New(rand.NewPCG(7, 7))
	for step := range 6 {
		var x *tensor.Dense // one new token per sequence: an id, or a vector
		if inputs[0].DType == exec.DType(array.Int64) {
			ids := []int64{rng.Int64N(20), rng.Int64N(20)}
			x = tensor.New(tensor.WithShape(batch, 1), tensor.WithBacking(ids))
		} else {
			d := int(inputs[0].Shape[2].Value)
			vec := make([]float32, batch*d)
			for i := range vec {
				vec[i] = float32(rng.NormFloat64())
			}
			x = tensor.New(tensor.WithShape(batch, 1, d), tensor.WithBacking(vec))
		}
		xa, err := array.FromDense(x)
		require.NoError(t, err)
		outs, err := g.RunArrays(context.Background(), map[string]*array.Array{
			inputs[0].Name: xa, "past_key_values.0.key": k, "past_key_values.0.value": v})
		require.NoError(t, err)
		y, err := res.Model.Step(nil, s, x)
		require.NoError(t, err)
		kv, err := s.Cache(res.Outputs[1].Layer)
		require.NoError(t, err)
		for i, got := range []*tensor.Dense{y, kv.Keys, kv.Values} {
			want, err := outs[outputs[i].Name].Dense()
			require.NoError(t, err)
			assertClose(t, want, got, fmt.Sprintf("step %d %s", step, outputs[i].Name))
		}
		k, v = outs["present.0.key"], outs["present.0.value"]
	}
	assert.Equal(t, 6, s.Tokens())
}

// TestLiftKVCacheUnsplit: a cache whose batch dimension no other input
// declares cannot be given a length of 0 (its batch is unknown), so the
// graph is lifted with its past inputs (the probes tie the two batch
// dimensions), and the concatenation is refused as before the split.
func TestLiftKVCacheUnsplit(t *testing.T) {
	src, err := onnxio.ReadModel(filepath.Join(kvcacheBlock, "model.onnx"))
	require.NoError(t, err)
	for _, in := range src.GetGraph().GetInput()[1:] {
		in.GetType().GetTensorType().GetShape().GetDim()[0].Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "past_batch"}
	}
	_, err = lift.Lift(src)
	var unlifted *lift.UnliftedError
	require.ErrorAs(t, err, &unlifted)
	assert.Contains(t, err.Error(), "concatenates tensors of rank 4")
}

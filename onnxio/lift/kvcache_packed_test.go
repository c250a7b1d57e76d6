package lift_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// The fixtures of testdata/export_kvcache_packed.py.
const (
	packedGPT2  = "testdata/kvcache_packed_gpt2"
	packedSplit = "testdata/kvcache_packed_split"
	packedSlice = "testdata/kvcache_packed_slice"
)

// TestLiftPackedKVCache lifts graphs whose KV cache is packed in one past
// input and one present output: GPT-2's attention (past (2, B, H, P, hd)
// read by Gather, keys cached transposed, present torch.stack((k, v))) and
// two blocks sharing one past of four entries unbound by Split; a block
// whose past is sliced entry by entry (Slice, Squeeze). The present
// output stacks the layers' caches in the graph's order (Output.Stack);
// the lifted model, resumed from the packed past, gives PyTorch's output
// and present within 1e-5 relative, 1e-6 absolute, with a past of 3
// tokens and with none, stepping the new tokens all at once, one by one
// and 3 at a time; so does the written file, which declares the source's
// interface. Entries swapped, the output changes.
func TestLiftPackedKVCache(t *testing.T) {
	for _, c := range []struct {
		dir    string
		layers []string
		output lift.Output
		stack  []lift.StackedCache
	}{
		{packedGPT2, []string{"attention.multihead"}, lift.Output{Name: "y", Layer: "attn"},
			[]lift.StackedCache{{Layer: "attn", Cache: "keys"}, {Layer: "attn", Cache: "values"}}},
		{packedSplit, []string{"attention.multihead", "nn.add", "attention.multihead", "nn.add"}, lift.Output{Name: "y", Layer: "second_2"},
			[]lift.StackedCache{{Layer: "first", Cache: "keys"}, {Layer: "first", Cache: "values"}, {Layer: "second", Cache: "keys"}, {Layer: "second", Cache: "values"}}},
		{packedSlice, []string{"attention.multihead", "nn.add"}, lift.Output{Name: "y", Layer: "block_2"},
			[]lift.StackedCache{{Layer: "block", Cache: "keys"}, {Layer: "block", Cache: "values"}}},
	} {
		t.Run(filepath.Base(c.dir), func(t *testing.T) {
			src, err := onnxio.ReadModel(filepath.Join(c.dir, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(src)
			require.NoError(t, err, "%v", err)
			assert.Equal(t, c.layers, layerTypes(res.Config), res.Config)
			assert.Contains(t, res.Config, "causal: true")
			require.Equal(t, []lift.Output{c.output, {Name: "present", Layer: c.stack[0].Layer, Cache: "stack", Past: "past", Stack: c.stack}}, res.Outputs)
			assert.Equal(t, []string{"past"}, lift.CacheInputs(res.Outputs))

			file, note, err := lift.Export(src, res, export.Options{})
			require.NoError(t, err)
			assert.Contains(t, note, "KV cache")
			requireSameInterface(t, src, file)
			m, outputs, err := lift.Load(file)
			require.NoError(t, err)
			assert.Equal(t, res.Outputs, outputs)
			written := &lift.Result{Model: m, Outputs: outputs}

			for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
				in, want, err := onnxio.ReadDataSetArrays(filepath.Join(c.dir, set))
				require.NoError(t, err)
				for _, r := range []*lift.Result{res, written} {
					for _, chunk := range []int{0, 1, 3} {
						got := runCacheOn(t, r, in, chunk)
						require.Len(t, got, len(want))
						for i, w := range want {
							wd, err := w.Dense()
							require.NoError(t, err)
							assertClose(t, wd, got[i], fmt.Sprintf("%s output %q (past of %d, chunk %d)", set, res.Outputs[i].Name, in[1].Shape[3], chunk))
						}
					}
				}
			}

			in, want, err := onnxio.ReadDataSetArrays(filepath.Join(c.dir, "test_data_set_0"))
			require.NoError(t, err)
			swapped := *res
			swapped.Outputs = []lift.Output{res.Outputs[0], res.Outputs[1]}
			swapped.Outputs[1].Stack = append([]lift.StackedCache{c.stack[1], c.stack[0]}, c.stack[2:]...)
			wrong := runCacheOn(t, &swapped, in, 0)
			wd, err := want[0].Dense()
			require.NoError(t, err)
			assert.NotEqual(t, wd.Data(), wrong[0].Data())
		})
	}
}

// TestLiftPackedKVCacheSteps decodes 6 tokens one at a time two ways, for
// each packed fixture: the source graph on the executor, its present fed
// back as the next past; and the lifted model in one session
// (models.Model.Step), its attention layers keeping the caches. At every
// step the output equals the graph's, and each cache the session holds
// equals its entry of the graph's present, within 1e-5 relative, 1e-6
// absolute.
func TestLiftPackedKVCacheSteps(t *testing.T) {
	for _, dir := range []string{packedGPT2, packedSplit, packedSlice} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(src)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(7, 7))
			d := 16
			stepPackedLikeGraph(t, src, res, "x", 6, func() *tensor.Dense {
				vec := make([]float32, 2*d)
				for i := range vec {
					vec[i] = float32(rng.NormFloat64())
				}
				return tensor.New(tensor.WithShape(2, 1, d), tensor.WithBacking(vec))
			})
		})
	}
}

// TestLiftPackedKVCacheRealGPT2 steps ONNX Runtime's 12-layer GPT-2 test
// model (gpt2_tiny12_past: input_ids (batch, 1), twelve packed pasts, keys
// cached transposed) token by token as TestLiftPackedKVCacheSteps does.
func TestLiftPackedKVCacheRealGPT2(t *testing.T) {
	dir := "../../../shared/realworld/ort-graphs/gpt2_tiny12_past"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s is absent (it comes with the project's shared material): %v", dir, err)
	}
	src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(src)
	require.NoError(t, err)
	require.Len(t, res.Outputs, 13)
	for i, o := range res.Outputs[1:] {
		assert.Equal(t, fmt.Sprintf("past_%d", i), o.Past)
		assert.Len(t, o.Stack, 2)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	stepPackedLikeGraph(t, src, res, "input_ids", 5, func() *tensor.Dense {
		return tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]int64{rng.Int64N(20), rng.Int64N(20)}))
	})
}

// stepPackedLikeGraph runs src on the executor and res's model in one
// session for steps tokens of 2 sequences, next giving each step's input
// (the graph's only input besides its pasts), and compares the outputs
// and, entry by entry, the present caches with the session's.
func stepPackedLikeGraph(t *testing.T, src *onnxpb.ModelProto, res *lift.Result, input string, steps int, next func() *tensor.Dense) {
	t.Helper()
	g, err := exec.New(src)
	require.NoError(t, err)
	s, err := res.Model.NewState()
	require.NoError(t, err)
	past := map[string]*array.Array{}
	for _, info := range g.Inputs() {
		if info.Name == input {
			continue
		}
		entries, heads, hd := info.Shape[0].Value, info.Shape[2].Value, info.Shape[4].Value
		past[info.Name], err = array.New(array.Float32, int(entries), 2, int(heads), 0, int(hd))
		require.NoError(t, err)
	}
	for step := range steps {
		x := next()
		xa, err := array.FromDense(x)
		require.NoError(t, err)
		feeds := map[string]*array.Array{input: xa}
		for name, a := range past {
			feeds[name] = a
		}
		outs, err := g.RunArrays(context.Background(), feeds)
		require.NoError(t, err)
		y, err := res.Model.Step(&registry.Run{Context: context.Background()}, s, x)
		require.NoError(t, err)
		wy, err := outs[res.Outputs[0].Name].Dense()
		require.NoError(t, err)
		assertClose(t, wy, y, fmt.Sprintf("step %d output", step))
		for _, o := range res.Outputs[1:] {
			present := outs[o.Name]
			for i, e := range o.Stack {
				got := sessionCache(t, s, e)
				assertClose(t, entryOf(t, present, i), got, fmt.Sprintf("step %d %s entry %d (%s of %s)", step, o.Name, i, e.Cache, e.Layer))
			}
			past[o.Past] = present
		}
	}
	assert.Equal(t, steps, s.Tokens())
}

// sessionCache is the keys or values a session holds for a layer.
func sessionCache(t *testing.T, s *models.State, e lift.StackedCache) *tensor.Dense {
	t.Helper()
	kv, err := s.Cache(e.Layer)
	require.NoError(t, err)
	if e.Cache == "values" {
		return kv.Values
	}
	return kv.Keys
}

// entryOf copies entry i of a float32 array stacked on axis 0.
func entryOf(t *testing.T, a *array.Array, i int) *tensor.Dense {
	t.Helper()
	d, err := a.Dense()
	require.NoError(t, err)
	data := d.Data().([]float32)
	size := len(data) / a.Shape[0]
	return tensor.New(tensor.WithShape(a.Shape[1:]...), tensor.WithBacking(append([]float32(nil), data[i*size:(i+1)*size]...)))
}

package layers

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// loadSDPAFrontierCases reads testdata/sdpa_frontier_cases.json, written by
// testdata/torch/sdpa_frontier.py from Hugging Face's Qwen3Attention and
// GptOssAttention and PyTorch's flex_attention.
var loadSDPAFrontierCases = goldenCases[modernCase]("sdpa_frontier_cases.json")

// frontierSteps says how each case runs incrementally.
var frontierSteps = map[string]stepSpec{
	"qwen3_qk_norm":                 {roles: []role{stream}},
	"qwen3_qk_norm_bias_eps_window": {roles: []role{stream}},
	"olmo2_qk_norm_projection":      {roles: []role{stream}},
	"gpt_oss_sinks":                 {roles: []role{stream}},
	"gpt_oss_sinks_window_padding":  {roles: []role{stream, keyMask}},
	"qk_norm_sinks":                 {roles: []role{stream}},
	"qk_norm_sinks_cross":           {roles: []role{stream, whole}},
	"score_softcap":                 {roles: []role{stream}},
	"score_alibi_gqa":               {roles: []role{stream}},
	"score_relative_bias":           {roles: []role{stream}, err: "non-causal"},
	"score_document_mask":           {roles: []role{stream}},
	"score_list":                    {roles: []role{stream}},
	"score_custom":                  {roles: []role{stream}},
	"score_cross_bottom_right":      {roles: []role{stream, whole}, err: "top_left"},
	"score_cross_empty_row":         {roles: []role{stream, whole}},
}

// sdpaFrontierCases returns the cases sorted by name.
func sdpaFrontierCases(t *testing.T) ([]string, map[string]modernCase) {
	t.Helper()
	cases, err := loadSDPAFrontierCases()
	require.NoError(t, err)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, cases
}

// TestSDPAFrontierAgainstPyTorch runs every case: the layer built from its
// config lists Hugging Face's parameter names in their order, and gives
// PyTorch's output and weights, with and without a weights hook, then run
// incrementally (token by token, in chunks and whole) gives the same rows.
func TestSDPAFrontierAgainstPyTorch(t *testing.T) {
	names, cases := sdpaFrontierCases(t)
	require.Len(t, names, len(frontierSteps))
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			spec, ok := frontierSteps[name]
			require.True(t, ok, "case %s is not classified in frontierSteps", name)
			l := c.layer(t)
			plain, err := l.Forward(&registry.Run{}, c.inputs())
			require.NoError(t, err)
			var weights *tensor.Dense
			hooked, err := l.Forward(&registry.Run{Hook: func(_ string, w *tensor.Dense) { weights = w }}, c.inputs())
			require.NoError(t, err)
			for _, out := range []*tensor.Dense{plain, hooked} {
				require.Equal(t, c.Output.Shape, []int(out.Shape()), "output shape")
				assertCloseNaN(t, c.Output.Data, floats(out), torchAbs, torchRel, "output")
			}
			require.NotNil(t, c.Weights)
			require.Equal(t, c.Weights.Shape, []int(weights.Shape()), "weights shape")
			assertCloseNaN(t, c.Weights.Data, floats(weights), torchAbs, torchRel, "weights")
			checkSteps(t, l, c.inputs(), spec, c.Output.dense())
		})
	}
}

// The goldens exercise what they are named for: sinks take weight from the
// keys, a padded query gives the sink all of it, and document_mask's
// cross-attention case has a query that sees no key.
func TestSDPAFrontierGoldensAreNotTrivial(t *testing.T) {
	_, cases := sdpaFrontierCases(t)
	rowSums := func(w *array) []float64 {
		tk := w.Shape[len(w.Shape)-1]
		sums := make([]float64, len(w.Data)/tk)
		for i, v := range w.Data {
			sums[i/tk] += float64(v)
		}
		return sums
	}
	for _, name := range []string{"gpt_oss_sinks", "qk_norm_sinks", "qk_norm_sinks_cross"} {
		var mean float64
		sums := rowSums(cases[name].Weights)
		for i, s := range sums {
			require.LessOrEqual(t, s, 1+1e-6, "%s: row %d of the weights sums to %g", name, i, s)
			mean += s / float64(len(sums))
		}
		require.Less(t, mean, 0.99, "%s: the sinks take little weight", name)
	}
	w := cases["gpt_oss_sinks_window_padding"].Weights // (2, 4, 7, 7): sequence 1, query 0
	for h := range 4 {
		row := ((1*4+h)*7 + 0) * 7
		require.Equal(t, make([]float32, 7), w.Data[row:row+7], "head %d", h)
	}
	sums := rowSums(cases["score_cross_empty_row"].Weights) // (2, 2, 4, 2): queries 2 and 3 see no key of their document
	for i, s := range sums {
		want := 1.0
		if i%4 >= 2 {
			want = 0
		}
		require.InDelta(t, want, s, 1e-6, "row %d", i)
	}
	// Without qk_norm the Qwen3 and OLMo-2 cases differ: the norms are not
	// identities.
	for _, name := range []string{"qwen3_qk_norm", "olmo2_qk_norm_projection"} {
		c := cases[name]
		l := fromYAML(t, "attention.sdpa", `{d: 32, num_heads: 4, num_kv_heads: 2, causal: true, rope: half, out_bias: false, out_name: o_proj}`)
		require.NoError(t, l.Validate())
		for _, p := range l.Params() {
			copy(floats(p.Value), c.Params.Values[p.Name].Data)
		}
		out, err := l.Forward(nil, c.inputs())
		require.NoError(t, err)
		var diff float64
		for i, v := range floats(out) {
			diff = math.Max(diff, math.Abs(float64(v-c.Output.Data[i])))
		}
		require.Greater(t, diff, 1e-2, name)
	}
}

// The exact path (taken for score modifications) and the kernels give the
// same sinks: a softcap of 1e30 changes no float32 score, so it only
// reroutes the computation.
func TestSDPASinksOnEveryPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	x := randomDense(rng, 2, 7, 8)
	padding := keyPadding(2, 7, 0, 3) // sequence 1's query 0..2 see no key: the sink has their weight
	for _, extra := range []string{"", ", window: 2", ", mask: bool, mask_polarity: keep"} {
		base := "{d: 8, num_heads: 4, num_kv_heads: 2, causal: true, sinks: true" + extra
		plain := validated(t, fromYAML(t, "attention.sdpa", base+"}"), 3)
		exact := validated(t, fromYAML(t, "attention.sdpa", base+", score_mod: {type: softcap, cap: 1e30}}"), 3)
		inputs := []*tensor.Dense{x}
		if strings.Contains(extra, "mask") {
			inputs = append(inputs, padding)
		}
		for _, hook := range []bool{false, true} {
			run := &registry.Run{}
			if hook {
				run.Hook = func(string, *tensor.Dense) {}
			}
			want, err := plain.Forward(run, inputs)
			require.NoError(t, err)
			got, err := exact.Forward(run, inputs)
			require.NoError(t, err)
			assertClose(t, floats(want), floats(got), 1e-6, 1e-5, base)
		}
	}
}

// sdpaExportsEnv, when set, names a directory where
// TestSDPAFrontierExportsAgainstPyTorch writes each export it checks, with
// its inputs and PyTorch's output (CASE.opsetN/model.onnx, input_K.npy,
// expected.npy), for ONNX Runtime to run (scripts/sdpa_frontier_ort.sh).
const sdpaExportsEnv = "ATTNRUN_SDPA_EXPORTS"

// TestSDPAFrontierExportsAgainstPyTorch exports every case as a one-layer
// model at opsets 17 and 23 (standard ops; qk_norm alone takes the
// Attention op at 23), and with ai.onnx.preview's FlexAttention, and runs
// it on the executor: it gives PyTorch's output.
func TestSDPAFrontierExportsAgainstPyTorch(t *testing.T) {
	names, cases := sdpaFrontierCases(t)
	for _, name := range names {
		for _, way := range []struct {
			name string
			opts export.Options
		}{
			{"opset17", export.Options{Opset: 17}},
			{"opset23", export.Options{Opset: 23}},
			{"flex", export.Options{Opset: 17, Preview: true}},
		} {
			t.Run(name+"/"+way.name, func(t *testing.T) {
				c := cases[name]
				m := c.model(t)
				pb, err := export.Model(m, way.opts)
				require.NoError(t, err)
				ops := opTypesOf(pb)
				switch {
				case way.opts.Preview:
					require.Contains(t, ops, "FlexAttention")
					require.Equal(t, export.PreviewDomain, pb.GetOpsetImport()[1].GetDomain())
				case way.opts.Opset >= 23 && !strings.Contains(string(c.Config), "sinks") && !strings.Contains(string(c.Config), "score_mod"):
					require.Contains(t, ops, "Attention")
				default:
					require.NotContains(t, ops, "Attention")
				}
				g, err := exec.New(pb)
				require.NoError(t, err)
				feeds := map[string]*tensor.Dense{}
				for i, vi := range pb.GetGraph().GetInput() {
					feeds[vi.GetName()] = c.fedAs(c.inputs()[i], len(onnxio.Dims(vi)), m, i)
				}
				outs, err := g.Run(feeds)
				require.NoError(t, err)
				y := outs[export.OutputName]
				require.Equal(t, c.Output.Shape, []int(y.Shape()))
				assertCloseNaN(t, c.Output.Data, floats(y), torchAbs, torchRel, "output")
				if dir := os.Getenv(sdpaExportsEnv); dir != "" {
					writeLiveExport(t, filepath.Join(dir, name+"."+way.name), pb, feeds, c.Output.dense())
				}
			})
		}
	}
}

// opTypesOf lists the op types of a model's main graph.
func opTypesOf(pb *onnxpb.ModelProto) []string {
	var ops []string
	for _, n := range pb.GetGraph().GetNode() {
		ops = append(ops, n.GetOpType())
	}
	return ops
}

// Stepping equals the full pass with random weights in configurations
// beyond the PyTorch cases: the acceptance layer, and sinks and
// score modifications with a sliding window, whose cache drops keys (the
// modifications then see key indices that do not start at 0).
func TestSDPAFrontierStepEqualsForward(t *testing.T) {
	x := func(shape ...int) *tensor.Dense { return randomDense(rand.New(rand.NewPCG(7, 9)), shape...) }
	for _, tc := range []struct {
		name, config string
		inputs       []*tensor.Dense
		roles        []role
	}{
		{"acceptance", `{d: 32, num_heads: 4, num_kv_heads: 2, causal: true, qk_norm: rms, sinks: true}`, []*tensor.Dense{x(2, 9, 32)}, nil},
		{"sinks window rope", `{d: 8, num_heads: 4, num_kv_heads: 1, causal: true, window: 3, rope: half, sinks: true, qk_norm: rms}`, []*tensor.Dense{x(2, 9, 8)}, nil},
		{"score_mod window", `{d: 8, num_heads: 2, causal: true, window: 3, score_mod: [{type: softcap, cap: 2}, {type: alibi},
			{type: relative_bias, max_distance: 4}, {type: document_mask, lengths: [2, 4]}, {type: test.wave}, {type: shift, by: -10000}]}`, []*tensor.Dense{x(2, 9, 8)}, nil},
		{"score_mod sinks padding", `{d: 8, num_heads: 2, causal: true, sinks: true, mask: bool, mask_polarity: keep,
			score_mod: {type: document_mask, lengths: [3, 3]}}`, []*tensor.Dense{x(2, 7, 8), keyPadding(2, 7, 0, 4)}, []role{stream, keyMask}},
		{"cross top_left score_mod", `{d: 8, d_memory: 6, num_heads: 2, causal: true, causal_align: top_left, sinks: true,
			score_mod: {type: relative_bias, max_distance: 2}}`, []*tensor.Dense{x(2, 5, 8), x(2, 6, 6)}, []role{stream, whole}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := validated(t, fromYAML(t, "attention.sdpa", tc.config), 5)
			roles := tc.roles
			if roles == nil {
				roles = []role{stream}
			}
			checkSteps(t, l, tc.inputs, stepSpec{roles: roles}, nil)
		})
	}
}

// The README's rules for NaN, on the layer: a NaN sink makes every output
// NaN; a NaN key that document_mask hides does not reach the queries of
// other documents (its score is replaced by −Inf), while softcap passes the
// NaN on to every query that sees the key.
func TestSDPAFrontierNaN(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := randomDense(rng, 1, 5, 4)
	floats(x)[1*4+0] = float32(math.NaN()) // token 1: a NaN key (and value)
	nanWeightRows := func(config string) []int {
		l := validated(t, fromYAML(t, "attention.sdpa", config), 7)
		var w *tensor.Dense
		_, err := l.Forward(&registry.Run{Hook: func(_ string, weights *tensor.Dense) { w = weights }}, []*tensor.Dense{x})
		require.NoError(t, err)
		var rows []int
		for r := range 5 {
			if math.IsNaN(float64(floats(w)[r*5])) {
				rows = append(rows, r)
			}
		}
		return rows
	}
	require.Equal(t, []int{0, 1}, nanWeightRows(`{d: 4, num_heads: 1, score_mod: {type: document_mask, lengths: [2, 3]}}`))
	require.Equal(t, []int{1, 2, 3, 4}, nanWeightRows(`{d: 4, num_heads: 1, causal: true, score_mod: {type: softcap, cap: 3}}`))

	l := validated(t, fromYAML(t, "attention.sdpa", `{d: 4, num_heads: 1, sinks: true}`), 7).(*SDPA)
	floats(l.c.sinks)[0] = float32(math.NaN())
	out, err := l.Forward(nil, []*tensor.Dense{randomDense(rng, 1, 5, 4)})
	require.NoError(t, err)
	for i, v := range floats(out) {
		require.True(t, math.IsNaN(float64(v)), "element %d: %g", i, v)
	}
}

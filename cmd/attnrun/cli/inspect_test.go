package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInspectPreset(t *testing.T) {
	status, out, stderr := attnrun("inspect", "seed-mha-wrapper")
	require.Equal(t, 0, status, stderr)
	// Params: 2 heads × W_query, W_key, W_value of (2, 3) = 2·3·(2·3) = 36.
	// FLOPs on the example input (2, 6, 3), per head: projections
	// 2·(2·6)·3·(3·2) = 432, QKᵀ and weights·V 2·(2·6·6·2) each = 576;
	// two heads 2·1008 = 2016.
	for _, want := range []string{
		"model  seed-mha-wrapper\n",
		"\nlayers\n  for x (2, 6, 3), the preset's example input\n",
		"  attn  attention.multihead_wrapper  reads x  params 36  output (2, 6, 4)  FLOPs 2,016\n",
		"  total: 36 parameters, 2,016 FLOPs per forward pass\n",
		"(FLOPs: 2 per multiply-add of the matrix products, attention over all Tq×Tk pairs; elementwise work not counted)",
	} {
		assert.Contains(t, out, want)
	}

	// Another shape, one sequence of 4: per head, projections 2·4·3·6 = 144,
	// QKᵀ and weights·V 2·(4·4·2) each = 128; two heads 2·272 = 544.
	status, out, stderr = attnrun("inspect", "seed-mha-wrapper", "--shape", "4, 3")
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, out, "  for x (4, 3)\n")
	assert.Contains(t, out, "params 36  output (4, 4)  FLOPs 544\n")
}

func TestInspectConfig(t *testing.T) {
	config := writeFile(t, t.TempDir(), "m.yaml", `name: m
layers:
  - {name: proj, type: nn.linear, d_in: 3, d_out: 4}
  - {name: odd, type: clitest.bare}
  - {name: attn, type: attention.multihead, d_in: 4, d_out: 4, context_length: 8, num_heads: 2}
`)

	// Without a shape: parameters only, and how to get the rest.
	status, out, stderr := attnrun("inspect", config)
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, out, "file   "+config+"\n")
	assert.Contains(t, out, "  proj  nn.linear            reads x     params 16\n")
	assert.Contains(t, out, "  attn  attention.multihead  reads odd   params 68\n")
	assert.Contains(t, out, "  total: 84 parameters\n")
	assert.Contains(t, out, "give --shape B,T,d (or T,d) for each input (x)")

	// (8, 3): proj 2·8·3·4 = 192; attn: projections 2·8·4·12 = 768,
	// 2 heads of 2: QKᵀ and weights·V 2·2·(2·8·8·2) = 1024, out_proj
	// 2·8·4·4 = 256, so 2048. The custom layer is unknown: "?".
	status, out, stderr = attnrun("inspect", config, "--shape", "8,3")
	require.Equal(t, 0, status, stderr)
	for _, want := range []string{
		"  proj  nn.linear            reads x     params 16  output (8, 4)  FLOPs 192\n",
		"  odd   clitest.bare         reads proj  params 0   output (8, 4)  FLOPs ?\n",
		"  attn  attention.multihead  reads odd   params 68  output (8, 4)  FLOPs 2,048\n",
		"  total: 84 parameters, at least 2,240 FLOPs (\"?\": the layer's type does not count FLOPs: odd) per forward pass\n",
	} {
		assert.Contains(t, out, want)
	}
}

func TestInspectONNXLayers(t *testing.T) {
	// Fixed input shapes in the graph give the FLOPs without --shape:
	// attention.causal, d 8, on (2, 6, 8): projections 2·12·8·24 = 4608,
	// QKᵀ and weights·V 2·(2·6·6·8) each = 2304.
	status, out, stderr := attnrun("inspect", onnxFixtures+"/causal_attention_opset17_static/model.onnx")
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, out, "  for x (2, 6, 8), the graph's fixed input shape\n")
	assert.Contains(t, out, "  attn  attention.causal  reads x  params 216  output (2, 6, 8)  FLOPs 6,912\n")

	// Symbolic axes need --shape: attention.self, d 8, on (1, 4, 8):
	// projections 2·4·8·24 = 1536, QKᵀ and weights·V 2·(4·4·8) each = 512.
	dynamic := onnxFixtures + "/positional_self_attention_opset14_dynamic/model.onnx"
	status, out, stderr = attnrun("inspect", dynamic)
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, out, "  total: 256 parameters\n")
	status, out, stderr = attnrun("inspect", dynamic, "--shape", "1,4,8")
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, out, "  attn  attention.self    reads pos  params 192  output (1, 4, 8)  FLOPs 2,048\n")
	assert.Contains(t, out, "  total: 256 parameters, 2,048 FLOPs per forward pass\n")
}

func TestInspectErrors(t *testing.T) {
	cases := []failure{
		{"bad shape", []string{"inspect", "seed-mha-wrapper", "--shape", "2,x"}, 2, `--shape "2,x": want positive sizes`},
		{"zero size", []string{"inspect", "seed-mha-wrapper", "--shape", "2,0,3"}, 2, "want positive sizes"},
		{"two shapes", []string{"inspect", "seed-mha-wrapper", "--shape", "6,3", "--shape", "6,3"}, 2,
			`model "seed-mha-wrapper" takes 1 input(s) (x), got 2 --shape`},
		{"wrong width", []string{"inspect", "seed-mha-wrapper", "--shape", "2,6,4"}, 1,
			`for x (2, 6, 4): layer "attn" (attention.multihead_wrapper): d_in mismatch`},
		{"unknown preset", []string{"inspect", "seed-nope"}, 1, `unknown preset "seed-nope"`},
	}
	checkFailures(t, cases)
}

func TestQuantity(t *testing.T) {
	cases := []struct {
		n    int64
		want string
	}{
		{0, "0 FLOPs"},
		{999, "999 FLOPs"},
		{9999, "9,999 FLOPs"},
		{165888, "165,888 FLOPs (165.9 k)"},
		{12582912, "12,582,912 FLOPs (12.6 M)"},
		{2_000_000_000, "2,000,000,000 FLOPs (2.0 G)"},
		{9_223_372_036_854_775_807, "9,223,372,036,854,775,807 FLOPs (9223372.0 T)"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, quantity(c.n, "FLOPs"))
	}
	assert.Equal(t, "-1,234", groupDigits(-1234))
}

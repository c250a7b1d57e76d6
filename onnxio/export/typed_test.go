package export_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Inputs a config declares int64 are int64 (batch, seq) graph inputs; a
// pooled output is declared (batch, d); a tied head reads its source's
// initializer, which the file holds once.
func TestExportTypedInputs(t *testing.T) {
	cases := []struct {
		config, inputs, output string
		initializers           []string
	}{
		{"embedding_lm.yaml", "input_ids INT64 [batch seq]", "y [batch seq 11]",
			[]string{"wte.weight", "wpe.weight", "attn.q_proj.weight"}},
		{"embedding_encoder.yaml", "input_ids INT64 [batch seq], token_type_ids INT64 [batch seq_token_type_ids], position_ids INT64 [batch seq_position_ids], attention_mask INT64 [batch seq_attention_mask]",
			"y [batch 8]", []string{"word.weight", "token_type.weight", "position.weight"}},
	}
	for _, c := range cases {
		t.Run(c.config, func(t *testing.T) {
			m, err := models.Load(filepath.Join("..", "..", "testdata", "export", "multi", c.config))
			require.NoError(t, err)
			require.NoError(t, m.Init(1))
			pb := exportModel(t, m, export.Options{})
			var inputs []string
			for _, vi := range pb.GetGraph().GetInput() {
				inputs = append(inputs, vi.GetName()+" "+onnxio.ElemType(vi).String()+" "+onnxio.FormatDims(onnxio.Dims(vi)))
			}
			assert.Equal(t, c.inputs, strings.Join(inputs, ", "))
			out := pb.GetGraph().GetOutput()[0]
			assert.Equal(t, c.output, out.GetName()+" "+onnxio.FormatDims(onnxio.Dims(out)))
			var names []string
			for _, init := range pb.GetGraph().GetInitializer() {
				names = append(names, init.GetName())
			}
			for _, want := range c.initializers {
				assert.Contains(t, names, want)
			}
			assert.NotContains(t, names, "lm_head.weight", "a tied weight is stored once, under its source's name")
		})
	}
}

// An Interface declaring int32 ids of one unbatched sequence (seq) feeds a
// model on int64 (batch, seq) ids: Cast and Unsqueeze adapt them, and the
// graph gives Forward's logits.
func TestExportInterfaceTypedInputs(t *testing.T) {
	m, err := models.Load(filepath.Join("..", "..", "testdata", "export", "multi", "embedding_lm.yaml"))
	require.NoError(t, err)
	require.NoError(t, m.Init(3))
	ids := []int64{3, 0, 7, 10, 1}
	want, err := m.Forward(nil, tensor.New(tensor.WithShape(1, 5), tensor.WithBacking(ids)))
	require.NoError(t, err)
	iface := &export.Interface{
		Inputs: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("tokens", onnxio.Int32, []onnxio.Dim{onnxio.SymbolicDim("seq")})},
		Output: onnxio.TensorValueInfo("logits", onnxio.Float, []onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.SymbolicDim("seq"), onnxio.FixedDim(11)}),
	}
	_, g := exportDeclared(t, m, iface)
	narrow := make([]int32, len(ids))
	for i, id := range ids {
		narrow[i] = int32(id)
	}
	out, err := g.Run(map[string]*tensor.Dense{"tokens": tensor.New(tensor.WithShape(5), tensor.WithBacking(narrow))})
	require.NoError(t, err)
	require.Equal(t, want.Shape(), out["logits"].Shape())
	assertClose(t, want.Data().([]float32), out["logits"].Data().([]float32))
}

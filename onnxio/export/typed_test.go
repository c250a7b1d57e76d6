package export_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
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

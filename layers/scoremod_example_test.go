package layers_test

import (
	"fmt"
	"log"
	"math"

	"github.com/attnrun/attnrun/layers"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/registry"
)

// wave is a score modification written outside package layers, as a user
// of attnrun would write one: s + 0.25·(b+1)·(h+1)·cos(q − k). It reads
// every index flex_attention passes a score_mod (testdata/torch/
// sdpa_frontier.py has its PyTorch twin), and writes itself as ONNX.
type wave struct {
	// Amplitude scales the wave (default 0.25).
	Amplitude float64 `yaml:"amplitude"`
}

// Registered from init, as a layer is with registry.Register.
func init() {
	layers.RegisterScoreMod(layers.ScoreModInfo{
		Type: "test.wave", Summary: "a cosine of the distance, per sequence and head",
		New: func() layers.ScoreMod { return &wave{Amplitude: 0.25} },
	})
}

func (w *wave) Prepare(layers.ScoreModShape) error {
	if math.IsNaN(w.Amplitude) || math.IsInf(w.Amplitude, 0) {
		return fmt.Errorf("amplitude must be finite, got %g", w.Amplitude)
	}
	return nil
}

func (w *wave) Modify(row []float32, b, h, q, k0 int) {
	a := w.Amplitude * float64((b+1)*(h+1))
	for j := range row {
		row[j] += float32(a * math.Cos(float64(q-k0-j)))
	}
}

func (w *wave) ExportONNX(g registry.GraphBuilder, scores string, ix *layers.ScoreIndices) string {
	toFloat := registry.IntAttr("to", 1)
	scale := g.Node("Mul", []string{
		g.Node("Add", []string{ix.Batch(), g.ScalarInt64(1)}),
		g.Node("Add", []string{ix.Head(), g.ScalarInt64(1)})})
	amp := g.Node("Mul", []string{g.Node("Cast", []string{scale}, toFloat), g.ScalarFloat(float32(w.Amplitude))})
	dist := g.Node("Cast", []string{g.Node("Sub", []string{ix.Query(), ix.Key()})}, toFloat)
	return g.Node("Add", []string{scores, g.Node("Mul", []string{amp, g.Node("Cos", []string{dist})})})
}

// A score modification registered from outside is configured like a
// built-in, alone or in a list with others.
func ExampleRegisterScoreMod() {
	m, err := models.Parse([]byte(`
name: wavy
layers:
  - {name: attn, type: attention.sdpa, d: 8, num_heads: 2, causal: true,
     score_mod: [{type: softcap, cap: 30}, {type: test.wave, amplitude: 0.5}]}
`), "wavy.yaml")
	if err != nil {
		log.Fatal(err)
	}
	attn := m.Layers()[0].Layer.(*layers.SDPA)
	fmt.Println(attn.ScoreMod.Types())
	fmt.Println(layers.ScoreModTypes())
	// Output:
	// [softcap test.wave]
	// [alibi document_mask relative_bias shift softcap test.wave]
}

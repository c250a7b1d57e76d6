package models

import (
	"fmt"
	"testing"

	"github.com/attnrun/attnrun/registry"
)

// benchMHAYAML is issue 5's comparison model: the seeds'
// MultiHeadAttention with d = 768, 12 heads, causal, context 2048.
const benchMHAYAML = `name: mha768
layers:
  - {name: attn, type: attention.multihead, d_in: 768, d_out: 768, context_length: 2048, num_heads: 12}
`

// BenchmarkForwardMHA times Model.Forward of the 768-wide, 12-head causal
// multi-head attention (eval mode) at B = 4, T = 512, the shape ONNX
// Runtime is compared on, and at B = 1 for growing T. Run it with -cpu 2
// to match two threads; it reports milliseconds per pass besides ns/op,
// and allocations, which do not depend on T.
func BenchmarkForwardMHA(b *testing.B) {
	m, err := Parse([]byte(benchMHAYAML), "mha768.yaml")
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Init(1); err != nil {
		b.Fatal(err)
	}
	for _, shape := range [][2]int{{4, 512}, {1, 128}, {1, 512}, {1, 2048}} {
		batch, tokens := shape[0], shape[1]
		b.Run(fmt.Sprintf("B=%d/T=%d", batch, tokens), func(b *testing.B) {
			x := sequence(batch, tokens, 768)
			run := &registry.Run{}
			if _, err := m.Forward(run, x); err != nil { // grow the buffers outside the timing
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Forward(run, x); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/op")
		})
	}
}

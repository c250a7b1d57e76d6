package models

import (
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// allocYAML has one of each built-in attention layer, wired with residuals,
// so that every Forward path runs.
const allocYAML = `name: alloc
layers:
  - {name: pos, type: position.learned, context_length: 512, d: 32}
  - {name: mha, type: attention.multihead, d_in: 32, d_out: 32, context_length: 512, num_heads: 4, qkv_bias: true, dropout: 0.1}
  - {name: wrapper, type: attention.multihead_wrapper, d_in: 32, d_out: 16, context_length: 512, num_heads: 2, dropout: 0.1}
  - {name: causal, type: attention.causal, d_in: 32, d_out: 32, context_length: 512}
  - {name: self, type: attention.self, d_in: 32, d_out: 32, weights: matrix, causal: true}
  - {name: simple, type: attention.simple, scaled: true, causal: true}
  - {name: average, type: attention.average}
  - {name: proj, type: nn.linear, d_in: 32, d_out: 32}
  - {name: sum, type: nn.add, inputs: [x, proj]}
`

// TestForwardAllocations checks that a steady-state Forward allocates a
// fixed number of objects, whatever the sequence length, in eval mode, in
// train mode (dropout draws its masks head by head) and with a hook (the
// weights are fresh tensors): the layers' working memory is reused.
//
// The garbage collector is off while counting: each collection empties
// gorgonia's sync.Pools, whose refills would count as allocations, and
// collections come more often when the tensors are larger.
func TestForwardAllocations(t *testing.T) {
	m, err := Parse([]byte(allocYAML), "alloc.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	// Per layer: the output tensor, which gorgonia builds from 8 objects,
	// its backing array, and at most one more (nn.add lists its inputs);
	// per pass: the value slots and the layers' Run. Nothing per head or
	// per token.
	const perLayer, perPass = 10, 2
	layers := len(m.Layers())
	for _, mode := range []struct {
		name string
		run  func() *registry.Run
	}{
		{"eval", func() *registry.Run { return &registry.Run{} }},
		{"train", func() *registry.Run { return &registry.Run{Train: true, RNG: rand.New(rand.NewPCG(1, 2))} }},
		{"hook", func() *registry.Run { return &registry.Run{Hook: func(string, *tensor.Dense) {}} }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			counts := map[int]float64{}
			for _, tokens := range []int{64, 512} {
				x := sequence(2, tokens, 32)
				run := mode.run()
				forward := func() {
					if _, err := m.Forward(run, x); err != nil {
						t.Fatal(err)
					}
				}
				for range 5 { // every pooled workspace reaches this size
					forward()
				}
				runtime.GC()
				gc := debug.SetGCPercent(-1)
				counts[tokens] = testing.AllocsPerRun(10, forward)
				debug.SetGCPercent(gc)
				t.Logf("T=%d: %v allocations per Forward", tokens, counts[tokens])
			}
			require.Equal(t, counts[64], counts[512], "allocations must not grow with T")
			if mode.name == "eval" {
				require.LessOrEqual(t, counts[512], float64(perLayer*layers+perPass), "allocations per Forward")
			}
		})
	}
}

package models

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

const concurrentYAML = `name: concurrent
layers:
  - {name: pos, type: position.learned, context_length: 64, d: 16}
  - {name: attn, type: attention.multihead, d_in: 16, d_out: 16, context_length: 64, num_heads: 4, qkv_bias: true}
  - {name: heads, type: attention.multihead_wrapper, d_in: 16, d_out: 4, context_length: 64, num_heads: 2}
  - {name: proj, type: nn.linear, d_in: 8, d_out: 16}
  - {name: sum, type: nn.add, inputs: [x, proj]}
`

// sequence returns a deterministic input of the given shape.
func sequence(shape ...int) *tensor.Dense {
	n := 1
	for _, d := range shape {
		n *= d
	}
	data := make([]float32, n)
	for i := range data {
		data[i] = float32((i*37)%101)/50 - 1
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// TestConcurrentForward runs one model from many goroutines at once on
// inputs of mixed shapes (run it with -race): every result must equal the
// serial one bit for bit, hooks included.
func TestConcurrentForward(t *testing.T) {
	m, err := Parse([]byte(concurrentYAML), "concurrent.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(42))

	shapes := [][]int{{5, 16}, {1, 16}, {2, 33, 16}, {3, 64, 16}, {1, 7, 16}, {4, 16, 16}}
	inputs := make([]*tensor.Dense, len(shapes))
	want := make([][]float32, len(shapes))      // with a hook: weights materialized
	wantFused := make([][]float32, len(shapes)) // without: the fused path
	wantWeights := make([][]float32, len(shapes))
	for i, s := range shapes {
		inputs[i] = sequence(s...)
		var w []float32
		run := &registry.Run{Hook: func(layer string, weights *tensor.Dense) {
			if layer == "attn" {
				w = weights.Data().([]float32)
			}
		}}
		out, err := m.Forward(run, inputs[i])
		require.NoError(t, err)
		want[i], wantWeights[i] = out.Data().([]float32), w
		fused, err := m.Forward(nil, inputs[i])
		require.NoError(t, err)
		wantFused[i] = fused.Data().([]float32)
	}

	const goroutines = 16
	const rounds = 8
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*rounds)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				i := (g + r) % len(shapes)
				var w []float32
				run := &registry.Run{}
				if r%2 == 0 { // half the passes ask for weights, half take the fused path
					run.Hook = func(layer string, weights *tensor.Dense) {
						if layer == "attn" {
							w = weights.Data().([]float32)
						}
					}
				}
				out, err := m.Forward(run, inputs[i])
				if err != nil {
					errs <- err
					return
				}
				expected := wantFused[i]
				if r%2 == 0 {
					expected = want[i]
				}
				if err := sameBits(expected, out.Data().([]float32)); err != nil {
					errs <- fmt.Errorf("shape %v: output %w", shapes[i], err)
				}
				if w != nil {
					if err := sameBits(wantWeights[i], w); err != nil {
						errs <- fmt.Errorf("shape %v: weights %w", shapes[i], err)
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestThreadCountInvariance: the same forward pass gives the same bits with
// one core or many.
func TestThreadCountInvariance(t *testing.T) {
	m, err := Parse([]byte(concurrentYAML), "concurrent.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(7))
	x := sequence(4, 64, 16)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var results [][]float32
	for _, procs := range []int{1, 2, 8} {
		runtime.GOMAXPROCS(procs)
		out, err := m.Forward(nil, x)
		require.NoError(t, err)
		results = append(results, out.Data().([]float32))
	}
	for _, r := range results[1:] {
		require.NoError(t, sameBits(results[0], r))
	}
}

func sameBits(want, got []float32) error {
	if len(want) != len(got) {
		return fmt.Errorf("has %d elements, want %d", len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			return fmt.Errorf("differs at %d: %v != %v", i, got[i], want[i])
		}
	}
	return nil
}

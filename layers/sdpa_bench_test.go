package layers

import (
	"math/rand/v2"
	"testing"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// BenchmarkSDPA measures attention.sdpa's forward pass on the fused path
// (plain causal) and on the general path (RoPE, GQA, window, a mask), and a
// decode of 128 tokens one at a time with the KV cache.
func BenchmarkSDPA(b *testing.B) {
	const batch, tokens, d = 2, 128, 256
	x := randomDense(rand.New(rand.NewPCG(1, 2)), batch, tokens, d)
	padding := keyPadding(batch, tokens, 0, 16)
	for _, bc := range []struct {
		name   string
		set    func(*SDPA)
		inputs []*tensor.Dense
	}{
		{"causal", func(s *SDPA) { s.Causal = true }, []*tensor.Dense{x}},
		{"rope gqa window mask", func(s *SDPA) {
			s.Causal, s.RoPE, s.NumKVHeads, s.Window, s.Mask, s.MaskPolarity = true, "half", 2, 64, "bool", "keep"
		}, []*tensor.Dense{x, padding}},
	} {
		l := sdpa(func(s *SDPA) { s.D, s.NumHeads = d, 8; bc.set(s) })
		if err := l.Validate(); err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := l.Forward(&registry.Run{}, bc.inputs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	l := sdpa(func(s *SDPA) { s.D, s.NumHeads, s.Causal, s.RoPE = d, 8, true, "half" })
	if err := l.Validate(); err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			state := l.NewState()
			for t := range tokens {
				step := []*tensor.Dense{sliceAxis(x, 1, t, t+1)}
				if _, err := l.Step(&registry.Run{}, state, step); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

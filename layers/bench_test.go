package layers

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// mhaFlops counts the floating-point operations of attention.multihead's
// forward pass as ONNX Runtime comparisons count them: four rows×d×d
// projections and, per (sequence, head), QKᵀ and PV in full (2·T²·d each
// over all heads), masked half included. At B=4, T=512, d=768 that is
// 12.9 GFLOP.
func mhaFlops(b, t, d int) float64 {
	rows := float64(b * t)
	proj := 4 * 2 * rows * float64(d) * float64(d)
	attn := 2 * 2 * float64(b) * float64(t) * float64(t) * float64(d)
	return proj + attn
}

// benchLayer times l.Forward on x and reports milliseconds per call and
// the rate in GFLOP/s for the given operation count.
func benchLayer(b *testing.B, l registry.Layer, x *tensor.Dense, flops float64) {
	if err := l.Validate(); err != nil {
		b.Fatal(err)
	}
	for _, p := range l.Params() {
		data := floats(p.Value)
		rng := rand.New(rand.NewPCG(7, uint64(len(data))))
		for i := range data {
			data[i] = rng.Float32()*0.1 - 0.05
		}
	}
	run := &registry.Run{}
	inputs := []*tensor.Dense{x}
	if _, err := l.Forward(run, inputs); err != nil { // grow the buffers outside the timing
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := processCPUTime()
	for b.Loop() {
		if _, err := l.Forward(run, inputs); err != nil {
			b.Fatal(err)
		}
	}
	cpu := processCPUTime() - cpu0
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(per.Microseconds())/1e3, "ms/op")
	b.ReportMetric(flops/per.Seconds()/1e9, "GFLOP/s")
	// Per CPU-second (all threads), the rate moves less with the load of a
	// shared machine than the wall-clock one.
	b.ReportMetric(flops*float64(b.N)/cpu.Seconds()/1e9, "GFLOP/cpu-s")
}

// processCPUTime returns the CPU time (user + system) this process has used.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMultiHeadB4T512D768 is the shape of issue 5's comparison with
// ONNX Runtime: the seeds' MultiHeadAttention at B=4, T=512, d=768, 12
// heads, causal, eval mode. Run it with -cpu 2 to match ORT's two threads.
func BenchmarkMultiHeadB4T512D768(b *testing.B) {
	const batch, tokens, d, heads = 4, 512, 768, 12
	x := randomDense(rand.New(rand.NewPCG(1, 2)), batch, tokens, d)
	l := &MultiHead{DIn: d, DOut: d, ContextLength: tokens, NumHeads: heads, Causal: true, OutBias: true}
	benchLayer(b, l, x, mhaFlops(batch, tokens, d))
}

// BenchmarkAttentionLayers times the other attention layers on one shape
// each, to catch a layer left on a slow path.
func BenchmarkAttentionLayers(b *testing.B) {
	const batch, tokens, d = 2, 256, 256
	x := randomDense(rand.New(rand.NewPCG(1, 2)), batch, tokens, d)
	rows := float64(batch * tokens)
	attn := func(width int) float64 {
		return 2 * 2 * float64(batch) * float64(tokens) * float64(tokens) * float64(width)
	}
	proj := func(in, out int) float64 { return 2 * rows * float64(in) * float64(out) }
	for _, c := range []struct {
		name  string
		layer registry.Layer
		flops float64
	}{
		{"simple", &Simple{Scaled: true, Causal: true}, attn(d)},
		{"self", &Self{DIn: d, DOut: d, Weights: "linear", Scaled: true, Causal: true}, 3*proj(d, d) + attn(d)},
		{"causal", &Causal{DIn: d, DOut: d, ContextLength: tokens}, 3*proj(d, d) + attn(d)},
		{"multihead_wrapper", &MultiHeadWrapper{DIn: d, DOut: d / 4, ContextLength: tokens, NumHeads: 4}, 3*proj(d, d) + attn(d)},
		{"multihead", &MultiHead{DIn: d, DOut: d, ContextLength: tokens, NumHeads: 4, Causal: true, OutBias: true}, 4*proj(d, d) + attn(d)},
		{"linear", &Linear{DIn: d, DOut: d, Bias: true}, proj(d, d)},
		{"average", &Average{}, 2 * rows * d},
	} {
		b.Run(fmt.Sprint(c.name), func(b *testing.B) { benchLayer(b, c.layer, x, c.flops) })
	}
}

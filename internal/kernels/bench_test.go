package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// cpuTime returns the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs f b.N times and reports, besides ns/op, the rate in GFLOP/s
// of wall time and in GFLOP per CPU-second (per core busy). On a shared
// machine the first swings with the load; the second mostly does not, and
// with -cpu 1 it is what the wall rate would be on an idle machine.
func measure(b *testing.B, flops float64, f func()) {
	f() // grow the buffers outside the timing
	cpu0 := cpuTime()
	for b.Loop() {
		f()
	}
	cpu := cpuTime() - cpu0
	total := flops * float64(b.N) / 1e9
	b.ReportMetric(total/b.Elapsed().Seconds(), "GFLOP/s")
	if cpu > 0 {
		b.ReportMetric(total/cpu.Seconds(), "GFLOP/cpu-s")
	}
}

// gemmBenchSizes are the square sizes BenchmarkGemm runs.
var gemmBenchSizes = []int{64, 128, 256, 512, 1024, 2048}

// BenchmarkGemm times n×n×n products with every instruction set and, for
// comparison, gonum's pure-Go Sgemm (what gorgonia.org/tensor uses). Run
// with -cpu 2 (or leave GOMAXPROCS at its default) to include parallelism.
func BenchmarkGemm(b *testing.B) {
	for _, n := range gemmBenchSizes {
		rng := rand.New(rand.NewPCG(1, 2))
		x, y, z := randSlice(rng, n*n), randSlice(rng, n*n), make([]float32, n*n)
		flops := 2 * float64(n) * float64(n) * float64(n)
		for _, set := range availableISAs() {
			b.Run(fmt.Sprintf("%s/n=%d", set.name, n), func(b *testing.B) {
				saved := currentISA()
				active.Store(set)
				defer active.Store(saved)
				measure(b, flops, func() { Gemm(false, false, n, n, n, 1, x, n, y, n, 0, z, n) })
			})
		}
		b.Run(fmt.Sprintf("gonum/n=%d", n), func(b *testing.B) {
			var impl gonum.Implementation
			measure(b, flops, func() { impl.Sgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, x, n, y, n, 0, z, n) })
		})
	}
}

// attnBenchSizes are the sequence lengths BenchmarkAttend runs.
var attnBenchSizes = []int{512, 1024, 2048, 4096}

// attentionFlops counts the multiply-adds of QKᵀ and PV as 2 flops each,
// halved under a causal mask (the skipped half is not work to report).
func attentionFlops(tq, tk, d, dv int, causal bool) float64 {
	f := 2 * float64(tq) * float64(tk) * float64(d+dv)
	if causal {
		f /= 2
	}
	return f
}

// BenchmarkAttend times one causal head (T×64) with the fused kernel on
// every instruction set, and, for comparison, the unfused computation a
// layer on gonum would do: Sgemm for the scores, a row softmax, Sgemm for
// the product with V.
func BenchmarkAttend(b *testing.B) {
	const d = 64
	for _, t := range attnBenchSizes {
		rng := rand.New(rand.NewPCG(1, 2))
		h := Head{Tq: t, Tk: t, D: d, Dv: d, LdQ: d, LdK: d, LdV: d, LdOut: d,
			Q: randSlice(rng, t*d), K: randSlice(rng, t*d), V: randSlice(rng, t*d), Out: make([]float32, t*d)}
		opt := AttentionOptions{Scale: 0.125, Causal: true}
		flops := attentionFlops(t, t, d, d, true)
		for _, set := range availableISAs() {
			b.Run(fmt.Sprintf("%s/T=%d", set.name, t), func(b *testing.B) {
				saved := currentISA()
				active.Store(set)
				defer active.Store(saved)
				measure(b, flops, func() { Attend(h, opt) })
			})
		}
		if t > 2048 {
			continue // the unfused version needs T² memory and minutes
		}
		b.Run(fmt.Sprintf("gonum-unfused/T=%d", t), func(b *testing.B) {
			var impl gonum.Implementation
			s := make([]float32, t*t)
			measure(b, flops, func() {
				impl.Sgemm(blas.NoTrans, blas.Trans, t, t, d, opt.Scale, h.Q, d, h.K, d, 0, s, t)
				for i := range t {
					row := s[i*t : (i+1)*t]
					for j := i + 1; j < t; j++ {
						row[j] = float32(math.Inf(-1))
					}
				}
				SoftmaxRows(s, t, t)
				impl.Sgemm(blas.NoTrans, blas.NoTrans, t, d, t, 1, s, t, h.V, d, 0, h.Out, d)
			})
		})
	}
}

// BenchmarkAttendBatch times the attention core of the multi-head layer in
// issue 5: B=4, H=12 heads of 64, T=512, causal, heads addressed in place
// inside (B·T, H·64) projections.
func BenchmarkAttendBatch(b *testing.B) {
	const bsz, nh, t, dh = 4, 12, 512, 64
	const width = nh * dh
	rng := rand.New(rand.NewPCG(1, 2))
	q, k, v := randSlice(rng, bsz*t*width), randSlice(rng, bsz*t*width), randSlice(rng, bsz*t*width)
	out := make([]float32, bsz*t*width)
	heads := make([]Head, 0, bsz*nh)
	for bi := range bsz {
		for hi := range nh {
			off := bi*t*width + hi*dh
			heads = append(heads, Head{Tq: t, Tk: t, D: dh, Dv: dh,
				Q: q[off:], LdQ: width, K: k[off:], LdK: width, V: v[off:], LdV: width, Out: out[off:], LdOut: width})
		}
	}
	opt := AttentionOptions{Scale: 0.125, Causal: true}
	flops := float64(len(heads)) * attentionFlops(t, t, dh, dh, true)
	for _, set := range availableISAs() {
		b.Run(set.name, func(b *testing.B) {
			saved := currentISA()
			active.Store(set)
			defer active.Store(saved)
			measure(b, flops, func() { AttendBatch(heads, opt) })
		})
	}
}

// BenchmarkMicroKernel times each instruction set's micro-kernel alone on
// L1-resident packed panels (kc = 256): the ceiling for everything else.
func BenchmarkMicroKernel(b *testing.B) {
	for _, set := range availableISAs() {
		k := set.gemm
		b.Run(k.name, func(b *testing.B) {
			const kc = 256
			a, p, c := make([]float32, kc*k.mr), make([]float32, kc*k.nr), make([]float32, k.mr*k.nr)
			measure(b, 2*float64(k.mr*k.nr*kc), func() { k.tile(kc, a, 1, k.mr, p, k.nr, c, k.nr, 1, 1) })
		})
	}
}

// BenchmarkLinear times the projections of the multi-head layer in issue 5
// (B·T = 2048 rows, d = 768): the fused QKV projection (out = 3·768) and the
// output projection (out = 768), weights stored (out, in) as PyTorch does.
func BenchmarkLinear(b *testing.B) {
	const rows, in = 2048, 768
	for _, out := range []int{768, 3 * 768} {
		rng := rand.New(rand.NewPCG(3, 4))
		x, w, bias, y := randSlice(rng, rows*in), randSlice(rng, out*in), randSlice(rng, out), make([]float32, rows*out)
		flops := 2 * float64(rows) * float64(in) * float64(out)
		for _, set := range availableISAs() {
			b.Run(fmt.Sprintf("%s/%dx%dx%d", set.name, rows, in, out), func(b *testing.B) {
				saved := currentISA()
				active.Store(set)
				defer active.Store(saved)
				measure(b, flops, func() { Linear(y, x, w, bias, rows, in, out) })
			})
		}
		b.Run(fmt.Sprintf("gonum/%dx%dx%d", rows, in, out), func(b *testing.B) {
			var impl gonum.Implementation
			measure(b, flops, func() { impl.Sgemm(blas.NoTrans, blas.Trans, rows, out, in, 1, x, in, w, in, 0, y, out) })
		})
	}
}

// BenchmarkSoftmaxRows times the row softmax on 512 rows of 512 and of
// 4096, reporting elements per nanosecond.
func BenchmarkSoftmaxRows(b *testing.B) {
	for _, n := range []int{512, 4096} {
		rng := rand.New(rand.NewPCG(5, 6))
		const rows = 512
		src := randSlice(rng, rows*n)
		x := make([]float32, rows*n)
		for _, set := range availableISAs() {
			b.Run(fmt.Sprintf("%s/n=%d", set.name, n), func(b *testing.B) {
				saved := currentISA()
				active.Store(set)
				defer active.Store(saved)
				for b.Loop() {
					copy(x, src)
					SoftmaxRows(x, rows, n)
				}
				b.ReportMetric(float64(rows*n)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "elem/ns")
			})
		}
	}
}

// shortBenchShapes are the (k, n) weights BenchmarkShortProducts runs:
// a fused QKV in-projection and the out-projection of d = 768, and
// MiniLM's MLP (384 → 1536 → 384).
var shortBenchShapes = [][2]int{{768, 2304}, {768, 768}, {384, 1536}, {1536, 384}}

// BenchmarkShortProducts times products of few rows (one token to a short
// sentence) by a weight stored (out, in) as nn.Linear stores it: on the
// weight packed once (GemmPacked, what the executor and the layers use for
// constant weights) and on the plain weight (Gemm, which computes up to 4
// rows as dot products and packs the weight for more).
func BenchmarkShortProducts(b *testing.B) {
	for _, kn := range shortBenchShapes {
		k, n := kn[0], kn[1]
		rng := rand.New(rand.NewPCG(15, 6))
		w := randSlice(rng, n*k)
		p := PackB(true, k, n, w, k)
		for _, m := range []int{1, 16, 32, 64} {
			a, c := randSlice(rng, m*k), make([]float32, m*n)
			flops := 2 * float64(m) * float64(n) * float64(k)
			b.Run(fmt.Sprintf("packed/m=%d/k=%d/n=%d", m, k, n), func(b *testing.B) {
				measure(b, flops, func() { GemmPacked(false, m, 1, a, k, p, 0, c, n) })
			})
			b.Run(fmt.Sprintf("plain/m=%d/k=%d/n=%d", m, k, n), func(b *testing.B) {
				measure(b, flops, func() { Gemm(false, true, m, n, k, 1, a, k, w, k, 0, c, n) })
			})
		}
	}
}

// BenchmarkGemvFromMemory times one-row products by weights that do not
// stay in cache: eight 2048×2048 weights (128 MiB in all, four times the
// L3 of the machines in docs/performance.md) used in turn, as a decoder's
// layers use theirs for one token. The product is the weight's read from
// memory; GB/s is the rate of it.
func BenchmarkGemvFromMemory(b *testing.B) {
	const k, n, count = 2048, 2048, 8
	rng := rand.New(rand.NewPCG(15, 7))
	ws := make([][]float32, count)
	ps := make([]*PackedB, count)
	for i := range ws {
		ws[i] = randSlice(rng, n*k)
		ps[i] = PackB(true, k, n, ws[i], k)
	}
	a, c := randSlice(rng, k), make([]float32, n)
	for _, kind := range []string{"packed", "plain"} {
		b.Run(kind, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if kind == "packed" {
					GemmPacked(false, 1, 1, a, k, ps[i], 0, c, n)
				} else {
					Gemm(false, true, 1, n, k, 1, a, k, ws[i], k, 0, c, n)
				}
				i = (i + 1) % count
			}
			b.ReportMetric(float64(4*k*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

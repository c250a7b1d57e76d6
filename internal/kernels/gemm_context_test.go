package kernels

import (
	"context"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// countdown is a context that reports itself cancelled from its n-th Err
// call on, so that a test stops a kernel at a chosen point without timing.
type countdown struct {
	context.Context
	left atomic.Int64
}

func newCountdown(n int64) *countdown {
	c := &countdown{Context: context.Background()}
	c.left.Store(n)
	return c
}

// Err is nil for the first n calls, then context.Canceled.
func (c *countdown) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// nanFilled returns n NaNs: the parts of C a stopped product skips keep them.
func nanFilled(n int) []float32 {
	c := make([]float32, n)
	for i := range c {
		c[i] = float32(math.NaN())
	}
	return c
}

// countNaN counts the NaNs of c.
func countNaN(c []float32) int {
	n := 0
	for _, x := range c {
		if x != x {
			n++
		}
	}
	return n
}

func TestGemmContextMatchesGemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const m, n, k = 300, 200, 700 // over parallelMinFlops, several blocks of k
	a, b := randSlice(rng, m*k), randSlice(rng, k*n)
	want, got := make([]float32, m*n), nanFilled(m*n)
	Gemm(false, true, m, n, k, 0.5, a, k, b, k, 0, want, n)
	if err := GemmContext(context.Background(), false, true, m, n, k, 0.5, a, k, b, k, 0, got, n); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("C[%d] = %v, Gemm gives %v", i, got[i], want[i])
		}
	}
}

// TestGemmContextStops stops a product half-way through its checks: the
// call returns the context's error and the parts not run leave C as it
// was.
func TestGemmContextStops(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const m, n, k = 8192, 64, 64 // one block of k and of n: many parts, each writing its rows of C once
	a, b := randSlice(rng, m*k), randSlice(rng, k*n)
	c := nanFilled(m * n)
	const many = 1 << 40
	count := newCountdown(many)
	if err := GemmContext(count, false, false, m, n, k, 1, a, k, b, n, 0, c, n); err != nil {
		t.Fatal(err)
	}
	checks := many - count.left.Load()
	if checks < 8 {
		t.Fatalf("the product checked its context %d times, want one check per part", checks)
	}
	c = nanFilled(m * n)
	err := GemmContext(newCountdown(checks/2), false, false, m, n, k, 1, a, k, b, n, 0, c, n)
	if err != context.Canceled {
		t.Fatalf("GemmContext returned %v, want context.Canceled", err)
	}
	if left := countNaN(c); left == 0 || left == m*n {
		t.Fatalf("%d of %d elements of C untouched: the product did not stop part-way", left, m*n)
	}

	c = nanFilled(m * n)
	if err := GemmContext(newCountdown(0), false, false, m, n, k, 1, a, k, b, n, 0, c, n); err != context.Canceled {
		t.Fatalf("GemmContext on a done context returned %v", err)
	}
	if countNaN(c) != m*n {
		t.Fatal("GemmContext on a done context wrote into C")
	}
}

func TestGemmStridedContext(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range []struct{ batch, m, n, k int }{
		{3, 200, 300, 400}, // products large enough to run one after another
		{16, 32, 48, 40},   // small products in parallel across the batch
	} {
		a, b := randSlice(rng, s.batch*s.m*s.k), randSlice(rng, s.batch*s.k*s.n)
		want, got := make([]float32, s.batch*s.m*s.n), nanFilled(s.batch*s.m*s.n)
		GemmStrided(s.batch, false, false, s.m, s.n, s.k, 1, a, s.k, s.m*s.k, b, s.n, s.k*s.n, 0, want, s.n, s.m*s.n)
		err := GemmStridedContext(context.Background(), s.batch, false, false, s.m, s.n, s.k, 1, a, s.k, s.m*s.k, b, s.n, s.k*s.n, 0, got, s.n, s.m*s.n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("batch %d: C[%d] = %v, GemmStrided gives %v", s.batch, i, got[i], want[i])
			}
		}
		got = nanFilled(len(got))
		err = GemmStridedContext(newCountdown(1), s.batch, false, false, s.m, s.n, s.k, 1, a, s.k, s.m*s.k, b, s.n, s.k*s.n, 0, got, s.n, s.m*s.n)
		if err != context.Canceled {
			t.Fatalf("batch %d: returned %v, want context.Canceled", s.batch, err)
		}
		if left := countNaN(got); left == 0 {
			t.Fatalf("batch %d: every product ran although the context was done", s.batch)
		}
	}
}

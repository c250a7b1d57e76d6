package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLayerNorm32 holds LayerNorm32 to the normalization computed
// directly in float64 (one running sum each for the mean and the
// variance, one rounding at the end), within one float32 ulp: its partial
// sums only reorder float64 additions. Rows far from 0 (mean 1000, spread
// 0.01) need the float64 statistics; the row counts are split across
// threads and not; the residual's sum is rounded to float32 first; dst may
// be x. The rows' lengths leave a tail of 1 to 7 values after the vector
// code's chunks of 8, or none.
func TestLayerNorm32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		rows, cols     int
		offset, spread float64
		res, bias      bool
	}{
		{rows: 37, cols: 384, offset: 0, spread: 1, res: true, bias: true},
		{rows: 300, cols: 384, offset: 0, spread: 3, bias: true},
		{rows: 5, cols: 7, offset: 1000, spread: 0.01, res: true},
		{rows: 1, cols: 1, offset: 2, spread: 1, bias: true},
		{rows: 3, cols: 13, offset: -5, spread: 2, bias: true},
		{rows: 4, cols: 20, offset: 0, spread: 1, res: true, bias: true},
		{rows: 2, cols: 16, offset: 0, spread: 1},
	} {
		n := c.rows * c.cols
		rand32 := func(k int, offset, spread float64) []float32 {
			v := make([]float32, k)
			for i := range v {
				v[i] = float32(offset + spread*rng.NormFloat64())
			}
			return v
		}
		x := rand32(n, c.offset, c.spread)
		scale := rand32(c.cols, 1, 0.5)
		var res, bias []float32
		if c.res {
			res = rand32(n, 0, 1)
		}
		if c.bias {
			bias = rand32(c.cols, 0, 0.5)
		}
		const eps = 1e-12
		want := make([]float32, n)
		for r := range c.rows {
			row := make([]float64, c.cols)
			var mean, variance float64
			for j := range row {
				v := x[r*c.cols+j]
				if res != nil {
					v += res[r*c.cols+j]
				}
				row[j] = float64(v)
				mean += row[j]
			}
			mean /= float64(c.cols)
			for _, v := range row {
				variance += (v - mean) * (v - mean)
			}
			inv := 1 / math.Sqrt(variance/float64(c.cols)+eps)
			for j, v := range row {
				y := (v - mean) * inv * float64(scale[j])
				if bias != nil {
					y += float64(bias[j])
				}
				want[r*c.cols+j] = float32(y)
			}
		}
		for _, vector := range []bool{true, false} { // the AVX-512 rows where there are, and the Go code
			saved := cpu
			cpu.avx512 = cpu.avx512 && vector
			got := make([]float32, n)
			LayerNorm32(got, x, res, scale, bias, c.cols, eps)
			inPlace := append([]float32(nil), x...)
			LayerNorm32(inPlace, inPlace, res, scale, bias, c.cols, eps)
			cpu = saved
			for i := range want {
				ulp := float64(math.Nextafter32(float32(math.Abs(float64(want[i]))), math.MaxFloat32) - float32(math.Abs(float64(want[i]))))
				require.InDelta(t, want[i], got[i], ulp, "%d×%d at %d (vector code: %v)", c.rows, c.cols, i, vector)
				require.Equal(t, got[i], inPlace[i], "%d×%d at %d, in place (vector code: %v)", c.rows, c.cols, i, vector)
			}
		}
	}
	require.Panics(t, func() { LayerNorm32(make([]float32, 6), make([]float32, 6), nil, make([]float32, 4), nil, 4, 1e-5) })
}

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExp32 checks the float32 exponential against math.Exp to 2.5 ulp
// over the range softmax uses (arguments ≤ 0) and a little beyond, and its
// limits: −Inf and anything below −87.34 give 0.
func TestExp32(t *testing.T) {
	const maxRel = 3e-7 // 2.5 ulp at the bottom of a binade (ulp = 1.19e-7)
	for x := float32(-87); x <= 80; x += 0.0137 {
		want := math.Exp(float64(x))
		got := float64(exp32(x))
		require.InDelta(t, 0, (got-want)/want, maxRel, "exp32(%g) = %g, want %g", x, got, want)
	}
	require.Equal(t, float32(0), exp32(float32(math.Inf(-1))))
	require.Equal(t, float32(0), exp32(-100))
	require.Equal(t, float32(1), exp32(0))
	require.True(t, math.IsNaN(float64(exp32(float32(math.NaN())))))
}

// TestExpShift checks every instruction set's vector exponential (with
// its sum) against math.Exp at lengths around the vector widths.
func TestExpShift(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 33, 64, 100, 513} {
			// x is followed by sentinels that must survive.
			buf := make([]float32, n+20)
			for i := range buf {
				buf[i] = 40*rng.Float32() - 30
			}
			x := buf[:n]
			after := append([]float32(nil), buf[n:]...)
			if n > 3 {
				x[1] = float32(math.Inf(-1))
				x[2] = -200
			}
			shift := float32(5)
			want := make([]float64, n)
			var wantSum float64
			for i, v := range x {
				// The difference is rounded to float32 first, as any
				// float32 softmax does; only exp's own error is tested.
				want[i] = math.Exp(float64(v - shift))
				wantSum += want[i]
			}
			orig := append([]float32(nil), x...)
			sum := currentISA().expShift(x, shift)
			for i, v := range x {
				if want[i] < 1e-37 {
					require.InDelta(t, 0, v, 1e-37, "n=%d i=%d", n, i)
					continue
				}
				require.InDelta(t, 0, (float64(v)-want[i])/want[i], 3e-7, "n=%d i=%d: exp(%g)", n, i, orig[i]-shift)
			}
			require.InDelta(t, wantSum, float64(sum), 1e-6*wantSum+1e-30, "n=%d: sum", n)
			require.Equal(t, after, buf[n:], "n=%d: wrote past the end", n)
		}
	})
}

// TestVectorHelpers checks maxOf, scale and add against plain loops, and
// that they touch nothing past the slice.
func TestVectorHelpers(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 100} {
			buf := randSlice(rng, n+20)
			x := buf[:n]
			buf[n] = 100 // a larger value past the end must not count
			want := float32(math.Inf(-1))
			for _, v := range x {
				want = max(want, v)
			}
			require.Equal(t, want, currentISA().maxOf(x), "maxOf n=%d", n)
			if n > 0 {
				x[n-1] = 5 // the last element, in the tail
				require.Equal(t, float32(5), currentISA().maxOf(x), "maxOf tail n=%d", n)
			}

			ybuf := append([]float32(nil), buf...)
			currentISA().scale(ybuf[:n], -1.5)
			for i := range x {
				require.Equal(t, x[i]*-1.5, ybuf[i], "scale n=%d i=%d", n, i)
			}
			require.Equal(t, buf[n:], ybuf[n:], "scale n=%d wrote past the end", n)

			zbuf := append([]float32(nil), buf...)
			y := randSlice(rng, n+3)
			currentISA().add(zbuf[:n], y)
			for i := range x {
				require.Equal(t, x[i]+y[i], zbuf[i], "add n=%d i=%d", n, i)
			}
			require.Equal(t, buf[n:], zbuf[n:], "add n=%d wrote past the end", n)
		}
	})
}

func TestSoftmaxRows(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		// The last size is large enough to be split over threads.
		for _, size := range [][2]int{{1, 1}, {3, 7}, {5, 33}, {2, 513}, {300, 257}} {
			rows, n := size[0], size[1]
			x := make([]float32, rows*n)
			for i := range x {
				x[i] = 20*rng.Float32() - 10
			}
			x[0] = float32(math.Inf(-1))
			if rows > 1 { // a row of nothing but −Inf becomes NaN, as in PyTorch
				for j := range n {
					x[n+j] = float32(math.Inf(-1))
				}
			}
			if rows > 3 { // so does a row with a NaN, or a +Inf
				x[2*n+n/2] = float32(math.NaN())
				x[3*n+n-1] = float32(math.Inf(1))
			}
			want := make([]float32, len(x))
			tol := make([]float64, len(x))
			for r := range rows {
				row := make([]float64, n)
				for j := range n {
					row[j] = float64(x[r*n+j])
				}
				softmaxRef(row)
				for j, v := range row {
					want[r*n+j] = float32(v)
					tol[r*n+j] = attentionTolerance(n, 1, 0) * v
				}
			}
			SoftmaxRows(x, rows, n)
			requireWithin(t, want, x, tol, fmt.Sprintf("%d×%d", rows, n))
		}
	})
}

// TestInterleave checks every instruction set's transpose-for-packing
// against its definition, at row and column counts around the assembly's
// groups of 4 and 2 rows by 8 columns.
func TestInterleave(t *testing.T) {
	forEachISA(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 10))
		for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, 12, 16, 32} {
			for _, n := range []int{1, 7, 8, 9, 16, 33} {
				lds, ldd := n+3, rows+2
				src := randSlice(rng, (rows-1)*lds+n)
				dst := make([]float32, (n-1)*ldd+rows+2)
				for i := range dst {
					dst[i] = -7
				}
				currentISA().interleave(dst, ldd, src, lds, rows, n)
				for p := range n {
					for r := range ldd {
						want := float32(-7) // untouched outside the rows
						if r < rows {
							want = src[r*lds+p]
						}
						if p*ldd+r < len(dst) {
							require.Equal(t, want, dst[p*ldd+r], "rows=%d n=%d p=%d r=%d", rows, n, p, r)
						}
					}
				}
			}
		}
	})
}

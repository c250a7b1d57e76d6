package exec

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rotaryCase is a RotaryEmbedding call for the tests.
type rotaryCase struct {
	name              string
	rank3             bool
	b, h, s, size     int
	dim               int // rotary_embedding_dim attribute; 0: absent
	interleaved       bool
	positions         bool // position_ids and (max_position, dim/2) caches; else (cacheBatch, s, dim/2)
	cacheBatch        int  // without positions: the caches' batch (b or 1)
	posBatch          int  // with positions: position_ids' batch (b or 1)
	float64s          bool
	x, cos, sin, posv *value
}

// inputs draws an input and RoPE tables of random angles.
func (c *rotaryCase) inputs(seed uint64) []*value {
	r := rand.New(rand.NewPCG(seed, 11))
	dim := c.dim
	if dim == 0 {
		dim = c.size
	}
	xs := []int{c.b, c.h, c.s, c.size}
	if c.rank3 {
		xs = []int{c.b, c.s, c.h * c.size}
	}
	cs := []int{c.cacheBatch, c.s, dim / 2}
	if c.positions {
		cs = []int{7, dim / 2}
	}
	x := make([]float64, numel(xs))
	for i := range x {
		x[i] = r.NormFloat64()
	}
	cos, sin := make([]float64, numel(cs)), make([]float64, numel(cs))
	for i := range cos {
		a := r.Float64() * 2 * math.Pi
		cos[i], sin[i] = math.Cos(a), math.Sin(a)
	}
	wrap := func(shape []int, data []float64) *value {
		if c.float64s {
			return valueOf(shape, data)
		}
		return valueOf(shape, convert[float64, float32](data))
	}
	c.x, c.cos, c.sin = wrap(xs, x), wrap(cs, cos), wrap(cs, sin)
	in := []*value{c.x, c.cos, c.sin}
	if c.positions {
		ids := make([]int64, c.posBatch*c.s)
		for i := range ids {
			ids[i] = r.Int64N(7)
		}
		c.posv = valueOf([]int{c.posBatch, c.s}, ids)
		in = append(in, c.posv)
	}
	return in
}

// node builds the RotaryEmbedding node of the case.
func (c *rotaryCase) node() *node {
	n := &node{op: "RotaryEmbedding", opset: 23, spec: ops["RotaryEmbedding"], attrs: attrs{}, out: []int{0}}
	if c.dim != 0 {
		n.attrs["rotary_embedding_dim"] = aInt(int64(c.dim))
	}
	if c.interleaved {
		n.attrs["interleaved"] = aInt(1)
	}
	if c.rank3 {
		n.attrs["num_heads"] = aInt(int64(c.h))
	}
	return n
}

// reference rotates each pair of features as a complex number multiplied
// by e^{iθ} = cos θ + i sin θ.
func (c *rotaryCase) reference() *value {
	x := castTo[float64](c.x.data)
	cos, sin := castTo[float64](c.cos.data), castTo[float64](c.sin.data)
	out := append([]float64(nil), x...)
	dim := c.dim
	if dim == 0 {
		dim = c.size
	}
	for b := range c.b {
		for h := range c.h {
			for s := range c.s {
				var row int
				if c.positions {
					row = int(c.posv.data.([]int64)[(b%c.posBatch)*c.s+s]) * dim / 2
				} else {
					row = (b%c.cacheBatch*c.s + s) * dim / 2
				}
				base := ((b*c.h+h)*c.s + s) * c.size
				if c.rank3 {
					base = ((b*c.s+s)*c.h + h) * c.size
				}
				for i := range dim / 2 {
					re, im := base+i, base+i+dim/2
					if c.interleaved {
						re, im = base+2*i, base+2*i+1
					}
					z := complex(x[re], x[im]) * complex(cos[row+i], sin[row+i])
					out[re], out[im] = real(z), imag(z)
				}
			}
		}
	}
	if c.float64s {
		return valueOf(c.x.shape, out)
	}
	return valueOf(c.x.shape, convert[float64, float32](out))
}

// TestRotaryMatchesReference covers both layouts, both pairings, partial
// rotation, caches with and without position_ids, caches and position_ids
// broadcast over the batch, and float64.
func TestRotaryMatchesReference(t *testing.T) {
	for i, c := range []rotaryCase{
		{name: "4d_positions", b: 2, h: 3, s: 4, size: 8, positions: true, posBatch: 2},
		{name: "4d_positions_interleaved", b: 2, h: 3, s: 4, size: 8, positions: true, posBatch: 2, interleaved: true},
		{name: "3d_positions", rank3: true, b: 2, h: 2, s: 3, size: 6, positions: true, posBatch: 2},
		{name: "3d_caches_interleaved", rank3: true, b: 2, h: 2, s: 3, size: 6, cacheBatch: 2, interleaved: true},
		{name: "4d_caches_broadcast", b: 3, h: 2, s: 3, size: 4, cacheBatch: 1},
		{name: "positions_broadcast", b: 3, h: 2, s: 3, size: 4, positions: true, posBatch: 1},
		{name: "partial", b: 2, h: 2, s: 3, size: 8, dim: 4, positions: true, posBatch: 2},
		{name: "partial_3d_interleaved", rank3: true, b: 1, h: 2, s: 5, size: 10, dim: 6, positions: true, posBatch: 1, interleaved: true},
		{name: "float64", b: 2, h: 2, s: 3, size: 4, positions: true, posBatch: 2, float64s: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.inputs(uint64(i))
			n := c.node()
			got, err := n.spec.run(testRun, n, in)
			require.NoError(t, err)
			assertValue(t, c.reference(), got[0])
		})
	}
	// A rotation by 90° at position 1, none at position 0.
	x := f32(dims(1, 1, 2, 2), 1, 2, 1, 2)
	cos, sin := f32(dims(2, 1), 1, 0), f32(dims(2, 1), 0, 1)
	n := (&rotaryCase{}).node()
	got, err := n.spec.run(testRun, n, []*value{x, cos, sin, i64(dims(1, 2), 0, 1)})
	require.NoError(t, err)
	assertValue(t, f32(dims(1, 1, 2, 2), 1, 2, -2, 1), got[0])
}

// TestRotaryErrors checks that inconsistent calls are refused with a
// message naming the input or attribute.
func TestRotaryErrors(t *testing.T) {
	x4 := f32(dims(1, 2, 3, 4), make([]float32, 24)...)
	x3 := f32(dims(1, 3, 8), make([]float32, 24)...)
	cache := f32(dims(5, 2), make([]float32, 10)...)
	pos := i64(dims(1, 3), 0, 1, 4)
	for _, c := range []struct {
		name  string
		attrs attrs
		in    []*value
		err   string
	}{
		{"int input", nil, []*value{i64(dims(1, 1, 1, 2), 1, 2), cache, cache, pos}, "dtype int64 is not supported here (want float32 or float64)"},
		{"cache dtype", nil, []*value{x4, f64(dims(5, 2), make([]float64, 10)...), cache, pos}, "cos_cache is float64 and sin_cache float32; both must be float32"},
		{"rank", nil, []*value{f32(dims(3, 4), make([]float32, 12)...), cache, cache, pos}, "must be 4-D (batch, heads, seq, head_size) or 3-D"},
		{"3-D without num_heads", nil, []*value{x3, cache, cache, pos}, "3-D input (1, 3, 8) needs num_heads"},
		{"3-D num_heads", attrs{"num_heads": aInt(3)}, []*value{x3, cache, cache, pos}, "a positive divisor of its hidden size (num_heads is 3)"},
		{"4-D num_heads", attrs{"num_heads": aInt(4)}, []*value{x4, cache, cache, pos}, "num_heads is 4, the 4-D input (1, 2, 3, 4) has 2 heads"},
		{"odd dim", attrs{"rotary_embedding_dim": aInt(3)}, []*value{x4, cache, cache, pos}, "rotary_embedding_dim 3 must be even and at most the head size 4"},
		{"long dim", attrs{"rotary_embedding_dim": aInt(6)}, []*value{x4, cache, cache, pos}, "rotary_embedding_dim 6 must be even"},
		{"interleaved", attrs{"interleaved": aInt(2)}, []*value{x4, cache, cache, pos}, "interleaved is 2, want 0 or 1"},
		{"cache width", nil, []*value{x4, f32(dims(5, 3), make([]float32, 15)...), f32(dims(5, 3), make([]float32, 15)...), pos}, "(max_position + 1, rotary_dim/2 = 2), are (5, 3)"},
		{"cache shapes differ", nil, []*value{x4, cache, f32(dims(4, 2), make([]float32, 8)...), pos}, "cos_cache (5, 2) and sin_cache (4, 2) differ in shape"},
		{"caches without positions", nil, []*value{x4, cache, cache}, "without position_ids the caches must be (batch, seq, rotary_dim/2) = (1, 3, 2), are (5, 2)"},
		{"position dtype", nil, []*value{x4, cache, cache, i32(dims(1, 3), 0, 1, 2)}, "position_ids is int32 (1, 3), want int64 (1, 3)"},
		{"position shape", nil, []*value{x4, cache, cache, i64(dims(3), 0, 1, 2)}, "position_ids is int64 (3,), want int64 (1, 3)"},
		{"position range", nil, []*value{x4, cache, cache, i64(dims(1, 3), 0, 5, 1)}, "position_ids[1] is 5, outside the caches' 5 positions"},
		{"negative position", nil, []*value{x4, cache, cache, i64(dims(1, 3), -1, 0, 1)}, "position_ids[0] is -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &node{op: "RotaryEmbedding", opset: 23, spec: ops["RotaryEmbedding"], attrs: c.attrs, out: []int{0}}
			_, err := n.spec.run(testRun, n, c.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
		})
	}
}

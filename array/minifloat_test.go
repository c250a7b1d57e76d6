package array

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

var (
	nan = math.NaN()
	inf = math.Inf(1)
)

// The conversion rules of ONNX's Cast to the float8 and float4 types
// ("Float stored in 8 bits" and the Cast operator's table): round to
// nearest even; out of range saturate gives the largest finite value,
// otherwise NaN, or an infinity for float8e5m2. ONNX's node tests
// (../shared/conformance, test_cast_*) check every case of their data
// through the executor.
func TestRoundFloatMiniFloats(t *testing.T) {
	for _, c := range []struct {
		dt         DType
		x          float64
		sat, nosat float64
	}{
		{Float8E4M3FN, 448, 448, 448},
		{Float8E4M3FN, 464, 448, 448}, // tie between 448 and 480 (NaN's code): even
		{Float8E4M3FN, 470, 448, nan},
		{Float8E4M3FN, 480, 448, 448}, // the reference truncates, then clears the NaN code's last bit
		{Float8E4M3FN, 500, 448, nan},
		{Float8E4M3FN, 1e6, 448, nan},
		{Float8E4M3FN, -inf, -448, nan},
		{Float8E4M3FN, 0x1p-9, 0x1p-9, 0x1p-9}, // the smallest subnormal
		{Float8E4M3FN, 0x1p-10, 0, 0},          // tie with 0: even
		{Float8E4M3FN, 3 * 0x1p-11, 0x1p-9, 0x1p-9},
		{Float8E4M3FN, 0.3, 0.3125, 0.3125},
		{Float8E4M3FNUZ, 240, 240, 240},
		{Float8E4M3FNUZ, 248, 240, nan}, // tie rounds up to 256, beyond the range
		{Float8E4M3FNUZ, inf, 240, nan},
		{Float8E4M3FNUZ, math.Copysign(0, -1), 0, 0},
		{Float8E4M3FNUZ, -1e-9, 0, 0},
		{Float8E5M2, 57344, 57344, 57344},
		{Float8E5M2, 61440, 57344, inf}, // tie: even is 65536, beyond the range
		{Float8E5M2, -inf, -57344, -inf},
		{Float8E5M2, 0x1p-16, 0x1p-16, 0x1p-16},
		{Float8E5M2FNUZ, 57344, 57344, 57344},
		{Float8E5M2FNUZ, inf, 57344, nan},
		{Float8E5M2FNUZ, 0x1p-17, 0x1p-17, 0x1p-17},
		{Float4E2M1, 0.25, 0, 0}, // ties to even: 0, 1, 2, 4
		{Float4E2M1, 0.75, 1, 1},
		{Float4E2M1, 2.5, 2, 2},
		{Float4E2M1, 5, 4, 4},
		{Float4E2M1, 5.01, 6, 6},
		{Float4E2M1, -1e6, -6, -6},
		{Float4E2M1, inf, 6, 6},
	} {
		for _, sat := range []bool{true, false} {
			want := c.nosat
			if sat {
				want = c.sat
			}
			got := float64(RoundFloat(c.dt, c.x, sat))
			if math.IsNaN(want) {
				assert.True(t, math.IsNaN(got), "%s(%g, saturate %v) = %g, want NaN", c.dt, c.x, sat, got)
				continue
			}
			assert.Equal(t, want, got, "%s(%g, saturate %v)", c.dt, c.x, sat)
			assert.Equal(t, math.Signbit(want), math.Signbit(got), "%s(%g) sign", c.dt, c.x)
		}
	}
	assert.Equal(t, float32(math.Copysign(0, -1)), RoundFloat(Float4E2M1, nan, true), "NaN is code 0x8 in ONNX's reference")
	assert.True(t, math.Signbit(float64(RoundFloat(Float4E2M1, nan, true))))
}

// Every code of every float8 and float4 type decodes to a value that
// rounds to itself and encodes back to the code (the one NaN of a type
// with several NaN codes keeps its code's payload).
func TestMiniFloatCodesRoundTrip(t *testing.T) {
	for dt, f := range miniFloats {
		for code := range 1 << (1 + f.exp + f.mant) {
			v := FloatFromBits(dt, uint16(code))
			if got := FloatBits(dt, v); got != uint16(code) {
				t.Errorf("%s: code %#02x decodes to %g, which encodes as %#02x", dt, code, v, got)
			}
			if v == v {
				assert.Equal(t, v, RoundFloat(dt, float64(v), false), "%s code %#02x", dt, code)
			}
		}
	}
	for code := range 255 {
		v := FloatFromBits(Float8E8M0, uint16(code))
		assert.Equal(t, math.Ldexp(1, code-127), float64(v))
		assert.Equal(t, uint16(code), FloatBits(Float8E8M0, v))
	}
	assert.True(t, math.IsNaN(float64(FloatFromBits(Float8E8M0, 0xff))))
}

func TestRoundE8M0(t *testing.T) {
	for _, c := range []struct {
		x                 float64
		up, down, nearest float64
	}{
		{1, 1, 1, 1},
		{3, 4, 2, 4},   // 1.5·2: the top mantissa bit rounds nearest up
		{2.9, 4, 2, 2}, // 1.45·2
		{0.124, 0.125, 0.0625, 0.125},
		{-3, 4, 2, 4}, // the sign is ignored
		{0, 0x1p-127, 0x1p-127, 0x1p-127},
	} {
		assert.Equal(t, c.up, float64(RoundE8M0(c.x, true, RoundUp)), "up %g", c.x)
		assert.Equal(t, c.down, float64(RoundE8M0(c.x, true, RoundDown)), "down %g", c.x)
		assert.Equal(t, c.nearest, float64(RoundE8M0(c.x, true, RoundNearest)), "nearest %g", c.x)
	}
	assert.Equal(t, 0x1p127, float64(RoundE8M0(inf, true, RoundUp)))
	assert.True(t, math.IsNaN(float64(RoundE8M0(inf, false, RoundUp))))
	assert.True(t, math.IsNaN(float64(RoundE8M0(0x1.8p127, false, RoundUp))), "rounds up past 2^127")
}

// Storing keeps the values of a type (float8e5m2's infinities included)
// and saturates the others.
func TestRoundSliceStores(t *testing.T) {
	data := []float32{float32(inf), 1e6, 0.3}
	RoundSlice(Float8E5M2, data)
	assert.Equal(t, []float32{float32(inf), 57344, 0.3125}, data)
	data = []float32{float32(inf), float32(nan)}
	RoundSlice(Float4E2M1, data)
	assert.Equal(t, []float32{6, float32(math.Copysign(0, -1))}, data)
	assert.True(t, IsValue(Float8E4M3FN, float32(nan)))
	assert.False(t, IsValue(Float8E4M3FN, float32(inf)))
	assert.False(t, IsValue(Float4E2M1, float32(nan)))
}

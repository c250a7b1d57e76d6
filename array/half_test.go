package array

import (
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// halfCase is one record of testdata/half.bin (gen_half.py): a float32
// and what NumPy's astype(np.float16) and PyTorch's .to(torch.bfloat16)
// make of it.
type halfCase struct {
	x        float32
	f16, b16 uint16
}

func readHalfCases(t *testing.T) []halfCase {
	raw, err := os.ReadFile("testdata/half.bin")
	require.NoError(t, err)
	require.Zero(t, len(raw)%8)
	cases := make([]halfCase, len(raw)/8)
	for i := range cases {
		r := raw[8*i:]
		cases[i] = halfCase{
			x:   math.Float32frombits(binary.LittleEndian.Uint32(r)),
			f16: binary.LittleEndian.Uint16(r[4:]),
			b16: binary.LittleEndian.Uint16(r[6:]),
		}
	}
	return cases
}

func isNaN32(x float32) bool { return x != x }

func TestFloat16BitsMatchesNumPy(t *testing.T) {
	cases := readHalfCases(t)
	require.Greater(t, len(cases), 10000)
	for _, c := range cases {
		got := Float16Bits(c.x)
		if isNaN32(c.x) {
			assert.True(t, isNaN32(Float16FromBits(got)), "%g (%#08x) -> %#04x, want a NaN", c.x, math.Float32bits(c.x), got)
			continue
		}
		if got != c.f16 {
			t.Errorf("Float16Bits(%g = %#08x) = %#04x, NumPy %#04x", c.x, math.Float32bits(c.x), got, c.f16)
		}
		// The float64 path rounds the same way for values float32 holds.
		assert.Equal(t, math.Float32bits(Float16FromBits(c.f16)), math.Float32bits(RoundFloat(Float16, float64(c.x), true)), "%g", c.x)
	}
}

func TestBFloat16BitsMatchesPyTorch(t *testing.T) {
	for _, c := range readHalfCases(t) {
		got := BFloat16Bits(c.x)
		if isNaN32(c.x) {
			assert.True(t, isNaN32(BFloat16FromBits(got)), "%#08x", math.Float32bits(c.x))
			continue
		}
		if got != c.b16 {
			t.Errorf("BFloat16Bits(%g = %#08x) = %#04x, PyTorch %#04x", c.x, math.Float32bits(c.x), got, c.b16)
		}
	}
}

// Every binary16 code widens exactly and narrows back to itself; a NaN
// keeps its payload and comes back quiet, as NumPy converts it.
func TestFloat16RoundTripsEveryCode(t *testing.T) {
	for h := range 1 << 16 {
		x := Float16FromBits(uint16(h))
		want := uint16(h)
		if isNaN32(x) {
			want |= 0x200
		}
		if got := Float16Bits(x); got != want {
			t.Fatalf("Float16Bits(Float16FromBits(%#04x) = %g) = %#04x", h, x, got)
		}
	}
	assert.Equal(t, float32(0x1p-24), Float16FromBits(0x0001), "smallest subnormal")
	assert.Equal(t, float32(-0x1.ff8p-15), Float16FromBits(0x83ff), "largest negative subnormal")
	assert.Equal(t, float32(65504), Float16FromBits(0x7bff))
	assert.True(t, math.IsInf(float64(Float16FromBits(0xfc00)), -1))
	assert.True(t, math.Signbit(float64(Float16FromBits(0x8000))), "negative zero")
}

func TestBFloat16RoundTripsEveryCode(t *testing.T) {
	for b := range 1 << 16 {
		if got := BFloat16Bits(BFloat16FromBits(uint16(b))); got != uint16(b) && !isNaN32(BFloat16FromBits(uint16(b))) {
			t.Fatalf("BFloat16Bits(BFloat16FromBits(%#04x)) = %#04x", b, got)
		}
	}
}

// A float64 that float32 cannot hold is rounded once, not twice: this
// one lies just above a binary16 tie, and rounding to float32 first would
// land on the tie and round it down to even.
func TestRoundFloatFromFloat64RoundsOnce(t *testing.T) {
	x := 1 + 0x1p-11 + 0x1p-40 // just above the tie between 1 and 1+2^-10
	assert.Equal(t, float32(1), float32(float64(float32(x))-0x1p-11), "float32(x) is the tie")
	assert.Equal(t, float32(1+0x1p-10), RoundFloat(Float16, x, true))
	assert.Equal(t, float32(1), Float16FromBits(Float16Bits(float32(x))), "the float32 path rounds twice")
	assert.True(t, math.IsInf(float64(RoundFloat(Float16, 65520.000001, true)), 1))
	assert.Equal(t, float32(65504), RoundFloat(Float16, 65519.999999, true))
}

func TestRoundSlice(t *testing.T) {
	data := []float32{0.1, 1e-8, 70000, -2.5}
	RoundSlice(Float16, data)
	assert.Equal(t, []float32{0.0999755859375, 0, float32(math.Inf(1)), -2.5}, data, "np.float32([0.1, 1e-8, 7e4, -2.5]).astype(np.float16)")
	data = []float32{0.1, 3.0e38}
	RoundSlice(BFloat16, data)
	assert.Equal(t, []float32{0.10009765625, 3.00405527047391e+38}, data, "torch.tensor([0.1, 3e38]).bfloat16().float()")
}

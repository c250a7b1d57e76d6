package torchrand

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/registry"
)

// The goldens are written by testdata/gen.py from PyTorch 1.13; see there
// for the layout.
type goldenFile struct {
	Torch      string       `json:"torch"`
	Capability string       `json:"capability"`
	Cases      []goldenCase `json:"cases"`
}

type goldenCase struct {
	Name  string       `json:"name"`
	Seed  uint64       `json:"seed"`
	Steps []goldenStep `json:"steps"`
}

type goldenStep struct {
	Op   string  `json:"op"`
	Size []int   `json:"size"`
	From float64 `json:"from"`
	To   float64 `json:"to"`
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
	Low  int64   `json:"low"`
	High int64   `json:"high"`
	In   int     `json:"in"`
	Out  int     `json:"out"`
	Bias bool    `json:"bias"`
	Num  int     `json:"num"`
	Dim  int     `json:"dim"`

	Result      *goldenResult `json:"result"`
	WeightBound float64       `json:"weight_bound"`
	Weight      *goldenResult `json:"weight"`
	BiasBound   float64       `json:"bias_bound"`
	BiasValues  *goldenResult `json:"bias_values"`
}

// goldenResult holds a call's output: every value, or for long outputs the
// SHA-256 of the little-endian bytes and the first and last values.
type goldenResult struct {
	N      int           `json:"n"`
	Values []json.Number `json:"values"`
	SHA256 string        `json:"sha256"`
	Head   []json.Number `json:"head"`
	Tail   []json.Number `json:"tail"`
}

func loadGolden(t *testing.T, name string) goldenFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var g goldenFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&g))
	require.NotEmpty(t, g.Cases)
	return g
}

func TestGoldenAVX2(t *testing.T) {
	golden := loadGolden(t, "torch_avx2.json")
	require.Equal(t, "avx2", golden.Capability)
	runGolden(t, golden, AVX2)
}

func TestGoldenNoAVX2(t *testing.T) {
	golden := loadGolden(t, "torch_default.json")
	require.Equal(t, "default", golden.Capability)
	runGolden(t, golden, NoAVX2)
}

func runGolden(t *testing.T, golden goldenFile, kernel Kernel) {
	for _, c := range golden.Cases {
		t.Run(c.Name, func(t *testing.T) {
			g := NewKernel(c.Seed, kernel)
			for i, step := range c.Steps {
				t.Logf("step %d: %s", i, step.Op)
				runStep(t, g, step)
			}
		})
	}
}

// runStep replays one PyTorch call on g and compares with what PyTorch drew.
func runStep(t *testing.T, g *Generator, s goldenStep) {
	n := 1
	for _, d := range s.Size {
		n *= d
	}
	switch s.Op {
	case "rand":
		got := make([]float32, n)
		require.NoError(t, g.Uniform(got, 0, 1))
		assertFloats(t, s.Result, got, 0)
	case "uniform":
		got := make([]float32, n)
		require.NoError(t, g.Uniform(got, s.From, s.To))
		assertFloats(t, s.Result, got, 0)
	case "randn":
		got := make([]float32, n)
		require.NoError(t, g.Normal(got, 0, 1))
		assertFloats(t, s.Result, got, normalTolerance(g, n, 1))
	case "normal":
		got := make([]float32, n)
		require.NoError(t, g.Normal(got, s.Mean, s.Std))
		assertFloats(t, s.Result, got, normalTolerance(g, n, s.Std))
	case "embedding":
		got := make([]float32, s.Num*s.Dim)
		require.NoError(t, g.Normal(got, 0, 1))
		assertFloats(t, s.Result, got, normalTolerance(g, len(got), 1))
	case "linear":
		require.Equal(t, s.WeightBound, registry.LinearInit(s.In).B, "weight bound")
		w := make([]float32, s.Out*s.In)
		bound := registry.LinearInit(s.In).B
		require.NoError(t, g.Uniform(w, -bound, bound))
		assertFloats(t, s.Weight, w, 0)
		if s.Bias {
			require.Equal(t, s.BiasBound, registry.LinearBiasInit(s.In).B, "bias bound")
			b := make([]float32, s.Out)
			bound := registry.LinearBiasInit(s.In).B
			require.NoError(t, g.Uniform(b, -bound, bound))
			assertFloats(t, s.BiasValues, b, 0)
		}
	case "randint":
		got := make([]int64, n)
		require.NoError(t, g.RandInt(got, s.Low, s.High))
		assertInts(t, s.Result, got)
	default:
		t.Fatalf("unknown op %q in golden", s.Op)
	}
}

// normalTolerance is the relative tolerance for Normal: zero (bit equality)
// except for NoAVX2's block path, where PyTorch depends on the C library's
// logf, cosf and sinf (see NoAVX2); a few ulps of the unscaled value.
func normalTolerance(g *Generator, n int, std float64) float64 {
	if g.Kernel() == NoAVX2 && n >= vectorMin {
		return 4 * 0x1p-23 * math.Max(std, 1)
	}
	return 0
}

// assertFloats compares got with the golden; tol 0 means bit equality,
// otherwise |got-want| <= tol·max(1, |want|).
func assertFloats(t *testing.T, want *goldenResult, got []float32, tol float64) {
	t.Helper()
	require.NotNil(t, want)
	require.Equal(t, want.N, len(got), "length")
	if want.Values != nil {
		compareFloats(t, want.Values, got, 0, tol)
		return
	}
	compareFloats(t, want.Head, got[:len(want.Head)], 0, tol)
	compareFloats(t, want.Tail, got[len(got)-len(want.Tail):], len(got)-len(want.Tail), tol)
	if tol == 0 {
		buf := make([]byte, 4*len(got))
		for i, v := range got {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		sum := sha256.Sum256(buf)
		assert.Equal(t, want.SHA256, hex.EncodeToString(sum[:]), "sha256 of all %d values", len(got))
	}
}

func compareFloats(t *testing.T, want []json.Number, got []float32, offset int, tol float64) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	bad := 0
	for i, w := range want {
		wv, err := w.Float64()
		require.NoError(t, err)
		w32 := float32(wv)
		require.Equal(t, wv, float64(w32), "golden value %s is not a float32", w)
		ok := math.Float32bits(got[i]) == math.Float32bits(w32)
		if tol > 0 {
			ok = math.Abs(float64(got[i])-wv) <= tol*math.Max(1, math.Abs(wv))
		}
		if !ok {
			bad++
			if bad <= 5 {
				t.Errorf("value %d: got %v (%#08x), want %v (%#08x)", offset+i, got[i],
					math.Float32bits(got[i]), w32, math.Float32bits(w32))
			}
		}
	}
	if bad > 5 {
		t.Errorf("%d of %d values differ", bad, len(want))
	}
}

func assertInts(t *testing.T, want *goldenResult, got []int64) {
	t.Helper()
	require.NotNil(t, want)
	require.Equal(t, want.N, len(got))
	require.NotNil(t, want.Values)
	wantInts := make([]int64, len(want.Values))
	for i, w := range want.Values {
		v, err := w.Int64()
		require.NoError(t, err, fmt.Sprint("value ", i))
		wantInts[i] = v
	}
	assert.Equal(t, wantInts, got)
}

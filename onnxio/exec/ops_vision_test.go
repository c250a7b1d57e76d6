package exec

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// visionCase is one case of testdata/vision/cases.json.
type visionCase struct {
	Name    string                `json:"name"`
	Op      string                `json:"op"`
	Opset   int                   `json:"opset"`
	Attrs   map[string]visionAttr `json:"attrs"`
	Inputs  []*visionTensor       `json:"inputs"`
	Outputs []*visionTensor       `json:"outputs"`
	Tol32   bool                  `json:"tol32"` // float64 PyTorch case, also run in float32
}

type visionAttr struct {
	I      *int64    `json:"i"`
	F      *float32  `json:"f"`
	S      *string   `json:"s"`
	Ints   []int64   `json:"ints"`
	Floats []float32 `json:"floats"`
}

type visionTensor struct {
	DType string    `json:"dtype"`
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// value converts a JSON tensor, optionally with its floats as float32.
func (t *visionTensor) value(float32s bool) *value {
	if t == nil {
		return nil
	}
	v := valueOf(t.Shape, t.Data)
	switch {
	case t.DType == "int64":
		return castValue(v, Int64)
	case t.DType == "int32":
		return castValue(v, Int32)
	case t.DType == "uint8":
		return castValue(v, Uint8)
	case t.DType == "float32" || float32s:
		return castValue(v, Float32)
	}
	return v
}

func (a visionAttr) attribute() attribute {
	switch {
	case a.I != nil:
		return aInt(*a.I)
	case a.F != nil:
		return aFloat(*a.F)
	case a.S != nil:
		return attribute{kind: attrString, s: *a.S}
	case a.Floats != nil:
		return aFloats(a.Floats...)
	}
	return aInts(a.Ints...)
}

// TestVisionGoldens runs the vision ops on the cases of testdata/vision,
// written by gen.py: PyTorch's conv, conv_transpose, pooling, unpooling,
// interpolate, grid_sample, affine_grid, fold, fft, stft, window
// functions and local_response_norm on float64 inputs, and ONNX Runtime
// 1.31's RoiAlign, DeformConv, NonMaxSuppression, MelWeightMatrix,
// ConvInteger, QLinearConv and antialiased Resize on float32 and 8-bit
// inputs. float64 runs must agree to 1e-9
// relative and 1e-12 absolute. The same inputs rounded to float32 must
// agree with the float64 result to 1e-5 relative and 1e-5 absolute: the
// outputs are sums of up to a hundred float32 products of magnitude one,
// whose rounding reaches a few 1e-6 where the sum cancels to near zero.
// ONNX Runtime's float32 results are compared at the usual 1e-5 relative
// and 1e-6 absolute.
func TestVisionGoldens(t *testing.T) {
	raw, err := os.ReadFile("testdata/vision/cases.json")
	require.NoError(t, err)
	var cases []visionCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.Len(t, cases, 97)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			at := attrs{}
			for k, a := range c.Attrs {
				at[k] = a.attribute()
			}
			run := func(float32s bool) []*value {
				var in []*value
				for _, x := range c.Inputs {
					in = append(in, x.value(float32s))
				}
				got, err := runOp(opCase{op: c.Op, opset: c.Opset, attrs: at, in: in, outs: len(c.Outputs)})
				require.NoError(t, err)
				require.GreaterOrEqual(t, len(got), len(c.Outputs))
				return got
			}
			if !c.Tol32 { // ONNX Runtime's float32 result
				for i, w := range c.Outputs {
					assertValue(t, w.value(false), run(false)[i])
				}
				return
			}
			got := run(false)
			for i, w := range c.Outputs {
				assertClose(t, w.value(false), got[i], 1e-9, 1e-12)
			}
			got = run(true)
			for i, w := range c.Outputs {
				want := w.value(false)
				if want.dtype == Float64 && got[i].dtype == Float32 { // outputs typed by an attribute stay float64
					want = castValue(want, Float32)
				}
				assertClose(t, want, got[i], 1e-5, 1e-5)
			}
		})
	}
}

// assertClose compares dtype, shape and elements, floats to the given
// relative and absolute tolerance, other types exactly.
func assertClose(t *testing.T, want, got *value, rtol, atol float64) {
	t.Helper()
	require.Equal(t, want.dtype, got.dtype, "dtype")
	require.Truef(t, equalShapes(want.shape, got.shape), "shape %s, want %s", shapeString(got.shape), shapeString(want.shape))
	if !want.dtype.IsFloat() {
		assert.Equal(t, want.data, got.data)
		return
	}
	w, g := castTo[float64](want.data), castTo[float64](got.data)
	bad := 0
	for i := range w {
		if !(math.Abs(w[i]-g[i]) <= atol+rtol*math.Abs(w[i])) && bad < 5 {
			bad++
			t.Errorf("element %d: got %v, want %v", i, g[i], w[i])
		}
	}
}

// visionOps are the ops whose ONNX node tests TestVisionNodeTests runs.
var visionOps = []string{
	"Conv", "ConvTranspose", "DeformConv", "Col2Im", "CausalConvWithState", "ConvInteger", "QLinearConv", "LRN",
	"MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "MaxUnpool",
	"Resize", "Upsample", "GridSample", "AffineGrid", "CenterCropPad",
	"DFT", "STFT", "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix", "NonMaxSuppression", "RoiAlign",
}

// visionNodeTestExclusions lists node tests of visionOps that the
// executor accepts but does not pass, with the reason; each must fail.
var visionNodeTestExclusions = map[string]string{
	"test_maxunpool_export_with_output_shape": "the test data decodes the indices in the shape inferred without output_shape; " +
		"ONNX Runtime and PyTorch's max_unpool2d address the output (TestVisionGoldens checks them)",
}

// TestVisionNodeTests runs ONNX's node tests of the vision ops at the
// conformance runner's tolerance: every case the executor accepts must
// pass unless listed above, every case it refuses must be refused for a
// reason exclusionRule names (another op, float16, an opset).
func TestVisionNodeTests(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(sharedNodeTests, "test_*"))
	if len(dirs) == 0 {
		t.Skipf("ONNX node tests are not under %s (../shared/conformance is absent)", sharedNodeTests)
	}
	passed := map[string]int{}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
		if err != nil {
			continue
		}
		var used []string
		for _, n := range m.GetGraph().GetNode() {
			if slices.Contains(visionOps, n.GetOpType()) && !slices.Contains(used, n.GetOpType()) {
				used = append(used, n.GetOpType())
			}
		}
		if len(used) == 0 {
			continue
		}
		if rule := exclusionRule(m); rule != "" {
			if _, err := New(m); err == nil {
				t.Errorf("%s: excluded (%s) but New accepts it", name, rule)
			}
			continue
		}
		err = runNodeTest(m, dir, runnerTol)
		if reason, ok := visionNodeTestExclusions[name]; ok {
			if err == nil {
				t.Errorf("%s: listed as failing (%s) but passes", name, reason)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		passed[strings.Join(used, "+")]++
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(passed)) {
		fmt.Fprintf(&b, "%s: %d\n", k, passed[k])
	}
	t.Log("vision node tests passing per op:\n" + b.String())
}

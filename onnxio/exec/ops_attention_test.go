package exec

import (
	"github.com/attnrun/attnrun/array"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// attnCase is an Attention call for the tests: sizes, options and seeded
// random inputs. Its reference method computes the outputs from the
// specification's formulas, independently of ops_attention.go.
type attnCase struct {
	name                      string
	opset                     int
	rank3                     bool
	b, hq, hkv, sq, skv, p    int
	d, dv                     int
	mask                      []int // attn_mask shape; nil for none
	boolMask                  bool
	maskNegInf                float64 // fraction of -Inf in a float mask
	nonpad                    []int64
	causal                    bool
	window                    []int64 // left_window_size, right_window_size (opset 25); nil for none
	scale, softcap            float32 // 0: attribute absent
	mode                      int     // qk_matmul_output_mode; -1: output not asked for
	precision                 DType   // 0: attribute absent
	present                   bool    // ask for present_key and present_value
	qScale                    float32 // spread of Q (1 when 0)
	q, k, v, pastK, pastV, mk *value  // the inputs last drawn, which reference reads
}

// inputs draws the case's inputs, the same ones for every call with a seed.
func (c *attnCase) inputs(seed uint64) []*value {
	r := rand.New(rand.NewPCG(seed, 7))
	normal := func(scale float32, shape ...int) *value {
		data := make([]float32, numel(shape))
		for i := range data {
			data[i] = float32(r.NormFloat64()) * scale
		}
		return valueOf(shape, data)
	}
	qs := c.qScale
	if qs == 0 {
		qs = 1
	}
	if c.rank3 {
		c.q, c.k, c.v = normal(qs, c.b, c.sq, c.hq*c.d), normal(1, c.b, c.skv, c.hkv*c.d), normal(1, c.b, c.skv, c.hkv*c.dv)
	} else {
		c.q, c.k, c.v = normal(qs, c.b, c.hq, c.sq, c.d), normal(1, c.b, c.hkv, c.skv, c.d), normal(1, c.b, c.hkv, c.skv, c.dv)
	}
	in := []*value{c.q, c.k, c.v, nil, nil, nil, nil}
	if c.mask != nil {
		if c.boolMask {
			data := make([]bool, numel(c.mask))
			for i := range data {
				data[i] = r.Float64() < 0.6
			}
			c.mk = valueOf(c.mask, data)
		} else {
			c.mk = normal(1, c.mask...)
			m := c.mk.data.([]float32)
			for i := range m {
				if r.Float64() < c.maskNegInf {
					m[i] = float32(math.Inf(-1))
				}
			}
		}
		in[attnMask] = c.mk
	}
	if c.p > 0 {
		c.pastK, c.pastV = normal(1, c.b, c.hkv, c.p, c.d), normal(1, c.b, c.hkv, c.p, c.dv)
		in[attnPastKey], in[attnPastValue] = c.pastK, c.pastV
	}
	if c.nonpad != nil {
		in[attnNonpad] = valueOf([]int{c.b}, c.nonpad)
	}
	for len(in) > 3 && in[len(in)-1] == nil {
		in = in[:len(in)-1]
	}
	return in
}

// node builds the Attention node of the case, with the outputs it asks for.
func (c *attnCase) node() *node {
	opset := c.opset
	if opset == 0 {
		opset = 23
	}
	n := &node{name: c.name, op: "Attention", opset: opset, spec: ops["Attention"], attrs: attrs{}}
	if c.rank3 {
		n.attrs["q_num_heads"], n.attrs["kv_num_heads"] = aInt(int64(c.hq)), aInt(int64(c.hkv))
	}
	if c.causal {
		n.attrs["is_causal"] = aInt(1)
	}
	if c.window != nil {
		n.attrs["left_window_size"], n.attrs["right_window_size"] = aInt(c.window[0]), aInt(c.window[1])
	}
	if c.scale != 0 {
		n.attrs["scale"] = aFloat(c.scale)
	}
	if c.softcap != 0 {
		n.attrs["softcap"] = aFloat(c.softcap)
	}
	if c.precision != 0 {
		n.attrs["softmax_precision"] = aInt(int64(c.precision))
	}
	n.out = []int{0, -1, -1, -1} // slots of Y, present_key, present_value, qk_matmul_output; -1: omitted
	if c.present {
		n.out[attnPresentKey], n.out[attnPresentValue] = 1, 2
	}
	if c.mode >= 0 {
		n.attrs["qk_matmul_output_mode"] = aInt(int64(c.mode))
		n.out[attnQK] = 3
	}
	return n
}

// reference computes Y, present_key, present_value and qk_matmul_output
// (nil when not asked for) as the specification writes them, in float64:
// one score at a time, with every index spelled out.
func (c *attnCase) reference() []*value {
	total := c.p + c.skv
	scale := float64(c.scale)
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(c.d))
	}
	// in4 reads element (b, h, s, e) of a Q, K or V input in its layout.
	in4 := func(v *value, heads, size, b, h, s, e int) float64 {
		x := v.data.([]float32)
		if c.rank3 {
			return float64(x[((b*v.shape[1]+s)*heads+h)*size+e])
		}
		return float64(x[((b*heads+h)*v.shape[2]+s)*size+e])
	}
	cache := func(past, cur *value, size, b, g, j, e int) float64 {
		if j < c.p {
			return float64(past.data.([]float32)[((b*c.hkv+g)*c.p+j)*size+e])
		}
		return in4(cur, c.hkv, size, b, g, j-c.p, e)
	}
	negInf := math.Inf(-1)
	bias := func(b, h, i, j int) float64 {
		x := 0.0
		if c.mk != nil {
			shape := append([]int{1, 1, 1, 1}[:4-len(c.mask)], c.mask...)
			idx := []int{b, h, i, j}
			off, stride := 0, 1
			for a := 3; a >= 0; a-- {
				if shape[a] > 1 || a == 3 {
					off += idx[a] * stride
				}
				stride *= shape[a]
			}
			switch m := c.mk.data.(type) {
			case []bool:
				if j >= shape[3] || !m[off] {
					x = negInf
				}
			case []float32:
				if j >= shape[3] {
					x = negInf
				} else {
					x = float64(m[off])
				}
			}
		}
		offset := 0
		if c.p > 0 {
			offset = c.p
		} else if c.nonpad != nil {
			offset = int(c.nonpad[b]) - c.sq
		}
		if c.causal && j > i+offset {
			x = negInf
		}
		if w := c.window; w != nil && (w[0] >= 0 && j < i+offset-int(w[0]) || w[1] >= 0 && j > i+offset+int(w[1])) {
			x = negInf
		}
		if c.nonpad != nil && j >= int(c.nonpad[b]) {
			x = negInf
		}
		return x
	}
	round := func(x float64) float64 { return x }
	switch c.precision {
	case attnFloat16:
		round = func(x float64) float64 { return float64(roundFloat16(float32(x))) }
	case attnBFloat16:
		round = func(x float64) float64 { return float64(roundBFloat16(float32(x))) }
	}

	yShape := []int{c.b, c.hq, c.sq, c.dv}
	if c.rank3 {
		yShape = []int{c.b, c.sq, c.hq * c.dv}
	}
	y := make([]float32, numel(yShape))
	qk := make([]float32, c.b*c.hq*c.sq*total)
	for b := range c.b {
		for h := range c.hq {
			g := h / (c.hq / c.hkv)
			for i := range c.sq {
				s := make([]float64, total)
				for j := range total {
					for e := range c.d {
						s[j] += in4(c.q, c.hq, c.d, b, h, i, e) * cache(c.pastK, c.k, c.d, b, g, j, e)
					}
					s[j] *= scale
				}
				snap := func(mode int) {
					if c.mode == mode {
						for j, x := range s {
							qk[((b*c.hq+h)*c.sq+i)*total+j] = float32(x)
						}
					}
				}
				snap(0)
				if c.softcap > 0 {
					for j := range s {
						s[j] = float64(c.softcap) * math.Tanh(s[j]/float64(c.softcap))
					}
				}
				snap(1)
				top := negInf
				for j := range s {
					s[j] += bias(b, h, i, j)
					top = max(top, round(s[j]))
				}
				snap(2)
				var sum float64
				for j := range s {
					if math.IsInf(top, -1) {
						s[j] = 0
						continue
					}
					s[j] = math.Exp(round(s[j]) - top)
					sum += s[j]
				}
				for j := range s {
					if sum > 0 {
						s[j] = round(s[j] / sum)
					}
				}
				snap(3)
				for e := range c.dv {
					var acc float64
					for j := range total {
						acc += s[j] * cache(c.pastV, c.v, c.dv, b, g, j, e)
					}
					if c.rank3 {
						y[((b*c.sq+i)*c.hq+h)*c.dv+e] = float32(acc)
					} else {
						y[((b*c.hq+h)*c.sq+i)*c.dv+e] = float32(acc)
					}
				}
			}
		}
	}
	out := []*value{valueOf(yShape, y), nil, nil, nil}
	if c.present {
		for k, cur := range []struct {
			past, v *value
			size    int
		}{{c.pastK, c.k, c.d}, {c.pastV, c.v, c.dv}} {
			data := make([]float32, c.b*c.hkv*total*cur.size)
			for b := range c.b {
				for g := range c.hkv {
					for j := range total {
						for e := range cur.size {
							data[((b*c.hkv+g)*total+j)*cur.size+e] = float32(cache(cur.past, cur.v, cur.size, b, g, j, e))
						}
					}
				}
			}
			out[1+k] = valueOf([]int{c.b, c.hkv, total, cur.size}, data)
		}
	}
	if c.mode >= 0 {
		out[attnQK] = valueOf([]int{c.b, c.hq, c.sq, total}, qk)
	}
	return out
}

// attnCases covers every input and attribute, including what ONNX Runtime
// 1.30 refuses and the specification defines: masks shorter than the keys
// (padded with -Inf), masks broadcast along the queries, 1-D masks, a past
// without present outputs.
var attnCases = []attnCase{
	{name: "4d", b: 2, hq: 2, hkv: 2, sq: 3, skv: 5, d: 4, dv: 3, mode: -1},
	{name: "3d", rank3: true, b: 2, hq: 2, hkv: 2, sq: 3, skv: 5, d: 4, dv: 6, mode: -1},
	{name: "3d_gqa_present", rank3: true, b: 1, hq: 6, hkv: 2, sq: 2, skv: 4, d: 8, dv: 8, mode: -1, present: true},
	{name: "4d_mqa_scale", b: 2, hq: 3, hkv: 1, sq: 4, skv: 4, d: 5, dv: 2, scale: 0.3, mode: -1},
	{name: "causal_square", b: 1, hq: 2, hkv: 2, sq: 4, skv: 4, d: 4, dv: 4, causal: true, mode: -1},
	{name: "causal_short_queries", b: 1, hq: 2, hkv: 1, sq: 2, skv: 5, d: 4, dv: 4, causal: true, mode: -1},
	{name: "causal_long_queries", b: 1, hq: 2, hkv: 2, sq: 5, skv: 2, d: 4, dv: 4, causal: true, mode: -1},
	{name: "past_causal_present", b: 2, hq: 4, hkv: 2, sq: 2, skv: 2, p: 3, d: 4, dv: 3, causal: true, mode: -1, present: true},
	{name: "past_causal_unequal_3d", rank3: true, b: 2, hq: 2, hkv: 2, sq: 3, skv: 2, p: 2, d: 4, dv: 4, causal: true, mode: -1},
	{name: "past_without_present", b: 1, hq: 2, hkv: 2, sq: 2, skv: 2, p: 3, d: 4, dv: 4, mode: -1},
	{name: "mask_float_4d", b: 2, hq: 2, hkv: 2, sq: 3, skv: 4, d: 4, dv: 4, mask: []int{2, 2, 3, 4}, mode: -1},
	{name: "mask_float_3d_heads", b: 2, hq: 2, hkv: 1, sq: 3, skv: 4, d: 4, dv: 4, mask: []int{2, 3, 4}, mode: -1},
	{name: "mask_float_neginf_causal", b: 2, hq: 2, hkv: 2, sq: 4, skv: 4, d: 4, dv: 4, mask: []int{2, 1, 4, 4}, maskNegInf: 0.4, causal: true, mode: -1},
	{name: "mask_bool_2d", b: 2, hq: 2, hkv: 2, sq: 3, skv: 4, d: 4, dv: 4, mask: []int{3, 4}, boolMask: true, mode: -1},
	{name: "mask_bool_past_3d", rank3: true, b: 2, hq: 2, hkv: 2, sq: 2, skv: 2, p: 2, d: 4, dv: 4, mask: []int{2, 1, 2, 4}, boolMask: true, mode: -1},
	{name: "mask_short_padded", b: 1, hq: 2, hkv: 2, sq: 3, skv: 5, d: 4, dv: 4, mask: []int{3, 3}, mode: -1},
	{name: "mask_short_bool_padded", b: 1, hq: 2, hkv: 2, sq: 3, skv: 5, d: 4, dv: 4, mask: []int{3, 2}, boolMask: true, mode: 3},
	{name: "mask_query_broadcast", b: 2, hq: 2, hkv: 2, sq: 3, skv: 4, d: 4, dv: 4, mask: []int{2, 1, 1, 4}, mode: -1},
	{name: "mask_1d", b: 2, hq: 2, hkv: 2, sq: 3, skv: 4, d: 4, dv: 4, mask: []int{4}, mode: -1},
	{name: "mask_1d_bool_qk", b: 2, hq: 2, hkv: 2, sq: 3, skv: 4, d: 4, dv: 4, mask: []int{4}, boolMask: true, mode: 2},
	{name: "softcap", b: 2, hq: 2, hkv: 2, sq: 3, skv: 4, d: 4, dv: 4, softcap: 1.5, qScale: 3, mode: -1},
	{name: "qk_mode0", b: 2, hq: 2, hkv: 1, sq: 4, skv: 4, d: 4, dv: 4, softcap: 2, qScale: 3, mask: []int{4, 4}, boolMask: true, causal: true, mode: 0},
	{name: "qk_mode1", b: 2, hq: 2, hkv: 1, sq: 4, skv: 4, d: 4, dv: 4, softcap: 2, qScale: 3, mask: []int{4, 4}, boolMask: true, causal: true, mode: 1},
	{name: "qk_mode2", b: 2, hq: 2, hkv: 1, sq: 4, skv: 4, d: 4, dv: 4, softcap: 2, qScale: 3, mask: []int{4, 4}, boolMask: true, causal: true, mode: 2},
	{name: "qk_mode3_past_3d", rank3: true, b: 2, hq: 4, hkv: 2, sq: 2, skv: 3, p: 2, d: 4, dv: 4, causal: true, mode: 3, present: true},
	{name: "precision_double", b: 1, hq: 2, hkv: 2, sq: 3, skv: 4, d: 4, dv: 4, precision: Float64, mode: 3},
	{name: "precision_float16", b: 1, hq: 2, hkv: 2, sq: 3, skv: 4, d: 4, dv: 4, precision: attnFloat16, qScale: 2, mode: 3},
	{name: "precision_bfloat16", b: 1, hq: 2, hkv: 2, sq: 3, skv: 4, d: 4, dv: 4, precision: attnBFloat16, qScale: 2, mode: -1},
	{name: "nonpad", opset: 24, b: 3, hq: 2, hkv: 2, sq: 2, skv: 5, d: 4, dv: 4, nonpad: []int64{3, 5, 0}, mode: -1},
	{name: "nonpad_mask_short", opset: 24, b: 2, hq: 2, hkv: 2, sq: 2, skv: 6, d: 4, dv: 4, nonpad: []int64{3, 4}, mask: []int{2, 1, 2, 4}, mode: -1},
	{name: "nonpad_causal_gqa", opset: 24, b: 3, hq: 4, hkv: 2, sq: 3, skv: 6, d: 4, dv: 4, nonpad: []int64{6, 4, 1}, causal: true, mode: -1},
	{name: "nonpad_causal_mask_qk", opset: 24, b: 2, hq: 2, hkv: 2, sq: 3, skv: 6, d: 4, dv: 4, nonpad: []int64{5, 2}, mask: []int{2, 1, 3, 6}, boolMask: true, causal: true, mode: 3},
	{name: "window_left_causal", opset: 25, b: 2, hq: 2, hkv: 1, sq: 6, skv: 6, d: 4, dv: 4, causal: true, window: []int64{2, -1}, mode: -1},
	{name: "window_left_right_zero", opset: 25, b: 1, hq: 2, hkv: 2, sq: 6, skv: 6, d: 4, dv: 4, window: []int64{1, 0}, mode: -1},
	{name: "window_bidirectional", opset: 25, b: 2, hq: 2, hkv: 2, sq: 4, skv: 6, d: 4, dv: 3, window: []int64{2, 1}, mode: 3},
	{name: "window_right_only_3d", opset: 25, rank3: true, b: 1, hq: 4, hkv: 2, sq: 5, skv: 5, d: 4, dv: 4, window: []int64{-1, 1}, mode: -1},
	{name: "window_zero_zero", opset: 25, b: 1, hq: 1, hkv: 1, sq: 4, skv: 4, d: 4, dv: 4, window: []int64{0, 0}, mode: 3},
	{name: "window_past_causal_present", opset: 25, b: 2, hq: 4, hkv: 2, sq: 3, skv: 3, p: 4, d: 4, dv: 4, causal: true, window: []int64{3, -1}, mode: -1, present: true},
	{name: "window_past_decode_qk", opset: 25, rank3: true, b: 1, hq: 2, hkv: 1, sq: 1, skv: 1, p: 6, d: 4, dv: 4, causal: true, window: []int64{2, 0}, mode: 2},
	{name: "window_short_queries_top_left", opset: 25, b: 1, hq: 2, hkv: 2, sq: 2, skv: 6, d: 4, dv: 4, window: []int64{1, 2}, mode: -1},
	{name: "window_mask_float_softcap", opset: 25, b: 2, hq: 2, hkv: 2, sq: 5, skv: 5, d: 4, dv: 4, causal: true, window: []int64{2, -1}, mask: []int{2, 1, 5, 5}, maskNegInf: 0.2, softcap: 2, qScale: 3, mode: 1},
	{name: "window_mask_bool_fully_masked", opset: 25, b: 1, hq: 2, hkv: 2, sq: 5, skv: 5, d: 4, dv: 4, window: []int64{0, 0}, mask: []int{5, 5}, boolMask: true, mode: 3},
	{name: "window_nonpad_causal", opset: 25, b: 3, hq: 2, hkv: 2, sq: 3, skv: 7, d: 4, dv: 4, nonpad: []int64{7, 4, 2}, causal: true, window: []int64{2, -1}, mode: -1},
	{name: "window_nonpad_bidirectional_qk", opset: 25, b: 2, hq: 2, hkv: 1, sq: 3, skv: 7, d: 4, dv: 4, nonpad: []int64{6, 3}, window: []int64{1, 1}, mode: 3},
	{name: "window_precision_double", opset: 25, b: 1, hq: 2, hkv: 2, sq: 4, skv: 4, d: 4, dv: 4, causal: true, window: []int64{1, -1}, precision: Float64, mode: -1},
	{name: "window_wider_than_keys", opset: 25, b: 1, hq: 2, hkv: 2, sq: 4, skv: 4, d: 4, dv: 4, causal: true, window: []int64{3, 5}, mode: 3},
	{name: "no_keys", b: 1, hq: 2, hkv: 2, sq: 3, skv: 0, d: 4, dv: 4, mode: 3, present: true},
	{name: "no_queries", b: 1, hq: 2, hkv: 2, sq: 0, skv: 3, d: 4, dv: 4, mode: 3},
}

// TestAttentionMatchesReference runs every case on the executor and checks
// all its outputs against the reference. Rounding to float16 or bfloat16
// can land on either side of a tie when float32 and float64 scores differ
// in their last bits, so those cases allow one ulp of the narrow type.
func TestAttentionMatchesReference(t *testing.T) {
	for i := range attnCases {
		c := attnCases[i]
		t.Run(c.name, func(t *testing.T) {
			n := c.node()
			got, err := n.spec.run(testRun, n, c.inputs(uint64(i)))
			require.NoError(t, err)
			want := c.reference()
			tol := tolerance{rtol: 1e-5, atol: 1e-6}
			switch c.precision {
			case attnFloat16:
				tol = tolerance{rtol: 0x1p-10, atol: 0x1p-14}
			case attnBFloat16:
				tol = tolerance{rtol: 0x1p-7, atol: 0x1p-10}
			}
			for k, w := range want {
				if w == nil {
					continue
				}
				require.NotNil(t, got[k], "output %d", k)
				assert.NoError(t, compareValues(got[k], w, tol), "output %s", []string{"Y", "present_key", "present_value", "qk_matmul_output"}[k])
			}
		})
	}
}

// TestAttentionFusedEqualsStepwise checks the two computations against each
// other on larger heads: asking for the mode-3 weights switches from the
// fused kernel to the step-by-step one, and Y must not change.
func TestAttentionFusedEqualsStepwise(t *testing.T) {
	for _, c := range []attnCase{
		{name: "causal_past_gqa", b: 2, hq: 4, hkv: 2, sq: 9, skv: 9, p: 31, d: 32, dv: 24, causal: true},
		{name: "mask_nonpad", opset: 24, b: 3, hq: 2, hkv: 1, sq: 17, skv: 70, d: 16, dv: 16, nonpad: []int64{70, 33, 3}, mask: []int{3, 1, 17, 70}, maskNegInf: 0.2},
		{name: "causal_unequal", b: 1, hq: 2, hkv: 2, sq: 40, skv: 20, p: 10, d: 8, dv: 8, causal: true},
		{name: "window_causal_past_gqa", opset: 25, b: 2, hq: 4, hkv: 2, sq: 9, skv: 9, p: 31, d: 32, dv: 24, causal: true, window: []int64{7, -1}},
		{name: "window_nonpad_mask", opset: 25, b: 3, hq: 2, hkv: 1, sq: 17, skv: 70, d: 16, dv: 16, nonpad: []int64{70, 33, 3}, mask: []int{3, 1, 17, 70}, maskNegInf: 0.2, causal: true, window: []int64{20, -1}},
		{name: "window_bidirectional_long", opset: 25, b: 1, hq: 2, hkv: 2, sq: 80, skv: 80, d: 8, dv: 8, window: []int64{5, 9}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.inputs(1)
			c.mode = -1
			n := c.node()
			fused, err := n.spec.run(testRun, n, in)
			require.NoError(t, err)
			c.mode = 3
			n = c.node()
			stepwise, err := n.spec.run(testRun, n, in)
			require.NoError(t, err)
			assert.NoError(t, compareValues(fused[attnY], stepwise[attnY], tolerance{rtol: 1e-5, atol: 1e-6}))
			assert.NoError(t, compareValues(stepwise[attnY], c.reference()[attnY], tolerance{rtol: 1e-5, atol: 1e-6}))
		})
	}
}

// TestAttentionFullyMaskedRows checks the errata's zeros, and that the
// rows next to them are untouched, in both computations.
func TestAttentionFullyMaskedRows(t *testing.T) {
	q := f32(dims(1, 1, 2, 2), 1, 0, 0, 1)
	k := f32(dims(1, 1, 2, 2), 1, 0, 0, 1)
	v := f32(dims(1, 1, 2, 2), 1, 2, 3, 4)
	mask := bools(dims(2, 2), false, false, true, false) // query 0 sees nothing, query 1 key 0
	for _, mode := range []int{-1, 3} {
		n := &node{op: "Attention", opset: 23, spec: ops["Attention"], attrs: attrs{}, out: []int{0, -1, -1, -1}}
		if mode >= 0 {
			n.attrs["qk_matmul_output_mode"], n.out[attnQK] = aInt(int64(mode)), 1
		}
		got, err := n.spec.run(testRun, n, []*value{q, k, v, mask})
		require.NoError(t, err)
		assertValue(t, f32(dims(1, 1, 2, 2), 0, 0, 1, 2), got[attnY])
		if mode == 3 {
			assertValue(t, f32(dims(1, 1, 2, 2), 0, 0, 1, 0), got[attnQK])
		}
	}
}

// TestAttentionGraph runs Attention through New and Run at opsets 23 to
// 25, and checks what New refuses.
func TestAttentionGraph(t *testing.T) {
	model := func(opset int64, attrs ...*onnxpb.AttributeProto) *onnxpb.ModelProto {
		return graphSpec{
			opset: opset,
			nodes: []*onnxpb.NodeProto{nodeP("attention", "Attention", []string{"q", "k", "v"}, []string{"y"}, attrs...)},
			inputs: []*onnxpb.ValueInfoProto{
				info("q", 1, 1, 1, 2, 2), info("k", 1, 1, 1, 2, 2), info("v", 1, 1, 1, 2, 2),
			},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", 1)},
		}.model()
	}
	feeds := map[string]*tensor.Dense{
		"q": dense([]int{1, 1, 2, 2}, float32(1), 0, 0, 1),
		"k": dense([]int{1, 1, 2, 2}, float32(1), 0, 0, 1),
		"v": dense([]int{1, 1, 2, 2}, float32(1), 2, 3, 4),
	}
	e := math.Exp(1 / math.Sqrt(2))
	w0 := 1 / (1 + e) // query 1 sees key 0 (score 0) and key 1 (score 1/√2)
	causal := []float64{1, 2, 1*w0 + 3*(1-w0), 2*w0 + 4*(1-w0)}
	for _, c := range []struct {
		opset int64
		attrs []*onnxpb.AttributeProto
		want  []float64
	}{
		{23, nil, causal},
		{24, nil, causal},
		{25, nil, causal},
		{25, []*onnxpb.AttributeProto{intAttr("left_window_size", 1)}, causal},
		{25, []*onnxpb.AttributeProto{intAttr("left_window_size", 0)}, []float64{1, 2, 3, 4}}, // each query sees its own key
	} {
		g, err := New(model(c.opset, append(c.attrs, intAttr("is_causal", 1))...))
		require.NoError(t, err)
		out, err := g.Run(feeds)
		require.NoError(t, err)
		y := floats(t, out["y"])
		assert.InDeltaSlice(t, c.want, []float64{float64(y[0]), float64(y[1]), float64(y[2]), float64(y[3])}, 1e-6, "opset %d %v", c.opset, c.attrs)
	}
	_, err := New(model(22))
	assert.ErrorContains(t, err, `op "Attention" (opset 22) is not supported: it is implemented from opset 23 on`)
	g, err := New(model(23, intAttr("local_window_size", 2)))
	require.NoError(t, err)
	assert.Contains(t, g.Warnings()[0], `has unknown attribute "local_window_size", ignored`)
	_, err = New(model(24, intAttr("left_window_size", 2)))
	assert.ErrorContains(t, err, "left_window_size is an attribute from opset 25 on; the model imports opset 24")
	_, err = New(model(25, intAttr("right_window_size", -2)))
	assert.ErrorContains(t, err, "right_window_size is -2, want -1 (unbounded) or a key count from 0 on")
}

// TestAttentionErrors checks that every inconsistent call is refused with
// a message naming the input or attribute.
func TestAttentionErrors(t *testing.T) {
	q4, k4, v4 := f32(dims(1, 2, 3, 4), make([]float32, 24)...), f32(dims(1, 2, 5, 4), make([]float32, 40)...), f32(dims(1, 2, 5, 4), make([]float32, 40)...)
	q3, k3, v3 := f32(dims(1, 3, 8), make([]float32, 24)...), f32(dims(1, 5, 8), make([]float32, 40)...), f32(dims(1, 5, 8), make([]float32, 40)...)
	zeros := func(shape ...int) *value { return f32(shape, make([]float32, numel(shape))...) }
	heads := attrs{"q_num_heads": aInt(2), "kv_num_heads": aInt(2)}
	long := zeros(1, 1, 50000, 1) // 50000² scores are more than the executor creates
	cases := []struct {
		name  string
		opset int
		attrs attrs
		in    []*value
		qk    bool
		err   string
	}{
		{"float64", 23, nil, []*value{f64(dims(1, 1, 1, 1), 1), k4, v4}, false, "Q is float64; Attention is computed in float32"},
		{"mixed ranks", 23, heads, []*value{q3, k4, v4}, false, "must all be 3-D (batch, seq, hidden) or all 4-D"},
		{"rank 2", 23, nil, []*value{zeros(3, 4), zeros(5, 4), zeros(5, 4)}, false, "must all be 3-D"},
		{"3-D without heads", 23, nil, []*value{q3, k3, v3}, false, "3-D Q (1, 3, 8) needs positive q_num_heads and kv_num_heads"},
		{"3-D hidden", 23, attrs{"q_num_heads": aInt(3), "kv_num_heads": aInt(2)}, []*value{q3, k3, v3}, false, "Q (1, 3, 8): hidden size 8 is not a multiple of 3 heads"},
		{"3-D K head size", 23, attrs{"q_num_heads": aInt(2), "kv_num_heads": aInt(1)}, []*value{q3, k3, v3}, false, "K (1, 5, 8): hidden size 8, want kv_num_heads 1 × Q's head size 4"},
		{"batch", 23, nil, []*value{q4, zeros(2, 2, 5, 4), zeros(2, 2, 5, 4)}, false, "batch sizes differ"},
		{"K head size", 23, nil, []*value{q4, zeros(1, 2, 5, 3), v4}, false, "K (1, 2, 5, 3): head size 3, Q (1, 2, 3, 4) has 4"},
		{"V heads", 23, nil, []*value{q4, k4, zeros(1, 1, 5, 4)}, false, "V (1, 1, 5, 4) has 1 heads, K (1, 2, 5, 4) has 2"},
		{"V length", 23, nil, []*value{q4, k4, zeros(1, 2, 4, 4)}, false, "have different sequence lengths"},
		{"4-D heads attributes", 23, attrs{"q_num_heads": aInt(4), "kv_num_heads": aInt(1)}, []*value{q4, k4, v4}, false, "q_num_heads 4 and kv_num_heads 1 disagree with 4-D Q"},
		{"GQA groups", 23, nil, []*value{zeros(1, 3, 3, 4), k4, v4}, false, "q_num_heads 3 is not a multiple of kv_num_heads 2"},
		{"is_causal", 23, attrs{"is_causal": aInt(2)}, []*value{q4, k4, v4}, false, "is_causal is 2, want 0 or 1"},
		{"scale", 23, attrs{"scale": aFloat(-1)}, []*value{q4, k4, v4}, false, "scale is -1, want a positive finite number"},
		{"softcap", 23, attrs{"softcap": aFloat(-2)}, []*value{q4, k4, v4}, false, "softcap is -2, want 0 (off)"},
		{"mode", 23, attrs{"qk_matmul_output_mode": aInt(4)}, []*value{q4, k4, v4}, true, "qk_matmul_output_mode is 4, want 0 (scores)"},
		{"precision", 23, attrs{"softmax_precision": aInt(7)}, []*value{q4, k4, v4}, false, "softmax_precision is int64, want float32 (1)"},
		{"zero head size", 23, nil, []*value{zeros(1, 1, 2, 0), zeros(1, 1, 2, 0), zeros(1, 1, 2, 1)}, false, "head size is 0"},
		{"past alone", 23, nil, []*value{q4, k4, v4, nil, zeros(1, 2, 3, 4)}, false, "past_key and past_value must be given together"},
		{"past shape", 23, nil, []*value{q4, k4, v4, nil, zeros(1, 1, 3, 4), zeros(1, 1, 3, 4)}, false, "past_key (1, 1, 3, 4), want (1, 2, 3, 4)"},
		{"past rank", 23, nil, []*value{q4, k4, v4, nil, zeros(2, 3, 4), zeros(2, 3, 4)}, false, "must be 4-D (batch, kv_heads, past_seq, head_size)"},
		{"mask dtype", 23, nil, []*value{q4, k4, v4, i64(dims(3, 5), make([]int64, 15)...)}, false, "attn_mask is int64; want bool (true attends) or float32"},
		{"mask scalar", 23, nil, []*value{q4, k4, v4, f32(dims(), 0)}, false, "attn_mask () needs a key axis"},
		{"mask broadcast", 23, nil, []*value{q4, k4, v4, zeros(2, 5)}, false, "attn_mask (2, 5) does not broadcast to (batch, q_heads, q_len, total) = (1, 2, 3, 5)"},
		{"mask too long", 23, nil, []*value{q4, k4, v4, zeros(3, 6)}, false, "attn_mask (3, 6) is longer than the 5 keys"},
		{"mask rank", 23, nil, []*value{q4, k4, v4, zeros(1, 1, 1, 3, 5)}, false, "attn_mask (1, 1, 1, 3, 5) has rank 5"},
		{"nonpad at 23", 23, nil, []*value{q4, k4, v4, nil, nil, nil, i64(dims(1), 5)}, false, "nonpad_kv_seqlen is an input from opset 24 on; the model imports opset 23"},
		{"nonpad with past", 24, nil, []*value{q4, k4, v4, nil, zeros(1, 2, 1, 4), zeros(1, 2, 1, 4), i64(dims(1), 5)}, false, "cannot be combined with past_key"},
		{"nonpad dtype", 24, nil, []*value{q4, k4, v4, nil, nil, nil, i32(dims(1), 5)}, false, "nonpad_kv_seqlen is int32 (1,), want int64 (1,)"},
		{"nonpad shape", 24, nil, []*value{q4, k4, v4, nil, nil, nil, i64(dims(2), 5, 5)}, false, "want int64 (1,)"},
		{"nonpad range", 24, nil, []*value{q4, k4, v4, nil, nil, nil, i64(dims(1), 6)}, false, "nonpad_kv_seqlen[0] is 6, want 0 to 5"},
		{"nonpad negative", 24, nil, []*value{q4, k4, v4, nil, nil, nil, i64(dims(1), -1)}, false, "nonpad_kv_seqlen[0] is -1"},
		{"qk too large", 23, nil, []*value{long, long, long}, true, "float32 (1, 1, 50000, 50000) needs 9.3 GiB, over the memory budget of 4 GiB"},
		{"scores too large", 23, attrs{"softcap": aFloat(1)}, []*value{long, long, long}, false, "attention scores (2500000000 elements) needs 9.3 GiB"},
		{"mask bias too large", 23, nil, []*value{long, long, long, zeros(50000)}, false, "attention mask (2500000000 elements) needs 9.3 GiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := &node{op: "Attention", opset: c.opset, spec: ops["Attention"], attrs: c.attrs, out: []int{0, -1, -1, -1}}
			if c.qk {
				n.out[attnQK] = 1
			}
			_, err := n.spec.run(testRun, n, c.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
		})
	}
}

// TestRoundNarrowFloats checks the float16 and bfloat16 rounding that
// softmax_precision uses: ties to even, subnormals, overflow.
func TestRoundNarrowFloats(t *testing.T) {
	for _, c := range []struct {
		round   func(float32) float32
		in, out float32
	}{
		{roundFloat16, 1, 1},
		{roundFloat16, 1 + 0x1p-11, 1},            // a tie rounds to the even 1
		{roundFloat16, 1 + 3*0x1p-11, 1 + 0x1p-9}, // a tie rounds to the even 1 + 2^-9
		{roundFloat16, 1 + 0x1p-11 + 0x1p-20, 1 + 0x1p-10},
		{roundFloat16, -0.1, -0.0999755859375},
		{roundFloat16, 65504, 65504},
		{roundFloat16, 65519, 65504},
		{roundFloat16, 65520, float32(math.Inf(1))},
		{roundFloat16, -1e6, float32(math.Inf(-1))},
		{roundFloat16, 0x1p-25, 0}, // half the smallest subnormal: tie to 0
		{roundFloat16, 3 * 0x1p-26, 0x1p-24},
		{roundFloat16, 0x1.8p-20, 0x1.8p-20}, // a subnormal, exact
		{roundFloat16, float32(math.Inf(-1)), float32(math.Inf(-1))},
		{roundBFloat16, 1 + 0x1p-8, 1},
		{roundBFloat16, 1 + 3*0x1p-8, 1 + 0x1p-6},
		{roundBFloat16, 3.14159265, 3.140625},
		{roundBFloat16, 0x1.fffffep127, float32(math.Inf(1))},
		{roundBFloat16, 0x1p-130, 0x1p-130},
	} {
		got := c.round(c.in)
		assert.Equal(t, c.out, got, "round(%g)", c.in)
	}
	assert.True(t, math.IsNaN(float64(roundFloat16(float32(math.NaN())))))
}

// BenchmarkAttention measures a causal GQA self-attention of 128 tokens on
// the fused kernel, and the same with the mode-3 weights asked for, which
// computes step by step.
func BenchmarkAttention(b *testing.B) {
	for _, mode := range []int{-1, 3} {
		c := attnCase{b: 1, hq: 8, hkv: 2, sq: 128, skv: 128, d: 64, dv: 64, causal: true, mode: mode}
		in := c.inputs(1)
		n := c.node()
		name := map[int]string{-1: "fused", 3: "stepwise"}[mode]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := n.spec.run(testRun, n, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// roundFloat16 rounds x, as softmax_precision float16 does (package
// array's rounding), to the nearest IEEE half-precision value (ties to
// even), returned as a float32: ±Inf beyond the largest half, 65504.
func roundFloat16(x float32) float32 { return array.RoundFloat(array.Float16, float64(x), false) }

// roundBFloat16 rounds x to the nearest bfloat16 value (ties to even).
func roundBFloat16(x float32) float32 { return array.RoundFloat(array.BFloat16, float64(x), false) }

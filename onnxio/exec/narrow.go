package exec

import (
	"reflect"
	"slices"

	"github.com/attnrun/attnrun/array"
)

// Narrow floats. A float16 or bfloat16 value is held widened to []float32
// and tagged with its type (package array). Ops compute in float32 and
// never see the narrow types: runNode hands an op float32 views of its
// narrow inputs (narrowInputs), then tags the op's float32 results with
// the node's narrow type and rounds them to it, as if stored
// (narrowOutputs), so that every intermediate holds what ONNX Runtime's
// float16 kernels store. Cast rounds when it converts to a narrow type.
// The float8 and float4 types are held the same way: ops move them
// (Reshape, Concat, Gather, ...) without computing with them.

// isRounded reports whether op results of type dt are rounded to it:
// the 16-bit floats, the narrow types ops compute in.
func isRounded(dt DType) bool { return dt == Float16 || dt == BFloat16 }

// isNarrowFloat reports whether dt is a float narrower than float32,
// held as float32.
func isNarrowFloat(dt DType) bool {
	return array.DType(dt).IsFloat() && array.DType(dt).IsNarrow()
}

// typeAwareOps read the element types of their inputs themselves, so they
// get them untouched: CastLike casts to its second input's type.
var typeAwareOps = map[string]bool{"CastLike": true}

// outputTypeAttrs are the attributes with which an op sets the element
// type of its outputs itself (Cast's to, EyeLike's dtype,
// DequantizeLinear's output_dtype): the results of such a node keep the
// type the op gave them.
var outputTypeAttrs = []string{"to", "dtype", "output_dtype"}

// float32Outputs lists, by op, the first output from which results stay
// float32 whatever the inputs: LayerNormalization's Mean and InvStdDev
// have its stash_type.
var float32Outputs = map[string]int{"LayerNormalization": 1}

// narrowInputs returns the inputs as the op sees them, with each narrow
// float replaced by a float32 view of the same data, and the node's narrow
// type: that of its narrow inputs, a 16-bit one when they mix (a float8
// DequantizeLinear with a float16 scale gives float16), or 0 when none.
func narrowInputs(n *node, in []*value) ([]*value, DType) {
	if typeAwareOps[n.op] {
		return in, 0
	}
	var seen []*value // in, copied on the first narrow input
	var nt DType
	for k, v := range in {
		if v == nil || !isNarrowFloat(v.dtype) {
			continue
		}
		if nt == 0 || !isRounded(nt) && isRounded(v.dtype) {
			nt = v.dtype
		}
		if seen == nil {
			seen = slices.Clone(in)
		}
		seen[k] = v.withDType(Float32)
	}
	if seen == nil {
		return in, 0
	}
	return seen, nt
}

// narrowOutputs gives the float32 results of a node with narrow inputs
// (nt, from narrowInputs) the node's narrow type, and rounds every result
// of a rounded type that the op computed (not the views of its inputs).
func narrowOutputs(n *node, nt DType, in, outs []*value) {
	retag := nt != 0 && !slices.ContainsFunc(outputTypeAttrs, func(a string) bool { _, ok := n.attrs[a]; return ok })
	first, keeps := float32Outputs[n.op]
	for k, v := range outs {
		if v == nil {
			continue
		}
		if retag && v.dtype == Float32 && !(keeps && k >= first) {
			v = v.withDType(nt)
			outs[k] = v
		}
		if isRounded(v.dtype) && v.size() > 0 && !sharesData(v, in) {
			array.RoundSlice(array.DType(v.dtype), v.data.([]float32))
		}
	}
}

// withDType returns a value of type dt sharing v's data, shape and block;
// dt must have v's storage type.
func (v *value) withDType(dt DType) *value {
	return &value{dtype: dt, shape: v.shape, data: v.data, mem: v.mem}
}

// sharesData reports whether v's data lies inside one of in's: an op
// returned an input or a view of it, which is already rounded and must
// not be written.
func sharesData(v *value, in []*value) bool {
	p := reflect.ValueOf(v.data).Pointer()
	for _, x := range in {
		if x == nil || x.size() == 0 {
			continue
		}
		start := reflect.ValueOf(x.data).Pointer()
		if p >= start && p < start+uintptr(x.size()*x.dtype.size()) {
			return true
		}
	}
	return false
}

// holdsRounded reports whether every element of v, of a rounded type, is
// a value of that type.
func holdsRounded(v *value) bool {
	for _, x := range v.data.([]float32) {
		if r := array.RoundFloat(array.DType(v.dtype), float64(x), true); r != x && x == x {
			return false
		}
	}
	return true
}

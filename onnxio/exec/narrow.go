package exec

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/attnrun/attnrun/array"
)

// Narrow types. A float16 or bfloat16 value is held widened to []float32
// and tagged with its type (package array). Ops compute in float32 and
// never see the narrow types: runNode hands an op float32 views of its
// narrow inputs (narrowInputs), then tags the op's float32 results with
// the node's narrow type and rounds them to it, as if stored
// (narrowOutputs), so that every intermediate holds what a tensor of that
// type can. Cast rounds when it converts to a narrow type. The float8 and
// float4 types are held the same way, and the 4- and 2-bit integers as
// int8 or uint8: ops move them (Reshape, Concat, Gather, ...) without
// computing with them, and Cast, QuantizeLinear and DequantizeLinear,
// which see their types, convert.

// isRounded reports whether op results of type dt are rounded to it:
// the 16-bit floats, the narrow types ops compute in.
func isRounded(dt DType) bool { return dt == Float16 || dt == BFloat16 }

// isNarrowFloat reports whether dt is a float narrower than float32,
// held as float32.
func isNarrowFloat(dt DType) bool {
	return array.DType(dt).IsFloat() && array.DType(dt).IsNarrow()
}

// wideOf is the type ops see for a narrow type: the full-width type of
// its storage (float32 for float16, int8 for int4), or dt itself.
func wideOf(dt DType) DType {
	if !array.DType(dt).IsNarrow() {
		return dt
	}
	switch array.DType(dt).Storage().Kind() {
	case reflect.Int8:
		return Int8
	case reflect.Uint8:
		return Uint8
	}
	return Float32
}

// typeAwareOps read the element types of their inputs themselves, so they
// get them untouched: CastLike casts to its second input's type, the
// quantizers convert to and from the quantized types, and the control-flow
// ops hand values to subgraphs that declare their types.
var typeAwareOps = map[string]bool{
	"CastLike": true, "QuantizeLinear": true, "DequantizeLinear": true,
	"If": true, "Loop": true, "Scan": true, "SequenceMap": true,
}

// outputTypeAttrs are the attributes with which an op sets the element
// type of its outputs itself (Cast's to, EyeLike's dtype): the results of
// such a node keep the type the op gave them.
var outputTypeAttrs = []string{"to", "dtype", "output_dtype"}

// float32Outputs lists, by op, the first output from which results stay
// float32 whatever the inputs: LayerNormalization's Mean and InvStdDev
// have its stash_type.
var float32Outputs = map[string]int{"LayerNormalization": 1}

// narrowing is what narrowInputs found: for each wide type ops saw, the
// narrow type the node's results of that type take.
type narrowing []struct{ wide, narrow DType }

// of returns the narrow type results of type wide take, or 0.
func (m narrowing) of(wide DType) DType {
	for _, p := range m {
		if p.wide == wide {
			return p.narrow
		}
	}
	return 0
}

// narrowInputs returns the inputs as the op sees them, each narrow input
// replaced by a view of the same data tagged with its wide type, and what
// the node's results of those wide types become: the narrow type of its
// inputs, the 16-bit float when a float8 and a float16 input mix.
func narrowInputs(n *node, in []*value) ([]*value, narrowing) {
	var seen []*value // in, copied on the first narrow input
	var m narrowing
	for k, v := range in {
		if v == nil || !array.DType(v.dtype).IsNarrow() {
			continue
		}
		if typeAwareOps[n.op] {
			return in, nil
		}
		wide := wideOf(v.dtype)
		switch prev := m.of(wide); {
		case prev == 0:
			m = append(m, struct{ wide, narrow DType }{wide, v.dtype})
		case !isRounded(prev) && isRounded(v.dtype):
			for i := range m {
				if m[i].wide == wide {
					m[i].narrow = v.dtype
				}
			}
		}
		if seen == nil {
			seen = slices.Clone(in)
		}
		seen[k] = v.withDType(wide)
	}
	if seen == nil {
		return in, nil
	}
	return seen, m
}

// narrowOutputs gives the results of a node with narrow inputs (m, from
// narrowInputs) the node's narrow types, and rounds every result of a
// rounded type that the op computed (not the views of its inputs).
func narrowOutputs(n *node, m narrowing, in, outs []*value) {
	retag := m != nil && !slices.ContainsFunc(outputTypeAttrs, func(a string) bool { _, ok := n.attrs[a]; return ok })
	first := len(outs)
	if retag {
		if f, ok := float32Outputs[n.op]; ok {
			first = f
		}
	}
	for k, v := range outs {
		if v == nil {
			continue
		}
		if nt := m.of(v.dtype); retag && nt != 0 && k < first {
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

// holdsRounded reports whether every element of v, of a narrow float
// type, is a value of that type.
func holdsRounded(v *value) bool {
	for _, x := range v.data.([]float32) {
		if !array.IsValue(array.DType(v.dtype), x) {
			return false
		}
	}
	return true
}

// checkNarrowInts returns an error unless every element of v, of a 4- or
// 2-bit integer type, is in the type's range.
func checkNarrowInts(v *value) error {
	bits := array.DType(v.dtype).Bits()
	lo, hi := 0, 1<<bits-1
	if v.dtype == Int4 || v.dtype == Int2 {
		lo, hi = -1<<(bits-1), 1<<(bits-1)-1
	}
	for i, x := range castTo[int64](v.data) {
		if x < int64(lo) || x > int64(hi) {
			return fmt.Errorf("%s element %d is %d, outside [%d, %d]", v.dtype, i, x, lo, hi)
		}
	}
	return nil
}

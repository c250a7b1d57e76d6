package exec

import (
	"math"

	"github.com/attnrun/attnrun/array"
)

// The kernels are generic over the element type, and a value holds its
// data as an any that is a []T. The tables below name, once, the Go type
// of each dtype: an op looks up its dtype's instance and calls the kernel
// as a method, instead of switching over the types itself. The methods
// live next to the generic kernels they call, in the ops' own files.

// elemKind holds the kernels that move elements of one type, any type.
type elemKind interface {
	where(rc *runCtx, n *node, c, x, y *value) (*value, error)
	copyView(dst any, dv view, src any, sv view, shape []int)
	gatherBlocks(dst, src any, rows []int64, d, outer, inner int)
	take(dst, src any, from []int)
	takeOrFill(dst, src any, from []int, fill any)
	place(dst, src any, to []int)
	pickAxis(src, dst any, outer, inner int, p *axisResampling, fill any)
}

// numKind holds the kernels of one numeric type.
type numKind interface {
	elemKind
	arith(rc *runCtx, n *node, op arith, a, b *value) (*value, error)
	compare(rc *runCtx, n *node, op compare, a, b *value) (*value, error)
	signed(rc *runCtx, n *node, op signed, x *value) (*value, error)
	sign(rc *runCtx, n *node, x *value) (*value, error)
	prelu(rc *runCtx, n *node, x, slope *value) (*value, error)
	powFloat(rc *runCtx, n *node, base, exp *value) (*value, error)
	hasZero(data any) bool
	sumInto(x *value, reduced []bool, out any)
	gemm(g gemmShape, a, b, c any)
	matmul(rc *runCtx, mm matmul, a, b, c any) error
	maxPool(rc *runCtx, w *window, offs []int64, x, y any, indices []int64) error
	convertFrom(dst, src any)
	roundFrom(dst []float32, src any, dt array.DType, saturate bool)
	nonzero(dst []bool, src any)
}

// intKind holds the kernels of one integer type.
type intKind interface {
	numKind
	intPow(rc *runCtx, n *node, base, exp *value) (*value, error)
	bitwiseNot(rc *runCtx, n *node, x *value) (*value, error)
	zip64(rc *runCtx, n *node, a, b *value, s func(x, y int64) int64, u func(x, y uint64) uint64) (*value, error)
	reduce(rc *runCtx, n *node, kind reduction, x *value, reduced []bool) (*value, error)
	reduceInto(kind reduceKind, x *value, reduced []bool, out any) error
}

// elemOf, numOf and intOf implement the kinds for element type T.
type (
	elemOf[T element] struct{}
	numOf[T number]   struct{ elemOf[T] }
	// intOf knows T's range: the identities of Max and Min.
	intOf[T integer] struct {
		numOf[T]
		lowest, highest T
	}
)

// The instances, by dtype: intKinds holds the integer types, numKinds
// adds the floats, elemKinds adds bool. They are variables, not filled by
// init, so that other files' init functions may already use them.
var (
	intKinds = map[DType]intKind{
		Int64:  intOf[int64]{lowest: math.MinInt64, highest: math.MaxInt64},
		Int32:  intOf[int32]{lowest: math.MinInt32, highest: math.MaxInt32},
		Int16:  intOf[int16]{lowest: math.MinInt16, highest: math.MaxInt16},
		Int8:   intOf[int8]{lowest: math.MinInt8, highest: math.MaxInt8},
		Uint64: intOf[uint64]{highest: math.MaxUint64},
		Uint32: intOf[uint32]{highest: math.MaxUint32},
		Uint16: intOf[uint16]{highest: math.MaxUint16},
		Uint8:  intOf[uint8]{highest: math.MaxUint8},
	}
	numKinds = func() map[DType]numKind {
		kinds := map[DType]numKind{Float32: numOf[float32]{}, Float64: numOf[float64]{}}
		for dt, k := range intKinds {
			kinds[dt] = k
		}
		return kinds
	}()
	elemKinds = func() map[DType]elemKind {
		kinds := map[DType]elemKind{Bool: elemOf[bool]{}}
		for dt, k := range numKinds {
			kinds[dt] = k
		}
		return kinds
	}()
)

// kindOp is the kernel of an op of one input that f runs with the kernels
// of the input's type, which kinds must hold; want names those types for
// the error otherwise.
func kindOp[K any](kinds map[DType]K, want string, f func(k K, rc *runCtx, n *node, x *value) (*value, error)) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		k, ok := kinds[in[0].dtype]
		if !ok {
			return nil, errDType(in[0], want)
		}
		return oneOrErr(f(k, rc, n, in[0]))
	}
}

// numKindOf returns the kernels of v's type, or an error naming it when
// v is not numeric.
func numKindOf(v *value) (numKind, error) {
	if k, ok := numKinds[v.dtype]; ok {
		return k, nil
	}
	return nil, errDType(v, "a numeric type")
}

// intKindOf returns the kernels of v's type, or an error naming it when
// v is not an integer.
func intKindOf(v *value) (intKind, error) {
	if k, ok := intKinds[v.dtype]; ok {
		return k, nil
	}
	return nil, errDType(v, "an integer type")
}

// elemKindOfData returns the kernels of the element type of a data slice;
// data of the narrow types is held in a wider Go type, whose kernels
// these are.
func elemKindOfData(data any) elemKind { return elemKinds[dtypeOf(data)] }

// numKindOfData is elemKindOfData for numeric data; it is nil for bool.
func numKindOfData(data any) numKind { return numKinds[dtypeOf(data)] }

package onnxio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"
)

// TensorToDense converts a TensorProto with DefaultLimits; see
// Limits.TensorToDense.
func TensorToDense(tp *onnxpb.TensorProto) (*tensor.Dense, error) {
	return DefaultLimits.TensorToDense(tp)
}

// TensorToDense converts a TensorProto into a *tensor.Dense of the same
// shape, reading the typed field or raw_data (little-endian), whichever the
// tensor uses. Supported data types and the Dense dtype they become:
//
//	FLOAT -> float32      DOUBLE -> float64
//	FLOAT16, BFLOAT16 -> float32 (widened exactly)
//	INT64 -> int64  INT32 -> int32  INT16 -> int16  INT8 -> int8
//	UINT64 -> uint64  UINT32 -> uint32  UINT16 -> uint16  UINT8 -> uint8
//	BOOL -> bool
//
// A rank-0 tensor becomes a gorgonia scalar (Shape() is (), Data() returns
// the bare value, not a slice). Tensors with zero elements are refused:
// *tensor.Dense cannot hold them. The shape is checked against the limits
// before anything is allocated, and the data against the shape; the Dense's
// data is reserved from the memory budget (MaxMemory or Budget). The Dense
// owns its data: it shares no memory with tp.
func (l Limits) TensorToDense(tp *onnxpb.TensorProto) (*tensor.Dense, error) {
	if tp == nil {
		return nil, errors.New("nil TensorProto")
	}
	mem := l.scope()
	defer mem.Release()
	d, err := l.tensorToDense(tp, mem)
	if err != nil {
		return nil, fmt.Errorf("tensor %q (%s): %w", tp.GetName(), tensorLabel(tp), err)
	}
	return d, nil
}

func (l Limits) tensorToDense(tp *onnxpb.TensorProto, mem *budget.Scope) (*tensor.Dense, error) {
	dt := DataType(tp.GetDataType())
	if isExternal(tp) {
		return nil, errors.New("data is still in an external file; read the model with ReadModel to load it")
	}
	if tp.Segment != nil {
		return nil, errors.New("segmented tensors are not supported")
	}
	elems, err := l.checkTensor(tp)
	if err != nil {
		return nil, err
	}
	if elems == 0 {
		return nil, errors.New("the tensor has no elements, which *tensor.Dense cannot represent")
	}
	size, ok := denseElemBytes[dt]
	if !ok {
		return nil, fmt.Errorf("data type %s is not supported for conversion", dt)
	}
	if err := mem.Reserve(budget.Bytes(elems, size), "converting it"); err != nil {
		return nil, err
	}
	n := int(elems)
	raw := tp.RawData

	var backing any
	switch dt {
	case Float:
		backing = decode(n, raw, tp.FloatData, 4, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })
	case Float64:
		backing = decode(n, raw, tp.DoubleData, 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })
	case Float16:
		backing = widen16(n, raw, tp.Int32Data, halfToFloat32)
	case BFloat16:
		backing = widen16(n, raw, tp.Int32Data, bfloat16ToFloat32)
	case Int64:
		backing = decode(n, raw, tp.Int64Data, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
	case Int32:
		backing = decode(n, raw, tp.Int32Data, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
	case Int16:
		backing = decode(n, raw, narrow[int16](tp.Int32Data), 2, func(b []byte) int16 { return int16(binary.LittleEndian.Uint16(b)) })
	case Int8:
		backing = decode(n, raw, narrow[int8](tp.Int32Data), 1, func(b []byte) int8 { return int8(b[0]) })
	case Uint64:
		backing = decode(n, raw, tp.Uint64Data, 8, binary.LittleEndian.Uint64)
	case Uint32:
		backing = decode(n, raw, narrow[uint32](tp.Uint64Data), 4, binary.LittleEndian.Uint32)
	case Uint16:
		backing = decode(n, raw, narrow[uint16](tp.Int32Data), 2, binary.LittleEndian.Uint16)
	case Uint8:
		backing = decode(n, raw, narrow[uint8](tp.Int32Data), 1, func(b []byte) uint8 { return b[0] })
	case Bool:
		bools := make([]bool, len(tp.Int32Data))
		for i, v := range tp.Int32Data {
			bools[i] = v != 0
		}
		backing = decode(n, raw, bools, 1, func(b []byte) bool { return b[0] != 0 })
	default:
		return nil, fmt.Errorf("data type %s is not supported for conversion", dt)
	}

	if len(tp.Dims) == 0 {
		return tensor.New(tensor.FromScalar(firstOf(backing))), nil
	}
	shape := make([]int, len(tp.Dims))
	for i, d := range tp.Dims {
		shape[i] = int(d)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing)), nil
}

// denseElemBytes is the size of one element of each convertible data type
// once converted (FLOAT16 and BFLOAT16 widen to float32).
var denseElemBytes = map[DataType]int{
	Float: 4, Float64: 8, Float16: 4, BFloat16: 4,
	Int64: 8, Int32: 4, Int16: 2, Int8: 1,
	Uint64: 8, Uint32: 4, Uint16: 2, Uint8: 1, Bool: 1,
}

// decode returns the n elements of a tensor: from raw (size bytes each,
// little-endian) when the tensor uses raw_data, else from its typed values.
// The caller has checked that the lengths match n.
func decode[T any](n int, raw []byte, typed []T, size int, read func([]byte) T) []T {
	if raw == nil {
		return slices.Clone(typed)
	}
	out := make([]T, n)
	for i := range out {
		out[i] = read(raw[i*size:])
	}
	return out
}

// widen16 decodes FLOAT16 or BFLOAT16 elements, stored as 16-bit patterns
// in raw_data or in the low half of int32_data values, into float32.
func widen16(n int, raw []byte, typed []int32, widen func(uint16) float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		if raw != nil {
			out[i] = widen(binary.LittleEndian.Uint16(raw[2*i:]))
		} else {
			out[i] = widen(uint16(typed[i]))
		}
	}
	return out
}

// narrow converts typed-field values to a narrower integer type (ONNX
// stores 8- and 16-bit elements one per int32, UINT32 one per uint64).
func narrow[T int8 | uint8 | int16 | uint16 | uint32, V int32 | uint64](vs []V) []T {
	out := make([]T, len(vs))
	for i, v := range vs {
		out[i] = T(v)
	}
	return out
}

// asSlice turns a scalar Dense's bare datum into a one-element slice, so
// that scalars and tensors encode alike; slices pass through.
func asSlice(data any) any {
	v := reflect.ValueOf(data)
	if v.Kind() == reflect.Slice {
		return data
	}
	s := reflect.MakeSlice(reflect.SliceOf(v.Type()), 1, 1)
	s.Index(0).Set(v)
	return s.Interface()
}

// firstOf returns the first element of a backing slice, for scalars.
func firstOf(backing any) any { return reflect.ValueOf(backing).Index(0).Interface() }

// DenseToTensor converts a *tensor.Dense into a TensorProto named name,
// storing the data in raw_data (little-endian, as ONNX Runtime and PyTorch
// write it). Supported dtypes: float32, float64, the signed and unsigned
// integers of 8 to 64 bits, and bool. Views are materialized first; scalars
// become rank-0 tensors.
func DenseToTensor(name string, d *tensor.Dense) (tp *onnxpb.TensorProto, err error) {
	if d == nil {
		return nil, fmt.Errorf("tensor %q: nil *tensor.Dense", name)
	}
	// A Dense built by hand (a zero value, data shorter than its shape)
	// can make gorgonia panic while it is read; that is an error here.
	defer func() {
		if r := recover(); r != nil {
			tp, err = nil, fmt.Errorf("tensor %q: malformed *tensor.Dense: %v", name, r)
		}
	}()
	if d.RequiresIterator() {
		m, ok := d.Materialize().(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("tensor %q: cannot materialize the view", name)
		}
		d = m
	}
	tp = &onnxpb.TensorProto{Name: proto.String(name), Dims: make([]int64, 0, d.Dims())}
	for _, s := range d.Shape() {
		tp.Dims = append(tp.Dims, int64(s))
	}

	var dt DataType
	var raw []byte
	switch v := asSlice(d.Data()).(type) {
	case []float32:
		dt, raw = Float, encodeRaw(v, 4, func(b []byte, x float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(x)) })
	case []float64:
		dt, raw = Float64, encodeRaw(v, 8, func(b []byte, x float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(x)) })
	case []int64:
		dt, raw = Int64, encodeRaw(v, 8, func(b []byte, x int64) { binary.LittleEndian.PutUint64(b, uint64(x)) })
	case []int32:
		dt, raw = Int32, encodeRaw(v, 4, func(b []byte, x int32) { binary.LittleEndian.PutUint32(b, uint32(x)) })
	case []int16:
		dt, raw = Int16, encodeRaw(v, 2, func(b []byte, x int16) { binary.LittleEndian.PutUint16(b, uint16(x)) })
	case []int8:
		dt, raw = Int8, encodeRaw(v, 1, func(b []byte, x int8) { b[0] = byte(x) })
	case []uint64:
		dt, raw = Uint64, encodeRaw(v, 8, binary.LittleEndian.PutUint64)
	case []uint32:
		dt, raw = Uint32, encodeRaw(v, 4, binary.LittleEndian.PutUint32)
	case []uint16:
		dt, raw = Uint16, encodeRaw(v, 2, binary.LittleEndian.PutUint16)
	case []uint8:
		dt, raw = Uint8, append([]byte{}, v...)
	case []bool:
		dt, raw = Bool, encodeRaw(v, 1, func(b []byte, x bool) { b[0] = boolByte(x) })
	default:
		return nil, fmt.Errorf("tensor %q: dtype %v is not supported (want a float, integer or bool type)", name, d.Dtype())
	}
	if want := budget.Elements(d.Shape()); int64(len(raw)) != budget.Bytes(want, ElemBytes(dt)) {
		return nil, fmt.Errorf("tensor %q: shape %v holds %d elements, the data %d", name, d.Shape(), want, len(raw)/ElemBytes(dt))
	}
	tp.DataType = proto.Int32(int32(dt))
	tp.RawData = raw
	return tp, nil
}

// encodeRaw lays out values little-endian, size bytes each.
func encodeRaw[T any](vs []T, size int, put func([]byte, T)) []byte {
	out := make([]byte, len(vs)*size)
	for i, v := range vs {
		put(out[i*size:], v)
	}
	return out
}

// EncodeRaw lays values out as a TensorProto's raw_data, little-endian:
// size bytes each, written by put. The exporter builds Constant values
// with it.
func EncodeRaw[T any](values []T, size int, put func([]byte, T)) []byte {
	return encodeRaw(values, size, put)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

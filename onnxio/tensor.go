package onnxio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"
)

// TensorToArray converts a TensorProto with DefaultLimits; see
// Limits.TensorToArray.
func TensorToArray(tp *onnxpb.TensorProto) (*array.Array, error) {
	return DefaultLimits.TensorToArray(tp)
}

// TensorToArray converts a TensorProto into an *array.Array of the same
// element type and shape, zero elements included, reading the typed field
// or raw_data (little-endian), whichever the tensor uses. Every numeric
// data type and BOOL converts; STRING and the complex types do not. The
// narrow floats (FLOAT16, BFLOAT16, the FLOAT8 and FLOAT4 types) are
// widened exactly to float32, the 4- and 2-bit integers unpacked to one
// int8 or uint8 each (see package array). The shape is checked against
// the limits before anything is allocated, and the data against the
// shape; the Array's data is reserved from the memory budget (MaxMemory
// or Budget) and shares no memory with tp.
func (l Limits) TensorToArray(tp *onnxpb.TensorProto) (*array.Array, error) {
	if tp == nil {
		return nil, errors.New("nil TensorProto")
	}
	mem := l.scope()
	defer mem.Release()
	a, err := l.tensorToArray(tp, mem)
	if err != nil {
		return nil, fmt.Errorf("tensor %q (%s): %w", tp.GetName(), tensorLabel(tp), err)
	}
	return a, nil
}

func (l Limits) tensorToArray(tp *onnxpb.TensorProto, mem *budget.Scope) (*array.Array, error) {
	dt := array.DType(tp.GetDataType())
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
	if !dt.Storable() {
		return nil, fmt.Errorf("data type %s is not supported for conversion", DataType(dt))
	}
	if err := mem.Reserve(budget.Bytes(elems, dt.Size()), "converting it"); err != nil {
		return nil, err
	}
	shape := make([]int, len(tp.Dims))
	for i, d := range tp.Dims {
		shape[i] = int(d)
	}
	return &array.Array{DType: dt, Shape: shape, Data: decodeData(dt, int(elems), tp)}, nil
}

// decodeData returns the n elements of tp, of type dt, in dt's storage
// type. checkTensor has matched the data's length with n.
func decodeData(dt array.DType, n int, tp *onnxpb.TensorProto) any {
	raw := tp.RawData
	switch dt {
	case array.Float32:
		return decode(n, raw, tp.FloatData, 4, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })
	case array.Float64:
		return decode(n, raw, tp.DoubleData, 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })
	case array.Int64:
		return decode(n, raw, tp.Int64Data, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
	case array.Int32:
		return decode(n, raw, tp.Int32Data, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
	case array.Int16:
		return decode(n, raw, narrow[int16](tp.Int32Data), 2, func(b []byte) int16 { return int16(binary.LittleEndian.Uint16(b)) })
	case array.Int8:
		return decode(n, raw, narrow[int8](tp.Int32Data), 1, func(b []byte) int8 { return int8(b[0]) })
	case array.Uint64:
		return decode(n, raw, tp.Uint64Data, 8, binary.LittleEndian.Uint64)
	case array.Uint32:
		return decode(n, raw, narrow[uint32](tp.Uint64Data), 4, binary.LittleEndian.Uint32)
	case array.Uint16:
		return decode(n, raw, narrow[uint16](tp.Int32Data), 2, binary.LittleEndian.Uint16)
	case array.Uint8:
		return decode(n, raw, narrow[uint8](tp.Int32Data), 1, func(b []byte) uint8 { return b[0] })
	case array.Bool:
		bools := make([]bool, len(tp.Int32Data))
		for i, v := range tp.Int32Data {
			bools[i] = v != 0
		}
		return decode(n, raw, bools, 1, func(b []byte) bool { return b[0] != 0 })
	case array.Float16, array.BFloat16:
		return widenCodes(dt, n, func(i int) uint16 {
			if raw != nil {
				return binary.LittleEndian.Uint16(raw[2*i:])
			}
			return uint16(tp.Int32Data[i])
		})
	case array.Int4, array.Int2:
		return unpackInts(dt, n, packedBytes(raw, tp.Int32Data), func(code uint8, bits int) int8 {
			return int8(code<<(8-bits)) >> (8 - bits) // sign-extend
		})
	case array.Uint4, array.Uint2:
		return unpackInts(dt, n, packedBytes(raw, tp.Int32Data), func(code uint8, _ int) uint8 { return code })
	case array.Float4E2M1:
		codes := packedBytes(raw, tp.Int32Data)
		return widenCodes(dt, n, func(i int) uint16 { return uint16(codes[i/2] >> (4 * (i % 2)) & 0xf) })
	}
	// The float8 types: one byte each in raw_data, one per int32.
	return widenCodes(dt, n, func(i int) uint16 {
		if raw != nil {
			return uint16(raw[i])
		}
		return uint16(uint8(tp.Int32Data[i]))
	})
}

// widenCodes decodes n codes of a narrow float type, code(i) giving the
// i-th, into float32.
func widenCodes(dt array.DType, n int, code func(i int) uint16) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = array.FloatFromBits(dt, code(i))
	}
	return out
}

// packedBytes returns the bytes that hold sub-byte elements: raw_data, or
// the int32_data values, each of which holds one byte of them.
func packedBytes(raw []byte, typed []int32) []byte {
	if raw != nil {
		return raw
	}
	out := make([]byte, len(typed))
	for i, v := range typed {
		out[i] = byte(v)
	}
	return out
}

// unpackInts unpacks n sub-byte integers of type dt, packed low bits
// first, with widen turning each code into its storage value.
func unpackInts[T int8 | uint8](dt array.DType, n int, packed []byte, widen func(code uint8, bits int) T) []T {
	bits := dt.Bits()
	per := 8 / bits
	out := make([]T, n)
	for i := range out {
		code := packed[i/per] >> (bits * (i % per)) & (1<<bits - 1)
		out[i] = widen(code, bits)
	}
	return out
}

// TensorToDense converts a TensorProto with DefaultLimits; see
// Limits.TensorToDense.
func TensorToDense(tp *onnxpb.TensorProto) (*tensor.Dense, error) {
	return DefaultLimits.TensorToDense(tp)
}

// TensorToDense converts a TensorProto into a *tensor.Dense of the same
// shape, as TensorToArray converts it; the Dense's element type is the
// Array's storage type:
//
//	FLOAT -> float32      DOUBLE -> float64
//	FLOAT16, BFLOAT16, FLOAT8*, FLOAT4E2M1 -> float32 (widened exactly)
//	INT64 -> int64  INT32 -> int32  INT16 -> int16  INT8, INT4, INT2 -> int8
//	UINT64 -> uint64  UINT32 -> uint32  UINT16 -> uint16  UINT8, UINT4, UINT2 -> uint8
//	BOOL -> bool
//
// A rank-0 tensor becomes a gorgonia scalar (Shape() is (), Data() returns
// the bare value, not a slice). Tensors with zero elements are refused:
// *tensor.Dense cannot hold them (TensorToArray can). The Dense owns its
// data: it shares no memory with tp.
func (l Limits) TensorToDense(tp *onnxpb.TensorProto) (*tensor.Dense, error) {
	a, err := l.TensorToArray(tp)
	if err != nil {
		return nil, err
	}
	if a.Len() == 0 {
		return nil, fmt.Errorf("tensor %q (%s): the tensor has no elements, which *tensor.Dense cannot represent (use TensorToArray)", tp.GetName(), tensorLabel(tp))
	}
	return a.Dense()
}

// decode returns the n elements of a tensor: from raw (size bytes each,
// little-endian) when the tensor uses raw_data, else from its typed values.
// The caller has checked that the lengths match n.
func decode[T any](n int, raw []byte, typed []T, size int, read func([]byte) T) []T {
	out := make([]T, n) // never nil, even when empty
	if raw == nil {
		copy(out, typed)
		return out
	}
	for i := range out {
		out[i] = read(raw[i*size:])
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

// DenseToTensor converts a *tensor.Dense into a TensorProto named name,
// as ArrayToTensor converts the Array it holds (float32 as FLOAT, ...).
// Views are materialized first; scalars become rank-0 tensors.
func DenseToTensor(name string, d *tensor.Dense) (*onnxpb.TensorProto, error) {
	if d == nil {
		return nil, fmt.Errorf("tensor %q: nil *tensor.Dense", name)
	}
	a, err := array.FromDense(d)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	return ArrayToTensor(name, a)
}

// ArrayToTensor converts an *array.Array, zero elements included, into a
// TensorProto named name of the Array's data type, storing the data in
// raw_data (little-endian, as ONNX Runtime and PyTorch write it; 4- and
// 2-bit types packed low bits first). Narrow floats are written as the
// codes of their values (array.FloatBits).
func ArrayToTensor(name string, a *array.Array) (*onnxpb.TensorProto, error) {
	if err := a.Check(); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	tp := &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(a.DType)), Dims: make([]int64, len(a.Shape))}
	for i, d := range a.Shape {
		tp.Dims[i] = int64(d)
	}
	tp.RawData = encodeData(a)
	return tp, nil
}

// encodeData lays out a's elements as raw_data.
func encodeData(a *array.Array) []byte {
	switch a.DType {
	case array.Float16, array.BFloat16:
		return encodeRaw(a.Data.([]float32), 2, func(b []byte, x float32) { binary.LittleEndian.PutUint16(b, array.FloatBits(a.DType, x)) })
	case array.Float8E4M3FN, array.Float8E4M3FNUZ, array.Float8E5M2, array.Float8E5M2FNUZ, array.Float8E8M0:
		return encodeRaw(a.Data.([]float32), 1, func(b []byte, x float32) { b[0] = byte(array.FloatBits(a.DType, x)) })
	case array.Float4E2M1:
		data := a.Data.([]float32)
		return packCodes(a.DType, len(data), func(i int) uint8 { return uint8(array.FloatBits(a.DType, data[i])) })
	case array.Int4, array.Int2:
		data := a.Data.([]int8)
		return packCodes(a.DType, len(data), func(i int) uint8 { return uint8(data[i]) })
	case array.Uint4, array.Uint2:
		data := a.Data.([]uint8)
		return packCodes(a.DType, len(data), func(i int) uint8 { return data[i] })
	}
	switch v := a.Data.(type) {
	case []float32:
		return encodeRaw(v, 4, func(b []byte, x float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(x)) })
	case []float64:
		return encodeRaw(v, 8, func(b []byte, x float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(x)) })
	case []int64:
		return encodeRaw(v, 8, func(b []byte, x int64) { binary.LittleEndian.PutUint64(b, uint64(x)) })
	case []int32:
		return encodeRaw(v, 4, func(b []byte, x int32) { binary.LittleEndian.PutUint32(b, uint32(x)) })
	case []int16:
		return encodeRaw(v, 2, func(b []byte, x int16) { binary.LittleEndian.PutUint16(b, uint16(x)) })
	case []int8:
		return encodeRaw(v, 1, func(b []byte, x int8) { b[0] = byte(x) })
	case []uint64:
		return encodeRaw(v, 8, binary.LittleEndian.PutUint64)
	case []uint32:
		return encodeRaw(v, 4, binary.LittleEndian.PutUint32)
	case []uint16:
		return encodeRaw(v, 2, binary.LittleEndian.PutUint16)
	case []uint8:
		return append([]byte{}, v...)
	case []bool:
		return encodeRaw(v, 1, func(b []byte, x bool) { b[0] = boolByte(x) })
	}
	panic(fmt.Sprintf("onnxio: no encoder for %s", a.DType)) // Check admits only the types above
}

// packCodes packs n sub-byte codes of type dt, code(i) giving the i-th,
// low bits first.
func packCodes(dt array.DType, n int, code func(i int) uint8) []byte {
	bits := dt.Bits()
	per := 8 / bits
	out := make([]byte, (n+per-1)/per)
	for i := range n {
		out[i/per] |= code(i) & (1<<bits - 1) << (bits * (i % per))
	}
	return out
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

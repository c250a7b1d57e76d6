package tensorio

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
)

// elemType is one element type the package reads and writes, with its names
// in the file formats and how its bytes decode.
type elemType struct {
	dt     array.DType  // the element type, in attnrun's one dtype table
	dtype  tensor.Dtype // the Go-side type of the decoded tensor
	npy    string       // NumPy's type code without byte order: "f4"; "" where NumPy has none
	st     string       // safetensors' name: "F32"; "" where this package does not offer it
	size   int          // bytes per element in the file
	goSize int          // bytes per element once decoded
}

// newElemType describes dt, whose sizes and *tensor.Dense type come from
// package array.
func newElemType(dt array.DType, npy, st string) elemType {
	dense, ok := dt.DenseDtype()
	if !ok {
		panic("tensorio: no *tensor.Dense type for " + dt.String())
	}
	return elemType{dt: dt, dtype: dense, npy: npy, st: st, size: dt.Bits() / 8, goSize: dt.Size()}
}

// The element types of .safetensors files, in the order error messages
// list them.
var elemTypes = []elemType{
	newElemType(array.Float32, "f4", "F32"),
	newElemType(array.Float64, "f8", "F64"),
	newElemType(array.Int64, "i8", "I64"),
	newElemType(array.Int32, "i4", "I32"),
	newElemType(array.Uint8, "u1", "U8"),
	newElemType(array.Int8, "i1", "I8"),
	newElemType(array.Bool, "b1", "BOOL"),
}

// The 16-bit floats decode to float32; NumPy has float16 but no bfloat16.
var (
	elemF16  = newElemType(array.Float16, "f2", "F16")
	elemBF16 = newElemType(array.BFloat16, "", "BF16")
)

// npyTypes are the element types of .npy files: every numeric NumPy type
// but the complex ones, and bool.
var npyTypes = append(slices.Clip(elemTypes), elemF16,
	newElemType(array.Int16, "i2", ""), newElemType(array.Uint16, "u2", ""),
	newElemType(array.Uint32, "u4", ""), newElemType(array.Uint64, "u8", ""))

// supportedTypes is the list error messages give when a type is refused.
const supportedTypes = "float32, float64, float16, int64, int32, int16, int8, uint64, uint32, uint16, uint8 or bool"

// elemTypeOf finds the .npy element type of a tensor's dtype.
func elemTypeOf(dt tensor.Dtype) (elemType, error) {
	for _, e := range npyTypes {
		if e.dtype == dt && e.dt != array.Float16 {
			return e, nil
		}
	}
	name := "none"
	if dt.Type != nil { // a zero Dtype cannot print itself
		name = dt.String()
	}
	return elemType{}, fmt.Errorf("dtype %s not supported (want %s)", name, supportedTypes)
}

// npyTypeOf finds the .npy element type an Array of type dt is written
// as: its own where NumPy has it, else its storage type (bfloat16 and the
// float8 types widened to float32, the 4- and 2-bit integers as int8 or
// uint8), which holds its values exactly.
func npyTypeOf(dt array.DType) (elemType, error) {
	for _, e := range npyTypes {
		if e.dt == dt {
			return e, nil
		}
	}
	for _, e := range npyTypes {
		if dt.Storable() && e.dt == array.Of(reflect.MakeSlice(reflect.SliceOf(dt.Storage()), 0, 0).Interface()) {
			return e, nil
		}
	}
	return elemType{}, fmt.Errorf("dtype %s not supported (want %s)", dt, supportedTypes)
}

// chunkSize is how many bytes are decoded or encoded at a time, so a tensor
// never needs a second full-size buffer.
const chunkSize = 64 << 10

// readElements reads n elements of type e stored in byte order order from r
// into a new slice of its storage type (float32 for the 16-bit floats).
func readElements(r io.Reader, e elemType, n int, order binary.ByteOrder) (any, error) {
	switch e.dt {
	case array.Float32:
		return readInto(r, make([]float32, n), 4, func(b []byte) float32 { return math.Float32frombits(order.Uint32(b)) })
	case array.Float64:
		return readInto(r, make([]float64, n), 8, func(b []byte) float64 { return math.Float64frombits(order.Uint64(b)) })
	case array.Int64:
		return readInto(r, make([]int64, n), 8, func(b []byte) int64 { return int64(order.Uint64(b)) })
	case array.Int32:
		return readInto(r, make([]int32, n), 4, func(b []byte) int32 { return int32(order.Uint32(b)) })
	case array.Int16:
		return readInto(r, make([]int16, n), 2, func(b []byte) int16 { return int16(order.Uint16(b)) })
	case array.Uint64:
		return readInto(r, make([]uint64, n), 8, order.Uint64)
	case array.Uint32:
		return readInto(r, make([]uint32, n), 4, order.Uint32)
	case array.Uint16:
		return readInto(r, make([]uint16, n), 2, order.Uint16)
	case array.Uint8:
		return readInto(r, make([]uint8, n), 1, func(b []byte) uint8 { return b[0] })
	case array.Int8:
		return readInto(r, make([]int8, n), 1, func(b []byte) int8 { return int8(b[0]) })
	case array.Bool:
		// Like NumPy, any non-zero byte is true.
		return readInto(r, make([]bool, n), 1, func(b []byte) bool { return b[0] != 0 })
	case array.Float16:
		return readInto(r, make([]float32, n), 2, func(b []byte) float32 { return array.Float16FromBits(order.Uint16(b)) })
	case array.BFloat16:
		return readInto(r, make([]float32, n), 2, func(b []byte) float32 { return array.BFloat16FromBits(order.Uint16(b)) })
	}
	panic("tensorio: no decoder for " + e.dt.String())
}

// readInto fills dst from r, size bytes per element, a chunk at a time.
func readInto[T any](r io.Reader, dst []T, size int, decode func([]byte) T) ([]T, error) {
	buf := make([]byte, min(chunkSize, len(dst)*size))
	per := len(buf) / size
	for start := 0; start < len(dst); start += per {
		count := min(per, len(dst)-start)
		chunk := buf[:count*size]
		if n, err := io.ReadFull(r, chunk); err != nil {
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				return nil, fmt.Errorf("reading data: %w", err)
			}
			got := int64(start)*int64(size) + int64(n)
			return nil, fmt.Errorf("data truncated: want %d bytes, got %d", int64(len(dst))*int64(size), got)
		}
		for i := range count {
			dst[start+i] = decode(chunk[i*size:])
		}
	}
	return dst, nil
}

// writeElements writes the elements of data (a slice of one of the
// storage types of package array) to w in little-endian order.
func writeElements(w io.Writer, data any) error {
	switch s := data.(type) {
	case []float32:
		return writeFrom(w, s, 4, func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) })
	case []float64:
		return writeFrom(w, s, 8, func(b []byte, v float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(v)) })
	case []int64:
		return writeFrom(w, s, 8, func(b []byte, v int64) { binary.LittleEndian.PutUint64(b, uint64(v)) })
	case []int32:
		return writeFrom(w, s, 4, func(b []byte, v int32) { binary.LittleEndian.PutUint32(b, uint32(v)) })
	case []int16:
		return writeFrom(w, s, 2, func(b []byte, v int16) { binary.LittleEndian.PutUint16(b, uint16(v)) })
	case []uint64:
		return writeFrom(w, s, 8, binary.LittleEndian.PutUint64)
	case []uint32:
		return writeFrom(w, s, 4, binary.LittleEndian.PutUint32)
	case []uint16:
		return writeFrom(w, s, 2, binary.LittleEndian.PutUint16)
	case []uint8:
		_, err := w.Write(s)
		return err
	case []int8:
		return writeFrom(w, s, 1, func(b []byte, v int8) { b[0] = byte(v) })
	case []bool:
		return writeFrom(w, s, 1, func(b []byte, v bool) {
			b[0] = 0
			if v {
				b[0] = 1
			}
		})
	}
	return fmt.Errorf("data of type %T not supported (want %s)", data, supportedTypes)
}

// writeElementsAs writes data as elements of type e: float16 as its
// 16-bit codes, everything else as writeElements does.
func writeElementsAs(w io.Writer, e elemType, data any) error {
	if e.dt == array.Float16 {
		return writeFrom(w, data.([]float32), 2, func(b []byte, v float32) { binary.LittleEndian.PutUint16(b, array.Float16Bits(v)) })
	}
	return writeElements(w, data)
}

// writeFrom encodes src a chunk at a time and writes it to w.
func writeFrom[T any](w io.Writer, src []T, size int, encode func([]byte, T)) error {
	buf := make([]byte, min(chunkSize, len(src)*size))
	per := len(buf) / size
	for start := 0; start < len(src); start += per {
		count := min(per, len(src)-start)
		chunk := buf[:count*size]
		for i := range count {
			encode(chunk[i*size:], src[start+i])
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

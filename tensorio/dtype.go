package tensorio

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"gorgonia.org/tensor"
)

// elemType is one element type the package reads and writes, with its names
// in the two file formats and how its bytes decode.
type elemType struct {
	dtype  tensor.Dtype // the Go-side type of the decoded tensor
	npy    string       // NumPy's type code without byte order: "f4"
	st     string       // safetensors' name: "F32"
	size   int          // bytes per element in the file
	goSize int          // bytes per element once decoded
}

// The element types, in the order error messages list them.
var elemTypes = []elemType{
	{tensor.Float32, "f4", "F32", 4, 4},
	{tensor.Float64, "f8", "F64", 8, 8},
	{tensor.Int64, "i8", "I64", 8, 8},
	{tensor.Int32, "i4", "I32", 4, 4},
	{tensor.Uint8, "u1", "U8", 1, 1},
	{tensor.Int8, "i1", "I8", 1, 1},
	{tensor.Bool, "b1", "BOOL", 1, 1},
}

// Half-precision types exist only in safetensors files and decode to float32.
var (
	elemF16  = elemType{tensor.Float32, "", "F16", 2, 4}
	elemBF16 = elemType{tensor.Float32, "", "BF16", 2, 4}
)

// supportedTypes is the list error messages give when a type is refused.
const supportedTypes = "float32, float64, int64, int32, uint8, int8 or bool"

// elemTypeOf finds the element type of a tensor's dtype.
func elemTypeOf(dt tensor.Dtype) (elemType, error) {
	for _, e := range elemTypes {
		if e.dtype == dt {
			return e, nil
		}
	}
	name := "none"
	if dt.Type != nil { // a zero Dtype cannot print itself
		name = dt.String()
	}
	return elemType{}, fmt.Errorf("dtype %s not supported (want %s)", name, supportedTypes)
}

// chunkSize is how many bytes are decoded or encoded at a time, so a tensor
// never needs a second full-size buffer.
const chunkSize = 64 << 10

// readElements reads n elements of type e stored in byte order order from r
// into a new slice of the Go type (float32 for the half types).
func readElements(r io.Reader, e elemType, n int, order binary.ByteOrder) (any, error) {
	switch e.st {
	case "F32":
		return readInto(r, make([]float32, n), 4, func(b []byte) float32 { return math.Float32frombits(order.Uint32(b)) })
	case "F64":
		return readInto(r, make([]float64, n), 8, func(b []byte) float64 { return math.Float64frombits(order.Uint64(b)) })
	case "I64":
		return readInto(r, make([]int64, n), 8, func(b []byte) int64 { return int64(order.Uint64(b)) })
	case "I32":
		return readInto(r, make([]int32, n), 4, func(b []byte) int32 { return int32(order.Uint32(b)) })
	case "U8":
		return readInto(r, make([]uint8, n), 1, func(b []byte) uint8 { return b[0] })
	case "I8":
		return readInto(r, make([]int8, n), 1, func(b []byte) int8 { return int8(b[0]) })
	case "BOOL":
		// Like NumPy, any non-zero byte is true.
		return readInto(r, make([]bool, n), 1, func(b []byte) bool { return b[0] != 0 })
	case "F16":
		return readInto(r, make([]float32, n), 2, func(b []byte) float32 { return float16To32(order.Uint16(b)) })
	case "BF16":
		return readInto(r, make([]float32, n), 2, func(b []byte) float32 { return bfloat16To32(order.Uint16(b)) })
	}
	panic("tensorio: no decoder for " + e.st)
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

// writeElements writes the elements of data (a slice of one of the Go types
// of elemTypes) to w in little-endian order.
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

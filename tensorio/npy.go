package tensorio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/regularfile"
)

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// maxNPYHeader bounds the header text. NumPy itself refuses headers over
// 10000 bytes by default; the three keys this package reads need far less.
const maxNPYHeader = 64 << 10

// ReadNPY reads one array in NumPy's .npy format (versions 1, 2 and 3) from
// r, using DefaultLimits. See Limits.ReadNPY.
func ReadNPY(r io.Reader) (*tensor.Dense, error) { return DefaultLimits.ReadNPY(r) }

// ReadNPYFile reads the .npy file at path, using DefaultLimits. Errors start
// with the path.
func ReadNPYFile(path string) (*tensor.Dense, error) { return DefaultLimits.ReadNPYFile(path) }

// ReadNPYArray reads one array in .npy format from r, using DefaultLimits.
// See Limits.ReadNPYArray.
func ReadNPYArray(r io.Reader) (*array.Array, error) { return DefaultLimits.ReadNPYArray(r) }

// ReadNPYArrayFile reads the .npy file at path as an Array, using
// DefaultLimits. Errors start with the path.
func ReadNPYArrayFile(path string) (*array.Array, error) { return DefaultLimits.ReadNPYArrayFile(path) }

// ReadNPY reads one array in .npy format from r as Limits.ReadNPYArray
// does, into a *tensor.Dense: float16 becomes float32 (exactly), and an
// array of zero elements, which a Dense cannot hold, is an error.
func (l Limits) ReadNPY(r io.Reader) (*tensor.Dense, error) {
	return toDense(l.ReadNPYArray(r))
}

// ReadNPYFile reads the .npy file at path as Limits.ReadNPY does.
func (l Limits) ReadNPYFile(path string) (*tensor.Dense, error) {
	a, err := l.ReadNPYArrayFile(path)
	if err != nil {
		return nil, err
	}
	d, err := toDense(a, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// toDense converts what an Array reader returned.
func toDense(a *array.Array, err error) (*tensor.Dense, error) {
	if err != nil {
		return nil, err
	}
	if a.Len() == 0 {
		return nil, fmt.Errorf("shape %s has no elements, which *tensor.Dense cannot hold (ReadNPYArray reads it)", array.FormatShape(a.Shape))
	}
	return a.Dense()
}

// ReadNPYArray reads one array in NumPy's .npy format (versions 1, 2 and
// 3) from r. It accepts C-ordered arrays of any rank, including 0-d and
// arrays of zero elements, with dtype float32, float64, float16, int64,
// int32, int16, int8, uint64, uint32, uint16, uint8 or bool, little- or
// big-endian; the Array has the same dtype (float16 held as float32, see
// package array), in native byte order. It reads exactly the header and
// the data, nothing after them. The data is reserved from the memory
// budget before it is allocated.
func (l Limits) ReadNPYArray(r io.Reader) (*array.Array, error) {
	if isNil(r) {
		return nil, errors.New("nil io.Reader")
	}
	l = l.resolved()
	avail := int64(-1)
	if sized, ok := r.(interface{ Len() int }); ok { // bytes.Reader, strings.Reader, ...
		avail = int64(sized.Len())
	}
	mem := l.scope()
	defer mem.Release()
	a, _, err := readNPY(r, avail, l.MaxDims, l.room(l.MaxTotalBytes), mem)
	return a, err
}

// ReadNPYArrayFile reads the .npy file at path, which must be a regular
// file, as Limits.ReadNPYArray does. Errors start with the path, and bytes
// after the array are an error.
func (l Limits) ReadNPYArrayFile(path string) (*array.Array, error) {
	f, err := regularfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	l = l.resolved()
	mem := l.scope()
	defer mem.Release()
	br := bufio.NewReader(f)
	a, _, err := readNPY(br, info.Size(), l.MaxDims, l.room(l.MaxTotalBytes), mem)
	if err == nil {
		err = expectEOF(br)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// readNPY reads a .npy stream with at most room bytes of decoded data,
// reserved from mem, and returns the array and its decoded size. avail is
// the number of bytes the stream holds, or -1 if unknown: when known, a
// header that declares more data than the stream holds is refused before
// the array is allocated.
func readNPY(r io.Reader, avail int64, maxRank int, room int64, mem *budget.Scope) (*array.Array, int64, error) {
	text, used, err := readNPYPreamble(r)
	if err != nil {
		return nil, 0, err
	}
	h, err := parseNPYHeader(text)
	if errors.Is(err, errStructured) {
		return nil, 0, err
	}
	if err != nil {
		return nil, 0, fmt.Errorf("malformed header: %w", err)
	}
	e, order, err := npyElemType(h.descr)
	if err != nil {
		return nil, 0, err
	}
	if h.fortranOrder {
		return nil, 0, errors.New("fortran_order True is not supported (want a C-ordered array: save np.ascontiguousarray(a))")
	}
	n, err := checkArrayShape(h.shape, e.goSize, maxRank, room)
	if err != nil {
		return nil, 0, err
	}
	if want := int64(n) * int64(e.size); avail >= 0 && want > avail-used {
		return nil, 0, fmt.Errorf("data truncated: want %d bytes, got %d", want, max(avail-used, 0))
	}
	decoded := int64(n) * int64(e.goSize)
	if err := mem.Reserve(decoded, fmt.Sprintf("%s %s", e.dt, array.FormatShape(h.shape))); err != nil {
		return nil, 0, err
	}
	data, err := readElements(r, e, n, order)
	if err != nil {
		return nil, 0, err
	}
	shape := make([]int, len(h.shape))
	for i, d := range h.shape {
		shape[i] = int(d)
	}
	return &array.Array{DType: e.dt, Shape: shape, Data: data}, decoded, nil
}

// readNPYPreamble reads the magic string, the version and the header text,
// and returns the text and the number of bytes read.
func readNPYPreamble(r io.Reader) (string, int64, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return "", 0, errors.New("not a .npy file: shorter than the 8-byte preamble")
	}
	if string(pre[:6]) != npyMagic {
		return "", 0, fmt.Errorf("not a .npy file: starts with %q, want %q", pre[:6], npyMagic)
	}
	// Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4.
	major, minor := pre[6], pre[7]
	lenBytes := map[byte]int{1: 2, 2: 4, 3: 4}[major]
	if lenBytes == 0 || minor != 0 {
		return "", 0, fmt.Errorf("format version %d.%d not supported (want 1.0, 2.0 or 3.0)", major, minor)
	}
	var b [4]byte
	if _, err := io.ReadFull(r, b[:lenBytes]); err != nil {
		return "", 0, errors.New("truncated header length")
	}
	size := int64(binary.LittleEndian.Uint32(b[:])) // the unused bytes are zero
	if size > maxNPYHeader {
		return "", 0, fmt.Errorf("header of %d bytes is larger than the %d accepted: %w", size, maxNPYHeader, ErrLimit)
	}
	text := make([]byte, size)
	if _, err := io.ReadFull(r, text); err != nil {
		return "", 0, fmt.Errorf("header truncated: want %d bytes", size)
	}
	// Versions 1 and 2 are Latin-1, version 3 UTF-8; the keys and values
	// this package accepts are ASCII either way.
	for i, c := range text {
		if c > 0x7e || (c < 0x20 && c != '\n' && c != '\t' && c != '\r') {
			return "", 0, fmt.Errorf("malformed header: byte %#x at offset %d is not printable ASCII", c, i)
		}
	}
	return string(text), int64(len(pre)+lenBytes) + size, nil
}

// npyElemType decodes a descr such as "<f4" into an element type and the
// byte order of the data.
func npyElemType(descr string) (elemType, binary.ByteOrder, error) {
	unsupported := fmt.Errorf("dtype %q not supported (want %s)", descr, supportedTypes)
	if len(descr) < 2 {
		return elemType{}, nil, unsupported
	}
	var order binary.ByteOrder
	switch descr[0] {
	case '<':
		order = binary.LittleEndian
	case '>':
		order = binary.BigEndian
	case '|':
		order = binary.LittleEndian // single bytes: order does not apply
	default:
		return elemType{}, nil, unsupported
	}
	for _, e := range npyTypes {
		if descr[1:] == e.npy {
			if (e.size == 1) != (descr[0] == '|') {
				return elemType{}, nil, unsupported // "<f4" and "|u1" only
			}
			return e, order, nil
		}
	}
	return elemType{}, nil, unsupported
}

// WriteNPY writes t to w in .npy format version 1.0 (2.0 if the header
// needs it), little-endian and C-ordered, byte-identical to what NumPy 1.24's
// np.save writes for the same array.
func WriteNPY(w io.Writer, t *tensor.Dense) error {
	if isNil(w) {
		return errors.New("nil io.Writer")
	}
	a, _, err := denseArray(t)
	if err != nil {
		return err
	}
	return WriteNPYArray(w, a)
}

// WriteNPYFile writes t to the .npy file at path atomically: the file is
// either complete or, on any error, unchanged.
func WriteNPYFile(path string, t *tensor.Dense) error {
	return writeFile(path, func(w io.Writer) error { return WriteNPY(w, t) })
}

// WriteNPYArray writes a to w in .npy format as WriteNPY does, zero
// elements included. float16 is written as NumPy's float16 ('<f2');
// bfloat16 and the float8 types, which NumPy lacks, as float32, and the 4-
// and 2-bit integers as int8 or uint8: types that hold their values
// exactly.
func WriteNPYArray(w io.Writer, a *array.Array) error {
	if isNil(w) {
		return errors.New("nil io.Writer")
	}
	if err := a.Check(); err != nil {
		return err
	}
	e, err := npyTypeOf(a.DType)
	if err != nil {
		return err
	}
	descr := "<" + e.npy
	if e.size == 1 {
		descr = "|" + e.npy
	}
	shape := make([]int64, len(a.Shape))
	for i, d := range a.Shape {
		shape[i] = int64(d)
	}
	if _, err := w.Write(npyPreamble(formatNPYHeader(descr, shape))); err != nil {
		return err
	}
	return writeElementsAs(w, e, a.Data)
}

// WriteNPYArrayFile writes a to the .npy file at path atomically.
func WriteNPYArrayFile(path string, a *array.Array) error {
	return writeFile(path, func(w io.Writer) error { return WriteNPYArray(w, a) })
}

// npyPreamble frames a header dict the way NumPy does: magic, version,
// length, then the dict padded with spaces and a newline so the data starts
// on a 64-byte boundary.
func npyPreamble(header string) []byte {
	const align = 64
	build := func(major byte, lenBytes int) []byte {
		fixed := len(npyMagic) + 2 + lenBytes
		total := len(header) + 1
		pad := align - (fixed+total)%align
		hlen := total + pad
		out := make([]byte, 0, fixed+hlen)
		out = append(out, npyMagic...)
		out = append(out, major, 0)
		if lenBytes == 2 {
			out = binary.LittleEndian.AppendUint16(out, uint16(hlen))
		} else {
			out = binary.LittleEndian.AppendUint32(out, uint32(hlen))
		}
		out = append(out, header...)
		out = append(out, bytes.Repeat([]byte{' '}, pad)...)
		return append(out, '\n')
	}
	if p := build(1, 2); len(p) <= 10+0xffff {
		return p
	}
	return build(2, 4)
}

// expectEOF reports an error if r has bytes left.
func expectEOF(r io.Reader) error {
	var b [1]byte
	n, err := io.ReadFull(r, b[:])
	if n > 0 {
		return errors.New("unexpected bytes after the array data")
	}
	if err != io.EOF {
		return fmt.Errorf("reading past the data: %w", err)
	}
	return nil
}

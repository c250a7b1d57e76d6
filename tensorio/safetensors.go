package tensorio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/regularfile"
)

// maxSafetensorsHeader is the largest JSON header accepted, the bound the
// reference implementation uses.
const maxSafetensorsHeader = 100 << 20

// metadataKey is the header key of the free-form string map.
const metadataKey = "__metadata__"

// ReadSafetensors reads the .safetensors file at path, using DefaultLimits.
// See Limits.ReadSafetensors.
func ReadSafetensors(path string) (names []string, tensors []*tensor.Dense, metadata map[string]string, err error) {
	return DefaultLimits.ReadSafetensors(path)
}

// ReadSafetensorsFrom reads a .safetensors file of size bytes from r, using
// DefaultLimits; for files held in memory or embedded in the binary.
func ReadSafetensorsFrom(r io.ReaderAt, size int64) (names []string, tensors []*tensor.Dense, metadata map[string]string, err error) {
	return DefaultLimits.ReadSafetensorsFrom(r, size)
}

// ReadSafetensors reads the .safetensors file at path. It returns the
// tensors in the order of their data in the file, their names, and the
// __metadata__ map (nil when absent). Dtypes F32, F64, I64, I32, I8, U8 and
// BOOL keep their type; F16 and BF16 are converted exactly to float32. The
// header is checked strictly: unknown fields, duplicate names, and data
// offsets that overlap, leave gaps, or fall outside the data are errors.
// The tensors are reserved from the memory budget before any is read. The
// file must be a regular file. Errors start with the path.
func (l Limits) ReadSafetensors(path string) (names []string, tensors []*tensor.Dense, metadata map[string]string, err error) {
	f, err := regularfile.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, nil, err
	}
	names, tensors, metadata, err = l.ReadSafetensorsFrom(f, info.Size())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return names, tensors, metadata, nil
}

// ReadSafetensorsFrom reads a .safetensors file of size bytes from r; see
// Limits.ReadSafetensors.
func (l Limits) ReadSafetensorsFrom(r io.ReaderAt, size int64) (names []string, tensors []*tensor.Dense, metadata map[string]string, err error) {
	if isNil(r) {
		return nil, nil, nil, errors.New("nil io.ReaderAt")
	}
	if size < 0 {
		return nil, nil, nil, fmt.Errorf("negative file size %d", size)
	}
	l = l.resolved()
	header, dataStart, err := readSafetensorsHeader(r, size, l)
	if err != nil {
		return nil, nil, nil, err
	}
	mem := l.scope()
	defer mem.Release()
	entries, metadata, err := parseSafetensorsHeader(header, l, size-dataStart, mem)
	if err != nil {
		return nil, nil, nil, err
	}
	// The entries are contiguous and in file order, so one sequential
	// pass reads them all.
	data := bufio.NewReader(io.NewSectionReader(r, dataStart, size-dataStart))
	for _, e := range entries {
		values, err := readElements(data, e.elem, e.count, binary.LittleEndian)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("tensor %q: %w", e.name, err)
		}
		names = append(names, e.name)
		tensors = append(tensors, newDense(e.shape, values))
	}
	return names, tensors, metadata, nil
}

// readSafetensorsHeader reads the length-prefixed JSON header and returns it
// with the offset at which the data starts.
func readSafetensorsHeader(r io.ReaderAt, size int64, l Limits) ([]byte, int64, error) {
	var prefix [8]byte
	if n, _ := r.ReadAt(prefix[:], 0); n < 8 {
		return nil, 0, errors.New("not a .safetensors file: shorter than the 8-byte header length")
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	limit := min(int64(maxSafetensorsHeader), l.MaxTotalBytes)
	if n > uint64(limit) {
		return nil, 0, fmt.Errorf("header length %d is more than the limit of %d: %w", n, limit, ErrLimit)
	}
	if int64(n) > size-8 {
		return nil, 0, fmt.Errorf("header length %d runs past the end of the %d-byte file", n, size)
	}
	header := make([]byte, n)
	if _, err := r.ReadAt(header, 8); err != nil {
		return nil, 0, fmt.Errorf("reading header: %w", err)
	}
	if len(header) == 0 || header[0] != '{' {
		return nil, 0, errors.New("malformed header: does not start with '{'")
	}
	return header, 8 + int64(n), nil
}

// stEntry is one tensor of a safetensors header, validated.
type stEntry struct {
	name       string
	elem       elemType
	shape      []int64
	count      int
	start, end uint64 // byte range within the data section
}

// stEntryJSON is the header's description of one tensor as written.
type stEntryJSON struct {
	Dtype       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets []uint64 `json:"data_offsets"`
}

// parseSafetensorsHeader decodes and validates the header JSON against a
// data section of dataLen bytes, reserves each tensor from mem, and returns
// the tensors sorted by offset.
func parseSafetensorsHeader(header []byte, l Limits, dataLen int64, mem *budget.Scope) ([]stEntry, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("malformed header: not a JSON object")
	}
	var (
		entries  []stEntry
		metadata map[string]string
		seen     = map[string]bool{}
		room     = l.MaxTotalBytes
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("malformed header: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, nil, fmt.Errorf("malformed header: key %v is not a string", tok)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("malformed header: %q appears twice", name)
		}
		seen[name] = true
		if name == metadataKey {
			if err := dec.Decode(&metadata); err != nil {
				return nil, nil, fmt.Errorf("malformed header: %s must map strings to strings: %w", metadataKey, err)
			}
			continue
		}
		var raw stEntryJSON
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("malformed header: tensor %q: %w", name, err)
		}
		e, err := checkSafetensorsEntry(name, raw, l.MaxDims, l.room(room))
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		decoded := int64(e.count) * int64(e.elem.goSize)
		if err := mem.Reserve(decoded, fmt.Sprintf("tensor %q: %s %s", name, e.elem.st, array.FormatShape(e.shape))); err != nil {
			return nil, nil, err
		}
		room -= decoded
		entries = append(entries, e)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, fmt.Errorf("malformed header: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF { // only padding may follow
		return nil, nil, errors.New("malformed header: unexpected bytes after the JSON object")
	}
	if err := checkCoverage(entries, dataLen); err != nil {
		return nil, nil, err
	}
	return entries, metadata, nil
}

// checkSafetensorsEntry validates one tensor's dtype, shape and offsets.
func checkSafetensorsEntry(name string, raw stEntryJSON, maxRank int, room int64) (stEntry, error) {
	if name == "" {
		return stEntry{}, errors.New("empty tensor name")
	}
	if raw.Dtype == nil || raw.Shape == nil || raw.DataOffsets == nil {
		return stEntry{}, errors.New("needs dtype, shape and data_offsets")
	}
	elem, err := safetensorsElemType(*raw.Dtype)
	if err != nil {
		return stEntry{}, err
	}
	if len(raw.DataOffsets) != 2 {
		return stEntry{}, fmt.Errorf("data_offsets has %d numbers, want 2", len(raw.DataOffsets))
	}
	count, err := checkShape(*raw.Shape, elem.goSize, maxRank, room)
	if err != nil {
		return stEntry{}, err
	}
	start, end := raw.DataOffsets[0], raw.DataOffsets[1]
	if start > end || end-start != uint64(count)*uint64(elem.size) {
		return stEntry{}, fmt.Errorf("data_offsets [%d, %d] hold %d bytes, but shape %s of %s needs %d",
			start, end, end-start, array.FormatShape(*raw.Shape), elem.st, uint64(count)*uint64(elem.size))
	}
	return stEntry{name: name, elem: elem, shape: *raw.Shape, count: count, start: start, end: end}, nil
}

// checkCoverage sorts entries by offset and checks that they tile the data
// section exactly: no overlaps, no gaps, nothing out of range.
func checkCoverage(entries []stEntry, dataLen int64) error {
	slices.SortFunc(entries, func(a, b stEntry) int {
		if a.start != b.start {
			return compareUint64(a.start, b.start)
		}
		return compareUint64(a.end, b.end)
	})
	var pos uint64
	for i, e := range entries {
		switch {
		case e.start < pos:
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] overlap tensor %q [%d, %d]",
				e.name, e.start, e.end, entries[i-1].name, entries[i-1].start, entries[i-1].end)
		case e.start > pos:
			return fmt.Errorf("data bytes [%d, %d) belong to no tensor (before tensor %q)", pos, e.start, e.name)
		case e.end > uint64(dataLen):
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] run past the %d bytes of data", e.name, e.start, e.end, dataLen)
		}
		pos = e.end
	}
	if pos != uint64(dataLen) {
		return fmt.Errorf("data bytes [%d, %d) belong to no tensor (after the last one)", pos, dataLen)
	}
	return nil
}

func compareUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// safetensorsElemType finds the element type of a safetensors dtype name.
func safetensorsElemType(name string) (elemType, error) {
	for _, e := range append(elemTypes[:len(elemTypes):len(elemTypes)], elemF16, elemBF16) {
		if e.st == name {
			return e, nil
		}
	}
	return elemType{}, fmt.Errorf("dtype %q not supported (want F32, F64, F16, BF16, I64, I32, I8, U8 or BOOL)", name)
}

// WriteSafetensors writes tensors under names, with an optional __metadata__
// map, to the .safetensors file at path, atomically. See WriteSafetensorsTo
// for the layout.
func WriteSafetensors(path string, names []string, tensors []*tensor.Dense, metadata map[string]string) error {
	return writeFile(path, func(w io.Writer) error { return WriteSafetensorsTo(w, names, tensors, metadata) })
}

// WriteSafetensorsTo writes a .safetensors file to w. The layout is the
// reference implementation's, so the output is deterministic: tensors are
// ordered by dtype, widest alignment first (I64, F64, F32, I32, I8, U8,
// BOOL), then by name; the compact JSON header lists __metadata__ (keys
// sorted) first, then the tensors in data order, and is padded with spaces
// to a multiple of 8 bytes.
func WriteSafetensorsTo(w io.Writer, names []string, tensors []*tensor.Dense, metadata map[string]string) error {
	if isNil(w) {
		return errors.New("nil io.Writer")
	}
	if err := checkNames(names, tensors); err != nil {
		return err
	}
	type item struct {
		name string
		a    *array.Array
		elem elemType
	}
	items := make([]item, len(names))
	for i, name := range names {
		if name == metadataKey {
			return fmt.Errorf("tensor name %q is reserved", name)
		}
		a, e, err := denseArray(tensors[i])
		if err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		if e.st == "" {
			return fmt.Errorf("tensor %q: dtype %s not supported in .safetensors (want float32, float64, int64, int32, int8, uint8 or bool)", name, a.DType)
		}
		items[i] = item{name, a, e}
	}
	slices.SortFunc(items, func(a, b item) int {
		if d := stWriteRank(b.elem) - stWriteRank(a.elem); d != 0 {
			return d
		}
		return strings.Compare(a.name, b.name)
	})

	var header bytes.Buffer
	header.WriteByte('{')
	if len(metadata) > 0 {
		writeJSONString(&header, metadataKey)
		header.WriteString(":{")
		for i, k := range slices.Sorted(maps.Keys(metadata)) {
			if i > 0 {
				header.WriteByte(',')
			}
			writeJSONString(&header, k)
			header.WriteByte(':')
			writeJSONString(&header, metadata[k])
		}
		header.WriteByte('}')
	}
	var offset uint64
	for i, it := range items {
		if i > 0 || len(metadata) > 0 {
			header.WriteByte(',')
		}
		n := uint64(it.a.Len()) * uint64(it.elem.size)
		writeJSONString(&header, it.name)
		fmt.Fprintf(&header, `:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}`,
			it.elem.st, jsonInts(it.a.Shape), offset, offset+n)
		offset += n
	}
	header.WriteByte('}')
	for header.Len()%8 != 0 {
		header.WriteByte(' ')
	}

	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(header.Len()))
	if _, err := w.Write(prefix[:]); err != nil {
		return err
	}
	if _, err := w.Write(header.Bytes()); err != nil {
		return err
	}
	for _, it := range items {
		if err := writeElements(w, it.a.Data); err != nil {
			return fmt.Errorf("tensor %q: %w", it.name, err)
		}
	}
	return nil
}

// stWriteRank orders dtypes as the reference implementation's Dtype enum
// (by increasing alignment), which its writer sorts in reverse.
func stWriteRank(e elemType) int {
	return slices.Index([]string{"BOOL", "U8", "I8", "F16", "BF16", "I32", "F32", "F64", "I64"}, e.st)
}

// writeJSONString writes s as a JSON string without escaping <, > and &
// (as serde_json, which the reference implementation uses).
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode appends a newline
}

// jsonInts formats a shape as a compact JSON array.
func jsonInts(v []int) string {
	parts := make([]string, len(v))
	for i, d := range v {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

package tensorio

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
)

// stWritable is what testdata/safetensors/writable.safetensors holds, by
// name; gen.py writes it in the reference implementation's layout.
var stWritable = map[string]*tensor.Dense{
	"f32":      pattern(tensor.Float32, 2, 3),
	"f64":      pattern(tensor.Float64, 3),
	"i64":      pattern(tensor.Int64, 2, 2),
	"i32":      pattern(tensor.Int32, 4),
	"i8":       pattern(tensor.Int8, 5),
	"u8":       pattern(tensor.Uint8, 5),
	"bool":     pattern(tensor.Bool, 2, 2),
	"scalar":   pattern(tensor.Float32),
	"rank4":    pattern(tensor.Float32, 2, 1, 3, 2),
	"a.weight": pattern(tensor.Float32, 1),
}

var stMetadata = map[string]string{"format": "pt", "source": "tensorio/testdata/gen.py"}

// stOrder is the data order of the goldens: by dtype, widest first, then
// by name.
var stOrder = []string{"i64", "f64", "a.weight", "f32", "rank4", "scalar", "i32", "i8", "u8", "bool"}

func TestReadSafetensorsGolden(t *testing.T) {
	names, tensors, metadata, err := ReadSafetensors(filepath.Join("testdata", "safetensors", "writable.safetensors"))
	require.NoError(t, err)
	assert.Equal(t, stOrder, names)
	assert.Equal(t, stMetadata, metadata)
	for i, name := range names {
		assertSameTensor(t, stWritable[name], tensors[i], name)
	}
}

func TestReadSafetensorsHalfTypesAsFloat32(t *testing.T) {
	names, tensors, _, err := ReadSafetensors(filepath.Join("testdata", "safetensors", "all_dtypes.safetensors"))
	require.NoError(t, err)
	byName := map[string]*tensor.Dense{}
	for i, n := range names {
		byName[n] = tensors[i]
	}
	assert.Len(t, byName, len(stWritable)+2)
	for _, n := range []string{"f16", "bf16"} {
		assertSameTensor(t, pattern(tensor.Float32, 2, 3), byName[n], n)
	}
	for n, want := range stWritable {
		assertSameTensor(t, want, byName[n], n)
	}
}

// TestHalfSpecialValues compares F16 and BF16 decoding with what PyTorch's
// .float() gives for zeros, subnormals, extremes, infinities and NaN.
func TestHalfSpecialValues(t *testing.T) {
	names, tensors, _, err := ReadSafetensors(filepath.Join("testdata", "safetensors", "half_specials.safetensors"))
	require.NoError(t, err)
	wantNames, want, err := ReadNPZ(filepath.Join("testdata", "safetensors", "half_specials_float32.npz"))
	require.NoError(t, err)
	for i, name := range names {
		j := indexOf(wantNames, name)
		require.GreaterOrEqual(t, j, 0, name)
		got := tensors[i].Data().([]float32)
		exp := want[j].Data().([]float32)
		require.Len(t, got, len(exp))
		for k := range exp {
			if math.IsNaN(float64(exp[k])) {
				assert.True(t, math.IsNaN(float64(got[k])), "%s[%d]", name, k)
				continue
			}
			assert.Equal(t, math.Float32bits(exp[k]), math.Float32bits(got[k]), "%s[%d]: %v vs %v", name, k, got[k], exp[k])
		}
	}
}

func TestFloat16Exhaustive(t *testing.T) {
	// Every half value converts exactly: converting back by rounding the
	// float32 to half must give the same bits (NaNs keep their payload).
	for h := 0; h < 1<<16; h++ {
		f := array.Float16FromBits(uint16(h))
		bits := math.Float32bits(f)
		sign := uint16(bits>>16) & 0x8000
		switch {
		case math.IsNaN(float64(f)) || math.IsInf(float64(f), 0):
			assert.Equal(t, uint16(h), sign|0x7c00|uint16(bits>>13)&0x3ff, "h=%#04x", h)
		default:
			// |f| = m·2^-24 exactly for subnormals; normals keep their bits.
			back := float32(math.Abs(float64(f)))
			if h&0x7c00 == 0 {
				assert.Equal(t, float32(h&0x3ff)*0x1p-24, back, "h=%#04x", h)
			} else {
				e := (bits>>23)&0xff - 127 + 15
				assert.Equal(t, uint16(h), sign|uint16(e)<<10|uint16(bits>>13)&0x3ff, "h=%#04x", h)
			}
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func writableInOrder() ([]string, []*tensor.Dense) {
	var names []string
	var tensors []*tensor.Dense
	for _, n := range []string{"f32", "f64", "i64", "i32", "i8", "u8", "bool", "scalar", "rank4", "a.weight"} {
		names = append(names, n)
		tensors = append(tensors, stWritable[n])
	}
	return names, tensors
}

func TestWriteSafetensorsMatchesReferenceLayout(t *testing.T) {
	names, tensors := writableInOrder()
	var buf bytes.Buffer
	require.NoError(t, WriteSafetensorsTo(&buf, names, tensors, stMetadata))
	assert.Equal(t, readTestdata(t, "safetensors", "writable.safetensors"), buf.Bytes())
}

// TestWriteSafetensorsReferenceVectors checks the exact bytes the reference
// implementation's own tests expect, padding included.
func TestWriteSafetensorsReferenceVectors(t *testing.T) {
	values := []float32{0, 1, 2, 3, 4, 5}
	var data []byte
	for _, v := range values {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	for _, c := range []struct {
		name     string
		tensors  []*tensor.Dense
		metadata map[string]string
		want     []byte
	}{
		{"attn.0", []*tensor.Dense{tensor.New(tensor.WithShape(1, 2, 3), tensor.WithBacking(values))}, nil,
			append(stFile(`{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`, nil), data...)},
		{"attn0", []*tensor.Dense{tensor.New(tensor.WithShape(1, 1, 2, 3), tensor.WithBacking(values))}, nil,
			append(stFile(`{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       `, nil), data...)},
		{"metadata only", nil, map[string]string{"framework": "pt"},
			stFile(`{"__metadata__":{"framework":"pt"}}     `, nil)},
		{"empty", nil, nil, stFile("{}      ", nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var names []string
			if c.tensors != nil {
				names = []string{c.name}
			}
			var buf bytes.Buffer
			require.NoError(t, WriteSafetensorsTo(&buf, names, c.tensors, c.metadata))
			assert.Equal(t, c.want, buf.Bytes())
		})
	}
}

func TestSafetensorsRoundTripEveryDtypeAndRank(t *testing.T) {
	var names []string
	var want []*tensor.Dense
	for _, dt := range allDtypes {
		for r, shape := range shapesByRank {
			names = append(names, dt.String()+"."+string(rune('0'+r)))
			want = append(want, pattern(dt, shape...))
		}
	}
	path := filepath.Join(t.TempDir(), "x.safetensors")
	meta := map[string]string{"k": "v", "<&>": "\"quoted\"\n"}
	require.NoError(t, WriteSafetensors(path, names, want, meta))

	gotNames, got, gotMeta, err := ReadSafetensors(path)
	require.NoError(t, err)
	assert.Equal(t, meta, gotMeta)
	require.Len(t, got, len(want))
	for i, n := range gotNames {
		assertSameTensor(t, want[indexOf(names, n)], got[i], n)
	}
}

// stFile assembles a safetensors file from header text and data.
func stFile(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), data...)
}

func TestReadSafetensorsRejectsMalformedInput(t *testing.T) {
	entry := func(name, dtype, shape, offsets string) string {
		return `"` + name + `":{"dtype":"` + dtype + `","shape":` + shape + `,"data_offsets":` + offsets + `}`
	}
	data16 := make([]byte, 16)
	for _, c := range []struct {
		name  string
		input []byte
		lim   Limits
		want  string
	}{
		{"too short", []byte{1, 2, 3}, Limits{}, "shorter than the 8-byte header length"},
		{"header past end", stFile("{}", nil)[:9], Limits{}, "header length 2 runs past the end of the 9-byte file"},
		{"header over limit", binary.LittleEndian.AppendUint64(nil, 200<<20), Limits{}, "header length 209715200 is more than the limit of 104857600"},
		{"not an object", stFile("[1, 2]", nil), Limits{}, "does not start with '{'"},
		{"bad JSON", stFile(`{"a":`, nil), Limits{}, "malformed header"},
		{"trailing JSON", stFile(`{} {}`, nil), Limits{}, "unexpected bytes after the JSON object"},
		{"unknown field", stFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"extra":1}}`, data16), Limits{}, `unknown field "extra"`},
		{"missing offsets", stFile(`{"a":{"dtype":"F32","shape":[4]}}`, data16), Limits{}, "needs dtype, shape and data_offsets"},
		{"three offsets", stFile("{"+entry("a", "F32", "[4]", "[0,16,32]")+"}", data16), Limits{}, "data_offsets has 3 numbers, want 2"},
		{"unsupported dtype", stFile("{"+entry("a", "C64", "[2]", "[0,16]")+"}", data16), Limits{}, `dtype "C64" not supported (want F32, F64, F16, BF16, I64, I32, I8, U8 or BOOL)`},
		{"size mismatch", stFile("{"+entry("a", "F32", "[3]", "[0,16]")+"}", data16), Limits{}, `tensor "a": data_offsets [0, 16] hold 16 bytes, but shape (3,) of F32 needs 12`},
		{"reversed offsets", stFile("{"+entry("a", "F32", "[4]", "[16,0]")+"}", data16), Limits{}, "data_offsets [16, 0]"},
		{"negative dim", stFile("{"+entry("a", "F32", "[-4]", "[0,16]")+"}", data16), Limits{}, "negative dimension"},
		{"fractional dim", stFile("{"+entry("a", "F32", "[1.5]", "[0,16]")+"}", data16), Limits{}, "malformed header"},
		{"absurd dims", stFile("{"+entry("a", "F32", "[4294967296,4294967296]", "[0,16]")+"}", data16), Limits{}, "more elements than fit in 64 bits"},
		{"rank over limit", stFile("{"+entry("a", "U8", "[1,1,1,1,1,1,1,1,1,16]", "[0,16]")+"}", data16), Limits{}, "rank 10, more than the limit 8"},
		{"header over byte limit", stFile("{"+entry("a", "F32", "[4]", "[0,16]")+"}", data16), Limits{MaxTotalBytes: 50}, "header length 55 is more than the limit of 50"},
		{"total data over limit", stFile("{"+entry("a", "U8", "[100]", "[0,100]")+","+entry("b", "U8", "[100]", "[100,200]")+"}", make([]byte, 200)), Limits{MaxTotalBytes: 150}, `tensor "b": shape (100,) needs more than the limit of 50 bytes`},
		{"half decoded over limit", stFile("{"+entry("a", "F16", "[40]", "[0,80]")+"}", make([]byte, 80)), Limits{MaxTotalBytes: 150}, "needs more than the limit of 150 bytes"},
		{"overlap", stFile("{"+entry("a", "F32", "[4]", "[0,16]")+","+entry("b", "F32", "[2]", "[8,16]")+"}", data16), Limits{}, `data_offsets [8, 16] overlap tensor "a" [0, 16]`},
		{"gap", stFile("{"+entry("a", "F32", "[2]", "[0,8]")+","+entry("b", "F32", "[1]", "[12,16]")+"}", data16), Limits{}, `data bytes [8, 12) belong to no tensor (before tensor "b")`},
		{"gap at start", stFile("{"+entry("a", "F32", "[2]", "[8,16]")+"}", data16), Limits{}, `data bytes [0, 8) belong to no tensor`},
		{"out of range", stFile("{"+entry("a", "F32", "[8]", "[0,32]")+"}", data16), Limits{}, `tensor "a": data_offsets [0, 32] run past the 16 bytes of data`},
		{"unused tail", stFile("{"+entry("a", "F32", "[2]", "[0,8]")+"}", data16), Limits{}, "data bytes [8, 16) belong to no tensor (after the last one)"},
		{"duplicate name", stFile("{"+entry("a", "F32", "[2]", "[0,8]")+","+entry("a", "F32", "[2]", "[8,16]")+"}", data16), Limits{}, `"a" appears twice`},
		{"empty name", stFile("{"+entry("", "F32", "[4]", "[0,16]")+"}", data16), Limits{}, "empty tensor name"},
		{"zero-size tensor", stFile("{"+entry("a", "F32", "[0]", "[0,0]")+"}", nil), Limits{}, "has no elements"},
		{"metadata not strings", stFile(`{"__metadata__":{"a":1}}`, nil), Limits{}, "__metadata__ must map strings to strings"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeTemp(t, "x.safetensors", c.input)
			_, _, _, err := c.lim.ReadSafetensors(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.True(t, strings.HasPrefix(err.Error(), path+": "), "error %q names the file", err)
		})
	}
}

func TestReadSafetensorsEveryTruncation(t *testing.T) {
	names, tensors := writableInOrder()
	var buf bytes.Buffer
	require.NoError(t, WriteSafetensorsTo(&buf, names, tensors, stMetadata))
	full := buf.Bytes()
	for n := 0; n < len(full); n++ {
		_, _, _, err := ReadSafetensorsFrom(bytes.NewReader(full[:n]), int64(n))
		require.Error(t, err, "prefix of %d bytes", n)
	}
}

func TestWriteSafetensorsRejectsReservedName(t *testing.T) {
	var buf bytes.Buffer
	err := WriteSafetensorsTo(&buf, []string{"__metadata__"}, []*tensor.Dense{pattern(tensor.Float32, 1)}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `tensor name "__metadata__" is reserved`)
}

// A dtype .npy holds but this .safetensors writer does not offer is
// refused (it used to be written with an empty dtype).
func TestWriteSafetensorsRejectsUnofferedDtype(t *testing.T) {
	var buf bytes.Buffer
	err := WriteSafetensorsTo(&buf, []string{"a"}, []*tensor.Dense{tensor.New(tensor.WithShape(1), tensor.WithBacking([]int16{1}))}, nil)
	assert.EqualError(t, err, `tensor "a": dtype int16 not supported in .safetensors (want float32, float64, int64, int32, int8, uint8 or bool)`)
}

package onnxio

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"

	"github.com/attnrun/attnrun/internal/atomicfile"
	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"google.golang.org/protobuf/proto"
)

// ReadModel reads an .onnx file with DefaultLimits; see Limits.ReadModel.
func ReadModel(path string) (*onnxpb.ModelProto, error) {
	return DefaultLimits.ReadModel(path)
}

// ReadModel reads, decodes and validates the ONNX model at path, loading
// external tensor data from files next to it (see DecodeModel). The file's
// contents and the external data are reserved from the memory budget
// (MaxMemory or Budget). Errors start with the path.
func (l Limits) ReadModel(path string) (*onnxpb.ModelProto, error) {
	mem := l.scope()
	defer mem.Release()
	data, err := l.readFile(path, mem)
	if err != nil {
		return nil, err
	}
	m, err := l.decodeModel(data, filepath.Dir(path), mem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// DecodeModel decodes a serialized ModelProto and validates every tensor it
// holds (initializers, Constant values, subgraph tensors): shapes within
// lim, and data that matches shape and data type. Data without ir_version
// or graph is refused as not a model: protobuf has no magic number, and a
// tensor file or random bytes can decode as a message.
//
// Tensors stored as external data are read from files relative to dir and
// moved into raw_data, so the returned model is self-contained; dir may be
// "" when the model has none. Every entry is checked against its file before
// any is read, and the total against MaxTotalBytes and the memory budget.
// With lim.ExternalSizesOnly the entries are checked but not read. Fields
// the schema subset does not declare are kept as unknown fields and written
// back by EncodeModel.
func DecodeModel(data []byte, dir string, lim Limits) (*onnxpb.ModelProto, error) {
	mem := lim.scope()
	defer mem.Release()
	return lim.decodeModel(data, dir, mem)
}

func (l Limits) decodeModel(data []byte, dir string, mem *budget.Scope) (*onnxpb.ModelProto, error) {
	if max := l.resolved().MaxFileBytes; int64(len(data)) > max {
		return nil, fmt.Errorf("model is %d bytes, over the limit of %d: %w", len(data), max, ErrLimit)
	}
	m := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(data, m); err != nil {
		return nil, notONNX(data, "ModelProto", err.Error())
	}
	if m.IrVersion == nil || m.Graph == nil {
		return nil, notONNX(data, "ModelProto", "no ir_version or no graph")
	}

	ext := &externalLoader{dir: dir}
	defer ext.close()
	err := walkModelTensors(m, func(where string, t *onnxpb.TensorProto) error {
		where = fmt.Sprintf("%s (%s)", where, tensorLabel(t))
		if err := l.checkAndLocate(t, where, ext); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if l.ExternalSizesOnly {
		return m, nil
	}
	if err := ext.load(l, mem); err != nil {
		return nil, err
	}
	return m, nil
}

// checkAndLocate validates a tensor and, if its data is external, checks
// the entries against the data file for ext to load later.
func (l Limits) checkAndLocate(t *onnxpb.TensorProto, where string, ext *externalLoader) error {
	elems, err := l.checkTensor(t)
	if err != nil || !isExternal(t) {
		return err
	}
	layout, ok := layouts[DataType(t.GetDataType())]
	if !ok {
		return fmt.Errorf("external data of unknown data type %d", t.GetDataType())
	}
	want, err := l.checkBytes(elems, layout.bits)
	if err != nil {
		return err
	}
	return ext.locate(t, where, want)
}

// notONNX builds the error for data that does not decode as the expected
// message, naming the format it seems to be in when it is a known one.
func notONNX(data []byte, message, detail string) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: the file is empty, not an ONNX %s", ErrNotONNX, message)
	}
	if format := sniffFormat(data); format != "" {
		return fmt.Errorf("%w: this is %s, not an ONNX %s", ErrNotONNX, format, message)
	}
	if message == "ModelProto" && looksLikeTensor(data) {
		return fmt.Errorf("%w: this is a serialized TensorProto (a test-data file?), not an ONNX ModelProto", ErrNotONNX)
	}
	return fmt.Errorf("%w: does not decode as an ONNX %s (truncated or corrupt?): %s", ErrNotONNX, message, detail)
}

// looksLikeTensor reports whether data decodes as a TensorProto with a
// known data type and data that matches its shape.
func looksLikeTensor(data []byte) bool {
	t := &onnxpb.TensorProto{}
	if proto.Unmarshal(data, t) != nil || t.DataType == nil {
		return false
	}
	if _, known := layouts[DataType(t.GetDataType())]; !known {
		return false
	}
	_, err := DefaultLimits.checkTensor(t)
	return err == nil
}

// EncodeModel serializes a model deterministically: the same model always
// gives the same bytes, so a file attnrun writes, read back and written
// again, is byte-identical.
func EncodeModel(m *onnxpb.ModelProto) ([]byte, error) {
	if m == nil {
		return nil, errors.New("encode model: nil ModelProto")
	}
	return encode(m, "model")
}

// encode marshals a message deterministically and refuses sizes that
// protobuf readers cannot read back.
func encode(msg proto.Message, what string) ([]byte, error) {
	if n := proto.Size(msg); n > math.MaxInt32 {
		return nil, fmt.Errorf("%s would be %d bytes; protobuf limits a message to 2 GiB (store large tensors as external data)", what, n)
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	return data, nil
}

// WriteModel encodes a model with EncodeModel and writes it to path
// atomically: into a temporary file in the same directory, then renamed, so
// that on any error no partial file is left at path.
func WriteModel(path string, m *onnxpb.ModelProto) error {
	data, err := EncodeModel(m)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.WriteFile(path, data, 0o644)
}

// Metadata returns the value of a metadata_props entry of a model.
func Metadata(m *onnxpb.ModelProto, key string) (string, bool) {
	for _, e := range m.GetMetadataProps() {
		if e.GetKey() == key {
			return e.GetValue(), true
		}
	}
	return "", false
}

// SetMetadata sets a metadata_props entry of a model, replacing the value
// of an existing entry with that key. A nil model is left alone.
func SetMetadata(m *onnxpb.ModelProto, key, value string) {
	if m == nil {
		return
	}
	for _, e := range m.MetadataProps {
		if e != nil && e.GetKey() == key {
			e.Value = proto.String(value)
			return
		}
	}
	m.MetadataProps = append(m.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(key), Value: proto.String(value)})
}

// OpsetVersion returns the version of an operator set a model imports;
// domain "" and "ai.onnx" both name the default ONNX operator set. It
// returns 0 when the model does not import the domain.
func OpsetVersion(m *onnxpb.ModelProto, domain string) int64 {
	if domain == "ai.onnx" {
		domain = ""
	}
	for _, o := range m.GetOpsetImport() {
		d := o.GetDomain()
		if d == "ai.onnx" {
			d = ""
		}
		if d == domain {
			return o.GetVersion()
		}
	}
	return 0
}

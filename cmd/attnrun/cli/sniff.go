package cli

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// People hand attnrun the wrong file at the wrong place: an input as the
// model, a state dict to inspect, a config to import. Every file argument
// is therefore recognized by its content (extensions lie, and protobuf has
// no magic number), and an error says what the file is and which command
// or flag takes it.

// fileKind is what a file argument holds.
type fileKind int

const (
	kindMissing fileKind = iota
	kindDir
	kindNPY
	kindNPZ
	kindSafetensors
	kindONNX
	kindTensorProto
	kindYAML
	kindOther
)

// sniffed is what sniffPath found: the kind and a phrase naming it ("a
// NumPy .npy array").
type sniffed struct {
	kind fileKind
	what string
}

// sniffPath looks at the first bytes of path. A path that cannot be read
// is kindMissing when it does not exist and kindOther otherwise, with the
// reason in what.
func sniffPath(path string) sniffed {
	info, err := os.Stat(path)
	switch {
	case os.IsNotExist(err):
		return sniffed{kindMissing, "missing"}
	case err != nil:
		return sniffed{kindOther, err.Error()}
	case info.IsDir():
		return sniffed{kindDir, "a directory"}
	case !info.Mode().IsRegular():
		return sniffed{kindOther, fmt.Sprintf("not a regular file (%v)", info.Mode().Type())}
	}
	f, err := os.Open(path)
	if err != nil {
		return sniffed{kindOther, err.Error()}
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	return sniffBytes(head[:n], info.Size(), strings.ToLower(filepath.Ext(path)))
}

// sniffBytes recognizes a file from its first bytes, its size and its
// extension (which decides only where the content cannot: an empty zip,
// a protobuf of no telling first field).
func sniffBytes(head []byte, size int64, ext string) sniffed {
	switch {
	case len(head) == 0:
		return sniffed{kindOther, "an empty file"}
	case bytes.HasPrefix(head, []byte("\x93NUMPY")):
		return sniffed{kindNPY, "a NumPy .npy array"}
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		if ext == ".npz" || zipHoldsNPY(head) {
			return sniffed{kindNPZ, "an .npz archive of arrays"}
		}
		return sniffed{kindOther, "a zip archive (a PyTorch .pt checkpoint? attnrun reads .npz and .safetensors state dicts)"}
	case bytes.HasPrefix(head, []byte("\x89PNG")):
		return sniffed{kindOther, "a PNG image"}
	case looksLikeSafetensorsHeader(head, size):
		return sniffed{kindSafetensors, "a safetensors file"}
	}
	if isText(head) {
		if bytes.HasPrefix(bytes.TrimSpace(head), []byte("ir_version")) {
			return sniffed{kindOther, "the text format of an ONNX model (attnrun reads the binary protobuf)"}
		}
		return sniffed{kindYAML, "YAML text (a model config)"}
	}
	switch protobufKind(head, ext) {
	case kindONNX:
		return sniffed{kindONNX, "an ONNX model"}
	case kindTensorProto:
		return sniffed{kindTensorProto, "an ONNX TensorProto (.pb tensor)"}
	}
	return sniffed{kindOther, "binary data of no format attnrun reads"}
}

// isText reports whether a sample is UTF-8 text: valid, and free of
// control characters other than tab, newline and carriage return (which
// every binary format here has in its first bytes).
func isText(head []byte) bool {
	head = trimPartialRune(head)
	if !utf8.Valid(head) {
		return false
	}
	for _, c := range head {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// zipHoldsNPY reports whether the first member of a zip archive is an
// .npy file, as in every archive numpy.savez writes.
func zipHoldsNPY(head []byte) bool {
	if len(head) < 30 || !bytes.HasPrefix(head, []byte("PK\x03\x04")) {
		return false
	}
	n := int(binary.LittleEndian.Uint16(head[26:28]))
	return 30+n <= len(head) && strings.HasSuffix(string(head[30:30+n]), ".npy")
}

// looksLikeSafetensorsHeader recognizes the safetensors layout: a
// little-endian uint64 header length within the file, then a JSON object.
func looksLikeSafetensorsHeader(head []byte, size int64) bool {
	if len(head) < 9 {
		return false
	}
	n := binary.LittleEndian.Uint64(head)
	return n > 1 && size >= 8 && n <= uint64(size-8) && head[8] == '{'
}

// protobufKind tells an ONNX ModelProto from a TensorProto by their
// first fields as serializers write them, in field order: a ModelProto
// starts with ir_version (field 1, varint) followed by producer_name,
// opset_import, graph or another of its fields; a TensorProto with dims
// (field 1, varint or packed) or data_type (field 2). Anything else is
// kindOther, unless the extension names the format.
func protobufKind(head []byte, ext string) fileKind {
	byExt := map[string]fileKind{".onnx": kindONNX, ".pb": kindTensorProto}
	switch {
	case len(head) >= 2 && (head[0] == 0x0a || head[0] == 0x10):
		return kindTensorProto
	case len(head) < 3 || head[0] != 0x08:
		if k, ok := byExt[ext]; ok {
			return k
		}
		return kindOther
	}
	_, n := binary.Uvarint(head[1:])
	if n <= 0 || 1+n >= len(head) {
		return kindOther
	}
	switch head[1+n] {
	case 0x08, 0x10:
		return kindTensorProto
	case 0x12, 0x1a, 0x22, 0x28, 0x32, 0x3a, 0x42, 0x72:
		return kindONNX
	}
	if k, ok := byExt[ext]; ok {
		return k
	}
	return kindOther
}

// trimPartialRune drops an incomplete UTF-8 sequence cut by the end of a
// sample, so that text is not taken for binary at the cut.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// usage says which command or flag takes a file of this kind.
func (s sniffed) usage(path string) string {
	switch s.kind {
	case kindDir:
		return fmt.Sprintf("run --input %s runs a model on every .npy in it; check FILE.onnx --data %s reads its test_data_set_N folders", path, path)
	case kindNPY:
		return fmt.Sprintf("it is an input: attnrun run MODEL --input %s", path)
	case kindNPZ:
		return fmt.Sprintf("a state dict goes to --weights %s (run, export, plot, bench), a batch of inputs to run MODEL --input %s", path, path)
	case kindSafetensors:
		return fmt.Sprintf("it is a state dict: --weights %s (run, export, plot, bench)", path)
	case kindONNX:
		return fmt.Sprintf("attnrun run, check, inspect, import or bench %s take it", path)
	case kindTensorProto:
		return fmt.Sprintf("it is an input of an ONNX model: attnrun run MODEL.onnx --input %s", path)
	case kindYAML:
		return fmt.Sprintf("attnrun run, inspect, export, plot or bench %s take it", path)
	}
	return "attnrun reads model configs (.yaml), ONNX files, .npy/.pb inputs and .npz/.safetensors state dicts"
}

// modelKind is what a command's model argument names.
type modelKind int

const (
	modelPreset modelKind = iota
	modelConfig
	modelONNX
)

// resolveModel tells what the model argument of a command is: an existing
// file by its content (a YAML config or an ONNX file), else a preset name.
// Any other file is refused, saying what it is and what takes it; a path
// (a slash or a .yaml/.onnx extension) that does not exist is an error
// naming it.
func resolveModel(target string) (modelKind, error) {
	s := sniffPath(target)
	switch s.kind {
	case kindONNX:
		return modelONNX, nil
	case kindYAML:
		if hasONNXExt(target) {
			return modelONNX, nil // the ONNX reader says what the text is
		}
		return modelConfig, nil
	case kindMissing:
		ext := strings.ToLower(filepath.Ext(target))
		if ext == ".yaml" || ext == ".yml" || ext == ".onnx" || strings.ContainsRune(target, os.PathSeparator) {
			return 0, fmt.Errorf("%s: no such file", target)
		}
		return modelPreset, nil
	case kindOther:
		return 0, fmt.Errorf("%s is %s, not a model (a YAML config, a preset or an ONNX file)", target, s.what)
	}
	return 0, usageError{fmt.Errorf("%s is %s, not a model (a YAML config, a preset or an ONNX file); %s", target, s.what, s.usage(target))}
}

// checkFileFlag refuses a file given to a flag that does not take its
// kind, saying what the file is and where it belongs. Missing files pass:
// the reader names them.
func checkFileFlag(flag, path string, accepted ...fileKind) error {
	s := sniffPath(path)
	if s.kind == kindMissing {
		return nil
	}
	for _, k := range accepted {
		if s.kind == k {
			return nil
		}
	}
	return usageError{fmt.Errorf("--%s %s: this is %s; %s", flag, path, s.what, s.usage(path))}
}

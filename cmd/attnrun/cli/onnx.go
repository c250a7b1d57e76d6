package cli

import (
	"path/filepath"
	"strings"

	"github.com/attnrun/attnrun/onnxio/exec"
)

// isONNX tells an ONNX file from a config or preset: by its content when
// the file exists (sniffPath), else by its extension.
func isONNX(target string) bool {
	switch sniffPath(target).kind {
	case kindONNX:
		return true
	case kindMissing, kindYAML:
		return hasONNXExt(target) // text named .onnx: the ONNX reader says what it is
	}
	return false
}

// hasONNXExt reports whether a file name ends in .onnx, as the files
// attnrun writes must.
func hasONNXExt(path string) bool {
	return strings.EqualFold(filepath.Ext(path), ".onnx")
}

func describeInfos(infos []exec.TensorInfo) string {
	parts := make([]string, len(infos))
	for i, info := range infos {
		parts[i] = info.String()
	}
	return strings.Join(parts, ", ")
}

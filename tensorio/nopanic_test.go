package tensorio

import (
	"bytes"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"gorgonia.org/tensor"
)

// TestNoPanicOnAnyArgument calls every exported function with nil, empty
// and absurd arguments: each must return an error, never panic.
func TestNoPanicOnAnyArgument(t *testing.T) {
	dir := t.TempDir()
	var nilReader *bytes.Reader
	var nilBuffer *bytes.Buffer
	x := pattern(tensor.Float32, 2)
	st := stFile("{}      ", nil)
	calls := map[string]func() error{
		"ReadNPY(nil)":                   func() error { _, err := ReadNPY(nil); return err },
		"ReadNPY(typed nil)":             func() error { _, err := ReadNPY(nilReader); return err },
		"ReadNPY(empty)":                 func() error { _, err := ReadNPY(bytes.NewReader(nil)); return err },
		"ReadNPYFile(\"\")":              func() error { _, err := ReadNPYFile(""); return err },
		"ReadNPYFile(dir)":               func() error { _, err := ReadNPYFile(dir); return err },
		"ReadNPZ(\"\")":                  func() error { _, _, err := ReadNPZ(""); return err },
		"ReadNPZFrom(nil)":               func() error { _, _, err := ReadNPZFrom(nil, 10); return err },
		"ReadNPZFrom(typed nil)":         func() error { _, _, err := ReadNPZFrom(nilReader, 10); return err },
		"ReadNPZFrom(negative size)":     func() error { _, _, err := ReadNPZFrom(bytes.NewReader(nil), -1); return err },
		"ReadNPZFrom(huge size)":         func() error { _, _, err := ReadNPZFrom(bytes.NewReader(nil), math.MaxInt64); return err },
		"ReadSafetensors(\"\")":          func() error { _, _, _, err := ReadSafetensors(""); return err },
		"ReadSafetensorsFrom(nil)":       func() error { _, _, _, err := ReadSafetensorsFrom(nil, 10); return err },
		"ReadSafetensorsFrom(typed nil)": func() error { _, _, _, err := ReadSafetensorsFrom(nilReader, 10); return err },
		"ReadSafetensorsFrom(min size)":  func() error { _, _, _, err := ReadSafetensorsFrom(bytes.NewReader(st), math.MinInt64); return err },
		"ReadSafetensorsFrom(huge size)": func() error { _, _, _, err := ReadSafetensorsFrom(bytes.NewReader(st), math.MaxInt64); return err },
		"ToFloat32(nil)":                 func() error { _, err := ToFloat32(nil); return err },
		"ToFloat32(zero Dense)":          func() error { _, err := ToFloat32(&tensor.Dense{}); return err },
		"WriteNPY(nil writer)":           func() error { return WriteNPY(nil, x) },
		"WriteNPY(typed nil writer)":     func() error { return WriteNPY(nilBuffer, x) },
		"WriteNPY(nil tensor)":           func() error { return WriteNPY(io.Discard, nil) },
		"WriteNPY(zero Dense)":           func() error { return WriteNPY(io.Discard, &tensor.Dense{}) },
		"WriteNPYFile(nil)":              func() error { return WriteNPYFile(filepath.Join(dir, "x.npy"), nil) },
		"WriteNPYFile(\"\")":             func() error { return WriteNPYFile("", x) },
		"WriteNPZ(mismatch)":             func() error { return WriteNPZ(filepath.Join(dir, "x.npz"), []string{"a"}, nil) },
		"WriteNPZTo(nil writer)":         func() error { return WriteNPZTo(nil, []string{"a"}, []*tensor.Dense{x}) },
		"WriteNPZTo(nil tensor)":         func() error { return WriteNPZTo(io.Discard, []string{"a"}, []*tensor.Dense{nil}) },
		"WriteSafetensors(nil tensor)": func() error {
			return WriteSafetensors(filepath.Join(dir, "x.st"), []string{"a"}, []*tensor.Dense{nil}, nil)
		},
		"WriteSafetensorsTo(nil writer)": func() error { return WriteSafetensorsTo(nil, []string{"a"}, []*tensor.Dense{x}, nil) },
		"WriteSafetensorsTo(empty name)": func() error { return WriteSafetensorsTo(io.Discard, []string{""}, []*tensor.Dense{x}, nil) },
		"WriteSafetensorsTo(zero Dense)": func() error { return WriteSafetensorsTo(io.Discard, []string{"a"}, []*tensor.Dense{{}}, nil) },
		"Limits{-1, -1}.ReadNPY(empty)": func() error {
			_, err := Limits{MaxTotalBytes: -1, MaxDims: -1}.ReadNPY(bytes.NewReader(nil))
			return err
		},
		"Limits{MaxMemory: -1}.ReadNPYFile": func() error { _, err := Limits{MaxMemory: -1}.ReadNPYFile(""); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			assert.NotPanics(t, func() { assert.Error(t, call()) })
		})
	}
}

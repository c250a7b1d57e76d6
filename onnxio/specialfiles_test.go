//go:build unix

package onnxio

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/attnrun/attnrun/internal/regularfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// returnsSoon fails the test if f blocks: opening a FIFO for reading waits
// for a writer, which here never comes.
func returnsSoon(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("blocked on a FIFO")
		return nil
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(path, 0o644))
}

func TestFIFOAsExternalDataIsRefused(t *testing.T) {
	dir := t.TempDir()
	data := externalModel(t, dir, "pipe.bin", map[string]string{"offset": "0"})
	mkfifo(t, filepath.Join(dir, "pipe.bin"))
	for _, lim := range []Limits{DefaultLimits, {ExternalSizesOnly: true}} {
		err := returnsSoon(t, func() error { _, err := DecodeModel(data, dir, lim); return err })
		require.ErrorIs(t, err, regularfile.ErrNotRegular)
		assert.Contains(t, err.Error(), `initializer "W" (FLOAT [2 2]): external data: `+filepath.Join(dir, "pipe.bin")+": is a named pipe (FIFO), not a regular file")
	}
}

func TestFIFOAsModelOrTensorFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	mkfifo(t, model)
	err := returnsSoon(t, func() error { _, err := ReadModel(model); return err })
	assert.ErrorIs(t, err, regularfile.ErrNotRegular)

	set := filepath.Join(dir, "test_data_set_0")
	require.NoError(t, os.Mkdir(set, 0o755))
	require.NoError(t, WriteTensorFile(filepath.Join(set, "input_0.pb"), floatTensor(t, "x", []int{1}, []float32{1})))
	mkfifo(t, filepath.Join(set, "output_0.pb"))
	err = returnsSoon(t, func() error { _, err := ReadDataSet(set); return err })
	assert.ErrorIs(t, err, regularfile.ErrNotRegular)
	assert.ErrorContains(t, err, filepath.Join(set, "output_0.pb")+": is a named pipe (FIFO)")
	err = returnsSoon(t, func() error { _, err := ReadTensorFile(filepath.Join(set, "output_0.pb")); return err })
	assert.ErrorIs(t, err, regularfile.ErrNotRegular)
}

package tensorio

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
)

func TestReadersGoThroughTheBudget(t *testing.T) {
	x := pattern(tensor.Float32, 4, 8) // 128 bytes decoded
	dir := t.TempDir()
	npyPath := filepath.Join(dir, "x.npy")
	require.NoError(t, WriteNPYFile(npyPath, x))
	npzPath := filepath.Join(dir, "x.npz")
	require.NoError(t, WriteNPZ(npzPath, []string{"a", "b"}, []*tensor.Dense{x, x}))
	stPath := filepath.Join(dir, "x.safetensors")
	require.NoError(t, WriteSafetensors(stPath, []string{"a", "b"}, []*tensor.Dense{x, x}, nil))

	for _, c := range []struct {
		name string
		need int64 // what the file asks of the budget
		read func(Limits) error
		want string
	}{
		{"npy file", 128, func(l Limits) error { _, err := l.ReadNPYFile(npyPath); return err },
			npyPath + ": float32 (4, 8) needs 128 B, over the memory budget of 127 B"},
		{"npy stream", 128, func(l Limits) error { _, err := l.ReadNPY(bytes.NewReader(npyBytes(t, x))); return err },
			"float32 (4, 8) needs 128 B, over the memory budget of 127 B"},
		// The members of an archive add up.
		{"npz", 256, func(l Limits) error { _, _, err := l.ReadNPZ(npzPath); return err },
			npzPath + `: member "b.npy": float32 (4, 8) needs 128 B, over the memory budget of 255 B (128 B already in use)`},
		{"safetensors", 256, func(l Limits) error { _, _, _, err := l.ReadSafetensors(stPath); return err },
			stPath + `: tensor "b": F32 (4, 8) needs 128 B, over the memory budget of 255 B (128 B already in use)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.read(Limits{MaxMemory: c.need - 1})
			require.ErrorIs(t, err, budget.ErrExceeded)
			assert.EqualError(t, err, c.want)
			require.NoError(t, c.read(Limits{MaxMemory: c.need}))

			// A shared budget counts what others hold, and gets back
			// what the call reserved when it returns.
			b := budget.New(c.need + 10)
			require.NoError(t, b.Reserve(11, "others"))
			assert.ErrorIs(t, c.read(Limits{Budget: b}), budget.ErrExceeded)
			b.Release(11)
			require.NoError(t, c.read(Limits{Budget: b}))
			assert.Zero(t, b.Used())
		})
	}
}

// TestMaxMemoryZeroIsTheDefaultBudget: a zero MaxMemory means
// budget.DefaultLimit, as in onnxio, never "no limit".
func TestMaxMemoryZeroIsTheDefaultBudget(t *testing.T) {
	// 2^30 float64 = 8 GiB: within MaxTotalBytes and MaxTensorBytes when that is raised, over
	// the default budget of 4 GiB.
	data := npyPreamble(formatNPYHeader("<f8", []int64{1 << 30}))
	stream := struct{ io.Reader }{bytes.NewReader(data)} // no Len: the size is unknown
	_, err := Limits{MaxTotalBytes: -1, MaxTensorBytes: -1}.ReadNPY(stream)
	require.ErrorIs(t, err, budget.ErrExceeded)
	assert.EqualError(t, err, "float64 (1073741824,) needs 8 GiB, over the memory budget of 4 GiB")
}

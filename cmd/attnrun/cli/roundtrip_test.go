package cli

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	attnrunlib "github.com/attnrun/attnrun"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/tensorio"
)

// TestPresetExportImport takes every preset through export and import: the
// imported file has the same initializers, bit for bit, and running it on
// attnrun's layers gives the preset's output (to float32 rounding: the
// rebuilt model may take another kernel path, e.g. batched).
func TestPresetExportImport(t *testing.T) {
	list, err := models.Presets()
	require.NoError(t, err)
	dir := t.TempDir()
	for _, p := range list {
		t.Run(p.Name, func(t *testing.T) {
			first := filepath.Join(dir, p.Name+".onnx")
			second := filepath.Join(dir, p.Name+".imported.onnx")
			status, _, stderr := attnrun("export", p.Name, "-o", first)
			require.Equal(t, 0, status, stderr)
			status, _, stderr = attnrun("import", first, "-o", second)
			require.Equal(t, 0, status, stderr)

			a, err := onnxio.ReadModel(first)
			require.NoError(t, err)
			b, err := onnxio.ReadModel(second)
			require.NoError(t, err)
			require.Equal(t, len(a.GetGraph().GetInitializer()), len(b.GetGraph().GetInitializer()))
			for i, init := range a.GetGraph().GetInitializer() {
				assert.True(t, proto.Equal(init, b.GetGraph().GetInitializer()[i]), "initializer %q", init.GetName())
			}

			input := filepath.Join("../../../models/presets", p.Name, "input.npy")
			want := filepath.Join(dir, p.Name+".want.npy")
			got := filepath.Join(dir, p.Name+".got.npy")
			status, _, stderr = attnrun("run", p.Name, "--input", input, "--attention=", "-o", want)
			require.Equal(t, 0, status, stderr)
			status, _, stderr = attnrun("run", second, "--input", input, "-o", got)
			require.Equal(t, 0, status, stderr)
			w, err := tensorio.ReadNPYFile(want)
			require.NoError(t, err)
			g, err := tensorio.ReadNPYFile(got)
			require.NoError(t, err)
			c, err := attnrunlib.Compare(g, w, 1e-5, 1e-6)
			require.NoError(t, err)
			assert.True(t, c.OK(), c.String())
		})
	}
}

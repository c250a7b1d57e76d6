package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/tensorio"
)

// TestBatchNamesNeverLeaveTheOutput: .npz keys become output file names,
// so a key like "../../x" used to write two folders above --output DIR.
// Such names are an error, before anything runs or is written.
func TestBatchNamesNeverLeaveTheOutput(t *testing.T) {
	for _, c := range []struct {
		key  string
		want string
	}{
		{"../../x", `input "../../x" cannot name an output file: the name contains a path separator`},
		{"..", `input ".." cannot name an output file: ".." is not a file name`},
		{".", `input "." cannot name an output file: "." is not a file name`},
		{"/tmp/abs", `input "/tmp/abs" cannot name an output file: the name contains a path separator`},
		{`..\x`, `the name contains a path separator`},
		{"a\x00b", `the name contains a NUL byte`},
	} {
		t.Run(c.key, func(t *testing.T) {
			root := t.TempDir()
			work := filepath.Join(root, "a", "b")
			out := filepath.Join(work, "out")
			require.NoError(t, os.MkdirAll(work, 0o755))
			in := filepath.Join(work, "in.npz")
			require.NoError(t, tensorio.WriteNPZ(in, []string{"ok", c.key}, []*tensor.Dense{randomInput(1, 2, 6, 3), randomInput(2, 2, 6, 3)}))

			for _, dest := range []string{out, filepath.Join(work, "out.npz")} {
				status, _, stderr := attnrun("run", "seed-mha-wrapper", "--input", in, "--output", dest)
				assert.Equal(t, 1, status, stderr)
				assert.Contains(t, stderr, c.want)
			}
			// Nothing was written anywhere, in or above the output.
			var files []string
			require.NoError(t, filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
				if err == nil && !info.IsDir() {
					files = append(files, path)
				}
				return err
			}))
			assert.Equal(t, []string{in}, files)
		})
	}

	// Printing needs no file names: the same archive prints.
	in := filepath.Join(t.TempDir(), "in.npz")
	require.NoError(t, tensorio.WriteNPZ(in, []string{"../../x"}, []*tensor.Dense{randomInput(1, 2, 6, 3)}))
	status, stdout, stderr := attnrun("run", "seed-mha-wrapper", "--input", in)
	assert.Equal(t, 0, status, stderr)
	assert.Contains(t, stdout, "../../x:")
}

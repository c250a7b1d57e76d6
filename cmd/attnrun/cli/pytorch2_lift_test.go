package cli

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every committed PyTorch 2.x export lifts without --partial: `attnrun
// import` lifts each node into layers, the config holds attention layers,
// and the lifted file passes check against PyTorch's outputs (by the
// float64 rule where the fixture has a float64 reference and PyTorch
// float32 strays). A fixture added to the manifest is covered at once.
func TestImportEveryPyTorch2Fixture(t *testing.T) {
	complete := regexp.MustCompile(`lifted (\d+) of (\d+) computing nodes into attnrun layers\n`)
	lifted := 0
	for _, f := range readPyTorch2Manifest(t) {
		if f.Status != "ok" || !f.Committed {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			dir := filepath.Join(pytorch2Fixtures, f.Name)
			out := filepath.Join(t.TempDir(), "lifted.onnx")
			status, stdout, stderr := attnrun("import", filepath.Join(dir, "model.onnx"), "-o", out)
			require.Equal(t, 0, status, stdout+stderr)
			counts := complete.FindStringSubmatch(stdout)
			require.NotNil(t, counts, stdout)
			assert.Equal(t, counts[2], counts[1], "a complete lift lifts every node")
			assert.Regexp(t, `type: attention\.`, stdout, "the lifted config has attention layers")
			assertChecks(t, out, dir)
			lifted++
		})
	}
	t.Logf("%d committed PyTorch 2.x fixtures lift and check", lifted)
	require.GreaterOrEqual(t, lifted, 90)
}

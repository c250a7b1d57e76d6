package cli

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/tensorio"
)

// TestRunIncrementalLiftedDecoder imports graphs with a KV cache
// (past_key_values in, present out) and runs each lifted file on a
// test-data set with a past of 3 tokens: whole, token by token
// (--incremental) and 3 tokens per step, each giving PyTorch's output and
// present caches within 1e-5 relative, 1e-6 absolute, as the graph on
// the executor does; check passes on both data sets (past 3 and 0). The
// lifted file keeps the graph's interface: its inputs and outputs, in
// order.
func TestRunIncrementalLiftedDecoder(t *testing.T) {
	for _, c := range []struct {
		fixture string
		outputs []string
	}{
		{"../../../onnxio/lift/testdata/kvcache_block_dynamic", []string{"y", "present.0.key", "present.0.value"}},
		// Cohere through the dynamo exporter at opset 23: two layers whose
		// rotary of interleaved pairs is written out of standard ops.
		{filepath.Join(pytorch2Fixtures, "cohere_sdpa_dynamo23"), []string{"logits", "present.0.key", "present.0.value", "present.1.key", "present.1.value"}},
	} {
		t.Run(filepath.Base(c.fixture), func(t *testing.T) {
			dir := t.TempDir()
			lifted := filepath.Join(dir, "lifted.onnx")
			status, _, stderr := attnrun("import", filepath.Join(c.fixture, "model.onnx"), "-o", lifted)
			require.Equal(t, 0, status, stderr)
			status, stdout, stderr := attnrun("check", lifted, "--data", c.fixture)
			require.Equal(t, 0, status, stderr+stdout)

			set := filepath.Join(c.fixture, "test_data_set_0")
			_, want, err := onnxio.ReadDataSetArrays(set)
			require.NoError(t, err)
			inputs, err := filepath.Glob(filepath.Join(set, "input_*.pb"))
			require.NoError(t, err)
			var args []string
			for _, in := range inputs {
				args = append(args, "--input", in)
			}
			for _, run := range [][]string{{lifted}, {lifted, "--incremental"}, {lifted, "--incremental=3"}, {filepath.Join(c.fixture, "model.onnx")}} {
				out := filepath.Join(dir, "out.npz")
				status, _, stderr := attnrun(append(append(append([]string{"run"}, run...), args...), "-o", out)...)
				require.Equal(t, 0, status, stderr)
				names, got, err := tensorio.ReadNPZ(out)
				require.NoError(t, err)
				require.Equal(t, c.outputs, names)
				for i, w := range want {
					wd, err := w.Dense()
					require.NoError(t, err)
					assertClose(t, wd, got[i], fmt.Sprintf("%v: %s", run, names[i]))
				}
			}
		})
	}
}

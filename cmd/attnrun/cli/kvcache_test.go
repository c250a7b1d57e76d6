package cli

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/tensorio"
)

// TestRunIncrementalLiftedDecoder imports a graph with a KV cache
// (past_key_values in, present out) and runs the lifted file on a
// test-data set with a past of 3 tokens: whole, token by token
// (--incremental) and 3 tokens per step, each giving PyTorch's output and
// present caches within 1e-5 relative, 1e-6 absolute, as the graph on
// the executor does; check passes on both data sets (past 3 and 0).
func TestRunIncrementalLiftedDecoder(t *testing.T) {
	fixture := "../../../onnxio/lift/testdata/kvcache_block_dynamic"
	dir := t.TempDir()
	lifted := filepath.Join(dir, "lifted.onnx")
	status, _, stderr := attnrun("import", filepath.Join(fixture, "model.onnx"), "-o", lifted)
	require.Equal(t, 0, status, stderr)
	status, stdout, stderr := attnrun("check", lifted, "--data", fixture)
	require.Equal(t, 0, status, stderr+stdout)

	set := filepath.Join(fixture, "test_data_set_0")
	_, want, err := onnxio.ReadDataSetArrays(set)
	require.NoError(t, err)
	inputs := []string{"--input", filepath.Join(set, "input_0.pb"), "--input", filepath.Join(set, "input_1.pb"), "--input", filepath.Join(set, "input_2.pb")}
	for _, run := range [][]string{{lifted}, {lifted, "--incremental"}, {lifted, "--incremental=3"}, {filepath.Join(fixture, "model.onnx")}} {
		out := filepath.Join(dir, "out.npz")
		args := append(append([]string{"run"}, run...), inputs...)
		status, _, stderr := attnrun(append(args, "-o", out)...)
		require.Equal(t, 0, status, stderr)
		names, got, err := tensorio.ReadNPZ(out)
		require.NoError(t, err)
		require.Equal(t, []string{"y", "present.0.key", "present.0.value"}, names)
		for i, w := range want {
			wd, err := w.Dense()
			require.NoError(t, err)
			assertClose(t, wd, got[i], fmt.Sprintf("%v: %s", run, names[i]))
		}
	}
}

// TestRunIncrementalLiftedHuggingFace runs Granite and OLMo-2, lifted from
// their committed PyTorch 2.x exports (testdata/pytorch2), on the data set
// that continues a 3-token past by 4 tokens: token by token and 3 tokens
// per step through the lifted layers' KV caches, each giving PyTorch's
// logits and present caches.
func TestRunIncrementalLiftedHuggingFace(t *testing.T) {
	for _, name := range []string{"granite_sdpa_dynamo18", "olmo2_sdpa_ts17"} {
		t.Run(name, func(t *testing.T) {
			fixture := filepath.Join("../../../testdata/pytorch2/fixtures", name)
			dir := t.TempDir()
			lifted := filepath.Join(dir, "lifted.onnx")
			status, _, stderr := attnrun("import", filepath.Join(fixture, "model.onnx"), "-o", lifted)
			require.Equal(t, 0, status, stderr)
			set := filepath.Join(fixture, "test_data_set_0")
			_, want, err := onnxio.ReadDataSetArrays(set)
			require.NoError(t, err)
			pbs, err := filepath.Glob(filepath.Join(set, "input_*.pb"))
			require.NoError(t, err)
			require.Len(t, pbs, 6) // input_ids, attention_mask, 2 layers' past keys and values
			var inputs []string
			for _, pb := range pbs {
				inputs = append(inputs, "--input", pb)
			}
			for _, steps := range []string{"--incremental", "--incremental=3"} {
				out := filepath.Join(dir, "out.npz")
				status, _, stderr := attnrun(append(append([]string{"run", lifted, steps}, inputs...), "-o", out)...)
				require.Equal(t, 0, status, stderr)
				names, got, err := tensorio.ReadNPZ(out)
				require.NoError(t, err)
				require.Equal(t, []string{"logits", "present.0.key", "present.0.value", "present.1.key", "present.1.value"}, names)
				for i, w := range want {
					wd, err := w.Dense()
					require.NoError(t, err)
					assertClose(t, wd, got[i], fmt.Sprintf("%s %s: %s", name, steps, names[i]))
				}
			}
		})
	}
}

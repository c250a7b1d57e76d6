package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	attnrunlib "github.com/attnrun/attnrun"
	"github.com/attnrun/attnrun/internal/torchrand"
	"github.com/attnrun/attnrun/tensorio"
)

// The tests of issue 16, "the first hour of a new user": each runs the
// command line (in-process with attnrun(), or the built binary where the
// process matters: its build information, its exit status in a shell, a
// closed pipe) on the mistakes and first steps a new user makes.

// firstHour holds PyTorch's numbers for these tests (testdata/firsthour/gen.py).
const firstHour = "testdata/firsthour"

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// attnrunBinary builds cmd/attnrun once per test run and returns its path.
func attnrunBinary(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: cannot build the attnrun binary")
	}
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "attnrun-bin")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "attnrun")
		out, err := exec.Command(goTool, "build", "-o", binaryPath, "..").CombinedOutput()
		if err != nil {
			binaryErr = &buildError{err, string(out)}
		}
	})
	require.NoError(t, binaryErr)
	return binaryPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + ": " + e.out }

// runBinary runs the built attnrun and returns its exit status and output.
func runBinary(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(attnrunBinary(t), args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	status := 0
	if ee, ok := err.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return status, out.String(), errOut.String()
}

// Item 1: attnrun version, misspelt commands, the README's command table.
func TestVersionAndUnknownCommands(t *testing.T) {
	status, out, stderr := runBinary(t, "version")
	require.Equal(t, 0, status, stderr)
	assert.Regexp(t, `^attnrun \S+\ngo      `+regexp.QuoteMeta(runtime.Version())+` `, out)
	var b strings.Builder
	printVersion(&b, &debug.BuildInfo{Main: debug.Module{Path: "github.com/attnrun/attnrun", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.time", Value: "2026-11-25T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}})
	assert.Equal(t, "attnrun v1.2.3\ngo      "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\ncommit  0123abc (2026-11-25T10:00:00Z) with local changes\n", b.String())

	status, _, stderr = runBinary(t, "rn", "seed-simple")
	assert.Equal(t, 2, status, "misuse exits 2")
	assert.Equal(t, "attnrun: unknown command \"rn\"; did you mean run? (attnrun --help lists the commands)\n", stderr)

	config := writeFile(t, t.TempDir(), "model.yaml", "name: m\nlayers:\n  - {name: l, type: nn.linear, d_in: 2, d_out: 2}\n")
	checkFailures(t, []failure{
		{"typo", []string{"inspeck", "seed-simple"}, 2, "did you mean inspect?"},
		{"nothing close", []string{"frobnicate"}, 2, `unknown command "frobnicate"; attnrun --help lists the commands`},
		{"a file as the command", []string{config}, 2, "is not a command but YAML text (a model config); attnrun run, inspect"},
	})
}

func TestReadmeListsEveryCommand(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	require.NoError(t, err)
	text := string(readme)
	assert.Contains(t, text, "go install github.com/attnrun/attnrun/cmd/attnrun@latest")
	table := text[strings.Index(text, "| command | what it does |"):]
	table = table[:strings.Index(table, "\n\n")]
	for _, c := range NewRoot(nil, nil).Commands() {
		assert.Contains(t, table, "| `attnrun "+c.Name(), "the README's command table lacks %s", c.Name())
	}
	assert.Contains(t, table, "| `attnrun completion", "cobra's completion command")
}

// Item 2: weights come back out of an import, and go back in from every
// file that holds them; a lifted config does not run on random weights.
func TestImportedWeightsRoundTrip(t *testing.T) {
	src := filepath.Join(onnxFixtures, "multihead_opset17_dynamic")
	dir := t.TempDir()
	lifted := filepath.Join(dir, "lifted.onnx")
	config := filepath.Join(dir, "lifted.yaml")
	npz := filepath.Join(dir, "w.npz")
	status, stdout, stderr := attnrun("import", filepath.Join(src, "model.onnx"), "-o", lifted, "--config-out", config, "--state-dict", npz)
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, stdout, "wrote "+npz)
	st := filepath.Join(dir, "w.safetensors")
	status, _, stderr = attnrun("export", lifted, "--state-dict", st)
	require.Equal(t, 0, status, stderr)

	x, err := attnrunlib.ReadTensor(filepath.Join(src, "test_data_set_0", "input_0.pb"))
	require.NoError(t, err)
	want, err := attnrunlib.ReadTensor(filepath.Join(src, "test_data_set_0", "output_0.pb")) // PyTorch's
	require.NoError(t, err)
	input := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(input, x))
	for _, weights := range []string{lifted, npz, st} {
		out := filepath.Join(dir, "y.npy")
		status, _, stderr := attnrun("run", config, "--weights", weights, "--input", input, "-o", out)
		require.Equal(t, 0, status, stderr)
		got, err := tensorio.ReadNPYFile(out)
		require.NoError(t, err)
		assertNear(t, want, got, filepath.Base(weights))
	}
	// The same weights, whichever file they come from.
	names, a, err := tensorio.ReadNPZ(npz)
	require.NoError(t, err)
	stNames, b, _, err := tensorio.ReadSafetensors(st)
	require.NoError(t, err)
	require.Len(t, names, 5)
	require.ElementsMatch(t, names, stNames)
	fromST := map[string]*tensor.Dense{}
	for i, name := range stNames {
		fromST[name] = b[i]
	}
	for i, name := range names {
		assert.Equal(t, a[i].Data(), fromST[name].Data(), name)
	}

	status, _, stderr = attnrun("run", config, "--input", input)
	assert.Equal(t, 2, status)
	assert.Contains(t, stderr, "was lifted from an ONNX file by attnrun import")
	assert.Contains(t, stderr, "give --weights "+lifted+" or --weights "+npz+", or --seed N")
	status, _, stderr = attnrun("run", config, "--input", input, "--seed", "3")
	assert.Equal(t, 0, status, "random weights, asked for: %s", stderr)

	// A file attnrun wrote imports from its metadata, whose description is
	// the user's: the comment import writes first tells the config apart.
	again := filepath.Join(dir, "again.yaml")
	status, _, stderr = attnrun("import", lifted, "-o", filepath.Join(dir, "again.onnx"), "--config-out", again)
	require.Equal(t, 0, status, stderr)
	status, _, stderr = attnrun("plot", again, "--input", input, "-o", filepath.Join(dir, "again.png"))
	assert.Equal(t, 2, status)
	assert.Contains(t, stderr, "give --weights "+filepath.Join(dir, "again.onnx")+", or --seed N")

	checkFailures(t, []failure{
		{"weights into an ONNX file", []string{"run", lifted, "--weights", npz, "--input", input}, 2, lifted + " carries its own weights"},
		{"foreign ONNX as weights", []string{"run", config, "--weights", filepath.Join(src, "model.onnx"), "--input", input}, 1,
			"was not written by attnrun (it has no attnrun config in its metadata): attnrun import"},
		{"export of a foreign ONNX", []string{"export", filepath.Join(src, "model.onnx"), "--state-dict", filepath.Join(dir, "x.npz")}, 1,
			"was not written by attnrun"},
		{"state dict format", []string{"import", filepath.Join(src, "model.onnx"), "-o", lifted, "--state-dict", filepath.Join(dir, "w.pt")}, 2,
			"--state-dict " + filepath.Join(dir, "w.pt") + ": unknown format (want .npz or .safetensors)"},
	})
}

// assertNear holds got to want at 1e-5 relative, 1e-6 absolute.
func assertNear(t *testing.T, want, got *tensor.Dense, what string) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), what)
	g := got.Data().([]float32)
	for i, w := range want.Data().([]float32) {
		require.InDelta(t, w, g[i], 1e-6+1e-5*float64(abs32(w)), "%s at %d", what, i)
	}
}

// Item 3: every file argument is recognized by its content.
func TestFilesRecognizedByContent(t *testing.T) {
	dir := t.TempDir()
	npy := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(npy, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float32, 6)))))
	npz := filepath.Join(dir, "w.npz")
	require.NoError(t, tensorio.WriteNPZ(npz, []string{"a"}, []*tensor.Dense{tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2}))}))
	st := filepath.Join(dir, "w.safetensors")
	require.NoError(t, tensorio.WriteSafetensors(st, []string{"a"}, []*tensor.Dense{tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2}))}, nil))
	config := writeFile(t, dir, "model.yaml", "name: m\nlayers:\n  - {name: l, type: nn.linear, d_in: 3, d_out: 2}\n")
	onnxFile := filepath.Join(onnxFixtures, "multihead_opset17_dynamic", "model.onnx")
	pb := filepath.Join(onnxFixtures, "multihead_opset17_dynamic", "test_data_set_0", "input_0.pb")

	// Named wrongly, still recognized.
	disguised := filepath.Join(dir, "model.bin")
	data, err := os.ReadFile(onnxFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(disguised, data, 0o644))
	for path, want := range map[string]fileKind{npy: kindNPY, npz: kindNPZ, st: kindSafetensors, config: kindYAML,
		onnxFile: kindONNX, pb: kindTensorProto, disguised: kindONNX, dir: kindDir, filepath.Join(dir, "none"): kindMissing} {
		assert.Equal(t, want, sniffPath(path).kind, path)
	}
	status, _, stderr := attnrun("inspect", disguised)
	assert.Equal(t, 0, status, stderr)

	checkFailures(t, []failure{
		{"input as the model", []string{"run", npy}, 2, npy + " is a NumPy .npy array, not a model (a YAML config, a preset or an ONNX file); it is an input: attnrun run MODEL --input " + npy},
		{"state dict inspected", []string{"inspect", npz}, 2, "is an .npz archive of arrays, not a model (a YAML config, a preset or an ONNX file); a state dict goes to --weights"},
		{"safetensors exported", []string{"export", st, "-o", filepath.Join(dir, "m.onnx")}, 2, "is a safetensors file, not a model"},
		{"config imported", []string{"import", config, "-o", filepath.Join(dir, "m.onnx")}, 2, "is YAML text (a model config), not an ONNX file: import lifts ONNX graphs"},
		{"pb as the model", []string{"bench", pb, "--shape", "1,2,3"}, 2, "is an ONNX TensorProto (.pb tensor), not a model"},
		{"input as weights", []string{"run", config, "--weights", npy, "--input", npy}, 2, "--weights " + npy + ": this is a NumPy .npy array; it is an input"},
		{"weights as input", []string{"run", config, "--input", st}, 2, "--input " + st + ": this is a safetensors file; it is a state dict: --weights"},
		{"config as input", []string{"run", config, "--input", config}, 2, "this is YAML text (a model config)"},
		{"missing model file", []string{"run", filepath.Join(dir, "nope.yaml")}, 1, "nope.yaml: no such file"},
	})
}

// Item 4: --attention on an ONNX file shows the weights the graph holds.
func TestAttentionOfONNXGraphs(t *testing.T) {
	dir := t.TempDir()
	mha := filepath.Join(onnxFixtures, "torch_mha_causal_self_opset17_dynamic")
	out := filepath.Join(dir, "w.npy")
	status, _, stderr := attnrun("run", filepath.Join(mha, "model.onnx"), "--input", filepath.Join(mha, "test_data_set_0", "input_0.pb"), "--attention", "mha", "-o", out)
	require.Equal(t, 0, status, stderr)
	got, err := tensorio.ReadNPYFile(out)
	require.NoError(t, err)
	want, err := tensorio.ReadNPYFile(filepath.Join(firstHour, "mha_weights.npy")) // PyTorch's, (B, H, T, T)
	require.NoError(t, err)
	require.NoError(t, got.Reshape(want.Shape()...)) // the graph's Softmax is (B·H, T, T)
	assertNear(t, want, got, "nn.MultiheadAttention's weights")

	// One Softmax per head of the wrapper, under the heads' module paths;
	// the lifted layer gives the same weights through its hook.
	wrapper := filepath.Join(onnxFixtures, "multihead_wrapper_opset17_dynamic")
	x := filepath.Join(wrapper, "test_data_set_0", "input_0.pb")
	status, _, stderr = attnrun("run", filepath.Join(wrapper, "model.onnx"), "--input", x, "--attention", "heads.1", "-o", out)
	require.Equal(t, 0, status, stderr)
	head1, err := tensorio.ReadNPYFile(out)
	require.NoError(t, err)
	lifted := filepath.Join(dir, "wrapper.onnx")
	status, _, stderr = attnrun("import", filepath.Join(wrapper, "model.onnx"), "-o", lifted)
	require.Equal(t, 0, status, stderr)
	layers := filepath.Join(dir, "layers.npy")
	status, _, stderr = attnrun("run", lifted, "--input", x, "--attention", "attn", "-o", layers)
	require.Equal(t, 0, status, stderr)
	both, err := tensorio.ReadNPYFile(layers) // (B, H, T, T)
	require.NoError(t, err)
	s := both.Shape()
	require.Equal(t, tensor.Shape{s[0], s[2], s[3]}, head1.Shape())
	for b := range s[0] {
		for i := range s[2] * s[3] {
			assert.InDelta(t, both.Data().([]float32)[(b*s[1]+1)*s[2]*s[3]+i], head1.Data().([]float32)[b*s[2]*s[3]+i], 1e-6)
		}
	}

	// The Attention op (opset 23) gives its qk_matmul_output after the
	// softmax; the layer it was exported from gives the same through its hook.
	config := writeFile(t, dir, "sdpa.yaml", "name: s\nlayers:\n  - {name: attn, type: attention.sdpa, d: 8, num_heads: 2, causal: true}\n")
	exported := filepath.Join(dir, "sdpa23.onnx")
	status, _, stderr = attnrun("export", config, "--seed", "1", "-o", exported, "--opset", "23")
	require.Equal(t, 0, status, stderr)
	graph, layer := filepath.Join(dir, "graph.npy"), filepath.Join(dir, "layer.npy")
	status, _, stderr = attnrun("run", exported, "--executor", "--random-input", "2,5,8", "--attention", "attn", "-o", graph)
	require.Equal(t, 0, status, stderr)
	status, _, stderr = attnrun("run", exported, "--random-input", "2,5,8", "--attention", "attn", "-o", layer)
	require.Equal(t, 0, status, stderr)
	g, err := tensorio.ReadNPYFile(graph)
	require.NoError(t, err)
	l, err := tensorio.ReadNPYFile(layer)
	require.NoError(t, err)
	assertNear(t, l, g, "Attention op vs attention.sdpa")

	linear := writeFile(t, dir, "linear.yaml", "name: lin\nlayers:\n  - {name: proj, type: nn.linear, d_in: 3, d_out: 2}\n")
	plain := filepath.Join(dir, "linear.onnx")
	status, _, stderr = attnrun("export", linear, "--seed", "1", "-o", plain)
	require.Equal(t, 0, status, stderr)
	checkFailures(t, []failure{
		{"unknown site", []string{"run", filepath.Join(mha, "model.onnx"), "--input", filepath.Join(mha, "test_data_set_0", "input_0.pb"), "--attention", "attn"}, 2,
			`--attention "attn" names none of them; ` + filepath.Join(mha, "model.onnx") + " has attention weights at /mha/Softmax (Softmax, scope mha)"},
		{"no attention", []string{"run", plain, "--executor", "--random-input", "1,2,3", "--attention", "proj"}, 2, "has no attention weights to show"},
	})
}

// Item 5: the mistakes of a first run.
func TestFirstRunMistakes(t *testing.T) {
	dir := t.TempDir()
	batch := filepath.Join(dir, "batch.npz")
	x, err := torchRandn("1,6,3", 0, newTorchGen(0))
	require.NoError(t, err)
	require.NoError(t, tensorio.WriteNPZ(batch, []string{"a", "b"}, []*tensor.Dense{x, x}))
	outs := filepath.Join(dir, "outs.npy")
	afile := writeFile(t, dir, "afile", "")
	checkFailures(t, []failure{
		{"one .npy for many outputs", []string{"run", "seed-masked-weights", "--input", batch, "-o", outs}, 2,
			"-o " + outs + ": a run over " + batch + " writes one output per input, not one .npy file: give -o " + filepath.Join(dir, "outs") + ".npz"},
		{"optional value after a space", []string{"run", "seed-mha-wrapper", "--incremental", "2"}, 2,
			"--incremental takes its value after '=': --incremental=2"},
		{"temp names", []string{"export", "seed-mha-wrapper", "-o", filepath.Join(afile, "m.onnx")}, 1, "write " + filepath.Join(afile, "m.onnx") + ": open: not a directory"},
	})
	_, err = os.Stat(outs)
	assert.True(t, os.IsNotExist(err), "no file or directory named outs.npy")
	_, _, stderr := attnrun("run", "seed-mha-wrapper", "-o", filepath.Join(afile, "y.npy"))
	assert.NotContains(t, stderr, ".tmp-")

	// check next to no data says where it looked and what it wants.
	lone := filepath.Join(dir, "lone")
	require.NoError(t, os.Mkdir(lone, 0o755))
	model := filepath.Join(lone, "mha.onnx")
	data, err := os.ReadFile(filepath.Join(onnxFixtures, "multihead_opset17_dynamic", "model.onnx"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(model, data, 0o644))
	status, _, stderr := attnrun("check", model)
	assert.Equal(t, 1, status)
	assert.Contains(t, stderr, model+": no test data next to it (in "+lone+") (no test_data_set_N folders, nor input_K.pb files)")
	assert.Contains(t, stderr, "give their folder with --data DIR")
}

func TestImportIntoAClosedPipe(t *testing.T) {
	dir := t.TempDir()
	out, config := filepath.Join(dir, "out.onnx"), filepath.Join(dir, "out.yaml")
	src := filepath.Join(onnxFixtures, "multihead_opset17_dynamic")
	script := `"$0" import "$1" -o "$2" --config-out "$3" | head -1`
	cmd := exec.Command("sh", "-c", script, attnrunBinary(t), filepath.Join(src, "model.onnx"), out, config)
	text, err := cmd.CombinedOutput()
	require.NoError(t, err, string(text))
	assert.Contains(t, string(text), "name: lifted", "the report's first line")
	status, stdout, stderr := attnrun("check", out, "--data", src)
	require.Equal(t, 0, status, stdout+stderr)
	_, err = os.Stat(config)
	assert.NoError(t, err)
}

func TestBenchSaysItsIterationCap(t *testing.T) {
	config := writeFile(t, t.TempDir(), "tiny.yaml", "name: tiny\nlayers:\n  - {name: l, type: nn.linear, d_in: 2, d_out: 2}\n")
	status, out, stderr := attnrun("bench", config, "--shape", "1,1,2", "--warmup", "0", "--time", "60s")
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, out, "runs     0 warm-up, 1000 timed (automatic: the most --iters 0 times, 1000, took less than --time 1m0s; --iters N times more)")
}

func TestRunORTNamesTheInstallScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	cmd := exec.Command(node, "../../../testdata/torch/run_ort.mjs", filepath.Join(onnxFixtures, "multihead_opset17_dynamic", "model.onnx"), "--ort", t.TempDir())
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "onnxruntime-node is not installed under")
	assert.Contains(t, string(out), "bash scripts/install-reference-tools.sh installs it")
	assert.NotContains(t, string(out), "    at ", "no stack trace")
}

// Item 7: inputs made by attnrun are the ones torch.randn draws.
func TestRandomInputsAreTorchRandn(t *testing.T) {
	dir := t.TempDir()
	x := filepath.Join(dir, "x.npy")
	status, out, stderr := attnrun("input", "2,3,4", "--seed", "7", "-o", x)
	require.Equal(t, 0, status, stderr)
	assert.Equal(t, "wrote "+x+": float32 (2, 3, 4), torch.randn after torch.manual_seed(7)\n", out)
	got, err := tensorio.ReadNPYFile(x)
	require.NoError(t, err)
	want, err := tensorio.ReadNPYFile(filepath.Join(firstHour, "randn_seed7.npy"))
	require.NoError(t, err)
	assert.Equal(t, want.Shape(), got.Shape())
	assert.Equal(t, want.Data(), got.Data(), "bit for bit")

	// Two --random-input flags draw in order from one generator, as two
	// torch.randn calls after torch.manual_seed(3) do.
	cross := writeFile(t, dir, "cross.yaml", "name: cross\ninputs: [x, memory]\nlayers:\n  - {name: attn, type: attention.sdpa, d: 8, num_heads: 2, inputs: [x, memory]}\n")
	random, given := filepath.Join(dir, "random.npy"), filepath.Join(dir, "given.npy")
	status, _, stderr = attnrun("run", cross, "--seed", "3", "--random-input", "1,5,8", "--random-input", "1,7,8", "-o", random)
	require.Equal(t, 0, status, stderr)
	status, _, stderr = attnrun("run", cross, "--seed", "3", "--input", filepath.Join(firstHour, "randn_seed3_a.npy"),
		"--input", filepath.Join(firstHour, "randn_seed3_b.npy"), "-o", given)
	require.Equal(t, 0, status, stderr)
	a, err := tensorio.ReadNPYFile(random)
	require.NoError(t, err)
	b, err := tensorio.ReadNPYFile(given)
	require.NoError(t, err)
	assert.Equal(t, b.Data(), a.Data())

	checkFailures(t, []failure{
		{"no input named", []string{"run", cross}, 2, "or --random-input B,T,D for random ones (attnrun input B,T,D -o x.npy writes one)"},
		{"too few", []string{"run", cross, "--random-input", "1,5,8"}, 2, `model "cross" takes 2 input(s) (x, memory), got 1 --random-input`},
		{"bad shape", []string{"input", "2,x", "-o", x}, 2, `shape "2,x": "x" is not a positive size`},
		{"huge", []string{"input", "100000,100000", "-o", x}, 2, "more than 67108864 values"},
		{"no output", []string{"input", "2,3"}, 2, "input needs the file to write: -o x.npy"},
	})
}

// Item 8: a layer type described, and completion.
func TestLayersDescribeOneType(t *testing.T) {
	status, out, stderr := attnrun("layers", "attention.multihead", "--set", "d_in=16", "--set", "d_out=16", "--set", "num_heads=4")
	require.Equal(t, 0, status, stderr)
	assert.Regexp(t, `d_in +int +0 +the width of the input tokens`, out)
	assert.Regexp(t, `out_bias +bool +true +`, out)
	line := "- {name: attn, type: attention.multihead, context_length: 8, d_in: 16, d_out: 16, num_heads: 4}"
	assert.Contains(t, out, "example (in a model config's layers:)\n  "+line+"\n")
	assert.Contains(t, out, "parameters of the example (1,040 values)\n")
	assert.Regexp(t, `attn\.W_query\.weight +\(16, 16\)\n`, out)
	assert.Regexp(t, `attn\.out_proj\.bias +\(16,\)\n`, out)
	// The example runs as printed.
	config := writeFile(t, t.TempDir(), "m.yaml", "name: m\nlayers:\n  "+line+"\n")
	status, _, stderr = attnrun("run", config, "--seed", "1", "--random-input", "1,3,16")
	require.Equal(t, 0, status, stderr)

	checkFailures(t, []failure{
		{"unknown type", []string{"layers", "attention.nope"}, 2, `unknown layer type "attention.nope"`},
		{"unknown field", []string{"layers", "nn.linear", "--set", "width=3"}, 2, `--set "width=3": nn.linear has no field "width"`},
		{"set without type", []string{"layers", "--set", "d=3"}, 2, "--set describes one layer type"},
	})
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		status, out, stderr := attnrun("completion", shell)
		require.Equal(t, 0, status, stderr)
		assert.Contains(t, out, "attnrun", shell)
	}
	_, out, _ := attnrun("__complete", "run", "seed-mha")
	assert.Contains(t, out, "seed-mha-wrapper\t")
	assert.Contains(t, out, "\n:0\n", "files complete too (ShellCompDirectiveDefault)")
	_, out, _ = attnrun("__complete", "plot", "seed-bishop-m")
	assert.Contains(t, out, "seed-bishop-multihead\t")
	_, out, _ = attnrun("__complete", "layers", "attention.s")
	assert.Contains(t, out, "attention.sdpa\n")
	assert.Contains(t, out, "\n:4\n", "no files for a layer type")
}

// Item 9: help leads with what the command does, how to call it and
// examples, and stays short.
func TestHelpLeadsWithUsageAndExamples(t *testing.T) {
	for _, c := range NewRoot(nil, nil).Commands() {
		status, out, _ := attnrun(c.Name(), "--help")
		require.Equal(t, 0, status, c.Name())
		usage, examples, flags := strings.Index(out, "\nUsage:\n"), strings.Index(out, "\nExamples:\n"), strings.Index(out, "\nFlags:\n")
		assert.True(t, strings.HasPrefix(out, c.Short+"\n"), c.Name())
		assert.True(t, usage > 0 && examples > usage && flags > examples, "%s: usage, then examples, then flags:\n%s", c.Name(), out)
	}
	_, out, _ := attnrun("run", "--help")
	assert.LessOrEqual(t, strings.Count(out, "\n"), 45)
}

// newTorchGen is torch's default generator after torch.manual_seed(seed).
func newTorchGen(seed uint64) *torchrand.Generator { return torchrand.New(seed) }

// Item 14: the README's quick start runs as written, and its first model
// computes what PyTorch computes.
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	require.NoError(t, err)
	text := string(readme)
	start := strings.Index(text, "\n## Quick start\n")
	require.GreaterOrEqual(t, start, 0)
	section := text[start+1:]
	section = section[:strings.Index(section, "\n## ")]
	golden, err := filepath.Abs(filepath.Join(firstHour, "quickstart_y.npy"))
	require.NoError(t, err)
	t.Chdir(t.TempDir())

	var commands [][]string
	for _, block := range strings.Split(section, "```")[1:] {
		lang, body, _ := strings.Cut(block, "\n")
		switch lang {
		case "yaml":
			require.NoError(t, os.WriteFile("model.yaml", []byte(body), 0o644))
		case "sh":
			for _, line := range strings.Split(body, "\n") {
				line, _, _ = strings.Cut(line, " #")
				if strings.HasPrefix(line, "attnrun ") {
					commands = append(commands, strings.Fields(line)[1:])
				}
			}
		}
	}
	require.GreaterOrEqual(t, len(commands), 10)
	for _, args := range commands {
		status, _, stderr := attnrun(args...)
		require.Equal(t, 0, status, "attnrun %s: %s", strings.Join(args, " "), stderr)
	}
	status, _, stderr := attnrun("run", "model.yaml", "--seed", "123", "--input", "x.npy", "-o", "y.npy")
	require.Equal(t, 0, status, stderr)
	got, err := tensorio.ReadNPYFile("y.npy")
	require.NoError(t, err)
	want, err := tensorio.ReadNPYFile(golden)
	require.NoError(t, err)
	assertNear(t, want, got, "the quick start's model against PyTorch's MultiHeadAttention, seed 123")
	_, err = os.Stat("attn.png")
	assert.NoError(t, err, "the plot was drawn")
}

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

// sleepyLayer ignores the run's context and sleeps: a stand-in for a
// kernel deep inside a huge product, which checks no deadline.
type sleepyLayer struct{}

func (*sleepyLayer) Validate() error          { return nil }
func (*sleepyLayer) Params() []registry.Param { return nil }
func (*sleepyLayer) Forward(_ *registry.Run, in []*tensor.Dense) (*tensor.Dense, error) {
	time.Sleep(10 * time.Second)
	return in[0], nil
}

func init() {
	registry.Register(registry.Info{ID: "clitest.sleepy", Summary: "sleeps 10 s, ignoring deadlines",
		New: func() registry.Layer { return &sleepyLayer{} }})
}

// TestLimitFlagsOnEveryModelCommand: every command that reads a model
// takes --max-memory and --timeout.
func TestLimitFlagsOnEveryModelCommand(t *testing.T) {
	root := NewRoot(nil, nil)
	for _, name := range []string{"run", "check", "inspect", "import", "export", "plot", "bench"} {
		cmd, _, err := root.Find([]string{name})
		require.NoError(t, err, name)
		mem := cmd.Flags().Lookup("max-memory")
		require.NotNil(t, mem, "%s has no --max-memory", name)
		assert.Equal(t, "4 GiB", mem.DefValue, name)
		timeout := cmd.Flags().Lookup("timeout")
		require.NotNil(t, timeout, "%s has no --timeout", name)
		assert.Equal(t, "0s", timeout.DefValue, name)
	}
}

// manyLinears writes a config of n nn.linear layers of (d, d).
func manyLinears(t *testing.T, dir string, n, d int) string {
	var b strings.Builder
	b.WriteString("name: deep\nlayers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: l%d, type: nn.linear, d_in: %d, d_out: %d}\n", i, d, d)
	}
	return writeFile(t, dir, "deep.yaml", b.String())
}

// TestMaxMemory: 64 parameters of 1 GiB used to crash even inspect. run
// refuses them with the budget named and the flag that sets it; inspect
// describes them without allocating any.
func TestMaxMemory(t *testing.T) {
	dir := t.TempDir()
	big := manyLinears(t, dir, 64, 16384)
	x := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(x, tensor.New(tensor.WithShape(1, 16384), tensor.WithBacking(make([]float32, 16384)))))

	status, _, stderr := attnrun("run", big, "--input", x, "--max-memory", "512MiB")
	assert.Equal(t, 1, status)
	assert.Contains(t, stderr, `layer "l0" (nn.linear): storage for 2 parameters (the largest: weight of shape (16384, 16384)) needs 1 GiB, over the memory budget of 512 MiB (--max-memory 512 MiB sets the budget)`)

	status, stdout, stderr := attnrun("inspect", big, "--shape", "4,16384")
	assert.Equal(t, 0, status, stderr)
	assert.Contains(t, stdout, "total: 17,180,917,760 parameters (17.2 G), 137,438,953,472 FLOPs (137.4 G) per forward pass")

	checkFailures(t, []failure{
		{"bad size", []string{"inspect", big, "--max-memory", "lots"}, 2, `invalid argument "lots" for "--max-memory" flag`},
		{"negative size", []string{"run", big, "--max-memory", "-1GiB"}, 2, `invalid argument "-1GiB" for "--max-memory" flag`},
		{"bad timeout", []string{"export", big, "--timeout", "soon", "-o", "x.onnx"}, 2, `invalid argument "soon" for "--timeout" flag`},
	})
}

// TestTimeout: a forward pass used to run as long as it took. Layers stop
// at the deadline; the error names it and the flag.
func TestTimeout(t *testing.T) {
	dir := t.TempDir()
	// 1000 small layers: minutes of work, each layer a few milliseconds,
	// so that the deadline is seen between layers even on a loaded machine.
	deep := manyLinears(t, dir, 1000, 64)
	x := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(x, tensor.New(tensor.WithShape(8192, 64), tensor.WithBacking(make([]float32, 8192*64)))))
	start := time.Now()
	status, _, stderr := attnrun("run", deep, "--input", x, "--timeout", "300ms")
	assert.Equal(t, 1, status)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, stderr, `stopped before layer "l`)
	assert.Contains(t, stderr, "context deadline exceeded: over the time limit of 300ms (--timeout sets it)")
}

// TestTimeoutAbandonsWork: work that never looks at the deadline is
// abandoned shortly after it.
func TestTimeoutAbandonsWork(t *testing.T) {
	dir := t.TempDir()
	config := writeFile(t, dir, "sleepy.yaml", "name: s\nlayers:\n  - {name: z, type: clitest.sleepy}\n")
	x := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(x, tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))))
	start := time.Now()
	status, _, stderr := attnrun("run", config, "--input", x, "--timeout", "200ms")
	assert.Equal(t, 1, status)
	assert.Less(t, time.Since(start), 200*time.Millisecond+deadlineGrace+time.Second)
	assert.Contains(t, stderr, "attnrun: abandoned the work: context deadline exceeded: over the time limit of 200ms (--timeout sets it)")
}

// TestSoftMemoryLimit: the Go runtime's soft limit follows --max-memory
// while a command runs, and is restored after it.
func TestSoftMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	var during int64
	l := defaultLimits()
	l.maxMemory = 1 << 30
	require.NoError(t, l.run(func() error {
		during = debug.SetMemoryLimit(-1)
		return nil
	}))
	assert.Equal(t, int64(1<<30+1<<29+256<<20), during)
	assert.Equal(t, before, debug.SetMemoryLimit(-1))
}

// TestConfigFIFO: a FIFO given as the config used to block forever.
func TestConfigFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("cannot make a FIFO: %v", err)
	}
	status, _, stderr := attnrun("inspect", fifo, "--timeout", "5s")
	assert.Equal(t, 1, status)
	assert.Contains(t, stderr, "not a regular file")
	_ = os.Remove(fifo)
}

// TestInspectReadsSizes: inspect used to load a model's external data
// whole (16 GiB from a sparse file) to print its sizes; it reads the sizes
// only.
func TestInspectReadsSizes(t *testing.T) {
	dir := t.TempDir()
	const n = 4 << 30 // float32 values: 16 GiB
	w := &onnxpb.TensorProto{Name: proto.String("w"), DataType: proto.Int32(int32(onnxio.Float)), Dims: []int64{n},
		DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
		ExternalData: []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String("weights.bin")},
			{Key: proto.String("length"), Value: proto.String(fmt.Sprint(4 * n))},
		}}
	m := &onnxpb.ModelProto{IrVersion: proto.Int64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("g"), Initializer: []*onnxpb.TensorProto{w},
			Node:   []*onnxpb.NodeProto{{OpType: proto.String("Identity"), Input: []string{"w"}, Output: []string{"y"}}},
			Output: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("y", onnxio.Float, nil)}}}
	data, err := proto.Marshal(m)
	require.NoError(t, err)
	path := filepath.Join(dir, "model.onnx")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	f, err := os.Create(filepath.Join(dir, "weights.bin"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(4*n))
	require.NoError(t, f.Close())

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	status, stdout, stderr := attnrun("inspect", path)
	runtime.ReadMemStats(&after)
	assert.Equal(t, 0, status, stderr)
	assert.Contains(t, stdout, "  w      FLOAT  [4294967296]  16384.0 MiB\n")
	assert.Contains(t, stdout, `cannot be lifted: `+path+`: initializer "w" (FLOAT [4294967296]): 4294967296 elements need 17179869184 bytes, over the limit of 2147483648 bytes per tensor`)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20))
}

// constantGraph writes a graph computing ConstantOfShape(dims) and then,
// matmuls times, its product with itself, with a test-data set of one
// expected output: a 100-byte file that asks for memory or time.
func constantGraph(t *testing.T, dir string, matmuls int, dims ...int64) string {
	t.Helper()
	one := &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxio.Float)), Dims: []int64{1}, FloatData: []float32{1}}
	shape := &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxio.Int64)), Dims: []int64{int64(len(dims))}, Int64Data: dims}
	tensorAttr := func(v *onnxpb.TensorProto) []*onnxpb.AttributeProto {
		return []*onnxpb.AttributeProto{{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: v}}
	}
	nodes := []*onnxpb.NodeProto{
		{OpType: proto.String("Constant"), Output: []string{"shape"}, Attribute: tensorAttr(shape)},
		{OpType: proto.String("ConstantOfShape"), Input: []string{"shape"}, Output: []string{"a"}, Attribute: tensorAttr(one)},
	}
	last := "a"
	for i := range matmuls {
		out := fmt.Sprintf("m%d", i)
		nodes = append(nodes, &onnxpb.NodeProto{OpType: proto.String("MatMul"), Input: []string{last, "a"}, Output: []string{out}})
		last = out
	}
	m := &onnxpb.ModelProto{IrVersion: proto.Int64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("g"), Node: nodes,
			Output: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo(last, onnxio.Float, nil)}}}
	data, err := proto.Marshal(m)
	require.NoError(t, err)
	path := filepath.Join(dir, "model.onnx")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	set := filepath.Join(dir, "test_data_set_0")
	require.NoError(t, os.MkdirAll(set, 0o755))
	out, err := proto.Marshal(one)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(set, "output_0.pb"), out, 0o644))
	return path
}

// TestCheckNamesTheLimits: check used to report a data set stopped by the
// deadline as a mismatch; it stops at the deadline, naming --timeout, and
// a set over the budget names --max-memory.
func TestCheckNamesTheLimits(t *testing.T) {
	slow := constantGraph(t, t.TempDir(), 64, 2048, 2048)
	start := time.Now()
	status, _, stderr := attnrun("check", slow, "--timeout", "500ms")
	assert.Equal(t, 1, status)
	assert.Less(t, time.Since(start), 500*time.Millisecond+deadlineGrace+time.Second)
	assert.Contains(t, stderr, "context deadline exceeded: over the time limit of 500ms (--timeout sets it)")
	assert.NotContains(t, stderr, "out of tolerance")

	big := constantGraph(t, t.TempDir(), 0, 65536, 65536)
	status, stdout, _ := attnrun("check", big, "--max-memory", "1GiB")
	assert.Equal(t, 1, status)
	assert.Contains(t, stdout, `node #1 (ConstantOfShape): float32 (65536, 65536) needs 16 GiB, over the memory budget of 1 GiB (--max-memory 1 GiB sets the budget)`)
}

// An input file is read within the budget too, whichever command reads it
// and whatever its format (the .npy readers used to take 4 GiB whatever
// --max-memory said).
func TestMaxMemoryInputs(t *testing.T) {
	dir := t.TempDir()
	model := manyLinears(t, dir, 1, 16)
	x := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(x, tensor.New(tensor.WithShape(1024, 16), tensor.WithBacking(make([]float32, 1024*16)))))
	const refused = "needs 64 KiB, over the memory budget of 32 KiB (--max-memory 32 KiB sets the budget)"
	for _, args := range [][]string{
		{"run", model, "--seed", "1", "--input", x},
		{"run", model, "--seed", "1", "--input", dir},
		{"plot", model, "--seed", "1", "--input", x, "-o", filepath.Join(dir, "p.png")},
	} {
		status, _, stderr := attnrun(append(args, "--max-memory", "32KiB")...)
		assert.Equal(t, 1, status, args)
		assert.Contains(t, stderr, refused, args)
		status, _, stderr = attnrun(append(args, "--max-memory", "1MiB")...)
		if args[0] == "run" {
			assert.Equal(t, 0, status, "%v: %s", args, stderr)
		}
	}
}

package exec

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// unplanned returns a copy of g that runs node by node, never planning.
func unplanned(g *Graph) *Graph {
	u := *g
	u.plans = nil
	return &u
}

// requireSameOutputs checks that two runs gave the same bits.
func requireSameOutputs(t *testing.T, want, got map[string]*array.Array, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for name, w := range want {
		g := got[name]
		require.NotNil(t, g, "%s: output %q", what, name)
		require.Equal(t, w.DType, g.DType, "%s: output %q", what, name)
		require.Equal(t, w.Shape, g.Shape, "%s: output %q", what, name)
		require.Equal(t, w.Data, g.Data, "%s: output %q", what, name)
	}
}

// TestPlannedRunsGiveTheSameBits runs every committed PyTorch export
// several times on its test data: the first run notes the signature,
// the second records a plan, the third follows it (skipping the shape arithmetic, viewing instead of
// reshaping, taking buffers from the arena), and every run must give the
// bits of a run node by node (which the fixtures' own test compares with
// PyTorch). Outputs of one run must not change when the next one runs:
// the caller owns them.
func TestPlannedRunsGiveTheSameBits(t *testing.T) {
	models, _ := filepath.Glob(filepath.Join(pytorchFixtures, "*", "model.onnx"))
	if len(models) == 0 {
		t.Skipf("no PyTorch fixtures under %s", pytorchFixtures)
	}
	for _, path := range models {
		dir := filepath.Dir(path)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m, err := onnxio.ReadModel(path)
			require.NoError(t, err)
			g, err := New(m)
			require.NoError(t, err)
			inputs, _, err := onnxio.ReadDataSetArrays(filepath.Join(dir, "test_data_set_0"))
			require.NoError(t, err)
			feeds := map[string]*array.Array{}
			for i, info := range g.Inputs() {
				feeds[info.Name] = inputs[i]
			}
			want, err := unplanned(g).RunArrays(context.Background(), feeds)
			require.NoError(t, err)
			var runs []map[string]*array.Array
			for range 3 {
				got, err := g.RunArrays(context.Background(), feeds)
				require.NoError(t, err)
				runs = append(runs, got)
			}
			for i, got := range runs {
				requireSameOutputs(t, want, got, fmt.Sprintf("run %d", i+1))
			}
			require.Len(t, g.plans.list, 1, "one signature, one plan")
		})
	}
}

// randomFeeds makes standard-normal float32 inputs for the graph's inputs
// with every symbolic dimension set from sizes.
func randomFeeds(t *testing.T, g *Graph, rng *rand.Rand, sizes map[string]int) map[string]*array.Array {
	t.Helper()
	feeds := map[string]*array.Array{}
	for _, info := range g.Inputs() {
		require.Equal(t, Float32, info.DType, "input %s", info)
		shape := make([]int, len(info.Shape))
		n := 1
		for i, d := range info.Shape {
			if d.Known {
				shape[i] = int(d.Value)
			} else {
				shape[i] = sizes[d.Param]
				require.NotZero(t, shape[i], "no size for %q", d.Param)
			}
			n *= shape[i]
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(rng.NormFloat64())
		}
		feeds[info.Name] = &array.Array{DType: array.Float32, Shape: shape, Data: data}
	}
	return feeds
}

// TestPlansPerSignature alternates input shapes, and runs the graph from
// several goroutines at once: each signature gets its plan, each run its
// own arena, and every result is the node-by-node run's.
func TestPlansPerSignature(t *testing.T) {
	for _, name := range []string{"torch_mha_causal_self_opset17_dynamic", "multihead_opset17_dynamic", "causal_attention_opset17_dynamic"} {
		t.Run(name, func(t *testing.T) {
			m, err := onnxio.ReadModel(filepath.Join(pytorchFixtures, name, "model.onnx"))
			require.NoError(t, err)
			g, err := New(m)
			require.NoError(t, err)
			params := map[string]bool{}
			for _, info := range g.Inputs() {
				for _, d := range info.Shape {
					if !d.Known {
						params[d.Param] = true
					}
				}
			}
			rng := rand.New(rand.NewPCG(15, 7))
			var cases []map[string]*array.Array
			var wants []map[string]*array.Array
			for _, size := range []int{3, 1, 5} {
				sizes := map[string]int{}
				for p := range params {
					sizes[p] = size + len(sizes)
				}
				feeds := randomFeeds(t, g, rng, sizes)
				want, err := unplanned(g).RunArrays(context.Background(), feeds)
				require.NoError(t, err)
				cases, wants = append(cases, feeds), append(wants, want)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 12 {
						c := (i + w) % len(cases)
						got, err := g.RunArrays(context.Background(), cases[c])
						if err != nil {
							errs <- err
							return
						}
						for name, want := range wants[c] {
							if !equalData(want.Data, got[name].Data) {
								errs <- fmt.Errorf("goroutine %d, run %d, case %d: output %q differs from the node-by-node run", w, i, c, name)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			require.Len(t, g.plans.list, len(cases))
		})
	}
}

// equalData compares two float32 data slices bit for bit.
func equalData(a, b any) bool {
	x, ok1 := a.([]float32)
	y, ok2 := b.([]float32)
	if !ok1 || !ok2 || len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] && !(x[i] != x[i] && y[i] != y[i]) {
			return false
		}
	}
	return true
}

// TestPlanSetAsideWhenAShapeDependsOnValues runs a graph whose
// intermediate shape depends on the input's values (NonZero) with inputs
// of one shape: the plan recorded on the second run must not be trusted
// for a Shape of that intermediate, which is checked, found different,
// and the run done node by node.
func TestPlanSetAsideWhenAShapeDependsOnValues(t *testing.T) {
	m := graphSpec{
		nodes: []*onnxpb.NodeProto{
			nodeP("nz", "NonZero", []string{"x"}, []string{"idx"}),
			nodeP("shape", "Shape", []string{"idx"}, []string{"s"}),
			nodeP("last", "Gather", []string{"s", "one"}, []string{"n"}),
		},
		inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 4)},
		outputs: []*onnxpb.ValueInfoProto{info("n", onnxio.Int64)},
		inits:   []*onnxpb.TensorProto{initializer(t, "one", dense([]int{}, int64(1)))},
	}.model()
	g, err := New(m)
	require.NoError(t, err)
	for _, c := range []struct {
		x    []float32
		want int64
	}{{[]float32{1, 0, 0, 0}, 1}, {[]float32{1, 0, 0, 0}, 1}, {[]float32{1, 2, 0, 3}, 3}, {[]float32{0, 0, 5, 0}, 1}, {[]float32{1, 1, 1, 1}, 4}} {
		out, err := g.Run(map[string]*tensor.Dense{"x": dense([]int{4}, c.x...)})
		require.NoError(t, err)
		require.Equal(t, c.want, out["n"].Data(), "x = %v", c.x)
	}
	require.True(t, g.plans.list[0].retired)
}

// TestPlannedRunAllocations counts the heap allocations of a planned run
// of the seeds' split-heads multi-head attention (causal, as PyTorch
// exported it) at B=1, T=8 (its longest) through Run: the
// shape arithmetic is skipped, reshapes are views, intermediates live in
// the arena, so what is left is the caller's result and the few objects
// of the API around it. The bytes are the output and some hundreds.
func TestPlannedRunAllocations(t *testing.T) {
	m, err := onnxio.ReadModel(filepath.Join(pytorchFixtures, "multihead_opset17_dynamic", "model.onnx"))
	require.NoError(t, err)
	g, err := New(m)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(15, 8))
	feeds := map[string]*tensor.Dense{}
	outBytes := 0
	for _, info := range g.Inputs() {
		shape := []int{1, 8, int(info.Shape[2].Value)}
		data := make([]float32, numel(shape))
		for i := range data {
			data[i] = float32(rng.NormFloat64())
		}
		feeds[info.Name] = dense(shape, data...)
		outBytes += 4 * len(data)
	}
	run := func() {
		if _, err := g.Run(feeds); err != nil {
			t.Fatal(err)
		}
	}
	run()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	allocs := testing.AllocsPerRun(50, run)
	runtime.ReadMemStats(&after)
	bytes := float64(after.TotalAlloc-before.TotalAlloc) / 51
	t.Logf("%.0f allocations, %.0f bytes per run (output %d bytes)", allocs, bytes, outBytes)
	require.LessOrEqual(t, allocs, 20.0)
	require.LessOrEqual(t, bytes, float64(outBytes)+8<<10)
}

// TestPlannedRunsOnNodeTests runs ONNX's node tests (every op, in
// ../shared/conformance) three times each on one graph: the second run
// records a plan and the third follows it, so every op and every
// structure the executor accepts (subgraphs, sequences of Shape and
// Reshape, data-dependent shapes, empty tensors, narrow types) passes
// through a planned run, which must give the node-by-node run's outputs.
// Graphs with random ops are left out: their runs differ anyway.
func TestPlannedRunsOnNodeTests(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(sharedNodeTests, "test_*"))
	if len(dirs) == 0 {
		t.Skipf("ONNX node tests are not under %s (../shared/conformance is absent)", sharedNodeTests)
	}
	planned := 0
	for _, dir := range dirs {
		m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
		if err != nil || hasRandomOp(m) {
			continue
		}
		g, err := New(m)
		if err != nil {
			continue
		}
		ds, err := onnxio.ReadDataSet(filepath.Join(dir, "test_data_set_0"))
		if err != nil || len(ds.Inputs) != len(g.inputs) {
			continue
		}
		feeds := map[string]*array.Array{}
		ok := true
		for i, tp := range ds.Inputs {
			v, err := tensorValue(tp)
			if err != nil {
				ok = false
				break
			}
			feeds[g.inputs[i].Name] = v.toArray()
		}
		if !ok {
			continue
		}
		want, err := unplanned(g).RunArrays(context.Background(), feeds)
		if err != nil {
			continue // a failing case is the conformance test's business
		}
		for run := range 3 {
			got, err := g.RunArrays(context.Background(), feeds)
			if err != nil {
				t.Errorf("%s: run %d: %v", filepath.Base(dir), run+1, err)
				break
			}
			if msg := sameArrays(want, got); msg != "" {
				t.Errorf("%s: run %d: %s", filepath.Base(dir), run+1, msg)
				break
			}
		}
		planned++
	}
	t.Logf("%d node tests ran planned", planned)
}

// hasRandomOp reports whether a model's graph draws random numbers.
func hasRandomOp(m *onnxpb.ModelProto) bool {
	for _, n := range m.GetGraph().GetNode() {
		switch n.GetOpType() {
		case "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial", "Dropout":
			return true
		}
	}
	return false
}

// sameArrays describes how got differs from want, or returns "" when the
// outputs are the same (NaN matching NaN).
func sameArrays(want, got map[string]*array.Array) string {
	for name, w := range want {
		g := got[name]
		switch {
		case g == nil:
			return fmt.Sprintf("output %q missing", name)
		case w.DType != g.DType || !slices.Equal(w.Shape, g.Shape):
			return fmt.Sprintf("output %q: %s %v, want %s %v", name, g.DType, g.Shape, w.DType, w.Shape)
		}
		wd, gd := reflect.ValueOf(w.Data), reflect.ValueOf(g.Data)
		for i := range wd.Len() {
			a, b := wd.Index(i).Interface(), gd.Index(i).Interface()
			if a != b && !(isNaN(a) && isNaN(b)) {
				return fmt.Sprintf("output %q: element %d is %v, want %v", name, i, b, a)
			}
		}
	}
	return ""
}

func isNaN(x any) bool {
	switch v := x.(type) {
	case float32:
		return v != v
	case float64:
		return v != v
	}
	return false
}

// TestPlanKeepsItsOwnCopies writes into the outputs of a graph whose
// outputs are fixed for the signature (a shape, a constant's slice): the
// plan recorded on that run must not share their memory, or the next
// run would return what the caller wrote.
func TestPlanKeepsItsOwnCopies(t *testing.T) {
	m := graphSpec{
		nodes: []*onnxpb.NodeProto{
			nodeP("shape", "Shape", []string{"x"}, []string{"s"}),
			nodeP("neg", "Neg", []string{"c"}, []string{"n"}),
		},
		inputs:  []*onnxpb.ValueInfoProto{info("x", onnxio.Float, 2, 3)},
		outputs: []*onnxpb.ValueInfoProto{info("s", onnxio.Int64, 2), info("n", onnxio.Float, 2)},
		inits:   []*onnxpb.TensorProto{initializer(t, "c", dense([]int{2}, float32(1), 2))},
	}.model()
	g, err := New(m)
	require.NoError(t, err)
	x := dense([]int{2, 3}, make([]float32, 6)...)
	for run := range 3 {
		out, err := g.Run(map[string]*tensor.Dense{"x": x})
		require.NoError(t, err)
		require.Equal(t, []int64{2, 3}, out["s"].Data(), "run %d", run)
		require.Equal(t, []float32{-1, -2}, out["n"].Data(), "run %d", run)
		copy(out["s"].Data().([]int64), []int64{7, 7})
		copy(out["n"].Data().([]float32), []float32{7, 7})
	}
}

// TestGrowingSignaturesRecordNoPlan runs the seeds' multi-head attention
// as a decoder grows its input, one token longer each run: no signature
// comes back, so no run records a plan (a recording would cost each step
// and never be followed). A signature run a second time gets its plan,
// which the third run follows with the node-by-node run's bits.
func TestGrowingSignaturesRecordNoPlan(t *testing.T) {
	m, err := onnxio.ReadModel(filepath.Join(pytorchFixtures, "multihead_opset17_dynamic", "model.onnx"))
	require.NoError(t, err)
	g, err := New(m)
	require.NoError(t, err)
	info := g.Inputs()[0]
	feeds := func(tokens int) map[string]*tensor.Dense {
		shape := []int{1, tokens, int(info.Shape[2].Value)}
		data := make([]float32, numel(shape))
		for i := range data {
			data[i] = float32(i%13)/13 - 0.5
		}
		return map[string]*tensor.Dense{info.Name: dense(shape, data...)}
	}
	for tokens := 1; tokens <= 8; tokens++ {
		_, err := g.Run(feeds(tokens))
		require.NoError(t, err)
		require.Empty(t, g.plans.list, "after %d tokens", tokens)
	}
	want, err := unplanned(g).Run(feeds(3))
	require.NoError(t, err)
	for run := 1; run <= 2; run++ { // the second run of 3 tokens records, the third follows
		got, err := g.Run(feeds(3))
		require.NoError(t, err)
		require.Len(t, g.plans.list, 1, "run %d", run)
		for name, w := range want {
			require.Equal(t, w.Data(), got[name].Data(), "%s, run %d", name, run)
		}
	}
}

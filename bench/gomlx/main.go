// Command gomlx-bench times GoMLX on an ONNX model: the peer a Go user would
// try instead of attnrun. It imports the file with onnx-gomlx, runs it on
// GoMLX's pure-Go backend ("simplego", no C library), and times it on the
// inputs of an ONNX test-data set that testdata/bench_models/models_bench.py
// wrote, checking the first output against PyTorch's there.
//
//	go run . -threads 2 -time 2s ~/.cache/attnrun/bench/minilm/b1_t32
//
// SHAPE_DIR is OUT/<model>/<shape>; the model is SHAPE_DIR/../model.onnx and
// the data set SHAPE_DIR/test_data_set_0 (input_K.pb feeds the graph's K-th
// input, output_0.pb is PyTorch's first output). It prints one line of
// key=value pairs, as models_bench.py does: max_abs_diff, median_ms,
// p10_ms, min_ms and runs. The first run compiles the graph for the shape
// and is checked; -warmup more runs follow untimed, then the timed ones
// until -time has passed and at least -min-runs were timed.
//
// This is a module of its own so that attnrun's module does not depend on
// GoMLX; its versions are pinned in go.mod.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/onnx-gomlx/onnx"
	"google.golang.org/protobuf/proto"
)

func main() {
	threads := flag.Int("threads", 2, "GOMAXPROCS and the backend's parallelism")
	budget := flag.Duration("time", 2*time.Second, "how long to time (at least 3 runs)")
	warmup := flag.Int("warmup", 2, "untimed runs after the checked first one (which compiles)")
	minRuns := flag.Int("min-runs", 3, "timed runs at least, however long they take")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gomlx-bench [-threads N] [-time D] [-warmup N] [-min-runs N] SHAPE_DIR")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *threads, *warmup, max(*minRuns, 1), *budget); err != nil {
		fmt.Fprintln(os.Stderr, "gomlx-bench:", err)
		os.Exit(1)
	}
}

func run(shapeDir string, threads, warmup, minRuns int, budget time.Duration) (err error) {
	// GoMLX reports many errors by panicking (its graph building API has no
	// error results); they end the benchmark as errors.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	runtime.GOMAXPROCS(threads)
	path := filepath.Join(shapeDir, "..", "model.onnx")
	model, err := onnx.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	markEmptyConstants(model)
	backend, err := simplego.New(fmt.Sprintf("parallelism=%d", threads))
	if err != nil {
		return err
	}
	ctx := context.New()
	if err := model.VariablesToContext(ctx); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	names, _ := model.Inputs()
	outputs, _ := model.Outputs()
	exec, err := context.NewExec(backend, ctx.Reuse(), func(ctx *context.Context, inputs []*graph.Node) []*graph.Node {
		feeds := make(map[string]*graph.Node, len(names))
		for k, name := range names {
			feeds[name] = inputs[k]
		}
		return model.CallGraph(ctx, inputs[0].Graph(), feeds, outputs[0])
	})
	if err != nil {
		return err
	}
	defer exec.Finalize()

	set := filepath.Join(shapeDir, "test_data_set_0")
	inputs := make([]any, len(names))
	for k := range names {
		if inputs[k], err = readTensor(model, filepath.Join(set, fmt.Sprintf("input_%d.pb", k))); err != nil {
			return err
		}
	}
	want, err := readTensor(model, filepath.Join(set, "output_0.pb"))
	if err != nil {
		return err
	}
	forward := func() (*tensors.Tensor, error) {
		out, err := exec.Exec(inputs...)
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}

	got, err := forward()
	if err != nil {
		return err
	}
	diff, err := maxAbsDiff(got, want)
	if err != nil {
		return fmt.Errorf("output %s: %w", outputs[0], err)
	}
	for range warmup {
		if _, err := forward(); err != nil {
			return err
		}
	}
	var times []time.Duration
	start := time.Now()
	for len(times) < minRuns || time.Since(start) < budget {
		t0 := time.Now()
		out, err := forward()
		if err != nil {
			return err
		}
		times = append(times, time.Since(t0))
		out.FinalizeAll()
	}
	slices.Sort(times)
	fmt.Printf("gomlx=v0.26.0 onnx_gomlx=v0.3.4 backend=simplego threads=%d max_abs_diff=%.3g median_ms=%.4f p10_ms=%.4f min_ms=%.4f runs=%d\n",
		threads, diff, quantileMS(times, 0.5), quantileMS(times, 0.1), quantileMS(times, 0), len(times))
	return nil
}

// markEmptyConstants works around onnx-gomlx v0.3.4 refusing a tensor of
// zero elements ("tensor "" shaped (Int64)[0] has no supported format of
// data in the ONNX model!?"): it looks for the data in raw_data only when
// the field is non-nil, and the protobuf decoder leaves an empty raw_data
// nil. The file is unchanged; this sets the decoded field to an empty,
// non-nil slice, which is what the file says. PyTorch's TorchScript export
// of BertModel has one such Constant (the empty shape fed to
// ConstantOfShape to make a scalar).
func markEmptyConstants(model *onnx.Model) {
	for _, n := range model.Proto.Graph.Node {
		for _, a := range n.Attribute {
			if t := a.T; t != nil && t.RawData == nil && slices.Contains(t.Dims, 0) {
				t.RawData = []byte{}
			}
		}
	}
}

// readTensor reads a serialized TensorProto (raw_data, as onnx's
// numpy_helper writes it) of int64 or float32 into a GoMLX tensor.
// onnx-gomlx keeps its ONNX messages in an internal package, so the message
// is decoded into a new value of the type of the model's first initializer.
func readTensor(model *onnx.Model, path string) (*tensors.Tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	like := model.Proto.Graph.Initializer[0]
	t := like.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tp := t.(interface {
		GetDims() []int64
		GetRawData() []byte
	})
	dtype := t.ProtoReflect().Get(t.ProtoReflect().Descriptor().Fields().ByName("data_type")).Int()
	dims := make([]int, len(tp.GetDims()))
	for i, d := range tp.GetDims() {
		dims[i] = int(d)
	}
	raw := tp.GetRawData()
	switch dtype {
	case 7: // INT64
		v := make([]int64, len(raw)/8)
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
		}
		return tensors.FromFlatDataAndDimensions(v, dims...), nil
	case 1: // FLOAT
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return tensors.FromFlatDataAndDimensions(v, dims...), nil
	}
	return nil, fmt.Errorf("%s: element type %d, want int64 (7) or float32 (1) in raw_data", path, dtype)
}

// maxAbsDiff is the largest |got - want| of two float32 tensors of one shape.
func maxAbsDiff(got, want *tensors.Tensor) (float64, error) {
	if !slices.Equal(got.Shape().Dimensions, want.Shape().Dimensions) {
		return 0, fmt.Errorf("shape %v, PyTorch's is %v", got.Shape(), want.Shape())
	}
	g, err := tensors.CopyFlatData[float32](got)
	if err != nil {
		return 0, err
	}
	w, err := tensors.CopyFlatData[float32](want)
	if err != nil {
		return 0, err
	}
	worst := 0.0
	for i := range g {
		d := math.Abs(float64(g[i]) - float64(w[i]))
		if math.IsNaN(d) {
			return 0, errors.New("NaN where PyTorch has a number")
		}
		worst = max(worst, d)
	}
	return worst, nil
}

// quantileMS interpolates linearly between the closest ranks (numpy's
// default).
func quantileMS(sorted []time.Duration, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	v := float64(sorted[i])
	if i+1 < len(sorted) {
		v += (pos - float64(i)) * float64(sorted[i+1]-sorted[i])
	}
	return v / 1e6
}

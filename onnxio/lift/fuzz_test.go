package lift_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// The lifter's fuzz targets. Each input may be refused, but nothing may
// panic, and no error may be an "internal error" (a recovered panic) or a
// layer's "panic in Forward": a stranger's file gets a proper error. Sizes
// are kept small (fuzzLimits, fuzzBudget), so that what the fuzzer finds is
// a missed check, not a slow run.
//
//	go test ./onnxio/lift -run '^$' -fuzz '^FuzzLift$' -fuzztime 30s

// fuzzLimits bound what the codec decodes from a fuzzed file.
var fuzzLimits = onnxio.Limits{MaxFileBytes: 1 << 20, MaxTensorBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxDims: 8}

// fuzzBudget is the memory budget of models built from fuzzed configs.
const fuzzBudget = 64 << 20

// fuzzSeedFixtures are small PyTorch exports of every module family.
var fuzzSeedFixtures = []string{
	"causal_average_opset17_static",
	"self_attention_matrix_opset15_static",
	"causal_attention_opset17_dynamic",
	"multihead_opset13_static",
	"multihead_wrapper_opset14_static",
	"positional_self_attention_opset17_dynamic",
	"torch_mha_causal_self_opset17_dynamic",
	"torch_mha_cross_opset16_static",
	"transformer_block_opset17_dynamic",
}

// fixtureBytes reads the seed fixtures' files; absent ones are skipped.
func fixtureBytes(f *testing.F) [][]byte {
	var out [][]byte
	for _, name := range fuzzSeedFixtures {
		data, err := os.ReadFile(filepath.Join(fixtures, name, "model.onnx"))
		if err == nil {
			out = append(out, data)
		}
	}
	if len(out) == 0 {
		f.Fatal("no seed fixtures under " + fixtures)
	}
	return out
}

// mustNotPanic fails on an error that is a recovered panic.
func mustNotPanic(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if msg := err.Error(); strings.Contains(msg, "internal error") || strings.Contains(msg, "panic") {
		t.Fatalf("%s: %v", what, err)
	}
}

// exerciseModel runs a model built from a fuzzed input as the command line
// would: described from shapes (inspect), then on small inputs (run).
func exerciseModel(t *testing.T, m *models.Model, outputs []lift.Output) {
	if m.NumParams() > 1<<20 {
		return // a valid but large model: building it is enough
	}
	for _, shape := range []tensor.Shape{{4}, {3, 4}, {2, 3, 8}} {
		shapes := make([]tensor.Shape, len(m.Config().Inputs))
		inputs := make([]*tensor.Dense, len(shapes))
		for i := range shapes {
			shapes[i] = shape
			inputs[i] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float32, shape.TotalSize())))
		}
		_, err := m.Profile(shapes...)
		mustNotPanic(t, "Profile", err)
		if outputs != nil {
			_, err = lift.RunOutputs(m, outputs, &registry.Run{}, inputs)
		} else {
			_, err = m.Forward(nil, inputs...)
		}
		mustNotPanic(t, "Forward", err)
	}
}

// FuzzLift feeds arbitrary ONNX files to the lifter, completely and with
// --partial. A lifted model reproduced the graph (Lift checks it); it must
// also describe itself and run.
func FuzzLift(f *testing.F) {
	for _, data := range fixtureBytes(f) {
		f.Add(data, false)
		f.Add(data, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, partial bool) {
		m, err := onnxio.DecodeModel(data, "", fuzzLimits)
		if err != nil {
			return
		}
		res, err := lift.Options{Partial: partial}.Lift(m)
		mustNotPanic(t, "Lift", err)
		if err == nil && res.Model != nil {
			exerciseModel(t, res.Model, res.Outputs)
		}
	})
}

// attnrunFile is an attnrun-written ONNX file: a small model exported with
// its config in the metadata.
func attnrunFile(f *testing.F) *onnxpb.ModelProto {
	m, err := models.Parse([]byte(`name: block
layers:
  - {name: ln, type: norm.layer, d: 8}
  - {name: attn, type: attention.sdpa, d: 8, num_heads: 2, causal: true}
  - {name: res, type: nn.add, inputs: [x, attn]}
  - {name: mlp, type: nn.mlp, d: 8, d_hidden: 16}
`), "block.yaml")
	if err != nil {
		f.Fatal(err)
	}
	if err := m.Init(1); err != nil {
		f.Fatal(err)
	}
	file, err := export.Model(m, export.Options{})
	if err != nil {
		f.Fatal(err)
	}
	return file
}

// FuzzLoad feeds arbitrary ONNX files to the loader of attnrun-written
// files: the metadata's config, the initializers as parameters.
func FuzzLoad(f *testing.F) {
	exported, err := onnxio.EncodeModel(attnrunFile(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(exported)
	f.Add(exported[:len(exported)-7])
	for _, data := range fixtureBytes(f)[:2] {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := onnxio.DecodeModel(data, "", fuzzLimits)
		if err != nil || !lift.IsAttnrun(m) {
			return
		}
		model, outputs, err := lift.LoadWith(m, models.Options{MaxMemory: fuzzBudget})
		mustNotPanic(t, "LoadWith", err)
		if err == nil {
			exerciseModel(t, model, outputs)
		}
	})
}

// FuzzAttnrunConfig feeds arbitrary YAML as the config an attnrun-written
// file carries (metadata attnrun.config), with the file's initializers.
func FuzzAttnrunConfig(f *testing.F) {
	file := attnrunFile(f)
	config, _ := onnxio.Metadata(file, export.MetadataConfig)
	f.Add(config)
	f.Add(strings.Replace(config, "d_hidden: 16", "d_hidden: 17", 1))
	f.Add(strings.Replace(config, "num_heads: 2", "num_heads: 100000000", 1))
	f.Add("name: m\nlayers:\n  - {name: a, type: attention.multihead_wrapper, d_in: 1, d_out: 1, context_length: 1, num_heads: 100000000}\n")
	f.Add("name: m\nlayers:\n  - {name: g, type: onnx.subgraph, graph: AAAA, params: [p]}\n")
	f.Add("&a [*a, *a]")
	f.Fuzz(func(t *testing.T, config string) {
		m := proto.Clone(file).(*onnxpb.ModelProto)
		onnxio.SetMetadata(m, export.MetadataConfig, config)
		// What inspect does: describe from the config alone.
		described, err := models.Options{MaxMemory: fuzzBudget, ShapesOnly: true}.Parse([]byte(config), "metadata")
		mustNotPanic(t, "describe", err)
		if err == nil {
			_, err = described.Profile(tensor.Shape{2, 8})
			mustNotPanic(t, "Profile", err)
		}
		model, outputs, err := lift.LoadWith(m, models.Options{MaxMemory: fuzzBudget})
		mustNotPanic(t, "LoadWith", err)
		if err == nil {
			exerciseModel(t, model, outputs)
		}
	})
}

// subgraphSeeds are configs with onnx.subgraph layers: hand-made sums, and
// what a partial lift of a graph with an op no layer computes writes.
func subgraphSeeds(f *testing.F) [][]byte {
	seeds := [][]byte{
		subgraphConfig(sumGraph(f, 2, 4), 2),
		subgraphConfig(sumGraph(f, 1, 2, 3), 1),
		[]byte("name: s\nlayers:\n  - {name: g, type: onnx.subgraph, graph: '', params: []}\n"),
	}
	m, err := onnxio.ReadModel(filepath.Join(fixtures, "causal_attention_opset17_dynamic", "model.onnx"))
	if err != nil {
		return seeds
	}
	g := m.GetGraph()
	y := g.GetOutput()[0].GetName()
	for _, n := range g.GetNode() {
		for i, out := range n.Output {
			if out == y {
				n.Output[i] = "before_relu"
			}
		}
	}
	g.Node = append(g.Node, &onnxpb.NodeProto{Name: proto.String("/relu"), OpType: proto.String("Relu"), Input: []string{"before_relu"}, Output: []string{y}})
	res, err := lift.Options{Partial: true}.Lift(m)
	if err != nil {
		f.Fatalf("partial lift of the seed: %v", err)
	}
	return append(seeds, []byte(res.Config))
}

// FuzzSubgraphConfig feeds arbitrary model configs whose seeds hold
// onnx.subgraph layers: an ONNX graph inside YAML, decoded, planned and
// prepared within the model's budget.
func FuzzSubgraphConfig(f *testing.F) {
	for _, s := range subgraphSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		if bytes.Count(config, []byte("\n")) > 1000 {
			return
		}
		described, err := models.Options{MaxMemory: fuzzBudget, ShapesOnly: true}.Parse(config, "fuzz.yaml")
		mustNotPanic(t, "describe", err)
		if err == nil {
			_, err = described.Profile(tensor.Shape{2, 4})
			mustNotPanic(t, "Profile", err)
		}
		m, err := models.Options{MaxMemory: fuzzBudget}.Parse(config, "fuzz.yaml")
		mustNotPanic(t, "Parse", err)
		if err == nil {
			exerciseModel(t, m, nil)
		}
	})
}

package export_test

import (
	"fmt"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	onnxgo "github.com/owulveryck/onnx-go"
	"github.com/owulveryck/onnx-go/backend/x/gorgonnx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// github.com/owulveryck/onnx-go v0.5.0 is attnrun's named compatibility
// target: everything attnrun exports must decode in it. This file checks
// every path that writes ONNX, at every opset export writes: presets,
// every registered layer's exporter (the round-trip configs), the
// Attention and RotaryEmbedding ops from opset 23 on, the files attnrun
// import writes for the committed PyTorch fixtures, and the subgraphs of a
// partial import. onnx-go stays a test-only dependency (TestOnnxGoIsTestOnly).

// subgraphID is the layer type attnrun import --partial keeps unlifted
// nodes in.
const subgraphID = "onnx.subgraph"

// Every preset at every opset.
func TestOnnxGoDecodesPresetExports(t *testing.T) {
	decoded := onnxgoDecoded{}
	for _, p := range presets(t) {
		m, _ := presetModel(t, p.Name)
		for opset := export.MinOpset; opset <= export.MaxOpset; opset++ {
			decoded.decode(t, fmt.Sprintf("preset %s at opset %d", p.Name, opset), exportModel(t, m, export.Options{Opset: opset}))
		}
	}
	assert.NotZero(t, decoded.files)
}

// Every round-trip config under testdata/export (one or more per built-in
// layer, and multi/ with masks and memories) at every opset: together they
// export every registered layer type that has an exporter, and from opset
// 23 on use the Attention and RotaryEmbedding ops.
func TestOnnxGoDecodesLayerExports(t *testing.T) {
	var paths []string
	for _, pattern := range []string{"*.yaml", filepath.Join("multi", "*.yaml")} {
		found, err := filepath.Glob(filepath.Join("..", "..", "testdata", "export", pattern))
		require.NoError(t, err)
		paths = append(paths, found...)
	}
	require.NotEmpty(t, paths)
	decoded := onnxgoDecoded{}
	types := map[string]bool{}
	for _, path := range paths {
		m, err := models.Load(path)
		require.NoError(t, err)
		require.NoError(t, m.Init(1))
		for _, l := range m.Layers() {
			types[l.Type] = true
		}
		for opset := export.MinOpset; opset <= export.MaxOpset; opset++ {
			decoded.decode(t, fmt.Sprintf("%s at opset %d", path, opset), exportModel(t, m, export.Options{Opset: opset}))
		}
	}
	for _, id := range exporterIDs(t) {
		if id != subgraphID { // TestOnnxGoDecodesPartialImport
			assert.True(t, types[id], "no config under testdata/export uses %s: its export is not checked in onnx-go", id)
		}
	}
	for _, op := range []string{"Attention", "RotaryEmbedding", "LayerNormalization"} {
		assert.NotZero(t, decoded.ops[op], "no export onnx-go decoded holds the %s op", op)
	}
	t.Logf("onnx-go decodes %d exports of %d configs; %d hold the Attention op, %d RotaryEmbedding",
		decoded.files, len(paths), decoded.ops["Attention"], decoded.ops["RotaryEmbedding"])
}

// The files attnrun import writes (lift.Export) for every committed
// PyTorch fixture, at the default opset and at the Attention op's. A lift
// that cannot be exported (the source also returns attention weights) is
// written as the source's own nodes with the parameters added: that file
// must decode whenever the source does, and fail as the source fails
// otherwise (attnrun adds nothing onnx-go cannot read); onnx-go's own
// failures on PyTorch's graphs are logged.
func TestOnnxGoDecodesLiftedExports(t *testing.T) {
	var paths []string
	for _, pattern := range []string{
		filepath.Join("..", "..", "testdata", "onnx", "*_opset*", "model.onnx"),
		filepath.Join("..", "lift", "testdata", "*", "model.onnx"),
	} {
		found, err := filepath.Glob(pattern)
		require.NoError(t, err)
		paths = append(paths, found...)
	}
	require.GreaterOrEqual(t, len(paths), 100)
	decoded := onnxgoDecoded{}
	var annotated, sourceFails int
	for _, path := range paths {
		src, err := onnxio.ReadModel(path)
		require.NoError(t, err)
		res, err := lift.Lift(src)
		require.NoError(t, err, path)
		for _, opset := range []int{export.DefaultOpset, export.AttentionOpset} {
			out, note, err := lift.Export(src, res, export.Options{Opset: opset})
			require.NoError(t, err, path)
			what := fmt.Sprintf("the import of %s at opset %d", path, opset)
			if note == "" {
				decoded.decode(t, what, out)
				continue
			}
			annotated++
			srcErr := onnxgoDecode(encode(t, src))
			if srcErr == nil {
				decoded.decode(t, what+" (the source's nodes, annotated)", out)
				continue
			}
			sourceFails++
			if err := onnxgoDecode(encode(t, out)); err != nil && err.Error() != srcErr.Error() {
				t.Errorf("onnx-go v0.5.0 fails on %s (the source's nodes, annotated) otherwise than on the source: %v; the source: %v", what, err, srcErr)
			}
			t.Logf("%s keeps the source's nodes, which onnx-go cannot decode: %v", what, srcErr)
		}
	}
	assert.NotZero(t, decoded.ops["Attention"], "no import at opset %d holds the Attention op", export.AttentionOpset)
	t.Logf("onnx-go decodes %d imports of %d PyTorch exports (%d annotated, of which %d keep a source onnx-go cannot decode)",
		decoded.files, len(paths), annotated, sourceFails)
}

// attnrun import --partial keeps what it cannot lift (here a Relu after an
// attention layer) as an onnx.subgraph layer, which exports its nodes.
func TestOnnxGoDecodesPartialImport(t *testing.T) {
	src, err := onnxio.ReadModel(filepath.Join("..", "..", "testdata", "onnx", "multihead_opset17_dynamic", "model.onnx"))
	require.NoError(t, err)
	g := src.GetGraph()
	y := g.GetOutput()[0].GetName()
	for _, n := range g.GetNode() {
		for i, out := range n.Output {
			if out == y {
				n.Output[i] = "before_relu"
			}
		}
	}
	g.Node = append(g.Node, &onnxpb.NodeProto{Name: proto.String("/relu"), OpType: proto.String("Relu"), Input: []string{"before_relu"}, Output: []string{y}})

	res, err := lift.Options{Partial: true}.Lift(src)
	require.NoError(t, err)
	var types []string
	for _, l := range res.Model.Layers() {
		types = append(types, l.Type)
	}
	require.Contains(t, types, subgraphID)
	decoded := onnxgoDecoded{}
	for opset := export.MinOpset; opset <= export.MaxOpset; opset++ {
		out, note, err := lift.Export(src, res, export.Options{Opset: opset})
		require.NoError(t, err)
		require.Empty(t, note)
		decoded.decode(t, fmt.Sprintf("the partial import at opset %d", opset), out)
	}
	assert.NotZero(t, decoded.ops["Relu"], "the subgraph's Relu is not in the export")
}

// onnx-go stays a test-only dependency: no package of the module links it.
func TestOnnxGoIsTestOnly(t *testing.T) {
	goTool, err := osexec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: cannot list the module's dependencies")
	}
	cmd := osexec.Command(goTool, "list", "-deps", "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps ./...")
	deps := strings.Fields(string(out))
	require.True(t, slices.Contains(deps, "github.com/attnrun/attnrun/onnxio"), "go list listed no attnrun package")
	for _, dep := range deps {
		assert.False(t, strings.HasPrefix(dep, "github.com/owulveryck/onnx-go"), "a package of the module imports %s", dep)
	}
}

// onnxgoDecoded counts the files onnx-go decoded and, for each op type,
// how many of them hold it: the check that a path was really taken (the
// Attention op at opset 23), not skipped.
type onnxgoDecoded struct {
	files int
	ops   map[string]int
}

// decode encodes pb and decodes it in onnx-go, failing t when onnx-go
// refuses it or panics.
func (d *onnxgoDecoded) decode(t *testing.T, what string, pb *onnxpb.ModelProto) {
	t.Helper()
	if err := onnxgoDecode(encode(t, pb)); err != nil {
		t.Errorf("onnx-go v0.5.0 fails on %s: %v", what, err)
		return
	}
	if d.ops == nil {
		d.ops = map[string]int{}
	}
	d.files++
	seen := map[string]bool{}
	for _, n := range pb.GetGraph().GetNode() {
		if op := n.GetOpType(); !seen[op] {
			seen[op] = true
			d.ops[op]++
		}
	}
}

// onnxgoDecode runs onnx-go's decoder with the gorgonnx backend, turning a
// panic into an error.
func onnxgoDecode(data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("onnx-go panicked: %v", r)
		}
	}()
	return onnxgo.NewModel(gorgonnx.NewGraph()).UnmarshalBinary(data)
}

// exporterIDs lists the registered layer types that export to ONNX, the
// test layers of this package aside.
func exporterIDs(t *testing.T) []string {
	t.Helper()
	var ids []string
	for _, id := range registry.IDs() {
		info, err := registry.Lookup(id)
		require.NoError(t, err)
		if _, ok := info.New().(registry.Exporter); ok && !strings.HasPrefix(id, "exporttest.") {
			ids = append(ids, id)
		}
	}
	require.NotEmpty(t, ids)
	return ids
}

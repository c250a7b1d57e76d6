// Command gen writes the hostile corpus that scripts/hostile.sh feeds to
// every attnrun command: small files (at most 1 MiB, most a few hundred
// bytes) that ask for memory bombs, endless work, blocking reads or paths
// outside the output folder. Each case is a folder named after it, holding
// the file(s) and the command-line arguments to use in args.txt (one per
// line; @ stands for the case folder).
//
//	go run ./testdata/hostile/gen.go -o /tmp/hostile
//
// FIFOs and sparse files cannot be committed, so the corpus is written
// fresh for every sweep.
package main

import (
	"archive/zip"
	"encoding/base64"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

func main() {
	out := flag.String("o", "", "folder to write the corpus to")
	flag.Parse()
	if *out == "" {
		log.Fatal("usage: gen -o DIR")
	}
	for _, c := range cases() {
		dir := filepath.Join(*out, c.name)
		must(os.MkdirAll(dir, 0o755))
		must(c.write(dir))
		args := strings.Join(c.args, "\n") + "\n"
		must(os.WriteFile(filepath.Join(dir, "args.txt"), []byte(args), 0o644))
		must(os.WriteFile(filepath.Join(dir, "expect.txt"), []byte(c.expect+"\n"), 0o644))
	}
}

// hostileCase is one entry of the corpus.
type hostileCase struct {
	name string
	// write creates the files in the case's folder.
	write func(dir string) error
	// args are the arguments after the command name: the target first.
	args []string
	// expect is an extended regular expression the error must match when
	// the command reads the case's target: the budget or limit it names.
	expect string
}

const (
	budgetError  = `memory budget|--max-memory|limit of|over the limit`
	timeoutError = `--timeout`
)

func cases() []hostileCase {
	return []hostileCase{
		{"constant_of_shape_16gib", onnxFile(constantOfShape(65536, 65536)), []string{"@/model.onnx"}, budgetError},
		{"broadcast_add_4tib", onnxFile(broadcast("Add", 1<<20)), []string{"@/model.onnx"}, budgetError},
		{"broadcast_where_4tib", onnxFile(broadcastWhere(1 << 20)), []string{"@/model.onnx"}, budgetError},
		{"expand_16gib", onnxFile(expand(65536, 65536)), []string{"@/model.onnx"}, budgetError},
		{"tile_16gib", onnxFile(tile(65536, 65536)), []string{"@/model.onnx"}, budgetError},
		{"range_4tb", onnxFile(rangeBomb(1e12)), []string{"@/model.onnx"}, budgetError},
		{"concat_8gib", onnxFile(concat(16384, 16384, 8)), []string{"@/model.onnx"}, budgetError},
		{"five_1gib_outputs", onnxFile(manyOutputs(16384, 16384, 5)), []string{"@/model.onnx"}, budgetError},
		{"slow_matmul", onnxFile(slowMatMul(4096)), []string{"@/model.onnx"}, timeoutError + "|" + budgetError},
		{"wrapper_1e8_heads", textFile("model.yaml", "name: m\nlayers:\n  - {name: a, type: attention.multihead_wrapper, d_in: 1, d_out: 1, context_length: 1, num_heads: 100000000}\n"),
			[]string{"@/model.yaml"}, `num_heads 100000000 is above the limit`},
		{"wrapper_64k_heads", textFile("model.yaml", "name: m\nlayers:\n  - {name: a, type: attention.multihead_wrapper, d_in: 256, d_out: 256, context_length: 1, num_heads: 65536}\n"),
			[]string{"@/model.yaml"}, budgetError},
		{"params_64x1gib", textFile("model.yaml", linears(64, 16384)), []string{"@/model.yaml"}, budgetError},
		{"subgraph_constant_16gib", subgraphBomb, []string{"@/model.yaml", "--input", "@/x.npy"}, budgetError},
		{"subgraph_params_64x1gib", textFile("model.yaml", subgraphConfig(sumGraph(64, 16384, 16384), paramNames(64))), []string{"@/model.yaml"}, budgetError},
		{"attnrun_file_64x1gib", onnxFile(attnrunFile(linears(64, 16384))), []string{"@/model.onnx"}, budgetError},
		{"external_sparse_16gib", externalSparse(16 << 30), []string{"@/model.onnx"}, budgetError},
		{"fifo_config", fifo("model.yaml"), []string{"@/model.yaml"}, `regular file`},
		{"fifo_onnx", fifo("model.onnx"), []string{"@/model.onnx"}, `regular file`},
		{"fifo_external_data", externalFIFO, []string{"@/model.onnx"}, `regular file`},
		{"fifo_input", withFIFOInput, []string{"@/model.yaml", "--input", "@/x.npy"}, `regular file`},
		{"testdata_index_2e9", dataSetNames("input_2000000000.pb"), []string{"@/model.onnx", "--data", "@/test_data_set_0"}, `input_`},
		{"testdata_index_maxint", dataSetNames("input_9223372036854775806.pb"), []string{"@/model.onnx", "--data", "@/test_data_set_0"}, `input_`},
		{"npy_header_bomb", npyBomb, []string{"seed-mha-wrapper", "--input", "@/x.npy"}, `limit|budget`},
		{"npz_traversal", npzTraversal, []string{"seed-mha-wrapper", "--input", "@/batch.npz", "--output", "@/out"}, `.`},
	}
}

// onnxFile writes m as model.onnx, with a test-data set of one tiny
// expected value per graph output, so that check runs the graph.
func onnxFile(m *onnxpb.ModelProto) func(string) error {
	return func(dir string) error {
		if err := writeModel(filepath.Join(dir, "model.onnx"), m); err != nil {
			return err
		}
		set := filepath.Join(dir, "test_data_set_0")
		if err := os.MkdirAll(set, 0o755); err != nil {
			return err
		}
		out := &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxio.Float)), Dims: []int64{1}, FloatData: []float32{0}}
		data, err := proto.Marshal(out)
		if err != nil {
			return err
		}
		for i := range m.GetGraph().GetOutput() {
			if err := os.WriteFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)), data, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

func textFile(name, text string) func(string) error {
	return func(dir string) error { return os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644) }
}

func fifo(name string) func(string) error {
	return func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, name), 0o644) }
}

func writeModel(path string, m *onnxpb.ModelProto) error {
	data, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// model wraps nodes into a model of opset 17 whose graph outputs are
// float32 values of unknown shape, with the given inputs.
func model(nodes []*onnxpb.NodeProto, inputs []*onnxpb.ValueInfoProto, outputs ...string) *onnxpb.ModelProto {
	g := &onnxpb.GraphProto{Name: proto.String("hostile"), Node: nodes, Input: inputs}
	for _, o := range outputs {
		g.Output = append(g.Output, onnxio.TensorValueInfo(o, onnxio.Float, nil))
	}
	return &onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: g,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}}}
}

func node(op string, inputs []string, output string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String(op), Input: inputs, Output: []string{output}, Name: proto.String(output), Attribute: attrs}
}

// ints is a Constant node holding an int64 vector.
func ints(name string, values ...int64) *onnxpb.NodeProto {
	t := &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxio.Int64)), Dims: []int64{int64(len(values))}, Int64Data: values}
	return node("Constant", nil, name, &onnxpb.AttributeProto{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: t})
}

// float is a Constant node holding a float32 scalar.
func float(name string, v float32) *onnxpb.NodeProto {
	t := &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxio.Float)), FloatData: []float32{v}}
	return node("Constant", nil, name, &onnxpb.AttributeProto{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: t})
}

// filled is ConstantOfShape(dims) of float32 ones.
func filled(name string, dims ...int64) []*onnxpb.NodeProto {
	one := &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxio.Float)), Dims: []int64{1}, FloatData: []float32{1}}
	return []*onnxpb.NodeProto{
		ints(name+"_shape", dims...),
		node("ConstantOfShape", []string{name + "_shape"}, name, &onnxpb.AttributeProto{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: one}),
	}
}

func constantOfShape(dims ...int64) *onnxpb.ModelProto {
	return model(filled("y", dims...), nil, "y")
}

// broadcast is op(a, b) of a (n, 1) and a (1, n): n² float32.
func broadcast(op string, n int64) *onnxpb.ModelProto {
	nodes := append(filled("a", n, 1), filled("b", 1, n)...)
	nodes = append(nodes, node(op, []string{"a", "b"}, "y"))
	return model(nodes, nil, "y")
}

// broadcastWhere is Where(cond (n, 1), a (1, n), b (1)).
func broadcastWhere(n int64) *onnxpb.ModelProto {
	nodes := append(filled("c", n, 1), filled("a", 1, n)...)
	nodes = append(nodes, node("Cast", []string{"c"}, "cond", &onnxpb.AttributeProto{Name: proto.String("to"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(int64(onnxio.Bool))}))
	nodes = append(nodes, float("b", 0), node("Where", []string{"cond", "a", "b"}, "y"))
	return model(nodes, nil, "y")
}

func expand(dims ...int64) *onnxpb.ModelProto {
	return model([]*onnxpb.NodeProto{float("x", 1), ints("shape", dims...), node("Expand", []string{"x", "shape"}, "y")}, nil, "y")
}

func tile(rows, cols int64) *onnxpb.ModelProto {
	nodes := append(filled("x", 1, 1), ints("repeats", rows, cols), node("Tile", []string{"x", "repeats"}, "y"))
	return model(nodes, nil, "y")
}

func rangeBomb(limit float32) *onnxpb.ModelProto {
	return model([]*onnxpb.NodeProto{float("start", 0), float("limit", limit), float("delta", 1),
		node("Range", []string{"start", "limit", "delta"}, "y")}, nil, "y")
}

// concat joins copies of an (rows, cols) tensor: each within a per-tensor
// limit, the result copies times larger.
func concat(rows, cols int64, copies int) *onnxpb.ModelProto {
	nodes := filled("x", rows, cols)
	var ins []string
	for range copies {
		ins = append(ins, "x")
	}
	nodes = append(nodes, node("Concat", ins, "y", &onnxpb.AttributeProto{Name: proto.String("axis"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(0)}))
	return model(nodes, nil, "y")
}

// manyOutputs returns n different (rows, cols) tensors: each allowed on its
// own, together more than the budget.
func manyOutputs(rows, cols int64, n int) *onnxpb.ModelProto {
	nodes := filled("x", rows, cols)
	var outs []string
	prev := "x"
	for i := range n {
		out := fmt.Sprintf("y%d", i)
		nodes = append(nodes, node("Add", []string{prev, "x"}, out))
		outs = append(outs, out)
		prev = out
	}
	return model(nodes, nil, outs...)
}

// slowMatMul multiplies two (n, n) matrices a few times over: small in
// memory, minutes of work.
func slowMatMul(n int64) *onnxpb.ModelProto {
	nodes := filled("a", n, n)
	prev := "a"
	for i := range 64 {
		out := fmt.Sprintf("m%d", i)
		nodes = append(nodes, node("MatMul", []string{prev, "a"}, out))
		prev = out
	}
	return model(nodes, nil, prev)
}

// linears is a config of n nn.linear layers of (d, d).
func linears(n, d int) string {
	var b strings.Builder
	b.WriteString("name: big\nlayers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: l%d, type: nn.linear, d_in: %d, d_out: %d, bias: false}\n", i, d, d)
	}
	return b.String()
}

// sumGraph is y = x + p0 + p1 + ..., every value of the given dims.
func sumGraph(params int, dims ...int64) *onnxpb.ModelProto {
	fixed := make([]onnxio.Dim, len(dims))
	for i, d := range dims {
		fixed[i] = onnxio.FixedDim(d)
	}
	inputs := []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float, fixed)}
	var nodes []*onnxpb.NodeProto
	last := "x"
	for i := range params {
		p := fmt.Sprintf("p%d", i)
		inputs = append(inputs, onnxio.TensorValueInfo(p, onnxio.Float, fixed))
		out := fmt.Sprintf("s%d", i)
		nodes = append(nodes, node("Add", []string{last, p}, out))
		last = out
	}
	return model(nodes, inputs, last)
}

func paramNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	return names
}

// subgraphConfig is a model of one onnx.subgraph layer holding g.
func subgraphConfig(g *onnxpb.ModelProto, params []string) string {
	data, err := proto.Marshal(g)
	must(err)
	return fmt.Sprintf("name: sub\nlayers:\n  - {name: g, type: onnx.subgraph, graph: %s, params: [%s]}\n",
		base64.StdEncoding.EncodeToString(data), strings.Join(params, ", "))
}

// subgraphBomb is a config whose onnx.subgraph layer adds a 16 GiB
// ConstantOfShape to its input, and a small input for it.
func subgraphBomb(dir string) error {
	nodes := append(filled("c", 65536, 65536), node("Add", []string{"x", "c"}, "y"))
	g := model(nodes, []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float, []onnxio.Dim{onnxio.FixedDim(2), onnxio.FixedDim(3)})}, "y")
	if err := os.WriteFile(filepath.Join(dir, "model.yaml"), []byte(subgraphConfig(g, nil)), 0o644); err != nil {
		return err
	}
	x := append(npyHeader("(2, 3)"), make([]byte, 2*3*4)...)
	return os.WriteFile(filepath.Join(dir, "x.npy"), x, 0o644)
}

// attnrunFile is a file attnrun would load from its metadata: the config,
// and no initializers (loading must fail on the budget before missing them).
func attnrunFile(config string) *onnxpb.ModelProto {
	m := model([]*onnxpb.NodeProto{node("Identity", []string{"x"}, "y")},
		[]*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float, []onnxio.Dim{onnxio.FixedDim(1), onnxio.FixedDim(16384)})}, "y")
	onnxio.SetMetadata(m, export.MetadataConfig, config)
	onnxio.SetMetadata(m, export.MetadataVersion, export.MetadataFormat)
	return m
}

// externalModel is y = Identity(w), w an initializer of n float32 values
// stored in weights.bin.
func externalModel(n int64) *onnxpb.ModelProto {
	w := &onnxpb.TensorProto{Name: proto.String("w"), DataType: proto.Int32(int32(onnxio.Float)), Dims: []int64{n},
		DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
		ExternalData: []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String("weights.bin")},
			{Key: proto.String("length"), Value: proto.String(fmt.Sprint(4 * n))},
		}}
	m := model([]*onnxpb.NodeProto{node("Identity", []string{"w"}, "y")}, nil, "y")
	m.Graph.Initializer = []*onnxpb.TensorProto{w}
	return m
}

// externalSparse is a model whose external data is a sparse file of size
// bytes: no disk used, all of it readable zeros.
func externalSparse(size int64) func(string) error {
	return func(dir string) error {
		if err := writeModel(filepath.Join(dir, "model.onnx"), externalModel(size/4)); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(dir, "weights.bin"))
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Truncate(size)
	}
}

// externalFIFO is a model whose external data is a FIFO.
func externalFIFO(dir string) error {
	if err := writeModel(filepath.Join(dir, "model.onnx"), externalModel(4)); err != nil {
		return err
	}
	return syscall.Mkfifo(filepath.Join(dir, "weights.bin"), 0o644)
}

// withFIFOInput is a small valid config whose input is a FIFO.
func withFIFOInput(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "model.yaml"), []byte("name: m\nlayers:\n  - {name: a, type: attention.simple}\n"), 0o644); err != nil {
		return err
	}
	return syscall.Mkfifo(filepath.Join(dir, "x.npy"), 0o644)
}

// dataSetNames is a small model with a test-data set holding one empty
// file of the given name, whose index would size an allocation.
func dataSetNames(name string) func(string) error {
	return func(dir string) error {
		if err := writeModel(filepath.Join(dir, "model.onnx"), model([]*onnxpb.NodeProto{node("Identity", []string{"x"}, "y")},
			[]*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float, []onnxio.Dim{onnxio.FixedDim(2)})}, "y")); err != nil {
			return err
		}
		set := filepath.Join(dir, "test_data_set_0")
		if err := os.MkdirAll(set, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(set, name), nil, 0o644)
	}
}

// npyHeader is a .npy header declaring a float32 array of the given shape.
func npyHeader(shape string) []byte {
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shape)
	for (10+len(header)+1)%64 != 0 {
		header += " "
	}
	header += "\n"
	out := []byte("\x93NUMPY\x01\x00")
	out = append(out, byte(len(header)), byte(len(header)>>8))
	return append(out, header...)
}

// npyBomb is a 128-byte .npy declaring 2^60 float32 values.
func npyBomb(dir string) error {
	return os.WriteFile(filepath.Join(dir, "x.npy"), npyHeader("(1073741824, 1073741824)"), 0o644)
}

// npzTraversal is an archive whose member name climbs out of --output.
func npzTraversal(dir string) error {
	f, err := os.Create(filepath.Join(dir, "batch.npz"))
	if err != nil {
		return err
	}
	defer f.Close()
	z := zip.NewWriter(f)
	w, err := z.Create("../../escaped.npy")
	if err != nil {
		return err
	}
	data := append(npyHeader("(6, 3)"), make([]byte, 6*3*4)...)
	if _, err := w.Write(data); err != nil {
		return err
	}
	return z.Close()
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

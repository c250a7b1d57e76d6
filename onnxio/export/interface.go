package export

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// Interface is how a graph declares its inputs and output. Set as
// Options.Interface, it makes an export declare them as another file
// does, so that the export can replace that file: attnrun import keeps the
// interface of the graph it lifted (a PyTorch export of one (T, d)
// sequence stays (T, d), a bool mask stays bool, a static (2, 6, 8) stays
// static).
//
// The graph adapts the declared values to what the layers read:
//   - an input of another element type than float32 is Cast to float32
//     (booleans become 0 and 1, as models take them); the output is Cast to
//     its declared type;
//   - an input declared with one axis fewer than the layer reads gets the
//     missing axes inserted by Unsqueeze: the batch axis of a token stream,
//     wherever its layout puts it (a (T, d) sequence is a batch of one, as
//     attnrun's layers read it), the leading axes of a mask (masks
//     broadcast from the right); an output declared with one axis fewer
//     than the model computes has its batch axis removed by Squeeze;
//   - the names are the declared ones; the model's own input names need not
//     appear in the graph.
//
// Any other difference (a rank the layers cannot read, an element type
// Cast does not convert, a name that is also a parameter's) is an error.
type Interface struct {
	// Inputs declare the model's inputs, in the model's order.
	Inputs []*onnxpb.ValueInfoProto
	// Output declares the model's output.
	Output *onnxpb.ValueInfoProto
}

// castable lists the element types Cast converts to and from float32.
var castable = map[onnxio.DataType]bool{
	onnxio.Float: true, onnxio.Float64: true, onnxio.Float16: true, onnxio.BFloat16: true,
	onnxio.Int64: true, onnxio.Int32: true, onnxio.Int16: true, onnxio.Int8: true,
	onnxio.Uint64: true, onnxio.Uint32: true, onnxio.Uint16: true, onnxio.Uint8: true, onnxio.Bool: true,
}

// interfacePath is the node path of the nodes that adapt an interface.
const interfacePath = "/interface"

// checkInterface refuses an interface that cannot declare a model: a count
// of inputs that is not the model's, a missing declaration, names used
// twice or taken by a parameter.
func checkInterface(iface *Interface, cfg *models.Config, params []registry.Param) error {
	if len(iface.Inputs) != len(cfg.Inputs) {
		return fmt.Errorf("interface: %d input(s) declared, the model has %d (%s)", len(iface.Inputs), len(cfg.Inputs), quoteNames(cfg.Inputs))
	}
	if iface.Output == nil || iface.Output.GetName() == "" {
		return fmt.Errorf("interface: the output is not declared (want a named value info)")
	}
	taken := map[string]string{}
	for _, p := range params {
		taken[p.Name] = "parameter"
	}
	for i, vi := range append(slices.Clone(iface.Inputs), iface.Output) {
		what := fmt.Sprintf("input %d", i)
		if i == len(iface.Inputs) {
			what = "the output"
		}
		name := vi.GetName()
		if vi == nil || name == "" {
			return fmt.Errorf("interface: %s has no name", what)
		}
		if other, ok := taken[name]; ok {
			return fmt.Errorf("interface: %s is named %q, which is already the name of a %s", what, name, other)
		}
		taken[name] = "declared value"
		if dt := onnxio.ElemType(vi); dt != 0 && !castable[dt] {
			return fmt.Errorf("interface: %s %q has element type %s, which Cast does not convert to float32", what, name, dt)
		}
	}
	return nil
}

// adaptInput makes a declared input what the layers read, float32 in
// layout dims, and returns the value that holds it.
func (g *graph) adaptInput(vi *onnxpb.ValueInfoProto, dims []string) (string, error) {
	b := g.interfaceBuilder()
	value := vi.GetName()
	if dt := onnxio.ElemType(vi); dt != 0 && dt != onnxio.Float {
		value = b.Node("Cast", []string{value}, registry.Attr{Name: "to", Value: int64(onnxio.Float)})
	}
	if !onnxio.HasShape(vi) {
		return value, nil // the rank is not declared: fed as the layers read it
	}
	rank := len(onnxio.Dims(vi))
	switch {
	case rank == len(dims):
	case rank == len(dims)-1 && !isOwnLayout(dims) && slices.Contains(dims, "batch"):
		value = b.Node("Unsqueeze", []string{value, b.ConstInt64([]int64{int64(slices.Index(dims, "batch"))})})
	case rank < len(dims) && isOwnLayout(dims):
		axes := make([]int64, len(dims)-rank)
		for i := range axes {
			axes[i] = int64(i)
		}
		value = b.Node("Unsqueeze", []string{value, b.ConstInt64(axes)})
	default:
		return "", fmt.Errorf("input %q is declared of rank %d; the model reads it as %s", vi.GetName(), rank, describeDims(dims))
	}
	return value, b.err
}

// adaptIDs makes a declared input what a layer on int64 ids reads: int64
// (batch, seq), Cast from another integer type and given its batch axis
// when declared (seq).
func (g *graph) adaptIDs(vi *onnxpb.ValueInfoProto) (string, error) {
	b := g.interfaceBuilder()
	value := vi.GetName()
	if dt := onnxio.ElemType(vi); dt != 0 && dt != onnxio.Int64 {
		value = b.Node("Cast", []string{value}, registry.Attr{Name: "to", Value: int64(onnxio.Int64)})
	}
	if onnxio.HasShape(vi) {
		switch rank := len(onnxio.Dims(vi)); rank {
		case 2:
		case 1:
			value = b.Node("Unsqueeze", []string{value, b.ConstInt64([]int64{0})})
		default:
			return "", fmt.Errorf("input %q is declared of rank %d; the model reads int64 ids (batch, seq)", vi.GetName(), rank)
		}
	}
	return value, b.err
}

// adaptOutput turns the model's output value, float32 in layout dims, into
// the declared output, and names it as declared.
func (g *graph) adaptOutput(value string, vi *onnxpb.ValueInfoProto, dims []string) error {
	b := g.interfaceBuilder()
	if onnxio.HasShape(vi) {
		switch rank := len(onnxio.Dims(vi)); {
		case rank == len(dims):
		case rank == len(dims)-1 && slices.Contains(dims, "batch"):
			value = b.Node("Squeeze", []string{value, b.ConstInt64([]int64{int64(slices.Index(dims, "batch"))})})
		default:
			return fmt.Errorf("output %q is declared of rank %d; the model computes %s", vi.GetName(), rank, describeDims(dims))
		}
	}
	if dt := onnxio.ElemType(vi); dt != 0 && dt != onnxio.Float {
		value = b.Node("Cast", []string{value}, registry.Attr{Name: "to", Value: int64(dt)})
	}
	if b.err != nil {
		return b.err
	}
	g.nameOutput(value, vi.GetName())
	return nil
}

// interfaceBuilder is the builder of the nodes that adapt an interface.
func (g *graph) interfaceBuilder() *layerBuilder {
	return &layerBuilder{g: g, path: interfacePath, params: map[string]string{}, inputs: map[string]bool{}, counts: map[string]int{}}
}

// outputLayout is the layout of the model's output: that of its layer's
// first input when the layer reads it as a token stream in another order
// (a sequence-first nn.MultiheadAttention answers in its input's order),
// (batch, seq, d) otherwise.
func outputLayout(cfg *models.Config, layouts map[string][]string) []string {
	if dims, ok := layouts[cfg.Output]; ok && isTokenLayout(dims) {
		return dims
	}
	for i := range cfg.Layers {
		if spec := &cfg.Layers[i]; spec.Name == cfg.Output {
			if dims, ok := layerDims(spec)[0]; ok && isTokenLayout(dims) {
				return dims
			}
		}
	}
	return tokenDims
}

// clonedInfos copies value infos, so that the export shares nothing with
// the file it declares itself like.
func clonedInfos(infos []*onnxpb.ValueInfoProto) []*onnxpb.ValueInfoProto {
	out := make([]*onnxpb.ValueInfoProto, len(infos))
	for i, vi := range infos {
		out[i] = proto.Clone(vi).(*onnxpb.ValueInfoProto)
	}
	return out
}

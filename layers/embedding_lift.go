package layers

import (
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// nn.embedding in ONNX graphs: Gather(table, ids) over the rows of a
// constant (num_embeddings, embedding_dim) table, by int64 ids computed
// from the graph inputs (input_ids, token_type_ids), as PyTorch exports
// nn.Embedding, or int32 ones (TensorFlow's exports), which the lifted
// model takes as int64; a Mul of the rows by a constant (Gemma's
// √hidden_size) is the layer's scale.

func init() {
	match.RegisterPattern(match.Pattern{Name: "nn.embedding", Op: "Gather", Late: true, Match: liftEmbedding})
}

// liftEmbedding lifts a Gather of a table's rows by computed int64 ids.
func liftEmbedding(g match.Graph, n *match.Node) (*match.Layer, error) {
	ins := n.Inputs()
	if len(ins) != 2 || g.IsData(ins[0]) || !g.IsData(ins[1]) || n.Int("axis", 0) != 0 {
		return nil, nil
	}
	ids, err := g.ValueAt(0, ins[1])
	if err != nil || ids.Dtype() != tensor.Int64 && ids.Dtype() != tensor.Int32 || ids.Dims() < 1 || ids.Dims() > 2 {
		return nil, nil
	}
	table, err := g.Constant(ins[0])
	if err != nil || table.Dims() != 2 {
		return nil, nil
	}
	w, err := match.Float32(table)
	if err != nil {
		return nil, nil
	}
	if !g.Registered("nn.embedding") {
		return nil, match.Refuse([]*match.Node{n}, "an embedding lookup: no layer type nn.embedding is registered in this build")
	}
	l := &match.Layer{Type: "nn.embedding", Name: "embed", Inputs: []string{ins[1]}, Output: n.Output(), Nodes: []*match.Node{n}, IndexBound: table.Shape()[0],
		Config: []match.Field{{Key: "num_embeddings", Value: table.Shape()[0]}, {Key: "embedding_dim", Value: table.Shape()[1]}},
		Params: []match.Param{{Name: "weight", Value: w, From: ins[0]}}}
	if m := onlyReader(g, n.Output()); m != nil { // Gemma's normalizer: the rows times √hidden_size
		if f, x, ok := scalarFactor(g, m); ok && x == n.Output() && m.Op() == "Mul" {
			l.Output, l.Nodes = m.Output(), append(l.Nodes, m)
			l.Config = append(l.Config, match.Field{Key: "scale", Value: f})
		}
	}
	return l, nil
}

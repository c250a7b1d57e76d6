package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Embedding)(nil)

// ExportONNX writes Gather on the (num_embeddings, embedding_dim) table,
// as PyTorch's exporters write nn.Embedding: ONNX Runtime fails on an id
// outside the table, as attnrun does.
func (e *Embedding) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if e.weight == nil {
		return "", errNotValidated
	}
	ids, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	rows := g.Node("Gather", operands(g.Param("weight"), ids), registry.IntAttr("axis", 0))
	if e.Scale != 0 {
		rows = g.Node("Mul", operands(rows, g.ScalarFloat(float32(e.Scale))))
	}
	return rows, nil
}

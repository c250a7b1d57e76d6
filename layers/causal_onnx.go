package layers

import "github.com/attnrun/attnrun/registry"

var _ registry.Exporter = (*Causal)(nil)

// ExportONNX writes the head as attention.self does, with the causal mask
// computed for the sequence length (at most context_length) and dropout
// as at inference: not at all.
func (c *Causal) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	return c.head.exportSingleHead(g, inputs)
}

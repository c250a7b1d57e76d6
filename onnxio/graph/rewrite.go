package graph

import (
	"slices"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// The rewrites the lifter and the exporter make of a graph's protobuf.

// WithNodes returns m with its main graph's nodes replaced by nodes and
// added appended to its initializers: a new model sharing m's tensors and
// every other field, m left as it is.
func WithNodes(m *onnxpb.ModelProto, nodes []*onnxpb.NodeProto, added []*onnxpb.TensorProto) *onnxpb.ModelProto {
	gp := m.GetGraph()
	g := &onnxpb.GraphProto{
		Node: nodes, Name: gp.Name, Initializer: append(slices.Clone(gp.Initializer), added...), SparseInitializer: gp.SparseInitializer,
		DocString: gp.DocString, Input: gp.Input, Output: gp.Output, ValueInfo: gp.ValueInfo,
	}
	return &onnxpb.ModelProto{
		IrVersion: m.IrVersion, OpsetImport: m.OpsetImport, ProducerName: m.ProducerName,
		ProducerVersion: m.ProducerVersion, Domain: m.Domain, ModelVersion: m.ModelVersion,
		DocString: m.DocString, Graph: g, MetadataProps: m.MetadataProps, Functions: m.Functions,
	}
}

// RenameValue renames value from to to wherever nodes read or write it,
// in place.
func RenameValue(nodes []*onnxpb.NodeProto, from, to string) {
	for _, n := range nodes {
		for i, in := range n.Input {
			if in == from {
				n.Input[i] = to
			}
		}
		for i, out := range n.Output {
			if out == from {
				n.Output[i] = to
			}
		}
	}
}

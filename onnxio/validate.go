package onnxio

import (
	"fmt"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// tensorVisitor is called for every tensor a model holds, with a phrase that
// locates it for error messages ("initializer \"w\"", "node \"c1\" (Constant)
// attribute \"value\"").
type tensorVisitor func(where string, t *onnxpb.TensorProto) error

// walkModelTensors calls visit for every tensor in the model: initializers,
// sparse initializers, and tensor-valued node attributes, descending into
// subgraphs (If/Loop/Scan bodies). It stops at the first error.
func walkModelTensors(m *onnxpb.ModelProto, visit tensorVisitor) error {
	if m.Graph == nil {
		return nil
	}
	return walkGraphTensors(m.Graph, "", visit)
}

func walkGraphTensors(g *onnxpb.GraphProto, prefix string, visit tensorVisitor) error {
	for _, t := range g.Initializer {
		if err := visit(fmt.Sprintf("%sinitializer %q", prefix, t.GetName()), t); err != nil {
			return err
		}
	}
	for i, s := range g.SparseInitializer {
		if err := walkSparse(s, fmt.Sprintf("%ssparse initializer %d", prefix, i), visit); err != nil {
			return err
		}
	}
	for i, n := range g.Node {
		for _, a := range n.Attribute {
			where := fmt.Sprintf("%s%s attribute %q", prefix, nodeLabel(i, n), a.GetName())
			if err := walkAttributeTensors(a, where, visit); err != nil {
				return err
			}
		}
	}
	return nil
}

func walkAttributeTensors(a *onnxpb.AttributeProto, where string, visit tensorVisitor) error {
	if a.T != nil {
		if err := visit(where, a.T); err != nil {
			return err
		}
	}
	for i, t := range a.Tensors {
		if err := visit(fmt.Sprintf("%s[%d]", where, i), t); err != nil {
			return err
		}
	}
	if a.SparseTensor != nil {
		if err := walkSparse(a.SparseTensor, where, visit); err != nil {
			return err
		}
	}
	for i, s := range a.SparseTensors {
		if err := walkSparse(s, fmt.Sprintf("%s[%d]", where, i), visit); err != nil {
			return err
		}
	}
	if a.G != nil {
		if err := walkGraphTensors(a.G, where+": ", visit); err != nil {
			return err
		}
	}
	for i, g := range a.Graphs {
		if err := walkGraphTensors(g, fmt.Sprintf("%s[%d]: ", where, i), visit); err != nil {
			return err
		}
	}
	return nil
}

func walkSparse(s *onnxpb.SparseTensorProto, where string, visit tensorVisitor) error {
	if s.Values != nil {
		if err := visit(where+" values", s.Values); err != nil {
			return err
		}
	}
	if s.Indices != nil {
		if err := visit(where+" indices", s.Indices); err != nil {
			return err
		}
	}
	return nil
}

// nodeLabel names a node for error messages: by name when it has one, by
// position otherwise, with its op type.
func nodeLabel(i int, n *onnxpb.NodeProto) string {
	if n.GetName() != "" {
		return fmt.Sprintf("node %q (%s)", n.GetName(), n.GetOpType())
	}
	return fmt.Sprintf("node #%d (%s)", i, n.GetOpType())
}

// tensorLabel describes a tensor's type and shape for error messages.
func tensorLabel(t *onnxpb.TensorProto) string {
	return fmt.Sprintf("%s %v", DataType(t.GetDataType()), t.Dims)
}

// isExternal reports whether a tensor's data lives in a file named by its
// external_data entries.
func isExternal(t *onnxpb.TensorProto) bool {
	return t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL
}

// checkTensor validates a tensor's shape against the limits and the amount
// of data it carries against its shape and data type, and returns its
// element count. A tensor whose data is still external is checked for its
// shape only; segmented tensors and data types this package does not know
// are checked for their shape only too.
func (l Limits) checkTensor(t *onnxpb.TensorProto) (elems int64, err error) {
	dt := DataType(t.GetDataType())
	layout, known := layouts[dt]
	elems, err = l.CheckDims(t.Dims, layout.bits)
	if err != nil {
		return 0, err
	}
	present := presentFields(t)
	if isExternal(t) && len(present) > 0 {
		// Loading fills raw_data, so inline data here would leave the
		// tensor with two sources that disagree about which one counts.
		return 0, fmt.Errorf("keeps its data in an external file but also holds %s", present[0])
	}
	if !known || t.Segment != nil || isExternal(t) {
		return elems, nil
	}

	switch {
	case len(present) > 1:
		return 0, fmt.Errorf("holds data in both %s and %s; a tensor uses one field", present[0], present[1])
	case len(present) == 1 && present[0] != layout.field.String() && present[0] != "raw_data":
		return 0, fmt.Errorf("holds data in %s, but data type %s uses %s or raw_data", present[0], dt, layout.field)
	case len(present) == 0 && elems > 0:
		return 0, fmt.Errorf("has %d elements but no data", elems)
	}

	if t.RawData != nil {
		if layout.field == stringData {
			return 0, fmt.Errorf("holds STRING data in raw_data; strings belong in string_data")
		}
		want, err := l.checkBytes(elems, layout.bits)
		if err != nil {
			return 0, err
		}
		if int64(len(t.RawData)) != want {
			return 0, fmt.Errorf("raw_data has %d bytes, want %d for %d elements", len(t.RawData), want, elems)
		}
		return elems, nil
	}
	if n, want := typedLen(t, layout.field), layout.valuesFor(elems); n != want {
		return 0, fmt.Errorf("%s has %d values, want %d for %d elements", layout.field, n, want, elems)
	}
	return elems, nil
}

// presentFields lists the data fields a tensor has set.
func presentFields(t *onnxpb.TensorProto) []string {
	var out []string
	for f := floatData; f <= uint64Data; f++ {
		if typedLen(t, f) > 0 {
			out = append(out, f.String())
		}
	}
	if t.RawData != nil {
		out = append(out, "raw_data")
	}
	return out
}

// typedLen is the number of values in one typed field of a tensor.
func typedLen(t *onnxpb.TensorProto, f typedField) int64 {
	switch f {
	case floatData:
		return int64(len(t.FloatData))
	case int32Data:
		return int64(len(t.Int32Data))
	case stringData:
		return int64(len(t.StringData))
	case int64Data:
		return int64(len(t.Int64Data))
	case doubleData:
		return int64(len(t.DoubleData))
	case uint64Data:
		return int64(len(t.Uint64Data))
	}
	return 0
}

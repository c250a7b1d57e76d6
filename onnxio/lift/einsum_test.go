package lift

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// TestReadEinsumsLeavesOtherEquations checks that only matrix products are
// rewritten: an Einsum that sums a letter out of one operand, repeats a
// letter (a trace) or has three operands is left as it is, and so is the
// model; the fixture keras_einsum (TestLiftHuggingFaceKeepMasks) lifts
// through the rewritten ones.
func TestReadEinsumsLeavesOtherEquations(t *testing.T) {
	for _, eq := range []string{"ab,bc->c", "aab,bc->ac", "ab,bc", "ab,bc,cd->ad", "...b,bc->...c"} {
		inputs := []string{"x", "y"}
		if eq == "ab,bc,cd->ad" {
			inputs = append(inputs, "z")
		}
		m := &onnxpb.ModelProto{Graph: &onnxpb.GraphProto{
			Node: []*onnxpb.NodeProto{{OpType: proto.String("Einsum"), Input: inputs, Output: []string{"out"},
				Attribute: []*onnxpb.AttributeProto{{Name: proto.String("equation"), S: []byte(eq)}}}},
		}}
		got, notes := readEinsums(m)
		assert.Same(t, m, got, eq)
		assert.Empty(t, notes, eq)
	}
}

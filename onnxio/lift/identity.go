package lift

import (
	"slices"

	"gorgonia.org/tensor"
)

// identityOut is the output projection of an attention whose merged heads
// are its output (ONNX Runtime's Attention op, and the graphs its tests
// write unfused): a Linear of width d that reads and writes v and whose
// weight is the identity, which no graph tensor holds.
func identityOut(v string, d int) *linear {
	eye := make([]float32, d*d)
	for i := range d {
		eye[i*d+i] = 1
	}
	return &linear{in: v, out: v, dIn: d, dOut: d, weight: tensor.New(tensor.WithShape(d, d), tensor.WithBacking(eye))}
}

// packedRows reads an operand that no Linear projects, whose chain starts
// by regrouping flattened token rows, (B·T, d) to (B, T, d): the output of
// a layer the lifter recognizes elsewhere, applied to x.view(-1, d) as
// GPT-2's Conv1D is (ONNX Runtime's quantized Attention tests: the packed
// queries, keys and values of a MatMulInteger). The regrouped value is
// then the operand's token tensor: packedRows returns it and the chain
// from it, or false when c is no such chain. Queries, keys and values that
// all read one such tensor take their columns of it through an identity
// projection (packedSource).
func (a *analysis) packedRows(c chain) (chain, string, bool) {
	if len(c.nodes) == 0 || a.matchLinear(c.base) != nil {
		return c, "", false
	}
	first := c.nodes[0]
	if first.GetOpType() != "Reshape" || first.GetInput()[0] != c.base || !a.regroupsRows(first) || slices.Contains(c.scales, first) {
		return c, "", false
	}
	for _, p := range a.probes {
		in, err1 := p.shape(c.base)
		out, err2 := p.shape(first.GetOutput()[0])
		if err1 != nil || err2 != nil || len(in) != 2 || len(out) != 3 {
			return c, "", false
		}
	}
	rest := c
	rest.base, rest.nodes = first.GetOutput()[0], c.nodes[1:]
	return rest, rest.base, true
}

// packedSource is the source of queries, keys and values packed in the
// token tensor tokens: projected by the identity over its d features (of
// which each takes its columns, attention.multihead's packed split), a
// Linear no graph tensor holds.
func (a *analysis) packedSource(tokens string) source {
	d := mustShape(a.probes[0], tokens)[2]
	return source{tokens: tokens, lin: identityOut(tokens, d), pre: chain{value: tokens, base: tokens, scale: 1}}
}

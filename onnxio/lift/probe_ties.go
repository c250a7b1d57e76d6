package lift

import (
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Ties the graph does not show. A decoder exported by dynamo takes an
// attention_mask over past and new tokens whose length is a symbol of its
// own, and gathers from it the columns of the keys it has: it evaluates
// with a mask longer than the keys, so the search for ties (probe_dims.go)
// finds none, and the probes give the mask a length of its own. A lifted
// attention reads the whole mask, which must be as long as its keys. The
// recognizer that finds such a mask records the tie (tieMaskKeys), and
// Lift reads the graph again with it: the probes and the self-check then
// feed masks as long as the keys, which is what the graph means.

// tieMaskKeys checks that the (B, S) keep mask input is as long as the
// keys (keys at probe p). When it is not, it records the tie of S to the
// one dimension as long as the keys and returns an error saying so.
func (a *analysis) tieMaskKeys(p *probe, input string, keys int) error {
	shape := p.feeds[input].Shape()
	if len(shape) == 0 || shape[len(shape)-1] == keys {
		return nil
	}
	var last onnxio.Dim
	for _, vi := range a.g.Inputs {
		if vi.GetName() == input {
			dims := onnxio.Dims(vi)
			last = dims[len(dims)-1]
		}
	}
	var same []string
	for name, n := range p.dims {
		if n == keys && name != last.Param {
			same = append(same, name)
		}
	}
	if last.Param == "" || len(same) != 1 {
		return fmt.Errorf("the keep mask %q has %d keys at the probe and the attention %d, and no one dimension of the inputs is as long as the keys", input, shape[len(shape)-1], keys)
	}
	tie := dimSum{dim: last.Param, terms: same}
	if !slices.ContainsFunc(a.ties, func(t dimSum) bool { return t.String() == tie.String() }) {
		a.ties = append(a.ties, tie)
	}
	return fmt.Errorf("the keep mask %q has %d keys at the probe and the attention %d (to be read again with %s)", input, shape[len(shape)-1], keys, tie)
}

// withPastLength turns ties learned on the graph without its past inputs
// into ties of the full graph: a dimension as long as the new tokens there
// is as long as the past and the new tokens here. It returns nil when the
// past inputs do not share one symbolic length.
func withPastLength(full *onnxpb.ModelProto, links []cacheLink, ties []dimSum) []dimSum {
	if len(ties) == 0 {
		return nil
	}
	past := ""
	for _, l := range links {
		for _, vi := range full.GetGraph().GetInput() {
			if vi.GetName() != l.past {
				continue
			}
			dims := onnxio.Dims(vi)
			if len(dims) <= sequenceAxis || dims[sequenceAxis].Param == "" || past != "" && dims[sequenceAxis].Param != past {
				return nil
			}
			past = dims[sequenceAxis].Param
		}
	}
	if past == "" {
		return nil
	}
	out := make([]dimSum, len(ties))
	for i, t := range ties {
		out[i] = dimSum{dim: t.dim, terms: append(slices.Clone(t.terms), past)}
	}
	return out
}

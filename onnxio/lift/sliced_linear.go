package lift

import (
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// slicedLinear recognizes a Slice of consecutive output features of an
// nn.Linear as the nn.Linear of those features: a fused projection read
// in parts, as Phi-3 slices qkv_proj into queries, keys and values and
// gate_up_proj into its gate and up halves. The Slice must cut the last
// axis with step 1 at bounds that are the same at every probe; the Linear returned holds the rows
// of the weight (and bias) it keeps, and Blocks says where they come from.
// It returns nil when value is not computed so.
func (g patternGraph) slicedLinear(value string) *match.Linear {
	a := g.a
	sl := a.g.Producer(value)
	if sl == nil || sl.GetOpType() != "Slice" || len(sl.GetInput()) < 4 || len(sl.GetInput()) > 5 || len(sl.GetOutput()) != 1 {
		return nil
	}
	ins := sl.GetInput()
	start, ok1 := g.fixedScalar(ins[1])
	end, ok2 := g.fixedScalar(ins[2])
	axis, ok3 := g.fixedScalar(ins[3])
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	if len(ins) == 5 && ins[4] != "" {
		if step, ok := g.fixedScalar(ins[4]); !ok || step != 1 {
			return nil
		}
	}
	l := a.matchLinear(ins[0])
	if l == nil {
		return nil
	}
	lo, hi := sliceBound(start, l.dOut), sliceBound(end, l.dOut)
	if lo >= hi || lo == 0 && hi == l.dOut {
		return nil // nothing kept, or everything: the Slice is no projection of its own
	}
	for i := range a.probes {
		shape, err := a.probes[i].shape(ins[0])
		if err != nil || len(shape) < 2 || !(axis == -1 || int(axis) == len(shape)-1) {
			return nil
		}
		out, err := a.probes[i].shape(value)
		if err != nil || len(out) != len(shape) || out[len(out)-1] != hi-lo {
			return nil
		}
	}
	whole := l.public()
	part := *whole
	part.Output, part.Out = value, hi-lo
	part.Nodes = append(append([]*match.Node{}, whole.Nodes...), match.NewNode(sl))
	part.Weight = tensor.New(tensor.WithShape(hi-lo, l.dIn), tensor.WithBacking(append([]float32{}, l.weight.Data().([]float32)[lo*l.dIn:hi*l.dIn]...)))
	if l.bias != nil {
		part.Bias = tensor.New(tensor.WithShape(hi-lo), tensor.WithBacking(append([]float32{}, l.bias.Data().([]float32)[lo:hi]...)))
	}
	part.Blocks = [][2]int{{lo, hi}}
	return &part
}

// fixedScalar is the number a static single-element value holds at every
// probe: a constant, or one computed from a dimension that is the same at
// every input shape (Phi-3 computes where gate_up_proj splits from the
// width of its output).
func (g patternGraph) fixedScalar(v string) (float64, bool) {
	if !g.a.g.Static(v) {
		return 0, false
	}
	x, ok := g.ScalarAt(0, v)
	for i := 1; ok && i < len(g.a.probes); i++ {
		var y float64
		y, ok = g.ScalarAt(i, v)
		ok = ok && y == x
	}
	return x, ok
}

// sliceBound clamps a Slice bound on an axis of n elements as ONNX does:
// a negative bound counts from the end, and the result lies in [0, n].
func sliceBound(b float64, n int) int {
	if b < 0 {
		b += float64(n)
	}
	return int(math.Max(0, math.Min(b, float64(n))))
}

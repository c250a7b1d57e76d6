package lift

import (
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// slicedLinear recognizes a Slice or Split of consecutive output features
// of an nn.Linear as the nn.Linear of those features: a fused projection
// read in parts, as Phi-3 slices qkv_proj into queries, keys and values and
// gate_up_proj into its gate and up halves. The cut is on the last axis,
// with step 1, at bounds that are the same at every probe; the Linear returned holds the rows
// of the weight (and bias) it keeps, and Blocks says where they come from.
// It returns nil when value is not computed so.
func (g patternGraph) slicedLinear(value string) *match.Linear {
	a := g.a
	sl := a.g.Producer(value)
	if sl == nil {
		return nil
	}
	var lo, hi int
	var ok bool
	switch sl.GetOpType() {
	case "Slice":
		lo, hi, ok = g.sliceFeatures(sl)
	case "Split":
		lo, hi, ok = g.splitFeatures(sl, value)
	}
	if !ok {
		return nil
	}
	l := a.matchLinear(sl.GetInput()[0])
	if l == nil {
		return nil
	}
	lo, hi = min(lo, l.dOut), min(hi, l.dOut)
	if lo >= hi || lo == 0 && hi == l.dOut {
		return nil // nothing kept, or everything: no projection of its own
	}
	for i := range a.probes {
		in, err1 := a.probes[i].shape(sl.GetInput()[0])
		out, err2 := a.probes[i].shape(value)
		if err1 != nil || err2 != nil || len(in) < 2 || len(out) != len(in) || out[len(out)-1] != hi-lo {
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

// sliceFeatures reads the features [lo, hi) that a Slice keeps of the last
// axis of its input, with step 1 (Phi-3's qkv[…, :q_size]).
func (g patternGraph) sliceFeatures(sl *node) (lo, hi int, ok bool) {
	ins := sl.GetInput()
	if len(ins) < 4 || len(ins) > 5 || len(sl.GetOutput()) != 1 {
		return 0, 0, false
	}
	start, ok1 := g.Scalar(ins[1])
	end, ok2 := g.Scalar(ins[2])
	axis, ok3 := g.Scalar(ins[3])
	if !ok1 || !ok2 || !ok3 || !g.lastAxis(ins[0], int(axis)) {
		return 0, 0, false
	}
	if len(ins) == 5 && ins[4] != "" {
		if step, ok := g.Scalar(ins[4]); !ok || step != 1 {
			return 0, 0, false
		}
	}
	width, _ := g.a.probes[0].shape(ins[0])
	n := width[len(width)-1]
	return sliceBound(start, n), sliceBound(end, n), true
}

// splitFeatures reads the features [lo, hi) of the last axis that output
// value of a Split holds (the dynamo exporter's gate_up.chunk(2, dim=-1)):
// the widths of the outputs before it, then its own, at every probe alike.
func (g patternGraph) splitFeatures(sp *node, value string) (lo, hi int, ok bool) {
	if !g.lastAxis(sp.GetInput()[0], int(sp.Int("axis", 0))) {
		return 0, 0, false
	}
	for i, p := range g.a.probes {
		at := 0
		for _, o := range sp.GetOutput() {
			shape, err := p.shape(o)
			if err != nil || len(shape) == 0 {
				return 0, 0, false
			}
			w := shape[len(shape)-1]
			if o == value {
				if i > 0 && (at != lo || at+w != hi) {
					return 0, 0, false
				}
				lo, hi = at, at+w
			}
			at += w
		}
	}
	return lo, hi, hi > lo
}

// lastAxis reports whether axis names the last axis of v at every probe.
func (g patternGraph) lastAxis(v string, axis int) bool {
	for _, p := range g.a.probes {
		shape, err := p.shape(v)
		if err != nil || len(shape) < 2 || axis != -1 && axis != len(shape)-1 {
			return false
		}
	}
	return true
}

// sliceBound clamps a Slice bound on an axis of n elements as ONNX does:
// a negative bound counts from the end, and the result lies in [0, n].
func sliceBound(b float64, n int) int {
	if b < 0 {
		b += float64(n)
	}
	return int(math.Max(0, math.Min(b, float64(n))))
}

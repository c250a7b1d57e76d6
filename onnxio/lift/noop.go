package lift

import (
	"slices"

	"gorgonia.org/tensor"
)

// noOpInput reports whether n hands its data input on unchanged at every
// probe size, and returns that input: a Slice that keeps every element in
// order (GPT-2's input_ids[:, -1:] on ids declared (batch, 1)), an Add of
// static zeros or a Mul by static ones that broadcasts nothing (a norm's
// bias of zeros). The plan reads it as a copy.
func (a *analysis) noOpInput(n *node) (string, bool) {
	ins := n.GetInput()
	if len(ins) == 0 || len(n.GetOutput()) != 1 {
		return "", false
	}
	out := n.GetOutput()[0]
	switch n.GetOpType() {
	case "Slice":
		if !a.isLayout(n) || len(ins) > 4 && ins[4] != "" && !a.allStatic(ins[4], func(s float64) bool { return s == 1 }) {
			return "", false
		}
		return ins[0], a.sameShapes(ins[0], out)
	case "Add", "Mul":
		unit := 0.0
		if n.GetOpType() == "Mul" {
			unit = 1
		}
		if len(ins) != 2 {
			return "", false
		}
		x, c := ins[0], ins[1]
		if !a.g.IsData(x) {
			x, c = c, x
		}
		return x, a.g.IsData(x) && a.g.Static(c) && a.allStatic(c, func(v float64) bool { return v == unit }) && a.sameShapes(x, out)
	}
	return "", false
}

// allStatic reports whether every element of the static value v satisfies
// ok.
func (a *analysis) allStatic(v string, ok func(float64) bool) bool {
	t, err := a.probes[0].value(v)
	if err != nil {
		return false
	}
	switch data := t.Data().(type) {
	case []float32:
		return !slices.ContainsFunc(data, func(x float32) bool { return !ok(float64(x)) })
	case []int64:
		return !slices.ContainsFunc(data, func(x int64) bool { return !ok(float64(x)) })
	case float32:
		return ok(float64(data))
	case int64:
		return ok(float64(data))
	}
	return t.Dtype() == tensor.Float64 && !slices.ContainsFunc(t.Data().([]float64), func(x float64) bool { return !ok(x) })
}

// sameShapes reports whether values x and y have one shape at every probe.
func (a *analysis) sameShapes(x, y string) bool {
	for _, p := range a.probes {
		sx, err1 := p.shape(x)
		sy, err2 := p.shape(y)
		if err1 != nil || err2 != nil || !slices.Equal(sx, sy) {
			return false
		}
	}
	return true
}

package layers

import (
	"github.com/attnrun/attnrun/onnxio/match"
)

// nn.moe in ONNX graphs: Hugging Face's sparse mixture-of-experts block as
// the exporters write it, anchored at the router's TopK. The router is a
// Linear of the tokens, a Softmax (maybe after a float Cast) and the TopK;
// the experts' stacked weights are the static 3-D tensors the chosen
// indices gather (Gather or GatherND), gate_up_proj first; the block's
// output is where the weighted sum of the experts, past the ReduceSum over
// the chosen experts (and the Add of a shared expert), is back in the
// tokens' shape. Everything between the tokens and that output is the
// layer: how the exporter gathers and batches the experts does not matter,
// since the lifter checks the layer against the graph numerically.

func init() {
	match.RegisterPattern(match.Pattern{Name: "nn.moe", Op: "TopK", Match: liftMoE})
}

// moeSearchDepth bounds the walk from the chosen indices to the experts'
// weights: the exporters gather them within a few nodes.
const moeSearchDepth = 12

// liftMoE lifts the sparse MoE block whose router ends at the TopK n.
func liftMoE(g match.Graph, n *match.Node) (*match.Layer, error) {
	if !g.Registered("nn.moe") || len(n.Inputs()) != 2 || len(n.Outputs()) != 2 || n.Int("largest", 1) != 1 {
		return nil, nil
	}
	probs := skipFloatCasts(g, n.Inputs()[0])
	softmax := g.Producer(probs)
	if softmax == nil || softmax.Op() != "Softmax" || !lastAxis(g, softmax) {
		return nil, nil
	}
	router, ok := g.Linear(skipFloatCasts(g, softmax.Inputs()[0]))
	if !ok || router.Bias != nil {
		return nil, nil
	}
	k, ok := g.Scalar(n.Inputs()[1])
	if !ok || k < 1 || int(k) > router.Out {
		return nil, nil
	}
	x := tokensBefore(g, router.Input)
	gateUp, down := expertStacks(g, n.Outputs()[1], router.Out, router.In)
	if gateUp == "" {
		return nil, nil
	}
	gu, err := g.Constant(gateUp)
	if err != nil {
		return nil, nil
	}
	dw, err := g.Constant(down)
	if err != nil {
		return nil, nil
	}
	hidden := gu.Shape()[1] / 2
	if dw.Shape()[2] != hidden {
		return nil, nil
	}
	act := expertActivation(g, gateUp)
	out, shared := moeOutput(g, down, x)
	if act == "" || out == "" {
		return nil, nil
	}
	l := &match.Layer{Type: "nn.moe", Name: "moe", Inputs: []string{x}, Output: out,
		Config: []match.Field{{Key: "d", Value: router.In}, {Key: "d_hidden", Value: hidden},
			{Key: "experts", Value: router.Out}, {Key: "top_k", Value: int(k)}},
		Params: append(router.Params("gate"),
			match.Param{Name: "experts.gate_up_proj", Value: gu, From: gateUp},
			match.Param{Name: "experts.down_proj", Value: dw, From: down}),
	}
	if act != "silu" {
		l.Config = append(l.Config, match.Field{Key: "activation", Value: act})
	}
	if !renormalized(g, n.Outputs()[0]) {
		l.Config = append(l.Config, match.Field{Key: "renormalize", Value: false})
	}
	if shared != nil {
		l.Config = append(l.Config, match.Field{Key: "shared_d_hidden", Value: shared[0].Out})
		for i, lin := range shared[:3] {
			l.Params = append(l.Params, lin.Params(moeSharedNames[i])...)
		}
		l.Params = append(l.Params, shared[3].Params("shared_expert_gate")...)
	}
	return l, nil
}

// skipFloatCasts follows v back through float copies (Casts to float32).
func skipFloatCasts(g match.Graph, v string) string {
	for p := g.Producer(v); p != nil && match.IsFloatCopy(g, p); p = g.Producer(v) {
		v = p.Inputs()[0]
	}
	return v
}

// tokensBefore follows the router's input back through the Reshapes and
// Flattens that make rows of the tokens, to the tokens themselves.
func tokensBefore(g match.Graph, v string) string {
	for p := g.Producer(v); p != nil && (p.Op() == "Reshape" || p.Op() == "Flatten"); p = g.Producer(v) {
		v = p.Inputs()[0]
	}
	return v
}

// expertStacks finds, walking forward from the chosen indices, the static
// (experts, 2·h, d) and (experts, d, h) tensors they gather: the experts'
// gate_up_proj and down_proj, in that order; "" when there are none.
func expertStacks(g match.Graph, indices string, experts, d int) (gateUp, down string) {
	var found []string
	walkReaders(g, indices, func() bool { return len(found) >= 2 }, func(v string, r *match.Node) bool {
		if (r.Op() == "Gather" || r.Op() == "GatherND") && r.Inputs()[1] == v {
			if w := r.Inputs()[0]; !g.IsData(w) && stackOf(g, w, experts) {
				found = append(found, w)
				return false
			}
		}
		return true
	})
	if len(found) != 2 || found[0] == found[1] {
		return "", ""
	}
	gu, dw := mustShape(g, found[0]), mustShape(g, found[1])
	if gu[2] != d || gu[1]%2 != 0 || dw[1] != d {
		return "", ""
	}
	return found[0], found[1]
}

// expertActivation recognizes the activation the experts apply to the
// gate half of their gathered gate_up_proj: on the first Slice or Split
// output, walking forward, that an activation reads; "" when none does.
func expertActivation(g match.Graph, gateUp string) string {
	act := ""
	walkReaders(g, gateUp, func() bool { return act != "" }, func(v string, r *match.Node) bool {
		if act == "" && (r.Op() == "Slice" || r.Op() == "Split") {
			act, _, _ = activationAfter(g, r.Outputs()[0])
		}
		return true
	})
	return act
}

// walkReaders visits the readers r of each value v, breadth first from
// start, up to moeSearchDepth levels deep: it goes on to r's outputs when
// visit says so, and stops before the next level once done.
func walkReaders(g match.Graph, start string, done func() bool, visit func(v string, r *match.Node) bool) {
	frontier := []string{start}
	for depth := 0; depth < moeSearchDepth && !done() && len(frontier) > 0; depth++ {
		var next []string
		for _, v := range frontier {
			for _, r := range g.Readers(v) {
				if visit(v, r) {
					next = append(next, r.Outputs()...)
				}
			}
		}
		frontier = next
	}
}

// stackOf reports whether w is a 3-D tensor of one matrix per expert.
func stackOf(g match.Graph, w string, experts int) bool {
	s := mustShape(g, w)
	return len(s) == 3 && s[0] == experts
}

// moeOutput walks from the gathered down_proj through the single readers
// that weight, sum and reshape the experts' outputs, to the first value
// past a ReduceSum in the shape of the tokens x; with the shared expert
// when an Add on the way, or right there, adds one of x. It returns ""
// when the walk meets anything else.
func moeOutput(g match.Graph, down, x string) (string, []*match.Linear) {
	var shared []*match.Linear
	summed := false
	v := ""
	for _, r := range g.Readers(down) {
		if r.Op() == "Gather" || r.Op() == "GatherND" {
			v = r.Output()
		}
	}
	for steps := 0; v != "" && steps < 4*moeSearchDepth; steps++ {
		if summed && sameShapes(g, v, x) {
			if r := onlyReader(g, v); shared == nil && r != nil && r.Op() == "Add" {
				if shared = sharedExpert(g, otherInput(r, v), x); shared != nil {
					return r.Output(), shared // added in the tokens' shape (attnrun's export)
				}
			}
			return v, shared
		}
		r := onlyReader(g, v)
		if r == nil || g.IsOutput(v) {
			return "", nil
		}
		switch r.Op() {
		case "ReduceSum":
			summed = true
		case "Add":
			if !summed || shared != nil {
				return "", nil
			}
			if shared = sharedExpert(g, otherInput(r, v), x); shared == nil {
				return "", nil
			}
		}
		v = r.Output()
	}
	return "", nil
}

// sharedExpert reads v as Qwen2-MoE's gated shared expert of the tokens x
// (as rows): σ(x·gateᵀ) · down(silu(gate_proj(x)) · up_proj(x)), and
// returns its gate_proj, up_proj, down_proj and shared_expert_gate; nil
// when v is not that.
func sharedExpert(g match.Graph, v, x string) []*match.Linear {
	reads := func(l *match.Linear) bool { return tokensBefore(g, l.Input) == x }
	mul := g.Producer(v)
	if mul == nil || mul.Op() != "Mul" {
		return nil
	}
	for _, s := range mul.Inputs() {
		sig := g.Producer(s)
		if sig == nil || sig.Op() != "Sigmoid" {
			continue
		}
		gate, ok := g.Linear(sig.Inputs()[0])
		downLin, ok2 := g.Linear(otherInput(mul, s))
		if !ok || !ok2 || gate.Out != 1 || !reads(gate) {
			return nil
		}
		gated := g.Producer(downLin.Input)
		if gated == nil || gated.Op() != "Mul" {
			return nil
		}
		for _, a := range gated.Inputs() {
			if proj := siluOfLinear(g, a); proj != nil {
				up, ok := g.Linear(otherInput(gated, a))
				if !ok || !reads(proj) || !reads(up) || up.Out != proj.Out || downLin.In != proj.Out {
					return nil
				}
				return []*match.Linear{proj, up, downLin, gate}
			}
		}
		return nil
	}
	return nil
}

// siluOfLinear returns the Linear whose SiLU (Sigmoid·x) is v, or nil.
func siluOfLinear(g match.Graph, v string) *match.Linear {
	mul := g.Producer(v)
	if mul == nil || mul.Op() != "Mul" {
		return nil
	}
	for _, in := range mul.Inputs() {
		if lin, ok := g.Linear(in); ok {
			if act, _, out := activationAfter(g, in); act == "silu" && out == v {
				return lin
			}
		}
	}
	return nil
}

// renormalized reports whether the chosen weights are divided by their
// sum: a ReduceSum reads them.
func renormalized(g match.Graph, weights string) bool {
	for _, r := range g.Readers(weights) {
		if r.Op() == "ReduceSum" {
			return true
		}
	}
	return false
}

package match

// The bias Add of a linear layer. nn.Linear exports as Add(MatMul(x, W), b)
// or Add(b, MatMul(x, W)) (or as one Gemm). Both the executor's bias fusion
// and the lifter's Linear recognizer read the Add this way; they differ in
// what they accept of the operands (the executor checks shapes at run time,
// the lifter wants a static weight and bias).

// LinearView is a View that also says which values a rewrite may swallow.
type LinearView[N comparable, V comparable] interface {
	View[N, V]
	// Private reports whether v is read by one node only and is no graph
	// output.
	Private(v V) bool
}

// BiasAdd reads add as the bias Add of a linear layer: one input the
// private output of a MatMul, the other the bias. It tries the product at
// input 0, then at input 1, and returns the first MatMul that accept
// takes, with the bias's position among add's inputs.
func BiasAdd[N comparable, V comparable](g LinearView[N, V], add N, accept func(mm N, bias int) bool) (mm N, bias int, ok bool) {
	ins := g.Inputs(add)
	if g.Op(add) != "Add" || len(ins) != 2 {
		return mm, -1, false
	}
	for k := range 2 {
		p, found := g.Producer(ins[k])
		if found && g.Op(p) == "MatMul" && g.Private(ins[k]) && accept(p, 1-k) {
			return p, 1 - k, true
		}
	}
	return mm, -1, false
}

package match

// The scores chain. Scaled dot-product attention exports as
//
//	S = MatMul(Q, Kᵀ) → steps → Softmax(S) → MatMul(·, V)
//
// where each step is an elementwise node that keeps the scores' shape:
// a scale Div(S, c), Mul(S, c) or Mul(c, S); a mask Where(m, fill, S) or
// Where(m, S, fill) with fill −inf, or Add(S, m) or Add(m, S); and, where
// the caller allows it, a copy Identity(S) or Cast(S) (one that the view
// says keeps the type: Megatron's .float()) or a Reshape(S) that regroups
// the leading axes (Hugging Face's BART, OPT and Whisper take the scores
// (B·H, T, S) to (B, H, T, S) to add the mask and back). WalkScores
// follows the softmax's input back through such steps to the product.

// StepKind is what a step does to the scores.
type StepKind int

// The step kinds.
const (
	Scale StepKind = iota // Div(S, c), Mul(S, c) or Mul(c, S)
	Where                 // Where(m, fill, S) or Where(m, S, fill)
	Add                   // Add(S, m) or Add(m, S)
	Copy                  // Identity(S) or Cast(S), or Reshape(S, shape) where Rules allow it
)

// Step is one step of a scores chain, its operands given as positions
// among the node's inputs.
type Step[N any] struct {
	// Node is the step's node.
	Node N
	// Kind is what it does.
	Kind StepKind
	// Scores is the input that carries the scores.
	Scores int
	// Arg is the scale factor, the Where condition or the added mask; -1
	// for a Copy.
	Arg int
	// Fill is the Where's fill value; -1 for other kinds.
	Fill int
	// Keep marks a Where(m, S, fill): a true condition shows a key rather
	// than hiding it.
	Keep bool
	// OnDiv marks a scale that divides the scores by Arg.
	OnDiv bool
}

// candidates lists, in the order they are tried, the inputs of op that may
// carry the scores, or nil when op is no step.
func candidates(op string, r Rules) []int {
	switch op {
	case "Div":
		return []int{0}
	case "Mul", "Add":
		return []int{0, 1}
	case "Where":
		return []int{1, 2}
	case "Identity", "Cast":
		if r.Copies {
			return []int{0}
		}
	case "Reshape":
		if r.Reshapes {
			return []int{0}
		}
	}
	return nil
}

// IsStep reports whether op may be a step of a chain (Identity only when
// copies are allowed).
func IsStep(op string, copies bool) bool { return candidates(op, Rules{Copies: copies}) != nil }

// stepAt describes node n of op as a step whose scores come through input
// k, one of op's candidates.
func stepAt[N any](n N, op string, k int) Step[N] {
	st := Step[N]{Node: n, Scores: k, Arg: -1, Fill: -1}
	switch op {
	case "Div":
		st.Kind, st.Arg, st.OnDiv = Scale, 1, true
	case "Mul":
		st.Kind, st.Arg = Scale, 1-k
	case "Add":
		st.Kind, st.Arg = Add, 1-k
	case "Where":
		st.Kind, st.Arg = Where, 0
		if k == 1 {
			st.Fill, st.Keep = 2, true
		} else {
			st.Fill = 1
		}
	case "Identity", "Cast", "Reshape":
		st.Kind = Copy
	}
	return st
}

// View is a graph as the matchers see it: nodes N and values V.
type View[N comparable, V comparable] interface {
	// Producer returns the node that writes v.
	Producer(v V) (N, bool)
	// Op is n's op type.
	Op(n N) string
	// Inputs are n's inputs, in order.
	Inputs(n N) []V
}

// ScoresView is a View with the caller's rules for a scores chain.
type ScoresView[N comparable, V comparable] interface {
	View[N, V]
	// Follows reports whether the walk may pass from value v to n, the
	// node that writes it.
	Follows(v V, n N) bool
	// Carries reports whether input k of step node n may carry the scores
	// (k is one of the step's candidates, within its inputs).
	Carries(n N, k int) bool
}

// Rules bound a walk.
type Rules struct {
	// MaxSteps is the most steps a chain may have; 0 means any number.
	MaxSteps int
	// Copies allows Identity steps, and Cast steps the view's Carries
	// accepts as copies.
	Copies bool
	// Reshapes allows Reshape steps, as copies; the view's Carries says
	// which keep the scores' layout.
	Reshapes bool
}

// Stop says where a walk ended.
type Stop int

// The ends of a walk.
const (
	AtProduct Stop = iota // at a MatMul: Chain.Product
	AtSource              // at a value with no producer, or one the view does not follow: Chain.Value
	AtOther               // at a node that is no step: Chain.At
	NoScores              // at a step none of whose candidate inputs carries the scores: Chain.At
	TooLong               // at a step beyond Rules.MaxSteps: Chain.At
)

// Chain is what a walk found.
type Chain[N comparable, V comparable] struct {
	// Steps are the steps, the softmax's side first.
	Steps []Step[N]
	// Nodes are the nodes the walk reached, the softmax's side first: the
	// steps, then the product or the node the walk stopped at.
	Nodes []N
	// Stop says where the walk ended.
	Stop Stop
	// Product is the MatMul the walk ended at (Stop AtProduct).
	Product N
	// At is the node the walk stopped at (AtProduct, AtOther, NoScores,
	// TooLong).
	At N
	// Value is the last value the walk reached.
	Value V
}

// WalkScores follows the scores from value from (a Softmax's input) back
// through steps to the MatMul that computes them. It stops at the first
// MatMul, whatever its operands: the caller checks them.
func WalkScores[N comparable, V comparable](g ScoresView[N, V], from V, r Rules) Chain[N, V] {
	c := Chain[N, V]{Value: from}
	for {
		n, ok := g.Producer(c.Value)
		if !ok || !g.Follows(c.Value, n) {
			c.Stop = AtSource
			return c
		}
		c.Nodes = append(c.Nodes, n)
		c.At = n
		op := g.Op(n)
		if op == "MatMul" {
			c.Stop, c.Product = AtProduct, n
			return c
		}
		cands := candidates(op, r)
		switch {
		case cands == nil:
			c.Stop = AtOther
			return c
		case r.MaxSteps > 0 && len(c.Steps) == r.MaxSteps:
			c.Stop = TooLong
			return c
		}
		ins := g.Inputs(n)
		k := -1
		for _, cand := range cands {
			if cand < len(ins) && g.Carries(n, cand) {
				k = cand
				break
			}
		}
		if k < 0 {
			c.Stop = NoScores
			return c
		}
		c.Steps = append(c.Steps, stepAt(n, op, k))
		c.Value = ins[k]
	}
}

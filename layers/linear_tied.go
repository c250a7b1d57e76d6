package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// A tied nn.linear borrows its weight from another layer of the model, as
// a language model's head reuses the token embedding table: GPT-2's
// lm_head.weight is transformer.wte.weight, the (vocab, d) table that is
// also the head's (d_out, d_in) weight. The model holds the table once
// (registry.Tier); the head keeps its own bias, if any.

var _ registry.Tier = (*Linear)(nil)

// newTiedLinearWeights allocates the bias of an nn.Linear whose weight
// comes later, from Tie.
func newTiedLinearWeights(a paramAlloc, in, out int, bias bool) (*linearWeights, error) {
	l := &linearWeights{in: in, out: out}
	if bias {
		var err error
		if l.bias, err = a.zeros("bias", out); err != nil {
			return nil, err
		}
		l.b = floats(l.bias)
	}
	return l, nil
}

// TiedParams lists the borrowed weight, (d_out, d_in), when tied_weight
// names one.
func (l *Linear) TiedParams() []registry.TiedParam {
	if l.TiedWeight == "" {
		return nil
	}
	return []registry.TiedParam{{Name: "weight", Source: l.TiedWeight, Shape: []int{l.DOut, l.DIn}}}
}

// Tie makes value, the parameter tied_weight names, the layer's weight.
func (l *Linear) Tie(name string, value *tensor.Dense) error {
	switch {
	case l.weights == nil:
		return errNotValidated
	case name != "weight" || l.TiedWeight == "":
		return fmt.Errorf("nn.linear ties only its weight, with tied_weight set; asked to tie %q", name)
	case !value.Shape().Eq(tensor.Shape{l.DOut, l.DIn}) || value.Dtype() != tensor.Float32:
		return fmt.Errorf("tied weight is %v %s, want float32 (d_out, d_in) = (%d, %d)", value.Dtype(), fmtShape(value.Shape()), l.DOut, l.DIn)
	}
	l.weights.weight, l.weights.w = value, floats(value)
	return nil
}

// checkTied refuses a forward pass of a tied layer that no model has
// handed its weight.
func (l *Linear) checkTied() error {
	if l.weights.w == nil {
		return fmt.Errorf("the weight is tied to %q, which only a model holding that parameter provides", l.TiedWeight)
	}
	return nil
}

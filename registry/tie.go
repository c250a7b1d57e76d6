package registry

import "gorgonia.org/tensor"

// Tier is implemented by layers that use another layer's parameter as one
// of their own, as a language model's head reuses the token embedding
// (GPT-2's lm_head.weight is transformer.wte.weight). The model owns the
// parameter once, under its source's name: it is initialized and loaded
// once and counted once (as PyTorch's parameters() counts a tied weight),
// while the state dict also lists it under the borrowing layer's name, as
// PyTorch's state_dict() does.
type Tier interface {
	Layer
	// TiedParams lists the parameters the layer borrows. It is called
	// after a successful Validate.
	TiedParams() []TiedParam
	// Tie hands the layer the storage of a borrowed parameter, by its name
	// within the layer. The model calls it once for each TiedParams entry,
	// with a tensor of the listed shape, before any forward pass.
	Tie(name string, value *tensor.Dense) error
}

// TiedParam is one parameter a Tier layer borrows.
type TiedParam struct {
	// Name is the parameter's name within the layer ("weight").
	Name string
	// Source is the model parameter it is: "<layer>.<param>" ("wte.weight").
	Source string
	// Shape is the shape the layer needs, in the layer's layout.
	Shape []int
}

// InitFinisher is implemented by layers whose PyTorch initialization
// changes the drawn values afterwards without drawing more random numbers,
// as nn.Embedding zeroes its padding_idx row. A model's Init calls
// FinishInit on the layer after drawing every parameter.
type InitFinisher interface {
	Layer
	// FinishInit adjusts the freshly drawn parameters.
	FinishInit()
}

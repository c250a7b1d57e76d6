package registry

import (
	"slices"

	"gorgonia.org/tensor"
)

// Outputs lends layers the tensors they write their outputs into, one slot
// per layer of a model, so that a model run again and again on inputs of
// the same shapes allocates no output: a slot keeps the tensor it lent and
// lends it again, zeroed, when the next request has the same shape. The
// tensors belong to the Outputs: a pass's results are valid until the
// Outputs lends them again. An Outputs serves one pass at a time.
type Outputs struct {
	slots []outputSlot
	cur   int
}

// outputSlot is a lent tensor and its backing array, kept apart because
// reading it back from the tensor (Data) allocates.
type outputSlot struct {
	t    *tensor.Dense
	data []float32
}

// Select makes slot the one the next Float32 lends from, growing the
// slots as needed; a model calls it before each layer.
func (o *Outputs) Select(slot int) {
	for len(o.slots) <= slot {
		o.slots = append(o.slots, outputSlot{})
	}
	o.cur = slot
}

// Float32 returns a zeroed float32 tensor of the given shape and its
// backing array: the selected slot's when it has that shape, else a new
// one, which the slot keeps. On a nil Outputs it always returns a new
// tensor. A layer calls it at most once per pass, for its output.
func (o *Outputs) Float32(shape ...int) (*tensor.Dense, []float32) {
	if o == nil {
		return newFloat32(shape)
	}
	sl := &o.slots[o.cur]
	if sl.t != nil && slices.Equal([]int(sl.t.Shape()), shape) && len(sl.data) == sl.t.Shape().TotalSize() {
		clear(sl.data)
		return sl.t, sl.data
	}
	sl.t, sl.data = newFloat32(slices.Clone(shape))
	return sl.t, sl.data
}

// newFloat32 allocates a zeroed float32 tensor of the given shape.
func newFloat32(shape []int) (*tensor.Dense, []float32) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	data := make([]float32, n)
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data)), data
}

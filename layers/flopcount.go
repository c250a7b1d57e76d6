package layers

import (
	"errors"
	"fmt"
	"math"

	"gorgonia.org/tensor"
)

// The helpers of the layers' FLOPs methods (registry.FLOPCounter): each
// layer counts its own products in its file, with these.

// noFLOPs is the count of a layer that computes no products (it copies,
// compares or works elementwise), once OutputShape has checked its inputs.
func noFLOPs(_ tensor.Shape, err error) (int64, error) { return 0, err }

// headFLOPs counts heads independent heads, each with its own projections
// from dIn to dOut.
func headFLOPs(inputs []tensor.Shape, heads, dIn, dOut int) (int64, error) {
	x, err := oneFLOPInput(inputs, "d_in", dIn)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.linear(x.rows(), dIn, 3*heads*dOut)
	c.attention(x.B, heads, x.T, x.T, dOut, dOut)
	return c.result()
}

// oneFLOPInput reads the shape of a layer's single input, checking its
// width against field (unless field is empty).
func oneFLOPInput(inputs []tensor.Shape, field string, width int) (seqs, error) {
	if len(inputs) != 1 {
		return seqs{}, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	s, err := shapeSeqs(inputs[0])
	if err == nil && field != "" {
		err = s.expectWidth(field, width)
	}
	return s, err
}

// errFLOPOverflow is the error of a count beyond int64.
var errFLOPOverflow = errors.New("FLOP count overflows int64")

// flopCount sums the FLOPs of matrix products, failing on overflow
// instead of wrapping around.
type flopCount struct {
	n        int64
	overflow bool
}

// product adds 2·(the product of dims): the FLOPs of that many
// multiply-adds.
func (c *flopCount) product(dims ...int) {
	p := int64(2)
	for _, d := range dims {
		if d < 0 || d > 0 && p > math.MaxInt64/int64(d) {
			c.overflow = true
			return
		}
		p *= int64(d)
	}
	if c.n > math.MaxInt64-p {
		c.overflow = true
		return
	}
	c.n += p
}

// linear adds rows tokens multiplied by an (in, out) weight.
func (c *flopCount) linear(rows, in, out int) { c.product(rows, in, out) }

// attention adds QKᵀ and the weights times V for b sequences of heads
// heads, tq queries against tk keys of width dk (values dv).
func (c *flopCount) attention(b, heads, tq, tk, dk, dv int) {
	c.product(b, heads, tq, tk, dk)
	c.product(b, heads, tq, tk, dv)
}

func (c *flopCount) result() (int64, error) {
	if c.overflow {
		return 0, errFLOPOverflow
	}
	return c.n, nil
}

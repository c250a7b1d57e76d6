package layers

import (
	"errors"
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Output shapes of the built-in layers (registry.OutputShaper), from input
// shapes alone: `attnrun inspect` describes a model with them, allocating
// nothing. Like the FLOP counts, they read the exported config fields,
// resolved to their defaults as Validate resolves them, and check what the
// forward pass checks of the shapes: rank, widths, context length, batch
// agreement. Mask inputs are counted, not checked: they do not shape the
// output.

var (
	_ registry.OutputShaper = (*Simple)(nil)
	_ registry.OutputShaper = (*Self)(nil)
	_ registry.OutputShaper = (*Causal)(nil)
	_ registry.OutputShaper = (*MultiHeadWrapper)(nil)
	_ registry.OutputShaper = (*MultiHead)(nil)
	_ registry.OutputShaper = (*Average)(nil)
	_ registry.OutputShaper = (*SDPA)(nil)
	_ registry.OutputShaper = (*TorchMHA)(nil)
	_ registry.OutputShaper = (*Linear)(nil)
	_ registry.OutputShaper = (*MLP)(nil)
	_ registry.OutputShaper = (*LearnedPosition)(nil)
	_ registry.OutputShaper = (*SinusoidalPosition)(nil)
	_ registry.OutputShaper = (*RoPE)(nil)
	_ registry.OutputShaper = (*ALiBi)(nil)
	_ registry.OutputShaper = (*LayerNorm)(nil)
	_ registry.OutputShaper = (*RMSNorm)(nil)
	_ registry.OutputShaper = (*GELU)(nil)
	_ registry.OutputShaper = (*Dropout)(nil)
	_ registry.OutputShaper = (*Concat)(nil)
	_ registry.OutputShaper = (*Add)(nil)
	_ registry.OutputShaper = (*LinearAttention)(nil)
	_ registry.OutputShaper = (*MLA)(nil)
)

// OutputShape is the input's shape: the attention keeps the width.
func (s *Simple) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "", 0)
}

// OutputShape is the input's shape with width d_out.
func (s *Self) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return widthShape(inputs, "d_in", s.DIn, 0, s.DOut)
}

// OutputShape is the input's shape with width d_out; T may not exceed
// context_length.
func (c *Causal) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return widthShape(inputs, "d_in", c.DIn, c.ContextLength, c.DOut)
}

// OutputShape is the input's shape with width num_heads·d_out; T may not
// exceed context_length.
func (m *MultiHeadWrapper) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if m.NumHeads <= 0 || m.DOut <= 0 || m.DOut > math.MaxInt/m.NumHeads {
		return nil, fmt.Errorf("num_heads %d × d_out %d is not a width", m.NumHeads, m.DOut)
	}
	return widthShape(inputs, "d_in", m.DIn, m.ContextLength, m.NumHeads*m.DOut)
}

// OutputShape is the input's shape with width d_out; T may not exceed
// context_length.
func (m *MultiHead) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return widthShape(inputs, "d_in", m.DIn, m.ContextLength, m.DOut)
}

// OutputShape is the input's shape.
func (a *Average) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "", 0)
}

// OutputShape is the input's shape.
func (l *LinearAttention) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", l.D)
}

// OutputShape is the input's shape.
func (m *MLA) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", m.D)
}

// OutputShape is x's shape: the output has x's width d.
func (s *SDPA) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	streams := len(inputs)
	if s.Mask != "" {
		streams--
	}
	if streams < 1 || streams > 2 {
		return nil, fmt.Errorf("takes [x] or [x, memory] (then the mask, if configured), got %d input(s)", len(inputs))
	}
	x, err := shapeSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	if err := x.expectWidth("d", s.D); err != nil {
		return nil, err
	}
	if streams == 2 {
		dMemory := s.DMemory
		if dMemory == 0 {
			dMemory = s.D
		}
		m, err := shapeSeqs(inputs[1])
		if err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		if m.D != dMemory {
			return nil, fmt.Errorf("d_memory mismatch: memory last dim %d, layer expects d_memory %d", m.D, dMemory)
		}
		if m.B != x.B || m.batched != x.batched {
			return nil, fmt.Errorf("memory shape %s does not match x %s: want the same batch", fmtShape(m.shape(m.D)), fmtShape(x.shape(x.D)))
		}
	}
	return x.shape(x.D), nil
}

// OutputShape is the query's shape, in its layout (sequence first unless
// batch_first): nn.MultiheadAttention's attn_output.
func (m *TorchMHA) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	e, kdim, vdim := m.EmbedDim, m.KDim, m.VDim
	if kdim == 0 {
		kdim = e
	}
	if vdim == 0 {
		vdim = e
	}
	streams := len(inputs)
	for _, mask := range []string{m.KeyPaddingMask, m.AttnMask} {
		if mask != "" {
			streams--
		}
	}
	if streams < 1 || streams > 3 {
		return nil, fmt.Errorf("takes [query], [query, memory] or [query, key, value], then the masks; got %d input(s)", len(inputs))
	}
	names, widths := []string{"query", "key", "value"}, []int{e, kdim, vdim}
	var ins [3]seqs
	for i := range ins {
		s, err := shapeSeqs(inputs[min(i, streams-1)])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
		if s.D != widths[i] {
			return nil, fmt.Errorf("%s has width %d, want %d", names[i], s.D, widths[i])
		}
		if s.batched && !m.BatchFirst { // (L, B, E): sequence first
			s.B, s.T = s.T, s.B
		}
		ins[i] = s
	}
	q, k, v := ins[0], ins[1], ins[2]
	if k.batched != q.batched || k.B != q.B {
		return nil, fmt.Errorf("key shape %s does not match query shape %s: want the same batch",
			fmtShape(inputs[min(1, streams-1)]), fmtShape(inputs[0]))
	}
	if v.batched != k.batched || v.B != k.B || v.T != k.T {
		return nil, fmt.Errorf("value shape %s does not match key shape %s: want the same batch and length",
			fmtShape(inputs[streams-1]), fmtShape(inputs[min(1, streams-1)]))
	}
	return inputs[0].Clone(), nil
}

// OutputShape is the input's shape with width d_out.
func (l *Linear) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return widthShape(inputs, "d_in", l.DIn, 0, l.DOut)
}

// OutputShape is the input's shape.
func (m *MLP) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", m.D)
}

// OutputShape is the input's shape; T may not exceed context_length.
func (p *LearnedPosition) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) == 2 { // position_ids: any position below context_length
		return widthShape(inputs[:1], "d", p.D, 0, p.D)
	}
	return widthShape(inputs, "d", p.D, p.ContextLength, p.D)
}

// OutputShape is the input's shape.
func (p *SinusoidalPosition) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", p.D)
}

// OutputShape is the input's shape, whose width head_dim must divide.
func (r *RoPE) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	shape, err := sameShape(inputs, "", 0)
	if err != nil {
		return nil, err
	}
	if d := shape[len(shape)-1]; r.HeadDim <= 0 || d%r.HeadDim != 0 {
		return nil, fmt.Errorf("head_dim %d does not divide the input width %d", r.HeadDim, d)
	}
	return shape, nil
}

// OutputShape is (num_heads, T, T), the bias for the input's T tokens.
func (a *ALiBi) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x, err := shapeSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	return tensor.Shape{a.NumHeads, x.T, x.T}, nil
}

// OutputShape is the input's shape.
func (n *LayerNorm) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", n.D)
}

// OutputShape is the input's shape.
func (n *RMSNorm) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", n.D)
}

// OutputShape is the input's shape.
func (g *GELU) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "", 0)
}

// OutputShape is the input's shape.
func (d *Dropout) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "", 0)
}

// OutputShape is the inputs' shape with their widths summed; the leading
// dimensions must agree.
func (c *Concat) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	ins, err := shapeAll(inputs, "the leading dimensions of", func(first, s seqs) bool {
		return first.batched == s.batched && first.B == s.B && first.T == s.T
	})
	if err != nil {
		return nil, err
	}
	width := 0
	for _, in := range ins {
		if width > math.MaxInt-in.D {
			return nil, errors.New("the summed width overflows int")
		}
		width += in.D
	}
	return ins[0].shape(width), nil
}

// OutputShape is the inputs' common shape.
func (a *Add) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	ins, err := shapeAll(inputs, "the shape of", func(first, s seqs) bool {
		return first.batched == s.batched && first.B == s.B && first.T == s.T && first.D == s.D
	})
	if err != nil {
		return nil, err
	}
	return ins[0].shape(ins[0].D), nil
}

// shapeSeqs is readSeqs for a shape: a (T, d) or (B, T, d) input with no
// empty dimension.
func shapeSeqs(shape tensor.Shape) (seqs, error) {
	if len(shape) != 2 && len(shape) != 3 {
		return seqs{}, fmt.Errorf("input shape %s: want (T, d) or (B, T, d)", fmtShape(shape))
	}
	for _, n := range shape {
		if n <= 0 {
			return seqs{}, fmt.Errorf("input shape %s has an empty dimension", fmtShape(shape))
		}
	}
	if len(shape) == 3 {
		return seqs{B: shape[0], T: shape[1], D: shape[2], batched: true}, nil
	}
	return seqs{B: 1, T: shape[0], D: shape[1]}, nil
}

// widthShape is the output shape of a single-input layer mapping width
// field = in to width out, with at most contextLength tokens (0: any).
func widthShape(inputs []tensor.Shape, field string, in, contextLength, out int) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x, err := shapeSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	if err := x.expectWidth(field, in); err != nil {
		return nil, err
	}
	if contextLength > 0 {
		if err := checkContext(x.T, contextLength); err != nil {
			return nil, err
		}
	}
	return x.shape(out), nil
}

// sameShape is the output shape of a single-input layer that keeps the
// shape; field, unless empty, names the width it requires.
func sameShape(inputs []tensor.Shape, field string, width int) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x, err := shapeSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	if field != "" {
		if err := x.expectWidth(field, width); err != nil {
			return nil, err
		}
	}
	return x.shape(x.D), nil
}

// shapeAll is readAll for shapes.
func shapeAll(inputs []tensor.Shape, rule string, fits func(first, s seqs) bool) ([]seqs, error) {
	if len(inputs) == 0 {
		return nil, errors.New("takes 1 or more inputs, got 0")
	}
	ins := make([]seqs, len(inputs))
	for i, shape := range inputs {
		s, err := shapeSeqs(shape)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		if i > 0 && !fits(ins[0], s) {
			return nil, fmt.Errorf("input %d has shape %s, want %s input 0 %s",
				i, fmtShape(s.shape(s.D)), rule, fmtShape(ins[0].shape(ins[0].D)))
		}
		ins[i] = s
	}
	return ins, nil
}

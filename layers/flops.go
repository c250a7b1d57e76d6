package layers

import (
	"errors"
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// FLOP counts of the built-in layers, by registry.FLOPCounter's rules:
// 2·m·n·k per matrix product, attention dense over all Tq×Tk pairs (no
// causal halving), elementwise work not counted. The counts read the
// exported config fields, resolved to their defaults as Validate resolves
// them, so they describe the layer as configured, whatever its kernels.

var (
	_ registry.FLOPCounter = (*Simple)(nil)
	_ registry.FLOPCounter = (*Self)(nil)
	_ registry.FLOPCounter = (*Causal)(nil)
	_ registry.FLOPCounter = (*MultiHeadWrapper)(nil)
	_ registry.FLOPCounter = (*MultiHead)(nil)
	_ registry.FLOPCounter = (*Average)(nil)
	_ registry.FLOPCounter = (*SDPA)(nil)
	_ registry.FLOPCounter = (*TorchMHA)(nil)
	_ registry.FLOPCounter = (*Linear)(nil)
	_ registry.FLOPCounter = (*MLP)(nil)
	_ registry.FLOPCounter = (*LearnedPosition)(nil)
	_ registry.FLOPCounter = (*SinusoidalPosition)(nil)
	_ registry.FLOPCounter = (*RoPE)(nil)
	_ registry.FLOPCounter = (*ALiBi)(nil)
	_ registry.FLOPCounter = (*LayerNorm)(nil)
	_ registry.FLOPCounter = (*RMSNorm)(nil)
	_ registry.FLOPCounter = (*GELU)(nil)
	_ registry.FLOPCounter = (*Dropout)(nil)
	_ registry.FLOPCounter = (*Concat)(nil)
	_ registry.FLOPCounter = (*Add)(nil)
)

// FLOPs counts QKᵀ and the weights times X over the input itself:
// 4·B·T²·d.
func (s *Simple) FLOPs(inputs []tensor.Shape) (int64, error) {
	x, err := oneFLOPInput(inputs, "", 0)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.attention(x.b, 1, x.t, x.t, x.d, x.d)
	return c.result()
}

// FLOPs counts the three projections and the attention products:
// 2·B·T·d_in·3·d_out + 4·B·T²·d_out.
func (s *Self) FLOPs(inputs []tensor.Shape) (int64, error) {
	return headFLOPs(inputs, 1, s.DIn, s.DOut)
}

// FLOPs counts the three projections and the attention products:
// 2·B·T·d_in·3·d_out + 4·B·T²·d_out, the causal half included.
func (c *Causal) FLOPs(inputs []tensor.Shape) (int64, error) {
	return headFLOPs(inputs, 1, c.DIn, c.DOut)
}

// FLOPs counts num_heads single heads:
// H·(2·B·T·d_in·3·d_out + 4·B·T²·d_out).
func (m *MultiHeadWrapper) FLOPs(inputs []tensor.Shape) (int64, error) {
	if err := positive("num_heads", m.NumHeads); err != nil {
		return 0, err
	}
	return headFLOPs(inputs, m.NumHeads, m.DIn, m.DOut)
}

// headFLOPs counts heads independent heads, each with its own projections
// from dIn to dOut.
func headFLOPs(inputs []tensor.Shape, heads, dIn, dOut int) (int64, error) {
	x, err := oneFLOPInput(inputs, "d_in", dIn)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.linear(x.rows(), dIn, 3*heads*dOut)
	c.attention(x.b, heads, x.t, x.t, dOut, dOut)
	return c.result()
}

// FLOPs counts the q, k, v projections, the attention products of all
// heads and out_proj: 2·B·T·d_in·3·d_out + 4·B·T²·d_out + 2·B·T·d_out².
func (m *MultiHead) FLOPs(inputs []tensor.Shape) (int64, error) {
	if err := positive("num_heads", m.NumHeads); err != nil {
		return 0, err
	}
	x, err := oneFLOPInput(inputs, "d_in", m.DIn)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.linear(x.rows(), m.DIn, 3*m.DOut)
	c.attention(x.b, m.NumHeads, x.t, x.t, m.DOut/m.NumHeads, m.DOut/m.NumHeads)
	c.linear(x.rows(), m.DOut, m.DOut)
	return c.result()
}

// FLOPs returns 0: the layer computes running means, with no matrix
// product (as attention with equal scores it would count 4·B·T²·d).
func (a *Average) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// FLOPs counts q_proj on x, k_proj and v_proj on the keys' source (x, or
// the memory of cross-attention), the attention products of num_heads
// query heads (grouped-query attention shares keys, not products), and
// out_proj. RoPE, ALiBi, softcap, qk_norm, sinks, score modifications and
// masks are elementwise: not counted.
func (s *SDPA) FLOPs(inputs []tensor.Shape) (int64, error) {
	if err := positive("num_heads", s.NumHeads); err != nil {
		return 0, err
	}
	// The defaults Validate resolves.
	dMemory, kvHeads, headDim := s.DMemory, s.NumKVHeads, s.HeadDim
	if dMemory == 0 {
		dMemory = s.D
	}
	if kvHeads == 0 {
		kvHeads = s.NumHeads
	}
	if headDim == 0 {
		headDim = s.D / s.NumHeads
	}
	streams := len(inputs)
	if s.Mask != "" {
		streams-- // the mask, last, is elementwise
	}
	if streams < 1 || streams > 2 {
		return 0, fmt.Errorf("takes [x] or [x, memory] (then the mask, if configured), got %d input(s)", len(inputs))
	}
	x, err := flopInput("x", inputs[0], "d", s.D)
	if err != nil {
		return 0, err
	}
	kv := x
	if streams == 2 {
		if kv, err = flopInput("memory", inputs[1], "d_memory", dMemory); err != nil {
			return 0, err
		}
	}
	var c flopCount
	c.linear(x.rows(), s.D, s.NumHeads*headDim)
	c.linear(kv.rows(), kv.d, 2*kvHeads*headDim)
	c.attention(x.b, s.NumHeads, x.t, kv.t, headDim, headDim)
	c.linear(x.rows(), s.NumHeads*headDim, s.D)
	return c.result()
}

// FLOPs counts the in-projections of query, key and value, the attention
// products over the keys (bias_k and the zero key of add_zero_attn
// included) and out_proj: with L queries, S keys and E = embed_dim,
// 2·B·L·E² + 2·B·S·(kdim+vdim)·E + 4·B·L·S'·E + 2·B·L·E², S' = S + extras.
func (m *TorchMHA) FLOPs(inputs []tensor.Shape) (int64, error) {
	if err := positive("num_heads", m.NumHeads); err != nil {
		return 0, err
	}
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
		return 0, fmt.Errorf("takes [query], [query, memory] or [query, key, value] (then the masks), got %d input(s)", len(inputs))
	}
	names, fields := []string{"query", "key", "value"}, []string{"embed_dim", "kdim", "vdim"}
	widths := []int{e, kdim, vdim}
	var ins [3]flopSeqs
	for i := range ins {
		shape := inputs[min(i, streams-1)]
		if len(shape) == 3 && !m.BatchFirst { // (L, B, E): sequence first
			shape = tensor.Shape{shape[1], shape[0], shape[2]}
		}
		var err error
		if ins[i], err = flopInput(names[i], shape, fields[i], widths[i]); err != nil {
			return 0, err
		}
	}
	q, k := ins[0], ins[1]
	keys := k.t
	if m.AddBiasKV {
		keys++
	}
	if m.AddZeroAttn {
		keys++
	}
	var c flopCount
	c.linear(q.rows(), e, e)
	c.linear(k.rows(), kdim, e)
	c.linear(ins[2].rows(), vdim, e)
	c.attention(q.b, m.NumHeads, q.t, keys, e/m.NumHeads, e/m.NumHeads)
	c.linear(q.rows(), e, e)
	return c.result()
}

// FLOPs counts the product with the weight, 2·B·T·d_in·d_out; the bias
// add is elementwise.
func (l *Linear) FLOPs(inputs []tensor.Shape) (int64, error) {
	x, err := oneFLOPInput(inputs, "d_in", l.DIn)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.linear(x.rows(), l.DIn, l.DOut)
	return c.result()
}

// FLOPs counts the projections: 2·B·T·d·d_hidden for each of fc1 and fc2,
// or of gate_proj, up_proj and down_proj.
func (m *MLP) FLOPs(inputs []tensor.Shape) (int64, error) {
	x, err := oneFLOPInput(inputs, "d", m.D)
	if err != nil {
		return 0, err
	}
	projections := 2
	if m.Gated {
		projections = 3
	}
	var c flopCount
	c.linear(x.rows(), m.D, projections*m.DHidden)
	return c.result()
}

// FLOPs returns 0: adding the embedding is elementwise.
func (p *LearnedPosition) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// FLOPs returns 0: adding the encoding is elementwise.
func (p *SinusoidalPosition) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// FLOPs returns 0: the rotation is elementwise.
func (r *RoPE) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// FLOPs returns 0: the bias is computed element by element.
func (a *ALiBi) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// FLOPs returns 0: normalization is elementwise.
func (n *LayerNorm) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// FLOPs returns 0: normalization is elementwise.
func (n *RMSNorm) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// FLOPs returns 0: the activation is elementwise.
func (g *GELU) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// FLOPs returns 0: dropout is elementwise.
func (d *Dropout) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// FLOPs returns 0: concatenation moves data only.
func (c *Concat) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// FLOPs returns 0: the sum is elementwise.
func (a *Add) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// flopSeqs is an input shape seen as b sequences of t tokens of width d.
type flopSeqs struct{ b, t, d int }

func (s flopSeqs) rows() int { return s.b * s.t }

// oneFLOPInput reads the shape of a layer's single input, checking its
// width against field (unless field is empty).
func oneFLOPInput(inputs []tensor.Shape, field string, width int) (flopSeqs, error) {
	if len(inputs) != 1 {
		return flopSeqs{}, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	return flopInput("input", inputs[0], field, width)
}

// flopInput reads a (T, d) or (B, T, d) shape, checking its width against
// field (unless field is empty). name says which input it is, for errors.
func flopInput(name string, shape tensor.Shape, field string, width int) (flopSeqs, error) {
	if len(shape) != 2 && len(shape) != 3 {
		return flopSeqs{}, fmt.Errorf("%s shape %s: want (T, d) or (B, T, d)", name, fmtShape(shape))
	}
	for _, n := range shape {
		if n <= 0 {
			return flopSeqs{}, fmt.Errorf("%s shape %s has an empty dimension", name, fmtShape(shape))
		}
	}
	s := flopSeqs{b: 1, t: shape[0], d: shape[1]}
	if len(shape) == 3 {
		s = flopSeqs{b: shape[0], t: shape[1], d: shape[2]}
	}
	if field != "" && s.d != width {
		return flopSeqs{}, fmt.Errorf("%s mismatch: %s last dim %d, layer expects %s %d", field, name, s.d, field, width)
	}
	return s, nil
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

package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// RoPE is position.rope, the rotary position embedding of Su et al.
// (RoFormer): each head of the input is split into pairs of dimensions, and
// the pair i of the token at position p is rotated by the angle
// p·θ_i with θ_i = base^(−2i/rotary_dim). Dimensions past rotary_dim pass
// through unchanged (partial rotary, as GPT-J, GPT-NeoX and Phi use it).
//
// Style "half" pairs dimension i with i + rotary_dim/2, as GPT-NeoX, Llama
// and Hugging Face's rotate_half do; "interleaved" pairs 2i with 2i+1, as
// GPT-J and the RoFormer paper do. The angles are computed in float64 and
// rounded once, so at long positions they are more exact than Hugging
// Face's float32 inv_freq·t (which drifts by about 6e-8·p radians).
//
// RoPE acts on queries and keys, which exist only inside attention: a
// model normally uses attention.sdpa's rope option. This layer applies the
// same rotation to a (T, H·head_dim) or (B, T, H·head_dim) input at
// positions 0..T−1, for custom pipelines and for tests.
type RoPE struct {
	noParams `yaml:"-"` // the rotation has no parameters.
	// HeadDim is the width of one head; it must divide the input width.
	HeadDim int `yaml:"head_dim"`
	// Style is "half" (default; GPT-NeoX, Llama) or "interleaved" (GPT-J).
	Style string `yaml:"style"`
	// Base is θ of the frequencies (default 10000).
	Base float64 `yaml:"base"`
	// RotaryDim is how many leading dimensions of each head rotate (even;
	// default 0 means all of head_dim).
	RotaryDim int `yaml:"rotary_dim"`

	rot *rotary
}

var (
	_ registry.Layer        = (*RoPE)(nil)
	_ registry.Stepper      = (*RoPE)(nil)
	_ registry.OutputShaper = (*RoPE)(nil)
	_ registry.FLOPCounter  = (*RoPE)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "position.rope",
		Summary: "rotary position embedding of each head (RoPE: GPT-NeoX/Llama half-split or GPT-J interleaved)",
		New:     func() registry.Layer { return &RoPE{Style: "half", Base: 10000} },
	})
}

// Validate checks head_dim, the style, the base and rotary_dim.
func (r *RoPE) Validate() error {
	r.rot = nil
	if err := positive("head_dim", r.HeadDim); err != nil {
		return err
	}
	rot, err := newRotary(ropeFields, r.Style, r.Base, r.RotaryDim, r.HeadDim)
	if err != nil {
		return err
	}
	r.rot = rot
	return nil
}

// Forward rotates every head of every token by its position 0..T−1.
func (r *RoPE) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(r.rot != nil, inputs)
	if err != nil {
		return nil, err
	}
	return r.rotate(run, in, 0)
}

// NewState starts a session at position 0.
func (r *RoPE) NewState() registry.State { return &positionState{} }

// Step rotates the new tokens by their positions in the session.
func (r *RoPE) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	return positionStep(run, state, inputs, r.rotate)
}

// rotate returns a rotated copy of in, whose tokens sit at positions
// pos0, pos0+1, ... (Step reaches it without a Validate check of its own).
func (r *RoPE) rotate(run *registry.Run, in seqs, pos0 int) (*tensor.Dense, error) {
	if r.rot == nil {
		return nil, errNotValidated
	}
	if in.D%r.rot.headDim != 0 {
		return nil, fmt.Errorf("head_dim %d does not divide the input width %d", r.rot.headDim, in.D)
	}
	out, data := in.newOutput(run, in.D)
	copy(data, in.data)
	r.rot.apply(data, in.D, in.B, in.T, in.D/r.rot.headDim, pos0)
	return out, nil
}

// rotary is a configured rotary embedding, shared by position.rope and
// attention.sdpa's rope option.
type rotary struct {
	interleaved bool
	base        float64
	dim         int // rotating dimensions per head, even
	headDim     int
}

// rotaryFields names the config fields of a rotary embedding, for errors.
type rotaryFields struct{ style, base, dim string }

// ropeFields are position.rope's field names.
var ropeFields = rotaryFields{style: "style", base: "base", dim: "rotary_dim"}

// newRotary validates a rotary configuration whose fields are called
// names. A zero base or rotary dimension means the default (10000, all of
// headDim).
func newRotary(names rotaryFields, style string, base float64, rotaryDim, headDim int) (*rotary, error) {
	r := &rotary{base: base, dim: rotaryDim, headDim: headDim}
	switch style {
	case "half":
	case "interleaved":
		r.interleaved = true
	default:
		return nil, fmt.Errorf("%s %q is not \"half\" (GPT-NeoX, Llama) or \"interleaved\" (GPT-J)", names.style, style)
	}
	if r.base == 0 {
		r.base = 10000
	}
	if !(r.base > 1) || math.IsInf(r.base, 0) {
		return nil, fmt.Errorf("%s must be a finite number above 1, got %g", names.base, base)
	}
	if r.dim == 0 {
		r.dim = headDim
	}
	if r.dim < 0 || r.dim > headDim || r.dim%2 != 0 {
		return nil, fmt.Errorf("%s must be even and at most the head size %d, got %d", names.dim, headDim, r.dim)
	}
	return r, nil
}

// apply rotates x in place: rows b·tokens+t with row stride ld, each
// holding heads heads of headDim values; token t sits at position pos0+t.
func (r *rotary) apply(x []float32, ld, seqs, tokens, heads, pos0 int) {
	half := r.dim / 2
	cos := make([]float32, half)
	sin := make([]float32, half)
	for t := range tokens {
		r.angles(cos, sin, pos0+t)
		for b := range seqs {
			row := x[(b*tokens+t)*ld:]
			for h := range heads {
				r.rotateHead(row[h*r.headDim:h*r.headDim+r.dim], cos, sin)
			}
		}
	}
}

// angles fills the cosines and sines of position p for each pair.
func (r *rotary) angles(cos, sin []float32, p int) {
	for i := range cos {
		theta := math.Pow(r.base, -float64(2*i)/float64(r.dim))
		s, c := math.Sincos(float64(p) * theta)
		cos[i], sin[i] = float32(c), float32(s)
	}
}

// rotateHead rotates the rotating dimensions x of one head.
func (r *rotary) rotateHead(x, cos, sin []float32) {
	half := len(cos)
	for i := range half {
		a, b := 2*i, 2*i+1
		if !r.interleaved {
			a, b = i, i+half
		}
		xa, xb := x[a], x[b]
		x[a] = xa*cos[i] - xb*sin[i]
		x[b] = xb*cos[i] + xa*sin[i]
	}
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

// FLOPs returns 0: the rotation is elementwise.
func (r *RoPE) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

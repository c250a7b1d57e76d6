package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// SinusoidalPosition is position.sinusoidal, the fixed position encoding of
// "Attention Is All You Need" added to the input: token p gets
//
//	PE(p, 2i)   = sin(p / base^(2i/d))
//	PE(p, 2i+1) = cos(p / base^(2i/d))
//
// the PositionalEncoding of PyTorch's transformer tutorial (without its
// dropout; add nn.dropout after it). The encoding is computed in float64 and
// rounded once, so it is slightly more exact than the tutorial's float32
// table, which drifts from it by up to about 6e-8·p.
type SinusoidalPosition struct {
	noParams `yaml:"-"` // the encoding is fixed.
	// D is the width of the input tokens.
	D int `yaml:"d"`
	// Base is the wavelength scale (default 10000).
	Base float64 `yaml:"base"`

	d    int // 0 until a successful Validate
	base float64
}

var (
	_ registry.Layer        = (*SinusoidalPosition)(nil)
	_ registry.Stepper      = (*SinusoidalPosition)(nil)
	_ registry.OutputShaper = (*SinusoidalPosition)(nil)
	_ registry.FLOPCounter  = (*SinusoidalPosition)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "position.sinusoidal",
		Summary: "fixed sine/cosine position encoding added to the input (Vaswani et al.)",
		New:     func() registry.Layer { return &SinusoidalPosition{Base: 10000} },
	})
}

// Validate checks d and the base.
func (p *SinusoidalPosition) Validate() error {
	p.d = 0
	if err := positive("d", p.D); err != nil {
		return err
	}
	if !(p.Base > 0) || math.IsInf(p.Base, 0) {
		return fmt.Errorf("base must be a positive finite number, got %g", p.Base)
	}
	p.d, p.base = p.D, p.Base
	return nil
}

// Forward adds the encoding of positions 0..T−1.
func (p *SinusoidalPosition) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(p.d != 0, inputs)
	if err != nil {
		return nil, err
	}
	return p.add(run, in, 0)
}

// NewState starts a session at position 0.
func (p *SinusoidalPosition) NewState() registry.State { return &positionState{} }

// Step adds the encoding of the new tokens' positions.
func (p *SinusoidalPosition) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	return positionStep(run, state, inputs, p.add)
}

// add returns in plus the encoding of positions pos0, pos0+1, ... (Step
// reaches it without a Validate check of its own).
func (p *SinusoidalPosition) add(run *registry.Run, in seqs, pos0 int) (*tensor.Dense, error) {
	if p.d == 0 {
		return nil, errNotValidated
	}
	if err := in.expectWidth("d", p.d); err != nil {
		return nil, err
	}
	out, data := in.newOutput(run, in.D)
	pe := make([]float32, in.D)
	for t := range in.T {
		sinusoid(pe, pos0+t, p.base)
		for b := range in.B {
			row := (b*in.T + t) * in.D
			for j, v := range pe {
				data[row+j] = in.data[row+j] + v
			}
		}
	}
	return out, nil
}

// sinusoid fills pe with the encoding of position pos.
func sinusoid(pe []float32, pos int, base float64) {
	d := float64(len(pe))
	for j := 0; j < len(pe); j += 2 {
		angle := float64(pos) / math.Pow(base, float64(j)/d)
		s, c := math.Sincos(angle)
		pe[j] = float32(s)
		if j+1 < len(pe) {
			pe[j+1] = float32(c)
		}
	}
}

// OutputShape is the input's shape.
func (p *SinusoidalPosition) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", p.D)
}

// FLOPs returns 0: adding the encoding is elementwise.
func (p *SinusoidalPosition) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

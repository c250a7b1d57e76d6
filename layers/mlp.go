package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// MLP is nn.mlp, the position-wise feed-forward network of a transformer
// block, in one of two forms:
//
//   - plain: fc2(act(fc1(x))), as GPT-2's MLP, ViT's and OPT's (fc1, fc2) or
//     nn.Sequential(nn.Linear, nn.GELU, nn.Linear);
//   - gated: down_proj(act(gate_proj(x)) · up_proj(x)), Hugging Face's
//     LlamaMLP (SwiGLU with activation: silu; GeGLU with gelu).
//
// activation is gelu (erf), gelu_tanh, silu or relu.
type MLP struct {
	// D is the width of the input and output tokens.
	D int `yaml:"d"`
	// DHidden is the hidden width (intermediate_size).
	DHidden int `yaml:"d_hidden"`
	// Gated selects the gate/up/down form.
	Gated bool `yaml:"gated"`
	// Activation is "gelu" (default), "gelu_tanh", "silu" or "relu".
	Activation string `yaml:"activation"`
	// Bias gives every projection a bias (default true, as nn.Linear;
	// Llama has none).
	Bias bool `yaml:"bias"`

	c             *mlpPrepared
	packedWeights `yaml:"-"` // the packed copies of the weights (packs.go), ParamsChanged
}

func init() {
	registry.Register(registry.Info{
		ID:      "nn.mlp",
		Summary: "position-wise feed-forward: fc1, activation, fc2; or Llama's gated gate/up/down",
		New:     func() registry.Layer { return &MLP{Activation: "gelu", Bias: true} },
	})
}

// mlpPrepared is what Validate prepared.
type mlpPrepared struct {
	act activation
	// fc1 and fc2 (plain), or gate_proj, up_proj and down_proj (gated).
	names []string
	projs []*linearWeights
}

var (
	_ registry.Provisioner  = (*MLP)(nil)
	_ registry.TokenWise    = (*MLP)(nil)
	_ registry.OutputShaper = (*MLP)(nil)
	_ registry.FLOPCounter  = (*MLP)(nil)
)

// Validate checks the sizes and the activation and allocates zeroed
// projections.
func (m *MLP) Validate() error { return m.Provision(nil) }

// PlanParams lists the projections' parameters without allocating them.
func (m *MLP) PlanParams() ([]registry.ParamShape, error) { return planParams(m.prepare) }

// Provision checks the fields and allocates zeroed projections from mem.
func (m *MLP) Provision(mem registry.Memory) (err error) {
	m.c, m.packs, err = provisionPacked(mem, m.prepare)
	return err
}

func (m *MLP) prepare(a paramAlloc) (*mlpPrepared, error) {
	if err := firstError(positive("d", m.D), positive("d_hidden", m.DHidden)); err != nil {
		return nil, err
	}
	act, ok := activations[m.Activation]
	if !ok {
		return nil, fmt.Errorf("activation %q is not gelu, gelu_tanh, silu or relu", m.Activation)
	}
	c := &mlpPrepared{act: act}
	type proj struct {
		name    string
		in, out int
	}
	projs := []proj{{"fc1", m.D, m.DHidden}, {"fc2", m.DHidden, m.D}}
	if m.Gated {
		projs = []proj{{"gate_proj", m.D, m.DHidden}, {"up_proj", m.D, m.DHidden}, {"down_proj", m.DHidden, m.D}}
	}
	for _, p := range projs {
		w, err := newLinearWeights(a, p.name, p.in, p.out, m.Bias)
		if err != nil {
			return nil, err
		}
		c.names = append(c.names, p.name)
		c.projs = append(c.projs, w)
	}
	return c, nil
}

// Params lists fc1 then fc2, or gate_proj, up_proj, down_proj (Hugging
// Face's order), each nn.Linear's weight then bias.
func (m *MLP) Params() []registry.Param {
	if m.c == nil {
		return nil
	}
	var ps []registry.Param
	for i, p := range m.c.projs {
		ps = append(ps, p.params(m.c.names[i])...)
	}
	return ps
}

// Forward maps (T, d) or (B, T, d) to the same shape.
func (m *MLP) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(m.c != nil, inputs)
	if err != nil {
		return nil, err
	}
	first := m.c.projs[0]
	if err := in.expectWidth("d", first.in); err != nil {
		return nil, err
	}
	rows := in.rows()
	sc := getScratch(2 * rows * first.out)
	defer sc.release()
	hidden := sc.floats(rows * first.out) // every product overwrites its output
	first.apply(hidden, in.data, rows)
	applyActivation(hidden, hidden, m.c.act)
	if len(m.c.projs) == 3 {
		up := sc.floats(rows * first.out)
		m.c.projs[1].apply(up, in.data, rows)
		for i, u := range up {
			hidden[i] *= u
		}
	}
	last := m.c.projs[len(m.c.projs)-1]
	out, data := in.newOutput(run, last.out)
	last.apply(data, hidden, rows)
	return out, nil
}

// TokenWise marks the layer as token-wise for incremental decoding.
func (m *MLP) TokenWise() {}

// OutputShape is the input's shape.
func (m *MLP) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", m.D)
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

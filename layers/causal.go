package layers

import (
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Causal is attention.causal, single-head masked self-attention. It equals
// the seeds' CausalAttention module: nn.Linear projections, scores scaled by
// 1/√d_out, a causal mask of context_length, and nn.Dropout on the
// attention weights in train mode.
type Causal struct {
	// DIn is the width of the input tokens.
	DIn int `yaml:"d_in"`
	// DOut is the width of queries, keys, values and the output.
	DOut int `yaml:"d_out"`
	// ContextLength is the longest sequence the layer accepts (the size of
	// the seeds' mask buffer).
	ContextLength int `yaml:"context_length"`
	// Dropout is the probability of zeroing an attention weight in train mode.
	Dropout float64 `yaml:"dropout"`
	// QKVBias gives the three nn.Linear a bias.
	QKVBias bool `yaml:"qkv_bias"`

	head          *head
	packedWeights `yaml:"-"` // the packed copies of the weights (packs.go), ParamsChanged
}

var (
	_ registry.Provisioner  = (*Causal)(nil)
	_ registry.OutputShaper = (*Causal)(nil)
	_ registry.FLOPCounter  = (*Causal)(nil)
	_ registry.Stepper      = (*Causal)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.causal",
		Summary: "single-head causal self-attention with dropout on the weights (CausalAttention)",
		New:     func() registry.Layer { return &Causal{} },
	})
}

// Validate checks the sizes and the dropout probability, and allocates
// zeroed parameters.
func (c *Causal) Validate() error { return c.Provision(nil) }

// PlanParams lists the projections' parameters without allocating them.
func (c *Causal) PlanParams() ([]registry.ParamShape, error) { return planParams(c.prepare) }

// Provision checks the fields and allocates zeroed parameters from mem.
func (c *Causal) Provision(mem registry.Memory) (err error) {
	c.head, c.packs, err = provisionPacked(mem, c.prepare)
	return err
}

func (c *Causal) prepare(a paramAlloc) (*head, error) {
	return newCausalHead(a, "", c.DIn, c.DOut, c.ContextLength, c.Dropout, c.QKVBias)
}

// newCausalHead validates the fields of a CausalAttention and builds it; the
// wrapper uses it for each of its heads, whose names start with prefix.
func newCausalHead(a paramAlloc, prefix string, dIn, dOut, contextLength int, dropout float64, bias bool) (*head, error) {
	err := firstError(
		positive("d_in", dIn),
		positive("d_out", dOut),
		positive("context_length", contextLength),
		probability("dropout", dropout),
	)
	if err != nil {
		return nil, err
	}
	proj, err := newQKV(a, prefix, dIn, dOut, false, bias)
	if err != nil {
		return nil, err
	}
	return &head{
		proj: proj, scale: invSqrt(dOut), causal: true,
		dropout: dropout, contextLength: contextLength,
	}, nil
}

// Params lists W_query, W_key and W_value, each nn.Linear's weight then bias.
func (c *Causal) Params() []registry.Param {
	if c.head == nil {
		return nil
	}
	return c.head.proj.params("")
}

// Forward maps (T, d_in) or (B, T, d_in) to (T, d_out) or (B, T, d_out);
// T may not exceed context_length.
func (c *Causal) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if c.head == nil {
		return nil, errNotValidated
	}
	return c.head.forward(run, inputs)
}

// OutputShape is the input's shape with width d_out; T may not exceed
// context_length.
func (c *Causal) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return widthShape(inputs, "d_in", c.DIn, c.ContextLength, c.DOut)
}

// FLOPs counts the three projections and the attention products:
// 2·B·T·d_in·3·d_out + 4·B·T²·d_out, the causal half included.
func (c *Causal) FLOPs(inputs []tensor.Shape) (int64, error) {
	return headFLOPs(inputs, 1, c.DIn, c.DOut)
}

// NewState starts a decoding session with an empty KV cache.
func (c *Causal) NewState() registry.State { return &attentionState{} }

// Step attends the new tokens to every token so far; the session may not
// grow past context_length.
func (c *Causal) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if c.head == nil {
		return nil, errNotValidated
	}
	h := c.head
	in, st, err := stepStart(state, inputs, h.proj.in, h.contextLength, 1, h.proj.out)
	if err != nil {
		return nil, err
	}
	out, data := in.newOutput(run, h.proj.out)
	w, err := causalStep(run, in, h.proj, st.caches[0], 1, h.scale, h.dropout, data, h.proj.out)
	if err != nil {
		return nil, err
	}
	st.seqs, st.tokens = in.B, st.tokens+in.T
	observe(run, asWeights(w, in.B, 1, in.T, st.tokens))
	return out, nil
}

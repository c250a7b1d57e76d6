package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// MoE is nn.moe, Hugging Face's sparse mixture-of-experts block
// (MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock) in place of a
// transformer block's MLP. For each token x:
//
//	p = softmax(x·gateᵀ)                 (the router, in float32)
//	top_k experts e by p (ties to the lower index, as torch.topk),
//	their weights w_e = p_e, divided by their sum when renormalize is set
//	y = Σ w_e · down_e(act(gate_e(x)) · up_e(x))  (summed by ascending e)
//	  + σ(x·shared_expert_gateᵀ) · shared_expert(x)  (with a shared expert)
//
// Each expert is a gated MLP without biases whose gate and up projections
// are stacked as Hugging Face stores them: experts.gate_up_proj is
// (experts, 2·d_hidden, d), gate rows first, experts.down_proj is
// (experts, d, d_hidden).
type MoE struct {
	// D is the width of the input and output tokens (hidden_size).
	D int `yaml:"d"`
	// DHidden is each expert's hidden width (intermediate_size, or
	// moe_intermediate_size).
	DHidden int `yaml:"d_hidden"`
	// Experts is the number of experts (num_local_experts, num_experts).
	Experts int `yaml:"experts"`
	// TopK is how many experts each token is routed to
	// (num_experts_per_tok; default 2).
	TopK int `yaml:"top_k"`
	// Renormalize divides the top-k weights by their sum (default true,
	// Mixtral's; Qwen2-MoE's norm_topk_prob is false).
	Renormalize bool `yaml:"renormalize"`
	// Activation is the experts' "silu" (default), "gelu", "gelu_tanh" or
	// "relu".
	Activation string `yaml:"activation"`
	// SharedDHidden is the hidden width of Qwen2-MoE's shared expert
	// (shared_expert_intermediate_size), a gated MLP that every token
	// passes through, scaled by a sigmoid gate; 0 (default) means none.
	SharedDHidden int `yaml:"shared_d_hidden"`

	c *moePrepared
}

func init() {
	registry.Register(registry.Info{
		ID:      "nn.moe",
		Summary: "sparse mixture of experts: a softmax router picks top_k gated MLPs per token (Mixtral, Qwen2-MoE)",
		New:     func() registry.Layer { return &MoE{TopK: 2, Renormalize: true, Activation: "silu"} },
	})
}

// moePrepared is what Validate prepared.
type moePrepared struct {
	act    func(float64) float64 // the activation's scalar form, fused with the product by up
	router *linearWeights
	// gateUp and down are the experts' stacked weights; gateUps[e] and
	// downs[e] view expert e's.
	gateUp, down  *tensor.Dense
	gateUps       []*linearWeights
	downs         []*linearWeights
	shared        []*linearWeights // gate_proj, up_proj, down_proj; nil without a shared expert
	sharedGate    *linearWeights
	expertHidden  int
	sharedHidden  int
	width, chosen int
	renormalize   bool
}

// moeSharedNames are the shared expert's projections, as Hugging Face
// names them.
var moeSharedNames = []string{"shared_expert.gate_proj", "shared_expert.up_proj", "shared_expert.down_proj"}

var (
	_ registry.Provisioner  = (*MoE)(nil)
	_ registry.TokenWise    = (*MoE)(nil)
	_ registry.OutputShaper = (*MoE)(nil)
	_ registry.FLOPCounter  = (*MoE)(nil)
)

// Validate checks the sizes and the activation and allocates zeroed
// weights.
func (m *MoE) Validate() error { return m.Provision(nil) }

// PlanParams lists the parameters without allocating them.
func (m *MoE) PlanParams() ([]registry.ParamShape, error) { return planParams(m.prepare) }

// Provision checks the fields and allocates zeroed weights from mem.
func (m *MoE) Provision(mem registry.Memory) (err error) {
	m.c, err = provision(mem, m.prepare)
	return err
}

func (m *MoE) prepare(a paramAlloc) (*moePrepared, error) {
	if err := firstError(positive("d", m.D), positive("d_hidden", m.DHidden), positive("experts", m.Experts),
		positive("top_k", m.TopK)); err != nil {
		return nil, err
	}
	if m.TopK > m.Experts {
		return nil, fmt.Errorf("top_k %d exceeds experts %d", m.TopK, m.Experts)
	}
	if m.SharedDHidden < 0 {
		return nil, fmt.Errorf("shared_d_hidden %d: want 0 (no shared expert) or a positive width", m.SharedDHidden)
	}
	act, ok := activations[m.Activation]
	if !ok {
		return nil, fmt.Errorf("activation %q is not silu, gelu, gelu_tanh or relu", m.Activation)
	}
	c := &moePrepared{act: act.scalar, expertHidden: m.DHidden, sharedHidden: m.SharedDHidden, width: m.D, chosen: m.TopK,
		renormalize: m.Renormalize}
	var err error
	if c.router, err = newLinearWeights(a, "gate", m.D, m.Experts, false); err != nil {
		return nil, err
	}
	if c.gateUp, err = a.zeros("experts.gate_up_proj", m.Experts, 2*m.DHidden, m.D); err != nil {
		return nil, err
	}
	if c.down, err = a.zeros("experts.down_proj", m.Experts, m.D, m.DHidden); err != nil {
		return nil, err
	}
	if m.SharedDHidden > 0 {
		for i, p := range []struct{ in, out int }{{m.D, m.SharedDHidden}, {m.D, m.SharedDHidden}, {m.SharedDHidden, m.D}} {
			w, err := newLinearWeights(a, moeSharedNames[i], p.in, p.out, false)
			if err != nil {
				return nil, err
			}
			c.shared = append(c.shared, w)
		}
		if c.sharedGate, err = newLinearWeights(a, "shared_expert_gate", m.D, 1, false); err != nil {
			return nil, err
		}
	}
	if a.planning() {
		return c, nil
	}
	gateUp, down := floats(c.gateUp), floats(c.down)
	per := 2 * m.DHidden * m.D
	for e := range m.Experts {
		c.gateUps = append(c.gateUps, viewLinearWeights(m.D, 2*m.DHidden, gateUp[e*per:], nil))
		c.downs = append(c.downs, viewLinearWeights(m.DHidden, m.D, down[e*per/2:], nil))
	}
	return c, nil
}

// Params lists gate.weight, experts.gate_up_proj, experts.down_proj and,
// with a shared expert, shared_expert.{gate,up,down}_proj.weight and
// shared_expert_gate.weight: Hugging Face's names and order.
func (m *MoE) Params() []registry.Param {
	if m.c == nil {
		return nil
	}
	normal := registry.NormalInit(0, 0.02) // Hugging Face's initializer_range
	ps := []registry.Param{
		{Name: "gate.weight", Value: m.c.router.weight, Init: normal},
		{Name: "experts.gate_up_proj", Value: m.c.gateUp, Init: normal},
		{Name: "experts.down_proj", Value: m.c.down, Init: normal},
	}
	for i, w := range m.c.shared {
		ps = append(ps, w.params(moeSharedNames[i])...)
	}
	if m.c.sharedGate != nil {
		ps = append(ps, m.c.sharedGate.params("shared_expert_gate")...)
	}
	return ps
}

// Forward maps (T, d) or (B, T, d) to the same shape.
func (m *MoE) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(m.c != nil, inputs)
	if err != nil {
		return nil, err
	}
	c := m.c
	if err := in.expectWidth("d", c.width); err != nil {
		return nil, err
	}
	rows, experts := in.rows(), len(c.gateUps)
	logits := make([]float32, rows*experts)
	c.router.apply(logits, in.data, rows)
	routed := make([][]moeRoute, experts)
	var picks []moePick
	for r := range rows {
		picks = c.route(picks[:0], logits[r*experts:(r+1)*experts])
		for _, pick := range picks {
			routed[pick.expert] = append(routed[pick.expert], moeRoute{row: r, weight: pick.weight})
		}
	}
	most := 0
	for _, routes := range routed {
		most = max(most, len(routes))
	}
	need := most * (c.width + 3*c.expertHidden)
	if c.shared != nil {
		need = max(need, rows*(2*c.sharedHidden+c.width+1))
	}
	sc := getScratch(need) // every product overwrites its output
	defer sc.release()
	out, y := in.newOutput(run, c.width)
	clear(y)
	for e, routes := range routed {
		if len(routes) > 0 {
			sc.used = 0
			c.addExpert(y, in.data, e, routes, sc)
		}
	}
	if c.shared != nil {
		sc.used = 0
		c.addShared(y, in.data, rows, sc)
	}
	return out, nil
}

// moeRoute is one token's share of an expert: its row and the router's
// weight.
type moeRoute struct {
	row    int
	weight float32
}

// moePick is one of a token's top-k experts and its weight.
type moePick struct {
	expert int
	weight float32
}

// route appends to picks one token's top-k experts and their weights,
// from its router logits (which it overwrites with the probabilities): the
// softmax in float32, the k largest probabilities (the lower index first
// among equals, as ONNX's TopK keeps them), renormalized to sum to 1 when
// the layer says so.
func (c *moePrepared) route(picks []moePick, logits []float32) []moePick {
	peak := math.Inf(-1)
	for _, v := range logits {
		peak = max(peak, float64(v))
	}
	probs := logits
	var sum float64
	for i, v := range logits {
		e := float32(math.Exp(float64(v) - peak))
		probs[i] = e
		sum += float64(e)
	}
	for i := range probs {
		probs[i] = float32(float64(probs[i]) / sum)
	}
	first := len(picks)
	var total float32
	for range c.chosen {
		best := -1
		for i, p := range probs {
			// A chosen one is marked −1; NaN logits still yield k picks,
			// whose NaN weights reach the output.
			if p != -1 && (best < 0 || p > probs[best]) {
				best = i
			}
		}
		picks = append(picks, moePick{expert: best, weight: probs[best]})
		total += probs[best]
		probs[best] = -1
	}
	if c.renormalize {
		for i := first; i < len(picks); i++ {
			picks[i].weight /= total
		}
	}
	return picks
}

// addExpert adds expert e's output, times each token's weight, to the
// rows of y it was routed, its buffers carved off sc.
func (c *moePrepared) addExpert(y, x []float32, e int, routes []moeRoute, sc *scratch) {
	d, h, n := c.width, c.expertHidden, len(routes)
	xs := sc.floats(n * d)
	for i, r := range routes {
		copy(xs[i*d:(i+1)*d], x[r.row*d:(r.row+1)*d])
	}
	gateUp := sc.floats(n * 2 * h)
	c.gateUps[e].apply(gateUp, xs, n)
	hidden := sc.floats(n * h)
	for i := range n {
		row := gateUp[i*2*h : (i+1)*2*h]
		for j := range h {
			hidden[i*h+j] = float32(c.act(float64(row[j]))) * row[h+j]
		}
	}
	c.downs[e].apply(xs, hidden, n)
	for i, r := range routes {
		dst := y[r.row*d : (r.row+1)*d]
		for j, v := range xs[i*d : (i+1)*d] {
			dst[j] += v * r.weight
		}
	}
}

// addShared adds σ(x·shared_expert_gateᵀ) · shared_expert(x) to every row
// of y, its buffers carved off sc.
func (c *moePrepared) addShared(y, x []float32, rows int, sc *scratch) {
	d, h := c.width, c.sharedHidden
	gate, up := sc.floats(rows*h), sc.floats(rows*h)
	c.shared[0].apply(gate, x, rows)
	c.shared[1].apply(up, x, rows)
	for i, u := range up {
		gate[i] = float32(c.act(float64(gate[i]))) * u
	}
	out := sc.floats(rows * d)
	c.shared[2].apply(out, gate, rows)
	scale := sc.floats(rows)
	c.sharedGate.apply(scale, x, rows)
	for r := range rows {
		s := float32(1 / (1 + math.Exp(-float64(scale[r]))))
		for j := range d {
			y[r*d+j] += s * out[r*d+j]
		}
	}
}

// TokenWise marks the layer as token-wise for incremental decoding.
func (m *MoE) TokenWise() {}

// OutputShape is the input's shape.
func (m *MoE) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", m.D)
}

// FLOPs counts the products a token's pass makes: the router (2·d·experts),
// top_k experts' three projections (2·d·d_hidden each) and, with a shared
// expert, its three projections and its gate.
func (m *MoE) FLOPs(inputs []tensor.Shape) (int64, error) {
	x, err := oneFLOPInput(inputs, "d", m.D)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.linear(x.rows(), m.D, m.Experts)
	c.linear(x.rows(), m.D, 3*m.TopK*m.DHidden)
	if m.SharedDHidden > 0 {
		c.linear(x.rows(), m.D, 3*m.SharedDHidden+1)
	}
	return c.result()
}

package lift

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	ir "github.com/attnrun/attnrun/onnxio/graph"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Options tune Lift. The zero value lifts completely or reports.
type Options struct {
	// Name is the lifted model's name; the default is "lifted".
	Name string
	// Partial keeps what cannot be lifted as onnx.subgraph layers, ONNX
	// subgraphs run by the executor inside the attnrun model, so that the
	// whole model still runs. Result.Unlifted still lists those nodes.
	Partial bool
	// MaxMemory bounds, in bytes, what each evaluation of the graph holds
	// (the probes and the self-check run the graph with the executor), as
	// exec.Options.MaxMemory does; 0 means budget.DefaultLimit.
	MaxMemory int64
	// Context, if not nil, carries a deadline or cancellation for those
	// evaluations and the self-check.
	Context context.Context
}

// Result is a lifted model: its config and weights, how the graph's
// tensors became parameters, and what could not be lifted.
type Result struct {
	// Config is the model config, YAML as models.ParseConfig reads it.
	// When the graph cannot be lifted completely it shows the layers that
	// were recognized, "?" standing for inputs no lifted layer computes.
	Config string
	// Model is the built model with its weights loaded; nil when the graph
	// could not be lifted completely.
	Model *models.Model
	// StateDict holds the parameters under their model names.
	StateDict map[string]*tensor.Dense
	// Mapping says where each parameter comes from, in model order.
	Mapping []Mapping
	// Outputs says what each graph output is in the lifted model.
	Outputs []Output
	// ParamInputs lists the graph inputs that hold parameters (weights the
	// graph takes as inputs): a run of the lifted model loads them first
	// (BindParamInputs). The model's inputs are the other graph inputs.
	ParamInputs []ParamInput
	// Unlifted lists the nodes no attnrun layer computes, with the reason.
	Unlifted []Unlifted
	// Notes are assumptions the lift made (a context_length the graph does
	// not fix, a table the exporter cut), one line each.
	Notes []string
	// Nodes counts the graph's nodes that compute some output from the
	// inputs' contents (shape arithmetic and constants are not counted);
	// Lifted counts those attnrun layers compute, the others being listed
	// in Unlifted (and run as onnx.subgraph layers under Options.Partial).
	Nodes, Lifted int
	// Check is the lifted model run against the graph on random inputs.
	Check Check
	// Attnrun reports that the file was written by attnrun and loaded from
	// its metadata rather than lifted.
	Attnrun bool
}

// Mapping is one row of the mapping table: a graph tensor and the model
// parameter it became.
type Mapping struct {
	// Initializer names the graph's tensor; "" when the graph computes the
	// value from its nodes.
	Initializer string
	// Param is the model parameter, "<layer>.<name>".
	Param string
	// Transform is how the tensor was changed on the way: "" (as is),
	// "transposed" (MatMul's (in, out) weight became nn.Linear's (out, in)),
	// "split rows 8:16" (one projection of a packed in_proj; "split 8:16"
	// for a vector), "into rows 8:24" (the block of a parameter stacked
	// from several tensors), or a combination; "computed by the graph"
	// when no initializer holds the numbers as they are.
	Transform string
}

// Output says how the lifted model produces one graph output.
type Output struct {
	// Name is the graph output's name.
	Name string `yaml:"name"`
	// Layer is the layer that produces it.
	Layer string `yaml:"layer"`
	// Weights is "" for the layer's output (the model's output, or another
	// layer's: BERT's pooled output beside the sequence), "heads" for the layer's
	// attention weights (B, H, Tq, Tk), "mean" for them averaged over heads
	// (nn.MultiheadAttention's need_weights output).
	Weights string `yaml:"weights,omitempty"`
	// Cache is "keys" or "values" for the layer's KV cache after the
	// step, (B, KVHeads, T, HeadDim) (a present output), and Past then
	// names the graph input that holds it before the step (see RunCache).
	Cache string `yaml:"cache,omitempty"`
	Past  string `yaml:"past,omitempty"`
	// Stack lists, for a present output that stacks several caches on a
	// new first axis (GPT-2's present, (2, B, KVHeads, T, HeadDim): a
	// layer's keys, then its values), the caches in order; Cache is then
	// "stack", Layer the first cache's layer, and Past names the input
	// that stacks them so before the step.
	Stack []StackedCache `yaml:"stack,omitempty"`
}

// StackedCache is one cache of a stacked present output: the keys or
// values of a layer.
type StackedCache struct {
	Layer string `yaml:"layer"`
	Cache string `yaml:"cache"`
}

// Unlifted is a node no attnrun layer computes.
type Unlifted struct {
	// Node is the node's name (or "#index (op)" when it has none).
	Node string
	// Op is its op type.
	Op string
	// Reason says why it was not lifted: the pattern it is part of and
	// what that pattern lacks, or that no layer computes its op.
	Reason string
}

// Check is how closely the lifted model reproduced the graph.
type Check struct {
	// Runs is the number of random input sets compared.
	Runs int
	// MaxAbs and MaxRel are the largest differences over all outputs.
	MaxAbs, MaxRel float64
}

// UnliftedError reports the nodes of a graph that could not be lifted.
type UnliftedError struct {
	Nodes []Unlifted
}

// Error lists the nodes grouped by reason.
func (e *UnliftedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d node(s) cannot be lifted into attnrun layers:", len(e.Nodes))
	byReason := map[string][]string{}
	var reasons []string
	for _, u := range e.Nodes {
		if _, ok := byReason[u.Reason]; !ok {
			reasons = append(reasons, u.Reason)
		}
		byReason[u.Reason] = append(byReason[u.Reason], fmt.Sprintf("%s (%s)", u.Node, u.Op))
	}
	for _, r := range reasons {
		fmt.Fprintf(&b, "\n  %s: %s", r, strings.Join(byReason[r], ", "))
	}
	return b.String()
}

// Lift lifts a model with the default Options.
func Lift(m *onnxpb.ModelProto) (*Result, error) { return Options{}.Lift(m) }

// Lift recognizes the attention structures of an ONNX graph and rebuilds
// them as attnrun layers carrying the graph's weights. A file written by
// attnrun (metadata attnrun.config) is loaded from its metadata instead.
//
// The lifted model is run against the graph itself (with the executor) on
// random inputs before it is returned: a lift that does not reproduce the
// graph's outputs is an error, never a result. When some nodes cannot be
// lifted, Lift returns the Result (with Unlifted set and Model nil) and an
// *UnliftedError; with Options.Partial it keeps them as subgraph layers.
//
// The layer types must be registered: import package layers (the command
// line does).
func (o Options) Lift(m *onnxpb.ModelProto) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("lift: internal error: %v", r)
		}
	}()
	if IsAttnrun(m) {
		return loadResult(m, models.Options{MaxMemory: o.MaxMemory})
	}
	weights, integerShapes := weightInputs(m)
	fills := symbolicVectors(m, weights)
	if len(weights) > 0 {
		if m, err = materializeWeights(m, weights, integerShapes); err != nil {
			return nil, fmt.Errorf("lift: %w", err)
		}
	}
	source := m
	m, repairs := ir.InOrder(m) // nodes out of order, names written twice: read as ONNX Runtime does
	m, products := readEinsums(m)
	m, casts, castNotes := readPrecisionCasts(m)
	m, keepProducts, productNotes := readKeepProducts(m) // keepproduct.go
	written := map[*onnxpb.NodeProto]*onnxpb.NodeProto{}
	maps.Copy(written, casts)
	maps.Copy(written, keepProducts)
	repairs = append(append(append(repairs, products...), castNotes...), productNotes...)
	if len(weights) > 0 {
		repairs = append(repairs, weightInputsNote(weights))
	}
	r := reading{source: source, weights: weights, fills: fills, written: written}
	// kvcache.go: the graph without its past inputs; on error, lifted with
	// them, whose Concats are refused.
	whole := m
	r.full, m, r.links, r.pairs, err = readCache(m)
	if err != nil {
		repairs = append(repairs, fmt.Sprintf("the KV cache is read as graph inputs: %v", err))
	}
	res, err = o.liftReading(r, m, repairs)
	if err != nil && o.Partial && len(r.links) > 0 {
		// Some nodes stay ONNX subgraphs, which hold no cache: the graph
		// is lifted with its past inputs, the cache computed by them.
		w := r
		w.full, w.links, w.pairs = whole, nil, nil
		if res, werr := o.liftReading(w, whole, append(slices.Clone(repairs), fmt.Sprintf("the KV cache is read as graph inputs: %v", err))); werr == nil {
			return res, nil
		}
	}
	return res, err
}

// liftReading analyzes m, read from a graph as r says, and assembles the
// lifted model.
func (o Options) liftReading(r reading, m *onnxpb.ModelProto, repairs []string) (*Result, error) {
	a, p, err := o.analyze(r, m, repairs)
	if err != nil {
		return nil, err
	}
	if len(a.ties) > 0 && r.ties == nil { // a mask as long as the keys, which the probes did not know (tiedKeys)
		r.ties = a.ties
		if a, p, err = o.analyze(r, m, repairs); err != nil {
			return nil, err
		}
	}
	if spelled, note := a.decomposeAttentionOps(m, p.unclaimed()); spelled != nil { // attention_op_decompose.go
		b, q, err := o.analyze(r, spelled, append(slices.Clone(a.repairs), note))
		if err == nil && !spelledUnclaimed(q) {
			a, p = b, q
		}
	}
	return o.assemble(a, p)
}

// reading is what Lift read of a graph before analyzing it.
type reading struct {
	source *onnxpb.ModelProto // as given, its weight inputs made initializers
	full   *onnxpb.ModelProto // read in order, with its KV cache
	links  []cacheLink        // the KV cache split off full (kvcache.go)
	pairs  []cachePairing     // its packed caches (kvcache_packed.go)
	// weights are the graph inputs read as weights (param_inputs.go);
	// written the nodes read otherwise, as written, by the node read in
	// each's place: Casts between float types read as Identity (casts.go),
	// Megatron's masks read as Hugging Face's (keepproduct.go).
	weights []string
	fills   []string // the weights a single value may fill (ParamInput.Fill)
	written map[*onnxpb.NodeProto]*onnxpb.NodeProto
	// ties are those a first analysis learned (analysis.ties).
	ties []dimSum
}

// analyze indexes and probes m, a reading of r.full without its KV cache,
// and recognizes its layers.
func (o Options) analyze(r reading, m *onnxpb.ModelProto, repairs []string) (*analysis, *plan, error) {
	g, err := newGraph(m)
	if err != nil {
		return nil, nil, fmt.Errorf("lift: %w", err)
	}
	g.limits = newExecLimits(o.Context, o.MaxMemory)
	g.known = r.ties
	a := &analysis{g: g, source: r.source, repairs: repairs, weightInputs: r.weights, fillInputs: r.fills, written: r.written}
	if err := a.withCache(r.full, r.links, r.pairs, r.ties); err != nil {
		return nil, nil, fmt.Errorf("lift: %w", err)
	}
	if err := a.newProbes(); err != nil {
		return nil, nil, fmt.Errorf("lift: %w", err)
	}
	a.markLive()
	return a, a.plan(), nil
}

// unclaimed returns the nodes no recognized layer computes.
func (p *plan) unclaimed() map[*node]bool {
	out := map[*node]bool{}
	for n := range p.failedBy {
		if !p.claimed[n] {
			out[n] = true
		}
	}
	return out
}

// newProbes evaluates the graph at one or, for dynamic graphs, two sizes.
func (a *analysis) newProbes() error {
	// probe_dims.go: ties between symbolic dimensions (a mask as long as
	// past and new tokens). When none makes the graph evaluate, the probe
	// below fails with the same error and tries the frozen sizes instead.
	_ = findDimSums(a.g, 2)
	p, err := newProbe(a.g, 2)
	if err != nil {
		frozen, note, ferr := frozenProbe(a.g, 2, err) // probe_frozen.go
		if ferr != nil {
			return fmt.Errorf("cannot evaluate the graph at a probe shape: %w", ferr)
		}
		a.probes, a.repairs = []*probe{frozen}, append(a.repairs, note)
		return nil
	}
	a.probes = []*probe{p}
	if len(p.dims) > 0 {
		q, err := newProbe(a.g, 3)
		if err != nil {
			return fmt.Errorf("cannot evaluate the graph at a second probe shape: %w", err)
		}
		a.probes = append(a.probes, q)
	}
	return nil
}

// plan is the outcome of recognition: the regions to lift, the values
// that are plain copies of others, and the failures.
type plan struct {
	regions  []*region
	alias    map[string]string
	claimed  map[*node]bool
	failures []*failure
	failedBy map[*node]*failure
	// regrouped are the Reshapes read as copies because they only regroup
	// token rows (rows.go); a layer that takes one in (a Tensordot's
	// flattening before its MatMul) takes it back from the aliases.
	regrouped map[*node]bool
}

// plan recognizes every attention first (its projections would otherwise
// look like plain Linears), then the other layers in graph order.
func (a *analysis) plan() *plan {
	p := &plan{alias: map[string]string{}, claimed: map[*node]bool{}, failedBy: map[*node]*failure{}, regrouped: map[*node]bool{}}
	for _, n := range a.g.Nodes {
		if n.GetOpType() == "Softmax" && a.liveNode(n) && a.g.IsData(n.GetInput()[0]) {
			p.add(a.attention(n))
		}
		if n.GetOpType() == "Attention" && a.liveNode(n) {
			p.add(a.attentionOp(n)) // attention_op.go: ONNX's Attention op (opset 23 on)
		}
	}
	a.matchPatterns(p) // layers from other modules (RegisterPattern), before their projections look like Linears
	for _, n := range a.g.Nodes {
		if p.claimed[n] || p.failedBy[n] != nil || !a.liveNode(n) {
			continue
		}
		if (n.GetOpType() == "Identity" || n.GetOpType() == "Dropout") && a.isLayout(n) || match.IsFloatCopy(patternGraph{a: a}, match.NewNode(n)) {
			p.alias[n.GetOutput()[0]] = n.GetInput()[0]
			p.claimed[n] = true
			continue
		}
		if x, ok := a.noOpInput(n); ok { // noop.go
			p.alias[n.GetOutput()[0]] = x
			p.claimed[n] = true
			continue
		}
		if a.regroupsRows(n) { // rows.go
			p.alias[n.GetOutput()[0]] = n.GetInput()[0]
			p.claimed[n], p.regrouped[n] = true, true
			continue
		}
		r, f := a.matchLate(n) // the layers' late patterns (layers/*_lift.go)
		if f != nil {
			r = nil
		}
		p.add(r, f)
	}
	a.claimBypassed(p)
	return p
}

// claimBypassed claims the layout nodes whose every output is read only by
// layers that read the node's input instead (nn.select reads what a Split
// splits): no lifted layer needs what they compute.
func (a *analysis) claimBypassed(p *plan) {
	owner := map[*node]*region{}
	for _, r := range p.regions {
		for _, n := range r.nodes {
			owner[n] = r
		}
	}
	for _, n := range a.g.Nodes {
		if p.claimed[n] || p.failedBy[n] != nil || !a.liveNode(n) || !a.isLayout(n) {
			continue
		}
		bypassed := true
		for _, out := range n.GetOutput() {
			if a.g.IsOutput(out) {
				bypassed = false
			}
			for _, c := range a.readers(out) {
				r := owner[c]
				bypassed = bypassed && r != nil && slices.Contains(r.inputs, n.GetInput()[0]) && !slices.Contains(r.inputs, out)
			}
		}
		if bypassed {
			p.claimed[n] = true
		}
	}
}

// add records a recognized region, or a failure; a region that overlaps
// one recorded before is a failure too.
func (p *plan) add(r *region, f *failure) {
	if r != nil && f == nil {
		for _, pre := range r.before {
			if q := p.same(pre); q == nil {
				p.add(pre, nil)
			} else {
				p.merge(q, pre)
			}
		}
	}
	if r != nil {
		for _, n := range r.nodes {
			if p.claimed[n] && !p.regrouped[n] {
				f = fail(r.nodes, "%s overlaps another layer at node %s", r.kind, n.Label())
				break
			}
		}
		if f == nil {
			for _, n := range r.nodes {
				if p.regrouped[n] {
					delete(p.alias, n.GetOutput()[0])
					delete(p.regrouped, n)
				}
				p.claimed[n] = true
			}
			p.regions = append(p.regions, r)
			return
		}
	}
	if f != nil {
		p.failures = append(p.failures, f)
		for _, n := range f.nodes {
			if p.failedBy[n] == nil && !p.claimed[n] {
				p.failedBy[n] = f
			}
		}
	}
}

// same returns the recorded region of r's type computing r's output from
// r's inputs, nil when there is none.
func (p *plan) same(r *region) *region {
	for _, q := range p.regions {
		if q.typ == r.typ && q.output == r.output && slices.Equal(q.inputs, r.inputs) {
			return q
		}
	}
	return nil
}

// merge gives q, a recorded region computing what r computes, the nodes of
// r that no region claims: the nodes of a keep mask's layer that only one
// reader's mask needs (keepMaskValue).
func (p *plan) merge(q, r *region) {
	for _, n := range r.nodes {
		if !p.claimed[n] {
			p.claimed[n] = true
			q.nodes = append(q.nodes, n)
		}
	}
}

// unlifted lists the live data nodes no region claims, with their reasons.
func (a *analysis) unlifted(p *plan) []Unlifted {
	var out []Unlifted
	for _, n := range a.g.Nodes {
		if p.claimed[n] || !a.liveNode(n) {
			continue
		}
		reason := fmt.Sprintf("op %s is not part of any attnrun layer", n.GetOpType())
		if f := p.failedBy[n]; f != nil {
			reason = f.reason
		}
		out = append(out, Unlifted{Node: n.Label(), Op: n.GetOpType(), Reason: reason})
	}
	return out
}

// resolve follows aliases (Identity, Dropout) to the value they copy.
func (p *plan) resolve(v string) string {
	for {
		w, ok := p.alias[v]
		if !ok {
			return v
		}
		v = w
	}
}

// assemble turns a plan into a model: layers in graph order, named,
// wired, fused where a layer type covers several regions, built and
// checked against the graph.
func (o Options) assemble(a *analysis, p *plan) (*Result, error) {
	res := &Result{}
	res.Unlifted = a.unlifted(p)
	for _, n := range a.g.Nodes {
		if a.liveNode(n) {
			res.Nodes++
		}
	}
	res.Lifted = res.Nodes - len(res.Unlifted)
	b := newBuilder(a, p, o)
	if o.Partial && len(res.Unlifted) > 0 {
		if err := b.addSubgraphs(); err != nil {
			return res, fmt.Errorf("lift: --partial: %w", err)
		}
	}
	b.merge()
	err := b.wire()
	res.Unlifted = append(res.Unlifted, b.extraUnlifted...)
	config, yerr := b.yaml()
	if yerr != nil {
		return res, fmt.Errorf("lift: %w", yerr)
	}
	res.Config = config
	if len(res.Unlifted) > 0 && !o.Partial {
		return res, &UnliftedError{Nodes: res.Unlifted}
	}
	if len(b.extraUnlifted) > 0 { // graph outputs a subgraph cannot stand for either
		return res, &UnliftedError{Nodes: b.extraUnlifted}
	}
	if err != nil {
		return res, fmt.Errorf("lift: %w", err)
	}
	res.Outputs = b.outputs
	res.Notes = append(res.Notes, a.repairs...)
	for _, l := range b.layers {
		res.Notes = append(res.Notes, l.notes...)
	}
	model, err := models.Options{MaxMemory: o.MaxMemory}.Parse([]byte(res.Config), "lifted config")
	if err != nil {
		return res, fmt.Errorf("lift: the lifted config does not build: %w", err)
	}
	res.StateDict, res.Mapping = b.stateDict(model)
	res.ParamInputs = b.paramInputs()
	if err := model.LoadStateDict(res.StateDict); err != nil {
		return res, fmt.Errorf("lift: %w", err)
	}
	a.idBounds = idBounds(p.regions)
	check, outputs, err := a.verifyAll(model, b.inputs, res.Outputs)
	res.Check, res.Outputs = check, outputs
	if err != nil {
		return res, fmt.Errorf("lift: the lifted model does not reproduce the graph: %w", err)
	}
	res.Model = model
	return res, nil
}

// errNoOutput is returned when the graph's first output is not computed by
// any lifted layer.
var errNoOutput = errors.New("the graph's output is not computed by a lifted layer")

// sortRegions orders regions by where their output is computed. A keep
// mask's layer, whose nodes may lie after a reader's output (a later
// layer's sliding-window mask), comes at the latest just before its first
// reader.
func (a *analysis) sortRegions(rs []*region) {
	computed := func(r *region) int {
		if n := a.g.Producer(r.output); n != nil {
			return n.Index
		}
		last := -1 // an output the graph does not name (a layout the layer after it changes): its last node
		for _, n := range r.nodes {
			last = max(last, n.Index)
		}
		return last
	}
	pos := map[*region]int{} // twice the index, so that a keep mask fits just before its reader
	for _, r := range rs {
		pos[r] = 2*computed(r) + 1
	}
	for _, r := range rs {
		if len(r.inputs) != 1 || r.output != keepMaskValue(r.inputs[0]) {
			continue
		}
		for _, q := range rs {
			if slices.Contains(q.inputs, r.output) {
				pos[r] = min(pos[r], pos[q]-1)
			}
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return pos[rs[i]] < pos[rs[j]] })
}

// idBounds gives the graph values that layers read as indices
// (match.Layer.IndexBound: an embedding's ids) the smallest bound of the
// layers that read them, so that the self-check feeds ids that look up
// every row.
func idBounds(regions []*region) map[string]int {
	out := map[string]int{}
	for _, r := range regions {
		if n := r.indexBound; n > 0 && len(r.inputs) == 1 {
			if old, seen := out[r.inputs[0]]; !seen || n < old {
				out[r.inputs[0]] = n
			}
		}
	}
	return out
}

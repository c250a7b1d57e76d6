package lift

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// cacheSplit is a graph's KV-cache interface, split off for the lift
// (kvcache.go): the links, and the graph with its past inputs, which the
// self-check runs.
type cacheSplit struct {
	links []cacheLink
	full  *graph
	pairs []cachePairing // its packed caches (kvcache_packed.go)
}

// withCache records the links split off full, the graph as read before
// the split; it finds the ties of full's dimensions (a mask over past and
// new tokens) that the self-check's inputs must honour, starting from
// ties, those already known. pairs are the packed caches among the links.
func (a *analysis) withCache(full *onnxpb.ModelProto, links []cacheLink, pairs []cachePairing, ties []dimSum) error {
	if len(links) == 0 {
		return nil
	}
	g, err := newGraph(full)
	if err != nil {
		return err
	}
	g.limits = a.g.limits
	g.known = withPastLength(full, links, ties) // probe_ties.go
	if err := findDimSums(g, 2); err != nil {
		return fmt.Errorf("cannot evaluate the graph with its past inputs at a probe shape: %w", err)
	}
	a.cache = &cacheSplit{links: links, full: g, pairs: pairs}
	return nil
}

// link returns the cache link whose present output is o.
func (c *cacheSplit) link(o string) (cacheLink, bool) {
	if c == nil {
		return cacheLink{}, false
	}
	for _, l := range c.links {
		if l.present == o {
			return l, true
		}
	}
	return cacheLink{}, false
}

// isPresent reports whether v is a present output: an attention layer
// returns its cache besides its output (RunCache).
func (c *cacheSplit) isPresent(v string) bool {
	_, ok := c.link(v)
	return ok
}

// cacheOutput maps a present output to the attention layer that computes
// its fresh keys or values; which of the two the layer caches it as is
// settled by running the model (settleCacheKinds). It returns nil and
// why when no lifted layer computes them, nil and "" for an output that
// is no present.
func (b *builder) cacheOutput(o string) (*Output, string) {
	l, ok := b.a.cache.link(o)
	if !ok {
		return nil, ""
	}
	fresh := b.p.resolve(l.fresh)
	if producer := b.a.g.Producer(fresh); producer != nil {
		for _, ly := range b.layers {
			if slices.Contains(ly.nodes, producer) {
				return &Output{Name: o, Layer: ly.name, Cache: "?", Past: l.past}, ""
			}
		}
	}
	return nil, fmt.Sprintf("graph output %q is the KV cache of input %q extended by %q, which no lifted attention layer computes", o, l.past, fresh)
}

// verifyAll runs the self-check: verify, or for a graph with a KV cache
// verifyCache, once each present output is settled as keys or values and
// the packed ones stacked. It returns the outputs so settled.
func (a *analysis) verifyAll(m *models.Model, inputs []string, outputs []Output) (Check, []Output, error) {
	if a.cache == nil {
		c, err := a.verify(m, inputs, outputs)
		return c, outputs, err
	}
	if err := a.settleCacheKinds(m, inputs, outputs); err != nil {
		return Check{}, outputs, err
	}
	outputs, err := a.cache.stack(outputs)
	if err != nil {
		return Check{}, outputs, err
	}
	c, err := a.verifyCache(m, inputs, outputs)
	return c, outputs, err
}

// stack replaces the outputs that stand for the entries of a packed
// present output by that output, stacking their caches in order.
func (c *cacheSplit) stack(outputs []Output) ([]Output, error) {
	if len(c.pairs) == 0 {
		return outputs, nil
	}
	byName := map[string]Output{}
	for _, o := range outputs {
		byName[o.Name] = o
	}
	var out []Output
	done := map[string]bool{}
	for _, o := range outputs {
		i := slices.IndexFunc(c.pairs, func(p cachePairing) bool { return slices.Contains(p.present.entries, o.Name) })
		if i < 0 {
			out = append(out, o)
			continue
		}
		p := c.pairs[i]
		if done[p.present.name] {
			continue
		}
		done[p.present.name] = true
		s := Output{Name: p.present.name, Cache: "stack", Past: p.past.name}
		for _, e := range p.present.entries {
			eo, ok := byName[e]
			if !ok || eo.Cache == "" || eo.Stack != nil {
				return nil, fmt.Errorf("output %q: its entry %q is no layer's cache", p.present.name, e)
			}
			s.Stack = append(s.Stack, StackedCache{Layer: eo.Layer, Cache: eo.Cache})
		}
		s.Layer = s.Stack[0].Layer
		out = append(out, s)
	}
	return out, nil
}

// settleCacheKinds decides for each present output whether it is its
// layer's keys or values: the model steps a fresh session on random
// inputs and the graph without its past runs on the same; each output
// must equal exactly one of the two.
func (a *analysis) settleCacheKinds(m *models.Model, inputs []string, outputs []Output) error {
	eg, err := exec.NewWithOptions(a.g.Model, a.g.limits.opts)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(0xcac4e, uint64(len(a.g.Nodes))))
	p := a.probes[0]
	feeds, args, err := a.randomInputs(rng, inputs, p.feeds)
	if err != nil {
		return err
	}
	want, err := eg.RunContext(a.g.limits.context(), feeds)
	if err != nil {
		return fmt.Errorf("the graph fails on random inputs: %w", err)
	}
	// A session resumed after no tokens, as RunCache starts one: it returns
	// every key it saw, as the graph's present does, where a fresh session
	// of a sliding-window layer would keep only its window.
	seqs := 1
	if len(args) > 0 && len(args[0].Shape()) > 1 {
		seqs = args[0].Shape()[0]
	}
	s, err := m.Resume(nil, seqs, 0)
	if err != nil {
		return fmt.Errorf("the lifted model cannot hold a KV cache: %w", err)
	}
	if _, err := m.Step(&registry.Run{Context: a.g.limits.ctx}, s, args...); err != nil {
		return err
	}
	for i, o := range outputs {
		if o.Cache == "" {
			continue
		}
		kv, err := s.Cache(o.Layer)
		if err != nil {
			return fmt.Errorf("output %q: %w", o.Name, err)
		}
		var c Check
		keys := kv.Keys != nil && c.compare(o.Name, kv.Keys, want[o.Name], verifyRtol, verifyAtol) == nil
		values := kv.Values != nil && c.compare(o.Name, kv.Values, want[o.Name], verifyRtol, verifyAtol) == nil
		switch {
		case keys && !values:
			outputs[i].Cache = "keys"
		case values && !keys:
			outputs[i].Cache = "values"
		default:
			return fmt.Errorf("output %q: the graph's cache is neither the keys nor the values layer %q caches", o.Name, o.Layer)
		}
	}
	return nil
}

// randomInputs draws random feeds shaped like shapes for the named graph
// inputs, and converts them to model inputs.
func (a *analysis) randomInputs(rng *rand.Rand, inputs []string, shapes map[string]*tensor.Dense) (map[string]*tensor.Dense, []*tensor.Dense, error) {
	feeds := map[string]*tensor.Dense{}
	var args []*tensor.Dense
	for _, name := range inputs {
		t := a.randomFeed(rng, name, shapes[name], shapes)
		feeds[name] = t
		f, err := ModelInput(t)
		if err != nil {
			return nil, nil, fmt.Errorf("input %q: %w", name, err)
		}
		args = append(args, f)
	}
	return feeds, args, nil
}

// verifyCache runs the graph as written, with a past, against the lifted
// model resumed from the same past (RunCache), at both probe sizes of the
// graph with its past inputs, and compares every output.
func (a *analysis) verifyCache(m *models.Model, inputs []string, outputs []Output) (Check, error) {
	var c Check
	source := a.source
	if source == nil {
		source = a.cache.full.Model
	}
	eg, err := exec.NewWithOptions(source, a.g.limits.opts)
	if err != nil {
		return c, err
	}
	rng := rand.New(rand.NewPCG(0x11f7, uint64(len(a.g.Nodes))))
	for _, first := range []int{2, 3} {
		p, err := newProbeWith(a.cache.full, first, nil)
		if err != nil {
			return c, err
		}
		names := slices.Clone(inputs)
		for _, l := range a.cache.links {
			names = append(names, l.past)
		}
		feeds, args, err := a.randomInputs(rng, names, p.feeds)
		if err != nil {
			return c, err
		}
		for _, pair := range a.cache.pairs { // the source takes its caches packed
			var entries []*tensor.Dense
			for _, e := range pair.past.entries {
				entries = append(entries, feeds[e])
				delete(feeds, e)
			}
			if feeds[pair.past.name], err = stackEntries(entries); err != nil {
				return c, fmt.Errorf("input %q: %w", pair.past.name, err)
			}
		}
		want, err := eg.RunContext(a.g.limits.context(), feeds)
		if err != nil {
			return c, fmt.Errorf("the graph fails on random inputs with a past: %w", err)
		}
		past := map[string]*tensor.Dense{}
		for _, name := range CacheInputs(outputs) {
			past[name] = feeds[name]
		}
		got, err := RunCache(m, outputs, &registry.Run{Context: a.g.limits.ctx}, args[:len(inputs)], past, 0)
		if err != nil {
			return c, err
		}
		if err := a.compareRun(&c, outputs, got, want); err != nil {
			return c, fmt.Errorf("with a past of %d token(s): %w", pastLength(past), err)
		}
	}
	return c, nil
}

// pastLength is the number of tokens a past holds: axis 2 of its tensors
// (B, heads, T, head_dim), axis 3 of packed ones (n, B, heads, T,
// head_dim); 0 without any.
func pastLength(past map[string]*tensor.Dense) int {
	for _, t := range past {
		if t != nil && (t.Dims() == 4 || t.Dims() == 5) {
			return t.Shape()[t.Dims()-2]
		}
	}
	return 0
}

// RunCache runs a lifted model with a KV cache as its graph runs: past
// holds the graph's past inputs by name ((B, KVHeads, P, HeadDim) each, or
// those of a stacked output packed on a first axis; empty or nil for a
// past of no tokens), inputs the model's inputs for the
// new tokens (an attention_mask covering the past and the new tokens).
// Each attention layer's session resumes from the past the Outputs name
// for it (models.Model.Resume), steps the new tokens, all at once (chunk
// 0) or chunk at a time (models.Model.DecodeFrom), and the outputs are
// returned in order: the model's output, and each present cache.
func RunCache(m *models.Model, outputs []Output, run *registry.Run, inputs []*tensor.Dense, past map[string]*tensor.Dense, chunk int) ([]*tensor.Dense, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("model %q: no inputs", m.Name())
	}
	seqs := 1
	if s := inputs[0].Shape(); len(s) > 1 {
		seqs = s[0]
	}
	tokens := pastLength(past)
	cache := map[string]models.KV{}
	if tokens > 0 {
		for _, o := range outputs {
			if o.Cache == "" {
				continue
			}
			t := past[o.Past]
			if t == nil {
				return nil, fmt.Errorf("output %q: no past input %q", o.Name, o.Past)
			}
			for i, e := range o.caches() {
				entry := t
				if o.Stack != nil {
					var err error
					if entry, err = stackEntry(t, i, len(o.Stack)); err != nil {
						return nil, fmt.Errorf("output %q: past input %q: %w", o.Name, o.Past, err)
					}
				}
				kv := cache[e.Layer]
				switch e.Cache {
				case "keys":
					kv.Keys = entry
				case "values":
					kv.Values = entry
				default:
					return nil, fmt.Errorf("output %q: unknown cache kind %q", o.Name, e.Cache)
				}
				cache[e.Layer] = kv
			}
		}
	}
	s, err := m.Resume(cache, seqs, tokens)
	if err != nil {
		return nil, err
	}
	var y *tensor.Dense
	if chunk > 0 {
		y, err = m.DecodeFrom(run, s, chunk, inputs...)
	} else {
		y, err = m.Step(run, s, inputs...)
	}
	if err != nil {
		return nil, err
	}
	out := make([]*tensor.Dense, len(outputs))
	for i, o := range outputs {
		switch {
		case o.Cache == "" && o.Weights == "":
			out[i] = y
		case o.Cache != "":
			var entries []*tensor.Dense
			for _, e := range o.caches() {
				kv, err := s.Cache(e.Layer)
				if err != nil {
					return nil, fmt.Errorf("output %q: %w", o.Name, err)
				}
				t := kv.Keys
				if e.Cache == "values" {
					t = kv.Values
				}
				entries = append(entries, t)
			}
			out[i] = entries[0]
			if o.Stack != nil {
				if out[i], err = stackEntries(entries); err != nil {
					return nil, fmt.Errorf("output %q: %w", o.Name, err)
				}
			}
		default:
			return nil, fmt.Errorf("output %q: a run with a KV cache returns no attention weights", o.Name)
		}
	}
	return out, nil
}

// CacheInputs lists the past inputs a lifted model with a KV cache takes
// after its own inputs, in the order of the outputs that extend them
// (Output.Past); none for a model without a cache.
func CacheInputs(outputs []Output) []string {
	var names []string
	for _, o := range outputs {
		if o.Past != "" && !slices.Contains(names, o.Past) {
			names = append(names, o.Past)
		}
	}
	return names
}

// runCacheInputs is RunOutputs for a model with a KV cache: inputs are the
// model's, then the past inputs named by names, nil for a past of no
// tokens.
func runCacheInputs(m *models.Model, outputs []Output, run *registry.Run, inputs []*tensor.Dense, names []string) ([]*tensor.Dense, error) {
	own := len(inputs) - len(names)
	if own < 0 {
		return nil, fmt.Errorf("model %q takes its inputs and the past inputs %s, got %d input(s)", m.Name(), quoted(names), len(inputs))
	}
	past := map[string]*tensor.Dense{}
	for i, name := range names {
		if t := inputs[own+i]; t != nil {
			past[name] = t
		}
	}
	return RunCache(m, outputs, run, inputs[:own], past, 0)
}

// caches lists the caches a present output returns: its Stack, or its
// layer's keys or values.
func (o Output) caches() []StackedCache {
	if o.Stack != nil {
		return o.Stack
	}
	return []StackedCache{{Layer: o.Layer, Cache: o.Cache}}
}

// stackEntries stacks float32 tensors of one shape on a new first axis.
func stackEntries(entries []*tensor.Dense) (*tensor.Dense, error) {
	if len(entries) == 0 || entries[0] == nil {
		return nil, errors.New("no caches to stack")
	}
	shape := entries[0].Shape()
	var data []float32
	for i, t := range entries {
		d, ok := t.Data().([]float32)
		if !ok || !t.Shape().Eq(shape) || len(d) != shape.TotalSize() {
			return nil, fmt.Errorf("cache %d is %v %v, want float32 %v like the first", i, t.Dtype(), t.Shape(), shape)
		}
		data = append(data, d...)
	}
	return tensor.New(tensor.WithShape(append([]int{len(entries)}, shape...)...), tensor.WithBacking(data)), nil
}

// stackEntry copies entry i of t, n float32 tensors stacked on axis 0.
func stackEntry(t *tensor.Dense, i, n int) (*tensor.Dense, error) {
	shape := t.Shape()
	d, ok := t.Data().([]float32)
	if !ok || len(shape) < 2 || shape[0] != n || len(d) != shape.TotalSize() {
		return nil, fmt.Errorf("is %v %v, want float32 with %d entries on axis 0", t.Dtype(), shape, n)
	}
	size := len(d) / n
	return tensor.New(tensor.WithShape(slices.Clone(shape[1:])...), tensor.WithBacking(slices.Clone(d[i*size:(i+1)*size]))), nil
}

package models

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// KV is one attention layer's cache: keys and values, (B, KVHeads, T,
// HeadDim) each, as Hugging Face's past_key_values and present hold them.
type KV struct {
	Keys, Values *tensor.Dense
}

// Resume starts a decoding session after tokens tokens of seqs sequences
// that the model did not see: past holds, under each attention layer's
// name, that layer's keys and values for those tokens. Every Stepper layer
// of the model must be a registry.Resumer, and past must name exactly the
// layers that keep a cache (those whose Cache returns keys after a step);
// with tokens 0, past is empty. The session returns whole caches from
// State.Cache (see registry.Resumer).
//
// Resume, Step and State.Cache together run the model as a graph with a
// KV-cache interface runs: the cache in, the new tokens through, the
// extended cache out.
func (m *Model) Resume(past map[string]KV, seqs, tokens int) (*State, error) {
	s, err := m.NewState()
	if err != nil {
		return nil, err
	}
	if tokens < 0 || seqs < 1 && tokens > 0 {
		return nil, fmt.Errorf("model %q: resume after %d token(s) of %d sequence(s)", m.cfg.Name, tokens, seqs)
	}
	if tokens == 0 && len(past) > 0 {
		return nil, fmt.Errorf("model %q: resume after no tokens takes no cache, got one for %s", m.cfg.Name, layerList(past))
	}
	used := 0
	for i, st := range m.steps {
		if s.layers[i] == nil {
			continue
		}
		r, ok := st.spec.Layer.(registry.Resumer)
		if !ok {
			return nil, fmt.Errorf("model %q: layer %q (%s) cannot resume a session from a cache: it is no registry.Resumer", m.cfg.Name, st.spec.Name, st.spec.Type)
		}
		kv, ok := past[st.spec.Name]
		if ok {
			used++
		}
		if err := r.Resume(s.layers[i], seqs, tokens, kv.Keys, kv.Values); err != nil {
			return nil, fmt.Errorf("model %q: layer %q (%s): resume: %w", m.cfg.Name, st.spec.Name, st.spec.Type, err)
		}
	}
	if used != len(past) {
		return nil, fmt.Errorf("model %q: the cache names layers the model has no resumable layer for: %s", m.cfg.Name, layerList(past))
	}
	s.tokens = tokens
	return s, nil
}

// Cache returns the keys and values a layer of the session holds, every
// token so far; a layer without a cache returns nil ones.
func (s *State) Cache(layer string) (KV, error) {
	m := s.model
	for i, st := range m.steps {
		if st.spec.Name != layer {
			continue
		}
		r, ok := st.spec.Layer.(registry.Resumer)
		if !ok || s.layers[i] == nil {
			return KV{}, fmt.Errorf("model %q: layer %q (%s) keeps no cache that can be read", m.cfg.Name, layer, st.spec.Type)
		}
		k, v, err := r.Cache(s.layers[i])
		if err != nil {
			return KV{}, fmt.Errorf("model %q: layer %q (%s): %w", m.cfg.Name, layer, st.spec.Type, err)
		}
		return KV{Keys: k, Values: v}, nil
	}
	return KV{}, fmt.Errorf("model %q has no layer %q", m.cfg.Name, layer)
}

// CacheLayers lists, in model order, the layers whose cache a session
// holds: Resumers other than position layers, which are the layers that
// return keys from Cache once the session has a token.
func (s *State) CacheLayers() []string {
	var names []string
	for i, st := range s.model.steps {
		if r, ok := st.spec.Layer.(registry.Resumer); ok && s.layers[i] != nil {
			if k, _, err := r.Cache(s.layers[i]); err != nil || k != nil {
				names = append(names, st.spec.Name)
			}
		}
	}
	return names
}

// layerList names the layers of a cache, sorted, for messages.
func layerList(past map[string]KV) string {
	names := make([]string, 0, len(past))
	for n := range past {
		names = append(names, fmt.Sprintf("%q", n))
	}
	sort.Strings(names)
	return strings.Join(slices.Compact(names), ", ")
}

package lift

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/registry"
)

// Tolerances of the self-check. They are looser than the cross-check
// against PyTorch (1e-5, 1e-6) because two float32 computations of the same
// math round differently; a wrong lift is off by far more.
const (
	verifyRtol = 1e-4
	verifyAtol = 1e-5
)

// verify runs the lifted model and the graph on the same random inputs at
// every probe size and compares every output.
func (a *analysis) verify(m *models.Model, inputs []string, outputs []Output) (Check, error) {
	var c Check
	source := a.source
	if source == nil {
		source = a.g.Model
	}
	eg, err := exec.NewWithOptions(source, a.g.limits.opts)
	if err != nil {
		return c, err
	}
	rng := rand.New(rand.NewPCG(0x11f7, uint64(len(a.g.Nodes))))
	for _, p := range a.probes {
		feeds := map[string]*tensor.Dense{}
		var args []*tensor.Dense
		for _, name := range inputs {
			t := a.randomFeed(rng, name, p.feeds[name], p.feeds)
			feeds[name] = t
			f, err := ModelInput(t)
			if err != nil {
				return c, fmt.Errorf("input %q: %w", name, err)
			}
			args = append(args, f)
		}
		want, err := eg.RunContext(a.g.limits.context(), feeds)
		if err != nil {
			return c, fmt.Errorf("the graph fails on random inputs: %w", err)
		}
		got, err := RunOutputs(m, outputs, &registry.Run{Context: a.g.limits.ctx}, args)
		if err != nil {
			return c, err
		}
		if err := a.compareRun(&c, outputs, got, want); err != nil {
			return c, err
		}
	}
	return c, nil
}

// compareRun counts one self-check run and compares each output the
// lifted model gave with the graph's, within that output's tolerance.
func (a *analysis) compareRun(c *Check, outputs []Output, got []*tensor.Dense, want map[string]*tensor.Dense) error {
	c.Runs++
	for i, o := range outputs {
		rtol, atol := a.tolerance(o.Name)
		if err := c.compare(o.Name, got[i], want[o.Name], rtol, atol); err != nil {
			return err
		}
	}
	return nil
}

// randomFeed is a random input shaped and typed like t, the feed for
// graph input name among feeds: ids below the tables' sizes, lengths up to the tokens'
// for a lengths mask, 0s and 1s for keep masks, rounded to the graph's
// narrow float type where it has one (the model reads the numbers the
// graph does).
func (a *analysis) randomFeed(rng *rand.Rand, name string, t *tensor.Dense, feeds map[string]*tensor.Dense) *tensor.Dense {
	var out *tensor.Dense
	tokens, lengths := a.lengthInputs[name]
	switch {
	case a.idBounds[name] > 0 && (t.Dtype() == tensor.Int64 || t.Dtype() == tensor.Int32):
		out = randomIDs(rng, t, a.idBounds[name])
	case lengths && feeds[tokens] != nil && feeds[tokens].Dims() == 3:
		out = randomLengths(rng, t, feeds[tokens].Shape()[1])
	case a.keepMasks[name]:
		out = randomKeepMask(rng, t)
	default:
		out = randomLike(rng, t)
	}
	if dt := array.DType(a.g.inputType(name)); dt.IsNarrow() && dt.IsFloat() {
		roundTo(dt, out)
	}
	return out
}

// narrowTolerance is the self-check's tolerance, in units of the type's
// epsilon, for a graph output of a narrow float type (float16): the graph
// rounds after every node, the lifted layers compute in float32.
const narrowTolerance = 8

// tolerance is the self-check's tolerance for a graph output: its type's
// for a float16 or bfloat16 output, verifyRtol and verifyAtol otherwise.
func (a *analysis) tolerance(output string) (rtol, atol float64) {
	for _, vi := range a.g.Model.GetGraph().GetOutput() {
		if vi.GetName() != output {
			continue
		}
		if dt := array.DType(onnxio.ElemType(vi)); dt.IsNarrow() && dt.IsFloat() {
			eps := narrowTolerance * dt.Epsilon()
			return eps, eps
		}
	}
	return verifyRtol, verifyAtol
}

// RunOutputs runs a lifted model and returns the graph's outputs in order:
// the model's output, the outputs of other layers, and attention weights
// where Outputs says so. A model with a KV cache takes the past inputs
// (CacheInputs) after its own and runs as RunCache runs it (a nil past: no
// tokens). On one unbatched sequence (the model answers (T,
// d)), the weights have no batch axis either, as PyTorch gives them: (H,
// Tq, Tk), or (Tq, Tk) averaged.
func RunOutputs(m *models.Model, outputs []Output, run *registry.Run, inputs []*tensor.Dense) ([]*tensor.Dense, error) {
	if names := CacheInputs(outputs); len(names) > 0 { // the past inputs follow the model's
		return runCacheInputs(m, outputs, run, inputs, names)
	}
	weights := map[string]*tensor.Dense{}
	r := *run
	r.Hook = func(layer string, w *tensor.Dense) {
		weights[layer] = w
		if run.Hook != nil {
			run.Hook(layer, w)
		}
	}
	var named []string // layers whose outputs are graph outputs beside the model's
	for _, o := range outputs {
		if o.Weights == "" && o.Layer != m.Config().Output {
			named = append(named, o.Layer)
		}
	}
	y, values, err := m.ForwardNamed(&r, named, inputs...)
	if err != nil {
		return nil, err
	}
	out := make([]*tensor.Dense, len(outputs))
	for i, o := range outputs {
		switch o.Weights {
		case "":
			out[i] = y
			if o.Layer != m.Config().Output {
				out[i], values = values[0], values[1:]
			}
		case "heads", "mean":
			w, ok := weights[o.Layer]
			if !ok {
				return nil, fmt.Errorf("output %q: layer %q reported no attention weights", o.Name, o.Layer)
			}
			if w.Dims() != 4 {
				return nil, fmt.Errorf("output %q: layer %q reported attention weights of shape %v, want (B, H, Tq, Tk)", o.Name, o.Layer, w.Shape())
			}
			if o.Weights == "mean" {
				w = meanOverHeads(w)
			}
			if y.Dims() == 2 && w.Shape()[0] == 1 {
				w = dropBatchAxis(w)
			}
			out[i] = w
		default:
			return nil, fmt.Errorf("output %q: unknown kind %q", o.Name, o.Weights)
		}
	}
	return out, nil
}

// meanOverHeads averages (B, H, Tq, Tk) weights over H: (B, Tq, Tk).
func meanOverHeads(w *tensor.Dense) *tensor.Dense {
	s := w.Shape()
	B, H, T := s[0], s[1], s[2]*s[3]
	src := w.Data().([]float32)
	dst := make([]float32, B*T)
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for i := 0; i < T; i++ {
				dst[b*T+i] += src[(b*H+h)*T+i]
			}
		}
		for i := 0; i < T; i++ {
			dst[b*T+i] /= float32(H)
		}
	}
	return tensor.New(tensor.WithShape(B, s[2], s[3]), tensor.WithBacking(dst))
}

// dropBatchAxis views weights of a batch of one without the batch axis.
func dropBatchAxis(w *tensor.Dense) *tensor.Dense {
	s := w.Shape()
	return tensor.New(tensor.WithShape(s[1:]...), tensor.WithBacking(w.Data()))
}

// compare checks one output within the self-check tolerances. Weights may
// come with leading axes the graph squeezed or not: only the element count
// and the values must agree.
func (c *Check) compare(name string, got, want *tensor.Dense, rtol, atol float64) error {
	if want == nil {
		return fmt.Errorf("the graph has no output %q", name)
	}
	g, err := match.Floats(got)
	if err != nil {
		return err
	}
	w, err := match.Floats(want)
	if err != nil {
		return err
	}
	if len(g) != len(w) {
		return fmt.Errorf("output %q: the lifted model gives shape %v, the graph %v", name, got.Shape(), want.Shape())
	}
	if got.Dims() == want.Dims() && !got.Shape().Eq(want.Shape()) {
		return fmt.Errorf("output %q: the lifted model gives shape %v, the graph %v", name, got.Shape(), want.Shape())
	}
	for i := range w {
		if math.IsNaN(g[i]) && math.IsNaN(w[i]) || g[i] == w[i] {
			continue
		}
		diff := math.Abs(g[i] - w[i])
		if math.IsNaN(diff) || diff > atol+rtol*math.Abs(w[i]) {
			return fmt.Errorf("output %q differs at flat index %d: lifted %g, graph %g", name, i, g[i], w[i])
		}
		c.MaxAbs = math.Max(c.MaxAbs, diff)
		if w[i] != 0 {
			c.MaxRel = math.Max(c.MaxRel, diff/math.Abs(w[i]))
		}
	}
	return nil
}

// randomLike returns random values shaped and typed like t: normal floats;
// for booleans (padding masks) a third true, never the first position of
// the last axis, so that no row is masked entirely.
func randomLike(rng *rand.Rand, t *tensor.Dense) *tensor.Dense {
	shape := []int(t.Shape().Clone())
	n := t.Shape().TotalSize()
	last := 1
	if len(shape) > 0 {
		last = shape[len(shape)-1]
	}
	switch t.Data().(type) {
	case []float32:
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(rng.NormFloat64())
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	case []float64:
		d := make([]float64, n)
		for i := range d {
			d[i] = rng.NormFloat64()
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	case []bool:
		d := make([]bool, n)
		for i := range d {
			d[i] = i%last != 0 && rng.Float64() < 0.3
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	}
	return t
}

// randomKeepMask is an attention_mask like t: 1s and 0s (true and false)
// in t's type, every other key of every sequence kept, the first among
// them, and the rest at random. A query that sees no key is a padding
// query, whose output no real token reads, and the graph's additive mask
// treats it otherwise (finfo.min gives it uniform weights); keeping every other key,
// not just the first, leaves one in every sliding window of two keys or
// more, wherever the query sits.
func randomKeepMask(rng *rand.Rand, t *tensor.Dense) *tensor.Dense {
	shape := []int(t.Shape().Clone())
	last := shape[len(shape)-1]
	keep := make([]bool, t.Shape().TotalSize())
	for i := range keep {
		key := i % last
		drawn := key > 0 && rng.Float64() < 0.6 // one draw per key but the first, as before: the feeds drawn after stay the same
		keep[i] = drawn || key%2 == 0
	}
	if mask, ok := keepTensor(t.Dtype(), shape, keep); ok {
		return mask
	}
	mask, _ := keepTensor(tensor.Float32, shape, keep)
	return mask
}

// randomIDs is a tensor shaped and typed like t (int64 or int32) of ids
// drawn from [0, n).
func randomIDs(rng *rand.Rand, t *tensor.Dense, n int) *tensor.Dense {
	ids := make([]int64, t.Shape().TotalSize())
	for i := range ids {
		ids[i] = rng.Int64N(int64(n))
	}
	if t.Dtype() == tensor.Int32 {
		narrow := make([]int32, len(ids))
		for i, v := range ids {
			narrow[i] = int32(v)
		}
		return tensor.New(tensor.WithShape(t.Shape().Clone()...), tensor.WithBacking(narrow))
	}
	return tensor.New(tensor.WithShape(t.Shape().Clone()...), tensor.WithBacking(ids))
}

// roundTo rounds float32 values in place to a narrow float type.
func roundTo(dt array.DType, t *tensor.Dense) {
	if values, ok := t.Data().([]float32); ok {
		for i, v := range values {
			values[i] = array.RoundFloat(dt, float64(v), false)
		}
	}
}

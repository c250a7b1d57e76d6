package attnrun

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/registry"
)

// GenerateOptions configures Generate.
type GenerateOptions struct {
	// MaxNewTokens is the most tokens Generate adds after the prompt; it
	// must be positive.
	MaxNewTokens int
	// EOS, when set, ends the generation once the model picks it; the EOS
	// token is the last of the returned ids, as in Hugging Face's generate.
	EOS *int64
}

// Generation is what Generate produced.
type Generation struct {
	// IDs are the new token ids, after the prompt.
	IDs []int64
	// Logits holds, for each new id, the logits it was picked from: the
	// model's output at the token before it, one value per vocabulary entry.
	Logits [][]float32
}

// Generate continues a prompt of token ids by greedy decoding, as Hugging
// Face's generate(do_sample=False) does: at every step the id with the
// largest logit (the first of equal ones, as torch.argmax) is appended and
// fed back, until MaxNewTokens ids or the EOS id. The model runs with a KV
// cache, so each step computes one token:
//
//   - a model of attnrun layers whose first input is int64 token ids
//     (followed, if it takes them, by int64 attention_mask, fed ones over
//     every token so far, and position_ids) and whose output is logits,
//     (B, T, vocab), steps with Model.Step (models.Model.NewState): its
//     attention layers keep their keys and values;
//   - an ONNX decoder graph on the executor with the interface of Hugging
//     Face's exports (optimum's layout): input_ids, optionally
//     attention_mask and position_ids, the cache as past_key_values.{i}.key
//     and .value, (batch, heads, past, head_dim), and outputs logits and
//     present.{i}.key and .value, which are fed back as the next step's
//     past. The first step starts from an empty cache (past length 0).
//     A graph exported without the cache (input_ids and attention_mask in,
//     logits out) is run on the whole sequence at every step instead.
func (m *Model) Generate(ctx context.Context, prompt []int64, opts GenerateOptions) (*Generation, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if len(prompt) == 0 {
		return nil, fmt.Errorf("model %q: generate needs a prompt of at least one token id", m.Name())
	}
	if opts.MaxNewTokens <= 0 {
		return nil, fmt.Errorf("model %q: MaxNewTokens must be positive, got %d", m.Name(), opts.MaxNewTokens)
	}
	var d decoder
	var err error
	if m.graph != nil {
		d, err = newGraphDecoder(m.source, m.graph)
	} else {
		d, err = newLayerDecoder(m.layers)
	}
	if err != nil {
		return nil, err
	}
	gen := &Generation{}
	next := prompt
	for len(gen.IDs) < opts.MaxNewTokens {
		logits, err := d.feed(ctx, next)
		if err != nil {
			return nil, fmt.Errorf("model %q: step %d: %w", m.Name(), len(gen.IDs), err)
		}
		id, err := argmax(logits)
		if err != nil {
			return nil, fmt.Errorf("model %q: step %d: %w", m.Name(), len(gen.IDs), err)
		}
		gen.IDs = append(gen.IDs, id)
		gen.Logits = append(gen.Logits, logits)
		if opts.EOS != nil && id == *opts.EOS {
			break
		}
		next = []int64{id}
	}
	return gen, nil
}

// A decoder runs a model on the next token ids of one sequence, keeping
// its cache between calls.
type decoder interface {
	// feed runs the model on the ids that follow those fed so far and
	// returns the logits at the last of them.
	feed(ctx context.Context, ids []int64) ([]float32, error)
}

// argmax is the index of the largest logit, the first of equal ones; NaN
// logits are an error, since no id is then the model's choice.
func argmax(logits []float32) (int64, error) {
	if len(logits) == 0 {
		return 0, errors.New("the logits are empty")
	}
	best := 0
	for i, v := range logits {
		if math.IsNaN(float64(v)) {
			return 0, fmt.Errorf("logit %d is NaN", i)
		}
		if v > logits[best] {
			best = i
		}
	}
	return int64(best), nil
}

// ones is the attention_mask of n tokens, none of them padding: the new
// queries see every token so far.
func ones(n int) []int64 {
	mask := make([]int64, n)
	for i := range mask {
		mask[i] = 1
	}
	return mask
}

// positions are the position_ids of n tokens after past ones.
func positions(past, n int) []int64 {
	pos := make([]int64, n)
	for i := range pos {
		pos[i] = int64(past + i)
	}
	return pos
}

// layerDecoder steps a model of attnrun layers.
type layerDecoder struct {
	model *models.Model
	state *models.State
	// inputs say what each model input after the ids is fed.
	inputs []decoderInput
}

// decoderInput is what a decoder feeds a model input besides the ids.
type decoderInput int

const (
	attentionMask decoderInput = iota // ones over every token so far
	positionIDs                       // the new tokens' positions
)

func newLayerDecoder(m *models.Model) (*layerDecoder, error) {
	cfg := m.Config()
	d := &layerDecoder{model: m}
	misfit := cfg.InputDtype(0) != tensor.Int64
	for i, name := range cfg.Inputs[1:] {
		switch {
		case cfg.InputDtype(i+1) != tensor.Int64:
			misfit = true
		case name == "attention_mask":
			d.inputs = append(d.inputs, attentionMask)
		case name == "position_ids":
			d.inputs = append(d.inputs, positionIDs)
		default:
			misfit = true
		}
	}
	if misfit {
		return nil, fmt.Errorf("model %q: generate needs a model whose first input is int64 token ids, optionally followed by int64 attention_mask and position_ids (inputs: [{name: input_ids, dtype: int64}]), not %s",
			m.Name(), describeInputs(cfg))
	}
	state, err := m.NewState()
	if err != nil {
		return nil, err
	}
	d.state = state
	return d, nil
}

// describeInputs lists a config's inputs with their element types.
func describeInputs(cfg *models.Config) string {
	parts := make([]string, len(cfg.Inputs))
	for i, in := range cfg.Inputs {
		parts[i] = in + " " + cfg.InputDtype(i).String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (d *layerDecoder) feed(ctx context.Context, ids []int64) ([]float32, error) {
	past := d.state.Tokens()
	args := []*tensor.Dense{tensor.New(tensor.WithShape(1, len(ids)), tensor.WithBacking(slices.Clone(ids)))}
	for _, in := range d.inputs {
		values := positions(past, len(ids))
		if in == attentionMask {
			values = ones(past + len(ids))
		}
		args = append(args, tensor.New(tensor.WithShape(1, len(values)), tensor.WithBacking(values)))
	}
	out, err := d.model.Step(&registry.Run{Context: ctx}, d.state, args...)
	if err != nil {
		return nil, err
	}
	shape := out.Shape()
	if len(shape) != 3 || shape[0] != 1 || shape[1] != len(ids) {
		return nil, fmt.Errorf("the output has shape %s, want logits (1, %d, vocab)", models.FormatShape(shape), len(ids))
	}
	data, ok := out.Data().([]float32)
	if !ok {
		return nil, fmt.Errorf("the output is %v, want float32 logits", out.Dtype())
	}
	vocab := shape[2]
	return slices.Clone(data[len(data)-vocab:]), nil
}

// graphDecoder runs an ONNX decoder graph with past_key_values inputs and
// present outputs, feeding each step's present back as the next past.
type graphDecoder struct {
	graph  *exec.Graph
	source string
	// ids, mask and positions are the names of the graph's inputs (mask
	// and positions empty when the graph has none).
	ids, mask, positions string
	logits               string
	// cache pairs each past input with the present output that extends it.
	cache []cachePair
	// past holds the cache fed to the next step; tokens counts the tokens
	// it covers.
	past   map[string]*array.Array
	tokens int
	// seen are the ids fed so far, for a graph without a cache, which
	// runs the whole sequence at every step.
	seen []int64
}

// cachePair is one KV-cache tensor: the input it is fed as and the output
// that returns it extended by the new tokens.
type cachePair struct {
	past, present string
}

func newGraphDecoder(source string, g *exec.Graph) (*graphDecoder, error) {
	d := &graphDecoder{graph: g, source: source, past: map[string]*array.Array{}}
	outputs := map[string]bool{}
	for _, out := range g.Outputs() {
		outputs[out.Name] = true
	}
	for _, in := range g.Inputs() {
		switch {
		case in.Name == "input_ids":
			d.ids = in.Name
		case in.Name == "attention_mask":
			d.mask = in.Name
		case in.Name == "position_ids":
			d.positions = in.Name
		case isPast(in.Name):
			present := presentName(in.Name)
			if !outputs[present] {
				return nil, fmt.Errorf("%s: cache input %q has no output %q to feed back", source, in.Name, present)
			}
			empty, err := emptyCache(in)
			if err != nil {
				return nil, fmt.Errorf("%s: cache input %q: %w", source, in.Name, err)
			}
			d.cache = append(d.cache, cachePair{past: in.Name, present: present})
			d.past[in.Name] = empty
		default:
			return nil, fmt.Errorf("%s: generate does not know what to feed input %q (a decoder takes input_ids, attention_mask, position_ids and past_key_values.*)", source, in.Name)
		}
		if !isPast(in.Name) && exec.DType(array.Int64) != in.DType {
			return nil, fmt.Errorf("%s: input %q is %v, want int64", source, in.Name, array.DType(in.DType))
		}
	}
	if d.ids == "" {
		return nil, fmt.Errorf("%s: generate needs a decoder graph with an input_ids input; inputs: %s", source, inputNames(g))
	}
	d.logits = "logits"
	if !outputs[d.logits] {
		return nil, fmt.Errorf("%s: generate needs a logits output; outputs: %s", source, outputNames(g))
	}
	return d, nil
}

// isPast reports whether an input is a KV-cache tensor: past_key_values.*
// (optimum's and attnrun's fixtures' name) or past.* (older exports).
func isPast(name string) bool {
	return strings.HasPrefix(name, "past_key_values.") || strings.HasPrefix(name, "past.")
}

// presentName is the output that returns a past input extended:
// past_key_values.0.key → present.0.key.
func presentName(past string) string {
	if rest, ok := strings.CutPrefix(past, "past_key_values"); ok {
		return "present" + rest
	}
	return "present" + strings.TrimPrefix(past, "past")
}

// emptyCache is the cache of no tokens for one sequence: the declared
// shape, (batch, heads, past, head_dim), with batch 1 and past 0.
func emptyCache(in exec.TensorInfo) (*array.Array, error) {
	if len(in.Shape) != 4 {
		return nil, fmt.Errorf("declared shape %v: want (batch, heads, past, head_dim)", in.Shape)
	}
	shape := []int{1, 0, 0, 0}
	for _, axis := range []int{1, 3} {
		dim := in.Shape[axis]
		if !dim.Known || dim.Value <= 0 {
			return nil, fmt.Errorf("axis %d of (batch, heads, past, head_dim) is not a fixed size, so the empty cache's shape is unknown", axis)
		}
		shape[axis] = int(dim.Value)
	}
	return array.New(array.DType(in.DType), shape...)
}

func inputNames(g *exec.Graph) string {
	var names []string
	for _, in := range g.Inputs() {
		names = append(names, in.Name)
	}
	return strings.Join(names, ", ")
}

func outputNames(g *exec.Graph) string {
	var names []string
	for _, out := range g.Outputs() {
		names = append(names, out.Name)
	}
	return strings.Join(names, ", ")
}

func (d *graphDecoder) feed(ctx context.Context, ids []int64) ([]float32, error) {
	if len(d.cache) == 0 { // no cache: every step recomputes the sequence
		d.seen = append(d.seen, ids...)
		ids, d.tokens = d.seen, 0
	}
	n := len(ids)
	feeds := make(map[string]*array.Array, len(d.past)+3)
	feeds[d.ids] = array.FromSlice([]int{1, n}, slices.Clone(ids))
	if d.mask != "" {
		feeds[d.mask] = array.FromSlice([]int{1, d.tokens + n}, ones(d.tokens+n))
	}
	if d.positions != "" {
		feeds[d.positions] = array.FromSlice([]int{1, n}, positions(d.tokens, n))
	}
	for name, past := range d.past {
		feeds[name] = past
	}
	outs, err := d.graph.RunArrays(ctx, feeds)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.source, err)
	}
	logits := outs[d.logits]
	if logits == nil || len(logits.Shape) != 3 || logits.Shape[0] != 1 || logits.Shape[1] != n {
		return nil, fmt.Errorf("%s: logits output %v, want (1, %d, vocab)", d.source, logits, n)
	}
	data, ok := logits.Data.([]float32)
	if !ok || logits.DType != array.Float32 {
		return nil, fmt.Errorf("%s: logits are %v, want float32", d.source, logits.DType)
	}
	for _, c := range d.cache {
		present := outs[c.present]
		if present == nil || len(present.Shape) != 4 || present.Shape[2] != d.tokens+n {
			return nil, fmt.Errorf("%s: output %q is %v, want the cache of %d tokens", d.source, c.present, present, d.tokens+n)
		}
		d.past[c.past] = present
	}
	if len(d.cache) > 0 {
		d.tokens += n
	}
	vocab := logits.Shape[2]
	return slices.Clone(data[len(data)-vocab:]), nil
}

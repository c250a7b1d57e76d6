package models

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// typedGolden is one model of testdata/typed/goldens.json, written by
// testdata/typed/gen.py with PyTorch.
type typedGolden struct {
	Init   orderedDict       `json:"init"`
	Params orderedDict       `json:"params"`
	Inputs []json.RawMessage `json:"inputs"`
	Output json.RawMessage   `json:"output"`
}

// orderedDict is a state_dict in PyTorch's order.
type orderedDict struct {
	names  []string
	values map[string]*tensor.Dense
}

func (d *orderedDict) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return err
	}
	d.values = map[string]*tensor.Dense{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		name := tok.(string)
		shape, data, err := nested(raw)
		if err != nil {
			return err
		}
		d.names = append(d.names, name)
		d.values[name] = floatTensor(shape, data)
	}
	return nil
}

// nested flattens a JSON nested list of numbers, returning its shape.
func nested(raw json.RawMessage) ([]int, []float64, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, nil, err
	}
	var shape []int
	var data []float64
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		switch x := v.(type) {
		case float64:
			data = append(data, x)
		case []any:
			if depth == len(shape) {
				shape = append(shape, len(x))
			}
			for _, e := range x {
				walk(e, depth+1)
			}
		}
	}
	walk(v, 0)
	return shape, data, nil
}

func floatTensor(shape []int, data []float64) *tensor.Dense {
	f := make([]float32, len(data))
	for i, v := range data {
		f[i] = float32(v)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
}

func int64Tensor(t *testing.T, raw json.RawMessage) *tensor.Dense {
	shape, data, err := nested(raw)
	require.NoError(t, err)
	ids := make([]int64, len(data))
	for i, v := range data {
		ids[i] = int64(v)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(ids))
}

func loadTyped(t *testing.T, name string) (*Model, typedGolden) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "typed", "goldens.json"))
	require.NoError(t, err)
	var file map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &file))
	var g typedGolden
	require.NoError(t, json.Unmarshal(file[name], &g))
	yamlName := map[string]string{"lm": "lm.yaml", "encoder": "encoder.yaml"}[name]
	m, err := Load(filepath.Join("testdata", "typed", yamlName))
	require.NoError(t, err)
	return m, g
}

// assertDictEqual compares a state dict with PyTorch's: the same names in
// the same order, the same values to float32 rounding.
func assertDictEqual(t *testing.T, want orderedDict, names []string, got map[string]*tensor.Dense) {
	t.Helper()
	require.Equal(t, want.names, names)
	for _, n := range names {
		require.Equal(t, want.values[n].Shape(), got[n].Shape(), n)
		require.Equal(t, want.values[n].Data(), got[n].Data(), n)
	}
}

// TestTypedInputModelsAgainstPyTorch: models on int64 inputs (token ids,
// token types, an attention mask) with nn.embedding, OPT's offset
// positions, a tied LM head, mean pooling and normalization. Init(seed)
// gives torch.manual_seed(seed)'s weights exactly (the padding row zero,
// the tied weight drawn once and listed under both names); on PyTorch's
// state dict, Forward gives its output within 1e-5 relative, 1e-6 absolute.
func TestTypedInputModelsAgainstPyTorch(t *testing.T) {
	for _, name := range []string{"lm", "encoder"} {
		t.Run(name, func(t *testing.T) {
			m, g := loadTyped(t, name)
			require.NoError(t, m.Init(13))
			names, dict := m.StateDict()
			assertDictEqual(t, g.Init, names, dict)

			require.NoError(t, m.LoadStateDict(g.Params.values))
			var inputs []*tensor.Dense
			for _, raw := range g.Inputs {
				inputs = append(inputs, int64Tensor(t, raw))
			}
			out, err := m.Forward(nil, inputs...)
			require.NoError(t, err)
			shape, want, err := nested(g.Output)
			require.NoError(t, err)
			require.Equal(t, shape, []int(out.Shape()))
			for i, w := range want {
				got := float64(out.Data().([]float32)[i])
				require.InDelta(t, w, got, 1e-6+1e-5*abs(w), "element %d", i)
			}
		})
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestTiedParameterIsShared: the head and the embedding share storage, a
// state dict without the borrowed name loads (as Hugging Face's
// safetensors files store a tied weight once), one whose two names differ
// is refused, and the parameters count the table once.
func TestTiedParameterIsShared(t *testing.T) {
	m, g := loadTyped(t, "lm")
	require.Equal(t, 11*8+14*8+8+8, m.NumParams())
	var names []string
	for _, p := range m.Params() {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"wte.weight", "wpe.weight", "ln.weight", "ln.bias"}, names)

	once := map[string]*tensor.Dense{}
	for k, v := range g.Params.values {
		if k != "lm_head.weight" {
			once[k] = v
		}
	}
	require.NoError(t, m.LoadStateDict(once))
	_, dict := m.StateDict()
	require.Equal(t, g.Params.values["wte.weight"].Data(), dict["lm_head.weight"].Data())

	untied := map[string]*tensor.Dense{}
	for k, v := range g.Params.values {
		untied[k] = v
	}
	other := untied["lm_head.weight"].Clone().(*tensor.Dense)
	other.Data().([]float32)[5] += 1
	untied["lm_head.weight"] = other
	err := m.LoadStateDict(untied)
	require.ErrorContains(t, err, `state dict parameter "lm_head.weight" differs from "wte.weight", to which model "tiny_lm" ties it`)
}

func TestTypedInputErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown dtype", "name: m\ninputs:\n  - {name: ids, dtype: int8}\nlayers:\n  - {name: a, type: nn.dropout}\n", `m.yaml:3: inputs: input "ids" has dtype "int8" (want float32 or int64)`},
		{"unknown field", "name: m\ninputs:\n  - {name: ids, type: int64}\nlayers:\n  - {name: a, type: nn.dropout}\n", `unknown field "type" in input (want name, dtype)`},
		{"not a list", "name: m\ninputs: ids\nlayers:\n  - {name: a, type: nn.dropout}\n", "inputs must be a list of names or {name, dtype} entries"},
		{"tie to nothing", "name: m\ninputs: [x]\nlayers:\n  - {name: head, type: nn.linear, d_in: 2, d_out: 3, tied_weight: emb.weight}\n", `layer "head" ties "weight" to "emb.weight", which is not a parameter of the model`},
		{"tie of another shape", "name: m\ninputs: [{name: ids, dtype: int64}]\nlayers:\n  - {name: emb, type: nn.embedding, num_embeddings: 4, embedding_dim: 2}\n  - {name: head, type: nn.linear, d_in: 2, d_out: 3, tied_weight: emb.weight}\n", `layer "head" ties "weight" to "emb.weight" of shape (4, 2), but needs shape (3, 2)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "m.yaml")
			require.ErrorContains(t, err, c.want)
		})
	}

	m, _ := loadTyped(t, "lm")
	require.NoError(t, m.Init(1))
	_, err := m.Forward(nil, tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{1, 2})))
	require.ErrorContains(t, err, `model "tiny_lm": input "input_ids" is float32, want int64`)
	cfg := m.Config()
	require.Equal(t, []string{"input_ids"}, cfg.Inputs)
	require.Equal(t, tensor.Int64, cfg.InputDtype(0))
	require.Equal(t, tensor.Float32, (&Config{Inputs: []string{"x"}}).InputDtype(0))
}

// TestTypedInputDecode: a model on token ids runs incrementally, token by
// token and in chunks, giving Forward's logits (the positions continue
// from the tokens so far; the tied head is token-wise).
func TestTypedInputDecode(t *testing.T) {
	m, g := loadTyped(t, "lm")
	require.NoError(t, m.LoadStateDict(g.Params.values))
	ids := int64Tensor(t, g.Inputs[0])
	full, err := m.Forward(nil, ids)
	require.NoError(t, err)
	for _, chunk := range []int{1, 3, 7} {
		got, err := m.Decode(nil, chunk, ids)
		require.NoError(t, err)
		require.Equal(t, full.Shape(), got.Shape())
		f, d := full.Data().([]float32), got.Data().([]float32)
		for i := range f {
			require.InDelta(t, f[i], d[i], 1e-6+1e-5*abs(float64(f[i])), "chunk %d element %d", chunk, i)
		}
	}
	s, err := m.NewState()
	require.NoError(t, err)
	_, err = m.Step(nil, s, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int64{1, 2, 3, 4, 5, 6})))
	require.NoError(t, err)
	require.Equal(t, 3, s.Tokens())
}

// TestTypedInputDecodeAlignedInputs: Decode cuts int64 inputs shaped like
// the ids with them: position_ids and token_type_ids to each chunk's
// tokens, attention_mask to the keys so far; the result equals Forward.
func TestTypedInputDecodeAlignedInputs(t *testing.T) {
	m, err := Parse([]byte(`name: hf_decoder
inputs:
  - {name: input_ids, dtype: int64}
  - {name: attention_mask, dtype: int64}
  - {name: position_ids, dtype: int64}
  - {name: token_type_ids, dtype: int64}
layers:
  - {name: wte, type: nn.embedding, num_embeddings: 11, embedding_dim: 8, inputs: [input_ids]}
  - {name: wtt, type: nn.embedding, num_embeddings: 2, embedding_dim: 8, inputs: [token_type_ids]}
  - {name: sum, type: nn.add, inputs: [wte, wtt]}
  - {name: wpe, type: position.learned, context_length: 12, d: 8, offset: 2, inputs: [sum, position_ids]}
  - {name: padding, type: mask.padding, inputs: [attention_mask]}
  - {name: attn, type: attention.sdpa, d: 8, num_heads: 2, causal: true, mask: bool, mask_polarity: keep, inputs: [wpe, padding]}
  - {name: head, type: nn.linear, d_in: 8, d_out: 11, tied_weight: wte.weight}
`), "hf.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(5))
	ids := func(v ...int64) *tensor.Dense { return tensor.New(tensor.WithShape(2, 5), tensor.WithBacking(v)) }
	inputs := []*tensor.Dense{
		ids(3, 0, 7, 10, 1, 4, 4, 9, 6, 2),
		ids(0, 1, 1, 1, 1, 1, 1, 1, 1, 1), // the first sequence left-padded
		ids(-1, 0, 1, 2, 3, 0, 1, 2, 3, 4),
		ids(0, 0, 0, 1, 1, 0, 1, 1, 1, 1),
	}
	full, err := m.Forward(nil, inputs...)
	require.NoError(t, err)
	for _, chunk := range []int{1, 2, 5} {
		got, err := m.Decode(nil, chunk, inputs...)
		require.NoError(t, err)
		require.Equal(t, full.Shape(), got.Shape())
		f, d := full.Data().([]float32), got.Data().([]float32)
		for i := range f {
			require.InDelta(t, f[i], d[i], 1e-6+1e-5*abs(float64(f[i])), "chunk %d element %d", chunk, i)
		}
	}
}

package layers

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// embeddingCase is one entry of testdata/embedding_cases.json, written by
// testdata/embedding_cases.py with PyTorch.
type embeddingCase struct {
	Type      string           `json:"type"`
	Config    json.RawMessage  `json:"config"`
	Params    map[string]array `json:"params"`
	Inputs    []array          `json:"inputs"`
	Output    array            `json:"output"`
	Init      *array           `json:"init"`
	MaskDtype string           `json:"mask_dtype"`
}

var loadEmbeddingFile = goldenCases[json.RawMessage]("embedding_cases.json")

func loadEmbeddingCases() (map[string]embeddingCase, error) {
	file, err := loadEmbeddingFile()
	if err != nil {
		return nil, err
	}
	var cases map[string]embeddingCase
	return cases, json.Unmarshal(file["cases"], &cases)
}

// int64s converts an array of ids, written by JSON as numbers, to an
// int64 tensor.
func (a array) int64s() *tensor.Dense {
	ids := make([]int64, len(a.Data))
	for i, v := range a.Data {
		ids[i] = int64(v)
	}
	return tensor.New(tensor.WithShape(a.Shape...), tensor.WithBacking(ids))
}

// inputs builds the case's inputs: ids and positions as int64, a mask as
// the dtype PyTorch had, token vectors as float32.
func (c embeddingCase) inputs() []*tensor.Dense {
	var xs []*tensor.Dense
	for i, a := range c.Inputs {
		switch {
		case c.Type == "nn.embedding", c.Type == "position.learned" && i == 1, c.MaskDtype == "int64" && i == 1:
			xs = append(xs, a.int64s())
		default:
			xs = append(xs, a.dense())
		}
	}
	return xs
}

// TestEmbeddingLayersAgainstPyTorch runs nn.embedding, position.learned
// with an offset (OPT) and position_ids, pool.mean and nn.normalize on
// PyTorch's inputs with its weights: outputs within 1e-5 relative and
// 1e-6 absolute (lookups are exact).
func TestEmbeddingLayersAgainstPyTorch(t *testing.T) {
	cases, err := loadEmbeddingCases()
	require.NoError(t, err)
	require.Len(t, cases, 11)
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := fromYAML(t, c.Type, string(c.Config))
			require.NoError(t, l.Validate())
			params := l.Params()
			require.Len(t, params, len(c.Params))
			for _, p := range params {
				want, ok := c.Params[p.Name]
				require.True(t, ok, "PyTorch has no parameter %q", p.Name)
				require.Equal(t, want.Shape, []int(p.Value.Shape()), p.Name)
				copy(floats(p.Value), want.Data)
			}
			out, err := l.Forward(nil, c.inputs())
			require.NoError(t, err)
			require.Equal(t, c.Output.Shape, []int(out.Shape()))
			assertClose(t, c.Output.Data, floats(out), 1e-6, 1e-5, name)
		})
	}
}

// TestEmbeddingFinishInitZeroesPadding: after N(0, 1) draws, the padding
// row is zero and the others untouched, as nn.Embedding's reset_parameters.
func TestEmbeddingFinishInitZeroesPadding(t *testing.T) {
	for _, c := range []struct {
		padding, row int
	}{{0, 0}, {-1, 6}, {3, 3}} {
		e := &Embedding{NumEmbeddings: 7, EmbeddingDim: 2, PaddingIdx: &c.padding}
		require.NoError(t, e.Validate())
		w := floats(e.weight)
		for i := range w {
			w[i] = float32(i + 1)
		}
		e.FinishInit()
		for i, v := range w {
			if i/2 == c.row {
				require.Zero(t, v, "padding_idx %d: element %d", c.padding, i)
			} else {
				require.Equal(t, float32(i+1), v, "padding_idx %d: element %d", c.padding, i)
			}
		}
	}
}

func TestEmbeddingErrors(t *testing.T) {
	pad := func(p int) *int { return &p }
	ids := func(v ...int64) *tensor.Dense { return tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v)) }
	for _, c := range []struct {
		name   string
		layer  *Embedding
		inputs []*tensor.Dense
		want   string
	}{
		{"no rows", &Embedding{EmbeddingDim: 2}, nil, "num_embeddings must be positive, got 0"},
		{"no width", &Embedding{NumEmbeddings: 2}, nil, "embedding_dim must be positive, got 0"},
		{"padding too large", &Embedding{NumEmbeddings: 4, EmbeddingDim: 2, PaddingIdx: pad(4)}, nil, "padding_idx 4 is outside [-4, 4)"},
		{"padding too small", &Embedding{NumEmbeddings: 4, EmbeddingDim: 2, PaddingIdx: pad(-5)}, nil, "padding_idx -5 is outside [-4, 4)"},
		{"id too large", &Embedding{NumEmbeddings: 4, EmbeddingDim: 2}, []*tensor.Dense{ids(1, 4)}, "id 4 at index 1 is outside [0, 4), the rows of num_embeddings 4"},
		{"negative id", &Embedding{NumEmbeddings: 4, EmbeddingDim: 2}, []*tensor.Dense{ids(-1)}, "id -1 at index 0 is outside [0, 4)"},
		{"float ids", &Embedding{NumEmbeddings: 4, EmbeddingDim: 2}, []*tensor.Dense{newDense([]int{1, 2}, []float32{0, 1})}, "ids input dtype float32: want int64 (declare the model input with dtype: int64)"},
		{"rank 3 ids", &Embedding{NumEmbeddings: 4, EmbeddingDim: 2}, []*tensor.Dense{tensor.New(tensor.WithShape(1, 1, 1), tensor.WithBacking([]int64{0}))}, "shape (1, 1, 1): want ids (T) or (B, T)"},
		{"two inputs", &Embedding{NumEmbeddings: 4, EmbeddingDim: 2}, []*tensor.Dense{ids(0), ids(0)}, "takes 1 input, got 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.layer.Validate()
			if c.inputs != nil {
				require.NoError(t, err)
				_, err = c.layer.Forward(nil, c.inputs)
			}
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestTiedLinear: a tied nn.linear lists only its bias, refuses to run
// before a model ties it, and then computes x Wᵀ + b with the borrowed
// (d_out, d_in) table.
func TestTiedLinear(t *testing.T) {
	l := &Linear{DIn: 2, DOut: 3, Bias: true, TiedWeight: "wte.weight"}
	require.NoError(t, l.Validate())
	require.Len(t, l.Params(), 1)
	require.Equal(t, "bias", l.Params()[0].Name)
	require.Equal(t, "wte.weight", l.TiedParams()[0].Source)
	require.Equal(t, []int{3, 2}, l.TiedParams()[0].Shape)
	x := matrix([][]float32{{1, 2}})
	_, err := l.Forward(nil, []*tensor.Dense{x})
	require.ErrorContains(t, err, `the weight is tied to "wte.weight"`)
	require.ErrorContains(t, l.Tie("weight", newDense([]int{2, 3}, make([]float32, 6))), "want float32 (d_out, d_in) = (3, 2)")
	require.ErrorContains(t, l.Tie("bias", newDense([]int{3, 2}, make([]float32, 6))), `asked to tie "bias"`)
	table := newDense([]int{3, 2}, []float32{1, 0, 0, 1, 1, 1})
	require.NoError(t, l.Tie("weight", table))
	copy(floats(l.Params()[0].Value), []float32{10, 20, 30})
	out, err := l.Forward(nil, []*tensor.Dense{x})
	require.NoError(t, err)
	require.Equal(t, []float32{11, 22, 33}, floats(out))
	require.Nil(t, (&Linear{DIn: 2, DOut: 3}).TiedParams())
}

// TestPaddingMask: a (B, T) attention_mask, int64 or float32, becomes the
// (B, 1, 1, T) keep mask, 1 wherever it is non-zero.
func TestPaddingMask(t *testing.T) {
	p := &PaddingMask{}
	require.NoError(t, p.Validate())
	for _, mask := range []*tensor.Dense{
		tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int64{1, 1, 0, 1, 0, 2})),
		newDense([]int{2, 3}, []float32{1, 1, 0, 1, 0, 2}),
	} {
		out, err := p.Forward(nil, []*tensor.Dense{mask})
		require.NoError(t, err)
		require.Equal(t, tensor.Shape{2, 1, 1, 3}, out.Shape())
		require.Equal(t, []float32{1, 1, 0, 1, 0, 1}, floats(out))
	}
	_, err := p.Forward(nil, []*tensor.Dense{newDense([]int{3}, []float32{1, 1, 1})})
	require.ErrorContains(t, err, "attention_mask shape (3,): want (B, T)")
	_, err = p.Forward(nil, []*tensor.Dense{tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]int32{1, 1}))})
	require.ErrorContains(t, err, "attention_mask dtype int32: want int64 or float32")
}

// TestLearnedPositionStepWithPositionIDs: stepping with the new tokens'
// position_ids (OPT's left padding: -1 on the padding) gives Forward's
// rows, and the session counts the tokens.
func TestLearnedPositionStepWithPositionIDs(t *testing.T) {
	p := validated(t, &LearnedPosition{ContextLength: 6, D: 3, Offset: 2}, 7).(*LearnedPosition)
	x := randomDense(rand.New(rand.NewPCG(1, 2)), 2, 5, 3)
	pos := tensor.New(tensor.WithShape(2, 5), tensor.WithBacking([]int64{-1, -1, 0, 1, 2, 0, 1, 2, 3, 4}))
	full, err := p.Forward(nil, []*tensor.Dense{x, pos})
	require.NoError(t, err)
	state := p.NewState()
	var rows [][]float32
	for _, cut := range [][2]int{{0, 2}, {2, 3}, {3, 5}} {
		n := cut[1] - cut[0]
		var xData []float32
		var idData []int64
		for b := range 2 {
			xData = append(xData, floats(x)[(b*5+cut[0])*3:(b*5+cut[1])*3]...)
			idData = append(idData, pos.Data().([]int64)[b*5+cut[0]:b*5+cut[1]]...)
		}
		chunk := newDense([]int{2, n, 3}, xData)
		ids := tensor.New(tensor.WithShape(2, n), tensor.WithBacking(idData))
		out, err := p.Step(nil, state, []*tensor.Dense{chunk, ids})
		require.NoError(t, err)
		rows = append(rows, floats(out))
	}
	require.Equal(t, 5, state.Tokens())
	want := floats(full)
	for b := range 2 {
		var got []float32
		for i, cut := range [][2]int{{0, 2}, {2, 3}, {3, 5}} {
			n := (cut[1] - cut[0]) * 3
			got = append(got, rows[i][b*n:(b+1)*n]...)
		}
		require.Equal(t, want[b*15:(b+1)*15], got, "sequence %d", b)
	}
}

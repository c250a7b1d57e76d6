package lift

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/tensor"
)

// A context mask is a keep mask over the positions of a whole context,
// (B, 1, rows, columns) of 1s (attend) and 0s (hide), of which a graph
// reads the block of its queries: Megatron's GPT-2 takes a (B, 1, Lmax,
// Lmax) attention_mask and slices rows past..past+T and columns
// 0..past+T of it, the past being the length of its KV cache. Without
// the cache (kvcache.go) the block is the first T rows and columns; the
// self-check with a past shows that the lifted mask layer, which steps
// through the rows at the cache offset, cuts the block the graph cuts.

// contextMaskAt checks at a probe that the masks computed from input, a
// (B or 1, 1 or heads, rows, columns) tensor for B sequences (float32,
// int64, int32 or bool), hide a score's key exactly where the input's
// entry at the query's row and the key's column is 0 (false), and add
// nothing elsewhere: added as Hugging Face and Megatron add it
// (keepproduct.go), or applied by a Where. It feeds a random pattern of
// 0s and 1s.
func (l *attentionLayer) contextMaskAt(p *probe, hs heads, scoreShape []int, B int, input string, feed *tensor.Dense) error {
	shape := []int(feed.Shape())
	n := len(scoreShape)
	Tq, Tk := scoreShape[n-2], scoreShape[n-1]
	if len(shape) != 4 || shape[0] != 1 && shape[0] != B || shape[1] != 1 && shape[1] != hs.H || shape[2] < Tq || shape[3] < Tk {
		return fmt.Errorf("mask input %q has shape %s; a mask over the context is (batch, 1, rows, columns) of at least %d rows and %d columns",
			input, fmtShape(shape), Tq, Tk)
	}
	if Tq != Tk {
		return fmt.Errorf("mask input %q masks %d queries against %d keys; a mask over the context masks self-attention", input, Tq, Tk)
	}
	rng := rand.New(rand.NewPCG(19, uint64(Tk)))
	keep := make([]bool, product(shape))
	for i := range keep {
		keep[i] = rng.Float64() < 0.6
	}
	override, ok := keepTensor(feed.Dtype(), shape, keep)
	if !ok {
		return fmt.Errorf("mask input %q is %v; a mask over the context is float32, int64, int32 or bool", input, feed.Dtype())
	}
	var values []string
	for _, d := range l.sc.dynamic {
		values = append(values, d.value)
	}
	outs, err := p.run(l.a.g.Model.GetGraph().GetNode(), nil, values, map[string]*tensor.Dense{input: override})
	if err != nil {
		return err
	}
	hidden, _, err := l.scoreMasks(p, outs, scoreShape, true)
	if err != nil {
		return fmt.Errorf("the mask from %q %w", input, err)
	}
	rows, cols := shape[2], shape[3]
	for i := range hidden {
		grp, q, k := i/(Tq*Tk), (i/Tk)%Tq, i%Tk
		b, h := hs.seq[grp], hs.head[grp]
		if shape[0] == 1 {
			b = 0
		}
		if shape[1] == 1 {
			h = 0
		}
		if kept := keep[((b*shape[1]+h)*rows+q)*cols+k]; hidden[i] == kept {
			state, entry := "kept", 0
			if hidden[i] {
				state, entry = "hidden", 1
			}
			return fmt.Errorf("the mask from %q does not follow it: query %d, key %d of sequence %d, head %d is %s where %s[%d, %d, %d, %d] is %d",
				input, q, k, hs.seq[grp], hs.head[grp], state, input, b, h, q, k, entry)
		}
	}
	return nil
}

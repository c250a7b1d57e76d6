package lift

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// A context mask is a keep mask over the positions of a whole context,
// (B, 1, rows, columns) of 1s (attend) and 0s (hide), of which a graph
// reads the block of its queries: Megatron's GPT-2 takes a (B, 1, Lmax,
// Lmax) attention_mask and slices rows past..past+T and columns
// 0..past+T of it, the past being the length of its KV cache. Without
// the cache (kvcache.go) the block is the first T rows and columns; the
// self-check with a past shows that the lifted mask layer, which steps
// through the rows at the cache offset, cuts the block the graph cuts.

// contextMaskAt checks at a probe that the mask computed from input, a
// float32 (B or 1, 1 or heads, rows, columns) tensor for B sequences, hides a score's key
// exactly where the input's entry at the query's row and the key's column
// is 0, and adds nothing elsewhere. It feeds a random pattern of 0s and
// 1s.
func (l *attentionLayer) contextMaskAt(p *probe, hs heads, scoreShape []int, B int, input string, feed *tensor.Dense) error {
	shape := []int(feed.Shape())
	n := len(scoreShape)
	Tq, Tk := scoreShape[n-2], scoreShape[n-1]
	if feed.Dtype() != tensor.Float32 || len(shape) != 4 || shape[0] != 1 && shape[0] != B || shape[1] != 1 && shape[1] != hs.H ||
		shape[2] < Tq || shape[3] < Tk {
		return fmt.Errorf("mask input %q is %v of shape %s; a mask over the context is float32 (batch, 1, rows, columns) of at least %d rows and %d columns",
			input, feed.Dtype(), fmtShape(shape), Tq, Tk)
	}
	if Tq != Tk {
		return fmt.Errorf("mask input %q masks %d queries against %d keys; a mask over the context masks self-attention", input, Tq, Tk)
	}
	if len(l.sc.dynamic) != 1 || l.sc.dynamic[0].kind != maskAdd {
		return fmt.Errorf("mask input %q is (batch, 1, rows, columns) and masks the scores other than by one added mask", input)
	}
	rng := rand.New(rand.NewPCG(19, uint64(Tk)))
	keep := make([]bool, product(shape))
	for i := range keep {
		keep[i] = rng.Float64() < 0.6
	}
	v := l.sc.dynamic[0].value
	override := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(onesWhere[float32](keep)))
	outs, err := p.run(l.a.g.Model.GetGraph().GetNode(), nil, []string{v}, map[string]*tensor.Dense{input: override})
	if err != nil {
		return err
	}
	t := outs[v]
	ts := []int(t.Shape())
	target, err := l.sc.dynamic[0].shapeAt(p, scoreShape)
	if err != nil {
		return err
	}
	if t.IsScalar() || !broadcasts(ts, target) {
		return fmt.Errorf("the mask %q from %q of shape %s does not fit the scores %s", v, input, fmtShape(ts), fmtShape(target))
	}
	vals, err := match.Floats(t)
	if err != nil {
		return err
	}
	rows, cols := shape[2], shape[3]
	for i := range product(scoreShape) {
		grp, q, k := i/(Tq*Tk), (i/Tk)%Tq, i%Tk
		b, h := hs.seq[grp], hs.head[grp]
		if shape[0] == 1 {
			b = 0
		}
		if shape[1] == 1 {
			h = 0
		}
		x := vals[broadcastIndex(i, target, ts)]
		hidden := x <= masked
		if !hidden && x != 0 {
			return fmt.Errorf("the mask %q from %q adds %g to some scores: a bias, not a keep mask", v, input, x)
		}
		if kept := keep[((b*shape[1]+h)*rows+q)*cols+k]; hidden == kept {
			state, entry := "kept", 0
			if hidden {
				state, entry = "hidden", 1
			}
			return fmt.Errorf("the mask %q does not follow %q: query %d, key %d of sequence %d, head %d is %s where %s[%d, %d, %d, %d] is %d",
				v, input, q, k, hs.seq[grp], hs.head[grp], state, input, b, h, q, k, entry)
		}
	}
	return nil
}

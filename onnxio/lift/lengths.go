package lift

import (
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// lengthsMaskAt reports whether the mask computed from input, (B) int32 or
// int64, hides the keys of sequence b from input[b] on (adding -10000 or
// less to their scores) and adds nothing to the others: ONNX Runtime's
// 1-D mask_index, the lengths of right-padded sequences, which mask.lengths
// turns into the keep mask attention reads. It feeds random lengths from 1
// to the number of keys.
func (l *attentionLayer) lengthsMaskAt(p *probe, hs heads, scoreShape []int, input string, feed *tensor.Dense) (bool, error) {
	S := scoreShape[len(scoreShape)-1]
	if len(l.sc.dynamic) != 1 || l.sc.dynamic[0].kind != maskAdd || S < 2 {
		return false, nil
	}
	rng := rand.New(rand.NewPCG(13, uint64(S)))
	lengths := make([]int, feed.Shape()[0])
	for i := range lengths {
		lengths[i] = 1 + rng.IntN(S)
	}
	lengths[0] = S - 1 // one sequence padded at least
	override := lengthsTensor(lengths, feed.Dtype())
	v := l.sc.dynamic[0].value
	outs, err := p.run(l.a.g.Model.GetGraph().GetNode(), nil, []string{v}, map[string]*tensor.Dense{input: override})
	if err != nil {
		return false, err
	}
	t := outs[v]
	ts := []int(t.Shape())
	target, err := l.sc.dynamic[0].shapeAt(p, scoreShape)
	if err != nil || t.IsScalar() || !broadcasts(ts, target) {
		return false, err
	}
	vals, err := match.Floats(t)
	if err != nil {
		return false, err
	}
	Tq, Tk := scoreShape[len(scoreShape)-2], scoreShape[len(scoreShape)-1]
	for i := range product(scoreShape) {
		grp, k := i/(Tq*Tk), i%Tk
		x := vals[broadcastIndex(i, target, ts)]
		hidden := x <= masked
		if !hidden && x != 0 || hidden != (k >= lengths[hs.seq[grp]]) {
			return false, nil
		}
	}
	return true, nil
}

// lengthsTensor holds sequence lengths in an int32 or int64 tensor.
func lengthsTensor(lengths []int, dt tensor.Dtype) *tensor.Dense {
	if dt == tensor.Int32 {
		d := make([]int32, len(lengths))
		for i, n := range lengths {
			d[i] = int32(n)
		}
		return tensor.New(tensor.WithShape(len(d)), tensor.WithBacking(d))
	}
	d := make([]int64, len(lengths))
	for i, n := range lengths {
		d[i] = int64(n)
	}
	return tensor.New(tensor.WithShape(len(d)), tensor.WithBacking(d))
}

// randomLengths is a lengths input shaped and typed like t, each from 1
// to tokens.
func randomLengths(rng *rand.Rand, t *tensor.Dense, tokens int) *tensor.Dense {
	lengths := make([]int, t.Shape().TotalSize())
	for i := range lengths {
		lengths[i] = 1 + rng.IntN(max(tokens, 1))
	}
	return lengthsTensor(lengths, t.Dtype())
}

package lift

import (
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// fillMaskAt reports whether the mask computed from input (int64 or
// int32, (B, S)) adds (1 - m) * fill to the scores, fill the same finite
// number for every padding key and nothing to the others: Hugging Face's
// extended attention mask when fill is too small to hide a key (a test
// graph's 0.125), which mask.additive computes. It feeds a random pattern
// of 0s and 1s and returns fill.
func (l *attentionLayer) fillMaskAt(p *probe, hs heads, scoreShape []int, input string, feed *tensor.Dense) (float64, bool, error) {
	shape := []int(feed.Shape())
	S := shape[len(shape)-1]
	if len(l.sc.dynamic) != 1 || l.sc.dynamic[0].kind != maskAdd || S < 2 {
		return 0, false, nil
	}
	rng := rand.New(rand.NewPCG(17, uint64(S)))
	keep := make([]bool, product(shape))
	for i := range keep { // each sequence keeps its first key and pads its last
		keep[i] = i%S == 0 || i%S != S-1 && rng.Float64() < 0.6
	}
	override := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(onesWhere[int64](keep)))
	if feed.Dtype() == tensor.Int32 {
		override = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(onesWhere[int32](keep)))
	}
	v := l.sc.dynamic[0].value
	outs, err := p.run(l.a.g.Model.GetGraph().GetNode(), nil, []string{v}, map[string]*tensor.Dense{input: override})
	if err != nil {
		return 0, false, err
	}
	t := outs[v]
	ts := []int(t.Shape())
	target, err := l.sc.dynamic[0].shapeAt(p, scoreShape)
	if err != nil || t.IsScalar() || !broadcasts(ts, target) {
		return 0, false, err
	}
	vals, err := match.Floats(t)
	if err != nil {
		return 0, false, err
	}
	Tq, Tk := scoreShape[len(scoreShape)-2], scoreShape[len(scoreShape)-1]
	fill := math.NaN()
	for i := range product(scoreShape) {
		grp, k := i/(Tq*Tk), i%Tk
		x := vals[broadcastIndex(i, target, ts)]
		if keep[hs.seq[grp]*S+k] {
			if x != 0 {
				return 0, false, nil
			}
			continue
		}
		if math.IsNaN(fill) {
			fill = x
		}
		if x != fill || x == 0 || math.IsInf(x, 0) {
			return 0, false, nil
		}
	}
	return fill, !math.IsNaN(fill), nil
}

package exec

import (
	"fmt"
	"slices"
)

// The training losses of the default domain (opset 12 on; later versions
// only added element types).
func init() {
	lossAttrs := map[string]attrKind{"ignore_index": attrInt, "reduction": attrString}
	ops["NegativeLogLikelihoodLoss"] = &opSpec{since: 12, minIn: 2, maxIn: 3, minOut: 1, maxOut: 1, attrs: lossAttrs, run: lossOp(false)}
	ops["SoftmaxCrossEntropyLoss"] = &opSpec{since: 12, minIn: 2, maxIn: 3, minOut: 1, maxOut: 2, attrs: lossAttrs, run: lossOp(true)}
}

// lossOp is the kernel of NegativeLogLikelihoodLoss and (with softmax)
// SoftmaxCrossEntropyLoss. The input is (N, C, d1, ..., dk) and the target
// (N, d1, ..., dk) holds class indices; each element's loss is
// -input[n, target, d...] · weight[target] (weight 1 without the optional
// weight input), and 0 with weight 0 where the target is ignore_index.
// SoftmaxCrossEntropyLoss first takes the log-softmax over C and can
// return it as a second output. reduction none returns the losses, sum
// their sum, mean (the default) their sum divided by the sum of the
// weights.
func lossOp(softmax bool) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		x, tv, wv := in[0], in[1], input(in, 2)
		if !x.dtype.IsFloat() {
			return nil, errDType(x, "float32 or float64")
		}
		if x.rank() < 2 {
			return nil, fmt.Errorf("input has rank %d, want at least 2 (N, C, ...)", x.rank())
		}
		nb, c := x.shape[0], x.shape[1]
		if want := slices.Concat(x.shape[:1], x.shape[2:]); !equalShapes(tv.shape, want) {
			return nil, fmt.Errorf("target has shape %s, want %s", shapeString(tv.shape), shapeString(want))
		}
		target, err := ints(rc, n, tv)
		if err != nil {
			return nil, fmt.Errorf("target: %w", err)
		}
		var weight []float64
		if wv != nil {
			if wv.dtype != x.dtype || wv.rank() != 1 || wv.shape[0] != c {
				return nil, fmt.Errorf("weight %s must be a %s vector of the %d classes", wv.describe(), x.dtype, c)
			}
			weight = castTo[float64](wv.data)
		}
		reduction := n.attrs["reduction"].s
		switch reduction {
		case "":
			reduction = "mean"
		case "none", "sum", "mean":
		default:
			return nil, fmt.Errorf("reduction %q is not none, sum or mean", reduction)
		}
		xs := castTo[float64](x.data)
		d := numel(x.shape[2:])
		if softmax {
			softmaxLines(xs, nb, c, d, true)
		}
		ignore, hasIgnore := n.attrs["ignore_index"]
		losses := make([]float64, len(target))
		var lossSum, weightSum float64
		for i, t := range target {
			if hasIgnore && t == ignore.i {
				continue
			}
			if t < 0 || t >= int64(c) {
				return nil, fmt.Errorf("target %d is not a class index in [0, %d)", t, c)
			}
			w := 1.0
			if weight != nil {
				w = weight[t]
			}
			b, j := i/d, i%d
			losses[i] = -xs[(b*c+int(t))*d+j] * w
			lossSum += losses[i]
			weightSum += w
		}
		var loss *value
		switch reduction {
		case "none":
			if loss, err = rc.alloc(n, x.dtype, tv.shape); err != nil {
				return nil, err
			}
			fill(loss, losses)
		case "sum":
			loss = castValue(scalarOf(lossSum), x.dtype)
		default:
			loss = castValue(scalarOf(lossSum/weightSum), x.dtype)
		}
		outs := []*value{loss}
		if softmax && len(n.out) > 1 {
			logProb, err := rc.alloc(n, x.dtype, x.shape)
			if err != nil {
				return nil, err
			}
			outs = append(outs, fill(logProb, xs))
		}
		return outs, nil
	}
}

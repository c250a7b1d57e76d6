package exec

import (
	"fmt"
	"math"
)

// Normalizations beyond ops_norm.go's LayerNormalization, and the
// Softmax family's LogSoftmax and Hardmax.
// Statistics are computed in float64 and results rounded once to the
// input's float type.
func init() {
	ops["LogSoftmax"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: softmaxOp(true),
		attrs: map[string]attrKind{"axis": attrInt}}
	ops["Hardmax"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: hardmaxOp,
		attrs: map[string]attrKind{"axis": attrInt}}
	ops["RMSNormalization"] = &opSpec{since: 23, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: rmsNormOp,
		attrs: map[string]attrKind{"axis": attrInt, "epsilon": attrFloat, "stash_type": attrInt}}
	ops["LpNormalization"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: lpNormOp,
		attrs: map[string]attrKind{"axis": attrInt, "p": attrInt}}
	ops["MeanVarianceNormalization"] = &opSpec{since: 9, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: mvnOp,
		attrs: map[string]attrKind{"axes": attrInts}}
	ops["InstanceNormalization"] = &opSpec{since: 6, minIn: 3, maxIn: 3, minOut: 1, maxOut: 1, run: instanceNormOp,
		attrs: map[string]attrKind{"epsilon": attrFloat}}
	ops["BatchNormalization"] = &opSpec{since: 9, minIn: 5, maxIn: 5, minOut: 1, maxOut: 3, run: batchNormOp,
		attrs: map[string]attrKind{"epsilon": attrFloat, "momentum": attrFloat, "training_mode": attrInt}}
}

// softmaxAxes views a float x as (outer, d, inner) for the Softmax family
// (Softmax, LogSoftmax, Hardmax): before opset 13 the input is coerced to 2-D at
// axis (default 1), so d spans every axis from it; from 13 d is the one
// axis (default -1).
func softmaxAxes(n *node, x *value) (outer, d, inner int, err error) {
	if !x.dtype.IsFloat() {
		return 0, 0, 0, errDType(x, "float32 or float64")
	}
	r := x.rank()
	if n.opset < 13 {
		axis, err := normalizeAxis(int(n.attrInt("axis", 1)), max(r, 1))
		if err != nil {
			return 0, 0, 0, err
		}
		return numel(x.shape[:axis]), numel(x.shape[axis:]), 1, nil
	}
	axis, err := normalizeAxis(int(n.attrInt("axis", -1)), r)
	if err != nil {
		return 0, 0, 0, err
	}
	return numel(x.shape[:axis]), x.shape[axis], numel(x.shape[axis+1:]), nil
}

// hardmaxOp is the kernel of Hardmax: 1 at the first maximum along the
// Softmax axes, 0 elsewhere.
func hardmaxOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	outer, d, inner, err := softmaxAxes(n, x)
	if err != nil {
		return nil, err
	}
	out, err := rc.alloc(n, x.dtype, x.shape)
	if err != nil {
		return nil, err
	}
	first := make([]int64, outer*inner)
	argIndex(castTo[float64](x.data), true, false, outer, d, inner, first)
	y := make([]float64, x.size())
	for k, j := range first {
		o, i := k/inner, k%inner
		y[(o*d+int(j))*inner+i] = 1
	}
	return one(fill(out, y))
}

// fill stores float64 results into a float value, rounding once.
func fill(out *value, y []float64) *value {
	switch o := out.data.(type) {
	case []float32:
		for i, v := range y {
			o[i] = float32(v)
		}
	case []float64:
		copy(o, y)
	}
	return out
}

// rmsNormOp is the kernel of RMSNormalization (opset 23): each slice
// x[..., axis:] is divided by √(mean(x²) + epsilon) and multiplied by
// scale, which broadcasts to the normalized shape. stash_type (float32 by
// default) is the precision of the statistics; float64 is at least that.
func rmsNormOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, scale := in[0], in[1]
	if err := sameFloat(in); err != nil {
		return nil, err
	}
	if _, err := stashType(n); err != nil {
		return nil, err
	}
	axis, err := normalizeAxis(int(n.attrInt("axis", -1)), x.rank())
	if err != nil {
		return nil, err
	}
	eps := float64(n.attrFloat("epsilon", 1e-5))
	norm := x.shape[axis:]
	sc, err := broadcastTo(rc, n, scale, norm)
	if err != nil {
		return nil, fmt.Errorf("scale: %w", err)
	}
	out, err := rc.alloc(n, x.dtype, x.shape)
	if err != nil {
		return nil, err
	}
	xs := castTo[float64](x.data)
	rows, cols := numel(x.shape[:axis]), numel(norm)
	for i := range rows {
		row := xs[i*cols : (i+1)*cols]
		var sq float64
		for _, v := range row {
			sq += v * v
		}
		inv := 1 / math.Sqrt(sq/float64(cols)+eps)
		for j, v := range row {
			row[j] = v * inv * sc[j]
		}
	}
	return one(fill(out, xs))
}

// lpNormOp is the kernel of LpNormalization: x divided by its L1 (Σ|x|)
// or L2 (√Σx²) norm along axis (default -1); where the norm is 0 the
// result is 0.
func lpNormOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	p := n.attrInt("p", 2)
	if p != 1 && p != 2 {
		return nil, fmt.Errorf("p is %d, want 1 or 2", p)
	}
	axis, err := normalizeAxis(int(n.attrInt("axis", -1)), x.rank())
	if err != nil {
		return nil, err
	}
	reduced := make([]bool, x.rank())
	reduced[axis] = true
	return normalizeGroups(rc, n, x, reduced, func(group []float64) func(float64) float64 {
		var norm float64
		for _, v := range group {
			if p == 1 {
				norm += math.Abs(v)
			} else {
				norm += v * v
			}
		}
		if p == 2 {
			norm = math.Sqrt(norm)
		}
		return func(v float64) float64 {
			if norm == 0 {
				return 0
			}
			return v / norm
		}
	})
}

// mvnOp is the kernel of MeanVarianceNormalization: (x - mean) /
// (√variance + 1e-9) over axes (default 0, 2, 3), as the function body of
// the spec computes it.
func mvnOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	axes, ok := n.attrInts("axes")
	if !ok {
		axes = []int64{0, 2, 3}
	}
	pos, err := normalizeAxes(axes, x.rank())
	if err != nil {
		return nil, err
	}
	reduced := make([]bool, x.rank())
	for _, a := range pos {
		reduced[a] = true
	}
	return normalizeGroups(rc, n, x, reduced, func(group []float64) func(float64) float64 {
		mean, variance := moments(group)
		std := math.Sqrt(variance) + 1e-9
		return func(v float64) float64 { return (v - mean) / std }
	})
}

// moments returns the mean and the population variance of xs.
func moments(xs []float64) (mean, variance float64) {
	for _, v := range xs {
		mean += v
	}
	mean /= float64(len(xs))
	for _, v := range xs {
		variance += (v - mean) * (v - mean)
	}
	return mean, variance / float64(len(xs))
}

// normalizeGroups splits x into the groups of elements that share every
// unmarked index, asks per for the group's map from its elements, and
// applies it: the common shape of Lp, MVN and instance normalization.
func normalizeGroups(rc *runCtx, n *node, x *value, reduced []bool, per func(group []float64) func(float64) float64) ([]*value, error) {
	out, err := rc.alloc(n, x.dtype, x.shape)
	if err != nil {
		return nil, err
	}
	xs := castTo[float64](x.data)
	kept, _ := keptShape(x.shape, reduced)
	groups := numel(kept)
	members := make([][]int, groups) // element indices by group
	eachReduced(x.shape, reduced, func(ix, io int) { members[io] = append(members[io], ix) })
	y := make([]float64, len(xs))
	vals := []float64{}
	for _, idx := range members {
		vals = vals[:0]
		for _, ix := range idx {
			vals = append(vals, xs[ix])
		}
		f := per(vals)
		for _, ix := range idx {
			y[ix] = f(xs[ix])
		}
	}
	return one(fill(out, y))
}

// instanceNormOp is the kernel of InstanceNormalization: for each sample
// and channel (axes 0 and 1), (x - mean) / √(variance + epsilon) over the
// spatial axes, times scale[c] plus B[c].
func instanceNormOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, scale, bias := in[0], in[1], in[2]
	if err := sameFloat(in); err != nil {
		return nil, err
	}
	if x.rank() < 3 {
		return nil, fmt.Errorf("input has rank %d, want at least 3 (N, C, D1, ...)", x.rank())
	}
	c := x.shape[1]
	if scale.size() != c || bias.size() != c {
		return nil, fmt.Errorf("scale %s and B %s must have the %d channels of the input", shapeString(scale.shape), shapeString(bias.shape), c)
	}
	eps := float64(n.attrFloat("epsilon", 1e-5))
	sc, b := castTo[float64](scale.data), castTo[float64](bias.data)
	reduced := make([]bool, x.rank())
	for i := 2; i < x.rank(); i++ {
		reduced[i] = true
	}
	group := 0
	return normalizeGroups(rc, n, x, reduced, func(vals []float64) func(float64) float64 {
		ch := group % c // groups come in (n, c) row-major order
		group++
		mean, variance := moments(vals)
		inv := 1 / math.Sqrt(variance+eps)
		return func(v float64) float64 { return (v-mean)*inv*sc[ch] + b[ch] }
	})
}

// batchNormOp is the kernel of BatchNormalization: per channel (axis 1),
// (x - mean) / √(var + epsilon) · scale + B with the given statistics.
// With training_mode (opset 14 on) the statistics are the batch's own
// (population variance over every axis but 1), and the optional outputs
// are the running statistics, input·momentum + batch·(1 - momentum).
// Before opset 14 only the inference output is supported.
func batchNormOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, scale, bias, mean, variance := in[0], in[1], in[2], in[3], in[4]
	if err := sameFloat(in); err != nil {
		return nil, err
	}
	if x.rank() < 2 {
		return nil, fmt.Errorf("input has rank %d, want at least 2 (N, C, ...)", x.rank())
	}
	c := x.shape[1]
	for i, v := range in[1:] {
		if v.size() != c {
			return nil, fmt.Errorf("input %d has shape %s, want the %d channels of X", i+1, shapeString(v.shape), c)
		}
	}
	training := n.attrInt("training_mode", 0) == 1
	if n.opset < 14 && len(n.out) > 1 {
		return nil, fmt.Errorf("training outputs before opset 14 are not supported")
	}
	if !training && len(n.out) > 1 {
		return nil, fmt.Errorf("running_mean and running_var are outputs only with training_mode 1")
	}
	eps := float64(n.attrFloat("epsilon", 1e-5))
	momentum := float64(n.attrFloat("momentum", 0.9))
	sc, b := castTo[float64](scale.data), castTo[float64](bias.data)
	mu, v := castTo[float64](mean.data), castTo[float64](variance.data)
	inner := numel(x.shape[2:])
	xs := castTo[float64](x.data)
	if training {
		batchMu, batchVar := make([]float64, c), make([]float64, c)
		count := float64(x.shape[0] * inner)
		for i, e := range xs {
			batchMu[i/inner%c] += e / count
		}
		for i, e := range xs {
			d := e - batchMu[i/inner%c]
			batchVar[i/inner%c] += d * d / count
		}
		for k := range c {
			mu[k] = mu[k]*momentum + batchMu[k]*(1-momentum)
			v[k] = v[k]*momentum + batchVar[k]*(1-momentum)
		}
		normalizeChannels(xs, batchMu, batchVar, sc, b, eps, inner, c)
	} else {
		normalizeChannels(xs, mu, v, sc, b, eps, inner, c)
	}
	y, err := rc.alloc(n, x.dtype, x.shape)
	if err != nil {
		return nil, err
	}
	outs := []*value{fill(y, xs)}
	if training {
		outs = append(outs, castValue(valueOf(mean.shape, mu), x.dtype), castValue(valueOf(variance.shape, v), x.dtype))
	}
	return outs, nil
}

// normalizeChannels normalizes xs (N, C, inner) in place with per-channel
// statistics and affine parameters.
func normalizeChannels(xs, mean, variance, scale, bias []float64, eps float64, inner, c int) {
	for i, e := range xs {
		k := i / inner % c
		xs[i] = (e-mean[k])/math.Sqrt(variance[k]+eps)*scale[k] + bias[k]
	}
}

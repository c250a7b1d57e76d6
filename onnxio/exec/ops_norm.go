package exec

import (
	"fmt"
	"math"
	"slices"

	"github.com/attnrun/attnrun/internal/kernels"
)

// softmaxOp is the kernel of Softmax. Before opset 13 the input is coerced
// to 2-D at axis (default 1) and each row of the flattened tail is
// normalized; from 13 the softmax runs along the one axis (default -1).
func softmaxOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	r := x.rank()
	if n.opset < 13 {
		axis, err := normalizeAxis(int(n.attrInt("axis", 1)), max(r, 1))
		if err != nil {
			return nil, err
		}
		return one(softmax(x, numel(x.shape[:axis]), numel(x.shape[axis:]), 1))
	}
	axis, err := normalizeAxis(int(n.attrInt("axis", -1)), r)
	if err != nil {
		return nil, err
	}
	return one(softmax(x, numel(x.shape[:axis]), x.shape[axis], numel(x.shape[axis+1:])))
}

// softmax normalizes x viewed as (outer, d, inner) along d.
func softmax(x *value, outer, d, inner int) *value {
	out := &value{dtype: x.dtype, shape: x.shape, data: cloneData(x.data)}
	if x.dtype == Float32 && inner == 1 {
		// NaN and ±Inf come out as ONNX's: a row with a NaN or a +Inf, or
		// nothing but -Inf, becomes NaN.
		kernels.SoftmaxRows(out.data.([]float32), outer, d)
		return out
	}
	y := castTo[float64](out.data)
	softmaxStrided(y, outer, d, inner)
	return castValue(valueOf(x.shape, y), x.dtype)
}

// allNegInf reports whether a non-empty row holds only -Inf.
func allNegInf(row []float32) bool {
	for _, v := range row {
		if !math.IsInf(float64(v), -1) {
			return false
		}
	}
	return len(row) > 0
}

// softmaxStrided normalizes y viewed as (outer, d, inner) along d, in
// float64: e^(x - max) / Σ e^(x - max).
func softmaxStrided(y []float64, outer, d, inner int) {
	for o := range outer {
		for i := range inner {
			base := o*d*inner + i
			maxv := math.Inf(-1)
			for j := range d {
				maxv = max(maxv, y[base+j*inner])
			}
			var sum float64
			for j := range d {
				e := math.Exp(y[base+j*inner] - maxv)
				y[base+j*inner] = e
				sum += e
			}
			for j := range d {
				y[base+j*inner] /= sum
			}
		}
	}
}

// layerNormOp is the kernel of LayerNormalization (opset 17): each slice
// x[..., axis:] is normalized, (x - mean) / sqrt(var + epsilon), then
// scaled and shifted by Scale and the optional B, which broadcast to the
// normalized shape. Statistics are computed in float64; the optional Mean
// and InvStdDev outputs have stash_type's type (float32 by default) and
// shape x.shape[:axis] followed by ones.
func layerNormOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, scale, bias := in[0], in[1], input(in, 2)
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	if err := sameDType(in); err != nil {
		return nil, err
	}
	r := x.rank()
	axis, err := normalizeAxis(int(n.attrInt("axis", -1)), r)
	if err != nil {
		return nil, err
	}
	stash := DType(n.attrInt("stash_type", int64(Float32)))
	if !stash.IsFloat() {
		return nil, fmt.Errorf("stash_type %s is not supported (float32 or float64)", stash)
	}
	eps := float64(n.attrFloat("epsilon", 1e-5))
	norm := x.shape[axis:]
	rows, cols := numel(x.shape[:axis]), numel(norm)
	sc, err := broadcastTo(scale, norm)
	if err != nil {
		return nil, fmt.Errorf("Scale: %w", err)
	}
	var b []float64
	if bias != nil {
		if b, err = broadcastTo(bias, norm); err != nil {
			return nil, fmt.Errorf("B: %w", err)
		}
	}
	xs := castTo[float64](x.data)
	means, invs := make([]float64, rows), make([]float64, rows)
	for i := range rows {
		row := xs[i*cols : (i+1)*cols]
		var mean float64
		for _, v := range row {
			mean += v
		}
		mean /= float64(cols)
		var variance float64
		for _, v := range row {
			variance += (v - mean) * (v - mean)
		}
		variance /= float64(cols)
		inv := 1 / math.Sqrt(variance+eps)
		for j, v := range row {
			y := (v - mean) * inv * sc[j]
			if b != nil {
				y += b[j]
			}
			row[j] = y
		}
		means[i], invs[i] = mean, inv
	}
	statShape := slices.Concat(x.shape[:axis], slices.Repeat([]int{1}, r-axis))
	return []*value{
		castValue(valueOf(x.shape, xs), x.dtype),
		castValue(valueOf(statShape, means), stash),
		castValue(valueOf(statShape, invs), stash),
	}, nil
}

// broadcastTo returns v broadcast (one way) to shape, as float64.
func broadcastTo(v *value, shape []int) ([]float64, error) {
	bc, err := broadcastShapes(v.shape, shape)
	if err != nil || !equalShapes(bc, shape) {
		return nil, fmt.Errorf("shape %s does not broadcast to %s", shapeString(v.shape), shapeString(shape))
	}
	return castTo[float64](gather(v, view{strides: broadcastStrides(v.shape, shape)}, shape).data), nil
}

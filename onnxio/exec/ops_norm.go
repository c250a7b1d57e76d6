package exec

import (
	"fmt"
	"math"
	"slices"

	"github.com/attnrun/attnrun/internal/kernels"
)

// softmaxOp is the kernel of Softmax and, with log, of LogSoftmax, along
// the axes softmaxAxes gives.
func softmaxOp(log bool) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		x := in[0]
		outer, d, inner, err := softmaxAxes(n, x)
		if err != nil {
			return nil, err
		}
		return oneOrErr(softmax(rc, n, x, outer, d, inner, log))
	}
}

// softmax normalizes x viewed as (outer, d, inner) along d (see
// softmaxLines), into a value allocated for node n.
func softmax(rc *runCtx, n *node, x *value, outer, d, inner int, log bool) (*value, error) {
	if x.size() == 0 {
		return x, nil
	}
	if x.dtype == Float32 && inner == 1 && !log {
		out, err := rc.alloc(n, x.dtype, x.shape)
		if err != nil {
			return nil, err
		}
		copy(out.data.([]float32), x.data.([]float32))
		// NaN and ±Inf come out as ONNX's: a row with a NaN or a +Inf, or
		// nothing but -Inf, becomes NaN.
		kernels.SoftmaxRows(out.data.([]float32), outer, d)
		return out, nil
	}
	y, err := cast(rc, n, x, Float64)
	if err != nil {
		return nil, err
	}
	if y == x {
		if y, err = gather(rc, n, x, contiguous(x.shape), x.shape); err != nil {
			return nil, err
		}
	}
	softmaxLines(y.data.([]float64), outer, d, inner, log)
	return cast(rc, n, y, x.dtype)
}

// softmaxLines replaces y, viewed as (outer, d, inner), by its softmax
// along d, e^(x - max) / Σ e^(x - max), or with log by its log-softmax,
// x - max - ln Σ e^(x - max), in float64.
func softmaxLines(y []float64, outer, d, inner int, log bool) {
	for o := range outer {
		for i := range inner {
			base := o*d*inner + i
			peak := math.Inf(-1)
			for j := range d {
				peak = max(peak, y[base+j*inner])
			}
			var sum float64
			for j := range d {
				e := math.Exp(y[base+j*inner] - peak)
				if !log {
					y[base+j*inner] = e
				}
				sum += e
			}
			if log {
				lse := peak + math.Log(sum)
				for j := range d {
					y[base+j*inner] -= lse
				}
				continue
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
	if y, ok, err := layerNorm32(rc, n, x, nil, scale, bias); ok {
		if err != nil {
			return nil, err
		}
		return rc.one(y)
	}
	if err := sameFloat(in); err != nil {
		return nil, err
	}
	r := x.rank()
	axis, err := normalizeAxis(int(n.attrInt("axis", -1)), r)
	if err != nil {
		return nil, err
	}
	stash, err := stashType(n)
	if err != nil {
		return nil, err
	}
	eps := float64(n.attrFloat("epsilon", 1e-5))
	norm := x.shape[axis:]
	rows, cols := numel(x.shape[:axis]), numel(norm)
	sc, err := broadcastTo(rc, n, scale, norm)
	if err != nil {
		return nil, fmt.Errorf("input Scale: %w", err)
	}
	var b []float64
	if bias != nil {
		if b, err = broadcastTo(rc, n, bias, norm); err != nil {
			return nil, fmt.Errorf("input B: %w", err)
		}
	}
	statShape := slices.Concat(x.shape[:axis], slices.Repeat([]int{1}, r-axis))
	y, err := rc.allocFull(n, Float64, x.shape) // convertTo writes it all
	if err != nil {
		return nil, err
	}
	meanV, err := rc.alloc(n, Float64, statShape)
	if err != nil {
		return nil, err
	}
	invV, err := rc.alloc(n, Float64, statShape)
	if err != nil {
		return nil, err
	}
	xs, means, invs := y.data.([]float64), meanV.data.([]float64), invV.data.([]float64)
	convertTo(xs, x.data)
	for i := range rows {
		row := xs[i*cols : (i+1)*cols]
		mean, variance := moments(row)
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
	outs := []*value{y, meanV, invV}
	for i, dt := range []DType{x.dtype, stash, stash} {
		if outs[i], err = cast(rc, n, outs[i], dt); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// layerNorm32 is LayerNormalization's path for float32 (kernels.
// LayerNorm32): it reads x, and with res non-nil x + res rounded to
// float32 (a residual Add before it), writes the result in one pass with
// the same float64 statistics and arithmetic as the general path, and
// splits the rows across the processors. It reports false, leaving the
// node to the general path, unless every operand is float32, res has x's
// shape, Scale and B hold the normalized shape's values in its layout,
// and only the result Y is wanted (not Mean and InvStdDev).
func layerNorm32(rc *runCtx, n *node, x, res, scale, bias *value) (*value, bool, error) {
	if len(n.out) != 1 || x.dtype != Float32 || scale.dtype != Float32 || (bias != nil && bias.dtype != Float32) ||
		(res != nil && (res.dtype != Float32 || !equalShapes(res.shape, x.shape))) {
		return nil, false, nil
	}
	axis, err := normalizeAxis(int(n.attrInt("axis", -1)), x.rank())
	if err != nil {
		return nil, false, nil
	}
	norm := x.shape[axis:]
	cols := numel(norm)
	laidOut := func(v *value) bool { // broadcasts to norm with cols values: norm's layout
		if v == nil {
			return true
		}
		for i, d := range v.shape {
			at := len(norm) - len(v.shape) + i
			if d != 1 && (at < 0 || d != norm[at]) {
				return false
			}
		}
		return v.size() == cols
	}
	if cols == 0 || x.size() == 0 || !laidOut(scale) || !laidOut(bias) {
		return nil, false, nil
	}
	if _, err := stashType(n); err != nil {
		return nil, true, err
	}
	y, err := rc.allocFull(n, Float32, x.shape)
	if err != nil {
		return nil, true, err
	}
	size := x.size()
	var r, b []float32
	if res != nil {
		r = res.data.([]float32)[:size]
	}
	if bias != nil {
		b = bias.data.([]float32)[:cols]
	}
	eps := float64(n.attrFloat("epsilon", 1e-5))
	kernels.LayerNorm32(y.data.([]float32)[:size], x.data.([]float32)[:size], r, scale.data.([]float32)[:cols], b, cols, eps)
	return y, true, nil
}

// stashType reads a normalization's stash_type (float32 by default), the
// type of its statistics; the statistics are computed in float64, which is
// at least that.
func stashType(n *node) (DType, error) {
	stash := DType(n.attrInt("stash_type", int64(Float32)))
	if !stash.IsFloat() {
		return 0, fmt.Errorf("stash_type %s is not supported (float32 or float64)", stash)
	}
	return stash, nil
}

// broadcastTo returns v broadcast (one way) to shape, as float64 reserved
// for node n.
func broadcastTo(rc *runCtx, n *node, v *value, shape []int) ([]float64, error) {
	bc, err := broadcastShapes(v.shape, shape)
	if err != nil || !equalShapes(bc, shape) {
		return nil, fmt.Errorf("shape %s does not broadcast to %s", shapeString(v.shape), shapeString(shape))
	}
	w, err := gather(rc, n, v, view{strides: broadcastStrides(v.shape, shape)}, shape)
	if err != nil {
		return nil, err
	}
	w, err = cast(rc, n, w, Float64)
	if err != nil {
		return nil, err
	}
	return w.data.([]float64), nil
}

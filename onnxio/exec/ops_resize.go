package exec

import (
	"fmt"
	"math"
)

// Resize from opset 11 (roi, sizes, the coordinate transformation modes,
// cubic, nearest_mode), with opset 13's optional roi and scales, 18's
// antialias, axes and keep_aspect_ratio_policy, and 19's
// half_pixel_symmetric. Upsample (opsets 7 to 9, deprecated since 10) is
// Resize with asymmetric coordinates and nearest rounding down.
func init() {
	ops["Resize"] = &opSpec{since: 11, minIn: 1, maxIn: 4, minOut: 1, maxOut: 1, run: resizeOp,
		attrs: map[string]attrKind{"antialias": attrInt, "axes": attrInts, "coordinate_transformation_mode": attrString,
			"cubic_coeff_a": attrFloat, "exclude_outside": attrInt, "extrapolation_value": attrFloat,
			"keep_aspect_ratio_policy": attrString, "mode": attrString, "nearest_mode": attrString}}
	ops["Upsample"] = &opSpec{since: 7, minIn: 1, maxIn: 2, minOut: 1, maxOut: 1, run: upsampleOp,
		attrs: map[string]attrKind{"mode": attrString, "scales": attrFloats}, movedToInput: map[string]int{"scales": 9}}
}

// resampling is how Resize maps output coordinates to input ones along
// every axis, and how it weighs the input elements there.
type resampling struct {
	mode          string // nearest, linear or cubic
	coordinates   string // coordinate_transformation_mode
	nearest       string // nearest_mode
	cubicA        float64
	excludeOut    bool
	antialias     bool
	extrapolation float64
}

// axisResampling is one axis's resampling: output position o reads the
// input positions index[o·taps + t] with weights weight[o·taps + t] (nil
// for nearest: one tap of weight 1), or takes the extrapolation value
// where outside[o] is set (tf_crop_and_resize).
type axisResampling struct {
	in, out int
	taps    int
	index   []int64
	weight  []float64
	outside []bool
}

// resizeOp is the kernel of Resize. Each output element is a weighted sum
// of input elements, separably along each axis: the output coordinate x
// maps to an input coordinate by coordinate_transformation_mode, and
// nearest, linear or cubic weights pick or blend the elements around it,
// with the borders repeated. The output size is floor(scale·size), or
// sizes, possibly rescaled to keep the aspect ratio. Where the spec
// speaks of the output length in a coordinate formula it means
// scale·size, fractional when the scale does not divide the size, as
// ONNX's reference implementation (and so its test data) computes it;
// ONNX Runtime takes the rounded length for align_corners instead and
// fails those two node tests.
func resizeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	r := resampling{
		mode:          n.attrString("mode", "nearest"),
		coordinates:   n.attrString("coordinate_transformation_mode", "half_pixel"),
		nearest:       n.attrString("nearest_mode", "round_prefer_floor"),
		cubicA:        float64(n.attrFloat("cubic_coeff_a", -0.75)),
		excludeOut:    n.attrInt("exclude_outside", 0) != 0,
		antialias:     n.attrInt("antialias", 0) != 0,
		extrapolation: float64(n.attrFloat("extrapolation_value", 0)),
	}
	if err := r.check(n.opset); err != nil {
		return nil, err
	}
	axes := make([]int, x.rank())
	for i := range axes {
		axes[i] = i
	}
	if v, ok := n.attrInts("axes"); ok {
		var err error
		if axes, err = normalizeAxes(v, x.rank()); err != nil {
			return nil, fmt.Errorf("attribute axes: %w", err)
		}
	}
	scales, out, err := resizeTarget(rc, n, x, axes, presentInput(in, 2), presentInput(in, 3))
	if err != nil {
		return nil, err
	}
	roi := make([]float64, 2*x.rank())
	for i := range x.rank() {
		roi[x.rank()+i] = 1
	}
	if v := presentInput(in, 1); v != nil && r.coordinates == "tf_crop_and_resize" {
		if !v.dtype.IsFloat() || v.rank() != 1 || v.size() != 2*len(axes) {
			return nil, fmt.Errorf("roi %s must hold %d floats (a start and an end per resized axis)", v.describe(), 2*len(axes))
		}
		vals := castTo[float64](v.data)
		for i, a := range axes {
			roi[a], roi[x.rank()+a] = vals[i], vals[len(axes)+i]
		}
	}
	plans := make([]*axisResampling, x.rank())
	for a := range x.rank() {
		if plans[a], err = r.plan(rc, n, x.shape[a], out[a], scales[a], roi[a], roi[x.rank()+a]); err != nil {
			return nil, fmt.Errorf("axis %d: %w", a, err)
		}
	}
	return oneOrErr(resample(rc, n, x, plans, r.extrapolation))
}

// presentInput is input(in, i), treating an empty tensor as omitted (opset
// 11 files pass an empty scales when they give sizes).
func presentInput(in []*value, i int) *value {
	if v := input(in, i); v != nil && v.size() > 0 {
		return v
	}
	return nil
}

// check validates the attributes.
func (r *resampling) check(opset int) error {
	switch r.mode {
	case "nearest", "linear", "cubic":
	default:
		return fmt.Errorf("attribute mode %q is not nearest, linear or cubic", r.mode)
	}
	switch r.coordinates {
	case "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize":
	case "half_pixel_symmetric":
		if opset < 19 {
			return fmt.Errorf("coordinate_transformation_mode half_pixel_symmetric is defined from opset 19 on")
		}
	case "tf_half_pixel_for_nn":
		if opset >= 18 {
			return fmt.Errorf("coordinate_transformation_mode tf_half_pixel_for_nn was removed at opset 18")
		}
	default:
		return fmt.Errorf("attribute coordinate_transformation_mode %q is not supported", r.coordinates)
	}
	switch r.nearest {
	case "round_prefer_floor", "round_prefer_ceil", "floor", "ceil":
	default:
		return fmt.Errorf("attribute nearest_mode %q is not round_prefer_floor, round_prefer_ceil, floor or ceil", r.nearest)
	}
	return nil
}

// resizeTarget returns the scale and the output size of every axis from
// the scales or sizes input (one value per listed axis).
func resizeTarget(rc *runCtx, n *node, x *value, axes []int, scalesIn, sizesIn *value) ([]float64, []int, error) {
	rank := x.rank()
	scales, out := make([]float64, rank), make([]int, rank)
	for a := range rank {
		scales[a], out[a] = 1, x.shape[a]
	}
	switch {
	case scalesIn != nil && sizesIn != nil:
		return nil, nil, fmt.Errorf("scales and sizes are both given; give one")
	case scalesIn != nil:
		if !scalesIn.dtype.IsFloat() || scalesIn.size() != len(axes) {
			return nil, nil, fmt.Errorf("scales %s must hold %d floats", scalesIn.describe(), len(axes))
		}
		for i, s := range castTo[float64](scalesIn.data) {
			a := axes[i]
			size := s * float64(x.shape[a])
			if !(s > 0) || size > maxDimension {
				return nil, nil, fmt.Errorf("scale %g of axis %d must be positive and give at most %d elements", s, a, maxDimension)
			}
			scales[a], out[a] = s, int(size)
		}
	case sizesIn != nil:
		sizes, err := ints(rc, n, sizesIn)
		if err != nil || len(sizes) != len(axes) {
			return nil, nil, fmt.Errorf("sizes %s must hold %d integers", sizesIn.describe(), len(axes))
		}
		for i, s := range sizes {
			if s < 0 || s > maxDimension {
				return nil, nil, fmt.Errorf("size %d of axis %d must be in [0, %d]", s, axes[i], maxDimension)
			}
			a := axes[i]
			out[a] = int(s)
			if x.shape[a] > 0 {
				scales[a] = float64(s) / float64(x.shape[a])
			}
		}
		if err := keepAspectRatio(n.attrString("keep_aspect_ratio_policy", "stretch"), x, axes, scales, out); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("one of scales and sizes is required")
	}
	if err := checkExtent(out); err != nil {
		return nil, nil, err
	}
	return scales, out, nil
}

// keepAspectRatio applies keep_aspect_ratio_policy to scales and sizes
// read from the sizes input: not_larger scales every listed axis by the
// smallest of their scales, not_smaller by the largest, and the sizes
// become scale·size rounded half up.
func keepAspectRatio(policy string, x *value, axes []int, scales []float64, out []int) error {
	var pick func(a, b float64) float64
	switch policy {
	case "stretch":
		return nil
	case "not_larger":
		pick = math.Min
	case "not_smaller":
		pick = math.Max
	default:
		return fmt.Errorf("attribute keep_aspect_ratio_policy %q is not stretch, not_larger or not_smaller", policy)
	}
	scale := scales[axes[0]]
	for _, a := range axes[1:] {
		scale = pick(scale, scales[a])
	}
	for _, a := range axes {
		size := scale*float64(x.shape[a]) + 0.5
		if size > maxDimension {
			return fmt.Errorf("axis %d would have %g elements, more than %d", a, size, maxDimension)
		}
		scales[a], out[a] = scale, int(size)
	}
	return nil
}

// plan works out how one axis of in elements resamples to out elements.
func (r *resampling) plan(rc *runCtx, n *node, in, out int, scale, roiStart, roiEnd float64) (*axisResampling, error) {
	p := &axisResampling{in: in, out: out}
	if in == 0 || out == 0 {
		return p, nil
	}
	outLength := scale * float64(in) // fractional when scale does not divide
	if r.antialias && r.mode != "nearest" && !(scale*maxDimension > 4) {
		return nil, fmt.Errorf("scale %g is too small for an antialiasing filter", scale)
	}
	var offsets int
	var filter func(ratio float64, w []float64)
	switch r.mode {
	case "nearest":
		p.taps = 1
	case "linear":
		offsets, p.taps, filter = r.linearFilter(scale)
	case "cubic":
		offsets, p.taps, filter = r.cubicFilter(scale)
	}
	var err error
	if p.index, err = scratch[int64](rc, n, mulSat(out, p.taps), "resize taps"); err != nil {
		return nil, err
	}
	if filter != nil {
		if p.weight, err = scratch[float64](rc, n, mulSat(out, p.taps), "resize weights"); err != nil {
			return nil, err
		}
	}
	for o := range out {
		xo := r.original(float64(o), scale, in, out, outLength, roiStart, roiEnd)
		if r.coordinates == "tf_crop_and_resize" && (xo < 0 || xo > float64(in-1)) {
			if p.outside == nil {
				p.outside = make([]bool, out)
			}
			p.outside[o] = true
			continue
		}
		if filter == nil {
			p.index[o] = int64(clampIndex(r.nearestIndex(xo), in))
			continue
		}
		// The taps sit at base + offsets, base + offsets + 1, ..., where
		// base is the input position just below xo (one below when xo is
		// a whole number, so that ratio lies in (0, 1]).
		base := int(math.Ceil(xo)) - 1
		ratio := xo - float64(base)
		w := p.weight[o*p.taps : (o+1)*p.taps]
		filter(ratio, w)
		idx := p.index[o*p.taps : (o+1)*p.taps]
		sum := 0.0
		for t := range idx {
			at := base + offsets + t
			if r.excludeOut && (at < 0 || at >= in) {
				w[t] = 0
			}
			sum += w[t]
			idx[t] = int64(clampIndex(at, in))
		}
		if r.excludeOut && sum != 0 {
			for t := range w {
				w[t] /= sum
			}
		}
	}
	return p, nil
}

// original maps output coordinate x to the input coordinate it samples.
func (r *resampling) original(x, scale float64, in, out int, outLength, roiStart, roiEnd float64) float64 {
	switch r.coordinates {
	case "asymmetric":
		return x / scale
	case "align_corners":
		if outLength == 1 {
			return 0
		}
		return x * float64(in-1) / (outLength - 1)
	case "pytorch_half_pixel":
		if out <= 1 {
			return 0
		}
		return (x+0.5)/scale - 0.5
	case "half_pixel_symmetric":
		// Centre the sampled span when the size was rounded down.
		offset := float64(in) / 2 * (1 - float64(out)/outLength)
		return offset + (x+0.5)/scale - 0.5
	case "tf_half_pixel_for_nn":
		return (x + 0.5) / scale
	case "tf_crop_and_resize":
		span := (roiEnd - roiStart) * float64(in-1)
		if outLength == 1 {
			return span/2 + roiStart*float64(in-1)
		}
		return x*span/(outLength-1) + roiStart*float64(in-1)
	}
	return (x+0.5)/scale - 0.5 // half_pixel
}

// nearestIndex rounds an input coordinate by nearest_mode.
func (r *resampling) nearestIndex(xo float64) int {
	f := math.Floor(xo)
	if f == xo {
		return int(f)
	}
	frac := xo - f
	switch r.nearest {
	case "floor":
		return int(f)
	case "ceil":
		return int(f) + 1
	case "round_prefer_ceil":
		if frac < 0.5 {
			return int(f)
		}
		return int(f) + 1
	}
	if frac <= 0.5 { // round_prefer_floor
		return int(f)
	}
	return int(f) + 1
}

// clampIndex repeats the border elements outside [0, n).
func clampIndex(i, n int) int { return min(max(i, 0), n-1) }

// linearFilter returns the tent filter: two taps at offsets 0 and 1, or,
// antialiased when downscaling, the tent stretched by 1/scale over more
// taps, normalized to sum 1.
func (r *resampling) linearFilter(scale float64) (offset, taps int, filter func(float64, []float64)) {
	return r.filter(scale, 1, func(d float64) float64 { return max(0, 1-math.Abs(d)) })
}

// cubicFilter returns Keys' cubic convolution filter with coefficient
// cubic_coeff_a: four taps at offsets -1 to 2, or, antialiased when
// downscaling, the filter stretched by 1/scale, normalized to sum 1.
func (r *resampling) cubicFilter(scale float64) (offset, taps int, filter func(float64, []float64)) {
	a := r.cubicA
	return r.filter(scale, 2, func(d float64) float64 {
		d = math.Abs(d)
		switch {
		case d <= 1:
			return ((a+2)*d-(a+3))*d*d + 1
		case d < 2:
			return ((a*d-5*a)*d+8*a)*d - 4*a
		}
		return 0
	})
}

// filter returns the filter of a kernel that is zero outside (-support,
// support): the taps it covers and, for a position ratio between input
// positions, their weights. Antialiased when downscaling, the kernel is
// stretched by 1/scale and the weights normalized to sum 1.
func (r *resampling) filter(scale, support float64, kernel func(d float64) float64) (offset, taps int, filter func(float64, []float64)) {
	s := 1.0
	if r.antialias {
		s = min(scale, 1)
	}
	offset = int(math.Floor(-support/s)) + 1
	taps = 2 - 2*offset
	return offset, taps, func(ratio float64, w []float64) {
		sum := 0.0
		for t := range w {
			w[t] = kernel((float64(offset+t) - ratio) * s)
			sum += w[t]
		}
		if r.antialias {
			for t := range w {
				w[t] /= sum
			}
		}
	}
}

// identity reports whether the axis maps every position to itself.
func (p *axisResampling) identity() bool {
	if p.in != p.out || p.outside != nil {
		return false
	}
	for o := range p.out {
		for t := range p.taps {
			i := o*p.taps + t
			var w float64 = 1
			if p.weight != nil {
				w = p.weight[i]
			}
			if w != 0 && (p.index[i] != int64(o) || w != 1) {
				return false
			}
		}
	}
	return true
}

// resample applies the axes' resamplings one after another, skipping
// those that change nothing.
func resample(rc *runCtx, n *node, x *value, plans []*axisResampling, extrapolation float64) (*value, error) {
	cur := x
	for a, p := range plans {
		if p.identity() {
			continue
		}
		if err := rc.ctx.Err(); err != nil {
			return nil, err
		}
		shape := append([]int(nil), cur.shape...)
		shape[a] = p.out
		next, err := rc.alloc(n, x.dtype, shape)
		if err != nil {
			return nil, err
		}
		outer, inner := numel(cur.shape[:a]), numel(cur.shape[a+1:])
		if next.size() > 0 {
			if p.weight == nil {
				nearestAxis(cur, next, outer, inner, p, castValue(scalarOf(extrapolation), x.dtype))
			} else if err := weightedAxis(cur, next, outer, inner, p, extrapolation); err != nil {
				return nil, err
			}
		}
		cur = next
	}
	if cur == x { // nothing to resample: still a value of its own shape
		return x.withShape(append([]int(nil), x.shape...)), nil
	}
	return cur, nil
}

// weightedAxis blends the taps of one axis (linear and cubic), for float
// tensors, accumulating in float64.
func weightedAxis(src, dst *value, outer, inner int, p *axisResampling, extrapolation float64) error {
	switch s := src.data.(type) {
	case []float32:
		blendAxis(s, dst.data.([]float32), outer, inner, p, float32(extrapolation))
	case []float64:
		blendAxis(s, dst.data.([]float64), outer, inner, p, extrapolation)
	default:
		return errDType(src, "float32 or float64 for linear and cubic modes")
	}
	return nil
}

func blendAxis[T float](src, dst []T, outer, inner int, p *axisResampling, extrapolation T) {
	eachRow(p, dst, outer, inner, extrapolation, func(row []T, b, o int) {
		from := src[b*p.in*inner : (b+1)*p.in*inner]
		idx, w := p.index[o*p.taps:(o+1)*p.taps], p.weight[o*p.taps:(o+1)*p.taps]
		for i := range row {
			acc := 0.0
			for t, at := range idx {
				acc += w[t] * float64(from[int(at)*inner+i])
			}
			row[i] = T(acc)
		}
	})
}

// eachRow calls f for every row of inner elements of dst, viewed as
// (outer, p.out, inner), with its outer index b and output position o;
// rows whose position lies outside the input are filled with fill.
func eachRow[T any](p *axisResampling, dst []T, outer, inner int, fill T, f func(row []T, b, o int)) {
	for b := range outer {
		for o := range p.out {
			row := dst[(b*p.out+o)*inner : (b*p.out+o+1)*inner]
			if p.outside != nil && p.outside[o] {
				for i := range row {
					row[i] = fill
				}
				continue
			}
			f(row, b, o)
		}
	}
}

// nearestAxis copies, for every output position of one axis, the slab of
// its nearest input position (any element type), or the fill value.
func nearestAxis(src, dst *value, outer, inner int, p *axisResampling, fill *value) {
	elemKindOfData(src.data).pickAxis(src.data, dst.data, outer, inner, p, fill.data)
}

// pickAxis is nearestAxis for type T; fill holds the fill value.
func (elemOf[T]) pickAxis(sd, dd any, outer, inner int, p *axisResampling, fd any) {
	src := sd.([]T)
	eachRow(p, dd.([]T), outer, inner, fd.([]T)[0], func(row []T, b, o int) {
		at := (b*p.in + int(p.index[o])) * inner
		copy(row, src[at:at+inner])
	})
}

// upsampleOp is the kernel of Upsample (opsets 7 to 9): Resize with
// asymmetric coordinates, nearest rounding down, and output sizes
// floor(scale·size); the scales are an attribute before opset 9 and an
// input from 9.
func upsampleOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	mode := n.attrString("mode", "nearest")
	if mode == "bilinear" {
		mode = "linear"
	}
	r := resampling{mode: mode, coordinates: "asymmetric", nearest: "floor"}
	if err := r.check(n.opset); err != nil {
		return nil, err
	}
	var scales []float64
	if n.opset < 9 {
		fs := n.attrs["scales"]
		for _, s := range fs.floats {
			scales = append(scales, float64(s))
		}
	} else if v := input(in, 1); v != nil && v.dtype.IsFloat() {
		scales = castTo[float64](v.data)
	} else {
		return nil, fmt.Errorf("the scales input must be a float tensor")
	}
	if len(scales) != x.rank() {
		return nil, fmt.Errorf("%d scales for X of rank %d", len(scales), x.rank())
	}
	plans := make([]*axisResampling, x.rank())
	for a, s := range scales {
		size := s * float64(x.shape[a])
		if !(s >= 1) || size > maxDimension {
			return nil, fmt.Errorf("scale %g of axis %d must be at least 1 and give at most %d elements", s, a, maxDimension)
		}
		var err error
		if plans[a], err = r.plan(rc, n, x.shape[a], int(size), s, 0, 1); err != nil {
			return nil, fmt.Errorf("axis %d: %w", a, err)
		}
	}
	out := make([]int, x.rank())
	for a, p := range plans {
		out[a] = p.out
	}
	if err := checkExtent(out); err != nil {
		return nil, err
	}
	return oneOrErr(resample(rc, n, x, plans, 0))
}

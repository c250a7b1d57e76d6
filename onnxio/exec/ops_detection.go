package exec

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// NonMaxSuppression (opsets 10 and 11, the same semantics) and RoiAlign
// (opset 10; 16 added coordinate_transformation_mode, whose default
// half_pixel differs from opset 10's behaviour, output_half_pixel; 22
// added bfloat16): the box-level ops of detection models.
func init() {
	ops["NonMaxSuppression"] = &opSpec{since: 10, minIn: 2, maxIn: 5, minOut: 1, maxOut: 1, run: nonMaxSuppressionOp,
		attrs: map[string]attrKind{"center_point_box": attrInt}}
	ops["RoiAlign"] = &opSpec{since: 10, minIn: 3, maxIn: 3, minOut: 1, maxOut: 1, run: roiAlignOp,
		attrs: map[string]attrKind{"coordinate_transformation_mode": attrString, "mode": attrString,
			"output_height": attrInt, "output_width": attrInt, "sampling_ratio": attrInt, "spatial_scale": attrFloat}}
}

// nonMaxSuppressionOp is the kernel of NonMaxSuppression: for each batch
// and class, the boxes scoring above score_threshold are taken greedily by
// decreasing score (the lower index first among equal scores), each
// dropping the remaining boxes that overlap it by an IoU above
// iou_threshold, up to max_output_boxes_per_class (default 0: none). The
// result lists (batch, class, box) triples in that order. Boxes are
// corners [y1, x1, y2, x2] (either diagonal) or, with center_point_box,
// [x_center, y_center, width, height].
func nonMaxSuppressionOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	boxes, scores := in[0], in[1]
	if !boxes.dtype.IsFloat() || !scores.dtype.IsFloat() {
		return nil, fmt.Errorf("boxes %s and scores %s must be float tensors", boxes.describe(), scores.describe())
	}
	if boxes.rank() != 3 || boxes.shape[2] != 4 || scores.rank() != 3 ||
		scores.shape[0] != boxes.shape[0] || scores.shape[2] != boxes.shape[1] {
		return nil, fmt.Errorf("boxes %s must be (batches, boxes, 4) and scores %s (batches, classes, boxes)", shapeString(boxes.shape), shapeString(scores.shape))
	}
	maxPerClass := int64(0)
	if v := presentInput(in, 2); v != nil {
		var err error
		if maxPerClass, err = scalarInt(rc, n, v, "max_output_boxes_per_class"); err != nil {
			return nil, err
		}
	}
	iouThreshold, err := optionalScalarFloat(in, 3, "iou_threshold", 0)
	if err != nil {
		return nil, err
	}
	scoreThreshold, err := optionalScalarFloat(in, 4, "score_threshold", math.Inf(-1))
	if err != nil {
		return nil, err
	}
	if iouThreshold < 0 || iouThreshold > 1 {
		return nil, fmt.Errorf("iou_threshold %g must be in [0, 1]", iouThreshold)
	}
	centered := n.attrInt("center_point_box", 0) != 0
	batches, classes, count := scores.shape[0], scores.shape[1], boxes.shape[1]
	b, err := floatData[float64](rc, n, boxes)
	if err != nil {
		return nil, err
	}
	s, err := floatData[float64](rc, n, scores)
	if err != nil {
		return nil, err
	}
	corners, err := scratch[[4]float64](rc, n, count, "box corners") // y1, x1, y2, x2 with y1 ≤ y2, x1 ≤ x2
	if err != nil {
		return nil, err
	}
	candidates, err := scratch[int](rc, n, count, "candidate boxes")
	if err != nil {
		return nil, err
	}
	// At most min(max_output_boxes_per_class, boxes) triples per batch and class.
	selected, err := scratch[int64](rc, n, mulSat(3*batches*classes, int(min(max(maxPerClass, 0), int64(count)))), "selected boxes")
	if err != nil {
		return nil, err
	}
	selected = selected[:0]
	for batch := range batches {
		if err := rc.ctx.Err(); err != nil {
			return nil, err
		}
		for i := range count {
			corners[i] = boxCorners(b[(batch*count+i)*4:(batch*count+i+1)*4], centered)
		}
		for class := range classes {
			sc := s[(batch*classes+class)*count : (batch*classes+class+1)*count]
			candidates = candidates[:0]
			for i, v := range sc {
				if v > scoreThreshold {
					candidates = append(candidates, i)
				}
			}
			slices.SortStableFunc(candidates, func(i, j int) int { return cmp.Compare(sc[j], sc[i]) })
			var kept []int
			for _, c := range candidates {
				if int64(len(kept)) >= maxPerClass {
					break
				}
				if !slices.ContainsFunc(kept, func(k int) bool { return iou(corners[k], corners[c]) > iouThreshold }) {
					kept = append(kept, c)
					selected = append(selected, int64(batch), int64(class), int64(c))
				}
			}
		}
	}
	out, err := rc.alloc(n, Int64, []int{len(selected) / 3, 3})
	if err != nil {
		return nil, err
	}
	copy(out.data.([]int64), selected)
	return one(out)
}

// optionalScalarFloat reads the one-element float input i, or def when it
// is omitted.
func optionalScalarFloat(in []*value, i int, name string, def float64) (float64, error) {
	v := presentInput(in, i)
	if v == nil {
		return def, nil
	}
	if !v.dtype.IsFloat() || v.size() != 1 {
		return 0, fmt.Errorf("%s %s must be one float", name, v.describe())
	}
	return castTo[float64](v.data)[0], nil
}

// boxCorners returns a box as y1, x1, y2, x2 with the smaller coordinates
// first.
func boxCorners(b []float64, centered bool) [4]float64 {
	if centered {
		x, y, w, h := b[0], b[1], b[2], b[3]
		return [4]float64{y - h/2, x - w/2, y + h/2, x + w/2}
	}
	return [4]float64{min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])}
}

// iou is the intersection over union of two boxes; 0 when either has no
// area.
func iou(a, b [4]float64) float64 {
	areaA := (a[2] - a[0]) * (a[3] - a[1])
	areaB := (b[2] - b[0]) * (b[3] - b[1])
	if areaA <= 0 || areaB <= 0 {
		return 0
	}
	h := min(a[2], b[2]) - max(a[0], b[0])
	w := min(a[3], b[3]) - max(a[1], b[1])
	if h <= 0 || w <= 0 {
		return 0
	}
	inter := h * w
	return inter / (areaA + areaB - inter)
}

// roiAlignOp is the kernel of RoiAlign: for each region of interest
// (x1, y1, x2, y2, scaled by spatial_scale) of its batch element's image,
// an output_height × output_width grid of bins, each the average (mode
// avg) or maximum (mode max) of sampling_ratio² bilinear samples (or, for
// sampling_ratio 0, ceil(bin size) per axis). half_pixel (opset 16's
// default) shifts the region by half a pixel; output_half_pixel (opset
// 10's behaviour) does not, and widens regions to at least one pixel.
// As in ONNX's reference and ONNX Runtime, max mode takes the largest
// weighted corner of each sample, not the interpolated value.
func roiAlignOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, rois, batchIndices := in[0], in[1], in[2]
	if !x.dtype.IsFloat() || rois.dtype != x.dtype {
		return nil, fmt.Errorf("input X %s and rois %s must be float tensors of one type", x.describe(), rois.describe())
	}
	if x.rank() != 4 || rois.rank() != 2 || rois.shape[1] != 4 || batchIndices.rank() != 1 || batchIndices.shape[0] != rois.shape[0] {
		return nil, fmt.Errorf("input X %s must be (N, C, H, W), rois %s (num_rois, 4) and batch_indices %s (num_rois)",
			shapeString(x.shape), shapeString(rois.shape), shapeString(batchIndices.shape))
	}
	indices, err := ints(rc, n, batchIndices)
	if err != nil {
		return nil, fmt.Errorf("batch_indices: %w", err)
	}
	for _, b := range indices {
		if b < 0 || b >= int64(x.shape[0]) {
			return nil, fmt.Errorf("batch index %d is out of range for X %s", b, shapeString(x.shape))
		}
	}
	ra := roiAligner{
		height: x.shape[2], width: x.shape[3],
		outH: int(n.attrInt("output_height", 1)), outW: int(n.attrInt("output_width", 1)),
		sampling: int(n.attrInt("sampling_ratio", 0)), scale: float64(n.attrFloat("spatial_scale", 1)),
		max: n.attrString("mode", "avg") == "max",
	}
	mode := "output_half_pixel"
	if n.opset >= 16 {
		mode = n.attrString("coordinate_transformation_mode", "half_pixel")
	}
	switch mode {
	case "half_pixel":
		ra.halfPixel = true
	case "output_half_pixel":
	default:
		return nil, fmt.Errorf("attribute coordinate_transformation_mode %q is not half_pixel or output_half_pixel", mode)
	}
	if m := n.attrString("mode", "avg"); m != "avg" && m != "max" {
		return nil, fmt.Errorf("attribute mode %q is not avg or max", m)
	}
	if ra.outH < 1 || ra.outW < 1 || ra.sampling < 0 || int64(ra.outH)*int64(ra.outW) > maxDimension {
		return nil, fmt.Errorf("output_height %d and output_width %d must be positive and sampling_ratio %d not negative", ra.outH, ra.outW, ra.sampling)
	}
	shape := []int{rois.shape[0], x.shape[1], ra.outH, ra.outW}
	y, err := rc.alloc(n, x.dtype, shape)
	if err != nil || y.size() == 0 {
		return oneOrErr(y, err)
	}
	if x.dtype == Float32 {
		err = roiAlign(rc, n, ra, x.data.([]float32), rois.data.([]float32), indices, y.data.([]float32), x.shape[1])
	} else {
		err = roiAlign(rc, n, ra, x.data.([]float64), rois.data.([]float64), indices, y.data.([]float64), x.shape[1])
	}
	return oneOrErr(y, err)
}

// roiAligner holds RoiAlign's geometry.
type roiAligner struct {
	height, width int
	outH, outW    int
	sampling      int
	scale         float64
	max           bool
	halfPixel     bool
}

// roiAlign pools every region of interest of every channel.
func roiAlign[T float](rc *runCtx, n *node, ra roiAligner, x, rois []T, batches []int64, y []T, channels int) error {
	plane, bins := ra.height*ra.width, ra.outH*ra.outW
	for r, b := range batches {
		if err := rc.ctx.Err(); err != nil {
			return err
		}
		s, err := ra.samples(rc, n, castTo[float64](rois[r*4:(r+1)*4]))
		if err != nil {
			return err
		}
		for c := range channels {
			img := x[(int(b)*channels+c)*plane : (int(b)*channels+c+1)*plane]
			out := y[(r*channels+c)*bins : (r*channels+c+1)*bins]
			for bin := range out {
				acc := 0.0
				for i := bin * s.perBin; i < (bin+1)*s.perBin; i++ {
					at, w := s.at[4*i:4*i+4], s.w[4*i:4*i+4]
					if ra.max {
						v := max(w[0]*float64(img[at[0]]), w[1]*float64(img[at[1]]),
							w[2]*float64(img[at[2]]), w[3]*float64(img[at[3]]))
						if i == bin*s.perBin || v > acc {
							acc = v
						}
						continue
					}
					for k := range 4 {
						acc += w[k] * float64(img[at[k]])
					}
				}
				if !ra.max {
					acc /= float64(max(s.perBin, 1))
				}
				out[bin] = T(acc)
			}
		}
	}
	return nil
}

// roiSamples are the bilinear samples of a region's bins, bin-major: four
// image offsets and four weights per sample (all zero for a sample
// outside the image).
type roiSamples struct {
	perBin int
	at     []int64
	w      []float64
}

// samples computes the samples of each output bin of a region, reserving
// their table from the run's budget (a region's size sets their number).
func (ra roiAligner) samples(rc *runCtx, n *node, roi []float64) (*roiSamples, error) {
	offset := 0.0
	if ra.halfPixel {
		offset = 0.5
	}
	x0, y0 := roi[0]*ra.scale-offset, roi[1]*ra.scale-offset
	w, h := roi[2]*ra.scale-offset-x0, roi[3]*ra.scale-offset-y0
	if !ra.halfPixel { // malformed regions become 1×1
		w, h = max(w, 1), max(h, 1)
	}
	binH, binW := h/float64(ra.outH), w/float64(ra.outW)
	gridH, gridW := float64(ra.sampling), float64(ra.sampling)
	if ra.sampling == 0 {
		gridH, gridW = math.Ceil(binH), math.Ceil(binW)
	}
	gridH, gridW = max(gridH, 0), max(gridW, 0)
	if !(gridH*gridW*float64(ra.outH*ra.outW) <= maxDimension) {
		return nil, fmt.Errorf("region %v needs %g×%g samples per bin, too many", roi, gridH, gridW)
	}
	gh, gw := int(gridH), int(gridW)
	count := 4 * ra.outH * ra.outW * gh * gw
	at, err := scratch[int64](rc, n, count, "RoiAlign sample offsets")
	if err != nil {
		return nil, err
	}
	wt, err := scratch[float64](rc, n, count, "RoiAlign sample weights")
	if err != nil {
		return nil, err
	}
	s := &roiSamples{perBin: gh * gw, at: at, w: wt}
	i := 0
	for ph := range ra.outH {
		for pw := range ra.outW {
			for iy := range gh {
				yy := y0 + float64(ph)*binH + (float64(iy)+0.5)*binH/gridH
				for ix := range gw {
					xx := x0 + float64(pw)*binW + (float64(ix)+0.5)*binW/gridW
					ra.bilinear(yy, xx, s.at[4*i:4*i+4], s.w[4*i:4*i+4])
					i++
				}
			}
		}
	}
	return s, nil
}

// bilinear writes the offsets and weights of the sample at (y, x), with
// coordinates up to one pixel outside the image clamped to its border and
// farther ones reading zero (at and w are zero-filled).
func (ra roiAligner) bilinear(y, x float64, at []int64, w []float64) {
	if !(y >= -1 && y <= float64(ra.height) && x >= -1 && x <= float64(ra.width)) {
		return
	}
	y, x = max(y, 0), max(x, 0)
	yl, xl := int(y), int(x)
	yh, xh := yl+1, xl+1
	if yl >= ra.height-1 {
		yl, yh, y = ra.height-1, ra.height-1, float64(ra.height-1)
	}
	if xl >= ra.width-1 {
		xl, xh, x = ra.width-1, ra.width-1, float64(ra.width-1)
	}
	ly, lx := y-float64(yl), x-float64(xl)
	hy, hx := 1-ly, 1-lx
	at[0], at[1], at[2], at[3] = int64(yl*ra.width+xl), int64(yl*ra.width+xh), int64(yh*ra.width+xl), int64(yh*ra.width+xh)
	w[0], w[1], w[2], w[3] = hy*hx, hy*lx, ly*hx, ly*lx
}

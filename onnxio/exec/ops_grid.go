package exec

import (
	"fmt"
	"math"
	"slices"
)

// GridSample (opset 16: 2-D, modes bilinear, nearest and bicubic; opset 20:
// any number of spatial axes, the modes renamed linear, nearest and cubic;
// 22 added bfloat16) and AffineGrid (opset 20), the two halves of a
// spatial transformer.
func init() {
	ops["GridSample"] = &opSpec{since: 16, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: gridSampleOp,
		attrs: map[string]attrKind{"align_corners": attrInt, "mode": attrString, "padding_mode": attrString}}
	ops["AffineGrid"] = &opSpec{since: 20, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: affineGridOp,
		attrs: map[string]attrKind{"align_corners": attrInt}}
}

// maxTapsPerPoint bounds the elements one GridSample point blends (taps
// per axis to the power of the spatial axes): 4^8 for cubic in 8-D.
const maxTapsPerPoint = 1 << 16

// gridSampler holds what GridSample needs to sample one point.
type gridSampler struct {
	mode         string // nearest, linear or cubic
	padding      string // zeros, border or reflection
	alignCorners bool
	image        []int // spatial sizes of X
}

// gridSampleOp is the kernel of GridSample: Y[n, c, p] samples X[n, c]
// at the point grid[n, p, :], whose coordinates run from −1 to 1 across
// each spatial axis (the last axis first, as x, y, z), by nearest,
// N-linear or N-cubic (Keys, a = −0.75) interpolation; points outside the
// image read zeros, the border, or the image reflected at its border.
// The rules are PyTorch's grid_sample (and ONNX Runtime's): nearest
// rounds half to even; nearest and linear move a point outside the image
// by the padding mode before sampling, cubic pads each of its taps. A NaN
// coordinate samples NaN.
func gridSampleOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, grid := in[0], in[1]
	if !x.dtype.IsFloat() || !grid.dtype.IsFloat() {
		return nil, fmt.Errorf("input X %s and grid %s must be float tensors", x.describe(), grid.describe())
	}
	axes := x.rank() - 2
	if axes < 1 || grid.rank() != x.rank() || grid.shape[0] != x.shape[0] || grid.shape[grid.rank()-1] != axes {
		return nil, fmt.Errorf("grid %s must be (N, D1_out, ..., %d) for X %s", shapeString(grid.shape), axes, shapeString(x.shape))
	}
	if n.opset < 20 && axes != 2 {
		return nil, fmt.Errorf("input X %s: GridSample before opset 20 samples 2-D images only", shapeString(x.shape))
	}
	s := gridSampler{
		mode:         n.attrString("mode", "linear"),
		padding:      n.attrString("padding_mode", "zeros"),
		alignCorners: n.attrInt("align_corners", 0) != 0,
		image:        x.shape[2:],
	}
	switch s.mode { // opset 16 names, which files of later opsets still use
	case "bilinear":
		s.mode = "linear"
	case "bicubic":
		s.mode = "cubic"
	case "linear", "cubic", "nearest":
	default:
		return nil, fmt.Errorf("attribute mode %q is not linear, nearest or cubic", s.mode)
	}
	switch s.padding {
	case "zeros", "border", "reflection":
	default:
		return nil, fmt.Errorf("attribute padding_mode %q is not zeros, border or reflection", s.padding)
	}
	perAxis := map[string]float64{"nearest": 1, "linear": 2, "cubic": 4}[s.mode]
	if math.Pow(perAxis, float64(axes)) > maxTapsPerPoint {
		return nil, fmt.Errorf("%s sampling over %d spatial axes blends too many elements per point", s.mode, axes)
	}
	shape := append([]int{x.shape[0], x.shape[1]}, grid.shape[1:grid.rank()-1]...)
	y, err := rc.alloc(n, x.dtype, shape)
	if err != nil || y.size() == 0 {
		return oneOrErr(y, err)
	}
	g, err := floatData[float64](rc, n, grid)
	if err != nil {
		return nil, err
	}
	if x.dtype == Float32 {
		err = gridSample(rc, s, x.data.([]float32), g, y.data.([]float32), x.shape[1], numel(shape[2:]))
	} else {
		err = gridSample(rc, s, x.data.([]float64), g, y.data.([]float64), x.shape[1], numel(shape[2:]))
	}
	return oneOrErr(y, err)
}

// gridSample samples every channel of every batch at the grid's points.
func gridSample[T float](rc *runCtx, s gridSampler, x []T, grid []float64, y []T, channels, points int) error {
	axes, imageSize := len(s.image), numel(s.image)
	strides := stridesOf(s.image)
	batch := len(y) / (channels * points)
	var offs []int
	var weights []float64
	for b := range batch {
		if err := rc.ctx.Err(); err != nil {
			return err
		}
		for p := range points {
			coords := grid[(b*points+p)*axes : (b*points+p+1)*axes]
			if slices.ContainsFunc(coords, math.IsNaN) { // no position to sample
				for c := range channels {
					y[(b*channels+c)*points+p] = T(math.NaN())
				}
				continue
			}
			offs, weights = s.taps(coords, strides, offs[:0], weights[:0])
			for c := range channels {
				img := x[(b*channels+c)*imageSize : (b*channels+c+1)*imageSize]
				acc := 0.0
				for t, off := range offs {
					acc += weights[t] * float64(img[off])
				}
				y[(b*channels+c)*points+p] = T(acc)
			}
		}
	}
	return nil
}

// taps appends the image offsets and weights of the elements that the
// point at normalized coordinates (x, y, ... : last axis first) blends;
// elements in the zeros padding are left out.
func (s *gridSampler) taps(coords []float64, strides []int, offs []int, weights []float64) ([]int, []float64) {
	axes := len(s.image)
	offs = append(offs, 0)
	weights = append(weights, 1)
	for a := range axes {
		size := float64(s.image[a])
		v := coords[axes-1-a] // the grid lists the innermost axis first
		var lo, hi float64    // the borders reflection mirrors at
		if s.alignCorners {
			v = (v + 1) / 2 * (size - 1)
			lo, hi = 0, size-1
		} else {
			v = ((v+1)*size - 1) / 2
			lo, hi = -0.5, size-0.5
		}
		if s.mode == "nearest" {
			v = math.RoundToEven(v) // nearbyint, as PyTorch rounds in 2-D and 3-D alike
		}
		// Nearest and linear move an outside point inside; cubic keeps it
		// and resolves each tap, as PyTorch and ONNX Runtime do.
		if (v < lo || v > hi) && s.mode != "cubic" {
			switch s.padding {
			case "border":
				v = min(max(v, 0), size-1)
			case "reflection":
				v = reflectInto(v, lo, hi)
			}
		}
		var first int
		var w [4]float64
		var n int
		switch s.mode {
		case "nearest":
			first, w[0], n = int(v), 1, 1 // v is whole here; int truncates as the reference does
		case "linear":
			f := math.Floor(v)
			first, w[0], w[1], n = int(f), 1-(v-f), v-f, 2
		case "cubic":
			f := math.Floor(v)
			first, n = int(f)-1, 4
			w = cubicWeights(v - f)
		}
		// Combine this axis's taps with those of the axes before it.
		count := len(offs)
		for t := range n {
			at, ok := s.pixel(first+t, a, lo, hi)
			if !ok {
				continue
			}
			for k := range count {
				offs = append(offs, offs[k]+at*strides[a])
				weights = append(weights, weights[k]*w[t])
			}
		}
		offs = append(offs[:0], offs[count:]...)
		weights = append(weights[:0], weights[count:]...)
	}
	return offs, weights
}

// pixel resolves index i along axis a by the padding mode: its own index
// inside the image, the nearest border element, or its reflection; ok is
// false where it reads a zero (and for anything a NaN coordinate makes).
func (s *gridSampler) pixel(i, a int, lo, hi float64) (int, bool) {
	size := s.image[a]
	if i < 0 || i >= size {
		switch s.padding {
		case "border":
			i = min(max(i, 0), size-1)
		case "reflection":
			i = int(reflectInto(float64(i), lo, hi))
		}
	}
	return i, i >= 0 && i < size
}

// reflectInto mirrors v at the borders lo and hi until it lies between
// them.
func reflectInto(v, lo, hi float64) float64 {
	span := hi - lo
	if span <= 0 {
		return lo
	}
	switch {
	case v < lo:
		d := lo - v
		k := math.Floor(d / span)
		if r := d - k*span; math.Mod(k, 2) == 0 {
			return lo + r
		} else {
			return hi - r
		}
	case v > hi:
		d := v - hi
		k := math.Floor(d / span)
		if r := d - k*span; math.Mod(k, 2) == 0 {
			return hi - r
		} else {
			return lo + r
		}
	}
	return v
}

// cubicWeights returns Keys' cubic convolution weights (a = −0.75) of the
// four taps at −1, 0, 1 and 2 from a point t ∈ [0, 1) past tap 0.
func cubicWeights(t float64) [4]float64 {
	const a = -0.75
	near := func(d float64) float64 { return ((a+2)*d-(a+3))*d*d + 1 }
	far := func(d float64) float64 { return ((a*d-5*a)*d+8*a)*d - 4*a }
	return [4]float64{far(t + 1), near(t), near(1 - t), far(2 - t)}
}

// affineGridOp is the kernel of AffineGrid: for the target size (N, C, H,
// W) or (N, C, D, H, W), the grid of the positions θ·(x, y[, z], 1) of
// every output element, where x, y, z run evenly over [−1, 1] (through
// the corner elements' centres with align_corners, else their outer
// edges).
func affineGridOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	theta, sizeIn := in[0], in[1]
	if !theta.dtype.IsFloat() {
		return nil, errDType(theta, "float32 or float64")
	}
	size, err := ints(rc, n, sizeIn)
	if err != nil {
		return nil, fmt.Errorf("size: %w", err)
	}
	axes := len(size) - 2
	if axes != 2 && axes != 3 {
		return nil, fmt.Errorf("size %v must be (N, C, H, W) or (N, C, D, H, W)", size)
	}
	if theta.rank() != 3 || theta.shape[1] != axes || theta.shape[2] != axes+1 || int64(theta.shape[0]) != size[0] {
		return nil, fmt.Errorf("theta %s must be (%d, %d, %d) for size %v", shapeString(theta.shape), size[0], axes, axes+1, size)
	}
	spatial := make([]int, axes)
	for i, d := range size[2:] {
		if d < 0 || d > maxDimension {
			return nil, fmt.Errorf("size %v: dimension %d is out of range", size, d)
		}
		spatial[i] = int(d)
	}
	shape := append(append([]int{theta.shape[0]}, spatial...), axes)
	y, err := rc.alloc(n, theta.dtype, shape)
	if err != nil {
		return nil, err
	}
	alignCorners := n.attrInt("align_corners", 0) != 0
	if d, ok := y.data.([]float32); ok {
		err = affineGrid(rc, theta.data.([]float32), d, spatial, alignCorners)
	} else {
		err = affineGrid(rc, theta.data.([]float64), y.data.([]float64), spatial, alignCorners)
	}
	return oneOrErr(y, err)
}

// affineGrid writes θ·(x, y[, z], 1) for every position of the spatial
// grid of each batch's θ.
func affineGrid[T float](rc *runCtx, theta, grid []T, spatial []int, alignCorners bool) error {
	axes := len(spatial)
	points := numel(spatial)
	pos := make([]int, axes)
	homo := make([]float64, axes+1) // (x, y[, z], 1): the innermost axis first
	for b := range len(theta) / (axes * (axes + 1)) {
		if err := rc.ctx.Err(); err != nil {
			return err
		}
		m := theta[b*axes*(axes+1) : (b+1)*axes*(axes+1)]
		clear(pos)
		for p := range points {
			for a := range axes {
				homo[axes-1-a] = evenlySpaced(pos[a], spatial[a], alignCorners)
			}
			homo[axes] = 1
			for r := range axes {
				v := 0.0
				for k, h := range homo {
					v += float64(m[r*(axes+1)+k]) * h
				}
				grid[(b*points+p)*axes+r] = T(v)
			}
			odometer(pos, spatial)
		}
	}
	return nil
}

// evenlySpaced is the i-th of n positions spread over [−1, 1]: through
// the end points with alignCorners, else at the centres of n equal cells;
// a single position is 0.
func evenlySpaced(i, n int, alignCorners bool) float64 {
	if n <= 1 {
		return 0
	}
	if alignCorners {
		return -1 + 2*float64(i)/float64(n-1)
	}
	return -1 + (2*float64(i)+1)/float64(n)
}

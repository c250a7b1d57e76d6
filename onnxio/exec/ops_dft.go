package exec

import (
	"fmt"
	"math"
)

// DFT (opset 17: axis an attribute defaulting to 1; opset 20: axis an
// input defaulting to −2), STFT, the window functions and MelWeightMatrix
// (opset 17). Both compute in float64 by
// the definition, O(n²) per transformed line: exact to float64 rounding,
// which is what ONNX's reference (numpy's FFT) produces and what ONNX
// Runtime's float32 FFT misses by more than the node tests' atol of 1e-5.
func init() {
	ops["DFT"] = &opSpec{since: 17, minIn: 1, maxIn: 3, minOut: 1, maxOut: 1, run: dftOp,
		attrs:        map[string]attrKind{"axis": attrInt, "inverse": attrInt, "onesided": attrInt},
		movedToInput: map[string]int{"axis": 20}}
	ops["STFT"] = &opSpec{since: 17, minIn: 2, maxIn: 4, minOut: 1, maxOut: 1, run: stftOp,
		attrs: map[string]attrKind{"onesided": attrInt}}
	windowAttrs := map[string]attrKind{"output_datatype": attrInt, "periodic": attrInt}
	ops["HannWindow"] = &opSpec{since: 17, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: windowOp(hannWindow), attrs: windowAttrs}
	ops["HammingWindow"] = &opSpec{since: 17, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: windowOp(hammingWindow), attrs: windowAttrs}
	ops["BlackmanWindow"] = &opSpec{since: 17, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: windowOp(blackmanWindow), attrs: windowAttrs}
	ops["MelWeightMatrix"] = &opSpec{since: 17, minIn: 5, maxIn: 5, minOut: 1, maxOut: 1, run: melWeightMatrixOp,
		attrs: map[string]attrKind{"output_datatype": attrInt}}
}

// spectrum is a table of e^(−2πi·j/n) for j < n, the twiddle factors of
// an n-point transform.
type spectrum struct {
	n        int
	cos, sin []float64
	rc       *runCtx // checked every few output points: a line costs O(n²)
}

// stopped reports the run's cancellation every 64th output point.
func (s *spectrum) stopped(k int) error {
	if k%64 != 63 {
		return nil
	}
	return s.rc.ctx.Err()
}

// newSpectrum reserves and fills the twiddle factors of an n-point DFT.
func newSpectrum(rc *runCtx, nd *node, n int) (*spectrum, error) {
	d, err := scratch[float64](rc, nd, mulSat(2, n), "DFT twiddle factors")
	if err != nil {
		return nil, err
	}
	s := &spectrum{n: n, cos: d[:n], sin: d[n:], rc: rc}
	for j := range n {
		s.cos[j], s.sin[j] = math.Cos(2*math.Pi*float64(j)/float64(n)), math.Sin(2*math.Pi*float64(j)/float64(n))
	}
	return s, nil
}

// dft writes bins k < len(outRe) of the DFT of the signal (re, im), zero
// beyond its length (and truncated to n); with inverse, the samples of
// the inverse DFT (with its 1/n) of the spectrum (re, im).
func (s *spectrum) dft(re, im, outRe, outIm []float64, inverse bool) error {
	sign := 1.0 // the sign of the exponent is -sign
	if inverse {
		sign = -1
	}
	for k := range outRe {
		if err := s.stopped(k); err != nil {
			return err
		}
		var sr, si float64
		for t := range min(len(re), s.n) {
			j := k * t % s.n
			c, sn := s.cos[j], sign*s.sin[j]
			sr += re[t]*c + im[t]*sn
			si += im[t]*c - re[t]*sn
		}
		if inverse {
			sr, si = sr/float64(s.n), si/float64(s.n)
		}
		outRe[k], outIm[k] = sr, si
	}
	return nil
}

// inverseReal writes the real signal of n samples whose spectrum is
// Hermitian with the given first bins (numpy's irfft): bins beyond them
// are zero, and the imaginary parts of bin 0 and, for even n, bin n/2
// drop out.
func (s *spectrum) inverseReal(re, im, out []float64) error {
	bins := min(len(re), s.n/2+1)
	for t := range out {
		if err := s.stopped(t); err != nil {
			return err
		}
		sum := 0.0
		for k := range bins {
			j := k * t % s.n
			v := re[k]*s.cos[j] - im[k]*s.sin[j]
			if k != 0 && 2*k != s.n {
				v *= 2 // the conjugate bin n−k adds the same real part
			}
			sum += v
		}
		out[t] = sum / float64(s.n)
	}
	return nil
}

// dftOp is the kernel of DFT. The last axis of the input holds the real
// part (size 1) or the real and imaginary parts (size 2); the transform
// runs along axis over dft_length points (default: the axis size), the
// signal zero-padded or truncated to it. onesided keeps the bins up to
// n/2 of a forward transform; with inverse it takes those bins of a
// Hermitian spectrum and returns the real signal (size 1 last axis).
func dftOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	r := x.rank()
	if r < 2 || (x.shape[r-1] != 1 && x.shape[r-1] != 2) {
		return nil, fmt.Errorf("input %s must end in an axis of 1 (real) or 2 (complex) components", shapeString(x.shape))
	}
	axis := int(n.attrInt("axis", 1))
	if n.opset >= 20 {
		axis = -2
		if v := input(in, 2); v != nil {
			a, err := scalarInt(rc, n, v, "axis")
			if err != nil {
				return nil, err
			}
			axis = int(a)
		}
	}
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r-1 {
		return nil, fmt.Errorf("axis %d is out of range for input %s (the last axis holds the components)", axis, shapeString(x.shape))
	}
	inverse, onesided := n.attrInt("inverse", 0) != 0, n.attrInt("onesided", 0) != 0
	length := x.shape[axis]
	if inverse && onesided {
		length = 2 * (length - 1)
	}
	if v := input(in, 1); v != nil {
		l, err := scalarInt(rc, n, v, "dft_length")
		if err != nil {
			return nil, err
		}
		if l < 1 || l > maxDimension {
			return nil, fmt.Errorf("dft_length %d must be positive", l)
		}
		length = int(l)
	}
	if length < 1 {
		return nil, fmt.Errorf("input %s: a DFT along axis %d needs at least one point", shapeString(x.shape), axis)
	}
	outLen, components := length, 2
	switch {
	case inverse && onesided:
		components = 1
	case onesided:
		outLen = length/2 + 1
	}
	shape := append([]int(nil), x.shape...)
	shape[axis], shape[r-1] = outLen, components
	y, err := rc.alloc(n, x.dtype, shape)
	if err != nil || y.size() == 0 {
		return oneOrErr(y, err)
	}
	sp, err := newSpectrum(rc, n, length)
	if err != nil {
		return nil, err
	}
	lines := dftLines{outer: numel(x.shape[:axis]), inLen: x.shape[axis], outLen: outLen,
		inner: numel(x.shape[axis+1 : r-1]), inParts: x.shape[r-1], outParts: components}
	transform := func(re, im, outRe, outIm []float64) error {
		if inverse && onesided {
			return sp.inverseReal(re, im, outRe)
		}
		return sp.dft(re, im, outRe, outIm, inverse)
	}
	if x.dtype == Float32 {
		err = transformLines(rc, n, lines, x.data.([]float32), y.data.([]float32), transform)
	} else {
		err = transformLines(rc, n, lines, x.data.([]float64), y.data.([]float64), transform)
	}
	return oneOrErr(y, err)
}

// scalarInt reads a one-element integer input.
func scalarInt(rc *runCtx, n *node, v *value, name string) (int64, error) {
	s, err := ints(rc, n, v)
	if err != nil || len(s) != 1 {
		return 0, fmt.Errorf("%s %s must be one integer", name, v.describe())
	}
	return s[0], nil
}

// dftLines is the layout of a transform along one axis of an (outer,
// length, inner, parts) array, parts being 1 (real) or 2 (complex).
type dftLines struct {
	outer, inLen, outLen, inner int
	inParts, outParts           int
}

// transformLines gathers every line of x into float64 buffers, transforms
// it and scatters the result into y.
func transformLines[T float](rc *runCtx, n *node, l dftLines, x, y []T, transform func(re, im, outRe, outIm []float64) error) error {
	b, err := scratch[float64](rc, n, 2*l.inLen+2*l.outLen, "DFT line buffers")
	if err != nil {
		return err
	}
	re, im := b[:l.inLen], b[l.inLen:2*l.inLen]
	outRe, outIm := b[2*l.inLen:2*l.inLen+l.outLen], b[2*l.inLen+l.outLen:]
	for o := range l.outer {
		if err := rc.ctx.Err(); err != nil {
			return err
		}
		for i := range l.inner {
			for t := range l.inLen {
				at := ((o*l.inLen+t)*l.inner + i) * l.inParts
				re[t], im[t] = float64(x[at]), 0
				if l.inParts == 2 {
					im[t] = float64(x[at+1])
				}
			}
			if err := transform(re, im, outRe, outIm); err != nil {
				return err
			}
			for k := range l.outLen {
				at := ((o*l.outLen+k)*l.inner + i) * l.outParts
				y[at] = T(outRe[k])
				if l.outParts == 2 {
					y[at+1] = T(outIm[k])
				}
			}
		}
	}
	return nil
}

// stftOp is the kernel of STFT: the DFT of every frame of frame_length
// samples, frame_step apart, of each signal (batch, length, 1 or 2
// components), multiplied by the window when one is given (its length is
// then the frame length). onesided (the default) keeps the bins up to
// frame_length/2.
func stftOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, window := in[0], input(in, 2)
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	if x.rank() != 3 || (x.shape[2] != 1 && x.shape[2] != 2) {
		return nil, fmt.Errorf("signal %s must be (batch, length, 1 or 2)", shapeString(x.shape))
	}
	step, err := scalarInt(rc, n, in[1], "frame_step")
	if err != nil {
		return nil, err
	}
	length := int64(-1)
	if window != nil {
		if window.rank() != 1 || window.dtype != x.dtype {
			return nil, fmt.Errorf("window %s must be a 1-D %s tensor", window.describe(), x.dtype)
		}
		length = int64(window.shape[0])
	}
	if v := input(in, 3); v != nil {
		fl, err := scalarInt(rc, n, v, "frame_length")
		if err != nil {
			return nil, err
		}
		if length >= 0 && fl != length {
			return nil, fmt.Errorf("frame_length %d differs from the window's length %d", fl, length)
		}
		length = fl
	}
	if length < 1 || length > int64(x.shape[1]) || step < 1 || step > maxDimension {
		return nil, fmt.Errorf("frame length %d (from window or frame_length) must be in [1, %d] and frame_step %d positive", length, x.shape[1], step)
	}
	frames := (x.shape[1]-int(length))/int(step) + 1
	bins := int(length)
	if n.attrInt("onesided", 1) != 0 {
		bins = bins/2 + 1
	}
	shape := []int{x.shape[0], frames, bins, 2}
	y, err := rc.alloc(n, x.dtype, shape)
	if err != nil || y.size() == 0 {
		return oneOrErr(y, err)
	}
	sp, err := newSpectrum(rc, n, int(length))
	if err != nil {
		return nil, err
	}
	w, err := floatData[float64](rc, n, window)
	if err != nil {
		return nil, err
	}
	if x.dtype == Float32 {
		err = stft(rc, n, sp, x.data.([]float32), w, y.data.([]float32), x.shape, int(step), frames, bins)
	} else {
		err = stft(rc, n, sp, x.data.([]float64), w, y.data.([]float64), x.shape, int(step), frames, bins)
	}
	return oneOrErr(y, err)
}

// stft transforms every windowed frame of every signal.
func stft[T float](rc *runCtx, n *node, sp *spectrum, x []T, window []float64, y []T, shape []int, step, frames, bins int) error {
	length, parts := sp.n, shape[2]
	b, err := scratch[float64](rc, n, 2*length+2*bins, "STFT frame buffers")
	if err != nil {
		return err
	}
	re, im := b[:length], b[length:2*length]
	outRe, outIm := b[2*length:2*length+bins], b[2*length+bins:]
	for s := range shape[0] {
		if err := rc.ctx.Err(); err != nil {
			return err
		}
		for f := range frames {
			for t := range length {
				at := (s*shape[1] + f*step + t) * parts
				re[t], im[t] = float64(x[at]), 0
				if parts == 2 {
					im[t] = float64(x[at+1])
				}
				if window != nil {
					re[t] *= window[t]
					im[t] *= window[t]
				}
			}
			if err := sp.dft(re, im, outRe, outIm, false); err != nil {
				return err
			}
			for k := range bins {
				at := ((s*frames+f)*bins + k) * 2
				y[at], y[at+1] = T(outRe[k]), T(outIm[k])
			}
		}
	}
	return nil
}

// signalWindow is a generalized cosine window: Σ_k a_k·cos(2πk·n/N) with
// alternating signs folded into the coefficients.
type signalWindow []float64

// The windows of HannWindow, HammingWindow (α = 25/46) and BlackmanWindow.
var (
	hannWindow     = signalWindow{0.5, -0.5}
	hammingWindow  = signalWindow{25.0 / 46, -21.0 / 46}
	blackmanWindow = signalWindow{0.42, -0.5, 0.08}
)

// windowOp returns the kernel of a window function op (opset 17): size
// samples of the window over a period of size (periodic, the default) or
// size − 1 (symmetric), in output_datatype (default float32).
func windowOp(w signalWindow) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		size, err := scalarInt(rc, n, in[0], "size")
		if err != nil {
			return nil, err
		}
		if size < 0 || size > maxDimension {
			return nil, fmt.Errorf("size %d is out of range", size)
		}
		dt := DType(n.attrInt("output_datatype", int64(Float32)))
		if !dt.isNumeric() {
			return nil, fmt.Errorf("attribute output_datatype %s is not a numeric type the executor supports", dt)
		}
		period := float64(size)
		if n.attrInt("periodic", 1) == 0 {
			period--
		}
		vals, err := scratch[float64](rc, n, int(size), "window samples")
		if err != nil {
			return nil, err
		}
		for i := range vals {
			for k, a := range w {
				vals[i] += a * math.Cos(2*math.Pi*float64(k)*float64(i)/period)
			}
		}
		y, err := rc.alloc(n, dt, []int{int(size)})
		if err != nil {
			return nil, err
		}
		convertData(y.data, vals)
		return one(y)
	}
}

// melWeightMatrixOp is the kernel of MelWeightMatrix (opset 17): the
// (dft_length/2 + 1, num_mel_bins) matrix of triangular filters that maps
// a onesided spectrum to mel bins, as ONNX's reference builds it: the
// band from lower_edge_hertz to upper_edge_hertz is cut evenly on the mel
// scale (2595·log10(1 + f/700)) into num_mel_bins + 2 points, which are
// rounded down to spectrogram bins; filter i rises from point i to point
// i + 1 and falls to point i + 2.
func melWeightMatrixOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	var counts [3]int64
	for i, name := range []string{"num_mel_bins", "dft_length", "sample_rate"} {
		v, err := scalarInt(rc, n, in[i], name)
		if err != nil {
			return nil, err
		}
		if v < 1 || v > maxDimension {
			return nil, fmt.Errorf("%s %d must be positive", name, v)
		}
		counts[i] = v
	}
	mels, length, rate := int(counts[0]), int(counts[1]), float64(counts[2])
	var edges [2]float64
	for i, name := range []string{"lower_edge_hertz", "upper_edge_hertz"} {
		if !in[3+i].dtype.IsFloat() || in[3+i].size() != 1 {
			return nil, fmt.Errorf("%s %s must be one float", name, in[3+i].describe())
		}
		edges[i] = castTo[float64](in[3+i].data)[0]
	}
	dt := DType(n.attrInt("output_datatype", int64(Float32)))
	if !dt.isNumeric() {
		return nil, fmt.Errorf("attribute output_datatype %s is not a numeric type the executor supports", dt)
	}
	spectrumBins := length/2 + 1
	mel := func(hz float64) float64 { return 2595 * math.Log10(1+hz/700) }
	low, high := mel(edges[0]), mel(edges[1])
	step := (high - low) / float64(mels+2)
	points := make([]int, mels+2)
	for i := range points {
		hz := 700 * (math.Pow(10, (float64(i)*step+low)/2595) - 1)
		points[i] = int(math.Floor(float64(length+1) * hz / rate))
	}
	weights, err := scratch[float64](rc, n, mulSat(spectrumBins, mels), "mel weights")
	if err != nil {
		return nil, err
	}
	set := func(bin, mel int, v float64) error {
		if bin < 0 || bin >= spectrumBins {
			return fmt.Errorf("mel bin %d reaches spectrogram bin %d, outside [0, %d): the edges %g and %g Hz exceed the sample rate's band", mel, bin, spectrumBins, edges[0], edges[1])
		}
		weights[bin*mels+mel] = v
		return nil
	}
	for i := range mels {
		left, centre, right := points[i], points[i+1], points[i+2]
		if centre == left {
			if err := set(centre, i, 1); err != nil {
				return nil, err
			}
		}
		for j := left; j <= centre && centre > left; j++ {
			if err := set(j, i, float64(j-left)/float64(centre-left)); err != nil {
				return nil, err
			}
		}
		for j := centre; j < right; j++ {
			if err := set(j, i, float64(right-j)/float64(right-centre)); err != nil {
				return nil, err
			}
		}
	}
	y, err := rc.alloc(n, dt, []int{spectrumBins, mels})
	if err != nil {
		return nil, err
	}
	convertData(y.data, weights)
	return one(y)
}

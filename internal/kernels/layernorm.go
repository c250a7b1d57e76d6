package kernels

import (
	"math"
	"sync"
)

// LayerNorm32 normalizes each row of cols values of x into dst:
// (v − mean)/√(variance + eps)·scale[j] + bias[j], with the mean, the
// population variance and each value's arithmetic in float64 and one
// rounding to float32 at the end (a sum of 384 float32 values in float32
// would lose digits the 1e-5 agreement with ONNX Runtime needs). bias may
// be nil.
//
// With res non-nil the rows normalized are x + res, each sum rounded to
// float32 first, as a separate Add node gives it: a residual connection
// and its LayerNormalization in one pass. Rows are split across the
// processors; a row's result does not depend on the split. dst may be x
// or res; x, res and dst have rows·cols values, scale and bias cols.
func LayerNorm32(dst, x, res, scale, bias []float32, cols int, eps float64) {
	if cols <= 0 || len(x)%cols != 0 || len(dst) != len(x) || (res != nil && len(res) != len(x)) || len(scale) != cols || (bias != nil && len(bias) != cols) {
		panic("kernels: LayerNorm32: lengths do not match")
	}
	rows := len(x) / cols
	per := max(1, lnPart/cols)
	parts := ceilDiv(rows, per)
	j := layerNormJobs.Get().(*layerNormJob)
	*j = layerNormJob{dst: dst, x: x, res: res, scale: scale, bias: bias, cols: cols, eps: eps, per: per}
	if parts == 1 || maxThreads() == 1 {
		j.rows(0, rows)
	} else {
		parallelFor(parts, maxThreads(), j)
	}
	*j = layerNormJob{} // let go of the slices
	layerNormJobs.Put(j)
}

// layerNormJobs recycles layerNormJob values: a job handed to parallelFor
// lives on the heap, and a BERT pass normalizes 13 times.
var layerNormJobs = sync.Pool{New: func() any { return new(layerNormJob) }}

// lnPart is about how many values one part of a parallel LayerNorm32
// normalizes (whole rows): some 10 µs of work.
const lnPart = 1 << 13

// layerNormJob is one LayerNorm32 call.
type layerNormJob struct {
	dst, x, res, scale, bias []float32
	cols, per                int
	eps                      float64
}

func (j *layerNormJob) runPart(part int) {
	lo := part * j.per
	j.rows(lo, min(lo+j.per, len(j.x)/j.cols))
}

// rows normalizes rows lo to hi.
func (j *layerNormJob) rows(lo, hi int) {
	for r := lo; r < hi; r++ {
		at := r * j.cols
		row := j.x[at : at+j.cols]
		out := j.dst[at : at+j.cols]
		var res []float32
		if j.res != nil {
			res = j.res[at : at+j.cols]
		}
		if layerNormRowVector(out, row, res, j.scale, j.bias, j.eps) {
			continue
		}
		if res != nil {
			addRounded(out, row, res)
			row = out
		}
		mean, variance := moments32(row)
		inv := 1 / math.Sqrt(variance+j.eps)
		normalizeRow(out, row, mean, inv, j.scale, j.bias)
	}
}

// addRounded sets dst[i] = a[i] + b[i] in float32.
func addRounded(dst, a, b []float32) {
	b = b[:len(a)]
	dst = dst[:len(a)]
	for i, v := range a {
		dst[i] = v + b[i]
	}
}

// moments32 returns the mean and the population variance of xs in
// float64, four partial sums at a time (a single running sum waits on
// each addition's latency).
func moments32(xs []float32) (mean, variance float64) {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(xs); i += 4 {
		s0 += float64(xs[i])
		s1 += float64(xs[i+1])
		s2 += float64(xs[i+2])
		s3 += float64(xs[i+3])
	}
	for ; i < len(xs); i++ {
		s0 += float64(xs[i])
	}
	mean = (s0 + s1 + s2 + s3) / float64(len(xs))
	s0, s1, s2, s3 = 0, 0, 0, 0
	i = 0
	for ; i+4 <= len(xs); i += 4 {
		d0 := float64(xs[i]) - mean
		d1 := float64(xs[i+1]) - mean
		d2 := float64(xs[i+2]) - mean
		d3 := float64(xs[i+3]) - mean
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(xs); i++ {
		d := float64(xs[i]) - mean
		s0 += d * d
	}
	return mean, (s0 + s1 + s2 + s3) / float64(len(xs))
}

// normalizeRow sets dst[j] = (row[j] − mean)·inv·scale[j] + bias[j] in
// float64, rounded to float32; bias may be nil.
func normalizeRow(dst, row []float32, mean, inv float64, scale, bias []float32) {
	dst = dst[:len(row)]
	scale = scale[:len(row)]
	if bias == nil {
		for j, v := range row {
			dst[j] = float32((float64(v) - mean) * inv * float64(scale[j]))
		}
		return
	}
	bias = bias[:len(row)]
	for j, v := range row {
		dst[j] = float32((float64(v)-mean)*inv*float64(scale[j]) + float64(bias[j]))
	}
}

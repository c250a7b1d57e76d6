package kernels

import "math"

// SoftmaxRows replaces each of the rows of x (n wide, dense) by its softmax.
// A row that is entirely -Inf becomes all zeros rather than NaN.
// Large inputs are split by rows over all processors.
func SoftmaxRows(x []float32, rows, n int) {
	set := currentISA()
	x = x[:rows*n]
	threads := maxThreads()
	if threads == 1 || rows < 2 || rows*n < softmaxParallelMin {
		for r := range rows {
			softmaxRow(set, x[r*n:r*n+n])
		}
		return
	}
	var j *softmaxJob
	select {
	case j = <-freeSoftmaxJobs:
	default:
		j = new(softmaxJob)
	}
	*j = softmaxJob{set: set, x: x, rows: rows, n: n, parts: min(rows, 4*threads)}
	parallelFor(j.parts, threads, j)
	*j = softmaxJob{}
	select {
	case freeSoftmaxJobs <- j:
	default:
	}
}

// softmaxParallelMin is the number of elements from which SoftmaxRows
// splits the rows over threads: about 20 µs of work.
const softmaxParallelMin = 1 << 16

// softmaxJob is a SoftmaxRows split into parts of consecutive rows.
type softmaxJob struct {
	set            *isa
	x              []float32
	rows, n, parts int
}

// freeSoftmaxJobs recycles softmaxJobs.
var freeSoftmaxJobs = make(chan *softmaxJob, 16)

// runPart computes the softmax of one range of rows.
func (j *softmaxJob) runPart(part int) {
	r0, r1 := splitRange(j.rows, j.parts, part)
	for r := r0; r < r1; r++ {
		softmaxRow(j.set, j.x[r*j.n:(r+1)*j.n])
	}
}

// softmaxRow replaces row by its softmax, or by zeros if it is all −Inf
// (or empty).
func softmaxRow(set *isa, row []float32) {
	m := set.maxOf(row)
	if math.IsInf(float64(m), -1) {
		clear(row)
		return
	}
	sum := set.expShift(row, m)
	set.scale(row, 1/sum)
}

package kernels

import "math"

// SoftmaxRows replaces each of the rows of x (n wide, dense) by its
// softmax, with the non-finite results of torch.softmax and ONNX's Softmax:
// a row that holds a NaN or a +Inf, or nothing but −Inf, becomes all NaN
// (e^(x−max) is NaN there); −Inf elsewhere gives a weight of 0.
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

// softmaxRow replaces row by its softmax (see SoftmaxRows).
func softmaxRow(set *isa, row []float32) {
	m := set.maxOf(row)
	if !isFinite(m) { // NaN, +Inf, or a row of −Inf: every e^(x−max) sums to NaN
		fillNaN(row)
		return
	}
	sum := set.expShift(row, m)
	set.scale(row, 1/sum)
}

// SoftmaxRowsSink is SoftmaxRows with one more logit, sink, in every row's
// softmax, which is then dropped (gpt-oss's attention sinks): each row's
// weights sum to less than one. A NaN or +Inf sink makes every row NaN, as
// a NaN or +Inf score does; a row of nothing but −Inf gets weights of 0
// when the sink is finite.
func SoftmaxRowsSink(x []float32, rows, n int, sink float32) {
	set := currentISA()
	for r := range rows {
		softmaxRowSink(set, x[r*n:r*n+n], sink)
	}
}

// softmaxRowSink replaces row by its softmax with the extra logit sink
// (see SoftmaxRowsSink).
func softmaxRowSink(set *isa, row []float32, sink float32) {
	m := max(set.maxOf(row), sink)
	if !isFinite(m) { // NaN, +Inf, or −Inf everywhere, the sink included
		fillNaN(row)
		return
	}
	sum := set.expShift(row, m) + exp32(sink-m)
	set.scale(row, 1/sum)
}

// isFinite reports whether x is neither NaN nor ±Inf.
func isFinite(x float32) bool { return x-x == 0 }

// fillNaN sets every element of x to NaN.
func fillNaN(x []float32) {
	nan := float32(math.NaN())
	for i := range x {
		x[i] = nan
	}
}

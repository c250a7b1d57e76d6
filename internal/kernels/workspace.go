package kernels

// workspace is one goroutine's scratch memory: packing buffers for GEMM and
// tiles for attention. Workspaces are kept on a free list and grown on
// demand, so after the first calls at a given size no kernel allocates.
//
// The free list is a buffered channel rather than a sync.Pool on purpose:
// a sync.Pool is emptied by every garbage collection, and re-allocating
// megabytes of packing buffers after each GC would show up both in latency
// and in allocation counts.
type workspace struct {
	packA []float32 // packed mc×kc block of A
	tile  []float32 // one mr×nr tile for ragged edges
	attn  attnScratch
	dots  [4]float32 // dot products of runDots
}

// freeWorkspaces holds idle workspaces; at most one per goroutine that
// ever ran a kernel at the same time is created.
var freeWorkspaces = make(freeList[workspace], 256)

// freeList holds idle objects of type T for reuse, up to its capacity.
type freeList[T any] chan *T

// get takes an idle object or makes a new one.
func (l freeList[T]) get() *T {
	select {
	case x := <-l:
		return x
	default:
		return new(T)
	}
}

// put returns x to the list, or drops it when the list is full.
func (l freeList[T]) put(x *T) {
	select {
	case l <- x:
	default:
	}
}

// grow returns s resliced to n elements, reallocating only if its capacity
// is too small. The contents are not preserved or cleared. A new array
// has room to spare (an eighth, and at least 1024 floats), so that sizes
// creeping up by a little — the keys of a decoding step, one more each
// time — reallocate once in a while, not at every call.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n, n+max(n/8, 1024))
	}
	return s[:n]
}

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

// ceilDiv returns ⌈n/m⌉.
func ceilDiv(n, m int) int { return (n + m - 1) / m }

// balancedBlock splits n into ⌈n/max⌉ blocks of nearly equal size, rounded
// up to a multiple of unit, and returns that size. Splitting 300 as
// 150+150 rather than 256+44 keeps every block long enough to amortize
// its overheads.
func balancedBlock(n, maxBlock, unit int) int {
	blocks := ceilDiv(n, maxBlock)
	return min(roundUp(ceilDiv(n, blocks), unit), roundUp(maxBlock, unit))
}

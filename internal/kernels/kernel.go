package kernels

import (
	"fmt"
	"os"
	"sync/atomic"
)

// microKernel is a register-blocked inner kernel together with the cache
// blocking that keeps it fed.
//
// The GEMM driver (gemm_driver.go) follows the Goto/BLIS scheme: B is
// packed in kc×nc blocks (sized for L3, shared by all threads), A in mc×kc
// blocks (sized for one core's L2), and the kernel multiplies an mr×kc
// panel of A by a kc×nr panel of B (the B panel stays in L1 while the A
// panels stream past it), keeping the whole mr×nr tile of C in registers
// for the kc steps.
type microKernel struct {
	name   string
	mr, nr int // register tile of C
	kc     int // depth of a packed block: B panel kc·nr floats fits L1
	mc     int // rows of a packed A block at depth kc: mc·kc floats fits L2 (fewer rows when packed deeper)
	nc     int // columns of a packed B block: kc·nc floats fits L3
	// kcPack, when above kc, is the depth the driver packs at once (a
	// multiple of its block of depth): fewer, longer packing passes and
	// phases. The sums are still rounded into C every block of depth, so
	// the results have the same bits.
	kcPack int
	// tile computes C = alpha·(A·B) + beta·C for one mr×nr tile of C with
	// row stride ldc, where A(r, p) = a[r·aRow + p·aCol] (r < mr, p < kc)
	// and B(p, j) = b[p·bRow + j] (j < nr). With beta == 0, C is not read.
	//
	// Packed operands (see pack.go) have aRow = 1, aCol = mr, bRow = nr;
	// the strides also let the attention kernel read row-major blocks of
	// Q, scores and V in place (aRow = ld, aCol = 1; bRow = ld).
	tile func(kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32)
	// rows, when set, computes a tile of 1 to maxTileRows rows of C and
	// nr columns as tile does (same operands, same order of operations),
	// for products too short for a full tile; nil means that such
	// products take the full tiles.
	rows func(rows, kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32)
	// fromRow, when set, computes a tile of 1 to maxTileRows rows, or mr,
	// as tile and rows do, but with C = alpha·(A·B) + beta·row for the
	// nr floats of row, the same for every row of C: the bits they give
	// on a C whose rows hold row, without C being written first
	// (GemmPackedBias).
	fromRow func(rows, kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32, row []float32)
}

// maxTileRows is the most rows microKernel.rows computes at once.
const maxTileRows = 8

// isa is one complete set of kernels for an instruction set: the GEMM
// micro-kernel and the vector helpers the attention and softmax use.
type isa struct {
	name string
	gemm *microKernel
	// expShift sets x[i] = exp(x[i] − shift) and returns the sum of the
	// new values; a NaN difference gives NaN (and a NaN sum).
	expShift func(x []float32, shift float32) float32
	// maxOf returns the largest element of x: NaN if x holds a NaN, −Inf
	// for an empty x.
	maxOf func(x []float32) float32
	// scale multiplies x by alpha in place.
	scale func(x []float32, alpha float32)
	// add adds y to x element by element (len(y) ≥ len(x)).
	add func(x, y []float32)
	// interleave sets dst[p·ldd + r] = src[r·lds + p] for r < rows and
	// p < n: rows of src become columns of dst, groups of ldd floats. It
	// packs A (rows into mr-groups) and transposed B (into nr-groups).
	interleave func(dst []float32, ldd int, src []float32, lds, rows, n int)
	// copyPanel sets dst[p·ldd + c] = src[p·lds + c] for p < rows and
	// c < cols: it packs B (rows of B into a panel of ldd = nr columns).
	copyPanel func(dst []float32, ldd int, src []float32, lds, rows, cols int)
	// dot4, when set, puts in out the dot products of x[0:k32] with four
	// rows of w, ldw apart, k32 a multiple of 32 (dots.go).
	dot4 func(k32 int, x, w []float32, ldw int, out *[4]float32)
	// dotRows, when set, puts in out[r] scale times the dot product of
	// x[0:k32] with row r of w, for 4·groups rows ldw apart, k32 a
	// multiple of 32 (attention_few.go).
	dotRows func(groups, k32 int, x, w []float32, ldw int, scale float32, out []float32)
}

// goISA is the portable fallback, written in plain Go.
var goISA = &isa{
	name:     "go",
	gemm:     &goKernel,
	expShift: expShiftGo,
	maxOf:    maxOfGo,
	scale:    scaleGo,
	add:      addGo,

	interleave: interleaveGo,
	copyPanel:  copyPanelGo,
}

// cpu holds the processor's vector features, detected once.
var cpu = detectCPU()

// active is the instruction set in use. It is chosen once at start-up:
// the best the CPU supports, or the portable Go kernels if the environment
// sets ATTNRUN_NOASM=1. Tests swap it to cover every path in one run.
var active atomic.Pointer[isa]

func init() {
	active.Store(chooseISA(availableISAs(), os.Getenv("ATTNRUN_NOASM")))
}

// chooseISA picks the best of the available sets (listed best first), or
// the portable one if noAsm is "1".
func chooseISA(available []*isa, noAsm string) *isa {
	if noAsm == "1" {
		return goISA
	}
	return available[0]
}

// currentISA returns the instruction set in use.
func currentISA() *isa { return active.Load() }

// ISA names the instruction set the kernels use on this machine ("avx2",
// "go", ...), for benchmark reports and logs.
func ISA() string { return currentISA().name }

// ISAs names the instruction sets usable on this machine, best first; the
// last is always "go", the portable kernels.
func ISAs() []string {
	var names []string
	for _, set := range availableISAs() {
		names = append(names, set.name)
	}
	return names
}

// UseISA switches the kernels to the named instruction set (one of ISAs)
// and returns a function that switches back. It is meant for tests that
// check every code path in one process, and must not be called while
// kernels run.
func UseISA(name string) (restore func(), err error) {
	for _, set := range availableISAs() {
		if set.name == name {
			saved := active.Swap(set)
			return func() { active.Store(saved) }, nil
		}
	}
	return nil, fmt.Errorf("kernels: instruction set %q is not available here (have %v)", name, ISAs())
}

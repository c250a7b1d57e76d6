package tensorio

import (
	"bufio"
	"errors"
	"io"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/atomicfile"
)

// newDense wraps decoded data (a slice with one element per entry of shape)
// in a tensor. A shape of rank 0 gives a scalar tensor.
func newDense(shape []int64, data any) *tensor.Dense {
	dims := make([]int, len(shape))
	for i, d := range shape {
		dims[i] = int(d)
	}
	return tensor.New(tensor.WithShape(dims...), tensor.WithBacking(data))
}

// denseArray returns t as an Array (views copied out in logical order),
// with its element type in the file formats, refusing element types they
// do not hold.
func denseArray(t *tensor.Dense) (*array.Array, elemType, error) {
	if t == nil {
		return nil, elemType{}, errors.New("tensor is nil")
	}
	e, err := elemTypeOf(t.Dtype())
	if err != nil {
		return nil, elemType{}, err
	}
	a, err := array.FromDense(t) // a Dense built by hand, malformed, is an error
	if err != nil {
		return nil, elemType{}, err
	}
	return a, e, nil
}

// writeFile writes the file at path atomically through a buffer: it is
// either complete or, on any error, unchanged.
func writeFile(path string, write func(w io.Writer) error) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		if err := write(bw); err != nil {
			return err
		}
		return bw.Flush()
	})
}

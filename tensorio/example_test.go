package tensorio_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/tensorio"
)

// Save a state dict as .npz (np.load reads it), read it back, and turn an
// integer input into the float32 a model takes.
func Example() {
	dir, err := os.MkdirTemp("", "tensorio-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "weights.npz")

	weight := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6}))
	bias := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{0.5, -0.5}))
	if err := tensorio.WriteNPZ(path, []string{"W_query.weight", "W_query.bias"}, []*tensor.Dense{weight, bias}); err != nil {
		log.Fatal(err)
	}

	names, tensors, err := tensorio.ReadNPZ(path)
	if err != nil {
		log.Fatal(err)
	}
	for i, name := range names {
		fmt.Println(name, tensors[i].Shape(), tensors[i].Data())
	}

	tokens := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{7, 8, 9}))
	x, err := tensorio.ToFloat32(tokens)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(x.Dtype(), x.Data())

	// A file from a stranger: the error names it and says what was wrong.
	bad := filepath.Join(dir, "x.npy")
	if err := os.WriteFile(bad, []byte("\x93NUMPY\x01\x00\x10\x00{'descr': '<c8'}"), 0o644); err != nil {
		log.Fatal(err)
	}
	_, err = tensorio.ReadNPYFile(bad)
	fmt.Println(err != nil)
	// Output:
	// W_query.weight (2, 3) [1 2 3 4 5 6]
	// W_query.bias (2) [0.5 -0.5]
	// float32 [7 8 9]
	// true
}

package attnrun_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun"
	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/tensorio"
)

// Run a PyTorch export and hold it against what PyTorch computed; run a
// preset on attnrun's layers and print the attention weights it reports,
// as the notebook printed them. The README's "Use it from Go" shows this
// function's body.
func Example() {
	ctx := context.Background()

	// An ONNX file exported from PyTorch runs on attnrun's executor.
	model, err := attnrun.Load("testdata/onnx/multihead_opset17_dynamic/model.onnx")
	if err != nil {
		log.Fatal(err)
	}
	data := "testdata/onnx/multihead_opset17_dynamic/test_data_set_1/"
	x, err := attnrun.ReadTensor(data + "input_0.pb")
	if err != nil {
		log.Fatal(err)
	}
	want, err := attnrun.ReadTensor(data + "output_0.pb") // PyTorch's output
	if err != nil {
		log.Fatal(err)
	}
	y, err := model.Forward(ctx, x)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(y.Shape(), attnrun.AllClose(y, want, 1e-5, 1e-6))

	// A preset (or a YAML config, or an ONNX file attnrun wrote) runs on
	// attnrun's layers, which report their attention weights.
	causal, err := attnrun.Load("seed-masked-weights")
	if err != nil {
		log.Fatal(err)
	}
	journey := tensor.New(tensor.WithShape(6, 3), tensor.WithBacking([]float64{
		0.43, 0.15, 0.89, // Your
		0.55, 0.87, 0.66, // journey
		0.57, 0.85, 0.64, // starts
		0.22, 0.58, 0.33, // with
		0.77, 0.25, 0.10, // one
		0.05, 0.80, 0.55, // step
	}))
	weights, err := causal.AttentionWeights(ctx, journey) // float64 is converted
	if err != nil {
		log.Fatal(err)
	}
	w := weights[0].Weights // (batch, heads, queries, keys)
	fmt.Println(weights[0].Layer, w.Shape())
	if err := w.Reshape(6, 6); err != nil {
		log.Fatal(err)
	}
	fmt.Println(attnrun.Format(w))
	// Output:
	// (3, 4, 8) true
	// attn (1, 1, 6, 6)
	// tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
	//         [0.3986, 0.6014, 0.0000, 0.0000, 0.0000, 0.0000],
	//         [0.2526, 0.3791, 0.3683, 0.0000, 0.0000, 0.0000],
	//         [0.2265, 0.2839, 0.2794, 0.2103, 0.0000, 0.0000],
	//         [0.1952, 0.2363, 0.2331, 0.1820, 0.1534, 0.0000],
	//         [0.1557, 0.2092, 0.2048, 0.1419, 0.1089, 0.1794]])
}

// Format prints as PyTorch does: the same notation, widths, wrapping and
// summary, and the dtype where PyTorch names it.
func ExampleFormat() {
	x := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2.5, -3, 4, 5, 6}))
	fmt.Println(attnrun.Format(x))

	ramp := make([]float32, 2000) // torch.arange(2000.).reshape(2, 1000) / 8
	for i := range ramp {
		ramp[i] = float32(i) / 8
	}
	fmt.Println(attnrun.Format(tensor.New(tensor.WithShape(2, 1000), tensor.WithBacking(ramp))))
	// Output:
	// tensor([[ 1.0000,  2.5000, -3.0000],
	//         [ 4.0000,  5.0000,  6.0000]], dtype=torch.float64)
	// tensor([[0.0000e+00, 1.2500e-01, 2.5000e-01,  ..., 1.2462e+02, 1.2475e+02,
	//          1.2488e+02],
	//         [1.2500e+02, 1.2512e+02, 1.2525e+02,  ..., 2.4962e+02, 2.4975e+02,
	//          2.4988e+02]])
}

// FormatArray prints what ReadArray reads: float16 values, empty tensors
// (the output is PyTorch 1.13's for the same tensors).
func ExampleFormatArray() {
	half := &array.Array{DType: array.Float16, Shape: []int{2}, Data: []float32{1.5, 0.0999755859375}}
	fmt.Println(attnrun.FormatArray(half))
	fmt.Println(attnrun.FormatArray(array.FromSlice([]int{0, 3}, []int64{})))
	// Output:
	// tensor([1.5000, 0.1000], dtype=torch.float16)
	// tensor([], size=(0, 3), dtype=torch.int64)
}

// Compare reports how far a result is from its reference; NaN matches NaN,
// as in PyTorch's assert_close(equal_nan=True).
func ExampleCompare() {
	nan := float32(math.NaN())
	got := tensor.New(tensor.WithShape(4), tensor.WithBacking([]float32{1, nan, 3.00001, 4}))
	want := tensor.New(tensor.WithShape(4), tensor.WithBacking([]float32{1, nan, 3, 4.1}))
	c, err := attnrun.Compare(got, want, 1e-5, 1e-6)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c)
	fmt.Println(attnrun.AllClose(got.Clone().(*tensor.Dense), got, 1e-5, 1e-6))
	// Output:
	// 1 of 4 outside the tolerance (worst at element 3): max abs error 0.1, max rel error 0.0244 (rtol 1e-05, atol 1e-06)
	// true
}

// A model config needs weights before it runs: a seed (PyTorch's
// initialization, as torch.manual_seed would draw it) or a state dict.
// StateDict returns what tensorio.WriteNPZ writes and WithWeights reads.
func ExampleModel_StateDict() {
	ctx := context.Background()
	x := tensor.New(tensor.WithShape(1, 2, 4), tensor.WithBacking([]float32{1, 0, 0, 1, 0, 1, 1, 0}))

	bare, err := attnrun.Load("testdata/export/causal.yaml")
	if err != nil {
		log.Fatal(err)
	}
	_, err = bare.Forward(ctx, x)
	fmt.Println(err)

	seeded, err := attnrun.Load("testdata/export/causal.yaml", attnrun.WithSeed(123))
	if err != nil {
		log.Fatal(err)
	}
	names, tensors, err := seeded.StateDict()
	if err != nil {
		log.Fatal(err)
	}
	for i, name := range names[:2] {
		fmt.Println(name, tensors[i].Shape())
	}
	dir, err := os.MkdirTemp("", "attnrun")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	weights := filepath.Join(dir, "weights.npz")
	if err := tensorio.WriteNPZ(weights, names, tensors); err != nil {
		log.Fatal(err)
	}
	loaded, err := attnrun.Load("testdata/export/causal.yaml", attnrun.WithWeights(weights))
	if err != nil {
		log.Fatal(err)
	}
	a, err := seeded.Forward(ctx, x)
	if err != nil {
		log.Fatal(err)
	}
	b, err := loaded.Forward(ctx, x)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(attnrun.AllClose(a, b, 0, 0))
	// Output:
	// model "export-causal" (testdata/export/causal.yaml) has no weights: load it with attnrun.WithWeights(path) or attnrun.WithSeed(seed)
	// attn.W_query.weight (4, 4)
	// attn.W_query.bias (4)
	// true
}

// WithMaxMemory bounds what a file may make attnrun allocate; the error
// says what needed how much.
func ExampleWithMaxMemory() {
	_, err := attnrun.Load("testdata/onnx/multihead_opset17_dynamic/model.onnx", attnrun.WithMaxMemory(1<<10))
	fmt.Println(errors.Is(err, attnrun.ErrMemoryBudget))
	// Output: true
}

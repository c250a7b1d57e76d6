package attnrun

import (
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/tensorfmt"
)

// Format writes a tensor as PyTorch's print(tensor) does with its default
// print options, so that an output can be held against a notebook's
// character for character: four decimals (or "2." when every value is
// integral, or scientific notation when magnitudes span more than 1000×),
// one width for every element, rows wrapped at 80 columns, and tensors of
// more than 1000 elements summarized with "...". Float32, float64,
// integer and bool tensors are supported; a dtype PyTorch prints in a
// suffix gets it (", dtype=torch.float64").
func Format(t *tensor.Dense) string { return tensorfmt.Dense(t) }

// FormatArray writes an array.Array as Format writes a tensor, for every
// element type and for tensors of zero elements, which a *tensor.Dense
// cannot hold ("tensor([], size=(0, 3), dtype=torch.float16)").
func FormatArray(a *array.Array) string { return tensorfmt.Array(a) }

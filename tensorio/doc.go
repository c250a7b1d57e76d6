// Package tensorio reads and writes tensors in the file formats PyTorch and
// NumPy users exchange: NumPy's .npy and .npz and Hugging Face's
// .safetensors. Tensors are gorgonia *tensor.Dense values; the element types
// are float32, float64, int64, int32, uint8, int8 and bool (safetensors'
// F16 and BF16 are read as float32).
//
// Files are treated as coming from strangers. Only regular files are opened
// (a FIFO or device is refused without blocking), headers are parsed
// strictly, every size a file declares is checked against Limits and
// reserved from a memory budget (Limits.MaxMemory or Limits.Budget) before
// memory is allocated, truncated data is an error, and no input makes a
// reader panic (see the fuzz tests). Errors say what was found and what was expected,
// for example
//
//	x.npy: dtype "<c8" not supported (want float32, float64, int64, int32, uint8, int8 or bool)
//
// Writers produce deterministic bytes (a .npy is byte-identical to np.save's,
// a .npz has fixed member order and timestamps, a .safetensors follows the
// reference implementation's layout) and replace files atomically, so an
// interrupted write never leaves a partial file.
package tensorio

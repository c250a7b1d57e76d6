// Package tensorio reads and writes tensors in the file formats PyTorch and
// NumPy users exchange: NumPy's .npy and .npz and Hugging Face's
// .safetensors. Tensors are gorgonia *tensor.Dense values; the element types
// are float32, float64, int64, int32, uint8, int8 and bool (safetensors'
// F16 and BF16 are read as float32), and for .npy and .npz also float16
// (read as float32), int16, uint16, uint32 and uint64.
//
// The *Array functions (ReadNPYArray, WriteNPYArray, ReadNPZArrays,
// WriteNPZArrays) read and write attnrun's own *array.Array, which also
// holds what a *tensor.Dense cannot: arrays of zero elements, and float16
// as float16.
//
// Files are treated as coming from strangers. Only regular files are opened
// (a FIFO or device is refused without blocking), headers are parsed
// strictly, every size a file declares is checked against Limits and
// reserved from a memory budget (Limits.MaxMemory or Limits.Budget) before
// memory is allocated, truncated data is an error, and no input makes a
// reader panic (see the fuzz tests). Errors say what was found and what was expected,
// for example
//
//	x.npy: dtype "<c8" not supported (want float32, float64, float16, int64, int32, int16, int8, uint64, uint32, uint16, uint8 or bool)
//
// Writers produce deterministic bytes (a .npy is byte-identical to np.save's,
// a .npz has fixed member order and timestamps, a .safetensors follows the
// reference implementation's layout) and replace files atomically, so an
// interrupted write never leaves a partial file.
package tensorio

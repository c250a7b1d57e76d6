package export

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// layerDims returns the declared dimensions of a layer's inputs.
func layerDims(spec *models.LayerSpec) map[int][]string {
	if m, ok := spec.Layer.(registry.InputDims); ok {
		return m.ONNXInputDims(len(spec.Inputs))
	}
	return nil
}

// tokenDims is the layout of a token stream: its axes in order.
var tokenDims = []string{"batch", "seq", "d"}

// isTokenLayout reports whether declared dimensions are a token stream's
// (a permutation of batch, seq and d) rather than a mask's.
func isTokenLayout(dims []string) bool {
	return len(dims) == 3 && slices.Contains(dims, "batch") && slices.Contains(dims, "seq") && slices.Contains(dims, "d")
}

// ownLayouts returns the positions of the inputs a layer declares in a
// layout of its own (a mask, an image: not a token stream) with their
// dimension names.
func ownLayouts(spec *models.LayerSpec) map[int][]string {
	own := map[int][]string{}
	for i, dims := range layerDims(spec) {
		if !isTokenLayout(dims) {
			own[i] = dims
		}
	}
	return own
}

// inputLayouts finds how each model input is read: the dimension names of
// the inputs some layer reads as a mask or as a token stream in another
// order (inputs read as (batch, seq, d) are not listed). An input read in
// two ways (a mask and a token stream, masks of two ranks, two orders) is
// an error.
func inputLayouts(cfg *models.Config) (map[string][]string, error) {
	layouts := map[string][]string{}
	readers := map[string]string{} // input -> the first layer reading it
	for i := range cfg.Layers {
		spec := &cfg.Layers[i]
		declared := layerDims(spec)
		for k, in := range spec.Inputs {
			idx := slices.Index(cfg.Inputs, in)
			if idx < 0 || cfg.InputDtype(idx) == tensor.Int64 && len(declared[k]) != 1 { // ids are (batch, seq) whoever reads them; lengths (batch)
				continue
			}
			dims, ok := declared[k]
			if !ok {
				dims = tokenDims
			}
			first, seen := readers[in]
			if !seen {
				readers[in] = spec.Name
				layouts[in] = dims
				continue
			}
			if !slices.Equal(layouts[in], dims) {
				return nil, fmt.Errorf("input %q is %s for layer %q but %s for layer %q",
					in, describeDims(layouts[in]), first, describeDims(dims), spec.Name)
			}
		}
	}
	for in, dims := range layouts {
		if slices.Equal(dims, tokenDims) {
			delete(layouts, in)
		}
	}
	return layouts, nil
}

// describeDims names a layout for errors: "a token stream (batch, seq, d)",
// "a mask (queries, keys)" or, with fixed axes, "an image (batch, 3, 32, 32)".
func describeDims(dims []string) string {
	kind := "a mask"
	switch {
	case isTokenLayout(dims):
		kind = "a token stream"
	case slices.ContainsFunc(dims, func(d string) bool { _, fixed := fixedDim(d); return fixed }):
		kind = "an image"
	}
	return kind + " (" + strings.Join(dims, ", ") + ")"
}

// isOwnLayout reports whether declared dimensions are a layer's own layout
// (a mask's, an image's) rather than a token stream's.
func isOwnLayout(dims []string) bool { return dims != nil && !isTokenLayout(dims) }

// layoutProbe is what a width probe feeds an input of a layer's own
// layout: zeros of the declared rank, every dimension 1 (a mask of 1s
// broadcasts to any scores) but a fixed one (see fixedDim: an image's
// channels and size), which has its size.
func layoutProbe(dims []string) *tensor.Dense {
	shape, size := make([]int, len(dims)), 1
	for i, d := range dims {
		shape[i] = 1
		if n, ok := fixedDim(d); ok {
			shape[i] = n
		}
		size *= shape[i]
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float32, size)))
}

// fixedDim reads a dimension named by a positive number, a size the layer
// fixes (an image's channels, height and width).
func fixedDim(name string) (int, bool) {
	n, err := strconv.Atoi(name)
	return n, err == nil && n > 0
}

// layoutInfo declares an input of a layer's own layout (a mask, an
// image): float32 (models pass float32 tensors only; a bool mask is given
// as 0 and 1), every dimension symbolic and named after the input, but a
// fixed one, declared with its size.
func layoutInfo(name string, dims []string) *onnxpb.ValueInfoProto {
	shape := make([]onnxio.Dim, len(dims))
	for i, d := range dims {
		shape[i] = onnxio.SymbolicDim(name + "_" + d)
		if n, ok := fixedDim(d); ok {
			shape[i] = onnxio.FixedDim(int64(n))
		}
	}
	return onnxio.TensorValueInfo(name, onnxio.Float, shape)
}

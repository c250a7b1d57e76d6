package layers

import (
	"strconv"

	"github.com/attnrun/attnrun/registry"
)

var _ registry.Exporter = (*PatchEmbedding)(nil)

// ExportONNX writes the embeddings as PyTorch exports ViT's: Conv with
// stride = kernel, Reshape to (B, d_out, patches) and Transpose, the CLS
// token expanded to the batch and concatenated in front, and an Add of the
// positions.
func (e *PatchEmbedding) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if e.p == nil {
		return "", errNotValidated
	}
	images, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	k := int64(e.PatchSize)
	conv := g.Node("Conv", operands(images, g.Param("patch_embeddings.projection.weight"), g.Param("patch_embeddings.projection.bias")),
		registry.IntsAttr("kernel_shape", k, k), registry.IntsAttr("strides", k, k))
	flat := g.Node("Reshape", operands(conv, g.ConstInt64([]int64{0, int64(e.DOut), -1})))
	tokens := g.Node("Transpose", operands(flat), registry.IntsAttr("perm", 0, 2, 1))
	if e.CLSToken {
		batch := g.Node("Slice", operands(g.Node("Shape", operands(images)), g.ConstInt64([]int64{0}), g.ConstInt64([]int64{1})))
		shape := g.Node("Concat", operands(batch, g.ConstInt64([]int64{1, int64(e.DOut)})), registry.IntAttr("axis", 0))
		cls := g.Node("Expand", operands(g.Param("cls_token"), shape))
		tokens = g.Node("Concat", operands(cls, tokens), registry.IntAttr("axis", 1))
	}
	if e.Positions {
		tokens = g.Node("Add", operands(tokens, g.Param("position_embeddings")))
	}
	return tokens, nil
}

var _ registry.InputDims = (*PatchEmbedding)(nil)

// ONNXInputDims declares the images (batch, channels, image_size,
// image_size), their sizes but the batch fixed: no token stream.
func (e *PatchEmbedding) ONNXInputDims(int) map[int][]string {
	c, s := strconv.Itoa(e.Channels), strconv.Itoa(e.ImageSize)
	return map[int][]string{0: {"batch", c, s, s}}
}

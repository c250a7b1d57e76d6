package layers

import (
	"fmt"
	"slices"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// nn.patch_embedding in ONNX graphs: Conv of the images by a constant
// kernel with stride = kernel (no padding, dilation or groups), its output
// flattened to (B, d_out, patches) and transposed to tokens, as PyTorch
// exports ViT's patch embeddings; then, optionally, a Concat in front of a
// CLS token that is the same for every image (a constant expanded to the
// batch) and an Add of constant positions.

func init() {
	match.RegisterPattern(match.Pattern{Name: "nn.patch_embedding", Op: "Conv", Match: liftPatchEmbedding})
}

// liftPatchEmbedding lifts the embeddings whose Conv is n.
func liftPatchEmbedding(g match.Graph, n *match.Node) (*match.Layer, error) {
	ins := n.Inputs()
	if len(ins) < 2 || !g.IsData(ins[0]) || g.IsData(ins[1]) {
		return nil, nil
	}
	anchor := []*match.Node{n}
	kernel, err := g.Constant(ins[1])
	if err != nil || kernel.Dims() != 4 || kernel.Shape()[2] != kernel.Shape()[3] {
		return nil, match.Refuse(anchor, "convolves by a kernel that is no constant square (d_out, channels, k, k)")
	}
	dOut, channels, k := kernel.Shape()[0], kernel.Shape()[1], kernel.Shape()[2]
	if !patchConv(n, k) {
		return nil, match.Refuse(anchor, "is no Conv with stride = kernel %d and no padding, dilation or groups", k)
	}
	size, ok := fixedImageSize(g, ins[0], channels, k)
	if !ok {
		return nil, match.Refuse(anchor, "convolves no images (B, %d, S, S) of one size S that %d divides", channels, k)
	}
	patches := (size / k) * (size / k)
	tokens, ok := flattenedPatches(g, n.Output(), dOut, patches)
	if !ok {
		return nil, match.Refuse(anchor, "its output is not flattened to (B, %d, %d) and transposed to tokens", dOut, patches)
	}
	w, err := match.Float32(kernel)
	if err != nil {
		return nil, nil
	}
	// Without a bias input the bias is zeros (the dynamo exporter drops a zero one).
	bias := match.Param{Name: "patch_embeddings.projection.bias", Value: tensor.New(tensor.WithShape(dOut), tensor.WithBacking(make([]float32, dOut)))}
	if len(ins) > 2 && ins[2] != "" {
		if bias.Value, err = constantOf(g, ins[2], dOut); err != nil {
			return nil, match.Refuse(anchor, "its bias is no constant of %d numbers", dOut)
		}
		bias.From = ins[2]
	}
	params := []match.Param{{Name: "patch_embeddings.projection.weight", Value: w, From: ins[1]}, bias}
	config := []match.Field{{Key: "channels", Value: channels}, {Key: "image_size", Value: size},
		{Key: "patch_size", Value: k}, {Key: "d_out", Value: dOut}}
	if cat, cls, ok := clsInFront(g, tokens, dOut); ok {
		tokens, patches = cat.Output(), patches+1
		config = append(config, match.Field{Key: "cls_token", Value: true})
		params = append(params, cls)
	}
	if add, positions, ok := addedPositions(g, tokens, patches, dOut); ok {
		tokens = add.Output()
		config = append(config, match.Field{Key: "positions", Value: true})
		params = append(params, positions)
	}
	if !g.Registered("nn.patch_embedding") {
		return nil, match.Refuse(anchor, "patch embeddings: no layer type nn.patch_embedding is registered in this build")
	}
	return &match.Layer{Type: "nn.patch_embedding", Name: "embeddings", Inputs: []string{ins[0]}, Output: tokens,
		Config: config, Params: params}, nil
}

// patchConv reports whether Conv n cuts k × k patches: stride k, no
// padding, no dilation, one group.
func patchConv(n *match.Node, k int) bool {
	all := func(name string, want int64) bool {
		return !slices.ContainsFunc(n.Ints(name), func(v int64) bool { return v != want })
	}
	pad := n.StringAttr("auto_pad", "NOTSET")
	return n.Int("group", 1) == 1 && slices.Equal(n.Ints("strides"), []int64{int64(k), int64(k)}) &&
		all("kernel_shape", int64(k)) && all("pads", 0) && all("dilations", 1) && (pad == "NOTSET" || pad == "VALID")
}

// fixedImageSize returns S for images (B, channels, S, S) of the same S at
// every probe shape, a multiple of k.
func fixedImageSize(g match.Graph, images string, channels, k int) (int, bool) {
	size := 0
	for i := range g.Probes() {
		s, err := g.ShapeAt(i, images)
		if err != nil || len(s) != 4 || s[1] != channels || s[2] != s[3] || s[2]%k != 0 || size != 0 && s[2] != size {
			return 0, false
		}
		size = s[2]
	}
	return size, size > 0
}

// flattenedPatches follows the Conv's output through its Reshape (or
// Flatten) to (B, d_out, patches) and the Transpose to (B, patches, d_out),
// and returns the tokens.
func flattenedPatches(g match.Graph, conv string, dOut, patches int) (string, bool) {
	flat := onlyReader(g, conv)
	if flat == nil || flat.Op() != "Reshape" && !(flat.Op() == "Flatten" && flat.Int("axis", 1) == 2) {
		return "", false
	}
	for i := range g.Probes() {
		in, err1 := g.ShapeAt(i, conv)
		s, err2 := g.ShapeAt(i, flat.Output())
		if err1 != nil || err2 != nil || !slices.Equal(s, []int{in[0], dOut, patches}) {
			return "", false
		}
	}
	t := onlyReader(g, flat.Output())
	if t == nil || t.Op() != "Transpose" || !slices.Equal(t.Ints("perm"), []int64{0, 2, 1}) {
		return "", false
	}
	return t.Output(), true
}

// clsInFront reads a Concat on the token axis of a static (B, 1, d_out)
// value, the same row for every image, before the tokens: the CLS token.
func clsInFront(g match.Graph, tokens string, dOut int) (*match.Node, match.Param, bool) {
	cat := onlyReader(g, tokens)
	if cat == nil || cat.Op() != "Concat" || len(cat.Inputs()) != 2 || cat.Inputs()[1] != tokens ||
		cat.Int("axis", 0) != 1 && cat.Int("axis", 0) != -2 || g.IsData(cat.Inputs()[0]) {
		return nil, match.Param{}, false
	}
	var row []float32
	for i := range g.Probes() {
		v, err := g.ValueAt(i, cat.Inputs()[0])
		if err != nil || len(v.Shape()) != 3 || v.Shape()[1] != 1 || v.Shape()[2] != dOut {
			return nil, match.Param{}, false
		}
		f, err := match.Float32(v)
		if err != nil {
			return nil, match.Param{}, false
		}
		rows := floats(f)
		if row == nil {
			row = slices.Clone(rows[:dOut])
		}
		for b := 0; b < len(rows); b += dOut {
			if !slices.Equal(rows[b:b+dOut], row) {
				return nil, match.Param{}, false
			}
		}
	}
	cls := match.Param{Name: "cls_token", Value: tensor.New(tensor.WithShape(1, 1, dOut), tensor.WithBacking(row))}
	for _, src := range g.Sources(cat.Inputs()[0]) {
		if c, err := g.Constant(src); err == nil && c.Shape().TotalSize() == dOut {
			cls.From = src
			break
		}
	}
	return cat, cls, true
}

// addedPositions reads an Add of constant positions (1, T, d_out) or
// (T, d_out) to the tokens.
func addedPositions(g match.Graph, tokens string, count, dOut int) (*match.Node, match.Param, bool) {
	add := onlyReader(g, tokens)
	if add == nil || add.Op() != "Add" {
		return nil, match.Param{}, false
	}
	other := otherInput(add, tokens)
	c, err := g.Constant(other)
	if err != nil {
		return nil, match.Param{}, false
	}
	if s := []int(c.Shape()); !slices.Equal(s, []int{1, count, dOut}) && !slices.Equal(s, []int{count, dOut}) {
		return nil, match.Param{}, false
	}
	f, err := match.Float32(c)
	if err != nil {
		return nil, match.Param{}, false
	}
	positions := tensor.New(tensor.WithShape(1, count, dOut), tensor.WithBacking(floats(f)))
	return add, match.Param{Name: "position_embeddings", Value: positions, From: other}, true
}

// constantOf reads a constant of n float numbers as a float32 vector.
func constantOf(g match.Graph, v string, n int) (*tensor.Dense, error) {
	c, err := g.Constant(v)
	if err != nil {
		return nil, err
	}
	f, err := match.Float32(c)
	if err != nil {
		return nil, err
	}
	if got := f.Shape().TotalSize(); got != n {
		return nil, fmt.Errorf("holds %d numbers, not %d", got, n)
	}
	return tensor.New(tensor.WithShape(n), tensor.WithBacking(floats(f)[:n])), nil
}

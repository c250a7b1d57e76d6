package layers

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/registry"
)

// Attention masks arrive as extra float32 inputs (models pass float32
// tensors only). What their values mean is the layer's configuration, since
// the conventions disagree: PyTorch's scaled_dot_product_attention reads a
// bool mask as "True = may attend", nn.MultiheadAttention as "True = masked
// out", and a float mask is added to the scores by both.

// negInf is the score of a hidden key.
var negInf = float32(math.Inf(-1))

// boolMaskKind maps a mask_polarity field to a kind: "keep" (True attends)
// or "mask" (True is masked out).
func boolMaskKind(field, polarity string) (attn.MaskKind, error) {
	switch polarity {
	case "keep":
		return attn.MaskKeep, nil
	case "mask":
		return attn.MaskDrop, nil
	case "":
		return 0, fmt.Errorf("%s is required with a bool mask: \"keep\" (True attends, as PyTorch SDPA) or \"mask\" (True is masked out, as nn.MultiheadAttention)", field)
	}
	return 0, fmt.Errorf("%s %q is not \"keep\" or \"mask\"", field, polarity)
}

// broadcastMask views a mask of rank 1 to 4 as (B, H, Tq, Tk), aligning its
// axes from the right as numpy and PyTorch broadcasting do: each of its
// dimensions must be 1 or equal the target's. name says which input it is
// in errors.
func broadcastMask(name string, x *tensor.Dense, kind attn.MaskKind, b, h, tq, tk int) (attn.Mask, error) {
	data, shape, err := maskData(name, x)
	if err != nil {
		return attn.Mask{}, err
	}
	target := []int{b, h, tq, tk}
	if len(shape) > len(target) {
		return attn.Mask{}, fmt.Errorf("%s has shape %s: want at most 4 dimensions, broadcastable to (B, H, Tq, Tk) = %s",
			name, fmtShape(shape), fmtShape(target))
	}
	strides := make([]int, len(target))
	stride := 1
	for i := 1; i <= len(shape); i++ {
		dim, want := shape[len(shape)-i], target[len(target)-i]
		switch dim {
		case want:
			if want > 1 {
				strides[len(target)-i] = stride
			}
		case 1:
		default:
			return attn.Mask{}, fmt.Errorf("%s has shape %s, which does not broadcast to (B, H, Tq, Tk) = %s",
				name, fmtShape(shape), fmtShape(target))
		}
		stride *= dim
	}
	return attn.Mask{Kind: kind, Values: data, SB: strides[0], SH: strides[1], SI: strides[2], SJ: strides[3], Cols: tk}, nil
}

// maskData returns the row-major values and shape of a float32 mask input.
func maskData(name string, x *tensor.Dense) ([]float32, []int, error) {
	if x == nil {
		return nil, nil, fmt.Errorf("%s is nil: want a float32 tensor", name)
	}
	if x.Dtype() != tensor.Float32 {
		return nil, nil, fmt.Errorf("%s dtype %v: want float32 (a bool mask as 0 and 1)", name, x.Dtype())
	}
	x, err := rowMajor(name, x)
	if err != nil {
		return nil, nil, err
	}
	shape := []int(x.Shape()) // read, never written: not cloned, a pass allocates nothing
	data := x.Float32s()
	if len(data) < volume(shape) {
		return nil, nil, fmt.Errorf("%s shape %s: backing array too short", name, fmtShape(shape))
	}
	return data[:volume(shape)], shape, nil
}

// keyMaskFrom maps a (B, T) attention_mask, int64 or float32, to the
// (B, 1, 1, T) key mask of mask.padding and mask.additive, each value
// through f, into an output lent by run (registry.Outputs).
func keyMaskFrom(run *registry.Run, inputs []*tensor.Dense, f func(m float32) float32) (*tensor.Dense, error) {
	if len(inputs) != 1 || inputs[0] == nil {
		return nil, fmt.Errorf("takes 1 input, the attention_mask, got %d", len(inputs))
	}
	s := inputs[0].Shape()
	if err := attentionMaskShape(s); err != nil {
		return nil, err
	}
	mask, err := rowMajor("attention_mask", inputs[0])
	if err != nil {
		return nil, err
	}
	dtype := mask.Dtype()
	if dtype != tensor.Int64 && dtype != tensor.Float32 {
		return nil, fmt.Errorf("attention_mask dtype %v: want int64 or float32", dtype)
	}
	out, data := run.Lender().Float32(s[0], 1, 1, s[1])
	if dtype == tensor.Int64 {
		for i, m := range mask.Int64s()[:len(data)] {
			data[i] = f(float32(m))
		}
		return out, nil
	}
	for i, m := range mask.Float32s()[:len(data)] {
		data[i] = f(m)
	}
	return out, nil
}

// keyMaskShape is the shape of the key mask made of a (B, T)
// attention_mask (mask.padding, mask.additive): (B, 1, 1, T), which
// broadcasts over heads and queries.
func keyMaskShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, the attention_mask, got %d", len(inputs))
	}
	s := inputs[0]
	if err := attentionMaskShape(s); err != nil {
		return nil, err
	}
	return tensor.Shape{s[0], 1, 1, s[1]}, nil
}

// attentionMaskShape checks an attention_mask's shape: (B, T), neither
// empty.
func attentionMaskShape(s tensor.Shape) error {
	if len(s) != 2 || s[0] <= 0 || s[1] <= 0 {
		return fmt.Errorf("attention_mask shape %s: want (B, T)", fmtShape(s))
	}
	return nil
}

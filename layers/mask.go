package layers

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"
)

// Attention masks arrive as extra float32 inputs (models pass float32
// tensors only). What their values mean is the layer's configuration, since
// the conventions disagree: PyTorch's scaled_dot_product_attention reads a
// bool mask as "True = may attend", nn.MultiheadAttention as "True = masked
// out", and a float mask is added to the scores by both.

// maskKind says how the values of a mask input are read.
type maskKind int

const (
	// maskKeep is a bool mask where nonzero means "may attend" (PyTorch
	// SDPA, the ONNX Attention op, Hugging Face's 4-D bool masks).
	maskKeep maskKind = iota + 1
	// maskDrop is a bool mask where nonzero means "masked out"
	// (nn.MultiheadAttention's attn_mask and key_padding_mask).
	maskDrop
	// maskAdd is a float mask added to the scores (0 attends, −Inf hides).
	maskAdd
)

var negInf = float32(math.Inf(-1))

// additive returns the value a mask entry adds to a score.
func (k maskKind) additive(v float32) float32 {
	switch k {
	case maskKeep:
		if v == 0 {
			return negInf
		}
		return 0
	case maskDrop:
		if v != 0 {
			return negInf
		}
		return 0
	}
	return v
}

// boolMaskKind maps a mask_polarity field to a kind: "keep" (True attends)
// or "mask" (True is masked out).
func boolMaskKind(field, polarity string) (maskKind, error) {
	switch polarity {
	case "keep":
		return maskKeep, nil
	case "mask":
		return maskDrop, nil
	case "":
		return 0, fmt.Errorf("%s is required with a bool mask: \"keep\" (True attends, as PyTorch SDPA) or \"mask\" (True is masked out, as nn.MultiheadAttention)", field)
	}
	return 0, fmt.Errorf("%s %q is not \"keep\" or \"mask\"", field, polarity)
}

// maskView reads a mask tensor as a (B, H, Tq, Tk) array of additive
// values without copying it: a stride of 0 repeats a broadcast axis.
// Columns at or past cols read as 0 (not masked); nn.MultiheadAttention's
// add_bias_kv and add_zero_attn append such keys.
type maskView struct {
	kind           maskKind
	data           []float32
	sb, sh, si, sj int
	cols           int
}

// at returns the additive mask value of sequence b, head h, query i, key j.
func (m *maskView) at(b, h, i, j int) float32 {
	if j >= m.cols {
		return 0
	}
	return m.kind.additive(m.data[b*m.sb+h*m.sh+i*m.si+j*m.sj])
}

// varies reports whether the mask differs between sequences and between
// heads, so that a bias built from it can be reused across the others.
func (m *maskView) varies() (bySeq, byHead bool) { return m.sb != 0, m.sh != 0 }

// broadcastMask views a mask of rank 1 to 4 as (B, H, Tq, Tk), aligning its
// axes from the right as numpy and PyTorch broadcasting do: each of its
// dimensions must be 1 or equal the target's. name says which input it is
// in errors.
func broadcastMask(name string, x *tensor.Dense, kind maskKind, b, h, tq, tk int) (maskView, error) {
	data, shape, err := maskData(name, x)
	if err != nil {
		return maskView{}, err
	}
	target := []int{b, h, tq, tk}
	if len(shape) > len(target) {
		return maskView{}, fmt.Errorf("%s has shape %s: want at most 4 dimensions, broadcastable to (B, H, Tq, Tk) = %s",
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
			return maskView{}, fmt.Errorf("%s has shape %s, which does not broadcast to (B, H, Tq, Tk) = %s",
				name, fmtShape(shape), fmtShape(target))
		}
		stride *= dim
	}
	return maskView{kind: kind, data: data, sb: strides[0], sh: strides[1], si: strides[2], sj: strides[3], cols: tk}, nil
}

// maskData returns the row-major values and shape of a float32 mask input.
func maskData(name string, x *tensor.Dense) ([]float32, []int, error) {
	if x == nil {
		return nil, nil, fmt.Errorf("%s is nil: want a float32 tensor", name)
	}
	if x.Dtype() != tensor.Float32 {
		return nil, nil, fmt.Errorf("%s dtype %v: want float32 (a bool mask as 0 and 1)", name, x.Dtype())
	}
	if x.RequiresIterator() {
		m, ok := x.Materialize().(*tensor.Dense)
		if !ok {
			return nil, nil, fmt.Errorf("%s view could not be copied to a dense tensor", name)
		}
		x = m
	}
	shape := []int(x.Shape().Clone())
	data, ok := x.Data().([]float32)
	if !ok || len(data) < volume(shape) {
		return nil, nil, fmt.Errorf("%s shape %s: backing array too short", name, fmtShape(shape))
	}
	return data[:volume(shape)], shape, nil
}

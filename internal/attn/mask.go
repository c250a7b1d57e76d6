package attn

import "math"

// MaskKind says how the values of a mask are read, since the conventions
// disagree: PyTorch's scaled_dot_product_attention and ONNX's Attention
// read a bool mask as "true = may attend", nn.MultiheadAttention as "true
// = masked out", and a float mask is added to the scores by all of them.
type MaskKind int

// The kinds of masks.
const (
	// MaskKeep is a bool mask where true (nonzero) means "may attend".
	MaskKeep MaskKind = iota + 1
	// MaskDrop is a bool mask where true (nonzero) means "masked out".
	MaskDrop
	// MaskAdd is a float mask added to the scores (0 attends, −Inf hides).
	MaskAdd
)

var negInf = float32(math.Inf(-1))

// Additive returns the value a mask entry v adds to a score.
func (k MaskKind) Additive(v float32) float32 {
	switch k {
	case MaskKeep:
		if v == 0 {
			return negInf
		}
		return 0
	case MaskDrop:
		if v != 0 {
			return negInf
		}
		return 0
	}
	return v
}

// Mask views a mask as a (B, H, Tq, Tk) array of additive values without
// copying it: entry (b, h, i, j) is element b·SB + h·SH + i·SI + j·SJ of
// Values (read as Kind says) or of Bools (a bool mask, true attends), and
// a stride of 0 repeats a broadcast axis. Columns at or past Cols read as
// Past: 0 for keys a layer appends after its mask (nn.MultiheadAttention's
// add_bias_kv and add_zero_attn), −Inf for ONNX's masks shorter than the
// keys.
type Mask struct {
	Kind           MaskKind
	Values         []float32
	Bools          []bool
	SB, SH, SI, SJ int
	Cols           int
	Past           float32
}

// At returns the additive value of sequence b, head h, query i, key j.
func (m *Mask) At(b, h, i, j int) float32 {
	if j >= m.Cols {
		return m.Past
	}
	k := b*m.SB + h*m.SH + i*m.SI + j*m.SJ
	if m.Bools != nil {
		if m.Bools[k] {
			return 0
		}
		return negInf
	}
	return m.Kind.Additive(m.Values[k])
}

// Row writes the additive values of sequence b, head h, query i into row,
// one per key.
func (m *Mask) Row(row []float32, b, h, i int) { m.Span(row, b, h, i, 0) }

// Span writes the additive values of sequence b, head h, query i for the
// keys (columns) j0, j0+1, ... into row, one per key.
func (m *Mask) Span(row []float32, b, h, i, j0 int) {
	cols := min(max(m.Cols-j0, 0), len(row))
	base := b*m.SB + h*m.SH + i*m.SI + j0*m.SJ
	if m.Bools == nil && m.Kind == MaskAdd && m.SJ == 1 {
		copy(row[:cols], m.Values[base:base+cols])
	} else {
		for j := range cols {
			row[j] = m.At(b, h, i, j0+j)
		}
	}
	for j := cols; j < len(row); j++ {
		row[j] = m.Past
	}
}

// Hides reports whether the mask is a bool mask, which hides keys rather
// than adding values to their scores.
func (m *Mask) Hides() bool { return m.Bools != nil || m.Kind != MaskAdd }

// Varies reports whether the mask differs between sequences and between
// heads, so that a bias built from it can be reused across the others.
func (m *Mask) Varies() (bySeq, byHead bool) { return m.SB != 0, m.SH != 0 }

package exec

import "fmt"

// rotarySpec is the ONNX RotaryEmbedding operator (opset 23): rotary
// position embeddings (RoPE) from precomputed cos and sin caches.
//
// The input is (batch, heads, seq, head_size), or (batch, seq, hidden) with
// the num_heads attribute. The first rotary_embedding_dim features of each
// head (all of them by default) are rotated pairwise: the two halves of
// those features as GPT-NeoX and Llama do, or adjacent pairs (2i, 2i+1)
// with interleaved = 1 as GPT-J does:
//
//	out₁ = cos·x₁ − sin·x₂,  out₂ = sin·x₁ + cos·x₂
//
// The caches hold cos and sin for rotary_embedding_dim/2 frequencies:
// (max_position + 1, dim/2), indexed by position_ids (batch, seq), or,
// without position_ids, (batch, seq, dim/2) directly. A cache or
// position_ids with batch 1 serves every batch entry, as numpy broadcasting
// does in ONNX's reference.
var rotarySpec = &opSpec{since: 23, minIn: 3, maxIn: 4, minOut: 1, maxOut: 1, run: rotaryOp,
	attrs: map[string]attrKind{"interleaved": attrInt, "rotary_embedding_dim": attrInt, "num_heads": attrInt}}

// rotaryPlan is one RotaryEmbedding call, its sizes checked.
type rotaryPlan struct {
	batch, heads, seq, size int
	rank3                   bool
	dim                     int  // rotated features per head
	interleaved             bool // pairs (2i, 2i+1) rather than (i, i + dim/2)
	cos, sin, pos           *value
}

// rotaryOp is the kernel of RotaryEmbedding.
func rotaryOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	p, err := planRotary(n, in)
	if err != nil {
		return nil, err
	}
	x := in[0]
	out, err := rc.alloc(n, x.dtype, x.shape)
	if err != nil || x.size() == 0 {
		return oneOrErr(out, err)
	}
	switch x.dtype {
	case Float32:
		rotate(p, x.data.([]float32), p.cos.data.([]float32), p.sin.data.([]float32), out.data.([]float32))
	case Float64:
		rotate(p, x.data.([]float64), p.cos.data.([]float64), p.sin.data.([]float64), out.data.([]float64))
	}
	return one(out)
}

// planRotary reads the attributes and checks the input, caches and
// position ids against each other.
func planRotary(n *node, in []*value) (*rotaryPlan, error) {
	x, cos, sin, pos := in[0], in[1], in[2], input(in, 3)
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	if cos.dtype != x.dtype || sin.dtype != x.dtype {
		return nil, fmt.Errorf("cos_cache is %s and sin_cache %s; both must be %s like the input", cos.dtype, sin.dtype, x.dtype)
	}
	p := &rotaryPlan{cos: cos, sin: sin, pos: pos}
	switch c := n.attrInt("interleaved", 0); c {
	case 0, 1:
		p.interleaved = c == 1
	default:
		return nil, fmt.Errorf("interleaved is %d, want 0 or 1", c)
	}
	switch x.rank() {
	case 4:
		p.batch, p.heads, p.seq, p.size = x.shape[0], x.shape[1], x.shape[2], x.shape[3]
		if h := int(n.attrInt("num_heads", 0)); h != 0 && h != p.heads {
			return nil, fmt.Errorf("num_heads is %d, the 4-D input %s has %d heads", h, shapeString(x.shape), p.heads)
		}
	case 3:
		p.rank3 = true
		p.batch, p.seq, p.heads = x.shape[0], x.shape[1], int(n.attrInt("num_heads", 0))
		if p.heads <= 0 || x.shape[2]%p.heads != 0 {
			return nil, fmt.Errorf("3-D input %s needs num_heads, a positive divisor of its hidden size (num_heads is %d)", shapeString(x.shape), p.heads)
		}
		p.size = x.shape[2] / p.heads
	default:
		return nil, fmt.Errorf("input %s must be 4-D (batch, heads, seq, head_size) or 3-D (batch, seq, hidden)", shapeString(x.shape))
	}
	p.dim = int(n.attrInt("rotary_embedding_dim", 0))
	if p.dim == 0 {
		p.dim = p.size
	}
	if p.dim < 0 || p.dim > p.size || p.dim%2 != 0 {
		return nil, fmt.Errorf("rotary_embedding_dim %d must be even and at most the head size %d", p.dim, p.size)
	}
	if err := p.checkCaches(); err != nil {
		return nil, err
	}
	return p, nil
}

// checkCaches checks the caches' shapes and, with position_ids, that
// every position has a row in them.
func (p *rotaryPlan) checkCaches() error {
	half := p.dim / 2
	if !equalShapes(p.cos.shape, p.sin.shape) {
		return fmt.Errorf("cos_cache %s and sin_cache %s differ in shape", shapeString(p.cos.shape), shapeString(p.sin.shape))
	}
	cs := p.cos.shape
	if p.pos == nil {
		if len(cs) != 3 || (cs[0] != p.batch && cs[0] != 1) || cs[1] != p.seq || cs[2] != half {
			return fmt.Errorf("without position_ids the caches must be (batch, seq, rotary_dim/2) = (%d, %d, %d), are %s",
				p.batch, p.seq, half, shapeString(cs))
		}
		return nil
	}
	if len(cs) != 2 || cs[1] != half {
		return fmt.Errorf("with position_ids the caches must be (max_position + 1, rotary_dim/2 = %d), are %s", half, shapeString(cs))
	}
	ps := p.pos.shape
	if p.pos.dtype != Int64 || len(ps) != 2 || (ps[0] != p.batch && ps[0] != 1) || ps[1] != p.seq {
		return fmt.Errorf("position_ids is %s, want int64 (%d, %d)", p.pos.describe(), p.batch, p.seq)
	}
	for i, id := range p.pos.data.([]int64) {
		if id < 0 || id >= int64(cs[0]) {
			return fmt.Errorf("position_ids[%d] is %d, outside the caches' %d positions", i, id, cs[0])
		}
	}
	return nil
}

// cacheRow returns the offset of the cos and sin row for position s of
// batch entry b.
func (p *rotaryPlan) cacheRow(b, s int) int {
	half := p.dim / 2
	if p.pos == nil {
		return ((b%p.cos.shape[0])*p.seq + s) * half
	}
	ids := p.pos.data.([]int64)
	return int(ids[(b%p.pos.shape[0])*p.seq+s]) * half
}

// rotate writes a rotated copy of x into out, computing each output
// element in float64 and rounding it once.
func rotate[T float](p *rotaryPlan, x, cos, sin, out []T) {
	copy(out, x)
	half := p.dim / 2
	for b := range p.batch {
		for s := range p.seq {
			row := p.cacheRow(b, s)
			c, sn := cos[row:row+half], sin[row:row+half]
			for h := range p.heads {
				off := ((b*p.heads+h)*p.seq + s) * p.size
				if p.rank3 {
					off = ((b*p.seq+s)*p.heads + h) * p.size
				}
				src, dst := x[off:off+p.dim], out[off:off+p.dim]
				for i := range half {
					i1, i2 := i, i+half
					if p.interleaved {
						i1, i2 = 2*i, 2*i+1
					}
					x1, x2 := float64(src[i1]), float64(src[i2])
					ci, si := float64(c[i]), float64(sn[i])
					dst[i1] = T(ci*x1 - si*x2)
					dst[i2] = T(si*x1 + ci*x2)
				}
			}
		}
	}
}

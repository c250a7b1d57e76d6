package exec

import "fmt"

// CausalConvWithState (opset 27) is the short causal depthwise convolution
// of Gated DeltaNet and Mamba with its decoding state. For input X
// (batch, channels, L), weight W (channels, 1, k), optional bias and
// optional past_state P (batch, channels, k−1), zeros when absent, it
// convolves each channel of S = P ++ X (along the sequence) with its own
// kernel:
//
//	output[b, c, t] = Σ_i W[c, 0, i] · S[b, c, t + i] + bias[c]
//
// optionally followed by SiLU (activation "silu" or its alias "swish",
// applied to the convolution rounded to the element type, as ONNX's
// reference does), and returns as present_state the last k−1 positions of
// S: past positions too when L < k−1. Feeding a sequence in pieces, each
// piece's present_state the next one's past_state, gives the outputs of
// the whole.
func init() {
	ops["CausalConvWithState"] = &opSpec{since: 27, minIn: 2, maxIn: 4, minOut: 1, maxOut: 2, run: causalConvOp,
		attrs: map[string]attrKind{"activation": attrString},
		check: func(n *node) error { _, err := causalConvActivation(n); return err }}
}

// The inputs of CausalConvWithState, by position.
const ccInput, ccWeight, ccBias, ccPast = 0, 1, 2, 3

// causalConvActivation reads the activation attribute: whether SiLU follows
// the convolution.
func causalConvActivation(n *node) (silu bool, err error) {
	switch a := n.attrString("activation", "none"); a {
	case "none":
		return false, nil
	case "silu", "swish":
		return true, nil
	default:
		return false, fmt.Errorf("activation is %q, want \"none\", \"silu\" or \"swish\"", a)
	}
}

// causalConvOp is the kernel of CausalConvWithState.
func causalConvOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	silu, err := causalConvActivation(n)
	if err != nil {
		return nil, err
	}
	x, w, bias, past := in[ccInput], in[ccWeight], input(in, ccBias), input(in, ccPast)
	if x.dtype != Float32 && x.dtype != Float64 {
		return nil, fmt.Errorf("input is %s; want float32 or float64", x.describe())
	}
	if x.rank() != 3 {
		return nil, fmt.Errorf("input is %s; want (batch, channels, length)", x.describe())
	}
	batch, channels, length := x.shape[0], x.shape[1], x.shape[2]
	if w.dtype != x.dtype || w.rank() != 3 || w.shape[0] != channels || w.shape[1] != 1 || w.shape[2] < 1 {
		return nil, fmt.Errorf("weight is %s; want %s (%d, 1, k) with k ≥ 1 for input %s", w.describe(), x.dtype, channels, x.describe())
	}
	k := w.shape[2]
	if bias != nil && (bias.dtype != x.dtype || !equalShapes(bias.shape, []int{channels})) {
		return nil, fmt.Errorf("bias is %s; want %s (%d,)", bias.describe(), x.dtype, channels)
	}
	stateShape := []int{batch, channels, k - 1}
	if past != nil && (past.dtype != x.dtype || !equalShapes(past.shape, stateShape)) {
		return nil, fmt.Errorf("past_state is %s; want %s %s, (batch, channels, k − 1)", past.describe(), x.dtype, shapeString(stateShape))
	}
	y, err := rc.alloc(n, x.dtype, x.shape)
	if err != nil {
		return nil, err
	}
	present, err := rc.alloc(n, x.dtype, stateShape)
	if err != nil {
		return nil, err
	}
	seq, err := scratch[float64](rc, n, k-1+length, "causal convolution row")
	if err != nil {
		return nil, err
	}
	cc := causalConv{batch: batch, channels: channels, length: length, k: k, silu: silu, seq: seq}
	if x.dtype == Float32 {
		err = runCausalConv[float32](rc, &cc, x, w, bias, past, y, present)
	} else {
		err = runCausalConv[float64](rc, &cc, x, w, bias, past, y, present)
	}
	if err != nil {
		return nil, err
	}
	return []*value{y, present}, nil
}

// causalConv is the size and activation of one CausalConvWithState call,
// with a row of scratch for past_state ++ input.
type causalConv struct {
	batch, channels, length, k int
	silu                       bool
	seq                        []float64
}

// runCausalConv unpacks the values for causalConvRows.
func runCausalConv[T float](rc *runCtx, cc *causalConv, x, w, bias, past, y, present *value) error {
	var b, p []T
	if bias != nil {
		b = bias.data.([]T)
	}
	if past != nil {
		p = past.data.([]T)
	}
	return causalConvRows(rc, cc, x.data.([]T), w.data.([]T), b, p, y.data.([]T), present.data.([]T))
}

// causalConvRows convolves each (batch, channel) row, accumulating in
// float64 and rounding once, and writes its state. p and b may be nil (a
// zero past, no bias). The run's context is checked between batch entries.
func causalConvRows[T float](rc *runCtx, cc *causalConv, x, w, b, p, y, present []T) error {
	L, k, keep, seq := cc.length, cc.k, cc.k-1, cc.seq
	for bi := range cc.batch {
		if err := rc.err(); err != nil {
			return err
		}
		for c := range cc.channels {
			row := bi*cc.channels + c
			clear(seq[:keep])
			if p != nil {
				for i, v := range p[row*keep : (row+1)*keep] {
					seq[i] = float64(v)
				}
			}
			for i, v := range x[row*L : (row+1)*L] {
				seq[keep+i] = float64(v)
			}
			kernel := w[c*k : (c+1)*k]
			var add float64
			if b != nil {
				add = float64(b[c])
			}
			out := y[row*L : (row+1)*L]
			for t := range out {
				sum := add
				for i, wi := range kernel {
					sum += float64(wi) * seq[t+i]
				}
				out[t] = T(sum)
				if cc.silu {
					v := float64(out[t])
					out[t] = T(v * sigmoid(v))
				}
			}
			for i, v := range seq[L:] {
				present[row*keep+i] = T(v)
			}
		}
	}
	return nil
}

package layers

import (
	"fmt"
	"math"
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.mla in ONNX graphs, as ExportONNX writes it: the causal
// softmax attention of heads whose queries and keys are each a non-RoPE
// part and a rotated part joined by Concat,
//
//	q   = split(q_b_proj(RMSNorm(q_a_proj(x))))   or split(q_proj(x))
//	kv  = split(kv_b_proj(RMSNorm(latent[..., :kv_lora_rank])))   latent = kv_a_proj_with_mqa(x)
//	q_h = [q_h[..., :nope] | RoPE(q_h[..., nope:])]   k_h = [kv_h[..., :nope] | Expand(RoPE(k_rope))]
//	v_h = kv_h[..., nope:]
//
// read back from the Softmax. The sizes come from the projections, the
// rotary layout from how the rotated half is put back together (a Reshape
// of pairs is interleaved), its base from the angle table. The lifter
// builds the layer and runs it against the graph before accepting it, so
// what this reads loosely (the k_rope path) is still checked.

func init() {
	match.RegisterPattern(match.Pattern{Name: "attention.mla", Op: "Softmax", Match: liftMLA})
}

// liftMLA is the pattern's Match: nil, nil until the product of queries and
// keys is seen to join a non-RoPE and a rotated part.
func liftMLA(g match.Graph, softmax *match.Node) (*match.Layer, error) {
	if !lastAxis(g, softmax) {
		return nil, nil
	}
	w, err := readWeights(g, softmax)
	if w == nil || err != nil || w.sinks != nil {
		return nil, nil
	}
	s, product, err := readScoreSteps(g, w.scores)
	if err != nil || s.modified() {
		return nil, nil
	}
	q, k := g.Producer(product.Inputs()[0]), g.Producer(product.Inputs()[1])
	if q == nil || q.Op() != "Concat" || k == nil || k.Op() != "Transpose" {
		return nil, nil
	}
	k = g.Producer(k.Inputs()[0])
	if k == nil || k.Op() != "Concat" || len(q.Inputs()) != 2 || len(k.Inputs()) != 2 || !lastAxis(g, q) || !lastAxis(g, k) {
		return nil, nil
	}
	if _, err := sliceSource(g, q.Inputs()[0]); err != nil {
		return nil, nil // the queries are not [nope | rope]: rotated heads of attention.sdpa, say
	}
	if shared := g.Producer(k.Inputs()[1]); shared == nil || shared.Op() != "Expand" {
		return nil, nil // no rotated key shared by the heads
	}
	if !g.Registered("attention.mla") {
		return nil, match.Refuse([]*match.Node{softmax}, "latent attention: no layer type attention.mla is registered in this build")
	}
	l, err := readMLA(g, s, q, k, w.product)
	if err != nil {
		return nil, match.Refuse([]*match.Node{softmax}, "latent attention (attention.mla): %v", err)
	}
	return l, nil
}

// readMLA reads the layer from the query and key Concats and the product
// of the weights and the values.
func readMLA(g match.Graph, s *sdpaScores, q, k, pv *match.Node) (*match.Layer, error) {
	if !s.causal {
		return nil, fmt.Errorf("the scores are not causally masked; attention.mla is causal")
	}
	qHeads, err := sliceSource(g, q.Inputs()[0])
	if err != nil {
		return nil, err
	}
	kv, err := sliceSource(g, k.Inputs()[0])
	if err != nil {
		return nil, err
	}
	if v, err := sliceSource(g, pv.Inputs()[1]); err != nil || v != kv {
		return nil, fmt.Errorf("the values are not the rest of the keys' heads %q", kv)
	}
	qLin, heads, dqk, err := projectedHeads(g, qHeads, "queries")
	if err != nil {
		return nil, err
	}
	kvB, kvHeads, dnv, err := projectedHeads(g, kv, "keys and values")
	if err != nil {
		return nil, err
	}
	latentC, kvNorm := unnormalized(g, kvB.Input)
	if kvNorm == nil {
		return nil, fmt.Errorf("kv_b_proj reads %q, not an RMSNorm of the latent", kvB.Input)
	}
	latent, err := sliceSource(g, latentC)
	if err != nil {
		return nil, err
	}
	kvA, ok := g.Linear(latent)
	if !ok {
		return nil, fmt.Errorf("the latent %q is not an nn.Linear of the input", latent)
	}
	kvRank := kvB.In
	dr := kvA.Out - kvRank
	dn := dqk - dr
	dv := dnv - dn
	if kvHeads != heads || dr <= 0 || dn <= 0 || dv <= 0 {
		return nil, fmt.Errorf("%d query heads of %d and %d key/value heads of %d do not split with a rotated key of %d", heads, dqk, kvHeads, dnv, dr)
	}
	out, err := mergedOutput(g, pv, heads*dv)
	if err != nil {
		return nil, err
	}
	var params []match.Param
	var qA *match.Linear
	x, qRank := qLin.Input, 0
	if qIn, qNorm := unnormalized(g, qLin.Input); qNorm != nil {
		if qA, ok = g.Linear(qIn); !ok {
			return nil, fmt.Errorf("the query latent %q is not an nn.Linear of the input", qIn)
		}
		if qNorm.Eps != kvNorm.Eps {
			return nil, fmt.Errorf("the RMSNorms have epsilons %v and %v; attention.mla has one", qNorm.Eps, kvNorm.Eps)
		}
		x, qRank = qA.Input, qA.Out
		params = slices.Concat(qA.Params("q_a_proj"), []match.Param{{Name: "q_a_layernorm.weight", Value: qNorm.Weight, From: qNorm.WeightFrom}}, qLin.Params("q_b_proj"))
	} else {
		params = qLin.Params("q_proj")
	}
	bias := kvA.Bias != nil
	switch {
	case kvA.Input != x:
		return nil, fmt.Errorf("queries and the latent are projected from %q and %q; attention.mla is self-attention", x, kvA.Input)
	case (out.Bias != nil) != bias || qLin.Bias != nil || (qA != nil && (qA.Bias != nil) != bias):
		return nil, fmt.Errorf("the projections' biases are not attention_bias's: q_a_proj, kv_a_proj_with_mqa and o_proj all or none")
	}
	params = slices.Concat(params, kvA.Params("kv_a_proj_with_mqa"),
		[]match.Param{{Name: "kv_a_layernorm.weight", Value: kvNorm.Weight, From: kvNorm.WeightFrom}},
		kvB.Params("kv_b_proj"), out.Params("o_proj"))
	style, base, note, err := readMLARope(g, q.Inputs()[1], dr)
	if err != nil {
		return nil, err
	}
	cfg := []match.Field{{Key: "d", Value: out.Out}, {Key: "num_heads", Value: heads}, {Key: "q_lora_rank", Value: qRank},
		{Key: "kv_lora_rank", Value: kvRank}, {Key: "qk_nope_head_dim", Value: dn}, {Key: "qk_rope_head_dim", Value: dr},
		{Key: "v_head_dim", Value: dv}, {Key: "attention_bias", Value: bias}, {Key: "rope", Value: style}}
	if base != 10000 {
		cfg = append(cfg, match.Field{Key: "rope_base", Value: base})
	}
	if kvNorm.Eps != float32(1e-6) {
		cfg = append(cfg, match.Field{Key: "eps", Value: kvNorm.Eps})
	}
	if !scaledAs(s.scale, dqk) {
		cfg = append(cfg, match.Field{Key: "scale", Value: float32(s.scale)})
	}
	l := &match.Layer{Type: "attention.mla", Name: "attn", Config: cfg, Inputs: []string{x}, Output: out.Output, Params: params}
	if note != "" {
		l.Notes = append(l.Notes, note)
	}
	return l, nil
}

// sliceSource returns the value a Slice on the last axis reads.
func sliceSource(g match.Graph, v string) (string, error) {
	n := g.Producer(v)
	if n == nil || n.Op() != "Slice" || len(n.Inputs()) < 4 {
		return "", fmt.Errorf("%q is not a slice of the last axis", v)
	}
	axis, ok := g.Scalar(n.Inputs()[3])
	shape, err := g.Shape(n.Inputs()[0]) // the same rank as v, which may be empty (Phi-3's q[…, rotary_dim:] of a full rotation)
	if !ok || err != nil || (int(axis) != -1 && int(axis) != len(shape)-1) {
		return "", fmt.Errorf("%q is not a slice of the last axis", v)
	}
	return n.Inputs()[0], nil
}

// readMLARope reads the rotary layout and base from the rotated queries:
// interleaved pairs are put back together by a Reshape, halves by a
// Concat; the base is read from the angles θ_i = base^(−2i/dim) of the
// table the sines are computed from.
func readMLARope(g match.Graph, rotated string, dim int) (style string, base float64, note string, err error) {
	n := g.Producer(rotated)
	switch {
	case n != nil && n.Op() == "Reshape":
		style, n = "interleaved", g.Producer(n.Inputs()[0])
	case n != nil && n.Op() == "Concat":
		style = "half"
	}
	if style == "" || n == nil || n.Op() != "Concat" {
		return "", 0, "", fmt.Errorf("the rotated queries %q are not rotated pairs put back together", rotated)
	}
	theta, err := ropeAngles(g, n, dim/2)
	if err != nil {
		return "", 0, "", err
	}
	if len(theta) < 2 {
		return style, 10000, "one rotating pair turns by its position whatever the base: rope_base is left at 10000", nil
	}
	base = math.Pow(theta[1], -float64(dim)/2)
	if r := math.Round(base); math.Abs(base-r) < 1e-6*base {
		base = r
	}
	return style, base, "", nil
}

// ropeAngles finds, from the Concat of a rotated pair (a·cos − b·sin,
// b·cos + a·sin), the constant angles per pair the sine table is computed
// from (Sin of positions times the angles), one per pair.
func ropeAngles(g match.Graph, concat *match.Node, pairs int) ([]float64, error) {
	sub := g.Producer(concat.Inputs()[0])
	if sub == nil || sub.Op() != "Sub" {
		return nil, fmt.Errorf("the rotation %s is not (a·cos − b·sin, b·cos + a·sin)", concat.Name())
	}
	mul := g.Producer(sub.Inputs()[1])
	if mul == nil || mul.Op() != "Mul" {
		return nil, fmt.Errorf("the rotation %s is not (a·cos − b·sin, b·cos + a·sin)", concat.Name())
	}
	for _, in := range mul.Inputs() {
		n := g.Producer(in)
		for n != nil && (n.Op() == "Unsqueeze" || n.Op() == "Cast" || n.Op() == "Reshape") {
			n = g.Producer(n.Inputs()[0])
		}
		if n == nil || n.Op() != "Sin" {
			continue
		}
		angles := g.Producer(n.Inputs()[0])
		if angles == nil || angles.Op() != "Mul" {
			break
		}
		for _, a := range angles.Inputs() { // the table (1, pairs), not the positions (T, 1)
			if t, err := g.Constant(a); err == nil && t.Shape().TotalSize() == pairs && t.Shape()[0] == 1 {
				return match.Floats(t)
			}
		}
	}
	return nil, fmt.Errorf("no constant angle table computes the sines of the rotation %s", concat.Name())
}

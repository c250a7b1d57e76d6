package layers

import (
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// score_mod decodes strictly, one modification or a list, and writes back
// as it was given.
func TestScoreModsYAML(t *testing.T) {
	for _, tc := range []struct{ in, out string }{
		{`{type: softcap, cap: 30}`, "{type: softcap, cap: 30}\n"},
		{`[{type: alibi}]`, "[{type: alibi}]\n"},
		{`[{type: relative_bias, max_distance: 4}, {type: document_mask, lengths: [2, 3]}]`,
			"[{type: relative_bias, max_distance: 4}, {type: document_mask, lengths: [2, 3]}]\n"},
	} {
		var m ScoreMods
		require.NoError(t, yaml.Unmarshal([]byte(tc.in), &m), tc.in)
		out, err := yaml.Marshal(m)
		require.NoError(t, err)
		require.Equal(t, tc.out, string(out))
	}

	s := fromYAML(t, "attention.sdpa", `{d: 8, num_heads: 2}`).(*SDPA)
	out, err := yaml.Marshal(s)
	require.NoError(t, err)
	require.NotContains(t, string(out), "score_mod", "an empty score_mod is omitted")

	for _, tc := range []struct{ in, err string }{
		{`{cap: 30}`, "line 1: score_mod needs a type (one of: alibi, document_mask, relative_bias, shift, softcap"},
		{`{type: nope}`, `line 1: score_mod: score_mod type "nope" is not registered (registered: alibi, document_mask, relative_bias, shift, softcap`},
		{`{type: softcap, cap: 30, ca: 2}`, `line 1: score_mod (softcap): unknown field "ca" (fields: cap)`},
		{"- {type: alibi}\n- {type: alibi, slope: 2}", `line 2: score_mod[1] (alibi): unknown field "slope" (fields: none)`},
		{`softcap`, "score_mod must be a mapping with a type"},
		{`[softcap]`, "score_mod[0] must be a mapping with a type"},
		{`{type: softcap, cap: big}`, "score_mod (softcap): yaml: unmarshal errors"},
	} {
		var m ScoreMods
		require.ErrorContains(t, yaml.Unmarshal([]byte(tc.in), &m), tc.err, tc.in)
	}
}

// Validate names the field and the rule of each new option.
func TestSDPAFrontierValidate(t *testing.T) {
	for _, tc := range []struct{ config, err string }{
		{`qk_norm: layer`, `qk_norm "layer" is not "" (none), "rms" (per head) or "rms_projection"`},
		{`qk_norm: rms_projection, qk_norm_eps: -1`, "qk_norm_eps must be a finite number ≥ 0, got -1"},
		{`qk_norm: rms, qk_norm_eps: -1`, "qk_norm_eps must be a finite number ≥ 0, got -1"},
		{`sinks: true, masked_rows: nan`, "masked_rows: nan does not apply with sinks"},
		{`score_mod: {type: softcap}`, "score_mod (softcap): cap must be a positive number, got 0"},
		{`score_mod: [{type: alibi}, {type: relative_bias}]`, "score_mod.1 (relative_bias): max_distance must be positive, got 0"},
		{`score_mod: {type: document_mask}`, "score_mod (document_mask): lengths must list at least one document length"},
		{`score_mod: {type: document_mask, lengths: [3, 0]}`, "lengths[1] must be a positive length"},
	} {
		l := fromYAML(t, "attention.sdpa", "{d: 8, num_heads: 2, "+tc.config+"}")
		require.ErrorContains(t, l.Validate(), tc.err, tc.config)
	}
}

// The parameters of qk_norm, sinks and score modifications are named as
// PyTorch's state_dict would name them and initialized as their modules
// are.
func TestSDPAFrontierParams(t *testing.T) {
	l := fromYAML(t, "attention.sdpa", `{d: 8, num_heads: 2, qk_norm: rms, sinks: true,
		score_mod: [{type: alibi}, {type: relative_bias, max_distance: 3}]}`)
	require.NoError(t, l.Validate())
	var names []string
	inits := map[string]registry.Init{}
	for _, p := range l.Params() {
		names = append(names, p.Name)
		inits[p.Name] = p.Init
	}
	require.Equal(t, []string{"sinks", "q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight", "out_proj.bias",
		"q_norm.weight", "k_norm.weight", "score_mod.1.bias"}, names)
	require.Equal(t, registry.NormalInit(0, 0.02), inits["sinks"])
	require.Equal(t, registry.ConstantInit(1), inits["q_norm.weight"])
	require.Equal(t, registry.ConstantInit(0), inits["score_mod.1.bias"])
	require.Equal(t, []int{4}, []int(l.Params()[6].Value.Shape()))
	require.Equal(t, []int{2, 5}, []int(l.Params()[8].Value.Shape()))

	single := fromYAML(t, "attention.sdpa", `{d: 8, num_heads: 2, score_mod: {type: relative_bias, max_distance: 1}}`)
	require.NoError(t, single.Validate())
	require.Equal(t, "score_mod.bias", single.Params()[len(single.Params())-1].Name)
}

// RegisterScoreMod refuses what registry.Register refuses.
func TestRegisterScoreModPanics(t *testing.T) {
	require.PanicsWithValue(t, `layers: RegisterScoreMod called twice for "softcap"`, func() {
		RegisterScoreMod(ScoreModInfo{Type: "softcap", New: func() ScoreMod { return &SoftcapMod{} }})
	})
	require.Panics(t, func() { RegisterScoreMod(ScoreModInfo{Type: "Bad Name", New: func() ScoreMod { return nil }}) })
	require.Panics(t, func() { RegisterScoreMod(ScoreModInfo{Type: "nil_new"}) })
}

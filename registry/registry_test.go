package registry

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

type nopLayer struct{}

func (nopLayer) Validate() error { return nil }
func (nopLayer) Params() []Param { return nil }
func (nopLayer) Forward(_ *Run, in []*tensor.Dense) (*tensor.Dense, error) {
	return in[0], nil
}

func TestRegister(t *testing.T) {
	newNop := func() Layer { return nopLayer{} }
	Register(Info{ID: "test.nop", Summary: "does nothing", New: newNop})

	info, err := Lookup("test.nop")
	require.NoError(t, err)
	assert.Equal(t, "does nothing", info.Summary)
	assert.Contains(t, IDs(), "test.nop")

	_, err = Lookup("test.missing")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown layer type "test.missing" (forgotten import?)`)
	assert.Contains(t, err.Error(), "test.nop")
	assert.Contains(t, err.Error(), `; built-in layers need import _ "github.com/attnrun/attnrun/layers"`)

	for _, bad := range []Info{
		{ID: "", New: newNop},
		{ID: "nop", New: newNop},
		{ID: "Test.Nop", New: newNop},
		{ID: "test.nop2"},
		{ID: "test.nop", New: newNop},
	} {
		assert.Panics(t, func() { Register(bad) }, "ID %q", bad.ID)
	}
}

// A program that forgot every import got "registered: " and an empty list;
// the error now says that nothing is registered and what to import.
func TestUnknownIDWithEmptyRegistry(t *testing.T) {
	err := unknownID("attention.causal", nil)
	assert.EqualError(t, err, `unknown layer type "attention.causal" (forgotten import?): no layer type is registered; `+
		`built-in layers need import _ "github.com/attnrun/attnrun/layers"`)
	err = unknownID("attention.casual", []string{"attention.causal", "nn.add"})
	assert.EqualError(t, err, `unknown layer type "attention.casual" (forgotten import?); registered: attention.causal, nn.add; `+
		`built-in layers need import _ "github.com/attnrun/attnrun/layers"`)
}

func TestLinearInitBound(t *testing.T) {
	// kaiming_uniform_(a=√5) and the bias rule both give 1/√fan_in.
	w, b := LinearInit(3), LinearBiasInit(3)
	assert.InDelta(t, 0.5773502691896258, w.B, 1e-15)
	assert.InDelta(t, -0.5773502691896258, w.A, 1e-15)
	assert.InDelta(t, 0.5773502691896258, b.B, 1e-15)
}

func TestRunObserve(t *testing.T) {
	var got string
	r := &Run{Layer: "attn", Hook: func(layer string, _ *tensor.Dense) { got = layer }}
	assert.True(t, r.WantWeights())
	r.Observe(nil)
	assert.Equal(t, "attn", got)
	var none *Run
	assert.False(t, none.WantWeights())
	none.Observe(nil) // a nil Run has no hook and must not panic
}

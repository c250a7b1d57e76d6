package match

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuildOpLayer registers a layer for a made-up op and builds it: the
// registered type is set on what the builder returns, a builder's refusal
// and panic come back as errors, what the lifter read must be of the
// builder's type, and an op no layer takes gives nothing.
func TestBuildOpLayer(t *testing.T) {
	RegisterOpLayer("TestSwap", "test.swap", func(s Transpose) (*Layer, error) {
		if s.Dim0 == s.Dim1 {
			return nil, Refuse(nil, "one axis %d", s.Dim0)
		}
		if s.Dim0 < 0 {
			panic("negative axis")
		}
		return &Layer{Config: []Field{{Key: "a", Value: s.Dim0}, {Key: "b", Value: s.Dim1}}}, nil
	})
	assert.Equal(t, "test.swap", OpLayer("TestSwap"))

	l, err := BuildOpLayer("TestSwap", Transpose{Dim0: 0, Dim1: 1})
	require.NoError(t, err)
	assert.Equal(t, "test.swap", l.Type)
	assert.Equal(t, []Field{{Key: "a", Value: 0}, {Key: "b", Value: 1}}, l.Config)

	_, err = BuildOpLayer("TestSwap", Transpose{Dim0: 2, Dim1: 2})
	assert.EqualError(t, err, "one axis 2")
	_, err = BuildOpLayer("TestSwap", Transpose{Dim0: -1, Dim1: 2})
	assert.EqualError(t, err, "the test.swap layer of ONNX op TestSwap: panic: negative axis")
	_, err = BuildOpLayer("TestSwap", &AttentionOp{})
	assert.EqualError(t, err, "the test.swap layer of ONNX op TestSwap is built from match.Transpose, not *match.AttentionOp")

	l, err = BuildOpLayer("TestNoSuchOp", Transpose{})
	assert.Nil(t, l)
	assert.NoError(t, err)
	assert.Equal(t, "", OpLayer("TestNoSuchOp"))

	assert.Panics(t, func() { RegisterOpLayer("TestSwap", "test.other", func(Transpose) (*Layer, error) { return nil, nil }) })
	assert.Panics(t, func() { RegisterOpLayer[Transpose]("TestNil", "test.nil", nil) })
}

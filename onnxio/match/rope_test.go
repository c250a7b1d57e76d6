package match

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnrotated offers values to two registered rotation readers, in the
// order of their names: the first rotation found wins, a value neither
// reads is no rotation, and a reader's error or panic comes back as the
// error.
func TestUnrotated(t *testing.T) {
	RegisterRotation("test-b", func(_ Graph, v string) (*Rotation, error) {
		switch v {
		case "bad":
			return nil, errors.New("rotated by a table of other positions")
		case "boom":
			panic("no tables")
		case "rotated":
			return &Rotation{Heads: "b's heads"}, nil
		}
		return nil, nil
	})
	RegisterRotation("test-a", func(_ Graph, v string) (*Rotation, error) {
		if v == "rotated" {
			return &Rotation{Heads: "heads", Rope: Rope{Interleaved: true, Base: 500000, Dim: 16}}, nil
		}
		return nil, nil
	})

	r, err := Unrotated(nil, "rotated")
	require.NoError(t, err)
	assert.Equal(t, &Rotation{Heads: "heads", Rope: Rope{Interleaved: true, Base: 500000, Dim: 16}}, r)

	r, err = Unrotated(nil, "plain")
	assert.Nil(t, r)
	assert.NoError(t, err)

	_, err = Unrotated(nil, "bad")
	assert.EqualError(t, err, "rotated by a table of other positions")
	_, err = Unrotated(nil, "boom")
	assert.EqualError(t, err, "rotation reader test-b: panic: no tables")

	assert.Panics(t, func() { RegisterRotation("test-a", func(Graph, string) (*Rotation, error) { return nil, nil }) })
	assert.Panics(t, func() { RegisterRotation("test-nil", nil) })
	assert.Panics(t, func() { RegisterRotation("", func(Graph, string) (*Rotation, error) { return nil, nil }) })
}

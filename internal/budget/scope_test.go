package budget

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScopeAddsUpAndReleasesTogether(t *testing.T) {
	b := New(100)
	s := NewScope(b)
	require.NoError(t, s.Reserve(60, "a"))
	require.NoError(t, s.Reserve(30, "b"))
	err := s.Reserve(20, "c")
	require.ErrorIs(t, err, ErrExceeded)
	assert.Equal(t, "c needs 20 B, over the memory budget of 100 B (90 B already in use)", err.Error())
	assert.Equal(t, int64(90), b.Used())
	s.Release()
	assert.Equal(t, int64(0), b.Used())
	require.NoError(t, s.Reserve(100, "d"))
	s.Release()
}

func TestScopeOnNilBudgetStillAddsUp(t *testing.T) {
	s := NewScope(nil)
	require.NoError(t, s.Reserve(DefaultLimit/2, "a"))
	require.ErrorIs(t, s.Reserve(DefaultLimit/2+1, "b"), ErrExceeded)
	s.Release()
	require.NoError(t, s.Reserve(DefaultLimit, "c"))
}

package lift_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
)

// TestLiftLimits checks that Options.MaxMemory and Options.Context reach
// the executor runs of a lift (its probes): a budget too small for the
// graph's values and a cancelled context are errors, and the defaults
// lift the same file.
func TestLiftLimits(t *testing.T) {
	m, err := onnxio.ReadModel(filepath.Join(fixtures, "causal_attention_opset14_static", "model.onnx"))
	require.NoError(t, err)

	_, err = lift.Options{}.Lift(m)
	require.NoError(t, err)

	_, err = lift.Options{MaxMemory: 64}.Lift(m)
	require.ErrorIs(t, err, budget.ErrExceeded)
	assert.ErrorContains(t, err, "over the memory budget of 64 B")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = lift.Options{Context: ctx}.Lift(m)
	require.ErrorIs(t, err, context.Canceled)
}

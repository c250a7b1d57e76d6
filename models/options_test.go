package models

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/registry"
)

// linears is a config of n nn.linear layers of one (d, d) weight each.
// With d = 16384 each weight is 1 GiB of float32 and passes a per-tensor
// limit of 1 GiB, while together they are n GiB.
func linears(n, d int) []byte {
	var b strings.Builder
	b.WriteString("name: big\nlayers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: l%d, type: nn.linear, d_in: %d, d_out: %d, bias: false}\n", i, d, d)
	}
	return []byte(b.String())
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestBudgetRefusesBeforeAllocating: 64 parameters of 1 GiB each used to
// be allocated one after the other until the process died, even for
// `attnrun inspect`. The budget refuses the config, naming the layer, the
// parameter, its shape and the budget, before the parameters that do not
// fit are allocated.
func TestBudgetRefusesBeforeAllocating(t *testing.T) {
	// 64 layers of 16 MiB under a budget of 40 MiB: the third is refused.
	var err error
	bytes := allocated(func() { _, err = Options{MaxMemory: 40 << 20}.Parse(linears(64, 2048), "big.yaml") })
	require.Error(t, err)
	assert.True(t, errors.Is(err, budget.ErrExceeded), "%v", err)
	assert.EqualError(t, err, `big.yaml:5: layer "l2" (nn.linear): parameter weight of shape (2048, 2048) needs 16 MiB, over the memory budget of 40 MiB (32 MiB already in use)`)
	assert.Less(t, bytes, uint64(33<<20), "more than the two layers that fit were allocated")

	// Under the default budget, 4 GiB: 64 layers of 4 GiB, the first
	// refused with nothing allocated.
	bytes = allocated(func() { _, err = Parse(linears(64, 32768), "big.yaml") })
	assert.EqualError(t, err, `big.yaml:3: layer "l0" (nn.linear): parameter weight of shape (32768, 32768) needs 4 GiB, over the memory budget of 4 GiB`)
	assert.Less(t, bytes, uint64(1<<20))
}

// TestMaxMemory checks that the budget bounds the sum over layers and is
// the one the options set.
func TestMaxMemory(t *testing.T) {
	config := []byte(`name: m
layers:
  - {name: a, type: nn.linear, d_in: 512, d_out: 512}
  - {name: b, type: nn.linear, d_in: 512, d_out: 512}
`)
	// Each layer is 512·512·4 + 512·4 bytes and two ParamOverheads: 1 MiB + 3 KiB.
	_, err := Options{MaxMemory: 2 << 20}.Parse(config, "m.yaml")
	assert.EqualError(t, err, `m.yaml:4: layer "b" (nn.linear): storage for 2 parameters (the largest: weight of shape (512, 512)) needs 1 MiB, over the memory budget of 2 MiB (1 MiB already in use)`)
	m, err := Options{MaxMemory: 3 << 20}.Parse(config, "m.yaml")
	require.NoError(t, err)
	assert.Equal(t, 2*(512*512+512), m.NumParams())
}

// TestWrapperHeadsConfig is the 114-byte YAML of the issue: 10⁸ heads
// used to take 4 GB before failing, or the process.
func TestWrapperHeadsConfig(t *testing.T) {
	config := []byte("name: m\nlayers:\n  - {name: a, type: attention.multihead_wrapper, d_in: 1, d_out: 1, context_length: 1, num_heads: 100000000}\n")
	var err error
	bytes := allocated(func() { _, err = Parse(config, "heads.yaml") })
	assert.EqualError(t, err, `heads.yaml:3: layer "a" (attention.multihead_wrapper): num_heads 100000000 is above the limit of 65536`)
	assert.Less(t, bytes, uint64(1<<20))

	// Within the head limit, the heads' many small parameters count with
	// their overhead.
	config = []byte("name: m\nlayers:\n  - {name: a, type: attention.multihead_wrapper, d_in: 64, d_out: 64, context_length: 1, num_heads: 65536}\n")
	_, err = Options{MaxMemory: 1 << 30}.Parse(config, "heads.yaml")
	assert.ErrorContains(t, err, `layer "a" (attention.multihead_wrapper): storage for 196608 parameters (the largest: heads.0.W_query.weight of shape (64, 64)) needs 3.1 GiB, over the memory budget of 1 GiB`)
}

// TestShapesOnly describes the 64 GiB model without allocating it:
// parameters counted, output shapes and FLOPs from shapes.
func TestShapesOnly(t *testing.T) {
	var m *Model
	var err error
	bytes := allocated(func() { m, err = Options{ShapesOnly: true}.Parse(linears(64, 16384), "big.yaml") })
	require.NoError(t, err)
	assert.Less(t, bytes, uint64(1<<20))
	assert.Equal(t, 64<<28, m.NumParams())
	assert.Empty(t, m.Params())
	assert.Equal(t, []registry.ParamShape{{Name: "weight", Shape: []int{16384, 16384}}}, m.Layers()[0].Params)

	var prof *Profile
	bytes = allocated(func() { prof, err = m.Profile(tensor.Shape{4096, 16384}) })
	require.NoError(t, err)
	assert.Less(t, bytes, uint64(1<<20))
	assert.Equal(t, int64(64)<<28, prof.Params)
	assert.Equal(t, int64(64)*2*4096*16384*16384, prof.FLOPs)
	assert.Equal(t, tensor.Shape{4096, 16384}, prof.Layers[63].Output)

	x := tensor.New(tensor.WithShape(1, 16384), tensor.WithBacking(make([]float32, 16384)))
	_, err = m.Forward(nil, x)
	assert.EqualError(t, err, `model "big" was built with ShapesOnly: it describes the model but has no parameters to run`)
	assert.Error(t, m.Init(1))
	assert.Error(t, m.LoadStateDict(nil))
	_, err = m.NewState()
	assert.Error(t, err)

	// Presets too: no weights are loaded.
	p, err := LookupPreset("seed-mha-wrapper")
	require.NoError(t, err)
	m, err = p.ModelWith(Options{ShapesOnly: true})
	require.NoError(t, err)
	assert.Equal(t, 36, m.NumParams())
}

// selfAllocating is a custom layer that allocates its parameter in
// Validate, as layers written before registry.Provisioner do.
type selfAllocating struct {
	N int `yaml:"n"`
	w *tensor.Dense
}

func (l *selfAllocating) Validate() error {
	l.w = tensor.New(tensor.WithShape(l.N), tensor.WithBacking(make([]float32, l.N)))
	return nil
}
func (l *selfAllocating) Params() []registry.Param {
	return []registry.Param{{Name: "w", Value: l.w}}
}
func (l *selfAllocating) Forward(_ *registry.Run, in []*tensor.Dense) (*tensor.Dense, error) {
	return in[0], nil
}

func init() {
	registry.Register(registry.Info{ID: "modelstest.self_allocating", Summary: "allocates in Validate",
		New: func() registry.Layer { return &selfAllocating{} }})
}

// TestBudgetCountsOtherLayers: the parameters of a layer that is not a
// Provisioner count against the budget too, once it has allocated them.
func TestBudgetCountsOtherLayers(t *testing.T) {
	config := []byte("name: m\nlayers:\n  - {name: a, type: modelstest.self_allocating, n: 1024}\n  - {name: b, type: modelstest.self_allocating, n: 1024}\n")
	_, err := Options{MaxMemory: 6000}.Parse(config, "m.yaml")
	assert.EqualError(t, err, `m.yaml:4: layer "b" (modelstest.self_allocating): parameter w of shape (1024,) needs 4.5 KiB, over the memory budget of 5.9 KiB (4.5 KiB already in use)`)
	m, err := Options{MaxMemory: 1 << 20, ShapesOnly: true}.Parse(config, "m.yaml")
	require.NoError(t, err)
	assert.Equal(t, 2048, m.NumParams())
	prof, err := m.Profile(tensor.Shape{2, 3})
	require.NoError(t, err, "a layer that allocated its own parameters can run to find its shape")
	assert.Equal(t, tensor.Shape{2, 3}, prof.Layers[1].Output)
}

// TestProfileFallbackBudget: a layer without OutputShape runs on zeros,
// which the budget bounds.
func TestProfileFallbackBudget(t *testing.T) {
	m, err := Options{MaxMemory: 1 << 20}.Parse([]byte("name: m\nlayers:\n  - {name: c, type: modelstest.uncounted}\n"), "m.yaml")
	require.NoError(t, err)
	_, err = m.Profile(tensor.Shape{1 << 20, 1 << 20, 3})
	assert.EqualError(t, err, `layer "c" (modelstest.uncounted): a zero input of shape (1048576, 1048576, 3) needs 12 TiB, over the memory budget of 1 MiB`)
}

// TestForwardHonoursContext checks that Forward, Step and Decode stop
// between layers once the run's context is done, with an error that wraps
// the context's and names the layer.
func TestForwardHonoursContext(t *testing.T) {
	m, err := Parse([]byte(`name: m
layers:
  - {name: a, type: attention.causal, d_in: 3, d_out: 3, context_length: 8}
  - {name: b, type: nn.linear, d_in: 3, d_out: 3}
`), "m.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	x := tensor.New(tensor.WithShape(4, 3), tensor.WithBacking(make([]float32, 12)))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = m.Forward(&registry.Run{Context: ctx}, x)
	assert.EqualError(t, err, `model "m" stopped before layer "a" (attention.causal): context canceled`)
	assert.True(t, errors.Is(err, context.Canceled))

	// A deadline that passes during the pass stops it at the next layer.
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = m.Decode(&registry.Run{Context: ctx}, 1, x)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.ErrorContains(t, err, `stopped before layer "a"`)

	stepCtx, stop := context.WithCancel(context.Background())
	run := &registry.Run{Context: stepCtx, Hook: func(layer string, _ *tensor.Dense) {
		if layer == "a" {
			stop() // the deadline comes while layer a runs
		}
	}}
	s, err := m.NewState()
	require.NoError(t, err)
	_, err = m.Step(run, s, x)
	assert.EqualError(t, err, `model "m" stopped before layer "b" (nn.linear): context canceled`)

	out, err := m.Forward(&registry.Run{Context: context.Background()}, x)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{4, 3}, out.Shape())
}

// TestLoadRegularFilesOnly: a FIFO given as a config used to block Load
// forever; only regular files are read.
func TestLoadRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("cannot make a FIFO: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Load(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		assert.EqualError(t, err, fifo+": is a named pipe (FIFO), not a regular file")
	case <-time.After(5 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
	_, err := Load(dir)
	assert.ErrorContains(t, err, "not a regular file")
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	assert.True(t, errors.Is(err, os.ErrNotExist))
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"gorgonia.org/tensor"

	attnrunlib "github.com/attnrun/attnrun"
	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/tensorio"
)

// Files come from strangers: every command that reads a model takes
// --max-memory, the budget of everything a file or config sizes
// (parameters, tensors, the executor's values), and --timeout, a deadline
// for the whole command. Going over either is an error naming the limit
// and the flag that sets it, and exit status 1.

// limits are a command's --max-memory and --timeout, and the context the
// command runs under once it started.
type limits struct {
	maxMemory memorySize
	timeout   time.Duration
	// ctx ends at the deadline; set by run.
	ctx context.Context
}

// defaultLimits are the limits of a command given neither flag.
func defaultLimits() *limits {
	return &limits{maxMemory: memorySize(budget.DefaultLimit), ctx: context.Background()}
}

// addLimitFlags gives a command that reads models its --max-memory and
// --timeout flags.
func addLimitFlags(cmd *cobra.Command) *limits {
	l := defaultLimits()
	fl := cmd.Flags()
	fl.Var(&l.maxMemory, "max-memory", "memory budget for what files and configs size (parameters, tensors, executor values), e.g. 512MiB or 8GiB")
	fl.DurationVar(&l.timeout, "timeout", 0, "stop with an error after this long, e.g. 30s or 5m; 0 means no limit")
	return l
}

// memorySize is a flag holding a size such as 1GiB (budget.Parse).
type memorySize int64

func (b *memorySize) String() string { return budget.Format(int64(*b)) }
func (b *memorySize) Type() string   { return "size" }
func (b *memorySize) Set(s string) error {
	n, err := budget.Parse(s)
	if err != nil {
		return err
	}
	*b = memorySize(n)
	return nil
}

// deadlineGrace is how long a command may run past --timeout before it is
// abandoned: work that checks the deadline stops within it; anything else
// (a kernel in the middle of a huge product) is left behind, and the
// process exits.
const deadlineGrace = time.Second

// run runs a command under the limits: the Go runtime's soft memory limit
// follows the budget, and the command gets a context that ends at the
// deadline. If the command has not returned deadlineGrace after the
// deadline, run returns the deadline error without it.
func (l *limits) run(work func() error) error {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(softMemoryLimit(int64(l.maxMemory))))
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if l.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
	}
	defer cancel()
	l.ctx = ctx
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("internal error: %v", r)
			}
		}()
		done <- work()
	}()
	select {
	case err := <-done:
		return l.explain(err)
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return l.explain(err)
	case <-time.After(deadlineGrace):
		return l.explain(fmt.Errorf("abandoned the work: %w", ctx.Err()))
	}
}

// softMemoryLimit is the Go runtime's soft memory limit for a budget: the
// budget bounds the large allocations files size, and the headroom (half
// the budget and 256 MiB) covers the rest of the process, so that the
// garbage collector keeps the process near the budget without thrashing.
func softMemoryLimit(budget int64) int64 {
	const headroom = 256 << 20
	if budget > (1<<62)/3 {
		return 1<<63 - 1
	}
	return budget + budget/2 + headroom
}

// explain names the flag that sets a limit the error says was exceeded.
func (l *limits) explain(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, budget.ErrExceeded):
		return fmt.Errorf("%w (--max-memory %s sets the budget)", err, budget.Format(int64(l.maxMemory)))
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: over the time limit of %v (--timeout sets it)", err, l.timeout)
	}
	return err
}

// models are the options models are built with.
func (l *limits) models() models.Options {
	return models.Options{MaxMemory: int64(l.maxMemory)}
}

// codec is what the ONNX codec accepts: its default limits, within the
// budget.
func (l *limits) codec() onnxio.Limits {
	lim := onnxio.DefaultLimits
	lim.MaxMemory = int64(l.maxMemory)
	return lim
}

// readModel reads an ONNX file within the codec limits.
func (l *limits) readModel(path string) (*onnxpb.ModelProto, error) {
	return l.codec().ReadModel(path)
}

// files is what the .npy, .npz and .safetensors readers accept: their
// default limits, within the budget.
func (l *limits) files() tensorio.Limits {
	return tensorio.Limits{MaxMemory: int64(l.maxMemory)}
}

// readArray reads an input (.npy, or a .pb TensorProto) as an Array within
// the budget.
func (l *limits) readArray(path string) (*array.Array, error) {
	return attnrunlib.ReadArray(path, attnrunlib.WithMaxMemory(int64(l.maxMemory)))
}

// readTensor reads an input (.npy, or a .pb TensorProto) as a
// *tensor.Dense within the budget.
func (l *limits) readTensor(path string) (*tensor.Dense, error) {
	return attnrunlib.ReadTensor(path, attnrunlib.WithMaxMemory(int64(l.maxMemory)))
}

// loadAttnrun builds the model an attnrun-written file holds.
func (l *limits) loadAttnrun(m *onnxpb.ModelProto) (*models.Model, []lift.Output, error) {
	return lift.LoadWith(m, l.models())
}

// newGraph prepares a graph for the executor within the budget.
func (l *limits) newGraph(m *onnxpb.ModelProto) (*exec.Graph, error) {
	return exec.NewWithOptions(m, exec.Options{MaxMemory: int64(l.maxMemory)})
}

// runGraph runs a graph before the deadline.
func (l *limits) runGraph(g *exec.Graph, feeds map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	return g.RunContext(l.ctx, feeds)
}

// liftOptions sets the budget and the deadline in options for the lifter.
func (l *limits) liftOptions(o lift.Options) lift.Options {
	o.MaxMemory, o.Context = int64(l.maxMemory), l.ctx
	return o
}

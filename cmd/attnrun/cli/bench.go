package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/atomicfile"
	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

type benchFlags struct {
	shape    string
	iters    int
	warmup   int
	threads  int
	budget   time.Duration
	executor bool
	seed     uint64
	weights  string
	inputs   string // a test-data set whose inputs bench feeds
	profile  string // where the CPU profile of the timed passes goes
	memory   string // where the allocation profile goes
}

// maxBenchElems bounds the input --shape asks for (1 GiB of float32, the
// limit of models.Model.Profile, which counts the work), so a typo fails
// fast instead of exhausting memory.
const maxBenchElems = 1 << 28

// Bounds of the automatic iteration count (--iters 0).
const (
	minAutoIters = 3
	maxAutoIters = 1000
)

func newBenchCommand() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench MODEL.yaml|PRESET|FILE.onnx --shape B,T,D | --inputs DIR",
		Short: "Time the forward pass: latency, GFLOP/s and peak memory",
		Long: `bench builds the model (a YAML config with a seeded PyTorch-style
initialization or --weights, a preset with its weights, or an ONNX file),
feeds it a deterministic random float32 input of --shape (every model input
gets one), or with --inputs the inputs of an ONNX test-data set (input_K.pb,
of any type: token ids, attention masks, a KV cache), runs --warmup forward
passes, then times --iters more in eval mode.
--iters 0 (the default) times as many as fit in --time, at least 3 and at
most 1000 (the "runs" line says when the cap was reached).

An ONNX file written by attnrun export (it carries the model's config) runs
on attnrun's layers, other ONNX files on the graph executor; --executor runs
any model on the executor (configs and presets are exported first, as
attnrun export does).

It prints the latency (median, min, p10, p90, max), the work per forward
pass and the rate at the median, the peak memory (the process's peak RSS
while benchmarking, VmHWM, and the Go heap's peak), the allocations per
forward pass, and as the last line "median_ms=<float> gflops=<float>
allocs_op=<float> bytes_op=<float>".

Work counts 2 flops per multiply-add of the matrix products (projections,
Q·Kᵀ, weights·V), attention over all T×T query-key pairs even under a causal
mask, whose hidden half attnrun's kernels skip; elementwise work is not
counted (registry.FLOPCounter's rules). Models on attnrun's layers are
counted by their layers, as attnrun inspect shows them; ONNX graphs on their
MatMul and Gemm nodes, with shapes observed on one run. Either count runs
after the timing and the memory readings.

--threads sets GOMAXPROCS, which is also how many cores the kernels use.`,
		Example: `  attnrun bench testdata/bench/mha_768.yaml --shape 4,512,768 --threads 2
  attnrun bench model.onnx --shape 1,128,768 --iters 50 --warmup 5
  attnrun bench testdata/bench/mha_768.yaml --shape 4,512,768 --executor
  attnrun bench bert.onnx --inputs bert/test_data_set_0   # int64 ids and mask`,
		Args: oneArg("a model config, preset name or ONNX file"),
	}
	lim := addLimitFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := f.check(cmd); err != nil {
			return err
		}
		var shape []int
		if f.inputs == "" {
			var err error
			if shape, err = parseShape(f.shape); err != nil {
				return err
			}
		}
		return lim.run(func() error { return bench(cmd.OutOrStdout(), lim, args[0], shape, f) })
	}
	fl := cmd.Flags()
	fl.StringVar(&f.shape, "shape", "", "input shape B,T,D (batch, sequence length, width) of random float32 inputs; required unless --inputs")
	fl.StringVar(&f.profile, "cpuprofile", "", "write a CPU profile of the timed passes to this file (go tool pprof reads it)")
	fl.StringVar(&f.memory, "memprofile", "", "write an allocation profile to this file after the timed passes (go tool pprof -sample_index=alloc_space reads it)")
	fl.StringVar(&f.inputs, "inputs", "", "an ONNX test-data set folder whose input_K.pb files are the model's inputs, in order (any type)")
	fl.IntVar(&f.iters, "iters", 0, "timed forward passes; 0 times as many as fit in --time (3 to 1000)")
	fl.IntVar(&f.warmup, "warmup", 3, "untimed forward passes first (on the executor the second records a run plan and the third sizes its buffers)")
	fl.IntVar(&f.threads, "threads", 0, "GOMAXPROCS, the cores the kernels use; 0 keeps the default (all)")
	fl.DurationVar(&f.budget, "time", 2*time.Second, "how long to time with --iters 0")
	fl.BoolVar(&f.executor, "executor", false, "run on the ONNX graph executor instead of attnrun's layers")
	fl.Uint64Var(&f.seed, "seed", 0, "seed for the input and for weight initialization")
	fl.StringVar(&f.weights, "weights", "", "state dict (.npz or .safetensors) with a config's parameters")
	return cmd
}

// check reports misuse before any work is done.
func (f benchFlags) check(cmd *cobra.Command) error {
	switch {
	case f.iters < 0:
		return usageError{fmt.Errorf("--iters %d: want 0 (automatic) or more", f.iters)}
	case f.warmup < 0:
		return usageError{fmt.Errorf("--warmup %d: want 0 or more", f.warmup)}
	case f.threads < 0:
		return usageError{fmt.Errorf("--threads %d: want 0 (all cores) or more", f.threads)}
	case f.budget <= 0:
		return usageError{fmt.Errorf("--time %v: want a positive duration", f.budget)}
	case f.weights != "" && isONNX(cmd.Flags().Arg(0)):
		return usageError{errors.New("--weights applies to configs: an ONNX file carries its weights")}
	case f.inputs != "" && f.shape != "":
		return usageError{errors.New("--shape and --inputs: give one (--inputs feeds a data set's inputs, of their own shapes)")}
	case f.inputs != "" && f.executor && !isONNX(cmd.Flags().Arg(0)):
		// A config is exported for the width of --shape; a data set's
		// inputs do not say it.
		return usageError{errors.New("--inputs with --executor runs ONNX files: a config is exported for the width of --shape")}
	}
	return nil
}

// parseShape reads --shape B,T,D.
func parseShape(s string) ([]int, error) {
	bad := func(why string) error {
		return usageError{fmt.Errorf("--shape %q: %s; want B,T,D, three positive integers (batch, sequence length, width), e.g. 4,512,768", s, why)}
	}
	if s == "" {
		return nil, bad("missing")
	}
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return nil, bad(fmt.Sprintf("%d dimension(s)", len(parts)))
	}
	shape := make([]int, 3)
	elems := 1
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n <= 0 {
			return nil, bad(fmt.Sprintf("%q is not a positive integer", p))
		}
		if n > maxBenchElems || elems*n > maxBenchElems {
			return nil, bad(fmt.Sprintf("more than %d elements", maxBenchElems))
		}
		shape[i] = n
		elems *= n
	}
	return shape, nil
}

// benchTarget is what bench times: one forward pass on prepared inputs,
// and how much work that pass is.
type benchTarget struct {
	label  string // `"mha" on attnrun's layers`
	inputs []string
	// randomOK says whether random float32 inputs of --shape suit every
	// input: an error naming one that takes another type (token ids).
	randomOK func() error
	forward  func(inputs []*tensor.Dense) error
	// flops counts the work of a forward pass; it may run the model, so
	// bench calls it after the timing and the memory readings.
	flops func(inputs []*tensor.Dense) (flopCount, error)
}

func bench(stdout io.Writer, lim *limits, target string, shape []int, f benchFlags) error {
	if f.threads > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(f.threads))
	}
	bt, err := openBenchTarget(lim, target, shape, f)
	if err != nil {
		return err
	}
	var inputs []*tensor.Dense
	if f.inputs != "" {
		if inputs, err = dataSetInputs(lim, f.inputs, bt.inputs); err != nil {
			return err
		}
	} else {
		if err := bt.randomOK(); err != nil {
			return fmt.Errorf("%s: %w", target, err)
		}
		inputs = benchInputs(bt.inputs, shape, f.seed)
	}

	mem := startMemorySampler()
	for range f.warmup {
		if err := bt.forward(inputs); err != nil {
			mem.stop()
			return fmt.Errorf("%s: %w", target, err)
		}
	}
	if f.warmup > 0 {
		// The warm-up passes compute what the timed ones do: their heap
		// peak is the pass's, and a sampler waking every 2 ms would slow
		// short passes by up to a fifth (it takes a core from the kernels).
		mem.stopSampling("the warm-up passes")
	}
	stopProfile, err := startCPUProfile(f.profile)
	if err != nil {
		mem.stop()
		return err
	}
	allocs0 := readAllocs()
	times, err := timeForward(bt, inputs, f.iters, f.budget)
	allocs := readAllocs().minus(allocs0)
	peak := mem.stop()
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err == nil && f.memory != "" {
		err = writeAllocProfile(f.memory)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	work, err := bt.flops(inputs)
	if err != nil {
		return fmt.Errorf("%s: counting flops: %w", target, err)
	}

	st := summarize(times)
	w := bufio.NewWriter(stdout)
	fmt.Fprintf(w, "model    %s\n", bt.label)
	if f.inputs != "" {
		fmt.Fprintf(w, "input    %s, from %s\n", describeInputs(bt.inputs, inputs), f.inputs)
	} else {
		fmt.Fprintf(w, "input    %s float32 (%d, %d, %d), seed %d\n", strings.Join(bt.inputs, ", "), shape[0], shape[1], shape[2], f.seed)
	}
	fmt.Fprintf(w, "threads  %d (GOMAXPROCS), kernels %s\n", runtime.GOMAXPROCS(0), kernels.ISA())
	how := ""
	switch {
	case f.iters == 0 && len(times) == maxAutoIters:
		how = fmt.Sprintf(" (automatic: the most --iters 0 times, %d, took less than --time %v; --iters N times more)", maxAutoIters, f.budget)
	case f.iters == 0:
		how = fmt.Sprintf(" (automatic: --time %v)", f.budget)
	}
	fmt.Fprintf(w, "runs     %d warm-up, %d timed%s\n", f.warmup, len(times), how)
	fmt.Fprintf(w, "latency  median %.3f ms, min %.3f, p10 %.3f, p90 %.3f, max %.3f ms\n",
		ms(st.median), ms(st.min), ms(st.p10), ms(st.p90), ms(st.max))
	fmt.Fprintf(w, "work     %s\n", work.describe())
	gflops := work.total / st.median.Seconds() / 1e9
	fmt.Fprintf(w, "speed    %.2f GFLOP/s at the median\n", gflops)
	fmt.Fprintf(w, "memory   %s\n", peak.describe())
	objects, bytes := float64(allocs.objects)/float64(len(times)), float64(allocs.bytes)/float64(len(times))
	fmt.Fprintf(w, "allocs   %.1f objects, %s per forward pass\n", objects, byteSize(bytes))
	fmt.Fprintf(w, "median_ms=%.4f gflops=%.3f allocs_op=%.1f bytes_op=%.0f\n", ms(st.median), gflops, objects, bytes)
	return w.Flush()
}

// openBenchTarget builds the model or graph and the closures that run and
// count it.
func openBenchTarget(lim *limits, target string, shape []int, f benchFlags) (*benchTarget, error) {
	if isONNX(target) {
		m, err := lim.readModel(target)
		if err != nil {
			return nil, err
		}
		if lift.IsAttnrun(m) && !f.executor {
			model, _, err := lim.loadAttnrun(m)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", target, err)
			}
			return layersTarget(lim, model, target+" (attnrun export)"), nil
		}
		return graphTarget(lim, m, target, func() (*onnxpb.ModelProto, error) { return lim.readModel(target) })
	}
	src, err := openSourceWith(lim, target, sourceOptions{weights: f.weights, seed: f.seed, seedGiven: true}) // timing needs no real weights
	if err != nil {
		return nil, err
	}
	if !f.executor {
		return layersTarget(lim, src.model, ""), nil
	}
	in := src.model.Config().Inputs
	widths := make(map[string]int, len(in))
	for _, name := range in {
		widths[name] = shape[2]
	}
	exportGraph := func() (*onnxpb.ModelProto, error) {
		return export.Model(src.model, export.Options{Widths: widths})
	}
	m, err := exportGraph()
	if err != nil {
		return nil, err
	}
	return graphTarget(lim, m, fmt.Sprintf("%q exported to ONNX", src.model.Name()), exportGraph)
}

// layersTarget runs a model on attnrun's layers, in eval mode, in a
// models.Session, as a server would: the passes reuse their memory.
func layersTarget(lim *limits, m *models.Model, from string) *benchTarget {
	label := fmt.Sprintf("%q on attnrun's layers", m.Name())
	if from != "" {
		label += ", from " + from
	}
	session, run := m.NewSession(), &registry.Run{Context: lim.ctx}
	cfg := m.Config()
	return &benchTarget{
		label:  label,
		inputs: cfg.Inputs,
		randomOK: func() error {
			for i, name := range cfg.Inputs {
				if dt := cfg.InputDtype(i); dt != tensor.Float32 {
					return fmt.Errorf("input %q is %s: bench feeds float32 inputs of --shape; --inputs DIR feeds a test-data set's", name, dt)
				}
			}
			return nil
		},
		forward: func(inputs []*tensor.Dense) error {
			_, err := session.Forward(run, inputs...)
			return err
		},
		flops: func(inputs []*tensor.Dense) (flopCount, error) {
			shapes := make([]tensor.Shape, len(inputs))
			for i, x := range inputs {
				shapes[i] = x.Shape()
			}
			return modelFlops(m, shapes...)
		},
	}
}

// graphTarget runs an ONNX graph on the executor. The model is not kept:
// counting the work loads it again, so that the memory readings show the
// executor alone.
func graphTarget(lim *limits, m *onnxpb.ModelProto, label string, load func() (*onnxpb.ModelProto, error)) (*benchTarget, error) {
	g, err := lim.newGraph(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	var names []string
	for _, in := range g.Inputs() {
		names = append(names, in.Name)
	}
	feeds := func(inputs []*tensor.Dense) map[string]*tensor.Dense {
		fm := make(map[string]*tensor.Dense, len(names))
		for i, name := range names {
			fm[name] = inputs[i]
		}
		return fm
	}
	var fed map[string]*tensor.Dense // the feeds of fedFrom, built once
	var fedFrom []*tensor.Dense
	return &benchTarget{
		label:  label + " on attnrun's graph executor",
		inputs: names,
		randomOK: func() error {
			for _, in := range g.Inputs() {
				if in.DType != exec.Float32 {
					return fmt.Errorf("input %s: bench feeds float32 inputs of --shape, this one is %s; --inputs DIR feeds a test-data set's", in, in.DType)
				}
			}
			return nil
		},
		forward: func(inputs []*tensor.Dense) error {
			if fed == nil || !slices.Equal(fedFrom, inputs) { // the same inputs pass after pass
				fed, fedFrom = feeds(inputs), slices.Clone(inputs)
			}
			_, err := lim.runGraph(g, fed)
			return err
		},
		flops: func(inputs []*tensor.Dense) (flopCount, error) {
			m, err := load()
			if err != nil {
				return flopCount{}, err
			}
			return graphFlops(lim, m, feeds(inputs))
		},
	}, nil
}

// benchInputs makes one standard-normal input of the shape per model input,
// the same for the same seed.
func benchInputs(names []string, shape []int, seed uint64) []*tensor.Dense {
	rng := rand.New(rand.NewPCG(seed, 0xbe9c4))
	out := make([]*tensor.Dense, len(names))
	for i := range names {
		data := make([]float32, shape[0]*shape[1]*shape[2])
		for j := range data {
			data[j] = float32(rng.NormFloat64())
		}
		out[i] = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	}
	return out
}

// dataSetInputs reads the inputs of the test-data set dir, one per model
// input, in order.
func dataSetInputs(lim *limits, dir string, names []string) ([]*tensor.Dense, error) {
	arrays, _, err := lim.codec().ReadDataSetArrays(dir)
	if err != nil {
		return nil, fmt.Errorf("--inputs: %w", err)
	}
	if len(arrays) != len(names) {
		return nil, fmt.Errorf("--inputs %s: %d input file(s), the model takes %d (%s)", dir, len(arrays), len(names), strings.Join(names, ", "))
	}
	inputs := make([]*tensor.Dense, len(arrays))
	for i, a := range arrays {
		if inputs[i], err = a.Dense(); err != nil {
			return nil, fmt.Errorf("--inputs %s: input_%d.pb for %q: %w", dir, i, names[i], err)
		}
	}
	return inputs, nil
}

// describeInputs lists inputs with their types and shapes: "input_ids
// int64 (1, 32), attention_mask int64 (1, 32)".
func describeInputs(names []string, inputs []*tensor.Dense) string {
	parts := make([]string, len(inputs))
	for i, x := range inputs {
		parts[i] = fmt.Sprintf("%s %s %s", names[i], x.Dtype(), models.FormatShape(x.Shape()))
	}
	return strings.Join(parts, ", ")
}

// startCPUProfile starts Go's CPU profiler writing to path (nothing when
// path is empty) and returns what stops it and writes the file in place
// (atomically, so a failed run leaves no half profile).
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}, nil
}

// writeAllocProfile writes Go's allocation profile (every allocation since
// the program started, sampled) to path, in place.
func writeAllocProfile(path string) error {
	var buf bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&buf, 0); err != nil {
		return fmt.Errorf("--memprofile %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return nil
}

// timeForward times iters forward passes, or with iters 0 as many as fit
// in budget, between minAutoIters and maxAutoIters.
func timeForward(bt *benchTarget, inputs []*tensor.Dense, iters int, budget time.Duration) ([]time.Duration, error) {
	var times []time.Duration
	start := time.Now()
	for {
		if iters > 0 && len(times) == iters {
			return times, nil
		}
		if iters == 0 && len(times) >= minAutoIters && (time.Since(start) >= budget || len(times) == maxAutoIters) {
			return times, nil
		}
		t0 := time.Now()
		if err := bt.forward(inputs); err != nil {
			return nil, err
		}
		times = append(times, time.Since(t0))
	}
}

// latencyStats summarizes the timed runs.
type latencyStats struct {
	min, p10, median, p90, max time.Duration
}

func summarize(times []time.Duration) latencyStats {
	s := slices.Clone(times)
	slices.Sort(s)
	return latencyStats{min: s[0], p10: quantile(s, 0.1), median: quantile(s, 0.5), p90: quantile(s, 0.9), max: s[len(s)-1]}
}

// quantile interpolates linearly between the closest ranks of sorted
// values (numpy's default), so that the median of an even count is the
// mean of the middle two.
func quantile(sorted []time.Duration, q float64) time.Duration {
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	frac := pos - float64(i)
	return sorted[i] + time.Duration(frac*float64(sorted[i+1]-sorted[i]))
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

func mib(bytes float64) string { return fmt.Sprintf("%.1f MiB", bytes/(1<<20)) }

// byteSize formats a size in the unit that shows it best.
func byteSize(bytes float64) string {
	switch {
	case bytes >= 1<<20:
		return mib(bytes)
	case bytes >= 1<<10:
		return fmt.Sprintf("%.1f KiB", bytes/(1<<10))
	}
	return fmt.Sprintf("%.0f B", bytes)
}

// flopSize formats a flop count in G, M or plain flops.
func flopSize(f float64) string {
	switch {
	case f >= 1e9:
		return fmt.Sprintf("%.3f GFLOP", f/1e9)
	case f >= 1e6:
		return fmt.Sprintf("%.3f MFLOP", f/1e6)
	}
	return fmt.Sprintf("%.0f FLOP", f)
}

// flopCount is the work of one forward pass: 2 flops per multiply-add of
// the matrix products, attention over all T×T pairs.
type flopCount struct {
	total  float64
	source string   // how it was counted
	missed []string // what has work that was not counted
}

func (c flopCount) describe() string {
	s := fmt.Sprintf("%s per forward pass (matrix products, attention over all T×T pairs), %s", flopSize(c.total), c.source)
	if len(c.missed) > 0 {
		s += "; not counted: " + strings.Join(c.missed, ", ")
	}
	return s
}

// modelFlops counts the work of a model's layers for the shapes of its
// inputs, as `attnrun inspect` does (models.Model.Profile,
// registry.FLOPCounter).
func modelFlops(m *models.Model, shapes ...tensor.Shape) (flopCount, error) {
	p, err := m.Profile(shapes...)
	if err != nil {
		return flopCount{}, err
	}
	return flopCount{total: float64(p.FLOPs), source: "counted by the layers as attnrun inspect does", missed: p.Uncounted}, nil
}

// graphFlops counts an ONNX graph's MatMul and Gemm nodes with the shapes
// of one run (exec.CountFLOPs).
func graphFlops(lim *limits, m *onnxpb.ModelProto, feeds map[string]*tensor.Dense) (flopCount, error) {
	n, err := exec.CountFLOPs(lim.ctx, m, feeds, exec.Options{MaxMemory: int64(lim.maxMemory)})
	return flopCount{total: n.FLOPs, source: "counted on the graph's MatMul and Gemm nodes", missed: n.Uncounted}, err
}

// allocCount is the heap allocation counters of runtime/metrics.
type allocCount struct{ objects, bytes uint64 }

func (a allocCount) minus(b allocCount) allocCount {
	return allocCount{a.objects - b.objects, a.bytes - b.bytes}
}

func readAllocs() allocCount {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return allocCount{s[0].Value.Uint64(), s[1].Value.Uint64()}
}

// memorySampler records the peak of the Go heap while the benchmark runs;
// the kernel records the peak RSS (VmHWM), reset when sampling starts.
type memorySampler struct {
	done      chan struct{}
	wg        sync.WaitGroup
	rssReset  bool
	rssBefore uint64 // RSS when the peak was reset
	heap      uint64 // peak bytes in heap objects (live and not yet swept)
	total     uint64 // peak of all memory the Go runtime has mapped
	sampled   string // the passes the heap was sampled over, once it stopped
}

// memorySampleEvery is how often the sampler reads runtime/metrics: often
// enough to catch a forward pass's temporary buffers, cheap enough (a few
// microseconds, no stop-the-world) not to disturb the timing.
const memorySampleEvery = 2 * time.Millisecond

// startMemorySampler returns memory to the OS, resets the peak RSS to the
// current RSS (so it reflects the model, its input and the forward passes,
// not the start-up) and starts sampling the Go heap.
func startMemorySampler() *memorySampler {
	runtime.GC()
	debug.FreeOSMemory()
	s := &memorySampler{done: make(chan struct{}), rssReset: resetPeakRSS() == nil}
	s.rssBefore, _ = statusBytes("VmRSS")
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
	read := func() {
		metrics.Read(samples)
		s.heap = max(s.heap, samples[0].Value.Uint64())
		s.total = max(s.total, samples[1].Value.Uint64())
	}
	read()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(memorySampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				read()
				return
			case <-tick.C:
				read()
			}
		}
	}()
	return s
}

// memoryPeak is what memorySampler saw.
type memoryPeak struct {
	rss, rssBefore, heap, total uint64
	sampled                     string // the passes heap and total were sampled over
	rssReset                    bool
	rssErr                      error
}

func (s *memorySampler) stop() memoryPeak {
	s.stopSampling("the timed passes")
	rss, err := statusBytes("VmHWM")
	return memoryPeak{rss: rss, rssBefore: s.rssBefore, heap: s.heap, total: s.total, sampled: s.sampled, rssReset: s.rssReset, rssErr: err}
}

// stopSampling ends the Go heap sampling, which covered the passes over
// (a description for the report); later calls change nothing. The peak
// RSS, a counter of the kernel's, still covers every pass until stop.
func (s *memorySampler) stopSampling(over string) {
	if s.sampled != "" {
		return
	}
	s.sampled = over
	close(s.done)
	s.wg.Wait()
}

func (p memoryPeak) describe() string {
	var rss string
	switch {
	case p.rssErr != nil:
		rss = fmt.Sprintf("peak RSS unknown (%v)", p.rssErr)
	case p.rssReset:
		rss = fmt.Sprintf("peak RSS %s (VmHWM since the warm-up began, at %s)", mib(float64(p.rss)), mib(float64(p.rssBefore)))
	default:
		rss = "peak RSS " + mib(float64(p.rss)) + " (VmHWM since the process started)"
	}
	return fmt.Sprintf("%s, Go heap peak %s, Go runtime total peak %s (sampled over %s)", rss, mib(float64(p.heap)), mib(float64(p.total)), p.sampled)
}

// resetPeakRSS sets the process's peak RSS (VmHWM) to its current RSS
// (Linux 4.0+, proc(5) clear_refs).
func resetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// statusBytes reads a size line of /proc/self/status ("VmHWM", the peak
// resident set size, or "VmRSS", the current one), in bytes.
func statusBytes(key string) (uint64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte(key+":"))
		if !ok {
			continue
		}
		fields := strings.Fields(string(rest))
		if len(fields) != 2 || fields[1] != "kB" {
			break
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			break
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s line in /proc/self/status", key)
}

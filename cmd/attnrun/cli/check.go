package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"

	"github.com/spf13/cobra"

	attnrunlib "github.com/attnrun/attnrun"
	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
)

type checkFlags struct {
	data       string
	rtol, atol float64
	executor   bool
}

func newCheckCommand() *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check FILE.onnx|PRESET",
		Short: "Compare outputs with reference data (PyTorch's)",
		Long: `check runs a model on reference inputs and compares every output with the
reference outputs, elementwise as numpy.allclose does:
|got - want| <= atol + rtol*|want|. Integer and bool outputs must be equal,
empty ones of equal shape; float16, bfloat16 and float8 outputs are compared
at no less than their type's epsilon (2^-10 for float16) for both tolerances.

For an ONNX file the reference data are ONNX test-data sets (test_data_set_N/
input_K.pb, output_K.pb) in --data, by default the file's own directory; --data
may also name one set. A file attnrun wrote (attnrun export, attnrun import)
runs on attnrun's layers, rebuilt from its metadata; --executor runs its graph
instead. For a preset the reference is the PyTorch output embedded with it.

A data set FIXTURE/test_data_set_N with a float64 reference beside it,
FIXTURE/float64/test_data_set_N (the outputs of a float64 copy of the model,
as testdata/pytorch2/gen.py writes them for models on which PyTorch float32
itself strays from the exact result), is judged by the float64 rule of
docs/crosscheck.md where an output misses the tolerances: it passes when it
is no further from float64 than twice PyTorch float32's own distance plus
1e-6, and its line says so with the three distances.

It prints the largest absolute and relative error per output, then a summary
line, and exits 1 if any output is out of tolerance. A data set that cannot be
read or run fails without stopping the others. Over ONNX test-data sets a
terminal shows a progress bar on stderr, and a line on stderr gives the number
of sets, the time taken and how many failed.`,
		Example: `  attnrun check testdata/onnx/multihead_opset17_dynamic/model.onnx
  attnrun check model.onnx --data test_data_set_0 --rtol 1e-4 --atol 1e-5
  attnrun check lifted.onnx --data testdata/onnx/multihead_opset17_dynamic
  attnrun check model.onnx --data many_sets/     # progress bar on a terminal
  attnrun check seed-mha-wrapper`,
		Args: oneArg("an ONNX file or a preset name"),
	}
	lim := addLimitFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return lim.run(func() error {
			if isONNX(args[0]) {
				return checkDataSets(cmd.OutOrStdout(), cmd.ErrOrStderr(), lim, args[0], f)
			}
			return checkPreset(cmd.OutOrStdout(), lim, args[0], f)
		})
	}
	cmd.Flags().StringVar(&f.data, "data", "", "directory of test_data_set_N folders, or one set (default: the model's directory)")
	cmd.Flags().Float64Var(&f.rtol, "rtol", 1e-5, "relative tolerance")
	cmd.Flags().Float64Var(&f.atol, "atol", 1e-6, "absolute tolerance")
	cmd.Flags().BoolVar(&f.executor, "executor", false, "run a file attnrun wrote on its ONNX graph, not on attnrun's layers")
	return cmd
}

// errMismatch is returned when a check ran but found outputs out of tolerance.
type errMismatch struct{ failed, total int }

func (e errMismatch) Error() string {
	return fmt.Sprintf("%d of %d output(s) out of tolerance", e.failed, e.total)
}

// tally counts compared outputs and prints one line for each.
type tally struct {
	w              io.Writer
	passed, failed int
	rtol, atol     float64
}

func (t *tally) add(where, output string, got, want, truth *array.Array) {
	c, err := compareOutput(got, want, t.rtol, t.atol)
	if err == nil && !c.OK() && truth != nil {
		if rule, ok := float64Rule(got, want, truth); ok {
			t.passed++
			fmt.Fprintf(t.w, "%s  %s  ok    %s (%g/%g against the reference: max_abs=%.3g max_rel=%.3g)\n",
				where, output, rule, c.RTol, c.ATol, c.MaxAbs, c.MaxRel)
			return
		}
	}
	switch {
	case err != nil:
		t.failed++
		fmt.Fprintf(t.w, "%s  %s  FAIL  %v\n", where, output, err)
	case !c.OK() && c.Exact:
		t.failed++
		fmt.Fprintf(t.w, "%s  %s  FAIL  %d of %d elements differ (%s: exact; first at flat index %d: %s, want %s)\n",
			where, output, c.Mismatches, want.Len(), want.DType, c.Worst, element(got, c.Worst), element(want, c.Worst))
	case !c.OK():
		t.failed++
		fmt.Fprintf(t.w, "%s  %s  FAIL  max_abs=%.3g max_rel=%.3g (rtol %g, atol %g; worst at flat index %d)\n",
			where, output, c.MaxAbs, c.MaxRel, c.RTol, c.ATol, c.Worst)
	default:
		t.passed++
		fmt.Fprintf(t.w, "%s  %s  ok    max_abs=%.3g max_rel=%.3g%s\n", where, output, c.MaxAbs, c.MaxRel, t.note(want, c))
	}
}

// The float64 rule (docs/crosscheck.md): where PyTorch float32 itself is
// off the exact result, a float32 output may be as far from float64 as twice
// PyTorch's own distance, plus float64RuleSlack.
const (
	float64RuleFactor = 2.0
	float64RuleSlack  = 1e-6
)

// float64Rule measures a float32 output that missed the tolerances against
// the float64 reference: whether it keeps the rule, and a line that gives
// its distance from float64, the reference's and the bound.
func float64Rule(got, want, truth *array.Array) (string, bool) {
	if got.DType != array.Float32 || want.DType != array.Float32 {
		return "", false
	}
	mine, err := attnrunlib.CompareArrays(got, truth, 0, 0)
	if err != nil {
		return "", false
	}
	theirs, err := attnrunlib.CompareArrays(want, truth, 0, 0)
	if err != nil {
		return "", false
	}
	bound := float64RuleFactor*theirs.MaxAbs + float64RuleSlack
	return fmt.Sprintf("float64 rule: %.3g from float64 (the reference %.3g), bound %.3g", mine.MaxAbs, theirs.MaxAbs, bound),
		mine.MaxAbs <= bound
}

// compareOutput compares an output with its reference as
// attnrunlib.CompareArrays does, once their element types agree: an output
// of another type than the reference's is wrong however close its values.
func compareOutput(got, want *array.Array, rtol, atol float64) (attnrunlib.Comparison, error) {
	if got.DType != want.DType {
		return attnrunlib.Comparison{}, fmt.Errorf("dtype %s, want %s", got.DType, want.DType)
	}
	return attnrunlib.CompareArrays(got, want, rtol, atol)
}

// element formats element i of a for reports.
func element(a *array.Array, i int) string {
	return fmt.Sprint(reflect.ValueOf(a.Data).Index(i).Interface())
}

// note says how an ok output was compared when that is not the flags'
// tolerance: exactly, by shape alone, or at a narrow type's own.
func (t *tally) note(want *array.Array, c attnrunlib.Comparison) string {
	switch {
	case want.Len() == 0:
		return fmt.Sprintf(" (empty %s %s)", want.DType, array.FormatShape(want.Shape))
	case c.Exact:
		return fmt.Sprintf(" (%s, exact)", want.DType)
	case c.RTol != t.rtol || c.ATol != t.atol:
		return fmt.Sprintf(" (%s: rtol %.3g, atol %.3g)", want.DType, c.RTol, c.ATol)
	}
	return ""
}

// fail counts the outputs of a data set that could not be compared at all.
func (t *tally) fail(where string, outputs int, err error) {
	t.failed += outputs
	fmt.Fprintf(t.w, "%s  FAIL  %v\n", where, err)
}

func (t *tally) result() error {
	fmt.Fprintf(t.w, "%d passed, %d failed\n", t.passed, t.failed)
	if t.failed > 0 {
		return errMismatch{t.failed, t.passed + t.failed}
	}
	return nil
}

func checkPreset(w io.Writer, lim *limits, name string, f checkFlags) error {
	if kind, err := resolveModel(name); err != nil || kind != modelPreset {
		return usageError{fmt.Errorf("check takes an ONNX file or a preset name; %q is a config (run it with attnrun run)", name)}
	}
	src, err := openSource(lim, name, "", 0)
	if err != nil {
		return err
	}
	got, err := presetResult(src)
	if err != nil {
		return err
	}
	want, err := src.preset.Expected()
	if err != nil {
		return err
	}
	g, err := array.FromDense(got)
	if err != nil {
		return err
	}
	e, err := array.FromDense(want)
	if err != nil {
		return err
	}
	t := &tally{w: w, rtol: f.rtol, atol: f.atol}
	t.add(name, "expected.npy", g, e, nil)
	return t.result()
}

// checkDataSets compares an ONNX file's outputs with its test-data sets,
// with progress on stderr: a bar on a terminal, and a summary line.
func checkDataSets(stdout, stderr io.Writer, lim *limits, path string, f checkFlags) error {
	file, err := openONNX(stderr, lim, path, f.executor)
	if err != nil {
		return err
	}
	dataDir := f.data
	if dataDir == "" {
		dataDir = filepath.Dir(path)
	}
	dirs, err := onnxio.DataSetDirs(dataDir)
	var unreadable *fs.PathError
	if err != nil && !errors.As(err, &unreadable) {
		dirs, err = nil, nil // the folder holds no data set
	}
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		return noTestData(path, dataDir, f.data != "")
	}
	if file.lifted != nil {
		fmt.Fprintf(stdout, "%s: attnrun model %q, run on attnrun layers (--executor runs the graph)\n", path, file.lifted.model.Name())
	}
	t := &tally{w: stdout, rtol: f.rtol, atol: f.atol}
	p := startProgress(stderr, len(dirs), "data set")
	for _, dir := range dirs {
		failedBefore := t.failed
		got, want, err := runDataSet(file, path, dir)
		p.hide()
		if err != nil && lim.ctx.Err() != nil {
			// Past the deadline, every set left would fail the same way.
			p.advance(true)
			p.finish()
			return err
		}
		if err != nil {
			t.fail(filepath.Base(dir), len(file.outputNames()), lim.explain(err))
		}
		truth, err := readFloat64Reference(file, dir, len(want))
		if err != nil {
			t.fail(filepath.Base(dir), len(want), err)
			want = nil
		}
		for i := range want {
			t.add(filepath.Base(dir), fmt.Sprintf("output %d %q", i, file.outputNames()[i]), got[i], want[i], truth[i])
		}
		p.advance(t.failed > failedBefore)
	}
	p.finish()
	return t.result()
}

// runDataSet reads one test-data set and runs the file on its inputs,
// returning the outputs and the expected ones. Both are Arrays: a data set
// holds what *tensor.Dense cannot (tensors of zero elements, float16).
func runDataSet(file *onnxFile, path, dir string) (got, want []*array.Array, err error) {
	inputs, want, err := file.lim.codec().ReadDataSetArrays(dir)
	if err != nil {
		return nil, nil, err
	}
	names := file.outputNames()
	if len(inputs) != file.numInputs() || len(want) != len(names) {
		return nil, nil, fmt.Errorf("%s: %d inputs and %d outputs, model %s has %d and %d",
			dir, len(inputs), len(want), path, file.numInputs(), len(names))
	}
	if got, err = file.runArrays(inputs); err != nil {
		return nil, nil, fmt.Errorf("%s on %s: %w", path, dir, err)
	}
	if len(got) != len(want) {
		return nil, nil, fmt.Errorf("%s on %s: %d outputs, want %d", path, dir, len(got), len(want))
	}
	return got, want, nil
}

// readFloat64Reference reads the float64 outputs that stand beside the
// data set dir (float64/test_data_set_N in its parent), one per output, or
// as many nils when there are none.
func readFloat64Reference(file *onnxFile, dir string, outputs int) ([]*array.Array, error) {
	truthDir := filepath.Join(filepath.Dir(dir), "float64", filepath.Base(dir))
	if _, err := os.Stat(truthDir); err != nil {
		return make([]*array.Array, outputs), nil
	}
	_, truth, err := file.lim.codec().ReadDataSetArrays(truthDir)
	if err != nil {
		return nil, fmt.Errorf("float64 reference: %w", err)
	}
	if len(truth) != outputs {
		return nil, fmt.Errorf("float64 reference %s: %d outputs, the data set has %d", truthDir, len(truth), outputs)
	}
	return truth, nil
}

// noTestData explains a check that found no reference data: where it
// looked, what it looks for, and how to make some.
func noTestData(path, dir string, given bool) error {
	where := fmt.Sprintf("next to it (in %s)", dir)
	if given {
		where = "in --data " + dir
	}
	return fmt.Errorf("%s: no test data %s (no test_data_set_N folders, nor input_K.pb files): check compares with ONNX test-data sets, folders test_data_set_N holding input_K.pb and output_K.pb "+
		"(PyTorch's outputs, as testdata/torch/export_onnx.py writes them); give their folder with --data DIR. "+
		"For a file attnrun import wrote, that is the folder of the file it came from", path, where)
}

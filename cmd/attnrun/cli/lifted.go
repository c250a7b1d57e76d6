package cli

import (
	"fmt"
	"io"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/registry"
)

// liftedFile is an ONNX file attnrun wrote (attnrun export, attnrun
// import): a model of attnrun layers with its weights, which run and check
// execute on the layers themselves rather than on the graph.
type liftedFile struct {
	model   *models.Model
	outputs []lift.Output
}

// onnxFile is an ONNX file ready to run: on attnrun's layers when attnrun
// wrote it, on the graph executor otherwise (or when executor is set).
type onnxFile struct {
	graph  *exec.Graph
	lifted *liftedFile
	lim    *limits
}

// openONNX reads an ONNX file once and prepares it for run and check,
// within the command's limits. What the executor accepts only because ONNX
// Runtime does (Graph.Warnings) is printed to warn.
func openONNX(warn io.Writer, lim *limits, path string, executor bool) (*onnxFile, error) {
	m, err := lim.readModel(path)
	if err != nil {
		return nil, err
	}
	if !executor && lift.IsAttnrun(m) {
		model, outputs, err := lim.loadAttnrun(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (run it on the graph with --executor)", path, err)
		}
		return &onnxFile{lifted: &liftedFile{model: model, outputs: outputs}, lim: lim}, nil
	}
	g, err := lim.newGraph(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, w := range g.Warnings() {
		fmt.Fprintf(warn, "attnrun: warning: %s: %s\n", path, w)
	}
	return &onnxFile{graph: g, lim: lim}, nil
}

// inputNames lists what the file takes, for messages.
func (f *onnxFile) inputNames() string {
	if f.graph != nil {
		return describeInfos(f.graph.Inputs())
	}
	return fmt.Sprint(f.lifted.model.Config().Inputs)
}

// numInputs is how many tensors a run needs.
func (f *onnxFile) numInputs() int {
	if f.graph != nil {
		return len(f.graph.Inputs())
	}
	return len(f.lifted.model.Config().Inputs)
}

// outputNames names the outputs, in order.
func (f *onnxFile) outputNames() []string {
	var names []string
	if f.graph != nil {
		for _, o := range f.graph.Outputs() {
			names = append(names, o.Name)
		}
		return names
	}
	for _, o := range f.lifted.outputs {
		names = append(names, o.Name)
	}
	return names
}

// run computes every output from the inputs, given in order.
func (f *onnxFile) run(inputs []*tensor.Dense) ([]*tensor.Dense, error) {
	if f.graph != nil {
		feeds := map[string]*tensor.Dense{}
		for i, info := range f.graph.Inputs() {
			feeds[info.Name] = inputs[i]
		}
		outs, err := f.lim.runGraph(f.graph, feeds)
		if err != nil {
			return nil, err
		}
		var res []*tensor.Dense
		for _, o := range f.graph.Outputs() {
			res = append(res, outs[o.Name])
		}
		return res, nil
	}
	args := make([]*tensor.Dense, len(inputs))
	for i, x := range inputs {
		var err error
		if args[i], err = lift.ModelInput(x); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
	}
	return lift.RunOutputs(f.lifted.model, f.lifted.outputs, &registry.Run{Context: f.lim.ctx}, args)
}

// runArrays computes every output from the inputs, given in order, as
// Arrays: the graph executor carries tensors of zero elements and float16
// values; attnrun's layers take and give *tensor.Dense.
func (f *onnxFile) runArrays(inputs []*array.Array) ([]*array.Array, error) {
	if f.graph != nil {
		feeds := map[string]*array.Array{}
		for i, info := range f.graph.Inputs() {
			feeds[info.Name] = inputs[i]
		}
		outs, err := f.graph.RunArrays(f.lim.ctx, feeds)
		if err != nil {
			return nil, err
		}
		res := make([]*array.Array, len(f.graph.Outputs()))
		for i, o := range f.graph.Outputs() {
			res[i] = outs[o.Name]
		}
		return res, nil
	}
	dense := make([]*tensor.Dense, len(inputs))
	for i, a := range inputs {
		d, err := a.Dense()
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		dense[i] = d
	}
	outs, err := f.run(dense)
	if err != nil {
		return nil, err
	}
	res := make([]*array.Array, len(outs))
	for i, d := range outs {
		if res[i], err = array.FromDense(d); err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
	}
	return res, nil
}

// runONNX executes an ONNX file on --input tensors given in the order of
// its inputs, and prints the outputs or writes them (writeOutputs).
func runONNX(stdout, stderr io.Writer, lim *limits, path string, executor bool, inputPaths, outputPaths []string) error {
	f, err := openONNX(stderr, lim, path, executor)
	if err != nil {
		return err
	}
	if len(inputPaths) != f.numInputs() {
		return usageError{fmt.Errorf("%s takes %d input(s) (%s), got %d --input", path, f.numInputs(), f.inputNames(), len(inputPaths))}
	}
	names := f.outputNames()
	dest, err := outputDestination(path, names, outputPaths)
	if err != nil {
		return err
	}
	var inputs []*array.Array
	for _, p := range inputPaths {
		a, err := lim.readArray(p)
		if err != nil {
			return err
		}
		inputs = append(inputs, a)
	}
	outs, err := f.runArrays(inputs)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return dest.write(stdout, names, outs)
}

package cli

import (
	"fmt"
	"io"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
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

// runONNX executes an ONNX file on --input tensors given in the order of
// its inputs, and prints or writes the outputs.
func runONNX(stdout, stderr io.Writer, lim *limits, path string, executor bool, inputPaths, outputPaths []string) error {
	f, err := openONNX(stderr, lim, path, executor)
	if err != nil {
		return err
	}
	if len(inputPaths) != f.numInputs() {
		return usageError{fmt.Errorf("%s takes %d input(s) (%s), got %d --input", path, f.numInputs(), f.inputNames(), len(inputPaths))}
	}
	var inputs []*tensor.Dense
	for _, p := range inputPaths {
		t, err := lim.readTensor(p)
		if err != nil {
			return err
		}
		inputs = append(inputs, t)
	}
	outs, err := f.run(inputs)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	names := f.outputNames()
	if len(outputPaths) > 0 && len(outputPaths) != len(names) {
		return usageError{fmt.Errorf("%s has %d output(s) (%v), got %d --output", path, len(names), names, len(outputPaths))}
	}
	for i, out := range outs {
		if len(outputPaths) > 0 {
			if err := tensorio.WriteNPYFile(outputPaths[i], out); err != nil {
				return err
			}
			continue
		}
		if len(outs) > 1 {
			fmt.Fprintf(stdout, "%s:\n", names[i])
		}
		fmt.Fprintln(stdout, formatDense(out))
	}
	return nil
}

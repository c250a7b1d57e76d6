package exec_test

import (
	osexec "os/exec"
	"strings"
	"testing"
)

// The executor and the codec under it run any ONNX file; they must not drag
// in what builds attnrun models: the YAML parser, models, layers, the
// registry, PyTorch's RNG replica. Linking them would make every program
// that only runs graphs pay for them, and would let model code leak into
// the executor unnoticed.
func TestExecutorDependencies(t *testing.T) {
	goTool, err := osexec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: cannot list the executor's dependencies")
	}
	const module = "github.com/attnrun/attnrun/"
	for _, c := range []struct {
		dir, name string
		forbidden []string // packages of this module, with their subpackages
	}{
		{".", "onnxio/exec", []string{"models", "internal/torchrand"}},
		{"..", "onnxio", []string{"models", "internal/torchrand", "layers", "registry"}},
	} {
		cmd := osexec.Command(goTool, "list", "-deps", ".")
		cmd.Dir = c.dir
		out, err := cmd.Output()
		if err != nil {
			msg := err.Error()
			if ee, ok := err.(*osexec.ExitError); ok {
				msg += ": " + string(ee.Stderr)
			}
			t.Fatalf("go list -deps %s: %s", c.name, msg)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list -deps %s listed nothing", c.name)
		}
		for _, dep := range deps {
			for _, pkg := range c.forbidden {
				if dep == module+pkg || strings.HasPrefix(dep, module+pkg+"/") {
					t.Errorf("%s depends on %s: building models belongs to models, layers and onnxio/export", c.name, dep)
				}
			}
			if strings.Contains(strings.ToLower(dep), "yaml") {
				t.Errorf("%s depends on the YAML package %s: configs are parsed by models", c.name, dep)
			}
		}
	}
}

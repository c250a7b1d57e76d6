package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pytorch2Fixtures holds PyTorch 2.15's exports of Hugging Face models and
// PyTorch modules, TorchScript at opset 17 and dynamo at opsets 18 and 23,
// with their test-data sets (testdata/pytorch2/gen.py).
const pytorch2Fixtures = "../../../testdata/pytorch2/fixtures"

// pytorch2KnownFailures lists what `attnrun check` fails on today, and why
// (testdata/pytorch2/known_failures.txt).
const pytorch2KnownFailures = "../../../testdata/pytorch2/known_failures.txt"

// pytorch2Fixture is one line of the fixtures' manifest.json.
type pytorch2Fixture struct {
	Name         string           `json:"name"`
	Status       string           `json:"status"` // ok, export_failed, not_written
	Reason       string           `json:"reason"`
	Committed    bool             `json:"committed"`
	Producer     string           `json:"producer"`
	TestDataSets []map[string]any `json:"test_data_sets"`
}

// TestCheckPyTorch2Fixtures runs `attnrun check` on every test-data set of
// every committed PyTorch 2.x export, against PyTorch's outputs at 1e-5
// relative / 1e-6 absolute. A set not listed in known_failures.txt must
// pass. A listed one must fail, and for want of a feature, not on a number:
// when the feature lands and it passes, its line must go. A set listed for
// "tolerance" (float32 rounding on real weights) may pass, or fail on a number.
func TestCheckPyTorch2Fixtures(t *testing.T) {
	fixtures := readPyTorch2Manifest(t)
	known := readKnownFailures(t, pytorch2KnownFailures, "attnrun")
	used := map[string]bool{}
	written, sets, passed := 0, 0, 0
	for _, f := range fixtures {
		if f.Status != "ok" || !f.Committed {
			continue
		}
		written++
		assert.True(t, strings.HasPrefix(f.Producer, "pytorch 2.15"), "%s: producer %q", f.Name, f.Producer)
		model := filepath.Join(pytorch2Fixtures, f.Name, "model.onnx")
		for k := range f.TestDataSets {
			set := fmt.Sprintf("%s/test_data_set_%d", f.Name, k)
			key := set
			reason, isKnown := known[key]
			if !isKnown {
				key = f.Name
				reason, isKnown = known[key]
			}
			if isKnown {
				used[key] = true
			}
			sets++
			t.Run(set, func(t *testing.T) {
				status, out, stderr := attnrun("check", model, "--data", filepath.Join(pytorch2Fixtures, set))
				switch {
				case !isKnown:
					require.Equal(t, 0, status, out+stderr)
					assert.Contains(t, out, " 0 failed")
					passed++
				case strings.HasPrefix(reason, "tolerance"):
					if status == 0 {
						passed++
						return
					}
					assert.True(t, wrongNumber(out), "listed for %s but fails otherwise:\n%s", reason, out+stderr)
				default:
					assert.NotEqual(t, 0, status, "listed as a known failure (%s) but passes: remove it from %s\n%s",
						reason, pytorch2KnownFailures, out)
					assert.False(t, wrongNumber(out), "listed as a known failure (%s) but runs and gives wrong numbers:\n%s",
						reason, out)
				}
			})
		}
	}
	require.GreaterOrEqual(t, written, 20, "committed PyTorch 2.x fixtures")
	checkKnownFailuresExist(t, known, fixtures, used)
	t.Logf("attnrun check: %d of %d data sets of %d PyTorch 2.x fixtures pass; %d known failures",
		passed, sets, written, sets-passed)
}

// checkKnownFailuresExist fails for a known-failure line that names no
// fixture of the manifest, or no data set of a committed fixture (the live
// cross-check uses the lines of fixtures left out of git).
func checkKnownFailuresExist(t *testing.T, known map[string]string, fixtures []pytorch2Fixture, used map[string]bool) {
	t.Helper()
	byName := map[string]pytorch2Fixture{}
	for _, f := range fixtures {
		byName[f.Name] = f
	}
	for key := range known {
		name, _, _ := strings.Cut(key, "/")
		f, ok := byName[name]
		switch {
		case !ok:
			t.Errorf("%s names %s, which is no fixture of the manifest", pytorch2KnownFailures, key)
		case f.Status == "ok" && f.Committed && !used[key]:
			t.Errorf("%s names %s, which is no data set of the committed fixture", pytorch2KnownFailures, key)
		}
	}
}

// wrongNumber tells whether check's output reports an output out of
// tolerance, as opposed to a model it could not load or run.
func wrongNumber(out string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "  FAIL  max_abs=") {
			return true
		}
	}
	return false
}

// readPyTorch2Manifest reads the fixtures' manifest.json.
func readPyTorch2Manifest(t *testing.T) []pytorch2Fixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(pytorch2Fixtures, "manifest.json"))
	require.NoError(t, err)
	var manifest struct {
		Fixtures []pytorch2Fixture `json:"fixtures"`
	}
	require.NoError(t, json.Unmarshal(data, &manifest))
	require.NotEmpty(t, manifest.Fixtures)
	return manifest.Fixtures
}

// readKnownFailures reads the lines of a known-failures file that concern
// one runtime ("attnrun" or "onnxruntime"): RUNTIME FIXTURE[/test_data_set_N]
// REASON..., '#' starting a comment. It returns the reasons by fixture or set.
func readKnownFailures(t *testing.T, path, runtime string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	known := map[string]string{}
	scanner := bufio.NewScanner(f)
	for n := 1; scanner.Scan(); n++ {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		require.GreaterOrEqual(t, len(fields), 3, "%s:%d: want RUNTIME FIXTURE REASON", path, n)
		require.Contains(t, []string{"attnrun", "onnxruntime"}, fields[0], "%s:%d: runtime", path, n)
		if fields[0] != runtime {
			continue
		}
		_, dup := known[fields[1]]
		require.False(t, dup, "%s:%d: %s listed twice", path, n, fields[1])
		known[fields[1]] = strings.Join(fields[2:], " ")
	}
	require.NoError(t, scanner.Err())
	return known
}

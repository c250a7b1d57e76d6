package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
	// Float64 holds, for a model on which PyTorch float32 itself strays
	// from float64, the float64 rule's bound per data set and output.
	Float64 *struct {
		TestDataSets []map[string]struct {
			PyTorchFloat32 float64 `json:"pytorch_float32"`
			Bound          float64 `json:"bound"`
		} `json:"test_data_sets"`
	} `json:"float64"`
}

// TestCheckPyTorch2Fixtures runs `attnrun check` on every test-data set of
// every committed PyTorch 2.x export, against PyTorch's outputs at 1e-5
// relative / 1e-6 absolute. A set not listed in known_failures.txt must
// pass; on a model with a float64 reference check applies the float64 rule
// where an output misses, with the bound gen.py recorded
// (float64RuleBounds). A listed one must fail, and for want of a feature,
// not on a number: when the feature lands and it passes, its line must go.
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
					float64RuleBounds(t, out, f, k)
					passed++
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

// float64RuleLine is an output's line of `attnrun check` passed by the
// float64 rule: its name and the bound check computed.
var float64RuleLine = regexp.MustCompile(`output \d+ "([^"]*)"\s+ok\s+float64 rule: \S+ from float64 \(the reference \S+\), bound (\S+)`)

// float64RuleBounds checks the outputs of data set k that check passed by
// the float64 rule: the fixture must have a float64 reference, and check's
// bound, from PyTorch float32's distance alone, no looser than the one
// gen.py recorded in the manifest from PyTorch's and ONNX Runtime's (check
// prints three digits).
func float64RuleBounds(t *testing.T, out string, f pytorch2Fixture, k int) {
	t.Helper()
	for _, line := range float64RuleLine.FindAllStringSubmatch(out, -1) {
		require.NotNil(t, f.Float64, "%s has no float64 reference, yet: %s", f.Name, line[0])
		want, ok := f.Float64.TestDataSets[k][line[1]]
		require.True(t, ok, "no float64 bound for output %q in the manifest", line[1])
		got, err := strconv.ParseFloat(line[2], 64)
		require.NoError(t, err, line[0])
		assert.LessOrEqual(t, got, want.Bound*1.005, line[0])
		t.Logf("float64 rule: %s", line[0])
	}
}

// A float64 reference beside a data set lets an output that misses
// PyTorch float32 by a rounding PyTorch itself makes pass, and only within
// the bound: with PyTorch float32's outputs as the "float64" reference the
// bound shrinks to 1e-6 and the same output fails.
func TestCheckFloat64Rule(t *testing.T) {
	fixture := filepath.Join(pytorch2Fixtures, "gemma3_sdpa_dynamo23")
	model := filepath.Join(fixture, "model.onnx")
	status, out, stderr := attnrun("check", model, "--data", filepath.Join(fixture, "test_data_set_0"))
	require.Equal(t, 0, status, out+stderr)
	assert.Regexp(t, `output 3 "present.1.key"  ok    float64 rule: \S+ from float64 \(the reference 1.76e-06\), bound 4.52e-06 \(1e-05/1e-06 against the reference: max_abs=`, out)

	data := t.TempDir()
	set := filepath.Join(data, "test_data_set_0")
	truth := filepath.Join(data, "float64", "test_data_set_0")
	require.NoError(t, os.MkdirAll(filepath.Dir(truth), 0o755))
	require.NoError(t, os.CopyFS(set, os.DirFS(filepath.Join(fixture, "test_data_set_0"))))
	require.NoError(t, os.CopyFS(truth, os.DirFS(filepath.Join(fixture, "test_data_set_0"))))
	status, out, _ = attnrun("check", model, "--data", data)
	assert.Equal(t, 1, status, out)
	assert.Regexp(t, `output 3 "present.1.key"  FAIL  max_abs=1.\d+e-06`, out)
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
// one runtime ("attnrun", "onnxruntime", or "export" for exports PyTorch
// cannot produce): RUNTIME FIXTURE[/test_data_set_N]
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
		require.Contains(t, []string{"attnrun", "onnxruntime", "export"}, fields[0], "%s:%d: runtime", path, n)
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

// TestPyTorch2ExportFailuresListed checks that known_failures.txt lists
// every export PyTorch could not produce, and nothing that exported.
func TestPyTorch2ExportFailuresListed(t *testing.T) {
	known := readKnownFailures(t, pytorch2KnownFailures, "export")
	status := map[string]string{}
	for _, f := range readPyTorch2Manifest(t) {
		status[f.Name] = f.Status
		if f.Status == "export_failed" {
			assert.Contains(t, known, f.Name, "%s failed to export (%s), but %s does not list it", f.Name, f.Reason, pytorch2KnownFailures)
		}
	}
	for name := range known {
		if s, ok := status[name]; ok && s != "export_failed" && s != "not_written" {
			t.Errorf("%s lists %s as an export PyTorch cannot produce, but the manifest has it %s", pytorch2KnownFailures, name, s)
		}
		if _, ok := status[name]; !ok {
			t.Errorf("%s names %s, which is no fixture of the manifest", pytorch2KnownFailures, name)
		}
	}
}

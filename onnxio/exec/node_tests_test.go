package exec

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/attnrun/attnrun/onnxio"
)

// sharedNodeTests is ONNX's node test suite as ../shared/conformance holds
// it (onnx at 6be0677fc22e, opsets up to 28), seen from this package.
const sharedNodeTests = "../../../shared/conformance/onnx-node-tests"

// runnerTol is the tolerance of ../shared/conformance/run.sh (ONNX's
// runner rtol, with atol 1e-5) for float32 outputs.
var runnerTol = tolerance{rtol: 1e-3, atol: 1e-5}

// nodeTestOps are the ops whose node tests TestSharedNodeTests runs: a
// case runs when its model uses at least one of them.
var nodeTestOps = []string{
	"Elu", "Celu", "LeakyRelu", "ThresholdedRelu", "Selu", "HardSigmoid", "Gelu", "Softplus", "Softsign",
	"Mish", "HardSwish", "Shrink", "PRelu",
	"Mod", "Sign", "Floor", "Ceil", "Round", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
	"IsInf", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "Sum", "Mean", "CastLike",
	"ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin",
	"LogSoftmax", "RMSNormalization", "LpNormalization", "MeanVarianceNormalization", "InstanceNormalization", "BatchNormalization",
	"GatherElements", "GatherND", "ScatterElements", "ScatterND", "NonZero", "OneHot", "EyeLike",
	"CumSum", "TopK", "Pad", "Einsum",
	"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
	"CumProd", "Hardmax", "Det", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss",
	"Max", "Min", // existing ops, checked here on every numeric type
	"If", "Loop", "Scan", "Swish", "BitCast", "Compress", "Unique", "ReverseSequence", "DepthToSpace", "SpaceToDepth",
}

// sharedNodeTestExclusions lists cases of nodeTestOps whose model the
// executor accepts but which do not pass, with the reason; each must
// really fail.
var sharedNodeTestExclusions = map[string]string{}

// TestSharedNodeTests runs ONNX's node tests of the ops above at the
// runner's tolerance. Cases whose model needs what the executor refuses
// (another op, float16, an older opset) must be refused by New; every
// other case must pass.
func TestSharedNodeTests(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(sharedNodeTests, "test_*"))
	if len(dirs) == 0 {
		t.Skipf("ONNX node tests are not under %s (../shared/conformance is absent)", sharedNodeTests)
	}
	passed, refused := map[string]int{}, map[string]int{}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
		if err != nil {
			continue // models of types the codec does not read (sequences, strings) are not ours
		}
		var used []string
		for _, n := range m.GetGraph().GetNode() {
			if slices.Contains(nodeTestOps, n.GetOpType()) && !slices.Contains(used, n.GetOpType()) {
				used = append(used, n.GetOpType())
			}
		}
		if len(used) == 0 {
			continue
		}
		key := strings.Join(used, "+")
		if rule := exclusionRule(m); rule != "" {
			refused[key]++
			if _, err := New(m); err == nil {
				t.Errorf("%s: excluded (%s) but New accepts it", name, rule)
			}
			continue
		}
		err = runNodeTest(m, dir, runnerTol)
		if reason, ok := sharedNodeTestExclusions[name]; ok {
			if err == nil {
				t.Errorf("%s: listed as failing (%s) but passes", name, reason)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		passed[key]++
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(merge(passed, refused))) {
		fmt.Fprintf(&b, "%s: %d pass, %d refused\n", k, passed[k], refused[k])
	}
	t.Log("node tests per op:\n" + b.String())
}

// merge returns the union of two count maps' keys (values are unused).
func merge(a, b map[string]int) map[string]int {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

package bench

import (
	"context"
	"testing"
)

// The check BenchmarkExecutor makes before timing, on a committed fixture of
// the same kind (a Llama decoder with a KV cache, PyTorch's outputs): it
// passes on the set as written and fails when the cache is fed in the wrong
// order, so a benchmark cannot time a graph that computes something else.
func TestCheckAgainstPyTorch(t *testing.T) {
	const fixture = "../testdata/pytorch2/fixtures/llama_sdpa_ts17"
	g, err := prepare(fixture + "/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	feeds, want, err := readSet(g, fixture+"/test_data_set_0")
	if err != nil {
		t.Fatal(err)
	}
	first := g.Outputs()[0].Name
	out, err := g.RunArrays(context.Background(), feeds)
	if err != nil {
		t.Fatal(err)
	}
	diff, err := checkClose(out[first], want)
	if err != nil {
		t.Fatalf("output %s: %v", first, err)
	}
	if diff > checkAbsolute {
		t.Fatalf("max_abs_diff %g reported over the bound %g without an error", diff, checkAbsolute)
	}

	// Keys fed as values and values as keys.
	feeds["past_key_values.0.key"], feeds["past_key_values.0.value"] =
		feeds["past_key_values.0.value"], feeds["past_key_values.0.key"]
	out, err = g.RunArrays(context.Background(), feeds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkClose(out[first], want); err == nil {
		t.Fatal("a cache with keys and values swapped passed the check")
	}
}

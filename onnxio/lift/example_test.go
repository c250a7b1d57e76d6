package lift_test

import (
	"fmt"
	"log"

	_ "github.com/attnrun/attnrun/layers"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
)

// Lifting nn.MultiheadAttention as PyTorch exports it: the packed in_proj
// becomes W_query, W_key and W_value, and the need_weights output the
// attention weights averaged over heads.
func ExampleLift() {
	m, err := onnxio.ReadModel("../../testdata/onnx/torch_mha_causal_self_opset17_dynamic/model.onnx")
	if err != nil {
		log.Fatal(err)
	}
	res, err := lift.Lift(m)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range res.Model.Layers() {
		fmt.Println(l.Name, l.Type)
	}
	for _, row := range res.Mapping[:2] {
		fmt.Printf("%s -> %s (%s)\n", row.Initializer, row.Param, row.Transform)
	}
	for _, o := range res.Outputs {
		what := "output"
		if o.Weights != "" {
			what = "attention weights, " + o.Weights
		}
		fmt.Printf("%s: %s of layer %s\n", o.Name, what, o.Layer)
	}
	// Output:
	// mha attention.multihead
	// onnx::MatMul_157 -> mha.W_query.weight (transposed, split rows 0:8)
	// mha.in_proj_bias -> mha.W_query.bias (split 0:8)
	// y: output of layer mha
	// weights: attention weights, mean of layer mha
}

package attnrun_test

import (
	"context"
	"fmt"
	"log"

	"github.com/attnrun/attnrun"
)

// Continue token ids greedily with a decoder exported from Hugging Face
// with its KV cache (a tiny seeded Qwen3): each step feeds the new token
// and the cache the previous step returned.
func ExampleModel_Generate() {
	model, err := attnrun.Load("testdata/pytorch2/fixtures/qwen3_sdpa_ts17/model.onnx")
	if err != nil {
		log.Fatal(err)
	}
	gen, err := model.Generate(context.Background(), []int64{1, 2, 3}, attnrun.GenerateOptions{MaxNewTokens: 8})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(gen.IDs)
	fmt.Println(len(gen.Logits[0]), "logits per step")
	// Output:
	// [26 7 13 19 24 19 30 0]
	// 32 logits per step
}

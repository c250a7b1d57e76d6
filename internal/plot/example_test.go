package plot_test

import (
	"bytes"
	"fmt"
	"image/png"

	"github.com/attnrun/attnrun/internal/plot"
)

// A causal head over three tokens: each query attends to itself and the
// tokens before it.
func Example() {
	fig := &plot.Figure{
		Title:   "one head",
		Queries: []string{"the", "cat", "sat"},
		Keys:    []string{"the", "cat", "sat"},
		Rows: [][]plot.Heatmap{{{
			Title: "attn · head 0",
			Weights: []float32{
				1, 0, 0,
				0.4, 0.6, 0,
				0.2, 0.3, 0.5,
			},
		}}},
	}
	var buf bytes.Buffer
	if err := fig.Encode(&buf, plot.PNG); err != nil { // or fig.WriteFile("attn.png"), .svg or .jpg
		fmt.Println(err)
		return
	}
	img, err := png.Decode(&buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	layout, _ := fig.Layout()
	fmt.Println(img.Bounds().Size() == layout.Size, layout.Grid, layout.Cell)
	// Output: true (1,1) 52
}

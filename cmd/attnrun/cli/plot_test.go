package cli

import (
	"bytes"
	"errors"
	"flag"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/plot"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

// updatePicture rewrites the README's picture from the current code.
var updatePicture = flag.Bool("update-plot", false, "rewrite docs/attention.png")

// readmePicture is the picture the README shows, and how it is made.
var (
	readmePicture = filepath.Join("..", "..", "..", "docs", "attention.png")
	readmeArgs    = []string{"seed-mha-wrapper", "--tokens", "Your journey starts with one step"}
)

// plotCommand runs `attnrun plot` in-process. It builds the command itself
// rather than going through NewRoot, so that it tests this command alone.
func plotCommand(args ...string) (string, error) {
	cmd := newPlotCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

// hooked runs a preset's model on its input and returns what the hook saw,
// independently of the plot command: the weights of each attention layer.
func hooked(t *testing.T, p *models.Preset) (layers []string, weights []*tensor.Dense) {
	m, err := p.Model()
	require.NoError(t, err)
	x, err := p.Input()
	require.NoError(t, err)
	run := &registry.Run{Hook: func(layer string, w *tensor.Dense) {
		layers = append(layers, layer)
		weights = append(weights, w)
	}}
	_, err = m.Forward(run, x)
	require.NoError(t, err)
	return layers, weights
}

func decodePNG(t *testing.T, path string) *image.RGBA {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	rgba := image.NewRGBA(img.Bounds())
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			rgba.Set(x, y, img.At(x, y))
		}
	}
	return rgba
}

// TestPlotEveryPreset plots every preset and checks the picture against the
// weights the model computes: the image has the size of its grid of panels
// (layers × heads of that many tokens), and every cell has the colour of
// its weight on the shared scale.
func TestPlotEveryPreset(t *testing.T) {
	list, err := models.Presets()
	require.NoError(t, err)
	dir := t.TempDir()
	for _, p := range list {
		t.Run(p.Name, func(t *testing.T) {
			path := filepath.Join(dir, p.Name+".png")
			out, err := plotCommand(p.Name, "-o", path)
			require.NoError(t, err)
			assert.Contains(t, out, path)
			img := decodePNG(t, path)

			layers, weights := hooked(t, &p)
			heads := 0
			vmax := float32(0)
			for _, w := range weights {
				heads = max(heads, w.Shape()[1])
				for _, v := range w.Data().([]float32) {
					vmax = max(vmax, v)
				}
			}
			tokens := weights[0].Shape()[2]

			fig, err := attentionFigure(defaultLimits(), p.Name, plotFlags{})
			require.NoError(t, err)
			l, err := fig.Layout()
			require.NoError(t, err)
			assert.Equal(t, image.Pt(heads, len(layers)), l.Grid)
			assert.Equal(t, image.Pt(tokens, tokens), l.Tokens)
			require.Equal(t, l.Size, img.Bounds().Size())

			for r, w := range weights {
				h, tq, tk := w.Shape()[1], w.Shape()[2], w.Shape()[3]
				data := w.Data().([]float32) // batch element 0
				for c := range h {
					for i := range tq {
						for j := range tk {
							v := data[(c*tq+i)*tk+j]
							at := l.CellRect(r, c, i, j).Min.Add(image.Pt(2, 2)) // clear of the printed value
							require.Equal(t, plot.Viridis(float64(v/vmax)), img.RGBAAt(at.X, at.Y),
								"layer %s head %d cell (%d, %d) weight %g", layers[r], c, i, j, v)
						}
					}
				}
			}

			colours := map[color.RGBA]bool{}
			for y := 0; y < l.Size.Y; y++ {
				for x := 0; x < l.Size.X; x++ {
					colours[img.RGBAAt(x, y)] = true
				}
			}
			assert.Greater(t, len(colours), 100, "a picture, not a blank")
		})
	}
}

// TestPlotMaskedWeights checks the causal picture in plain colours: the
// first query puts all its weight on itself (yellow, the top of viridis)
// and nothing on the keys after it (dark purple, the bottom).
func TestPlotMaskedWeights(t *testing.T) {
	path := filepath.Join(t.TempDir(), "masked.png")
	_, err := plotCommand("seed-masked-weights", "-o", path)
	require.NoError(t, err)
	img := decodePNG(t, path)
	fig, err := attentionFigure(defaultLimits(), "seed-masked-weights", plotFlags{})
	require.NoError(t, err)
	l, err := fig.Layout()
	require.NoError(t, err)
	yellow, purple := color.RGBA{0xfd, 0xe7, 0x25, 0xff}, color.RGBA{0x44, 0x01, 0x54, 0xff}
	pixel := func(i, j int) color.RGBA {
		at := l.CellRect(0, 0, i, j).Min.Add(image.Pt(2, 2))
		return img.RGBAAt(at.X, at.Y)
	}
	assert.Equal(t, yellow, pixel(0, 0))
	for i := range 6 {
		for j := i + 1; j < 6; j++ {
			assert.Equal(t, purple, pixel(i, j), "masked cell (%d, %d)", i, j)
		}
	}
	centre := l.CellRect(0, 0, 0, 0)
	assert.NotEqual(t, yellow, img.RGBAAt((centre.Min.X+centre.Max.X)/2, (centre.Min.Y+centre.Max.Y)/2),
		"the weight 1.00 is printed in the middle of the cell")
}

func TestPlotTokenLabels(t *testing.T) {
	journey := strings.Fields("Your journey starts with one step")
	example := strings.Fields("This is an example sentence")
	for _, tc := range []struct {
		target string
		flags  plotFlags
		want   []string
	}{
		{"seed-mha-wrapper", plotFlags{}, journey},
		{"seed-masked-weights", plotFlags{}, journey},
		{"seed-randn-weights", plotFlags{}, journey},
		{"seed-bishop-causal", plotFlags{}, example},
		{"seed-bishop-multihead", plotFlags{}, example},
		{"seed-bag-of-words", plotFlags{}, []string{"t0", "t1", "t2"}},
		{"seed-head-1337", plotFlags{}, []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}},
		{"seed-bag-of-words", plotFlags{tokens: "  a  b\tc "}, []string{"a", "b", "c"}},
	} {
		fig, err := attentionFigure(defaultLimits(), tc.target, tc.flags)
		require.NoError(t, err, tc.target)
		assert.Equal(t, tc.want, fig.Queries, tc.target)
		assert.Equal(t, tc.want, fig.Keys, tc.target)
	}
}

func TestPlotLayerAndBatch(t *testing.T) {
	fig, err := attentionFigure(defaultLimits(), "seed-bishop-multihead-concat", plotFlags{layer: "head1"})
	require.NoError(t, err)
	require.Len(t, fig.Rows, 1)
	require.Len(t, fig.Rows[0], 1)
	assert.Equal(t, "head1 · head 0", fig.Rows[0][0].Title)

	fig, err = attentionFigure(defaultLimits(), "seed-mha-wrapper", plotFlags{})
	require.NoError(t, err)
	require.Len(t, fig.Rows, 1)
	assert.Equal(t, []string{"attn · head 0", "attn · head 1"}, []string{fig.Rows[0][0].Title, fig.Rows[0][1].Title})
	assert.Equal(t, "seed-mha-wrapper · attention weights · batch 0 of 2", fig.Title)

	// seed-head-1337 has four different sequences; --batch 2 shows the third.
	p, err := models.LookupPreset("seed-head-1337")
	require.NoError(t, err)
	_, weights := hooked(t, p)
	data := weights[0].Data().([]float32) // (4, 1, 8, 8)
	fig, err = attentionFigure(defaultLimits(), "seed-head-1337", plotFlags{batch: 2})
	require.NoError(t, err)
	assert.Equal(t, data[2*64:3*64], fig.Rows[0][0].Weights)
	assert.NotEqual(t, data[0:64], fig.Rows[0][0].Weights)
}

func TestPlotConfigWithInput(t *testing.T) {
	dir := t.TempDir()
	config := writeFile(t, dir, "model.yaml", `name: two-layers
layers:
  - {name: first, type: attention.multihead, d_in: 4, d_out: 4, context_length: 8, num_heads: 2}
  - {name: second, type: attention.causal, d_in: 4, d_out: 4, context_length: 8}
`)
	x := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(x, tensor.New(tensor.WithShape(3, 4),
		tensor.WithBacking([]float32{0.1, 0.2, 0.3, 0.4, -1, 0.5, 0.2, 0, 0.9, -0.3, 0.1, 0.7}))))
	out := filepath.Join(dir, "attn.png")
	_, err := plotCommand(config, "--input", x, "--seed", "7", "-o", out)
	require.NoError(t, err)
	fig, err := attentionFigure(defaultLimits(), config, plotFlags{inputs: []string{x}, seed: 7})
	require.NoError(t, err)
	l, err := fig.Layout()
	require.NoError(t, err)
	assert.Equal(t, image.Pt(2, 2), l.Grid, "two layers, the first with two heads")
	assert.Equal(t, []string{"t0", "t1", "t2"}, fig.Queries)
	assert.Equal(t, "two-layers · attention weights", fig.Title)
	assert.Equal(t, l.Size, decodePNG(t, out).Bounds().Size())
}

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	linear := writeFile(t, dir, "linear.yaml", "name: lin\nlayers:\n  - {name: proj, type: nn.linear, d_in: 3, d_out: 2}\n")
	x := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(x, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6}))))
	onnx := writeFile(t, dir, "model.onnx", "not read")
	out := filepath.Join(dir, "attn.png")

	for _, tc := range []struct {
		name  string
		args  []string
		want  string
		usage bool
	}{
		{"wrong token count", []string{"seed-mha-wrapper", "--tokens", "one two three"},
			`--tokens has 3 words ("one two three"), the input has 6 tokens`, true},
		{"unknown layer", []string{"seed-bishop-multihead-concat", "--layer", "head2"},
			`--layer "head2": model "seed-bishop-multihead-concat" has no such layer; attention layers: head0, head1`, true},
		{"layer without attention", []string{"seed-bishop-multihead-concat", "--layer", "out_proj"},
			`--layer "out_proj": that layer computes no attention weights; attention layers: head0, head1`, true},
		{"no attention layers", []string{linear, "--input", x},
			`model "lin" has no attention layers, nothing to plot (layers: proj (nn.linear))`, false},
		{"batch out of range", []string{"seed-mha-wrapper", "--batch", "2"},
			"--batch 2: the input has a batch of 2 (0 to 1)", true},
		{"negative batch", []string{"seed-masked-weights", "--batch", "-1"},
			"--batch -1: the input has a batch of 1 (0 to 0)", true},
		{"onnx", []string{onnx},
			"model.onnx: plot takes a model config or a preset, not an ONNX file", false},
		{"unknown preset", []string{"seed-nope"}, `unknown preset "seed-nope"`, false},
		{"config without input", []string{linear}, `model "lin" needs --input`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := plotCommand(append(tc.args, "-o", out)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var usage usageError
			assert.Equal(t, tc.usage, errors.As(err, &usage), "usage error: %v", err)
			assert.NoFileExists(t, out)
		})
	}

	_, err := plotCommand("seed-mha-wrapper")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "plot needs the image file to write: -o attn.png")
	assert.IsType(t, usageError{}, err)
}

// TestReadmePicture checks that docs/attention.png, which the README shows,
// is what the plot command draws today. Rewrite it with
// go test ./cmd/attnrun/cli -run TestReadmePicture -update-plot.
func TestReadmePicture(t *testing.T) {
	if *updatePicture {
		_, err := plotCommand(append(readmeArgs, "-o", readmePicture)...)
		require.NoError(t, err)
	}
	path := filepath.Join(t.TempDir(), "attention.png")
	_, err := plotCommand(append(readmeArgs, "-o", path)...)
	require.NoError(t, err)
	want := decodePNG(t, readmePicture)
	got := decodePNG(t, path)
	require.Equal(t, want.Bounds(), got.Bounds(), "docs/attention.png is out of date: rerun with -update-plot")
	assert.True(t, bytes.Equal(want.Pix, got.Pix), "docs/attention.png is out of date: rerun with -update-plot")
}

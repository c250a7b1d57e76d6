package cli

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/plot"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

// updatePicture rewrites the README's picture from the current code.
var updatePicture = flag.Bool("update-plot", false, "rewrite docs/attention.png")

// readmePicture is the picture the README shows, and how it is made.
var (
	readmePicture = filepath.Join("..", "..", "..", "docs", "attention.png")
	readmeArgs    = []string{"seed-mha-wrapper", "--labels", "Your journey starts with one step"}
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
			panels := 0
			for _, w := range weights {
				panels += w.Shape()[1]
			}
			assertGridHolds(t, l, panels)
			assert.LessOrEqual(t, l.Grid.X, max(heads, 2), "a layer's heads side by side at most")
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
		{"seed-bag-of-words", plotFlags{labels: "  a  b\tc "}, []string{"a", "b", "c"}},
	} {
		fig, err := attentionFigure(defaultLimits(), tc.target, tc.flags)
		require.NoError(t, err, tc.target)
		assert.Equal(t, tc.want, fig.Queries, tc.target)
		assert.Equal(t, tc.want, fig.Keys, tc.target)
	}
}

func TestPlotLayerAndBatch(t *testing.T) {
	fig, err := attentionFigure(defaultLimits(), "seed-bishop-multihead-concat", plotFlags{layers: []string{"head1"}})
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
	assert.Equal(t, image.Pt(3, 1), l.Grid, "two layers, the first with two heads: three panels in a row")
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
		{"wrong label count", []string{"seed-mha-wrapper", "--labels", "one two three"},
			`--labels has 3 words ("one two three"), the input has 6 tokens`, true},
		{"words in --tokens", []string{"seed-mha-wrapper", "--tokens", "one two three"},
			`--tokens "one two three": token labels go in --labels; --tokens takes a range of tokens such as 0:64`, true},
		{"tokens past the end", []string{"seed-mha-wrapper", "--tokens", "0:64"},
			"--tokens 0:64: position 64 is out of range: the input has 6 tokens (0 to 5, or -6 to -1 from the end)", true},
		{"tokens before the start", []string{"seed-mha-wrapper", "--tokens", "-7:"},
			"--tokens -7:: position -7 is out of range", true},
		{"empty token range", []string{"seed-mha-wrapper", "--tokens", "4:2"},
			"--tokens 4:2 selects no tokens: it runs from 4 to 2, and the input has 6", true},
		{"empty key range", []string{"seed-mha-wrapper", "--tokens", "0:2,3:3"},
			"--tokens 3:3 selects no keys: it runs from 3 to 3, and the input has 6", true},
		{"token index", []string{"seed-mha-wrapper", "--tokens", "4"},
			`--tokens "4": "4" is not a range START:STOP such as 0:64 (a step is not supported)`, true},
		{"token step", []string{"seed-mha-wrapper", "--tokens", "0:6:2"},
			`(a step is not supported)`, true},
		{"three token ranges", []string{"seed-mha-wrapper", "--tokens", "0:1,0:2,0:3"},
			`--tokens "0:1,0:2,0:3": want one range (START:STOP, for queries and keys) or two (QUERIES,KEYS), got 3`, true},
		{"token not a number", []string{"seed-mha-wrapper", "--tokens", "0:1.5"},
			`--tokens "0:1.5": "0:1.5": "1.5" is not a token position`, true},
		{"head out of range", []string{"seed-mha-wrapper", "--heads", "0,2"},
			`--heads "0,2": 2 is out of range: layer "attn" has 2 head(s) (0 to 1)`, true},
		{"head range out of range", []string{"seed-mha-wrapper", "--heads", "0:3"},
			`--heads "0:3": 0:3 is out of range: layer "attn" has 2 head(s) (0 to 1)`, true},
		{"head twice", []string{"seed-mha-wrapper", "--heads", "1,0:2"},
			`--heads "1,0:2": head 1 is listed twice`, true},
		{"negative head", []string{"seed-mha-wrapper", "--heads", "-1"},
			`--heads "-1": "-1" is not a head number (0, 1, ...)`, true},
		{"empty head range", []string{"seed-mha-wrapper", "--heads", "1:1"},
			`--heads "1:1": 1:1 selects no heads`, true},
		{"unknown format", []string{"seed-mha-wrapper", "-o", filepath.Join(dir, "attn.gif")},
			`-o ` + filepath.Join(dir, "attn.gif") + `: extension ".gif"; plot writes .png, .svg, .jpg and .jpeg`, true},
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
		{"unreadable onnx", []string{onnx}, "model.onnx", false},
		{"unknown preset", []string{"seed-nope"}, `unknown preset "seed-nope"`, false},
		{"config without input", []string{linear}, `model "lin" needs --input`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Contains(tc.args, "-o") {
				tc.args = append(tc.args, "-o", out)
			}
			_, err := plotCommand(tc.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var usage usageError
			assert.Equal(t, tc.usage, errors.As(err, &usage), "usage error: %v", err)
			assert.NoFileExists(t, out)
		})
	}

	_, err := plotCommand("seed-mha-wrapper")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "plot needs the image file to write: -o attn.png (or .svg, .jpg)")
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

// assertGridHolds checks that a grid has room for the panels and no empty
// row.
func assertGridHolds(t *testing.T, l *plot.Layout, panels int) {
	t.Helper()
	assert.GreaterOrEqual(t, l.Grid.X*l.Grid.Y, panels, "grid %v holds %d panels", l.Grid, panels)
	assert.Less(t, l.Grid.X*(l.Grid.Y-1), panels, "grid %v has no empty row for %d panels", l.Grid, panels)
}

// seededInput writes a (t, d) input of seeded normal values.
func seededInput(t *testing.T, path string, tokens, d int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	data := make([]float32, tokens*d)
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	require.NoError(t, tensorio.WriteNPYFile(path, tensor.New(tensor.WithShape(tokens, d), tensor.WithBacking(data))))
}

// configWeights runs a config with seeded weights on its input, apart from
// the plot command, and returns what the hook saw of every layer.
func configWeights(t *testing.T, config, input string, seed uint64) map[string]*tensor.Dense {
	t.Helper()
	m, err := models.Options{}.Load(config)
	require.NoError(t, err)
	require.NoError(t, m.Init(seed))
	x, err := tensorio.ReadNPYFile(input)
	require.NoError(t, err)
	seen := map[string]*tensor.Dense{}
	_, err = m.Forward(&registry.Run{Hook: func(layer string, w *tensor.Dense) { seen[layer] = w }}, x)
	require.NoError(t, err)
	return seen
}

// at is weight (b, h, q, k) of weights shaped (B, H, Tq, Tk).
func at(w *tensor.Dense, b, h, q, k int) float32 {
	s := w.Shape()
	return w.Data().([]float32)[((b*s[1]+h)*s[2]+q)*s[3]+k]
}

// TestPlotTwelveHeadsIsAGrid draws the case, 12 heads over 64
// tokens, which used to be one 6948×662 strip. It is now a 4×3 grid, and
// every cell of every panel, found where the layout puts layer r's head c,
// has the colour of that head's weight on the shared scale.
func TestPlotTwelveHeadsIsAGrid(t *testing.T) {
	dir := t.TempDir()
	config := writeFile(t, dir, "twelve.yaml", "name: twelve\nlayers:\n"+
		"  - {name: attn, type: attention.multihead, d_in: 24, d_out: 24, context_length: 64, num_heads: 12}\n")
	x := filepath.Join(dir, "x.npy")
	seededInput(t, x, 64, 24, 5)
	out := filepath.Join(dir, "attn.png")
	status, stdout, stderr := attnrun("plot", config, "--input", x, "--seed", "9", "-o", out)
	require.Equal(t, 0, status, stderr)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")), "PNG bytes")
	img := decodePNG(t, out)

	fig, err := attentionFigure(defaultLimits(), config, plotFlags{inputs: []string{x}, seed: 9})
	require.NoError(t, err)
	l, err := fig.Layout()
	require.NoError(t, err)
	require.Equal(t, image.Pt(4, 3), l.Grid)
	require.Equal(t, l.Size, img.Bounds().Size())
	assert.Less(t, l.Size.X, 2*l.Size.Y, "not a strip")
	assert.Contains(t, stdout, fmt.Sprintf("12 panel(s) of 64×64 tokens from 1 layer(s), a 4×3 grid, %d×%d pixels", l.Size.X, l.Size.Y))

	w := configWeights(t, config, x, 9)["attn"]
	require.Equal(t, tensor.Shape{1, 12, 64, 64}, w.Shape())
	vmax := slices.Max(w.Data().([]float32))
	for h := range 12 {
		// Head h is in row h/4 and column h%4 of the grid.
		panel := l.PanelRect(0, h)
		assert.Equal(t, l.Origin.Add(image.Pt(h%4*(l.Panel.X+l.Gap.X), h/4*(l.Panel.Y+l.Gap.Y))), panel.Min, "head %d", h)
		for q := range 64 {
			for k := range 64 {
				p := l.CellRect(0, h, q, k).Min
				require.Equal(t, plot.Viridis(float64(at(w, 0, h, q, k)/vmax)), img.RGBAAt(p.X, p.Y), "head %d cell (%d, %d)", h, q, k)
			}
		}
	}
	// Between two panels side by side lies background.
	gap := l.PanelRect(0, 0).Max.X + l.Gap.X/2
	for y := l.HeatmapRect(0, 0).Min.Y; y < l.HeatmapRect(0, 0).Max.Y; y++ {
		require.Equal(t, color.RGBA{0xff, 0xff, 0xff, 0xff}, img.RGBAAt(gap, y))
	}
}

// TestPlotSelectsLayersHeadsTokens checks the flags' effect: --layer keeps
// the named layers, --heads the listed heads in their order, --tokens the
// queries and keys of its ranges; the panels hold exactly those weights,
// and the picture's colour scale is that of what is drawn.
func TestPlotSelectsLayersHeadsTokens(t *testing.T) {
	dir := t.TempDir()
	config := writeFile(t, dir, "three.yaml", `name: three
layers:
  - {name: first, type: attention.multihead, d_in: 8, d_out: 8, context_length: 16, num_heads: 4}
  - {name: middle, type: nn.linear, d_in: 8, d_out: 8}
  - {name: second, type: attention.multihead, d_in: 8, d_out: 8, context_length: 16, num_heads: 4}
  - {name: third, type: attention.multihead, d_in: 8, d_out: 8, context_length: 16, num_heads: 4}
`)
	x := filepath.Join(dir, "x.npy")
	seededInput(t, x, 10, 8, 2)
	seen := configWeights(t, config, x, 4)

	for _, tc := range []struct {
		name          string
		flags         plotFlags
		layers        []string
		heads         []int
		queries, keys [2]int
	}{
		{"all", plotFlags{}, []string{"first", "second", "third"}, []int{0, 1, 2, 3}, [2]int{0, 10}, [2]int{0, 10}},
		{"two layers, named out of order", plotFlags{layers: []string{"third", "first"}}, []string{"first", "third"}, []int{0, 1, 2, 3}, [2]int{0, 10}, [2]int{0, 10}},
		{"two layers", plotFlags{layers: []string{"second", "third"}}, []string{"second", "third"}, []int{0, 1, 2, 3}, [2]int{0, 10}, [2]int{0, 10}},
		{"heads in order", plotFlags{heads: "3,0"}, []string{"first", "second", "third"}, []int{3, 0}, [2]int{0, 10}, [2]int{0, 10}},
		{"head range", plotFlags{heads: "1:3", layers: []string{"second"}}, []string{"second"}, []int{1, 2}, [2]int{0, 10}, [2]int{0, 10}},
		{"token range", plotFlags{tokens: "2:6"}, []string{"first", "second", "third"}, []int{0, 1, 2, 3}, [2]int{2, 6}, [2]int{2, 6}},
		{"open and negative ends", plotFlags{tokens: "-3:,:4"}, []string{"first", "second", "third"}, []int{0, 1, 2, 3}, [2]int{7, 10}, [2]int{0, 4}},
		{"everything", plotFlags{layers: []string{"second"}, heads: "2", tokens: "1:9,0:3"}, []string{"second"}, []int{2}, [2]int{1, 9}, [2]int{0, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.flags.inputs, tc.flags.seed = []string{x}, 4
			fig, err := attentionFigure(defaultLimits(), config, tc.flags)
			require.NoError(t, err)
			require.Len(t, fig.Rows, len(tc.layers))
			assert.Equal(t, numbered(10)[tc.queries[0]:tc.queries[1]], fig.Queries)
			assert.Equal(t, numbered(10)[tc.keys[0]:tc.keys[1]], fig.Keys)
			for r, layer := range tc.layers {
				require.Len(t, fig.Rows[r], len(tc.heads))
				for c, h := range tc.heads {
					panel := fig.Rows[r][c]
					assert.Equal(t, fmt.Sprintf("%s · head %d", layer, h), panel.Title)
					var want []float32
					for q := tc.queries[0]; q < tc.queries[1]; q++ {
						for k := tc.keys[0]; k < tc.keys[1]; k++ {
							want = append(want, at(seen[layer], 0, h, q, k))
						}
					}
					require.Equal(t, want, panel.Weights, "%s head %d", layer, h)
				}
			}
			if tc.flags.tokens != "" {
				assert.Contains(t, fig.Subtitle, fmt.Sprintf("queries %d:%d of 10, keys %d:%d of 10", tc.queries[0], tc.queries[1], tc.keys[0], tc.keys[1]))
			}
		})
	}

	// The command line draws the same selection: one cell of each panel
	// has the colour of its weight on the scale of the drawn weights.
	out := filepath.Join(dir, "sel.png")
	status, stdout, stderr := attnrun("plot", config, "--input", x, "--seed", "4", "--layer", "third,second", "--layer", "first",
		"--heads", "1,3", "--tokens", "1:9,0:3", "-o", out)
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, stdout, "6 panel(s) of 8×3 tokens from 3 layer(s)")
	fig, err := attentionFigure(defaultLimits(), config, plotFlags{inputs: []string{x}, seed: 4, layers: []string{"first", "second", "third"}, heads: "1,3", tokens: "1:9,0:3"})
	require.NoError(t, err)
	l, err := fig.Layout()
	require.NoError(t, err)
	img := decodePNG(t, out)
	require.Equal(t, l.Size, img.Bounds().Size())
	assertGridHolds(t, l, 6)
	vmax := float32(0)
	for _, layer := range []string{"first", "second", "third"} {
		for _, h := range []int{1, 3} {
			for q := 1; q < 9; q++ {
				for k := range 3 {
					vmax = max(vmax, at(seen[layer], 0, h, q, k))
				}
			}
		}
	}
	for r, layer := range []string{"first", "second", "third"} {
		for c, h := range []int{1, 3} {
			p := l.CellRect(r, c, 4, 2).Min.Add(image.Pt(2, 2)) // query 5, key 2; clear of the printed value
			assert.Equal(t, plot.Viridis(float64(at(seen[layer], 0, h, 5, 2)/vmax)), img.RGBAAt(p.X, p.Y), "%s head %d", layer, h)
		}
	}
}

// TestPlotFormats writes each format by its extension and checks the
// bytes: PNG and JPEG by their signatures and decoded size, SVG as XML of
// the layout's size whose cell rectangles have the weights' colours.
func TestPlotFormats(t *testing.T) {
	dir := t.TempDir()
	fig, err := attentionFigure(defaultLimits(), "seed-bishop-causal", plotFlags{})
	require.NoError(t, err)
	l, err := fig.Layout()
	require.NoError(t, err)
	_, weights := hooked(t, mustPreset(t, "seed-bishop-causal"))
	w := weights[0] // (1, 1, 5, 5)
	vmax := slices.Max(w.Data().([]float32))

	for _, name := range []string{"a.png", "b.PNG", "c.jpg", "d.jpeg", "e.svg"} {
		path := filepath.Join(dir, name)
		status, _, stderr := attnrun("plot", "seed-bishop-causal", "-o", path)
		require.Equal(t, 0, status, stderr)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		switch strings.ToLower(filepath.Ext(name)) {
		case ".png":
			require.True(t, bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")), name)
			img, err := png.Decode(bytes.NewReader(data))
			require.NoError(t, err)
			assert.Equal(t, l.Size, img.Bounds().Size(), name)
		case ".jpg", ".jpeg":
			require.True(t, bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}), "%s: JPEG bytes, not %q", name, data[:8])
			img, err := jpeg.Decode(bytes.NewReader(data))
			require.NoError(t, err)
			assert.Equal(t, l.Size, img.Bounds().Size(), name)
			// The middle of the bottom-left cell, away from its printed
			// value's line, within JPEG's loss.
			cell := l.CellRect(0, 0, 4, 0)
			got := color.RGBAModel.Convert(img.At(cell.Min.X+4, cell.Min.Y+4)).(color.RGBA)
			want := plot.Viridis(float64(at(w, 0, 0, 4, 0) / vmax))
			for _, d := range []int{int(got.R) - int(want.R), int(got.G) - int(want.G), int(got.B) - int(want.B)} {
				assert.LessOrEqual(t, max(d, -d), 12, "%s: %v, want about %v", name, got, want)
			}
		case ".svg":
			var doc struct {
				Width  int `xml:"width,attr"`
				Height int `xml:"height,attr"`
				Rects  []struct {
					X    int    `xml:"x,attr"`
					Y    int    `xml:"y,attr"`
					Fill string `xml:"fill,attr"`
				} `xml:"rect"`
			}
			require.NoError(t, xml.Unmarshal(data, &doc), name)
			assert.Equal(t, l.Size, image.Pt(doc.Width, doc.Height))
			fills := map[image.Point]string{}
			for _, r := range doc.Rects {
				fills[image.Pt(r.X, r.Y)] = r.Fill
			}
			for q := range 5 {
				for k := range 5 {
					c := plot.Viridis(float64(at(w, 0, 0, q, k) / vmax))
					assert.Equal(t, fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B), fills[l.CellRect(0, 0, q, k).Min], "cell (%d, %d)", q, k)
				}
			}
		}
	}

	gif := filepath.Join(dir, "attn.gif")
	status, _, stderr := attnrun("plot", "seed-bishop-causal", "-o", gif)
	assert.Equal(t, 2, status)
	assert.Contains(t, stderr, `extension ".gif"; plot writes .png, .svg, .jpg and .jpeg`)
	assert.NoFileExists(t, gif)
}

func mustPreset(t *testing.T, name string) *models.Preset {
	p, err := models.LookupPreset(name)
	require.NoError(t, err)
	return p
}

// TestPlotAttnrunONNX plots the file attnrun import lifted from PyTorch's
// nn.MultiheadAttention: the model comes from its metadata, the weights
// from its initializers, and the heads' weights averaged are the weights
// PyTorch returned (need_weights averages over heads). The ONNX file
// PyTorch wrote is refused with the way to lift it, and the lifted config
// without weights is refused rather than drawn with random ones.
func TestPlotAttnrunONNX(t *testing.T) {
	fixture := filepath.Join(onnxFixtures, "torch_mha_causal_self_opset17_dynamic")
	dir := t.TempDir()
	lifted, config := filepath.Join(dir, "lifted.onnx"), filepath.Join(dir, "lifted.yaml")
	status, _, stderr := attnrun("import", filepath.Join(fixture, "model.onnx"), "-o", lifted, "--config-out", config)
	require.Equal(t, 0, status, stderr)
	input := filepath.Join(fixture, "test_data_set_0", "input_0.pb")
	tp, err := onnxio.ReadTensorFile(filepath.Join(fixture, "test_data_set_0", "output_1.pb"))
	require.NoError(t, err)
	want, err := onnxio.TensorToDense(tp) // (2, 6, 6)
	require.NoError(t, err)

	out := filepath.Join(dir, "attn.png")
	status, stdout, stderr := attnrun("plot", lifted, "--input", input, "--batch", "1", "-o", out)
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, stdout, "2 panel(s) of 6×6 tokens from 1 layer(s)")
	fig, err := attentionFigure(defaultLimits(), lifted, plotFlags{inputs: []string{input}, batch: 1})
	require.NoError(t, err)
	assert.Equal(t, "lifted.onnx · attention weights · batch 1 of 2", fig.Title)
	require.Len(t, fig.Rows, 1)
	require.Len(t, fig.Rows[0], 2)
	torch := want.Data().([]float32)[36:72] // batch element 1
	for i, v := range torch {
		mean := (float64(fig.Rows[0][0].Weights[i]) + float64(fig.Rows[0][1].Weights[i])) / 2
		assert.InDelta(t, v, mean, 1e-6+1e-5*math.Abs(float64(v)), "weight %d", i)
	}
	l, err := fig.Layout()
	require.NoError(t, err)
	assert.Equal(t, l.Size, decodePNG(t, out).Bounds().Size())

	checkFailures(t, []failure{
		{"onnx attnrun did not write", []string{"plot", filepath.Join(fixture, "model.onnx"), "--input", input, "-o", out}, 1,
			"was not written by attnrun (it has no attnrun config in its metadata): attnrun import"},
		{"lifted config without weights", []string{"plot", config, "--input", input, "-o", out}, 2,
			"lifted.yaml: model \"lifted\" was lifted from an ONNX file by attnrun import, and its weights are in the files import wrote: give --weights"},
		{"lifted file with an input too many", []string{"plot", lifted, "--input", input, "--input", input, "-o", out}, 2,
			"lifted.onnx takes 1 input(s) (x), got 2 --input"},
	})
}

// TestPlotExportedONNXMatchesItsConfig plots a config and the ONNX file
// attnrun export wrote of it with the same weights: the panels agree
// exactly.
func TestPlotExportedONNXMatchesItsConfig(t *testing.T) {
	dir := t.TempDir()
	config := writeFile(t, dir, "two.yaml", `name: two
layers:
  - {name: a, type: attention.multihead, d_in: 8, d_out: 8, context_length: 8, num_heads: 2}
  - {name: b, type: attention.causal, d_in: 8, d_out: 8, context_length: 8}
`)
	x := filepath.Join(dir, "x.npy")
	seededInput(t, x, 7, 8, 11)
	exported := filepath.Join(dir, "two.onnx")
	status, _, stderr := attnrun("export", config, "--seed", "3", "-o", exported)
	require.Equal(t, 0, status, stderr)

	fromConfig, err := attentionFigure(defaultLimits(), config, plotFlags{inputs: []string{x}, seed: 3})
	require.NoError(t, err)
	fromONNX, err := attentionFigure(defaultLimits(), exported, plotFlags{inputs: []string{x}})
	require.NoError(t, err)
	assert.Equal(t, fromConfig.Rows, fromONNX.Rows)
	assert.Equal(t, "two.onnx · attention weights", fromONNX.Title)
}

// TestPlotTooLargeNamesTheFlags checks that a figure past a format's
// limit says which flags draw less: here an SVG of 1100×1100 cells.
func TestPlotTooLargeNamesTheFlags(t *testing.T) {
	dir := t.TempDir()
	config := writeFile(t, dir, "long.yaml", "name: long\nlayers:\n  - {name: attn, type: attention.causal, d_in: 2, d_out: 2, context_length: 1100}\n")
	x := filepath.Join(dir, "x.npy")
	seededInput(t, x, 1100, 2, 1)
	out := filepath.Join(dir, "attn.svg")
	status, _, stderr := attnrun("plot", config, "--input", x, "-o", out)
	assert.Equal(t, 1, status)
	assert.Contains(t, stderr, "the SVG would draw 1210000 cells (1 panels of 1100×1100), over the limit of 1048576 (a PNG has no such limit); choose fewer with --layer, --heads or --tokens")
	assert.NoFileExists(t, out)

	status, _, stderr = attnrun("plot", config, "--input", x, "--tokens", "0:1000", "-o", out)
	require.Equal(t, 0, status, stderr)
	// A PNG draws every token, a pixel each.
	png := filepath.Join(dir, "attn.png")
	status, _, stderr = attnrun("plot", config, "--input", x, "-o", png)
	require.Equal(t, 0, status, stderr)
	fig, err := attentionFigure(defaultLimits(), config, plotFlags{inputs: []string{x}})
	require.NoError(t, err)
	l, err := fig.Layout()
	require.NoError(t, err)
	assert.Equal(t, image.Pt(1100, 1100), l.HeatmapRect(0, 0).Size())
	assert.Equal(t, l.Size, decodePNG(t, png).Bounds().Size())
}

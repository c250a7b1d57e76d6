package plot

import (
	"bytes"
	"encoding/xml"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFormatOf(t *testing.T) {
	for path, want := range map[string]Format{"a.png": PNG, "b.PNG": PNG, "c.jpg": JPEG, "d.jpeg": JPEG, "e.JPG": JPEG, "dir.x/f.svg": SVG} {
		got, err := FormatOf(path)
		require.NoError(t, err, path)
		assert.Equal(t, want, got, path)
	}
	_, err := FormatOf("attn.gif")
	assert.EqualError(t, err, `attn.gif: extension ".gif"; plot writes .png, .svg, .jpg and .jpeg`)
	_, err = FormatOf("attn")
	assert.EqualError(t, err, `attn: no extension; plot writes .png, .svg, .jpg and .jpeg`)
}

// TestWriteFileFormats writes one figure in every format and reads each
// back by its own magic: the PNG is the drawn image exactly, the JPEG has
// its size and colours within JPEG's loss, the SVG is well-formed XML of
// the same size with one rect per cell in the cell's colour.
func TestWriteFileFormats(t *testing.T) {
	dir := t.TempDir()
	f := causalFigure(1, 2, 4)
	img, err := f.Draw()
	require.NoError(t, err)
	l, err := f.Layout()
	require.NoError(t, err)

	read := func(name string) []byte {
		path := filepath.Join(dir, name)
		require.NoError(t, f.WriteFile(path))
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		return data
	}

	data := read("attn.png")
	require.True(t, bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")))
	decoded, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err)
	assert.Equal(t, l.Size, decoded.Bounds().Size())
	assert.Equal(t, img.Pix, toRGBA(decoded).Pix)

	for _, name := range []string{"attn.jpg", "attn.JPEG"} {
		data := read(name)
		require.True(t, bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}), name)
		decoded, err := jpeg.Decode(bytes.NewReader(data))
		require.NoError(t, err, name)
		assert.Equal(t, l.Size, decoded.Bounds().Size(), name)
		// Away from edges a cell keeps its colour within JPEG's loss.
		cell := l.CellRect(0, 1, 3, 0)
		got := color.RGBAModel.Convert(decoded.At(cell.Min.X+6, cell.Min.Y+6)).(color.RGBA)
		want := Viridis(float64(f.Rows[0][1].Weights[3*4+0])) // the largest weight is 1
		for _, d := range []int{int(got.R) - int(want.R), int(got.G) - int(want.G), int(got.B) - int(want.B)} {
			assert.LessOrEqual(t, max(d, -d), 12, "%s: %v, want about %v", name, got, want)
		}
	}

	data = read("attn.svg")
	root := parseSVG(t, data)
	assert.Equal(t, strconv.Itoa(l.Size.X), root.Width)
	assert.Equal(t, strconv.Itoa(l.Size.Y), root.Height)
	fills := map[image.Rectangle]string{}
	for _, r := range root.Rects {
		fills[image.Rect(r.X, r.Y, r.X+r.W, r.Y+r.H)] = r.Fill
	}
	for c, h := range f.Rows[0] {
		for i := range 4 {
			for j := range 4 {
				want := Viridis(float64(h.Weights[i*4+j])) // the largest weight is 1
				assert.Equal(t, hex(want), fills[l.CellRect(0, c, i, j)], "head %d cell (%d, %d)", c, i, j)
			}
		}
	}
	var texts []string
	for _, s := range root.Texts {
		texts = append(texts, s.Text)
	}
	assert.Contains(t, texts, "test · attention weights")
	assert.Contains(t, texts, "layer0 · head 1")
	assert.Contains(t, texts, "t3")
	assert.Contains(t, texts, "0.25")

	err = f.WriteFile(filepath.Join(dir, "attn.gif"))
	assert.ErrorContains(t, err, "plot writes .png, .svg, .jpg and .jpeg")
	assert.NoFileExists(t, filepath.Join(dir, "attn.gif"))
}

// TestSVGEscapesText checks that labels with XML's special characters
// come through as text.
func TestSVGEscapesText(t *testing.T) {
	f := causalFigure(1, 1, 3)
	f.Queries = []string{"<s>", "a&b", `"q"`}
	f.Keys = f.Queries
	var buf bytes.Buffer
	require.NoError(t, f.Encode(&buf, SVG))
	var texts []string
	for _, s := range parseSVG(t, buf.Bytes()).Texts {
		texts = append(texts, s.Text)
	}
	assert.Contains(t, texts, "<s>")
	assert.Contains(t, texts, "a&b")
	assert.Contains(t, texts, `"q"`)
}

func TestSVGRefusesTooManyCells(t *testing.T) {
	f := causalFigure(2, 2, 600) // 1.44 million cells at one token each
	l, err := f.Layout()
	require.NoError(t, err)
	require.Equal(t, 1, l.Bin)
	err = f.Encode(io.Discard, SVG)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), "plot: the figure is too large: the SVG would draw 1440000 cells (4 panels of 600×600), over the limit of 1048576 (a PNG has no such limit)")
	require.NoError(t, f.Encode(io.Discard, PNG))
}

// TestDrawBinsLongInputs checks a figure shrunk to squares of tokens: each
// cell has the colour of the largest weight of its square, a NaN anywhere
// in the square shows as NaN, and the subtitle says what a cell is.
func TestDrawBinsLongInputs(t *testing.T) {
	const tokens = 5000
	f := &Figure{Queries: make([]string, tokens), Keys: make([]string, tokens), Subtitle: "rows: queries"}
	for i := range tokens {
		f.Queries[i] = "t" + strconv.Itoa(i)
	}
	f.Keys = f.Queries
	w := make([]float32, tokens*tokens)
	w[0*tokens+1] = 0.5                 // cell (0, 0)
	w[1*tokens+0] = 0.25                // cell (0, 0) too: the largest is 0.5
	w[2*tokens+3] = 1                   // cell (1, 1)
	w[4*tokens+4] = 0.125               // cell (2, 2)
	w[5*tokens+5] = float32(math.NaN()) // cell (2, 2): NaN wins
	f.Rows = [][]Heatmap{{{Title: "long", Weights: w}}}
	l, err := f.Layout()
	require.NoError(t, err)
	require.Equal(t, 2, l.Bin)
	require.Equal(t, 1, l.Cell)
	img, err := f.Draw()
	require.NoError(t, err)
	at := func(i, j int) color.RGBA { p := l.CellRect(0, 0, i, j).Min; return img.RGBAAt(p.X, p.Y) }
	assert.Equal(t, Viridis(0.5), at(0, 0))
	assert.Equal(t, Viridis(1), at(1, 1))
	assert.Equal(t, NaNColor, at(2, 2))
	assert.Equal(t, Viridis(0), at(0, 1))
	assert.Equal(t, "rows: queries · each cell: the largest weight of 2×2 tokens", f.subtitle(l))
}

// svgDoc is what the tests read of an SVG file.
type svgDoc struct {
	Width  string `xml:"width,attr"`
	Height string `xml:"height,attr"`
	Rects  []struct {
		X    int    `xml:"x,attr"`
		Y    int    `xml:"y,attr"`
		W    int    `xml:"width,attr"`
		H    int    `xml:"height,attr"`
		Fill string `xml:"fill,attr"`
	} `xml:"rect"`
	Texts []struct {
		Text string `xml:",chardata"`
	} `xml:"text"`
}

func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	require.True(t, strings.HasPrefix(string(data), `<svg xmlns="http://www.w3.org/2000/svg"`))
	var doc svgDoc
	require.NoError(t, xml.Unmarshal(data, &doc))
	return doc
}

func toRGBA(img image.Image) *image.RGBA {
	out := image.NewRGBA(img.Bounds())
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			out.Set(x, y, img.At(x, y))
		}
	}
	return out
}

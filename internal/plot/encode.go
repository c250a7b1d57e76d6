package plot

import (
	"fmt"
	"image/jpeg"
	"image/png"
	"io"
	"path/filepath"
	"strings"

	"github.com/attnrun/attnrun/internal/atomicfile"
)

// Format is an image file format a figure can be written in.
type Format string

// The formats, named by their usual file extension.
const (
	PNG  Format = "png"
	JPEG Format = "jpeg"
	SVG  Format = "svg"
)

// jpegQuality is high: the picture is flat colour and small text, which
// JPEG's lower qualities smear.
const jpegQuality = 95

// extensions maps every file extension WriteFile knows to its format.
var extensions = map[string]Format{".png": PNG, ".jpg": JPEG, ".jpeg": JPEG, ".svg": SVG}

// FormatOf is the format a file name asks for by its extension, in any
// case; other extensions are an error that names the known ones.
func FormatOf(path string) (Format, error) {
	ext := strings.ToLower(filepath.Ext(path))
	if f, ok := extensions[ext]; ok {
		return f, nil
	}
	what := fmt.Sprintf("extension %q", ext)
	if ext == "" {
		what = "no extension"
	}
	return "", fmt.Errorf("%s: %s; plot writes .png, .svg, .jpg and .jpeg", path, what)
}

// Encode draws the figure and writes it to w in the given format.
func (f *Figure) Encode(w io.Writer, format Format) error {
	l, fc, err := f.prepare()
	if err != nil {
		return err
	}
	return f.encode(w, format, l, fc)
}

// WriteFile draws the figure into a file, in the format its extension
// names (FormatOf). The file is replaced atomically: it holds the old
// picture or the new one, never part of one.
func (f *Figure) WriteFile(path string) error {
	format, err := FormatOf(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	l, fc, err := f.prepare()
	if err != nil {
		return err
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return f.encode(w, format, l, fc) })
}

// encode writes the figure laid out as l in the given format.
func (f *Figure) encode(w io.Writer, format Format, l *Layout, fc *faces) error {
	switch format {
	case SVG:
		return f.encodeSVG(w, l, fc)
	case PNG:
		return png.Encode(w, f.draw(l, fc))
	case JPEG:
		return jpeg.Encode(w, f.draw(l, fc), &jpeg.Options{Quality: jpegQuality})
	}
	return fmt.Errorf("plot: unknown format %q (want %q, %q or %q)", format, PNG, JPEG, SVG)
}

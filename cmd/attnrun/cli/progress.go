package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// redrawEvery is the shortest time between two drawings of a progress bar:
// ten a second are smooth to the eye and cost nothing.
const redrawEvery = 100 * time.Millisecond

// barWidth is the number of cells of the bar itself.
const barWidth = 24

// progress follows a job of many items (the inputs of a batch run, the
// data sets of a check). On a terminal it draws a bar on one line of
// stderr, done/total, rate and time left, redrawn in place with \r; at the
// end it clears the bar and writes one summary line, terminal or not.
// Redrawing pads with spaces instead of using escape sequences, so it
// works on any terminal.
type progress struct {
	w        io.Writer
	bar      bool   // draw the bar: w is a terminal
	noun     string // what an item is, singular ("input")
	total    int
	done     int
	failed   int
	now      func() time.Time
	start    time.Time
	drawnAt  time.Time // when the bar was last drawn
	drawnLen int       // the length of the bar on screen; 0 if not shown
}

// startProgress starts following total items on w, with a bar if w is a
// terminal.
func startProgress(w io.Writer, total int, noun string) *progress {
	return newProgress(w, isTerminal(w), time.Now, total, noun)
}

// newProgress is startProgress with the terminal test and the clock given,
// for tests.
func newProgress(w io.Writer, bar bool, now func() time.Time, total int, noun string) *progress {
	p := &progress{w: w, bar: bar, noun: noun, total: total, now: now, start: now()}
	p.draw()
	return p
}

// isTerminal reports whether w is a character device, as a terminal is
// (/dev/null is one too, and a bar drawn there is harmless).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// advance records one finished item and redraws the bar if it is due.
func (p *progress) advance(failed bool) {
	p.done++
	if failed {
		p.failed++
	}
	if p.now().Sub(p.drawnAt) >= redrawEvery {
		p.draw()
	}
}

// hide takes the bar off the screen so that other output can be written
// (to stdout or stderr, which share the terminal); the next due advance
// draws it again.
func (p *progress) hide() {
	if p.drawnLen > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.drawnLen))
		p.drawnLen = 0
	}
}

// finish clears the bar and writes the summary: how many items, how long
// they took, how many failed.
func (p *progress) finish() {
	p.hide()
	elapsed := p.now().Sub(p.start).Round(time.Millisecond)
	fmt.Fprintf(p.w, "%s in %v, %d failed\n", plural(p.done, p.noun), elapsed, p.failed)
}

// draw puts the bar on screen, over the previous one.
func (p *progress) draw() {
	if !p.bar {
		return
	}
	line := p.render()
	pad := max(p.drawnLen-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.drawnLen = len(line)
	p.drawnAt = p.now()
}

// render is the bar's text, ASCII only so that its length is its width:
//
//	[#########---------------] 12/32  3.4/s  ETA 6s
func (p *progress) render() string {
	filled := 0
	if p.total > 0 {
		filled = min(p.done*barWidth/p.total, barWidth)
	}
	bar := strings.Repeat("#", filled) + strings.Repeat("-", barWidth-filled)
	line := fmt.Sprintf("[%s] %d/%d", bar, p.done, p.total)
	elapsed := p.now().Sub(p.start)
	if p.done == 0 || elapsed <= 0 {
		return line
	}
	rate := float64(p.done) / elapsed.Seconds()
	left := time.Duration(float64(p.total-p.done) / rate * float64(time.Second))
	line += fmt.Sprintf("  %.1f/s  ETA %v", rate, left.Round(time.Second))
	if p.failed > 0 {
		line += fmt.Sprintf("  %d failed", p.failed)
	}
	return line
}

// plural says "1 input", "3 inputs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

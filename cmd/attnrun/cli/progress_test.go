package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// at sets the clock to d after its start.
func (c *fakeClock) at(d time.Duration) { c.t = time.Unix(1000, 0).Add(d) }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.at(0)
	return c
}

func TestProgressBar(t *testing.T) {
	var out bytes.Buffer
	clock := newFakeClock()
	p := newProgress(&out, true, clock.now, 4, "input")
	start := "\r[------------------------] 0/4"
	assert.Equal(t, start, out.String(), "drawn at once")

	clock.at(50 * time.Millisecond)
	p.advance(false)
	assert.Equal(t, start, out.String(), "not redrawn within 100 ms")

	clock.at(2 * time.Second)
	p.advance(true)
	half := "[############------------] 2/4  1.0/s  ETA 2s  1 failed"
	assert.Equal(t, start+"\r"+half, out.String())

	out.Reset()
	p.hide() // a message is about to be written
	blank := "\r" + strings.Repeat(" ", len(half)) + "\r"
	assert.Equal(t, blank, out.String())
	p.hide() // hiding twice writes nothing more
	assert.Equal(t, blank, out.String())

	out.Reset()
	clock.at(2050 * time.Millisecond)
	p.advance(false)
	assert.Empty(t, out.String(), "50 ms after the last drawing")

	clock.at(3 * time.Second)
	p.advance(false)
	full := "[########################] 4/4  1.3/s  ETA 0s  1 failed"
	assert.Equal(t, "\r"+full, out.String())

	out.Reset()
	p.finish()
	assert.Equal(t, "\r"+strings.Repeat(" ", len(full))+"\r"+"4 inputs in 3s, 1 failed\n", out.String())
}

func TestProgressBarPadsAShorterLine(t *testing.T) {
	var out bytes.Buffer
	clock := newFakeClock()
	p := newProgress(&out, true, clock.now, 12, "data set")
	for i := 1; i <= 2; i++ {
		clock.at(time.Duration(i) * time.Second)
		p.advance(false)
	}
	out.Reset()
	clock.at(3 * time.Second)
	p.advance(false)
	// "ETA 10s" became "ETA 9s": a space covers the old line's last cell.
	assert.Equal(t, "\r[######------------------] 3/12  1.0/s  ETA 9s ", out.String())
}

func TestProgressWithoutTerminalWritesOnlyTheSummary(t *testing.T) {
	var out bytes.Buffer
	clock := newFakeClock()
	p := newProgress(&out, false, clock.now, 3, "input")
	for i := 1; i <= 3; i++ {
		clock.at(time.Duration(i) * 400 * time.Millisecond)
		p.advance(i == 2)
		p.hide()
	}
	p.finish()
	assert.Equal(t, "3 inputs in 1.2s, 1 failed\n", out.String())
}

func TestIsTerminal(t *testing.T) {
	assert.False(t, isTerminal(&bytes.Buffer{}))
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, isTerminal(f), "a regular file")
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		defer null.Close()
		assert.True(t, isTerminal(null), "a character device, where a bar is harmless")
	}
}

func TestPlural(t *testing.T) {
	assert.Equal(t, "1 data set", plural(1, "data set"))
	assert.Equal(t, "0 inputs", plural(0, "input"))
	assert.Equal(t, "12 inputs", plural(12, "input"))
}

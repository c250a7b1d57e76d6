package tensorio

import (
	"errors"
	"fmt"
	"github.com/attnrun/attnrun/array"
	"strconv"
	"strings"
)

// errStructured refuses NumPy record arrays, whose descr is a list.
var errStructured = fmt.Errorf("structured dtypes (a descr list) are not supported (want %s)", supportedTypes)

// npyHeader is what a .npy header declares about the array that follows.
type npyHeader struct {
	descr        string // e.g. "<f4"
	fortranOrder bool
	shape        []int64
}

// parseNPYHeader parses the header text of a .npy file: a Python dict
// literal with exactly the keys 'descr', 'fortran_order' and 'shape',
// followed by padding spaces and a newline. It is a small strict parser for
// that grammar, not a Python evaluator.
func parseNPYHeader(text string) (npyHeader, error) {
	p := &literalParser{src: text}
	var h npyHeader
	seen := map[string]bool{}
	if err := p.expect('{'); err != nil {
		return h, err
	}
	for !p.peekIs('}') {
		key, err := p.str()
		if err != nil {
			return h, fmt.Errorf("header key: %w", err)
		}
		if seen[key] {
			return h, fmt.Errorf("header key %q appears twice", key)
		}
		seen[key] = true
		if err := p.expect(':'); err != nil {
			return h, err
		}
		switch key {
		case "descr":
			if p.peekIs('[') {
				return h, errStructured
			}
			if h.descr, err = p.str(); err != nil {
				return h, fmt.Errorf("descr: %w", err)
			}
		case "fortran_order":
			if h.fortranOrder, err = p.boolean(); err != nil {
				return h, fmt.Errorf("fortran_order: %w", err)
			}
		case "shape":
			if h.shape, err = p.intTuple(); err != nil {
				return h, fmt.Errorf("shape: %w", err)
			}
		default:
			return h, fmt.Errorf("unexpected header key %q (want descr, fortran_order and shape)", key)
		}
		if !p.peekIs('}') {
			if err := p.expect(','); err != nil {
				return h, err
			}
		}
	}
	if err := p.expect('}'); err != nil {
		return h, err
	}
	for _, key := range []string{"descr", "fortran_order", "shape"} {
		if !seen[key] {
			return h, fmt.Errorf("header has no %q key", key)
		}
	}
	if rest := strings.Trim(p.src[p.pos:], " \t\r\n"); rest != "" {
		return h, fmt.Errorf("unexpected %q after the header dict", clip(rest))
	}
	return h, nil
}

// literalParser reads the tokens of a Python literal from src.
type literalParser struct {
	src string
	pos int
}

func (p *literalParser) skipSpace() {
	for p.pos < len(p.src) && strings.IndexByte(" \t\r\n", p.src[p.pos]) >= 0 {
		p.pos++
	}
}

// peekIs reports whether the next token starts with c.
func (p *literalParser) peekIs(c byte) bool {
	p.skipSpace()
	return p.pos < len(p.src) && p.src[p.pos] == c
}

func (p *literalParser) expect(c byte) error {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return fmt.Errorf("header ends where %q was expected", c)
	}
	if p.src[p.pos] != c {
		return fmt.Errorf("header has %q where %q was expected", clip(p.src[p.pos:]), c)
	}
	p.pos++
	return nil
}

// str reads a quoted string without escapes, which is all NumPy writes.
func (p *literalParser) str() (string, error) {
	p.skipSpace()
	if p.pos >= len(p.src) || (p.src[p.pos] != '\'' && p.src[p.pos] != '"') {
		return "", fmt.Errorf("want a quoted string at %q", clip(p.src[p.pos:]))
	}
	quote := p.src[p.pos]
	end := strings.IndexByte(p.src[p.pos+1:], quote)
	if end < 0 {
		return "", errors.New("unterminated string")
	}
	s := p.src[p.pos+1 : p.pos+1+end]
	if strings.ContainsAny(s, "\\\n") {
		return "", fmt.Errorf("string %q has escapes or newlines", clip(s))
	}
	p.pos += end + 2
	return s, nil
}

func (p *literalParser) boolean() (bool, error) {
	p.skipSpace()
	for _, lit := range []struct {
		text  string
		value bool
	}{{"True", true}, {"False", false}} {
		if strings.HasPrefix(p.src[p.pos:], lit.text) {
			p.pos += len(lit.text)
			return lit.value, nil
		}
	}
	return false, fmt.Errorf("want True or False at %q", clip(p.src[p.pos:]))
}

// intTuple reads a tuple of non-negative integers: (), (3,), (2, 3).
// Python 2 era files may suffix integers with L.
func (p *literalParser) intTuple() ([]int64, error) {
	if err := p.expect('('); err != nil {
		return nil, err
	}
	dims := []int64{}
	for !p.peekIs(')') {
		p.skipSpace()
		start := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		digits := p.src[start:p.pos]
		if digits == "" {
			return nil, fmt.Errorf("want a non-negative integer at %q", clip(p.src[start:]))
		}
		d, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("dimension %s is too large: %w", clip(digits), ErrLimit)
		}
		if p.pos < len(p.src) && p.src[p.pos] == 'L' {
			p.pos++
		}
		dims = append(dims, d)
		if p.peekIs(')') {
			if len(dims) == 1 {
				// (3) is an int in Python, not a tuple.
				return nil, errors.New("a one-element shape needs a trailing comma: (n,)")
			}
			break
		}
		if err := p.expect(','); err != nil {
			return nil, err
		}
	}
	return dims, p.expect(')')
}

// clip shortens text quoted in an error message.
func clip(s string) string {
	const max = 20
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// formatNPYHeader writes the header dict exactly as NumPy 1.24's np.save
// does, including the spare spaces it leaves for growing the first axis in
// place, so that files written here are byte-identical to NumPy's.
func formatNPYHeader(descr string, shape []int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, array.FormatShape(shape))
	if len(shape) > 0 {
		const growthAxisMaxDigits = 21 // numpy.lib.format.GROWTH_AXIS_MAX_DIGITS
		b.WriteString(strings.Repeat(" ", growthAxisMaxDigits-len(strconv.FormatInt(shape[0], 10))))
	}
	return b.String()
}

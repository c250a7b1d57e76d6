package cli

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// span is a half-open range of token positions, [start, stop).
type span struct{ start, stop int }

func (s span) len() int { return s.stop - s.start }

// bound is one end of a --tokens range as written: a position, negative
// counting from the end as in Python, or absent (set is false).
type bound struct {
	at  int
	set bool
}

// tokenRange is one START:STOP of --tokens.
type tokenRange struct {
	text        string
	start, stop bound
}

// tokenSelection is --tokens: one range for queries and keys alike, or a
// range for each (QUERIES,KEYS). The zero value selects every token.
type tokenSelection struct {
	text          string
	queries, keys *tokenRange
}

// parseTokens reads --tokens: START:STOP, or QUERIES,KEYS with a range
// each. Either end may be left out (":64", "-16:") and a negative end
// counts from the last token, as in a Python slice.
func parseTokens(text string) (tokenSelection, error) {
	sel := tokenSelection{text: text}
	if text == "" {
		return sel, nil
	}
	if strings.ContainsFunc(text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsSpace(r) }) {
		return sel, usageError{fmt.Errorf("--tokens %q: token labels go in --labels; --tokens takes a range of tokens such as 0:64", text)}
	}
	parts := strings.Split(text, ",")
	if len(parts) > 2 {
		return sel, usageError{fmt.Errorf("--tokens %q: want one range (START:STOP, for queries and keys) or two (QUERIES,KEYS), got %d", text, len(parts))}
	}
	var ranges []*tokenRange
	for _, p := range parts {
		r, err := parseRange(p)
		if err != nil {
			return sel, usageError{fmt.Errorf("--tokens %q: %w", text, err)}
		}
		ranges = append(ranges, r)
	}
	sel.queries, sel.keys = ranges[0], ranges[len(ranges)-1]
	return sel, nil
}

// parseRange reads START:STOP.
func parseRange(text string) (*tokenRange, error) {
	startText, stopText, ok := strings.Cut(text, ":")
	if !ok || strings.Contains(stopText, ":") {
		return nil, fmt.Errorf("%q is not a range START:STOP such as 0:64 (a step is not supported)", text)
	}
	r := &tokenRange{text: text}
	for _, end := range []struct {
		text string
		dst  *bound
	}{{startText, &r.start}, {stopText, &r.stop}} {
		if end.text == "" {
			continue
		}
		n, err := strconv.Atoi(end.text)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not a token position", text, end.text)
		}
		*end.dst = bound{n, true}
	}
	return r, nil
}

// resolve turns a range into positions among n tokens (what names them in
// errors: "queries", "keys", "tokens"). Unlike a Python slice, an end past
// either side is an error, and so is a range that selects nothing: a
// picture of other tokens than the ones asked for would mislead.
func (r *tokenRange) resolve(n int, what string) (span, error) {
	if r == nil {
		return span{0, n}, nil
	}
	at := func(b bound, def int) (int, error) {
		if !b.set {
			return def, nil
		}
		if b.at < -n || b.at > n {
			return 0, fmt.Errorf("--tokens %s: position %d is out of range: the input has %d %s (0 to %d, or -%d to -1 from the end)",
				r.text, b.at, n, what, n-1, n)
		}
		if b.at < 0 {
			return n + b.at, nil
		}
		return b.at, nil
	}
	start, err := at(r.start, 0)
	if err != nil {
		return span{}, err
	}
	stop, err := at(r.stop, n)
	if err != nil {
		return span{}, err
	}
	if start >= stop {
		return span{}, fmt.Errorf("--tokens %s selects no %s: it runs from %d to %d, and the input has %d", r.text, what, start, stop, n)
	}
	return span{start, stop}, nil
}

// resolve selects among tq queries and tk keys.
func (s tokenSelection) resolve(tq, tk int) (queries, keys span, err error) {
	qWhat, kWhat := "queries", "keys"
	if s.queries == s.keys && tq == tk {
		qWhat, kWhat = "tokens", "tokens"
	}
	if queries, err = s.queries.resolve(tq, qWhat); err != nil {
		return span{}, span{}, usageError{err}
	}
	if keys, err = s.keys.resolve(tk, kWhat); err != nil {
		return span{}, span{}, usageError{err}
	}
	return queries, keys, nil
}

// parseHeads reads --heads: head indices and START:STOP ranges separated
// by commas ("0,3,5", "0:4,8"), in the order given, each head once. What
// they are checked against (each layer's head count) comes later.
func parseHeads(text string) ([]headPick, error) {
	if text == "" {
		return nil, nil
	}
	var picks []headPick
	for _, part := range strings.Split(text, ",") {
		p := headPick{text: part}
		var err error
		if lo, hi, isRange := strings.Cut(part, ":"); isRange {
			p.first, err = headNumber(text, lo)
			if err == nil {
				p.stop, err = headNumber(text, hi)
			}
			if err == nil && p.first >= p.stop {
				err = usageError{fmt.Errorf("--heads %q: %s selects no heads", text, part)}
			}
		} else {
			p.first, err = headNumber(text, part)
			p.stop = p.first + 1
		}
		if err != nil {
			return nil, err
		}
		picks = append(picks, p)
	}
	return picks, nil
}

// headPick is one item of --heads: heads first to stop-1.
type headPick struct {
	text        string
	first, stop int
}

func headNumber(list, text string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(text))
	if err != nil || n < 0 {
		return 0, usageError{fmt.Errorf("--heads %q: %q is not a head number (0, 1, ...)", list, text)}
	}
	return n, nil
}

// selectHeads lists the heads --heads picks of a layer with h heads: every
// head when picks is empty.
func selectHeads(picks []headPick, list, layer string, h int) ([]int, error) {
	if len(picks) == 0 {
		heads := make([]int, h)
		for i := range heads {
			heads[i] = i
		}
		return heads, nil
	}
	var heads []int
	seen := map[int]bool{}
	for _, p := range picks {
		if p.stop > h {
			return nil, usageError{fmt.Errorf("--heads %q: %s is out of range: layer %q has %d head(s) (0 to %d)", list, p.text, layer, h, h-1)}
		}
		for i := p.first; i < p.stop; i++ {
			if seen[i] {
				return nil, usageError{fmt.Errorf("--heads %q: head %d is listed twice", list, i)}
			}
			seen[i] = true
			heads = append(heads, i)
		}
	}
	return heads, nil
}

package graph

// Uses records who writes and who reads each value of a graph whose values
// are named by V (names, or an executor's value slots) and whose nodes are
// N. Omitted optional inputs and outputs, spelled by the absent value the
// index is made with, are not values.
type Uses[V comparable, N comparable] struct {
	absent   V
	producer map[V]N
	readers  map[V][]N // one entry per node input that reads the value, in node order
	outputs  map[V]bool
}

// NewUses returns an empty index; absent is how an omitted input or output
// is spelled ("" for names, -1 for slots).
func NewUses[V comparable, N comparable](absent V) *Uses[V, N] {
	return &Uses[V, N]{absent: absent, producer: map[V]N{}, readers: map[V][]N{}, outputs: map[V]bool{}}
}

// Add records node n, which reads ins and writes outs. Nodes are added in
// graph order; a later writer of a value replaces an earlier one.
func (u *Uses[V, N]) Add(n N, ins, outs []V) {
	for _, v := range ins {
		if v != u.absent {
			u.readers[v] = append(u.readers[v], n)
		}
	}
	for _, v := range outs {
		if v != u.absent {
			u.producer[v] = n
		}
	}
}

// MarkOutput records that v is a graph output.
func (u *Uses[V, N]) MarkOutput(v V) { u.outputs[v] = true }

// Producer returns the node that writes v; ok is false for graph inputs,
// initializers and unknown values.
func (u *Uses[V, N]) Producer(v V) (n N, ok bool) {
	n, ok = u.producer[v]
	return n, ok
}

// Readers lists the nodes that read v, in graph order, once per input:
// a node that reads v twice is listed twice. The slice is the index's own.
func (u *Uses[V, N]) Readers(v V) []N { return u.readers[v] }

// LastReader returns the last node that reads v.
func (u *Uses[V, N]) LastReader(v V) (n N, ok bool) {
	rs := u.readers[v]
	if len(rs) == 0 {
		return n, false
	}
	return rs[len(rs)-1], true
}

// IsOutput reports whether v is a graph output.
func (u *Uses[V, N]) IsOutput(v V) bool { return u.outputs[v] }

// Private reports whether v is read by exactly one node input and is no
// graph output: a rewrite may then swallow it together with its reader.
func (u *Uses[V, N]) Private(v V) bool {
	return v != u.absent && len(u.readers[v]) == 1 && !u.outputs[v]
}

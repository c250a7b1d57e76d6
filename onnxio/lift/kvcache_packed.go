package lift

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// A KV cache may come packed: GPT-2's exports pass the keys and values of
// a layer as one past input (2, B, H, P, head_dim), read entry by entry
// along its first axis (a Gather of one index, a Split into entries of one
// that are Squeezed, a Slice of one entry Squeezed), and return one present
// output that stacks the extended entries: a Concat on axis 0 of each
// Unsqueezed on axis 0. The lifter reads such a graph as the same graph
// with one input and one output per entry (unpackCache), splits that
// graph's cache as any other (kvcache.go), and pairs the entries back
// (pairPacks): entry i of a present must extend entry i of one past. The
// lifted model's present output then stacks the caches of its entries'
// layers (Output.Stack), sliced from the packed past (RunCache), so that
// the lifted file declares the packed interface the source declares.

// cachePack is a packed cache of the graph's interface, as unpackCache
// reads it.
type cachePack struct {
	name    string   // the packed graph input, or output
	entries []string // the values standing for its entries in the unpacked graph
}

// cachePairing is a packed past input and the packed present output that
// returns it extended, entry by entry.
type cachePairing struct {
	past, present cachePack
}

// readCache reads m's KV-cache interface (packed caches unpacked, keys
// cached transposed turned back) and splits it off (splitCache). It
// returns the graph with its past inputs as the lift reads it (full), the
// graph without them (split), the links and the packed caches; full and
// split are m and no links when m has no cache or it cannot be split (the
// error says why).
func readCache(m *onnxpb.ModelProto) (full, split *onnxpb.ModelProto, links []cacheLink, pairs []cachePairing, err error) {
	full, pasts, presents := unpackCache(m)
	full = untransposeCaches(full)
	split, links, err = splitCache(full)
	if err == nil && len(pasts)+len(presents) > 0 {
		pairs, err = pairPacks(pasts, presents, links)
	}
	if err != nil || len(links) == 0 {
		return m, m, nil, nil, err
	}
	return full, split, links, pairs, nil
}

// unpackCache rewrites m's packed caches (see above) as one graph input and
// output per entry. A packed input is a non-weight input of rank 5 with a
// fixed first dimension whose every reader reads one entry; a packed
// output is a Concat on axis 0 of values each Unsqueezed on axis 0 for it
// alone. It returns m itself when it has neither.
func unpackCache(m *onnxpb.ModelProto) (*onnxpb.ModelProto, []cachePack, []cachePack) {
	gp := m.GetGraph()
	idx := newProtoIndex(gp)
	replaced := map[*onnxpb.NodeProto]*onnxpb.NodeProto{} // by Identity, or nil: dropped
	var pasts, presents []cachePack
	var inputs, outputs []*onnxpb.ValueInfoProto
	for _, in := range gp.GetInput() {
		dims := onnxio.Dims(in)
		if idx.inits[in.GetName()] || len(dims) != 5 || !dims[0].Known || dims[0].Value < 1 || dims[0].Value > maxPackedEntries {
			inputs = append(inputs, in)
			continue
		}
		pack := cachePack{name: in.GetName()}
		for i := range dims[0].Value {
			pack.entries = append(pack.entries, idx.freshName(fmt.Sprintf("%s[%d]", in.GetName(), i)))
		}
		reads, ok := idx.entryReads(in.GetName(), pack.entries)
		if !ok {
			inputs = append(inputs, in)
			continue
		}
		maps.Copy(replaced, reads)
		pasts = append(pasts, pack)
		for _, e := range pack.entries {
			inputs = append(inputs, entryInfo(in, e))
		}
	}
	for _, out := range gp.GetOutput() {
		stacked, drop, ok := idx.stackedEntries(out.GetName())
		if !ok || len(onnxio.Dims(out)) != 5 {
			outputs = append(outputs, out)
			continue
		}
		for _, n := range drop {
			replaced[n] = nil
		}
		presents = append(presents, cachePack{name: out.GetName(), entries: stacked})
		for _, e := range stacked {
			outputs = append(outputs, entryInfo(out, e))
		}
	}
	if len(pasts)+len(presents) == 0 {
		return m, nil, nil
	}
	out := proto.Clone(m).(*onnxpb.ModelProto)
	og := out.GetGraph()
	og.Input, og.Output, og.Node = inputs, outputs, nil
	for _, n := range gp.GetNode() {
		r, ok := replaced[n]
		switch {
		case !ok:
			og.Node = append(og.Node, n)
		case r != nil:
			og.Node = append(og.Node, r)
		}
	}
	return out, pasts, presents
}

// maxPackedEntries bounds the entries of a packed cache (a file's number).
const maxPackedEntries = 1 << 12

// entryInfo declares one entry of a packed cache vi as name: vi without
// its first axis.
func entryInfo(vi *onnxpb.ValueInfoProto, name string) *onnxpb.ValueInfoProto {
	e := proto.Clone(vi).(*onnxpb.ValueInfoProto)
	e.Name = proto.String(name)
	shape := e.GetType().GetTensorType().GetShape()
	shape.Dim = shape.Dim[1:]
	return e
}

// protoIndex indexes a graph's values for the rewrites of this file.
type protoIndex struct {
	gp       *onnxpb.GraphProto
	inits    map[string]bool
	names    map[string]bool // every value the graph names
	producer map[string]*onnxpb.NodeProto
	readers  map[string][]*onnxpb.NodeProto
	outputs  map[string]bool
}

func newProtoIndex(gp *onnxpb.GraphProto) *protoIndex {
	x := &protoIndex{gp: gp, inits: map[string]bool{}, names: map[string]bool{}, producer: map[string]*onnxpb.NodeProto{},
		readers: map[string][]*onnxpb.NodeProto{}, outputs: map[string]bool{}}
	for _, t := range gp.GetInitializer() {
		x.inits[t.GetName()], x.names[t.GetName()] = true, true
	}
	for _, vi := range gp.GetInput() {
		x.names[vi.GetName()] = true
	}
	for _, vi := range gp.GetOutput() {
		x.outputs[vi.GetName()] = true
	}
	for _, n := range gp.GetNode() {
		for _, v := range n.GetInput() {
			if v != "" && !slices.Contains(x.readers[v], n) {
				x.readers[v] = append(x.readers[v], n)
			}
		}
		for _, v := range n.GetOutput() {
			x.producer[v], x.names[v] = n, true
		}
	}
	return x
}

// freshName is name, or name with a suffix, that the graph does not use.
func (x *protoIndex) freshName(name string) string {
	base := name
	for k := 2; x.names[name]; k++ {
		name = fmt.Sprintf("%s_%d", base, k)
	}
	x.names[name] = true
	return name
}

// constant is v's value when a Constant node or an initializer holds it,
// nil otherwise.
func (x *protoIndex) constant(v string) *onnxpb.TensorProto {
	var tp *onnxpb.TensorProto
	if n := x.producer[v]; n != nil && n.GetOpType() == "Constant" {
		for _, a := range n.GetAttribute() {
			if a.GetName() == "value" {
				tp = a.GetT()
			}
		}
	} else if n == nil {
		for _, t := range x.gp.GetInitializer() {
			if t.GetName() == v {
				tp = t
			}
		}
	}
	return tp
}

// ints reads v as constant integers (an initializer or a Constant node)
// and its rank.
func (x *protoIndex) ints(v string) ([]int64, int, bool) {
	tp := x.constant(v)
	if tp == nil || len(tp.GetDims()) > 1 {
		return nil, 0, false
	}
	d, err := onnxio.TensorToDense(tp)
	if err != nil {
		return nil, 0, false
	}
	switch data := d.Data().(type) {
	case []int64:
		return data, len(tp.GetDims()), true
	case []int32:
		out := make([]int64, len(data))
		for i, v := range data {
			out[i] = int64(v)
		}
		return out, len(tp.GetDims()), true
	case int64:
		return []int64{data}, 0, true
	case int32:
		return []int64{int64(data)}, 0, true
	}
	return nil, 0, false
}

// listAttrOrInput reads a node's ints given as attribute name (older
// opsets) or as its input at (newer ones); ok is false when neither holds
// constants.
func (x *protoIndex) listAttrOrInput(n *onnxpb.NodeProto, name string, at int) ([]int64, bool) {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetInts(), true
		}
	}
	if at < len(n.GetInput()) && n.GetInput()[at] != "" {
		v, _, ok := x.ints(n.GetInput()[at])
		return v, ok
	}
	return nil, false
}

// isAxis0 reports whether a Squeeze or Unsqueeze works on axis 0 alone.
func (x *protoIndex) isAxis0(n *onnxpb.NodeProto) bool {
	axes, ok := x.listAttrOrInput(n, "axes", 1)
	return ok && slices.Equal(axes, []int64{0})
}

// entryReads maps every node that reads an entry of the packed input past
// to an Identity of that entry's input (entries), and the nodes that only
// select entries for them to nil; ok is false when some node reads past
// otherwise.
func (x *protoIndex) entryReads(past string, entries []string) (map[*onnxpb.NodeProto]*onnxpb.NodeProto, bool) {
	n := int64(len(entries))
	out := map[*onnxpb.NodeProto]*onnxpb.NodeProto{}
	entry := func(i int64) (string, bool) {
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return "", false
		}
		return entries[i], true
	}
	// squeezed replaces the readers of v, one entry kept on axis 0, by
	// Identities of the entry.
	squeezed := func(v, e string) bool {
		if x.outputs[v] {
			return false
		}
		for _, r := range x.readers[v] {
			if r.GetOpType() != "Squeeze" || r.GetInput()[0] != v || !x.isAxis0(r) {
				return false
			}
			out[r] = identityOf(r, e)
		}
		return true
	}
	if len(x.readers[past]) == 0 {
		return nil, false
	}
	for _, r := range x.readers[past] {
		ins := r.GetInput()
		if ins[0] != past || slices.Contains(ins[1:], past) {
			return nil, false
		}
		axis, _ := intAttr(r, "axis")
		switch r.GetOpType() {
		case "Gather": // one index, a scalar: the entry itself
			i, rank, ok := x.ints(ins[1])
			e, in := "", false
			if ok && rank == 0 && len(i) == 1 {
				e, in = entry(i[0])
			}
			if axis != 0 || !in {
				return nil, false
			}
			out[r] = identityOf(r, e)
		case "Split": // entries of one each, then Squeezed
			sizes, given := x.listAttrOrInput(r, "split", 1)
			if axis != 0 || int64(len(r.GetOutput())) != n || given && (int64(len(sizes)) != n || slices.ContainsFunc(sizes, func(s int64) bool { return s != 1 })) {
				return nil, false
			}
			for i, v := range r.GetOutput() {
				if v != "" && !squeezed(v, entries[i]) {
					return nil, false
				}
			}
			out[r] = nil
		case "Slice": // one entry on axis 0, then Squeezed
			e, ok := x.slicedEntry(r, entry)
			if !ok || !squeezed(r.GetOutput()[0], e) {
				return nil, false
			}
			out[r] = nil
		default:
			return nil, false
		}
	}
	return out, true
}

// slicedEntry reads a Slice of a packed input that keeps one entry of axis
// 0: starts [i], ends [i+1], axes [0] (or none) and steps [1] (or none).
func (x *protoIndex) slicedEntry(r *onnxpb.NodeProto, entry func(int64) (string, bool)) (string, bool) {
	ins := r.GetInput()
	if len(ins) < 3 {
		return "", false // opset 1's Slice keeps them as attributes: not read
	}
	starts, _, ok1 := x.ints(ins[1])
	ends, _, ok2 := x.ints(ins[2])
	if !ok1 || !ok2 || len(starts) != 1 || len(ends) != 1 {
		return "", false
	}
	for at, want := range map[int]int64{3: 0, 4: 1} { // axes, steps
		if at < len(ins) && ins[at] != "" {
			if v, _, ok := x.ints(ins[at]); !ok || !slices.Equal(v, []int64{want}) {
				return "", false
			}
		}
	}
	if starts[0] < 0 || ends[0] != starts[0]+1 {
		return "", false
	}
	return entry(starts[0])
}

// stackedEntries reads a graph output written as a Concat on axis 0 of
// values each Unsqueezed on axis 0 for it alone: it returns those values
// and the nodes that stack them.
func (x *protoIndex) stackedEntries(o string) ([]string, []*onnxpb.NodeProto, bool) {
	cat := x.producer[o]
	if cat == nil || cat.GetOpType() != "Concat" || len(cat.GetInput()) < 1 {
		return nil, nil, false
	}
	if axis, _ := intAttr(cat, "axis"); axis != 0 {
		return nil, nil, false
	}
	drop := []*onnxpb.NodeProto{cat}
	var entries []string
	for _, u := range cat.GetInput() {
		un := x.producer[u]
		if un == nil || un.GetOpType() != "Unsqueeze" || !x.isAxis0(un) || x.outputs[u] || len(x.readers[u]) != 1 {
			return nil, nil, false
		}
		e := un.GetInput()[0]
		if x.outputs[e] || x.producer[e] == nil || slices.Contains(entries, e) {
			return nil, nil, false
		}
		entries, drop = append(entries, e), append(drop, un)
	}
	return entries, drop, true
}

// identityOf is an Identity of v in place of node n, writing n's output.
func identityOf(n *onnxpb.NodeProto, v string) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: n.Name, OpType: proto.String("Identity"), Input: []string{v}, Output: n.GetOutput()[:1]}
}

// pairPacks pairs each packed present output with the packed past input
// it extends, entry by entry, through the links of the unpacked graph.
func pairPacks(pasts, presents []cachePack, links []cacheLink) ([]cachePairing, error) {
	pastOf := map[string]string{} // an entry's present: its past
	for _, l := range links {
		pastOf[l.present] = l.past
	}
	var pairs []cachePairing
	paired := map[string]bool{}
	for _, pr := range presents {
		found := false
		for _, pa := range pasts {
			if len(pa.entries) != len(pr.entries) {
				continue
			}
			same := true
			for i, e := range pr.entries {
				same = same && pastOf[e] == pa.entries[i]
			}
			if same && !paired[pa.name] {
				pairs, paired[pa.name], found = append(pairs, cachePairing{past: pa, present: pr}), true, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("output %q stacks %d values on axis 0, which do not extend the entries of one past input in order", pr.name, len(pr.entries))
		}
	}
	for _, pa := range pasts {
		if !paired[pa.name] {
			return nil, fmt.Errorf("input %q stacks %d caches on axis 0, which no output returns extended", pa.name, len(pa.entries))
		}
	}
	return pairs, nil
}

// untransposeCaches rewrites the keys GPT-2's exports cache transposed:
// Kᵀ = Concat(Transpose(past), Kᵀ_new) on the last axis, read by the
// scores and returned as Transpose(Kᵀ) (perm 0,1,3,2 both), becomes K =
// Concat(past, Transpose(Kᵀ_new)) on the sequence axis, returned as it
// is, and Kᵀ = Transpose(K): the same numbers, a cache as kvcache.go reads
// it.
func untransposeCaches(m *onnxpb.ModelProto) *onnxpb.ModelProto {
	gp := m.GetGraph()
	idx := newProtoIndex(gp)
	swap := []int64{0, 1, 3, 2}
	isSwap := func(n *onnxpb.NodeProto) bool {
		return n != nil && n.GetOpType() == "Transpose" && slices.Equal(attrInts(n, "perm"), swap)
	}
	rewrites := map[*onnxpb.NodeProto][]*onnxpb.NodeProto{} // a node: the nodes in its place
	for _, cat := range gp.GetNode() {
		ins := cat.GetInput()
		axis, _ := intAttr(cat, "axis")
		if cat.GetOpType() != "Concat" || len(ins) != 2 || axis != 3 && axis != -1 || !isSwap(idx.producer[ins[0]]) || len(idx.readers[ins[0]]) != 1 || idx.outputs[ins[0]] {
			continue
		}
		var back *onnxpb.NodeProto // the Transpose returning the cache
		for _, r := range idx.readers[cat.GetOutput()[0]] {
			if isSwap(r) && idx.outputs[r.GetOutput()[0]] {
				back = r
			}
		}
		if back == nil || rewrites[back] != nil {
			continue
		}
		past := idx.producer[ins[0]].GetInput()[0]
		fresh := idx.freshName(ins[1] + "_untransposed")
		rewrites[idx.producer[ins[0]]] = []*onnxpb.NodeProto{}
		rewrites[cat] = []*onnxpb.NodeProto{
			{OpType: proto.String("Transpose"), Input: []string{ins[1]}, Output: []string{fresh}, Attribute: []*onnxpb.AttributeProto{intsAttribute("perm", swap...)}},
			{Name: cat.Name, OpType: proto.String("Concat"), Input: []string{past, fresh}, Output: back.GetOutput(), Attribute: []*onnxpb.AttributeProto{intAttribute("axis", sequenceAxis)}},
			{Name: back.Name, OpType: proto.String("Transpose"), Input: back.GetOutput(), Output: cat.GetOutput(), Attribute: []*onnxpb.AttributeProto{intsAttribute("perm", swap...)}},
		}
		rewrites[back] = []*onnxpb.NodeProto{}
	}
	if len(rewrites) == 0 {
		return m
	}
	out := proto.Clone(m).(*onnxpb.ModelProto)
	out.GetGraph().Node = nil
	for _, n := range gp.GetNode() {
		if r, ok := rewrites[n]; ok {
			out.GetGraph().Node = append(out.GetGraph().Node, r...)
			continue
		}
		out.GetGraph().Node = append(out.GetGraph().Node, n)
	}
	return out
}

// attrInts is a node's ints attribute.
func attrInts(n *onnxpb.NodeProto, name string) []int64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetInts()
		}
	}
	return nil
}

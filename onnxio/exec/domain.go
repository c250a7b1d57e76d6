package exec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// previewDomain is ONNX's domain of experimental operators, such as
// FlexAttention.
const previewDomain = "ai.onnx.preview"

// domainVersions lists the operator domains other than the default one
// whose ops the executor runs, each with the newest version of the domain
// it implements. ONNX keeps no versions of its experimental ops ("No
// versioning maintained for experimental ops"): ai.onnx.preview has only
// version 1, and a later one is refused rather than run on guesses.
var domainVersions = map[string]int{previewDomain: 1}

// opKey is the key of an op in the ops table: its type in the default
// domain, its domain and type joined by a dot in any other
// ("ai.onnx.preview.FlexAttention"). ONNX op types hold no dots, so the
// two kinds of keys cannot collide.
func opKey(domain, opType string) string {
	if isDefaultDomain(domain) {
		return opType
	}
	return domain + "." + opType
}

// isDefaultDomain reports whether domain names the default ONNX domain,
// which files write as "" or "ai.onnx".
func isDefaultDomain(domain string) bool { return domain == "" || domain == "ai.onnx" }

// opsetImports returns the versions a model imports, by domain; the
// default domain is under "".
func opsetImports(m *onnxpb.ModelProto) map[string]int {
	imports := map[string]int{}
	for _, o := range m.GetOpsetImport() {
		d := o.GetDomain()
		if isDefaultDomain(d) {
			d = ""
		}
		imports[d] = int(o.GetVersion())
	}
	return imports
}

// domainOpset returns the version of a node's domain that the model
// imports: the default-domain opset, or the imported version of another
// domain the executor implements. A node in a domain the model does not
// import, or in a version of it the executor does not know, is an error.
func (b *builder) domainOpset(domain string) (int, error) {
	if isDefaultDomain(domain) {
		return b.g.opset, nil
	}
	newest, known := domainVersions[domain]
	if !known {
		return 0, fmt.Errorf("is in domain %q; only the default ONNX domain (ai.onnx) is supported, besides %s",
			domain, strings.Join(slices.Sorted(maps.Keys(domainVersions)), ", "))
	}
	v, imported := b.imports[domain]
	switch {
	case !imported:
		return 0, fmt.Errorf("is in domain %q, which the model does not import (opset_import lists no such domain)", domain)
	case v < 1 || v > newest:
		return 0, fmt.Errorf("is in domain %q version %d, which is not supported (1 to %d)", domain, v, newest)
	}
	return v, nil
}

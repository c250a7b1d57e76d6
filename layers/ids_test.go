package layers

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/attnrun/attnrun/registry"
)

// TestLayerIDsLiveInLayers holds the house rule (issue 11): a built-in
// layer's ID string is spelled in non-test Go code of this package only
// (and in cmd/ and examples/, which show the layers to people), so that a
// layer's knowledge lives in its own files. Other packages learn about a
// layer through the registry and the lift-pattern API, never by comparing
// or writing its ID.
func TestLayerIDsLiveInLayers(t *testing.T) {
	ids := map[string]bool{}
	for _, id := range registry.IDs() {
		ids[id] = true
	}
	if !ids["attention.sdpa"] || !ids["nn.embedding"] {
		t.Fatalf("the built-in layers are not registered: %v", registry.IDs())
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{"layers": true, "cmd": true, "examples": true, "testdata": true}
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if path != root && (skip[rel] || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, hit := range idLiterals(src, ids) {
			found = append(found, rel+":"+hit)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("built-in layer IDs spelled outside package layers (move the knowledge into the layer's files):\n%s", strings.Join(found, "\n"))
	}
}

// idLiterals returns "line: literal" for every string literal in Go source
// src whose value is one of ids.
func idLiterals(src []byte, ids map[string]bool) []string {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, 0)
	var out []string
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok != token.STRING {
			continue
		}
		if v, err := strconv.Unquote(lit); err == nil && ids[v] {
			out = append(out, strconv.Itoa(fset.Position(pos).Line)+": "+lit)
		}
	}
}

// TestIDLiteralsFindsIDs checks the scanner the rule above relies on: it
// finds an ID in any quoting and not in comments or longer strings.
func TestIDLiteralsFindsIDs(t *testing.T) {
	src := []byte("package x\n// \"nn.embedding\" in a comment\nvar a = \"nn.embedding\"\nvar b = `nn.embedding`\nvar c = \"nn.embedding is a layer\"\n")
	got := idLiterals(src, map[string]bool{"nn.embedding": true})
	want := []string{`3: "nn.embedding"`, "4: `nn.embedding`"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("idLiterals = %q, want %q", got, want)
	}
}

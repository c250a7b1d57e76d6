package attnrun_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's "Use it from Go" shows the body of Example and what it
// prints; go test runs Example, and this test keeps the README's copy
// identical to it, so that the snippet a reader copies compiles and prints
// what the README says.
func TestReadmeShowsExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	section := sectionOf(t, string(readme), "## Use it from Go")
	blocks := fencedBlocks(section)
	require.Len(t, blocks, 3, "the section holds the go get line, the program and its output")

	code, output := exampleBody(t, "example_test.go", "Example")
	require.Equal(t, "go get github.com/attnrun/attnrun", blocks[0])
	require.Equal(t, code, blocks[1], "README's Go snippet differs from Example in example_test.go")
	require.Equal(t, output, blocks[2], "README's printed output differs from Example's // Output:")
}

// sectionOf returns the text from heading to the next heading of its level.
func sectionOf(t *testing.T, text, heading string) string {
	t.Helper()
	start := strings.Index(text, "\n"+heading+"\n")
	require.GreaterOrEqual(t, start, 0, "README has no %q", heading)
	rest := text[start+len(heading)+2:]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// fencedBlocks returns the contents of the ``` blocks of markdown text.
func fencedBlocks(text string) []string {
	var blocks []string
	var block []string
	inside := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "```") && !inside:
			inside, block = true, nil
		case strings.HasPrefix(line, "```"):
			inside = false
			blocks = append(blocks, strings.Join(block, "\n"))
		case inside:
			block = append(block, line)
		}
	}
	return blocks
}

// exampleBody returns an example function's statements, one tab of
// indentation removed, and the output its // Output: comment declares.
func exampleBody(t *testing.T, file, name string) (code, output string) {
	t.Helper()
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	require.NoError(t, err)
	var body *ast.BlockStmt
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == name {
			body = fn.Body
		}
	}
	require.NotNil(t, body, "%s has no func %s", file, name)
	text := string(src[fset.Position(body.Lbrace).Offset+1 : fset.Position(body.Rbrace).Offset])
	statements, comment, found := strings.Cut(text, "\t// Output:\n")
	require.True(t, found, "%s has no // Output: comment", name)
	var lines []string
	for _, line := range strings.Split(strings.Trim(statements, "\n"), "\n") {
		lines = append(lines, strings.TrimPrefix(line, "\t"))
	}
	var out []string
	for _, line := range strings.Split(strings.TrimRight(comment, "\n\t"), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "//")
		out = append(out, strings.TrimPrefix(line, " "))
	}
	return strings.Join(lines, "\n"), strings.Join(out, "\n")
}

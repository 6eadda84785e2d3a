package conformance

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// mapFile is the map's path, relative to the repository root.
const mapFile = "CONFORMANCE.md"

// statementIDs returns the id of every statement of the published list, in
// its order.
func statementIDs() []string {
	var ids []string
	for _, group := range []struct {
		prefix string
		n      int
	}{{"H", 22}, {"S", 13}, {"T", 6}, {"D", 4}, {"CK", 8}, {"SD", 8}} {
		for i := 1; i <= group.n; i++ {
			ids = append(ids, group.prefix+strconv.Itoa(i))
		}
	}
	return ids
}

// An entry is one "- `path: Name`" line of the map: a top-level test
// function of the file at path, or, when quoted, a string literal in it (a
// case name of the conformance suite).
type entry struct {
	line   int
	path   string // slash-separated, from the repository root
	name   string // the function name, or the unquoted case name
	quoted bool
}

func (e entry) String() string {
	name := e.name
	if e.quoted {
		name = strconv.Quote(name)
	}
	return fmt.Sprintf("%s:%d: %s: %s", mapFile, e.line, e.path, name)
}

// conformanceMap is the parsed map: the entries of each statement, and
// every entry of the file, statement or not.
type conformanceMap struct {
	statements map[string][]entry
	entries    []entry
}

var (
	statementHeading = regexp.MustCompile(`^###\s+(\S+)\s*$`)
	statementID      = regexp.MustCompile(`^(H|S|T|D|CK|SD)[1-9][0-9]*$`)
	entryLine        = regexp.MustCompile("^- `([^`:]+): ([^`]+)`")
	goIdentifier     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// parseMap reads the map's Markdown. A "### ID" heading starts a
// statement, a "## " heading ends it; "- `path: Name`" lines are entries,
// of the current statement if there is one.
func parseMap(src string) (*conformanceMap, error) {
	m := &conformanceMap{statements: map[string][]entry{}}
	var errs []error
	current := ""
	sc := bufio.NewScanner(strings.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "### "):
			h := statementHeading.FindStringSubmatch(line)
			if h == nil || !statementID.MatchString(h[1]) {
				errs = append(errs, fmt.Errorf("%s:%d: heading %q is not a statement id", mapFile, n, line))
				current = ""
				continue
			}
			current = h[1]
			if _, dup := m.statements[current]; dup {
				errs = append(errs, fmt.Errorf("%s:%d: statement %s appears twice", mapFile, n, current))
				continue
			}
			m.statements[current] = nil
		case strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "# "):
			current = ""
		case strings.HasPrefix(line, "- `"):
			g := entryLine.FindStringSubmatch(line)
			if g == nil {
				errs = append(errs, fmt.Errorf("%s:%d: entry %q is not of the form - `path: Name`", mapFile, n, line))
				continue
			}
			e := entry{line: n, path: strings.TrimSpace(g[1]), name: strings.TrimSpace(g[2])}
			if strings.HasPrefix(e.name, `"`) {
				name, err := strconv.Unquote(e.name)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s:%d: case name %s is not a Go string literal: %v", mapFile, n, e.name, err))
					continue
				}
				e.name, e.quoted = name, true
			} else if !goIdentifier.MatchString(e.name) {
				errs = append(errs, fmt.Errorf("%s:%d: %q is neither a function name nor a quoted case name", mapFile, n, e.name))
				continue
			}
			m.entries = append(m.entries, e)
			if current != "" {
				m.statements[current] = append(m.statements[current], e)
			}
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return m, errors.Join(errs...)
}

// checker resolves entries against the repository at root, parsing each Go
// file once.
type checker struct {
	root  string
	fset  *token.FileSet
	files map[string]*ast.File
	errs  map[string]error
}

func newChecker(root string) *checker {
	return &checker{root: root, fset: token.NewFileSet(), files: map[string]*ast.File{}, errs: map[string]error{}}
}

func (c *checker) parse(path string) (*ast.File, error) {
	if f, ok := c.files[path]; ok {
		return f, c.errs[path]
	}
	f, err := parser.ParseFile(c.fset, filepath.Join(c.root, filepath.FromSlash(path)), nil, parser.SkipObjectResolution)
	c.files[path], c.errs[path] = f, err
	return f, err
}

// check returns an error unless e names a test that exists: a top-level
// func Test… or Fuzz… in a _test.go file, or a string literal equal to the
// case name.
func (c *checker) check(e entry) error {
	if filepath.IsAbs(e.path) || strings.Contains(e.path, "..") || !strings.HasSuffix(e.path, ".go") {
		return fmt.Errorf("%v: the path must be a .go file relative to the repository root", e)
	}
	f, err := c.parse(e.path)
	if err != nil {
		return fmt.Errorf("%v: %w", e, err)
	}
	if e.quoted {
		found := false
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && s == e.name {
					found = true
				}
			}
			return !found
		})
		if !found {
			return fmt.Errorf("%v: no string literal %q in %s", e, e.name, e.path)
		}
		return nil
	}
	if !strings.HasSuffix(e.path, "_test.go") {
		return fmt.Errorf("%v: a test function must be in a _test.go file", e)
	}
	if !strings.HasPrefix(e.name, "Test") && !strings.HasPrefix(e.name, "Fuzz") {
		return fmt.Errorf("%v: %s is not a test (Test… or Fuzz…)", e, e.name)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == e.name {
			return nil
		}
	}
	return fmt.Errorf("%v: no func %s in %s", e, e.name, e.path)
}

// repoRoot finds the repository root: the nearest directory above the
// working directory whose go.mod declares the module github.com/idemgo/idem.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			first, _, _ := strings.Cut(string(mod), "\n")
			if strings.TrimSpace(first) == "module github.com/idemgo/idem" {
				return dir
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod of module github.com/idemgo/idem above the working directory")
		}
		dir = parent
	}
}

func readMap(t *testing.T, root string) *conformanceMap {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, mapFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseMap(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEveryStatementHasATest: each statement of the published list has a
// heading in the map with at least one test entry, and the map has no
// statement the list lacks.
func TestEveryStatementHasATest(t *testing.T) {
	m := readMap(t, repoRoot(t))
	known := map[string]bool{}
	for _, id := range statementIDs() {
		known[id] = true
		entries, ok := m.statements[id]
		switch {
		case !ok:
			t.Errorf("statement %s has no \"### %s\" section in %s", id, id, mapFile)
		case len(entries) == 0:
			t.Errorf("statement %s has no test entry in %s", id, mapFile)
		}
	}
	for id := range m.statements {
		if !known[id] {
			t.Errorf("%s maps statement %s, which the published list does not have", mapFile, id)
		}
	}
}

// TestEveryEntryNamesAnExistingTest: every entry of the map, in a
// statement's section or not, names a file that exists and parses, and a
// test function or case name in it.
func TestEveryEntryNamesAnExistingTest(t *testing.T) {
	root := repoRoot(t)
	m := readMap(t, root)
	if len(m.entries) == 0 {
		t.Fatalf("%s has no entries", mapFile)
	}
	c := newChecker(root)
	for _, e := range m.entries {
		if err := c.check(e); err != nil {
			t.Error(err)
		}
	}
}

// TestCheckerRejectsWrongEntries: the checks above catch a wrong function
// name, a wrong case name, a missing file, a function outside a test file
// and malformed lines.
func TestCheckerRejectsWrongEntries(t *testing.T) {
	root := repoRoot(t)
	c := newChecker(root)
	good := []entry{
		{path: "internal/conformance/map_test.go", name: "TestCheckerRejectsWrongEntries"},
		{path: "idemtest/cases.go", name: "S7/ConcurrentBeginsElectOne", quoted: true},
	}
	for _, e := range good {
		if err := c.check(e); err != nil {
			t.Errorf("a valid entry was rejected: %v", err)
		}
	}
	bad := []entry{
		{path: "internal/conformance/map_test.go", name: "TestNoSuchTest"},
		{path: "internal/conformance/map_test.go", name: "repoRoot"},
		{path: "idemtest/cases.go", name: "S7/NoSuchCase", quoted: true},
		{path: "idemtest/cases.go", name: "cases"},
		{path: "no/such/file_test.go", name: "TestX"},
		{path: "../outside_test.go", name: "TestX"},
		{path: "CONFORMANCE.md", name: "TestX"},
	}
	for _, e := range bad {
		if err := c.check(e); err == nil {
			t.Errorf("a wrong entry passed: %v", e)
		}
	}

	for name, src := range map[string]string{
		"unknown heading":   "### X1\n- `a_test.go: TestA`\n",
		"duplicate id":      "### H1\n- `a_test.go: TestA`\n### H1\n- `a_test.go: TestB`\n",
		"malformed entry":   "### H1\n- `a_test.go TestA`\n",
		"bad name":          "### H1\n- `a_test.go: Test A`\n",
		"bad quoted name":   "### H1\n- `a_test.go: \"S1/x`\n",
		"heading with tail": "### H1 extra\n",
	} {
		if _, err := parseMap(src); err == nil {
			t.Errorf("%s: parseMap accepted %q", name, src)
		}
	}
	m, err := parseMap("### H1\nText.\n\n- `a_test.go: TestA` — note.\n- `b.go: \"S1/x\"`\n## Other\n- `c_test.go: TestC`\n### H2\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.statements["H1"]; len(got) != 2 || got[0].name != "TestA" || !got[1].quoted || got[1].name != "S1/x" {
		t.Errorf("H1 entries = %+v", got)
	}
	if got, ok := m.statements["H2"]; !ok || len(got) != 0 {
		t.Errorf("H2 = %+v, %v; want present with no entries", got, ok)
	}
	if len(m.entries) != 3 {
		t.Errorf("%d entries, want 3 (the one after \"## Other\" included)", len(m.entries))
	}
}

package syntax

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// capRole is what a query capture means; see queries.go.
type capRole uint8

const (
	roleNone capRole = iota
	roleDef
	roleName
	roleDecl
	roleScope
	roleScopeName
	roleLocal
	roleWrap
	roleWrapped
	roleDoc
	roleRef
)

// declRole is how the C/C++ declarator resolver treats a node kind.
type declRole uint8

const (
	declOther     declRole = iota
	declField              // follow the "declarator" field
	declFirst              // follow the first named child
	declFunc               // function_declarator: a function, follow "declarator"
	declParen              // parenthesized_declarator: a pointer to what follows
	declQualified          // qualified_identifier: "scope" is the container, follow "name"
	declTemplate           // template_type / template_function: follow "name"
	declName               // a name
)

// tsLang is a compiled tsConfig. The Query is immutable after creation and
// shared by all goroutines (tree-sitter queries are thread-safe; cursors
// and parsers are not, and are pooled).
type tsLang struct {
	cfg      *tsConfig
	language *sitter.Language
	query    *sitter.Query
	roles    []capRole // by capture index
	kinds    []Kind    // by capture index, for roleDef
	decl     []declRole
	fDecl    uint16 // field ids
	fName    uint16
	fScope   uint16
	skipRefs map[string]bool
}

// tsEntry compiles one language on first use.
type tsEntry struct {
	cfg  *tsConfig
	once sync.Once
	lang *tsLang
	err  error
}

var (
	allocOnce sync.Once
	tsEntries = func() map[Lang]*tsEntry {
		m := make(map[Lang]*tsEntry, len(tsConfigs))
		for _, cfg := range tsConfigs {
			m[cfg.lang] = &tsEntry{cfg: cfg}
		}
		return m
	}()
)

// loadLang returns lang's compiled query, compiling it on first use. A
// query that does not compile is a bug in queries.go, reported on every
// call for that language.
func loadLang(lang Lang) (*tsLang, error) {
	allocOnce.Do(useDefaultAllocator)
	e := tsEntries[lang]
	if e == nil {
		return nil, fmt.Errorf("no tree-sitter grammar")
	}
	e.once.Do(func() { e.lang, e.err = compileLang(e.cfg) })
	return e.lang, e.err
}

func compileLang(cfg *tsConfig) (*tsLang, error) {
	language := sitter.NewLanguage(cfg.language())
	q, qerr := sitter.NewQuery(language, cfg.query)
	if qerr != nil {
		return nil, fmt.Errorf("%s query: %s", cfg.lang, qerr.Error())
	}
	l := &tsLang{cfg: cfg, language: language, query: q, skipRefs: map[string]bool{}}
	for _, s := range cfg.skipRefs {
		l.skipRefs[s] = true
	}
	names := q.CaptureNames()
	l.roles = make([]capRole, len(names))
	l.kinds = make([]Kind, len(names))
	for i, n := range names {
		switch {
		case strings.HasPrefix(n, "def."):
			l.roles[i], l.kinds[i] = roleDef, Kind(strings.TrimPrefix(n, "def."))
			if !slices.Contains(allKinds, l.kinds[i]) {
				q.Close()
				return nil, fmt.Errorf("%s query: unknown kind in @%s", cfg.lang, n)
			}
		case n == "name":
			l.roles[i] = roleName
		case n == "decl":
			l.roles[i] = roleDecl
		case n == "scope":
			l.roles[i] = roleScope
		case n == "scope.name":
			l.roles[i] = roleScopeName
		case n == "local":
			l.roles[i] = roleLocal
		case n == "wrap":
			l.roles[i] = roleWrap
		case n == "wrapped":
			l.roles[i] = roleWrapped
		case n == "doc":
			l.roles[i] = roleDoc
		case n == "ref":
			l.roles[i] = roleRef
		default:
			q.Close()
			return nil, fmt.Errorf("%s query: unknown capture @%s", cfg.lang, n)
		}
	}
	// Field and node-kind ids are looked up by iterating the language's
	// tables: the binding's by-name lookups leak their C strings.
	for id := uint16(1); uint32(id) <= language.FieldCount(); id++ {
		switch language.FieldNameForId(id) {
		case "declarator":
			l.fDecl = id
		case "name":
			l.fName = id
		case "scope":
			l.fScope = id
		}
	}
	l.decl = make([]declRole, language.NodeKindCount())
	for id := range l.decl {
		if !language.NodeKindIsNamed(uint16(id)) {
			continue
		}
		switch language.NodeKindForId(uint16(id)) {
		case "pointer_declarator", "array_declarator", "init_declarator":
			l.decl[id] = declField
		case "reference_declarator", "attributed_declarator":
			l.decl[id] = declFirst
		case "function_declarator":
			l.decl[id] = declFunc
		case "parenthesized_declarator":
			l.decl[id] = declParen
		case "qualified_identifier":
			l.decl[id] = declQualified
		case "template_type", "template_function":
			l.decl[id] = declTemplate
		case "identifier", "field_identifier", "type_identifier", "destructor_name",
			"operator_name", "namespace_identifier":
			l.decl[id] = declName
		}
	}
	return l, nil
}

// Parsers and query cursors are kept in bounded free lists rather than
// sync.Pools: a pooled object dropped by the garbage collector would leak
// its C memory.
var (
	parserFree = make(chan *sitter.Parser, 64)
	cursorFree = make(chan *sitter.QueryCursor, 64)
)

func getParser() *sitter.Parser {
	select {
	case p := <-parserFree:
		return p
	default:
		return sitter.NewParser()
	}
}

func putParser(p *sitter.Parser) {
	select {
	case parserFree <- p:
	default:
		p.Close()
	}
}

func getCursor() *sitter.QueryCursor {
	select {
	case c := <-cursorFree:
		return c
	default:
		return sitter.NewQueryCursor()
	}
}

func putCursor(c *sitter.QueryCursor) {
	select {
	case cursorFree <- c:
	default:
		c.Close()
	}
}

// span is a byte range [start, end).
type span struct{ start, end uint32 }

// tsDef is a definition found by the query.
type tsDef struct {
	node      span // the @def node
	name      span
	nameNode  sitter.Node
	hasName   bool
	decl      sitter.Node
	hasDecl   bool
	kind      Kind
	pattern   uint32
	container string
	qualifier string // C++ "Box" of "Box::run", overrides container
	dropped   bool
}

// tsScope is a stack entry of the container/locality sweep.
type tsScope struct {
	span
	local bool
	// container is the name symbols inside take as Container ("" if
	// this scope is not a container); method reports whether functions
	// inside become methods.
	container string
	method    bool
}

// parseCallBudget is how many progress callbacks (of 100 parse
// operations each) parsing n bytes may take: 50 times what real code
// needs, plus a constant for tiny files.
func parseCallBudget(n int) int { return 2000 + n }

// callBudget is parseCallBudget; tests lower it to cancel parses at every
// point, balancing included.
var callBudget = parseCallBudget

// parseTimeBudget is how long parsing n bytes may take: 4 µs a byte is
// five times the slowest real parse seen (C++ parsed as C), plus half a
// second for scheduling noise.
func parseTimeBudget(n int) time.Duration {
	return 500*time.Millisecond + time.Duration(n)*4*time.Microsecond
}

func analyzeTreeSitter(a *Analysis, lang Lang, src []byte, lines *lineIndex) error {
	l, err := loadLang(lang)
	if err != nil {
		return err
	}
	p := getParser()
	if err := p.SetLanguage(l.language); err != nil {
		putParser(p)
		return err
	}
	// Budget the parse: tree-sitter's error recovery explodes on some
	// inputs (a fuzzer found 2 KB of TSX that grows without bound). The
	// progress callback runs every 100 parse operations; real code needs
	// under 0.02 calls per byte, and parses at 1 MB/s or more.
	calls, maxCalls := 0, callBudget(len(src))
	deadline := time.Now().Add(parseTimeBudget(len(src)))
	tree := p.ParseWithOptions(func(i int, _ sitter.Point) []byte {
		if i < len(src) {
			return src[i:]
		}
		return nil
	}, nil, &sitter.ParseOptions{ProgressCallback: func(sitter.ParseState) bool {
		calls++
		return calls > maxCalls || (calls%16 == 0 && time.Now().After(deadline))
	}})
	if tree == nil {
		// Not back to the pool: tree-sitter's Reset leaves a parse cancelled
		// while balancing marked as such (v0.25), and the parser's next
		// parse then aborts the process (TestParserAfterCancelAnywhere).
		p.Close()
		return ErrParseBudget
	}
	putParser(p)
	defer tree.Close()
	x := &tsExtractor{l: l, src: src, lines: lines}
	x.run(tree.RootNode())
	a.Symbols = x.symbols()
	a.Refs = x.refs()
	return nil
}

// tsExtractor holds one file's query results.
type tsExtractor struct {
	l      *tsLang
	src    []byte
	lines  *lineIndex
	defs   []tsDef
	scopes []tsScope     // @scope and @local nodes
	wraps  map[span]span // wrapped node -> wrapper
	docs   []span
	refSp  []span
	names  []span // name nodes of kept symbols, sorted by start
}

func nodeSpan(n *sitter.Node) span {
	return span{uint32(n.StartByte()), uint32(n.EndByte())}
}

func (x *tsExtractor) run(root *sitter.Node) {
	qc := getCursor()
	defer putCursor(qc)
	matches := qc.Matches(x.l.query, root, x.src)
	for m := matches.Next(); m != nil; m = matches.Next() {
		var d tsDef
		isDef, isScope := false, false
		var scope tsScope
		var wrap, wrapped span
		for i := range m.Captures {
			c := &m.Captures[i]
			switch x.l.roles[c.Index] {
			case roleRef:
				x.refSp = append(x.refSp, nodeSpan(&c.Node))
			case roleDoc:
				x.docs = append(x.docs, nodeSpan(&c.Node))
			case roleLocal:
				x.scopes = append(x.scopes, tsScope{span: nodeSpan(&c.Node), local: true})
			case roleDef:
				isDef = true
				d.node = nodeSpan(&c.Node)
				d.kind = x.l.kinds[c.Index]
				d.pattern = uint32(m.PatternIndex)
			case roleName:
				d.nameNode, d.hasName = c.Node, true
			case roleDecl:
				d.decl, d.hasDecl = c.Node, true
			case roleScope:
				isScope = true
				scope.span = nodeSpan(&c.Node)
			case roleScopeName:
				sp := nodeSpan(&c.Node)
				scope.container = string(x.src[sp.start:sp.end])
			case roleWrap:
				wrap = nodeSpan(&c.Node)
			case roleWrapped:
				wrapped = nodeSpan(&c.Node)
			}
		}
		switch {
		case isDef && (d.hasName || d.hasDecl):
			x.defs = append(x.defs, d)
		case isScope && scope.container != "":
			scope.method = true
			x.scopes = append(x.scopes, scope)
		case wrap != (span{}) && wrapped != (span{}):
			if x.wraps == nil {
				x.wraps = make(map[span]span)
			}
			x.wraps[wrapped] = wrap
		}
	}
}

// resolveName sets d.name (and for C/C++ d.kind, d.qualifier) from its
// @name or @decl capture; false drops the definition.
func (x *tsExtractor) resolveName(d *tsDef) bool {
	if d.hasName {
		d.name = nodeSpan(&d.nameNode)
		return d.name.end > d.name.start
	}
	n := d.decl
	isFunc := false
	for depth := 0; depth < 64; depth++ {
		kid := n.KindId()
		role := declOther
		if int(kid) < len(x.l.decl) {
			role = x.l.decl[kid]
		}
		var next *sitter.Node
		switch role {
		case declName:
			d.name = nodeSpan(&n)
			switch {
			case isFunc && d.kind == KindVar:
				d.kind = KindFunction
			case isFunc && d.kind == KindField:
				d.kind = KindMethod
			}
			return d.name.end > d.name.start
		case declField:
			next = n.ChildByFieldId(x.l.fDecl)
		case declFirst:
			next = n.NamedChild(0)
		case declFunc:
			isFunc = true
			next = n.ChildByFieldId(x.l.fDecl)
		case declParen:
			isFunc = false // (*fp)(int) is a pointer, not a function
			next = n.NamedChild(0)
		case declQualified:
			if s := n.ChildByFieldId(x.l.fScope); s != nil {
				if sk := s.KindId(); int(sk) < len(x.l.decl) && x.l.decl[sk] == declTemplate {
					s = s.ChildByFieldId(x.l.fName)
				}
				if s != nil {
					sp := nodeSpan(s)
					d.qualifier = string(x.src[sp.start:sp.end])
				}
			}
			next = n.ChildByFieldId(x.l.fName)
		case declTemplate:
			next = n.ChildByFieldId(x.l.fName)
		}
		if next == nil {
			return false
		}
		n = *next
	}
	return false
}

// containerKind reports whether symbols inside a definition of kind k take
// its name as Container, and whether functions inside it are methods.
func containerKind(k Kind) (container, method bool) {
	switch k {
	case KindClass, KindStruct, KindInterface, KindTrait, KindEnum, KindEnumMember:
		return true, true
	case KindModule:
		return true, false
	}
	return false, false
}

func isFunctionKind(k Kind) bool {
	return k == KindFunction || k == KindMethod || k == KindConstructor
}

func (x *tsExtractor) symbols() []Symbol {
	defs := x.defs
	// Outer definitions first; for one node, the earliest pattern first.
	slices.SortFunc(defs, func(a, b tsDef) int {
		if c := cmp.Compare(a.node.start, b.node.start); c != 0 {
			return c
		}
		if c := cmp.Compare(b.node.end, a.node.end); c != 0 {
			return c
		}
		return cmp.Compare(a.pattern, b.pattern)
	})
	slices.SortFunc(x.docs, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	scopes := x.scopes
	slices.SortFunc(scopes, func(a, b tsScope) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		return cmp.Compare(b.end, a.end)
	})

	// Sweep definitions and scopes in order with a stack of the scopes
	// that enclose the current position.
	var stack []tsScope
	si := 0
	seen := make(map[uint32]bool, len(defs))
	for i := range defs {
		d := &defs[i]
		for si < len(scopes) && scopes[si].start <= d.node.start {
			stack = pushScope(stack, scopes[si])
			si++
		}
		stack = popEnded(stack, d.node.start)
		local, container, method := false, "", false
		foundContainer := false
		for j := len(stack) - 1; j >= 0; j-- {
			s := &stack[j]
			if s.span == d.node || s.start > d.node.start || s.end < d.node.end {
				continue // not enclosing d
			}
			if s.local {
				local = true
				break
			}
			if s.container != "" && !foundContainer {
				container, method, foundContainer = s.container, s.method, true
			}
		}
		if local || !x.resolveName(d) {
			d.dropped = true
			continue
		}
		if seen[d.name.start] {
			d.dropped = true
			continue
		}
		seen[d.name.start] = true
		if d.qualifier != "" {
			container, method = d.qualifier, true
		}
		d.container = container
		if method && d.kind == KindFunction {
			d.kind = KindMethod
		}
		if d.kind == KindMethod && method {
			// A constructor is a method named ctorName, or like its class.
			name := x.nameText(d.name)
			if (x.l.cfg.ctorName != "" && name == x.l.cfg.ctorName) || (x.l.cfg.ctorIsClassName && name == container) {
				d.kind = KindConstructor
			}
		}
		// This definition encloses what follows it.
		sc := tsScope{span: d.node, local: isFunctionKind(d.kind)}
		if c, m := containerKind(d.kind); c {
			sc.container, sc.method = x.nameText(d.name), m
		}
		if sc.local || sc.container != "" {
			stack = pushScope(stack, sc)
		}
	}

	syms := make([]Symbol, 0, len(defs))
	x.names = make([]span, 0, len(defs))
	for i := range defs {
		d := &defs[i]
		if d.dropped {
			continue
		}
		name := x.nameText(d.name)
		if name == "" {
			continue
		}
		kind := d.kind
		if x.l.cfg.upperConst && kind == KindVar && isUpperSnake(name) {
			kind = KindConst
		}
		start := x.expand(d.node)
		line := x.lines.lineOf(int(start))
		end := x.lines.lineOf(int(max(d.node.end, start+1)) - 1)
		nl := x.lines.lineOf(int(d.name.start))
		col := int(d.name.start) - int(x.lines.starts[nl-1]) + 1
		syms = append(syms, Symbol{
			Name: name, Kind: kind, Container: d.container,
			Line: line, EndLine: max(end, line), NameLine: nl, Column: col,
		})
		x.names = append(x.names, d.name)
	}
	slices.SortFunc(x.names, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	sortSymbols(syms)
	return syms
}

// nameText is a name node's text without Rust's raw-identifier "r#" or
// the quotes of a TS module name.
func (x *tsExtractor) nameText(sp span) string {
	b := x.src[sp.start:sp.end]
	if x.l.cfg.rawIdent && len(b) > 2 && b[0] == 'r' && b[1] == '#' {
		b = b[2:]
	}
	if len(b) >= 2 && (b[0] == '"' || b[0] == '\'' || b[0] == '`') && b[len(b)-1] == b[0] {
		b = b[1 : len(b)-1]
	}
	return string(b)
}

func pushScope(stack []tsScope, s tsScope) []tsScope {
	stack = popEnded(stack, s.start)
	return append(stack, s)
}

// popEnded pops the scopes that end at or before pos.
func popEnded(stack []tsScope, pos uint32) []tsScope {
	for len(stack) > 0 && stack[len(stack)-1].end <= pos {
		stack = stack[:len(stack)-1]
	}
	return stack
}

// expand returns where a definition's range starts once its wrappers
// (export, decorators, template<...>) and the comments and attributes on
// the lines just above it are included.
func (x *tsExtractor) expand(n span) uint32 {
	for k := 0; k < 8; k++ {
		w, ok := x.wraps[n]
		if !ok {
			break
		}
		n = w
	}
	start := n.start
	// Docs are sorted by start; take the ones that end just above.
	for {
		i, _ := slices.BinarySearchFunc(x.docs, start, func(d span, t uint32) int { return cmp.Compare(d.start, t) })
		if i == 0 {
			return start
		}
		d := x.docs[i-1]
		if d.end > start || !x.adjacent(d, start) {
			return start
		}
		start = d.start
	}
}

// adjacent reports whether doc d sits alone on the lines just above pos:
// only blanks before it on its first line, and between its end and pos
// only blanks and at most one line break.
func (x *tsExtractor) adjacent(d span, pos uint32) bool {
	newlines := 0
	for _, c := range x.src[d.end:pos] {
		switch {
		case c == '\n':
			newlines++
			if newlines > 1 {
				return false
			}
		case !isSpace(c):
			return false
		}
	}
	for i := int(d.start) - 1; i >= 0; i-- {
		c := x.src[i]
		if c == '\n' {
			return true
		}
		if !isSpace(c) {
			return false
		}
	}
	return true
}

func isUpperSnake(s string) bool {
	hasLetter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			hasLetter = true
		case c == '_' || (c >= '0' && c <= '9'):
		default:
			return false
		}
	}
	return hasLetter
}

// inName reports whether sp lies within the name of a kept symbol (the
// name itself, or "Box" in a destructor's "~Box").
func (x *tsExtractor) inName(sp span) bool {
	i, _ := slices.BinarySearchFunc(x.names, sp.start+1, func(n span, t uint32) int { return cmp.Compare(n.start, t) })
	return i > 0 && x.names[i-1].end >= sp.end
}

// refs aggregates the @ref captures that are not within the name of a
// kept symbol.
func (x *tsExtractor) refs() []Ref {
	rc := getRefCollector()
	defer rc.release()
	for _, sp := range x.refSp {
		if sp.end <= sp.start {
			continue
		}
		if x.inName(sp) {
			continue
		}
		name := x.src[sp.start:sp.end]
		if x.l.cfg.rawIdent && len(name) > 2 && name[0] == 'r' && name[1] == '#' {
			name = name[2:]
		}
		if len(x.l.skipRefs) > 0 && x.l.skipRefs[string(name)] {
			continue
		}
		rc.addBytes(name, x.lines.lineOf(int(sp.start)))
	}
	return rc.refs()
}

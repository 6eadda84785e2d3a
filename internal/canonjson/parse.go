package canonjson

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// parser holds the state of one canonicalisation. It walks the input once,
// left to right, writing canonical output as it goes. Objects whose members
// come in the wrong order are noted when they close (object.go), and their
// members are moved into place in one final pass (order.go). Nesting is
// tracked on explicit stacks, so nothing recurses.
type parser struct {
	src []byte // input
	pos int    // next unread byte of src
	dst []byte // output being built
	lim Limits // limits with defaults applied

	stack   []frame  // open arrays and objects, innermost last
	members []member // members of all open objects, innermost object last
	names   []byte   // unescaped names with escapes, of all open objects' members
	orders  []order  // objects whose members must be reordered
	spans   []span   // members of those objects, in sorted order
	visits  []visit  // stack for reorder
	scratch []byte   // copy of the output for reorder
}

// frame is an open array or object.
type frame struct {
	object     bool // object rather than array
	memberBase int  // objects: index of the first member in parser.members
	nameBase   int  // objects: length of parser.names when the object opened
}

// Pooled parsers keep buffers up to these sizes, so that one huge input
// does not pin memory for the life of the process.
const (
	maxPooledBytes = 256 << 10 // for names and scratch
	maxPooledElems = 4 << 10   // for the other slices
)

// release drops references to caller memory and oversized buffers before the
// parser goes back to the pool.
func (p *parser) release() {
	p.src, p.dst = nil, nil
	p.stack = keep(p.stack[:0], maxPooledElems)
	p.members = keep(p.members[:0], maxPooledElems)
	p.names = keep(p.names[:0], maxPooledBytes)
	p.orders = keep(p.orders[:0], maxPooledElems)
	p.spans = keep(p.spans[:0], maxPooledElems)
	p.visits = keep(p.visits[:0], maxPooledElems)
	p.scratch = keep(p.scratch[:0], maxPooledBytes)
}

// keep returns s, or nil if its capacity exceeds limit elements.
func keep[T any](s []T, limit int) []T {
	if cap(s) > limit {
		return nil
	}
	return s
}

// canonicalize appends the canonical form of src to dst.
func (p *parser) canonicalize(dst, src []byte, lim Limits) ([]byte, error) {
	if len(src) > lim.MaxBytes {
		return nil, &Error{Offset: lim.MaxBytes, Err: ErrTooLarge,
			detail: "(limit " + strconv.Itoa(lim.MaxBytes) + " bytes)"}
	}
	if !utf8.Valid(src) {
		return nil, &Error{Offset: firstInvalidUTF8(src), Err: ErrInvalidUTF8}
	}
	p.src, p.pos, p.dst, p.lim = src, 0, dst, lim
	if err := p.run(); err != nil {
		return nil, err
	}
	p.reorder(len(dst))
	return p.dst, nil
}

// firstInvalidUTF8 returns the offset of the first byte of src that does not
// start a valid UTF-8 sequence, or len(src) if there is none.
func firstInvalidUTF8(src []byte) int {
	for i := 0; i < len(src); {
		if src[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(src)
}

// run parses the whole input. It alternates between two states: expecting a
// value, and having just finished one.
func (p *parser) run() error {
	want := true // expecting a value rather than having just finished one
	for {
		var err error
		switch {
		case want:
			want, err = p.value()
		case len(p.stack) == 0:
			return p.end()
		default:
			want, err = p.next()
		}
		if err != nil {
			return err
		}
	}
}

// value parses the start of a value. For scalars and empty containers it
// writes the whole value and returns false. For a non-empty array it writes
// the opening bracket and returns true, as the first element follows; for a
// non-empty object it also handles the first member name and colon.
func (p *parser) value() (bool, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return false, p.eof()
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		if err := p.push(true); err != nil {
			return false, err
		}
		p.pos++
		p.dst = append(p.dst, '{')
		p.skipSpace()
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			p.pos++
			p.dst = append(p.dst, '}')
			p.stack = p.stack[:len(p.stack)-1]
			return false, nil
		}
		return true, p.memberName()
	case c == '[':
		if err := p.push(false); err != nil {
			return false, err
		}
		p.pos++
		p.dst = append(p.dst, '[')
		p.skipSpace()
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			p.pos++
			p.dst = append(p.dst, ']')
			p.stack = p.stack[:len(p.stack)-1]
			return false, nil
		}
		return true, nil
	case c == '"':
		return false, p.stringValue()
	case c == 't':
		return false, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return false, p.literal("null")
	case c == '-' || isDigit(c):
		return false, p.number()
	default:
		return false, p.unexpected(p.pos, "looking for a value")
	}
}

// next handles what follows a value inside an array or object: a comma,
// after which it returns true (in objects, after the next member name and
// colon), or the closing bracket, after which it returns false.
func (p *parser) next() (bool, error) {
	top := p.stack[len(p.stack)-1]
	if top.object {
		p.members[len(p.members)-1].end = len(p.dst)
	}
	p.skipSpace()
	if p.pos >= len(p.src) {
		return false, p.eof()
	}
	switch c := p.src[p.pos]; {
	case c == ',':
		p.pos++
		p.dst = append(p.dst, ',')
		if top.object {
			return true, p.memberName()
		}
		return true, nil
	case c == ']' && !top.object:
		p.pos++
		p.dst = append(p.dst, ']')
	case c == '}' && top.object:
		p.pos++
		if err := p.sortMembers(top); err != nil {
			return false, err
		}
		p.dst = append(p.dst, '}')
		p.members = p.members[:top.memberBase]
		p.names = p.names[:top.nameBase]
	default:
		if top.object {
			return false, p.unexpected(p.pos, "after object member value")
		}
		return false, p.unexpected(p.pos, "after array element")
	}
	p.stack = p.stack[:len(p.stack)-1]
	return false, nil
}

// end checks that only whitespace follows the top-level value.
func (p *parser) end() error {
	p.skipSpace()
	if p.pos < len(p.src) {
		return p.unexpected(p.pos, "after top-level value")
	}
	return nil
}

// push opens an array or object, enforcing the depth limit before the
// parser descends.
func (p *parser) push(object bool) error {
	if len(p.stack) >= p.lim.MaxDepth {
		return &Error{Offset: p.pos, Err: ErrTooDeep,
			detail: "(limit " + strconv.Itoa(p.lim.MaxDepth) + ")"}
	}
	p.stack = append(p.stack, frame{
		object:     object,
		memberBase: len(p.members),
		nameBase:   len(p.names),
	})
	return nil
}

// memberName parses an object member name and the colon after it, starts a
// new member and writes its canonical name and colon.
func (p *parser) memberName() error {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return p.eof()
	}
	if p.src[p.pos] != '"' {
		return p.unexpected(p.pos, "looking for an object member name")
	}
	m := member{offset: p.pos, start: len(p.dst)}
	if end := plainEnd(p.src, p.pos+1); end < len(p.src) && p.src[end] == '"' {
		// Without escapes the name is its own unescaped form, and is
		// canonical as written.
		m.nameStart, m.nameEnd = p.pos+1, end
		p.pos = end + 1
		p.dst = append(p.dst, p.src[m.offset:p.pos]...)
	} else {
		m.unescaped = true
		m.nameStart = len(p.names)
		var err error
		if p.names, err = p.unquote(p.names); err != nil {
			return err
		}
		m.nameEnd = len(p.names)
		p.dst = appendString(p.dst, p.names[m.nameStart:])
	}
	p.members = append(p.members, m)
	p.skipSpace()
	if p.pos >= len(p.src) {
		return p.eof()
	}
	if p.src[p.pos] != ':' {
		return p.unexpected(p.pos, "after object member name")
	}
	p.pos++
	p.dst = append(p.dst, ':')
	return nil
}

// literal parses one of the literals true, false and null.
func (p *parser) literal(lit string) error {
	rest := p.src[p.pos:]
	for i := 0; i < len(lit); i++ {
		if i >= len(rest) {
			return p.eof()
		}
		if rest[i] != lit[i] {
			return p.unexpected(p.pos+i, "in literal "+lit)
		}
	}
	p.pos += len(lit)
	p.dst = append(p.dst, lit...)
	return nil
}

// skipSpace skips the four JSON whitespace characters.
func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// syntax returns an ErrSyntax error at off.
func (p *parser) syntax(off int, detail string) error {
	return &Error{Offset: off, Err: ErrSyntax, detail: detail}
}

// unexpected reports the unexpected byte at off.
func (p *parser) unexpected(off int, where string) error {
	if off == 0 && bytes.HasPrefix(p.src, byteOrderMark) {
		return p.syntax(off, "(leading byte order mark)")
	}
	r, _ := utf8.DecodeRune(p.src[off:]) // the input is valid UTF-8
	return p.syntax(off, "(unexpected "+strconv.QuoteRune(r)+" "+where+")")
}

// eof reports input that ends too early.
func (p *parser) eof() error {
	return p.syntax(len(p.src), "(unexpected end of input)")
}

// byteOrderMark is the UTF-8 encoding of U+FEFF, which RFC 8259 forbids
// generators to add and RFC 8785 input must not carry.
var byteOrderMark = []byte("\xef\xbb\xbf")

// isDigit reports whether c is an ASCII decimal digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

package canonjson

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// parser holds the state of one canonicalisation. It walks the input once,
// left to right, producing canonical output as it goes. Objects whose
// members come in the wrong order are noted when they close (object.go),
// and their members are moved into place in one final pass (order.go).
// Nesting is tracked on explicit stacks, so nothing recurses.
//
// Most of a JSON text is already canonical: names and strings without
// escapes, integers, literals and punctuation are copied unchanged. So the
// parser does not copy token by token. The output is dst followed by the
// pending input src[run:i], where i is the parser's position; the pending
// input is appended to dst in one piece only when something that is not
// copied verbatim comes up (whitespace, escapes, numbers to rewrite) and
// at the end. Compact canonical input is thus copied with a single append.
type parser struct {
	src []byte // input
	dst []byte // output, not counting the pending input
	run int    // start of the pending input, copied verbatim so far
	lim Limits // limits with defaults applied
	// exact says numbers RFC 8785 would round are written exactly (see
	// AppendExact).
	exact bool

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
	unsorted   bool // objects: a member name is not above the one before it
	moved      bool // members of an object inside, or of this one, are reordered
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
	p.stack = p.stack[:0]
	p.members = p.members[:0]
	p.names = p.names[:0]
	p.orders = p.orders[:0]
	p.spans = p.spans[:0]
	p.visits = p.visits[:0]
	p.scratch = p.scratch[:0]
	if cap(p.names) > maxPooledBytes || cap(p.scratch) > maxPooledBytes ||
		max(cap(p.stack), cap(p.members), cap(p.orders), cap(p.spans), cap(p.visits)) > maxPooledElems {
		p.stack = keep(p.stack, maxPooledElems)
		p.members = keep(p.members, maxPooledElems)
		p.names = keep(p.names, maxPooledBytes)
		p.orders = keep(p.orders, maxPooledElems)
		p.spans = keep(p.spans, maxPooledElems)
		p.visits = keep(p.visits, maxPooledElems)
		p.scratch = keep(p.scratch, maxPooledBytes)
	}
}

// keep returns s, or nil if its capacity exceeds limit elements.
func keep[T any](s []T, limit int) []T {
	if cap(s) > limit {
		return nil
	}
	return s
}

// canonicalize appends the canonical form of src to dst.
//
// UTF-8 is validated as the parser goes (see validPlainEnd): outside
// strings the grammar admits only ASCII, so checking the text of strings
// covers the whole input once it parses. To report invalid UTF-8 before
// any other fault, as the package promises, a failed parse checks the
// whole input before returning its own error.
func (p *parser) canonicalize(dst, src []byte, lim Limits) ([]byte, error) {
	if len(src) > lim.MaxBytes {
		return nil, &Error{Offset: lim.MaxBytes, Err: ErrTooLarge,
			detail: "(limit " + strconv.Itoa(lim.MaxBytes) + " bytes)"}
	}
	p.src, p.dst, p.run, p.lim = src, dst, 0, lim
	end, err := p.parse()
	if err != nil {
		if !utf8.Valid(src) {
			return nil, &Error{Offset: firstInvalidUTF8(src), Err: ErrInvalidUTF8}
		}
		return nil, err
	}
	p.finish(end)
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

// parse parses the whole input and returns the end of the top-level value.
// The canonical form, members not yet reordered, is then p.dst followed by
// the pending input src[run:end]. It alternates between two states:
// expecting a value, and having just finished one, where commas and closing
// brackets are read until the next value is due.
func (p *parser) parse() (int, error) {
	src := p.src
	i := 0
	for {
		// A value is due at i.
		i = p.space(i)
		if i >= len(src) {
			return i, p.eof()
		}
		var err error
		switch c := src[i]; c {
		case '"':
			// Strings without escapes are canonical as written; the scan
			// is inlined, being the most frequent.
			end := asciiEnd(src, i+1)
			if end < len(src) && src[end] >= utf8.RuneSelf {
				end = validUTF8PlainEnd(src, end)
			}
			if end < len(src) && src[end] == '"' {
				i = end + 1
			} else {
				i, err = p.escapedString(i)
			}
		case '{', '[':
			var more bool
			if i, more, err = p.open(i); more && err == nil {
				continue // the first element or member value is due
			}
		case 't':
			i, err = p.literal(i, "true")
		case 'f':
			i, err = p.literal(i, "false")
		case 'n':
			i, err = p.literal(i, "null")
		default:
			if c == '-' || isDigit(c) {
				if j := shortIntegerEnd(src, i); j > i {
					i = j // canonical as written
				} else {
					i, err = p.number(i)
				}
			} else {
				err = p.unexpected(i, "looking for a value")
			}
		}
		if err != nil {
			return i, err
		}

		// A value ended at i.
		for {
			if len(p.stack) == 0 {
				return i, p.end(i)
			}
			i = p.space(i)
			if i >= len(src) {
				return i, p.eof()
			}
			top := &p.stack[len(p.stack)-1]
			c := src[i]
			if c == ',' {
				if i++; top.object {
					if i, err = p.memberName(i); err != nil {
						return i, err
					}
				}
				break // the next element or member value is due
			}
			switch {
			case c == ']' && !top.object:
			case c == '}' && top.object:
				if err := p.closeObject(top, i); err != nil {
					return i, err
				}
			case top.object:
				return i, p.unexpected(i, "after object member value")
			default:
				return i, p.unexpected(i, "after array element")
			}
			i++
			moved := top.moved
			p.stack = p.stack[:len(p.stack)-1]
			if moved && len(p.stack) > 0 {
				p.stack[len(p.stack)-1].moved = true
			}
		}
	}
}

// open handles the opening bracket at src[i]. It returns the position after
// the container if it is empty, and more = false. Otherwise it returns with
// more = true the position where the first element is due, or, for an
// object, the first member's value after its name and colon.
func (p *parser) open(i int) (next int, more bool, err error) {
	src := p.src
	object := src[i] == '{'
	if len(p.stack) >= p.lim.MaxDepth {
		return i, false, &Error{Offset: i, Err: ErrTooDeep,
			detail: "(limit " + strconv.Itoa(p.lim.MaxDepth) + ")"}
	}
	closing := byte(']')
	if object {
		closing = '}'
	}
	i = p.space(i + 1)
	if i < len(src) && src[i] == closing {
		return i + 1, false, nil
	}
	p.stack = append(p.stack, frame{
		object:     object,
		memberBase: len(p.members),
		nameBase:   len(p.names),
	})
	if object {
		i, err = p.memberName(i)
	}
	return i, true, err
}

// end checks that only whitespace follows the top-level value, which ends
// at i.
func (p *parser) end(i int) error {
	if i = skipSpace(p.src, i); i < len(p.src) {
		return p.unexpected(i, "after top-level value")
	}
	return nil
}

// flush appends the pending input src[run:i] to the output and starts the
// next run of verbatim input at next; src[i:next] is left out.
func (p *parser) flush(i, next int) {
	p.dst = append(p.dst, p.src[p.run:i]...)
	p.run = next
}

// outLen returns the length the output has once the input before i is in.
func (p *parser) outLen(i int) int { return len(p.dst) + i - p.run }

// space skips whitespace at i, leaving it out of the output, and returns
// the position of the next token.
func (p *parser) space(i int) int {
	if i < len(p.src) && p.src[i] > ' ' {
		return i // the common case: no whitespace
	}
	j := skipSpace(p.src, i)
	if j > i {
		p.flush(i, j)
	}
	return j
}

// literal parses one of the literals true, false and null at i and returns
// the position after it. Literals are copied verbatim.
func (p *parser) literal(i int, lit string) (int, error) {
	rest := p.src[i:]
	if len(rest) < len(lit) || string(rest[:len(lit)]) != lit {
		for k := 0; k < len(lit); k++ {
			if k >= len(rest) {
				return i, p.eof()
			}
			if rest[k] != lit[k] {
				return i, p.unexpected(i+k, "in literal "+lit)
			}
		}
	}
	return i + len(lit), nil
}

// skipSpace returns the index of the first byte at or after i that is not
// one of the four JSON whitespace characters, or len(src).
func skipSpace(src []byte, i int) int {
	for i < len(src) && isSpace(src[i]) {
		i++
	}
	return i
}

// isSpace reports whether c is JSON whitespace: space, tab, LF or CR.
func isSpace(c byte) bool {
	const mask = 1<<' ' | 1<<'\t' | 1<<'\n' | 1<<'\r'
	return c <= ' ' && mask>>c&1 != 0
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
	// Invalid UTF-8 here is reported instead of this error, so the
	// replacement character never shows.
	r, _ := utf8.DecodeRune(p.src[off:])
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

package canonjson

import (
	"bytes"
	"cmp"
	"slices"
	"unicode/utf8"
)

// member is one member of an open object. Its canonical text
// `"name":value` starts in the output at start; it ends where the next
// member's comma is, or the object's closing brace. Its unescaped name is
// parser.names[nameStart:nameEnd] if the name had escapes, and
// parser.src[nameStart:nameEnd] otherwise. Members hold offsets rather than
// slices so that growing the buffers is harmless and pooled parsers keep no
// pointers into caller memory.
type member struct {
	offset             int  // input offset of the name's opening quote
	nameStart, nameEnd int  // unescaped name
	unescaped          bool // the name is in parser.names, not parser.src
	start, end         int  // canonical text in the output; end set by sortMembers
}

// name returns the unescaped name of m.
func (p *parser) name(m *member) []byte {
	if m.unescaped {
		return p.names[m.nameStart:m.nameEnd]
	}
	return p.src[m.nameStart:m.nameEnd]
}

// memberName parses an object member name at i, after optional whitespace,
// and the colon after it. It records a new member of the innermost object,
// produces its canonical name and colon, and returns the position after
// the colon. The object is marked unsorted as soon as a name is not above
// the one before it, so that objects in canonical order cost no more.
func (p *parser) memberName(i int) (int, error) {
	src := p.src
	i = p.space(i)
	if i >= len(src) {
		return i, p.eof()
	}
	if src[i] != '"' {
		return i, p.unexpected(i, "looking for an object member name")
	}
	// The member is appended only once complete, field by field: copying
	// a whole member built on the stack costs more than the rest of this
	// method, as the CPU cannot forward the small stores to the wide loads
	// of the copy.
	offset, start := i, p.outLen(i)
	var name []byte
	unescaped := false
	// The scan of parse's strings, inlined here too: as a function it
	// would be too large to inline, and a call per name costs 10-20 %.
	end := asciiEnd(src, i+1)
	if end < len(src) && src[end] >= utf8.RuneSelf {
		end = validUTF8PlainEnd(src, end)
	}
	if end < len(src) && src[end] == '"' {
		// Without escapes the name is its own unescaped form, and is
		// canonical as written: it stays in the pending input.
		name = src[i+1 : end]
		i = end + 1
	} else {
		unescaped = true
		mark := len(p.names)
		names, next, err := p.unquote(p.names, i)
		if err != nil {
			return i, err
		}
		p.names = names
		name = names[mark:]
		p.flush(i, next)
		p.dst = appendString(p.dst, name)
		i = next
	}
	top := &p.stack[len(p.stack)-1]
	if n := len(p.members); !top.unsorted && n > top.memberBase &&
		!namesAscending(p.name(&p.members[n-1]), name) {
		top.unsorted = true
	}
	nameStart := offset + 1
	if unescaped {
		nameStart = len(p.names) - len(name)
	}
	p.members = append(p.members, member{})
	m := &p.members[len(p.members)-1]
	m.offset, m.start = offset, start
	m.nameStart, m.nameEnd = nameStart, nameStart+len(name)
	m.unescaped = unescaped
	i = p.space(i)
	if i >= len(src) {
		return i, p.eof()
	}
	if src[i] != ':' {
		return i, p.unexpected(i, "after object member name")
	}
	return i + 1, nil
}

// closeObject handles the closing brace at src[i] of the innermost object,
// whose frame is obj: it sorts the members if need be and forgets them.
func (p *parser) closeObject(obj *frame, i int) error {
	if obj.unsorted {
		if err := p.sortMembers(obj, i); err != nil {
			return err
		}
	}
	p.members = p.members[:obj.memberBase]
	p.names = p.names[:obj.nameBase]
	return nil
}

// sortMembers puts the members of the object obj, which is closing at
// src[i], into RFC 8785 order, rejects duplicate names and marks obj moved.
//
// If no object inside was moved, the members are moved into place at once,
// straight from the input if the object's text is all still pending
// input, or else through parser.scratch. Otherwise their text stays where
// it is in the output, in input order, and the sorted order is recorded
// for parser.finish, which moves every byte at most once however deeply
// such objects nest. So no byte is moved more than twice: once by the
// innermost object moved at once around it, once by finish.
func (p *parser) sortMembers(obj *frame, i int) error {
	ms := p.members[obj.memberBase:]
	end := p.outLen(i)
	// Members' text is separated by single commas.
	for k := 1; k < len(ms); k++ {
		ms[k-1].end = ms[k].start - 1
	}
	ms[len(ms)-1].end = end
	pending := p.run <= ms[0].offset // then nothing inside was moved either
	ord := order{start: ms[0].start, end: end, first: len(p.spans), count: len(ms)}

	p.sortByName(ms)
	// Equal names are next to each other in input order; the duplicate
	// reported is the earliest second occurrence of a name.
	dup := -1
	for k := 1; k < len(ms); k++ {
		if bytes.Equal(p.name(&ms[k-1]), p.name(&ms[k])) && (dup < 0 || ms[k].offset < ms[dup].offset) {
			dup = k
		}
	}
	if dup >= 0 {
		return &Error{Offset: ms[dup].offset, Err: ErrDuplicateName, detail: quoteInput(p.name(&ms[dup]))}
	}

	switch {
	case pending:
		// Output offsets map to pending input by a fixed shift.
		shift := len(p.dst) - p.run
		p.dst = append(p.dst, p.src[p.run:ord.start-shift]...)
		p.writeSorted(ms, p.src, shift)
		p.run = i
	case !obj.moved:
		p.flush(i, i)
		p.scratch = append(p.scratch[:0], p.dst[ord.start:]...)
		p.dst = p.dst[:ord.start]
		p.writeSorted(ms, p.scratch, ord.start)
	default:
		for k := range ms {
			p.spans = append(p.spans, span{ms[k].start, ms[k].end})
		}
		p.orders = append(p.orders, ord)
	}
	obj.moved = true
	return nil
}

// writeSorted appends the text of the members ms to the output, in their
// order and separated by commas; text[k] is the output byte at offset
// base+k.
func (p *parser) writeSorted(ms []member, text []byte, base int) {
	for k := range ms {
		if k > 0 {
			p.dst = append(p.dst, ',')
		}
		p.dst = append(p.dst, text[ms[k].start-base:ms[k].end-base]...)
	}
}

// insertionSortMax is the number of members up to which sortByName uses an
// insertion sort, which beats a general sort on the small objects of
// typical documents.
const insertionSortMax = 12

// sortByName sorts members, given in input order, by name; members of equal
// names keep their input order.
func (p *parser) sortByName(ms []member) {
	if len(ms) <= insertionSortMax {
		for k := 1; k < len(ms); k++ {
			m := ms[k]
			j := k
			for ; j > 0 && namesAscending(p.name(&m), p.name(&ms[j-1])); j-- {
				ms[j] = ms[j-1]
			}
			ms[j] = m
		}
		return
	}
	slices.SortFunc(ms, func(a, b member) int {
		if c := compareNames(p.name(&a), p.name(&b)); c != 0 {
			return c
		}
		return cmp.Compare(a.offset, b.offset)
	})
}

// namesAscending reports whether compareNames(a, b) < 0. It settles the
// common case of names that differ in their first byte without a call.
func namesAscending(a, b []byte) bool {
	if len(a) > 0 && len(b) > 0 && a[0] != b[0] && a[0] < 0xEE && b[0] < 0xEE {
		return a[0] < b[0]
	}
	return compareNames(a, b) < 0
}

// compareNames orders two valid UTF-8 strings by their UTF-16 code units,
// as RFC 8785 section 3.2.3 requires.
//
// UTF-8 byte order is code point order, and UTF-16 code unit order agrees
// with it except in one place: characters U+E000 to U+FFFF sort after the
// surrogates that encode U+10000 and above. In UTF-8 the former have lead
// bytes 0xEE and 0xEF and the latter 0xF0 to 0xF4, so only a first
// difference between those two groups of lead bytes needs to be flipped.
func compareNames(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		// Continuation bytes are below 0xC0, so both are lead bytes here.
		if x >= 0xEE && y >= 0xEE && (x >= 0xF0) != (y >= 0xF0) {
			if x >= 0xF0 {
				return -1
			}
			return 1
		}
		return cmp.Compare(x, y)
	}
	return cmp.Compare(len(a), len(b))
}

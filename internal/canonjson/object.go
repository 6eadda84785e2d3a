package canonjson

import (
	"cmp"
	"slices"
)

// member is one member of an open object. Its canonical text
// `"name":value` has already been written to parser.dst at [start, end).
// Its unescaped name is parser.names[nameStart:nameEnd] if the name had
// escapes, and parser.src[nameStart:nameEnd] otherwise. Members hold offsets
// rather than slices so that growing the buffers is harmless and pooled
// parsers keep no pointers into caller memory.
type member struct {
	offset             int  // input offset of the name's opening quote
	nameStart, nameEnd int  // unescaped name
	unescaped          bool // the name is in parser.names, not parser.src
	start, end         int  // canonical text in parser.dst
}

// sortMembers puts the members of the object that is closing into RFC 8785
// order and rejects duplicate names. The members' text stays where it is in
// parser.dst, in input order; if that order is wrong, the sorted order is
// recorded for parser.reorder, which moves every byte at most once however
// deeply such objects nest.
func (p *parser) sortMembers(obj frame) error {
	ms := p.members[obj.memberBase:]
	if len(ms) < 2 {
		return nil
	}
	src, names := p.src, p.names
	name := func(m member) []byte {
		if m.unescaped {
			return names[m.nameStart:m.nameEnd]
		}
		return src[m.nameStart:m.nameEnd]
	}

	// Fast path: input that is already canonical needs no work.
	sorted := true
	for i := 1; i < len(ms); i++ {
		if compareNames(name(ms[i-1]), name(ms[i])) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return nil
	}

	// Ties are broken by input offset, so that equal names end up next to
	// each other in input order and the duplicate reported is the earliest
	// second occurrence of a name.
	ord := order{start: ms[0].start, end: len(p.dst), first: len(p.spans), count: len(ms)}
	slices.SortFunc(ms, func(a, b member) int {
		if c := compareNames(name(a), name(b)); c != 0 {
			return c
		}
		return cmp.Compare(a.offset, b.offset)
	})
	dup := -1
	for i := 1; i < len(ms); i++ {
		if compareNames(name(ms[i-1]), name(ms[i])) == 0 && (dup < 0 || ms[i].offset < ms[dup].offset) {
			dup = i
		}
	}
	if dup >= 0 {
		return &Error{Offset: ms[dup].offset, Err: ErrDuplicateName, detail: quoteInput(name(ms[dup]))}
	}
	for _, m := range ms {
		p.spans = append(p.spans, span{m.start, m.end})
	}
	p.orders = append(p.orders, ord)
	return nil
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

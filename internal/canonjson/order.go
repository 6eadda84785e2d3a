package canonjson

import (
	"cmp"
	"slices"
)

// order records an object whose members were written in the wrong order.
// Its members occupy parser.dst[start:end], separated by commas, and
// parser.spans[first:first+count] lists them in canonical order.
type order struct {
	start, end   int
	first, count int
}

// span is the text `"name":value` of one member in parser.dst.
type span struct{ start, end int }

// visit is a reordered object being written out by reorder: the index of
// its order, the next member to write, and the rest of the enclosing text
// to resume with once all members are written.
type visit struct {
	order, next int
	resume, hi  int
}

// finish completes the output once the top-level value, which ends in
// the input at end, has been parsed: it appends the pending input and
// moves the members of every object in p.orders into their canonical
// order.
//
// The text from the first recorded object on is read once and written
// once. Usually, for compact input, it is all still pending, and is read
// straight from the input; otherwise it is copied aside first.
func (p *parser) finish(end int) {
	orders := p.orders
	if len(orders) > 1 {
		slices.SortFunc(orders, func(a, b order) int { return cmp.Compare(a.start, b.start) })
	}
	if len(orders) > 0 && orders[0].start > len(p.dst) {
		// The first recorded object's opening brace is pending too.
		base := len(p.dst)
		p.reorder(p.src[p.run:end], base)
		return
	}
	p.flush(end, end)
	if len(orders) == 0 {
		return
	}
	// The text before the first recorded object stays where it is. That
	// object's members start after its opening brace, which is the first
	// byte rewritten.
	base := orders[0].start - 1
	p.scratch = append(p.scratch[:0], p.dst[base:]...)
	p.dst = p.dst[:base]
	p.reorder(p.scratch, base)
}

// reorder appends text, which is the output from offset base on, to p.dst,
// which is base bytes long, with the members of every object in p.orders
// in their canonical order. It descends into the recorded objects with an
// explicit stack: the recorded objects, sorted by start, nest properly,
// each one lying inside a single member of any recorded object around it.
// The text must start before the first recorded object's first member.
func (p *parser) reorder(text []byte, base int) {
	orders := p.orders
	out := p.dst
	stack := p.visits[:0]

	pos, hi := 0, len(text) // the text still to be written at this level
	for {
		// Write text[pos:hi], stopping at the first recorded object that
		// starts after pos. (Not at pos: a member starts where the first
		// member of its own object does when it is written first.)
		k := firstOrderFrom(orders, base+pos+1)
		if k < len(orders) && orders[k].start-base < hi {
			o := orders[k]
			out = append(out, text[pos:o.start-base]...)
			stack = append(stack, visit{order: k, resume: o.end - base, hi: hi})
		} else {
			out = append(out, text[pos:hi]...)
			if len(stack) == 0 {
				break
			}
		}
		// Go on with the next member of the innermost recorded object, or
		// with the text after it once all its members are written.
		v := &stack[len(stack)-1]
		if o := orders[v.order]; v.next < o.count {
			if v.next > 0 {
				out = append(out, ',')
			}
			s := p.spans[o.first+v.next]
			v.next++
			pos, hi = s.start-base, s.end-base
		} else {
			pos, hi = v.resume, v.hi
			stack = stack[:len(stack)-1]
		}
	}
	p.dst = out
	p.visits = stack[:0]
}

// firstOrderFrom returns the index of the first order in orders, sorted by
// start, that starts at or after at, or len(orders) if there is none.
func firstOrderFrom(orders []order, at int) int {
	lo, hi := 0, len(orders)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if orders[mid].start < at {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

package durable

import (
	"fmt"
	"slices"
	"strings"
)

// Status is where an instance is in its life. It is stored as text in the
// status column.
type Status string

// The statuses. An instance starts runnable; a picker claims it (executing);
// its step's outcome makes it runnable again, parks it (awaiting_signal
// after Await, awaiting_children after Children, until its children have
// all ended) or ends it (done, failed, cancelled); Client.Cancel cancels a
// live one. Done, failed and cancelled are terminal: no step runs again and
// no signal reaches the instance.
const (
	StatusRunnable         Status = "runnable"
	StatusExecuting        Status = "executing"
	StatusAwaitingSignal   Status = "awaiting_signal"
	StatusAwaitingChildren Status = "awaiting_children"
	StatusDone             Status = "done"
	StatusFailed           Status = "failed"
	StatusCancelled        Status = "cancelled"
)

// allStatuses lists every status in life order. The migration's CHECK
// constraints list the same.
var allStatuses = []Status{
	StatusRunnable, StatusExecuting, StatusAwaitingSignal, StatusAwaitingChildren,
	StatusDone, StatusFailed, StatusCancelled,
}

// LiveStatuses returns the non-terminal statuses, in life order: runnable,
// executing, awaiting_signal, awaiting_children. They are the default
// correlation scope, and every non-empty scope must contain all of them.
func LiveStatuses() []Status {
	return []Status{StatusRunnable, StatusExecuting, StatusAwaitingSignal, StatusAwaitingChildren}
}

// Terminal reports whether s is done, failed or cancelled.
func (s Status) Terminal() bool {
	return s == StatusDone || s == StatusFailed || s == StatusCancelled
}

// valid reports whether s is one of the statuses.
func (s Status) valid() bool { return slices.Contains(allStatuses, s) }

// ScopeError reports a correlation scope that is not empty and lacks one or
// more live statuses, or that names an unknown status. Such a scope is
// rejected because an instance leaving the scope and coming back into it (a
// step moving from executing to runnable, say) would meet another instance
// that took the key in between, and could then neither commit its outcome
// nor be addressed.
type ScopeError struct {
	Scope   []Status // the scope as given
	Missing []Status // live statuses it lacks
	Unknown []Status // names that are no status
}

func (e *ScopeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "durable: correlation scope %v", e.Scope)
	if len(e.Unknown) > 0 {
		fmt.Fprintf(&b, " names unknown statuses %v", e.Unknown)
		if len(e.Missing) > 0 {
			b.WriteString(" and")
		}
	}
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, " lacks the live statuses %v: a scope must be empty or contain every live status %v", e.Missing, LiveStatuses())
	}
	return b.String()
}

// normalizeScope checks a correlation scope and returns it as the stored
// text array: nil means the default (the live statuses); an empty non-nil
// slice means no uniqueness. Duplicates are dropped and the order is the
// life order, so equal scopes are stored equally.
func normalizeScope(scope []Status) ([]string, error) {
	if scope == nil {
		return statusStrings(LiveStatuses()), nil
	}
	if len(scope) == 0 {
		return []string{}, nil
	}
	e := &ScopeError{Scope: slices.Clone(scope)}
	for _, s := range scope {
		if !s.valid() {
			e.Unknown = append(e.Unknown, s)
		}
	}
	for _, s := range LiveStatuses() {
		if !slices.Contains(scope, s) {
			e.Missing = append(e.Missing, s)
		}
	}
	if len(e.Unknown) > 0 || len(e.Missing) > 0 {
		return nil, e
	}
	var out []string
	for _, s := range allStatuses {
		if slices.Contains(scope, s) {
			out = append(out, string(s))
		}
	}
	return out, nil
}

func statusStrings(ss []Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

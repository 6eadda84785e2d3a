package idem

import (
	"errors"
	"fmt"
)

// StoredError is a permanent failure as a store keeps it and replays it: a
// class tag the caller can branch on, the message, and the text of the
// immediate cause (the cause chain is not kept: it is not durable state).
// A *StoredError is an error, so a replayed failure can be returned as is.
type StoredError struct {
	// Class tags the kind of failure, e.g. "payment.declined". ErrorOf
	// takes it from an error's IdemClass method or its Go type.
	Class   string `json:"class"`
	Message string `json:"message"`
	// Cause is the text of the error's immediate cause; empty if none.
	Cause string `json:"cause,omitempty"`
}

// IdemClass implements Classifier: an error that wraps a replayed
// StoredError is recorded with its class. A nil *StoredError has none.
func (e *StoredError) IdemClass() string {
	if e == nil {
		return ""
	}
	return e.Class
}

// Error returns the message, or the class when there is none. A nil
// *StoredError (returned as a non-nil error by mistake) says "<nil>".
func (e *StoredError) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.Message == "" {
		return e.Class
	}
	return e.Message
}

// Classifier is implemented by errors that name their own class tag.
type Classifier interface {
	IdemClass() string
}

// ErrorOf converts err into the StoredError FailPermanent records: Class
// from the first error in the chain implementing Classifier with a class
// that is not empty (a wrapped replayed *StoredError is one; else the Go
// type of err, like "*fs.PathError"), Message from err.Error() and Cause
// from errors.Unwrap(err).Error(). A replayed *StoredError itself, or one
// marked with Permanent, is recorded as it is, with Permanent's class
// when that is not empty. An error marked with Permanent more than once is
// recorded as if marked once, with the outermost class that is not empty.
//
// A class taken from the Go type ("*errors.errorString", "*fmt.wrapError")
// is for reading, not for branching on: it changes when the code that
// makes the error does. Code that decides by class gives its errors one,
// with Permanent(class, err) or a Classifier.
func ErrorOf(err error) StoredError {
	if err == nil {
		return StoredError{Class: "nil"}
	}
	// An error marked more than once (a layer marking what another marked
	// already) is recorded as the error marked once, under the outermost
	// class given: a mark is no error of its own, to name as the class or
	// cause.
	var class string
	for {
		p, ok := err.(*permanentError)
		if !ok {
			break
		}
		if class == "" {
			class = p.class
		}
		err = p.err
	}
	if se, ok := err.(*StoredError); ok && se != nil {
		// A replayed failure, marked Permanent again or not: recorded as
		// it was, under the class given if any.
		e := *se
		if class != "" {
			e.Class = class
		}
		return e
	}
	e := StoredError{Class: fmt.Sprintf("%T", err), Message: err.Error()}
	if class == "" {
		class = classOf(err)
	}
	if class != "" {
		e.Class = class
	}
	if cause := errors.Unwrap(err); cause != nil {
		e.Cause = cause.Error()
	}
	return e
}

// classOf returns the class of the first error in err's chain that
// implements Classifier with a class that is not empty, or "".
func classOf(err error) string {
	for err != nil {
		if c, ok := err.(Classifier); ok && c.IdemClass() != "" {
			return c.IdemClass()
		}
		if a, ok := err.(interface{ As(any) bool }); ok { // as errors.As does
			var c Classifier
			if a.As(&c) && c != nil && c.IdemClass() != "" {
				return c.IdemClass()
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if c := classOf(e); c != "" {
					return c
				}
			}
			return ""
		default:
			return ""
		}
	}
	return ""
}

// Permanent marks err as a permanent failure with the class tag class: Do
// records it with FailPermanent (so retries replay it) instead of releasing
// the key. errors.Is and errors.As see through to err. Permanent(class, nil)
// is nil. With an empty class, the class is found as ErrorOf finds it (a
// Classifier in err's chain, else err's Go type).
//
// Do returns the marked error itself the first time and a *StoredError to
// every retry (err's own type is not kept): ErrorOf(err).Class and
// IsPermanent(err) read both the same way.
func Permanent(class string, err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{class: class, err: err}
}

type permanentError struct {
	class string
	err   error
}

func (e *permanentError) Error() string     { return e.err.Error() }
func (e *permanentError) Unwrap() error     { return e.err }
func (e *permanentError) IdemClass() string { return e.class }

// IsPermanent reports whether err was marked with Permanent or is a replayed
// *StoredError.
func IsPermanent(err error) bool {
	var p *permanentError
	var s *StoredError
	return errors.As(err, &p) || errors.As(err, &s)
}

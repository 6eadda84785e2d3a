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

func (e *StoredError) Error() string {
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
// from the first error in the chain implementing Classifier (else the Go
// type of err, like "*fs.PathError"), Message from err.Error() and Cause
// from errors.Unwrap(err).Error().
func ErrorOf(err error) StoredError {
	if err == nil {
		return StoredError{Class: "nil"}
	}
	var se *StoredError
	if errors.As(err, &se) && se == err {
		return *se
	}
	var class string
	if p, ok := err.(*permanentError); ok {
		class, err = p.class, p.err
	}
	e := StoredError{Class: fmt.Sprintf("%T", err), Message: err.Error()}
	var c Classifier
	switch {
	case class != "":
		e.Class = class
	case errors.As(err, &c):
		e.Class = c.IdemClass()
	}
	if cause := errors.Unwrap(err); cause != nil {
		e.Cause = cause.Error()
	}
	return e
}

// Permanent marks err as a permanent failure with the class tag class: Do
// records it with FailPermanent (so retries replay it) instead of releasing
// the key. errors.Is and errors.As see through to err.
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

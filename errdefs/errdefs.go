// Package errdefs gives Airlock's errors a class (invalid input, not found,
// conflict, unavailable, forbidden) that the API, the CLI's exit codes and the
// UI map to what a user sees, so no layer has to match on message text.
//
// A classed error's message is meant for a user: it says what happened and,
// where there is one, what to do next.
package errdefs

import (
	"errors"
	"fmt"
)

// Class is the kind of failure, independent of where it happened.
type Class string

// The classes. Internal is the zero-information default for errors that
// carry no class.
const (
	Internal    Class = "internal"
	Invalid     Class = "invalid"
	NotFound    Class = "not_found"
	Conflict    Class = "conflict"
	Unavailable Class = "unavailable"
	Forbidden   Class = "forbidden"
)

type classed struct {
	class Class
	err   error
}

func (e *classed) Error() string { return e.err.Error() }
func (e *classed) Unwrap() error { return e.err }

// New returns an error of class c with a formatted message; %w verbs wrap as
// in fmt.Errorf.
func New(c Class, format string, args ...any) error {
	return &classed{class: c, err: fmt.Errorf(format, args...)}
}

// Wrap gives err the class c, keeping its message. A nil err stays nil.
func Wrap(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &classed{class: c, err: err}
}

// Invalidf, NotFoundf, Conflictf, Unavailablef and Forbiddenf are New with
// the class in the name.
func Invalidf(format string, args ...any) error     { return New(Invalid, format, args...) }
func NotFoundf(format string, args ...any) error    { return New(NotFound, format, args...) }
func Conflictf(format string, args ...any) error    { return New(Conflict, format, args...) }
func Unavailablef(format string, args ...any) error { return New(Unavailable, format, args...) }
func Forbiddenf(format string, args ...any) error   { return New(Forbidden, format, args...) }

// ClassOf returns the class of the outermost classed error in err's chain, or
// Internal when there is none.
func ClassOf(err error) Class {
	var c *classed
	if errors.As(err, &c) {
		return c.class
	}
	return Internal
}

// IsNotFound, IsInvalid, IsConflict and IsUnavailable test ClassOf.
func IsNotFound(err error) bool    { return ClassOf(err) == NotFound }
func IsInvalid(err error) bool     { return ClassOf(err) == Invalid }
func IsConflict(err error) bool    { return ClassOf(err) == Conflict }
func IsUnavailable(err error) bool { return ClassOf(err) == Unavailable }

// ExitCode is the CLI exit status for an error of class c. 0 is success and
// 1 is reserved for the command's own failures; see docs/API.md.
func ExitCode(c Class) int {
	switch c {
	case Invalid:
		return 64 // EX_USAGE-like: fix the input
	case NotFound:
		return 66
	case Unavailable:
		return 69 // EX_UNAVAILABLE
	case Forbidden:
		return 77 // EX_NOPERM
	case Conflict:
		return 75 // EX_TEMPFAIL: retry after resolving
	default:
		return 70 // EX_SOFTWARE
	}
}

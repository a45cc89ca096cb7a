// Package gitrules answers what git's ignore and attribute rules say about a
// path, reading the rules as data: git itself is never run, so nothing in a
// project (a planted core.fsmonitor, a filter, a hook) can run code on the host.
//
// The semantics are git's (2.39), checked against git by the tests:
//
//   - .gitignore at every level, .git/info/exclude and the owner's
//     core.excludesFile, in git's precedence: the last matching line of a
//     file wins; a deeper .gitignore beats a shallower one; every .gitignore
//     beats info/exclude, which beats core.excludesFile. A path under an
//     excluded directory is excluded whatever the deeper rules say (git
//     cannot re-include below an excluded directory, and does not read the
//     .gitignore files there).
//   - Patterns: blank lines and # comments, \# and \! escapes, trailing
//     spaces unless escaped, ! negation, anchoring by a leading or middle
//     slash, a trailing slash for directories only, *, ?, [...] classes
//     (negated with ! or ^, ranges, [:alpha:] and the other POSIX names) and
//     the ** forms. Matching is case-sensitive.
//   - .gitattributes at every level, .git/info/attributes and the owner's
//     core.attributesFile, with macros (the built-in binary included);
//     macros are defined only at the top level, as in git.
//
// Matching runs as a set of states over the pattern, never by backtracking,
// so its time is at most the pattern's length times the path's: a line of
// stars cannot stall a review. Bad input (huge files, binary junk, NUL
// bytes) is data like any other: it never panics.
//
// Where the rules come from is the caller's choice (Options.Read): for a
// review, the project's own copy, never the session's, so an agent cannot
// hide a file by ignoring it. OwnerGlobals reads the project owner's global
// files.
package gitrules

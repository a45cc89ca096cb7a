// Package names shows a file name as it is, never as it displays. A
// session names its files, so a name is hostile: a newline forges a line in
// a summary, an escape sequence drives the terminal it reaches, a
// right-to-left override hides a real extension, a zero-width space makes
// a second README.md. Quote leaves a readable name alone (accented, CJK,
// emoji names included, unlike git's octal quoting) and otherwise writes a
// double-quoted form with exactly the deceptive characters escaped; Check
// says which of them a name holds; Collisions finds names that differ from
// another only by case, Unicode normalisation, invisible characters or
// confusable look-alikes.
//
// frontend/src/lib/names.ts keeps the same rules; both are tested against
// testdata/quote.json so they cannot drift.
package names

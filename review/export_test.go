package review

import "context"

// AcceptStepping is Accept of everything reviewed in l, calling step
// after each of the accept's steps that change the disk (see acceptEach):
// the crash test's kill points.
func AcceptStepping(l Layers, journalPath string, step func(string)) error {
	reviewed := func(batch func([]FileDiff) error) error {
		return ReviewEach(context.Background(), l, Options{}, batch)
	}
	return acceptEach(l, Selection{}, journalPath, reviewed, func(Outcome) error { return nil }, step)
}

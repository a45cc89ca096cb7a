// Package timeline keeps each session's timeline: a checkpoint of its
// workspace's upper layer (package checkpoint, on disk under
// STATE/checkpoints/ID) at the end of every agent turn, of every command
// that changed the workspace, and periodically while it changes; the diff
// of a turn (or between two turns) computed from the stored checkpoints
// and the project, never from the live session; undo, which puts a
// checkpoint back through the session's merged view while the session
// lives; and pruning by count and size.
//
// Each checkpoint's record is the checkpoint package's (written last,
// atomically: a checkpoint that is listed is complete); what the timeline
// adds (its kind, the turn or command it ended, the checkpoint its
// changes are counted against, files and lines changed) is a small file
// beside it, timeline/N.json. A checkpoint without one (recorded by
// another part of the engine, e.g. for hibernation) is listed with its
// label's first word as its kind.
//
// The session core is reached only through the Sessions interface.
package timeline

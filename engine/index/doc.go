// Package index is what the engine knows of a session's workspace without
// walking it: whether anything in it changed since a moment (Watch: a
// fanotify mark on the workspace's own tmpfs, read only when asked), and
// the summary of its changes kept on disk from the last walk (Summary),
// read back while nothing changed. A `diff --stat` or a session listing
// of an unchanged session then costs a read of one file, not a walk of
// its upper layer and a stat of every file in it. A tree watch
// (StartTree) does the same for a directory tree on a file system others
// write too: a container's own layer, marked directory by directory.
//
// What the kernel does not report, the index does not know: writes made
// through a shared writable memory mapping of a workspace file. The engine
// therefore trusts a summary only while no process of the session holds
// such a mapping (WritableMappings), and never for what an accept takes,
// which always reads the files themselves and checks their digests.
// Imports nothing of the engine.
package index

// Package soak is Airlock's fault-injection soak: a seeded schedule of
// real work (create, exec, checkpoints, undo, accept, discard, snapshot,
// fork, hibernate, wake, rm) over several sessions and images, driven
// through the real CLI against an engine of the soak's own, with faults
// injected between the steps (the engine killed with SIGKILL, a
// reboot-like loss of containers and mounts, a CLI killed in the middle
// of a streamed accept or diff, several clients on one session at once)
// and the invariants of issue 26 checked after each fault and at the
// end. The seed fixes the schedule (the operations, faults and their
// targets, not their timing); a violation saves the operation log that
// led to it.
package soak

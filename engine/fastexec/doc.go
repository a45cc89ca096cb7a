// Package fastexec runs a session's commands through a small init of its
// own instead of `docker exec`: the init (package main in ./init, a static
// binary bind-mounted read-only into the container at InitPath) is the
// container's main process; it serves requests on a unix socket in a
// directory of the session that is bind-mounted at SocketDir. A request
// carries the command's argv, extra environment and working directory, and
// the caller's stdin, stdout and stderr as descriptors (SCM_RIGHTS), so the
// command reads and writes the caller's pipes directly. The init forks and
// executes it in the container (its namespaces, cgroup, capabilities,
// seccomp profile and no-new-privileges, as the container's user), and
// answers with its exit status; the caller may send signals meanwhile.
// One difference from `docker exec -u USER`: the user and its groups are
// the init's, resolved by Docker when the container started, not again
// at each command (a group the session adds itself to later is not seen).
//
// The session can reach the socket from inside its container. That gives
// it nothing it does not have: what the init runs it could run itself, in
// the same container as the same user. So the host side treats the peer as
// hostile: it opens the socket without following a link the session put
// there, reads bounded frames only, never accepts descriptors, and sends
// nothing but the command's own pipe ends.
//
// The package imports only the standard library and x/sys, so the init
// stays small; it never imports the engine.
package fastexec

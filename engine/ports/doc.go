// Package ports forwards a session's TCP ports to the host (preview
// ports): a listener on the host per forwarded port, each connection
// dialed inside the session's network namespace to the port on the
// session's own loopback, so a dev server bound to localhost is reached,
// and nothing about what the session may reach changes (its egress
// policy and firewall are not touched; the session can start nothing
// toward the host).
//
// Without auth a forward is plain TCP (HTTP, WebSocket, anything) and
// listens only on loopback. With bearer auth it is an HTTP front that
// checks the token (an Authorization: Bearer header, or the cookie that
// visiting the URL with ?token= sets), with basic auth one that checks
// the user name and password, in constant time, before proxying the
// request, WebSocket upgrades included, without the credentials; only
// such a forward may listen beyond loopback.
//
// Listening lists the TCP ports the session listens on that are not
// forwarded, from its network namespace's socket tables in procfs,
// without waking it.
//
// A new connection wakes a paused session, and traffic toward the
// session counts as its use. The session core is reached only through
// Sessions; forwards are kept in a file so that an engine started again
// listens again. Imports nothing of the engine.
package ports

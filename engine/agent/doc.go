// Package agent runs coding agents' turns in sessions: it checks what
// would otherwise fail slowly (the agent, the prompt, the key, the CLI in
// the image, the model endpoint), binds the endpoint into the session's
// egress policy so that the key is added in transit, runs the agent's
// command line from package harness as a command in the session, turns
// its output into events (stored, and streamed to the caller), checks a
// structured answer against a schema, and records how the turn ended.
//
// It reaches the session core only through the small interfaces declared
// here (Sessions, Egress, Secrets, Store), so its tests run without
// Docker; it never imports package engine.
package agent
